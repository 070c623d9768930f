"""The verl stand-in against real verl 0.9.1 (the oracle): where the stand-in was friendlier than verl, it now refuses
or ends as verl does, and the plan no longer relies on the friendlier behaviour. Each verl fact is cited file:line in
the stand-in (sandbox/verl_standin/) and checked here against the pinned wheel's sources
(sandbox/fetch_verl_config.py). The stand-in tests run its ``main_ppo`` in a subprocess over the real yaml, no
sandbox host needed."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dapo_ops.control import settings
from dapo_ops.control.inventory.model import Host
from dapo_ops.control.launch import plan as planning

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "sandbox"))
from fetch_verl_config import verl_config_root  # noqa: E402

RUN_ID = "20261207-151200-a1b2"
NPU8 = Host(name="h1", address="198.51.100.11", accelerator="npu", devices=8, workdir="/verl", runs_dir="/runs")


@pytest.fixture(scope="module")
def verl():
    return verl_config_root() / "verl"


@pytest.fixture
def standin_tree(tmp_path, verl):
    """``<tmp>/verl``: the stand-in package with the real 0.9.1 yaml at ``verl/trainer/config`` (the image's layout)."""
    root = tmp_path / "w"
    shutil.copytree(REPO / "sandbox" / "verl_standin" / "verl", root / "verl")
    shutil.copytree(verl / "trainer" / "config", root / "verl" / "trainer" / "config")
    (tmp_path / "devices.json").write_text('{"count": 8}')
    return root


def run_standin(root, *overrides):
    env = dict(
        os.environ,
        PYTHONPATH=str(root),
        DAPO_STANDIN_SCENARIO=str(root / "no-scenario.json"),
        DAPO_STANDIN_DEVICES=str(root.parent / "devices.json"),
    )
    env.pop("RAY_ADDRESS", None)
    return subprocess.run(
        [sys.executable, "-m", "verl.trainer.main_ppo", f"hydra.run.dir={root / 'hydra'}", *overrides],
        cwd=str(root),
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def plan(flags):
    st = settings.resolve(flags, {}, {})
    inputs = planning.PlanInputs(settings=st, host=NPU8, mode="dapo", run_id=RUN_ID, swanlab_logger=False)
    return planning.make_plan(planning.draft_plan(inputs), None)


# verl's validate_config in the driver -------------------------------------------------------------------------------
NO_DYN_FSDP_12 = {
    "framework": "fsdp",
    "features": "-dynamic_batch",
    "train_batch_size": 12,
    "ppo_mini_batch_size": 8,
    "rollout_n": 1,
    "steps": 5,
}


def test_verl_validates_the_whole_step_in_the_driver_before_the_v1_trainer(verl):
    main = (verl / "trainer/main_ppo.py").read_text()
    assert main.index("validate_config(") < main.index("run_ppo(config, task_runner_class=TaskRunnerV1)")
    cfg = (verl / "utils/config.py").read_text()
    assert "real_train_batch_size = config.data.train_batch_size * config.actor_rollout_ref.rollout.n" in cfg
    assert "minimal_bsz = n_gpus" in cfg and "minimal_bsz = megatron_dp * config.actor_rollout_ref.actor" in cfg


def test_standin_main_ppo_refuses_what_verl_validate_config_refuses(standin_tree):
    """The stand-in printed verl's pass line without running validate_config, so a step verl refuses at start-up
    trained in the sandbox."""
    r = run_standin(
        standin_tree,
        "actor_rollout_ref.actor.use_dynamic_bsz=False",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1",
        "actor_rollout_ref.actor.ppo_mini_batch_size=8",
        "data.train_batch_size=12",
        "actor_rollout_ref.rollout.n=1",
        "trainer.n_gpus_per_node=8",
    )
    out = r.stdout + r.stderr
    assert r.returncode == 1, out[-2000:]
    assert "real_train_batch_size (12) must be divisible by minimal possible batch size (8)" in out, out[-2000:]
    assert "All configuration checks passed successfully" not in out
    assert "ray init kwargs" not in out  # refused in the driver, before Ray


def test_standin_main_ppo_refuses_a_missing_log_prob_micro_batch(standin_tree):
    r = run_standin(
        standin_tree,
        "actor_rollout_ref.actor.use_dynamic_bsz=False",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1",
        "trainer.n_gpus_per_node=8",
    )
    out = r.stdout + r.stderr
    assert r.returncode == 1, out[-2000:]
    assert (
        "[actor_rollout_ref.rollout] Please set at least one of 'actor_rollout_ref.rollout.log_prob_micro_batch_size'"
        in out
    ), out[-2000:]


def test_plan_refuses_a_step_verl_validate_config_refuses():
    with pytest.raises(planning.PlanError) as e:
        plan(NO_DYN_FSDP_12)
    msg = str(e.value)
    assert "train_batch_size=12 x rollout_n=1 = 12" in msg and "minimal batches of 8" in msg
    assert "--train-batch-size 16 or 8" in msg and "\n" not in msg


def test_plan_refuses_a_megatron_step_that_does_not_split_into_dp_times_micro():
    flags = dict(NO_DYN_FSDP_12, framework="megatron", train_batch_size=24, ppo_mini_batch_size=16)
    flags["micro_batch_size"] = 8
    with pytest.raises(planning.PlanError) as e:
        plan(flags)
    assert "minimal batches of 16 (2 data-parallel rank(s)" in str(e.value)


def test_plan_keeps_steps_verl_accepts():
    plan(dict(NO_DYN_FSDP_12, train_batch_size=16))
    plan(dict(NO_DYN_FSDP_12, features=""))  # dynamic batch: verl skips the check (config.py:103)
