"""The failure classifier's signatures (:mod:`dapo_ops.core.classify`), as data: one row of
:data:`SIGNATURE_ROWS` per known error text, with its class and precedence tier; where a text comes from is
noted at each row. :data:`SIGNATURES` is the table compiled (and checked) once, at import.

A row is ``(name, class, tier, needles, pattern)`` or ``(name, class, tier, needles, pattern, options)``:

``name``     unique; names the hit in tests, evidence and the per-class detail (``dapo_ops/core/classify/verdicts.py``)
``class``    one of :data:`dapo_ops.core.classify.verdict.CLASSES`
``tier``     precedence (:data:`ROOT` root causes, :data:`COLLECTIVE` collective symptoms, :data:`WEAK` weak
             network exception lines, :data:`GENERIC` generic crash evidence; ``dapo_ops/core/classify/decide.py``)
``needles``  a lower-case literal or a tuple of them; every match contains at least one (found with ``str.find``)
``pattern``  a regex run on ONE lower-cased line
``options``  :data:`NONFATAL` (the error does not stop a run: tracker trouble) and / or :data:`CODES` (also
             candidates: lines where the literal-prefixed error-code finder matches)

STDLIB ONLY. The needles (or the finder) find the candidate lines first, so the cost grows with matching lines,
not with the bytes of the tail. A bad row raises :class:`~dapo_ops.core.classify.verdict.ClassifierTableError`
when the package is imported.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dapo_ops.core.classify import device_codes as _codes
from dapo_ops.core.classify.verdict import CLASSES, ClassifierTableError

ROOT, COLLECTIVE, WEAK, GENERIC = 1, 2, 3, 4
TIERS = (ROOT, COLLECTIVE, WEAK, GENERIC)


@dataclass(frozen=True)
class Sig:
    """One compiled signature (a row of :data:`SIGNATURE_ROWS`)."""

    name: str
    cls: str
    tier: int
    needles: tuple  # lower-case literals; every match contains at least one (found with str.find)
    rx: re.Pattern  # applied to one lower-cased line
    fatal: bool = True
    finder: re.Pattern | None = None  # also candidates: lines where this literal-prefixed regex matches


# Candidate finder for error CODES (EZ9999, EI0009, ERR02200 ...): literal-prefixed, so re scans fast
CODE_FINDER = re.compile(r"e[ehijlz1-9ab]\d{4}\b|err0[0-4]\d{3}")
#: row options
NONFATAL = {"fatal": False}
CODES = {"finder": CODE_FINDER}


def _code_pat(category: str) -> str:
    return "|".join(rx for _fam, rx, cat, _m, _src in _codes.FAMILIES if cat == category)


# A device OOM needs a device allocator's own words or a memory error CODE (dapo_ops/core/classify/device_codes.py: EL0004,
# EI0011, torch_npu ERRss006, ACL 207001/207002/207018, CUresult 2): "memory" words alone never count, nor Ray's
# host-memory ray.exceptions.OutOfMemoryError (the lookbehind), nor torch_npu's informational
# "[ERROR] Get a block from the existing pool failed ... can be ignored".
DEVICE_OOM_PAT = (
    r"\b(?:cuda|npu|gpu|hip|xpu|mps) out of memory"
    r"|cuda error: out of memory"
    r"|(?<![\w.])outofmemoryerror: (?:cuda|npu|gpu|tried to allocate|allocation on device)"
    r"|\btorch\.(?:cuda\.|npu\.)?outofmemoryerror\b"
    r"|driver error:\s*out of memory"
    r"|cuda failure '?out of memory"  # NCCL's ncclUnhandledCudaError: its own buffers did not fit
    r"|cublas_status_alloc_failed|cudnn_status_alloc_failed"
    r"|" + _code_pat("memory")
)
DEVICE_OOM_RX = re.compile(DEVICE_OOM_PAT)
DEVICE_OOM_NEEDLES = ("out of memory", "outofmemoryerror", "err0", "el0004", "ei0011", "alloc_failed", "2070",
                       "curesult", "cuda_error_out", "cudaerrormemoryallocation")
# The allocator's own words (vs a bare result code: "CUresult error: 2", "error code is 207001")
OOM_WORDS_RX = re.compile(r"(?:cuda|npu|gpu|hip|xpu) out of memory|cuda error: out of memory|outofmemoryerror"
                          r"|driver error:\s*out of memory|cuda failure '?out of memory")
# a log record at warning level or below (vLLM / Python logging / glog): an OOM word in it is advice
WARNING_LINE_RX = re.compile(r"\s*(?:warning|warn|info|debug)\b|\s*\[?[wi]\d{4} |.{0,80}\b(?:user|future|deprecation)warning\b")
_COMM_CODE_PAT = _code_pat("communication")
_UNAVAIL_CODE_PAT = _code_pat("device-unavailable")
_KERNEL_CODE_PAT = _code_pat("kernel-fault")

# One row per known error text: (name, class, tier, needles, pattern[, options]); see the module docstring.
# Order does not matter (earliest line wins inside a tier); names are for tests and evidence.
SIGNATURE_ROWS: tuple[tuple, ...] = (
    # ---- device OOM (training vs rollout decided from frames)
    ("device-oom", "oom-device", ROOT, DEVICE_OOM_NEEDLES, DEVICE_OOM_PAT),
    # ---- rollout engine (vLLM / vllm-ascend) KV cache at start-up
    ("kv-no-blocks", "oom-kv-cache", ROOT, "cache blocks", r"no available memory for the cache blocks"),
    ("kv-maxlen", "oom-kv-cache", ROOT, "max seq len",
     r"to serve at least one request with the models?'s max seq len"
     r"|max seq len \(\d+\) is larger than the maximum number of tokens that can be stored in kv cache"),
    ("kv-free-below-util", "oom-kv-cache", ROOT, "on startup",
     r"free memory on device .{0,120}on startup is less than desired (?:gpu|npu) memory utilization"),
    ("sglang-mem", "oom-kv-cache", ROOT, "mem-fraction-static",
     r"not enough memory\. please try to increase --mem-fraction-static"),
    ("kv-profiling-dirty", "oom-kv-cache", ROOT, "not properly cleaned up",
     r"(?:gpu|npu|device) memory was not properly cleaned up before initializing the vllm instance"),
    # ---- Ray host-memory monitor (ray/exceptions.py OutOfMemoryError, raylet)
    # (Ray 2.0 raylet: "System memory low at node with IP <ip>. Used memory ... exceeds threshold <t>, killing
    # latest task ..."; Ray 1.x: "ray.memory_monitor.RayOutOfMemoryError: More than 95% of the memory on node
    # <n> is used" -- both the host RAM monitor, never the device)
    ("ray-oom", "oom-ray", ROOT, ("running low on memory", "killed due to memory pressure", "system memory low",
                                   "rayoutofmemoryerror"),
     r"running low on memory|workers? \(tasks / actors\) killed due to memory pressure \(oom\)"
     r"|system memory low at node .{0,300}killing|rayoutofmemoryerror: more than [\d.]+% of the memory on node"),
    ("ray-oom-node", "oom-ray", ROOT, "memory on the node (ip:",
     r"memory on the node \(ip: [^)]{0,80}\) .{0,400}exceeds the memory usage threshold"),
    # ---- kernel / cgroup OOM killer
    ("kernel-oom", "oom-host", ROOT, "out of memory",
     r"out of memory: kill(?:ed)? process|memory cgroup out of memory"),
    ("oom-kill-event", "oom-host", ROOT, ("oom-kill", "oom_reaper"), r"\boom-kill:|\boom_reaper\b"),
    ("pinned-host-oom", "oom-host", ROOT, "host out of memory", r"malloc pin memory failed, host out of memory"),
    # host RAM allocation failures (c10 DefaultCPUAllocator, Python / numpy MemoryError): host memory, not device
    ("host-alloc", "oom-host", ROOT, ("defaultcpuallocator", "memoryerror"),
     r"defaultcpuallocator: can't allocate memory|(?<![\w.])memoryerror(?::|\s*$)"),
    ("loader-killed", "oom-host", ROOT, "is killed by signal", r"dataloader worker \(pid \d+\) is killed by signal: killed"),
    # ---- config (Hydra / verl asserts / resources / resume layout)
    ("hydra-override", "config-error", ROOT, "could not override", r"could not override '([^']+)'"),
    ("hydra-struct", "config-error", ROOT, "is not in struct", r"key '([^']+)' is not in struct"),
    # OmegaConf on a structured (dataclass) config: "Key 'x' not in 'SomeConfig'"; a read of an absent key:
    # "ConfigAttributeError: Missing key x" (omegaconf/dictconfig.py _get_node; both followed by full_key:)
    ("omegaconf-key", "config-error", ROOT, ("not in '", "missing key"),
     r"key '([^']+)' not in '\w+'|config(?:attribute|key)error: missing key ([\w.\[\]-]+)"),
    ("hydra-append", "config-error", ROOT, "could not append",
     r"could not append to config\. an item is already at '([^']+)'"),
    ("hydra-parse", "config-error", ROOT, "error parsing override", r"error parsing override '([^']*)'"),
    # Hydra's wrapper line for any +/~ override that cannot merge (the OmegaConf reason follows on the next line)
    ("hydra-merge", "config-error", ROOT, "error merging override", r"error merging override [+~]*([\w.\[\]/@-]+)"),
    ("hydra-load", "config-error", ROOT, "could not load", r"in '[^']+': could not load '([^']+)'"),
    ("hydra-defaults", "config-error", ROOT, "no match in the defaults list", r"no match in the defaults list"),
    ("hydra-primary", "config-error", ROOT, "cannot find primary config", r"cannot find primary config '([^']+)'"),
    ("interpolation", "config-error", ROOT, "interpolation key",
     r"interpolation key '([^']+)' not found"),
    ("dataclass-kwarg", "config-error", ROOT, "unexpected keyword argument",
     r"\w*config\.__init__\(\) got an unexpected keyword argument '(\w+)'"),
    ("omegaconf-missing", "config-error", ROOT, "missing mandatory value",
     r"missing mandatory value: ?([\w.]+)"),
    ("omegaconf-type", "config-error", ROOT, ("could not be converted to", "is not a valid"),
     r"value '[^']*' (?:could not be converted to|is not a valid) "),
    ("gpus-less", "config-error", ROOT, "total available",
     r"total available (?:gpus|npus) ([\d.]+) is less than total desired (?:gpus|npus) ([\d.]+)"),
    ("tp-divisible", "config-error", ROOT, "infer_tp", r"world_size: ?(\d+) is not divisible by infer_tp: ?(\d+)"),
    ("n-gpus-zero", "config-error", ROOT, "must be greater than 0",
     r"([\w.]*(?:n_gpus_per_node|nnodes)) must be greater than 0"),
    ("separate-async", "config-error", ROOT, "separate async training",
     r"(?:must equal parameter_sync_step \* ppo_mini_batch_size|(?:nnodes|n_gpus_per_node) must be > 0"
     r"|please use nccl/nixl/mooncake, etc\. backend) in separate async training|"
     r"backend for separate async training"),
    ("rollout-mode", "config-error", ROOT, "rollout.mode", r"assert .{0,40}rollout\.mode == ['\"]async['\"]"),
    ("micro-batch", "config-error", ROOT, ("please set at least one of", "you have set both"),
     r"please set at least one of '([\w.]+)'|you have set both '([\w.]+)'"),
    ("token-budget", "config-error", ROOT, "max_token_len must be",
     r"max_token_len must be greater than the sequence length"),
    ("model-len-pos", "config-error", ROOT, "max_position_embeddings",
     r"max_model_len \(\d+\) should be less than or equal to max_position_embeddings"),
    ("batched-tokens", "config-error", ROOT, "max_num_batched_tokens",
     r"max_num_batched_tokens \(\d+\) is smaller than max_model_len"),
    ("batch-divisible", "config-error", ROOT, "must be divisible by minimal possible batch size",
     r"real_train_batch_size .{0,60}must be divisible by minimal possible batch size"),
    ("batch-ge-mini", "config-error", ROOT, "ppo_mini_batch_size",
     r"train_batch_size .{0,60}must be >= .{0,40}ppo_mini_batch_size"),
    ("remove-padding", "config-error", ROOT, "use_remove_padding", r"you must enable `?use_remove_padding"),
    ("bucket", "config-error", ROOT, "too large to fit in the bucket", r"is too large to fit in the bucket"),
    ("not-supported", "config-error", ROOT, "is not supported", r"assertionerror: (\S+) is not supported"),
    ("hybrid-engine", "config-error", ROOT, "hybrid_engine", r"assert not self\.hybrid_engine"),
    ("resume-world-size", "config-error", ROOT, "world_size_",
     r"(?:filenotfounderror|no such file or directory).{0,300}model_world_size_\d+_rank_\d+\.pt"),
    # a data file that does not exist (in the container, on this node) is configuration, not data content, even
    # after verl's config checks passed (they do not open files): verl/utils/dataset/rl_dataset.py
    # _read_files_and_tokenize -> datasets.load_dataset / pyarrow
    ("data-missing", "config-error", ROOT, (".parquet", ".json", ".csv", ".arrow", "data files"),
     r"(?:filenotfounderror|no such file or directory|unable to find|failed to open local file|does not exist)"
     r"[^\n]{0,200}\.(?:parquet|jsonl?|csv|arrow)\b|datafilesnotfounderror|no \(supported\) data files"),
    # the Hub validator rejects a local path that does not exist: the model dir is not visible in the container
    # (huggingface_hub validate_repo_id, transformers cached_file)
    ("model-path", "config-error", ROOT, ("hfvalidationerror", "id must", "path_or_model_id",
                                            "valid model identifier", "is not the path to a directory"),
     r"hfvalidationerror|repo[ _]id must (?:be in the form|use alphanumeric)|incorrect path_or_model_id"
     r"|is not a local folder and is not a valid model identifier"
     # (a missing optional file, "... generation_config.json. Using default generation config.", is a warning)
     r"|it looks like /\S+ is not the path to a directory containing a file named (?:config|tokenizer_config)\.json"
     r"(?!.*using default)"),
    # a Ray worker that cannot register with its own raylet right after start-up: the worker pool is sized to
    # the host's CPUs, more than the cgroup / Slurm allocation gives (ray core_worker.cc / worker_pool.cc)
    ("raylet-register", "config-error", ROOT, ("raylet", "have not registered"),
     r"failed to register worker.{0,60}to raylet|unable to register worker with raylet"
     r"|have not registered within the timeout"),
    ("resume-megatron", "config-error", ROOT, ("no such file", "filenotfounderror"),
     r"(?:filenotfounderror|no such file or directory).{0,300}(?:common\.pt|\.metadata|metadata\.json)"),
    # ---- data
    ("seq-too-long", "data-error", ROOT, "is larger than max_length",
     r"sequence_length=(\d+) is larger than max_length=(\d+)"),
    ("prompt-too-long", "data-error", ROOT, "maximum context length",
     r"prompt length \((\d+)\) exceeds the model's maximum context length"),
    ("dapo-give-up", "data-error", ROOT, "generated too many",
     r"generated too many\. please check if your data are too difficult"),
    ("parquet", "data-error", ROOT, ("arrowinvalid", "parquet", "datasetgenerationerror"),
     r"arrowinvalid|parquet magic bytes not found|could not open parquet input source|datasetgenerationerror"),
    ("data-schema", "data-error", ROOT, ("keyerror", "not in the dataset"),
     r"keyerror: '(?:prompt|data_source|reward_model|ability|extra_info|ground_truth)'"
     r"|keyerror: \"none of \[index\(\[.{0,200}\] are in the \[columns\]"
     r"|column '?[\w.-]+'? not in the dataset\. current columns in the dataset"),
    # ---- network (strong)
    ("gcs-connect", "network", ROOT, "gcs", r"failed to connect to gcs at address ([^\s]+?)(?: within|\s|$)"),
    ("gcs-cluster-id", "network", ROOT, "gcs", r"failed to get cluster id from gcs server"),
    ("ray-no-instance", "network", ROOT, "running ray instance", r"could not find any running ray instance"),
    ("proxy", "network", ROOT, ("proxy", "tunnel connection failed"),
     r"proxyerror|cannot connect to proxy|tunnel connection failed"),
    ("hub", "network", ROOT, ("localentrynotfounderror", "we couldn't connect"),
     r"localentrynotfounderror|we couldn't connect to 'https?://([^'/]+)"),
    ("http-transient", "network", ROOT, ("client error", "server error"),
     r"\b429 client error: too many requests|\b5\d\d server error: [^\n]{0,80}?for url: https?://"),
    ("ssh", "network", ROOT, "ssh:",
     r"ssh: connect to host (\S+) port \d+: (?:connection timed out|connection refused|no route to host)"
     r"|ssh: could not resolve hostname (\S+?):"),
    ("swanlab-http-auth", "network", ROOT, "authenticationerror",
     r"authenticationerror: failed to initialize the swanlab client"),
    # ---- auth (fatal)
    ("no-tty-key", "auth-error", ROOT, "not configured", r"api[ _]key not configured \(no-tty\)"),
    ("swanlab-no-tty", "auth-error", ROOT, "no tty",
     r"failed to initialize swanlab in online mode: no tty"),
    ("prompt-no-tty", "auth-error", ROOT, "no-tty", r"cannot prompt for api key in no-tty environment"),
    ("bad-key", "auth-error", ROOT, ("login failed", "apikeyformaterror", "invalid character in api key", "api key length", "api key must be"),
     r"login failed: error api key|apikeyformaterror|invalid character in api key"
     r"|api key length must be \d+ characters|api key must be \d+ characters long"),
    ("stored-key", "auth-error", ROOT, "authenticationerror",
     r"authenticationerror: (?:stored api key is for|no api key provided)"),
    ("hf-gated", "auth-error", ROOT, ("gatedrepoerror", "401 client error"), r"gatedrepoerror|401 client error: unauthorized for url: https://huggingface"),
    # ---- auth / network (non-fatal: tracker trouble while training continues)
    ("tracker-401", "auth-error", ROOT, "401",
     r"(?:swanlab|wandb|api/house).{0,300}\b401\b", NONFATAL),
    # (swanlab <= 0.7 "swanlab: swanlab api error, status code: 499"; 0.9 SDK "Upload failed due to network or
    # server issues, retrying automatically." / "swanlab: Upload recovered" / "[HTTP] retry #n")
    ("tracker-net", "network", ROOT, ("swanlab: network error", "retrying (retry(total=", "swanlab will resume uploads",
                                      "swanlab api error", "upload failed due to network", "upload recovered",
                                      "[http] retry #"),
     r"swanlab: network error|retrying \(retry\(total=.{0,300}/api/house/|swanlab will resume uploads"
     r"|swanlab: swanlab api error|upload failed due to network or server issues|swanlab: upload recovered"
     r"|swanlab\.\S*session\S* - \[http\] retry #\d+",
     NONFATAL),
    # ---- container
    ("no-such-container", "container-missing", ROOT, "no such", r"no such container: ?(\S+)|error: no such object: ?(\S+)"),
    ("container-not-running", "container-missing", ROOT, "is not running",
     r"error response from daemon: container (\S+) is not running"),
    ("docker-daemon", "container-missing", ROOT, "docker daemon",
     r"cannot connect to the docker daemon at \S+\. is the docker daemon running"),
    # ---- specific crash causes (crash-other, but root causes: beat collective symptoms)
    ("thread-limit", "crash-other", ROOT, ("resource temporarily unavailable", "can't start new thread", "pthread_create"),
     r"thread: resource temporarily unavailable|can't start new thread|pthread_create failed"
     r"|resource temporarily unavailable \[system:11\]"),
    ("illegal-memory", "crash-other", ROOT, "illegal memory access", r"illegal memory access"),
    ("device-assert", "crash-other", ROOT, "device-side assert", r"device-side assert"),
    ("segfault", "crash-other", ROOT, ("segmentation fault", "sigsegv"), r"segmentation fault|\bsigsegv\b|fatal python error: segmentation"),
    # /dev/shm too small (Docker's 64 MiB default): a DataLoader worker dies of SIGBUS. Not a host OOM (no
    # OOM killer, the host has RAM): crash-other, fixed by --shm-size / --ipc=host, never by memory rungs.
    ("shm", "crash-other", ROOT, ("shared memory", "bus error", "/dev/shm"),
     r"out of shared memory|insufficient shared memory|killed by signal: bus error|bus error.{0,120}\(shm\)"
     r"|unable to (?:open|allocate|map|write to) shared memory|shared memory object.{0,160}(?:no space left|cannot allocate)"
     r"|no space left on device.{0,80}/dev/shm|/dev/shm.{0,80}no space left"),
    # ENOSPC / EDQUOT, and torch.save's own words for a failed write (c10 inline_container.cc)
    # ("unexpected pos <a> vs <b>": torch.save's zip writer after a short write on a full shared filesystem)
    ("disk-full", "crash-other", ROOT, ("no space left on device", "disk quota exceeded", "storagefull",
                                        "pytorchstreamwriter failed writing", "unexpected pos"),
     r"no space left on device|disk quota exceeded|\bstoragefull\b|pytorchstreamwriter failed writing file"
     r"|inline_container\.cc:\d+\] \. unexpected pos \d+ vs \d+"),
    # device absent / not mounted / not visible (codes: dapo_ops/core/classify/device_codes.py)
    ("device-unavailable", "crash-other", ROOT, ("error code", "ret", "aclerror", "curesult", "cuda_error",
                                                 "no cuda", "aclrtsetdevice"),
     _UNAVAIL_CODE_PAT + r"|no cuda gpus are available|aclrtsetdevice.{0,60}(?:failed|error)",
     CODES),
    # operator / AI Core / runtime execution fault (kernel bug, version mismatch): stop, no memory rung
    ("kernel-fault", "crash-other", ROOT, ("error code", "ret", "aclerror"), _KERNEL_CODE_PAT,
     CODES),
    # ---- collectives (usually a symptom of another rank's failure)
    ("watchdog", "hccl-timeout", COLLECTIVE, "watchdog caught collective operation timeout",
     r"watchdog caught collective operation timeout: work(?:nccl|hccl)\(seqnum=(\d+)"),
    ("coll-failed", "hccl-timeout", COLLECTIVE, "operations have failed or timed out",
     r"some (?:nccl|hccl) operations have failed or timed out"),
    ("nccl-error", "hccl-timeout", COLLECTIVE, "nccl",
     r"nccl error in:|ncclsystemerror|ncclinternalerror|ncclremoteerror|ncclunhandledcudaerror"
     r"|nccl communicator was aborted"),
    ("dist-backend", "hccl-timeout", COLLECTIVE, "distbackenderror", r"distbackenderror"),
    ("dist-store", "hccl-timeout", COLLECTIVE, "diststoreerror", r"diststoreerror"),
    ("hccl-func", "hccl-timeout", COLLECTIVE, "hccl", r"hccl function error: (\w+)|ops function error: hccl\w*"
     r"|\bhccl\w*(?:\([^)\n]{0,80}\))? (?:failed|error)[,:]? ?(?:with )?(?:error code(?: is)?|ret(?:urn)? ?=) ?-?\d+"),
    # HCCL / HCCP codes by family (EIxxxx, EJxxxx, torch_npu ERR02xxx / ERRss200, ACL 507057), not a list
    ("cann-hccl", "hccl-timeout", COLLECTIVE, ("error code", "ret", "aclerror", "getting socket", "notify register",
                                               "hccp", "hccl"),
     _COMM_CODE_PAT + r"|getting socket times out|wait execution of the notify register times out"
     r"|failed to initialize the hccp process|hccl error: ", CODES),
    # ---- weak network: exception lines only
    ("net-exc", "network", WEAK, ("error", "exception"),
     r"(?m)^\s*(?:[\w.]+\.)?(?:connectionrefusederror|connectionreseterror|connectionerror|maxretryerror"
     r"|gaierror|timeouterror|nameresolutionerror|newconnectionerror|sslerror|readtimeout|connecttimeout"
     r"|readtimeouterror|connecttimeouterror|connecterror)\b.*"
     r"|^\s*[\w.]*(?:error|exception): .{0,200}(?:connection refused|connection timed out|no route to host"
     r"|name or service not known|temporary failure in name resolution|max retries exceeded with url"
     r"|read timed out)"),
    # ---- generic crash evidence
    ("actor-died", "crash-other", GENERIC, ("died", "system_error"),
     r"actordiederror|the actor died unexpectedly|the worker died unexpectedly"
     r"|a worker died or was killed|worker exit type: system_error"),
    ("engine-start", "crash-other", GENERIC, "engine",
     r"enginecore failed to start|engine core initialization failed"),
    ("exception", "crash-other", GENERIC, ("error", "exception", "interrupt"),
     r"(?m)^[^\S\n]*(?:(?:error|critical) [\d-]+ [\d:.]+ \[[^\]\n]*\] )?"
     r"(?!ray\.exceptions\.raytaskerror)[a-z_][\w.]*(?:error|exception|interrupt)(?:\([^)\n]*\))?:[^\n]*"),
)


def build_signatures(rows, classes=CLASSES) -> tuple[Sig, ...]:
    """Compile and check signature rows (see the module docstring for the row format).

    Raises:
        ClassifierTableError: a row of the wrong shape, a duplicate name, an unknown class or tier, an empty or
            upper-case needle (never found: the scan reads lower-cased text), an unknown option, a bad regex.
    """
    out: list[Sig] = []
    seen: set = set()
    for row in rows:
        if not isinstance(row, tuple) or len(row) not in (5, 6):
            raise ClassifierTableError(f"signature row must be (name, class, tier, needles, pattern[, options]): {row!r}")
        name, cls, tier, needles, pattern = row[:5]
        opts = row[5] if len(row) == 6 else {}
        if name in seen:
            raise ClassifierTableError(f"signature {name!r}: duplicate name")
        seen.add(name)
        if cls not in classes:
            raise ClassifierTableError(f"signature {name!r}: unknown class {cls!r} (one of {', '.join(classes)})")
        if tier not in TIERS:
            raise ClassifierTableError(f"signature {name!r}: unknown tier {tier!r}")
        if isinstance(needles, str):
            needles = (needles,)
        if not needles or not all(isinstance(n, str) and n and n == n.lower() for n in needles):
            raise ClassifierTableError(f"signature {name!r}: needles must be non-empty lower-case strings: {needles!r}")
        if set(opts) - {"fatal", "finder"}:
            raise ClassifierTableError(f"signature {name!r}: unknown options {sorted(set(opts) - {'fatal', 'finder'})}")
        try:
            rx = re.compile(pattern)
        except re.error as exc:
            raise ClassifierTableError(f"signature {name!r}: bad pattern: {exc}") from exc
        out.append(Sig(name, cls, tier, tuple(needles), rx, opts.get("fatal", True), opts.get("finder")))
    return tuple(out)


SIGNATURES: tuple[Sig, ...] = build_signatures(SIGNATURE_ROWS)
