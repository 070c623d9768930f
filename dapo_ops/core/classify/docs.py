"""docs/troubleshooting.md, generated from data (:func:`dapo_ops.core.classify.troubleshooting_md` renders it): per
class the symptoms, cause, what dapo-ops does and what a person does (:data:`CLASS_TABLE`); the failure policy
(``dapo_ops/core/policy.py``); the OOM phases
(:data:`PHASE_SIGNS`); the device-code families (``dapo_ops/core/classify/device_codes.py``); and sections other
modules add (a module-level ``troubleshooting_section() -> str``, see ``dapo_ops.core.classify.DOC_SECTION_MODULES``).

STDLIB ONLY. The tables are checked against :data:`~dapo_ops.core.classify.verdict.CLASSES` and
:data:`~dapo_ops.core.classify.verdict.PHASES` at import (:class:`~dapo_ops.core.classify.verdict.ClassifierTableError`).
"""

from __future__ import annotations

import importlib
from typing import Any, Iterable

from dapo_ops.core.classify import device_codes
from dapo_ops.core import policy
from dapo_ops.core.classify.verdict import CLASSES, PHASES, ClassifierTableError

# --------------------------------------------------------------------------- docs table

CLASS_TABLE: dict[str, dict[str, Any]] = {
    "oom-device": {
        "symptoms": [
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 13.91 GiB. GPU 0 has a total capacity of ...",
            "RuntimeError: NPU out of memory. Tried to allocate 4.64 GiB (NPU 3; 60.96 GiB total capacity; ...)",
            "ERR00006 PTA memory error / EL0004: Failed to allocate memory. / OPS function error: aclnnMatmul, error code is 207001",
            "RuntimeError: CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:163 (vLLM wake-up inside update_weights: phase weight-sync)",
            "torch.OutOfMemoryError: Tried to allocate 4.64 GiB. (inside load_checkpoint: phase checkpoint-load, stops)",
        ],
        "cause": "Accelerator memory exhausted outside the rollout engine's own start-up: in the update, log-prob, weight sync (wake-up), model or checkpoint load/save. detail.phase names which (see OOM phases). An OOM text whose size exceeds the device total, or a device with 0 bytes total, is not memory pressure (crash-other).",
        "tool": "Retries from the last checkpoint with the next memory rung for that phase; stops with suggestions when none is left (the only class that escalates). Phases model-load, checkpoint-load and checkpoint-save stop at once (`stop`): no rung shrinks the weights at load, torch.load onto the device or the state gathered for a save.",
        "you": "Nothing while the ladder works. When it stops: `*_micro_batch_size_per_gpu=1`, lower `ppo_max_token_len_per_gpu` (>= prompt + response), raise `ulysses_sequence_parallel_size`, or use bigger devices; checkpoint-load: load shards to CPU (map_location) or lower the rollout share for the resume.",
    },
    "oom-kv-cache": {
        "symptoms": [
            "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` ...",
            "The model's max seq len (8192) is larger than the maximum number of tokens that can be stored in KV cache (6048).",
            "ValueError: Free memory on device (8.0/64.0 GiB) on startup is less than desired GPU memory utilization (0.9, 57.6 GiB).",
            "NPU out of memory inside _allocate_kv_cache_tensors / initialize_kv_cache, then EngineCore failed to start.",
            "[torch_memory_saver.cpp] CUresult error: 2 (out of memory) then 'Async request to resume_memory_occupation timed out'",
        ],
        "cause": "The rollout engine (vLLM / vllm-ascend / SGLang) cannot fit its weights + KV cache: at start-up, while generating, or when its allocator reports only a driver result code (CUresult 2, ACL 207001) on re-mapping its memory.",
        "tool": "Changes rollout `gpu_memory_utilization` in the direction in detail.kv_direction (lower / raise / cleanup first) and resumes; never offloads.",
        "you": "`lower`: actor_rollout_ref.rollout.gpu_memory_utilization 0.85 -> 0.75 -> 0.65 or max_model_len. `raise`: more utilisation if there is headroom, else lower max_model_len / data.max_response_length or raise rollout TP. `cleanup`: `ray stop --force`, check npu-smi / nvidia-smi for leftovers.",
    },
    "oom-host": {
        "symptoms": [
            "./run.sh: line 41:  1120 Killed   python3 -m verl.trainer.main_ppo ...",
            "exit 137 with docker inspect State.OOMKilled=true",
            "Out of memory: Killed process 1120 (python3) (kernel log)",
            "Malloc pin memory failed, host out of memory",
            "DataLoader worker (pid 912) is killed by signal: Killed.",
        ],
        "cause": "The kernel / cgroup OOM killer SIGKILLed the process (host RAM, not device memory), or host pinned memory ran out. A bare 137 with OOMKilled=false is `crash-other` (docker kill / stop); a SIGBUS from a small /dev/shm is `crash-other` (cause shm).",
        "tool": "Removes ladder-added offload and retries once from the last complete checkpoint; otherwise stops with suggestions.",
        "you": "Raise the container `--memory`, lower host-side batch / checkpoint memory; verify the newest global_step_N is complete.",
    },
    "oom-ray": {
        "symptoms": [
            "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.",
            "Memory on the node (IP: 192.0.2.91, ID: ...) ... exceeds the memory usage threshold of 0.95.",
            "N worker(s) were killed due to the node running low on memory.",
        ],
        "cause": "Ray's host-memory monitor killed a task or worker (rollout workers or checkpoint saves).",
        "tool": "Removes ladder-added offload and retries once; never escalates offload (it uses host RAM).",
        "you": "Lower data.gen_batch_size / actor_rollout_ref.rollout.n / data.max_response_length, use jemalloc (LD_PRELOAD), save less (checkpoint.save_contents), or add RAM.",
    },
    "config-error": {
        "symptoms": [
            "Could not override 'actor_rollout_ref.rollout.n'. / Key 'n' is not in struct",
            "ValueError: Total available GPUs 4.0 is less than total desired GPUs 32",
            "AssertionError: rollout world_size: 1 is not divisible by infer_tp: 2",
            "AssertionError: max_token_len must be greater than the sequence length.",
            "FileNotFoundError: Unable to find '/root/data/gsm8k/train.parquet' (after 'All configuration checks passed')",
            "HFValidationError: Repo id must be in the form 'repo_name' or 'namespace/repo_name': '/data/models/Qwen3-8B'",
            "core_worker.cc: Failed to register worker to Raylet: IOError: [RayletClient] Unable to register worker with raylet.",
            "ModuleNotFoundError: No module named 'megatron.energon' (inside RayTaskError(ModuleNotFoundError); cause missing-module)",
            "ImportError: cannot import name 'X' from 'transformers' / ImportError: .../flash_attn_2_cuda...so: undefined symbol: ...",
            "RuntimeError: ColumnParallelLinear was called with gradient_accumulation_fusion set to True but the custom CUDA extension fused_weight_gradient_mlp_cuda module is not found.",
        ],
        "cause": "A key, value, topology or resource request does not fit the installed verl or the cluster; a data file or model directory that is not where the container looks (verl's config checks never open files); a Ray worker pool sized to more CPUs than the cgroup / Slurm allocation grants; a Python module, compiled extension or native library the trainer cannot import (cause missing-module: the exception line of a traceback, never the 'engine is not available: ModuleNotFoundError(...)' warnings every healthy verl 0.9.1 run prints; any other root cause in the log wins over it).",
        "tool": "Stops; never retries unchanged. detail.key names the failing key; missing-module: detail.module (and form, name) names what could not be imported, detail.phase where (a failure at checkpoint-save recurs on resume).",
        "you": "Fix the key named in the report (drop stale keys, set topology to the real cluster, rollout TP a divisor of the rollout devices, token budgets >= prompt + response; data.train_files / val_files and actor_rollout_ref.model.path as seen inside the container; ray_kwargs.ray_init.num_cpus = the CPUs really granted), then relaunch. missing-module: install the package the hint names in the image every node runs (megatron.energon -> megatron-energon, modelopt -> nvidia-modelopt, flash_attn -> flash-attn or --features=-flash_attn; apex's fused_weight_gradient_mlp_cuda -> +actor_rollout_ref.actor.megatron.override_transformer_config.gradient_accumulation_fusion=False).",
    },
    "data-error": {
        "symptoms": [
            "NotImplementedError: sequence_length=1081 is larger than max_length=1024",
            "Prompt length (N) exceeds the model's maximum context length (M).",
            "... >= max_num_gen_batches=.... Generated too many. Please check if your data are too difficult.",
        ],
        "cause": "The dataset violates a length limit or cannot be read.",
        "tool": "Stops; memory settings are not touched.",
        "you": "data.filter_overlong_prompts=True, or data.truncation=left, or raise data.max_prompt_length, or clean the data.",
    },
    "network": {
        "symptoms": [
            "Failed to connect to GCS at address 192.0.2.104:6379 within 5 seconds.",
            "requests.exceptions.ProxyError: ... Tunnel connection failed: 403 Forbidden",
            "We couldn't connect to 'https://huggingface.co' to load this file",
            "[HTTP] retry #5 ... then AuthenticationError: Failed to initialize the SwanLab client.",
        ],
        "cause": "Cannot reach the Ray head, the model hub, a proxy or the tracker.",
        "tool": "Cleans up and retries once; tracker trouble while steps continue is non-fatal (keep running).",
        "you": "Check the head address and TCP 6379, https_proxy / no_proxy in the container, HF_HUB_OFFLINE=1 with a local model; "
        "for the tracker, " + policy.SWANLAB_HOST_WORDS + ", or " + policy.SWANLAB_OFFLINE_WORDS + ".",
    },
    "hccl-timeout": {
        "symptoms": [
            "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, ... Timeout(ms)=600000)",
            "HCCL function error: hcclCommInitRootInfoConfig(...), error code is 4 / ERR02200 DIST call hccl api failed",
            "EI0006: Getting socket times out. / EJ0001: Failed to initialize the HCCP process.",
            "EI0009: Transport init error. / RuntimeError: HCCL error: internal error (any EIxxxx / EJxxxx, ERR02xxx)",
        ],
        "cause": "A collective (HCCL / NCCL) failed or timed out and no rank shows a more specific error. HCCL codes are read by family (EI HCCL, EJ HCCP, torch_npu ERR02xxx DIST), not from a list; EI0011 (HCCL device memory) is an OOM.",
        "tool": "Cleans up and retries once; an OOM or crash on any rank is classified instead.",
        "you": "Init failures: HCCL_IF_IP / HCCL_SOCKET_IFNAME / NCCL_SOCKET_IFNAME, firewall, --network host, same CANN everywhere. Mid-run: HCCL_CONNECT_TIMEOUT / HCCL_EXEC_TIMEOUT (NPU settings of the same name, on every Ray node). verl 0.9.1 reads no process-group timeout key (its V1 workers pass none, verl/workers/engine_workers.py:89, so torch's default applies): actor_rollout_ref.nccl_timeout is in the yaml but read by nothing.",
    },
    "container-missing": {
        "symptoms": [
            "Error response from daemon: No such container: verl-train",
            "Error: No such object: verl-train",
            "Error response from daemon: Container 3f2a... is not running",
        ],
        "cause": "The container was removed or stopped (engine / host restart), or the inventory names the wrong container or host.",
        "tool": "Stops polling and reports the last step seen.",
        "you": "Check `docker ps -a` and the inventory; recreate the container and resume from the last complete checkpoint if wanted.",
    },
    "auth-error": {
        "symptoms": [
            "swanlab.error.KeyFileError: api key not configured (no-tty) ...",
            "wandb.errors.errors.UsageError: api_key not configured (no-tty).",
            "RuntimeError: Failed to initialize SwanLab in online mode: no TTY is available for interactive login.",
            "swanlab: swanlab api error (... '401 Authorization Required') while step: lines continue (non-fatal)",
        ],
        "cause": "Tracker credentials are missing inside the container (there is no TTY to prompt: cause key-missing) or its server rejected them (cause key-rejected: passing the same key again fixes nothing).",
        "tool": "Fatal: stops, no retry until fixed. Non-fatal 401 during training: keeps running and alerts.",
        "you": "Missing: pass SWANLAB_API_KEY (or WANDB_API_KEY) as an env var into the container (never as an override), "
        + policy.SWANLAB_HOST_WORDS
        + " for a private server, or launch with "
        + policy.SWANLAB_OFFLINE_WORDS
        + ". Rejected: check the key belongs to that server and account (a gated model: HF_TOKEN with access).",
    },
    "crash-other": {
        "symptoms": [
            "thread: Resource temporarily unavailable [system:11]",
            "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
            "exit 137 with OOMKilled=false and no Killed line (docker kill / stop)",
            "Tried to allocate 8388608.00 GiB (impossible size: corruption, not OOM)",
            "DataLoader worker (pid 412877) is killed by signal: Bus error. ... out of shared memory (cause shm)",
            "EL0001 device absent / error code is 107001 / NPU 0; 0 bytes total capacity (cause device-unavailable)",
            "EZ9999: Inner Error! ... aivec error / error code is 507035 (cause kernel-fault)",
        ],
        "cause": "A fatal error that matches no other class: thread limits, segfaults, SIGKILL without OOM, corrupted sizes, a small /dev/shm (SIGBUS), a device that is absent or not mounted, an operator / AI Core fault.",
        "tool": "Stops and reports the innermost error; no memory escalation.",
        "you": "Read the evidence; for thread limits raise --pids-limit / ulimit -u or cap OMP_NUM_THREADS; for SIGKILL check who stopped the container; shm: --shm-size / --ipc=host; device-unavailable: the device mounts and ASCEND_RT_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES; kernel-fault: matching CANN / torch_npu / driver versions.",
    },
    "diverged": {
        "symptoms": [
            "step:5 - ... - actor/pg_loss:nan - actor/grad_norm:nan - ... (a run that goes on)",
            "WARN: grad_norm is not finite: nan (verl skipped the optimizer step)",
            "step:1 - ... - actor/lr:1e+30 - ... (then no step line: DAPO filter_groups generates for ever)",
            "actor/grad_norm 10x the largest seen so far (3e+12 after 0.8)",
            "NotImplementedError: Megatron optimizer step failed. This should not happen",
        ],
        "cause": "The training metrics went bad: NaN/inf loss or grad_norm, verl skipping non-finite updates, an "
        "explosion against the run's own history or an absurd learning rate (dapo_ops/core/health.py). verl only "
        "warns and skips the update (verl/workers/engine/fsdp/transformer_impl.py:822-824), so the run steps on and "
        "learns nothing; a model whose answers all score the same makes DAPO's filter_groups drop every group and "
        "generate for ever (the V1 ReplayBuffer ignores max_num_gen_batches, verl/trainer/ppo/v1/trainer_base.py:205-211).",
        "tool": "Stops the attempt at the first bad step and retries once from the last checkpoint saved before it; "
        "the same metric bad again at that step or earlier is persistent: `diverged`, stopped. The checkpoint "
        "tracker is set back to that healthy checkpoint, so `inv launch --resume` starts there.",
        "you": "Check the learning rate (actor_rollout_ref.actor.optim.lr), a reward function that returns NaN/inf, "
        "fp16 (use bf16) and the data at that step; then `inv launch --resume <run id>` continues from the last "
        "healthy checkpoint.",
    },
    "data-ran-out": {
        "symptoms": [
            "exit 0 with the last step:30 below the planned 40 and no 'Final validation metrics' line",
            "'total_epochs': 30 in the config verl prints at start (training/epoch:29 on the last step line)",
        ],
        "cause": "verl 0.9.1's V1 loop ends when trainer.total_epochs is used up, even before trainer.total_training_steps, and exits 0 (verl/trainer/ppo/v1/trainer_base.py:467): the train data holds len(dataset) // data.train_batch_size steps per epoch (:765).",
        "tool": "Stops (run status failed, never 'succeeded'): 'ended at step 30 of 40: the training data ran out after 30 epochs'. Preflight's data-feed check refuses such a --steps before launch (--allow-short-data runs it anyway).",
        "you": "Add training data, raise the epochs (--override trainer.total_epochs=N) or ask fewer --steps; `inv launch --resume <run id>` continues from the last checkpoint.",
    },
    "success": {
        "symptoms": [
            "step:300 ... with Total training steps: 300 (or Training Progress: 100%)",
            "Final validation metrics: {...}",
            "exit 0 (tracker warnings such as 'swanlab: network error' are ignored)",
            "[ERROR] TBE Subprocess[task_distribute] raise error[], main process disappeared! / EZ9999 after the final step (teardown)",
        ],
        "cause": "The run reached its final step.",
        "tool": "Marks the run succeeded; never restarts it.",
        "you": "Nothing; sync the local swanlog if the tracker missed metrics.",
    },
}


def render(section_modules: tuple[str, ...]) -> str:
    """docs/troubleshooting.md (markdown) from :data:`CLASS_TABLE`, :data:`PHASE_SIGNS`, the device-code families and
    the ``troubleshooting_section()`` of each module in ``section_modules`` (full module names, in order).

    Raises:
        ImportError: a section module cannot be imported.
    """
    out = [
        "# Troubleshooting: failure classes",
        "",
        "<!-- generated by `python -m dapo_ops.core.classify --troubleshooting-md > docs/troubleshooting.md`;"
        " edit dapo_ops/core/classify/docs.py, not this file (tests/test_docs_troubleshooting.py checks it) -->",
        "",
        "`dapo-ops classify LOGFILE [--exit-code N]` prints `class:` and `action:` first, then the evidence and a hint.",
        "The supervisor runs the same classifier after every attempt; `hang` is added from timing and counters, never",
        "from text (`detail.stalled`, py-spy dumps in `stacks-attempt-<k>.txt`, see Stalls below). `error-storm`",
        "(action kind `stop`) is the supervisor's too: the same exception",
        "(type + innermost frame) repeating with no step (verl re-queues a failing prompt group for ever); the verdict",
        "names the innermost frame outside verl/Ray/torch/vLLM (`detail.user_frame`, e.g. `bad_reward.py:5`); never",
        "retried unchanged. The same detector stops a process stuck in a fatal error of the table below while it runs:",
        "a line of a fatal root-cause row that one process prints again and again with no step (50 times over at least",
        "10 s, or 10 times over at least 60 s; Ray's GCS client retrying an unreachable head for ever) ends the attempt",
        "(`killed_by` `fatal`) with this classifier's verdict and policy (e.g. `network`, `cause` `ray-head`, the",
        "`address`; `detail.repeated` says how often), not a hang half an hour later. One such line alone never stops",
        "a run: a hub warning at start-up is often followed by a healthy start.",
        "",
        "Precedence: success facts (last `step:N` = planned total, `Final validation metrics`, exit 0; exit 0 below the",
        "planned total is `data-ran-out`) -> container",
        "state (`OOMKilled`) -> the earliest specific root cause on any rank -> collective timeouts -> crash-other.",
        "Echoed overrides, `+ cmd` shell traces, the printed config and Ray's OOM-killer boilerplate are never evidence.",
        "An error followed by later `step:` lines did not stop the run (non-fatal). Exit 137 counts as `oom-host` only",
        "with evidence (`OOMKilled=true`, a shell `Killed` line, kernel OOM text); a bare 137 is `crash-other`",
        "(SIGKILL from `docker kill` / `docker stop` / `kill -9`). A log with no evidence at all (silence) gives",
        "`crash-other` with `detail.inconclusive=true`: the supervisor's no-progress timer decides `hang`.",
        "",
        "## Stalls",
        "",
        "The rule (the NVIDIA resiliency extension's, `TimeoutsCalc(safety_factor=5.0)`): a stall is no step line and",
        "no output for `stall_factor` (5) x the longest step the run has shown, at least `stall_floor_s` (60 s), at",
        "most `hang_timeout_s` (the cap). The longest step is verl's own `timing_s/step` (or the wall time between two",
        "step lines, whichever is longer) less its occasional phases; a step that saves a checkpoint (`save_freq`) or",
        "validates (`test_freq`) adds the longest `timing_s/save_checkpoint` / `timing_s/testing` seen, and gets the",
        "cap while none was seen. With only step 1 (warm-up included, an upper bound of the later steps) the limit is",
        "5 x step 1's work: a 30 s step 1 is called stalled 150 s after its line. The line of the validation before",
        "training (`step:0`, or the resume step, with `val-*` keys only) is output, not step 1. Before step 1 the cap",
        "applies, unless an earlier run of the same configuration (the learned-start key) left its timings in",
        "`<runs_dir>/.learned/timing/<fingerprint>.json` (5 x its start-to-step-1 time; a longer figure is believed at",
        "once, a shorter one moves the learned figure half way); the counters below call a dead start-up sooner. No",
        "estimate from the memory-fit shapes or a rollout tokens/s sizes step 1: memory-fit predicts bytes, not",
        "seconds, and step 1 is 2.72x to 6.71x a later step on the real fixtures (compile and warm-up), so such an",
        "estimate would either false-alarm or be no tighter than the cap. Output but no step line for 2 x the limit is a stall",
        "too (a DAPO run generating for ever still logs; before step 1 as well, once the learned start-up time gives a",
        "limit: a start-up that keeps logging but never reaches step 1). Without any log line, the counters call it: every device at",
        "most 2 % busy, device memory flat (64 MiB) and the attempt's processes under 5 % of a core for 180 s",
        "(`counter_window_s`), once the devices were seen busy.",
        "",
        "Measured on the real fixtures (tests/fixtures/real-verl/tool-runs/*/train.log, the 12 runs with steps 1 and 2;",
        "tests/test_stall.py): step 1 takes 2.72x to 6.71x the longest later step (warm-up); the largest ratio of a",
        "later step to the longest later step before it is 2.26 (h-speed-fsdp-b: 4.55 s after 2.02 s), so the factor",
        "5 leaves 2.2x headroom; a first save after a",
        "resume took 27 s of a 49 s step (c-weight-sync-oom), which the save allowance covers. The floor is the",
        "supervisor's own granularity (py-spy dumps up to 20 s, counter samples every 15 s), not the run's.",
        "",
        "The verdict reads its own dumps: each process's role (`ray::TaskRunnerV1`, `ray::WorkerDict`, `VLLM::EngineCore`,",
        "reward and agent-loop workers) and the frame it waits in; merged across ranks (DLRover's xpu_timer: stuck vs",
        "missing). Ranks parked in a collective waiting for ranks that never joined (`cause` `collective-missing`) or",
        "all ranks in one collective (`collective`): one retry after cleanup. Every process at work in the same frame",
        "of the workload (`workload`: user code such as a reward function, the data loader, the weight sync, a compute",
        "loop): stop, naming the frame and the fix. The same hang at the same step with the same frames: never retried",
        "again; 3 restarts in a row without a new checkpoint: stop. When the attempt's log matches a row of the table",
        "below (fatal or not), the hang verdict names it too (`detail.log_verdict`; the action line: `the log shows",
        "network (ray-head, 198.51.140.99:6379): <its line>`).",
        "",
        "Verdict detail keys (when known): `step` (last `step:N`), `total` (planned steps), `phase` (see OOM phases",
        "below), `role` (`critic` / `ref`), `side` (`trainer` / `rollout`, oom-device), `kv_direction` (`lower` / `raise` / `cleanup`), `node` (IP of the failing",
        "Ray node), `address` (remote endpoint), `key` (failing Hydra key), `path` (missing data file), `module` /",
        "`form` / `name` (what could not be imported, config-error cause `missing-module`), `fatal`",
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
        out.append(f"| `{cls}` | {_kinds(cls)} | {row['tool']} |")
    for cls in CLASSES:
        row = CLASS_TABLE[cls]
        out += ["", f"## {cls}", "", "**Symptoms**", ""]
        out += [f"- `{s}`" if "`" not in s else f"- `` {s} ``" for s in row["symptoms"]]
        out += [
            "",
            f"**Cause.** {row['cause']}",
            "",
            f"**What dapo-ops does** ({_kinds(cls)}; see Failure policy). {row['tool']}",
            "",
            f"**What you do.** {row['you']}",
        ]
    out += ["", policy.policy_md(CLASSES + policy.SUPERVISOR_CLASSES).rstrip("\n")]
    out += _phase_section() + _codes_section()
    for extra in _extra_sections(section_modules):
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


def _kinds(cls: str) -> str:
    """The action kinds of ``cls``'s policy rules, in rule order (```stop`, `escalate-memory```)."""
    return ", ".join(f"`{k}`" for k in dict.fromkeys(r.kind.value for r in policy.POLICY[cls]))


def check_tables() -> None:
    """Raises ClassifierTableError unless :data:`CLASS_TABLE` documents exactly :data:`CLASSES` (each with symptoms,
    cause, tool, you), the failure policy covers them and the supervisor's classes, and :data:`PHASE_SIGNS` lists
    exactly :data:`PHASES`, in that order."""
    if set(CLASS_TABLE) != set(CLASSES):
        raise ClassifierTableError(f"CLASS_TABLE documents {sorted(CLASS_TABLE)}, the classes are {sorted(CLASSES)}")
    for cls, row in CLASS_TABLE.items():
        if not all(row.get(k) for k in ("symptoms", "cause", "tool", "you")):
            raise ClassifierTableError(f"CLASS_TABLE[{cls!r}] needs symptoms, cause, tool and you")
    if set(policy.POLICY) != set(CLASSES + policy.SUPERVISOR_CLASSES):
        raise ClassifierTableError(
            f"the failure policy covers {sorted(policy.POLICY)}, the classes are "
            f"{sorted(CLASSES + policy.SUPERVISOR_CLASSES)}"
        )
    if not set(policy.NO_RUNG_PHASES) <= set(PHASES):
        raise ClassifierTableError(f"policy NO_RUNG_PHASES {policy.NO_RUNG_PHASES} are not all OOM phases")
    if tuple(PHASE_SIGNS) != PHASES:
        raise ClassifierTableError(f"PHASE_SIGNS lists {tuple(PHASE_SIGNS)}, the phases are {PHASES}")


check_tables()


def _phase_section() -> list[str]:
    out = [
        "",
        "## OOM phases",
        "",
        "`detail.phase` of a device OOM (and of host / Ray OOMs where known), read from the traceback frames of the",
        "whole call chain (the worker's and the driver's re-raised one; the first phase in this table wins when",
        "several are named) or, without frames, the nearest progress line. `dapo-ops classify` prints it as",
        "`phase:`; the supervisor records it in run.json (the attempt's `verdict.detail.phase`).",
        "",
        "| phase | what names it |",
        "|---|---|",
    ]
    out += [f"| `{p}` | {PHASE_SIGNS[p]} |" for p in PHASES]
    return out


def _codes_section() -> list[str]:
    out = [
        "",
        "## Device error codes",
        "",
        "Ascend / CUDA failures often reach the log only as a code. The classifier reads the code's family",
        "(dapo_ops/core/classify/device_codes.py), not a list of codes, and maps it to what the supervisor does: `memory` -> a",
        "device OOM (`oom-device`, or `oom-kv-cache` inside the rollout engine); `communication` -> `hccl-timeout`;",
        "`device-unavailable` (absent, busy, not mounted or not visible) and `kernel-fault` (operator / AI Core /",
        "runtime fault) -> `crash-other`, stop, no memory rung.",
        "",
        "| family | category | codes | source |",
        "|---|---|---|---|",
    ]
    for fam, _rx, cat, meaning, src in device_codes.FAMILIES:
        out.append(f"| {fam} | `{cat}` | {meaning} | {src} |")
    return out


def _extra_sections(section_modules: Iterable[str]) -> list[str]:
    out: list[str] = []
    for name in section_modules:
        mod = importlib.import_module(name)
        fn = getattr(mod, "troubleshooting_section", None)
        if callable(fn):
            out.append(fn())
    return out
