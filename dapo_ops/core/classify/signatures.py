"""The failure classifier's signature table (:mod:`dapo_ops.core.classify`): the known error texts as data rows, with
their row format and its compiler.

One row of :data:`SIGNATURE_ROWS` per known error text (the configuration-error rows, :data:`CONFIG_ROWS`, spliced
in), with its class and precedence tier; where a text comes from is noted at each row. The row format's machinery
(the tiers, :class:`Sig`, the row options, :func:`build_signatures`) is here too; :data:`SIGNATURES` is the table
compiled (and checked) once, at import.

A row is ``(name, class, tier, needles, pattern)`` or ``(name, class, tier, needles, pattern, options)``:

``name``     unique; names the hit in tests, evidence and the per-class detail (``dapo_ops/core/classify/decide.py``)
``class``    one of :data:`dapo_ops.core.classify.verdict.CLASSES`
``tier``     precedence (:data:`ROOT` root causes, :data:`COLLECTIVE` collective symptoms, :data:`WEAK` weak
             network exception lines, :data:`GENERIC` generic crash evidence; ``dapo_ops/core/classify/decide.py``)
``needles``  a lower-case literal or a tuple of them; every match contains at least one (found with ``str.find``)
``pattern``  a regex run on ONE lower-cased line
``options``  :data:`NONFATAL` (the error does not stop a run: tracker trouble) and / or :data:`CODES` (also
             candidates: lines where the literal-prefixed error-code finder matches)

The configuration-error rows cover Hydra / OmegaConf rejections, verl's and the rollout engines' start-up asserts,
resources, resume layout, missing files / model paths; :func:`divisible_key` names the key a divisibility message is
about.

STDLIB ONLY. The needles (or the finder) find the candidate lines first, so the cost grows with matching lines,
not with the bytes of the tail. A bad row raises :class:`~dapo_ops.core.classify.verdict.ClassifierTableError` when
the package is imported.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable

from dapo_ops.core.classify import device_codes
from dapo_ops.core.classify.verdict import CLASSES, ClassifierTableError

# --------------------------------------------------------------------------- the row format

ROOT, COLLECTIVE, WEAK, GENERIC = 1, 2, 3, 4
TIERS = (ROOT, COLLECTIVE, WEAK, GENERIC)


@dataclass(frozen=True)
class Sig:
    """One compiled signature (a row of :data:`SIGNATURE_ROWS`)."""

    name: str
    cls: str
    tier: int
    needles: tuple[str, ...]  # lower-case literals; every match contains at least one (found with str.find)
    rx: re.Pattern[str]  # applied to one lower-cased line
    fatal: bool = True
    finder: re.Pattern[str] | None = None  # also candidates: lines where this literal-prefixed regex matches


# Candidate finder for error CODES (EZ9999, EI0009, ERR02200 ...): literal-prefixed, so re scans fast
CODE_FINDER = re.compile(r"e[ehijlz1-9ab]\d{4}\b|err0[0-4]\d{3}")
#: row options
NONFATAL = {"fatal": False}
CODES = {"finder": CODE_FINDER}


def build_signatures(rows: Iterable[object], classes: Iterable[str] = CLASSES) -> tuple[Sig, ...]:
    """Compile and check signature rows (see the module docstring for the row format).

    Raises:
        ClassifierTableError: a row of the wrong shape, a duplicate name, an unknown class or tier, an empty or
            upper-case needle (never found: the scan reads lower-cased text), an unknown option, a bad regex.
    """
    out: list[Sig] = []
    seen: set[str] = set()
    for row in rows:
        if not isinstance(row, tuple) or len(row) not in (5, 6):
            raise ClassifierTableError(
                f"signature row must be (name, class, tier, needles, pattern[, options]): {row!r}"
            )
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


# --------------------------------------------------------------------------- device OOM and code patterns


def _code_pat(category: str) -> str:
    return "|".join(rx for _fam, rx, cat, _m, _src in device_codes.FAMILIES if cat == category)


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
DEVICE_OOM_NEEDLES = (
    "out of memory",
    "outofmemoryerror",
    "err0",
    "el0004",
    "ei0011",
    "alloc_failed",
    "2070",
    "curesult",
    "cuda_error_out",
    "cudaerrormemoryallocation",
)
# The allocator's own words (vs a bare result code: "CUresult error: 2", "error code is 207001")
OOM_WORDS_RX = re.compile(
    r"(?:cuda|npu|gpu|hip|xpu) out of memory|cuda error: out of memory|outofmemoryerror"
    r"|driver error:\s*out of memory|cuda failure '?out of memory"
)
# a log record at warning level or below (vLLM / Python logging / glog): an OOM word in it is advice
WARNING_LINE_RX = re.compile(
    r"\s*(?:warning|warn|info|debug)\b|\s*\[?[wi]\d{4} |.{0,80}\b(?:user|future|deprecation)warning\b"
)
_COMM_CODE_PAT = _code_pat("communication")
_UNAVAIL_CODE_PAT = _code_pat("device-unavailable")
_KERNEL_CODE_PAT = _code_pat("kernel-fault")


# --------------------------------------------------------------------------- import failures

# A fatal import failure: the exception line itself (Ray strips its prefix, so it starts the line: never the
# "UserWarning: torchtitan engine is not available: ModuleNotFoundError(...)" warnings verl 0.9.1 prints in every
# healthy run, verl/workers/engine/__init__.py:32-50, nor runpy's entry-module message).
_IMPORT_EXC = r"^\s*(?:[\w.]+\.)?(?:modulenotfounderror|importerror): "
#: the import-failure forms, ``(form, regex)`` in lookup order (the ``missing-module`` row is their union; the
#: ``mod`` / ``name`` groups are read on the original-case line by :func:`import_failure`). Sources: CPython
#: Python/import.c and Lib/importlib ("No module named 'x'", "cannot import name 'n' from 'x' (path)", "from
#: partially initialized module"), the dynamic loader's dlopen errors re-raised as ImportError (or OSError by
#: ctypes), Ray's RaySystemError for a function whose module a worker cannot import (ray/exceptions.py), transformers
#: utils/versions.py require_version ("x>=v is required for a normal functioning of this module"),
#: modeling_utils.py ("the package flash_attn seems to be not installed"), dynamic_module_utils.py check_imports
#: ("... requires the following packages that were not found in your environment: x"), utils/import_utils.py
#: _LazyModule ("Failed to import transformers.x because of the following error (look up to see its traceback):",
#: the error on the next line), megatron-core 0.19.2 tensor_parallel/layers.py:1070-1079 ("... the custom CUDA
#: extension fused_weight_gradient_mlp_cuda module is not found"), Ray's RayTaskError(<cls>) wrapper line.
IMPORT_FORMS: tuple[tuple[str, str], ...] = (
    (
        "missing",
        r"^\s*(?:[\w.]+\.)?(?:modulenotfounderror|importerror|raysystemerror): (?:system error: )?"
        r"no module named '?(?P<mod>[\w.]+)",
    ),
    (
        "name",
        _IMPORT_EXC
        + r"cannot import name '?(?P<name>\w+)'?(?: from (?:partially initialized module )?'(?P<mod>[\w.]+)')?",
    ),
    (
        "symbol",
        r"^\s*(?:[\w.]+\.)?(?:importerror|oserror): (?P<mod>\S+?\.so)[.\d]*: undefined symbol: (?P<name>\S+)",
    ),
    (
        "library",
        r"^\s*(?:[\w.]+\.)?(?:importerror|oserror): (?P<mod>[^\s:]+?\.so)[.\d]*: cannot open shared object file",
    ),
    ("library", _IMPORT_EXC + r"\S+: version `[^'\s]+' not found \(required by (?P<mod>\S+?\.so)"),
    ("version", _IMPORT_EXC + r"(?P<mod>[a-z][\w.-]*?)(?:[<>=!~]=?[\w.*+-]+,?)+ is required for a normal functioning"),
    ("missing", _IMPORT_EXC + r".{0,200}?the package (?P<mod>[\w.-]+) seems to be not installed"),
    ("missing", _IMPORT_EXC + r".{0,200}?packages that were not found in your environment: (?P<mod>[\w.-]+)"),
    ("extension", r"custom cuda extension (?P<mod>\w+) module is not found"),
    ("wrapped", r"^\s*(?:[\w.]+\.)?raytaskerror\((?:modulenotfounderror|importerror)\)"),
    ("wrapped", r"failed to import [\w.]+ because of the following error \(look up to see its traceback\)"),
    ("other", _IMPORT_EXC + r"\S"),
)
_IMPORT_RXS = tuple((form, re.compile(rx, re.I)) for form, rx in IMPORT_FORMS)
IMPORT_FAILURE_PAT = "|".join(re.sub(r"\(\?P<\w+>", "(?:", rx) for _form, rx in IMPORT_FORMS)
IMPORT_FAILURE_NEEDLES = (
    "modulenotfounderror:",
    "importerror:",
    "no module named",
    "undefined symbol",
    "cannot open shared object file",
    "module is not found",
    "raytaskerror(",
    "because of the following error",
)


def import_failure(line: str) -> tuple[str, str | None, str | None] | None:
    """``(form, module, name)`` of an import-failure line (original case; the first of :data:`IMPORT_FORMS` that
    matches), else ``None``. ``form``: ``missing`` (not installed), ``name`` (``cannot import name``: another version),
    ``symbol`` (a compiled extension built for another torch / CUDA: ``name`` is the symbol), ``library`` (a native
    library the extension needs), ``version`` (rejected version), ``extension`` (a CUDA extension the code requires),
    ``wrapped`` (a wrapper: the module is named on a later line), ``other``. ``module``: the dotted module, or a
    shared object's file name (``flash_attn_2_cuda``, ``libcudart.so``); ``None`` when the line names none."""
    for form, rx in _IMPORT_RXS:
        m = rx.search(line)
        if m is None:
            continue
        groups = m.groupdict()
        mod, name = groups.get("mod"), groups.get("name")
        # a shared object's path (the symbol / library forms only: "No module named 'a.so'" names module a.so):
        # libX.so as named, a Python extension as its module
        if mod and form in ("symbol", "library") and mod.endswith(".so"):
            base = mod.rsplit("/", 1)[-1]
            if base.startswith("lib"):
                mod = base
            else:
                rel = mod.split("-packages/", 1)[1] if "-packages/" in mod else base
                mod = ".".join(rel.split("/")[:-1] + [base.split(".")[0]])
        if mod:
            mod = mod.rstrip(".-")
        return form, mod, name
    return None


# --------------------------------------------------------------------------- configuration-error rows

CONFIG_ROWS: tuple[tuple[Any, ...], ...] = (
    ("hydra-override", "config-error", ROOT, "could not override", r"could not override '([^']+)'(?!\. no match)"),
    ("hydra-struct", "config-error", ROOT, "is not in struct", r"key '([^']+)' is not in struct"),
    # OmegaConf on a structured (dataclass) config: "Key 'x' not in 'SomeConfig'"; a read of an absent key:
    # "ConfigAttributeError: Missing key x" (omegaconf/dictconfig.py _get_node; both followed by full_key:)
    (
        "omegaconf-key",
        "config-error",
        ROOT,
        ("not in '", "missing key"),
        r"key '([^']+)' not in '\w+'|config(?:attribute|key)error: missing key ([\w.\[\]-]+)",
    ),
    (
        "hydra-append",
        "config-error",
        ROOT,
        "could not append",
        r"could not append to config\. an item is already at '([^']+)'",
    ),
    # the other ways Hydra 1.3 fails to apply an override to the composed config (hydra/_internal/
    # config_loader_impl.py _apply_overrides_to_config: "Could not delete from config. '<k>' does not exist." /
    # "... The value of '<k>' is <v> and not <w>.", "Override <o> looks like a config group override, but config group
    # '<g>' does not exist."; hydra/_internal/defaults_list.py: "Could not override '<g>'. No match in the defaults
    # list." / "Could not delete '<g>'. No match in the defaults list", "To append to your default list use +<g>=<c>",
    # a config group's); "Could not override" (a
    # key's) / "not in struct" / "Could not append" are the rows above
    (
        "hydra-delete",
        "config-error",
        ROOT,
        "could not delete",
        r"could not delete from config\. '([^']+)' does not exist",
    ),
    (
        "hydra-delete-value",
        "config-error",
        ROOT,
        "could not delete",
        r"could not delete from config\. the value of '([^']+)' is .* and not ",
    ),
    (
        "hydra-group",
        "config-error",
        ROOT,
        ("looks like a config group override", "no match in the defaults list", "to your default list"),
        r"looks like a config group override, but config group '([^']+)' does not exist"
        r"|could not (?:override|delete) '([^']+)'\. no match in the defaults list"
        r"|to append to your default list use \+([^=\s]+)",
    ),
    ("hydra-parse", "config-error", ROOT, "error parsing override", r"error parsing override '([^']*)'"),
    # Hydra's wrapper line for any +/~ override that cannot merge (the OmegaConf reason follows on the next line)
    ("hydra-merge", "config-error", ROOT, "error merging override", r"error merging override [+~]*([\w.\[\]/@-]+)"),
    ("hydra-load", "config-error", ROOT, "could not load", r"in '[^']+': could not load '([^']+)'"),
    ("hydra-defaults", "config-error", ROOT, "no match in the defaults list", r"no match in the defaults list"),
    ("hydra-primary", "config-error", ROOT, "cannot find primary config", r"cannot find primary config '([^']+)'"),
    ("interpolation", "config-error", ROOT, "interpolation key", r"interpolation key '([^']+)' not found"),
    (
        "dataclass-kwarg",
        "config-error",
        ROOT,
        "unexpected keyword argument",
        r"\w*config\.__init__\(\) got an unexpected keyword argument '(\w+)'",
    ),
    ("omegaconf-missing", "config-error", ROOT, "missing mandatory value", r"missing mandatory value: ?([\w.]+)"),
    (
        "omegaconf-type",
        "config-error",
        ROOT,
        ("could not be converted to", "is not a valid"),
        r"value '[^']*' (?:could not be converted to|is not a valid) ",
    ),
    # the device list of the visibility variable names devices this container does not have (or is not in order):
    # CANN runtime api_error.cc "SetDevice:Set visible device failed, invalid device=0, input visible devices:4"
    # (gpustack#3352), EE1001 "set ASCEND_RT_VISIBLE_DEVICES:0,2,4,6,1,3,5,7 error, it must be configured in
    # ascending order" (gpustack#2527), Ray / vLLM "Error setting ASCEND_RT_VISIBLE_DEVICES: local range: [8, 12) base
    # value: ..." (vllm-ascend#2879), torch's cudaSetDevice "CUDA error: invalid device ordinal": configuration,
    # not a kernel fault (the device errors next to them are their echo; classify/decide.py prefers this row)
    (
        "visible-devices",
        "config-error",
        ROOT,
        ("set visible device failed", "visible_devices", "invalid device ordinal"),
        r"set visible device failed, invalid device=\d+, input visible devices:"
        r"|set ascend_rt_visible_devices:[\d,]* error"
        r"|error setting (?:ascend_rt|cuda)_visible_devices: local range"
        r"|cuda error: invalid device ordinal",
    ),
    (
        "gpus-less",
        "config-error",
        ROOT,
        "total available",
        r"total available (?:gpus|npus) ([\d.]+) is less than total desired (?:gpus|npus) ([\d.]+)",
    ),
    # per-pool placement checks (verl 0.3-0.4 trainer/ppo/ray_trainer.py _check_resource_available, PR#505:
    # "Resource pool <name>: <gpus>*<nodes>cannot be satisfied in this ray cluster"; verl 0.9.1
    # single_controller/ray/base.py:261 "no enough nodes for request: searching <i> th node")
    (
        "pool-unsatisfied",
        "config-error",
        ROOT,
        ("cannot be satisfied in this ray cluster", "no enough nodes for request"),
        r"resource pool \S+: \d+\*\d+ ?cannot be satisfied in this ray cluster|no enough nodes for request",
    ),
    ("tp-divisible", "config-error", ROOT, "infer_tp", r"world_size: ?(\d+) is not divisible by infer_tp: ?(\d+)"),
    # sizes that must divide each other, the family of verl / vLLM / SGLang start-up checks (verl 0.9.1:
    # workers/engine_workers.py:660 "rollout world_size: %d is not divisible by infer_world_size: %d",
    # models/transformers/monkey_patch.py:344 "num_attention_heads %d must be divisible by ulysses_sp_size %d",
    # utils/ulysses.py:340, workers/config/actor.py:235 "ppo_mini_batch_size (%d) must be divisible by ...",
    # trainer/ppo/v1/trainer_base.py:536, utils/config.py:112 "n_gpus (%d) must be divisible by model_parallel_size",
    # workers/rollout/replica.py:115, engine/veomni/transformer_impl.py:161; legacy fsdp_workers.py "normalized
    # ppo_mini_batch_size %d should be divisible by ..." / "... should be larger than 0 after normalization";
    # vLLM config.py verify_with_parallel_config "Total number of attention heads (%d) must be divisible by tensor
    # parallel size (%d)."): a topology / batch setting, fixed before launch, never by retrying
    (
        "size-divisible",
        "config-error",
        ROOT,
        ("divisible by", "after normalization", "must be >= n_gpus"),
        r"(?:world_size|world size|batch_size|n_gpus|heads|parallel size|sp_size|fsdp_size|gpus_per_node|dp_size)"
        r"\W{0,3}[\w(): ]{0,12}(?:must|should) be divisible by"
        r"|(?:world_size|batch_size)\W{0,3}\d+ is not divisible by (?:infer_world_size|infer_tp)"
        r"|ppo_mini_batch_size \d+ should be larger than 0 after normalization"
        # (verl 0.9.1 workers/config/actor.py / critic.py: "ppo_micro_batch_size (%d) * ulysses_sequence_parallel_size
        # (%d) must be >= n_gpus (%d)")
        r"|ppo_micro_batch_size \(\d+\) \* \S*(?:ulysses|parallel)\S* \(\d+\) must be >= n_gpus",
    ),
    (
        "n-gpus-zero",
        "config-error",
        ROOT,
        "must be greater than 0",
        r"([\w.]*(?:n_gpus_per_node|nnodes)) must be greater than 0",
    ),
    (
        "separate-async",
        "config-error",
        ROOT,
        "separate async training",
        r"(?:must equal parameter_sync_step \* ppo_mini_batch_size|(?:nnodes|n_gpus_per_node) must be > 0"
        r"|please use nccl/nixl/mooncake, etc\. backend) in separate async training|"
        r"backend for separate async training",
    ),
    (
        "rollout-mode",
        "config-error",
        ROOT,
        "rollout.mode",
        # the old assert; verl 0.9.1's RolloutConfig.__post_init__ (verl/workers/config/rollout.py:280-285)
        r"assert .{0,40}rollout\.mode == ['\"]async['\"]|rollout mode 'sync' has been removed",
    ),
    # verl 0.9.1's RolloutConfig.__post_init__ (verl/workers/config/rollout.py:319-323): no rollout pipeline parallelism
    (
        "rollout-pp",
        "config-error",
        ROOT,
        "not implemented pipeline_model_parallel_size",
        r"current rollout self\.name='[^']*' not implemented pipeline_model_parallel_size > 1",
    ),
    # verl 0.9.1's get_trainer_cls (verl/trainer/ppo/v1/trainer_base.py:2023): trainer.v1.trainer_mode not registered
    ("trainer-mode", "config-error", ROOT, "unknown trainer '", r"unknown trainer '[^']*'\. available trainers:"),
    (
        "micro-batch",
        "config-error",
        ROOT,
        ("please set at least one of", "you have set both"),
        r"please set at least one of '([\w.]+)'|you have set both '([\w.]+)'",
    ),
    (
        "token-budget",
        "config-error",
        ROOT,
        "max_token_len must be",
        r"max_token_len must be greater than the sequence length",
    ),
    (
        "model-len-pos",
        "config-error",
        ROOT,
        "max_position_embeddings",
        r"max_model_len \(\d+\) should be less than or equal to max_position_embeddings",
    ),
    (
        "batched-tokens",
        "config-error",
        ROOT,
        "max_num_batched_tokens",
        r"max_num_batched_tokens \(\d+\) is smaller than max_model_len",
    ),
    (
        "batch-divisible",
        "config-error",
        ROOT,
        "must be divisible by minimal possible batch size",
        r"real_train_batch_size .{0,60}must be divisible by minimal possible batch size",
    ),
    (
        "batch-ge-mini",
        "config-error",
        ROOT,
        "ppo_mini_batch_size",
        r"train_batch_size .{0,60}must be >= .{0,40}ppo_mini_batch_size",
    ),
    ("remove-padding", "config-error", ROOT, "use_remove_padding", r"you must enable `?use_remove_padding"),
    ("bucket", "config-error", ROOT, "too large to fit in the bucket", r"is too large to fit in the bucket"),
    ("not-supported", "config-error", ROOT, "is not supported", r"assertionerror: (\S+) is not supported"),
    ("hybrid-engine", "config-error", ROOT, "hybrid_engine", r"assert not self\.hybrid_engine"),
    (
        "resume-world-size",
        "config-error",
        ROOT,
        "world_size_",
        r"(?:filenotfounderror|no such file or directory).{0,300}model_world_size_\d+_rank_\d+\.pt",
    ),
    # a data file that does not exist (in the container, on this node) is configuration, not data content, even
    # after verl's config checks passed (they do not open files): verl/utils/dataset/rl_dataset.py
    # _read_files_and_tokenize -> datasets.load_dataset / pyarrow
    (
        "data-missing",
        "config-error",
        ROOT,
        (".parquet", ".json", ".csv", ".arrow", "data files"),
        r"(?:filenotfounderror|no such file or directory|unable to find|failed to open local file|does not exist)"
        r"[^\n]{0,200}\.(?:parquet|jsonl?|csv|arrow)\b|datafilesnotfounderror|no \(supported\) data files",
    ),
    # `python -m <entry>` (runpy) could not find the trainer's entry module: the container's verl lacks it (the DAPO
    # recipe's recipe.dapo.main_dapo without the recipe submodule, a profile for another verl). Only runpy's own
    # message: verl logs "... engine is not available: ModuleNotFoundError(...)" warnings in every healthy run.
    # (CPython Lib/runpy.py _get_module_details: "Error while finding module specification for 'x' (<exc>)" when a
    # parent package cannot be imported, "No module named x" when it imports but has no such module; both printed
    # by _run_module_as_main as "<sys.executable>: <message>")
    (
        "entry-module",
        "config-error",
        ROOT,
        ("error while finding module specification", "no module named"),
        r"error while finding module specification for '([^']+)'|^\s*\S*python[\d.]*: no module named ([\w.]+)\s*$",
    ),
    # the trainer died on a module, compiled extension or native library it cannot import (IMPORT_FORMS above):
    # the container's environment, never retried unchanged; classify/decide.py names the module and prefers any
    # other root cause (a caught, logged import traceback must not hide the real failure)
    (
        "missing-module",
        "config-error",
        ROOT,
        IMPORT_FAILURE_NEEDLES,
        IMPORT_FAILURE_PAT,
    ),
    # the Hub validator rejects a local path that does not exist: the model dir is not visible in the container
    # (huggingface_hub validate_repo_id, transformers cached_file)
    (
        "model-path",
        "config-error",
        ROOT,
        (
            "hfvalidationerror",
            "id must",
            "path_or_model_id",
            "valid model identifier",
            "is not the path to a directory",
            "repositorynotfounderror",
        ),
        r"hfvalidationerror|repositorynotfounderror|repo[ _]id must (?:be in the form|use alphanumeric)|incorrect path_or_model_id"
        r"|is not a local folder and is not a valid model identifier"
        # (a missing optional file, "... generation_config.json. Using default generation config.", is a warning)
        r"|it looks like /\S+ is not the path to a directory containing a file named (?:config|tokenizer_config)\.json"
        r"(?!.*using default)",
    ),
    # a Ray worker that cannot register with its own raylet right after start-up: the worker pool is sized to
    # the host's CPUs, more than the cgroup / Slurm allocation gives (ray core_worker.cc / worker_pool.cc)
    (
        "raylet-register",
        "config-error",
        ROOT,
        ("raylet", "have not registered"),
        r"failed to register worker.{0,60}to raylet|unable to register worker with raylet"
        r"|have not registered within the timeout",
    ),
    (
        "resume-megatron",
        "config-error",
        ROOT,
        ("no such file", "filenotfounderror"),
        r"(?:filenotfounderror|no such file or directory).{0,300}(?:common\.pt|\.metadata|metadata\.json)",
    ),
    # a base model's tokenizer without chat template (transformers get_chat_template) under verl's RLHFDataset:
    # actor_rollout_ref.model.custom_chat_template (verl/workers/config/model.py:111) fixes it, not the data
    (
        "chat-template",
        "config-error",
        ROOT,
        "chat_template is not set",
        r"tokenizer\.chat_template is not set and no template argument was passed",
    ),
    # verl's own start-up checks that name the value in their message (dapo_ops/core/classify/startcheck.py): the RL
    # dataset's file format (verl/utils/dataset/rl_dataset.py:178 "Unsupported file format: <path>"), the resume mode
    # (verl/trainer/ppo/v1/trainer_base.py:873 logger.exception "Unknown resume mode <v>", then an UnboundLocalError;
    # verl/utils/checkpoint/checkpoint_handler.py:219 "Invalid resume_mode: <v>. Must be 'auto', ...")
    (
        "data-format",
        "config-error",
        ROOT,
        "unsupported file format",
        r"^\s*(?:[\w.]+\.)?valueerror: unsupported file format: ",
    ),
    (
        "resume-mode",
        "config-error",
        ROOT,
        ("unknown resume mode", "invalid resume_mode"),
        r"unknown resume mode \S+|invalid resume_mode: \S+\. must be",
    ),
    # ---- the container's native toolchain and libraries: environment, never a kernel fault
    # A JIT build (Triton's launcher stub, torch inductor, DeepSpeed / flash-attn ops) cannot compile or link: GNU ld
    # "cannot find -l<lib>" (-lcuda: only libcuda.so.1, no libcuda.so link; Triton third_party/nvidia/backend/
    # driver.py libcuda_dirs, TRITON_LIBCUDA_PATH; pytorch#103417, mamba#123, vllm#16984, Seg-Zero#63), Triton <= 2.1
    # "libcuda.so cannot found!" (triton/common/build.py libcuda_dirs assert), Triton runtime/build.py "Failed to find
    # C compiler. Please specify via CC environment variable.", a missing header ("fatal error: stdlib.h: No such file
    # or directory": xorbitsai/inference#2925, build-essential), setuptools "error: command '/usr/bin/gcc' failed"
    (
        "toolchain",
        "config-error",
        ROOT,
        (
            "cannot find -l",
            "libcuda.so cannot found",
            "failed to find c compiler",
            ".h: no such file",
            "error: command '",
        ),
        r"\bld(?:\.\w+)?: cannot find -l([\w.+-]+)|libcuda\.so cannot found"
        r"|failed to find c compiler\. please specify via cc"
        r"|fatal error: ([\w./+-]+\.h(?:pp)?): no such file or directory"
        r"|^\s*error: command '[^']*?(?:gcc|g\+\+|cc|c\+\+|nvcc|clang)[^']*' failed",
    ),
    # numpy 2 beside modules compiled for numpy 1 (CANN <= 8.2's te / tbe op compiler among them: vllm-ascend#2210
    # "we still need to pin numpy < 2.0 with CANN 8.2.1"): numpy/core/_multiarray_umath.py's banner "A module that was
    # compiled using NumPy 1.x cannot be run in NumPy 2.x.y as it may crash." (a warning alone: classify/decide.py
    # takes it only when no other root cause is in the log), the failures that follow it ("AttributeError:
    # _ARRAY_API not found", "ImportError: numpy.core.multiarray failed to import"), and numpy 2's removed names
    # ("`np.float_` was removed in the NumPy 2.0 release"; atrain_core#10). torch's "UserWarning: Failed to
    # initialize NumPy: _ARRAY_API not found" is a warning (not an exception line): never matched.
    (
        "numpy-abi",
        "config-error",
        ROOT,
        ("compiled using numpy 1.x", "_array_api not found", "failed to import", "removed in the numpy 2.0 release"),
        r"a module that was compiled using numpy 1\.x cannot be run in\s*(?:numpy 2|$)"
        r"|^\s*(?:[\w.]+\.)?(?:attributeerror|importerror): _array_api not found"
        r"|^\s*(?:[\w.]+\.)?importerror: numpy\.(?:_?core\.)?(?:multiarray|_multiarray_umath|umath) failed to import"
        r"|`np\.\w+` was removed in the numpy 2\.0 release",
    ),
    # CANN's op compiler (GE / TBE, its Python side te / tbe in the toolkit) cannot start, so torch_npu's first
    # set_device fails: "SetPrecisionMode:... NPU function error: at_npu::native::AclSetCompileopt(aclCompileOpt::
    # ACL_PRECISION_MODE, precision_mode), error code is 500001" (vllm-ascend#2210: numpy 2 with CANN 8.2.1;
    # MinerU#2258), TEFUSION "TbeInit Failed" / "InitCannKB call CannKbInit failed" after "No module named
    # 'tbe.common'" (Ascend/pytorch#29): the environment, not an operator fault (its ACL code is its echo)
    (
        "cann-env",
        "config-error",
        ROOT,
        ("aclsetcompileopt", "tbeinit failed", "cannkbinit failed"),
        r"aclsetcompileopt\(aclcompileopt::\w+|tbeinit failed|initcannkb call cannkbinit failed",
    ),
)


#: (words of a divisibility message, the verl key to change), first match wins (the "size-divisible" row above)
DIVISIBLE_KEYS: tuple[tuple[str, str], ...] = (
    ("ppo_micro_batch_size", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"),
    ("ulysses", "actor_rollout_ref.actor.ulysses_sequence_parallel_size"),
    ("infer_", "actor_rollout_ref.rollout.tensor_model_parallel_size"),
    ("tensor parallel size", "actor_rollout_ref.rollout.tensor_model_parallel_size"),
    ("ppo_mini_batch_size", "actor_rollout_ref.actor.ppo_mini_batch_size"),
    ("train_batch_size", "data.train_batch_size"),
    ("fsdp_size", "actor_rollout_ref.actor.fsdp_config.fsdp_size"),
    ("model_parallel_size", "actor_rollout_ref.actor.megatron.tensor_model_parallel_size"),
    ("gpus_per_node", "trainer.n_gpus_per_node"),
)


def divisible_key(ll: str) -> str | None:
    """The key a lower-cased divisibility message is about (:data:`DIVISIBLE_KEYS`), ``None`` when it names none."""
    return next((key for word, key in DIVISIBLE_KEYS if word in ll), None)


# --------------------------------------------------------------------------- the table

# One row per known error text: (name, class, tier, needles, pattern[, options]); see the module docstring.
# Order does not matter (earliest line wins inside a tier); names are for tests and evidence.
SIGNATURE_ROWS: tuple[tuple[Any, ...], ...] = (
    # ---- device OOM (training vs rollout decided from frames)
    ("device-oom", "oom-device", ROOT, DEVICE_OOM_NEEDLES, DEVICE_OOM_PAT),
    # ---- rollout engine (vLLM / vllm-ascend) KV cache at start-up
    ("kv-no-blocks", "oom-kv-cache", ROOT, "cache blocks", r"no available memory for the cache blocks"),
    (
        "kv-maxlen",
        "oom-kv-cache",
        ROOT,
        "max seq len",
        r"to serve at least one request with the models?'s max seq len"
        r"|max seq len \(\d+\) is larger than the maximum number of tokens that can be stored in kv cache",
    ),
    (
        "kv-free-below-util",
        "oom-kv-cache",
        ROOT,
        "on startup",
        r"free memory on device .{0,120}on startup is less than desired (?:gpu|npu) memory utilization",
    ),
    (
        "sglang-mem",
        "oom-kv-cache",
        ROOT,
        "mem-fraction-static",
        r"not enough memory\. please try to increase --mem-fraction-static",
    ),
    # (vLLM V1 gpu_worker.py determine_available_memory words the same assert "... This happens when other processes
    # sharing the same container release GPU memory while vLLM is profiling during initialization." (vllm#56830))
    (
        "kv-profiling-dirty",
        "oom-kv-cache",
        ROOT,
        ("not properly cleaned up", "error in memory profiling"),
        r"(?:gpu|npu|device) memory was not properly cleaned up before initializing the vllm instance"
        r"|error in memory profiling\. initial free memory",
    ),
    # ---- Ray host-memory monitor (ray/exceptions.py OutOfMemoryError, raylet)
    # (Ray 2.0 raylet: "System memory low at node with IP <ip>. Used memory ... exceeds threshold <t>, killing
    # latest task ..."; Ray 1.x: "ray.memory_monitor.RayOutOfMemoryError: More than 95% of the memory on node
    # <n> is used" -- both the host RAM monitor, never the device)
    (
        "ray-oom",
        "oom-ray",
        ROOT,
        (
            "running low on memory",
            "killed due to memory pressure",
            "system memory low",
            "rayoutofmemoryerror",
            "node_out_of_memory",
        ),
        # (the raylet's summary "N Workers (tasks / actors) killed due to memory pressure (OOM)"; a copy wrapped at a
        # fixed width can break inside "(tasks /\n actors)", so the match starts at "actors)")
        r"running low on memory|actors\) killed due to memory pressure \(oom\)"
        r"|system memory low at node .{0,300}killing|rayoutofmemoryerror: more than [\d.]+% of the memory on node"
        # (the memory monitor's own worker exit type, WorkerExitType NODE_OUT_OF_MEMORY in ray common.proto)
        r"|worker exit type: node_out_of_memory",
    ),
    (
        "ray-oom-node",
        "oom-ray",
        ROOT,
        "memory on the node (ip:",
        r"memory on the node \(ip: [^)]{0,80}\) .{0,400}exceeds the memory usage threshold",
    ),
    # ---- kernel / cgroup OOM killer
    (
        "kernel-oom",
        "oom-host",
        ROOT,
        "out of memory",
        r"out of memory: kill(?:ed)? process|memory cgroup out of memory",
    ),
    ("oom-kill-event", "oom-host", ROOT, ("oom-kill", "oom_reaper"), r"\boom-kill:|\boom_reaper\b"),
    ("pinned-host-oom", "oom-host", ROOT, "host out of memory", r"malloc pin memory failed, host out of memory"),
    # host RAM, never device: c10/core/impl/alloc_cpu.cpp ("can't allocate memory" / "not enough memory"), Python
    # MemoryError and numpy's _ArrayMemoryError (numpy/core/_exceptions.py), the kernel's ENOMEM "[Errno 12]"
    (
        "host-alloc",
        "oom-host",
        ROOT,
        ("defaultcpuallocator", "memoryerror", "unable to allocate", "[errno 12]"),
        r"defaultcpuallocator: (?:can't allocate memory|not enough memory)|(?<![\w.])memoryerror(?::|\s*$)"
        r"|memoryerror: unable to allocate [\d.]+ ?[kmgtpe]?i?b for an array|\[errno 12\] cannot allocate memory",
    ),
    (
        "loader-killed",
        "oom-host",
        ROOT,
        "is killed by signal",
        r"dataloader worker \(pid \d+\) is killed by signal: killed",
    ),
    # ---- config (Hydra / verl asserts / resources / resume layout): CONFIG_ROWS above
    *CONFIG_ROWS,
    # ---- data
    # the reward function has no scorer for the rows' data_source: verl 0.9.1
    # utils/reward_score/__init__.py:107 default_compute_score 'raise NotImplementedError(f"Reward function is not
    # implemented for {data_source=}")' ("... for data_source=''": AReaL#105; "... data_source='medical_consultation'":
    # DoctorAgent-RL#10; verl#3450 (the GSM8K quickstart with a blank column), verl#5558 (in _validate)); verl <= 0.2's
    # _select_rm_score_fn raised a bare NotImplementedError, and a missing data_source (None) fails at :59
    # data_source.startswith("aime") with "AttributeError: 'NoneType' object has no attribute 'startswith'" (those two
    # count only with a default_compute_score / _select_rm_score_fn frame just above: classify/decide.py)
    (
        "reward-source",
        "data-error",
        ROOT,
        ("reward function is not implemented", "notimplementederror", "has no attribute 'startswith'"),
        r"reward function is not implemented for (?:data_source=)?(?!\{)(.*)$"
        r"|^\s*(?:[\w.]+\.)?notimplementederror\s*$"
        r"|^\s*attributeerror: 'nonetype' object has no attribute 'startswith'",
    ),
    (
        "seq-too-long",
        "data-error",
        ROOT,
        "is larger than max_length",
        r"sequence_length=(\d+) is larger than max_length=(\d+)",
    ),
    # a prompt longer than the rollout engine's context: verl async_sglang_server.py:592 "Prompt length (%d) exceeds
    # the model's maximum context length", vLLM processor _validate_model_input "The decoder prompt (length %d) is
    # longer than the maximum model length of %d", SGLang tokenizer_manager "The input (%d tokens) is longer than
    # the model's context length (%d tokens)." and scheduler "Input length (%d tokens) exceeds the maximum allowed
    # length (%d tokens)"
    (
        "prompt-too-long",
        "data-error",
        ROOT,
        ("maximum context length", "is longer than the m", "maximum allowed length"),
        r"prompt length \((\d+)\) exceeds the model's maximum context length"
        r"|the decoder prompt \(length (\d+)\) is longer than the maximum model length of (\d+)"
        r"|the input \((\d+) tokens\) is longer than the model's context length \((\d+) tokens\)"
        r"|input length \((\d+) tokens\) exceeds the maximum allowed length \((\d+) tokens\)",
    ),
    # DAPO dynamic sampling gave up after max_num_gen_batches generation batches, in every wording verl printed:
    # verl PR #623 (2025-04, recipe/dapo/src/dapo_ray_trainer.py) "num_gen_batches=10 >= max_num_gen_batches=10.
    # Generated too many. Please check your data."; verl PR #1180 (2025-04-21, kept by verl-recipe dapo/ and
    # entropy/ after verl PR #4795 moved the recipes out) "... Generated too many. Please check if your data are too
    # difficult. You could also try set max_num_gen_batches=0 to enable endless trials."; verl-recipe PR #33
    # (2026-03, dapo/dapo_transfer_queue) "... Generated too many. Check data difficulty or set
    # max_num_gen_batches=0." (verl 0.9.1's V1 trainer refills instead and never gives up: trainer_base.py:164-185,
    # it only warns that max_num_gen_batches is ignored, :205-211). The same give-up in the other RL frameworks'
    # words: EasyR1's online filtering (verl/trainer/ray_trainer.py _make_batch_data) "num_try_make_batch=20 >=
    # max_try_make_batch=20. Generated too many. Please check your data."; NeMo-RL's DAPO / GRPO dynamic sampling
    # (nemo_rl/algorithms/grpo.py, NVIDIA-NeMo/RL PR #602) "Dynamic sampling has reached the maximum allowed (PR #602:
    # allowable) number of batches (10). Consider evaluating the complexity of your data ..."
    (
        "dapo-give-up",
        "data-error",
        ROOT,
        ("generated too many", "max_num_gen_batches=", "max_try_make_batch=", "dynamic sampling has reached"),
        r"num_gen_batches=\d+ >=? max_num_gen_batches=\d+|generated too many\. (?:please check|check data difficulty)"
        r"|num_try_make_batch=\d+ >=? max_try_make_batch=\d+"
        r"|dynamic sampling has reached the maximum allow(?:ed|able) number of (?:generation )?batches",
    ),
    # one-step-off's dataloader used up: _async_gen_next_batch returns None on StopIteration
    # (verl/experimental/one_step_off_policy/ray_trainer.py:206-213) and _fit_generate unpacks that None (:390). Counts
    # only under that trainer's frames and with no "Error in async_gen_next_batch" (its other None, :214-216) printed
    # before it (classify/decide.py); the planned total decides the step it ran out at
    (
        "one-step-off-ran-out",
        "data-ran-out",
        ROOT,
        "cannot unpack non-iterable nonetype",
        r"typeerror: cannot unpack non-iterable nonetype object",
    ),
    # an empty dataset: torch RandomSampler (verl/trainer/ppo/utils.py:163), verl/trainer/ppo/ray_trainer.py:427-428,
    # verl/utils/dataset/rl_dataset.py:538
    (
        "empty-data",
        "data-error",
        ROOT,
        ("num_samples should be", "dataloader is empty", "empty dataset"),
        r"num_samples should be a positive integer value, but got num_samples=0|(?:train|validation) dataloader is empty"
        r"|cannot split an empty dataset",
    ),
    (
        "parquet",
        "data-error",
        ROOT,
        ("arrowinvalid", "parquet", "datasetgenerationerror"),
        r"arrowinvalid|parquet magic bytes not found|could not open parquet input source|datasetgenerationerror",
    ),
    # (files of one split with different columns / types: datasets table.py cast_table_to_schema "Couldn't cast ...
    # because column names don't match", arrow_dataset.py "The features can't be aligned" in concatenate_datasets,
    # which verl/utils/dataset/rl_dataset.py:180 calls on the train files)
    (
        "data-schema",
        "data-error",
        ROOT,
        ("keyerror", "not in the dataset", "casterror", "column names don't match", "can't be aligned"),
        r"keyerror: '(?:prompt|data_source|reward_model|ability|extra_info|ground_truth)'"
        r"|keyerror: \"none of \[index\(\[.{0,200}\] are in the \[columns\]"
        r"|column '?[\w.-]+'? not in the dataset\. current columns in the dataset|casterror'?>?: couldn't cast"
        r"|because column names don't match|the features can't be aligned because the key",
    ),
    # ---- network (strong)
    ("gcs-connect", "network", ROOT, "gcs", r"failed to connect to gcs at address ([^\s]+?)(?: within|\s|$)"),
    # (ray gcs_client.cc: the GCS client's own wait for the head, "Timed out while waiting for GCS to become
    # available." as a log line or as ray.exceptions.RpcError, kuberay#2540, TinyZero#75)
    (
        "gcs-cluster-id",
        "network",
        ROOT,
        "gcs",
        r"failed to get cluster id from gcs server"
        r"|timed out while waiting for gcs to become available",
    ),
    # the GCS (Ray head) lost: ray gcs_rpc_client.h "Failed to connect to GCS within 60 seconds", ray/_private/
    # utils.py / worker.py "Unable to connect to GCS [(ray head)] at <addr>"
    (
        "gcs-lost",
        "network",
        ROOT,
        ("gcs within", "connect to gcs"),
        r"failed to connect to gcs within \d+ seconds|unable to connect to gcs (?:\(ray head\) )?at ([0-9a-z.\-]+:\d+)",
    ),
    ("ray-no-instance", "network", ROOT, "running ray instance", r"could not find any running ray instance"),
    (
        "proxy",
        "network",
        ROOT,
        ("proxy", "tunnel connection failed"),
        r"proxyerror|cannot connect to proxy|tunnel connection failed",
    ),
    (
        "hub",
        "network",
        ROOT,
        ("localentrynotfounderror", "we couldn't connect"),
        r"localentrynotfounderror|we couldn't connect to 'https?://([^'/]+)",
    ),
    (
        "http-transient",
        "network",
        ROOT,
        ("client error", "server error"),
        r"\b429 client error: too many requests|\b5\d\d server error: [^\n]{0,80}?for url: https?://",
    ),
    (
        "ssh",
        "network",
        ROOT,
        "ssh:",
        r"ssh: connect to host (\S+) port \d+: (?:connection timed out|connection refused|no route to host)"
        r"|ssh: could not resolve hostname (\S+?):",
    ),
    (
        "swanlab-http-auth",
        "network",
        ROOT,
        "authenticationerror",
        r"authenticationerror: failed to initialize the swanlab client",
    ),
    # ---- auth (fatal)
    ("no-tty-key", "auth-error", ROOT, "not configured", r"api[ _]key not configured \(no-tty\)"),
    # (swanlab 0.10 sdk: "... online mode: no TTY is available for interactive login." / with SWANLAB_INTERACTIVE=
    # false "... online mode: no API key was provided, and interactive prompts are disabled." (reference swanlab.md))
    (
        "swanlab-no-tty",
        "auth-error",
        ROOT,
        ("no tty", "no api key was provided"),
        r"failed to initialize swanlab in online mode: (?:no tty|no api key was provided)",
    ),
    # wandb refuses the entity / project for this key at init (wandb/apis/normalize.py CommError, wandb#7959):
    # "It appears that you do not have permission to access the requested resource. ... (Error 403: Forbidden)",
    # "wandb: ERROR Error while calling W&B API: permission denied (<Response [403]>)"
    (
        "tracker-denied",
        "auth-error",
        ROOT,
        ("do not have permission to access the requested resource", "permission denied (<response [403]>)"),
        r"you do not have permission to access the requested resource\. please reach out to the project owner"
        r"|error while calling w&b api: permission denied \(<response \[403\]>\)",
    ),
    ("prompt-no-tty", "auth-error", ROOT, "no-tty", r"cannot prompt for api key in no-tty environment"),
    # (wandb's own wordings at init: "API key must be 40 characters long", "API key verification failed" (wandb/wandb
    # PR 9230), AuthenticationError "... either invalid or missing", older CommError "Invalid or missing api_key")
    (
        "bad-key",
        "auth-error",
        ROOT,
        (
            "login failed",
            "apikeyformaterror",
            "invalid character in api key",
            "api key length",
            "api key must be",
            "api key verification failed",
            "missing api_key",
            "either invalid or missing",
        ),
        r"login failed: error api key|apikeyformaterror|invalid character in api key"
        r"|api key length must be \d+ characters|api key must be \d+ characters long|api key verification failed"
        r"|invalid or missing api_key|the api key you provided is either invalid or missing",
    ),
    # MLflow (verl utils/tracking.py: mlflow.set_experiment / start_run at init) against a tracking server with auth:
    # mlflow utils/rest_utils.py verify_rest_response "API request to endpoint /api/2.0/mlflow/experiments/get-by-name
    # failed with error code 401 != 200. Response body: '...'" (mlflow#6105; 403: mlflow#7795, #9877), the body of
    # mlflow server/auth make_basic_auth_response (mlflow PR #8841) "You are not authenticated. Please see
    # https://www.mlflow.org/docs/latest/auth/index.html#authenticating-to-mlflow on how to authenticate."
    (
        "mlflow-auth",
        "auth-error",
        ROOT,
        ("failed with error code 401", "failed with error code 403", "you are not authenticated"),
        r"api request to endpoint \S+ failed with error code 40[13] != 200|you are not authenticated\. please see",
    ),
    # ClearML (verl utils/tracking.py: clearml.Task.init): clearml backend_api session.py "Failed getting token (error
    # 401 from <api server>): Unauthorized (invalid credentials) (failed to locate provided credentials)"
    # (clearml-server#75, #174; its LoginError, older trains.backend_api the same text) and the per-call form
    # "Action failed <401/22: projects.get_all/v1.0 (Unauthorized (invalid credentials) ...)>" (clearml#1118)
    (
        "clearml-auth",
        "auth-error",
        ROOT,
        ("failed getting token", "invalid credentials"),
        r"failed getting token \(error 40[13] from [^)]*\)|<40[13]/\d+: [\w.]+/v[\d.]+ \(unauthorized"
        r"|unauthorized \(invalid credentials\)",
    ),
    (
        "stored-key",
        "auth-error",
        ROOT,
        "authenticationerror",
        r"authenticationerror: (?:stored api key is for|no api key provided)",
    ),
    # the Hub refuses a gated repo: huggingface_hub utils/_http.py hf_raise_for_status ("Cannot access gated repo for
    # url ...", "Access to model <m> is restricted"), transformers utils/hub.py cached_file ("You are trying to
    # access a gated repo."), a bare 401 on a huggingface URL
    (
        "hf-gated",
        "auth-error",
        ROOT,
        ("gatedrepoerror", "401 client error", "gated repo", "is restricted"),
        r"gatedrepoerror|401 client error: unauthorized for url: https://huggingface|cannot access gated repo for url"
        r"|you are trying to access a gated repo|access to model \S+ is restricted",
    ),
    # ---- the tracker's server answers this client with an error: a client / server version
    # pairing (or the server's own fault), neither credentials nor the network. Exception forms end tracker init
    # (fatal): urllib3 util/retry.py's ResponseError "too many 500 error responses" inside requests' RetryError /
    # "Max retries exceeded with url: /api/project/<u>/runs/<id>/sts" (SwanHubX/self-hosted#94: self-hosted v2.6.2 with
    # an old SDK, fixed by swanlab 0.7.4), swanlab.error.ApiError "('Trace id: ...', 'GET <url>', '404 Not Found')",
    # wandb's GraphQL schema refusing a newer client ('Cannot query field "versionOnThisInstanceString" on type
    # "LocalVersionInfo"': wandb#6770, client 0.16.1 on an older wandb/local), wandb "Error while calling W&B API: An
    # internal error occurred. Please contact support. (<Response [500]>)" (wandb#7267), MLflow rest_utils
    # "API request to endpoint /api/2.0/mlflow/logged-models failed with error code 404 != 200" (a 3.x client on a
    # server without that endpoint: Azure/azure-sdk-for-python#44896) and "API request to <url> failed with exception
    # ... too many 500 error responses". The SDK's own log lines while the run goes on are the NONFATAL row below.
    (
        "tracker-server",
        "config-error",
        ROOT,
        ("error responses", "apierror", "cannot query field", "error while calling w&b api", "failed with error code"),
        r"(?:swanlab|wandb|mlflow|with url: /(?:api/(?:project|house|login|resources|exp|user)|graphql|files"
        r"|api/2\.0/mlflow))[^\n]{0,300}caused by responseerror\('too many (\d{3}) error responses'\)"
        r"|swanlab\.error\.apierror: \('trace id: [^']*', '(?:get|post|put|patch|delete) [^']*', '(404|5\d\d)\b"
        r"|cannot query field \\?\"\w+\\?\" on type \\?\"\w+\\?\""
        r"|error while calling w&b api: .{0,200}\(<response \[(404|500)\]>\)"
        r"|api request to endpoint \S*mlflow\S* failed with error code (404|5\d\d) != 200"
        r"|api request to \S*mlflow\S* failed with exception .{0,300}too many (\d{3}) error responses",
    ),
    # the same while training goes on: swanlab's upload thread logs "swanlab: swanlab api error ('Trace id: ...',
    # 'POST http://<host>/api/resources/presigned/put', '404 Not Found')" (SwanHubX/self-hosted#85: SDK 0.7.4 on a
    # v2.5.0 server) or, up to 0.5, "swanlab api error, status code: 404, reason: Not Found" (self-hosted#13: SDK 0.5.6
    # on a v1.1 server); wandb "ERROR Error uploading ...: CommError, <Response [404]>"
    (
        "tracker-server-log",
        "config-error",
        ROOT,
        ("swanlab api error", "error uploading"),
        r"swanlab api error,? (?:status code: (404|500)\b|\('trace id: [^']*', '[^']*', '(404|500)\b)"
        r"|wandb: error error uploading .{0,200}commerror, <response \[(404|500)\]>",
        NONFATAL,
    ),
    # ---- auth / network (non-fatal: tracker trouble while training continues)
    ("tracker-401", "auth-error", ROOT, "401", r"(?:swanlab|wandb|api/house).{0,300}\b401\b", NONFATAL),
    # (swanlab <= 0.7 "swanlab: swanlab api error, status code: 499"; 0.9 SDK "Upload failed due to network or
    # server issues, retrying automatically." / "swanlab: Upload recovered" / "[HTTP] retry #n"; the media/object
    # upload's "swanlab: Upload error: An error occurred (UserNetworkTooSlow) when calling the PutObject operation",
    # SwanLab#1348)
    (
        "tracker-net",
        "network",
        ROOT,
        (
            "swanlab: network error",
            "retrying (retry(total=",
            "swanlab will resume uploads",
            "swanlab api error",
            "upload failed due to network",
            "upload recovered",
            "swanlab: upload error",
            "[http] retry #",
            "entering retry loop",
        ),
        r"swanlab: network error|retrying \(retry\(total=.{0,300}/api/house/|swanlab will resume uploads"
        r"|swanlab: swanlab api error|upload failed due to network or server issues|swanlab: upload recovered"
        r"|swanlab: upload error: "
        r"|swanlab\.\S*session\S* - \[http\] retry #\d+"
        # wandb sdk/lib/retry.py: "wandb: Network error (<Exception>), entering retry loop." (it reconnects itself)
        r"|wandb: network error \(\w+\), entering retry loop",
        NONFATAL,
    ),
    # wandb.init gave up on an unreachable server (wandb sdk wandb_init.py, wandb#10044): "Run initialization has
    # timed out after 90.0 sec. Please try increasing the timeout with the `init_timeout` setting"
    (
        "tracker-init-timeout",
        "network",
        ROOT,
        "run initialization has timed out",
        r"run initialization has timed out after [\d.]+ sec",
    ),
    # wandb gave up reaching its server at init after its retry loop (wandb <= 0.15 sdk/wandb_init.py: "CommError:
    # Error communicating with wandb process, exiting..." / UsageError "Error communicating with wandb process",
    # wandb#5017; its FAQ: a network or proxy that keeps the run from reaching the server): the end of the run,
    # unlike the NONFATAL retry lines above that may precede it
    (
        "tracker-comm",
        "network",
        ROOT,
        "error communicating with wandb process",
        r"(?:commerror|usageerror|error): error communicating with wandb process",
    ),
    # ---- container
    (
        "no-such-container",
        "container-missing",
        ROOT,
        "no such",
        r"no such container: ?(\S+)|error: no such object: ?(\S+)",
    ),
    # moby daemon/errors.go + daemon/exec.go: exec into a stopped, restarting or paused container is refused
    # ("Container %s is not running" / "is restarting, wait until the container is running" / "is paused, unpause
    # the container before exec"); every exec'd process (the training) is dead or frozen either way. The same refusal
    # one layer down, passed through by docker exec: docker 1.11-1.13's containerd 0.2 "rpc error: code = 2 desc =
    # containerd: container not started" (intel/cc-oci-runtime#543) / "containerd: container not found" / "container
    # not running"; containerd 1.x's task service "container <id> is not running"; the CRI
    # "container is in CONTAINER_EXITED state"; podman "can only create exec sessions on running containers"
    (
        "container-not-running",
        "container-missing",
        ROOT,
        (
            "is not running",
            "is restarting",
            "is paused",
            "containerd: container not",
            "container not running",
            "container_exited state",
            "exec sessions on running containers",
        ),
        r"error response from daemon: container (\S+) is (?:not running|restarting, wait|paused, unpause)"
        r"|containerd: container not (?:started|running|found)"
        r"|(?:rpc error|oci runtime exec failed|error response from daemon)[^\n]{0,200}(?:\bcontainer not running"
        r"|\bcontainer \\?\"?[\w.-]+\\?\"? is not running)"
        r"|container is in container_exited state|can only create exec sessions on running containers",
    ),
    # runc's refusal to exec into a container whose init has exited, passed through by docker exec
    # ("OCI runtime exec failed: exec failed: cannot exec a container that has stopped: unknown"; runc before 1.0:
    # "rpc error: code = 2 desc = oci runtime error: exec failed: cannot exec a container that has run and
    # stopped"; runc 1.1+ "cannot exec in a stopped container"); docker ps may still say Up (moby/moby#37009): the
    # training in it is gone
    (
        "container-exec-stopped",
        "container-missing",
        ROOT,
        ("cannot exec a container that has", "cannot exec in a stopped"),
        r"cannot exec a container that has (?:run and )?stopped|cannot exec in a stopped (?:container|state)",
    ),
    (
        "docker-daemon",
        "container-missing",
        ROOT,
        "docker daemon",
        r"cannot connect to the docker daemon at \S+\. is the docker daemon running",
    ),
    # ---- specific crash causes (crash-other, but root causes: beat collective symptoms)
    (
        "thread-limit",
        "crash-other",
        ROOT,
        ("resource temporarily unavailable", "can't start new thread", "pthread_create"),
        r"thread: resource temporarily unavailable|can't start new thread|pthread_create failed"
        r"|resource temporarily unavailable \[system:11\]"
        # GCC libgomp team.c gomp_team_start: gomp_fatal("Thread creation failed: %s", strerror(err)) (ray#8546)
        r"|libgomp: thread creation failed: resource temporarily unavailable",
    ),
    # kernel execution faults (cudaErrorIllegalAddress / LaunchFailure / MisalignedAddress / IllegalInstruction)
    (
        "illegal-memory",
        "crash-other",
        ROOT,
        ("illegal memory access", "launch failure", "misaligned address", "illegal instruction"),
        r"illegal memory access|unspecified launch failure|misaligned address|an illegal instruction was encountered",
    ),
    # ("Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions." is advice after EVERY CUDA error:
    # c10/cuda/CUDAException.cpp; only "device-side assert triggered" is the assert)
    ("device-assert", "crash-other", ROOT, "device-side assert", r"device-side assert(?:ion)? triggered"),
    # a GPU hardware fault (cudaErrorECCUncorrectable, CUDA_ERROR_ECC_UNCORRECTABLE = 214; Xid "fallen off the
    # bus"): never memory pressure, whatever collective re-reports it
    (
        "device-fault",
        "crash-other",
        ROOT,
        ("ecc error", "ecc_uncorrectable", "eccuncorrectable", "fallen off the bus"),
        r"uncorrectable ecc error|ecc_uncorrectable|eccuncorrectable|fallen off the bus",
    ),
    # a Ray node lost (GCS health check: "has been marked dead because the detector has missed too many heartbeats";
    # ray/exceptions.py ActorDiedError "The actor is dead because its node has died", NodeDiedError,
    # LocalRayletDiedError; a worker's exit detail "Owner's node has crashed." -- Worker exit type SYSTEM_ERROR,
    # in the raylet's "A worker died or was killed ..." line and ActorDiedError's "its owner has died" line: the
    # owner's node went, the worker with it). Ray's own text lists "OOM" among possible reasons: advice, not evidence.
    (
        "node-died",
        "crash-other",
        ROOT,
        ("marked dead", "node has died", "nodediederror", "raylet died", "node has crashed"),
        r"has been marked dead because the detector has missed too many heartbeats|because its node has died"
        r"|nodediederror|localrayletdiederror|the task's local raylet died|owner's node has crashed",
    ),
    # the Ascend runtime cannot be loaded: the driver's library (libascend_hal.so, /usr/local/Ascend/driver not
    # mounted) -> driver-lib; CANN's (set_env.sh not sourced: libhccl.so, libascendcl.so ...) -> runtime env.
    # Only libraries torch_npu cannot start without: CUDA libraries are probed (and missed harmlessly) by others.
    # Both are the container's environment (config-error), fixed in the image, never a fault.
    (
        "driver-lib",
        "config-error",
        ROOT,
        "cannot open shared object file",
        r"lib(?:ascend_hal|drvdsmi_host)\.so[.\d]*: cannot open shared object file",
    ),
    (
        "runtime-env",
        "config-error",
        ROOT,
        ("cannot open shared object file", "driver on your system is too old", "driver version is insufficient"),
        r"lib(?:hccl|ascendcl|acl_op_compiler|ge_runner|graph|runtime|opapi|nnopbase|torch_npu|atb)\.so[.\d]*: cannot open "
        r"shared object file|nvidia driver on your system is too old|cuda driver version is insufficient for cuda runtime",
    ),
    (
        "segfault",
        "crash-other",
        ROOT,
        ("segmentation fault", "sigsegv"),
        r"segmentation fault|\bsigsegv\b|fatal python error: segmentation",
    ),
    # /dev/shm too small (Docker's 64 MiB default): a DataLoader worker dies of SIGBUS. Not a host OOM (no
    # OOM killer, the host has RAM): crash-other, fixed by --shm-size / --ipc=host, never by memory rungs.
    (
        "shm",
        "crash-other",
        ROOT,
        ("shared memory", "bus error", "/dev/shm", "posix_fallocate"),
        r"out of shared memory|insufficient shared memory|killed by signal: bus error|bus error.{0,120}\(shm\)"
        r"|unable to (?:open|allocate|map|write to) shared memory|shared memory object.{0,160}(?:no space left|cannot allocate)"
        r"|no space left on device.{0,80}/dev/shm|/dev/shm.{0,80}no space left"
        # NCCL's SHM transport (include/shm.h <= 2.7, misc/shmutils.cc later): /dev/shm too small or not shared
        r"|nccl warn (?:call to posix_fallocate failed|error: failed to extend /dev/shm/nccl-"
        r"|error while (?:creating|attaching to) shared memory segment)",
    ),
    # ENOSPC / EDQUOT, and torch.save's own words for a failed write (c10 inline_container.cc)
    # ("unexpected pos <a> vs <b>": torch.save's zip writer after a short write on a full shared filesystem)
    (
        "disk-full",
        "crash-other",
        ROOT,
        (
            "no space left on device",
            "disk quota exceeded",
            "storagefull",
            "pytorchstreamwriter failed writing",
            "unexpected pos",
        ),
        r"no space left on device|disk quota exceeded|\bstoragefull\b|pytorchstreamwriter failed writing file"
        r"|inline_container\.cc:\d+\] \. unexpected pos \d+ vs \d+",
    ),
    # a write verl cannot make: EACCES / EROFS as the innermost exception (a checkpoint save's os.makedirs in the
    # actor workers, verl/utils/fs.py:303 under verl/utils/checkpoint/fsdp_checkpoint_manager.py:299, comes back as
    # RayTaskError(PermissionError)): the same write fails again on a retry
    (
        "write-permission",
        "crash-other",
        ROOT,
        ("[errno 13] permission denied", "[errno 30] read-only file system"),
        r"^\s*(?:permissionerror|oserror): \[errno 13\] permission denied: |^\s*oserror: \[errno 30\] read-only "
        r"file system: ",
    ),
    # device absent / not mounted / not visible (codes: dapo_ops/core/classify/device_codes.py)
    (
        "device-unavailable",
        "crash-other",
        ROOT,
        ("error code", "ret", "aclerror", "curesult", "cuda_error", "no cuda", "aclrtsetdevice", "no nvidia driver"),
        _UNAVAIL_CODE_PAT + r"|no cuda gpus are available|aclrtsetdevice.{0,60}(?:failed|error)"
        r"|found no nvidia driver on your system",
        CODES,
    ),
    # operator / AI Core / runtime execution fault (kernel bug, version mismatch): stop, no memory rung
    ("kernel-fault", "crash-other", ROOT, ("error code", "ret", "aclerror"), _KERNEL_CODE_PAT, CODES),
    # ---- any other exception of verl's start-up checks of a config value (verl/utils/config.py validate_config, the
    # config dataclasses' __post_init__, the V1 trainer's replay buffer ...: dapo_ops/core/classify/startcheck.py): an
    # AssertionError / ValueError / NotImplementedError / KeyError / TypeError / RuntimeError line counts only under
    # such a frame before the first step (classify/decide.py screens it); last of the root causes, so a specific row
    # on the same line reads it better
    (
        "verl-check",
        "config-error",
        ROOT,
        ("assertionerror", "valueerror", "notimplementederror", "keyerror", "typeerror", "runtimeerror"),
        r"^\s*(?:[\w.]+\.)?(?:assertionerror|valueerror|notimplementederror|keyerror|typeerror|runtimeerror)(?::|\s*$)",
    ),
    # ---- collectives (usually a symptom of another rank's failure)
    (
        "watchdog",
        "hccl-timeout",
        COLLECTIVE,
        "watchdog caught collective operation timeout",
        r"watchdog caught collective operation timeout: work(?:nccl|hccl)\(seqnum=(\d+)",
    ),
    # torch c10d ProcessGroupNCCL.cpp heartbeatMonitor: the watchdog itself is stuck in a hung NCCL / CUDA call
    # ("Heartbeat monitor timed out! Process will be terminated after dumping debug info.", "ProcessGroupNCCL's
    # watchdog got stuck for <n> seconds without making progress in monitoring enqueued collectives")
    (
        "heartbeat",
        "hccl-timeout",
        COLLECTIVE,
        ("heartbeat monitor timed out", "watchdog got stuck"),
        r"heartbeat monitor timed out! process will be terminated|processgroupnccl's watchdog got stuck for \d+ seconds",
    ),
    (
        "coll-failed",
        "hccl-timeout",
        COLLECTIVE,
        "operations have failed or timed out",
        r"some (?:nccl|hccl) operations have failed or timed out",
    ),
    # torch: "NCCL error in: <file>:<line>, <reason>" (c10d NCCLUtils), older torch "NCCL Error <n>: <reason>",
    # vLLM pynccl "NCCL error: <reason>" (vllm/distributed/device_communicators/pynccl_wrapper.py)
    (
        "nccl-error",
        "hccl-timeout",
        COLLECTIVE,
        "nccl",
        r"\bnccl error(?: \d+| in)?:|ncclsystemerror|ncclinternalerror|ncclremoteerror|ncclunhandledcudaerror"
        r"|nccl communicator was aborted",
    ),
    ("dist-backend", "hccl-timeout", COLLECTIVE, "distbackenderror", r"distbackenderror"),
    # the c10d rendezvous store (torch/csrc/distributed/c10d/socket.cpp, TCPStore.cpp): the group never formed.
    # socket.cpp words its connect timeout two ways: the final "client socket has timed out after <n>ms while
    # trying to connect to" and, per attempt, "The server socket on <addr> has timed out, will retry." (a run
    # that hangs there shows only the latter); ProcessGroupNCCL's broadcastUniqueNCCLID (and torch_npu's HCCL
    # twin) fails when the root rank's store does not answer: "[1] is setting up NCCL|HCCL communicator and
    # retrieving ncclUniqueId|hcclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got
    # error: ...". All three: the communicator was never built.
    (
        "dist-store",
        "hccl-timeout",
        COLLECTIVE,
        ("diststoreerror", "socket", "tcp client failed", "uniqueid"),
        r"diststoreerror|\[c10d\] the client socket has timed out after \d+ms while trying to connect to"
        r"|\[c10d\] the server socket on \S{1,80} has timed out, will retry"
        r"|tcp client failed to connect/validate to host"
        r"|is setting up [nh]ccl communicator and retrieving [nh]ccluniqueid from \[\d+\] via c10d key-value store",
    ),
    # HCCL / HCCP's own error records on stdout (ASCEND_SLOG_PRINT_TO_STDOUT=1): "[ERROR] HCCL(<pid>,...):<ts>
    # [<file>.cc:<n>] ... hccl initialize failed / call trace: hcclRet -> <n>"
    (
        "hccl-plog",
        "hccl-timeout",
        COLLECTIVE,
        ("[error] hccl(", "[error] hccp("),
        r"^\s*\[error\] hcc[lp]\(\d+,[^)\n]*\):.{0,400}(?:fail|error|hcclret -> \d+)",
    ),
    # Gloo (CPU collectives): a peer went away (third_party/gloo/gloo/transport/tcp/pair.cc)
    # (and torch ProcessGroupGloo.cpp: the CPU group never formed, "Gloo connectFullMesh failed with [...pair.cc:144]
    # no error": verl#967, vLLM's gloo cpu_group across nodes; GLOO_SOCKET_IFNAME / reachability)
    (
        "gloo",
        "hccl-timeout",
        COLLECTIVE,
        "gloo",
        r"gloo/transport/tcp/pair\.cc:\d+\] (?:connection closed by peer|read error|connection reset by peer|timed out)"
        r"|gloo connectfullmesh failed",
    ),
    (
        "hccl-func",
        "hccl-timeout",
        COLLECTIVE,
        "hccl",
        r"hccl function error: (\w+)|ops function error: hccl\w*"
        r"|\bhccl\w*(?:\([^)\n]{0,80}\))? (?:failed|error)[,:]? ?(?:with )?(?:error code(?: is)?|ret(?:urn)? ?=) ?-?\d+",
    ),
    # HCCL / HCCP codes by family (EIxxxx, EJxxxx, torch_npu ERR02xxx / ERRss200, ACL 507057), not a list
    (
        "cann-hccl",
        "hccl-timeout",
        COLLECTIVE,
        ("error code", "ret", "aclerror", "getting socket", "notify register", "hccp", "hccl"),
        _COMM_CODE_PAT + r"|getting socket times out|wait execution of the notify register times out"
        r"|failed to initialize the hccp process|hccl error: ",
        CODES,
    ),
    # HCCL's own body lines of a collective task that timed out on the device, which hold without the EI / EZ code
    # line above them (a tail that starts inside the block, lmdeploy#3354): the runtime's device_error_proc.cc
    # ProcessStarsHcclFftsPlusTimeoutErrorInfo "hccl fftsplus task timeout occurred during task execution, stream_id:7,
    # ..., stuck notify num:3, timeout:1836" and its "The 0 stuck notify wait context info:(context_id=13,
    # notify_id=17)" lines; HCCL's "wait for notify timeout" / "notify wait timeout" (not "HCCL execute failed":
    # any HCCL call's failure, a timeout or not)
    (
        "hccl-task-timeout",
        "hccl-timeout",
        COLLECTIVE,
        ("fftsplus", "stuck notify", "notify timeout", "notify wait timeout"),
        r"hccl (?:fftsplus )?task timeout occurred|stuck notify num:\s*\d+|\bthe \d+ stuck notify wait context"
        r"|processstarshcclfftsplustimeouterrorinfo|wait for notify timeout|notify wait timeout",
    ),
    # ---- weak network: exception lines only
    (
        "net-exc",
        "network",
        WEAK,
        ("error", "exception"),
        r"(?m)^\s*(?:[\w.]+\.)?(?:connectionrefusederror|connectionreseterror|connectionerror|maxretryerror"
        r"|gaierror|timeouterror|nameresolutionerror|newconnectionerror|sslerror|readtimeout|connecttimeout"
        r"|readtimeouterror|connecttimeouterror|connecterror)\b.*"
        r"|^\s*[\w.]*(?:error|exception): .{0,200}(?:connection refused|connection timed out|no route to host"
        r"|name or service not known|temporary failure in name resolution|max retries exceeded with url"
        r"|read timed out)",
    ),
    # ---- generic crash evidence
    (
        "actor-died",
        "crash-other",
        GENERIC,
        ("died", "system_error"),
        r"actordiederror|the actor died unexpectedly|the worker died unexpectedly"
        r"|a worker died or was killed|worker exit type: system_error",
    ),
    ("engine-start", "crash-other", GENERIC, "engine", r"enginecore failed to start|engine core initialization failed"),
    (
        "exception",
        "crash-other",
        GENERIC,
        ("error", "exception", "interrupt"),
        r"(?m)^[^\S\n]*(?:(?:error|critical) [\d-]+ [\d:.]+ (?:\[[^\]\n]*\]|[\w.]+:\d+\]) )?"
        r"(?!ray\.exceptions\.raytaskerror)[a-z_][\w.]*(?:error|exception|interrupt)(?:\([^)\n]*\))?:[^\n]*"
        # a bare exception line: Python prints `AssertionError` alone for an assert with no message (the evidence
        # was only "exit code 1")
        r"|^[^\S\n]*(?!ray\.exceptions\.raytaskerror)[a-z_][\w.]*(?:error|exception|interrupt)[^\S\n]*$",
    ),
)


SIGNATURES: tuple[Sig, ...] = build_signatures(SIGNATURE_ROWS)
