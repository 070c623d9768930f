"""The failure policy: what dapo-ops does after each failure class, as ONE table (stdlib only).

:data:`POLICY` maps a class (and one fact of its ``Verdict.detail``) to a :class:`Rule`: the action kind
(:class:`Kind`, which carries its own behaviour, as SkyPilot's ``JobStatus`` does in ``sky/skylet/job_lib.py``),
the one-line action a person reads (``Verdict.action``) and the reason the supervisor logs with its decision.
Everything that states or acts on the policy reads this table:

- the classifier's verdicts (``Verdict.action_kind`` / ``Verdict.action``: ``dapo_ops/core/classify/decide.py``
  ``mk``, rendered by ``dapo_ops/core/classify/hints.py``);
- the supervisor's own verdicts (``hang``, ``error-storm``, disk full, a lost Ray node:
  ``dapo_ops/agent/supervisor/escalate.py``, ``dapo_ops/core/topology.py``);
- the supervisor's decision (:func:`dapo_ops.core.ladder.decide`: the rule's kind takes its step, :meth:`Kind.dispatch`);
- docs/troubleshooting.md ("Failure policy", rendered by :func:`policy_md` via ``dapo_ops/core/classify/docs.py``).

Action texts are :class:`string.Template` strings; ``$name`` is a fragment of
``dapo_ops.core.classify.hints.FIELDS`` computed from the detail (checked at import there).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from typing import Any, Callable, Protocol, TypeVar

SET = object()
"""Condition value: the detail value is truthy."""
ABSENT = object()
"""Condition value: the detail key is missing."""

#: a private SwanLab server, named by what the user sets (README: ``--swanlab-host`` / ``[swanlab] host`` /
#: ``SWANLAB_HOST``); swanlab itself reads SWANLAB_API_HOST, which dapo-ops derives from it
#: (:meth:`dapo_ops.control.swanlab_settings.SwanlabSettings.public_env`). Every text naming the server says this.
SWANLAB_HOST_WORDS = "SWANLAB_HOST (--swanlab-host or [swanlab] host; dapo-ops hands it to swanlab as SWANLAB_API_HOST)"
#: the SwanLab mode that logs without the server and uploads later: offline (swanlab prints "Run `swanlab sync
#: <dir>` to sync this run" for it, core/logformat.py SWANLAB_SYNC; docs.swanlab.cn "Upload Offline Experiment
#: Data"); local mode is the local dashboard (``swanlab watch``, needs swanboard), nothing to sync. Every text that
#: offers running the tracker without its server says this.
SWANLAB_OFFLINE_WORDS = (
    "--swanlab-mode offline (SWANLAB_MODE=offline) and upload it later with `swanlab sync` (offline is the mode "
    "that syncs; local is a dashboard on the host)"
)

NO_RUNG_PHASES: tuple[str, ...] = ("model-load", "checkpoint-load", "checkpoint-save")
"""Device-OOM phases no memory rung shrinks (``dapo_ops/core/memladder.py`` says why per phase): stop with the fix."""


T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class Steps(Protocol[T_co]):
    """One step per :class:`Kind`, each a method of the kind's name (``Kind.ESCALATE_MEMORY`` ->
    ``escalate_memory``): what :meth:`Kind.dispatch` calls. ``dapo_ops/core/ladder.py`` ``decide`` implements it
    (each method works out the rungs / counters of its step and returns a ``Decision``); mypy checks that an
    implementation has every method."""

    def escalate_memory(self) -> T_co: ...

    def adjust_rollout_memory(self) -> T_co: ...

    def rollback_offload(self) -> T_co: ...

    def retry_once(self) -> T_co: ...

    def stop(self) -> T_co: ...

    def keep_running(self) -> T_co: ...

    def done(self) -> T_co: ...


class Kind(str, Enum):
    """What the supervisor does with a verdict (``Verdict.action_kind``, docs/design.md "Action kinds").

    Each kind carries its behaviour: :meth:`dispatch` (which step of a :class:`Steps` it takes: the supervisor's
    decision, :func:`dapo_ops.core.ladder.decide`), :attr:`retries` (the supervisor may start another attempt),
    :attr:`first_decisions` (the decisions :func:`dapo_ops.core.ladder.decide` can give the first time a verdict of
    this kind ends an attempt) and :attr:`doc` (one line for docs/troubleshooting.md). A member compares and hashes
    equal to its string (``Kind.STOP == "stop"``: run.json's verdicts hold the string).
    """

    ESCALATE_MEMORY = "escalate-memory"
    ADJUST_ROLLOUT_MEMORY = "adjust-rollout-memory"
    ROLLBACK_OFFLOAD = "rollback-offload"
    RETRY_ONCE = "retry-once"
    STOP = "stop"
    KEEP_RUNNING = "keep-running"
    DONE = "done"

    def dispatch(self, steps: Steps[T]) -> T:
        """Take this kind's step of ``steps`` (the method of the kind's name) and return what it returns."""
        table: dict[Kind, Callable[[], T]] = {
            Kind.ESCALATE_MEMORY: steps.escalate_memory,
            Kind.ADJUST_ROLLOUT_MEMORY: steps.adjust_rollout_memory,
            Kind.ROLLBACK_OFFLOAD: steps.rollback_offload,
            Kind.RETRY_ONCE: steps.retry_once,
            Kind.STOP: steps.stop,
            Kind.KEEP_RUNNING: steps.keep_running,
            Kind.DONE: steps.done,
        }
        return table[self]()

    @property
    def retries(self) -> bool:
        """True when a verdict of this kind can lead to another attempt."""
        return self in (Kind.ESCALATE_MEMORY, Kind.ADJUST_ROLLOUT_MEMORY, Kind.ROLLBACK_OFFLOAD, Kind.RETRY_ONCE)

    @property
    def first_decisions(self) -> frozenset[str]:
        """``Decision.action`` values the first verdict of this kind can give (``rollback-offload``: ``stop`` when
        the ladder moved nothing to host RAM; the memory kinds: ``stop`` when no rung / floor is left)."""
        return frozenset(
            {
                Kind.ESCALATE_MEMORY: ("retry", "stop"),
                Kind.ADJUST_ROLLOUT_MEMORY: ("retry", "stop"),
                Kind.ROLLBACK_OFFLOAD: ("retry", "stop"),
                Kind.RETRY_ONCE: ("retry",),
                Kind.STOP: ("stop",),
                Kind.KEEP_RUNNING: ("keep-running",),
                Kind.DONE: ("done",),
            }[self]
        )

    @property
    def doc(self) -> str:
        """What the supervisor does, in one line (docs/troubleshooting.md)."""
        return {
            Kind.ESCALATE_MEMORY: "retry from the last checkpoint with the next memory rung of the OOM's phase, "
            "at most `MAX_OOM_RETRIES` times; then stop with suggestions",
            Kind.ADJUST_ROLLOUT_MEMORY: "retry with the rollout `gpu_memory_utilization` moved as the message says "
            "(or unchanged after a cleanup, once); stop at the floor / ceiling",
            Kind.ROLLBACK_OFFLOAD: "retry once with what the ladder moved to host RAM rolled back; stop when there "
            "is nothing to roll back or it recurs",
            Kind.RETRY_ONCE: "retry once after cleanup; stop if it recurs",
            Kind.STOP: "stop; never retried unchanged",
            Kind.KEEP_RUNNING: "keep running and alert; never restart",
            Kind.DONE: "mark the run succeeded",
        }[self]


@dataclass(frozen=True)
class Rule:
    """One row of :data:`POLICY`.

    ``kind``: the :class:`Kind`. ``action``: the one-line action (a Template, see the module docstring).
    ``reason``: the supervisor's decision line (a Template too, rendered by the ladder with
    ``dapo_ops.core.classify.hints.reason_text`` where it has fields; ``""``: the ladder words it from what it
    changes, the memory kinds). ``when``: ``(detail key, value)`` the rule needs, value a literal, a tuple (any of),
    :data:`SET` or :data:`ABSENT`; None: always (the last rule of a class).
    """

    kind: Kind
    action: str
    reason: str = ""
    when: tuple[str, Any] | None = None

    def holds(self, detail: dict[str, Any]) -> bool:
        """True when this rule applies to a verdict with ``detail``."""
        return self.when is None or holds(self.when, detail)


def holds(cond: tuple[str, Any], detail: dict[str, Any]) -> bool:
    """True when ``detail`` satisfies ``cond`` = ``(key, value)`` (value: literal, tuple of literals, SET, ABSENT)."""
    key, value = cond
    if value is SET:
        return bool(detail.get(key))
    if value is ABSENT:
        return key not in detail
    if isinstance(value, tuple):
        return detail.get(key) in value
    return key in detail and detail.get(key) == value


#: the ending line of a refused write and of a dead Ray worker (run.json ``decision.ended``: the ladder's stop reason,
#: dapo_ops/core/ladder.py) and the cause of their action line (the verdict, docs/troubleshooting.md): ONE text each
_WRITE_DENIED = (
    "permission denied / read-only file system writing ${write_path}: not retried (the same write fails again)"
)
_WORKER_DIED = (
    "a Ray worker died (ActorDiedError: ${dead_worker} was killed or crashed, no error of its own, no OOM evidence): "
    "not retried"
)

_STOP_NO_RUNG = (
    "stop: device OOM in ${phase}, which no memory rung shrinks; relaunch with the fix in the hint, "
    "never retried unchanged"
)

POLICY: dict[str, tuple[Rule, ...]] = {
    "oom-device": (
        Rule(Kind.STOP, _STOP_NO_RUNG, when=("phase", NO_RUNG_PHASES)),
        Rule(
            Kind.ESCALATE_MEMORY,
            "retry from the last checkpoint with the next memory rung ${for_phase}; stop with "
            "suggestions when none is left",
        ),
    ),
    "oom-kv-cache": (
        Rule(
            Kind.ADJUST_ROLLOUT_MEMORY,
            "lower rollout gpu_memory_utilization (then max_model_len) and retry; never offload/recompute",
            when=("kv_direction", ABSENT),
        ),
        Rule(
            Kind.ADJUST_ROLLOUT_MEMORY,
            "lower rollout gpu_memory_utilization (then max_model_len) and retry; never offload/recompute",
            when=("kv_direction", "lower"),
        ),
        Rule(
            Kind.ADJUST_ROLLOUT_MEMORY,
            "KV cache smaller than one max-length sequence: raise rollout "
            "gpu_memory_utilization and retry if the device has headroom, else lower "
            "max_model_len / max_response_length; never offload",
            when=("kv_direction", "raise"),
        ),
        Rule(
            Kind.ADJUST_ROLLOUT_MEMORY,
            "clean up leftover processes on the devices (ray stop --force, stale "
            "workers), then retry unchanged once; lower gpu_memory_utilization only if "
            "others really use the memory",
            when=("kv_direction", "cleanup"),
        ),
        Rule(Kind.ADJUST_ROLLOUT_MEMORY, "adjust rollout memory and retry"),
    ),
    "oom-host": (
        Rule(
            Kind.ROLLBACK_OFFLOAD,
            "kernel/cgroup OOM killer: remove ladder-added offload and retry once from the "
            "last complete checkpoint, else stop and raise the container --memory limit",
        ),
    ),
    "oom-ray": (
        Rule(
            Kind.ROLLBACK_OFFLOAD,
            "host RAM exhausted (Ray memory monitor): remove ladder-added offload and retry "
            "once, else stop and reduce host memory use",
        ),
    ),
    "config-error": (
        Rule(
            Kind.KEEP_RUNNING,
            "keep running: the ${tracker_name} server answers this client with ${tracker_status} while training "
            "continues; alert, and pair the tracker client with its server's version before the next run",
            "the tracker server rejects this client's uploads while training continues: alert, never restart",
            when=("fatal", False),
        ),
        Rule(
            Kind.STOP,
            "stop: the ${tracker_name} server answers this client with ${tracker_status} (a client / server version "
            "pairing, or the server's own fault, not credentials or the network); ${tracker_fix}; never retried "
            "unchanged",
            "the tracker server rejects this client: not retried; pair the tracker SDK with its server or run it "
            "offline",
            when=("cause", "tracker-version"),
        ),
        Rule(
            Kind.STOP,
            "stop: ${env_what} (the container's environment, not a fault of the run); ${env_fix}; never retried "
            "unchanged",
            "the container's native libraries / toolchain do not fit: not retried; fix the image (the hint names the "
            "version pairing to check)",
            when=("cause", ("runtime-env", "driver-lib", "toolchain", "numpy-abi", "cann-env")),
        ),
        Rule(
            Kind.STOP,
            "stop: the trainer cannot import ${module_what}; ${module_fix}; never retried unchanged",
            "missing or broken Python module in the container: not retried; install it (the hint names the package)",
            when=("cause", "missing-module"),
        ),
        Rule(
            Kind.STOP,
            "stop: Hydra could not apply an override: ${override_fix}; never retried unchanged",
            "Hydra could not apply an override: not retried; fix or drop the --override the verdict names",
            when=("cause", "hydra-override"),
        ),
        Rule(
            Kind.STOP,
            "stop: verl's start-up check rejected ${key_value}${check_message_paren}; ${check_fix}, then relaunch; "
            "never retried unchanged",
            "verl's own start-up check rejected ${key_value}${check_message_paren}: not retried; ${check_fix}",
            when=("cause", "verl-check"),
        ),
        Rule(
            Kind.STOP,
            "stop: fix the configuration${key_paren}; never retried unchanged",
            "configuration error: not retried unchanged; fix the setting named in the evidence",
        ),
    ),
    "data-error": (
        Rule(
            Kind.STOP,
            "stop: verl's default reward function has no scorer for data_source ${data_source}; set each row's "
            "data_source to a built-in key (openai/gsm8k, math_dapo, ...) or point reward.custom_reward_function.path "
            "/ .name at your scorer; never retried, no memory change",
            "no reward function for the rows' data_source: not retried; fix the dataset's data_source or set "
            "reward.custom_reward_function",
            when=("cause", "reward-source"),
        ),
        Rule(
            Kind.STOP,
            "stop: the dataset violates a limit; filter/truncate the data or raise the limit; never retried unchanged",
            "data error: not retried; fix the dataset or data.max_prompt_length / data.truncation",
        ),
    ),
    "network": (
        Rule(
            Kind.KEEP_RUNNING,
            "keep running: tracker network trouble is non-fatal; alert only",
            "tracker network trouble while training continues: alert, never restart",
            when=("fatal", False),
        ),
        Rule(
            Kind.STOP,
            "stop: never continued on fewer nodes (the checkpoint keeps its world size)",
            "a Ray node was lost: never continued on fewer nodes",
            when=("lost_nodes", SET),
        ),
        Rule(
            Kind.RETRY_ONCE,
            "clean up and retry once after checking connectivity (Ray head, proxy, hub, tracker)",
            "network failure: retrying once after cleanup",
        ),
    ),
    "hccl-timeout": (
        Rule(
            Kind.RETRY_ONCE,
            "clean up (ray stop --force) and retry once; check the collective network / HCCL env if it recurs",
            "collective (HCCL/NCCL) timeout: retrying once after cleanup",
        ),
    ),
    "container-missing": (
        Rule(
            Kind.STOP,
            "stop polling: the container is gone or stopped; recreate and resume only on explicit request",
            "the container is gone or stopped: not retried; recreate or start it, then launch again",
        ),
    ),
    "auth-error": (
        Rule(
            Kind.KEEP_RUNNING,
            "keep running: tracker upload rejected (401) while training continues; alert, rotate the key",
            "tracker credentials rejected while training continues: alert, never restart",
            when=("fatal", False),
        ),
        Rule(
            Kind.STOP,
            "stop: the tracker has no key in the container and no TTY to ask for one; pass the key as an env var "
            "(SWANLAB_API_KEY, never an override) or use local mode, then relaunch",
            "tracker key missing: not retried; pass the tracker's key as an env var (SWANLAB_API_KEY, WANDB_API_KEY, "
            "MLFLOW_TRACKING_*, CLEARML_API_*)",
            when=("cause", "key-missing"),
        ),
        Rule(
            Kind.STOP,
            "stop: the tracker's server rejected the credentials; check that the key belongs to that server and "
            "account (SWANLAB_API_KEY for SWANLAB_HOST; a gated model needs HF_TOKEN with access) or use local "
            "mode, then relaunch",
            "tracker credentials rejected: not retried; fix the tracker's key (SWANLAB_API_KEY / SWANLAB_HOST, "
            "WANDB_API_KEY, MLFLOW_TRACKING_*, CLEARML_API_*)",
        ),
    ),
    "crash-other": (
        Rule(
            Kind.STOP,
            "stop: no failure in the log text; while the process is alive the no-progress timer decides (hang)",
            "the log holds no failure and the process ended: stopped; read the worker logs",
            when=("inconclusive", SET),
        ),
        Rule(
            Kind.STOP,
            "stop: killed from outside with no error in the log (OOM killer or an operator); resume from "
            "the last checkpoint once the cause is known",
            when=("external", SET),
        ),
        Rule(
            Kind.STOP,
            "stop: the disk is full${path}; free space on that volume (see the hint), then resume from the last "
            "checkpoint",
            when=("cause", "disk-full"),
        ),
        Rule(
            Kind.STOP,
            "stop: " + _WRITE_DENIED + "; make it writable for the user verl runs as or point ckpt_dir / runs_dir "
            "in hosts.toml at a writable volume (the suggestions give the commands), then resume from the last "
            "checkpoint",
            _WRITE_DENIED,
            when=("cause", "write-permission"),
        ),
        Rule(
            Kind.STOP,
            "stop: " + _WORKER_DIED + "; look on its node (dmesg for a kill or segfault, its own Ray log, "
            "leftovers of an earlier `ray start`: `ray stop --force`; the suggestions give the commands), then "
            "resume from the last checkpoint; no memory escalation",
            _WORKER_DIED,
            when=("cause", "worker-died"),
        ),
        Rule(
            Kind.STOP,
            "stop: torch.compile failed in a worker and Ray could not unpickle its BackendCompilerFailed; fix the "
            "compile error in the worker log (compiler, headers, libcuda link) or relaunch with "
            "actor_rollout_ref.actor.use_torch_compile=False; no memory escalation",
            "torch.compile failed in a worker (hidden by Ray's unpickling error): not retried unchanged",
            when=("cause", "torch-compile"),
        ),
        Rule(
            Kind.STOP,
            "stop: ${wrapper_what} hides the real error${first_error}; fix that error, then relaunch; no memory "
            "escalation",
            "a wrapper (Ray's unpickling error / vLLM's engine death) hides the real error: not retried unchanged",
            when=("cause", ("engine-dead", "ray-unpickle")),
        ),
        Rule(
            Kind.STOP,
            "stop and report the innermost error; no memory escalation",
            "unclassified crash: not retried; read the evidence in the log",
        ),
    ),
    "diverged": (
        Rule(
            Kind.STOP,
            "stop: ${metric_short} went bad again at step ${bad_step} after one retry from a checkpoint before it "
            "(persistent); fix the cause the hint names, then resume: it starts from the last healthy checkpoint",
            "the same training metric went bad again at the same step after one retry from a healthy checkpoint "
            "(persistent): diverged, stopped",
            when=("recurred", SET),
        ),
        Rule(
            Kind.RETRY_ONCE,
            "stop the attempt and retry once from the last checkpoint saved before step ${bad_step}${retry_where}; "
            "stop if ${metric_short} goes bad again there",
            "a training metric went bad (dapo_ops/core/health.py): retrying once from the last checkpoint before "
            "the bad step",
        ),
    ),
    "data-ran-out": (
        Rule(
            Kind.STOP,
            "stop: ${ran_out}; add data, raise trainer.total_epochs or ask fewer --steps, then resume",
            "verl ran out of training data before the planned steps (the V1 loop ends at its epoch limit with exit 0; one-step-off fails unpacking its empty batch): not a success; "
            "the training data ran out",
        ),
    ),
    "success": (Rule(Kind.DONE, "done: the run reached its final step", "training reached its final step"),),
    "hang": (
        Rule(
            Kind.STOP,
            "stop: ${restarts} restarts in a row brought no new checkpoint; never restarted again without one",
            "restarts that bring no new checkpoint: stopped (the NVIDIA resiliency extension's rule)",
            when=("no_new_checkpoint", SET),
        ),
        Rule(
            Kind.STOP,
            "stop: the same hang again at the same step, every process in the same frames (${wait_frame}); "
            "never retried again",
            "the hang repeats at the same step with the same frames (${wait_frame})${dumps}: not retried again",
            when=("repeat", SET),
        ),
        Rule(
            Kind.STOP,
            "stop: every process at work waits in ${wait_frame} (the workload, not the cluster): ${wait_fix}; "
            "no blind retry",
            "every process waits in the same frame of the workload: not retried; fix what the verdict names",
            when=("cause", "workload"),
        ),
        Rule(
            Kind.RETRY_ONCE,
            "ranks wait in a collective (${wait_frame}) for ranks that never joined: clean up and retry once, "
            "stop if it hangs again",
            "ranks missing from a collective (infrastructure): retrying once after cleanup",
            when=("cause", ("collective-missing", "collective")),
        ),
        Rule(
            Kind.RETRY_ONCE,
            "stack dumps taken; clean up and retry once, stop if it stalls again",
            "stalled (no step and no output): retrying once after cleanup",
            when=("stalled", SET),
        ),
        Rule(
            Kind.RETRY_ONCE,
            "clean up and retry once, stop if it hangs again",
            "no progress within the hang timeout: retrying once after cleanup",
        ),
    ),
    "error-storm": (
        Rule(
            Kind.STOP,
            "stop: not retried unchanged; fix the code the verdict names, then resume",
            "the same exception repeats with no training step (verl retries it for ever): not retried unchanged; "
            "fix the code the verdict names",
        ),
    ),
}
"""Class -> its rules in order; the first that holds is the policy of a verdict. Every class of
``dapo_ops.core.classify.verdict.CLASSES`` plus the supervisor's ``hang`` and ``error-storm``."""

#: restarts in a row that may bring no new checkpoint; the next hang stops (the NVIDIA resiliency extension restarts
#: a job only while it progresses: ``TrainingProgressTracker(max_no_progress_restarts=3)``,
#: NVIDIA/nvidia-resiliency-ext src/nvidia_resiliency_ext/fault_tolerance/progress_tracker.py)
MAX_RESTARTS_WITHOUT_CHECKPOINT = 3

SUPERVISOR_CLASSES: tuple[str, ...] = ("hang", "error-storm")
"""Classes the supervisor adds from what it watches (never from a log's text alone)."""


class PolicyTableError(ValueError):
    """:data:`POLICY` is inconsistent (a class without an unconditional last rule). Raised at import."""


def rule(cls: str, detail: dict[str, Any] | None = None) -> Rule | None:
    """The rule for a verdict of class ``cls`` with ``detail`` (None for a class not in :data:`POLICY`)."""
    d = detail or {}
    for r in POLICY.get(cls, ()):
        if r.holds(d):
            return r
    return None


def kind(cls: str, detail: dict[str, Any] | None = None) -> Kind:
    """The action kind of a verdict; a class not in :data:`POLICY` is :attr:`Kind.STOP`."""
    r = rule(cls, detail)
    return r.kind if r is not None else Kind.STOP


def _check() -> None:
    for cls, rules in POLICY.items():
        if not rules or rules[-1].when is not None:
            raise PolicyTableError(f"policy: the last rule of {cls!r} must have no condition")
        if any(r.when is None for r in rules[:-1]):
            raise PolicyTableError(f"policy: an unconditional rule of {cls!r} hides the rules after it")


_check()


def when_md(cond: tuple[str, Any] | None) -> str:
    """A rule's condition in words for the docs: ```phase` in `a`, `b```, ```fatal` = `false```, ```key` set``,
    ``no `key```, or ``otherwise``."""
    if cond is None:
        return "otherwise"
    key, value = cond
    if value is SET:
        return f"`{key}` set"
    if value is ABSENT:
        return f"no `{key}`"
    if isinstance(value, tuple):
        return f"`{key}` in " + ", ".join(f"`{v}`" for v in value)
    return f"`{key}` = `{str(value).lower() if isinstance(value, bool) else value}`"


def policy_md(classes: tuple[str, ...]) -> str:
    """The "Failure policy" section of docs/troubleshooting.md: one row per rule of each of ``classes``, in order
    (the first row whose condition holds on ``detail`` applies), then what each action kind does."""
    out = [
        "## Failure policy",
        "",
        "What dapo-ops does after each verdict (`dapo_ops/core/policy.py`: the supervisor's decision, the action line",
        "`dapo-ops classify` and `inv status` print, and this table all read it). The first row of a class whose",
        "condition holds on the verdict's `detail` applies.",
        "",
        "| class | when | action kind | action |",
        "|---|---|---|---|",
    ]
    for cls in classes:
        rules = POLICY[cls]
        for r in rules:
            when = "always" if len(rules) == 1 else when_md(r.when)
            text = re.sub(r"\$\{?(\w+)\}?", r"<\1>", r.action).replace("|", "\\|")
            out.append(f"| `{cls}` | {when} | `{r.kind.value}` | {text} |")
    out += ["", "| action kind | what the supervisor does |", "|---|---|"]
    out += [f"| `{k.value}` | {k.doc} |" for k in Kind]
    return "\n".join(out) + "\n"
