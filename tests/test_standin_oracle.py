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
    shutil.copytree(REPO / "sandbox" / "verl_standin", root)  # verl/ and its sibling stand-ins (transfer_queue, ...)
    shutil.copytree(verl / "trainer" / "config", root / "verl" / "trainer" / "config")
    (tmp_path / "devices.json").write_text('{"count": 8}')
    (tmp_path / "scenario.json").write_text('{"step_time": 0.01}')
    return root


def run_standin(root, *overrides):
    env = dict(
        os.environ,
        PYTHONPATH=str(root),
        DAPO_STANDIN_SCENARIO=str(root.parent / "scenario.json"),
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


# verl's find_latest_ckpt_path on resume_mode=auto ------------------------------------------------------------------
def train_args(ckpt, steps=2):
    return (
        "data.train_files=hdfs://d/train.parquet",
        "data.val_files=hdfs://d/val.parquet",
        "actor_rollout_ref.model.path=m",
        "actor_rollout_ref.rollout.name=vllm",  # mandatory (???) in verl's yaml; the tool always sets it
        f"trainer.total_training_steps={steps}",
        f"trainer.default_local_dir={ckpt}",
        "trainer.save_freq=-1",
        "trainer.test_freq=-1",
        "trainer.val_before_train=False",
        "trainer.logger=[console]",
        "trainer.n_gpus_per_node=8",
        "actor_rollout_ref.actor.use_dynamic_bsz=True",  # verl's yaml defaults fail its own validate_config
        "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=True",
    )


def test_verl_trains_from_scratch_when_the_tracker_names_a_missing_checkpoint(verl):
    src = (verl / "utils/checkpoint/checkpoint_manager.py").read_text()
    body = src[src.index("def find_latest_ckpt_path") : src.index("def get_checkpoint_tracker_filename")]
    assert 'print("Checkpoint does not exist: %s", ckpt_path)\n        return None' in body
    assert 'print("Found checkpoint: %s", ckpt_path)' in body
    v1 = (verl / "trainer/ppo/v1/trainer_base.py").read_text()
    assert 'if global_step_folder is None:\n                logger.info("Training from scratch")\n' in v1


def test_standin_trains_from_scratch_when_the_tracker_names_a_missing_checkpoint(standin_tree, tmp_path):
    """The stand-in 'resumed' from the step the tracker named and died on the missing shard (FileNotFoundError);
    verl prints 'Checkpoint does not exist: %s <dir>' and trains from step 1."""
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "latest_checkpointed_iteration.txt").write_text("5")
    r = run_standin(standin_tree, *train_args(ckpt))
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-2000:]
    assert f"Checkpoint does not exist: %s {ckpt}/global_step_5" in out
    assert "Training from scratch" in out and "Resuming from" not in out
    assert "step:1 - " in out and "step:2 - " in out


def test_standin_prints_verls_found_checkpoint_line_when_it_resumes(standin_tree, tmp_path):
    ckpt = tmp_path / "ckpt"
    actor = ckpt / "global_step_1" / "actor"
    actor.mkdir(parents=True)
    (actor / "model_world_size_8_rank_0.pt").write_bytes(b"{}")
    (ckpt / "latest_checkpointed_iteration.txt").write_text("1")
    r = run_standin(standin_tree, *train_args(ckpt))
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-2000:]
    assert f"Found checkpoint: %s {ckpt}/global_step_1" in out
    assert f"Resuming from {ckpt}/global_step_1, setting global step to 1" in out
    assert "step:2 - " in out and "step:1 - " not in out


# verl's checkpoint tracker is written in place -----------------------------------------------------------------------
def test_verl_writes_the_tracker_in_place_and_int_parses_it(verl):
    v1 = (verl / "trainer/ppo/v1/trainer_base.py").read_text()
    assert (
        'with open(local_latest_checkpointed_iteration, "w") as f:\n            f.write(str(self.global_steps))' in v1
    )
    src = (verl / "utils/checkpoint/checkpoint_manager.py").read_text()
    assert "iteration = int(f.read().decode())" in src


def test_standin_fails_on_an_empty_tracker_as_verl_does(standin_tree, tmp_path):
    ckpt = tmp_path / "ckpt"
    (ckpt / "global_step_1" / "actor").mkdir(parents=True)
    (ckpt / "latest_checkpointed_iteration.txt").write_text("")
    r = run_standin(standin_tree, *train_args(ckpt))
    out = r.stdout + r.stderr
    assert r.returncode == 1 and "invalid literal for int() with base 10: ''" in out, out[-2000:]


def test_a_torn_empty_tracker_is_repaired_to_the_newest_complete_checkpoint(tmp_path):
    """The supervisor read an empty tracker as 'fresh start' and left it: verl then failed every attempt on
    int(b'')."""
    from dapo_ops.agent.supervisor.checkpoints import latest_checkpoint

    for step in (2, 4):
        actor = tmp_path / f"global_step_{step}" / "actor"
        actor.mkdir(parents=True)
        (actor / "model_world_size_8_rank_0.pt").write_bytes(b"{}")
    (tmp_path / "global_step_6" / "actor").mkdir(parents=True)  # the save the kill cut short
    tracker = tmp_path / "latest_checkpointed_iteration.txt"
    tracker.write_text("")
    assert latest_checkpoint(str(tmp_path), repair=False) == 4 and tracker.read_text() == ""
    assert latest_checkpoint(str(tmp_path)) == 4
    assert tracker.read_text() == "4"


def test_a_torn_tracker_without_a_complete_checkpoint_is_moved_aside(tmp_path):
    from dapo_ops.agent.supervisor.checkpoints import latest_checkpoint

    tracker = tmp_path / "latest_checkpointed_iteration.txt"
    tracker.write_text("")
    assert latest_checkpoint(str(tmp_path)) is None
    assert not tracker.exists() and (tmp_path / "latest_checkpointed_iteration.txt.torn").exists()


# verl's dataloader state (data.pt) on resume ------------------------------------------------------------------------
def _checkpoint(ckpt, step, data_pt):
    actor = ckpt / f"global_step_{step}" / "actor"
    actor.mkdir(parents=True)
    (actor / "model_world_size_8_rank_0.pt").write_bytes(b"{}")
    if data_pt:
        (ckpt / f"global_step_{step}" / "data.pt").write_bytes(b"{}")
    (ckpt / "latest_checkpointed_iteration.txt").write_text(str(step))


def test_verl_warns_and_goes_on_when_the_checkpoint_has_no_dataloader_state(verl):
    v1 = (verl / "trainer/ppo/v1/trainer_base.py").read_text()
    body = v1[v1.index("# 4. load dataloader checkpoint") : v1.index("# 5. restore TransferQueue state")]
    assert "if os.path.exists(dataloader_local_path):" in body and "raise" not in body
    assert (
        'logger.warning(f"Warning: No dataloader state found at {dataloader_local_path}, will start from scratch")'
        in body
    )
    classic = (verl / "trainer/ppo/ray_trainer.py").read_text()  # the one-step-off trainer's _load_checkpoint
    assert 'print(f"Warning: No dataloader state found at {dataloader_local_path}, will start from scratch")' in classic


def test_standin_warns_like_verl_when_the_checkpoint_has_no_dataloader_state(standin_tree, tmp_path):
    """The stand-in resumed a checkpoint without data.pt silently; verl warns that its dataloader starts from
    scratch (and resumes the step)."""
    ckpt = tmp_path / "ckpt"
    _checkpoint(ckpt, 1, data_pt=False)
    r = run_standin(standin_tree, *train_args(ckpt))
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-2000:]
    warn = f"Warning: No dataloader state found at {ckpt}/global_step_1/data.pt, will start from scratch"
    line = next(ln for ln in out.splitlines() if warn in ln)
    assert line.split(":", 1)[0].endswith("WARNING") and line.endswith(warn), line
    assert "step:2 - " in out and "step:1 - " not in out


def test_standin_says_nothing_when_the_checkpoint_has_its_dataloader_state(standin_tree, tmp_path):
    ckpt = tmp_path / "ckpt"
    _checkpoint(ckpt, 1, data_pt=True)
    r = run_standin(standin_tree, *train_args(ckpt))
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "No dataloader state" not in out, out[-2000:]


def test_a_resume_without_data_pt_is_recorded_as_a_restarted_data_order(tmp_path, capsys):
    from dapo_ops.agent.supervisor.checkpoints import note_data_order

    ckpt = tmp_path / "ckpt"
    _checkpoint(ckpt, 1, data_pt=False)
    _checkpoint(ckpt, 2, data_pt=True)
    att = {"n": 2}
    assert note_data_order(att, str(ckpt), 1) and att["data_order_restarts"] is True
    err = capsys.readouterr().err
    assert "attempt 2 resumes from global_step_1 without data.pt" in err and "data order restarts" in err
    fresh = {"n": 1}
    assert not note_data_order(fresh, str(ckpt), 2) and not note_data_order(fresh, str(ckpt), None)
    assert "data_order_restarts" not in fresh and capsys.readouterr().err == ""


def test_status_says_a_resumed_attempt_restarts_its_data_order():
    from dapo_ops.control.status import events as se
    from dapo_ops.control.status import rows as sv

    run = {"run_id": "r1", "status": "running", "attempt": 2, "step": None, "total_steps": 30, "started_at": 1.0}
    run["pids"] = {"supervisor": 5}
    att = {"n": 2, "features": [], "resumed_from": 10, "step_reached": 10, "data_order_restarts": True}
    row = sv.build_row("h3", {"run": dict(run, attempts=[att]), "tail": "", "now": 9.0, "supervisor_alive": True})
    assert se.events(None, row)[0] == (
        "h3: run r1 running, attempt 2, resumes from checkpoint step 10/30 without its data order "
        "(no data.pt: the data restarts), no step of its own yet"
    )


# verl's config dataclasses (__post_init__ / validate) ----------------------------------------------------------------
def test_verl_builds_the_actor_and_rollout_dataclasses_with_these_checks(verl):
    actor = (verl / "workers/config/actor.py").read_text()
    assert "When using sequence parallelism for actor/ref policy, you must enable `use_remove_padding`." in actor
    rollout = (verl / "workers/config/rollout.py").read_text()
    assert "Rollout mode 'sync' has been removed." in rollout
    assert 'f"Current rollout {self.name=} not implemented pipeline_model_parallel_size > 1 yet."' in rollout
    engine = (verl / "workers/config/engine.py").read_text()
    assert (
        'assert self.strategy in ["fsdp", "fsdp2", "fsdp_turbo"], f"strategy {self.strategy} not supported"' in engine
    )
    workers = (verl / "workers/engine_workers.py").read_text()
    assert "rollout_config: RolloutConfig = omega_conf_to_dataclass(self.config.rollout)" in workers


def _dataclass_errors(root, *overrides):
    """preflight's dataclass step (dapo_ops/agent/verlcheck.py) over the stand-in's verl, in a subprocess."""
    code = (
        "import sys, json\n"
        "from hydra import compose, initialize_config_dir\n"
        "from dapo_ops.agent.verlcheck import dataclass_errors\n"
        f"with initialize_config_dir(config_dir={str(root / 'verl/trainer/config')!r}, version_base=None):\n"
        "    cfg = compose(config_name='ppo_trainer', overrides=sys.argv[1:])\n"
        "print(json.dumps(dataclass_errors(cfg)))\n"
    )
    env = dict(os.environ, PYTHONPATH=f"{root}{os.pathsep}{REPO}")
    r = subprocess.run(
        [sys.executable, "-c", code, *overrides], env=env, capture_output=True, text=True, timeout=120, cwd=str(root)
    )
    assert r.returncode == 0, r.stderr[-2000:]
    import json

    return json.loads(r.stdout.strip().splitlines()[-1])


DYN = ("actor_rollout_ref.actor.use_dynamic_bsz=True", "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=True")


def test_preflights_dataclass_step_runs_verls_post_init_checks_in_the_sandbox(standin_tree):
    """The stand-in's omega_conf_to_dataclass returned the config unchanged: preflight's dataclass step passed a
    rollout / actor config verl refuses."""
    ok, _ = _dataclass_errors(standin_tree, *DYN, "actor_rollout_ref.rollout.name=vllm")
    assert ok == []
    bad, _ = _dataclass_errors(
        standin_tree, *DYN, "actor_rollout_ref.rollout.name=vllm", "actor_rollout_ref.rollout.mode=sync"
    )
    assert len(bad) == 1 and bad[0].startswith("actor_rollout_ref.rollout: Rollout mode 'sync' has been removed."), bad
    pp = ("actor_rollout_ref.rollout.name=vllm", "actor_rollout_ref.rollout.pipeline_model_parallel_size=2")
    bad, _ = _dataclass_errors(standin_tree, *DYN, *pp)
    assert "Current rollout self.name='vllm' not implemented pipeline_model_parallel_size > 1 yet." in bad[0], bad
    sp = (
        "actor_rollout_ref.actor.ulysses_sequence_parallel_size=2",
        "actor_rollout_ref.model.use_remove_padding=False",
    )
    bad, _ = _dataclass_errors(standin_tree, *DYN, "actor_rollout_ref.rollout.name=vllm", *sp)
    assert bad[0].startswith("validate_config (verl/trainer/main_ppo.py:177): When using sequence parallelism"), bad
    fsdp = "actor_rollout_ref.actor.fsdp_config.strategy=ddp"
    bad, _ = _dataclass_errors(standin_tree, *DYN, "actor_rollout_ref.rollout.name=vllm", fsdp)
    assert "strategy ddp not supported" in bad[0], bad


def test_standin_main_ppo_refuses_ulysses_without_remove_padding_as_verl_does(standin_tree, tmp_path):
    r = run_standin(
        standin_tree,
        *train_args(tmp_path / "ckpt"),
        "actor_rollout_ref.actor.ulysses_sequence_parallel_size=2",
        "actor_rollout_ref.model.use_remove_padding=False",
    )
    out = r.stdout + r.stderr
    assert r.returncode == 1, out[-2000:]
    assert "you must enable `use_remove_padding`" in out and "ray init kwargs" not in out


def plan_with(flags, *overrides):
    st = settings.resolve(flags, {}, {})
    inputs = planning.PlanInputs(
        settings=st, host=NPU8, mode="dapo", run_id=RUN_ID, swanlab_logger=False, extra_overrides=overrides
    )
    return planning.make_plan(planning.draft_plan(inputs), None)


def test_plan_refuses_ulysses_without_remove_padding():
    flags = {"framework": "fsdp", "steps": 5, "features": "-remove_padding"}
    with pytest.raises(planning.PlanError) as e:
        plan_with(flags, "actor_rollout_ref.actor.ulysses_sequence_parallel_size=2")
    msg = str(e.value)
    assert "ulysses_sequence_parallel_size=2 needs packed sequences" in msg and "actor.py:339" in msg
    assert "\n" not in msg
    plan_with(dict(flags, features=""), "actor_rollout_ref.actor.ulysses_sequence_parallel_size=2")
    plan_with(flags, "actor_rollout_ref.actor.ulysses_sequence_parallel_size=1")


# verl's unknown V1 trainer mode ---------------------------------------------------------------------------------------
def test_verl_names_the_registered_trainers_when_the_mode_is_unknown(verl):
    v1 = (verl / "trainer/ppo/v1/trainer_base.py").read_text()
    assert "raise ValueError(f\"Unknown trainer '{name}'. Available trainers: {available}.\") from None" in v1
    assert 'available = ", ".join(sorted(TRAINER_REGISTRY))' in v1
    registered = sorted(
        m.group(1)
        for f in (verl / "trainer/ppo/v1").glob("*.py")
        for m in __import__("re").finditer(r'@register_trainer\("(\w+)"\)', f.read_text())
    )
    assert registered == ["colocate_async", "separate_async", "sync"], registered


def test_standin_says_verls_unknown_trainer_line_and_the_classifier_names_the_key(standin_tree, tmp_path):
    """The stand-in said 'Unknown trainer mode: X', a wording verl 0.9.1 never prints; verl's own line was no config
    error to the classifier (crash-other)."""
    from dapo_ops.core import classify as C

    r = run_standin(standin_tree, *train_args(tmp_path / "ckpt"), "trainer.v1.trainer_mode=colocate")
    out = r.stdout + r.stderr
    assert r.returncode == 1, out[-2000:]
    assert "Unknown trainer 'colocate'. Available trainers: colocate_async, separate_async, sync." in out, out[-2000:]
    log = tmp_path / "attempt.log"
    log.write_text(out)
    v = C.classify_file(log, exit_code=1)
    assert v.cls == "config-error" and v.detail.get("key") == "trainer.v1.trainer_mode", (v.cls, v.detail)


@pytest.mark.parametrize(
    "override,key,value,verl_file,verl_text",
    [
        (
            "trainer.v1.sampler.max_off_policy_threshold=-1",
            "trainer.v1.sampler.max_off_policy_threshold",
            "-1",
            "trainer/ppo/v1/replay_buffer.py",
            "assert isinstance(self.max_off_policy_threshold, int) and self.max_off_policy_threshold > 0, (",
        ),
        (
            "trainer.resume_mode=foo",
            "trainer.resume_mode",
            "foo",
            "trainer/ppo/v1/trainer_base.py",
            'logger.exception(f"Unknown resume mode {self.config.trainer.resume_mode}")',
        ),
    ],
)
def test_standin_ends_a_start_up_check_as_verl_and_the_classifier_stops_on_the_key(
    standin_tree, tmp_path, verl, override, key, value, verl_file, verl_text
):
    """verl 0.9.1's replay-buffer assert and its resume-mode check, after the config composed: the stand-in raised the
    assert from its own frame (no verl frame in the report) and a NotImplementedError verl never raises for the resume
    mode; the classifier called both crash-other (retry-free, but naming nothing). Now: verl's frames and lines, and
    config-error naming the key and value."""
    from dapo_ops.core import classify as C

    assert verl_text in (verl / verl_file).read_text()
    r = run_standin(standin_tree, *train_args(tmp_path / "ckpt"), override)
    out = r.stdout + r.stderr
    assert r.returncode == 1, out[-2000:]
    log = tmp_path / "attempt.log"
    log.write_text(out)
    v = C.classify_file(log, exit_code=1)
    assert (v.cls, v.detail.get("cause"), v.detail.get("key"), v.detail.get("value")) == (
        "config-error",
        "verl-check",
        key,
        value,
    ), (v.detail, out[-2000:])


# a checkpoint save that fails in the workers ------------------------------------------------------------------------
def test_verl_saves_the_workers_shards_before_data_pt_and_the_tracker(verl):
    """verl 0.9.1's V1 ``_save_checkpoint``: the workers' blocking save first, then ``data.pt``, then the tracker; the
    FSDP manager makes the actor dir with ``local_mkdir_safe`` (a failed makedirs is printed as a lock warning and
    tried again) before its ``torch.save``s."""
    v1 = (verl / "trainer/ppo/v1/trainer_base.py").read_text()
    body = v1[v1.index("    def _save_checkpoint(self):") :]
    wg, data, tracker = (
        body.index("self.actor_rollout_wg.save_checkpoint("),
        body.index("torch.save(self.train_dataloader.state_dict(), dataloader_local_path)"),
        body.index('with open(local_latest_checkpointed_iteration, "w") as f:'),
    )
    assert wg < data < tracker
    mgr = (verl / "utils/checkpoint/fsdp_checkpoint_manager.py").read_text().splitlines()
    assert mgr[298].strip() == "local_path = local_mkdir_safe(local_path)"
    assert mgr[346].strip() == "torch.save(model_state_dict, model_path)"
    fs = (verl / "utils/fs.py").read_text()
    assert 'print(f"Warning: Failed to acquire lock for {path}: {e}")' in fs


def _save_error_run(standin_tree, tmp_path, variant):
    (tmp_path / "scenario.json").write_text(
        '{"step_time": 0.01, "failure": {"kind": "save-error", "step": 4, "variant": "%s"}}' % variant
    )
    ckpt = tmp_path / "ckpt"
    args = [a for a in train_args(ckpt, steps=6) if not a.startswith("trainer.save_freq")]
    r = run_standin(standin_tree, *args, "trainer.save_freq=2")
    return r, ckpt


@pytest.mark.parametrize(
    "variant,cause,evidence",
    [
        ("disk-full", "disk-full", "PytorchStreamWriter failed writing file data/0: file write failed"),
        ("permission", "write-permission", "PermissionError: [Errno 13] Permission denied: '{ckpt}/global_step_4'"),
    ],
)
def test_a_failed_save_ends_like_verl_keeps_the_tracker_and_the_verdict_says_why(
    standin_tree, tmp_path, variant, cause, evidence
):
    """The stand-in had no failing save (a full disk / a directory it may not write). verl raises the worker's error
    in the driver (RayTaskError, exit 1) with no data.pt and the tracker on the previous save; the classifier
    named a refused write no class (crash-other, 'matches no known class'), so its verdict said nothing of the
    permission nor its fix."""
    from dapo_ops.agent.supervisor import checkpoints
    from dapo_ops.core import classify as C

    r, ckpt = _save_error_run(standin_tree, tmp_path, variant)
    out = r.stdout + r.stderr
    assert r.returncode == 1, out[-2000:]
    assert f"ray.exceptions.RayTaskError({'PermissionError' if variant == 'permission' else 'RuntimeError'}): " in out
    assert "ray::WorkerDict.actor_rollout_save_checkpoint()" in out
    assert evidence.format(ckpt=ckpt) in out
    assert "step:3 - " in out and "step:4 - " not in out
    assert (ckpt / "latest_checkpointed_iteration.txt").read_text() == "2"
    assert not (ckpt / "global_step_4" / "data.pt").exists()
    assert (ckpt / "global_step_4").exists() == (variant == "disk-full")  # a torn actor dir, or none at all
    assert checkpoints.latest_checkpoint(str(ckpt)) == 2  # the next attempt resumes from the complete save
    log = tmp_path / "attempt.log"
    log.write_text(out)
    v = C.classify_file(log, exit_code=1)
    assert (v.cls, v.detail.get("cause"), v.action_kind) == ("crash-other", cause, "stop"), v.to_json()
    if variant == "permission":
        assert v.detail["path"] == f"{ckpt}/global_step_4"
        assert "permission denied" in v.action and f"{ckpt}/global_step_4" in v.action
        assert "writable" in v.hint and "resume" in v.hint


# Ray loses a worker mid-step -----------------------------------------------------------------------------------------
def test_verl_raises_a_worker_groups_failure_out_of_the_taskrunner_and_the_driver(verl):
    """A blocking worker-group call ray.get()s its workers (so a dead worker's ActorDiedError is raised in the
    TaskRunner) and the driver ray.get()s the TaskRunner: the driver survives and fails (exit 1), not 137."""
    base = (verl / "single_controller/ray/base.py").read_text().splitlines()
    assert base[55].strip() == "output = ray.get(output)"
    main = (verl / "trainer/main_ppo.py").read_text().splitlines()
    assert main[92].strip() == "ray.get(runner.run.remote(config))"


def test_standin_loses_a_worker_as_verl_does_exit_1_with_rays_actor_died_lines(standin_tree, tmp_path):
    """The stand-in had no lost actor mid-step (its 'crash' cue is a thread-limit error): a real child process is
    SIGKILLed and the driver ends with Ray's lines and exit 1; the classifier's verdict is a crash (stop)."""
    from dapo_ops.core import classify as C

    (tmp_path / "scenario.json").write_text('{"step_time": 0.01, "failure": {"kind": "actor-died", "step": 2}}')
    r = run_standin(standin_tree, *train_args(tmp_path / "ckpt", steps=4))
    out = r.stdout + r.stderr
    assert r.returncode == 1, out[-2000:]
    assert "A worker died or was killed while executing a task by an unexpected system error." in out
    assert "ray.exceptions.RayTaskError(ActorDiedError): \x1b[36mray::TaskRunnerV1.run()\x1b[39m" in out
    assert "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task." in out
    assert "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR" in out
    assert "step:1 - " in out and "step:2 - " not in out
    log = tmp_path / "attempt.log"
    log.write_text(out)
    v = C.classify_file(log, exit_code=1)
    assert (v.cls, v.action_kind) == ("crash-other", "stop"), v.to_json()


def test_a_failed_exit_after_the_kernel_oom_killer_fired_is_a_host_oom(tmp_path):
    """The OOM killer takes a Ray worker (the largest process), the driver ends with ActorDiedError and exit 1: the
    supervisor read the container's oom_kill counter only for exit 137/9, so a host OOM was an unknown crash."""
    from dapo_ops.agent.supervisor import attempt

    counter = tmp_path / "memory.events"
    counter.write_text("oom 0\noom_kill 2\n")
    oom0 = (str(counter), 1)
    att: dict = {"n": 1}
    assert attempt.kernel_oom(oom0, 1, att) == {"OOMKilled": True, "source": str(counter)}
    assert att["oom_kills"] == 1
    assert attempt.kernel_oom((str(counter), 2), 1, {"n": 1}) is None  # counter unchanged: no OOM
    assert attempt.kernel_oom(oom0, 0, {"n": 1}) is None  # verl succeeded: nothing to explain


# rollout settings verl's RolloutConfig refuses -----------------------------------------------------------------------
def test_verl_refuses_the_sync_rollout_and_rollout_pipeline_parallelism(verl):
    src = (verl / "workers/config/rollout.py").read_text().splitlines()
    assert src[280].strip() == 'if self.mode == "sync":' and src[281].strip() == "raise ValueError("
    assert src[318].strip() == "if self.pipeline_model_parallel_size > 1:"
    assert src[319].strip() == 'if self.name == "vllm" or self.name == "sglang" or self.name == "trtllm":'
    assert src[320].strip() == "raise NotImplementedError("


@pytest.mark.parametrize("flags", [{"framework": "fsdp", "steps": 5}, {"framework": "megatron", "steps": 5}])
@pytest.mark.parametrize(
    "override,says",
    [
        ("actor_rollout_ref.rollout.mode=sync", "removed the sync rollout"),
        ("actor_rollout_ref.rollout.pipeline_model_parallel_size=2", "has no pipeline parallelism"),
    ],
)
def test_plan_refuses_rollout_settings_verl_refuses_in_one_line(flags, override, says):
    """Both passed the plan and reached verl, which raises them in the rollout worker after start-up."""
    with pytest.raises(planning.PlanError) as e:
        plan_with(flags, override)
    msg = str(e.value)
    assert "\n" not in msg and says in msg and override in msg, msg


def test_plan_keeps_the_rollout_settings_verl_accepts():
    flags = {"framework": "fsdp", "steps": 5}
    for ok in ("actor_rollout_ref.rollout.mode=async", "actor_rollout_ref.rollout.pipeline_model_parallel_size=1"):
        assert plan_with(flags, ok) is not None


@pytest.mark.parametrize(
    "override,exc,key",
    [
        ("actor_rollout_ref.rollout.mode=sync", "ValueError", "actor_rollout_ref.rollout.mode"),
        (
            "actor_rollout_ref.rollout.pipeline_model_parallel_size=2",
            "NotImplementedError",
            "actor_rollout_ref.rollout.pipeline_model_parallel_size",
        ),
    ],
)
def test_standin_raises_the_rollout_check_out_of_the_ray_worker_and_the_classifier_names_the_key(
    standin_tree, tmp_path, override, exc, key
):
    """The stand-in raised RolloutConfig's check in its own process (a bare ValueError); verl raises it in the rollout
    worker's init_model (engine_workers.py:651), so the driver prints it twice wrapped in RayTaskError."""
    from dapo_ops.core import classify as C

    assert (REPO / "sandbox/verl_standin").exists()
    r = run_standin(standin_tree, *train_args(tmp_path / "ckpt"), override)
    out = r.stdout + r.stderr
    assert r.returncode == 1, out[-2000:]
    assert f"ray.exceptions.RayTaskError({exc}): \x1b[36mray::TaskRunnerV1.run()\x1b[39m" in out, out[-2000:]
    assert f"ray.exceptions.RayTaskError({exc}): \x1b[36mray::WorkerDict.actor_rollout_init_model()\x1b[39m" in out
    assert 'File "/verl/verl/workers/engine_workers.py", line 651, in init_model' in out
    log = tmp_path / "attempt.log"
    log.write_text(out)
    v = C.classify_file(log, exit_code=1)
    assert v.cls == "config-error" and v.detail.get("key") == key, (v.cls, v.detail)


def test_a_killed_ray_worker_ends_on_a_line_naming_the_actor_died_error_the_worker_and_where_to_look(
    standin_tree, tmp_path
):
    """A new user's trial (stand-in cue actor-died): the run ended "unclassified crash: not retried; read the
    evidence in the log". Now the ending line status / watch / the notifier show names Ray's ActorDiedError and the
    dead worker (actor, pid, node as Ray printed them), and the suggestions are commands with that pid, the run's
    own `inv logs` and its resume."""
    import re

    from dapo_ops.agent.supervisor.record import ending_line
    from dapo_ops.core import classify as C
    from dapo_ops.core import ladder
    from dapo_ops.core.features import FeatureSet
    from dapo_ops.core.runstate import RunStatus

    (tmp_path / "scenario.json").write_text('{"step_time": 0.01, "failure": {"kind": "actor-died", "step": 2}}')
    r = run_standin(standin_tree, *train_args(tmp_path / "ckpt", steps=4))
    out = r.stdout + r.stderr
    pid = re.search(r"Worker PID: (\d+)", out).group(1)
    ip = re.search(r"Worker IP address: (\S+)", out).group(1)
    (tmp_path / "attempt.log").write_text(out)
    v = C.classify_file(tmp_path / "attempt.log", exit_code=1)
    settings = {"steps": 4, "run_id": "20261129-150000-abcd", "hosts": ["h1"]}
    d = ladder.decide(FeatureSet(), v.cls, v.detail, 0, 2, {}, settings)
    line = ending_line(RunStatus.FAILED, d.reason, 1, 4)
    assert line == (
        f"failed: a Ray worker died (ActorDiedError: WorkerDict pid {pid} on {ip} was killed or crashed, no error "
        "of its own, no OOM evidence): not retried at step 1/4"
    ), line
    said = "\n".join(d.suggestions)
    assert f"/tmp/ray/session_latest/logs/*-{pid}.*" in said and "dmesg -T" in said, said
    assert "`inv logs -H h1 --run 20261129-150000-abcd --errors`" in said, said
    assert "`inv launch -H h1 --resume 20261129-150000-abcd`" in said, said
    assert "<" not in said, said  # no placeholder


@pytest.mark.parametrize("variant", ["permission", "disk-full"])
def test_a_failed_checkpoint_save_ends_naming_the_path_with_commands_on_the_runs_real_dirs(
    standin_tree, tmp_path, variant
):
    """A new user's trial: a checkpoint save refused with permission denied ended with no path and no fix, and a full
    disk's `try:` line said "`df -h the run's disk`". Every suggestion is now a command on the paths the tool knows:
    the run's checkpoint dir and runs_dir (what the supervisor's settings carry), never a placeholder."""
    import json

    from dapo_ops.agent.supervisor.record import ending_line
    from dapo_ops.core import classify as C
    from dapo_ops.core import ladder
    from dapo_ops.core.features import FeatureSet
    from dapo_ops.core.runstate import RunStatus

    runs = tmp_path / "dapo_runs"
    ckpt = runs / "20261129-150000-abcd" / "checkpoints"
    (tmp_path / "scenario.json").write_text(
        json.dumps({"step_time": 0.01, "failure": {"kind": "save-error", "step": 2, "variant": variant}})
    )
    args = [a for a in train_args(ckpt, steps=4) if not a.startswith("trainer.save_freq")] + ["trainer.save_freq=1"]
    r = run_standin(standin_tree, *args)
    (tmp_path / "attempt.log").write_text(r.stdout + r.stderr)
    v = C.classify_file(tmp_path / "attempt.log", exit_code=1)
    run = {"steps": 4, "run_id": "20261129-150000-abcd", "hosts": ["h1"], "ckpt_dir": str(ckpt), "runs_dir": str(runs)}
    d = ladder.decide(FeatureSet(), v.cls, v.detail, 0, 2, {}, run)
    line = ending_line(RunStatus.FAILED, d.reason, 1, 4)
    said = "\n".join(d.suggestions)
    assert f"{ckpt}/global_step_2" in line, line
    if variant == "permission":
        assert line.startswith("failed: permission denied / read-only file system writing "), line
        assert f"`ls -ld {ckpt} && id && touch {ckpt}/.w && rm {ckpt}/.w`" in said, said
    else:
        assert f"`df -h {runs}`" in said and f"`du -sh {runs}/*/checkpoints`" in said, said
    assert "`inv launch -H h1 --resume 20261129-150000-abcd`" in said, said
    assert "<" not in said and "the run's disk" not in said, said


# how a failed run ends: Hydra's report over verl's driver frames ---------------------------------------------------
REAL_RUNS = REPO / "tests" / "fixtures" / "real-verl"


def _site(text: str) -> str:
    """Frame paths with the directory that holds ``verl`` / ``ray`` replaced by ``<site>`` (the real runs':
    ``/tmp/site``; the stand-in's: its own tree and this Python's site-packages)."""
    import re

    return re.sub(r'File "[^"]*?/(verl|ray)/', r'File "<site>/\1/', text)


def _report(text: str) -> list[str]:
    """The lines of Hydra's report: from ``Error executing job with overrides`` to the HYDRA_FULL_ERROR line."""
    lines = text.splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.startswith("Error executing job with overrides: ["))
    j = next(k for k in range(i, len(lines)) if lines[k].startswith("Set the environment variable HYDRA_FULL_ERROR"))
    return lines[i : j + 1]


def _driver_block(report: list[str]) -> list[str]:
    """The driver's traceback: ``Traceback ...`` and its frame lines up to the exception line."""
    assert report[1] == "Traceback (most recent call last):", report[:3]
    k = next(k for k in range(2, len(report)) if not report[k].startswith("  "))
    return [_site(ln) for ln in report[1:k]] + [report[k]]


def test_the_real_runs_end_with_hydras_report_over_the_driver_frames_of_verl():
    real = _report((REAL_RUNS / "tool-runs" / "d-update-oom" / "train.log").read_text())
    block = _driver_block(real)
    assert block[1:5] == [
        '  File "<site>/verl/trainer/main_ppo.py", line 184, in main',
        "    run_ppo(config, task_runner_class=TaskRunnerV1)",
        '  File "<site>/verl/trainer/main_ppo.py", line 93, in run_ppo',
        "    ray.get(runner.run.remote(config))",
    ]
    assert block[-2:] == [
        "    raise value.as_instanceof_cause()",
        "ray.exceptions.RayTaskError(OutOfMemoryError): \x1b[36mray::TaskRunnerV1.run()\x1b[39m "
        + block[-1].split("\x1b[39m ", 1)[1],
    ]
    assert real[-2:] == ["", "Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace."]


def test_a_failed_standin_run_ends_as_the_real_run_over_verls_driver_frames_never_its_own(standin_tree, tmp_path):
    """The stand-in raised its cue exceptions from its own code, so Hydra's traceback showed the stand-in's frames
    (``verl/_standin/trainer.py ... raise texts.fake_exc(...)`` / ``raise exc``) where a real run shows verl's driver
    (``main`` -> ``run_ppo`` -> Ray's ``get``): the same frames, lines and source as d-update-oom's real log."""
    (tmp_path / "scenario.json").write_text(
        '{"step_time": 0.01, "accelerator": "gpu", "failure": {"kind": "oom-device", "step": 2, "hang_s": 0}}'
    )
    r = run_standin(standin_tree, *train_args(tmp_path / "ckpt", steps=4))
    out = r.stdout + r.stderr
    assert r.returncode == 1, out[-2000:]
    assert "/_standin/" not in out and "raise exc" not in out and "fake_exc" not in out, out[-3000:]
    mine = _driver_block(_report(r.stderr))
    real = _driver_block(_report((REAL_RUNS / "tool-runs" / "d-update-oom" / "train.log").read_text()))
    assert mine[:-1] == real[:-1], "\n".join(mine)
    assert mine[-1].startswith(
        "ray.exceptions.RayTaskError(OutOfMemoryError): \x1b[36mray::TaskRunnerV1.run()\x1b[39m (pid="
    )
    assert _report(r.stderr)[-2:] == ["", "Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace."]
    assert r.stderr.rstrip().endswith("Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.")


def test_a_driver_check_ends_under_verls_main_and_a_runner_error_comes_wrapped_by_ray(standin_tree, tmp_path):
    """validate_config fails in verl's driver (main_ppo.py:177), before Ray: its report shows ``main``'s call, no
    Ray frame; an error of the TaskRunner (the unknown V1 mode) comes out of ``ray.get`` as Ray's
    ``RayTaskError(ValueError)`` of ``TaskRunnerV1.run()``, as every real failed run shows."""
    r = run_standin(
        standin_tree,
        "actor_rollout_ref.actor.use_dynamic_bsz=False",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1",
        "trainer.n_gpus_per_node=8",
    )
    block = _driver_block(_report(r.stderr))
    assert r.returncode == 1 and "/_standin/" not in r.stderr, r.stderr[-3000:]
    assert block[1:3] == ['  File "<site>/verl/trainer/main_ppo.py", line 177, in main', "    validate_config("]
    assert not any("/ray/" in ln for ln in block)
    assert block[-1].startswith("ValueError: [actor_rollout_ref.rollout] Please set at least one of")

    r = run_standin(standin_tree, *train_args(tmp_path / "ckpt"), "trainer.v1.trainer_mode=colocate")
    rep = _report(r.stderr)
    assert r.returncode == 1 and "/_standin/" not in r.stderr, r.stderr[-3000:]
    assert _driver_block(rep)[-2] == "    raise value.as_instanceof_cause()"
    # Ray's header of the TaskRunner's task, in its colour, and the carets of Ray's frames it strips (as real logs)
    assert rep[-6].startswith(
        "ray.exceptions.RayTaskError(ValueError): \x1b[36mray::TaskRunnerV1.run()\x1b[39m (pid="
    ), rep
    assert rep[-5:-3] == [" " * 11 + "^" * 36, " " * 11 + "^" * 31], rep[-6:]
    assert (
        rep[-3] == "ValueError: Unknown trainer 'colocate'. Available trainers: colocate_async, separate_async, sync."
    )


def test_with_hydra_full_error_the_standin_prints_pythons_report_with_hydras_frames_and_verls(
    standin_tree, tmp_path, monkeypatch
):
    """HYDRA_FULL_ERROR=1 (hydra/_internal/utils.py run_and_report): Hydra's first line, then Python's own report
    of the re-raised exception, Hydra's frames included and no closing hint; exit 1."""
    monkeypatch.setenv("HYDRA_FULL_ERROR", "1")
    (tmp_path / "scenario.json").write_text('{"step_time": 0.01, "failure": {"kind": "crash", "step": 1}}')
    r = run_standin(standin_tree, *train_args(tmp_path / "ckpt"))
    err = r.stderr
    assert r.returncode == 1, err[-3000:]
    assert "/_standin/" not in err and "HYDRA_FULL_ERROR" not in err, err[-3000:]
    tail = _site(err[err.index("Error executing job with overrides: [") :]).splitlines()
    assert tail[1] == "Traceback (most recent call last):"
    i = tail.index('  File "<site>/verl/trainer/main_ppo.py", line 196, in <module>')
    assert tail[i + 1] == "    main()"
    assert any(ln.endswith("in run_job") for ln in tail[i:])  # Hydra's frames
    j = tail.index('  File "<site>/verl/trainer/main_ppo.py", line 184, in main')
    assert j > i and tail[j + 2] == '  File "<site>/verl/trainer/main_ppo.py", line 93, in run_ppo'
    assert any(
        ln.startswith("ray.exceptions.RayTaskError(ActorDiedError): \x1b[36mray::TaskRunnerV1.run()\x1b[39m")
        for ln in tail
    )


def _remote(report: list[str]) -> list[str]:
    """The remote part of the report (Ray's ``RayTaskError`` text) as a classifier reads it: each verl frame as
    ``<file under verl/>:<function>``, Ray's headers cut at their pid, and each run of caret lines that stands under
    no source line (Ray's stripped frames) as ``^ x <n>``; free of sites, line numbers and the model's own frames."""
    import re

    out = []
    start = next(k for k, ln in enumerate(report) if "ray::TaskRunnerV1.run()" in ln)
    for k in range(start, len(report) - 2):
        ln, prev = report[k], report[k - 1]
        m = re.match(
            r'  File "[^"]*/verl/((?:trainer|workers|single_controller|utils|checkpoint_engine)/[^"]+)", line \d+, in (\S+)',
            ln,
        )
        if m:
            out.append(f"{m.group(1)}:{m.group(2)}")
        elif ln.startswith("ray.exceptions."):
            out.append(ln.split(" (pid=")[0])
        elif set(ln.strip()) == {"^"} and (prev.startswith("ray.exceptions.") or set(prev.strip()) == {"^"}):
            if out[-1].startswith("^ x "):
                out[-1] = f"^ x {int(out[-1][4:]) + 1}"
            else:
                out.append("^ x 1")
    return out


@pytest.mark.parametrize(
    "fixture,cue",
    [
        ("d-update-oom", '{"kind": "oom-device", "step": 2, "hang_s": 0}'),
        ("c-weight-sync-oom", '{"kind": "oom-device", "step": 2, "hang_s": 0, "phase": "update_weights"}'),
    ],
)
def test_a_standin_oom_carries_the_remote_frames_and_ray_lines_of_the_real_v1_run(standin_tree, tmp_path, fixture, cue):
    """The stand-in's update and weight-sync OOMs showed V0 frames (``ray_trainer.py ... in fit``, ``dp_actor.py``),
    Ray's headers without their colour or the carets of the frames Ray strips, and the weight sync ended on
    ``RuntimeError: CUDA Error: out of memory``: now the same verl frames, Ray lines and last line as the real
    colocate_async runs (d-update-oom: ``main_ppo.py run`` -> ``trainer_base.py fit/step/_step_once/_update_actor``
    -> engine_workers; c-weight-sync-oom: ``on_step_end`` -> checkpoint engine -> ``vLLMHttpServer.wake_up()`` ->
    ``Exception: Call to wake_up method failed``)."""
    (tmp_path / "scenario.json").write_text('{"step_time": 0.01, "accelerator": "gpu", "failure": %s}' % cue)
    r = run_standin(standin_tree, *train_args(tmp_path / "ckpt", steps=4), "trainer.v1.trainer_mode=colocate_async")
    assert r.returncode == 1, r.stderr[-3000:]
    mine = _remote(_report(r.stderr))
    real = _remote(_report(attempt_one(REAL_RUNS / "tool-runs" / fixture / "train.log")))
    assert mine == real, "\n".join(mine)
    real_last = _report(attempt_one(REAL_RUNS / "tool-runs" / fixture / "train.log"))[-3]
    assert _report(r.stderr)[-3].split(": ", 1)[0] == real_last.split(": ", 1)[0], r.stderr[-500:]


def attempt_one(path) -> str:
    """The first attempt of a real tool run's train.log (its first Hydra report)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    return text[: text.index("===== dapo-ops attempt 1 end")]
