"""The verl STAND-IN trainer (sandbox / test equipment only; never shipped, never imported by dapo_ops).

It receives the config composed by the REAL ``@hydra.main`` over verl 0.9.1's real yaml (so override errors
are Hydra's own), runs the cross-checks the real trainer enforces where they matter to dapo-ops, and prints
verl's stdout formats while "training" with a configurable step time. Failures come from the scenario file
(see ``cues.py`` and ``sandbox/README.md``). Log formats follow REAL verl 0.9.1 runs
(``tests/fixtures/real-verl/verl-run-*.log``, from the H200): ``main_ppo`` is the V1 trainer (``TaskRunnerV1``;
``verl/trainer/ppo/v1/trainer_base.py``): Ray's ANSI actor prefix ``\x1b[36m(TaskRunnerV1 pid=N)\x1b[0m ``,
``Total training steps``, ``Training from scratch``, ``Resuming from <dir>, setting global step to K`` and
``Saving checkpoint to <dir>`` through Python logging as ``INFO:<date> <time>,<ms>:...``, the save line before
its step's ``step:N`` line, no "finished" line (``'Final validation metrics: None'``, the 100 % bar, exit 0), a
resumed bar starting at ``K/N``, one tqdm redraw per prefixed line (V1 ``separate_async`` too: its TaskRunner
and trainer are V1's). The legacy one-step-off entry keeps the classic lines its 0.9.1 trainer prints (``Load from checkpoint folder: ...``, ``local_global_step_folder: ...``).
"""

from __future__ import annotations

import json
import os
import pprint
import random
import shutil
import socket
import sys
import time

from omegaconf import DictConfig, OmegaConf

from . import cues, driver, hostmem, reward, texts
from .progress import Progress

KNOWN_LOGGERS = (
    "wandb",
    "mlflow",
    "swanlab",
    "vemlp_wandb",
    "tensorboard",
    "console",
    "clearml",
    "trackio",
    "file",
    "rl_insight",
    "tracking",
)
DEVICE_DIR = "/tmp/dapo-standin/devices"  # the stand-in's device files (_hold_devices)
DATALOADER_LEN = 10  # stand-in "Size of train dataloader" when trainer.total_training_steps is null


def _sel(cfg, key, default=None):
    return OmegaConf.select(cfg, key, default=default)


class Out:
    """Writes lines the way they reach a verl driver log: Ray prefixes ``(<Actor> pid=<pid>) `` optional, in
    Ray's cyan (``\x1b[36m(<Actor> pid=<pid>)\x1b[0m ``, as the real logs show) when ``ansi``."""

    def __init__(self, runner: str, use_prefix: bool, ansi: bool = False):
        self.runner = runner
        self.use_prefix = use_prefix
        self.ansi = ansi
        self.pid = os.getpid()
        self.worker_pid = self.pid + 409

    def pre(self, actor: str | None) -> str:
        if not self.use_prefix or actor is None:
            return ""
        pid = self.pid if actor == self.runner else self.worker_pid
        if self.ansi:
            return f"\x1b[36m({actor} pid={pid})\x1b[0m "
        return f"({actor} pid={pid}) "

    def info(self, text: str, actor: str | None = "runner", level: str = "INFO") -> None:
        """A Python-logging line as verl's logger prints it: ``INFO:2026-12-01 07:35:56,297:<text>`` (``WARNING:...``
        for ``logger.warning``, as tests/fixtures/real-verl/ shows)."""
        t = time.time()
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) + ",%03d" % int((t % 1) * 1000)
        self.line(f"{level}:{stamp}:{text}", actor)

    def line(self, text: str, actor: str | None = "runner", err: bool = False) -> None:
        actor = self.runner if actor == "runner" else actor
        p = self.pre(actor)
        stream = sys.stderr if err else sys.stdout
        for ln in str(text).split("\n"):
            stream.write(p + ln + "\n")
        stream.flush()

    def pformat(self, obj, actor: str | None = "runner") -> None:
        self.line(pprint.pformat(obj), actor)


def _validate(cfg, entry: str, where: str) -> None:
    """verl's ``validate_config`` with its ``need_reference_policy`` / ``need_critic`` (the stand-in's copies,
    ``verl/utils/config.py``) where the entry runs it: ``main_ppo`` in the driver before ``ray.init``
    (verl/trainer/main_ppo.py:177-181), the one-step-off entry in its TaskRunner after the config pprint
    (verl/experimental/one_step_off_policy/main_ppo.py:45-56). A refused config raises its AssertionError /
    ValueError, the pass line otherwise."""
    if where != ("driver" if entry == "main_ppo" else "runner"):
        return
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    validate_config(cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    sys.stdout.flush()


def _features(cfg) -> dict:
    """Which memory features the composed config turns on (keys per verl/trainer/config/actor/actor.yaml / failure-classes.md)."""
    offload = any(
        bool(_sel(cfg, k, False))
        for k in (
            "actor_rollout_ref.actor.fsdp_config.param_offload",
            "actor_rollout_ref.actor.megatron.param_offload",
        )
    )
    # Megatron: "selective" recompute is the default-on gradient-checkpointing performance feature (what the
    # dapo-ops override generator emits); the recompute rung is full recompute (granularity "full" or a method).
    otc = "actor_rollout_ref.actor.megatron.override_transformer_config."
    recompute = (
        bool(_sel(cfg, "actor_rollout_ref.actor.entropy_checkpointing", False))
        or bool(_sel(cfg, "actor_rollout_ref.model.enable_activation_offload", False))
        or _sel(cfg, otc + "recompute_granularity") == "full"
        or _sel(cfg, otc + "recompute_method") is not None
    )
    return {"offload": offload, "recompute": recompute}


def _avoided(fail: dict, feats: dict, cfg=None) -> bool:
    """All ``avoid_with`` items hold: a feature name, or ``<config key><=N`` / ``<config key>>=N`` on the composed
    config (a setting change of the memory ladder, e.g. ``actor_rollout_ref.actor.ppo_max_token_len_per_gpu<=10240``)."""
    need = fail.get("avoid_with", ["offload"])
    if isinstance(need, str):
        need = [] if need in ("", "never", "none") else [x for x in need.replace(",", "+").split("+") if x]
    if not need:
        return False
    for item in need:
        for op in ("<=", ">="):
            if op in item:
                key, _, lim = item.partition(op)
                v = _sel(cfg, key.strip()) if cfg is not None else None
                if v is None or not (float(v) <= float(lim) if op == "<=" else float(v) >= float(lim)):
                    return False
                break
        else:
            if not feats.get(item, False):
                return False
    return True


def _metrics(step: int, rng: random.Random, step_time: float, world: int, one_step_off: bool, np) -> dict:
    score = min(0.95, 0.12 + 0.035 * step + rng.uniform(-0.02, 0.02))
    resp = 812.0 + 9.5 * step + rng.uniform(-20, 20)
    tokens = int((resp + 412.0) * 256)
    f = np.float64
    m = {
        "training/global_step": step,
        "training/epoch": 0,
        "actor/entropy": f(round(0.61 - 0.01 * step + rng.uniform(-0.01, 0.01), 6)),
        "actor/pg_loss": f(round(rng.uniform(-0.02, 0.02), 6)),
        "actor/pg_clipfrac": f(round(0.002 + rng.uniform(0, 0.002), 6)),
        "actor/ppo_kl": f(round(rng.uniform(-1e-4, 1e-4), 8)),
        "actor/pg_clipfrac_lower": f(0.0),
        "actor/grad_norm": f(round(0.35 + rng.uniform(-0.05, 0.05), 6)),
        "actor/lr": 1e-06,
        "perf/mfu/actor": f(round(0.21 + rng.uniform(-0.01, 0.01), 6)),
        "perf/max_memory_allocated_gb": 41.87,
        "perf/max_memory_reserved_gb": 52.34,
        "perf/cpu_memory_used_gb": 118.4,
        "critic/score/mean": round(score, 6),
        "critic/score/max": 1.0,
        "critic/score/min": 0.0,
        "critic/rewards/mean": round(score, 6),
        "critic/rewards/max": 1.0,
        "critic/rewards/min": 0.0,
        "critic/advantages/mean": round(rng.uniform(-0.01, 0.01), 6),
        "critic/advantages/max": 1.7888,
        "critic/advantages/min": -1.7888,
        "response_length/mean": round(resp, 3),
        "response_length/max": 4096.0,
        "response_length/min": 97.0,
        "response_length/clip_ratio": round(0.01 + rng.uniform(0, 0.01), 6),
        "prompt_length/mean": 412.0,
        "prompt_length/max": 1024.0,
        "prompt_length/min": 133.0,
        "prompt_length/clip_ratio": 0.0,
        "timing_s/gen": round(step_time * 0.55, 4),
        "timing_s/reward": round(step_time * 0.02, 4),
        "timing_s/old_log_prob": round(step_time * 0.1, 4),
        "timing_s/adv": round(step_time * 0.01, 4),
        "timing_s/update_actor": round(step_time * 0.3, 4),
        "timing_s/step": round(step_time, 4),
        "timing_per_token_ms/gen": round(step_time * 550 / max(tokens, 1), 6),
        "perf/total_num_tokens": tokens,
        "perf/time_per_step": round(step_time, 4),
        "perf/throughput": round(tokens / max(step_time, 1e-6) / max(world, 1), 3),
    }
    if one_step_off:
        m["timing_s/sync_rollout_weights"] = round(step_time * 0.02, 4)
    return m


def _diverged(metric: str, np) -> dict:
    """The metrics of a diverged step as verl 0.9.1 logs them: ``grad_norm`` -> NaN loss, grad_norm, entropy and KL
    (the update skipped: verl/workers/engine/fsdp/transformer_impl.py:822-824; values are ``.item()`` floats reduced
    per key, verl/workers/engine_workers.py:195-216); ``lr`` -> ``actor/lr`` 1e+30 (an lr scheduler / config gone
    wrong, the H200's held-back case of issue 42)."""
    if metric == "lr":
        return {"actor/lr": 1e30}
    nan = np.float64("nan")
    return {"actor/grad_norm": nan, "actor/pg_loss": nan, "actor/entropy": nan, "actor/ppo_kl": nan}


def _scheduled_lr(cfg, step: int) -> float:
    """``actor/lr`` after step ``step``: the scheduler's lr (verl/workers/engine_workers.py:212-216), constant with a
    linear warm-up of ``optim.lr_warmup_steps`` (<= 0: ``lr_warmup_steps_ratio`` x total steps;
    verl/workers/engine/fsdp/transformer_impl.py:509-522, verl/utils/torch_functional.py:785-788): lr 1e30 with 10
    warm-up steps prints 1e+29 at step 1 (the H200, tests/fixtures/real-verl/tool-runs/l-diverge)."""
    lr = float(_sel(cfg, "actor_rollout_ref.actor.optim.lr", 1e-6) or 1e-6)
    warm = int(_sel(cfg, "actor_rollout_ref.actor.optim.lr_warmup_steps", -1) or -1)
    if warm <= 0:
        ratio = float(_sel(cfg, "actor_rollout_ref.actor.optim.lr_warmup_steps_ratio", 0.0) or 0.0)
        warm = int(ratio * int(_sel(cfg, "trainer.total_training_steps", 0) or 0))
    return lr * (min(step, warm) / warm if warm > 0 else 1.0)


def concat_dict_to_str(dict_: dict, step: int) -> str:
    """verl's console format (verl/utils/logger/aggregate_logger.py): ``step:N - k:pformat(v) - ...``."""
    import numbers

    output = [f"step:{step}"]
    for k, v in dict_.items():
        if isinstance(v, numbers.Number):
            output.append(f"{k}:{pprint.pformat(v)}")
    return " - ".join(output)


class StandinTrainer:
    """One run of the stand-in. ``entry`` is "main_ppo" or "one_step_off"."""

    def __init__(self, config: DictConfig, entry: str):
        self.cfg = config
        self.entry = entry
        # V1 (main_ppo) separate_async is 0.9.1's one-step-off: trainer and rollout pools apart
        self.v1_mode = str(_sel(config, "trainer.v1.trainer_mode", "sync")) if entry == "main_ppo" else None
        self.separate_async = self.v1_mode == "separate_async"
        self.one_step_off = entry == "one_step_off" or self.separate_async
        self.scn = cues.scenario()
        self.dev = cues.devices()
        self.fail = self.scn.get("failure") or None
        if self.fires("oom-host"):
            hostmem.require_limit()  # a real kernel OOM kill needs a container memory limit: refused without one
        self.accel = self.scn.get("accelerator") or self.dev.get("accelerator", "npu")
        # verl 0.9.1's main_ppo runs TaskRunnerV1 in every V1 mode, separate_async included (verl/trainer/main_ppo.py:184);
        # only the legacy one-step-off entry runs OneStepTaskRunner (experimental/one_step_off_policy/main_ppo.py:124)
        runner = "OneStepTaskRunner" if entry == "one_step_off" else texts.V1_RUNNER
        self.v1 = entry == "main_ppo"  # the V1 trainer (trainer_base.py, separate_async too): its log lines
        # the actor worker group's role: Role.Actor without the hybrid engine (trainer_base.py:801-804), as the
        # WorkerDict's method prefix (``actor_update_actor``)
        self.role = "actor_rollout" if bool(_sel(config, "actor_rollout_ref.hybrid_engine", True)) else "actor"
        # verl's checkpoint rotation list: process memory, empty at every start (checkpoint_manager.py:59)
        self.saved_actor_paths: list[str] = []
        self.out = Out(runner, bool(self.scn.get("ray_prefix", True)), ansi=self.v1)
        self.rng = random.Random(int(self.scn.get("seed", 0)))
        self.step_time = float(self.scn.get("step_time", 0.2))
        self.hostname = socket.gethostname()
        try:
            self.ip = socket.gethostbyname(self.hostname)
        except OSError:
            self.ip = "127.0.0.1"
        if self.ip.startswith("127."):
            self.ip = self._primary_ip()
        self.pids = {"runner": self.out.pid, "worker": self.out.worker_pid}
        self.ray = None
        self.tracker = None
        self.t0 = time.time()
        self.phase = "validate"  # where verl's driver is (driver.PHASES): its report's frames on a failure

    @staticmethod
    def _primary_ip() -> str:
        try:
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.connect(("198.51.100.1", 9))
            ip = s.getsockname()[0]
            s.close()
            return ip
        except OSError:
            return "127.0.0.1"

    # ------------------------------------------------------------------ helpers
    def fires(self, kind: str) -> bool:
        return bool(self.fail and self.fail.get("kind") == kind)

    def fail_step(self) -> int:
        return int(self.fail.get("step", 1)) if self.fail else 0

    def raise_later(self, exc: BaseException, hang_key: str = "hang_s", default: float = 0.0):
        """Raise ``exc`` now; the driver stays alive ``hang_key`` seconds AFTER its report (:func:`driver.fail`), as
        the real update OOM did (tests/fixtures/real-verl/tool-runs/d-update-oom/train.log:1224-1226: the report,
        then no exit until the supervisor stopped it, exit 143)."""
        exc.standin_hang_s = float(self.fail.get(hang_key, default)) if self.fail else default
        raise exc

    # ------------------------------------------------------------------ phases
    def run(self):
        cfg = self.cfg
        o = self.out
        OmegaConf.resolve(cfg)
        _validate(cfg, self.entry, "driver")
        nnodes = int(_sel(cfg, "trainer.nnodes", 1))
        self.phase = "ray_init"
        if nnodes > 1 or os.environ.get("RAY_ADDRESS"):  # verl's ray.init() joins $RAY_ADDRESS's cluster
            self._ray_connect()
        else:
            print(
                "ray init kwargs: {'num_cpus': None, 'runtime_env': {'env_vars': {'TOKENIZERS_PARALLELISM': "
                "'true', 'NCCL_DEBUG': 'WARN', 'VLLM_LOGGING_LEVEL': 'WARN'}}}",
                flush=True,
            )
        if self.fires("network"):
            for ln in texts.gcs_timeout_lines(self.fail.get("head", "198.51.100.11")):
                print(ln, flush=True)
            while True:  # the real GCS loop never ends on its own (every ~5 s; the cue's every_s for a faster test)
                time.sleep(float(self.fail.get("every_s", 5)))
                print(texts.gcs_timeout_lines(self.fail.get("head", "198.51.100.11"))[0], flush=True)
        self.phase = "runner"  # in the TaskRunner actor: its failures come out of ray.get (driver.py)
        if (
            not self.v1
        ):  # the legacy OneStepTaskRunner's first line (one_step_off_policy/main_ppo.py:43); V1 prints none
            o.line(f"TaskRunner hostname: {self.hostname}, PID: {o.pid}")
        o.pformat(OmegaConf.to_container(cfg, resolve=True))
        _validate(cfg, self.entry, "runner")
        if self.v1_mode is not None:
            import transfer_queue  # noqa: F401  (the real V1 TaskRunner does: verl/trainer/main_ppo.py:137)

            self._check_v1_mode()
        elif self.one_step_off:
            # one-step-off ray_trainer.py:88 (0.9.1): bare assert
            assert not bool(_sel(cfg, "actor_rollout_ref.hybrid_engine", True))
        self._check_inputs()
        startup = float(self.scn.get("startup_time", 0.0))
        total = _sel(cfg, "trainer.total_training_steps")
        self.steps_per_epoch = self._steps_per_epoch()
        if total is None:
            total = self.steps_per_epoch * int(_sel(cfg, "trainer.total_epochs", 30))
            o.line(f"Size of train dataloader: {self.steps_per_epoch}, Size of val dataloader: 1")
        total = int(total)
        if self.v1:
            o.info(f"Total training steps: {total}")
        else:
            o.line(f"Total training steps: {total}")
        self._check_resources(nnodes)
        self._rollout_config()
        if self.ray is not None:
            self._workers_import()
        self._hold_devices()
        if startup > 0:
            time.sleep(startup)
        self._check_kv_cache()
        self._init_tracking()
        start = self._load_checkpoint()
        self._fit(start, total)

    def _steps_per_epoch(self) -> int:
        """verl 0.9.1's ``steps_per_epoch = len(self.train_dataset) // data.train_batch_size``
        (verl/trainer/ppo/v1/trainer_base.py:765; the train dataloader drops the last partial batch, :747): the rows
        of the local train parquet files (pyarrow's footer count; ``data.filter_overlong_prompts`` is not applied),
        else :data:`DATALOADER_LEN` (remote or unreadable files). 0 rows per batch fails as verl's first
        ``global_steps // steps_per_epoch`` does (:450)."""
        files = _sel(self.cfg, "data.train_files")
        rows = 0
        try:
            import pyarrow.parquet as pq

            for f in [files] if isinstance(files, str) else list(files or []):
                rows += pq.ParquetFile(str(f)).metadata.num_rows
        except Exception:  # noqa: BLE001  (remote, json, unreadable: the stand-in's fixed length)
            return DATALOADER_LEN
        spe = rows // max(1, int(_sel(self.cfg, "data.train_batch_size", 1) or 1))
        if spe == 0:
            raise ZeroDivisionError("integer division or modulo by zero")
        return spe

    def _hold_devices(self):
        """Open this node's stand-in device files (``/tmp/dapo-standin/devices/<npu|gpu><i>``, one per device of
        ``trainer.n_gpus_per_node``) and keep them open for the process's life, as a real trainer holds
        ``/dev/davinci<i>`` / ``/dev/nvidia<i>``: a process left over from a dead attempt shows up as a holder in
        ``/proc/<pid>/fd`` (the chaos soak's device invariant, bench/soak.py). The stall cue's worker inherits them."""
        d = DEVICE_DIR
        os.makedirs(d, exist_ok=True)
        n = int(_sel(self.cfg, "trainer.n_gpus_per_node", self.dev.get("count", 8)) or 1)
        self.dev_fds = [os.open(os.path.join(d, f"{self.accel}{i}"), os.O_RDWR | os.O_CREAT, 0o600) for i in range(n)]

    def _check_v1_mode(self):
        """What verl 0.9.1's V1 trainer checks before it builds workers (same messages)."""
        cfg = self.cfg
        mode = self.v1_mode
        # verl/trainer/ppo/v1/trainer_base.py:2017-2023 get_trainer_cls: registered modes only, sorted
        registered = ("colocate_async", "separate_async", "sync")
        if mode not in registered:
            raise ValueError(f"Unknown trainer '{mode}'. Available trainers: {', '.join(registered)}.")
        sampler = "trainer.v1.sampler."
        thr = _sel(cfg, sampler + "max_off_policy_threshold")
        if thr is not None and not (isinstance(thr, int) and thr > 0):  # replay_buffer.py:165-177
            self._replay_buffer_assert(
                166,
                "assert isinstance(self.max_off_policy_threshold, int) and self.max_off_policy_threshold > 0, (",
                f"Invalid max off policy threshold: {thr}, must be an integer greater than 0, or null to disable "
                "off-policy version control",
            )
        strat = _sel(cfg, sampler + "max_off_policy_strategy", "drop")
        if strat not in ["drop", "wait"]:
            self._replay_buffer_assert(
                175,
                'assert self.max_off_policy_strategy in ["drop", "wait"], (',
                f"Invalid max off policy strategy: {strat}, must be one of ['drop', 'wait']",
            )
        if bool(_sel(cfg, "algorithm.filter_groups.enable", False)) and not _sel(cfg, "algorithm.filter_groups.metric"):
            raise ValueError("algorithm.filter_groups.metric must be set when group filtering is enabled")
        if not self.separate_async:
            return
        # trainer_separate_async.py:56-70
        tbs = int(_sel(cfg, "data.train_batch_size"))
        mini = int(_sel(cfg, "actor_rollout_ref.actor.ppo_mini_batch_size"))
        pss = int(_sel(cfg, "trainer.v1.separate_async.parameter_sync_step"))
        assert tbs == pss * mini, (
            f"train_batch_size must equal parameter_sync_step * ppo_mini_batch_size in separate async "
            f"training, but got train_batch_size={tbs}, parameter_sync_step={pss}, ppo_mini_batch_size={mini}"
        )
        assert int(_sel(cfg, "actor_rollout_ref.rollout.nnodes", 0)) > 0, (
            "nnodes must be > 0 in separate async training"
        )
        assert int(_sel(cfg, "actor_rollout_ref.rollout.n_gpus_per_node", 0)) > 0, (
            "n_gpus_per_node must be > 0 in separate async training"
        )
        assert _sel(cfg, "actor_rollout_ref.rollout.checkpoint_engine.backend", "naive") != "naive", (
            "please use nccl/nixl/mooncake, etc. backend for separate async training"
        )
        # checkpoint_engine/base.py:84-99 (CheckpointEngineRegistry.get, reached at trainer_separate_async.py:165-170):
        # the names verl 0.9.1 registers (hccl_checkpoint_engine.py:103 registers Ascend's engine as "nccl")
        backend = _sel(cfg, "actor_rollout_ref.rollout.checkpoint_engine.backend", "naive")
        registered = ["delta_sharded", "kimi_ckpt_engine", "mooncake", "naive", "nccl", "nixl"]
        if backend not in registered:
            raise ValueError(f"Checkpoint engine {backend} not registered, registered backends: {registered}")

    def _replay_buffer_assert(self, line: int, source: str, message: str) -> None:
        """Raise the AssertionError of verl 0.9.1's replay buffer (verl/trainer/ppo/v1/replay_buffer.py ``__init__``
        at ``line``) as the TaskRunner's RayTaskError carries it: over the V1 trainer constructor's frames
        (main_ppo.py:152 ``trainer_cls(config=config)`` -> trainer_base.py:131 ``__init__`` -> :185
        ``_build_replay_buffer``)."""
        header = texts.task_header(self.out.runner, self.pids["runner"], self.ip, self.rng)
        v = texts.VERL_SITE
        msg = (
            f'{header}\n  File "{v}/trainer/main_ppo.py", line 152, in run\n    self.trainer = trainer_cls(config=config)\n'
            f'  File "{v}/trainer/ppo/v1/trainer_base.py", line 131, in __init__\n'
            "    self.replay_buffer = self._build_replay_buffer()\n"
            f'  File "{v}/trainer/ppo/v1/trainer_base.py", line 185, in _build_replay_buffer\n'
            "    return sampler_cls(**replay_buffer_kwargs)\n"
            f'  File "{v}/trainer/ppo/v1/replay_buffer.py", line {line}, in __init__\n    {source}\n'
            f"AssertionError: {message}"
        )
        raise texts.fake_exc("RayTaskError", "AssertionError", msg)

    def _ray_connect(self):
        import ray

        self.ray = ray
        ray_init = {"address": "auto", "logging_level": "ERROR", "log_to_driver": False}
        print(f"ray init kwargs: {ray_init}", flush=True)
        ray.init(**ray_init)

    def _gate(self, step: int) -> None:
        """Scenario ``gate`` (``{"after_step": N, "file": path, "timeout_s": 120}``): after step N's line, wait
        until ``file`` exists (a test opens it once it has acted on step N: an event instead of a race against
        short steps), at most ``timeout_s``, then go on."""
        gate = self.scn.get("gate") or {}
        if not gate or step != int(gate.get("after_step", -1)):
            return
        end = time.time() + float(gate.get("timeout_s", 120))
        while not os.path.exists(str(gate["file"])) and time.time() < end:
            time.sleep(0.05)

    def _check_inputs(self):
        """What the real trainer's constructor does before ``Total training steps`` (inside ``TaskRunnerV1.run``,
        so the error comes wrapped in a RayTaskError): the tokenizer from ``actor_rollout_ref.model.path``
        (transformers on a missing absolute path: ``HFValidationError: Repo id must be in the form ...``), then
        the train and val datasets (``verl/utils/dataset/rl_dataset.py:169-178``: ``datasets.load_dataset`` on a
        missing file raises ``FileNotFoundError: Unable to find '<path>'``; another suffix ``ValueError:
        Unsupported file format``). Remote paths (``hdfs://``, ...) are not checked: the real code copies them."""
        cfg = self.cfg
        header = texts.task_header(self.out.runner, self.pids["runner"], self.ip, self.rng)
        model = str(_sel(cfg, "actor_rollout_ref.model.path", "") or "")
        if model.startswith("/") and not os.path.isdir(model):
            msg = (
                f'{header}\n  File "{texts.VERL_SITE}/utils/tokenizer.py", line 58, in hf_tokenizer\n'
                f"huggingface_hub.errors.HFValidationError: Repo id must be in the form 'repo_name' or "
                f"'namespace/repo_name': '{model}'. Use `repo_type` argument if needed."
            )
            raise texts.fake_exc("RayTaskError", "HFValidationError", msg)
        for key in ("data.train_files", "data.val_files"):
            files = _sel(cfg, key)
            for f in [files] if isinstance(files, str) else list(files or []):
                f = str(f)
                if "://" in f:
                    continue
                if not f.endswith((".parquet", ".json", ".jsonl")):
                    line = f"ValueError: Unsupported file format: {f}"
                    raise texts.fake_exc("RayTaskError", "ValueError", f"{header}\n{line}")
                if not os.path.exists(f):
                    msg = (
                        f'{header}\n  File "{texts.VERL_SITE}/utils/dataset/rl_dataset.py", line 174, in '
                        f'_read_files_and_tokenize\n    dataframe = datasets.load_dataset("parquet", '
                        f"data_files=parquet_file)[\"train\"]\nFileNotFoundError: Unable to find '{f}'"
                    )
                    raise texts.fake_exc("RayTaskError", "FileNotFoundError", msg)

    def _check_resources(self, nnodes: int):
        cfg = self.cfg
        desired = int(_sel(cfg, "trainer.nnodes", 1)) * int(_sel(cfg, "trainer.n_gpus_per_node", 8))
        if self.separate_async:  # the standalone rollout pool (trainer_separate_async.py:399)
            desired += int(_sel(cfg, "actor_rollout_ref.rollout.nnodes", 0)) * int(
                _sel(cfg, "actor_rollout_ref.rollout.n_gpus_per_node", 8)
            )
        elif self.one_step_off and not self.separate_async:
            desired += int(_sel(cfg, "rollout.nnodes", 1)) * int(_sel(cfg, "rollout.n_gpus_per_node", 8))
        if self.ray is not None:
            res = self.ray.cluster_resources()
            key = "GPU" if res.get("GPU") else "NPU"
            available = float(res.get(key, 0.0))
            nodes = [n for n in self.ray.nodes() if n.get("Alive")]
            self.out.line(f"Ray cluster: {len(nodes)} node(s), resources {key}={available}")
        else:
            available = float(int(self.dev.get("count", 8)) * nnodes)
        if available < desired:
            # verl/single_controller/ray/base.py:216, :240 (0.9.1), raised in the V1 trainer's init -> _setup
            # (trainer_base.py:223, :231) via RayTaskError(ValueError); the legacy entry's classic init_workers
            chain = (
                texts.frames(
                    texts.RUN_INIT,
                    texts.INIT_SETUP,
                    (texts.TRAINER_BASE, 231, "_setup", "self.resource_pool_manager.create_resource_pool()"),
                    (texts.WG_BASE, 216, "create_resource_pool", "self._check_resource_available()"),
                )
                if self.v1
                else [
                    f'  File "{texts.VERL_SITE}/trainer/ppo/ray_trainer.py", line 681, in init_workers',
                    "    self.resource_pool_manager.create_resource_pool()",
                ]
            )
            msg = "\n".join(
                [
                    texts.task_header(self.out.runner, self.pids["runner"], self.ip, self.rng),
                    *chain,
                    f'  File "{texts.WG_BASE}", line 240, in _check_resource_available',
                    "    raise ValueError(",
                    f"ValueError: Total available GPUs {available} is less than total desired GPUs {desired}",
                ]
            )
            raise texts.fake_exc("RayTaskError", "ValueError", msg)

    def _check_kv_cache(self):
        if not self.fires("oom-kv-cache"):
            return
        f = self.fail
        util = float(_sel(self.cfg, "actor_rollout_ref.rollout.gpu_memory_utilization", 0.5))
        variant = f.get("variant", "free-memory")
        if variant in ("no-cache-blocks", "max-seq-len"):
            ok = util >= float(f.get("min_gpu_memory_utilization", 0.8))
        else:
            ok = util <= float(f.get("max_gpu_memory_utilization", 0.6))
        if ok or not cues.fire_allowed(self.scn):
            return
        worker, exc = texts.kv_cache(
            variant, util, self.accel, self.out.runner, self.pids, self.ip, self.rng, self.separate_async
        )
        for actor, lines in worker:
            for ln in lines:
                self.out.line(ln, actor)
        raise exc

    def _loggers(self) -> list[str]:
        lg = _sel(self.cfg, "trainer.logger", ["console"])
        if isinstance(lg, str):
            lg = [lg]
        return [str(x) for x in lg]

    def _init_tracking(self):
        loggers = self._loggers()
        for name in loggers:
            # verl/utils/tracking.py:49-71 (0.9.1): checked only when Tracking() is built inside fit()
            assert name in KNOWN_LOGGERS, f"{name} is not supported"
        if ("wandb" in loggers or "tracking" in loggers) and not os.environ.get("WANDB_API_KEY"):
            self.out.line("wandb: ERROR " + texts.WANDB_NO_KEY.split(": ", 1)[1])
            msg = "\n".join(
                [
                    texts.task_header(self.out.runner, self.pids["runner"], self.ip, self.rng),
                    *texts.tracking_chain(self.out.runner),
                    f'  File "{texts.VERL_SITE}/utils/tracking.py", line 85, in __init__',  # verl 0.9.1
                    "    wandb.init(project=project_name, name=experiment_name, entity=entity, config=config, "
                    "settings=settings)",
                    texts.WANDB_NO_KEY,
                ]
            )
            raise texts.fake_exc("RayTaskError", "UsageError", msg)
        if "file" in loggers:
            path = os.environ.get("VERL_FILE_LOGGER_PATH") or os.path.join(
                os.environ.get("VERL_FILE_LOGGER_ROOT", "."),
                str(_sel(self.cfg, "trainer.project_name")),
                f"{_sel(self.cfg, 'trainer.experiment_name')}.jsonl",
            )
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            self.out.line(f"Creating file logger at {path}")
            self.file_logger = open(path, "a")
        else:
            self.file_logger = None
        if "swanlab" in loggers:
            self._init_swanlab()

    def _init_swanlab(self):
        o = self.out
        mode = os.environ.get("SWANLAB_MODE", "cloud")
        if self.fires("swanlab-auth") and self.fail.get("variant", "fatal") != "401" and cues.fire_allowed(self.scn):
            pre, exc = texts.swanlab_auth(self.fail.get("variant", "fatal"), o.runner, self.pids, self.ip, self.rng)
            for ln in pre:
                o.line(ln)
            raise exc
        if mode == "cloud" and not os.environ.get("SWANLAB_API_KEY"):
            # swanlab 0.10 without a key and without a TTY (docker exec without -t); not attempted for real
            pre, exc = texts.swanlab_auth("fatal", o.runner, self.pids, self.ip, self.rng)
            raise exc
        import swanlab

        if os.environ.get("SWANLAB_API_KEY"):
            swanlab.login(os.environ["SWANLAB_API_KEY"])
        project = str(_sel(self.cfg, "trainer.project_name"))
        name = str(_sel(self.cfg, "trainer.experiment_name"))
        run = swanlab.init(
            project=project,
            experiment_name=name,
            config={"FRAMEWORK": "verl", **OmegaConf.to_container(self.cfg, resolve=True)},
            logdir=os.environ.get("SWANLAB_LOG_DIR", "swanlog"),
            mode=mode,
        )
        self.tracker = swanlab
        if mode in ("local", "offline", "disabled"):
            # stand-in addition: swanlab prints the run link only in cloud mode; the bench prints the same
            # line in the other modes so link capture is testable (sandbox/README.md)
            web = os.environ.get("SWANLAB_WEB_HOST", "https://swanlab.cn").rstrip("/")
            ws = os.environ.get("SWANLAB_WORKSPACE", "sandbox")
            rid = getattr(run, "id", None) or os.environ.get("SWANLAB_RUN_ID") or "local"
            o.line(f"swanlab: 📁 View project at {web}/@{ws}/{project}")
            o.line(f"swanlab: 🚀 View run {name} at {web}/@{ws}/{project}/runs/{rid}")

    def _ckpt_dir(self) -> str:
        d = str(_sel(self.cfg, "trainer.default_local_dir"))
        if not os.path.isabs(d):
            d = os.path.join(os.getcwd(), d)
        return d

    def _world(self) -> int:
        return int(_sel(self.cfg, "trainer.nnodes", 1)) * int(_sel(self.cfg, "trainer.n_gpus_per_node", 8))

    def _load_checkpoint(self) -> int:
        """verl ray_trainer._load_checkpoint: returns the global step to continue from (0 = scratch)."""
        o = self.out
        mode = str(_sel(self.cfg, "trainer.resume_mode", "auto"))
        if mode == "disable":
            return 0
        d = self._ckpt_dir()
        if mode == "auto":
            folder = self._find_latest_ckpt_path(d)
            if folder is None:
                if self.v1:
                    o.info("Training from scratch")
                else:
                    o.line("Training from scratch")
                return 0
            step = int(folder.split("global_step_")[-1])
        elif mode == "resume_path":
            folder = str(_sel(self.cfg, "trainer.resume_from_path"))
            assert isinstance(folder, str) and "global_step_" in folder, "resume ckpt must specify the global_steps"
            if not os.path.isabs(folder):
                folder = os.path.join(os.getcwd(), folder)
            step = int(folder.rstrip("/").split("global_step_")[-1])
        else:
            # verl 0.9.1 trainer_base.py:872-876: logger.exception (outside an except: "NoneType: None"), then
            # global_step_folder is unbound
            o.line(time.strftime("ERROR:%Y-%m-%d %H:%M:%S,000:") + f"Unknown resume mode {mode}", err=True)
            o.line("NoneType: None", err=True)
            header = texts.task_header(self.out.runner, self.pids["runner"], self.ip, self.rng)
            v = texts.VERL_SITE
            msg = (
                f'{header}\n  File "{v}/trainer/ppo/v1/trainer_base.py", line 392, in _setup\n'
                "    self._load_checkpoint()\n"
                f'  File "{v}/trainer/ppo/v1/trainer_base.py", line 876, in _load_checkpoint\n'
                '    self.global_steps = int(global_step_folder.split("global_step_")[-1])\n'
                "UnboundLocalError: cannot access local variable 'global_step_folder' where it is not associated with "
                "a value"
            )
            raise texts.fake_exc("RayTaskError", "UnboundLocalError", msg)
        if self.v1:
            o.info(f"Resuming from {folder}, setting global step to {step}")
        else:
            o.line(f"Load from checkpoint folder: {folder}")
            o.line(f"Setting global step to {step}")
            o.line(f"Resuming from {folder}")
        shard = os.path.join(folder, "actor", f"model_world_size_{self._world()}_rank_0.pt")
        if not os.path.exists(shard):
            raise FileNotFoundError(f"[Errno 2] No such file or directory: '{shard}'")
        self._load_dataloader_state(folder)
        return step

    def _load_dataloader_state(self, folder: str) -> None:
        """The dataloader's position: without ``<folder>/data.pt`` verl warns and the dataloader starts from the
        beginning (V1: ``logger.warning``, verl/trainer/ppo/v1/trainer_base.py:892-898; the one-step-off trainer:
        ``print``, verl/trainer/ppo/ray_trainer.py:1102-1117), and the resumed run goes on at the checkpoint's step."""
        path = os.path.join(folder, "data.pt")
        if os.path.exists(path):
            return
        text = f"Warning: No dataloader state found at {path}, will start from scratch"
        if self.v1:
            self.out.info(text, level="WARNING")
        else:
            self.out.line(text)

    def _find_latest_ckpt_path(self, d: str) -> str | None:
        """verl/utils/checkpoint/checkpoint_manager.py:222-252 ``find_latest_ckpt_path``, its prints included (their
        ``print("...: %s", path)`` prints a literal ``%s`` before the path): no tracker, or a tracker naming a
        ``global_step_N`` that does not exist -> None, and the V1 trainer trains from scratch
        (verl/trainer/ppo/v1/trainer_base.py:860-864) instead of failing."""
        tracker = os.path.join(d, "latest_checkpointed_iteration.txt")
        if not os.path.exists(tracker):
            self.out.line(f"Checkpoint tracker file does not exist: {tracker}")
            return None
        with open(tracker, "rb") as f:
            iteration = int(f.read().decode())
        folder = os.path.join(d, f"global_step_{iteration}")
        if not os.path.exists(folder):
            self.out.line(f"Checkpoint does not exist: %s {folder}")
            return None
        self.out.line(f"Found checkpoint: %s {folder}")
        return folder

    def _save_checkpoint(self, step: int, kill_during: bool = False):
        o = self.out
        d = self._ckpt_dir()
        folder = os.path.join(d, f"global_step_{step}")
        if self.v1:
            o.info(f"Saving checkpoint to {folder}")
        else:
            o.line(f"local_global_step_folder: {folder}")
        actor = os.path.join(folder, "actor")
        w = self._world()
        keep = _sel(self.cfg, "trainer.max_actor_ckpt_to_keep", None)
        self._ensure_checkpoint_capacity(keep)
        self._save_fault(step, folder, w)
        os.makedirs(actor, exist_ok=True)
        payload = json.dumps({"global_step": step, "world_size": w, "standin": True}).encode()
        for kind in ("model", "optim", "extra_state"):
            for r in range(w):
                with open(os.path.join(actor, f"{kind}_world_size_{w}_rank_{r}.pt"), "wb") as f:
                    f.write(payload)
            if not self.v1:  # the V1 trainer's workers print no save line at INFO
                o.line(
                    f"[Rank 0] Saved {kind} to {os.path.join(actor, f'{kind}_world_size_{w}_rank_0.pt')}", "WorkerDict"
                )
            if kill_during:
                hostmem.exhaust()  # the kernel's OOM killer ends the process mid-save
        self._register_checkpoint(actor, keep)
        with open(os.path.join(folder, "data.pt"), "wb") as f:
            f.write(payload)
        # in place, as verl writes it (verl/trainer/ppo/v1/trainer_base.py:1021-1024): a kill between the open and the
        # write leaves it empty, and every later resume_mode=auto start fails on int(b'') (checkpoint_manager.py:245)
        with open(os.path.join(d, "latest_checkpointed_iteration.txt"), "w") as f:
            f.write(str(step))

    def _remove_previous_save_local_path(self, paths: list[str]) -> None:
        """verl/utils/checkpoint/checkpoint_manager.py:156-164: rotation deletes ``global_step_N/actor`` only (its
        ``data.pt`` and ``transfer_queue/`` stay), printed by the actor worker."""
        for p in paths:
            abs_path = os.path.abspath(p)
            self.out.line(f"Checkpoint manager remove previous save local path: {abs_path}", "WorkerDict")
            if os.path.exists(abs_path):
                shutil.rmtree(abs_path, ignore_errors=True)

    def _ensure_checkpoint_capacity(self, keep) -> None:
        """checkpoint_manager.py:166-179, before a save (rank 0, fsdp_checkpoint_manager.py:296-297): with
        ``keep`` >= 2, keeps ``keep - 1`` of THIS process's earlier saves; a resumed attempt's list starts empty, so
        the saves of earlier attempts are never rotated by verl."""
        if not (keep and isinstance(keep, int) and keep > 1):
            return
        if len(self.saved_actor_paths) >= keep:
            start = len(self.saved_actor_paths) - keep + 1
            self._remove_previous_save_local_path(self.saved_actor_paths[:start])
            self.saved_actor_paths = self.saved_actor_paths[start:]

    def _register_checkpoint(self, path: str, keep) -> None:
        """checkpoint_manager.py:181-194, after the actor's save (fsdp_checkpoint_manager.py:475-476)."""
        self.saved_actor_paths.append(path)
        if not (keep and isinstance(keep, int) and keep > 0):
            return
        if len(self.saved_actor_paths) > keep:
            start = len(self.saved_actor_paths) - keep
            self._remove_previous_save_local_path(self.saved_actor_paths[:start])
            self.saved_actor_paths = self.saved_actor_paths[start:]

    def _rollout_config(self) -> None:
        """The rollout worker's ``RolloutConfig`` (verl/workers/engine_workers.py:651): its ``__post_init__`` refusal
        comes out of the Ray worker, wrapped as verl's driver prints it (:func:`texts.rollout_init_error`)."""
        from verl.utils.config import omega_conf_to_dataclass

        try:
            omega_conf_to_dataclass(self.cfg.actor_rollout_ref.rollout)
        except (AssertionError, ValueError, NotImplementedError) as e:
            raise texts.rollout_init_error(e, self.out.runner, self.pids, self.ip, self.rng) from None

    def _save_fault(self, step: int, folder: str, w: int) -> None:
        """Scenario ``save-error`` at ``step`` (a save step): the save fails in the actor workers as in verl 0.9.1
        (:func:`texts.save_error`): ``variant`` ``disk-full`` (default) leaves ``global_step_N/actor`` with rank 0's
        model shard cut short and nothing else; ``permission`` leaves no ``global_step_N`` (``os.makedirs``
        failed). Neither ``data.pt`` nor the tracker is written (both come after the workers' save,
        verl/trainer/ppo/v1/trainer_base.py:996-1024), so the tracker still names the previous save."""
        if not (self.fires("save-error") and step == self.fail_step() and cues.fire_allowed(self.scn)):
            return
        variant = str(self.fail.get("variant", "disk-full"))
        wl, exc = texts.save_error(variant, folder, w, self.out.runner, self.pids, self.ip, self.rng)
        if variant != "permission":
            actor = os.path.join(folder, "actor")
            os.makedirs(actor, exist_ok=True)
            with open(os.path.join(actor, f"model_world_size_{w}_rank_0.pt"), "wb") as f:
                f.write(b"PK\x03\x04")  # the zip writer's first bytes, then the disk was full
        for ln in wl:
            self.out.line(ln, "WorkerDict")
        raise exc

    def _crash_cues(self, kind: str | None) -> None:
        """The cues that end the run with an error at the failure step: ``crash``, ``actor-died``, ``data-error``."""
        if kind not in ("crash", "actor-died", "data-error") or not cues.fire_allowed(self.scn):
            return
        o = self.out
        if kind == "crash":
            raise texts.crash(o.runner, self.pids, self.ip, self.rng, self.separate_async)
        if kind == "actor-died":
            self._lose_worker()
        max_len = int(_sel(self.cfg, "data.max_prompt_length", 1024))
        raise texts.data_error(o.runner, self.pids, self.ip, self.rng, max_len, self.separate_async)

    def _lose_worker(self) -> None:
        """Scenario ``actor-died``: a real child process stands in for a Ray worker (``WorkerDict``) and dies by
        SIGKILL mid-step: ``variant`` ``killed`` (default: killed from outside, ``kill -9``) or ``oom`` (it takes host
        memory until the kernel's cgroup OOM killer ends it: the container's ``oom_kill`` counter grows; needs the
        oom-host cue's memory limit). The driver then ends as verl's does (:func:`texts.actor_died`): Ray's raylet
        line, ``RayTaskError(ActorDiedError)`` through Hydra, exit 1 (the driver itself survives)."""
        import signal
        import subprocess

        code = "import time\nwhile True: time.sleep(1)"
        if self.fail.get("variant") == "oom":
            hostmem.require_limit()
            code = "from verl._standin import hostmem; hostmem.exhaust()"
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")]))
        child = subprocess.Popen(
            ["ray::WorkerDict.actor_rollout_update_actor", "-c", code], executable=sys.executable, env=env
        )
        if self.fail.get("variant") != "oom":
            child.send_signal(signal.SIGKILL)
        child.wait()
        raylet, exc = texts.actor_died(child.pid, self.out.runner, self.pids, self.ip, self.rng)
        for ln in raylet:
            self.out.line(ln, "raylet")
        raise exc

    def _val_metrics(self, step: int) -> dict:
        return {"val-core/openai/gsm8k/acc/mean@1": round(min(0.9, 0.2 + 0.03 * step), 4)}

    def _log(self, metrics: dict, step: int):
        if "console" in self._loggers():
            self.out.line(concat_dict_to_str(metrics, step))
        if self.tracker is not None:
            self.tracker.log({k: float(v) for k, v in metrics.items()}, step=step)
        if self.file_logger is not None:
            self.file_logger.write(json.dumps({"step": step, "data": {k: float(v) for k, v in metrics.items()}}) + "\n")
            self.file_logger.flush()

    def _reward_fn(self):
        """The user's reward function (``reward.custom_reward_function.path`` / ``.name``), or None."""
        path = _sel(self.cfg, "reward.custom_reward_function.path")
        if not path:
            return None
        return reward.load(str(path), str(_sel(self.cfg, "reward.custom_reward_function.name") or "compute_score"))

    def _score(self, fn, step: int):
        """One step's reward calls (train_batch_size x rollout.n samples); a raising one starts verl 0.9.1's
        endless retry (:func:`reward.storm`)."""
        n = int(_sel(self.cfg, "data.train_batch_size", 8)) * int(_sel(self.cfg, "actor_rollout_ref.rollout.n", 1))
        for i in range(n):
            kw = {
                "data_source": "math_dapo",
                "solution_str": "step %d sample %d: %s" % (step, i, "x" * (i % 7)),
                "ground_truth": "42",
                "extra_info": {"index": i},
            }
            try:
                fn(**kw)
            except Exception as e:  # noqa: BLE001 - the user's error, as verl's agent loop sees it
                reward.storm(self.out, fn, kw, e, float(self.scn.get("storm_rate", 29.0)), self.ip)

    def _util(self, pct: int) -> None:
        """The devices' busy % the nvidia-smi / npu-smi stand-ins report (/tmp/dapo-standin/util.json): busy while
        it steps, 0 once it stalls (what a real device shows when every rank waits)."""
        try:
            os.makedirs("/tmp/dapo-standin", exist_ok=True)
            with open("/tmp/dapo-standin/util.json.tmp", "w") as f:
                f.write(json.dumps({"util": int(pct)}))
            os.replace("/tmp/dapo-standin/util.json.tmp", "/tmp/dapo-standin/util.json")
        except OSError:
            pass

    def _stall(self):
        """Hang with the processes alive, each stand-in Ray worker really parked in the Python frame a real hang
        shows, so ``py-spy dump`` reads it (their process titles are Ray's ``ray::<Actor>.<method>``):
        ``failure.where`` = ``collective`` (default: ``failure.ranks`` actor ranks in ``all_reduce`` of a module at
        ``torch/distributed/distributed_c10d.py``, ``failure.missing`` of them parked in ``generate_sequences``
        instead: ranks missing from the collective) or ``user`` (``ranks`` reward workers in the user's
        ``compute_score``). The driver waits on them without output, as ``ray.get`` on workers that never answer."""
        import subprocess

        where = str(self.fail.get("where", "collective"))
        ranks = int(self.fail.get("ranks", 2))
        missing = int(self.fail.get("missing", 0))
        root = "/tmp/dapo-standin/stall"
        os.makedirs(os.path.join(root, "torch", "distributed"), exist_ok=True)
        files = {
            "torch/__init__.py": "",
            "torch/distributed/__init__.py": "",
            "torch/distributed/distributed_c10d.py": "import time\n\n\ndef all_reduce(tensor, group=None):\n"
            "    while True:  # the NCCL/HCCL kernel never completes\n        time.sleep(1)\n",
            "rollout_worker.py": "import time\n\n\ndef generate_sequences(prompts):\n    while True:\n"
            "        time.sleep(1)\n",
            "my_reward.py": "import time\n\n\ndef compute_score(data_source, solution_str, ground_truth, "
            "extra_info=None):\n    while True:  # a reward call that never returns\n        time.sleep(1)\n",
        }
        for name, text in files.items():
            with open(os.path.join(root, name), "w") as f:
                f.write(text)
        if where == "user":
            plan = [("ray::RewardLoopWorker.compute_score", "import my_reward; my_reward.compute_score('', '', '')")]
            plan *= ranks
        else:
            coll = (
                "ray::WorkerDict.actor_rollout_update_actor",
                "from torch.distributed import distributed_c10d as d; d.all_reduce(None)",
            )
            gen = (
                "ray::WorkerDict.actor_rollout_update_actor",
                "import rollout_worker; rollout_worker.generate_sequences(None)",
            )
            plan = [coll] * max(0, ranks - missing) + [gen] * missing
        env = dict(os.environ, PYTHONPATH=root)
        for title, code in plan:
            child = subprocess.Popen(
                [title, "-c", code], executable=sys.executable, env=env, pass_fds=tuple(getattr(self, "dev_fds", ()))
            )
            self.out.line(f"stand-in Ray worker pid={child.pid} started; waiting for it (stall cue)", None)
        self._util(0)
        while True:  # ray.get() on workers that never answer
            time.sleep(float(self.fail.get("hang_s", 10**9)))

    def _filter_loop(self):
        """DAPO's filter_groups after divergence: every group scores the same, so every group is dropped and
        regenerated; the V1 ReplayBuffer ignores ``max_num_gen_batches`` (verl/trainer/ppo/v1/trainer_base.py:205-211),
        so no step line ever comes while vLLM's engine keeps logging (vllm/v1/metrics/loggers.py ``log``)."""
        while True:
            self.out.line(
                "INFO %s [loggers.py:123] Engine 000: Avg prompt throughput: 812.4 tokens/s, Avg generation "
                "throughput: 3120.7 tokens/s, Running: 64 reqs, Waiting: 0 reqs" % time.strftime("%m-%d %H:%M:%S"),
                "vLLMHttpServer",
            )
            time.sleep(float(self.fail.get("loop_s", 1.0)))

    def _workers_import(self):
        """verl's workers (and its TaskRunner, verl/trainer/main_ppo.py:92) are Ray actors on every node of the
        cluster, each importing verl, hence torch (verl/__init__.py:32), which auto-loads torch_npu on an Ascend image:
        a Ray task per alive node does the same import from this workdir (the verl checkout every node has) in a
        process of that node's raylet, with the raylet's environment, not the driver's. Only on an image with torch
        (the Ascend-like profile, sandbox/ascend_image/): the default image has none to import. Each task records the
        ``HCCL_*`` variables its process inherited in its container's ``/tmp/dapo-standin/hccl-env.json`` (HCCL reads
        its settings in each rank's own process). A failed import raises out of ``ray.get`` as Ray's
        ``RayTaskError`` with the worker's traceback (torch's RuntimeError and torch_npu's ImportError), as verl
        does when its workers cannot start."""
        import importlib.util

        if importlib.util.find_spec("torch") is None:
            return
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        ray = self.ray

        def import_verl(workdir):
            import json
            import os
            import sys

            sys.path.insert(0, workdir)
            import verl  # noqa: F401  (-> torch -> torch_npu, as verl's workers import it)

            os.makedirs("/tmp/dapo-standin", exist_ok=True)
            with open("/tmp/dapo-standin/hccl-env.json", "w") as f:
                json.dump({k: v for k, v in os.environ.items() if k.startswith("HCCL_")}, f)
            return os.getpid()

        nodes = [n["NodeID"] for n in ray.nodes() if n.get("Alive")]
        task = ray.remote(import_verl)
        ray.get(
            [
                task.options(num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(n, soft=False)).remote(
                    os.getcwd()
                )
                for n in nodes
            ]
        )

    def _worker_error(self):
        """Scenario ``failure.worker_error``: before the head fails, a rank on another node of the Ray cluster (a
        Ray worker host) fails first. A Ray task pinned to that node writes torch_npu's PTA error line and a
        traceback to its stderr (its Ray worker log, ``worker-*.err``) and CANN plog lines under its
        ``~/ascend/log/debug/plog/`` (the HCCL init line naming the rank, then an ``[ERROR]`` line: the shapes of
        tests/test_plog.py's public samples), rank ``failure.worker_rank`` (default 9); then a task on the head's
        node prints the collective timeout its rank 0 sees later (``[Rank 0] Watchdog caught ...``). The task
        functions are nested, so Ray ships them by value (the worker's Python need not import the stand-in)."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        ray = self.ray
        rank = int(self.fail.get("worker_rank", 9))

        def rank_fails(rank):
            import os
            import sys
            import time

            t = time.time()
            pid = os.getpid()
            stamp = time.strftime("%Y-%m-%d-%H:%M:%S", time.localtime(t)) + ".%03d.%03d" % (
                int(t * 1000) % 1000,
                int(t * 1e6) % 1000,
            )
            d = os.path.expanduser("~/ascend/log/debug/plog")
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "plog-%d_%s.log" % (pid, time.strftime("%Y%m%d%H%M%S"))), "a") as f:
                f.write(
                    "[INFO] HCCL(%d,python):%s [hccl_comm.cc:80] [%d][HcclComm][Init] rankSize[16], userRank[%d]\n"
                    % (pid, stamp, pid, rank)
                )
                f.write(
                    "[ERROR] HCCL(%d,python):%s [hccl_socket.cc:106] [%d][HcclSocket][Listen] socket type[0], "
                    "listen on ip[192.0.2.195] and specific port[16666] fail. Please check the port status and "
                    "whether the port is being used by other process.\n" % (pid, stamp, pid)
                )
            sys.stderr.write(
                "[ERROR] %s (PID:%d, Device:1, RankID:%d) ERR02200 DIST call hccl api failed.\n"
                "Traceback (most recent call last):\n"
                '  File "/usr/local/lib/python3.11/site-packages/torch_npu/distributed/distributed_c10d.py", '
                "line 88, in init_process_group\n"
                "RuntimeError: [ERROR] %s (PID:%d, Device:1, RankID:%d) ERR02200 DIST call hccl api failed.\n"
                % (stamp[:19], pid, rank, stamp[:19], pid, rank)
            )
            sys.stderr.flush()
            return pid

        def rank0_waits():
            import sys

            sys.stderr.write(
                "[rank0]:[E1204 14:46:40.1 ProcessGroupHCCL.cpp:543] [Rank 0] Watchdog caught collective "
                "operation timeout: WorkHCCL(SeqNum=12, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for "
                "1800011 milliseconds before timing out.\n"
            )
            sys.stderr.flush()
            return 0

        me = ray.get_runtime_context().get_node_id()
        others = [n["NodeID"] for n in ray.nodes() if n.get("Alive") and n["NodeID"] != me]
        for fn, node, args in ((rank_fails, others[0], (rank,)), (rank0_waits, me, ())):
            strategy = NodeAffinitySchedulingStrategy(node, soft=False)
            ray.get(ray.remote(fn).options(num_cpus=0, scheduling_strategy=strategy).remote(*args))  # in this order

    def _fit(self, start: int, total: int):
        import numpy as np

        o = self.out
        cfg = self.cfg
        feats = _features(cfg)
        save_freq = int(_sel(cfg, "trainer.save_freq", -1))
        test_freq = int(_sel(cfg, "trainer.test_freq", -1))
        if bool(_sel(cfg, "trainer.val_before_train", True)):
            val = self._val_metrics(start)
            o.pformat(f"Initial validation metrics: {val}")
            self._log(val, start)
        bar = Progress(total=total, initial=start, desc="Training Progress", prefix=o.pre(o.runner), ray_lines=self.v1)
        fail = self.fail
        kind = fail.get("kind") if fail else None
        fstep = self.fail_step()
        last_val = {}
        score_fn = self._reward_fn()
        bad = False  # diverge: the metrics went bad at fstep and stay bad (a NaN model does not heal)
        epochs = int(_sel(cfg, "trainer.total_epochs", 30))
        ran_out = False
        for step in range(start + 1, total + 1):
            # verl's V1 loop: ``while current_epoch < trainer.total_epochs and global_steps <= total_training_steps``
            # with ``current_epoch = (global_steps - 1) // steps_per_epoch`` (trainer_base.py:467, :522): the data
            # runs out at steps_per_epoch x total_epochs, whatever total_training_steps says
            if (step - 1) // self.steps_per_epoch >= epochs:
                ran_out = True
                break
            t = time.time()
            self._util(90)
            at_fail = fail is not None and step == fstep
            if at_fail and kind == "diverge" and cues.fire_allowed(self.scn):
                bad = True
            if bad and fail.get("metric", "grad_norm") == "grad_norm":
                # verl/workers/engine/fsdp/transformer_impl.py:822-824: every rank prints it and skips the update
                for _ in range(2):
                    o.line("WARN: grad_norm is not finite: nan", "WorkerDict")
            if at_fail and kind == "hang" and cues.fire_allowed(self.scn):
                time.sleep(float(fail.get("hang_s", 10**9)))
            if at_fail and kind == "stall" and cues.fire_allowed(self.scn):
                self._stall()
            time.sleep(self.step_time)
            if score_fn is not None:
                self._score(score_fn, step)
            if at_fail and kind == "oom-device" and not _avoided(fail, feats, cfg) and cues.fire_allowed(self.scn):
                phase = fail.get("phase", "update_actor")
                wl, exc = texts.device_oom(
                    self.accel, phase, o.runner, self.pids, self.ip, self.rng, self.role, self.separate_async
                )
                actor = "vLLMHttpServer" if phase == "update_weights" else "WorkerDict"
                for ln in wl:
                    o.line(ln, actor)
                self.raise_later(exc, "hang_s", 3.0)
            if at_fail and kind == "oom-host" and not fail.get("during_save") and cues.fire_allowed(self.scn):
                hostmem.exhaust()  # host RAM runs out: the kernel's OOM killer ends the process
            if at_fail and kind == "oom-ray" and cues.fire_allowed(self.scn):
                raylet, exc = texts.ray_oom(o.runner, self.pids, self.ip, self.rng, self.separate_async)
                for ln in raylet:
                    o.line(ln, "raylet")
                raise exc
            if at_fail and kind == "hccl-timeout" and cues.fire_allowed(self.scn):
                time.sleep(float(fail.get("hang_s", 2.0)))
                wl, exc = texts.collective_timeout(self.accel, o.runner, self.pids, self.ip, self.rng)
                for ln in wl:
                    o.line(ln, "WorkerDict")
                raise exc
            if at_fail and fail.get("worker_error") and self.ray is not None:
                self._worker_error()
            if at_fail:
                self._crash_cues(kind)
            is_last = step == total
            metrics = {}
            if test_freq > 0 and (is_last or step % test_freq == 0):
                last_val = self._val_metrics(step)
                metrics.update(last_val)
            if save_freq > 0 and (is_last or step % save_freq == 0):
                ts = time.time()
                kill = at_fail and kind == "oom-host" and fail.get("during_save") and cues.fire_allowed(self.scn)
                self._save_checkpoint(step, kill_during=bool(kill))
                metrics["timing_s/save_checkpoint"] = round(time.time() - ts, 4)
            step_s = time.time() - t
            m = _metrics(step, self.rng, step_s, self._world(), self.one_step_off, np)
            m["actor/lr"] = _scheduled_lr(self.cfg, step)
            if bad:
                m.update(_diverged(fail.get("metric", "grad_norm"), np))
            m["training/epoch"] = (step - 1) // self.steps_per_epoch  # trainer_base.py:522
            metrics = {**m, **metrics}
            if kind == "noisy-success" or (kind == "swanlab-auth" and fail.get("variant") == "401"):
                if kind == "swanlab-auth":
                    o.line(texts.swanlab_401(self.rng))
                else:
                    o.line(texts.NOISY[(step - 1) % len(texts.NOISY)])
                    o.line(texts.swanlab_401(self.rng))
            self._log(metrics, step)
            bar.update(1)
            self._gate(step)
            if bad and fail.get("then") == "filter-loop":
                self._filter_loop()
        if ran_out:  # the loop ended without its last step: no final line, exit 0 (trainer_base.py:531-533)
            if self.tracker is not None:
                self.tracker.finish()
            if self.ray is not None:
                self.ray.shutdown()
            return
        if not last_val and test_freq != 0 and not self.v1:
            last_val = self._val_metrics(total)
        # V1 trainer: None unless a test_freq validation ran (real runs: 'Final validation metrics: None')
        o.pformat(
            f"Final validation metrics: {last_val or None}" if self.v1 else f"Final validation metrics: {last_val}"
        )
        bar.close()
        if self.tracker is not None:
            self.tracker.finish()
        if not self.v1:  # the legacy one-step-off entry's last line
            o.line(f"total time: {time.time() - self.t0:.2f} seconds", None)
        if self.ray is not None:
            self.ray.shutdown()


def run(config: DictConfig, entry: str) -> None:
    """Entry called by the stand-in ``main_ppo`` modules after Hydra composed ``config``. A failure ends as verl's
    driver ends (:func:`driver.fail`: Hydra's report over verl's frames, exit 1), never over the stand-in's."""
    t = StandinTrainer(config, entry)
    try:
        t.run()
    except Exception as e:  # noqa: BLE001 - every failure of the run is the driver's report
        header = texts.task_header(t.out.runner, t.pids["runner"], t.ip, t.rng) if t.phase == "runner" else ""
        driver.fail(e, entry, t.phase, header)
