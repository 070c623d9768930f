"""A ``--resume`` continues the memory ladder of the run it resumes (chaos soak seed 1202, episode 21).

The soak stopped a run mid-retry: attempt 1 ran out of device memory in ``update_actor`` at step 4 and the supervisor
had decided the next attempt's rung (``update-batch``: ``ppo_max_token_len_per_gpu`` 20480 -> 10240, in run.json
``setting_changes``) when ``inv stop`` came; the operator then ran ``inv launch -H h3 --steps 17 --resume RID``. The
resumed run started WITHOUT that rung (``control/launch/resume.py`` kept the ladder's features, not its setting rungs), so
its ladder climbed from the bottom again: update-batch a second time, then offload-policy, and it failed with its
``MAX_OOM_RETRIES=2`` spent before reaching ``recompute``, the rung never tried. The fixtures are that episode's
records (``bench/soak.py --seed 1202 --episode 21 --hosts 3 --keep``, bench of the old draw): the stopped run's
spec.json and run.json. Pure: the resume is replayed through ``resume.read_facts`` against a fake container and ``make_plan(resume=...)``, then the
resumed run's attempts through the supervisor's own ladder (``escalate.Ladder``) with the same OOM verdict.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from types import SimpleNamespace

import fake_ops
from dapo_ops.agent.supervisor import escalate
from dapo_ops.control import settings
from dapo_ops.control.inventory.model import Host
from dapo_ops.control.launch import plan as planning
from dapo_ops.control.launch import resume
from dapo_ops.core.features import FeatureSet

FIX = Path(__file__).parent / "fixtures" / "soak-1202-21"
OLD_SPEC = json.loads((FIX / "stopped-spec.json").read_text())
OLD_REC = json.loads((FIX / "stopped-run.json").read_text())
OLD_ID = OLD_SPEC["run_id"]
BUDGET = "actor_rollout_ref.actor.ppo_max_token_len_per_gpu"


class _Container:
    """The earlier run's files as the resume reads them (the bundle op ``runfiles resume-facts``); anything else is
    missing."""

    host = SimpleNamespace(runs_path="/verl/dapo_runs", name="h3", python="python3")

    def __init__(self, rec: dict):
        self.files = {
            f"{OLD_REC['ckpt_dir']}/latest_checkpointed_iteration.txt": "3\n",
            f"/verl/dapo_runs/{OLD_ID}/run.json": json.dumps(rec),
            f"/verl/dapo_runs/{OLD_ID}/spec.json": json.dumps(OLD_SPEC),
        }

    def run(self, cmd, **kw):  # the bundle op `runfiles resume-facts` over these files (fake_ops)
        return fake_ops.runfiles_answer(fake_ops.op_of(cmd)[1:], self.files)


def _resume(monkeypatch, given: dict | None = None, rec: dict | None = None):
    """``inv launch -H h3 --steps 17 --resume OLD_ID`` (plus ``given`` flags) as the launch does it
    (control/launch/service.py: the facts first, then the one plan with ``resume=``, then its resume line)."""
    monkeypatch.setattr(resume.runstate, "run_dir_for", lambda runs, rid: f"{runs}/{rid}")
    host = Host(name="h3", address="x", accelerator="npu", devices=8, runs_dir="/verl/dapo_runs")
    now = settings.resolve(dict({"steps": 17}, **(given or {})), {}, {})
    facts = resume.read_facts(_Container(rec or OLD_REC), OLD_ID)
    st = resume.resumed_settings(now, facts.spec)
    plan = planning.make_plan(
        planning.draft_plan(
            planning.PlanInputs(
                settings=st, host=host, mode="dapo", run_id="20261202-044356-b4d7", swanlab_logger=False, resume=facts
            )
        )
    )
    return plan, plan.resume_line


def _supervise_ooms(spec: dict, n: int) -> list:
    """The supervisor's decisions (agent/supervisor/machine.py ``_supervise``) when each of the resumed run's
    attempts meets the same device OOM in update the stopped run met (the stand-in's cue is still there)."""
    verdict = OLD_REC["attempts"][0]["verdict"]
    assert verdict["cls"] == "oom-device" and verdict["detail"]["phase"] == "update"
    fs = FeatureSet.from_json(spec["features"], spec.get("disabled_features") or ())
    changes = dict(spec.get("setting_changes") or {})
    lad = escalate.Ladder(int(spec["max_oom_retries"]))
    out = []
    for _ in range(n):
        s = dict(spec["settings"], **changes, framework=spec["framework"], mode=spec["mode"])
        d = lad.decide(fs, verdict, s)
        out.append(d)
        if d.action != "retry":
            break
        lad.count(d)
        fs = d.features
        changes.update(d.setting_changes or {})
    return out


def test_the_stopped_runs_record_holds_the_rung_it_had_decided():
    rungs = OLD_REC["setting_changes"]["memory_rungs"]
    assert OLD_REC["status"] == "stopped" and [r["rung"] for r in rungs] == ["update-batch"]
    assert OLD_REC["setting_changes"]["token_budgets"] == {BUDGET: 10240}


def test_a_resume_starts_on_the_setting_rungs_the_resumed_run_had_reached(monkeypatch):
    plan, line = _resume(monkeypatch)
    ch = plan.spec["setting_changes"]
    assert [(r["rung"], r["phase"]) for r in ch["memory_rungs"]] == [("update-batch", "update")]
    assert ch["token_budgets"] == {BUDGET: 10240}
    assert f"{BUDGET}=10240" in plan.argv  # the first attempt's verl argv runs on it
    assert "keeps update-batch(update) (its OOM ladder)" in line, line


def test_the_resumed_ladder_goes_on_to_the_rungs_not_tried_and_never_repeats_one(monkeypatch):
    plan, _ = _resume(monkeypatch)
    decisions = _supervise_ooms(plan.spec, 5)
    tried = [r["rung"] for r in OLD_REC["setting_changes"]["memory_rungs"]]
    for d in decisions:
        if d.action == "retry":
            new = (d.setting_changes.get("memory_rungs") or [])[-1:] or [
                {"rung": f.name} for f in d.features.enabled if f.source.startswith("oom-retry")
            ][-1:]
            tried.append(new[0]["rung"])
    # the whole update ladder once each (core/memladder.py phase_rungs("update"): update-batch x2 -- the second is
    # skipped at the prompt+response floor 10240 --, offload-policy, recompute), then the stop
    assert tried == ["update-batch", "offload-policy", "recompute"], tried
    assert decisions[-1].action == "stop" and "(max_oom_retries=2)" in decisions[-1].reason


def test_a_setting_given_now_wins_over_the_resumed_runs_rungs(monkeypatch):
    rec = copy.deepcopy(OLD_REC)
    rec["setting_changes"] = {
        "gpu_memory_utilization": 0.5,
        "memory_rungs": [
            {"rung": "rollout-util", "phase": "generation", "source": "oom-retry-1", "changes": {}},
        ],
    }
    plan, line = _resume(monkeypatch, {"gpu_memory_utilization": 0.7}, rec)
    assert not plan.spec.get("setting_changes"), plan.spec.get("setting_changes")
    assert "actor_rollout_ref.rollout.gpu_memory_utilization=0.7" in plan.argv
    assert "does not keep its ladder's setting rungs: it sets gpu_memory_utilization=0.5, but you set" in line, line


def test_a_resume_of_a_diverged_run_starts_from_the_last_healthy_checkpoint(monkeypatch):
    """Issue 42 item 1: the earlier run's metrics went bad at step 3 (run.json ``health``) while its tracker still
    names global_step_3 (a supervisor that died before setting it back): the plan says it resumes from the last
    healthy checkpoint (2) and carries ``diverged_at``, which the supervisor resumes below (tests/test_diverge_supervisor.py)."""
    rec = copy.deepcopy(OLD_REC)
    rec["health"] = {"bad_step": 3, "healthy_step": 2, "first_bad": {"metric": "actor/grad_norm", "step": 3}}
    plan, line = _resume(monkeypatch, rec=rec)
    assert plan.spec["diverged_at"] == {"metric": "actor/grad_norm", "step": 3}
    assert "from global_step_2 (the last healthy one: its metrics went bad at step 3)" in line, line
    plain, plain_line = _resume(monkeypatch)
    assert "diverged_at" not in plain.spec and "from global_step_3" in plain_line
