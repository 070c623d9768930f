"""A learned start from a REAL run's record (issue 33 item 5): the H200 run 20261202-065903-4ae6 (gpu/j-learned.sh 1:
Qwen3-4B's shape with 48 layers, 5.23 B params, the DEFAULT rollout share 0.6) ran out in the weight sync, the ladder's
rung ``rollout-util`` (0.6 -> 0.5) got attempt 2 past it, and the run succeeded 2/2
(tests/fixtures/real-verl/tool-runs/j-learned/). The supervisor filed NO memo: the launch had ``--skip-preflight``
(the disk check refused a run that saves no checkpoint), which then also skipped the probe, so the spec had no
learned-start key. Both are fixed (control/preflight/inputs.py, control/launch/service.py ``quick_checks``); a second
launch of the same configuration (tool-runs/j-learned-again/) ran out again on 0.6.

Here the fixed planner rebuilds that configuration from the settings gpu/lib.sh + gpu/j-learned.sh gave (checked
against the recorded spec and the supervisor's logged verl command), the supervisor's own memo code files the memo
from the real run.json, and the next plan starts on the learned rung. The REAL launch on the learned rung ran on the
H200 the next session (tests/fixtures/real-verl/tool-runs/j-learned-start/, run 20261202-113015-85e1, ``gpu/j-learned.sh
seed``: the memo filed by ``gpu/seed_memo.py`` from j-learned's record under the key that launch computed): it
started on ``rollout-util(weight-sync)`` with source ``learned``, verl got 0.5, and it succeeded 2/2 in one attempt."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import repo_module

from dapo_ops.agent import runfiles
from dapo_ops.agent.supervisor.learn import Memos
from dapo_ops.control import settings
from dapo_ops.control.inventory.model import Host
from dapo_ops.control.launch import plan as planning
from dapo_ops.core import defaults, learned
from supervisor_helpers import logged_verl_argv

RUN = Path(__file__).resolve().parent / "fixtures" / "real-verl" / "tool-runs" / "j-learned"
AGAIN = RUN.parent / "j-learned-again"
START = RUN.parent / "j-learned-start"
RID = "20261202-065903-4ae6"
H200_MIB = 143771  # nvidia-smi memory.total of the lent H200 (gpu-mem.csv)
HOST = Host(
    name="gpu",
    address="localhost",
    runtime="host",
    transport="local",
    container="",
    workdir="/tmp/dapo/work",
    runs_dir="/tmp/dapo/runs",
    accelerator="gpu",
    devices=1,
    device_mounts=False,
)
# gpu/lib.sh's exports as gpu/j-learned.sh changes them (GPU_MEMORY_UTILIZATION unset: the default 0.6)
ENV = {
    "FRAMEWORK": "fsdp",
    "ROLLOUT_TP": "1",
    "TRAIN_BATCH_SIZE": "4",
    "PPO_MINI_BATCH_SIZE": "4",
    "ROLLOUT_N": "4",
    "MICRO_BATCH_SIZE": "4",
    "MAX_PROMPT_LENGTH": "512",
    "MAX_RESPONSE_LENGTH": "256",
    "MAX_OOM_RETRIES": "3",
    "HANG_TIMEOUT": "900",
    "ROLLOUT_EAGER": "true",
    "USER_FEATURES": "-flash_attn",
}
M = "/tmp/p/qwen3-5b-48l"
FLAGS = {
    "model": f"{M}/model",
    "train_file": f"{M}/data/train.parquet",
    "val_file": f"{M}/data/test.parquet",
    "steps": 2,
    "save_freq": -1,
}


@pytest.fixture
def planner_of_that_day(monkeypatch):
    """The planner as it was when these runs were launched (2026-12-02): before issue 45's fastest fit
    (core/fastfit.py), which now chooses the rollout share, the token budgets and vLLM's scheduler limits of a launch
    of this configuration (tests/test_fastfit.py replays the same record through today's planner)."""
    from dapo_ops.core import fastfit

    monkeypatch.setattr(fastfit, "choose", lambda m, spec, fs, dev, **kw: fastfit.Choices({}, fs))


def real_spec() -> dict:
    spec = runfiles.read_spec(RUN)
    assert spec is not None
    return spec


def memory(memos=()) -> dict:
    """What the launch probe reads on the H200 (control/preflight/memory.py memory_facts)."""
    cfg = json.loads((RUN / "model-config.json").read_text())
    return {
        "model_config": cfg,
        "device_gib": H200_MIB / 1024,
        "device_mib": H200_MIB,
        "device_name": "NVIDIA H200",
        "memos": list(memos),
    }


def plan_for(run_id: str, env_extra=None, memos=()):
    st = settings.resolve(FLAGS, {**ENV, **(env_extra or {})}, {})
    return planning.make_plan(
        planning.draft_plan(
            planning.PlanInputs(
                settings=st,
                host=HOST,
                mode="dapo",
                run_id=run_id,
                swanlab_logger=False,
                extra_overrides=list(real_spec()["settings"]["extra_overrides"]),
            )
        ),
        memory(memos),
    )


def logged_argv(k: int) -> list[str]:
    return logged_verl_argv(RUN, k)


def test_the_real_run_ran_out_at_the_default_share_and_got_past_it_on_the_rung_but_filed_no_memo(tmp_path):
    rec = runfiles.read_run(RUN)
    spec = real_spec()
    assert rec["status"] == "succeeded" and rec["step"] == 2 and len(rec["attempts"]) == 2
    assert spec["settings"]["gpu_memory_utilization"] == 0.6  # the defaults table's, nobody set it
    a1, a2 = rec["attempts"]
    assert a1["verdict"]["cls"] == "oom-device" and a1["verdict"]["detail"]["phase"] == "weight-sync"
    assert a2["setting_changes"]["memory_rungs"][0]["rung"] == "rollout-util"
    # the supervisor's rule says the memo was due: attempt 2 logged step 1, the step attempt 1 ran out in
    assert learned.passed(rec) == {"phase": "weight-sync", "phases": ["weight-sync"], "attempt": 1, "step": 1}
    # ... but the real spec had no key (the skipped probe), so the supervisor's own code files nothing
    assert "learn" not in spec and "learned_memo" not in rec
    assert Memos(spec, str(tmp_path)).check(dict(rec)) is None and not (tmp_path / learned.DIRNAME).exists()
    # and the same configuration launched again ran out again on the same default share
    again = runfiles.read_run(AGAIN)
    assert again["attempts"][0]["verdict"]["detail"]["phase"] == "weight-sync"
    assert runfiles.read_spec(AGAIN)["settings"]["gpu_memory_utilization"] == 0.6
    assert "start:" not in (AGAIN / "launch.txt").read_text()


#: verl keys today's planner emits that did not exist when the real runs were planned (issue 43: the validation
#: cadence and verl's DAPO recipe keys, dapo_ops/core/defaults.py DAPO_RECIPE); nothing else may differ
ADDED_SINCE = {"trainer.test_freq", *(k for k, _, _ in defaults.DAPO_RECIPE)}


def since_the_run(argv: list) -> list:
    """``argv`` without the plan's own (first) occurrence of each key of :data:`ADDED_SINCE`, after checking that
    today's plan emits each of them; the run's ``--override``s come last and stay (its ``trainer.test_freq=-1``)."""
    out, seen = [], set()
    for a in argv:
        k = a.split("=", 1)[0]
        if k in ADDED_SINCE and k not in seen:
            seen.add(k)
            continue
        out.append(a)
    assert seen == ADDED_SINCE, ADDED_SINCE - seen
    return out


def test_the_rebuilt_plan_is_the_real_runs_configuration():
    """The planner, given the probe's facts, rebuilds exactly the run's settings and verl command (so the key below
    is the real run's configuration, not a look-alike); with the facts, the spec now has a learned-start key."""
    p = plan_for(RID, {"MEMORY_FIT": "warn"})
    real = real_spec()["settings"]
    for k in learned.RUN_SETTINGS + ("extra_overrides", "steps", "save_freq"):
        assert p.spec["settings"].get(k) == real.get(k), k
    assert p.spec["features"] == real_spec()["features"]
    argv = since_the_run(p.argv[p.argv.index("verl.trainer.main_ppo") + 1 :])
    assert [a for a in argv if "hydra.run.dir" not in a and "=/tmp/dapo/runs/" not in a] == [
        a.strip("'") for a in logged_argv(1) if "hydra.run.dir" not in a and "=/tmp/dapo/runs/" not in a
    ]
    assert p.spec["learn"]["fingerprint"] == learned.fingerprint(p.spec["learn"]["key"])
    assert p.spec["learn"]["key"]["model"]["num_hidden_layers"] == 48


def test_the_real_record_files_a_memo_and_the_next_launch_starts_on_the_learned_rung(tmp_path, planner_of_that_day):
    """With the key in its spec, the supervisor's Memos.check files the memo from the REAL run.json; the next launch
    of the same configuration (the product's default MEMORY_FIT=start: the estimate says 0.6 does not fit) starts on
    ``rollout-util`` with source ``learned`` from that run, and verl gets 0.5."""
    first = plan_for(RID, {"MEMORY_FIT": "warn"})
    rec = runfiles.read_run(RUN)
    path = Memos(dict(first.spec, run_id=RID), str(tmp_path)).check(rec)
    assert path == learned.memo_path(str(tmp_path), first.spec["learn"]["fingerprint"])
    memo = json.loads(Path(path).read_text())
    assert memo["run_id"] == RID and learned.rung_names(memo) == ["rollout-util(weight-sync)"]
    assert rec["learned_memo"]["rungs"] == ["rollout-util(weight-sync)"]

    nxt = plan_for("20261202-080000-0001", memos=[memo])
    assert nxt.spec["learned"]["used"] is True and nxt.spec["learned"]["run_id"] == RID
    (rung,) = nxt.spec["setting_changes"]["memory_rungs"]
    assert (
        rung["source"] == "learned"
        and rung["learned_from"] == RID
        and rung["changes"] == {"gpu_memory_utilization": 0.5}
    )
    assert "actor_rollout_ref.rollout.gpu_memory_utilization=0.5" in nxt.argv
    assert any(ln.startswith(f"starting on the learned rung rollout-util(weight-sync) (run {RID}") for ln in nxt.memory)
    # without the memo the same launch starts on the estimate's rung (0.6 does not fit): the memo is what differs
    est = plan_for("20261202-080000-0002")
    assert est.spec.get("learned") is None
    assert [r["source"] for r in est.spec["setting_changes"]["memory_rungs"]] == ["estimate"]


def test_a_user_who_sets_the_share_keeps_it_and_is_told_why():
    """An explicit GPU_MEMORY_UTILIZATION=0.6 is the same configuration (same key) but the memo is not used."""
    first = plan_for(RID, {"MEMORY_FIT": "warn"})
    rec = runfiles.read_run(RUN)
    memo = learned.memo(dict(first.spec, run_id=RID), rec, learned.passed(rec))
    p = plan_for("20261202-080000-0003", {"GPU_MEMORY_UTILIZATION": "0.6", "MEMORY_FIT": "warn"}, memos=[memo])
    assert p.spec["learned"]["used"] is False
    assert "actor_rollout_ref.rollout.gpu_memory_utilization=0.6" in p.argv
    assert any("GPU_MEMORY_UTILIZATION=0.6" in ln and "never overrides an explicit setting" in ln for ln in p.memory)


def test_skip_preflight_lets_failing_checks_through_but_keeps_the_probes_facts(monkeypatch):
    """``--skip-preflight`` used to skip the probe round trip too: no device memory, no config.json, no memos, so
    the plan had no learned-start key and no memory fit (the real run above). Now the probe runs, its facts are
    returned, and its failing checks become lines the launch prints instead of a refusal."""
    from types import SimpleNamespace

    import pytest

    from dapo_ops.control.preflight import checks as preflight_checks
    from dapo_ops.control.launch import refusals as launch_errors
    from dapo_ops.control.launch import service as svc
    from dapo_ops.control.preflight.result import Check

    probe = {"probe": {"model": {"config": {"num_hidden_layers": 48}}, "devices": {"rc": 0, "stdout": ""}}}
    disk = Check("disk", "fail", "52.2 GiB free at /tmp/dapo/runs; one checkpoint ~68.2 GiB", "free space")

    def fake_quick(target, pv, *, facts_out, **kw):
        facts_out.update(probe)
        return [disk]

    monkeypatch.setattr(svc, "refuse_if_busy", lambda *a, **k: None)
    monkeypatch.setattr(preflight_checks, "quick", fake_quick)
    t = SimpleNamespace(host=HOST, container_state=lambda: SimpleNamespace(running=True), container="")
    view = SimpleNamespace(spec={"python": "python3"})
    got = svc.quick_checks(t, view, True)
    assert got["probe"] == probe["probe"]
    assert got[svc.SKIPPED_KEY] == ["disk failed: 52.2 GiB free at /tmp/dapo/runs; one checkpoint ~68.2 GiB"]
    with pytest.raises(launch_errors.LaunchRefused, match="preflight disk failed: .*--skip-preflight to launch anyway"):
        svc.quick_checks(t, view, False)


def test_a_run_that_fails_at_once_after_skip_preflight_names_the_checks_it_was_launched_past(monkeypatch):
    """``inv launch --profile 0.8 --skip-preflight`` on a verl 0.9.1 container (sandbox, round 8 trial): verl
    failed at once (``No module named 'recipe'``) and the launch printed only ``run ... failed at once:
    crash-other ...``: the ``skipped: preflight verl failed ...`` line, the likely cause, was printed only for a
    run that started. Now the failure line ends with the checks the launch went past."""
    from types import SimpleNamespace

    from dapo_ops.control.launch import service as svc
    from dapo_ops.control.remote.fanout import Row

    skipped = ("verl failed: container has verl 0.9.1 (profile 0.9); the plan uses profile 0.8",)
    facts = SimpleNamespace(skipped=skipped, resume=None, plan=None)  # LaunchFacts: no plan made by the probe
    at_once = "run R failed at once: crash-other: stop and report the innermost error (exit code 1)"
    monkeypatch.setattr(svc, "gather_facts", lambda t, r: facts)
    monkeypatch.setattr(svc, "build_plan", lambda f, r: SimpleNamespace(memory=[]))
    monkeypatch.setattr(svc, "run_secret_env", lambda r: {})
    monkeypatch.setattr(svc, "start_run", lambda *a, **k: Row(ok=False, kind="failed", message=at_once))
    req = SimpleNamespace(link_wait=0.0, sw=SimpleNamespace(logger_enabled=False), progress=None)
    row = svc.launch_one(SimpleNamespace(host=HOST), req)
    assert not row.ok and "\n" not in row.message
    assert row.message == at_once + "; launched past preflight " + skipped[0] + " (--skip-preflight)"
    # a run that started keeps the lines for the text output, its message untouched
    monkeypatch.setattr(svc, "start_run", lambda *a, **k: Row(data={"run_id": "R"}))
    row = svc.launch_one(SimpleNamespace(host=HOST), req)
    assert row.ok and row.data["skipped"] == list(skipped) and row.message == ""


def test_gpu_seed_memo_files_the_real_records_memo_under_a_launchs_key(tmp_path, planner_of_that_day):
    """gpu/seed_memo.py (``gpu/j-learned.sh seed``): with the spec.json of a launch of the same configuration it
    files the memo the supervisor would have filed from the real record; another configuration is refused."""
    seed = repo_module("gpu/seed_memo.py")
    p = plan_for("20261202-090000-0004")
    (tmp_path / "spec.json").write_text(json.dumps(p.spec))
    assert seed.main([str(RUN), str(tmp_path / "spec.json"), str(tmp_path / "runs")]) == 0
    memo = json.loads(Path(learned.memo_path(str(tmp_path / "runs"), p.spec["learn"]["fingerprint"])).read_text())
    assert memo["run_id"] == RID and memo["key"] == p.spec["learn"]["key"]
    assert memo["rung"]["setting_changes"]["gpu_memory_utilization"] == 0.5
    assert plan_for("20261202-090000-0005", memos=[memo]).spec["learned"]["used"] is True
    other = plan_for("20261202-090000-0006", {"MAX_RESPONSE_LENGTH": "512"})
    (tmp_path / "other.json").write_text(json.dumps(other.spec))
    assert seed.main([str(RUN), str(tmp_path / "other.json"), str(tmp_path / "runs2")]) == 2
    assert not (tmp_path / "runs2").exists()


def test_the_real_launch_on_the_learned_rung(tmp_path, planner_of_that_day):
    """j-learned-start: the H200 launch that started on the learned rung. The planner, given the probe's facts and the
    memo the device held (memo.json, copied from its runs dir), rebuilds that launch: the same learned-start key and
    fingerprint, the same start line, the same verl command as the supervisor logged; and the run on it needed no
    ladder rung (one attempt, succeeded 2/2), with verl's printed config at 0.5."""
    rec = runfiles.read_run(START)
    spec = runfiles.read_spec(START)
    memo = json.loads((START / "memo.json").read_text())
    assert rec["status"] == "succeeded" and rec["step"] == 2 and len(rec["attempts"]) == 1
    assert rec["attempts"][0]["verdict"]["cls"] == "success"
    # the memo came from the real record of the OOM run, under the key this launch computed
    assert memo["run_id"] == RID and memo["fingerprint"] == spec["learn"]["fingerprint"]
    assert learned.fingerprint(memo["key"]) == memo["fingerprint"] == spec["learn"]["fingerprint"]
    # the planner rebuilds that launch from the settings, the probe's facts and the memo
    rid = rec["run_id"]
    p = plan_for(rid, memos=[memo])
    assert p.spec["learn"] == spec["learn"]
    assert p.spec["setting_changes"] == spec["setting_changes"]
    assert p.spec["learned"]["used"] is True and p.spec["learned"]["run_id"] == RID
    start_line = next(ln for ln in (START / "launch.txt").read_text().splitlines() if "start:" in ln)
    assert start_line.split("start:", 1)[1].strip() == spec["learned"]["line"]
    assert any(ln == spec["learned"]["line"] for ln in p.memory)
    real_argv = logged_verl_argv(START, 1)
    argv = since_the_run(p.argv[p.argv.index("verl.trainer.main_ppo") + 1 :])
    assert argv == [a.strip("'") for a in real_argv]
    assert "actor_rollout_ref.rollout.gpu_memory_utilization=0.5" in argv
    # verl ran on the rung: its printed rollout config says 0.5, never the default 0.6
    printed = re.findall(r"'gpu_memory_utilization': ([0-9.]+)", (START / "train.log").read_text())
    assert printed and set(printed) == {"0.5"}
    # the run's own supervisor filed no new memo (nothing ran out)
    assert Memos(dict(spec), str(tmp_path)).check(dict(rec)) is None
