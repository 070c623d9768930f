"""Failure classifier: a training log (its tail) -> one :class:`Verdict`.

STDLIB ONLY: this module is copied into the training container and imported by the
detached supervisor (``dapo_ops/agent/supervisor.py``) inside arbitrary images.

What it reads
    The tail of a verl driver log (``train.log``: driver stdout/stderr with the Ray
    worker lines interleaved), optionally the process exit code and the container state
    (``docker inspect`` ``.State``). Facts and traps come from
    ``docs/troubleshooting.md`` (generated from :data:`CLASS_TABLE`), the verl source
    strings (verl 0.9.1 / main 2026-01, ``verl/trainer/ppo/ray_trainer.py``,
    ``verl/utils/torch_functional.py``, ``verl/single_controller/ray/base.py``), Ray
    (``ray/exceptions.py``), torch / torch_npu (``CUDACachingAllocator.cpp``,
    ``torch_npu/utils/_error_code.py``), vLLM (``vllm/v1/core/kv_cache_utils.py``,
    ``vllm/v1/worker/utils.py``), Hydra 1.3 and SwanLab 0.6-0.10.

How it decides (precedence)
    1. success facts: last ``step:N`` >= planned total (``Total training steps: N`` or
       the ``Training Progress`` bar), ``Final validation metrics``, exit code 0;
    2. container state: ``OOMKilled=true`` -> ``oom-host``; container gone -> ``container-missing``;
    3. the earliest specific root cause across all ranks (device / KV-cache / Ray / host
       OOM, config, data, auth, network, container, specific crashes such as thread
       exhaustion or an impossible allocation size);
    4. collective (HCCL/NCCL) timeouts and errors -> ``hccl-timeout`` (usually a symptom);
    5. weak network exceptions (``Connection refused`` ...) -> ``network``;
    6. exit code / generic tracebacks -> ``crash-other``.
    Evidence that is echo or boilerplate is ignored: Hydra's override list, ``+ cmd``
    shell traces, the pprinted config, Ray's OOM-killer list in every worker-died
    message, Ray's OOM advice text, ``HYDRA_FULL_ERROR``. An error followed by later
    ``step:`` lines did not stop the run and only counts as a non-fatal signal.

Public interface (contract: docs/design.md "Verdict")
    ``classify(text, exit_code=None, container_state=None, planned_total=None) -> Verdict``
    ``classify_file(path, tail_bytes=4 << 20, **kw) -> Verdict``
    ``is_device_oom_line(line) -> bool``
    ``CLASSES``, ``ACTION_KINDS``, ``PHASES``, ``CLASS_TABLE``, ``troubleshooting_md()``.

Where the parts live (all stdlib, all in the container bundle): this module decides (facts, phase, verdicts);
``classify_text.py`` normalises the tail; ``classify_signatures.py`` holds the error texts; ``device_codes.py`` the
CANN / ACL / torch_npu / CUDA code families; ``classify_hints.py`` the action and hint words;
``classify_docs.py`` the data docs/troubleshooting.md is generated from.

Run as ``python -m dapo_ops.core.classify LOGFILE [--exit-code N]`` (verdict as JSON) or
``python -m dapo_ops.core.classify --troubleshooting-md`` (prints docs/troubleshooting.md).
"""

from __future__ import annotations

import bisect
import json
import os
import re
import sys
from dataclasses import asdict, dataclass, field

from dapo_ops.core import device_codes as _codes
from dapo_ops.core.classify_text import _KILLED_RX, _MEM_TABLE_ROW_RX, _Log, _is_echo_text, _normalise_line
from dapo_ops.core.classify_signatures import (
    COLLECTIVE, GENERIC, ROOT, WEAK, _DEVICE_OOM_NEEDLES, _DEVICE_OOM_RX, _OOM_WORDS_RX, _SIGS, _WARNING_LINE_RX,
    _Sig
)
from dapo_ops.core.classify_hints import _action_text, _hint
from dapo_ops.core.classify_docs import CLASS_TABLE, PHASE_SIGNS  # noqa: F401 (CLASS_TABLE: public)

__all__ = [
    "ACTION_KINDS",
    "CLASSES",
    "CLASS_TABLE",
    "DEFAULT_ACTION_KIND",
    "PHASES",
    "Verdict",
    "classify",
    "classify_file",
    "is_device_oom_line",
    "troubleshooting_md",
]

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
    "success",
)
"""The failure classes (exact names, docs/design.md). ``hang`` is added by the supervisor from timing."""

ACTION_KINDS: tuple[str, ...] = (
    "escalate-memory",
    "adjust-rollout-memory",
    "rollback-offload",
    "retry-once",
    "stop",
    "keep-running",
    "done",
)
"""What the supervisor does with a verdict (docs/design.md "Action kinds")."""

DEFAULT_ACTION_KIND: dict[str, str] = {
    "oom-device": "escalate-memory",
    "oom-kv-cache": "adjust-rollout-memory",
    "oom-host": "rollback-offload",
    "oom-ray": "rollback-offload",
    "config-error": "stop",
    "data-error": "stop",
    "network": "retry-once",
    "hccl-timeout": "retry-once",
    "container-missing": "stop",
    "auth-error": "stop",
    "crash-other": "stop",
    "success": "done",
    "hang": "retry-once",
}
"""Class -> action kind. Exceptions: ``auth-error`` and ``network`` become ``keep-running``
when the signal is non-fatal (tracker trouble while ``step:`` lines continue); ``oom-device`` in phase
``checkpoint-load`` is ``stop`` (no memory rung shrinks torch.load of the saved shards onto the device)."""

# Largest single allocation that can be a real device OOM. No accelerator has 1 TiB of
# memory; "Tried to allocate 8388608.00 GiB" is a corrupted size (overflowed / negative
# shape), and no memory rung can fix it.
IMPOSSIBLE_ALLOC_GIB = 1024.0


@dataclass
class Verdict:
    """What happened and what to do (docs/design.md "Verdict").

    Attributes:
        cls: one of :data:`CLASSES` (or ``"hang"``, set by the supervisor).
        action_kind: one of :data:`ACTION_KINDS`.
        action: one line: what the supervisor does / what to do.
        hint: one paragraph for the human naming the key / env var to change and to what.
        evidence: normalised evidence lines (ANSI codes and Ray prefixes stripped), at most 6.
        detail: extracted facts; keys used (all optional): ``step`` (int, last ``step:N``
            seen), ``total`` (int, planned steps), ``phase`` (one of :data:`PHASES`; always set for
            oom-device, ``unknown`` when nothing names it; set for oom-kv-cache / oom-host / oom-ray where
            known), ``role`` (``critic`` / ``ref``, oom-device), ``kv_direction`` (``lower``/``raise``/``cleanup``, oom-kv-cache), ``node``
            (IP of the failing Ray node, network / hccl-timeout / oom-ray), ``address``
            (remote endpoint: GCS, proxy, hub), ``key`` (failing Hydra key, config-error /
            data-error), ``fatal`` (bool, auth-error / network), ``init`` (bool,
            hccl-timeout at communicator init), ``cause`` (short tag: ``thread-limit``,
            ``sigkill``, ``impossible-allocation``, ``disk-full``, ``segfault``,
            ``hccp-busy``, ``shm``, ``device-unavailable``, ``kernel-fault``, ``data-missing``,
            ``model-path``, ``ray-cpus``, ``host-alloc``, ...), ``code`` (the device error code read, see
            dapo_ops/core/device_codes.py), ``path`` (missing data file), ``alloc_gib`` / ``total_gib``
            (float, GiB), ``exit_code`` (int),
            ``ckpt_step`` (int, newest ``global_step_N`` seen: may be partial),
            numbers from the message: ``available``/``desired`` (devices), ``world_size``/``tp``,
            ``value``/``need`` (token budget), ``length``/``limit`` (data),
            ``inconclusive`` (True when the text holds no evidence at all: the
            supervisor's no-progress timer decides ``hang``), ``teardown_error`` (True:
            success, but an error followed the last step).
    """

    cls: str
    action_kind: str
    action: str
    hint: str
    evidence: list[str] = field(default_factory=list)
    detail: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        """Return a JSON-serialisable dict (keys as the attribute names)."""
        return asdict(self)




for _s in _SIGS:  # compile-time sanity: every signature targets a known class
    assert _s.cls in CLASSES, _s

_STEP_RX = re.compile(r"(?<![\w/])step:(\d+)")
_STEP_NUM_RX = re.compile(r"\d+")
_TOTAL_RX = re.compile(r"total training steps: ?(\d+)")
_PROGRESS_RX = re.compile(r"training progress:\s*(\d+)%\|[^|\n]*\|\s*(\d+)/(\d+)")
_FINAL_VAL_RX = re.compile(r"final validation metrics")
_TOTAL_TIME_RX = re.compile(r"(?m)^total time: [\d.]+ seconds\s*$")
_EXIT_RXS = (  # (needle, regex): an EXIT=<n> trailer, "... exited with code <n>", the attempt end delimiter
    ("exit=", re.compile(r"(?m)^exit=(-?\d+)\s*$")),
    ("exited with code", re.compile(r"exited with code (-?\d+)")),
    ("end exit=", re.compile(r"(?m)^===== dapo-ops attempt \d+ end exit=(-?\d+)")),
)
_GLOBAL_STEP_RX = re.compile(r"global_step_(\d+)")
_ALLOC_RX = re.compile(r"tried to allocate (-?[\d.,]+)\s*([kmgtpe]?i?b|bytes)\b")
_IP_RX = re.compile(r"(?:\bip=|ip: ?|worker ip address: ?)(\d{1,3}(?:\.\d{1,3}){3})")
_TRACEBACK_START = "traceback (most recent call last)"

_UNIT = {"b": 1, "bytes": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12, "pb": 1e15, "eb": 1e18,
         "kib": 2 ** 10, "mib": 2 ** 20, "gib": 2 ** 30, "tib": 2 ** 40, "pib": 2 ** 50, "eib": 2 ** 60}

# frame words that put a device OOM into the rollout engine (-> oom-kv-cache) or training.
_ROLLOUT_FRAME_RX = re.compile(
    r"kv_cache|initialize_cache|init_device|_build_rollout|determine_available_memory"
    r"|determine_num_available_blocks|profile_run|/vllm/|/vllm_ascend/|vllm_rollout|enginecore|llmrayactor"
    r"|/sglang/|wake_up"
)
_TRAIN_FRAME_RX = re.compile(
    r"update_actor|update_policy|backward|update_critic|optimizer\.step|compute_log_prob|compute_ref_log_prob"
    r"|entropy_from_logits|dp_actor\.py|dp_critic\.py|megatron_actor|_forward_micro_batch|torch/optim/"
    r"|torch/autograd/|fsdp_workers\.py|megatron_workers\.py"
)
_ROLLOUT_PREFIX_RX = re.compile(r"^(?:Worker_TP\d*|EngineCore(?:_DP\d+)?|LLMRayActor|VllmWorker|vLLM|SGLang|Sglang"
                                r"|AsyncSglang|RolloutServer)", re.I)
# rollout engines' own allocators (SGLang torch_memory_saver, vLLM sleep-mode cumem / vllm-ascend camem)
_ROLLOUT_ALLOC_RX = re.compile(r"torch_memory_saver|cumem_allocator|camem_allocator|/sglang/|/vllm/|/vllm_ascend/")
PHASES: tuple[str, ...] = ("model-load", "checkpoint-load", "checkpoint-save", "rollout-init", "weight-sync",
                           "generation", "log-prob", "update", "unknown")
"""OOM phases (``Verdict.detail["phase"]``, the names agreed in COMMON.md; the memory ladder is per phase)."""

# Phase words in traceback frames (``File "...", line N, in <func>``) and ``ray::Worker.<method>()`` lines, in
# PRIORITY order: when one call chain names several, the first phase here wins (a wake-up inside
# generate_sequences is weight-sync; KV-cache allocation inside init_model is rollout-init; load_state_dict
# inside load_checkpoint is checkpoint-load). Function names are verl 0.9.1's: verl/trainer/ppo/v1/
# trainer_base.py (_update_actor, _load_checkpoint), verl/workers/engine_workers.py (update_actor :714,
# compute_log_prob, update_weights :823), verl/workers/rollout/vllm_rollout/vllm_rollout.py (resume :202),
# verl/checkpoint_engine/base.py (update_weights :519), verl/utils/checkpoint/fsdp_checkpoint_manager.py
# (load_checkpoint / save_checkpoint); legacy verl/workers/fsdp_workers.py (init_model, _build_rollout,
# generate_sequences, sharding_manager); vLLM (determine_available_memory, initialize_kv_cache,
# gpu_worker.wake_up), SGLang (resume_memory_occupation, init_memory_pool).
_PHASE_FRAME_RULES: tuple[tuple[str, re.Pattern], ...] = (
    ("rollout-init", re.compile(
        r"kv_cache|initialize_cache|init_device|_build_rollout|determine_available_memory|determine_num_available_blocks"
        r"|profile_run|init_memory_pool|_initialize_kv_caches|init_engine|launch_server|run_scheduler_process"
        r"|init_cache_engine|_init_rollout")),
    ("weight-sync", re.compile(
        r"update_weights|wake_up|resume_memory_occupation|release_memory_occupation|sync_weights|sharding_manager"
        r"|checkpoint_engine|_sync_model|, in resume\b|rollout_mode|load_weights_from")),
    ("checkpoint-load", re.compile(r"load_checkpoint|restore_checkpoint|load_from_checkpoint|_load_ckpt")),
    ("checkpoint-save", re.compile(r"save_checkpoint|_save_ckpt|save_model|saving (?:model|optim|checkpoint)"
                                   r"|saved model to|local_global_step_folder")),
    ("model-load", re.compile(r"init_model|_build_model|from_pretrained|load_state_dict|build_model_optimizer"
                              r"|_init_engine_model|model_init|load_hf_model")),
    ("log-prob", re.compile(r"compute_log_prob|compute_ref_log_prob|ref_log_prob|old_log_prob|compute_values")),
    ("update", re.compile(r"update_actor|update_policy|update_critic|train_mini_batch|train_batch|forward_backward"
                          r"|optimizer\.step|, in backward\b|torch/autograd/|dp_actor\.py.*update|megatron_actor.*update")),
    ("generation", re.compile(r"generate_sequences|, in generate\b|execute_model|sample_tokens|_run_engine"
                              r"|agent_loop|async_generate")),
)
_PHASE_ORDER = {name: k for k, (name, _rx) in enumerate(_PHASE_FRAME_RULES)}
# Phase words in ordinary log lines near the error (the run's own progress lines), used when no frame names one.
_PHASE_CONTEXT_RULES: tuple[tuple[str, re.Pattern], ...] = (
    ("checkpoint-load", re.compile(r"resuming from|load from checkpoint|loading (?:from|checkpoint).{0,200}global_step_"
                                   r"|setting global step to")),
    ("checkpoint-save", re.compile(r"saving (?:checkpoint|model|optim|extra_state|hf_model)|saved (?:model|checkpoint)"
                                   r"|local_global_step_folder")),
    ("weight-sync", re.compile(r"resume_memory_occupation|release_memory_occupation|wake[ _]up|update_weights"
                               r"|sleep mode|weight sync")),
    ("rollout-init", re.compile(r"init engine|kv cache|memory profiling|cache blocks|capturing cuda ?graph")),
    ("model-load", re.compile(r"loading (?:checkpoint shards|weights)|model config after")),
)
_TRAIN_PHASES = ("update", "log-prob", "checkpoint-load", "checkpoint-save", "model-load")

@dataclass
class _Hit:
    sig: _Sig
    line: int
    m: re.Match


def _scan(log: _Log) -> list[_Hit]:
    """All signature hits on non-echo lines, in line order.

    Candidate lines are found with ``str.find`` on the needles (C speed over the whole tail); the
    signature's regex then runs on those lines only, so cost grows with matching lines, not bytes.
    """
    low = log.scan_low
    starts = log.scan_starts
    idx = log.scan_idx
    nlines = len(starts)
    hits: list[_Hit] = []
    found: dict = {}
    for sig in _SIGS:
        cand: set[int] = set()
        if sig.finder is not None:
            got = found.get(sig.finder)
            if got is None:
                got = found[sig.finder] = {bisect.bisect_right(starts, m.start()) - 1 for m in sig.finder.finditer(low)}
            cand |= {idx[k] for k in got} if idx is not None else got
        for needle in sig.needles:
            lines = found.get(needle)
            if lines is None:  # each needle is searched once per tail, however many signatures share it
                lines = found[needle] = set()
                pos = low.find(needle)
                while pos >= 0:
                    k = bisect.bisect_right(starts, pos) - 1
                    lines.add(idx[k] if idx is not None else k)
                    if k + 1 >= nlines:
                        break
                    pos = low.find(needle, starts[k + 1])
            cand |= lines
        for i in sorted(cand):
            m = sig.rx.search(log.low_line(i))
            if m is None or log.is_echo(i):
                continue
            if sig.cls == "oom-device" and _WARNING_LINE_RX.match(log.low_line(i)):
                continue  # "... may cause CUDA out of memory" in a WARNING is advice, not an OOM
            hits.append(_Hit(sig, i, m))
    hits.sort(key=lambda h: h.line)
    return hits


# --------------------------------------------------------------------------- facts


@dataclass
class _Facts:
    step: int | None = None
    step_line: int = -1
    total: int | None = None
    final_val: int = -1  # line index or -1
    progress_done: int = -1
    total_time: int = -1
    exit_code: int | None = None
    ckpt_step: int | None = None


def _last_step(low: str) -> tuple[int | None, int]:
    """(N, offset) of the last ``step:N`` not preceded by a word char or ``/`` (``global_step:``,
    ``timing_s/step:`` are metric names, not progress), found backwards with ``rfind``."""
    end = len(low)
    while True:
        pos = low.rfind("step:", 0, end)
        if pos < 0:
            return None, -1
        prev = low[pos - 1] if pos else " "
        m = _STEP_NUM_RX.match(low, pos + 5)
        if m and not (prev.isalnum() or prev in "_/"):
            return int(m.group(0)), pos
        end = pos


def _last(rx: re.Pattern, low: str, needle: str):
    if needle not in low:
        return None
    m = None
    for m in rx.finditer(low, max(0, low.rfind(needle) - 200)):
        pass
    if m is None:  # the last occurrence of the needle was not a match: look at all of them
        for m in rx.finditer(low):
            pass
    return m


def _facts(log: _Log) -> _Facts:
    low = log.low
    f = _Facts()
    step, pos = _last_step(low)
    if step is not None:
        f.step = step
        f.step_line = log.line_of(pos)
    m = _last(_TOTAL_RX, low, "total training steps:")
    if m:
        f.total = int(m.group(1))
    m = _last(_PROGRESS_RX, low, "training progress:")
    if m:
        done, tot = int(m.group(2)), int(m.group(3))
        if f.total is None:
            f.total = tot
        if done >= tot > 0:
            f.progress_done = log.line_of(m.start())
    m = _last(_FINAL_VAL_RX, low, "final validation metrics")
    if m is not None and not log.is_echo(log.line_of(m.start())):
        f.final_val = log.line_of(m.start())
    m = _last(_TOTAL_TIME_RX, low, "total time: ")
    if m is not None:
        f.total_time = log.line_of(m.start())
    best = -1
    for needle, rx in _EXIT_RXS:
        m = _last(rx, low, needle)
        if m is not None and m.start() > best:
            best, f.exit_code = m.start(), int(m.group(1))
    m = _last(_GLOBAL_STEP_RX, low, "global_step_")
    if m:
        f.ckpt_step = int(m.group(1))
    return f


def _alloc_gib(low_line: str) -> float | None:
    m = _ALLOC_RX.search(low_line)
    if not m:
        return None
    try:
        val = float(m.group(1).replace(",", ""))
    except ValueError:
        return None
    return val * _UNIT.get(m.group(2), 1) / 2 ** 30


def _is_frame(ll: str) -> bool:
    return 'file "' in ll or "ray::" in ll


def _frame_phase(ll: str) -> str | None:
    """The highest-priority phase named by one lower-cased frame / call line (``None``: none)."""
    for name, rx in _PHASE_FRAME_RULES:
        if rx.search(ll):
            return name
    return None


def _context_phase(ll: str) -> str | None:
    for name, rx in _PHASE_CONTEXT_RULES:
        if rx.search(ll):
            return name
    return None


def _best(phases: set) -> str | None:
    return min(phases, key=_PHASE_ORDER.__getitem__) if phases else None


def _phase(log: _Log, i: int, back: int = 150, fwd: int = 200, frames_only: bool = True) -> str | None:
    """The phase (one of :data:`PHASES` but ``unknown``) of the error at line ``i``, or ``None``.

    ``frames_only`` (tracebacks): every frame / ``ray::`` call line of the call chain around ``i`` counts: the
    frames above it (its own traceback; stop at a ``step:`` line) and the re-raised tracebacks after it (the
    driver's ``RayTaskError`` chain names verl's method: ``update_weights``, ``load_checkpoint``); the
    highest-priority phase of :data:`_PHASE_FRAME_RULES` wins. Without a frame, the nearest progress line
    before ``i`` (``Resuming from``, ``Saving checkpoint``, ``resume_memory_occupation``), then just after it.
    ``frames_only=False`` (no traceback: a shell ``Killed`` line): the nearest line within ``back`` that names a
    phase in any way.
    """
    n = len(log.lines)
    if not frames_only:
        for j in range(i, max(-1, i - back), -1):
            ll = log.low_line(j)
            if j != i and _STEP_RX.search(ll):
                break
            if log.is_echo(j) and not _KILLED_RX.match(log.lines[j].lstrip()):
                continue
            ph = _frame_phase(ll) or _context_phase(ll)
            if ph:
                return ph
        return None
    found: set = set()
    for j in range(i, max(-1, i - back), -1):
        ll = log.low_line(j)
        if j != i and _STEP_RX.search(ll):
            break
        if j == i or _is_frame(ll):
            ph = _frame_phase(ll)
            if ph:
                found.add(ph)
    for j in range(i + 1, min(n, i + fwd)):
        ll = log.low_line(j)
        if _STEP_RX.search(ll) or ll.startswith("===== dapo-ops attempt"):
            break
        if _is_frame(ll):
            ph = _frame_phase(ll)
            if ph:
                found.add(ph)
    if found:
        return _best(found)
    for rng in (range(i, max(-1, i - 30), -1), range(i + 1, min(n, i + 8))):
        for j in rng:
            ll = log.low_line(j)
            if j != i and _STEP_RX.search(ll):
                break
            if log.is_echo(j):
                continue
            ph = _context_phase(ll)
            if ph:
                return ph
    return None


def _role(log: _Log, i: int) -> str | None:
    """``critic`` / ``ref`` when the frames above line ``i`` name that worker (changes the hint)."""
    for j in range(i, max(-1, i - 150), -1):
        ll = log.low_line(j)
        if j != i and _STEP_RX.search(ll):
            break
        if _is_frame(ll) or j == i:
            if "update_critic" in ll or "dp_critic" in ll or "compute_values" in ll:
                return "critic"
            if "compute_ref_log_prob" in ll or "ref_log_prob" in ll:
                return "ref"
    return None


def _oom_context(log: _Log, i: int) -> str:
    """``"rollout"`` or ``"training"`` for a device-OOM line, from its innermost frames."""
    if _ROLLOUT_PREFIX_RX.match(log.names.get(i, "")) or _ROLLOUT_ALLOC_RX.search(log.low_line(i)):
        return "rollout"
    for j in range(i + 1, min(len(log.lines), i + 10)):
        ll = log.low_line(j)
        if "enginecore failed to start" in ll or "engine core initialization failed" in ll:
            return "rollout"
    for j in range(i - 1, max(-1, i - 80), -1):
        ll = log.low_line(j)
        if _STEP_RX.search(ll):
            break
        if not _is_frame(ll):
            continue
        if _ROLLOUT_FRAME_RX.search(ll):
            return "rollout"
        if _TRAIN_FRAME_RX.search(ll):
            return "training"
        if _TRACEBACK_START in ll:
            break
    return "training"


def _node(log: _Log, i: int, radius: int = 40) -> str | None:
    """IP of the node a hit comes from: its Ray prefix, else the nearest ``ip=``/``IP:`` text."""
    if i in log.ips:
        return log.ips[i]
    for d in range(0, radius):
        for j in (i - d, i + d):
            if 0 <= j < len(log.lines):
                if j in log.ips:
                    return log.ips[j]
                m = _IP_RX.search(log.low_line(j))
                if m:
                    return m.group(1)
    return None


def _ev(log: _Log, *idx: int) -> list[str]:
    out: list[str] = []
    for i in idx:
        if 0 <= i < len(log.lines):
            s = log.lines[i].strip()
            if len(s) > 400:
                s = s[:397] + "..."
            if s and s not in out:
                out.append(s)
    return out[:6]


# --------------------------------------------------------------------------- verdicts

def _mk(cls: str, detail: dict, evidence: list[str], kind: str | None = None) -> Verdict:
    kind = kind or DEFAULT_ACTION_KIND[cls]
    detail = {k: v for k, v in detail.items() if v is not None}
    return Verdict(cls=cls, action_kind=kind, action=_action_text(cls, kind, detail),
                   hint=_hint(cls, kind, detail), evidence=evidence, detail=detail)


def classify(text: str | bytes, exit_code: int | None = None, container_state: dict | None = None,
             planned_total: int | None = None) -> Verdict:
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

    Returns:
        The verdict. A log with no evidence at all gives ``crash-other`` with
        ``detail["inconclusive"] = True`` (the supervisor turns that into ``hang`` from timing).
    """
    try:
        return _classify(text, exit_code, container_state, planned_total)
    except Exception as exc:  # pragma: no cover - last line of defence for the supervisor
        return _mk("crash-other", {"cause": "classifier-error", "inconclusive": True},
                   [f"classifier error: {type(exc).__name__}: {exc}"])


def _state_get(state: dict | None, *names: str):
    if not state:
        return None
    norm = {str(k).lower().replace("_", "").replace(".", ""): v for k, v in state.items()}
    for n in names:
        v = norm.get(n.lower().replace("_", ""))
        if v is not None:
            return v
    return None


def _truthy(v) -> bool:
    if isinstance(v, str):
        return v.strip().lower() in ("1", "true", "yes", "y")
    return bool(v)


def _classify(text, exit_code, container_state, planned_total) -> Verdict:
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", errors="replace")
    elif not isinstance(text, str):
        text = str(text)
    log = _Log(text)
    f = _facts(log)
    if exit_code is None:
        exit_code = f.exit_code
        if exit_code is None:
            ec = _state_get(container_state, "ExitCode")
            if ec is not None and str(_state_get(container_state, "Status") or "").lower() == "exited":
                try:
                    exit_code = int(ec)
                except (TypeError, ValueError):
                    exit_code = None
    if exit_code is not None and exit_code < 0:
        exit_code = 128 - exit_code
    total = planned_total if planned_total else f.total
    base: dict = {"step": f.step, "total": total}
    if exit_code is not None:
        base["exit_code"] = exit_code

    hits = _scan(log)
    # a runtime / operator code printed next to an OOM or a collective failure is its echo, not a kernel fault
    oom_lines = [h.line for h in hits if h.sig.name == "device-oom"]
    hits = [h for h in hits if not (h.sig.name == "kernel-fault" and (
        _comm_echo(log, h.line) or any(abs(h.line - o) <= 10 for o in oom_lines)))]
    # An error followed by later progress did not stop the run: it is a non-fatal signal.
    fatal = [h for h in hits if h.sig.fatal and h.line > f.step_line]
    nonfatal = [h for h in hits if not h.sig.fatal or h.line <= f.step_line]

    # 1. success facts
    done_line = max(f.final_val, f.progress_done, f.total_time,
                    f.step_line if (f.step is not None and total and f.step >= total) else -1)
    if done_line >= 0 or (exit_code == 0 and not [h for h in fatal if h.sig.tier <= COLLECTIVE]):
        d = dict(base)
        if done_line >= 0 and any(h.line > done_line for h in fatal):
            d["teardown_error"] = True
        ev = _ev(log, *(x for x in (f.step_line, f.final_val, f.progress_done, f.total_time) if x >= 0))
        return _mk("success", d, ev)

    # 2. container state
    if _truthy(_state_get(container_state, "OOMKilled")):
        d = dict(base, cause="oom-killed", phase=_phase(log, len(log.lines) - 1, back=12, frames_only=False),
                 ckpt_step=f.ckpt_step)
        return _mk("oom-host", d, ["docker inspect: State.OOMKilled=true"] + _ev(log, len(log.lines) - 1))
    exists = _state_get(container_state, "exists")
    status = str(_state_get(container_state, "Status") or "").lower()
    if (exists is not None and not _truthy(exists)) or status in ("missing", "removed", "not-found"):
        return _mk("container-missing", dict(base), [f"container state: {status or 'does not exist'}"])

    # 3. specific root cause: earliest across ranks
    root = [h for h in fatal if h.sig.tier == ROOT]
    killed = _killed_line(log)
    if killed is not None and killed < f.step_line:  # something was killed, but training went on
        killed = None
    if root:
        # network trouble is often printed as a warning before the real failure (the hub lookup falls back to
        # the local cache): any other specific root cause wins over it, whatever the order.
        main = [h for h in root if h.sig.cls != "network"] or root
        return _verdict_for(log, f, base, main[0], main, fatal)
    if killed is not None:
        d = dict(base, cause="killed", phase=_phase(log, killed, back=12, frames_only=False), ckpt_step=f.ckpt_step)
        return _mk("oom-host", d, _ev(log, killed) + _exit_ev(exit_code))
    # 4. collective, unless a real traceback on another rank came first (failure-classes: "first look for
    #    an earlier error on any rank (OOM, crash); if one exists, classify that")
    coll = [h for h in fatal if h.sig.tier == COLLECTIVE]
    if coll:
        first = _earlier_crash(log, coll, fatal)
        if first is not None:
            return _mk("crash-other", dict(base, cause="earlier-error"),
                       _ev(log, first.line) + [f"(then collective errors: {log.lines[coll[0].line].strip()[:160]})"])
        return _verdict_for(log, f, base, coll[0], coll, fatal)
    # 5. weak network exception lines
    weak = [h for h in fatal if h.sig.tier == WEAK]
    if weak:
        return _verdict_for(log, f, base, weak[0], weak, fatal)
    # 6. exit code and generic crashes
    generic = [h for h in fatal if h.sig.tier == GENERIC]
    late_401 = [h for h in hits if h.sig.name == "tracker-401" and h.line > f.step_line]
    if late_401 and generic and exit_code not in (None, 0, 137):
        # a tracker 401 with no step after it, then a traceback and a failed exit: the login itself failed
        return _mk("auth-error", dict(base, fatal=True), _ev(log, late_401[0].line) + _generic_ev(log, generic))
    if exit_code == 137:
        return _mk("crash-other", dict(base, cause="sigkill"),
                   _generic_ev(log, generic) + _exit_ev(exit_code))
    if exit_code == 139:
        return _mk("crash-other", dict(base, cause="segfault"), _generic_ev(log, generic) + _exit_ev(exit_code))
    if generic or (exit_code not in (None, 0)):
        d = dict(base)
        if exit_code == 143:
            d["cause"] = "sigterm"
        elif exit_code == 134:
            d["cause"] = "abort"
        return _mk("crash-other", d, _generic_ev(log, generic) + _exit_ev(exit_code))
    # 7. non-fatal signals while the process runs (or its state is unknown)
    nf_auth = [h for h in nonfatal if h.sig.cls == "auth-error"]
    if nf_auth:
        return _mk("auth-error", dict(base, fatal=False), _ev(log, nf_auth[-1].line), kind="keep-running")
    nf_net = [h for h in nonfatal if h.sig.cls == "network"]
    if nf_net:
        return _mk("network", dict(base, fatal=False, cause="tracker"), _ev(log, nf_net[-1].line), kind="keep-running")
    return _mk("crash-other", dict(base, inconclusive=True), _ev(log, f.step_line) if f.step_line >= 0 else [])


_SYMPTOM_EXC_RX = re.compile(
    r"connection (?:closed|reset|refused|aborted)|broken pipe|timed? ?out|distbackenderror|nccl|hccl|gloo"
    r"|raytaskerror|actordiederror|worker died|process group|watchdog|socket|store|rendezvous|sigterm|keyboardinterrupt"
)


def _earlier_crash(log: _Log, coll: list[_Hit], fatal: list[_Hit]) -> _Hit | None:
    """A real Python exception (inside a traceback, not itself a communication symptom) printed before
    the first collective error: the root cause the other ranks' timeouts are waiting on."""
    coll_lines = {h.line for h in coll}
    for h in fatal:
        if h.line >= coll[0].line:
            break
        if h.sig.name != "exception" or h.line in coll_lines:
            continue
        ll = log.low_line(h.line)
        if _SYMPTOM_EXC_RX.search(ll):
            continue
        if any('file "' in log.low_line(j) or _TRACEBACK_START in log.low_line(j)
               for j in range(max(0, h.line - 4), h.line)):
            return h
    return None


_KERNEL_WORDS_RX = re.compile(r"aicore|ai core|aivec|aic error|vector core|exception of|illegal|trap")


def _comm_echo(log: _Log, i: int) -> bool:
    """A runtime / operator code (EE9999, EZ9999, 5xxxxx) that only repeats a collective failure next to it
    (HCCL task / notify timeout, a remote rank's error), without an AI Core / vector fault of its own."""
    near = " ".join(log.low_line(j) for j in range(max(0, i - 3), min(len(log.lines), i + 4)))
    return bool(re.search(r"hccl|notify|remote rank|\bei\d{4}\b", near)) and not _KERNEL_WORDS_RX.search(near)


def _exit_ev(exit_code: int | None) -> list[str]:
    return [f"exit code {exit_code}"] if exit_code is not None else []


def _generic_ev(log: _Log, generic: list[_Hit]) -> list[str]:
    if not generic:
        return []
    # innermost error: the last exception line (Ray wrappers excluded by the signature)
    exc = [h for h in generic if h.sig.name == "exception"]
    died = [h for h in generic if h.sig.name != "exception"]
    idx = []
    if exc:
        idx.append(exc[-1].line)
    if died:
        idx.append(died[0].line)
    return _ev(log, *sorted(set(idx)))


def _killed_line(log: _Log) -> int | None:
    for i in range(len(log.lines) - 1, max(-1, len(log.lines) - 400), -1):
        if _KILLED_RX.match(log.lines[i].lstrip()):
            return i
    return None


def _verdict_for(log: _Log, f: _Facts, base: dict, h: _Hit, same_tier: list[_Hit], fatal: list[_Hit]) -> Verdict:
    cls = h.sig.cls
    i = h.line
    d = dict(base)
    name = h.sig.name
    if name == "device-oom":
        return _device_oom_verdict(log, d, i)
    if cls == "oom-kv-cache":
        if name == "kv-free-below-util" and _zero_total(log.low_line(i)):
            d["cause"] = "device-unavailable"
            return _mk("crash-other", d, _ev(log, i))
        d["kv_direction"] = "cleanup" if name in ("kv-free-below-util", "kv-profiling-dirty") else "raise"
        # (sglang-mem: "Not enough memory. Please try to increase --mem-fraction-static": the KV pool is too small)
        d["phase"] = "rollout-init"
        return _mk(cls, d, _ev(log, i))
    if cls == "oom-ray":
        d["phase"] = _ray_oom_phase(log, i) or _phase(log, i)
        d["node"] = _ray_oom_node(log, i) or _node(log, i)
        d["ckpt_step"] = f.ckpt_step if d["phase"] == "checkpoint-save" else None
        nxt = [j for j in range(i + 1, min(len(log.lines), i + 3)) if "memory on the node" in log.low_line(j)]
        return _mk(cls, d, _ev(log, i, *nxt))
    if cls == "oom-host":
        d["phase"] = _phase(log, i, back=12, frames_only=False)
        d["ckpt_step"] = f.ckpt_step
        d["cause"] = {"pinned-host-oom": "pinned-memory", "loader-killed": "dataloader-killed",
                      "host-alloc": "host-alloc"}.get(name, "kernel-oom")
        return _mk(cls, d, _ev(log, i))
    if cls == "config-error":
        d["key"] = _config_key(log, h)
        d["cause"] = {"hydra-override": "stale-key", "hydra-struct": "stale-key", "dataclass-kwarg": "stale-key",
                      "gpus-less": "gpus",
                      "tp-divisible": "tp", "token-budget": "token-budget", "resume-world-size": "resume-layout",
                      "resume-megatron": "resume-layout", "data-missing": "data-missing", "model-path": "model-path",
                      "raylet-register": "ray-cpus"}.get(name)
        if name == "data-missing":
            m = re.search(r"'([^'\n]+\.(?:parquet|jsonl?|csv|arrow))'", log.lines[i], re.I) or \
                re.search(r"(/[^\s'\"]+\.(?:parquet|jsonl?|csv|arrow))\b", log.lines[i], re.I)
            if m:
                d["path"] = m.group(1)
                if re.search(r"val_files=[^\s']*" + re.escape(m.group(1).lower()), log.low):
                    d["key"] = "data.val_files"
        if name == "gpus-less":
            d["available"], d["desired"] = float(h.m.group(1)), float(h.m.group(2))
        elif name == "tp-divisible":
            d["world_size"], d["tp"] = int(h.m.group(1)), int(h.m.group(2))
        elif name == "token-budget":
            m = re.search(r"max_token_len=(\d+) and max_seq_len=(\d+)", log.low_line(i))
            if m:
                d["value"], d["need"] = int(m.group(1)), int(m.group(2))
        return _mk(cls, d, _ev(log, i, *_full_key_line(log, i)))
    if cls == "data-error":
        if name in ("seq-too-long", "prompt-too-long"):
            nums = [int(x) for x in re.findall(r"\((\d+)\)|=(\d+)", log.low_line(i)) for x in x if x]
            if len(nums) >= 2:
                d["length"], d["limit"] = nums[0], nums[1]
        d["key"] = {"seq-too-long": "data.max_prompt_length", "prompt-too-long": "data.max_prompt_length",
                    "dapo-give-up": "algorithm.filter_groups.max_num_gen_batches"}.get(name, "data.train_files")
        if name == "data-schema":
            d["cause"] = "schema"
        if name == "dapo-give-up":
            d["cause"] = "too-difficult"
        return _mk(cls, d, _ev(log, i))
    if cls == "network":
        d["fatal"] = True
        d["node"] = _node(log, i)
        if name in ("gcs-connect", "gcs-cluster-id", "ray-no-instance"):
            d["cause"] = "ray-head"
            m = re.search(r"address ([0-9a-z.\-:]+?)(?::(\d+))?(?: within|\s|$)", log.low_line(i))
            if m:
                d["address"] = m.group(1) + (":" + m.group(2) if m.group(2) else "")
                d["node"] = log.ips.get(i) or d.get("node")
        elif name in ("proxy", "hub"):
            d["cause"] = "hub"
            for j in range(i, min(len(log.lines), i + 6)):
                m = re.search(r"host='([^']+)'|https?://([^'/\s]+)", log.low_line(j))
                if m:
                    d["address"] = m.group(1) or m.group(2)
                    break
        elif name == "ssh":
            d["cause"] = "ssh"
            d["address"] = next((g for g in h.m.groups() if g), None)
        elif name == "swanlab-http-auth":
            # swanlab 0.10 reports an unreachable server as a key problem; the [HTTP] retry lines decide
            if not any("[http] retry" in log.low_line(j) for j in range(max(0, i - 200), i)):
                d.pop("node", None)
                return _mk("auth-error", dict(d, fatal=True, cause="bad-key"), _ev(log, i))
            d["cause"] = "tracker"
        return _mk(cls, d, _ev(log, i))
    if cls == "hccl-timeout":
        d["node"] = _node(log, i)
        init = False
        for x in same_tier:
            ll = log.low_line(x.line)
            m = re.search(r"seqnum=(\d+)", ll)
            if (m and int(m.group(1)) <= 1) or "last completed nccl work: -1" in ll or x.sig.name == "dist-store" \
                    or _COMM_INIT_RX.search(ll):
                init = True
        if not init and any(_COMM_INIT_RX.search(log.low_line(j)) for x in same_tier[:4]
                            for j in range(max(0, x.line - 3), min(len(log.lines), x.line + 4))):
            init = True
        if any(x.sig.name == "cann-hccl" and ("ej0001" in log.low_line(x.line)
                                             or "hccp process" in log.low_line(x.line)) for x in same_tier):
            d["cause"] = "hccp-busy"
        d["init"] = init
        more = [x.line for x in same_tier[1:4] if x.line != i]
        return _mk(cls, d, _ev(log, i, *more))
    if cls == "auth-error":
        d["fatal"] = True
        return _mk(cls, d, _ev(log, i))
    if cls == "container-missing":
        return _mk(cls, d, _ev(log, i))
    # crash-other specific causes
    d["cause"] = {"thread-limit": "thread-limit", "illegal-memory": "illegal-memory", "segfault": "segfault",
                  "disk-full": "disk-full", "device-assert": "device-assert", "shm": "shm",
                  "device-unavailable": "device-unavailable", "kernel-fault": "kernel-fault"}.get(name, name)
    if name in ("device-unavailable", "kernel-fault"):
        d["code"] = next((t for _f, _c, t in _codes.find_codes(log.low_line(i))), None)
    generic = [x for x in fatal if x.sig.tier == GENERIC]
    return _mk("crash-other", d, _ev(log, i) + _generic_ev(log, generic))


# communicator set-up (HCCL: communicator init, then transport / link set-up; hcclug "three phases"), not execution
_COMM_INIT_RX = re.compile(r"hcclcomminit|comminitrootinfo|\bei0009\b|transport init|createlink|create dest"
                           r"|init_communicator|ncclcomminit|failed to bind the ip port")


def _ray_call_line(log: _Log, i: int) -> list[int]:
    """The nearest ``ray::WorkerDict.<method>()`` line above ``i``, else the first worker-method one of the
    driver's re-raised traceback after it (names the phase for humans)."""
    for j in range(i - 1, max(-1, i - 80), -1):
        if "ray::" in log.low_line(j) and "()" in log.lines[j]:
            return [j]
    for j in range(i + 1, min(len(log.lines), i + 200)):
        ll = log.low_line(j)
        if _STEP_RX.search(ll):
            break
        if "ray::workerdict." in ll and "()" in ll:
            return [j]
    return []


def _ray_oom_phase(log: _Log, i: int) -> str | None:
    for j in range(i, min(len(log.lines), i + 20)):
        ll = log.low_line(j)
        if "ray::" in ll and _MEM_TABLE_ROW_RX.match(log.lines[j].lstrip()):
            ph = _frame_phase(ll)
            if ph:
                return ph
    return None


_TOTAL_RXS = (re.compile(r"total capacity of (-?[\d.,]+)\s*([kmgtpe]?i?b|bytes)\b"),
              re.compile(r"(-?[\d.,]+)\s*([kmgtpe]?i?b|bytes) total capacity"))
_FREE_TOTAL_RX = re.compile(r"\((-?[\d.]+)/(-?[\d.]+) gib\)")


def _size_gib(num: str, unit: str) -> float | None:
    try:
        return float(num.replace(",", "")) * _UNIT.get(unit, 1) / 2 ** 30
    except ValueError:
        return None


def _total_gib(text: str) -> float | None:
    for rx in _TOTAL_RXS:
        m = rx.search(text)
        if m:
            return _size_gib(m.group(1), m.group(2))
    return None


def _zero_total(low_line: str) -> bool:
    """``Free memory on device (0.0/0.0 GiB)``: the device reports no memory at all (not visible / not mounted)."""
    m = _FREE_TOTAL_RX.search(low_line)
    return bool(m) and float(m.group(2)) <= 0


def _nonsense(text: str) -> str | None:
    """Why an OOM message makes no physical sense, or ``None``: ``impossible-allocation`` (a size >= 1 TiB, negative,
    or larger than the device's own total capacity: a corrupted shape, not memory pressure) or
    ``device-unavailable`` (the device reports 0 bytes total: it is not visible or not mounted)."""
    gib = _alloc_gib(text)
    if gib is not None and (gib >= IMPOSSIBLE_ALLOC_GIB or gib < 0):
        return "impossible-allocation"
    total = _total_gib(text)
    if total is not None:
        if total <= 0:
            return "device-unavailable"
        if gib is not None and gib > total:
            return "impossible-allocation"
    return None


def _device_oom_verdict(log: _Log, d: dict, i: int) -> Verdict:
    """A device-OOM line: corrupted / impossible -> crash-other; the rollout engine's own start-up or generation
    memory, or a bare driver result code from its allocator -> oom-kv-cache; else oom-device with its phase
    (checkpoint-load stops: no rung shrinks ``torch.load`` of the saved shards onto the device)."""
    ll = log.low_line(i)
    near = ll + " " + (log.low_line(i + 1) if i + 1 < len(log.lines) else "")
    gib = _alloc_gib(ll)
    bad = _nonsense(near)
    if bad:
        d["cause"] = bad
        if gib is not None:
            d["alloc_gib"] = round(gib, 2)
        total = _total_gib(near)
        if total is not None:
            d["total_gib"] = round(total, 2)
        return _mk("crash-other", d, _ev(log, i, i + 1 if bad == "device-unavailable" or total is not None else i))
    phase = _phase(log, i)
    driver_only = not _OOM_WORDS_RX.search(ll)
    if _oom_context(log, i) == "rollout" and (
            phase in (None, "rollout-init", "model-load", "generation")
            or (phase == "weight-sync" and driver_only)):
        # the rollout engine's own memory (KV cache, weights at start-up, a re-map reported only as a result
        # code by its allocator): lower its share, never offload/recompute
        d.update(kv_direction="lower", phase=phase if phase in ("weight-sync", "generation") else "rollout-init")
        return _mk("oom-kv-cache", d, _ev(log, i, *_symptom_lines(log, i)))
    d["phase"] = phase or "unknown"
    d["role"] = _role(log, i)
    if gib is not None:
        d["alloc_gib"] = round(gib, 2)
    kind = "stop" if d["phase"] == "checkpoint-load" else None
    return _mk("oom-device", d, _ev(log, *_ray_call_line(log, i), i), kind=kind)


def _symptom_lines(log: _Log, i: int) -> list[int]:
    """The first request-timeout line after a rollout memory error (the only thing the trainer sees)."""
    for j in range(i + 1, min(len(log.lines), i + 20)):
        if "timed out" in log.low_line(j) or "timeout" in log.low_line(j):
            return [j]
    return []


def _ray_oom_node(log: _Log, i: int) -> str | None:
    for j in range(max(0, i - 2), min(len(log.lines), i + 4)):
        m = re.search(r"memory on the node \(ip: ?([0-9a-f.:]+)", log.low_line(j))
        if m:
            return m.group(1)
    return None


def _full_key_line(log: _Log, i: int) -> list[int]:
    for j in range(i + 1, min(len(log.lines), i + 4)):
        if "full_key:" in log.low_line(j):
            return [j]
    return []


def _config_key(log: _Log, h: _Hit) -> str | None:
    i = h.line
    for j in range(max(0, i - 3), min(len(log.lines), i + 8)):
        m = re.search(r"full_key: ?([\w.\[\]-]+)", log.lines[j])
        if m:
            return m.group(1)
    for j in range(max(0, i - 3), min(len(log.lines), i + 8)):
        m = re.search(r"Could not override '([^']+)'", log.lines[j])
        if m:
            return m.group(1)
    name = h.sig.name
    if name == "n-gpus-zero":
        k = h.m.group(1).replace("config.", "", 1)
        return k if "." in k else "trainer." + k
    if name == "micro-batch":
        k = h.m.group(1) or h.m.group(2)
        return k if k.startswith(("actor_rollout_ref.", "critic.")) else "actor_rollout_ref." + k
    if name == "separate-async":
        ll = log.low_line(i)
        if "parameter_sync_step" in ll:
            return "trainer.v1.separate_async.parameter_sync_step"
        if "backend" in ll:
            return "actor_rollout_ref.rollout.checkpoint_engine.backend"
        return "actor_rollout_ref.rollout.nnodes" if "nnodes" in ll else "actor_rollout_ref.rollout.n_gpus_per_node"
    if name in ("interpolation", "dataclass-kwarg"):
        return h.m.group(1)
    if name in ("hydra-append", "hydra-parse", "omegaconf-missing"):
        orig = log.lines[i]
        m = re.search(r"'([^']*)'|: ?([\w.]+)\s*$", orig[h.m.start():])
        if m:
            return m.group(1) or m.group(2)
    return {
        "hydra-load": "--config-name",
        "hydra-primary": "--config-name",
        "gpus-less": "trainer.n_gpus_per_node",
        "tp-divisible": "actor_rollout_ref.rollout.tensor_model_parallel_size",
        "n-gpus-zero": "trainer.n_gpus_per_node",
        "rollout-mode": "actor_rollout_ref.rollout.mode",
        "token-budget": "actor_rollout_ref.actor.ppo_max_token_len_per_gpu",
        "model-len-pos": "actor_rollout_ref.rollout.max_model_len",
        "batched-tokens": "actor_rollout_ref.rollout.max_num_batched_tokens",
        "batch-divisible": "data.train_batch_size",
        "batch-ge-mini": "actor_rollout_ref.actor.ppo_mini_batch_size",
        "remove-padding": "actor_rollout_ref.model.use_remove_padding",
        "bucket": "actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes",
        "not-supported": "trainer.logger",
        "hybrid-engine": "actor_rollout_ref.hybrid_engine",
        "resume-world-size": "trainer.resume_mode",
        "resume-megatron": "trainer.resume_mode",
        "data-missing": "data.train_files",
        "model-path": "actor_rollout_ref.model.path",
        "raylet-register": "ray_kwargs.ray_init.num_cpus",
    }.get(name)


# --------------------------------------------------------------------------- per line / files

def is_device_oom_line(line: str) -> bool:
    """Cheap check the supervisor runs on every new log line: does it report a device OOM?

    True for torch / torch_npu device-OOM messages (``CUDA out of memory``, ``NPU out of
    memory``, torch_npu ``ERR<nn>006`` memory codes, CANN ``EL0004``), after stripping ANSI
    codes and the Ray prefix. False for config echoes (Hydra override lists, ``+ cmd``
    traces, pprinted config), Ray's OOM-killer / advice boilerplate, Ray's host-memory
    ``OutOfMemoryError`` and impossible (corrupted) allocation sizes. True means "stop
    waiting and classify the tail now": it does not decide training vs rollout KV cache.
    """
    if not line:
        return False
    low = line.lower()
    if not any(n in low for n in _DEVICE_OOM_NEEDLES):
        return False
    s = _normalise_line(line)
    if _is_echo_text(s):
        return False
    sl = s.lower()
    if not _DEVICE_OOM_RX.search(sl) or _WARNING_LINE_RX.match(sl):
        return False
    return _nonsense(sl) is None


def classify_file(path, tail_bytes: int = 4 << 20, **kw) -> Verdict:
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
            data = data[nl + 1:]
    return classify(data.decode("utf-8", errors="replace"), **kw)
# --------------------------------------------------------------------------- docs (data in classify_docs.py)

# Modules (in this package) that may add a section to docs/troubleshooting.md: a module-level
# ``troubleshooting_section() -> str`` (markdown starting with ``## ``) is rendered after the OOM phases and the
# device-code families, in this order. The memory ladder (dapo_ops/core/ladder.py) adds its phase -> rungs table here.
DOC_SECTION_MODULES: tuple[str, ...] = ("ladder",)

assert tuple(PHASE_SIGNS) == PHASES


def troubleshooting_md() -> str:
    """docs/troubleshooting.md (generated; edit dapo_ops/core/classify_docs.py, not the doc)."""
    from dapo_ops.core import classify_docs

    return classify_docs.render(CLASSES, DEFAULT_ACTION_KIND, PHASES, DOC_SECTION_MODULES, __package__ or "dapo_ops")


def _main(argv: list[str]) -> int:
    if argv[:1] == ["--troubleshooting-md"]:
        sys.stdout.write(troubleshooting_md())
        return 0
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m dapo_ops.core.classify LOGFILE [--exit-code N] | --troubleshooting-md")
        return 0 if argv else 2
    path, ec = argv[0], None
    if "--exit-code" in argv[1:]:
        try:
            ec = int(argv[argv.index("--exit-code") + 1])
        except (IndexError, ValueError):
            print("classify: --exit-code needs an integer, e.g. --exit-code 137", file=sys.stderr)
            return 2
    try:
        v = classify_file(path, exit_code=ec)
    except OSError as exc:
        print(f"classify: cannot read {path}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    print(json.dumps(v.to_json(), indent=2))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(_main(sys.argv[1:]))
