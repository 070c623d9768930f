"""Real failure texts the verl STAND-IN prints on cue (sandbox / test equipment only).

Every string below is the text the real component prints (torch / torch_npu, vLLM / vllm-ascend, Ray,
HCCL / NCCL, swanlab, wandb), as collected in the project's failure-class reference and handed cases;
numbers, pids, ids and paths are made up. Frame context (file names, Ray method names) follows verl 0.9.1.
"""

from __future__ import annotations

import os
import random

VERL_SITE = "/verl/verl"


def fake_exc(outer: str, inner: str | None, message: str) -> BaseException:
    """An exception that prints as ``ray.exceptions.RayTaskError(<inner>): <message>`` (Ray's wrapper; a bare
    ``RayTaskError`` for ``inner`` None: Ray's wrapper of a plain ``Exception``), its message Ray's text (the remote
    frames and the inner line): the driver's report shows it as it is (driver.py)."""
    name = (f"RayTaskError({inner})" if inner else "RayTaskError") if outer == "RayTaskError" else outer
    cls = type(name, (RuntimeError,), {"standin_ray_text": True})
    cls.__module__ = "ray.exceptions"
    cls.__qualname__ = name
    return cls(message)


def _actor_id(rng: random.Random) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(24)) + "01000000"


#: the TaskRunner verl 0.9.1's ``main_ppo`` runs for every V1 mode, ``separate_async`` included (verl/trainer/main_ppo.py:184
#: ``run_ppo(config, task_runner_class=TaskRunnerV1)``); the legacy one-step-off entry's is ``OneStepTaskRunner``
#: (verl/experimental/one_step_off_policy/main_ppo.py:34, :124)
V1_RUNNER = "TaskRunnerV1"


def ray_name(text: str) -> str:
    """An actor task's name as Ray prints it in a ``RayTaskError`` (cyan, reset with ``\\x1b[39m``): real logs,
    tests/fixtures/real-verl/tool-runs/d-update-oom/train.log:1097."""
    return f"\x1b[36m{text}\x1b[39m"


#: the caret lines of Ray's own frames in an actor task, left after Ray strips those frames from the remote
#: traceback: under every ``ray::<Actor>.<method>()`` header of the task whose error is reported
#: (tests/fixtures/real-verl/tool-runs/d-update-oom/train.log:1098-1099, c-weight-sync-oom, k-megatron-*, holdout/w11)
ACTOR_TASK_CARETS = [" " * 11 + "^" * 36, " " * 11 + "^" * 31]
#: ... of Ray's ``auto_init_wrapper`` / ``wrapper`` / ``get`` under a blocking ``ray.get`` of verl's
#: (d-update-oom/train.log:1117-1119, c-weight-sync-oom after checkpoint_engine/base.py:519)
RAY_GET_CARETS = [" " * 11 + "^" * 19, " " * 11 + "^" * 21, " " * 34 + "^" * 19]

PY = "/usr/lib/python3.12"
SITE = "/usr/local/lib/python3.11/site-packages"
TORCH_SITE = f"{SITE}/torch"
MAIN_PPO = f"{VERL_SITE}/trainer/main_ppo.py"
TRAINER_BASE = f"{VERL_SITE}/trainer/ppo/v1/trainer_base.py"
WG_BASE = f"{VERL_SITE}/single_controller/ray/base.py"
DECORATOR = f"{VERL_SITE}/single_controller/base/decorator.py"
TQ_UTILS = f"{VERL_SITE}/utils/transferqueue_utils.py"
PROFILE = f"{VERL_SITE}/utils/profiler/profile.py"
ENGINE_WORKERS = f"{VERL_SITE}/workers/engine_workers.py"
FSDP_ENGINE = f"{VERL_SITE}/workers/engine/fsdp/transformer_impl.py"
FUTURES = f"{PY}/concurrent/futures/_base.py"


def frames(*frs: tuple) -> list[str]:
    """Traceback lines of frames ``(file, line, function, source[, the call under carets])``, as Python 3.12
    prints them: the caret line only under a call that is not the whole source line."""
    out = []
    for fr in frs:
        path, line, fn, code = fr[:4]
        out += [f'  File "{path}", line {line}, in {fn}', f"    {code}"]
        if len(fr) > 4:
            out.append(" " * (4 + code.index(fr[4])) + "^" * len(fr[4]))
    return out


def task_header(runner: str, pid: int, ip: str, rng: random.Random) -> str:
    """The TaskRunner's task as Ray's ``RayTaskError`` names it, and the caret lines of Ray's stripped frames
    (d-update-oom/train.log:1097-1099); several lines."""
    mod = "main_ppo"
    return "\n".join(
        [
            f"{ray_name(f'ray::{runner}.run()')} (pid={pid}, ip={ip}, actor_id={_actor_id(rng)}, "
            f"repr=<{mod}.{runner} object at 0x7f3e{rng.randrange(16**8):08x}>)",
            *ACTOR_TASK_CARETS,
        ]
    )


def worker_header(method: str, pid: int, ip: str, rng: random.Random) -> str:
    return (
        f"{ray_name(f'ray::WorkerDict.{method}()')} (pid={pid}, ip={ip}, actor_id={_actor_id(rng)}, "
        f"repr=<verl.single_controller.ray.base.WorkerDict object at 0x7f3e{rng.randrange(16**8):08x}>)"
    )


# ----------------------------------------------------------------------------- verl 0.9.1's V1 call chains
#: TaskRunnerV1.run (verl/trainer/main_ppo.py:153, :155)
RUN_INIT = (MAIN_PPO, 153, "run", "self.trainer.init()")
RUN_FIT = (MAIN_PPO, 155, "run", "self.trainer.fit(self.agent_loop_manager)")
#: PPOTrainer (verl/trainer/ppo/v1/trainer_base.py): init -> _setup; fit -> step -> _step_once
INIT_SETUP = (TRAINER_BASE, 223, "init", "self._setup()")
FIT_STEP = (
    TRAINER_BASE,
    477,
    "fit",
    "batch = self.step(metrics, self.timing_raw)",
    "self.step(metrics, self.timing_raw)",
)
STEP_ONCE = (
    TRAINER_BASE,
    552,
    "step",
    "batch = self._step_once(iter_metrics, timing_raw, sample_batch_size)",
    "self._step_once(iter_metrics, timing_raw, sample_batch_size)",
)
#: a blocking call on a worker group (verl/single_controller/ray/base.py:56), with Ray's carets under it
WG_GET = [*frames((WG_BASE, 56, "__call__", "output = ray.get(output)", "ray.get(output)")), *RAY_GET_CARETS]
#: the worker's side of a blocking WorkerDict call: concurrent.futures, Ray's stripped frames' carets, then the
#: WorkerDict's dispatch (verl/single_controller/ray/base.py:935) and verl's ``register`` (decorator.py:431)
#: (d-update-oom/train.log:1121-1134, k-megatron-modelopt)
WORKER_SYNC = [
    *frames(
        (FUTURES, 449, "result", "return self.__get_result()", "self.__get_result()"),
        (FUTURES, 401, "__get_result", "raise self._exception"),
    ),
    " " * 11 + "^" * 21,
    *ACTOR_TASK_CARETS,
    *frames(
        (
            WG_BASE,
            935,
            "func",
            "return getattr(self.worker_dict[key], name)(*args, **kwargs)",
            "getattr(self.worker_dict[key], name)(*args, **kwargs)",
        ),
        (DECORATOR, 431, "inner", "return func(*args, **kwargs)", "func(*args, **kwargs)"),
    ),
]
_REGISTER = (DECORATOR, 431, "inner", "return func(*args, **kwargs)", "func(*args, **kwargs)")
_TQ_DIRECT = (TQ_UTILS, 378, "inner", "return func(*args, **kwargs)", "func(*args, **kwargs)")
_PROFILED = (
    PROFILE,
    359,
    "wrapper",
    "return func(self_instance, *args, **kwargs_inner)",
    "func(self_instance, *args, **kwargs_inner)",
)
#: a worker method called with TransferQueue metadata (``make_nd_compute_dataproto_dispatch_fn``), profiled and
#: routing-replay flagged (verl/workers/engine_workers.py:62-72): update_actor, compute_log_prob
WORKER_TQ_CALL = frames(
    (TQ_UTILS, 399, "inner", "output = func(*args, **kwargs)", "func(*args, **kwargs)"),
    _PROFILED,
    (ENGINE_WORKERS, 70, "wrapper", "return func(self, data, *args, **kwargs)", "func(self, data, *args, **kwargs)"),
)
#: the FSDP engine's forward of one micro-batch into the HF model (transformer_impl.py:761, :1566) down to a
#: decoder layer (d-update-oom/train.log:1162-1186, trimmed of the repeated torch module frames)
FSDP_FORWARD = [
    *frames(
        (
            FSDP_ENGINE,
            761,
            "forward_backward_batch",
            "loss, meta_info = self.forward_step(micro_batch, loss_function=loss_function, forward_only=forward_only)",
            "self.forward_step(micro_batch, loss_function=loss_function, forward_only=forward_only)",
        ),
    ),
]
MODEL_FORWARD = [
    *frames(
        (FSDP_ENGINE, 1566, "forward_step", "raw_output = self.module(", "self.module("),
        (
            f"{TORCH_SITE}/nn/modules/module.py",
            1779,
            "_wrapped_call_impl",
            "return self._call_impl(*args, **kwargs)",
            "self._call_impl(*args, **kwargs)",
        ),
        (f"{TORCH_SITE}/nn/modules/module.py", 1885, "_call_impl", "return inner()", "inner()"),
        (
            f"{TORCH_SITE}/nn/modules/module.py",
            1833,
            "inner",
            "result = forward_call(*args, **kwargs)",
            "forward_call(*args, **kwargs)",
        ),
        (
            f"{SITE}/transformers/models/qwen2/modeling_qwen2.py",
            399,
            "forward",
            "hidden_states = decoder_layer(",
            "decoder_layer(",
        ),
        (
            f"{SITE}/transformers/modeling_layers.py",
            93,
            "__call__",
            "return super().__call__(*args, **kwargs)",
            "super().__call__(*args, **kwargs)",
        ),
    ),
    f'  File "{SITE}/transformers/models/qwen2/modeling_qwen2.py", line 302, in forward',
    "    hidden_states = residual + hidden_states",
    " " * 20 + "~" * 9 + "^" + "~" * 14,
]


def v1_step_chain(*trainer: tuple, get: list[str] = WG_GET) -> list[str]:
    """The TaskRunnerV1's frames of a failed worker call in a training step: ``run`` -> ``fit`` -> ``step`` ->
    ``_step_once`` -> the ``trainer`` frames (``_step_once``'s call, the trainer's method and its worker-group
    call) -> the blocking ``ray.get`` (``get``; d-update-oom/train.log:1100-1119)."""
    return [*frames(RUN_FIT, FIT_STEP, STEP_ONCE, *trainer), *get]


# ----------------------------------------------------------------------------- device OOM
ENGINE_BASE = f"{VERL_SITE}/workers/engine/base.py"
SEPARATE_ASYNC = f"{VERL_SITE}/trainer/ppo/v1/trainer_separate_async.py"
_TRAIN_WORKER = frames(
    _REGISTER,
    _TQ_DIRECT,
    (
        ENGINE_WORKERS,
        314,
        "train_mini_batch",
        "actor_output = self.train_batch(mini_batch_td)",
        "self.train_batch(mini_batch_td)",
    ),
    _REGISTER,
    _TQ_DIRECT,
    _PROFILED,
    (
        ENGINE_WORKERS,
        368,
        "train_batch",
        "output = self.engine.train_batch(data, loss_function=self.loss_fn)",
        "self.engine.train_batch(data, loss_function=self.loss_fn)",
    ),
    (
        ENGINE_BASE,
        127,
        "train_batch",
        "outputs = self.forward_backward_batch(data, loss_function, forward_only=False)",
        "self.forward_backward_batch(data, loss_function, forward_only=False)",
    ),
)
#: phase: (the TaskRunnerV1's trainer frames below ``_step_once``, the worker-group call's blocking get, the
#: worker method (after the role's prefix), the worker's frames). verl 0.9.1: verl/trainer/ppo/v1/trainer_base.py
#: (_step_once :586/:605/:610, _compute_old_log_prob :1658, _update_critic :1818-1819, _update_actor :1860),
#: verl/workers/engine_workers.py (compute_log_prob :704, infer_batch :427, update_actor :714, train_mini_batch
#: :314, train_batch :368), verl/workers/engine/base.py (train_batch :127, infer_batch :148),
#: verl/workers/engine/fsdp/transformer_impl.py (forward_backward_batch :761, forward_step :1566/:1571,
#: prepare_model_outputs :1491), verl/utils/torch_functional.py:243; the real update OOM:
#: tests/fixtures/real-verl/tool-runs/d-update-oom/train.log:1097-1188.
V1_OOM_PHASES = {
    "update_actor": (
        [
            (
                TRAINER_BASE,
                610,
                "_step_once",
                "batch = self._update_actor(batch, metrics=metrics)",
                "self._update_actor(batch, metrics=metrics)",
            ),
            (
                TRAINER_BASE,
                1860,
                "_update_actor",
                "output: TensorDict = self.actor_rollout_wg.update_actor(batch)",
                "self.actor_rollout_wg.update_actor(batch)",
            ),
        ],
        WG_GET,
        "update_actor",
        [
            *WORKER_SYNC,
            *WORKER_TQ_CALL,
            *frames(
                (
                    ENGINE_WORKERS,
                    714,
                    "update_actor",
                    "output = self.actor.train_mini_batch(data=data)",
                    "self.actor.train_mini_batch(data=data)",
                ),
            ),
            *_TRAIN_WORKER,
            *FSDP_FORWARD,
            *MODEL_FORWARD,
        ],
    ),
    "compute_log_prob": (
        [
            (
                TRAINER_BASE,
                586,
                "_step_once",
                "batch = self._compute_old_log_prob(batch, metrics=metrics)",
                "self._compute_old_log_prob(batch, metrics=metrics)",
            ),
            (
                TRAINER_BASE,
                1658,
                "_compute_old_log_prob",
                "output: KVBatchMeta = self.actor_rollout_wg.compute_log_prob(batch)",
                "self.actor_rollout_wg.compute_log_prob(batch)",
            ),
        ],
        WG_GET,
        "compute_log_prob",
        [
            *WORKER_SYNC,
            *WORKER_TQ_CALL,
            *frames(
                (
                    ENGINE_WORKERS,
                    704,
                    "compute_log_prob",
                    "output = self.actor.infer_batch(data)",
                    "self.actor.infer_batch(data)",
                ),
                _REGISTER,
                _TQ_DIRECT,
                (
                    ENGINE_WORKERS,
                    427,
                    "infer_batch",
                    "output = self.engine.infer_batch(data, loss_function=loss_function)",
                    "self.engine.infer_batch(data, loss_function=loss_function)",
                ),
                (
                    ENGINE_BASE,
                    148,
                    "infer_batch",
                    "outputs = self.forward_backward_batch(data, loss_function, forward_only=True)",
                    "self.forward_backward_batch(data, loss_function, forward_only=True)",
                ),
            ),
            *FSDP_FORWARD,
            *frames(
                (
                    FSDP_ENGINE,
                    1571,
                    "forward_step",
                    "model_output = self.prepare_model_outputs(",
                    "self.prepare_model_outputs(",
                ),
                (
                    FSDP_ENGINE,
                    1491,
                    "prepare_model_outputs",
                    "entropy = verl_F.entropy_from_logits(logits)",
                    "verl_F.entropy_from_logits(logits)",
                ),
                (
                    f"{VERL_SITE}/utils/torch_functional.py",
                    243,
                    "entropy_from_logits",
                    "pd = torch.nn.functional.softmax(logits, dim=-1)",
                    "torch.nn.functional.softmax(logits, dim=-1)",
                ),
            ),
        ],
    ),
    "update_critic": (
        [
            (
                TRAINER_BASE,
                605,
                "_step_once",
                "batch = self._update_critic(batch, metrics=metrics)",
                "self._update_critic(batch, metrics=metrics)",
            ),
            (TRAINER_BASE, 1819, "_update_critic", "output: TensorDict = output.get()", "output.get()"),
        ],
        [
            *frames(
                (
                    f"{VERL_SITE}/protocol.py",
                    1210,
                    "get",
                    "output = ray.get(self.futures)  # dp_size.",
                    "ray.get(self.futures)",
                )
            ),
            *RAY_GET_CARETS,
        ],
        "train_mini_batch",
        [
            *WORKER_SYNC,
            *frames((TQ_UTILS, 399, "inner", "output = func(*args, **kwargs)", "func(*args, **kwargs)")),
            *_TRAIN_WORKER[len(frames(_REGISTER, _TQ_DIRECT)) :],
            *FSDP_FORWARD,
            *MODEL_FORWARD,
        ],
    ),
}
#: the separate_async trainer's own ``_compute_old_log_prob`` (recomputed, not bypass mode) between
#: ``_step_once`` and the base method (verl/trainer/ppo/v1/trainer_separate_async.py:202-204)
SEPARATE_LOG_PROB = (
    SEPARATE_ASYNC,
    204,
    "_compute_old_log_prob",
    "return super()._compute_old_log_prob(batch, metrics)",
    "super()._compute_old_log_prob(batch, metrics)",
)
#: the legacy one-step-off entry's trainer (OneStepTaskRunner): the classic ray_trainer frames
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
    out = [CUMEM_OOM, pre + "WorkerProc hit an exception.", pre + "Traceback (most recent call last):"]
    for f, ln, fn, code in frames:
        out += [pre + f'  File "{f}", line {ln}, in {fn}', pre + f"    {code}"]
    out.append(pre + "RuntimeError: " + CUMEM_OOM)
    ec = f"(EngineCore pid={w - 48}) ERROR 12-01 07:45:52 [core.py:1449] "
    out += [
        ec + "Invocation of wake_up method failed",
        ec + f"RuntimeError: Worker failed with error '{CUMEM_OOM}', please check the stack trace above for the "
        "root cause",
    ]
    return out


def wake_up_error(runner: str, pids: dict, ip: str, rng: random.Random, mode: str = "colocate_async") -> BaseException:
    """The driver's exception for a weight-sync OOM in vLLM's wake-up, as verl 0.9.1's V1 trainer ends
    (tests/fixtures/real-verl/tool-runs/c-weight-sync-oom/train.log:1172-1236): ``fit`` -> the mode's
    ``on_step_end`` (trainer_colocate_async.py:40, trainer_sync.py:38) -> CheckpointEngineManager.update_weights
    (verl/checkpoint_engine/base.py:519, naive backend: a blocking ``ray.get``) -> the WorkerDict's async
    ``update_weights`` (verl/workers/engine_workers.py:823 ``rollout.resume``) -> vLLMHttpServer.wake_up
    (vllm_async_server.py:840) -> vLLM's engine client, whose utility call raises a plain ``Exception``: Ray wraps
    it as a bare ``RayTaskError`` three times, the last line ``Exception: Call to wake_up method failed: ...``."""
    on_step_end = (
        (f"{VERL_SITE}/trainer/ppo/v1/trainer_sync.py", 38)
        if mode == "sync"
        else (f"{VERL_SITE}/trainer/ppo/v1/trainer_colocate_async.py", 40)
    )
    site = WAKE_UP_SITE
    body = [
        task_header(runner, pids["runner"], ip, rng),
        *frames(
            RUN_FIT,
            (TRAINER_BASE, 487, "fit", "self.on_step_end()"),
            (*on_step_end, "on_step_end", "self.checkpoint_manager.update_weights(self.global_steps)"),
        ),
        *AUTO_AWAIT,
        *frames(
            (
                f"{VERL_SITE}/checkpoint_engine/base.py",
                519,
                "update_weights",
                "ray.get(self.actor_wg.update_weights(global_steps=global_steps, mode=self.backend))",
            )
        ),
        *RAY_GET_CARETS,
        f"ray.exceptions.RayTaskError: {worker_header('actor_rollout_update_weights', pids['worker'], ip, rng)}",
        *ASYNC_ACTOR_HEAD,
        *frames(
            (
                WG_BASE,
                939,
                "async_func",
                "return await getattr(self.worker_dict[key], name)(*args, **kwargs)",
                "await getattr(self.worker_dict[key], name)(*args, **kwargs)",
            ),
            (DECORATOR, 437, "async_inner", "return await func(*args, **kwargs)", "await func(*args, **kwargs)"),
            (TQ_UTILS, 425, "async_inner", "return await func(*args, **kwargs)", "await func(*args, **kwargs)"),
            (ENGINE_WORKERS, 823, "update_weights", 'await self.rollout.resume(tags=["kv_cache"])'),
            (
                f"{VERL_SITE}/workers/rollout/vllm_rollout/vllm_rollout.py",
                202,
                "resume",
                "await self.server_handle.wake_up.remote(tags=tags)",
            ),
        ),
        f"ray.exceptions.RayTaskError: {ray_name('ray::vLLMHttpServer.wake_up()')} (pid={pids['worker']}, ip={ip}, "
        f"actor_id={_actor_id(rng)}, repr=<verl.workers.rollout.vllm_rollout.vllm_async_server.vLLMHttpServer "
        f"object at 0x7f3e{rng.randrange(16**8):08x}>)",
        *ASYNC_ACTOR_HEAD,
        *frames(
            (
                f"{VERL_SITE}/workers/rollout/vllm_rollout/vllm_async_server.py",
                840,
                "wake_up",
                "await self.engine.wake_up(tags=tags or self._get_wake_up_tags())",
            ),
            (f"{site}/v1/engine/async_llm.py", 940, "wake_up", "await self.engine_core.wake_up_async(tags)"),
            (
                f"{site}/v1/engine/core_client.py",
                1163,
                "wake_up_async",
                'await self.call_utility_async("wake_up", tags)',
            ),
            (
                f"{site}/v1/engine/core_client.py",
                1102,
                "call_utility_async",
                "return await self._call_utility_async(method, *args, engine=self.core_engine)",
                "await self._call_utility_async(method, *args, engine=self.core_engine)",
            ),
            (f"{site}/v1/engine/core_client.py", 1116, "_call_utility_async", "return await future", "await future"),
        ),
        f"Exception: Call to wake_up method failed: Worker failed with error '{CUMEM_OOM}', please check the stack "
        "trace above for the root cause",
    ]
    return fake_exc("RayTaskError", None, "\n".join(body))


def device_oom(
    accelerator: str,
    phase: str,
    runner: str,
    pids: dict,
    ip: str,
    rng: random.Random,
    role: str = "actor_rollout",
    separate: bool = False,
):
    """(worker lines printed at once with the WorkerDict prefix, exception the driver raises later).

    Under ``TaskRunnerV1`` (every ``main_ppo`` mode): the V1 chain of the phase (:data:`V1_OOM_PHASES`;
    ``none``: a traceback cut short, no verl phase in it) down to ``ray::WorkerDict.<role>_<method>()`` and the
    worker's frames; the worker prints no traceback of its own (d-update-oom/train.log has one traceback, the
    driver's), torch_npu its ``ERR00006 PTA memory error`` line. ``role``: the actor worker group's role
    (``actor_rollout``; ``actor`` for separate_async without the hybrid engine, verl/trainer/ppo/v1/trainer_base.py
    :801-804); ``separate``: the separate_async trainer (its ``_compute_old_log_prob`` frame). The legacy
    one-step-off entry (``OneStepTaskRunner``) keeps the classic ray_trainer frames. ``phase`` ``update_weights``
    (GPU): vLLM's wake-up OOM (:func:`wake_up_oom`)."""
    if phase == "update_weights" and accelerator == "gpu":
        return wake_up_oom(pids, rng), wake_up_error(runner, pids, ip, rng)
    oom = device_oom_line(accelerator, rng, device=rng.randrange(8))
    inner = "OutOfMemoryError" if accelerator == "gpu" else "RuntimeError"
    pta = [f"[ERROR] 2026-11-29-12:00:00 (PID:{pids['worker']}, Device:0, RankID:0) ERR00006 PTA memory error"]
    wl = [] if accelerator == "gpu" else pta
    if runner == V1_RUNNER:
        if phase == "none":
            body = [*frames(RUN_FIT, FIT_STEP, STEP_ONCE), *MODEL_FORWARD]
        else:
            trainer, get, method, wframes = V1_OOM_PHASES.get(phase, V1_OOM_PHASES["update_actor"])
            if separate and phase == "compute_log_prob":
                trainer = [trainer[0], SEPARATE_LOG_PROB, *trainer[1:]]
            who = "critic" if phase == "update_critic" else role
            body = [
                *v1_step_chain(*trainer, get=get),
                f"ray.exceptions.RayTaskError({inner}): {worker_header(f'{who}_{method}', pids['worker'], ip, rng)}",
                *wframes,
            ]
        msg = "\n".join([task_header(runner, pids["runner"], ip, rng), *body, oom])
        return wl, fake_exc("RayTaskError", inner, msg)
    drv_frame, method, wframes = OOM_PHASES.get(phase, OOM_PHASES["update_actor"])
    wl = ["Traceback (most recent call last):"]
    for f, ln, fn, code in wframes:
        wl += [f'  File "{f}", line {ln}, in {fn}', f"    {code}"]
    wl.append(oom)
    if accelerator != "gpu":
        wl += pta
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
LLM_SERVER = f"{VERL_SITE}/workers/rollout/llm_server.py"
VLLM_SERVER = f"{VERL_SITE}/workers/rollout/vllm_rollout/vllm_async_server.py"
#: ``asyncio.run`` under verl's ``auto_await`` (verl/utils/ray_utils.py:123), as a sync caller of an async verl
#: method shows it (c-weight-sync-oom/train.log:1182-1191, holdout/w11)
AUTO_AWAIT = [
    *frames(
        (f"{VERL_SITE}/utils/ray_utils.py", 123, "wrapper", "return asyncio.run(coro)", "asyncio.run(coro)"),
        (f"{PY}/asyncio/runners.py", 194, "run", "return runner.run(main)", "runner.run(main)"),
        (
            f"{PY}/asyncio/runners.py",
            118,
            "run",
            "return self._loop.run_until_complete(task)",
            "self._loop.run_until_complete(task)",
        ),
    ),
    '  File "uvloop/loop.pyx", line 1515, in uvloop.loop.Loop.run_until_complete',
]
#: the side of an async Ray actor call that raised (concurrent.futures, then the carets of Ray's stripped frames)
ASYNC_ACTOR_HEAD = [
    *frames(
        (FUTURES, 449, "result", "return self.__get_result()", "self.__get_result()"),
        (FUTURES, 401, "__get_result", "raise self._exception"),
    ),
    " " * 11 + "^" * 37,
]


def launch_server_error(runner: str, pids: dict, ip: str, rng: random.Random, separate: bool = False) -> str:
    """The remote part of a rollout server that fails to start, as verl 0.9.1's V1 trainer ends
    (tests/fixtures/real-verl/holdout/w11/train.log:1108-1177): ``init`` -> ``_setup`` -> LLMServerManager.create
    (trainer_base.py:372 for the hybrid replicas; the separate_async trainer's standalone replicas at
    trainer_separate_async.py:154) -> the replicas' ``launch_servers`` -> ``ray::vLLMHttpServer.launch_server()``
    -> vLLM's engine start, which raises ``RuntimeError: Engine core initialization failed`` (the root cause is in
    the engine's own lines above)."""
    mgr = (
        (SEPARATE_ASYNC, 154, "_setup", "self.standalone_server_manager: LLMServerManager = LLMServerManager.create(")
        if separate
        else (TRAINER_BASE, 372, "_setup", "self.llm_server_manager: LLMServerManager = LLMServerManager.create(")
    )
    init = (
        (
            LLM_SERVER,
            483,
            "_initialize_llm_servers",
            "await asyncio.gather(*[server.init_standalone() for server in self.rollout_replicas])",
        )
        if separate
        else (
            LLM_SERVER,
            473,
            "_initialize_llm_servers",
            "await asyncio.gather(*[server.init_hybrid(self.worker_group) for server in self.rollout_replicas])",
        )
    )
    replica = (
        (f"{VERL_SITE}/workers/rollout/replica.py", 226, "init_standalone", "await self.launch_servers()")
        if separate
        else (f"{VERL_SITE}/workers/rollout/replica.py", 141, "init_hybrid", "await self.launch_servers()")
    )
    site = WAKE_UP_SITE
    return "\n".join(
        [
            task_header(runner, pids["runner"], ip, rng),
            *frames(RUN_INIT, INIT_SETUP, (*mgr, "LLMServerManager.create(")),
            *AUTO_AWAIT,
            *frames(
                (LLM_SERVER, 403, "create", "await instance._initialize_llm_servers()"),
                init,
                replica,
                (VLLM_SERVER, 1400, "launch_servers", "await asyncio.gather("),
                (f"{PY}/asyncio/tasks.py", 684, "_wrap_awaitable", "return await awaitable", "await awaitable"),
            ),
            f"ray.exceptions.RayTaskError(RuntimeError): {ray_name('ray::vLLMHttpServer.launch_server()')} "
            f"(pid={pids['worker']}, ip={ip}, actor_id={_actor_id(rng)}, repr=<verl.workers.rollout.vllm_rollout."
            f"vllm_async_server.vLLMHttpServer object at 0x7f3e{rng.randrange(16**8):08x}>)",
            *ASYNC_ACTOR_HEAD,
            *frames((VLLM_SERVER, 477, "launch_server", "await self.run_server(server_args)")),
            " " * 11 + "^" * 37,
            *frames(
                (
                    VLLM_SERVER,
                    494,
                    "run_server",
                    "engine_client = AsyncLLM.from_vllm_config(vllm_config=vllm_config, usage_context=usage_context, "
                    "**kwargs)",
                    "AsyncLLM.from_vllm_config(vllm_config=vllm_config, usage_context=usage_context, **kwargs)",
                ),
                (f"{site}/v1/engine/async_llm.py", 217, "from_vllm_config", "return cls(", "cls("),
                (
                    f"{site}/v1/engine/async_llm.py",
                    146,
                    "__init__",
                    "self.engine_core = EngineCoreClient.make_async_mp_client(",
                    "EngineCoreClient.make_async_mp_client(",
                ),
                (f"{site}/v1/engine/core_client.py", 963, "__init__", "super().__init__("),
                (f"{site}/v1/engine/core_client.py", 573, "__init__", "with launch_core_engines("),
                (f"{PY}/contextlib.py", 144, "__exit__", "next(self.gen)"),
                (f"{site}/v1/engine/utils.py", 1213, "launch_core_engines", "wait_for_engine_startup("),
                (f"{site}/v1/engine/utils.py", 1272, "wait_for_engine_startup", "raise RuntimeError("),
            ),
            "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
        ]
    )


_ENGINE_FAILED = [
    "ERROR 11-29 12:00:00 [core.py:866] EngineCore failed to start.",
    "ERROR 11-29 12:00:00 [core.py:866] Exception: WorkerProc initialization failed due to an exception in "
    "a background process. See stack trace for root cause.",
]


def kv_cache(
    variant: str,
    util: float,
    accelerator: str,
    runner: str,
    pids: dict,
    ip: str,
    rng: random.Random,
    separate: bool = False,
):
    """(vLLM worker/engine lines, exception). Variants: free-memory, alloc-oom, no-cache-blocks, max-seq-len.
    Under ``TaskRunnerV1`` the engine's error is in its own lines and the driver's exception is the server's failed
    start (:func:`launch_server_error`); the legacy one-step-off entry keeps the classic ray_trainer frames."""
    pre = "ERROR 11-29 12:00:00 [v1/executor/multiproc_executor.py:824]"
    total = 64.0 if accelerator != "gpu" else 80.0
    if variant == "free-memory":
        inner_line = (
            f"ValueError: Free memory on device ({total * 0.125:.1f}/{total:.1f} GiB) on startup is less than "
            f"desired GPU memory utilization ({util}, {round(util * total, 2)} GiB). Decrease GPU memory "
            f"utilization or reduce GPU memory used by other processes."
        )
        if runner == V1_RUNNER:
            worker = [f"{pre} WorkerProc hit an exception.", f"{pre} {inner_line}"]
            return [("Worker_TP0", worker), ("EngineCore_DP0", _ENGINE_FAILED)], fake_exc(
                "RayTaskError", "RuntimeError", launch_server_error(runner, pids, ip, rng, separate)
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
    engine = _ENGINE_FAILED
    if runner == V1_RUNNER:
        msg = launch_server_error(runner, pids, ip, rng, separate)
        return [("Worker_TP0", worker), ("EngineCore_DP0", engine)], fake_exc("RayTaskError", "RuntimeError", msg)
    msg = "\n".join(
        [
            task_header(runner, pids["runner"], ip, rng),
            f'  File "{VERL_SITE}/trainer/ppo/ray_trainer.py", line 798, in init_workers',
            "    self.async_rollout_manager = AgentLoopManager(config=self.config, worker_group=self.actor_rollout_wg)",
            "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {'EngineCore_DP0': 1}",
        ]
    )
    return [("Worker_TP0", worker), ("EngineCore_DP0", engine)], fake_exc("RayTaskError", "RuntimeError", msg)


# ----------------------------------------------------------------------------- V1 generation / data (prepare_step)
SKIP_MANAGER = f"{VERL_SITE}/utils/skip/skip_manager.py"


def v1_prepare_chain(separate: bool = False) -> list[tuple]:
    """The TaskRunnerV1's frames down to a step's prompt submission: ``fit`` -> ``step`` -> ``prepare_step``
    (trainer_base.py:541, :1526; the separate_async trainer's own at trainer_separate_async.py:274) ->
    SkipManager's wrapper (verl/utils/skip/skip_manager.py:154) -> ``_add_batch_to_generate``."""
    sep = [(SEPARATE_ASYNC, 274, "prepare_step", "metrics = super().prepare_step()", "super().prepare_step()")]
    return [
        RUN_FIT,
        FIT_STEP,
        (TRAINER_BASE, 541, "step", "prepare_metrics = self.prepare_step()", "self.prepare_step()"),
        *(sep if separate else []),
        (TRAINER_BASE, 1526, "prepare_step", "self._add_batch_to_generate()"),
        (SKIP_MANAGER, 154, "wrapper", "return func(self, *args, **kwargs)", "func(self, *args, **kwargs)"),
    ]


def v1_generate_chain(separate: bool = False) -> list[str]:
    """... -> ``_submit_batch_to_rollout`` (trainer_base.py:1523, :1511) -> AgentLoopManagerTQ.generate_sequences'
    blocking ``ray.get`` on its AgentLoopWorkerTQ tasks (verl/trainer/ppo/v1/agent_loop_tq.py:252)."""
    return [
        *frames(
            *v1_prepare_chain(separate),
            (TRAINER_BASE, 1523, "_add_batch_to_generate", "self._submit_batch_to_rollout(batch)"),
            (TRAINER_BASE, 1511, "_submit_batch_to_rollout", "self.agent_loop_manager.generate_sequences(batch)"),
            (f"{VERL_SITE}/trainer/ppo/v1/agent_loop_tq.py", 252, "generate_sequences", "ray.get("),
        ),
        *RAY_GET_CARETS,
    ]


# ----------------------------------------------------------------------------- Ray OOM killer (host memory)
def ray_oom(runner: str, pids: dict, ip: str, rng: random.Random, separate: bool = False):
    """(raylet lines, exception) when Ray's memory monitor kills a generation task. Under ``TaskRunnerV1`` the
    task is an AgentLoopWorkerTQ's ``generate_sequences``, got in the step's prompt submission
    (:func:`v1_generate_chain`); the legacy entry keeps the classic ray_trainer frames."""
    node_id = "".join(rng.choice("0123456789abcdef") for _ in range(56))
    worker_id = "".join(rng.choice("0123456789abcdef") for _ in range(56))
    v1 = runner == V1_RUNNER
    task = "AgentLoopWorkerTQ.generate_sequences" if v1 else "WorkerDict.actor_rollout_generate_sequences"
    chain = (
        v1_generate_chain(separate)
        if v1
        else [
            f'  File "{VERL_SITE}/trainer/ppo/ray_trainer.py", line 1098, in fit',
            "    gen_batch_output = self.actor_rollout_wg.generate_sequences(gen_batch)",
            f'  File "{VERL_SITE}/single_controller/ray/base.py", line 50, in __call__',
            "    output = ray.get(output)",
        ]
    )
    msg = "\n".join(
        [
            task_header(runner, pids["runner"], ip, rng),
            *chain,
            "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.",
            f"Memory on the node (IP: {ip}, ID: {node_id}) where the task (actor ID: {_actor_id(rng)}, "
            f"name={task.split('.')[0] + '.__init__' if not v1 else task}, pid={pids['worker']}, memory used=56.57GB) was running was 246.41GB used / "
            f"251.54GB limit (0.979583), which exceeds the memory usage threshold of 0.95. Ray killed this worker (ID: "
            f"{worker_id}) because it was the most recently scheduled task; to see more information about memory usage "
            f"on this node, use `ray logs raylet.out -ip {ip}`. To see the logs of the worker, use `ray logs "
            f"worker-{worker_id}*out -ip {ip}. Top 10 memory users:",
            "PID\tMEM(GB)\tCOMMAND",
            f"{pids['worker']}\t56.57\tray::{task}",
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
def _died_in_update(runner: str) -> list[str]:
    """The TaskRunner's frames down to the worker-group call a dead worker fails: the V1 update chain
    (:func:`v1_step_chain`, ``_update_actor``); the legacy entry's classic ray_trainer frames."""
    if runner == V1_RUNNER:
        return v1_step_chain(*V1_OOM_PHASES["update_actor"][0])
    return [
        f'  File "{VERL_SITE}/trainer/ppo/ray_trainer.py", line 1507, in fit',
        "    actor_output = self._update_actor(batch)",
        f'  File "{VERL_SITE}/single_controller/ray/base.py", line 55, in __call__',
        "    output = ray.get(output)",
    ]


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
            *_died_in_update(runner),
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
def tracking_chain(runner: str) -> list[str]:
    """The TaskRunner's frames down to verl's ``Tracking`` (built at the start of ``fit``:
    verl/trainer/ppo/v1/trainer_base.py:423; the legacy entry's classic ray_trainer frame)."""
    if runner == V1_RUNNER:
        return frames(RUN_FIT, (TRAINER_BASE, 423, "fit", "self.logger = Tracking(", "Tracking("))
    return [f'  File "{VERL_SITE}/trainer/ppo/ray_trainer.py", line 1302, in fit', "    logger = Tracking("]


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
            *tracking_chain(runner),
            *frames((f"{VERL_SITE}/utils/tracking.py", 144, "__init__", "swanlab.init(")),
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


def crash(runner: str, pids: dict, ip: str, rng: random.Random, separate: bool = False):
    """An agent-loop worker that dies for want of threads, got in the step's prompt submission
    (:func:`v1_generate_chain`; the legacy entry's classic ray_trainer frame)."""
    v1 = runner == V1_RUNNER
    chain = (
        v1_generate_chain(separate)
        if v1
        else [
            f'  File "{VERL_SITE}/trainer/ppo/ray_trainer.py", line 1460, in fit',
            "    gen_batch_output = self.async_rollout_manager.generate_sequences(gen_batch_output)",
        ]
    )
    msg = "\n".join(
        [
            task_header(runner, pids["runner"], ip, rng),
            *chain,
            "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
            f"\tclass_name: {'AgentLoopWorkerTQ' if v1 else 'AgentLoopWorker'}",
            f"\tactor_id: {_actor_id(rng)}",
            "thread: Resource temporarily unavailable [system:11]",
        ]
    )
    return fake_exc("RayTaskError", "ActorDiedError", msg)


#: torch.save's words when a write of its zip archive comes up short (c10 caffe2/serialize/inline_container.cc; a
#: full disk or quota: torch names no errno, the public reports of a full disk show this line)
TORCH_WRITE_FAILED = "RuntimeError: [enforce fail at inline_container.cc:664] . PytorchStreamWriter failed writing file data/0: file write failed"


def save_error(variant: str, folder: str, world: int, runner: str, pids: dict, ip: str, rng: random.Random):
    """(worker lines, exception) of a checkpoint save that fails in the actor workers, as verl 0.9.1's V1 trainer
    ends: ``_save_checkpoint`` (verl/trainer/ppo/v1/trainer_base.py:948-1024) calls
    ``actor_rollout_wg.save_checkpoint`` (:978, a blocking ``ray.get``, verl/single_controller/ray/base.py:56) BEFORE
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
        f'  File "{VERL_SITE}/trainer/ppo/v1/trainer_base.py", line 978, in _save_checkpoint',
        "    self.actor_rollout_wg.save_checkpoint(",
        *WG_GET,
    ]
    wframes = [
        *WORKER_SYNC,
        *frames(
            _TQ_DIRECT,
            (
                ENGINE_WORKERS,
                725,
                "save_checkpoint",
                "self.actor.save_checkpoint(local_path, hdfs_path, global_step, max_ckpt_to_keep)",
            ),
            _REGISTER,
            _TQ_DIRECT,
            (
                ENGINE_WORKERS,
                445,
                "save_checkpoint",
                "return self.engine.save_checkpoint(local_path, hdfs_path, global_step, max_ckpt_to_keep)",
                "self.engine.save_checkpoint(local_path, hdfs_path, global_step, max_ckpt_to_keep)",
            ),
        ),
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
            *_died_in_update(runner),
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
    which the V1 trainer calls on the worker group (``init`` -> ``_setup``, verl/trainer/ppo/v1/trainer_base.py:223, :329, a blocking ``ray.get``,
    verl/single_controller/ray/base.py:56): a task error of a live actor, ``RayTaskError(<exc>)`` twice wrapped
    (WorkerDict in TaskRunnerV1), not an ActorDiedError; exit 1 through Hydra."""
    inner = type(err).__name__
    msg = "\n".join(
        [
            task_header(runner, pids["runner"], ip, rng),
            *frames(RUN_INIT, INIT_SETUP, (TRAINER_BASE, 329, "_setup", "self.actor_rollout_wg.init_model()")),
            *WG_GET,
            f"ray.exceptions.RayTaskError({inner}): "
            f"{worker_header('actor_rollout_init_model', pids['worker'], ip, rng)}",
            *WORKER_SYNC,
            *frames(_TQ_DIRECT),
            f'  File "{VERL_SITE}/workers/engine_workers.py", line 651, in init_model',
            "    rollout_config: RolloutConfig = omega_conf_to_dataclass(self.config.rollout)",
            f'  File "{VERL_SITE}/utils/config.py", line 50, in omega_conf_to_dataclass',
            '    return hydra.utils.instantiate(config, _convert_="partial")',
            f'  File "{VERL_SITE}/workers/config/rollout.py", line 281, in __post_init__',
            f"{inner}: {err}",
        ]
    )
    return fake_exc("RayTaskError", inner, msg)


def data_error(runner: str, pids: dict, ip: str, rng: random.Random, max_length: int, separate: bool = False):
    """A dataloader worker's error in the step's prompt fetch: under ``TaskRunnerV1`` ``prepare_step`` ->
    ``_add_batch_to_generate`` -> ``_next_train_batch`` -> ``_fetch_one_gen_batch``'s ``next`` on the train
    dataloader (verl/trainer/ppo/v1/trainer_base.py:1522, :1491, :1471; the dataloader's own frames are left out);
    the legacy entry's classic ray_trainer frame. The inner error is verl's ``postprocess_data``
    (verl/utils/torch_functional.py:560)."""
    chain = (
        frames(
            *v1_prepare_chain(separate),
            (
                TRAINER_BASE,
                1522,
                "_add_batch_to_generate",
                "batch = self._next_train_batch()",
                "self._next_train_batch()",
            ),
            (
                TRAINER_BASE,
                1491,
                "_next_train_batch",
                "chunks = [self._fetch_one_gen_batch() for _ in range(num_prompts // gen_batch_size)]",
                "self._fetch_one_gen_batch()",
            ),
            (
                TRAINER_BASE,
                1471,
                "_fetch_one_gen_batch",
                "batch_dict = next(self.train_dataloader_it)",
                "next(self.train_dataloader_it)",
            ),
        )
        if runner == V1_RUNNER
        else [
            f'  File "{VERL_SITE}/trainer/ppo/ray_trainer.py", line 1420, in fit',
            "    for batch_dict in self.train_dataloader:",
        ]
    )
    msg = "\n".join(
        [
            task_header(runner, pids["runner"], ip, rng),
            *chain,
            "NotImplementedError: Caught NotImplementedError in DataLoader worker process 0.",
            "Original Traceback (most recent call last):",
            f'  File "{VERL_SITE}/utils/torch_functional.py", line 560, in postprocess_data',
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
