"""The classifier's contract (docs/design.md "Verdict"): the failure classes, the OOM phases and :class:`Verdict`
(what the supervisor does with each class is the failure policy's: ``dapo_ops/core/policy.py``). Every other module of :mod:`dapo_ops.core.classify` builds on these names; nothing here decides.

STDLIB ONLY (shipped into the training container with the supervisor, ``dapo_ops/agent/supervisor/``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from dapo_ops.core.policy import Kind

CLASSES: tuple[str, ...] = (
    "oom-device",
    "oom-kv-cache",
    "oom-host",
    "oom-ray",
    "config-error",
    "data-error",
    "network",
    "hccl-timeout",
    "container-missing",
    "auth-error",
    "crash-other",
    "diverged",
    "data-ran-out",
    "success",
)
"""The failure classes (exact names, docs/design.md). ``hang`` (no progress: the hang cap or a stall sized to the run)
and ``error-storm`` (the same exception repeating with no step: ``dapo_ops/core/classify/storm.py``) are added by
the supervisor from what it watches, never from a log's text alone."""

PHASES: tuple[str, ...] = (
    "model-load",
    "checkpoint-load",
    "checkpoint-save",
    "rollout-init",
    "weight-sync",
    "generation",
    "log-prob",
    "update",
    "unknown",
)
"""OOM phases (``Verdict.detail["phase"]``; the memory ladder is per phase: dapo_ops/core/memladder.py)."""

IMPOSSIBLE_ALLOC_GIB = 1024.0
"""Largest single allocation (GiB) that can be a real device OOM. No accelerator has 1 TiB of memory;
"Tried to allocate 8388608.00 GiB" is a corrupted size (overflowed / negative shape), and no memory rung can fix it."""


class ClassifierTableError(ValueError):
    """A classifier data table is inconsistent (a signature naming an unknown class, an empty needle, a phase
    table that does not list :data:`PHASES`). Raised when the package is imported, so a bad edit fails every
    test and every import instead of misclassifying at run time (an explicit check: ``python -O`` keeps it)."""


@dataclass
class Verdict:
    """What happened and what to do (docs/design.md "Verdict").

    Attributes:
        cls: one of :data:`CLASSES` (or ``"hang"``, set by the supervisor).
        action_kind: the :class:`dapo_ops.core.policy.Kind` (the policy's, for ``cls`` and ``detail``); given as its
            string (a verdict read back from run.json / :meth:`to_json`) it is made the Kind (``ValueError`` for a
            string that is no kind).
        action: one line: what the supervisor does / what to do.
        hint: one paragraph for the human naming the key / env var to change and to what.
        evidence: normalised evidence lines (ANSI codes and Ray prefixes stripped), at most 6.
        detail: extracted facts; keys used (all optional): ``step`` (int, last ``step:N``
            seen), ``total`` (int, planned steps), ``phase`` (one of :data:`PHASES`; always set for
            oom-device, ``unknown`` when nothing names it; set for oom-kv-cache / oom-host / oom-ray where
            known), ``role`` (``critic`` / ``ref``, oom-device), ``side`` (``trainer`` / ``rollout``: whose code the
            OOM frames name, oom-device; picks a one-step-off weight sync's ladder), ``kv_direction`` (``lower``/``raise``/``cleanup``,
            oom-kv-cache), ``node`` (IP of the failing Ray node, network / hccl-timeout / oom-ray), ``address``
            (remote endpoint: GCS, proxy, hub), ``key`` (failing Hydra key, config-error /
            data-error), ``fatal`` (bool, auth-error / network), ``init`` (bool,
            hccl-timeout at communicator init), ``cause`` (short tag: ``thread-limit``,
            ``sigkill``, ``impossible-allocation``, ``disk-full``, ``segfault``,
            ``hccp-busy``, ``shm``, ``device-unavailable``, ``kernel-fault``, ``data-missing``,
            ``model-path``, ``ray-cpus``, ``host-alloc``, ...), ``code`` (the device error code read, see
            dapo_ops/core/classify/device_codes.py), ``path`` (missing data file), ``alloc_gib`` / ``total_gib``
            (float, GiB), ``exit_code`` (int),
            ``ckpt_step`` (int, newest ``global_step_N`` seen: may be partial),
            numbers from the message: ``available``/``desired`` (devices), ``world_size``/``tp``,
            ``value``/``need`` (token budget), ``length``/``limit`` (data),
            ``inconclusive`` (True when the text holds no evidence at all: the
            supervisor's no-progress timer decides ``hang``), ``teardown_error`` (True:
            success, but an error followed the last step), ``epochs`` (int, ``trainer.total_epochs`` read from the
            log, data-ran-out).
    """

    cls: str
    action_kind: Kind
    action: str
    hint: str
    evidence: list[str] = field(default_factory=list)
    detail: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.action_kind = Kind(self.action_kind)

    def to_json(self) -> dict[str, Any]:
        """Return a JSON-serialisable dict (keys as the attribute names; ``action_kind`` as its string)."""
        return dict(asdict(self), action_kind=self.action_kind.value)
