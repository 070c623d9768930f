"""Data sufficiency before launch (issue 42 item 4): the steps the train data feeds before verl 0.9.1's epoch limit
(dapo_ops/core/datafeed.py) and preflight's ``data-feed`` check (dapo_ops/control/preflight/inputs.py), a quick
check, so ``inv launch`` refuses the run too. On main's code the H200 case (train.parquet: 8 rows, --steps 40,
batch 8) passed preflight silently: the check did not exist."""

from __future__ import annotations

import re
from pathlib import Path

from dapo_ops.control.preflight import inputs
from dapo_ops.control.preflight.checks import QUICK_CHECKS
from dapo_ops.control.preflight.plan_view import PlanView
from dapo_ops.core import datafeed
from plan_helpers import plan_for

VERL = Path("/tmp/verl091/verl")


def _pv(**settings):
    s = {"train_file": "/data/train.parquet", "val_file": "/data/val.parquet", "steps": 40, "train_batch_size": 8}
    s.update(settings)
    return PlanView({"settings": s}, [])


def _data(rows, val_rows=30):
    return [
        {"path": "/data/train.parquet", "ok": True, "rows": rows},
        {"path": "/data/val.parquet", "ok": True, "rows": val_rows},
    ]


def _feed_check(pv, data):
    return {c.name: c for c in inputs._input_checks(None, pv, {"data": data})}["data-feed"]


def test_the_h200_case_is_refused_with_the_numbers_and_the_fix():
    """8 rows, batch 8, --steps 40: one step per epoch x verl's 30 epochs = 30 steps; refused in one line."""
    ck = _feed_check(_pv(), _data(8))
    assert ck.status == "fail"
    assert "--steps 40 is more than the data feeds: 8 rows // batch 8 = 1 step(s)/epoch x 30 epochs = 30 steps" in (
        ck.message
    )
    assert "step 30" in ck.message and "\n" not in ck.message
    assert "trainer.total_epochs=40" in ck.fix and "--steps 30" in ck.fix and "--allow-short-data" in ck.fix
    assert "data-feed" in QUICK_CHECKS  # a launch stops on it (--skip-preflight lets it through)


def test_allow_short_data_warns_and_enough_data_is_ok():
    ck = _feed_check(_pv(allow_short_data=True), _data(8))
    assert ck.status == "warn" and "30 steps" in ck.message
    ok = _feed_check(_pv(), _data(16))  # 2 steps/epoch x 30 = 60 >= 40
    assert ok.status == "ok" and "= 60 steps >= --steps 40" in ok.message
    more_epochs = _feed_check(_pv(extra_overrides=["trainer.total_epochs=40"]), _data(8))
    assert more_epochs.status == "ok" and "x 40 epochs = 40 steps" in more_epochs.message


def test_whole_batches_only_and_fewer_rows_than_a_batch_fails_even_when_allowed():
    """verl's steps_per_epoch = len(dataset) // train_batch_size (drop_last=True); 0 divides by zero at start."""
    assert datafeed.DataFeed(rows=15, train_batch_size=8, epochs=30).max_steps == 30
    ck = _feed_check(_pv(allow_short_data=True), _data(7))
    assert ck.status == "fail" and "fewer than one batch of 8" in ck.message and "--train-batch-size <= 7" in ck.fix


def test_filter_overlong_prompts_makes_the_figure_an_upper_bound():
    ok = _feed_check(_pv(extra_overrides=["data.filter_overlong_prompts=True"]), _data(64))
    assert ok.status == "ok" and "at most 64 rows" in ok.message and "upper bound" in ok.message
    assert not datafeed.filters_overlong(["data.filter_overlong_prompts=False"])


def test_unreadable_train_data_gives_no_figure():
    bad = [{"path": "/data/train.parquet", "ok": False, "problems": ["missing"]}]
    assert "data-feed" not in {c.name for c in inputs._input_checks(None, _pv(), {"data": bad})}


def test_verl_facts_the_rule_is_built_on():
    """The cited lines of the pinned verl 0.9.1 (skipped where the unpacked wheel is absent)."""
    import pytest

    src = VERL / "trainer/ppo/v1/trainer_base.py"
    if not src.exists():
        pytest.skip("verl 0.9.1 not unpacked at /tmp/verl091")
    lines = src.read_text().splitlines()
    assert "while current_epoch < self.config.trainer.total_epochs" in lines[466]
    assert "self.steps_per_epoch = len(self.train_dataset) // self.config.data.train_batch_size" in lines[764]
    assert "current_epoch = (self.global_steps - 1) // self.steps_per_epoch" in lines[521]
    assert "total_epochs: 30" in (VERL / "trainer/config/ppo_trainer.yaml").read_text().splitlines()[143]
    assert datafeed.VERL_TOTAL_EPOCHS == 30


def test_ran_out_line():
    assert datafeed.ran_out(30, 40, 30) == "ended at step 30 of 40: the training data ran out after 30 epochs"
    assert datafeed.ran_out(40, 40, 30) is None and datafeed.ran_out(None, 40, 30) is None


def test_the_dry_run_shows_the_data_figure_when_the_data_is_here(tmp_path):
    """``inv launch --dry-run`` reads the train parquet's row count when the file is on this machine and shows the
    figure (8 rows, batch 8, --steps 40: the shortfall line); a file not here shows nothing (preflight reads it)."""
    from inputs_helpers import make_parquet

    from dapo_ops.control import settings as settings_mod
    from dapo_ops.control.launch import dryrun

    train = make_parquet(tmp_path / "train.parquet", n=8)

    def note(steps, extra=()):
        st = settings_mod.resolve(
            {"steps": steps, "train_file": str(train), "train_batch_size": 8, "ppo_mini_batch_size": 8}, {}, {}
        )
        plan = plan_for(
            settings=st,
            host=None,
            mode="dapo",
            run_id="20260101-000000-abcd",
            swanlab_logger=False,
            extra_overrides=list(extra),
        )
        return dryrun.local_data_note(plan)

    assert note(40).startswith("data:    --steps 40 is more than the data feeds: 8 rows // batch 8 = 1 step(s)/epoch")
    assert note(40, ["trainer.total_epochs=40"]) == (
        "data:    8 rows // batch 8 = 1 step(s)/epoch x 40 epochs = 40 steps >= --steps 40"
    )
    st = settings_mod.resolve({"steps": 40, "train_file": str(tmp_path / "absent.parquet")}, {}, {})
    plan = plan_for(settings=st, host=None, mode="dapo", run_id="20260101-000000-abcd", swanlab_logger=False)
    assert dryrun.local_data_note(plan) is None


def test_a_falling_filter_groups_keep_rate_warns_in_status():
    """verl 0.9.1's V1 replay buffer logs the prompt groups DAPO evicted per step
    (``training/filter_groups/evicted_samples``, replay_buffer.py:374); the supervisor keeps them per training step
    (run.json ``filter_evicted``) and ``inv status`` warns on a running run when the keep-rate fell below half its
    early level and below 50 % (on main's code nothing watched it)."""
    from dapo_ops.agent.supervisor import record
    from dapo_ops.control.status import rows

    if VERL.exists():  # the metric name is verl's own
        src = (VERL / "trainer/ppo/v1/replay_buffer.py").read_text().splitlines()
        assert 'metrics[f"{prefix}/filter_groups/evicted_samples"] = len(dapo_uids)' in src[373]
    assert datafeed.keep_rates([0, 8, 24], 8) == [1.0, 0.5, 0.25]
    assert datafeed.falling_keep_rate([0, 8, 24, 40, 56], 8) is None  # 5 steps: fewer than two windows of 3
    rec = {"step": None, "spec": {"settings": {"train_batch_size": 8}}, "status": "running", "run_id": "r"}
    att: dict = {}
    for step, evicted in enumerate([0, 1, 0, 8, 24, 40, 56], start=1):
        m = {"training/global_step": step, "actor/pg_loss": 0.1}
        if evicted:
            m[datafeed.FILTER_EVICTED_KEY] = float(evicted)
        record.on_step(rec, att, step, m)
    record.on_step(rec, att, 0, {"val-core/acc": 0.5})  # a validation line is no training step
    assert rec["filter_evicted"] == [0.0, 1.0, 0.0, 8.0, 24.0, 40.0, 56.0]
    warn = datafeed.falling_keep_rate(rec["filter_evicted"], 8)
    assert warn and warn.startswith("DAPO filter_groups keep-rate fell from 96% (first 3 steps) to 18% (last 3)")
    row = rows.build_row("h1", {"run": rec, "tail": "", "now": 1.0})
    assert warn in (row.hint or "")
    done = rows.build_row("h1", {"run": dict(rec, status="succeeded"), "tail": "", "now": 1.0})
    assert warn not in (done.hint or "")  # a finished run says what ended it
    steady = [4.0] * 8  # a steady 67 % keeps quiet
    assert datafeed.falling_keep_rate(steady, 8) is None


def test_a_resume_past_the_epoch_limit_is_data_ran_out_not_success():
    """A resume of a run that ran out trains no step (verl 0.9.1: current_epoch = global_steps // steps_per_epoch
    is already total_epochs, trainer_base.py:450,467) and exits 0: still data-ran-out at the resumed step."""
    from dapo_ops.core import classify

    log = (
        "(TaskRunnerV1 pid=2) {'trainer': {'total_epochs': 1, 'total_training_steps': 10}}\n"
        "(TaskRunnerV1 pid=2) INFO:2026-12-01 07:41:46,103:Resuming from /verl/dapo_runs/r/checkpoints/global_step_8, "
        "setting global step to 8\n"
        "(TaskRunnerV1 pid=2) Training Progress:  80%|########  | 8/10 [00:00<?, ?it/s]\n"
    )
    v = classify.classify(log, exit_code=0, planned_total=10)
    assert (v.cls, v.detail["step"], v.detail["epochs"]) == ("data-ran-out", 8, 1), v
    assert v.action.startswith("stop: ended at step 8 of 10: the training data ran out after 1 epoch;")


def test_no_epochs_suggests_no_refused_step_count():
    """``--override trainer.total_epochs=0``: the data feeds no step, and the fix named ``--steps 0``, itself refused
    (minimum 1; a new-user trial); only the fixes that can be given are named."""
    line = datafeed.DataFeed(rows=64, train_batch_size=8, epochs=0).shortfall(5)
    assert line is not None and "--steps 0" not in line and "trainer.total_epochs=1 " in line
    assert "or --steps 8 " in (datafeed.DataFeed(rows=64, train_batch_size=8, epochs=1).shortfall(9) or "")


def test_sandbox_readme_states_the_rows_and_steps_of_the_images_train_file():
    """sandbox/README.md said 512 train rows and 240 steps while sample_inputs.py writes 1024 (preflight said 480
    steps): the README's figure is checked against the code that writes the file and preflight's own arithmetic."""
    import inputs_helpers  # noqa: F401  (puts sandbox/ on sys.path)
    import sample_inputs

    from dapo_ops.core import datafeed, defaults

    readme = (Path(__file__).resolve().parent.parent / "sandbox" / "README.md").read_text()
    m = re.search(
        r"`sandbox/sample_inputs\.py` writes (\d+) train rows \((\d+) steps at batch (\d+): (\d+) an epoch x (\d+) epochs",
        readme,
    )
    assert m, "sandbox/README.md no longer states the train file's rows and steps"
    rows, steps, batch, per_epoch, epochs = map(int, m.groups())
    feed = datafeed.DataFeed(
        rows=sample_inputs.TRAIN_ROWS,
        train_batch_size=defaults.RUN["train_batch_size"],
        epochs=datafeed.VERL_TOTAL_EPOCHS,
    )
    assert (rows, batch, epochs) == (feed.rows, feed.train_batch_size, feed.epochs)
    assert (steps, per_epoch) == (feed.max_steps, feed.steps_per_epoch)
