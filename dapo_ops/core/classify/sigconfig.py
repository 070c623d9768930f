"""The classifier's configuration-error signatures (:mod:`dapo_ops.core.classify`), as data: Hydra / OmegaConf
rejections, verl's and the rollout engines' start-up asserts, resources, resume layout, missing files / model
paths, and the key a divisibility message is about. Rows in the format of ``dapo_ops/core/classify/signatures.py`` (``(name, class, tier, needles, pattern)``,
see :mod:`dapo_ops.core.classify.sigtable`); :data:`CONFIG_ROWS` is spliced into
:data:`dapo_ops.core.classify.signatures.SIGNATURE_ROWS`. Where each text comes from is noted at its row.

STDLIB ONLY. No errors raised here; a bad row raises ClassifierTableError when signatures.py compiles the table.
"""

from __future__ import annotations

from typing import Any

from dapo_ops.core.classify.sigtable import ROOT

CONFIG_ROWS: tuple[tuple[Any, ...], ...] = (
    ("hydra-override", "config-error", ROOT, "could not override", r"could not override '([^']+)'"),
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
    ("rollout-mode", "config-error", ROOT, "rollout.mode", r"assert .{0,40}rollout\.mode == ['\"]async['\"]"),
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
