"""Failure classifier: a training log (its tail) -> one :class:`Verdict`.

STDLIB ONLY: this module is copied into the training container and imported by the
detached supervisor (``dapo_ops/supervisor.py``) inside arbitrary images.

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
    ``CLASSES``, ``ACTION_KINDS``, ``CLASS_TABLE``, ``troubleshooting_md()``.

Run as ``python -m dapo_ops.classify LOGFILE [--exit-code N]`` (verdict as JSON) or
``python -m dapo_ops.classify --troubleshooting-md`` (prints docs/troubleshooting.md).
"""

from __future__ import annotations

import bisect
import json
import os
import re
import sys
from dataclasses import asdict, dataclass, field

from . import device_codes as _codes

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
when the signal is non-fatal (tracker trouble while ``step:`` lines continue)."""

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
            seen), ``total`` (int, planned steps), ``phase`` (``update_actor``,
            ``update_critic``, ``compute_log_prob``, ``compute_ref_log_prob``,
            ``generate_sequences``, ``save_checkpoint``, ``init_model``, ``kv-cache-init``),
            ``kv_direction`` (``lower``/``raise``/``cleanup``, oom-kv-cache), ``node``
            (IP of the failing Ray node, network / hccl-timeout / oom-ray), ``address``
            (remote endpoint: GCS, proxy, hub), ``key`` (failing Hydra key, config-error /
            data-error), ``fatal`` (bool, auth-error / network), ``init`` (bool,
            hccl-timeout at communicator init), ``cause`` (short tag: ``thread-limit``,
            ``sigkill``, ``impossible-allocation``, ``disk-full``, ``segfault``,
            ``hccp-busy``, ...), ``alloc_gib`` (float), ``exit_code`` (int),
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


# --------------------------------------------------------------------------- normalise

_ANSI_RX = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
# (WorkerDict pid=123) / (WorkerDict pid=123, ip=192.0.2.1) / (raylet) / (raylet, ip=...)
_RAY_PREFIX_RX = re.compile(
    r"^\s*\((?:(?P<name>[^()\s]+) pid=(?P<pid>\d+)|raylet)(?:, ip=(?P<ip>[0-9A-Fa-f.:]+))?\)\s?"
)
_RANK_PREFIX_RX = re.compile(r"^\[rank-?(?P<rank>\d+)\]:\s?")
# Boilerplate removed from inside lines before any matching (ray/_private/..., ray/exceptions.py).
# (needle, regex): the regex runs only when the needle occurs (each starts with a literal: fast scan).
_BOILERPLATE = (
    (" across cluster]", re.compile(r" ?\[repeated \d+x across cluster\]")),
    ("(Ray deduplicates logs", re.compile(r" ?\(Ray deduplicates logs by default\.[^\n]*")),
    ("potential root causes", re.compile(r"There are some potential root causes\.[^\n]*?(?:unexpected errors\.|$)",
                                         re.MULTILINE)),
    ("by OOM killer due to high memory", re.compile(r"\(1\) The process is killed by SIGKILL by OOM killer due to "
                                                    r"high memory usage\.[^\n]*")),
    ("how to address the out of memory", re.compile(r"Refer to the documentation on how to address the out of "
                                                    r"memory issue[^\n]*")),
    ("To adjust the kill threshold", re.compile(r"To adjust the kill threshold, set the environment variable[^\n]*")),
)


def _strip_boilerplate(text: str) -> str:
    if "\x1b" in text:
        text = _ANSI_RX.sub("", text)
    for needle, rx in _BOILERPLATE:
        if needle in text:
            text = rx.sub("", text)
    return text


_ATTEMPT_START_RX = re.compile(r"^===== dapo-ops attempt \d+ start .*$", re.MULTILINE)


class _Log:
    """The normalised tail: lines, their Ray prefix facts and a lower-cased copy."""

    __slots__ = ("lines", "starts", "low", "names", "ips", "_echo", "scan_low", "scan_starts", "scan_idx")

    def __init__(self, text: str):
        m = None
        for m in _ATTEMPT_START_RX.finditer(text):
            pass
        if m is not None:  # one train.log spans attempts: judge only the last one
            text = text[m.start():]
        text = _strip_boilerplate(text)
        raw = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        lines: list[str] = []
        names: dict[int, str] = {}
        ips: dict[int, str] = {}
        for i, line in enumerate(raw):
            if line.startswith(("(", " (", "[rank")):
                pm = _RAY_PREFIX_RX.match(line)
                if pm:
                    if pm.group("name"):
                        names[i] = pm.group("name")
                    else:
                        names[i] = "raylet"
                    if pm.group("ip"):
                        ips[i] = pm.group("ip")
                    line = line[pm.end():]
                rm = _RANK_PREFIX_RX.match(line)
                if rm:
                    line = line[rm.end():]
            lines.append(line)
        self.lines = lines
        self.names = names
        self.ips = ips
        joined = "\n".join(lines)
        low = joined.replace("\u0130", "I").lower()
        if len(low) != len(joined):  # pragma: no cover - exotic case folding
            low = "".join(c.lower() if len(c.lower()) == 1 else c for c in joined)
        self.low = low
        starts = [0] * len(lines)
        pos = 0
        for i, line in enumerate(lines):
            starts[i] = pos
            pos += len(line) + 1
        self.starts = starts
        self._echo: dict[int, bool] = {}
        # Signature scans skip metrics lines and progress bars (the bulk of a long run's tail; they never
        # carry an error): scan_low holds the other lines, scan_idx maps them back.
        keep = [i for i, ln in enumerate(lines) if not ln.startswith(_PROGRESS_STARTS)]
        if len(keep) == len(lines):
            self.scan_low, self.scan_starts, self.scan_idx = low, starts, None
        else:
            parts = [self.low_line(i) for i in keep]
            self.scan_low = "\n".join(parts)
            ss = [0] * len(parts)
            pos = 0
            for k, part in enumerate(parts):
                ss[k] = pos
                pos += len(part) + 1
            self.scan_starts, self.scan_idx = ss, keep

    def line_of(self, offset: int) -> int:
        return bisect.bisect_right(self.starts, offset) - 1

    def low_line(self, i: int) -> str:
        s = self.starts[i]
        return self.low[s:s + len(self.lines[i])]

    def is_echo(self, i: int) -> bool:
        v = self._echo.get(i)
        if v is None:
            v = _is_echo_text(self.lines[i])
            self._echo[i] = v
        return v


_PROGRESS_STARTS = ("step:", "Training Progress:")
_PPRINT_RX = re.compile(r"^[\[{(\s]*'[^'\n]{1,160}'\s*:\s")
_MEM_TABLE_ROW_RX = re.compile(r"^\d+\s+\d+(?:\.\d+)?\s+\S")
_KILLED_RX = re.compile(r"^(?:\S+: line \d+:\s+)?(?:\d+\s+)?Killed(?:\s{2,}|\s*$)")
_ECHO_STARTS = (  # lower case
    "error executing job with overrides",
    "+ ",
    "++ ",
    "+++ ",
    "set the environment variable hydra_full_error",
    "ray init kwargs:",
    "kwargs: {",
    "to append to your config use",
    "model config after override",
)


def _is_echo_text(line: str) -> bool:
    """True for lines that only echo configuration or commands (never evidence): Hydra's override
    list, ``+ cmd`` shell traces (``set -x``), the pprinted config, Ray's memory-users table rows,
    the shell's ``Killed  <command line>`` report (matched separately for oom-host)."""
    t = line.lstrip()
    if t[:40].lower().startswith(_ECHO_STARTS):
        return True
    if _PPRINT_RX.match(t) or _MEM_TABLE_ROW_RX.match(t):
        return True
    if _KILLED_RX.match(t):  # the shell's "Killed  python3 -m verl ... <overrides>"
        return True
    return False


def _normalise_line(line: str) -> str:
    line = _strip_boilerplate(line)
    for _ in range(2):
        pm = _RAY_PREFIX_RX.match(line)
        if not pm:
            break
        line = line[pm.end():]
    rm = _RANK_PREFIX_RX.match(line)
    if rm:
        line = line[rm.end():]
    return line


# --------------------------------------------------------------------------- signatures

ROOT, COLLECTIVE, WEAK, GENERIC = 1, 2, 3, 4


@dataclass(frozen=True)
class _Sig:
    name: str
    cls: str
    tier: int
    needles: tuple  # lower-case literals; every match contains at least one (found with str.find)
    rx: re.Pattern  # applied to one lower-cased line
    fatal: bool = True
    finder: re.Pattern | None = None  # also candidates: lines where this literal-prefixed regex matches


# Candidate finder for error CODES (EZ9999, EI0009, ERR02200 ...): literal-prefixed, so re scans fast
_CODE_FINDER = re.compile(r"e[ehijlz1-9ab]\d{4}\b|err0[0-4]\d{3}")


def _sig(name, cls, tier, needles, pattern, fatal=True, finder=None):
    if isinstance(needles, str):
        needles = (needles,)
    assert needles and all(needles), name
    return _Sig(name, cls, tier, tuple(needles), re.compile(pattern), fatal, finder)


def _code_pat(category: str) -> str:
    return "|".join(rx for _fam, rx, cat, _m, _src in _codes.FAMILIES if cat == category)


# A device OOM needs a device allocator's own words or a memory error CODE (dapo_ops/device_codes.py: EL0004,
# EI0011, torch_npu ERRss006, ACL 207001/207002/207018, CUresult 2): "memory" words alone never count, nor Ray's
# host-memory ray.exceptions.OutOfMemoryError (the lookbehind), nor torch_npu's informational
# "[ERROR] Get a block from the existing pool failed ... can be ignored".
_DEVICE_OOM_PAT = (
    r"\b(?:cuda|npu|gpu|hip|xpu|mps) out of memory"
    r"|cuda error: out of memory"
    r"|(?<![\w.])outofmemoryerror: (?:cuda|npu|gpu|tried to allocate|allocation on device)"
    r"|\btorch\.(?:cuda\.|npu\.)?outofmemoryerror\b"
    r"|driver error:\s*out of memory"
    r"|cuda failure '?out of memory"  # NCCL's ncclUnhandledCudaError: its own buffers did not fit
    r"|cublas_status_alloc_failed|cudnn_status_alloc_failed"
    r"|" + _code_pat("memory")
)
_DEVICE_OOM_RX = re.compile(_DEVICE_OOM_PAT)
_DEVICE_OOM_NEEDLES = ("out of memory", "outofmemoryerror", "err0", "el0004", "ei0011", "alloc_failed", "2070",
                       "curesult", "cuda_error_out", "cudaerrormemoryallocation")
# The allocator's own words (vs a bare result code: "CUresult error: 2", "error code is 207001")
_OOM_WORDS_RX = re.compile(r"(?:cuda|npu|gpu|hip|xpu) out of memory|cuda error: out of memory|outofmemoryerror"
                           r"|driver error:\s*out of memory|cuda failure '?out of memory")
# a log record at warning level or below (vLLM / Python logging / glog): an OOM word in it is advice
_WARNING_LINE_RX = re.compile(r"\s*(?:warning|warn|info|debug)\b|\s*\[?[wi]\d{4} |.{0,80}\b(?:user|future|deprecation)warning\b")
_COMM_CODE_PAT = _code_pat("communication")
_UNAVAIL_CODE_PAT = _code_pat("device-unavailable")
_KERNEL_CODE_PAT = _code_pat("kernel-fault")

# Order does not matter (earliest line wins inside a tier); names are for tests and evidence.
_SIGS: tuple[_Sig, ...] = (
    # ---- device OOM (training vs rollout decided from frames)
    _sig("device-oom", "oom-device", ROOT, _DEVICE_OOM_NEEDLES, _DEVICE_OOM_PAT),
    # ---- rollout engine (vLLM / vllm-ascend) KV cache at start-up
    _sig("kv-no-blocks", "oom-kv-cache", ROOT, "cache blocks", r"no available memory for the cache blocks"),
    _sig("kv-maxlen", "oom-kv-cache", ROOT, "max seq len",
         r"to serve at least one request with the model's max seq len"
         r"|max seq len \(\d+\) is larger than the maximum number of tokens that can be stored in kv cache"),
    _sig("kv-free-below-util", "oom-kv-cache", ROOT, "on startup",
         r"free memory on device .{0,120}on startup is less than desired (?:gpu|npu) memory utilization"),
    _sig("sglang-mem", "oom-kv-cache", ROOT, "mem-fraction-static",
         r"not enough memory\. please try to increase --mem-fraction-static"),
    _sig("kv-profiling-dirty", "oom-kv-cache", ROOT, "not properly cleaned up",
         r"(?:gpu|npu|device) memory was not properly cleaned up before initializing the vllm instance"),
    # ---- Ray host-memory monitor (ray/exceptions.py OutOfMemoryError, raylet)
    _sig("ray-oom", "oom-ray", ROOT, ("running low on memory", "killed due to memory pressure"),
         r"running low on memory|workers? \(tasks / actors\) killed due to memory pressure \(oom\)"),
    _sig("ray-oom-node", "oom-ray", ROOT, "memory on the node (ip:",
         r"memory on the node \(ip: [^)]{0,80}\) .{0,400}exceeds the memory usage threshold"),
    # ---- kernel / cgroup OOM killer
    _sig("kernel-oom", "oom-host", ROOT, "out of memory",
         r"out of memory: kill(?:ed)? process|memory cgroup out of memory"),
    _sig("oom-kill-event", "oom-host", ROOT, ("oom-kill", "oom_reaper"), r"\boom-kill:|\boom_reaper\b"),
    _sig("pinned-host-oom", "oom-host", ROOT, "host out of memory", r"malloc pin memory failed, host out of memory"),
    # host RAM allocation failures (c10 DefaultCPUAllocator, Python / numpy MemoryError): host memory, not device
    _sig("host-alloc", "oom-host", ROOT, ("defaultcpuallocator", "memoryerror"),
         r"defaultcpuallocator: can't allocate memory|(?<![\w.])memoryerror(?::|\s*$)"),
    _sig("loader-killed", "oom-host", ROOT, "is killed by signal", r"dataloader worker \(pid \d+\) is killed by signal: killed"),
    # ---- config (Hydra / verl asserts / resources / resume layout)
    _sig("hydra-override", "config-error", ROOT, "could not override", r"could not override '([^']+)'"),
    _sig("hydra-struct", "config-error", ROOT, "is not in struct", r"key '([^']+)' is not in struct"),
    _sig("hydra-append", "config-error", ROOT, "could not append",
         r"could not append to config\. an item is already at '([^']+)'"),
    _sig("hydra-parse", "config-error", ROOT, "error parsing override", r"error parsing override '([^']*)'"),
    _sig("hydra-load", "config-error", ROOT, "could not load", r"in '[^']+': could not load '([^']+)'"),
    _sig("hydra-defaults", "config-error", ROOT, "no match in the defaults list", r"no match in the defaults list"),
    _sig("hydra-primary", "config-error", ROOT, "cannot find primary config", r"cannot find primary config '([^']+)'"),
    _sig("interpolation", "config-error", ROOT, "interpolation key",
         r"interpolation key '([^']+)' not found"),
    _sig("dataclass-kwarg", "config-error", ROOT, "unexpected keyword argument",
         r"\w*config\.__init__\(\) got an unexpected keyword argument '(\w+)'"),
    _sig("omegaconf-missing", "config-error", ROOT, "missing mandatory value",
         r"missing mandatory value: ?([\w.]+)"),
    _sig("omegaconf-type", "config-error", ROOT, ("could not be converted to", "is not a valid"),
         r"value '[^']*' (?:could not be converted to|is not a valid) "),
    _sig("gpus-less", "config-error", ROOT, "total available",
         r"total available (?:gpus|npus) ([\d.]+) is less than total desired (?:gpus|npus) ([\d.]+)"),
    _sig("tp-divisible", "config-error", ROOT, "infer_tp", r"world_size: ?(\d+) is not divisible by infer_tp: ?(\d+)"),
    _sig("n-gpus-zero", "config-error", ROOT, "must be greater than 0",
         r"([\w.]*(?:n_gpus_per_node|nnodes)) must be greater than 0"),
    _sig("separate-async", "config-error", ROOT, "separate async training",
         r"(?:must equal parameter_sync_step \* ppo_mini_batch_size|(?:nnodes|n_gpus_per_node) must be > 0"
         r"|please use nccl/nixl/mooncake, etc\. backend) in separate async training|"
         r"backend for separate async training"),
    _sig("rollout-mode", "config-error", ROOT, "rollout.mode", r"assert .{0,40}rollout\.mode == ['\"]async['\"]"),
    _sig("micro-batch", "config-error", ROOT, ("please set at least one of", "you have set both"),
         r"please set at least one of '([\w.]+)'|you have set both '([\w.]+)'"),
    _sig("token-budget", "config-error", ROOT, "max_token_len must be",
         r"max_token_len must be greater than the sequence length"),
    _sig("model-len-pos", "config-error", ROOT, "max_position_embeddings",
         r"max_model_len \(\d+\) should be less than or equal to max_position_embeddings"),
    _sig("batched-tokens", "config-error", ROOT, "max_num_batched_tokens",
         r"max_num_batched_tokens \(\d+\) is smaller than max_model_len"),
    _sig("batch-divisible", "config-error", ROOT, "must be divisible by minimal possible batch size",
         r"real_train_batch_size .{0,60}must be divisible by minimal possible batch size"),
    _sig("batch-ge-mini", "config-error", ROOT, "ppo_mini_batch_size",
         r"train_batch_size .{0,60}must be >= .{0,40}ppo_mini_batch_size"),
    _sig("remove-padding", "config-error", ROOT, "use_remove_padding", r"you must enable `?use_remove_padding"),
    _sig("bucket", "config-error", ROOT, "too large to fit in the bucket", r"is too large to fit in the bucket"),
    _sig("not-supported", "config-error", ROOT, "is not supported", r"assertionerror: (\S+) is not supported"),
    _sig("hybrid-engine", "config-error", ROOT, "hybrid_engine", r"assert not self\.hybrid_engine"),
    _sig("resume-world-size", "config-error", ROOT, "world_size_",
         r"(?:filenotfounderror|no such file or directory).{0,300}model_world_size_\d+_rank_\d+\.pt"),
    # a data file that does not exist (in the container, on this node) is configuration, not data content, even
    # after verl's config checks passed (they do not open files): verl/utils/dataset/rl_dataset.py
    # _read_files_and_tokenize -> datasets.load_dataset / pyarrow
    _sig("data-missing", "config-error", ROOT, (".parquet", ".json", ".csv", ".arrow", "data files"),
         r"(?:filenotfounderror|no such file or directory|unable to find|failed to open local file|does not exist)"
         r"[^\n]{0,200}\.(?:parquet|jsonl?|csv|arrow)\b|datafilesnotfounderror|no \(supported\) data files"),
    # the Hub validator rejects a local path that does not exist: the model dir is not visible in the container
    # (huggingface_hub validate_repo_id, transformers cached_file)
    _sig("model-path", "config-error", ROOT, ("hfvalidationerror", "id must", "path_or_model_id",
                                                "valid model identifier", "is not the path to a directory"),
         r"hfvalidationerror|repo[ _]id must (?:be in the form|use alphanumeric)|incorrect path_or_model_id"
         r"|is not a local folder and is not a valid model identifier"
         # (a missing optional file, "... generation_config.json. Using default generation config.", is a warning)
         r"|it looks like /\S+ is not the path to a directory containing a file named (?:config|tokenizer_config)\.json"
         r"(?!.*using default)"),
    # a Ray worker that cannot register with its own raylet right after start-up: the worker pool is sized to
    # the host's CPUs, more than the cgroup / Slurm allocation gives (ray core_worker.cc / worker_pool.cc)
    _sig("raylet-register", "config-error", ROOT, ("raylet", "have not registered"),
         r"failed to register worker.{0,60}to raylet|unable to register worker with raylet"
         r"|have not registered within the timeout"),
    _sig("resume-megatron", "config-error", ROOT, ("no such file", "filenotfounderror"),
         r"(?:filenotfounderror|no such file or directory).{0,300}(?:common\.pt|\.metadata|metadata\.json)"),
    # ---- data
    _sig("seq-too-long", "data-error", ROOT, "is larger than max_length",
         r"sequence_length=(\d+) is larger than max_length=(\d+)"),
    _sig("prompt-too-long", "data-error", ROOT, "maximum context length",
         r"prompt length \((\d+)\) exceeds the model's maximum context length"),
    _sig("dapo-give-up", "data-error", ROOT, "generated too many",
         r"generated too many\. please check if your data are too difficult"),
    _sig("parquet", "data-error", ROOT, ("arrowinvalid", "parquet", "datasetgenerationerror"),
         r"arrowinvalid|parquet magic bytes not found|could not open parquet input source|datasetgenerationerror"),
    _sig("data-schema", "data-error", ROOT, "keyerror",
         r"keyerror: '(?:prompt|data_source|reward_model|ability|extra_info|ground_truth)'"),
    # ---- network (strong)
    _sig("gcs-connect", "network", ROOT, "gcs", r"failed to connect to gcs at address ([^\s]+?)(?: within|\s|$)"),
    _sig("gcs-cluster-id", "network", ROOT, "gcs", r"failed to get cluster id from gcs server"),
    _sig("ray-no-instance", "network", ROOT, "running ray instance", r"could not find any running ray instance"),
    _sig("proxy", "network", ROOT, ("proxy", "tunnel connection failed"),
         r"proxyerror|cannot connect to proxy|tunnel connection failed"),
    _sig("hub", "network", ROOT, ("localentrynotfounderror", "we couldn't connect"),
         r"localentrynotfounderror|we couldn't connect to 'https?://([^'/]+)"),
    _sig("ssh", "network", ROOT, "ssh:",
         r"ssh: connect to host (\S+) port \d+: (?:connection timed out|connection refused|no route to host)"
         r"|ssh: could not resolve hostname (\S+?):"),
    _sig("swanlab-http-auth", "network", ROOT, "authenticationerror",
         r"authenticationerror: failed to initialize the swanlab client"),
    # ---- auth (fatal)
    _sig("no-tty-key", "auth-error", ROOT, "not configured", r"api[ _]key not configured \(no-tty\)"),
    _sig("swanlab-no-tty", "auth-error", ROOT, "no tty",
         r"failed to initialize swanlab in online mode: no tty"),
    _sig("prompt-no-tty", "auth-error", ROOT, "no-tty", r"cannot prompt for api key in no-tty environment"),
    _sig("bad-key", "auth-error", ROOT, ("login failed", "apikeyformaterror", "invalid character in api key", "api key length", "api key must be"),
         r"login failed: error api key|apikeyformaterror|invalid character in api key"
         r"|api key length must be \d+ characters|api key must be \d+ characters long"),
    _sig("stored-key", "auth-error", ROOT, "authenticationerror",
         r"authenticationerror: (?:stored api key is for|no api key provided)"),
    _sig("hf-gated", "auth-error", ROOT, ("gatedrepoerror", "401 client error"), r"gatedrepoerror|401 client error: unauthorized for url: https://huggingface"),
    # ---- auth / network (non-fatal: tracker trouble while training continues)
    _sig("tracker-401", "auth-error", ROOT, "401",
         r"(?:swanlab|wandb|api/house).{0,300}\b401\b", fatal=False),
    _sig("tracker-net", "network", ROOT, ("swanlab: network error", "retrying (retry(total=", "swanlab will resume uploads"),
         r"swanlab: network error|retrying \(retry\(total=.{0,300}/api/house/|swanlab will resume uploads",
         fatal=False),
    # ---- container
    _sig("no-such-container", "container-missing", ROOT, "no such", r"no such container: ?(\S+)|error: no such object: ?(\S+)"),
    _sig("container-not-running", "container-missing", ROOT, "is not running",
         r"error response from daemon: container (\S+) is not running"),
    _sig("docker-daemon", "container-missing", ROOT, "docker daemon",
         r"cannot connect to the docker daemon at \S+\. is the docker daemon running"),
    # ---- specific crash causes (crash-other, but root causes: beat collective symptoms)
    _sig("thread-limit", "crash-other", ROOT, ("resource temporarily unavailable", "can't start new thread", "pthread_create"),
         r"thread: resource temporarily unavailable|can't start new thread|pthread_create failed"
         r"|resource temporarily unavailable \[system:11\]"),
    _sig("illegal-memory", "crash-other", ROOT, "illegal memory access", r"illegal memory access"),
    _sig("device-assert", "crash-other", ROOT, "device-side assert", r"device-side assert"),
    _sig("segfault", "crash-other", ROOT, ("segmentation fault", "sigsegv"), r"segmentation fault|\bsigsegv\b|fatal python error: segmentation"),
    # /dev/shm too small (Docker's 64 MiB default): a DataLoader worker dies of SIGBUS. Not a host OOM (no
    # OOM killer, the host has RAM): crash-other, fixed by --shm-size / --ipc=host, never by memory rungs.
    _sig("shm", "crash-other", ROOT, ("shared memory", "bus error", "/dev/shm"),
         r"out of shared memory|insufficient shared memory|killed by signal: bus error|bus error.{0,120}\(shm\)"
         r"|unable to (?:open|allocate|map|write to) shared memory|shared memory object.{0,160}(?:no space left|cannot allocate)"
         r"|no space left on device.{0,80}/dev/shm|/dev/shm.{0,80}no space left"),
    _sig("disk-full", "crash-other", ROOT, "no space left on device", r"no space left on device"),
    # device absent / not mounted / not visible (codes: dapo_ops/device_codes.py)
    _sig("device-unavailable", "crash-other", ROOT, ("error code", "ret", "aclerror", "curesult", "cuda_error",
                                                     "no cuda", "aclrtsetdevice"),
         _UNAVAIL_CODE_PAT + r"|no cuda gpus are available|aclrtsetdevice.{0,60}(?:failed|error)",
         finder=_CODE_FINDER),
    # operator / AI Core / runtime execution fault (kernel bug, version mismatch): stop, no memory rung
    _sig("kernel-fault", "crash-other", ROOT, ("error code", "ret", "aclerror"), _KERNEL_CODE_PAT,
         finder=_CODE_FINDER),
    # ---- collectives (usually a symptom of another rank's failure)
    _sig("watchdog", "hccl-timeout", COLLECTIVE, "watchdog caught collective operation timeout",
         r"watchdog caught collective operation timeout: work(?:nccl|hccl)\(seqnum=(\d+)"),
    _sig("coll-failed", "hccl-timeout", COLLECTIVE, "operations have failed or timed out",
         r"some (?:nccl|hccl) operations have failed or timed out"),
    _sig("nccl-error", "hccl-timeout", COLLECTIVE, "nccl",
         r"nccl error in:|ncclsystemerror|ncclinternalerror|ncclremoteerror|ncclunhandledcudaerror"
         r"|nccl communicator was aborted"),
    _sig("dist-backend", "hccl-timeout", COLLECTIVE, "distbackenderror", r"distbackenderror"),
    _sig("dist-store", "hccl-timeout", COLLECTIVE, "diststoreerror", r"diststoreerror"),
    _sig("hccl-func", "hccl-timeout", COLLECTIVE, "hccl", r"hccl function error: (\w+)|ops function error: hccl\w*"
         r"|\bhccl\w*(?:\([^)\n]{0,80}\))? (?:failed|error)[,:]? ?(?:with )?(?:error code(?: is)?|ret(?:urn)? ?=) ?-?\d+"),
    # HCCL / HCCP codes by family (EIxxxx, EJxxxx, torch_npu ERR02xxx / ERRss200, ACL 507057), not a list
    _sig("cann-hccl", "hccl-timeout", COLLECTIVE, ("error code", "ret", "aclerror", "getting socket", "notify register",
                                                   "hccp", "hccl"),
         _COMM_CODE_PAT + r"|getting socket times out|wait execution of the notify register times out"
         r"|failed to initialize the hccp process|hccl error: ", finder=_CODE_FINDER),
    # ---- weak network: exception lines only
    _sig("net-exc", "network", WEAK, ("error", "exception"),
         r"(?m)^\s*(?:[\w.]+\.)?(?:connectionrefusederror|connectionreseterror|connectionerror|maxretryerror"
         r"|gaierror|timeouterror|nameresolutionerror|newconnectionerror|sslerror)\b.*"
         r"|^\s*[\w.]*(?:error|exception): .{0,200}(?:connection refused|connection timed out|no route to host"
         r"|name or service not known|temporary failure in name resolution|max retries exceeded with url)"),
    # ---- generic crash evidence
    _sig("actor-died", "crash-other", GENERIC, ("died", "system_error"),
         r"actordiederror|the actor died unexpectedly|the worker died unexpectedly"
         r"|a worker died or was killed|worker exit type: system_error"),
    _sig("engine-start", "crash-other", GENERIC, "engine",
         r"enginecore failed to start|engine core initialization failed"),
    _sig("exception", "crash-other", GENERIC, ("error", "exception", "interrupt"),
         r"(?m)^[^\S\n]*(?:(?:error|critical) [\d-]+ [\d:.]+ \[[^\]\n]*\] )?"
         r"(?!ray\.exceptions\.raytaskerror)[a-z_][\w.]*(?:error|exception|interrupt)(?:\([^)\n]*\))?:[^\n]*"),
)

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


def _action_text(cls: str, kind: str, d: dict) -> str:
    if cls == "oom-device":
        if kind == "stop":
            return (f"stop: device OOM in {d.get('phase')}, which no memory rung shrinks; relaunch with the fix in "
                    "the hint (load checkpoint shards to CPU), never retried unchanged")
        return (f"retry from the last checkpoint with the next memory rung for phase {d.get('phase', 'unknown')} "
                "(the ladder per phase); stop with suggestions when none is left")
    if cls == "oom-kv-cache":
        return {
            "lower": "lower rollout gpu_memory_utilization (then max_model_len) and retry; never offload/recompute",
            "raise": "KV cache smaller than one max-length sequence: raise rollout gpu_memory_utilization if the "
                     "device has headroom, else lower max_model_len / max_response_length; never offload",
            "cleanup": "clean up leftover processes on the devices (ray stop --force, stale workers), then relaunch "
                       "unchanged; lower gpu_memory_utilization only if others really use the memory",
        }.get(d.get("kv_direction", "lower"), "adjust rollout memory")
    if cls == "oom-ray":
        return ("host RAM exhausted (Ray memory monitor): remove ladder-added offload and retry once, else stop "
                "and reduce host memory use")
    if cls == "oom-host":
        return ("kernel/cgroup OOM killer: remove ladder-added offload and retry once from the last complete "
                "checkpoint, else stop and raise the container --memory limit")
    if cls == "config-error":
        key = d.get("key")
        return f"stop: fix the configuration{' (' + key + ')' if key else ''}; never retried unchanged"
    if cls == "data-error":
        return "stop: the dataset violates a limit; filter/truncate the data or raise the limit; never retried unchanged"
    if cls == "network":
        if kind == "keep-running":
            return "keep running: tracker network trouble is non-fatal; alert only"
        return "clean up and retry once after checking connectivity (Ray head, proxy, hub, tracker)"
    if cls == "hccl-timeout":
        return "clean up (ray stop --force) and retry once; check the collective network / HCCL env if it recurs"
    if cls == "container-missing":
        return "stop polling: the container is gone or stopped; recreate and resume only on explicit request"
    if cls == "auth-error":
        if kind == "keep-running":
            return "keep running: tracker upload rejected (401) while training continues; alert, rotate the key"
        return "stop: tracker credentials missing or invalid; pass the key as an env var (or use local mode), then relaunch"
    if cls == "success":
        return "done: the run reached its final step"
    # crash-other
    if d.get("inconclusive"):
        return "no failure in the log text; if the process is alive the no-progress timer decides (hang)"
    return "stop and report the innermost error; no memory escalation"


def _hint(cls: str, kind: str, d: dict) -> str:
    step = d.get("step")
    at = f" at step {step}" if step is not None else ""
    phase = d.get("phase")
    inph = f" in {phase}" if phase else ""
    if cls == "oom-device" and phase == "checkpoint-load":
        return (f"Accelerator memory ran out while loading a checkpoint on resume{at}: the saved shards are "
                "torch.load()ed straight onto the device (no map_location) while the colocated rollout already holds "
                "its share, so offload/recompute do not shrink it and dapo-ops does not loop the ladder. Relaunch with "
                "a verl that loads shards to CPU (map_location='cpu'), or with a lower "
                "actor_rollout_ref.rollout.gpu_memory_utilization for the resume; keep trainer.resume_mode=auto and "
                "the same world size, and check that the newest global_step_N is complete.")
    if cls == "oom-device" and phase == "weight-sync":
        return (f"Accelerator memory ran out in the actor->rollout weight sync{at} (the rollout's sleep-mode wake-up "
                "re-allocates its weights and KV cache while the actor's state is still on the device). dapo-ops "
                "follows the weight-sync ladder: lower actor_rollout_ref.rollout.gpu_memory_utilization, then actor "
                "offload (actor_rollout_ref.actor.fsdp_config.param_offload=True / optimizer_offload=True) so the "
                "actor's state leaves before the rollout wakes. Recompute does not change this peak.")
    if cls == "oom-device":
        extra = ""
        if phase == "log-prob":
            extra = (" For a log-prob OOM also lower actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu "
                     "(and .ref.) to 1 or log_prob_max_token_len_per_gpu.")
        elif d.get("role") == "critic":
            extra = (" With a critic also offload it: critic.model.fsdp_config.param_offload=True / "
                     "optimizer_offload=True (0.9.1: critic.fsdp.*) and critic.ppo_micro_batch_size_per_gpu=1.")
        return (f"Accelerator memory ran out{inph}{at}. dapo-ops retries with the next rung of the memory ladder: "
                "offload (FSDP actor_rollout_ref.actor.fsdp_config.param_offload=True and optimizer_offload=True, "
                "actor_rollout_ref.ref.fsdp_config.param_offload=True; Megatron actor_rollout_ref.actor.megatron."
                "param_offload=True / optimizer_offload=True), then recompute (actor_rollout_ref.model."
                "enable_gradient_checkpointing=True, actor_rollout_ref.actor.entropy_checkpointing=True; Megatron "
                "override_transformer_config.recompute_granularity=full). If both are on, shrink: "
                "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1 or a lower ppo_max_token_len_per_gpu (never "
                "below max_prompt_length + max_response_length), raise ulysses_sequence_parallel_size, or use "
                "bigger devices; PYTORCH_CUDA_ALLOC_CONF / PYTORCH_NPU_ALLOC_CONF=expandable_segments:True helps "
                "fragmentation. Rollout gpu_memory_utilization does not change a training OOM." + extra)
    if cls == "oom-kv-cache":
        dirn = d.get("kv_direction")
        if dirn == "raise":
            return ("The rollout engine's KV cache cannot hold one sequence of max_model_len (prompt + response). "
                    "If the device has headroom raise actor_rollout_ref.rollout.gpu_memory_utilization (e.g. 0.5 -> "
                    "0.7); otherwise lower actor_rollout_ref.rollout.max_model_len / data.max_response_length, or "
                    "raise actor_rollout_ref.rollout.tensor_model_parallel_size. Training offload/recompute do not "
                    "change this allocation.")
        if dirn == "cleanup":
            return ("Free device memory at rollout start-up is below the requested gpu_memory_utilization: "
                    "usually leftovers of the previous attempt. Run `ray stop --force` in the container, kill the "
                    "recorded PIDs, check `npu-smi info` / `nvidia-smi` (on NPU wait ~10 s), then relaunch "
                    "unchanged. Lower actor_rollout_ref.rollout.gpu_memory_utilization only if another job really "
                    "uses that memory. Training offload/recompute are irrelevant.")
        return ("The rollout engine (vLLM / vllm-ascend) ran out of device memory while allocating its weights "
                "or KV cache. Lower actor_rollout_ref.rollout.gpu_memory_utilization (e.g. 0.85 -> 0.75 -> 0.65; "
                "0.6-0.8 on Ascend) and/or actor_rollout_ref.rollout.max_model_len. Training offload/recompute do "
                "not change this allocation.")
    if cls == "oom-ray":
        node = f" on node {d['node']}" if d.get("node") else ""
        if phase == "checkpoint-save":
            ck = f" global_step_{d['ckpt_step']}" if d.get("ckpt_step") is not None else " the newest checkpoint"
            return (f"Ray's memory monitor killed a worker while saving a checkpoint{node}: host RAM ran out and"
                    f"{ck} may be incomplete, so resume from the previous complete global_step_N. Save less "
                    "(actor_rollout_ref.actor.checkpoint.save_contents=['model']) or add host RAM. Do not add "
                    "offload (it moves parameters and optimizer state into host RAM); raising "
                    "RAY_memory_usage_threshold is not a fix.")
        return (f"Ray's memory monitor killed a task{inph}{node}: host RAM, not device memory, ran out. Remove "
                "ladder-added offload, then reduce host memory: data.gen_batch_size, actor_rollout_ref.rollout.n, "
                "data.max_response_length, fewer rollout workers; use jemalloc "
                "(LD_PRELOAD=/usr/local/lib/libjemalloc.so.2) or add host RAM. Raising RAY_memory_usage_threshold "
                "or RAY_memory_monitor_refresh_ms=0 only hides it.")
    if cls == "oom-host":
        ck = (f" The last lines were a checkpoint save: global_step_{d['ckpt_step']} may be partial; resume from "
              "the previous complete one." if phase == "checkpoint-save" and d.get("ckpt_step") is not None else "")
        return (f"The kernel / cgroup OOM killer SIGKILLed the training process{at} (exit 137, no traceback). "
                "Confirm with `docker inspect -f '{{.State.OOMKilled}}' <container>` or `dmesg | grep -i 'killed "
                "process'`. Remove ladder-added offload (it uses host RAM), lower host-side memory "
                "(data.gen_batch_size, dataloader workers, actor_rollout_ref.actor.checkpoint.save_contents), and "
                "raise the container limit (docker run --memory / --shm-size)." + ck)
    if cls == "config-error":
        key = d.get("key")
        cause = d.get("cause")
        if cause == "data-missing":
            path = f" ({d['path']})" if d.get("path") else ""
            return (f"A dataset file does not exist where the run reads it{path}: verl's config checks passed, but "
                    "they never open files. Run the data preparation (e.g. examples/data_preprocess/gsm8k.py "
                    "--local_dir ...) or point data.train_files / data.val_files to files that exist inside the "
                    "container on every node (`dapo-ops prepare`, preflight checks them); then relaunch.")
        if cause == "model-path":
            return ("The model path is not a directory inside the container, so transformers / huggingface_hub took "
                    "it for a Hub repo id and rejected it: the host path is not mounted (docker -v) or is misspelt. "
                    "Set actor_rollout_ref.model.path to the path as seen INSIDE the container (check with `ls` via "
                    "docker exec); preflight checks it. Not a network problem.")
        if cause == "ray-cpus":
            return ("A Ray worker could not register with its own raylet right after start-up: ray.init() sized the "
                    "worker pool to all host CPUs while the cgroup / Slurm allocation grants fewer (or the pids "
                    "limit is hit). Set ray_kwargs.ray_init.num_cpus (older verl: ray_init.num_cpus) to the CPUs "
                    "really available (SLURM_CPUS_PER_TASK / nproc), `ray stop --force`, then relaunch. Not the "
                    "network, not memory.")
        if cause == "stale-key":
            return (f"Hydra rejected the override {key!r}: the key does not exist in the installed verl's schema "
                    "(renamed or removed, e.g. megatron.grad_offload is gone in 0.9.1). Drop it or use the current "
                    "key (param_offload / optimizer_offload); never prepend '+' blindly (it creates a key nothing "
                    "reads). Validate overrides with `dapo-ops` preflight before launch.")
        if cause == "gpus":
            have = f" ({d['available']:g} available, {d['desired']:g} requested)" if "desired" in d else ""
            return (f"Ray has fewer devices than the run asks for{have}: set trainer.nnodes x trainer.n_gpus_per_node "
                    "(one-step-off: plus rollout.nnodes x rollout.n_gpus_per_node, the pools add up) to the real "
                    "cluster, or join the missing nodes. If the shortfall is fractional (7.0 < 8) stale Ray actors "
                    "of a previous attempt still hold devices: `ray stop --force` first.")
        if cause == "tp":
            ws = f" ({d['world_size']} devices, TP {d['tp']})" if "tp" in d else ""
            return (f"Rollout tensor parallel size must divide the rollout device count{ws}: set "
                    "actor_rollout_ref.rollout.tensor_model_parallel_size to a divisor of it (e.g. 1 on a single "
                    "device; one-step-off: of rollout.n_gpus_per_node x rollout.nnodes).")
        if cause == "token-budget":
            need = f" ({d['value']} < {d['need']})" if "need" in d else ""
            return (f"A dynamic-batch token budget is below one padded sequence{need}: set "
                    "actor_rollout_ref.actor.ppo_max_token_len_per_gpu and *.log_prob_max_token_len_per_gpu >= "
                    "data.max_prompt_length + data.max_response_length (verl scripts use 2x / 3x that), or shorten "
                    "the lengths. The ladder never shrinks budgets below this bound.")
        if cause == "resume-layout":
            return ("Resume found a checkpoint saved with another world size / layout (shard names embed it). "
                    "Resume with the original trainer.nnodes x n_gpus_per_node (and one-step-off split), or set "
                    "trainer.resume_mode=disable / a fresh trainer.default_local_dir.")
        return (f"The configuration is rejected{': ' + key if key else ''}. Fix that value (see the evidence line) "
                "and relaunch; dapo-ops never retries a config error unchanged. Keys: Hydra names the failing "
                "override; topology keys are trainer.nnodes / trainer.n_gpus_per_node / "
                "actor_rollout_ref.rollout.tensor_model_parallel_size; budgets must stay >= max_prompt_length + "
                "max_response_length.")
    if cls == "data-error":
        if d.get("cause") == "schema":
            return ("A dataset row lacks a field verl's RL dataset reads (prompt, data_source, reward_model, "
                    "ability, extra_info): convert the parquet to verl's schema (data.prompt_key names the prompt "
                    "column). No retry unchanged.")
        if d.get("cause") == "too-difficult":
            return ("DAPO dynamic sampling gave up: too few prompt groups had a score spread within "
                    "max_num_gen_batches. Use easier data or a stronger model, or raise "
                    "algorithm.filter_groups.max_num_gen_batches (0 = unlimited).")
        size = f" ({d['length']} > {d['limit']} tokens)" if "limit" in d else ""
        return (f"A sample exceeds a length limit{size} (data.truncation=error) or the dataset is unreadable. Set "
                "data.filter_overlong_prompts=True, or data.truncation=left (or right/middle), or raise "
                "data.max_prompt_length, or clean the parquet. Memory settings are irrelevant; no retry unchanged.")
    if cls == "network":
        cause = d.get("cause")
        addr = d.get("address")
        if kind == "keep-running":
            return ("The tracker cannot upload right now but training continues. Nothing to restart; if it "
                    "persists fix DNS/proxy in the container or set SWANLAB_MODE=local and `swanlab sync` later.")
        if cause == "ray-head":
            return (f"The Ray head GCS{' at ' + addr if addr else ''} is unreachable. `ray stop --force` on all "
                    "nodes, check the head address and TCP 6379 (firewall, no_proxy for cluster addresses), start "
                    "the head, then the workers. dapo-ops retries once after cleanup.")
        if cause == "hub":
            return ("The model/tokenizer download failed (proxy or hub unreachable). Use a local model path "
                    "with HF_HUB_OFFLINE=1, or fix https_proxy / no_proxy in the container env (no_proxy must "
                    "include localhost, 127.0.0.1 and the cluster addresses, or Ray's gRPC breaks too).")
        if cause == "tracker":
            return ("The tracker server is unreachable at init (swanlab reports it as an API-key problem after its "
                    "[HTTP] retry lines). Fix DNS/proxy (SWANLAB_API_HOST / SWANLAB_WEB_HOST for a private server) "
                    "or set SWANLAB_MODE=local and `swanlab sync` later.")
        if cause == "ssh":
            return (f"SSH to {addr or 'the host'} failed: check the inventory address/port, the network path "
                    "(proxy_jump) and that sshd runs.")
        return ("A connection failed. Check the endpoint in the evidence line, proxies (https_proxy / no_proxy) "
                "and DNS in the container; dapo-ops retries once.")
    if cls == "hccl-timeout":
        node = f" (node {d['node']})" if d.get("node") else ""
        if d.get("cause") == "hccp-busy":
            return ("EJ0001: the previous training process still holds the NPUs. `ray stop --force`, kill leftover "
                    "python processes, wait ~10 s, relaunch.")
        if d.get("init"):
            return (f"The collective communicator never came up{node}: ranks cannot reach each other. Check "
                    "HCCL_IF_IP / HCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME (NPU) or NCCL_SOCKET_IFNAME / IB (GPU), "
                    "firewall, docker --network host, `hccn_tool -i <dev> -tls -g`, the same CANN/driver on every "
                    "node, and that every rank started. dapo-ops retries once after cleanup.")
        return (f"A collective timed out or failed{node}{at} with no more specific error on any rank. dapo-ops "
                "retries once; if it recurs raise HCCL_CONNECT_TIMEOUT (e.g. 7200) / HCCL_EXEC_TIMEOUT (e.g. "
                "60000) or actor_rollout_ref.nccl_timeout, and look for a stalled rank.")
    if cls == "container-missing":
        return ("The container is gone or stopped (removed, engine/host restart, or wrong name/host in the "
                "inventory). Check `docker ps -a` on that host and the inventory's container name; inspect "
                "`docker inspect -f '{{.State.OOMKilled}} {{.State.ExitCode}}'` if it still exists. Recreate it "
                "and resume from the last complete checkpoint only on request"
                + (f" (last step seen: {step})." if step is not None else "."))
    if cls == "auth-error":
        if kind == "keep-running":
            return ("Metric upload is rejected (401) but training is healthy: do not restart. Re-issue the "
                    "SwanLab key and pass it as SWANLAB_API_KEY in the container env for the next run; the local "
                    "swanlog can be synced later (`swanlab sync`).")
        return ("The tracker has no usable key inside the container and there is no TTY to prompt (SSH + docker "
                "exec). Pass SWANLAB_API_KEY (or WANDB_API_KEY; HF_TOKEN for gated models) as an environment "
                "variable into the container, never as a Hydra override; for a private SwanLab server also "
                "SWANLAB_API_HOST and SWANLAB_WEB_HOST; or run with SWANLAB_MODE=local. Not retried until fixed.")
    if cls == "success":
        tail = " An error followed the final step (teardown); the result is complete." if d.get("teardown_error") else ""
        return (f"The run reached its final step{' ' + str(step) if step is not None else ''}"
                f"{' of ' + str(d['total']) if d.get('total') else ''}. Tracker warnings, if any, only mean late "
                f"or missing metrics (sync the local swanlog).{tail}")
    # crash-other
    cause = d.get("cause")
    if cause == "thread-limit":
        return ("A worker could not create threads (pids / ulimit -u limit), not OOM. Raise the container pids "
                "limit (docker run --pids-limit, or -1) / `ulimit -u`, or cap OMP_NUM_THREADS and Ray's thread "
                "counts; then relaunch.")
    if cause == "impossible-allocation":
        return (f"An allocation of {d.get('alloc_gib', 0):.0f} GiB is impossible on this device"
                f"{' (' + format(d['total_gib'], '.2f') + ' GiB total)' if d.get('total_gib') else ''}: a corrupted or "
                "overflowed tensor size (bad shape, negative length), not memory pressure. Memory escalation "
                "cannot fix it; check the lengths in the config (data.max_prompt_length, max_response_length) "
                "and the torch / torch_npu / CANN versions.")
    if cause == "sigkill":
        return ("The process was killed by SIGKILL (exit 137) without an OOM record: docker kill / docker stop / "
                "kill -9, not the OOM killer (OOMKilled=false or unknown). If `docker inspect` shows "
                "OOMKilled=true or dmesg has 'Out of memory: Killed process', it is oom-host instead.")
    if cause == "earlier-error":
        return ("One rank died with the error in the evidence before the others timed out in a collective: the "
                "timeouts are its symptom, so no retry of the collective helps. Fix that error (the worker logs "
                "under /tmp/ray/session_latest/logs have its full traceback); no memory escalation is done.")
    if cause == "disk-full":
        return ("A disk filled up (checkpoints or logs). Free space or point trainer.default_local_dir to a "
                "bigger volume; set trainer.max_actor_ckpt_to_keep to rotate checkpoints; then resume.")
    if cause == "shm":
        return ("Shared memory (/dev/shm) is too small: a DataLoader worker (or Ray's object store) died of SIGBUS. "
                "Not a host OOM and not device memory: Docker's default is 64 MiB. Recreate the container with a "
                "larger --shm-size (e.g. 32g) or --ipc=host, or lower data.dataloader_num_workers; then resume from "
                "the last complete global_step_N. Memory rungs do not help.")
    if cause == "device-unavailable":
        code = f" ({d['code']})" if d.get("code") else ""
        return (f"The accelerator is absent, busy or not visible in the container{code}: not memory pressure. Check "
                "`npu-smi info` / `nvidia-smi` inside the container, the device mounts (/dev/davinci*, "
                "/dev/davinci_manager, /dev/hisi_hdc, /dev/devmm_svm; --gpus), ASCEND_RT_VISIBLE_DEVICES / "
                "CUDA_VISIBLE_DEVICES and leftover processes holding the devices; then relaunch. No retry helps "
                "until then.")
    if cause == "kernel-fault":
        code = f" ({d['code']})" if d.get("code") else ""
        return (f"An operator / AI Core / runtime execution fault{code}: a kernel bug or a CANN / torch_npu / driver "
                "version mismatch, not OOM. Re-run with ASCEND_LAUNCH_BLOCKING=1 (CUDA_LAUNCH_BLOCKING=1) to find the "
                "op, read the plog under ~/ascend/log, check the CANN / torch_npu / vllm-ascend versions match. "
                "Memory escalation does not help.")
    if cause == "illegal-memory":
        return ("An illegal device memory access (a kernel bug or a version mismatch), not OOM. Re-run with "
                "CUDA_LAUNCH_BLOCKING=1 / ASCEND_LAUNCH_BLOCKING=1 to find the op; check torch / vLLM / CANN "
                "versions. Memory escalation does not help.")
    if d.get("inconclusive"):
        return ("The log holds no error and no completion. If the process is still running, only the supervisor's "
                "no-progress alarm (hang_timeout_s) can end a silent collective wait or a Ray head loop; otherwise "
                "look at the worker logs (/tmp/ray/session_latest/logs) for the cause.")
    return ("The run died with an error that matches no known class. Read the innermost error in the evidence "
            "(the worker logs under /tmp/ray/session_latest/logs have more); no memory escalation is done.")


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
    """The nearest ``ray::WorkerDict.<method>()`` line above ``i`` (names the phase for humans)."""
    for j in range(i - 1, max(-1, i - 80), -1):
        if "ray::" in log.low_line(j) and "()" in log.lines[j]:
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


# --------------------------------------------------------------------------- docs table

CLASS_TABLE: dict[str, dict] = {
    "oom-device": {
        "symptoms": ["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 13.91 GiB. GPU 0 has a total capacity of ...",
                     "RuntimeError: NPU out of memory. Tried to allocate 4.64 GiB (NPU 3; 60.96 GiB total capacity; ...)",
                     "ERR00006 PTA memory error / EL0004: Failed to allocate memory. / OPS function error: aclnnMatmul, error code is 207001",
                     "RuntimeError: CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:163 (vLLM wake-up inside update_weights: phase weight-sync)",
                     "torch.OutOfMemoryError: Tried to allocate 4.64 GiB. (inside load_checkpoint: phase checkpoint-load, stops)"],
        "cause": "Accelerator memory exhausted outside the rollout engine's own start-up: in the update, log-prob, weight sync (wake-up), model or checkpoint load/save. detail.phase names which (see OOM phases). An OOM text whose size exceeds the device total, or a device with 0 bytes total, is not memory pressure (crash-other).",
        "tool": "Retries from the last checkpoint with the next memory rung for that phase; stops with suggestions when none is left (the only class that escalates). Phase checkpoint-load stops at once (`stop`): no rung shrinks torch.load onto the device.",
        "you": "Nothing while the ladder works. When it stops: `*_micro_batch_size_per_gpu=1`, lower `ppo_max_token_len_per_gpu` (>= prompt + response), raise `ulysses_sequence_parallel_size`, or use bigger devices; checkpoint-load: load shards to CPU (map_location) or lower the rollout share for the resume.",
    },
    "oom-kv-cache": {
        "symptoms": ["ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` ...",
                     "The model's max seq len (8192) is larger than the maximum number of tokens that can be stored in KV cache (6048).",
                     "ValueError: Free memory on device (8.0/64.0 GiB) on startup is less than desired GPU memory utilization (0.9, 57.6 GiB).",
                     "NPU out of memory inside _allocate_kv_cache_tensors / initialize_kv_cache, then EngineCore failed to start.",
                     "[torch_memory_saver.cpp] CUresult error: 2 (out of memory) then 'Async request to resume_memory_occupation timed out'"],
        "cause": "The rollout engine (vLLM / vllm-ascend / SGLang) cannot fit its weights + KV cache: at start-up, while generating, or when its allocator reports only a driver result code (CUresult 2, ACL 207001) on re-mapping its memory.",
        "tool": "Changes rollout `gpu_memory_utilization` in the direction in detail.kv_direction (lower / raise / cleanup first) and resumes; never offloads.",
        "you": "`lower`: actor_rollout_ref.rollout.gpu_memory_utilization 0.85 -> 0.75 -> 0.65 or max_model_len. `raise`: more utilisation if there is headroom, else lower max_model_len / data.max_response_length or raise rollout TP. `cleanup`: `ray stop --force`, check npu-smi / nvidia-smi for leftovers.",
    },
    "oom-host": {
        "symptoms": ["./run.sh: line 41:  1120 Killed   python3 -m verl.trainer.main_ppo ...",
                     "exit 137 with docker inspect State.OOMKilled=true",
                     "Out of memory: Killed process 1120 (python3) (kernel log)",
                     "Malloc pin memory failed, host out of memory",
                     "DataLoader worker (pid 912) is killed by signal: Killed."],
        "cause": "The kernel / cgroup OOM killer SIGKILLed the process (host RAM, not device memory), or host pinned memory ran out. A bare 137 with OOMKilled=false is `crash-other` (docker kill / stop); a SIGBUS from a small /dev/shm is `crash-other` (cause shm).",
        "tool": "Removes ladder-added offload and retries once from the last complete checkpoint; otherwise stops with suggestions.",
        "you": "Raise the container `--memory`, lower host-side batch / checkpoint memory; verify the newest global_step_N is complete.",
    },
    "oom-ray": {
        "symptoms": ["ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.",
                     "Memory on the node (IP: 192.0.2.91, ID: ...) ... exceeds the memory usage threshold of 0.95.",
                     "N worker(s) were killed due to the node running low on memory."],
        "cause": "Ray's host-memory monitor killed a task or worker (rollout workers or checkpoint saves).",
        "tool": "Removes ladder-added offload and retries once; never escalates offload (it uses host RAM).",
        "you": "Lower data.gen_batch_size / actor_rollout_ref.rollout.n / data.max_response_length, use jemalloc (LD_PRELOAD), save less (checkpoint.save_contents), or add RAM.",
    },
    "config-error": {
        "symptoms": ["Could not override 'actor_rollout_ref.rollout.n'. / Key 'n' is not in struct",
                     "ValueError: Total available GPUs 4.0 is less than total desired GPUs 32",
                     "AssertionError: rollout world_size: 1 is not divisible by infer_tp: 2",
                     "AssertionError: max_token_len must be greater than the sequence length.",
                     "FileNotFoundError: Unable to find '/root/data/gsm8k/train.parquet' (after 'All configuration checks passed')",
                     "HFValidationError: Repo id must be in the form 'repo_name' or 'namespace/repo_name': '/data/models/Qwen3-8B'",
                     "core_worker.cc: Failed to register worker to Raylet: IOError: [RayletClient] Unable to register worker with raylet."],
        "cause": "A key, value, topology or resource request does not fit the installed verl or the cluster; a data file or model directory that is not where the container looks (verl's config checks never open files); a Ray worker pool sized to more CPUs than the cgroup / Slurm allocation grants.",
        "tool": "Stops; never retries unchanged. detail.key names the failing key.",
        "you": "Fix the key named in the report (drop stale keys, set topology to the real cluster, rollout TP a divisor of the rollout devices, token budgets >= prompt + response; data.train_files / val_files and actor_rollout_ref.model.path as seen inside the container; ray_kwargs.ray_init.num_cpus = the CPUs really granted), then relaunch.",
    },
    "data-error": {
        "symptoms": ["NotImplementedError: sequence_length=1081 is larger than max_length=1024",
                     "Prompt length (N) exceeds the model's maximum context length (M).",
                     "... >= max_num_gen_batches=.... Generated too many. Please check if your data are too difficult."],
        "cause": "The dataset violates a length limit or cannot be read.",
        "tool": "Stops; memory settings are not touched.",
        "you": "data.filter_overlong_prompts=True, or data.truncation=left, or raise data.max_prompt_length, or clean the data.",
    },
    "network": {
        "symptoms": ["Failed to connect to GCS at address 192.0.2.104:6379 within 5 seconds.",
                     "requests.exceptions.ProxyError: ... Tunnel connection failed: 403 Forbidden",
                     "We couldn't connect to 'https://huggingface.co' to load this file",
                     "[HTTP] retry #5 ... then AuthenticationError: Failed to initialize the SwanLab client."],
        "cause": "Cannot reach the Ray head, the model hub, a proxy or the tracker.",
        "tool": "Cleans up and retries once; tracker trouble while steps continue is non-fatal (keep running).",
        "you": "Check the head address and TCP 6379, https_proxy / no_proxy in the container, HF_HUB_OFFLINE=1 with a local model, SWANLAB_MODE=local.",
    },
    "hccl-timeout": {
        "symptoms": ["Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, ... Timeout(ms)=600000)",
                     "HCCL function error: hcclCommInitRootInfoConfig(...), error code is 4 / ERR02200 DIST call hccl api failed",
                     "EI0006: Getting socket times out. / EJ0001: Failed to initialize the HCCP process.",
                     "EI0009: Transport init error. / RuntimeError: HCCL error: internal error (any EIxxxx / EJxxxx, ERR02xxx)"],
        "cause": "A collective (HCCL / NCCL) failed or timed out and no rank shows a more specific error. HCCL codes are read by family (EI HCCL, EJ HCCP, torch_npu ERR02xxx DIST), not from a list; EI0011 (HCCL device memory) is an OOM.",
        "tool": "Cleans up and retries once; an OOM or crash on any rank is classified instead.",
        "you": "Init failures: HCCL_IF_IP / HCCL_SOCKET_IFNAME / NCCL_SOCKET_IFNAME, firewall, --network host, same CANN everywhere. Mid-run: HCCL_CONNECT_TIMEOUT / HCCL_EXEC_TIMEOUT / actor_rollout_ref.nccl_timeout.",
    },
    "container-missing": {
        "symptoms": ["Error response from daemon: No such container: verl-train",
                     "Error: No such object: verl-train",
                     "Error response from daemon: Container 3f2a... is not running"],
        "cause": "The container was removed or stopped (engine / host restart), or the inventory names the wrong container or host.",
        "tool": "Stops polling and reports the last step seen.",
        "you": "Check `docker ps -a` and the inventory; recreate the container and resume from the last complete checkpoint if wanted.",
    },
    "auth-error": {
        "symptoms": ["swanlab.error.KeyFileError: api key not configured (no-tty) ...",
                     "wandb.errors.errors.UsageError: api_key not configured (no-tty).",
                     "RuntimeError: Failed to initialize SwanLab in online mode: no TTY is available for interactive login.",
                     "swanlab: swanlab api error (... '401 Authorization Required') while step: lines continue (non-fatal)"],
        "cause": "Tracker credentials are missing or invalid inside the container; there is no TTY to prompt.",
        "tool": "Fatal: stops, no retry until fixed. Non-fatal 401 during training: keeps running and alerts.",
        "you": "Pass SWANLAB_API_KEY (or WANDB_API_KEY) as an env var into the container (never as an override), SWANLAB_API_HOST / SWANLAB_WEB_HOST for a private server, or SWANLAB_MODE=local.",
    },
    "crash-other": {
        "symptoms": ["thread: Resource temporarily unavailable [system:11]",
                     "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
                     "exit 137 with OOMKilled=false and no Killed line (docker kill / stop)",
                     "Tried to allocate 8388608.00 GiB (impossible size: corruption, not OOM)",
                     "DataLoader worker (pid 412877) is killed by signal: Bus error. ... out of shared memory (cause shm)",
                     "EL0001 device absent / error code is 107001 / NPU 0; 0 bytes total capacity (cause device-unavailable)",
                     "EZ9999: Inner Error! ... aivec error / error code is 507035 (cause kernel-fault)"],
        "cause": "A fatal error that matches no other class: thread limits, segfaults, SIGKILL without OOM, corrupted sizes, a small /dev/shm (SIGBUS), a device that is absent or not mounted, an operator / AI Core fault.",
        "tool": "Stops and reports the innermost error; no memory escalation.",
        "you": "Read the evidence; for thread limits raise --pids-limit / ulimit -u or cap OMP_NUM_THREADS; for SIGKILL check who stopped the container; shm: --shm-size / --ipc=host; device-unavailable: the device mounts and ASCEND_RT_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES; kernel-fault: matching CANN / torch_npu / driver versions.",
    },
    "success": {
        "symptoms": ["step:300 ... with Total training steps: 300 (or Training Progress: 100%)",
                     "Final validation metrics: {...}",
                     "exit 0 (tracker warnings such as 'swanlab: network error' are ignored)",
                     "[ERROR] TBE Subprocess[task_distribute] raise error[], main process disappeared! / EZ9999 after the final step (teardown)"],
        "cause": "The run reached its final step.",
        "tool": "Marks the run succeeded; never restarts it.",
        "you": "Nothing; sync the local swanlog if the tracker missed metrics.",
    },
}


def troubleshooting_md() -> str:
    """Render docs/troubleshooting.md from :data:`CLASS_TABLE` (the doc is generated, not hand-edited)."""
    out = [
        "# Troubleshooting: failure classes",
        "",
        "<!-- generated by `python -m dapo_ops.classify --troubleshooting-md > docs/troubleshooting.md`;"
        " edit CLASS_TABLE in dapo_ops/classify.py, not this file (tests/test_docs_troubleshooting.py checks it) -->",
        "",
        "`dapo-ops classify LOGFILE [--exit-code N]` prints `class:` and `action:` first, then the evidence and a hint.",
        "The supervisor runs the same classifier after every attempt; `hang` is added from timing (no new `step:` line",
        "for `hang_timeout_s`), never from text.",
        "",
        "Precedence: success facts (last `step:N` = planned total, `Final validation metrics`, exit 0) -> container",
        "state (`OOMKilled`) -> the earliest specific root cause on any rank -> collective timeouts -> crash-other.",
        "Echoed overrides, `+ cmd` shell traces, the printed config and Ray's OOM-killer boilerplate are never evidence.",
        "An error followed by later `step:` lines did not stop the run (non-fatal). Exit 137 counts as `oom-host` only",
        "with evidence (`OOMKilled=true`, a shell `Killed` line, kernel OOM text); a bare 137 is `crash-other`",
        "(SIGKILL from `docker kill` / `docker stop` / `kill -9`). A log with no evidence at all (silence) gives",
        "`crash-other` with `detail.inconclusive=true`: the supervisor's no-progress timer decides `hang`.",
        "",
        "Verdict detail keys (when known): `step` (last `step:N`), `total` (planned steps), `phase` (see OOM phases",
        "below), `role` (`critic` / `ref`), `kv_direction` (`lower` / `raise` / `cleanup`), `node` (IP of the failing",
        "Ray node), `address` (remote endpoint), `key` (failing Hydra key), `path` (missing data file), `fatal`",
        "(auth-error / network), `init` (collective failed at communicator set-up), `cause`, `code` (the device error",
        "code read), `alloc_gib` / `total_gib`, `exit_code`, `ckpt_step` (newest `global_step_N` seen; may be",
        "partial), `inconclusive`, `teardown_error`, and numbers from the message (`available` / `desired`,",
        "`world_size` / `tp`, `value` / `need`, `length` / `limit`).",
        "",
        "| class | action kind | what dapo-ops does |",
        "|---|---|---|",
    ]
    for cls in CLASSES:
        row = CLASS_TABLE[cls]
        out.append(f"| `{cls}` | `{DEFAULT_ACTION_KIND[cls]}` | {row['tool']} |")
    for cls in CLASSES:
        row = CLASS_TABLE[cls]
        out += ["", f"## {cls}", "", "**Symptoms**", ""]
        out += [f"- `{s}`" if "`" not in s else f"- `` {s} ``" for s in row["symptoms"]]
        out += ["", f"**Cause.** {row['cause']}", "",
                f"**What dapo-ops does** (`{DEFAULT_ACTION_KIND[cls]}`). {row['tool']}", "",
                f"**What you do.** {row['you']}"]
    out += _phase_section() + _codes_section()
    for extra in _extra_sections():
        out += ["", extra.rstrip("\n")]
    out.append("")
    return "\n".join(out)


PHASE_SIGNS: dict[str, str] = {
    "model-load": "`init_model`, `_build_model_optimizer`, `from_pretrained`, `load_state_dict`",
    "checkpoint-load": "`load_checkpoint` / `_load_checkpoint` (resume), `Resuming from ...global_step_N`",
    "checkpoint-save": "`save_checkpoint`, `Saving checkpoint to`, `local_global_step_folder`",
    "rollout-init": "vLLM / SGLang engine start: `determine_available_memory`, `initialize_kv_cache`, `profile_run`, `_build_rollout`",
    "weight-sync": "`update_weights`, `wake_up`, `resume` (vLLM sleep mode), `resume_memory_occupation` (SGLang), `sharding_manager`, `checkpoint_engine`",
    "generation": "`generate_sequences`, `generate`, vLLM `execute_model` / sampler",
    "log-prob": "`compute_log_prob`, `compute_ref_log_prob`, old / ref log-prob",
    "update": "`update_actor` / `update_policy` / `update_critic`, `train_mini_batch`, forward / backward / optimizer step",
    "unknown": "no frame or progress line names a phase",
}
"""What identifies each OOM phase in a log (docs/troubleshooting.md "OOM phases")."""
assert tuple(PHASE_SIGNS) == PHASES

# Modules (in this package) that may add a section to docs/troubleshooting.md: a module-level
# ``troubleshooting_section() -> str`` (markdown starting with ``## ``) is rendered after the OOM phases and the
# device-code families, in this order. The memory ladder (dapo_ops/ladder.py) adds its phase -> rungs table here.
DOC_SECTION_MODULES: tuple[str, ...] = ("ladder",)


def _phase_section() -> list[str]:
    out = ["", "## OOM phases", "",
           "`detail.phase` of a device OOM (and of host / Ray OOMs where known), read from the traceback frames of the",
           "whole call chain (the worker's and the driver's re-raised one; the first phase in this table wins when",
           "several are named) or, without frames, the nearest progress line. `dapo-ops classify` prints it as",
           "`phase:`; the supervisor records it in run.json (the attempt's `verdict.detail.phase`).", "",
           "| phase | what names it |", "|---|---|"]
    out += [f"| `{p}` | {PHASE_SIGNS[p]} |" for p in PHASES]
    return out


def _codes_section() -> list[str]:
    out = ["", "## Device error codes", "",
           "Ascend / CUDA failures often reach the log only as a code. The classifier reads the code's family",
           "(dapo_ops/device_codes.py), not a list of codes, and maps it to what the supervisor does: `memory` -> a",
           "device OOM (`oom-device`, or `oom-kv-cache` inside the rollout engine); `communication` -> `hccl-timeout`;",
           "`device-unavailable` (absent, busy, not mounted or not visible) and `kernel-fault` (operator / AI Core /",
           "runtime fault) -> `crash-other`, stop, no memory rung.", "",
           "| family | category | codes | source |", "|---|---|---|---|"]
    for fam, _rx, cat, meaning, src in _codes.FAMILIES:
        out.append(f"| {fam} | `{cat}` | {meaning} | {src} |")
    return out


def _extra_sections() -> list[str]:
    import importlib

    out = []
    for name in DOC_SECTION_MODULES:
        try:
            mod = importlib.import_module(f"{__package__ or 'dapo_ops'}.{name}")
        except ImportError:
            continue
        fn = getattr(mod, "troubleshooting_section", None)
        if callable(fn):
            out.append(fn())
    return out


def _main(argv: list[str]) -> int:
    if argv[:1] == ["--troubleshooting-md"]:
        sys.stdout.write(troubleshooting_md())
        return 0
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m dapo_ops.classify LOGFILE [--exit-code N] | --troubleshooting-md")
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
