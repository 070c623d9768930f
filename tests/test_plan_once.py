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
import re
import shlex
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from supervisor_helpers import bare_host, wait_for

from dapo_ops.cli import build_namespace, program
from dapo_ops.control.launch import plan as planning
from dapo_ops.control.launch import service as svc
from dapo_ops.core import features, overrides
from dapo_ops.control.preflight import checks as preflight_checks
from dapo_ops.control.preflight import compose_check
from dapo_ops.control.preflight import group as preflight_group
from dapo_ops.control.preflight.plan_view import plan_view
from config_helpers import no_config


@pytest.fixture(scope="module")
def bare(tmp_path_factory):
    root = tmp_path_factory.mktemp("plan-once")
    tree, _ = bare_host(root)
    (tree / "sandbox" / "scenario.json").write_text(json.dumps({"accelerator": "gpu", "step_time": 0.1}))
    # a [notify] section: the notifier's public config must reach the spec preflight checks and the one launch writes
    (root / "config.toml").write_text("[notify]\non_success = true\n")
    return SimpleNamespace(root=root, runs=tree / "dapo_runs")


#: tool-runs/j-learned's device (NVIDIA H200, MiB as nvidia-smi reports it) and model (Qwen3-4B's shape, 48 layers)
H200_MIB = 143771
J_LEARNED = Path(__file__).resolve().parent / "fixtures" / "real-verl" / "tool-runs" / "j-learned"


@pytest.fixture(scope="module")
def h200(tmp_path_factory):
    """A bare host like ``bare`` whose one GPU has the H200's memory and whose model has j-learned's shape: the
    fastest fit (dapo_ops/core/fastfit.py) changes the draft's token budgets, checkpointing, share and vLLM limits."""
    root = tmp_path_factory.mktemp("plan-once-h200")
    tree, _ = bare_host(root)
    (tree / "sandbox" / "scenario.json").write_text(json.dumps({"accelerator": "gpu", "step_time": 0.1}))
    (tree / "sandbox" / "devices.json").write_text(
        json.dumps({"accelerator": "gpu", "count": 1, "hbm_total_mb": H200_MIB})
    )
    shutil.copy(J_LEARNED / "model-config.json", tree / "Qwen3-8B" / "config.json")
    (root / "config.toml").write_text("[notify]\non_success = true\n")
    return SimpleNamespace(root=root, runs=tree / "dapo_runs")


@pytest.fixture
def counted(bare, monkeypatch):
    """Run a task in this process against the bare host with the planner's stages (and what is checked) recorded."""
    return _counted(bare, monkeypatch)


@pytest.fixture
def counted_h200(h200, monkeypatch):
    """``counted`` on the ``h200`` host."""
    return _counted(h200, monkeypatch)


def _bare_env(bare, monkeypatch) -> None:
    """The operator's environment of these tests: the bare host's inventory and config, nothing inherited."""
    for k in list(os.environ):
        if k.startswith(("DAPO_OPS_", "SWANLAB_")) or k in ("CONTAINER", "USER_FEATURES", "TRAIN_STEPS"):
            monkeypatch.delenv(k)
    monkeypatch.setenv("DAPO_OPS_INVENTORY", str(bare.root / "hosts.toml"))
    monkeypatch.setenv("DAPO_OPS_CONFIG", no_config(bare.root, "config.toml"))
    monkeypatch.setenv("SWANLAB_MODE", "disabled")
    monkeypatch.setenv("ROLLOUT_TP", "1")
    monkeypatch.setenv("FRAMEWORK", "fsdp")
    monkeypatch.chdir(bare.root)


def _spy_everywhere(monkeypatch, pairs) -> None:
    """Each ``(name, real, spy)`` wherever a dapo_ops module holds ``real`` as ``name`` (dryrun.py imports the
    planner's stages by name: whether it was imported before this test depends on the test order)."""
    for mod in [m for name, m in list(sys.modules.items()) if name.startswith("dapo_ops.") and m is not None]:
        for attr, real, spy in pairs:
            if getattr(mod, attr, None) is real:
                monkeypatch.setattr(mod, attr, spy)


def _run_task(*argv: str) -> None:
    try:
        program.make_program(build_namespace()).run(["dapo-ops", *argv], exit=False)
    except SystemExit as e:  # a task's fail(): the test shows its code
        assert e.code in (0, None), f"dapo-ops {' '.join(argv)} exited {e.code}"


def _counted(bare, monkeypatch):
    _bare_env(bare, monkeypatch)
    seen = SimpleNamespace(drafts=[], finished=[], probed=[], preflighted=[], judged=[], composed=[])
    real_draft, real_make, real_quick, real_fleet, real_eval, real_collect = (
        planning.draft_plan,
        planning.make_plan,
        svc.quick_checks,
        preflight_group.run_fleet,
        preflight_checks.evaluate,
        preflight_group.collect,
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

    def evaluate(host, plan, facts, **kw):  # what the checks judge (device-mem, memory-fit, sanity): its argv
        seen.judged.append(("full" if kw.get("full", True) else "quick", list(plan_view(plan).argv)))
        return real_eval(host, plan, facts, **kw)

    def collect(target, req, **kw):  # the compose requests preflight's probe runs (not the fingerprint-only ones)
        comp = req.get("compose")
        if comp is not None and comp.get("run", True):
            seen.composed.append(list(comp["request"]["overrides"]))
        return real_collect(target, req, **kw)

    _spy_everywhere(monkeypatch, (("draft_plan", real_draft, draft_plan), ("make_plan", real_make, make_plan)))
    monkeypatch.setattr(svc, "quick_checks", quick_checks)
    monkeypatch.setattr(preflight_group, "run_fleet", run_fleet)
    monkeypatch.setattr(preflight_group, "evaluate", evaluate)
    monkeypatch.setattr(preflight_checks, "evaluate", evaluate)
    monkeypatch.setattr(preflight_group, "collect", collect)

    def finished_run(run_id: str) -> dict:
        """The spec.json of run ``run_id`` once the run ended (the next launch would find it active)."""
        rec = bare.runs / run_id / "run.json"
        ended = lambda: rec.exists() and json.loads(rec.read_text()).get("status") in ("succeeded", "failed")  # noqa: E731
        wait_for(ended, timeout=120, what=f"run {run_id} ended")
        return json.loads((bare.runs / run_id / "spec.json").read_text())

    seen.run, seen.finished_run, seen.runs_dir = _run_task, finished_run, bare.runs
    return seen


def test_a_dry_run_drafts_and_finishes_its_plan_once(counted):
    counted.run("launch", "-H", "dev", "--dry-run", "--steps", "2")
    assert (len(counted.drafts), len(counted.finished)) == (1, 1)
    # -H: the dry run probes its draft as the launch does (dryrun.host_plan), and finishes it once
    assert counted.finished == counted.drafts and counted.probed == counted.drafts


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


def test_preflight_and_the_launchs_probe_judge_and_compose_the_argv_the_launch_runs(counted_h200):
    """Issue 46 item 2's reviewer finding: with device memory and config.json that make the fastest fit change the
    draft (j-learned's model on an H200: token budgets, gradient checkpointing, the rollout share, vLLM's
    max_num_seqs / max_num_batched_tokens), quickstart's preflight judges (device-mem, memory-fit, sanity) and
    composes the argv the launch runs, not the draft's; so does the launch's own quick probe. The run's spec.json
    rebuilds that argv, and the supervisor's attempt 1 ran it. On main's code preflight judged and composed the
    draft (``ppo_max_token_len_per_gpu=1536``, ``gpu_memory_utilization=0.6``, no vLLM limits)."""
    c = counted_h200
    c.run("quickstart", "-H", "dev", "--steps", "2", "--http-proxy", "none")
    [draft] = c.drafts
    spec = c.finished_run(draft.inputs.run_id)
    fs = features.FeatureSet.from_json(spec["features"], spec.get("disabled_features") or [])
    runs = list(overrides.build_command(spec, fs))  # the argv spec.json gives attempt 1
    assert runs != list(draft.argv), "the fit changed nothing: this host's facts do not exercise stage 2"
    seqs = f"max_num_seqs={spec['settings']['rollout_max_num_seqs']}"  # a key the draft's argv does not have
    assert any(a.endswith(seqs) for a in runs) and not any("max_num_seqs=" in a for a in draft.argv)
    tail = runs[runs.index("-m") + 2 :]
    log = (c.runs_dir / draft.inputs.run_id / "supervisor.log").read_text()
    logged = shlex.split(re.search(r"attempt 1: \S+ -m verl\.trainer\.main_ppo (.*)", log).group(1))
    assert logged == tail  # the supervisor's attempt 1 ran exactly the plan's argv
    # preflight (full) and the launch's probe (quick) judged that argv, once each
    assert c.judged == [("full", runs), ("quick", runs)]
    # the compose whose verdict preflight reports is of that argv (round 1 composed the draft's, round 2 the run's)
    assert c.composed[-1] == compose_check.request_for(runs, spec["workdir"])["overrides"]
    assert len(c.finished) == 1  # made once: the launch starts the plan preflight judged
