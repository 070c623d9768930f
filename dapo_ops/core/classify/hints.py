"""The failure classifier's words for people (:mod:`dapo_ops.core.classify`): the hint texts and their rules, as data,
and the action line and hint of one verdict.

The hint paragraphs and the rules that choose one from a verdict's class, action kind and detail; their rendering
for one verdict (:func:`action_text`: the one-line action, the failure policy's text from
``dapo_ops/core/policy.py`` :data:`POLICY`; :func:`hint_text`: the hint paragraph).

STDLIB ONLY. Keys and values named here are verl 0.9.1's (``verl/trainer/config/ppo_trainer.yaml`` and the
generated ``_generated_ppo_trainer.yaml``).

How a hint is chosen: :data:`HINT_RULES` lists, per class, ``(field, value, text key)``
rules; the first rule that holds names the text, else the text keyed by the class itself. ``field`` is ``kind``
(the action kind, from the policy) or a detail key; ``value`` is a literal, ``SET`` (the detail value is truthy)
or ``ABSENT`` (the detail key is missing; both from ``dapo_ops/core/policy.py``). A class without rules uses the ``crash-other`` rules and texts.

Texts (the hints here and the policy's actions) are :class:`string.Template` strings: ``$name`` / ``${name}`` is a
fragment of :data:`FIELDS` (computed from the detail only when the text uses it; ``""`` when the fact is unknown);
``$$`` is a literal dollar sign. :func:`check_texts` checks at import that every class has a default text, every
rule names a text and every field exists (:class:`~dapo_ops.core.classify.verdict.ClassifierTableError`).
"""

from __future__ import annotations

from string import Template
from typing import Any, Callable

from dapo_ops.core import datafeed, health, policy
from dapo_ops.core.classify.verdict import CLASSES, ClassifierTableError
from dapo_ops.core.policy import ABSENT, SET

# --------------------------------------------------------------------------- hints (one paragraph)


def _causes(cls: str, *causes: str) -> tuple[tuple[str, object, str], ...]:
    return tuple(("cause", c, f"{cls}/{c}") for c in causes)


#: where a verdict's paragraph sends the reader for the resume: the command itself, with the run's hosts, id and task,
#: is the stop's last suggestion (dapo_ops/core/ladder.py resume_command), which `inv status` / `inv watch` print; a
#: verdict of a log alone knows no run to name
RESUME_CMD = "`inv status -H <host>` prints the run's `--resume` command"

HINT_RULES: dict[str, tuple[tuple[str, object, str], ...]] = {
    "oom-device": (
        ("phase", "checkpoint-load", "oom-device/checkpoint-load"),
        ("phase", "model-load", "oom-device/model-load"),
        ("phase", "checkpoint-save", "oom-device/checkpoint-save"),
        ("phase", "weight-sync", "oom-device/weight-sync"),
        ("phase", "rollout-init", "oom-device/rollout-init"),
        ("phase", "generation", "oom-device/generation"),
        ("phase", "update", "oom-device/update"),
        ("phase", "log-prob", "oom-device/log-prob"),
    ),
    "oom-kv-cache": (
        ("kv_direction", "raise", "oom-kv-cache/raise"),
        ("kv_direction", "cleanup", "oom-kv-cache/cleanup"),
    ),
    "oom-ray": (("phase", "checkpoint-save", "oom-ray/checkpoint-save"),),
    "oom-host": (),
    "config-error": (("kind", "keep-running", "config-error/tracker-version"),)
    + _causes(
        "config-error",
        "data-missing",
        "model-path",
        "entry-module",
        "missing-module",
        "ray-cpus",
        "hydra-override",
        "stale-key",
        "gpus",
        "tp",
        "token-budget",
        "resume-layout",
        "chat-template",
        "visible-devices",
        "verl-check",
        "runtime-env",
        "driver-lib",
        "toolchain",
        "numpy-abi",
        "cann-env",
        "tracker-version",
    ),
    "data-error": _causes("data-error", "schema", "too-difficult", "empty", "reward-source"),
    "network": (("kind", "keep-running", "network/keep-running"),)
    + _causes("network", "ray-head", "hub", "tracker", "ssh"),
    "hccl-timeout": (("cause", "hccp-busy", "hccl-timeout/hccp-busy"), ("init", SET, "hccl-timeout/init")),
    "container-missing": (),
    "auth-error": (("kind", "keep-running", "auth-error/keep-running"),),
    "success": (),
    "diverged": (("recurred", SET, "diverged/persistent"),),
    "data-ran-out": _causes("data-ran-out", "one-step-off"),
    "crash-other": (("external", SET, "crash-other/external-kill"),)
    + _causes(
        "crash-other",
        "thread-limit",
        "impossible-allocation",
        "sigkill",
        "earlier-error",
        "disk-full",
        "write-permission",
        "shm",
        "device-unavailable",
        "kernel-fault",
        "illegal-memory",
        "device-fault",
        "node-died",
        "worker-died",
        "engine-dead",
        "ray-unpickle",
        "torch-compile",
    )
    + (("inconclusive", SET, "crash-other/inconclusive"),),
}

_LADDER = (
    "offload (FSDP actor_rollout_ref.actor.fsdp_config.param_offload=True and optimizer_offload=True, "
    "actor_rollout_ref.ref.fsdp_config.param_offload=True; Megatron actor_rollout_ref.actor.megatron."
    "param_offload=True / optimizer_offload=True), then recompute (actor_rollout_ref.model."
    "enable_activation_offload=True with enable_gradient_checkpointing=True, actor_rollout_ref.actor."
    "entropy_checkpointing=True; Megatron override_transformer_config.recompute_granularity=full)"
)

HINTS: dict[str, str] = {
    "diverged": (
        "The training metrics went bad: ${flag_words} (dapo_ops/core/health.py). verl only warns and skips a "
        "non-finite update (verl/workers/engine/fsdp/transformer_impl.py:822-824), so the run would step on learning "
        "nothing. A retry from the last checkpoint before step ${bad_step} tells a transient fault from a persistent "
        "one. Likely causes: ${causes}."
    ),
    "diverged/persistent": (
        "${flag_words}, again after a retry from a checkpoint before it: persistent, not chance. Likely causes: "
        "${causes}. Fix it, then resume (" + RESUME_CMD + "): it starts from the last healthy checkpoint (before "
        "step ${bad_step}), never a later one."
    ),
    "oom-device/checkpoint-load": (
        "Accelerator memory ran out while loading a checkpoint on resume${at}: the saved shards are torch.load()ed "
        "straight onto the device (no map_location) while the colocated rollout already holds its share, so "
        "offload/recompute do not shrink it and dapo-ops does not loop the ladder. Relaunch with a verl that loads "
        "shards to CPU (map_location='cpu'), or with a lower actor_rollout_ref.rollout.gpu_memory_utilization for the "
        "resume; keep trainer.resume_mode=auto and the same world size, and check that the newest global_step_N is "
        "complete."
    ),
    "oom-device/model-load": (
        "Accelerator memory ran out while the model was built and its weights loaded${at}: no memory rung lowers "
        "that peak (the weights must fit the trainer's shards), so dapo-ops stops instead of climbing the ladder. "
        "Give the trainer pool more devices (or a larger tensor / pipeline parallel size with Megatron), use a "
        "smaller model or a lower-precision checkpoint, and free devices held by leftover processes (nvidia-smi / "
        "npu-smi info); then relaunch."
    ),
    "oom-device/checkpoint-save": (
        "Accelerator memory ran out while a checkpoint was saved${at}: the state gathered for the save does not "
        "shrink with any memory rung, so dapo-ops stops instead of climbing the ladder, and the newest "
        "global_step_N may be partial. Save less (actor_rollout_ref.actor.checkpoint.save_contents without "
        "'hf_model') or give the trainer pool more devices (smaller shards per device); then resume from the last "
        "complete checkpoint."
    ),
    "oom-device/weight-sync": (
        "Accelerator memory ran out in the actor->rollout weight sync${at} (the rollout's sleep-mode wake-up "
        "re-allocates its weights and KV cache while the actor's state is still on the device). dapo-ops follows the "
        "weight-sync ladder: lower actor_rollout_ref.rollout.gpu_memory_utilization, then actor offload "
        "(actor_rollout_ref.actor.fsdp_config.param_offload=True / optimizer_offload=True) so the actor's state "
        "leaves before the rollout wakes. Recompute does not change this peak. With one-step-off (separate trainer "
        "and rollout pools) the ladder follows the side that ran out: trainer: halve the checkpoint engine's bucket "
        "(actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes), twice; rollout: the bucket "
        "too, twice (verl frees the rollout's KV cache before it allocates the buckets, checkpoint_engine/base.py:"
        "532-556, so its share is not in this peak), then the rollout pool's gpu_memory_utilization."
    ),
    "oom-device/rollout-init": (
        "Accelerator memory ran out while the rollout engine started${at} (its weights, KV cache and CUDA-graph "
        "capture next to the actor). dapo-ops follows the rollout-init ladder: lower "
        "actor_rollout_ref.rollout.gpu_memory_utilization, then eager mode (actor_rollout_ref.rollout.enforce_eager="
        "True: no graph capture), then actor offload (actor_rollout_ref.actor.fsdp_config.param_offload=True / "
        "optimizer_offload=True; a separate rollout pool lowers its share again instead). Recompute does not change "
        "this peak."
    ),
    "oom-device/generation": (
        "Accelerator memory ran out while the rollout generated${at} (the KV cache grows into its share next to "
        "the actor's resident state). dapo-ops follows the generation ladder: lower "
        "actor_rollout_ref.rollout.gpu_memory_utilization, then actor offload (actor_rollout_ref.actor.fsdp_config."
        "param_offload=True / optimizer_offload=True; a separate rollout pool lowers its share again instead). "
        "Recompute does not change this peak."
    ),
    "oom-device/update": (
        "Accelerator memory ran out in the actor update${at} (forward, backward and optimizer step of one "
        "micro-batch; the rollout sleeps meanwhile, so its gpu_memory_utilization does not change this peak). "
        "dapo-ops follows the update ladder: shrink the update micro-batch (halve "
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu with dynamic batch, never below prompt + response; else "
        "divide ppo_micro_batch_size_per_gpu by 4), twice; FSDP then its CPU offload policy "
        "(actor_rollout_ref.actor.fsdp_config.offload_policy=True); then recompute "
        "(actor_rollout_ref.model.enable_activation_offload=True with gradient checkpointing; Megatron "
        "override_transformer_config.recompute_granularity=full). Parameter/optimizer offload is not a rung here: "
        "verl loads the state back for the update.${oom_extra}"
    ),
    "oom-device/log-prob": (
        "Accelerator memory ran out in the log-prob forward${at} (no-grad forward over a micro-batch: its logits "
        "are tokens x vocabulary). dapo-ops follows the log-prob ladder: halve "
        "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu (and .ref.) with dynamic batch, never below prompt "
        "+ response; else divide log_prob_micro_batch_size_per_gpu by 4), twice; then it stops with suggestions (a "
        "smaller max_response_length, more trainer devices)."
    ),
    "oom-device": (
        "Accelerator memory ran out${inph}${at}. dapo-ops retries with the next rung of the memory ladder: "
        + _LADDER
        + ". If both are on, shrink: actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1 or a lower "
        "ppo_max_token_len_per_gpu (never below max_prompt_length + max_response_length), raise "
        "ulysses_sequence_parallel_size, or use bigger devices; PYTORCH_CUDA_ALLOC_CONF / "
        "PYTORCH_NPU_ALLOC_CONF=expandable_segments:True helps fragmentation. Rollout gpu_memory_utilization does not "
        "change a training OOM.${oom_extra}"
    ),
    "oom-kv-cache/raise": (
        "The rollout engine's KV cache cannot hold one sequence of max_model_len (prompt + response). If the device "
        "has headroom raise actor_rollout_ref.rollout.gpu_memory_utilization (e.g. 0.5 -> 0.7); otherwise lower "
        "actor_rollout_ref.rollout.max_model_len / data.max_response_length, or raise "
        "actor_rollout_ref.rollout.tensor_model_parallel_size. Training offload/recompute do not change this "
        "allocation."
    ),
    "oom-kv-cache/cleanup": (
        "Free device memory at rollout start-up is below the requested gpu_memory_utilization: usually leftovers of "
        "the previous attempt. Run `ray stop --force` in the container, kill the recorded PIDs, check `npu-smi info` "
        "/ `nvidia-smi` (on NPU wait ~10 s), then relaunch unchanged. Lower "
        "actor_rollout_ref.rollout.gpu_memory_utilization only if another job really uses that memory. Training "
        "offload/recompute are irrelevant."
    ),
    "oom-kv-cache": (
        "The rollout engine (vLLM / vllm-ascend) ran out of device memory while allocating its weights or KV cache. "
        "Lower actor_rollout_ref.rollout.gpu_memory_utilization (e.g. 0.85 -> 0.75 -> 0.65; 0.6-0.8 on Ascend) "
        "and/or actor_rollout_ref.rollout.max_model_len. Training offload/recompute do not change this allocation."
    ),
    "oom-ray/checkpoint-save": (
        "Ray's memory monitor killed a worker while saving a checkpoint${on_node}: host RAM ran out and${ray_ckpt} "
        "may be incomplete, so resume from the previous complete global_step_N. Save less "
        "(actor_rollout_ref.actor.checkpoint.save_contents=['model']) or add host RAM. Do not add offload (it moves "
        "parameters and optimizer state into host RAM); raising RAY_memory_usage_threshold is not a fix."
    ),
    "oom-ray": (
        "Ray's memory monitor killed a task${inph}${on_node}: host RAM, not device memory, ran out. Remove "
        "ladder-added offload, then reduce host memory: data.gen_batch_size, actor_rollout_ref.rollout.n, "
        "data.max_response_length, fewer rollout workers; use jemalloc (LD_PRELOAD=/usr/local/lib/libjemalloc.so.2) "
        "or add host RAM. Raising RAY_memory_usage_threshold or RAY_memory_monitor_refresh_ms=0 only hides it."
    ),
    "oom-host": (
        "The kernel / cgroup OOM killer SIGKILLed the training process${at} (exit 137, no traceback). Confirm with "
        "`docker inspect -f '{{.State.OOMKilled}}' <container>` or `dmesg | grep -i 'killed process'`. Remove "
        "ladder-added offload (it uses host RAM), lower host-side memory (data.gen_batch_size, dataloader workers, "
        "actor_rollout_ref.actor.checkpoint.save_contents), and raise the container limit (docker run --memory / "
        "--shm-size).${host_ckpt}"
    ),
    "config-error/data-missing": (
        "A dataset file does not exist where the run reads it${path}: verl's config checks passed, but they never "
        "open files. Run the data preparation (e.g. examples/data_preprocess/gsm8k.py --local_dir ...) or point "
        "data.train_files / data.val_files to files that exist inside the container on every node (`dapo-ops "
        "prepare`, preflight checks them); then relaunch."
    ),
    "config-error/model-path": (
        "The model path is not a directory inside the container, so transformers / huggingface_hub took it for a Hub "
        "repo id and rejected it: the host path is not mounted (docker -v) or is misspelt. Set "
        "actor_rollout_ref.model.path to the path as seen INSIDE the container (check with `ls` via docker exec); "
        "preflight checks it. Not a network problem."
    ),
    "config-error/entry-module": (
        "python -m could not find the trainer's entry module in the container: its verl does not have it. verl 0.9.1 "
        "runs DAPO on verl.trainer.main_ppo (the V1 trainer, VERL_PROFILE=0.9); the older recipe entry "
        "recipe.dapo.main_dapo (VERL_PROFILE=0.8) needs the recipe submodule (git submodule update --init recipe). "
        "Set the profile that matches the container's verl (inv preflight's verl / entry checks say which) and "
        "relaunch; a retry would fail the same way."
    ),
    "config-error/missing-module": (
        "The trainer died importing ${module_what}${inph}${ckpt_paren}: the container's Python environment lacks it "
        "or holds a build that does not fit (the environment, not a value verl checks). Fix: ${module_fix}. Do it in "
        "the image every Ray node runs (`python -c 'import ...'` inside the container checks it), then relaunch; "
        "dapo-ops never retries it unchanged: a retry or a resume reaches the same import again."
    ),
    "config-error/ray-cpus": (
        "A Ray worker could not register with its own raylet right after start-up: ray.init() sized the worker pool "
        "to all host CPUs while the cgroup / Slurm allocation grants fewer (or the pids limit is hit). Set "
        "ray_kwargs.ray_init.num_cpus (older verl: ray_init.num_cpus) to the CPUs really available "
        "(SLURM_CPUS_PER_TASK / nproc), `ray stop --force`, then relaunch. Not the network, not memory."
    ),
    "config-error/stale-key": (
        "Hydra rejected the override ${key_repr}: the key does not exist in the installed verl's schema (renamed or "
        "removed, e.g. megatron.grad_offload is gone in 0.9.1). Drop it or use the current key (param_offload / "
        "optimizer_offload); never prepend '+' blindly (it creates a key nothing reads). Validate overrides with "
        "`dapo-ops` preflight before launch."
    ),
    "config-error/hydra-override": (
        "Hydra could not apply an override to verl's config before training: ${override_fix}. The override came "
        "from --override (or the user config file): `inv launch --dry-run` shows the overrides the run passes. "
        "Hydra's prefixes: `key=value` sets a key the config has, `+key=value` adds a new one (only useful if "
        "something reads it), `++key=value` sets or adds, `~key` deletes one. dapo-ops never retries a config error "
        "unchanged."
    ),
    "config-error/verl-check": (
        "verl's own start-up check${check_where} rejected ${key_value}${check_message_paren}. Hydra composed the "
        "config, so dapo-ops' pre-launch compose check passed it, but verl refuses the value itself before the first "
        "step (verl/utils/config.py validate_config, the config dataclasses' __post_init__ under verl/workers/config, "
        "the V1 trainer's replay-buffer, dataset and resume checks). Fix: ${check_fix} (`inv launch --override "
        "KEY=VALUE`, or the user config file), then relaunch; dapo-ops never retries it unchanged: a retry fails the "
        "same way."
    ),
    "config-error/gpus": (
        "Ray has fewer devices than the run asks for${have}: set trainer.nnodes x trainer.n_gpus_per_node "
        "(one-step-off: plus rollout.nnodes x rollout.n_gpus_per_node, the pools add up) to the real cluster, or join "
        "the missing nodes. If the shortfall is fractional (7.0 < 8) stale Ray actors of a previous attempt still "
        "hold devices: `ray stop --force` first."
    ),
    "config-error/tp": (
        "Rollout tensor parallel size must divide the rollout device count${ws}: set "
        "actor_rollout_ref.rollout.tensor_model_parallel_size to a divisor of it (e.g. 1 on a single device; "
        "one-step-off: of rollout.n_gpus_per_node x rollout.nnodes)."
    ),
    "config-error/token-budget": (
        "A dynamic-batch token budget is below one padded sequence${need}: set "
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu and *.log_prob_max_token_len_per_gpu >= "
        "data.max_prompt_length + data.max_response_length (verl scripts use 2x / 3x that), or shorten the lengths. "
        "The ladder never shrinks budgets below this bound."
    ),
    "config-error/visible-devices": (
        "The device list in ${key_repr} names devices this container does not have (or lists them out of order): "
        "the runtime refused to open them. Inside the container the devices are renumbered from 0 (`npu-smi info` / "
        "`nvidia-smi -L` there), so set the variable to those ids in ascending order or unset it and let Ray assign "
        "them; check the container's device mounts (/dev/davinci*, --gpus) and that trainer.n_gpus_per_node is not "
        "above the count. Configuration, not a kernel fault: no retry helps until then."
    ),
    "config-error/resume-layout": (
        "Resume found a checkpoint saved with another world size / layout (shard names embed it). Resume with the "
        "original trainer.nnodes x n_gpus_per_node (and one-step-off split), or set trainer.resume_mode=disable / a "
        "fresh trainer.default_local_dir."
    ),
    "config-error/runtime-env": (
        "The accelerator runtime cannot be loaded in the container: CANN's environment is not set (source "
        "/usr/local/Ascend/ascend-toolkit/set_env.sh, and nnal/atb/set_env.sh for ATB, in the shell that starts Ray; "
        "the ascend-toolkit is missing or of another release than torch_npu wants), or the CUDA runtime / driver pair "
        "does not match (the driver must be as new as the CUDA the torch wheel names). Fix the image or the "
        "environment, then relaunch; no retry helps until then."
    ),
    "config-error/driver-lib": (
        "The Ascend driver's library (libascend_hal.so, from /usr/local/Ascend/driver) is not in the container: mount "
        "the driver directory (docker -v /usr/local/Ascend/driver:/usr/local/Ascend/driver) and put its lib64 on "
        "LD_LIBRARY_PATH, with the devices (/dev/davinci*, /dev/davinci_manager, /dev/hisi_hdc, /dev/devmm_svm); the "
        "driver release must be one the container's CANN supports. Then relaunch; no retry helps until then."
    ),
    "config-error/toolchain": (
        "A just-in-time build in a worker (Triton's launcher stub, torch.compile / inductor, a JIT extension) could "
        "not compile or link${library_paren}. For -lcuda: Triton links against libcuda.so, and the container has only "
        "the driver's libcuda.so.1 (or none): run `ldconfig` after the driver is mounted, create the libcuda.so link "
        "next to libcuda.so.1, or set TRITON_LIBCUDA_PATH (and LIBRARY_PATH) to the directory holding it; for a "
        "missing compiler or header install build-essential / python3-dev in the image. Or avoid the build: "
        "actor_rollout_ref.actor.use_torch_compile=False, actor_rollout_ref.rollout.enforce_eager=True. Not a kernel "
        "fault and not memory."
    ),
    "config-error/numpy-abi": (
        "numpy 2 is installed beside code built for numpy 1: CANN up to 8.2 (its te / tbe op compiler, which torch_npu "
        "starts at the first set_device: 'AclSetCompileopt ... error code is 500001') and older torch / torch_npu / "
        "extension wheels. pip install 'numpy<2' in the image (vllm-ascend pins numpy<2 with CANN 8.2), or move to a "
        "CANN / torch_npu / wheel release built for numpy 2; then relaunch. The CANN error codes printed with it are "
        "its echo, not an operator fault."
    ),
    "config-error/cann-env": (
        "CANN's op compiler could not start, so torch_npu's first set_device failed (AclSetCompileopt / TbeInit): its "
        "Python side (te / tbe in the ascend-toolkit) does not import. Source the toolkit's set_env.sh in the shell "
        "that starts Ray, install CANN's Python dependencies (numpy<2 for CANN <= 8.2, decorator, attrs, psutil, "
        "sympy, scipy, cloudpickle, tornado), and keep CANN, torch_npu and the driver at one release pairing; then "
        "relaunch. Not an operator fault."
    ),
    "config-error/tracker-version": (
        "The ${tracker_name} server answered this client with ${tracker_status}: not a credential (401/403) or "
        "network problem. With a self-hosted server this is a client / server version pairing: an SDK too old for the "
        "server (SwanLab self-hosted v2.5+ wants swanlab >= 0.7.4: 'too many 500 error responses', '404 Not Found' on "
        "/api/resources/presigned/put) or too new for it (wandb 'Cannot query field ... on type ...'; MLflow 3.x "
        "'logged-models ... 404'): install the SDK release the server's docs pair with it, or upgrade the server; with "
        "the cloud service it is the service's fault. Meanwhile run the tracker offline (SwanLab: "
        + policy.SWANLAB_OFFLINE_WORDS
        + "; wandb: WANDB_MODE=offline; or drop it from trainer.logger)."
    ),
    "config-error": (
        "The configuration is rejected${key_colon}. Fix that value (see the evidence line) and relaunch; dapo-ops "
        "never retries a config error unchanged. Keys: Hydra names the failing override; topology keys are "
        "trainer.nnodes / trainer.n_gpus_per_node / actor_rollout_ref.rollout.tensor_model_parallel_size; budgets "
        "must stay >= max_prompt_length + max_response_length."
    ),
    "data-error/schema": (
        "A dataset row lacks a field verl's RL dataset reads (prompt, data_source, reward_model, ability, "
        "extra_info): convert the parquet to verl's schema (data.prompt_key names the prompt column). No retry "
        "unchanged."
    ),
    "data-error/empty": (
        "The dataset is empty after loading / filtering (or holds fewer rows than one train batch): check that "
        "data.train_files / data.val_files hold rows, that data.filter_overlong_prompts with data.max_prompt_length "
        "did not drop them all, and that data.train_batch_size <= the row count. No retry unchanged."
    ),
    "config-error/chat-template": (
        "The tokenizer has no chat template (a base model) while verl's RL dataset applies one to each prompt. Set "
        "actor_rollout_ref.model.custom_chat_template (and data.apply_chat_template_kwargs.chat_template for the "
        "dataset's own tokenizer) to a Jinja template, or train an instruct model; then relaunch."
    ),
    "data-error/reward-source": (
        "verl's default reward function (verl/utils/reward_score/__init__.py:107 default_compute_score) has no scorer "
        "for the rows' data_source ${data_source}: the column is empty, missing, or holds a name it does not know (a "
        "local path or mirror name instead of the logical key). Set data_source in the parquet to a built-in key "
        "(openai/gsm8k, lighteval/MATH, math_dapo, aime*, codecontests, hiyouga/geometry3k, ...; the GSM8K quickstart "
        "writes openai/gsm8k), or write a scorer and set reward.custom_reward_function.path=<file.py> and "
        ".name=<function> (verl 0.9.1; older verl: custom_reward_function.*). Memory settings are irrelevant; no "
        "retry unchanged."
    ),
    "data-error/too-difficult": (
        "DAPO dynamic sampling gave up: too few prompt groups had a score spread within max_num_gen_batches${spread}. "
        "Use data that suits the model (harder if it solves everything, easier or a stronger model if it solves "
        "nothing), or raise algorithm.filter_groups.max_num_gen_batches (0 = unlimited)."
    ),
    "data-error": (
        "A sample exceeds a length limit${size} (data.truncation=error) or the dataset is unreadable. Set "
        "data.filter_overlong_prompts=True, or data.truncation=left (or right/middle), or raise "
        "data.max_prompt_length, or clean the parquet. Memory settings are irrelevant; no retry unchanged."
    ),
    "network/keep-running": (
        "The tracker cannot upload right now but training continues. Nothing to restart; if it persists fix "
        "DNS/proxy in the container or launch with " + policy.SWANLAB_OFFLINE_WORDS + "."
    ),
    "network/ray-head": (
        "The Ray head GCS${at_addr} is unreachable. `ray stop --force` on all nodes, check the head address and TCP "
        "6379 (firewall, no_proxy for cluster addresses), start the head, then the workers. dapo-ops retries once "
        "after cleanup."
    ),
    "network/hub": (
        "The model/tokenizer download failed (proxy or hub unreachable). Use a local model path with "
        "HF_HUB_OFFLINE=1, or fix https_proxy / no_proxy in the container env (no_proxy must include localhost, "
        "127.0.0.1 and the cluster addresses, or Ray's gRPC breaks too)."
    ),
    "network/tracker": (
        "The tracker server is unreachable at init (swanlab reports it as an API-key problem after its [HTTP] retry "
        "lines). Fix DNS/proxy (a private server: "
        + policy.SWANLAB_HOST_WORDS
        + ") or launch with "
        + policy.SWANLAB_OFFLINE_WORDS
        + " (wandb: WANDB_MODE=offline, uploaded later with `wandb sync`; its 'Error communicating with wandb "
        "process' after 'Network error (...), entering retry loop' lines is the same unreachable server)."
    ),
    "network/ssh": (
        "SSH to ${addr_or_host} failed: check the inventory address/port, the network path (proxy_jump) and that "
        "sshd runs."
    ),
    "network": (
        "A connection failed. Check the endpoint in the evidence line, proxies (https_proxy / no_proxy) and DNS in "
        "the container; dapo-ops retries once."
    ),
    "hccl-timeout/hccp-busy": (
        "EJ0001: the previous training process still holds the NPUs. `ray stop --force`, kill leftover python "
        "processes, wait ~10 s, relaunch."
    ),
    "hccl-timeout/init": (
        "The collective communicator never came up${paren_node}: ranks cannot reach each other. Check HCCL_IF_IP / "
        "HCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME (NPU) or NCCL_SOCKET_IFNAME / IB (GPU), firewall, docker --network "
        "host, `hccn_tool -i <dev> -tls -g`, the same CANN/driver on every node, and that every rank started. "
        "dapo-ops retries once after cleanup."
    ),
    "hccl-timeout": (
        "A collective timed out or failed${paren_node}${at} with no more specific error on any rank. dapo-ops retries "
        "once; if it recurs raise HCCL_CONNECT_TIMEOUT (e.g. 7200) / HCCL_EXEC_TIMEOUT (e.g. 60000) on NPU (settings of "
        "the same name, every Ray node gets them) and look for a stalled rank; verl 0.9.1 sets no process-group "
        "timeout of its own (torch's default; no config key such as actor_rollout_ref.nccl_timeout is read)."
    ),
    "container-missing": (
        "The container is gone or stopped (removed, engine/host restart, or wrong name/host in the inventory). Check "
        "`docker ps -a` on that host and the inventory's container name; inspect `docker inspect -f "
        "'{{.State.OOMKilled}} {{.State.ExitCode}}'` if it still exists. Recreate it and resume from the last "
        "complete checkpoint only on request${last_step_seen}"
    ),
    "auth-error/keep-running": (
        "Metric upload is rejected (401) but training is healthy: do not restart. Re-issue the SwanLab key and pass it "
        "as SWANLAB_API_KEY in the container env for the next run; the local swanlog can be synced later (`swanlab "
        "sync`)."
    ),
    "auth-error": (
        "The tracker has no usable key inside the container and there is no TTY to prompt (SSH + docker exec), or "
        "its server rejected the credentials. Pass them as environment variables into the container, never as Hydra "
        "overrides: SWANLAB_API_KEY (a private server: " + policy.SWANLAB_HOST_WORDS + "), WANDB_API_KEY, "
        "MLFLOW_TRACKING_USERNAME / MLFLOW_TRACKING_PASSWORD or MLFLOW_TRACKING_TOKEN, CLEARML_API_ACCESS_KEY / "
        "CLEARML_API_SECRET_KEY (HF_TOKEN for gated models); or launch with "
        + policy.SWANLAB_OFFLINE_WORDS
        + ", or trainer.logger=['console']. Not retried until fixed."
    ),
    "success": (
        "The run reached its final step${step_sp}${of_total}. Tracker warnings, if any, only mean late or missing "
        "metrics (sync the local swanlog).${teardown}"
    ),
    "data-ran-out": (
        "verl 0.9.1's V1 loop ends when trainer.total_epochs (default 30) is used up, even before the planned "
        "steps, and exits 0 (verl/trainer/ppo/v1/trainer_base.py:467): the train data holds len(dataset) // "
        "data.train_batch_size steps per epoch (:765, after data.filter_overlong_prompts). The checkpoints are "
        "good: add training data, raise the epochs (--override trainer.total_epochs=N) or ask fewer --steps, then "
        "a resume continues from the last checkpoint (" + RESUME_CMD + "). Preflight's data-feed check shows the "
        "figure before launch."
    ),
    "data-ran-out/one-step-off": (
        "The one-step-off trainer used up its dataloader: _async_gen_next_batch returns None on StopIteration "
        "(verl/experimental/one_step_off_policy/ray_trainer.py:206-213) and _fit_generate's unpack of it raises "
        "'TypeError: cannot unpack non-iterable NoneType object' (:390), so the run exits non-zero before the "
        "planned steps; not a code crash, and a retry unchanged ends the same way. The checkpoints are good: add "
        "training data, raise the epochs (--override trainer.total_epochs=N) or ask fewer --steps, then a resume "
        "continues from the last checkpoint (" + RESUME_CMD + ")."
    ),
    "crash-other/thread-limit": (
        "A worker could not create threads (pids / ulimit -u limit), not OOM. Raise the container pids limit (docker "
        "run --pids-limit, or -1) / `ulimit -u`, or cap OMP_NUM_THREADS and Ray's thread counts; then relaunch."
    ),
    "crash-other/impossible-allocation": (
        "An allocation of ${alloc_gib} GiB is impossible on this device${of_total_gib}: a corrupted or overflowed "
        "tensor size (bad shape, negative length), not memory pressure. Memory escalation cannot fix it; check the "
        "lengths in the config (data.max_prompt_length, max_response_length) and the torch / torch_npu / CANN "
        "versions."
    ),
    "crash-other/sigkill": (
        "The process was killed by SIGKILL (exit 137) without an OOM record: docker kill / docker stop / kill -9, not "
        "the OOM killer (OOMKilled=false or unknown). If `docker inspect` shows OOMKilled=true or dmesg has 'Out of "
        "memory: Killed process', it is oom-host instead."
    ),
    "crash-other/external-kill": (
        "verl was killed from outside${at} (${kill}) and printed no error: an operator or a "
        "scheduler (kill, docker kill, a job manager), or the host's OOM killer where the supervisor could not read "
        "the kill counter. Look on the host: `dmesg -T | grep -i -e 'killed process' -e 'out of memory'`, the "
        "container cgroup's memory.events (oom_kill), `docker inspect -f '{{.State.OOMKilled}}' <container>`; the "
        "supervisor's own look is in the evidence. dapo-ops does not retry a kill it did not order; a resume "
        "continues from the last checkpoint (" + RESUME_CMD + ")."
    ),
    "crash-other/earlier-error": (
        "One rank died with the error in the evidence before the others timed out in a collective: the timeouts are "
        "its symptom, so no retry of the collective helps. Fix that error (the worker logs under "
        "/tmp/ray/session_latest/logs have its full traceback); no memory escalation is done."
    ),
    "crash-other/disk-full": (
        "A disk filled up${path} (checkpoints or logs). Free space or point trainer.default_local_dir to a bigger volume; "
        "set trainer.max_actor_ckpt_to_keep to rotate checkpoints; then resume."
    ),
    "crash-other/write-permission": (
        "A write verl needs was refused${path}: permission denied or a read-only file system, e.g. a checkpoint "
        "save (trainer.default_local_dir) the container's user may not write. Make that directory writable by the "
        "container's user (`ls -ld` it inside the container; chown / chmod it, or mount it read-write) or point "
        "ckpt_dir / runs_dir in hosts.toml at a writable volume; then resume (a failed save leaves the tracker "
        "on the last complete checkpoint). A retry writes to the same place and fails again, so none is done."
    ),
    "crash-other/shm": (
        "Shared memory (/dev/shm) is too small: a DataLoader worker (or Ray's object store) died of SIGBUS. Not a "
        "host OOM and not device memory: Docker's default is 64 MiB. Recreate the container with a larger --shm-size "
        "(e.g. 32g) or --ipc=host, or lower data.dataloader_num_workers; then resume from the last complete "
        "global_step_N. Memory rungs do not help."
    ),
    "crash-other/device-unavailable": (
        "The accelerator is absent, busy or not visible in the container${code}: not memory pressure. Check `npu-smi "
        "info` / `nvidia-smi` inside the container, the device mounts (/dev/davinci*, /dev/davinci_manager, "
        "/dev/hisi_hdc, /dev/devmm_svm; --gpus), ASCEND_RT_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES and leftover "
        "processes holding the devices; then relaunch. No retry helps until then."
    ),
    "crash-other/kernel-fault": (
        "An operator / AI Core / runtime execution fault${code}: a kernel bug or a CANN / torch_npu / driver version "
        "mismatch, not OOM. Re-run with ASCEND_LAUNCH_BLOCKING=1 (CUDA_LAUNCH_BLOCKING=1) to find the op, read the "
        "plog under ~/ascend/log, check the CANN / torch_npu / vllm-ascend versions match. Memory escalation does not "
        "help."
    ),
    "crash-other/illegal-memory": (
        "An illegal device memory access (a kernel bug or a version mismatch), not OOM. Re-run with "
        "CUDA_LAUNCH_BLOCKING=1 / ASCEND_LAUNCH_BLOCKING=1 to find the op; check torch / vLLM / CANN versions. Memory "
        "escalation does not help."
    ),
    "crash-other/device-fault": (
        "A GPU hardware fault (uncorrectable ECC error / the GPU fell off the bus), not memory pressure and not a "
        "collective timeout. Check `nvidia-smi -q -d ECC` and the kernel log for Xid errors, drain or reset that GPU "
        "(or node), then resume from the last complete checkpoint. Memory escalation does not help."
    ),
    "crash-other/node-died": (
        "A node of the Ray cluster was lost${paren_node} (missed heartbeats: the raylet crashed, the host was "
        "preempted or rebooted, or its network dropped; Ray's mention of OOM is a possibility, not evidence). Check "
        "the node is up (dmesg for the OOM killer, uptime), `ray start --address=<head>` it again, then resume from "
        "the last complete checkpoint. No memory rung."
    ),
    "crash-other/worker-died": (
        "A Ray worker process died (ActorDiedError / 'A worker died or was killed') without an error of its own and "
        "with no OOM evidence in the log: Ray's list of common causes (the OOM killer, `ray stop`, SIGSEGV) names "
        "possibilities, not what happened. On the worker's node read `dmesg -T | grep -iE 'segfault|killed "
        "process|out of memory'` (a segfault or a kill), `docker inspect -f '{{.State.OOMKilled}}'` and the dead "
        "worker's log (/tmp/ray/session_latest/logs/worker-*.err, python-core-worker-*.log); a Ray left over from an "
        "earlier run (`ray status`) is stopped with `ray stop --force` before the relaunch. Then resume from the "
        "last complete checkpoint. No memory rung without OOM evidence."
    ),
    "crash-other/engine-dead": (
        "vLLM's engine died (EngineDeadError / 'Engine background task failed'): that line only says so, the cause is "
        "the first error printed before it${first_error_paren}. Fix that error (a build or link error, an OOM, a kernel "
        "fault each have their own class when their text is in the log; the engine's worker log under "
        "/tmp/ray/session_latest/logs has the full traceback), then relaunch; no memory escalation for the wrapper."
    ),
    "crash-other/ray-unpickle": (
        "Ray could not unpickle the exception a worker raised (RaySystemError / 'Failed to unpickle serialized "
        "exception'): the real error${wrapped_paren} is the one the worker printed before it${first_error_paren}; "
        "read the worker's log (/tmp/ray/session_latest/logs/worker-*.err) and fix that error. No memory escalation "
        "for the wrapper."
    ),
    "crash-other/torch-compile": (
        "torch.compile (inductor / Triton) failed in a worker and Ray could not unpickle its BackendCompilerFailed, so "
        "the driver shows only a TypeError. The compile error is in the worker's log above it (often a missing "
        "compiler / header, `ld: cannot find -lcuda`, or an op the backend does not support, e.g. on Ascend with "
        "use_remove_padding). Fix the toolchain, or relaunch with actor_rollout_ref.actor.use_torch_compile=False "
        "(the ref follows it); vLLM's own compile: actor_rollout_ref.rollout.enforce_eager=True."
    ),
    "crash-other/inconclusive": (
        "The log holds no error and no completion. If the process is still running, only the supervisor's "
        "no-progress alarm (hang_timeout_s) can end a silent collective wait or a Ray head loop; otherwise look at "
        "the worker logs (/tmp/ray/session_latest/logs) for the cause."
    ),
    "crash-other": (
        "The run died with an error that matches no known class. Read the innermost error in the evidence (the "
        "worker logs under /tmp/ray/session_latest/logs have more); no memory escalation is done."
    ),
}

#: module -> the fix when the container lacks it: the one table for the classifier's ``module_fix`` (looked up by the
#: longest dotted prefix of the module, a shared object's ``lib`` prefix dropped; other modules get the fix of their
#: import-failure form, below) and preflight's module checks (``control/preflight/verl.py``, before launch).
#: Sources: megatron-core 0.19.2's ``[dev]`` extra (METADATA: megatron-energon[av_decode]~=7.0,
#: nvidia-modelopt[torch]>=0.44); Megatron-Bridge 0.6.2 training/config.py:53 (imports megatron.bridge.data ->
#: data/builders/energon.py -> megatron.energon; reached from verl/utils/megatron_utils.py:456 make_megatron_module),
#: models/conversion/auto_bridge.py:1127 (save_hf_weights imports modelopt.torch.quantization.utils), gpt_provider.py:205
#: + utils/fusions.py:34-60 (gradient_accumulation_fusion defaults to True whenever transformer_engine imports);
#: megatron-core tensor_parallel/layers.py:1070-1079 (ColumnParallelLinear then needs apex's
#: fused_weight_gradient_mlp_cuda); verl 0.9.1 utils/checkpoint/megatron_checkpoint_manager.py:245-249
#: (should_save_hf_model: 'hf_model' in save_contents, or 'model' without use_dist_checkpointing, default False:
#: trainer/config/engine/megatron.yaml:35), :1019/:1282 (the HF save through the bridge),
#: workers/engine/megatron/transformer_impl.py:499-502 (use_dist_checkpointing=True loads the initial weights from
#: dist_checkpointing_path), :326-344 + models/mcore/mbridge.py:21 (vanilla_mbridge imports mbridge).
MODULE_FIXES: dict[str, str] = {
    "megatron.energon": (
        "pip install megatron-energon (megatron-core[dev] pins megatron-energon[av_decode]~=7.0; Megatron-Bridge "
        "imports it while verl builds the model)"
    ),
    "modelopt": (
        "pip install nvidia-modelopt (megatron-core[dev] pins nvidia-modelopt[torch]>=0.44): Megatron-Bridge's "
        "save_hf_weights imports it at every HF-format save, which verl makes when checkpoint.save_contents holds "
        "'hf_model', or 'model' with actor_rollout_ref.actor.megatron.use_dist_checkpointing=False (the default); "
        "use_dist_checkpointing=True avoids that save only together with loading the initial weights from "
        "megatron.dist_checkpointing_path (a converted Megatron checkpoint)"
    ),
    "fused_weight_gradient_mlp_cuda": (
        "--override +actor_rollout_ref.actor.megatron.override_transformer_config.gradient_accumulation_fusion=False "
        "(Megatron-Bridge turns the fusion on whenever transformer_engine imports, and the non-TE output layer then "
        "needs apex's CUDA extension; verl's megatron.yaml has no such key, hence the +), or install NVIDIA apex "
        "with --cpp_ext --cuda_ext"
    ),
    "apex": (
        "build NVIDIA apex from source with --cpp_ext --cuda_ext in the container (the PyPI package named apex is "
        "another project)"
    ),
    "flash_attn": (
        "pip install flash-attn --no-build-isolation (built for the container's torch / CUDA) in the container, or "
        "launch with --features=-flash_attn (sdpa attention)"
    ),
    "flash_attn_2_cuda": (
        "reinstall flash-attn built for the container's torch / CUDA, or launch with --features=-flash_attn "
        "(sdpa attention)"
    ),
    "transformer_engine": (
        "pip install --no-build-isolation 'transformer-engine[pytorch,core_cu13]' (core_cu12 on CUDA 12), built for "
        "the container's torch / CUDA, in the container (or use verl's Megatron image); gpu/README.md says how it was "
        "carried to the H200"
    ),
    "megatron.core": "pip install megatron-core (verl's Megatron engine, model_engine=megatron)",
    "megatron.bridge": (
        "pip install megatron-bridge in the container (or use verl's Megatron image): verl 0.9.1's Megatron engine "
        "builds the model through it (actor_rollout_ref.actor.megatron.use_mbridge=True)"
    ),
    "mbridge": (
        "pip install mbridge (verl's vanilla bridge, actor_rollout_ref.actor.megatron.vanilla_mbridge=True), or set "
        "vanilla_mbridge=False to use Megatron-Bridge"
    ),
    "vllm": "install vLLM built for the container's torch / CUDA (actor_rollout_ref.rollout.name=vllm needs it)",
    "sglang": "install SGLang built for the container's torch / CUDA, or set actor_rollout_ref.rollout.name=vllm",
    "verl": "install verl in the container on every node (pip install -e <verl checkout>) or put it on PYTHONPATH",
    "swanlab": "pip install swanlab, or drop swanlab from trainer.logger",
    "wandb": "pip install wandb, or drop wandb from trainer.logger",
    "transfer_queue": "pip install 'verl[verl-core]' (or pip install TransferQueue) in the container",
    "cupy": "pip install cupy-cuda12x in the container (verl's one-step-off image has it)",
    "mindspeed": "install MindSpeed in the container (verl's Ascend image has it; see verl's Ascend quick start)",
    "swanboard": "use " + policy.SWANLAB_OFFLINE_WORDS + ", or pip install 'swanlab[dashboard]' in the container",
}
#: import-failure form (``detail["form"]``, :data:`dapo_ops.core.classify.signatures.IMPORT_FORMS`) -> (what could
#: not be imported, the fix when :data:`MODULE_FIXES` has none); ``{m}``: the module, ``{n}``: the name / symbol
IMPORT_TEXTS: dict[str, tuple[str, str]] = {
    "missing": ("module '{m}'", "pip install the package that provides '{m}' in the container"),
    "name": (
        "'{n}' from '{m}' (the installed {m} is another version than its caller was written for)",
        "install the version of '{m}' that has '{n}' (pip show; the versions verl's requirements pin)",
    ),
    "symbol": (
        "the compiled extension '{m}' (undefined symbol {n}: built for another torch / CUDA)",
        "reinstall the package that ships '{m}', built for the container's torch / CUDA",
    ),
    "library": (
        "the native library '{m}'",
        "install the package that ships '{m}' in the container, or put its directory on LD_LIBRARY_PATH",
    ),
    "version": (
        "'{m}' (its installed version is rejected)",
        "install a version of '{m}' that meets the requirement in the evidence",
    ),
    "extension": ("the CUDA extension '{m}'", "install the package that provides the CUDA extension '{m}'"),
    "unknown": ("a module (the evidence names it)", "install what the import error in the evidence names"),
}


#: a compiled extension that does not fit the libraries beside it (import-failure forms ``symbol`` / ``library``) ->
#: the version pairing to check (``detail["pairing"]``, from the path of the shared object: classify/decide.py
#: :data:`~dapo_ops.core.classify.decide.PAIRING_WORDS`). Sources: Ascend/pytorch#35 / vllm-ascend#117 (torch_npu
#: vs torch / ATB), Ascend/pytorch#99 (torch_npu 2.7.1 vs CANN 8.3.RC1 ATB: libtbe_adapter.so undefined symbol),
#: triton-ascend#328 (torch-npu 2.7.1 vs CANN 9.0: MsprofSysCycleTime), vllm#20361 / #21226 (vllm/_C.abi3.so built for
#: another torch), vllm-ascend#1033 (the vllm._C warning on Ascend is harmless: VLLM_TARGET_DEVICE=empty builds).
ABI_PAIRS: dict[str, str] = {
    "torch_npu": "torch_npu must be the release of the installed torch (torch_npu 2.5.1 with torch 2.5.1) and be "
    "built for the installed CANN (Ascend/pytorch's version table); reinstall that pair and source its CANN's set_env.sh",
    "atb": "the ATB / NNAL package (Ascend/nnal/atb) must be the release of the installed CANN toolkit, and torch_npu "
    "one built for that CANN: reinstall NNAL for this CANN (or CANN + NNAL for this torch_npu) and source "
    "nnal/atb/set_env.sh",
    "vllm_ascend": "vllm-ascend must be the release made for the installed vLLM (same version line) and built "
    "against the container's torch / torch_npu / CANN (vllm-ascend's installation table)",
    "vllm": "install vLLM built for the container's torch / CUDA: its compiled ops (vllm/_C) fit one torch release "
    "(the torch vLLM pins, pip show vllm), or install that torch",
    "flash_attn": "reinstall flash-attn built for the container's torch, CUDA and C++ ABI (pip install flash-attn "
    "--no-build-isolation against this torch, or the wheel named for torch X.Y / cuXY / cxx11abi), or launch with "
    "--features=-flash_attn",
    "transformer_engine": "transformer-engine must be built for the container's torch and CUDA (pip install "
    "--no-build-isolation), or use verl's Megatron image",
    "apex": "apex's CUDA extensions must be built for the container's torch and CUDA (--cpp_ext --cuda_ext)",
    "torch": "torch's own libraries disagree with what loads them: reinstall torch together with torchvision / "
    "torchaudio / the extensions of the same release",
}


def _module_key(mod: str) -> str | None:
    """The :data:`MODULE_FIXES` key for a module: its longest dotted prefix there (``lib<x>.so`` read as ``x``)."""
    if mod.startswith("lib") and mod.endswith(".so"):
        mod = mod[3:-3]
    parts = mod.split(".")
    return next((".".join(parts[:k]) for k in range(len(parts), 0, -1) if ".".join(parts[:k]) in MODULE_FIXES), None)


def _import_texts(d: dict[str, Any]) -> tuple[str, str]:
    """(what could not be imported, the fix) of a ``missing-module`` verdict's detail."""
    mod, name, form = d.get("module"), d.get("name"), d.get("form")
    if not mod or form not in IMPORT_TEXTS or (form == "name" and not name):
        form = "missing" if mod else "unknown"
    what, fix = IMPORT_TEXTS[form]
    key = _module_key(mod) if mod and form != "name" else None
    fix = MODULE_FIXES[key] if key else fix
    if form in ("symbol", "library") and d.get("pairing") in ABI_PAIRS:
        fix = ABI_PAIRS[d["pairing"]]
    return what.format(m=mod, n=name), fix.format(m=mod, n=name)


#: environment cause (``detail["cause"]`` of the container-environment rows) -> (what is wrong, the fix), for the
#: policy's action line; ``{lib}``: ``detail["library"]``
ENV_TEXTS: dict[str, tuple[str, str]] = {
    "runtime-env": (
        "the accelerator runtime library {lib} cannot be loaded",
        "source CANN's set_env.sh (ascend-toolkit, nnal/atb) in the shell that starts Ray, with the CANN release "
        "torch_npu was built for (CUDA: a driver as new as the torch wheel's CUDA)",
    ),
    "driver-lib": (
        "the Ascend driver library {lib} is not in the container",
        "mount /usr/local/Ascend/driver (and the /dev/davinci* devices) into the container and put its lib64 on "
        "LD_LIBRARY_PATH",
    ),
    "toolchain": (
        "a JIT build in a worker cannot compile or link (-l{lib})",
        "give the linker libcuda.so (ldconfig, a libcuda.so link to libcuda.so.1, or TRITON_LIBCUDA_PATH / "
        "LIBRARY_PATH), install build-essential / python3-dev, or set actor_rollout_ref.actor.use_torch_compile=False",
    ),
    "numpy-abi": (
        "numpy 2 sits beside code built for numpy 1 (CANN <= 8.2's op compiler, older torch / torch_npu wheels)",
        "pip install 'numpy<2' in the image, or use CANN / torch_npu / wheels built for numpy 2",
    ),
    "cann-env": (
        "CANN's op compiler (te / tbe) cannot start, so torch_npu's set_device fails",
        "source set_env.sh, install CANN's Python dependencies (numpy<2 for CANN <= 8.2, decorator, attrs, psutil, "
        "sympy) and keep CANN, torch_npu and the driver at one release pairing",
    ),
}
#: tracker -> the fix for a tracker server that rejects this client (the policy's stop action)
TRACKER_FIXES: dict[str, str] = {
    "swanlab": "install the swanlab SDK release its self-hosted server pairs with (self-hosted v2.5+ wants "
    "swanlab >= 0.7.4), or upgrade the server, or use " + policy.SWANLAB_OFFLINE_WORDS,
    "wandb": "install the wandb SDK release the W&B server supports (or upgrade wandb/local), or WANDB_MODE=offline",
    "mlflow": "install the mlflow client of the tracking server's major version (a 3.x client calls endpoints a 2.x "
    "server lacks), or upgrade the server",
    "": "pair the tracker SDK with its server's version, or run the tracker offline and sync later",
}


def _env_texts(d: dict[str, Any]) -> tuple[str, str]:
    """(what is wrong, the fix) of a container-environment verdict's detail (:data:`ENV_TEXTS`)."""
    what, fix = ENV_TEXTS.get(d.get("cause") or "", ("the container's environment does not fit", "fix the image"))
    lib = d.get("library")
    what = what.format(lib=lib or "") if lib else what.replace(" {lib}", "").replace(" (-l{lib})", "")
    return what, fix


#: fragments some fields add (texts too, so they live here)
FRAGMENTS: dict[str, str] = {
    "oom-device/critic": (
        " With a critic also offload it: critic.model.fsdp_config.param_offload=True / optimizer_offload=True "
        "(0.9.1: critic.fsdp.*) and critic.ppo_micro_batch_size_per_gpu=1."
    ),
    "oom-host/checkpoint-save": (
        " The last lines were a checkpoint save: global_step_${ckpt_step} may be partial; resume from the previous "
        "complete one."
    ),
    "success/teardown": " An error followed the final step (teardown); the result is complete.",
}


# --------------------------------------------------------------------------- the texts of one verdict


def _oom_extra(d: dict[str, Any]) -> str:
    return FRAGMENTS["oom-device/critic"] if d.get("role") == "critic" else ""


def _host_ckpt(d: dict[str, Any]) -> str:
    if d.get("phase") == "checkpoint-save" and d.get("ckpt_step") is not None:
        return Template(FRAGMENTS["oom-host/checkpoint-save"]).substitute(ckpt_step=f"{d['ckpt_step']}")
    return ""


_KILL_SIGNALS: dict[object, str] = {137: "exit 137: SIGKILL", 143: "exit 143: SIGTERM"}

#: how to fix each Hydra override that could not be applied (``detail["op"]``, :data:`dapo_ops.core.classify.decide.
#: HYDRA_OPS`; the wording of hydra-core 1.3 hydra/_internal/config_loader_impl.py _apply_overrides_to_config)
OVERRIDE_FIXES: dict[str, str] = {
    "delete": "`~{k}` deletes a key this verl's config does not have: drop that --override (or fix the key's name)",
    "delete-value": "`~{k}=VALUE` names another value than the config holds: drop the value (`~{k}`) or the override",
    "append": "`+{k}` adds a key the config already has: drop the '+' (`--override {k}=VALUE`), or use "
    "`++{k}=VALUE` to set it either way",
    "override": "`{k}` is not a key of this verl's config: fix its name (renamed or misspelt), or add it with "
    "`+{k}=VALUE` (only if something reads it) / set-or-add with `++{k}=VALUE`",
    "group": "`{k}` names no config group (or choice) in verl's defaults list: fix the group's name or its choice, "
    "or drop that --override",
    "merge": "`{k}` cannot be merged there (a typed or struct node refuses the key or the value): fix the key or "
    "the value",
}


def _spread(d: dict[str, Any]) -> str:
    """Which way a DAPO give-up went, from the last step's mean score (``detail["score_mean"]``, 0..1 rewards)."""
    mean = d.get("score_mean")
    if not isinstance(mean, (int, float)):
        return ""
    if mean >= 0.9:
        return f" (the last step's critic/score/mean was {mean:g}: nearly every group is all-correct, the data is too easy)"
    if mean <= 0.1:
        return (
            f" (the last step's critic/score/mean was {mean:g}: nearly every group is all-wrong, the data is too hard)"
        )
    return f" (the last step's critic/score/mean was {mean:g})"


def _dead_worker(d: dict[str, Any]) -> str:
    """The Ray worker of an ActorDiedError as Ray named it: ``WorkerDict pid 4242 on 10.0.0.2`` (actor, pid, node;
    ``worker`` when Ray named no actor)."""
    pid, node = d.get("worker_pid"), d.get("node")
    parts = (str(d.get("actor") or "worker"), f"pid {pid}" if pid else "", f"on {node}" if node else "")
    return " ".join(x for x in parts if x)


def _override_fix(d: dict[str, Any]) -> str:
    text = OVERRIDE_FIXES.get(str(d.get("op")), OVERRIDE_FIXES["override"])
    return text.format(k=d.get("key") or "KEY")


#: text fragments from the detail (``""`` when the fact is unknown); each is computed only when a text uses it
FIELDS: dict[str, Callable[[dict[str, Any]], str]] = {
    # the step of the last metrics line: the failure came after it, in the step that followed
    "at": lambda d: f" after step {d['step']}" if d.get("step") is not None else "",
    # a hang's frame and fix (dapo_ops/agent/supervisor/stall.py merge_ranks)
    "wait_frame": lambda d: f"{d.get('frame') or d.get('place') or 'one frame'}",
    "wait_fix": lambda d: f"{d.get('fix') or 'read the stack dumps'}",
    # where the hang's stack dumps are (its full path: agent/supervisor/escalate.py stall_verdict)
    "dumps": lambda d: f"; stack dumps: {d['stacks_file']}" if d.get("stacks_file") else "",
    "restarts": lambda d: f"{d.get('no_new_checkpoint') or 'several'}",
    "inph": lambda d: f" in {d['phase']}" if d.get("phase") not in (None, "", "unknown") else "",
    "phase": lambda d: f"{d.get('phase')}",
    # the phase-less ladder is dapo_ops/core/memladder.py's "unknown" row: + offload, then + recompute
    "for_phase": lambda d: (
        f"for phase {d['phase']} (the ladder per phase)"
        if d.get("phase") not in (None, "", "unknown")
        else "(no phase in the log: + offload, then + recompute)"
    ),
    "oom_extra": _oom_extra,
    "on_node": lambda d: f" on node {d['node']}" if d.get("node") else "",
    "paren_node": lambda d: f" (node {d['node']})" if d.get("node") else "",
    "ray_ckpt": lambda d: (
        f" global_step_{d['ckpt_step']}" if d.get("ckpt_step") is not None else " the newest checkpoint"
    ),
    "host_ckpt": _host_ckpt,
    "key_paren": lambda d: " (" + d["key"] + ")" if d.get("key") else "",
    "key_colon": lambda d: ": " + d["key"] if d.get("key") else "",
    "key_repr": lambda d: f"{d.get('key')!r}",
    # a verl start-up check's key and value (classify/startcheck.py check_detail)
    "key_value": lambda d: (
        f"{d['key']}={d['value']}" if d.get("key") and d.get("value") is not None else d.get("key") or "a config value"
    ),
    "check_message_paren": lambda d: f' ("{d["message"]}")' if d.get("message") else "",
    "check_fix": lambda d: f"{d.get('fix') or 'set a value the check accepts'}",
    "check_where": lambda d: f" ({d['check']})" if d.get("check") else "",
    "override_fix": _override_fix,
    # where a diverged run's retry starts (escalate.diverged_verdict's healthy_step; absent: not known)
    "retry_where": lambda d: (
        ""
        if "healthy_step" not in d
        else f" (global_step_{d['healthy_step']})"
        if d["healthy_step"] is not None
        else ": none is left, so from the start"
    ),
    "path": lambda d: f" ({d['path']})" if d.get("path") else "",
    "write_path": lambda d: f"{d.get('path') or 'the checkpoint dir'}",
    "dead_worker": _dead_worker,
    "spread": _spread,
    "have": lambda d: f" ({d['available']:g} available, {d['desired']:g} requested)" if "desired" in d else "",
    "ws": lambda d: f" ({d['world_size']} devices, TP {d['tp']})" if "tp" in d else "",
    "need": lambda d: f" ({d['value']} < {d['need']})" if "need" in d else "",
    "size": lambda d: f" ({d['length']} > {d['limit']} tokens)" if "limit" in d else "",
    "at_addr": lambda d: " at " + d["address"] if d.get("address") else "",
    "addr_or_host": lambda d: f"{d.get('address') or 'the host'}",
    "last_step_seen": lambda d: f" (last step seen: {d['step']})." if d.get("step") is not None else ".",
    "step_sp": lambda d: " " + str(d["step"]) if d.get("step") is not None else "",
    "of_total": lambda d: " of " + str(d["total"]) if d.get("total") else "",
    "teardown": lambda d: FRAGMENTS["success/teardown"] if d.get("teardown_error") else "",
    "alloc_gib": lambda d: f"{d.get('alloc_gib', 0):.0f}",
    "of_total_gib": lambda d: " (" + format(d["total_gib"], ".2f") + " GiB total)" if d.get("total_gib") else "",
    "code": lambda d: f" ({d['code']})" if d.get("code") else "",
    "kill": lambda d: _KILL_SIGNALS.get(d.get("exit_code"), "killed by a signal"),
    "module_what": lambda d: _import_texts(d)[0],
    "module_fix": lambda d: _import_texts(d)[1],
    "metric_short": lambda d: health.short(str(d.get("metric") or "a training metric")),
    "bad_step": lambda d: str(d.get("bad_step", "?")),
    "flag_words": health.words,
    "causes": lambda d: "; ".join(d.get("causes") or health.CAUSES),
    "ran_out": lambda d: (
        datafeed.ran_out(d.get("step"), d.get("total"), d.get("epochs")) or "the training data ran out"
    ),
    "library_paren": lambda d: f" ({d['library']})" if d.get("library") else "",
    "env_what": lambda d: _env_texts(d)[0],
    "env_fix": lambda d: _env_texts(d)[1],
    "tracker_name": lambda d: f"{d.get('tracker') or 'tracker'}",
    "tracker_status": lambda d: (
        "a GraphQL schema error (a field it does not know)"
        if d.get("status") == "schema"
        else f"HTTP {d['status']}"
        if d.get("status")
        else "an error"
    ),
    "tracker_fix": lambda d: TRACKER_FIXES.get(d.get("tracker") or "", TRACKER_FIXES[""]),
    "data_source": lambda d: f"{d['data_source']}" if d.get("data_source") not in (None, "") else "(missing)",
    "wrapper_what": lambda d: (
        "vLLM's engine death (EngineDeadError)" if d.get("cause") == "engine-dead" else "Ray's unpickling error"
    ),
    "first_error": lambda d: f": {d['error']}" if d.get("error") else "",
    "first_error_paren": lambda d: f" ({d['error']})" if d.get("error") else "",
    "wrapped_paren": lambda d: f", a {d['wrapped_class']}," if d.get("wrapped_class") else "",
    "ckpt_paren": lambda d: f" (saving global_step_{d['ckpt_step']})" if d.get("ckpt_step") is not None else "",
}


class _Fields(dict[str, Any]):
    """The template mapping: a field is computed from the detail on first use."""

    def __init__(self, detail: dict[str, Any]):
        super().__init__()
        self.detail = detail

    def __missing__(self, name: str) -> str:
        value = self[name] = FIELDS[name](self.detail)
        return value


def _select(rules: dict[str, tuple[tuple[str, object, str], ...]], cls: str, kind: str, d: dict[str, Any]) -> str:
    if cls not in rules:
        cls = "crash-other"
    for field, value, key in rules[cls]:
        have = kind if field == "kind" else d.get(field)
        if value is SET:
            if have:
                return key
        elif value is ABSENT:
            if field not in d:
                return key
        elif have == value:
            return key
    return cls


def action_text(cls: str, d: dict[str, Any]) -> str:
    """The one-line action for a verdict of class ``cls`` with detail ``d``: its policy rule's text
    (:func:`dapo_ops.core.policy.rule`; a class the policy does not know gets ``crash-other``'s)."""
    r = policy.rule(cls, d) or policy.rule("crash-other", d)
    assert r is not None  # crash-other has a catch-all rule (policy.py is checked at import)
    return Template(r.action).substitute(_Fields(d))


def reason_text(cls: str, d: dict[str, Any]) -> str:
    """The supervisor's decision line for a verdict of class ``cls`` with detail ``d``: its policy rule's ``reason``
    with the detail's fields (the run's ending line; "" when the rule has none: the ladder words it)."""
    r = policy.rule(cls, d) or policy.rule("crash-other", d)
    assert r is not None
    return Template(r.reason).substitute(_Fields(d))


def hint_text(cls: str, d: dict[str, Any]) -> str:
    """The hint paragraph for a verdict of class ``cls`` with detail ``d`` (rules may test the policy's kind)."""
    return Template(HINTS[_select(HINT_RULES, cls, policy.kind(cls, d).value, d)]).substitute(_Fields(d))


def check_texts(rules: dict[str, Any], texts: dict[str, str], fields: dict[str, Any] = FIELDS) -> None:
    """Every class has rules and a default text, every rule names a text, every ``$field`` is in :data:`FIELDS`.

    Raises:
        ClassifierTableError: naming the first class, text key or field that does not fit.
    """
    for cls in CLASSES:
        if cls not in rules or cls not in texts:
            raise ClassifierTableError(f"hints: class {cls!r} has no rules or no default text")
    for cls, rows in rules.items():
        for row in rows:
            if len(row) != 3 or row[2] not in texts:
                raise ClassifierTableError(f"hints: rule {row!r} of {cls!r} names no text")
    for key, text in texts.items():
        for m in Template.pattern.finditer(text):
            name = m.group("named") or m.group("braced")
            if m.group("invalid") is not None or (name is not None and name not in fields):
                raise ClassifierTableError(f"hints: text {key!r} uses an unknown field at {text[m.start() :][:20]!r}")


check_texts(HINT_RULES, HINTS)
for _rules in policy.POLICY.values():  # every policy text uses known fields
    for _r in _rules:
        for _m in [*Template.pattern.finditer(_r.action), *Template.pattern.finditer(_r.reason)]:
            _name = _m.group("named") or _m.group("braced")
            if _m.group("invalid") is not None or (_name is not None and _name not in FIELDS):
                raise ClassifierTableError(f"policy: text {_r.action[:40]!r} uses an unknown field")
