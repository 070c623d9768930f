"""Failure classifier: a training log (its tail) -> one :class:`Verdict`.

STDLIB ONLY: this package is shipped into the training container and imported by the
detached supervisor (``dapo_ops/agent/supervisor/``) inside arbitrary images.

What it reads
    The tail of a verl driver log (``train.log``: driver stdout/stderr with the Ray
    worker lines interleaved), optionally the process exit code and the container state
    (``docker inspect`` ``.State``). Facts and traps come from
    ``docs/troubleshooting.md`` (generated from :data:`CLASS_TABLE`), the verl source
    strings (verl 0.9.1, ``verl/trainer/ppo/ray_trainer.py``, ``verl/trainer/ppo/v1/trainer_base.py``,
    ``verl/utils/torch_functional.py``, ``verl/single_controller/ray/base.py``), Ray
    (``ray/exceptions.py``), torch / torch_npu (``CUDACachingAllocator.cpp``,
    ``torch_npu/utils/_error_code.py``), vLLM (``vllm/v1/core/kv_cache_utils.py``,
    ``vllm/v1/worker/utils.py``), Hydra 1.3 and SwanLab 0.6-0.10.

How it decides: ``decide.py`` (the precedence: success facts, container state, the earliest specific root cause
on any rank, collective symptoms, weak network lines, exit code / generic tracebacks). Evidence that is echo or
boilerplate is ignored: Hydra's override list, ``+ cmd`` shell traces, the pprinted config, Ray's OOM-killer list
in every worker-died message, Ray's OOM advice text, ``HYDRA_FULL_ERROR``.

Public interface (contract: docs/design.md "Verdict")
    ``classify(text, exit_code=None, container_state=None, planned_total=None) -> Verdict``
    ``classify_file(path, tail_bytes=4 << 20, **kw) -> Verdict``
    ``is_device_oom_line(line) -> bool``
    ``CLASSES``, ``PHASES``, ``CLASS_TABLE``, ``troubleshooting_md()``.

Where the parts live (all stdlib, all in the container bundle)
    ``verdict.py``       the contract: classes, phases, :class:`Verdict`, the table error
    ``signatures.py``    the signature table: the error texts (data rows, the configuration-error rows among them),
                         their classes / tiers, the row format and its compiler and checks
    ``device_codes.py``  the CANN / ACL / torch_npu / CUDA code families (data rows)
    ``logtail.py``       what the tail says: normalised (ANSI, Ray / rank prefixes, boilerplate, echo lines), its
                         signature hits, the per-line device-OOM check, its facts (steps, totals, exit codes,
                         checkpoint step, sizes, node IPs)
    ``phase.py``         the OOM phase, role and engine from frames and progress lines
    ``decide.py``        the verdict: the precedence (which hit is the verdict), its detail and evidence per class
    ``hints.py``         the words for people: the hint texts and the rules choosing them (data; the action lines
                         are the policy's, ``dapo_ops/core/policy.py``), rendered for one verdict
    ``docs.py``          the data docs/troubleshooting.md is rendered from

Run as ``python -m dapo_ops.core.classify LOGFILE [--exit-code N]`` (verdict as JSON) or
``python -m dapo_ops.core.classify --troubleshooting-md`` (prints docs/troubleshooting.md).
"""

from __future__ import annotations

import os
from typing import Any

from dapo_ops.core.classify import decide, docs, replay
from dapo_ops.core.classify.docs import CLASS_TABLE
from dapo_ops.core.classify.logtail import is_device_oom_line
from dapo_ops.core.classify.verdict import CLASSES, IMPOSSIBLE_ALLOC_GIB, PHASES, ClassifierTableError, Verdict

__all__ = [
    "CLASSES",
    "CLASS_TABLE",
    "ClassifierTableError",
    "DOC_SECTION_MODULES",
    "IMPOSSIBLE_ALLOC_GIB",
    "PHASES",
    "Verdict",
    "classify",
    "classify_file",
    "is_device_oom_line",
    "troubleshooting_md",
]

#: Modules that add a section to docs/troubleshooting.md (full module names): each has a module-level
#: ``troubleshooting_section() -> str`` (markdown starting with ``## ``), rendered after the OOM phases and the
#: device-code families, in this order. The memory ladder (dapo_ops/core/ladder.py) adds its phase -> rungs table.
DOC_SECTION_MODULES: tuple[str, ...] = ("dapo_ops.core.ladder",)


#: verdicts the live supervisor puts before an error storm (``follow.outcome``: a device-OOM line wins; a finished
#: run is no storm): every other verdict of the text gives way to the storm the replay calls
_LIVE_FIRST = ("success", "oom-device")


def classify(
    text: str | bytes,
    exit_code: int | None = None,
    container_state: dict[str, Any] | None = None,
    planned_total: int | None = None,
) -> Verdict:
    """Classify a training log (or its tail) into one :class:`Verdict`. Never raises on any text.

    Args:
        text: the log text (``str``, or ``bytes`` decoded as UTF-8 with replacement). If it
            holds several ``===== dapo-ops attempt <k> start`` delimiters only the last attempt
            is judged.
        exit_code: the process exit status (``None`` = still running / unknown). Negative values
            (``subprocess`` style, -9) mean 128 + signal. Falls back to an ``EXIT=<n>`` trailer,
            ``exited with code <n>`` or the attempt end delimiter in the text.
        container_state: ``docker inspect`` ``.State`` as a dict; keys used (any case, with or
            without underscores): ``OOMKilled`` (bool), ``ExitCode`` (int), ``Status`` (str;
            ``"missing"`` means the container does not exist), ``exists`` (bool).
        planned_total: planned training steps (``trainer.total_training_steps``); defaults to
            ``Total training steps: N`` / the progress bar total found in the log.

    The live supervisor's detectors are replayed over the text on its own clock
    (:mod:`dapo_ops.core.classify.replay`): an error storm is ``error-storm`` here too, the same verdict the
    supervisor records.

    Returns:
        The verdict. A log with no evidence at all gives ``crash-other`` with
        ``detail["inconclusive"] = True`` (the supervisor turns that into ``hang`` from timing).
    """
    try:
        v = decide.decide(text, exit_code, container_state, planned_total)
        if v.cls in _LIVE_FIRST:
            return v
        found = replay.replay(text if isinstance(text, str) else text.decode("utf-8", errors="replace")).verdict()
        return Verdict(**found) if found is not None else v
    except Exception as exc:  # pragma: no cover - last line of defence for the supervisor
        return decide.mk(
            "crash-other",
            {"cause": "classifier-error", "inconclusive": True},
            [f"classifier error: {type(exc).__name__}: {exc}"],
        )


def classify_file(path: str | os.PathLike[str], tail_bytes: int = 4 << 20, **kw: Any) -> Verdict:
    """Classify the last ``tail_bytes`` bytes of a log file (seek; cost independent of file size).

    Args:
        path: log file path (``str`` or ``os.PathLike``).
        tail_bytes: bytes read from the end (default 4 MiB); the first partial line is dropped.
        **kw: passed to :func:`classify` (``exit_code``, ``container_state``, ``planned_total``).

    Raises:
        OSError: when the file cannot be opened or read (missing, permission, a directory).
    """
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        start = max(0, size - int(tail_bytes))
        fh.seek(start)
        data = fh.read(size - start)
    if start > 0:
        nl = data.find(b"\n")
        if 0 <= nl < len(data) - 1:
            data = data[nl + 1 :]
    return classify(data.decode("utf-8", errors="replace"), **kw)


def troubleshooting_md() -> str:
    """docs/troubleshooting.md (generated; edit dapo_ops/core/classify/docs.py, not the doc).

    Raises:
        ImportError: a module of :data:`DOC_SECTION_MODULES` cannot be imported.
    """
    return docs.render(DOC_SECTION_MODULES)
