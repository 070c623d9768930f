"""The failure classifier's signatures (:mod:`dapo_ops.core.classify`): one :class:`_Sig` per known error text,
with its class and precedence tier. Where a text comes from is noted at each signature.

STDLIB ONLY. Every regex runs on ONE lower-cased line; its needles (literals every match contains) or
``finder`` (a literal-prefixed regex) find the candidate lines first, so the cost grows with matching lines,
not with the bytes of the tail.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dapo_ops.core import device_codes as _codes

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


# A device OOM needs a device allocator's own words or a memory error CODE (dapo_ops/core/device_codes.py: EL0004,
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
    # device absent / not mounted / not visible (codes: dapo_ops/core/device_codes.py)
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
