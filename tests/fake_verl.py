"""A tiny fake verl for the supervisor's unit tests and ``bench/reaction.py`` (no hosts, no torch).

``factory(spec, features, setting_changes)`` has ``overrides.build_command``'s signature and returns
``[python, this file, <json args>]``. Behaviour comes from ``<run_dir>/fake.json``:

``{"step_time": 0.05, "oom_at": 4, "oom_unless": ["offload"], "oom_always": false,
   "oom_unless_changes": ["token_budgets"], "oom_frame": '  File "dp_actor.py", line 1, in update_policy',
   "exit_at": null, "exit_code": 1, "final_text": "...", "hang_at": null, "save_freq": 2,
   "kv_text": null, "spawn_child": true, "noise_bytes": 0, "swanlab_url": null,
   "diverge_at": null, "diverge_attempts": 99, "diverge_metric": "grad_norm", "data_steps": null,
   "swanlab_offline": null, "no_data_pt": false}`` (``swanlab_offline``: a log dir; each attempt prints its offline
   ``swanlab sync <dir>``; ``no_data_pt``: saves without verl's dataloader state ``data.pt``)

``diverge_at``: at that step (in attempts up to ``diverge_attempts``) the metrics go bad as verl prints them: ``grad_norm``
-> the worker's ``WARN: grad_norm is not finite: nan`` (verl/workers/engine/fsdp/transformer_impl.py:824) and NaN
``actor/grad_norm`` / ``actor/pg_loss`` in the step line, the run going on; ``lr`` -> ``actor/lr:1e+30`` in the step
line, then no step line and generation chatter for ever (DAPO filter_groups regenerating, issue 42).

``data_steps`` N: the data feeds N steps (1 step per epoch, ``total_epochs`` = N): like verl 0.9.1's V1 loop
(verl/trainer/ppo/v1/trainer_base.py:467) it stops after step N with no ``Final validation metrics`` and exits 0.

Like verl (verl/utils/logger/aggregate_logger.py, verl/trainer/ppo/v1/trainer_base.py): resumes from ``<ckpt_dir>/latest_checkpointed_iteration.txt``, prints
``Total training steps``, resume lines, ``step:N - k:v`` metrics with numpy-2 reprs, tqdm redraws,
saves ``global_step_N`` every ``save_freq`` steps. A device OOM prints the torch message and Hydra's last report
line (``oom_no_report``: not) and then *hangs* (the driver stays alive after its report, as the real d-update-oom
run did; the other ranks block in a collective), so only the supervisor's kill ends it; ``oom_first_line`` is printed
``oom_report_after_s`` s before the report (a worker's own line: torch_npu's PTA code). With
``spawn_child`` it starts a grandchild that calls ``setsid`` (a Ray worker escaping the group).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = os.path.abspath(__file__)

CUDA_OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
    "79.25 GiB of which 1.02 GiB is free. Including non-PyTorch memory, this process has 78.2 GiB memory in use."
)


def _device_oom(cfg: dict, out) -> int:
    """A device OOM as verl prints it: a worker's own line first (``oom_first_line``, torch_npu's PTA code,
    ``oom_report_after_s`` before the report), the traceback's frame and torch's message, Hydra's last report line
    (``oom_no_report``: none), then no exit (the driver stays alive after its report, as d-update-oom's did, or the
    peers block in a collective): only the supervisor's kill ends it."""
    if cfg.get("oom_first_line"):
        out(cfg["oom_first_line"])
        time.sleep(float(cfg.get("oom_report_after_s", 0)))
    out("Traceback (most recent call last):")
    out(cfg.get("oom_frame", '  File "model.py", line 1, in forward'))  # no phase: the unknown-phase ladder
    out(CUDA_OOM)
    if not cfg.get("oom_no_report"):
        out("")
        out("Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.")
    time.sleep(600)
    return 1


def factory(spec, features, setting_changes=None):
    """Fake ``overrides.build_command``: argv running this script with the attempt's parameters."""
    args = {
        "run_dir": spec["run_dir"],
        "features": sorted(features.names()),
        "changes": dict(setting_changes or {}),
        "steps": spec["settings"]["steps"],
        "ckpt_dir": spec["settings"]["ckpt_dir"],
    }
    return [sys.executable, HERE, json.dumps(args)]


def out(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def save(ckpt, step: int, data_pt: bool) -> None:
    """``global_step_<step>``: the actor, verl's dataloader state ``data.pt`` (after the actor, before the tracker:
    verl/trainer/ppo/v1/trainer_base.py:996-999) unless ``data_pt`` is False, then the tracker."""
    d = ckpt / ("global_step_%d" % step)
    (d / "actor").mkdir(parents=True, exist_ok=True)
    (d / "actor" / "model.pt").write_text("x")
    if data_pt:
        (d / "data.pt").write_text("x")
    (ckpt / "latest_checkpointed_iteration.txt").write_text(str(step))
    out("local_global_step_folder: %s" % d)


def main() -> int:
    a = json.loads(sys.argv[1])
    cfg = json.loads(Path(a["run_dir"], "fake.json").read_text())
    feats = set(a["features"])
    ckpt = Path(a["ckpt_dir"])
    steps = int(a["steps"])
    st = float(cfg.get("step_time", 0.05))
    save_freq = int(cfg.get("save_freq", 2))
    attempt = int(os.environ.get("DAPO_OPS_ATTEMPT", "0"))
    out("argv features=%s changes=%s attempt=%d" % (",".join(sorted(feats)), json.dumps(a["changes"]), attempt))
    if os.environ.get("FAKE_SECRET_PROBE"):
        out("secret-probe-present")
    if cfg.get("config_error"):
        out("Could not override '%s'." % cfg["config_error"])
        out("Key '%s' is not in struct" % cfg["config_error"].split(".")[-1])
        out("Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.")
        return 1
    if cfg.get("spawn_child"):
        subprocess.Popen(
            [sys.executable, "-c", "import os,time; os.setsid(); time.sleep(600)"]
        )  # setsid itself, as Ray workers do
    if cfg.get("kv_text") and not a["changes"].get("gpu_memory_utilization"):
        out(cfg["kv_text"])
        return 1
    data_steps = cfg.get("data_steps")
    if data_steps:  # the config echo verl pprints (verl/trainer/main_ppo.py:144)
        out("(TaskRunnerV1 pid=2) {'trainer': {'total_epochs': %d, 'total_training_steps': %d}}" % (data_steps, steps))
    out("Total training steps: %d" % steps)
    start = 0
    try:
        start = int((ckpt / "latest_checkpointed_iteration.txt").read_text().strip())
        out("INFO:now:Resuming from %s/global_step_%d, setting global step to %d" % (ckpt, start, start))
        # real verl logs the checkpoint load, the dataloader state and the rollout's wake-up after that line
        # (dozens of worker lines), so a later phase-less OOM is not the load's (classify: context lines <= 30 back)
        for k in range(32):
            out("(WorkerDict pid=7) INFO: resume: loaded shard %d / wake-up done" % k)
    except (OSError, ValueError):
        out("Checkpoint tracker file does not exist: %s/latest_checkpointed_iteration.txt" % ckpt)
        out("Training from scratch")
    if cfg.get("swanlab_url"):
        out("(TaskRunner pid=1) swanlab: \U0001f680 View run demo at %s" % cfg["swanlab_url"])
        out("swanlab-env SWANLAB_RUN_ID=%s" % os.environ.get("SWANLAB_RUN_ID", ""))
    if cfg.get("swanlab_offline"):  # swanlab 0.10 offline mode: one run-<timestamp>-<id> dir per process
        d = "%s/run-2026010%d_000000-%s" % (cfg["swanlab_offline"], attempt, os.environ.get("SWANLAB_RUN_ID", "x"))
        out("(TaskRunner pid=1) swanlab: \u26a1\ufe0f Run `swanlab sync %s` to sync this run" % d)
    noise = "x" * 200
    for step in range(start + 1, steps + 1):
        if data_steps and step > data_steps:  # the epoch limit ends the loop (trainer_base.py:467): exit 0
            return 0
        time.sleep(st)
        for _ in range(int(cfg.get("noise_lines", 0))):
            out("(WorkerDict pid=7) " + noise)
        oom = cfg.get("oom_at") == step and (
            cfg.get("oom_always")
            or not all(f in feats for f in cfg.get("oom_unless", ["offload"]))
            or not all(k in a["changes"] for k in cfg.get("oom_unless_changes", []))
        )
        if oom:
            return _device_oom(cfg, out)
        if cfg.get("split_utf8") and step == 1:  # one metrics line written in two parts, split inside a character
            raw = ("step:1 - val-core/数学/acc/mean@1:0.5 - timing_s/step:%s\n" % st).encode()
            cut = raw.index("数".encode()) + 1
            sys.stdout.flush()
            sys.stdout.buffer.write(raw[:cut])
            sys.stdout.buffer.flush()
            time.sleep(0.6)
            sys.stdout.buffer.write(raw[cut:])
            sys.stdout.buffer.flush()
        if cfg.get("hang_at") == step:
            time.sleep(600)
        if (
            cfg.get("exit_at") == step
            and (not cfg.get("exit_if_feature") or cfg["exit_if_feature"] in feats)
            and attempt >= int(cfg.get("exit_from_attempt", 0))
        ):
            out(cfg.get("final_text", "RuntimeError: boom"))
            if cfg.get("exit_code") == 137:
                if cfg.get("oom_counter"):  # play the kernel: count an OOM kill, then SIGKILL
                    c = Path(cfg["oom_counter"])
                    n = int(c.read_text().split()[1])
                    c.write_text("oom 0\noom_kill %d\n" % (n + 1))
                os.kill(os.getpid(), 9)
            return int(cfg.get("exit_code", 1))
        bad = cfg.get("diverge_at") is not None and step >= cfg["diverge_at"]
        bad = bad and attempt <= int(cfg.get("diverge_attempts", 99))
        metric = cfg.get("diverge_metric", "grad_norm")
        if bad and metric == "grad_norm":
            out("(WorkerDict pid=7) WARN: grad_norm is not finite: nan")
        # like verl 0.9.1 (real-verl README): the step's checkpoint is saved before its step:N line
        if save_freq and (step % save_freq == 0 or step == steps):
            save(ckpt, step, not cfg.get("no_data_pt"))
        sys.stdout.write("\rTraining Progress:  50%%|#####     | %d/%d [00:01<00:01,  3.00it/s]" % (step, steps))
        out(
            "step:%d - actor/pg_loss:np.float64(%s) - actor/grad_norm:np.float64(%s) - actor/lr:%s - "
            "critic/score/mean:np.float64(0.%d) - response_length/mean:812.0 - perf/throughput:1234.5 - "
            "timing_s/step:%s - training/global_step:%d"
            % (
                step,
                "nan" if bad and metric == "grad_norm" else "-0.0123",
                "nan" if bad and metric == "grad_norm" else "0.3%d" % (step % 10),
                "1e+30" if bad and metric == "lr" else "1e-06",
                step,
                st,
                step,
            )
        )
        if bad and metric == "lr":  # filter_groups drops every group: generation goes on, no step line
            while True:
                out("(AgentLoopWorkerTQ pid=9) INFO [loggers.py:123] Engine 000: Avg generation throughput: 3120.7")
                time.sleep(0.2)
    out("Final validation metrics: {'val-core/acc': 0.5}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
