"""The sandbox bench and the verl stand-in, exercised over real SSH + docker exec (issue 2 "Must show")."""

from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
from pathlib import Path

import pytest

from conftest import run_bench
from supervisor_helpers import wait_for

pytestmark = pytest.mark.bench

MAIN_PPO = "verl.trainer.main_ppo"
ONE_STEP = "verl.experimental.one_step_off_policy.main_ppo"
#: the sample RL data the sandbox image holds in /verl (sandbox/sample_inputs.py): the stand-in opens the data files
#: like real verl 0.9.1 does (verl's yaml defaults, ~/data/rlhf/gsm8k/*.parquet, are not there: Unable to find ...)
DATA = ["data.train_files=/verl/dapo-math-17k.parquet", "data.val_files=/verl/aime-2024.parquet"]
#: verl's yaml defaults fail its own validate_config (dynamic batch off, no micro-batch: verl/workers/config/actor.py:207,
#: which the stand-in runs as verl/trainer/main_ppo.py:177 does); dapo-ops always sets these two
DYN = ["actor_rollout_ref.actor.use_dynamic_bsz=True", "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=True"]
#: ``actor_rollout_ref.rollout.name`` is ``???`` in verl's yaml (mandatory: the rollout's RolloutConfig reads it,
#: verl/workers/engine_workers.py:651); dapo-ops always names vllm
ROLLOUT = ["actor_rollout_ref.rollout.name=vllm"]
BASE = ["trainer.logger=[console]", "trainer.default_local_dir=/verl/dapo_runs/ckpt", *DATA, *DYN, *ROLLOUT]


def verl(sandbox, host, overrides, module=MAIN_PPO, env=None, log="train.log", timeout=120, wrap=""):
    """Run the stand-in in ``host``'s container from /verl; stdout+stderr go to /verl/dapo_runs/<log>.

    Returns (exit code, host-side log path). ``wrap`` prefixes the python command (e.g. ``timeout 5``).
    """
    argv = " ".join(shlex.quote(a) for a in overrides)
    cmd = f"cd /verl && {wrap} python3 -m {module} {argv} > /verl/dapo_runs/{log} 2>&1"
    proc = sandbox.exec(host, cmd, env=env, timeout=timeout)
    assert proc.returncode != 255, proc.stderr
    return proc.returncode, sandbox.runs_dir(host) / log


def grep(pattern: str, path: Path, fixed: bool = True) -> bool:
    """Nothing but grep decides whether the real error line is in the log."""
    return subprocess.run(["grep", "-qF" if fixed else "-qE", "--", pattern, str(path)]).returncode == 0


def steps(path: Path) -> list[int]:
    return [int(m) for m in re.findall(r"step:(\d+) - training/global_step", path.read_text(errors="replace"))]


@pytest.fixture
def h1(sandbox):
    sandbox.reset("h1")
    yield "h1"


# --------------------------------------------------------------------------- hosts
def test_hosts_have_own_hostname_engine_and_container(sandbox):
    for h in sandbox.hosts:
        p = sandbox.ssh(h, "hostname; docker ps --format '{{.Names}}'", check=True)
        assert p.stdout.split() == [h, "verl"]
    p = sandbox.exec(
        "h2", "hostname; pwd; python3 -c 'import verl, hydra, swanlab, ray, pyarrow; print(verl.__version__)'"
    )
    assert p.stdout.split() == ["h2", "/verl", "0.9.1"], p.stderr
    inv = sandbox.inventory.read_text()
    assert "device_mounts = false" in inv and f'address = "{sandbox.addresses["h3"]}"' in inv


def test_ssh_is_key_only_and_host_keys_are_verified(sandbox, tmp_path):
    cfg = str(sandbox.ssh_config)
    nokey = subprocess.run(
        ["ssh", "-F", cfg, "-o", "PubkeyAuthentication=no", "h1", "true"], capture_output=True, text=True, timeout=30
    )
    assert nokey.returncode == 255 and "Permission denied" in nokey.stderr
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    unknown = subprocess.run(
        ["ssh", "-F", cfg, "-o", f"UserKnownHostsFile={empty}", "h1", "true"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert unknown.returncode == 255 and "Host key verification failed" in unknown.stderr


def test_device_tools_follow_devices_json(sandbox, h1):
    sandbox.set_devices(
        h1,
        {
            "accelerator": "npu",
            "count": 2,
            "hbm_total_mb": 65536,
            "used_mb": [1000, 2000],
            "processes": [{"device": 1, "pid": 4242, "name": "python3", "mem_mb": 30000}],
        },
    )
    out = sandbox.exec(h1, "npu-smi info", check=True).stdout
    assert "HBM-Usage(MB)" in out and "32000 / 65536" in out and "4242" in out
    q = sandbox.exec(
        h1, "nvidia-smi --query-gpu=index,memory.used,memory.total --format=csv,noheader,nounits", check=True
    ).stdout
    assert q.split("\n")[:2] == ["0, 1000, 65536", "1, 32000, 65536"]
    apps = sandbox.exec(
        h1, "nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits", check=True
    ).stdout
    assert apps.strip() == "4242, 30000"


# --------------------------------------------------------------------------- stand-in basics
def test_main_ppo_three_steps_over_ssh(sandbox, h1):
    """The issue's command: ssh -F <config> h1 docker exec verl python3 -m verl.trainer.main_ppo ..."""
    p = subprocess.run(
        [
            "ssh",
            "-F",
            str(sandbox.ssh_config),
            h1,
            "docker",
            "exec",
            "verl",
            "python3",
            "-m",
            MAIN_PPO,
            "trainer.total_training_steps=3",
            "'trainer.logger=[console]'",
            "trainer.default_local_dir=/verl/dapo_runs/ckpt",
            *DATA,
            *DYN,
            *ROLLOUT,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    assert "Total training steps: 3" in p.stdout
    assert re.findall(r"step:(\d+) - training/global_step", p.stdout) == ["1", "2", "3"]
    assert re.search(r"actor/pg_loss:np\.float64\(-?[0-9.e-]+\)", p.stdout)
    for key in ("critic/score/mean:", "response_length/mean:", "perf/throughput:", "timing_s/step:"):
        assert key in p.stdout
    assert "Final validation metrics:" in p.stdout
    assert "Training Progress: 100%|██████████| 3/3" in p.stderr


def test_wrong_key_is_hydras_error(sandbox, h1):
    rc, log = verl(sandbox, h1, ["trainer.total_training_steps=3", "trainer.no_such_key=1"])
    assert rc == 1
    assert grep("Could not override 'trainer.no_such_key'.", log)
    assert grep("Key 'no_such_key' is not in struct", log)


def test_megatron_group_and_one_step_off_configs_compose(sandbox, h1):
    rc, log = verl(
        sandbox,
        h1,
        [
            *BASE,
            "model_engine=megatron",
            "trainer.total_training_steps=1",
            "actor_rollout_ref.actor.megatron.param_offload=True",
        ],
    )
    assert rc == 0, log.read_text()[-2000:]
    rc, log = verl(
        sandbox,
        h1,
        [
            "--config-name=one_step_off_ppo_megatron_trainer",
            *BASE,
            "actor_rollout_ref.hybrid_engine=False",
            "trainer.n_gpus_per_node=6",
            "rollout.n_gpus_per_node=2",
            "trainer.total_training_steps=2",
        ],
        module=ONE_STEP,
    )
    assert rc == 0, log.read_text()[-2000:]
    assert grep("total time: ", log) and steps(log) == [1, 2]


def test_one_step_off_needs_hybrid_engine_false(sandbox, h1):
    rc, log = verl(
        sandbox,
        h1,
        [*BASE, "trainer.total_training_steps=2", "trainer.n_gpus_per_node=4", "rollout.n_gpus_per_node=4"],
        module=ONE_STEP,
    )
    assert rc == 1 and grep("AssertionError", log)


SEPARATE = [
    "trainer.v1.trainer_mode=separate_async",
    "actor_rollout_ref.hybrid_engine=False",
    "trainer.n_gpus_per_node=4",
    "actor_rollout_ref.rollout.nnodes=1",
    "actor_rollout_ref.rollout.n_gpus_per_node=4",
    "actor_rollout_ref.rollout.checkpoint_engine.backend=nccl",
]


def test_v1_separate_async_checks_like_verl(sandbox, h1):
    """0.9.1 one-step-off = main_ppo separate_async: the stand-in runs it and asserts what
    trainer_separate_async.py:59-68 asserts."""
    rc, log = verl(
        sandbox,
        h1,
        [*BASE, *SEPARATE, "trainer.total_training_steps=2", "trainer.v1.separate_async.parameter_sync_step=4"],
    )
    assert rc == 0, log.read_text()[-2000:]
    assert steps(log) == [1, 2]
    rc, log = verl(
        sandbox,
        h1,
        [*BASE, *SEPARATE, "trainer.total_training_steps=2", "trainer.v1.separate_async.parameter_sync_step=2"],
    )
    assert rc == 1 and grep("train_batch_size must equal parameter_sync_step * ppo_mini_batch_size", log)
    rc, log = verl(
        sandbox,
        h1,
        [*BASE, *SEPARATE[:-1], "trainer.total_training_steps=2", "trainer.v1.separate_async.parameter_sync_step=4"],
    )
    assert rc == 1 and grep("backend for separate async training", log)


@pytest.mark.parametrize(
    "module,overrides,devices,line",
    [
        (
            ONE_STEP,
            ["actor_rollout_ref.hybrid_engine=False"],
            8,
            "Total available GPUs 8.0 is less than total desired GPUs 16",
        ),
        (MAIN_PPO, [], 4, "Total available GPUs 4.0 is less than total desired GPUs 8"),
    ],
)
def test_devices_must_fit(sandbox, h1, module, overrides, devices, line):
    sandbox.set_devices(h1, {"accelerator": "npu", "count": devices})
    rc, log = verl(sandbox, h1, [*BASE, *overrides, "trainer.total_training_steps=2"], module=module)
    assert rc == 1 and grep(f"ValueError: {line}", log)


def test_resume_continues_from_last_checkpoint(sandbox, h1):
    """6 steps, save_freq 2, killed during step 5 (host OOM, once); the rerun loads global_step_4 and runs 5..6."""
    args = [*BASE, "trainer.total_training_steps=6", "trainer.save_freq=2", "trainer.resume_mode=auto"]
    sandbox.set_scenario(h1, {"step_time": 0.1, "failure": {"kind": "oom-host", "step": 5, "times": 1}})
    with sandbox.memory_limit(h1):  # the cue's count file lives in this container: both runs in it
        rc, log1 = verl(sandbox, h1, args, log="attempt-1.log")
        assert rc == 137
        assert steps(log1) == [1, 2, 3, 4]
        assert grep("Training from scratch", log1)
        ckpt = sandbox.runs_dir(h1) / "ckpt"
        assert (ckpt / "latest_checkpointed_iteration.txt").read_text() == "4"
        assert (ckpt / "global_step_4" / "actor" / "model_world_size_8_rank_0.pt").exists()
        assert (ckpt / "global_step_4" / "data.pt").exists()
        rc, log2 = verl(sandbox, h1, args, log="attempt-2.log")
    assert rc == 0, log2.read_text()[-2000:]
    # the V1 trainer's one logging line (real verl 0.9.1: tests/fixtures/real-verl/verl-run-2-resume.log)
    assert grep("Resuming from /verl/dapo_runs/ckpt/global_step_4, setting global step to 4", log2)
    assert grep("Training Progress:  67%|██████▋   | 4/6", log2)  # the resumed bar starts at K/N
    assert steps(log2) == [5, 6]
    assert (ckpt / "latest_checkpointed_iteration.txt").read_text() == "6"
    assert grep("Training Progress: 100%|██████████| 6/6", log2)


# --------------------------------------------------------------------------- failure cues (grep only)
SCENARIOS = [
    # id, scenario, extra overrides, expected rc, line grep must find
    (
        "oom-device-npu",
        {"failure": {"kind": "oom-device", "step": 2, "hang_s": 0.5}},
        [],
        1,
        "RuntimeError: NPU out of memory. Tried to allocate",
    ),
    (
        "oom-device-cuda",
        {"accelerator": "gpu", "failure": {"kind": "oom-device", "step": 1, "hang_s": 0}},
        [],
        1,
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate",
    ),
    (
        "oom-device-needs-recompute",
        {"failure": {"kind": "oom-device", "step": 1, "avoid_with": "recompute", "hang_s": 0}},
        ["actor_rollout_ref.actor.fsdp_config.param_offload=True"],
        1,
        "NPU out of memory.",
    ),
    (
        "oom-device-always",
        {"failure": {"kind": "oom-device", "step": 1, "avoid_with": [], "hang_s": 0}},
        [
            "actor_rollout_ref.actor.fsdp_config.param_offload=True",
            "actor_rollout_ref.actor.entropy_checkpointing=True",
        ],
        1,
        "NPU out of memory.",
    ),
    (
        "oom-kv-cache",
        {"failure": {"kind": "oom-kv-cache", "max_gpu_memory_utilization": 0.6}},
        ["actor_rollout_ref.rollout.gpu_memory_utilization=0.9"],
        1,
        "on startup is less than desired GPU memory utilization (0.9,",
    ),
    (
        "oom-kv-cache-alloc",
        {"failure": {"kind": "oom-kv-cache", "variant": "alloc-oom"}},
        ["actor_rollout_ref.rollout.gpu_memory_utilization=0.9"],
        1,
        "Engine core initialization failed. See root cause above.",
    ),
    (
        "oom-ray",
        {"failure": {"kind": "oom-ray", "step": 2}},
        [],
        1,
        "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.",
    ),
    (
        "hccl-timeout",
        {"failure": {"kind": "hccl-timeout", "step": 1, "hang_s": 0.2}},
        [],
        1,
        "Some HCCL operations have failed or timed out.",
    ),
    (
        "nccl-timeout",
        {"accelerator": "gpu", "failure": {"kind": "hccl-timeout", "step": 1, "hang_s": 0}},
        [],
        1,
        "Watchdog caught collective operation timeout: WorkNCCL(",
    ),
    (
        "swanlab-auth",
        {"failure": {"kind": "swanlab-auth"}},
        ["trainer.logger=[console,swanlab]"],
        1,
        "Failed to initialize SwanLab in online mode: no TTY is available for interactive login.",
    ),
    (
        "crash",
        {"failure": {"kind": "crash", "step": 1}},
        [],
        1,
        "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
    ),
    ("data-error", {"failure": {"kind": "data-error", "step": 1}}, [], 1, "is larger than max_length="),
    (
        "noisy-success",
        {"failure": {"kind": "noisy-success"}},
        [],
        0,
        "swanlab: network error, swanlab will resume uploads when the network improves",
    ),
    ("swanlab-401", {"failure": {"kind": "swanlab-auth", "variant": "401"}}, [], 0, "401 Authorization Required"),
]


@pytest.mark.parametrize("name,scenario,extra,want_rc,line", SCENARIOS, ids=[s[0] for s in SCENARIOS])
def test_failure_scenario_prints_the_real_line(sandbox, h1, name, scenario, extra, want_rc, line):
    sandbox.set_scenario(h1, {"step_time": 0.05, **scenario})
    env = {"SWANLAB_MODE": "cloud"} if name == "swanlab-auth" else None
    rc, log = verl(sandbox, h1, [*BASE, "trainer.total_training_steps=3", *extra], env=env)
    assert rc == want_rc, log.read_text()[-3000:]
    assert grep(line, log)
    if want_rc == 0:
        assert grep("Final validation metrics:", log) and steps(log) == [1, 2, 3]


@pytest.mark.parametrize(
    "extra",
    [
        ["actor_rollout_ref.actor.fsdp_config.param_offload=True"],
        ["model_engine=megatron", "actor_rollout_ref.actor.megatron.param_offload=True"],
    ],
    ids=["fsdp", "megatron"],
)
def test_device_oom_is_avoided_by_offload(sandbox, h1, extra):
    sandbox.set_scenario(h1, {"step_time": 0.05, "failure": {"kind": "oom-device", "step": 2}})
    rc, log = verl(sandbox, h1, [*BASE, "trainer.total_training_steps=3", *extra])
    assert rc == 0 and not grep("out of memory", log) and steps(log) == [1, 2, 3]


def test_recompute_avoids_the_recompute_oom(sandbox, h1):
    sandbox.set_scenario(
        h1, {"step_time": 0.05, "failure": {"kind": "oom-device", "step": 1, "avoid_with": "offload+recompute"}}
    )
    rc, log = verl(
        sandbox,
        h1,
        [
            *BASE,
            "trainer.total_training_steps=2",
            "model_engine=megatron",
            "actor_rollout_ref.actor.megatron.param_offload=True",
            "actor_rollout_ref.actor.megatron.override_transformer_config.recompute_granularity=full",
        ],
    )
    assert rc == 0, log.read_text()[-2000:]


def test_kv_cache_fits_at_lower_utilization(sandbox, h1):
    sandbox.set_scenario(
        h1, {"step_time": 0.05, "failure": {"kind": "oom-kv-cache", "max_gpu_memory_utilization": 0.6}}
    )
    rc, log = verl(
        sandbox, h1, [*BASE, "trainer.total_training_steps=2", "actor_rollout_ref.rollout.gpu_memory_utilization=0.5"]
    )
    assert rc == 0


def oom_kills(sandbox, host) -> int:
    """The container cgroup's ``oom_kill`` counter (cgroup v2 memory.events, else v1 memory.oom_control): what the
    supervisor reads (dapo_ops/agent/supervisor/accelerator.py ``oom_kill_count``)."""
    out = sandbox.exec(
        host, "cat /sys/fs/cgroup/memory.events 2>/dev/null || cat /sys/fs/cgroup/memory/memory.oom_control", check=True
    ).stdout
    return int(re.search(r"^oom_kill (\d+)$", out, re.M).group(1))


def test_host_oom_is_the_kernels_oom_kill(sandbox, h1):
    """The oom-host cue takes host memory until the kernel's OOM killer ends the stand-in: SIGKILL (137), no
    traceback, and the container cgroup's oom_kill counter grew, as in a real host OOM (the supervisor's
    evidence for oom-host)."""
    sandbox.set_scenario(h1, {"step_time": 0.05, "failure": {"kind": "oom-host", "step": 2}})
    with sandbox.memory_limit(h1):
        before = oom_kills(sandbox, h1)
        rc, log = verl(sandbox, h1, [*BASE, "trainer.total_training_steps=3"])
        assert rc == 137 and steps(log) == [1] and not grep("Traceback", log)
        assert oom_kills(sandbox, h1) > before


def test_host_oom_cue_without_a_memory_limit_is_refused(sandbox, h1):
    """Without a container memory limit the cue would take the machine's own memory: the stand-in refuses at start."""
    sandbox.set_scenario(h1, {"step_time": 0.05, "failure": {"kind": "oom-host", "step": 2}})
    rc, log = verl(sandbox, h1, [*BASE, "trainer.total_training_steps=3"])
    assert rc == 1 and steps(log) == [] and grep("the oom-host cue needs a container memory limit", log)


def test_hang_prints_nothing_more(sandbox, h1):
    """At the hang step the process stays alive and silent (no step:2, no exit) until it is killed. The cue fires
    once (``times: 1``): the stand-in writes its count file (cues.fire_allowed) right before it blocks, so the
    count file is the event that it reached the hang; it is killed there and never ended by itself."""
    sandbox.set_scenario(h1, {"step_time": 0.05, "failure": {"kind": "hang", "step": 2, "times": 1}})
    sandbox.exec(
        h1,
        "cd /verl && { python3 -m verl.trainer.main_ppo 'trainer.logger=[console]' "
        "trainer.default_local_dir=/verl/dapo_runs/ckpt trainer.total_training_steps=3 "
        + " ".join(DATA + DYN + ROLLOUT)
        + " "
        "> /verl/dapo_runs/hang.log 2>&1 & echo $! > /verl/dapo_runs/hang.pid; wait $!; "
        "echo EXIT=$? >> /verl/dapo_runs/hang.log; } >/dev/null 2>&1 &",
        check=True,
    )
    log, pidfile = sandbox.runs_dir(h1) / "hang.log", sandbox.runs_dir(h1) / "hang.pid"

    def fired():
        return sandbox.exec(h1, "cat /tmp/dapo-standin/*.count 2>/dev/null").stdout.strip() == "1"

    wait_for(fired, 120, "the hang cue firing", 0.2)
    pid = int(pidfile.read_text())
    assert sandbox.exec(h1, f"kill -0 {pid}").returncode == 0, log.read_text()[-2000:]  # alive in the hang
    assert steps(log) == [1] and "EXIT=" not in log.read_text()
    sandbox.exec(h1, f"kill -9 {pid}", check=True)
    wait_for(lambda: "EXIT=" in log.read_text(), 60, "the killed stand-in's exit line")
    text = log.read_text()
    assert steps(log) == [1] and text.rstrip().endswith("EXIT=137"), text[-2000:]  # killed, never ended by itself


def test_swanlab_local_run_and_link_line(sandbox, h1):
    env = {
        "SWANLAB_MODE": "local",
        "SWANLAB_LOG_DIR": "/verl/dapo_runs/swanlog",
        "SWANLAB_WEB_HOST": "http://swanlab.example:5092",
    }
    rc, log = verl(
        sandbox,
        h1,
        [
            "trainer.logger=[console,swanlab]",
            "trainer.default_local_dir=/verl/dapo_runs/ckpt",
            *DATA,
            *DYN,
            *ROLLOUT,
            "trainer.project_name=bench",
            "trainer.experiment_name=exp1",
            "trainer.total_training_steps=2",
        ],
        env=env,
    )
    assert rc == 0, log.read_text()[-2000:]
    assert grep(
        r"swanlab: 🚀 View run exp1 at http://swanlab\.example:5092/@sandbox/bench/runs/[a-z0-9]+$", log, fixed=False
    )
    runs = list((sandbox.runs_dir(h1) / "swanlog").glob("run-*"))
    assert len(runs) == 1


# --------------------------------------------------------------------------- teardown
def _leftovers(bid: str) -> list[str]:
    state, rundir = f"/var/tmp/dapo-bench-{bid}", f"/run/dapo-bench-{bid}"
    left = []
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    left += [f"netns {x}" for x in re.findall(rf"^(dapo{bid}-h\d+)", ns, re.M)]
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    left += [f"link {x}" for x in re.findall(rf"\d+: (dapobr{bid}|vd{bid}-h\d+)[@:]", links)]
    mounts = Path("/proc/mounts").read_text()
    left += [f"mount {m}" for m in mounts.splitlines() if state in m or rundir in m or f"dapo{bid}-h" in m]
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                cmd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if state in cmd or rundir in cmd:
                left.append(f"process {p.name}: {cmd[:120]}")
    left += [f"dir {d}" for d in (state, rundir) if os.path.exists(d)]
    return left


def _unused_bench(sandbox) -> str:
    """A bench id nobody uses (no state dir, no namespaces), other than this session's: ``$DAPO_BENCH_SPARE_ID``
    when set (a range of one's own on a shared machine), else counting down from 155."""
    spare = os.environ.get("DAPO_BENCH_SPARE_ID", "")
    if spare:
        assert spare != sandbox.id and not _leftovers(spare), f"DAPO_BENCH_SPARE_ID={spare} is in use"
        return spare
    return next(
        str(i)
        for i in range(155, -1, -1)
        if str(i) != sandbox.id and not os.path.exists(f"/var/tmp/dapo-bench-{i}") and not _leftovers(str(i))
    )


def _ended(pid: int) -> bool:
    """Wait (on the process's pidfd, bounded) until ``pid`` ends; True when it did."""
    import select

    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], 30)[0])
    finally:
        os.close(fd)


def test_down_leaves_nothing_behind(sandbox):
    bid = _unused_bench(sandbox)
    assert _leftovers(bid) == [], f"bench {bid} is in use"
    try:
        run_bench("up", "2", bench=bid)
        run_bench("up", "2", bench=bid)  # idempotent
        st = run_bench("status", bench=bid)
        assert st.stdout.count("container=running") == 2
        assert _leftovers(bid)  # sanity: the probe sees a live bench
    finally:
        run_bench("down", bench=bid)
    assert _leftovers(bid) == []
    # the session bench is untouched
    assert sandbox.ssh("h1", "hostname", check=True).stdout.strip() == "h1"


def test_a_bench_brought_down_and_up_again_is_reached_again(sandbox):
    """Issue 32 item 11 (`make demo`, `inv sandbox.down`, `make demo` -> host key CHANGED): ``down`` ends the
    control masters of its hosts, and a connection that dropped with its host reads known_hosts again on
    reconnect (the new host has a new key)."""
    import json

    from dapo_ops.control.inventory import hosts_file as inventory
    from dapo_ops.control.remote import sshmux
    from dapo_ops.control.remote.target import Target

    bid = _unused_bench(sandbox)
    try:
        inv_path = run_bench("up", "1", bench=bid).stdout.strip().splitlines()[-1]
        h1 = inventory.load(inv_path).hosts["h1"]
        assert Target(h1, reuse=True).host_run("hostname").stdout.strip() == "h1"  # starts a control master
        direct = Target(h1)
        assert direct.host_run("hostname").stdout.strip() == "h1"  # a connection of its own
        sock = sshmux.socket_path(Target(h1, reuse=True), sshmux.control_dir())
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(str(sock))
            s.sendall(b'{"op": "info"}\n')
            pid = json.loads(s.makefile("rb").readline())["pid"]
        key = Path(h1.known_hosts).read_text()
        run_bench("down", bench=bid)
        assert _ended(pid), "the control master of the removed host outlived bench.sh down"
        run_bench("up", "1", bench=bid)
        assert Path(h1.known_hosts).read_text() != key  # a new host key
        assert Target(h1, reuse=True).host_run("hostname").stdout.strip() == "h1"
        assert direct.host_run("hostname").stdout.strip() == "h1"  # reconnects, new known_hosts
        direct.close()
    finally:
        run_bench("down", bench=bid)
    assert _leftovers(bid) == []


def test_fault_injection_sshd_and_link(sandbox):
    h = "h3"
    try:
        sandbox.kill_sshd(h)
        p = sandbox.ssh(h, "true", timeout=30)
        assert p.returncode == 255 and "Connection refused" in p.stderr
        sandbox.start_sshd(h)
        assert sandbox.ssh(h, "hostname", timeout=30).stdout.strip() == h
        sandbox.link(h, False)
        p = subprocess.run(
            ["ssh", "-F", str(sandbox.ssh_config), "-o", "ConnectTimeout=2", h, "true"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert p.returncode == 255 and re.search(r"timed out|No route to host", p.stderr), p.stderr
    finally:
        sandbox.reset(h)
    assert sandbox.ssh(h, "hostname", timeout=30).stdout.strip() == h


def test_host_oom_during_save_leaves_a_torn_checkpoint(sandbox, h1):
    sandbox.set_scenario(h1, {"step_time": 0.05, "failure": {"kind": "oom-host", "step": 4, "during_save": True}})
    with sandbox.memory_limit(h1):
        rc, log = verl(sandbox, h1, [*BASE, "trainer.total_training_steps=6", "trainer.save_freq=2"])
    ckpt = sandbox.runs_dir(h1) / "ckpt"
    assert rc == 137 and steps(log) == [1, 2, 3]
    assert grep("Saving checkpoint to /verl/dapo_runs/ckpt/global_step_4", log)
    assert (ckpt / "latest_checkpointed_iteration.txt").read_text() == "2"
    assert not (ckpt / "global_step_4" / "data.pt").exists()


def test_sandbox_daemons_do_not_inherit_the_operators_environment(sandbox):
    """sshd and dockerd run for the bench's lifetime: the operator's env (API keys, tokens) must not live on in
    them (bench.sh starts them with `env -i PATH=...`)."""
    pid = int((sandbox.state / "hosts" / "h1" / "docker" / "dockerd.pid").read_text().split()[0])
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    names = {item.split(b"=", 1)[0].decode() for item in raw.split(b"\0") if item}
    assert names <= {"PATH", "PWD", "SHLVL", "_"}, sorted(names)  # what `sh -c` itself sets
    # sshd rewrites its environ area for its process title, so only look for what the operator's env would add
    pid = int((sandbox.state / "ssh" / "sshd_h1.pid").read_text().split()[0])
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    assert b"HOME=" not in raw and b"VIRTUAL_ENV=" not in raw and b"PYTEST" not in raw
