"""One launch = the host's facts first, ONE immutable plan, then ONE remote call for the start (issue 30 items 3, 5).

Pure: the launch service (``control/launch/service.py`` ``launch_one``) through a fake Target that answers every call in
memory (no SSH), the quick preflight's probe replaced by its facts (the device memory and config.json of a model that
needs memory-fit rungs), and the start op's wait (``agent/runstart.py``) driven by a fake clock."""

from __future__ import annotations

import copy
import dataclasses
import json
import shlex
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

import fake_ops
from dapo_ops.agent import runstart
from dapo_ops.control.launch import service as svc
from dapo_ops.control.launch import refusals as launch_errors
from dapo_ops.control.launch import plan as planning
from dapo_ops.control.preflight import checks as preflight_checks
from dapo_ops.control.preflight import memory as preflight_memory
from dapo_ops.control.remote import bundle as remote_bundle
from dapo_ops.control import settings as settings_mod
from dapo_ops.control.status import look as status_mod
from dapo_ops.control.inventory.model import Host
from dapo_ops.control.remote.errors import RemoteError
from dapo_ops.control.swanlab_settings import SwanlabSettings
from dapo_ops.core import overrides, runspec

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_memfit import QWEN3_8B  # noqa: E402
from plan_helpers import plan_for

HOST = Host(name="h1", address="198.51.100.11", accelerator="gpu", devices=1, workdir="/work", runs_dir="/runs")
#: what the probe reads on HOST (preflight.memory.memory_facts): Qwen3-8B does not fit one 80 GiB device as planned
MEMORY = {
    "model_config": QWEN3_8B,
    "device_gib": 80.0,
    "device_mib": 81920,
    "device_name": "NVIDIA H100 80GB HBM3",
    "memos": [],
}
FLAGS = {"model": "/models/Qwen3-8B", "framework": "fsdp", "rollout_tp": 1, "steps": 20}


class FakeTarget:
    """The Target methods a launch uses, in memory: ``calls`` records every remote call in order, ``written`` the
    files put; ``files`` answers ``cat``; the bundle ops answer as an idle host whose started run is running."""

    bare = False
    local = False

    def __init__(self, host=HOST, files=None, start=None):
        self.host, self.name, self.container = host, host.name, "verl"
        self.files = dict(files or {})
        self.start = start or (lambda rid: {"started": True, "record": {"run_id": rid, "status": "running"}})
        self.calls: list[tuple[str, str]] = []
        self.written: dict[str, str] = {}

    @property
    def where(self) -> str:
        return f"in container '{self.container}'"

    def container_state(self):
        self.calls.append(("inspect", self.container))
        return SimpleNamespace(running=True, status="running")

    def run(self, cmd, **kw):
        text = cmd if isinstance(cmd, str) else shlex.join(cmd)
        self.calls.append(("run", text))
        out, rc = "", 0
        op = fake_ops.op_of(cmd) or [""]
        if "dapo_ops.agent.occupancy" in text:
            out = json.dumps({"active": None, "verl": [], "ray": []})
        elif op[0] == "runfiles":
            return fake_ops.runfiles_answer(op[1:], self.files)
        elif "dapo_ops.agent.runstart" in text:
            run_dir = op[1]
            if kw.get("stdin") is not None:  # the op writes spec.json (+ secret.env) from its stdin first
                for key, name in (("spec", "spec.json"), ("secret_env", "secret.env")):
                    data = json.loads(kw["stdin"])
                    if key in data:
                        self.written[f"{run_dir}/{name}"] = data[key]
            rid = run_dir.rsplit("/", 1)[-1]
            ans = self.start(rid)
            if isinstance(ans, BaseException):
                raise ans
            out, rc = (ans, runstart.SPAWN_FAILED) if isinstance(ans, str) else (json.dumps(ans), 0)
        elif "dapo_ops.core.runstate" in text:  # the start's poll before issue 30
            out = json.dumps({"run_id": "x", "status": "running"})
        elif isinstance(cmd, list) and cmd[0] == "cat":
            rc = 0 if cmd[1] in self.files else 1
            out = self.files.get(cmd[1], "")
        return SimpleNamespace(exited=rc, stdout=out + "\n", stderr=out if rc else "")

    def host_run(self, cmd, **kw):  # the detached supervisor start before issue 30
        self.calls.append(("host", cmd))
        return SimpleNamespace(exited=0, stdout="", stderr="")

    def put_text(self, text, path, mode=0o644, **kw):
        self.calls.append(("put", path))
        self.written[path] = text


@pytest.fixture
def launch_env(monkeypatch):
    """Count make_plan and check_spec calls; the quick preflight passes and its probe read :data:`MEMORY`."""
    counts = {"make_plan": 0, "check_spec": 0}
    real_make, real_check = planning.make_plan, runspec.check_spec

    def make_plan(*a, **kw):
        counts["make_plan"] += 1
        return real_make(*a, **kw)

    def check_spec(*a, **kw):
        counts["check_spec"] += 1
        return real_check(*a, **kw)

    monkeypatch.setattr(planning, "make_plan", make_plan)
    monkeypatch.setattr(runspec, "check_spec", check_spec)
    monkeypatch.setattr(overrides, "check_spec", check_spec)  # build_command's own check (imported by name)

    def quick(target, plan, *, facts_out=None, tracker=False, secret_env=None, timeout=90, finish=None):
        facts_out.update(probe={"devices": {"rc": 0}, "model": {"config": QWEN3_8B}})
        if finish is not None:  # as the real one: the checks judge the plan finish makes of the probe's memory facts
            finish(preflight_memory.memory_facts(target.host, facts_out["probe"]))
        return []

    monkeypatch.setattr(preflight_checks, "quick", quick)
    monkeypatch.setattr(preflight_memory, "memory_facts", lambda host, p: dict(MEMORY) if p else None)
    stops: list[dict] = []
    monkeypatch.setattr(status_mod, "probe", lambda target, req: stops.append(req) or {})
    return SimpleNamespace(counts=counts, stops=stops)


def _req(**kw) -> svc.LaunchRequest:
    return svc.LaunchRequest(
        mode="dapo",
        settings=settings_mod.resolve(FLAGS, {}, {}),
        sw=SwanlabSettings(mode="disabled"),
        link_wait=0.0,
        **kw,
    )


def _spec(t: FakeTarget) -> dict:
    [path] = [p for p in t.written if p.endswith("/spec.json")]
    return json.loads(t.written[path])


def test_one_launch_builds_one_plan_checks_it_once_and_starts_in_one_call(launch_env):
    t = FakeTarget()
    row = svc.launch_one(t, _req())
    assert row.ok, row.message
    # the memory fit came from the probe's facts (no second plan): the written spec starts on the estimate's rungs
    assert launch_env.counts == {"make_plan": 1, "check_spec": 1}
    spec = _spec(t)
    assert [r["source"] for r in spec["setting_changes"]["memory_rungs"]] == ["estimate", "estimate"]
    assert row.data["start"] and row.data["start"][0].startswith("memory-fit: starts on rung(s) update-batch")
    # the container calls: the state, the occupancy op, the start op (which writes spec.json from its stdin and
    # waits there): nothing else (issue 46: spec.json was a call of its own, Target.put_text)
    kinds = [
        k if k != "run" else ("occupancy" if "agent.occupancy" in c else "runstart" if "agent.runstart" in c else c)
        for k, c in t.calls
    ]
    assert kinds == ["inspect", "occupancy", "runstart"], t.calls
    # every call into the container is a bundle op line (remote_bundle.run_op: the one way in)
    for k, c in t.calls:
        if k == "run":
            assert remote_bundle.MISSING_MARK in c and "PYTHONPATH=" in c, c


def test_the_cli_precheck_and_the_launch_share_one_builder(launch_env):
    """The CLI's check before any host is build_plan without facts: a plan error there is the launch's."""
    req = _req()
    plain = svc.build_plan(svc.LaunchFacts(host=HOST, run_id="20261201-000000-abcd"), req)
    fitted = svc.build_plan(svc.LaunchFacts(host=HOST, run_id="20261201-000000-abcd", memory=MEMORY), req)
    assert "setting_changes" not in plain.spec and fitted.spec["setting_changes"]["memory_rungs"]
    assert launch_env.counts == {"make_plan": 2, "check_spec": 2}  # one each per build
    bad = dataclasses.replace(req, settings=settings_mod.resolve({**FLAGS, "trainer_gpus": 1, "rollout_tp": 3}, {}, {}))
    with pytest.raises(planning.PlanError):
        svc.build_plan(svc.LaunchFacts(host=HOST, run_id="20261201-000000-abcd"), bad)


def _old_run(tmp_status="running", step="3"):
    """The files of run ``old`` on HOST: its spec (a plan of FLAGS with 20 steps), run.json, checkpoint tracker."""
    old = plan_for(
        settings=settings_mod.resolve(FLAGS, {}, {}), host=HOST, mode="dapo", run_id="old", swanlab_logger=False
    ).spec
    rec = {
        "status": tmp_status,
        "step": 3,
        "features": [*old["features"], {"name": "offload", "source": "oom-retry-1"}],
    }
    return {
        "/runs/old/spec.json": json.dumps(old),
        "/runs/old/run.json": json.dumps(rec),
        f"{old['settings']['ckpt_dir']}/latest_checkpointed_iteration.txt": step + "\n",
    }


def test_a_resume_is_read_first_and_planned_once(launch_env):
    t = FakeTarget(files=_old_run())
    launch_env.counts.update(make_plan=0, check_spec=0)  # (the earlier run's spec above was planned too)
    row = svc.launch_one(t, _req(resume="old"))
    assert row.ok, row.message
    assert launch_env.counts == {"make_plan": 1, "check_spec": 1}
    spec = _spec(t)
    assert spec["resume_of"] == "old" and spec["settings"]["ckpt_dir"] == "/runs/old/checkpoints"
    assert {"name": "offload", "source": "oom-retry-1"} in spec["features"]
    assert "learned start: not looked up (--resume continues run old with its own features)" in row.data["start"]
    assert (
        row.data["resume"]
        == "run old's checkpoints in /runs/old/checkpoints, from global_step_3; keeps offload (its OOM ladder)"
    )
    assert [r["op"] for r in launch_env.stops] == ["stop"]  # its supervisor died: closed before the start


def test_a_refused_resume_leaves_the_earlier_runs_record_alone(launch_env):
    """A new user's trial: after a supervisor SIGKILL verl finished every step; `inv launch --resume` was refused
    ("would train nothing") but had already closed the earlier run as failed at a stale step. The refusal comes
    first: no stop op runs, nothing is written."""
    t = FakeTarget(files=_old_run(step="20"))
    with pytest.raises(launch_errors.LaunchRefused) as e:
        svc.launch_one(t, _req(resume="old"))
    assert e.value.kind == "resume" and "would train nothing" in str(e.value)
    assert launch_env.stops == [] and t.written == {}


def test_a_plan_cannot_be_changed():
    p = plan_for(
        settings=settings_mod.resolve(FLAGS, {}, {}),
        host=HOST,
        mode="dapo",
        run_id="20261201-000000-abcd",
        swanlab_logger=False,
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.argv = []  # type: ignore[misc]
    for change in (
        lambda: p.spec.__setitem__("container", "other"),
        lambda: p.spec["settings"].update(steps=5),
        lambda: p.spec["env"].pop("VERL_LOGGING_LEVEL"),
        lambda: p.spec["features"][0].__setitem__("source", "explicit"),
        lambda: p.argv.append("trainer.total_training_steps=5"),
        lambda: p.notes.append("x"),
        lambda: p.memory.clear(),
    ):
        with pytest.raises(TypeError, match="a Plan is immutable"):
            change()
    # read as plain JSON values; a copy is a plain, changeable value
    assert json.loads(json.dumps(p.spec))["settings"]["steps"] == 20 and p.argv == list(p.argv)
    c = copy.deepcopy(p.spec)
    c["settings"]["steps"] = 5
    assert p.spec["settings"]["steps"] == 20
    more = dataclasses.replace(p, notes=[*p.notes, "x"])
    assert more.notes[-1] == "x" and "x" not in p.notes


# ------------------------------------------------------------------ the start: one call, its answers


def test_start_run_failures_say_what_started(launch_env):
    plan = svc.build_plan(svc.LaunchFacts(host=HOST, run_id="20261201-000000-abcd"), _req())

    def start(answer):
        t = FakeTarget(start=lambda rid: answer)
        with pytest.raises(RemoteError) as e:
            svc.start_run(t, plan, {}, link_wait=0)
        return t, e.value

    t, e = start("could not start the supervisor of /runs/20261201-000000-abcd: [Errno 2] No such file")
    assert e.kind == "command" and "[Errno 2]" in str(e)
    # nothing runs: the run dir goes (the bundle op `runfiles remove`; issue 46: it was `rm -rf` through Target.run)
    assert fake_ops.op_of(t.calls[-1][1]) == ["runfiles", "remove", "/runs/20261201-000000-abcd"]
    t, e = start(RemoteError("unreachable", "h1", "connection to h1 lost"))
    assert "may have started: `inv status -H h1`" in str(e)
    assert not any((fake_ops.op_of(c) or [""])[:2] == ["runfiles", "remove"] for _, c in t.calls)
    t, e = start({"started": False, "record": None, "supervisor_exit": 1})
    assert str(e) == (
        "h1: run 20261201-000000-abcd did not start: its supervisor exited (1) before verl started; see "
        "/runs/20261201-000000-abcd/supervisor.log (inv logs -H h1 --run 20261201-000000-abcd)"
    )
    t, e = start({"started": False, "record": {"status": "starting"}, "supervisor_exit": None})
    assert e.kind == "timeout" and "did not start within 30 s; see /runs/20261201-000000-abcd/supervisor.log" in str(e)
    failed = {"status": "failed", "run_id": "20261201-000000-abcd", "verdict": {"cls": "config-error", "action": "fix"}}
    row = svc.start_run(FakeTarget(start=lambda rid: {"started": True, "record": failed}), plan, {}, link_wait=0)
    assert not row.ok and row.message == "run 20261201-000000-abcd failed at once: config-error: fix"
    # MAX_OOM_RETRIES=0: the verdict's policy says "retry ..." but the supervisor stopped, after step 2 (trial)
    oom = {
        "status": "failed",
        "run_id": "20261201-000000-abcd",
        "step": 2,
        "total_steps": 8,
        "verdict": {"cls": "oom-device", "action": "retry from the last checkpoint with the next memory rung"},
        "decision": {"action": "stop", "reason": "device OOM in phase update after 0 OOM retries (MAX_OOM_RETRIES=0)"},
    }
    row = svc.start_run(FakeTarget(start=lambda rid: {"started": True, "record": oom}), plan, {}, link_wait=0)
    assert row.message == (
        "run 20261201-000000-abcd failed at step 2/8: oom-device: device OOM in phase update after 0 OOM retries "
        "(MAX_OOM_RETRIES=0)"
    )


def test_the_start_call_quotes_every_value(launch_env):
    host = dataclasses.replace(HOST, workdir="/work dir/it's", runs_dir="/runs x")
    plan = svc.build_plan(svc.LaunchFacts(host=host, run_id="20261201-000000-abcd"), _req())
    t = FakeTarget(host=host)
    assert svc.start_run(t, plan, {"SWANLAB_API_KEY": "sk-0123456789"}, link_wait=2.5).ok
    # ONE call: the start op, spec.json and secret.env on its stdin (issue 46: they were two Target.put_text calls)
    assert [k for k, _ in t.calls] == ["run"]
    assert sorted(t.written) == ["/runs x/20261201-000000-abcd/secret.env", "/runs x/20261201-000000-abcd/spec.json"]
    assert "sk-0123456789" in t.written["/runs x/20261201-000000-abcd/secret.env"]
    [line] = [c for k, c in t.calls if k == "run"]
    assert "sk-0123456789" not in line
    assert shlex.split(line.split(" exec ", 1)[1]) == [
        "python3",
        "-m",
        "dapo_ops.agent.runstart",
        "/runs x/20261201-000000-abcd",
        "--workdir",
        "/work dir/it's",
        "--start-wait",
        "30",
        "--settle",
        "4",
        "--link-wait",
        "2.5",
        "--stdin",
    ]


class Clock:
    """A fake clock for :func:`runstart.wait`: ``sleep`` advances it and writes run.json per the script."""

    def __init__(self, run_dir: Path, script: dict[float, dict]):
        self.t, self.run_dir, self.script = 0.0, run_dir, sorted(script.items())

    def now(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t = round(self.t + s, 3)
        while self.script and self.script[0][0] <= self.t:
            (self.run_dir / "run.json").write_text(json.dumps(self.script.pop(0)[1]))


def _wait(tmp_path, script, *, exited=lambda: None, start_wait=30.0, settle=4.0, link_wait=0.0):
    run_dir = tmp_path / f"run{len(list(tmp_path.iterdir()))}"  # a fresh run dir per start
    run_dir.mkdir()
    c = Clock(run_dir, script)
    ans = runstart.wait(
        str(run_dir), exited, start_wait=start_wait, settle=settle, link_wait=link_wait, clock=c.now, sleep=c.sleep
    )
    return ans, c.t


def test_the_start_op_answers_once_verl_started_and_settled(tmp_path):
    ans, t = _wait(tmp_path, {0.5: {"status": "starting"}, 1.2: {"status": "running", "step": 0}})
    assert ans == {"started": True, "record": {"status": "running", "step": 0}, "supervisor_exit": None}
    assert t == pytest.approx(1.2 + 4.0)  # watched SETTLE_S after it started
    # a config error ends the run during the settle: answered at once
    ans, t = _wait(tmp_path, {0.3: {"status": "running"}, 0.6: {"status": "failed", "verdict": {"cls": "config"}}})
    assert ans["record"]["status"] == "failed" and t == pytest.approx(0.6)
    # the SwanLab link: waited for up to link_wait, answered when it appears
    url = {"status": "running", "swanlab_url": "https://swanlab.cn/x"}
    ans, t = _wait(tmp_path, {0.2: {"status": "running"}, 9.0: url}, link_wait=20.0)
    assert ans["record"] == url and t == pytest.approx(9.0)


def test_the_start_op_answers_at_once_when_the_supervisor_died_or_at_its_deadline(tmp_path):
    ans, t = _wait(tmp_path, {}, exited=lambda: 1)
    assert ans == {"started": False, "record": None, "supervisor_exit": 1} and t == 0.0
    ans, t = _wait(tmp_path, {0.1: {"status": "starting"}}, start_wait=3.0)
    assert ans == {"started": False, "record": {"status": "starting"}, "supervisor_exit": None}
    assert t == pytest.approx(3.0)


def test_a_resume_chain_keeps_its_first_runs_swanlab_run_id(launch_env):
    """Issue 44 major 2: the chain ``A -> B -> C`` had spec.json ``SWANLAB_RUN_ID`` values ``h(A)``, ``h(A)`` and
    then ``h(B)`` (service.py hashed ``req.resume``, the direct predecessor), so C's metrics went to a new SwanLab
    run. Every run of the chain keeps A's id (docs/design.md: a resumed run keeps the earlier run's id)."""
    from dapo_ops.control.launch.resume import ResumeFacts

    sw = SwanlabSettings(mode="offline")
    ids, earlier = [], None
    for rid in ("20261201-000000-aaaa", "20261201-000100-bbbb", "20261201-000200-cccc"):
        resume = ResumeFacts(run_id=earlier[0], spec=earlier[1]) if earlier else None
        req = _req(resume=earlier[0] if earlier else "")
        req.sw = sw
        plan = svc.build_plan(svc.LaunchFacts(host=HOST, run_id=rid, resume=resume), req)
        ids.append(plan.spec["env"]["SWANLAB_RUN_ID"])
        earlier = (rid, plan.spec)
    assert ids[0] == ids[1] == ids[2], ids


def test_the_launch_output_prints_the_fit_lines_and_says_when_it_falls_back(launch_env, capsys):
    """Issue 45: ``inv launch`` (not only ``--dry-run``) prints the fastest fit's lines, each value with its why, from
    the row control returns (control prints nothing). Qwen3-8B on one 80 GiB device: the update does not fit even at
    the smallest budget, so its line says ``falls back`` and the estimate's start rungs follow as ``start:`` lines."""
    from dapo_ops.cli import launch as cli_launch

    t = FakeTarget()
    row = svc.launch_one(t, _req())
    assert row.ok, row.message
    assert capsys.readouterr().out == ""  # control returned the lines, printed nothing
    spec = _spec(t)
    recorded = [f"{c['name']} {c['value']}: {c['why']}" for c in spec["fit"]["choices"] + spec["fit"]["kept"]]
    assert row.data["fit"] == recorded and recorded
    assert any(ln.startswith("ppo_max_token_len_per_gpu ") and ": falls back: " in ln for ln in row.data["fit"])
    cli_launch._print_run(HOST, row.data, [])
    out = capsys.readouterr().out.splitlines()
    fit = [ln for ln in out if ln.startswith("  fit:     ")]
    assert [ln[len("  fit:     ") :] for ln in fit] == recorded
    start = [ln for ln in out if ln.startswith("  start:   memory-fit: starts on rung(s) ")]
    assert start and out.index(start[0]) < out.index(fit[0])  # the estimate's rungs, then what the fit chose


def test_the_follow_commands_name_a_container_other_than_the_inventorys(capsys):
    """``inv launch -H h1 -c verl2``: the ``follow:`` line said ``inv status -H h1``, which looks in the inventory's
    container ``verl`` and showed an earlier run there as succeeded (a new user's trial); the run's own container is
    in the commands (text and ``--json``) when it is not the inventory's, and the inventory's adds nothing."""
    from dapo_ops.cli import launch as cli_launch

    row = {"run_id": "20261207-000000-abcd", "status": "running", "log": "/runs/x/train.log", "container": "verl2"}
    assert HOST.container == "verl"
    cli_launch._print_run(HOST, row, [])
    out = capsys.readouterr().out
    assert "  follow:  inv status -H h1 -c verl2   |   inv logs -f -H h1 -c verl2\n" in out, out
    assert cli_launch.run_json(HOST, row, [])["follow"] == ["inv status -H h1 -c verl2", "inv logs -f -H h1 -c verl2"]
    assert cli_launch.run_json(HOST, dict(row, container="verl"), [])["follow"] == [
        "inv status -H h1",
        "inv logs -f -H h1",
    ]
