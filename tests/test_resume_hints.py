"""Every resume command a verdict, a stop or a status line prints is ``dapo_ops.core.ladder.resume_command`` of the
run: pasted as printed, it resumes that run (the new-user trial of 2026-12: a diverged run's hint said ``inv launch
--resume ID`` with no -H, which plans a run on every host of hosts.toml; a one-step-off run's said ``inv launch``,
which refuses it; a workload hang and an error storm said ``inv launch --resume <run id>``, the hang twice)."""

from __future__ import annotations

import types

import pytest

from dapo_ops.agent import occupancy
from dapo_ops.agent.supervisor import stall
from dapo_ops.control.launch import resume as resume_mod
from dapo_ops.control.launch.refusals import LaunchRefused
from dapo_ops.control.status import rows
from dapo_ops.core import defaults, features, ladder

RID = "20261201-090000-bbbb"
RUNS = {
    "one-step-off on h1": {"run_id": RID, "hosts": ["h1"], "mode": "one-step-off"},
    "sync dapo on h1,h2": {"run_id": RID, "hosts": ["h1", "h2"], "mode": "dapo", "trainer_mode": "sync"},
}
WANT = {
    "one-step-off on h1": "inv one-step-off -H h1 --resume %s" % RID,
    "sync dapo on h1,h2": "inv launch -H h1,h2 --mode sync --resume %s" % RID,
}
STOPS = {
    "diverged": {"metric": "critic/rewards/mean", "bad_step": 5, "recurred": True, "reason": "non-finite"},
    "hang": {"cause": "workload", "frame": "my_reward.py:12 score", "fix": stall.FIXES["user"], "stalled": True},
    "error-storm": {"exc": "KeyError", "message": "'answer'", "user_frame": "my_reward.py:30", "count": 9},
}


@pytest.mark.parametrize("run", sorted(RUNS))
@pytest.mark.parametrize("cls", sorted(STOPS))
def test_a_stops_suggestions_resume_the_run_once_as_pasted(cls, run):
    d = ladder.decide(features.resolve(None), cls, dict(STOPS[cls]), 0, 2, {}, dict(RUNS[run]))
    assert d.action == "stop", d
    said = [s for s in d.suggestions if "resume" in s]
    assert len(said) == 1, d.suggestions  # the hang said "then `inv launch --resume <run id>`" twice
    assert "`%s`" % WANT[run] in said[0] and "<run" not in said[0], said


def test_the_workload_fixes_say_the_fix_only():
    """The stop's suggestions add the resume (once); a fix naming its own resume doubled it."""
    assert all("resume" not in fix for fix in stall.FIXES.values())


def test_a_status_line_of_a_dead_supervisor_resumes_a_one_step_off_run_with_its_task():
    run = {
        "run_id": RID,
        "status": "running",
        "started_at": 1.0,
        "spec": {"run_id": RID, "host": "h1", "mode": "one-step-off", "settings": {}},
    }
    row = rows.build_row("h1", {"run": run, "tail": "", "now": 2.0, "supervisor_alive": False, "verl_alive": False})
    assert "`inv one-step-off -H h1 --resume %s`" % RID in row.hint, row.hint
    multi = dict(run, spec=dict(run["spec"], mode="dapo", ray={"nodes": [{"name": "h1"}, {"name": "h2"}]}))
    row = rows.build_row("h1", {"run": multi, "tail": "", "now": 2.0, "supervisor_alive": False, "verl_alive": True})
    assert "`inv launch -H h1,h2 --resume %s`" % RID in row.hint, row.hint


def test_a_busy_containers_refusal_resumes_the_run_as_it_ran():
    occ = {
        "verl": [{"run_id": RID, "pids": 2, "pgid": 7, "resume_settings": {"mode": "one-step-off", "hosts": ["h1"]}}]
    }
    assert "then `inv one-step-off -H h1 --resume %s`" % RID in occupancy.busy_reason(occ, "h1", "container")["fix"]


def test_resumes_refusal_of_another_task_names_the_runs_own_command():
    old = defaults.RunSpec.read({"run_id": RID, "host": "h1", "mode": "one-step-off", "framework": "fsdp"})
    plan = types.SimpleNamespace(run_spec=defaults.RunSpec.read({"host": "h1", "mode": "dapo", "framework": "fsdp"}))
    with pytest.raises(LaunchRefused) as e:
        resume_mod.check(plan, resume_mod.ResumeFacts(run_id=RID, spec=old))
    assert "`inv one-step-off -H h1 --resume %s`" % RID in str(e.value), e.value


def test_a_run_in_another_container_is_resumed_there():
    """``inv launch -H h3 -c verl2 ...``: the hints said ``inv launch -H h3 --resume <id>``, which looks in the
    inventory's container ("container 'verl' does not exist", a second trial): a container other than the usual
    name is in the command; the usual one adds nothing."""
    from dapo_ops.core import ladder

    spec = {"run_id": "20261207-000000-abcd", "host": "h3", "mode": "dapo", "container": "verl2", "settings": {}}
    assert (
        ladder.resume_command(ladder.resume_settings(spec)) == "inv launch -H h3 -c verl2 --resume 20261207-000000-abcd"
    )
    spec["container"] = "verl"
    assert ladder.resume_command(ladder.resume_settings(spec)) == "inv launch -H h3 --resume 20261207-000000-abcd"


@pytest.mark.parametrize("cls", sorted(STOPS))
def test_a_stops_resume_says_it_starts_over_when_no_checkpoint_was_saved(cls):
    """A run that stops before its first save resumes from the start (verl's ``resume_mode=auto`` finds no tracker;
    a diverged run's tracker is moved aside when no save is older than the bad step). A new user's trial (save_freq
    10, NaN at step 3) was told the resume "continues from the last checkpoint before step 3 (the last healthy one)",
    a checkpoint that did not exist: every stop's resume says what happens then."""
    d = ladder.decide(features.resolve(None), cls, dict(STOPS[cls]), 0, 2, {}, dict(RUNS["one-step-off on h1"]))
    said = [s for s in d.suggestions if "--resume" in s]
    assert len(said) == 1 and "from the start if none was saved" in said[0], said
