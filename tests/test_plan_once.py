"""One plan per run (issue 46 item 2): the real ``inv launch --dry-run``, ``inv launch`` and ``inv quickstart`` on a
bare host of THIS machine (``runtime = "host"``, ``transport = "local"``: sandbox/host_tree.sh's verl stand-in; no
docker, no SSH), run in this process so the planner's two stages can be counted: ``plan.draft_plan`` (inputs ->
the run's draft, ``check_spec`` once) and ``plan.make_plan`` (the draft + the host's facts -> the plan) each run
ONCE per run, and what the probe and the preflight check is the very draft the launch then finishes and starts
(public env and notifier included). On main's code the launch ran the planner body 3 times (request.py's pre-check
with a throwaway run id, ``draft_view`` for the probe, the final ``make_plan``) and quickstart 4 (its preflight
planned from other arguments: no public env, notifier or facts)."""

from __future__ import annotations

import json
import os
import sys
from types import SimpleNamespace

import pytest

from supervisor_helpers import bare_host, wait_for

from dapo_ops.cli import build_namespace, program
from dapo_ops.control.launch import plan as planning
from dapo_ops.control.launch import service as svc
from dapo_ops.control.preflight import group as preflight_group


@pytest.fixture(scope="module")
def bare(tmp_path_factory):
    root = tmp_path_factory.mktemp("plan-once")
    tree, _ = bare_host(root)
    (tree / "sandbox" / "scenario.json").write_text(json.dumps({"accelerator": "gpu", "step_time": 0.1}))
    # a [notify] section: the notifier's public config must reach the spec preflight checks and the one launch writes
    (root / "config.toml").write_text("[notify]\non_success = true\n")
    return SimpleNamespace(root=root, runs=tree / "dapo_runs")


@pytest.fixture
def counted(bare, monkeypatch):
    """Run a task in this process against the bare host with the planner's stages (and what is checked) recorded."""
    for k in list(os.environ):
        if k.startswith(("DAPO_OPS_", "SWANLAB_")) or k in ("CONTAINER", "USER_FEATURES", "TRAIN_STEPS"):
            monkeypatch.delenv(k)
    monkeypatch.setenv("DAPO_OPS_INVENTORY", str(bare.root / "hosts.toml"))
    monkeypatch.setenv("DAPO_OPS_CONFIG", str(bare.root / "config.toml"))
    monkeypatch.setenv("SWANLAB_MODE", "disabled")
    monkeypatch.setenv("ROLLOUT_TP", "1")
    monkeypatch.setenv("FRAMEWORK", "fsdp")
    monkeypatch.chdir(bare.root)
    seen = SimpleNamespace(drafts=[], finished=[], probed=[], preflighted=[])
    real_draft, real_make, real_quick, real_fleet = (
        planning.draft_plan,
        planning.make_plan,
        svc.quick_checks,
        preflight_group.run_fleet,
    )

    def draft_plan(inputs):
        d = real_draft(inputs)
        seen.drafts.append(d)
        return d

    def make_plan(draft, memory=None):
        seen.finished.append(draft)
        return real_make(draft, memory)

    def quick_checks(target, view, *a, **kw):
        seen.probed.append(view)
        return real_quick(target, view, *a, **kw)

    def run_fleet(hosts, jobs, **kw):
        seen.preflighted.extend(j.plan for j in jobs.values())
        return real_fleet(hosts, jobs, **kw)

    # the planner's stages wherever a module holds them (dryrun.py imports them by name: whether it was imported
    # before this test depends on the test order)
    for mod in [m for name, m in list(sys.modules.items()) if name.startswith("dapo_ops.") and m is not None]:
        for attr, real, spy in (("draft_plan", real_draft, draft_plan), ("make_plan", real_make, make_plan)):
            if getattr(mod, attr, None) is real:
                monkeypatch.setattr(mod, attr, spy)
    monkeypatch.setattr(svc, "quick_checks", quick_checks)
    monkeypatch.setattr(preflight_group, "run_fleet", run_fleet)

    def run(*argv: str) -> None:
        try:
            program.make_program(build_namespace()).run(["dapo-ops", *argv], exit=False)
        except SystemExit as e:  # a task's fail(): the test shows its code
            assert e.code in (0, None), f"dapo-ops {' '.join(argv)} exited {e.code}"

    def finished_run(run_id: str) -> dict:
        """The spec.json of run ``run_id`` once the run ended (the next launch would find it active)."""
        rec = bare.runs / run_id / "run.json"
        ended = lambda: rec.exists() and json.loads(rec.read_text()).get("status") in ("succeeded", "failed")  # noqa: E731
        wait_for(ended, timeout=120, what=f"run {run_id} ended")
        return json.loads((bare.runs / run_id / "spec.json").read_text())

    seen.run, seen.finished_run = run, finished_run
    return seen


def test_a_dry_run_drafts_and_finishes_its_plan_once(counted):
    counted.run("launch", "-H", "dev", "--dry-run", "--steps", "2")
    assert (len(counted.drafts), len(counted.finished)) == (1, 1)
    assert counted.finished == counted.drafts and counted.probed == []


def test_one_launch_drafts_once_probes_that_draft_and_finishes_it_once(counted):
    counted.run("launch", "-H", "dev", "--link-wait", "0", "--steps", "2")
    assert (len(counted.drafts), len(counted.finished)) == (1, 1), "the planner's stages ran more than once"
    [draft] = counted.drafts
    assert counted.probed == [draft] and counted.finished == [draft]  # the very draft the probe checked
    spec = counted.finished_run(draft.inputs.run_id)
    assert spec["run_id"] == draft.inputs.run_id and spec["env"] == draft.spec["env"]
    assert spec["notify"]["on_success"] is True


def test_quickstart_hands_one_request_to_preflight_and_start(counted, monkeypatch):
    environ_before = dict(os.environ)
    counted.run("quickstart", "-H", "dev", "--steps", "2", "--http-proxy", "none")
    assert dict(os.environ) == environ_before  # the answers reached the launch in a copy, never os.environ
    assert (len(counted.drafts), len(counted.finished)) == (1, 1), "the planner's stages ran more than once"
    [draft] = counted.drafts
    # preflight checked exactly the run the launch then probed, finished and started
    assert counted.preflighted == [draft] and counted.probed == [draft] and counted.finished == [draft]
    spec = counted.finished_run(draft.inputs.run_id)
    assert spec["env"] == draft.spec["env"] and spec["env"]["SWANLAB_MODE"] == "disabled"  # SwanLab's public env
    assert spec["notify"] == draft.spec["notify"] and spec["notify"]["on_success"] is True
