"""Real failure texts the verl STAND-IN prints on cue (sandbox / test equipment only).

Every string below is the text the real component prints (torch / torch_npu, vLLM / vllm-ascend, Ray,
HCCL / NCCL, swanlab, wandb), as collected in the project's failure-class reference and handed cases;
numbers, pids, ids and paths are made up. Frame context (file names, Ray method names) follows verl 0.9.1.
"""

from __future__ import annotations

import os
import random

VERL_SITE = "/verl/verl"


def fake_exc(outer: str, inner: str, message: str) -> BaseException:
    """An exception that prints as ``ray.exceptions.RayTaskError(<inner>): <message>`` (Ray's wrapper), its message
    Ray's text (the remote frames and the inner line): the driver's report shows it as it is (driver.py)."""
    name = f"RayTaskError({inner})" if outer == "RayTaskError" else outer
    cls = type(name, (RuntimeError,), {"standin_ray_text": True})
    cls.__module__ = "ray.exceptions"
    cls.__qualname__ = name
    return cls(message)


def _actor_id(rng: random.Random) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(24)) + "01000000"


def task_header(runner: str, pid: int, ip: str, rng: random.Random) -> str:
    mod = "main_ppo"
    return (
        f"ray::{runner}.run() (pid={pid}, ip={ip}, actor_id={_actor_id(rng)}, "
        f"repr=<{mod}.{runner} object at 0x7f3e{rng.randrange(16**8):08x}>)"
    )


def worker_header(method: str, pid: int, ip: str, rng: random.Random) -> str:
    return (
        f"ray::WorkerDict.{method}() (pid={pid}, ip={ip}, actor_id={_actor_id(rng)}, "
        f"repr=<verl.single_controller.ray.base.WorkerDict object at 0x7f3e{rng.randrange(16**8):08x}>)"
    )


# ----------------------------------------------------------------------------- device OOM
OOM_PHASES = {
    # phase: (driver frame, worker method, worker frames)
    "update_actor": (
        "actor_output = self._update_actor(batch)",
        "actor_rollout_update_actor",
        [(f"{VERL_SITE}/workers/actor/dp_actor.py", 523, "update_policy", "loss.backward()")],
    ),
    "compute_log_prob": (
        "old_log_prob = self.actor_rollout_wg.compute_log_prob(batch)",
        "actor_compute_log_prob",
        [
            (
                f"{VERL_SITE}/workers/actor/dp_actor.py",
                298,
                "_forward_micro_batch",
                "entropy = entropy_from_logits(logits)",
            )
        ],
    ),
    "update_critic": (
        "critic_output = self.critic_wg.update_critic(batch)",
        "critic_update_critic",
        [(f"{VERL_SITE}/workers/critic/dp_critic.py", 222, "update_critic", "self.critic_optimizer.step()")],
    ),
    # no verl phase in the frames (a traceback cut short): the memory ladder's unknown-phase rungs
    "none": (
        "output = ray.get(futures)",
        "actor_rollout_execute_all",
        [
            (
                "/usr/local/lib/python3.11/site-packages/transformers/models/qwen2/modeling_qwen2.py",
                302,
                "forward",
                "hidden_states = residual + hidden_states",
            )
        ],
    ),
}


def device_oom_line(accelerator: str, rng: random.Random, device: int = 0) -> str:
    """The innermost OOM line: torch_npu ``NPU out of memory`` or torch ``CUDA out of memory`` (tests/cases/)."""
    want = rng.choice([2.57, 4.64, 1.95, 3.12])
    if accelerator == "gpu":
        return (
            f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {want:.2f} GiB. GPU {device} has a "
            f"total capacity of 79.19 GiB of which 1.02 GiB is free. Including non-PyTorch memory, this process "
            f"has 78.16 GiB memory in use. Of the allocated memory 71.87 GiB is allocated by PyTorch, and 5.31 GiB "
            f"is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
            f"PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for "
            f"Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
        )
    return (
        f"RuntimeError: NPU out of memory. Tried to allocate {want:.2f} GiB (NPU {device}; 60.96 GiB total capacity; "
        f"52.18 GiB already allocated; 52.18 GiB current active; 3.02 GiB free; 56.84 GiB reserved in total by "
        f"PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation."
    )


#: the real vLLM 0.24 sleep-mode wake-up OOM inside verl's update_weights (weight sync), as the vLLM worker prints
#: it through the vLLMHttpServer actor (tests/fixtures/real-verl/verl-run-3-oom.log, lines 1069-1080)
WAKE_UP_SITE = "/tmp/site/vllm"
CUMEM_OOM = "CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:163"


def wake_up_oom(pids: dict, rng: random.Random) -> list[str]:
    """The vLLM worker's lines for a weight-sync (wake-up) OOM: to print with the ``vLLMHttpServer`` prefix."""
    w = pids["worker"] + 370
    pre = f"(Worker pid={w}) ERROR 12-01 07:45:52 [multiproc_executor.py:1000] "
    frames = [
        (
            f"{WAKE_UP_SITE}/v1/executor/multiproc_executor.py",
            992,
            "worker_busy_loop",
            "output = func(*args, **kwargs)",
        ),
        (f"{WAKE_UP_SITE}/v1/worker/gpu_worker.py", 189, "wake_up", "allocator.wake_up(tags)"),
        (f"{WAKE_UP_SITE}/device_allocator/cumem.py", 232, "wake_up", "create_and_map(handle)"),
        (
            f"{WAKE_UP_SITE}/device_allocator/cumem.py",
            49,
            "create_and_map",
            "python_create_and_map(*allocation_handle)",
        ),
    ]
    out = [pre + "WorkerProc hit an exception.", pre + "Traceback (most recent call last):"]
    for f, ln, fn, code in frames:
        out += [pre + f'  File "{f}", line {ln}, in {fn}', pre + f"    {code}"]
    out.append(pre + "RuntimeError: " + CUMEM_OOM)
    ec = f"(EngineCore pid={w - 48}) ERROR 12-01 07:45:52 [core.py:1449] "
    out += [
        ec + "Invocation of wake_up method failed",
        ec + f"RuntimeError: Worker failed with error '{CUMEM_OOM}', please check the stack trace above for the "
        "root cause",
        CUMEM_OOM,
    ]
    return out


def device_oom(accelerator: str, phase: str, runner: str, pids: dict, ip: str, rng: random.Random):
    """(worker lines printed at once with the WorkerDict prefix, exception the driver raises later).
    ``phase`` ``update_weights`` (GPU): vLLM's wake-up OOM (:func:`wake_up_oom`) and the driver's RuntimeError."""
    if phase == "update_weights" and accelerator == "gpu":
        return wake_up_oom(pids, rng), RuntimeError(CUMEM_OOM)
    drv_frame, method, wframes = OOM_PHASES.get(phase, OOM_PHASES["update_actor"])
    oom = device_oom_line(accelerator, rng, device=rng.randrange(8))
    inner = "OutOfMemoryError" if accelerator == "gpu" else "RuntimeError"
    wl = ["Traceback (most recent call last):"]
    for f, ln, fn, code in wframes:
        wl += [f'  File "{f}", line {ln}, in {fn}', f"    {code}"]
    wl.append(oom)
    if accelerator != "gpu":
        wl.append(f"[ERROR] 2026-11-29-12:00:00 (PID:{pids['worker']}, Device:0, RankID:0) ERR00006 PTA memory error")
    msg = "\n".join(
        [
            task_header(runner, pids["runner"], ip, rng),
            f'  File "{VERL_SITE}/trainer/ppo/ray_trainer.py", line 1507, in fit',
            f"    {drv_frame}",
            f'  File "{VERL_SITE}/single_controller/ray/base.py", line 55, in __call__',
            "    output = ray.get(output)",
            f"ray.exceptions.RayTaskError({inner}): {worker_header(method, pids['worker'], ip, rng)}",
            *[x for f, ln, fn, code in wframes for x in (f'  File "{f}", line {ln}, in {fn}', f"    {code}")],
            oom,
        ]
    )
    return wl, fake_exc("RayTaskError", inner, msg)


# ----------------------------------------------------------------------------- vLLM KV cache at start-up
def kv_cache(variant: str, util: float, accelerator: str, runner: str, pids: dict, ip: str, rng: random.Random):
    """(vLLM worker/engine lines, exception). Variants: free-memory, alloc-oom, no-cache-blocks, max-seq-len."""
    pre = "ERROR 11-29 12:00:00 [v1/executor/multiproc_executor.py:824]"
    total = 64.0 if accelerator != "gpu" else 80.0
    if variant == "free-memory":
        inner_line = (
            f"ValueError: Free memory on device ({total * 0.125:.1f}/{total:.1f} GiB) on startup is less than "
            f"desired GPU memory utilization ({util}, {round(util * total, 2)} GiB). Decrease GPU memory "
            f"utilization or reduce GPU memory used by other processes."
        )
        msg = "\n".join(
            [
                task_header(runner, pids["runner"], ip, rng),
                f'  File "{VERL_SITE}/trainer/ppo/ray_trainer.py", line 798, in init_workers',
                "    self.actor_rollout_wg.init_model()",
                f"ray.exceptions.RayTaskError(ValueError): {worker_header('actor_rollout_init_model', pids['worker'], ip, rng)}",
                f'  File "{VERL_SITE}/workers/fsdp_workers.py", line 647, in init_model',
                '    self.rollout = self._build_rollout(trust_remote_code=self.config.model.get("trust_remote_code", False))',
                '  File "/usr/local/lib/python3.11/site-packages/vllm_ascend/worker/worker_v1.py", line 158, in init_device',
                "    raise ValueError(",
                inner_line,
            ]
        )
        return [], fake_exc("RayTaskError", "ValueError", msg)
    if variant == "alloc-oom":
        worker = [
            f"{pre} WorkerProc hit an exception.",
            f"{pre} Traceback (most recent call last):",
            f'{pre}   File "/usr/local/lib/python3.11/site-packages/vllm_ascend/worker/model_runner_v1.py", line 2451, in initialize_kv_cache',
            f"{pre}     kv_cache_raw_tensors = self._allocate_kv_cache_tensors(kv_cache_config)",
            f'{pre}   File "/usr/local/lib/python3.11/site-packages/vllm_ascend/worker/model_runner_v1.py", line 2499, in _allocate_kv_cache_tensors',
            f"{pre}     tensor = torch.zeros(kv_cache_tensor.size,",
            f"{pre} {device_oom_line(accelerator, rng)}",
        ]
    elif variant == "no-cache-blocks":
        worker = [
            f"{pre} WorkerProc hit an exception.",
            f"{pre} ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` "
            f"when initializing the engine.",
        ]
    elif variant == "max-seq-len":
        worker = [
            f"{pre} WorkerProc hit an exception.",
            f"{pre} ValueError: To serve at least one request with the model's max seq len (32768), (4.5 GiB KV "
            f"cache is needed, which is larger than the available KV cache memory (2.87 GiB). Based on the "
            f"available memory, the estimated maximum model length is 20896. Try increasing "
            f"`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
        ]
    else:
        raise SystemExit(f"verl stand-in: unknown oom-kv-cache variant {variant!r}")
    engine = [
        "ERROR 11-29 12:00:00 [core.py:866] EngineCore failed to start.",
        "ERROR 11-29 12:00:00 [core.py:866] Exception: WorkerProc initialization failed due to an exception in "
        "a background process. See stack trace for root cause.",
    ]
    msg = "\n".join(
        [
            task_header(runner, pids["runner"], ip, rng),
            f'  File "{VERL_SITE}/trainer/ppo/ray_trainer.py", line 798, in init_workers',
            "    self.async_rollout_manager = AgentLoopManager(config=self.config, worker_group=self.actor_rollout_wg)",
            "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {'EngineCore_DP0': 1}",
        ]
    )
    return [("Worker_TP0", worker), ("EngineCore_DP0", engine)], fake_exc("RayTaskError", "RuntimeError", msg)


# ----------------------------------------------------------------------------- Ray OOM killer (host memory)
def ray_oom(runner: str, pids: dict, ip: str, rng: random.Random):
    node_id = "".join(rng.choice("0123456789abcdef") for _ in range(56))
    worker_id = "".join(rng.choice("0123456789abcdef") for _ in range(56))
    msg = "\n".join(
        [
            task_header(runner, pids["runner"], ip, rng),
            f'  File "{VERL_SITE}/trainer/ppo/ray_trainer.py", line 1098, in fit',
            "    gen_batch_output = self.actor_rollout_wg.generate_sequences(gen_batch)",
            f'  File "{VERL_SITE}/single_controller/ray/base.py", line 50, in __call__',
            "    output = ray.get(output)",
            "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.",
            f"Memory on the node (IP: {ip}, ID: {node_id}) where the task (actor ID: {_actor_id(rng)}, "
            f"name=WorkerDict.__init__, pid={pids['worker']}, memory used=56.57GB) was running was 246.41GB used / "
            f"251.54GB limit (0.979583), which exceeds the memory usage threshold of 0.95. Ray killed this worker (ID: "
            f"{worker_id}) because it was the most recently scheduled task; to see more information about memory usage "
            f"on this node, use `ray logs raylet.out -ip {ip}`. To see the logs of the worker, use `ray logs "
            f"worker-{worker_id}*out -ip {ip}. Top 10 memory users:",
            "PID\tMEM(GB)\tCOMMAND",
            f"{pids['worker']}\t56.57\tray::WorkerDict.actor_rollout_generate_sequences",
            f"{pids['runner']}\t0.21\tray::{runner}.run",
            "Refer to the documentation on how to address the out of memory issue: "
            "https://docs.ray.io/en/latest/ray-core/scheduling/ray-oom-prevention.html. Consider provisioning more memory "
            "on this node or reducing task parallelism by requesting more CPUs per task. Set max_restarts and "
            "max_task_retries to enable retry when the task crashes due to OOM. To adjust the kill threshold, set the "
            "environment variable `RAY_memory_usage_threshold` when starting Ray. To disable worker killing, set the "
            "environment variable `RAY_memory_monitor_refresh_ms` to zero.",
        ]
    )
    raylet = [
        f"[2026-11-29 12:00:00,000 E {pids['worker']} {pids['worker']}] (raylet) node_manager.cc:3069: 1 "
        f"Workers (tasks / actors) killed due to memory pressure (OOM), 0 Workers crashed due to other reasons "
        f"at node (ID: {node_id}, IP: {ip}) over the last time period."
    ]
    return raylet, fake_exc("RayTaskError", "OutOfMemoryError", msg)


# ----------------------------------------------------------------------------- HCCL / NCCL collective timeout
def collective_timeout(accelerator: str, runner: str, pids: dict, ip: str, rng: random.Random):
    seq = rng.randrange(100, 9000)
    if accelerator == "gpu":
        worker = [
            f"[rank0]:[E1129 12:00:00.000000000 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective "
            f"operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) "
            f"ran for 600033 milliseconds before timing out.",
            "[rank0]:[E1129 12:00:00.000000000 ProcessGroupNCCL.cpp:1664] [PG ID 0 PG GUID 0(default_pg) Rank 0] "
            "Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, "
            "subsequent GPU operations might run on corrupted/incomplete data.",
            "[rank0]:[E1129 12:00:00.000000000 ProcessGroupNCCL.cpp:1670] [PG ID 0 PG GUID 0(default_pg) Rank 0] "
            "To avoid data inconsistency, we are taking the entire process down.",
        ]
    else:
        worker = [
            f"[rank0]:[E1129 12:00:00.000000000 ProcessGroupHCCL.cpp:1147] [Rank 0] Watchdog caught collective "
            f"operation timeout: WorkHCCL(SeqNum={seq}, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800043 "
            f"milliseconds before timing out.",
            "[rank0]:[E1129 12:00:00.000000000 ProcessGroupHCCL.cpp:1290] Some HCCL operations have failed or timed "
            "out. Due to the asynchronous nature of ASCEND kernels, subsequent NPU operations might run on "
            "corrupted/incomplete data.",
            "RuntimeError: InnerRunOpApi:torch_npu/csrc/framework/OpParamMaker.cpp:281 OPS function error: "
            "HcclAllreduce, error code is 6",
            f"[ERROR] 2026-11-29-12:00:00 (PID:{pids['worker']}, Device:0, RankID:0) ERR01100 OPS call acl api failed.",
            f"EI0006: [PID: {pids['worker']}] 2026-11-29-12:00:00.444.436 Getting socket times out. Reason: Remote "
            f"Rank did not send the data in time. Please check the reason for the rank being stuck",
        ]
    msg = "\n".join(
        [
            task_header(runner, pids["runner"], ip, rng),
            f'  File "{VERL_SITE}/trainer/ppo/ray_trainer.py", line 1507, in fit',
            "    actor_output = self._update_actor(batch)",
            f'  File "{VERL_SITE}/single_controller/ray/base.py", line 55, in __call__',
            "    output = ray.get(output)",
            "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
            "\tclass_name: create_colocated_worker_cls.<locals>.WorkerDict",
            f"\tactor_id: {_actor_id(rng)}",
            f"\tpid: {pids['worker']}",
            f"\tip: {ip}",
            "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit detail: "
            "Worker unexpectedly exits with a connection error code 2. End of file. There are some potential root causes. "
            "(1) The process is killed by SIGKILL by OOM killer due to high memory usage. (2) ray stop --force is called. "
            "(3) The worker is crashed unexpectedly due to SIGSEGV or other unexpected errors.",
        ]
    )
    return worker, fake_exc("RayTaskError", "ActorDiedError", msg)


# ----------------------------------------------------------------------------- trackers
def swanlab_auth(variant: str, runner: str, pids: dict, ip: str, rng: random.Random):
    if variant == "keyfile":  # swanlab <= 0.7 (case 38)
        inner, line = (
            "KeyFileError",
            (
                "swanlab.error.KeyFileError: api key not configured (no-tty), call "
                '`swanlab.login(api_key=[your_api_key])` or set `swanlab.init(mode="local")`.'
            ),
        )
    elif variant == "network":  # swanlab 0.10, unreachable server
        inner, line = (
            "AuthenticationError",
            (
                "swanlab.exceptions.AuthenticationError: Failed to initialize the "
                "SwanLab client. Please check if the provided API key is correct."
            ),
        )
    else:  # swanlab 0.10, no key and no TTY
        inner, line = (
            "RuntimeError",
            ("RuntimeError: Failed to initialize SwanLab in online mode: no TTY is available for interactive login."),
        )
    msg = "\n".join(
        [
            task_header(runner, pids["runner"], ip, rng),
            f'  File "{VERL_SITE}/trainer/ppo/ray_trainer.py", line 1302, in fit',
            "    logger = Tracking(",
            f'  File "{VERL_SITE}/utils/tracking.py", line 141, in __init__',
            "    swanlab.init(",
            line,
        ]
    )
    pre = []
    if variant == "network":
        host = os.environ.get("SWANLAB_API_HOST", "https://api.swanlab.cn")
        pre = [
            f"swanlab: WARNING [HTTP] retry #{i} POST /api/login/api_key because error=HTTPSConnectionPool("
            f"host='{host.split('//')[-1]}', port=443): Max retries exceeded with url: /api/login/api_key "
            f"(Caused by NewConnectionError('Failed to establish a new connection: [Errno 111] Connection refused'))"
            for i in range(1, 6)
        ]
    return pre, fake_exc("RayTaskError", inner, msg)


def swanlab_401(rng: random.Random) -> str:
    return (
        f"swanlab: swanlab api error ('Trace id: {rng.randrange(16**16):016x}', "
        f"'POST https://api.swanlab.cn/api/house/metrics', '401 Authorization Required')"
    )


NOISY = [
    "swanlab: network error, swanlab will resume uploads when the network improves",
    "WARNING:2026-11-29 12:00:00,543:Retrying (Retry(total=2, connect=None, read=None, redirect=None, status=None)) "
    "after connection broken by 'SSLError(SSLEOFError(8, '[SSL: UNEXPECTED_EOF_WHILE_READING] EOF occurred in "
    "violation of protocol (_ssl.c:1017)'))': /api/house/metrics",
    "[W compiler_depend.ts:137] Warning: Warning: Device do not support double dtype now, dtype cast repalce with "
    "float. (function operator())",
    "WARNING 11-29 12:00:00 [utils.py:2153] error_on_overflow is deprecated; errors will be reported in the reward "
    "function instead",
]

WANDB_NO_KEY = "wandb.errors.errors.UsageError: api_key not configured (no-tty). call wandb.login(key=[your_api_key])"


def crash(runner: str, pids: dict, ip: str, rng: random.Random):
    msg = "\n".join(
        [
            task_header(runner, pids["runner"], ip, rng),
            f'  File "{VERL_SITE}/trainer/ppo/ray_trainer.py", line 1460, in fit',
            "    gen_batch_output = self.async_rollout_manager.generate_sequences(gen_batch_output)",
            "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
            "\tclass_name: AgentLoopWorker",
            f"\tactor_id: {_actor_id(rng)}",
            "thread: Resource temporarily unavailable [system:11]",
        ]
    )
    return fake_exc("RayTaskError", "ActorDiedError", msg)


#: torch.save's words when a write of its zip archive comes up short (c10 caffe2/serialize/inline_container.cc; a
#: full disk or quota: torch names no errno, the public reports of a full disk show this line)
TORCH_WRITE_FAILED = "RuntimeError: [enforce fail at inline_container.cc:664] . PytorchStreamWriter failed writing file data/0: file write failed"
TORCH_SITE = "/usr/local/lib/python3.11/site-packages/torch"


def save_error(variant: str, folder: str, world: int, runner: str, pids: dict, ip: str, rng: random.Random):
    """(worker lines, exception) of a checkpoint save that fails in the actor workers, as verl 0.9.1's V1 trainer
    ends: ``_save_checkpoint`` (verl/trainer/ppo/v1/trainer_base.py:948-1024) calls
    ``actor_rollout_wg.save_checkpoint`` (:979, a blocking ``ray.get``, verl/single_controller/ray/base.py:56) BEFORE
    ``data.pt`` (:996-999) and the tracker (:1021-1024); each rank's FSDPCheckpointManager.save_checkpoint
    (verl/utils/checkpoint/fsdp_checkpoint_manager.py:272-) first makes ``global_step_N/actor`` with
    ``local_mkdir_safe`` (:299; verl/utils/fs.py:277-305: a failed ``os.makedirs`` under its FileLock is printed as
    ``Warning: Failed to acquire lock for <path>: <error>`` and tried again, which raises), then ``torch.save``s its
    shards (:347). The worker's exception comes back to the TaskRunner as ``RayTaskError(<exc>)`` and ends the run
    through Hydra (exit 1). ``variant``: ``disk-full`` (torch's short-write line) or ``permission`` (EACCES on the
    directory)."""
    actor = os.path.join(folder, "actor")
    drv = [
        task_header(runner, pids["runner"], ip, rng),
        f'  File "{VERL_SITE}/trainer/main_ppo.py", line 155, in run',
        "    self.trainer.fit(self.agent_loop_manager)",
        f'  File "{VERL_SITE}/trainer/ppo/v1/trainer_base.py", line 485, in fit',
        "    self._save_checkpoint()",
        f'  File "{VERL_SITE}/trainer/ppo/v1/trainer_base.py", line 979, in _save_checkpoint',
        "    self.actor_rollout_wg.save_checkpoint(",
        f'  File "{VERL_SITE}/single_controller/ray/base.py", line 56, in __call__',
        "    output = ray.get(output)",
    ]
    wframes = [
        f'  File "{VERL_SITE}/workers/engine_workers.py", line 725, in save_checkpoint',
        "    self.actor.save_checkpoint(local_path, hdfs_path, global_step, max_ckpt_to_keep)",
        f'  File "{VERL_SITE}/workers/engine_workers.py", line 445, in save_checkpoint',
        "    return self.engine.save_checkpoint(local_path, hdfs_path, global_step, max_ckpt_to_keep)",
        f'  File "{VERL_SITE}/workers/engine/fsdp/transformer_impl.py", line 888, in save_checkpoint',
        "    self.checkpoint_manager.save_checkpoint(",
    ]
    if variant == "permission":
        err = f"[Errno 13] Permission denied: '{folder}'"
        inner, last = "PermissionError", f"PermissionError: {err}"
        wl = [f"Warning: Failed to acquire lock for {actor}: {err}"]
        wframes += [
            f'  File "{VERL_SITE}/utils/checkpoint/fsdp_checkpoint_manager.py", line 299, in save_checkpoint',
            "    local_path = local_mkdir_safe(local_path)",
            f'  File "{VERL_SITE}/utils/fs.py", line 303, in local_mkdir_safe',
            "    os.makedirs(path, exist_ok=True)",
            '  File "<frozen os>", line 225, in makedirs',
        ]
    else:
        inner, last, wl = "RuntimeError", TORCH_WRITE_FAILED, []
        wframes += [
            f'  File "{VERL_SITE}/utils/checkpoint/fsdp_checkpoint_manager.py", line 347, in save_checkpoint',
            "    torch.save(model_state_dict, model_path)",
            f'  File "{TORCH_SITE}/serialization.py", line 967, in save',
            "    _save(",
            f'  File "{TORCH_SITE}/serialization.py", line 1268, in _save',
            "    zip_file.write_record(name, storage, num_bytes)",
        ]
    msg = "\n".join(
        [
            *drv,
            f"ray.exceptions.RayTaskError({inner}): "
            f"{worker_header('actor_rollout_save_checkpoint', pids['worker'], ip, rng)}",
            *wframes,
            last,
        ]
    )
    return wl, fake_exc("RayTaskError", inner, msg)


#: Ray's words for an actor whose worker process died (ray/exceptions.py ActorDiedError, the raylet's
#: "A worker died or was killed" report; Worker exit type SYSTEM_ERROR: killed by a signal or crashed)
RAY_WORKER_DIED = (
    "Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error code 2. "
    "End of file. There are some potential root causes. (1) The process is killed by SIGKILL by OOM killer due to "
    "high memory usage. (2) ray stop --force is called. (3) The worker is crashed unexpectedly due to SIGSEGV or other "
    "unexpected errors."
)


def actor_died(worker_pid: int, runner: str, pids: dict, ip: str, rng: random.Random):
    """(raylet lines, exception) when Ray loses a verl worker mid-step (its process killed: ``kill -9``, the kernel's
    OOM killer): the TaskRunner's blocking call on the worker group (verl/single_controller/ray/base.py:56) raises
    ``ActorDiedError``, which comes back to the driver as ``RayTaskError(ActorDiedError)`` and ends the run through
    Hydra (exit 1); the driver process itself is not killed, so no exit 137."""
    raylet = [
        "A worker died or was killed while executing a task by an unexpected system error. To troubleshoot the "
        f"problem, check the logs for the dead worker. RayTask ID: {_actor_id(rng)} Worker ID: {_actor_id(rng)} "
        f"Node ID: {_actor_id(rng)} Worker IP address: {ip} Worker port: 10{rng.randrange(100, 999)} Worker PID: "
        f"{worker_pid} {RAY_WORKER_DIED}"
    ]
    msg = "\n".join(
        [
            task_header(runner, pids["runner"], ip, rng),
            f'  File "{VERL_SITE}/trainer/main_ppo.py", line 155, in run',
            "    self.trainer.fit(self.agent_loop_manager)",
            f'  File "{VERL_SITE}/trainer/ppo/v1/trainer_base.py", line 477, in fit',
            "    batch = self.step(metrics, self.timing_raw)",
            f'  File "{VERL_SITE}/single_controller/ray/base.py", line 56, in __call__',
            "    output = ray.get(output)",
            "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
            "\tclass_name: create_colocated_worker_cls.<locals>.WorkerDict",
            f"\tactor_id: {_actor_id(rng)}",
            f"\tpid: {worker_pid}",
            f"\tnamespace: {_actor_id(rng)[:8]}-{_actor_id(rng)[:4]}",
            f"\tip: {ip}",
            f"The actor is dead because its worker process has died. {RAY_WORKER_DIED}",
        ]
    )
    return raylet, fake_exc("RayTaskError", "ActorDiedError", msg)


def rollout_init_error(err: BaseException, runner: str, pids: dict, ip: str, rng: random.Random) -> BaseException:
    """The exception the driver raises when the rollout worker refuses its config: verl 0.9.1 builds
    ``RolloutConfig`` (its ``__post_init__`` checks) in the worker's ``init_model`` (verl/workers/engine_workers.py:651),
    which the V1 trainer calls on the worker group (verl/trainer/ppo/v1/trainer_base.py:329, a blocking ``ray.get``,
    verl/single_controller/ray/base.py:56): a task error of a live actor, ``RayTaskError(<exc>)`` twice wrapped
    (WorkerDict in TaskRunnerV1), not an ActorDiedError; exit 1 through Hydra."""
    inner = type(err).__name__
    msg = "\n".join(
        [
            task_header(runner, pids["runner"], ip, rng),
            f'  File "{VERL_SITE}/trainer/main_ppo.py", line 154, in run',
            "    self.trainer.init()",
            f'  File "{VERL_SITE}/trainer/ppo/v1/trainer_base.py", line 329, in init_workers',
            "    self.actor_rollout_wg.init_model()",
            f'  File "{VERL_SITE}/single_controller/ray/base.py", line 56, in __call__',
            "    output = ray.get(output)",
            f"ray.exceptions.RayTaskError({inner}): "
            f"{worker_header('actor_rollout_init_model', pids['worker'], ip, rng)}",
            f'  File "{VERL_SITE}/workers/engine_workers.py", line 651, in init_model',
            "    rollout_config: RolloutConfig = omega_conf_to_dataclass(self.config.rollout)",
            f'  File "{VERL_SITE}/utils/config.py", line 50, in omega_conf_to_dataclass',
            '    return hydra.utils.instantiate(config, _convert_="partial")',
            f'  File "{VERL_SITE}/workers/config/rollout.py", line 281, in __post_init__',
            f"{inner}: {err}",
        ]
    )
    return fake_exc("RayTaskError", inner, msg)


def data_error(runner: str, pids: dict, ip: str, rng: random.Random, max_length: int):
    msg = "\n".join(
        [
            task_header(runner, pids["runner"], ip, rng),
            f'  File "{VERL_SITE}/trainer/ppo/ray_trainer.py", line 1420, in fit',
            "    for batch_dict in self.train_dataloader:",
            "NotImplementedError: Caught NotImplementedError in DataLoader worker process 0.",
            "Original Traceback (most recent call last):",
            f'  File "{VERL_SITE}/utils/torch_functional.py", line 553, in postprocess_data',
            '    raise NotImplementedError(f"{sequence_length=} is larger than {max_length=}")',
            f"NotImplementedError: sequence_length={max_length + 1337} is larger than max_length={max_length}",
        ]
    )
    return fake_exc("RayTaskError", "NotImplementedError", msg)


def gcs_timeout_lines(ip: str) -> list[str]:
    return [
        f"[2026-11-29 12:00:00,000 W 1 1] gcs_rpc_client.h:151: Failed to connect to GCS at address {ip}:6379 "
        f"within 5 seconds.",
        "[2026-11-29 12:00:05,000 W 1 1] gcs_client.cc:184: Failed to get cluster ID from GCS server: TimedOut: "
        "Timed out while waiting for GCS to become available.",
    ]
