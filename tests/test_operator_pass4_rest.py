"""Issue 44's remaining minors (operator pass 4, second part): one test per item, each run against project code and
each failing on the code before its fix. Pure where possible; the compose tests read the pinned verl 0.9.1 config
from sandbox/fetch_verl_config.py's cache (as tests/test_overrides_compose.py does). No host is contacted."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from dapo_ops.agent import compose
from dapo_ops.control.launch import service as svc
from dapo_ops.control.launch.refusals import LaunchUsageError
from dapo_ops.control.preflight import verl as preflight_verl

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def verl_root() -> str:
    sys.path.insert(0, str(REPO / "sandbox"))
    from fetch_verl_config import verl_config_root

    return str(verl_config_root())


# ------------------------------------------------------------------ 1. an unknown key is not a "secret" key


@pytest.mark.parametrize(
    "override, near",
    [("trainer.nonexistent_key=1", None), ("data.promt_key=question", "data.prompt_key")],
)
def test_an_unknown_key_that_looks_secret_is_refused_as_unknown(override, near):
    """``--override trainer.nonexistent_key=1`` was refused as "the key looks secret": it is a key verl's config lacks
    (every secret-looking key verl has is in VERL_NAME_KEYS), which Hydra refuses without ``+``."""
    with pytest.raises(LaunchUsageError) as e:
        svc.refuse_secret_overrides([override], [])
    msg = str(e.value)
    assert "unknown key" in msg and "secret" not in msg, msg
    assert len(msg.splitlines()) == 1
    assert (f"did you mean {near}?" in msg) if near else ("did you mean" not in msg), msg
    with pytest.raises(LaunchUsageError, match=r"the key looks secret"):  # a new (+) key with a secret name still is
        svc.refuse_secret_overrides(["+trainer.api_key=abc"], [])
    svc.refuse_secret_overrides(["data.prompt_key=question"], [])  # verl's own name key passes


def test_preflight_names_the_nearest_known_key_of_the_hosts_verl_config(verl_root):
    """Preflight's compose (run with the host's own verl config) adds the nearest known key to an unknown key's
    Hydra error, and the ``overrides`` check's fix names it (verl 0.9.1 has trainer.total_training_steps,
    verl/trainer/config/ppo_trainer.yaml)."""
    cdir = f"{verl_root}/verl/trainer/config"
    errs = compose.compose_errors(verl_root, cdir, "ppo_trainer", ["trainer.total_training_step=5", "trainer.x_y_z=1"])
    flat = [line for block in errs for line in block]
    assert compose.NEAREST_PREFIX + "trainer.total_training_steps" in flat, flat
    assert sum(line.startswith(compose.NEAREST_PREFIX) for line in flat) == 1, flat  # none for a key nothing is near
    check = preflight_verl._overrides_check({"stdout": json.dumps({"ok": False, "errors": errs})})
    assert check.status == "fail"
    assert "did you mean trainer.total_training_steps?" in check.fix, check
    assert "Could not override 'trainer.total_training_step'" in check.message
    assert compose.NEAREST_PREFIX not in check.message


# ------------------------------------------------------------------ 2. watch: "stopped" is not the usage error's 2


def test_watch_exit_codes_are_distinct_and_documented(tmp_path):
    """``inv watch`` exit 2 meant both "stopped" and a usage error (_common.EXIT_USAGE). Stopped is 5 now, a
    run stopped on one host and failed on another still exits with the worse (stopped, as before), and README.md
    and docs/workflow.md list every code."""
    from types import SimpleNamespace

    from dapo_ops.cli import _common
    from dapo_ops.cli import logs as cli_logs
    from dapo_ops.control.status import rows as sv
    from dapo_ops.control.status import watch as watchloop
    from dapo_ops.core.runstate import RunStatus

    FAILED, STOPPED = RunStatus.FAILED, RunStatus.STOPPED

    codes = watchloop.WATCH_CODES
    assert codes[STOPPED] not in (_common.EXIT_USAGE, _common.EXIT_INTERRUPTED, _common.EXIT_CLOSED_PIPE)
    assert len({codes[s] for s in (RunStatus.SUCCEEDED, FAILED, STOPPED, sv.SUPERVISOR_DEAD, sv.NO_RUN)}) == 5
    run = {"run_id": "r1", "status": "running", "attempt": 1, "step": 2, "total_steps": 4}
    w = watchloop.Watch([SimpleNamespace(name="h1"), SimpleNamespace(name="h2")])
    w.see(
        [
            sv.build_row("h1", {"run": dict(run, status="stopped", stop={"by": "inv stop"}), "tail": "", "now": 2.0}),
            sv.build_row("h2", {"run": dict(run, run_id="r2", status="failed"), "tail": "", "now": 2.0}),
        ]
    )
    code, msg = w.outcome()
    assert code == codes[STOPPED] == 5 and msg.startswith("h1: run r1 stopped"), (code, msg)
    assert watchloop.worst_code([0, 1, 5]) == 5 and watchloop.worst_code([5, 3]) == 3
    stopped = {"run": dict(run, status="stopped"), "tail": "", "now": 2.0}
    assert cli_logs.ending("h1", stopped)[0] == 5  # inv logs -f: the same code
    for doc in ("README.md", "docs/workflow.md"):
        text = " ".join((REPO / doc).read_text().split())
        for words in (
            "0 succeeded",
            "1 failed",
            "3 supervisor died",
            "4 no run / probe error",
            "5 stopped",
            "2 a usage",
        ):
            assert words in text, (doc, words)


# ------------------------------------------------------------------ 3. preflight says a run is active


def test_preflight_says_a_run_is_active_in_launchs_words(tmp_path):
    """``inv preflight`` was all green on a host where a run was active, and launch then refused. The full probe
    asks for the container's occupancy (agent/occupancy.py, the one rule, read without sweeping) and preflight fails
    ``active-run`` with launch's own words (busy_reason)."""
    from types import SimpleNamespace

    from dapo_ops.agent import occupancy
    from dapo_ops.agent import preflight_probe as agent_preflight
    from dapo_ops.control.preflight import checks
    from dapo_ops.control.preflight.gather import probe_request

    host = SimpleNamespace(name="h1", accelerator="gpu", runs_path=str(tmp_path), container="verl")
    req = probe_request(host, None, full=True)
    assert req["occupancy"] == {"runs_dir": str(tmp_path), "name": "h1"}
    assert "occupancy" not in probe_request(host, None, full=False)  # launch asks with --sweep itself
    facts = agent_preflight.probe({"occupancy": req["occupancy"]})
    assert facts["occupancy"]["active"] is None  # an empty runs_dir: nothing holds it
    rid = "20261129-151200-a1b2"
    p = {"occupancy": {"active": {"run_id": rid}, "verl": [], "ray": []}}
    [check] = checks._occupancy_checks(host, "verl", p)
    assert check.status == "fail" and check.name == "active-run", check
    assert check.message == f"run {rid} is already active on h1 (container verl)"
    assert f"inv stop -H h1 --run {rid}" in check.fix
    line = occupancy.busy_reason(p["occupancy"], "h1", "container verl")["line"]
    assert line == f"{check.message}; {check.fix}"  # launch refuses with this same line (refuse_if_busy)
    ok = checks._occupancy_checks(host, "verl", {"occupancy": {"active": None, "verl": [], "ray": []}})
    assert [c.status for c in ok] == ["ok"]
    assert checks._occupancy_checks(host, "verl", {}) == []


# ------------------------------------------------------------------ 4. a multi-host refusal: one line per host


def test_a_multi_host_launch_says_every_refused_hosts_reason(monkeypatch, capsys):
    """``inv launch -H h1,h2`` with h1 busy and h2's sshd stopped showed only h1's reason; h2's hid behind
    ``(+1 more host(s) refused)``. Each refused host has its own line (its reason and fix), then the count."""
    from types import SimpleNamespace

    import invoke

    from dapo_ops.cli import multihost as cli_multihost
    from dapo_ops.control.launch import multihost_service
    from dapo_ops.control.launch.refusals import LaunchRefused
    from dapo_ops.control.remote.errors import RemoteError

    busy = "run 20261129-151200-a1b2 is already active on h1 (container verl); follow it with `inv status -H h1`"

    def quick_checks(t, plan, skip, req, need_facts):
        if t.name == "h1":
            raise LaunchRefused("active-run", busy)
        if t.name == "h2":
            raise RemoteError("refused", "h2", "ssh connection refused on port 22: is sshd running?")

    monkeypatch.setattr(multihost_service.service, "quick_checks", quick_checks)
    targets = {n: SimpleNamespace(name=n) for n in ("h1", "h2", "h3")}
    with pytest.raises(multihost_service.ClusterLaunchError) as e:
        multihost_service.check_hosts(targets, None, False)
    assert e.value.hosts == (f"h1: {busy}", "h2: ssh connection refused on port 22: is sshd running?")
    assert str(e.value) == "2 of 3 hosts refused (each said above); nothing was started"
    with pytest.raises(multihost_service.ClusterLaunchError) as one:
        multihost_service.check_hosts({"h1": targets["h1"], "h3": targets["h3"]}, None, False)
    assert str(one.value) == f"h1: {busy}; nothing was started" and one.value.hosts == ()

    def launch_cluster(req, chosen, targets, hosts_given):
        raise e.value

    monkeypatch.setattr(cli_multihost.multihost_service, "launch_cluster", launch_cluster)
    c = SimpleNamespace(config={})
    with pytest.raises(invoke.exceptions.Exit) as ex:
        cli_multihost.launch(c, None, [], accept_new_host_keys=False, secrets_all=[])
    err = capsys.readouterr().err.splitlines()
    assert err == list(e.value.hosts), err
    assert ex.value.message == str(e.value) and ex.value.code == 1


# ------------------------------------------------------------------ 5. a full runs disk at the bundle upload


def test_a_full_runs_disk_at_the_bundle_upload_is_one_line_with_the_path_and_fix():
    """A full runs disk printed raw ``cat: write error: No space left on device`` (Target.put_text's ``cat >``).
    The upload says the path and preflight's fix (control/remote/errors.py space_fix, preflight's ``bundle``)."""
    from types import SimpleNamespace

    from dapo_ops.control.remote import bundle
    from dapo_ops.control.remote.errors import RemoteError, command_error, space_fix

    class Full:
        name, where = "h1", "in container verl on h1"

        def __init__(self, fail_at):
            self.fail_at = fail_at

        def put_text(self, text, path, mode=0o644, timeout=60):
            if self.fail_at == "put":
                res = SimpleNamespace(exited=1, stderr="cat: write error: No space left on device\n", stdout="")
                raise command_error(self.name, f"write {path}", res, where=self.where)

        def run(self, cmd, **kw):
            res = SimpleNamespace(exited=1, stderr="OSError: [Errno 28] No space left on device\n", stdout="")
            raise command_error(self.name, "python3 -c ...", res, where=self.where)

    bdir = bundle.bundle_dir("/verl/dapo_runs")
    for at in ("put", "run"):
        with pytest.raises(RemoteError) as e:
            bundle.install(Full(at), bdir, files={"x.py": b""})
        msg = str(e.value)
        assert msg.startswith("h1: no space left on device writing the dapo-ops bundle to /verl/dapo_runs/.dapo_ops/")
        assert msg.endswith(space_fix("/verl/dapo_runs")) and "cat: write error" not in msg, msg
        assert "\n" not in msg


def test_another_bundle_upload_failure_keeps_its_own_words():
    from types import SimpleNamespace

    from dapo_ops.control.remote import bundle
    from dapo_ops.control.remote.errors import RemoteError, command_error

    class ReadOnly:
        name, where = "h1", "in container verl on h1"

        def put_text(self, text, path, mode=0o644, timeout=60):
            res = SimpleNamespace(exited=1, stderr="mkdir: cannot create directory: Read-only file system\n", stdout="")
            raise command_error(self.name, f"write {path}", res, where=self.where)

    with pytest.raises(RemoteError, match="Read-only file system"):
        bundle.install(ReadOnly(), bundle.bundle_dir("/verl/dapo_runs"), files={"x.py": b""})


# ------------------------------------------------------------------ 8. no "last step" before a step exists


def test_a_multi_host_row_at_step_0_shows_no_last_step_age():
    """Multi-host status showed ``0/8 ... last step 1s ago`` before the first step: the head's run.json says step 0,
    and verl's first step is 1 (verl/trainer/ppo/ray_trainer.py:1426,1451)."""
    from dapo_ops.control.status import rows as sv
    from dapo_ops.control.status import table

    run = {"run_id": "r1", "status": "running", "attempt": 1, "step": 0, "total_steps": 8, "started_at": 99.0}
    head = sv.build_row("h1", {"run": run, "tail": "", "now": 100.0, "supervisor_alive": True})
    worker = sv.worker_row(sv.build_row("h2", {"error": "h2: no run"}), head)
    for row in (head, worker):
        cell = table.age(row)
        assert cell.startswith("no step yet (started "), (row.host, row.step, cell)
    stepped = sv.build_row("h1", {"run": dict(run, step=3), "tail": "", "now": 100.0, "supervisor_alive": True})
    assert table.age(stepped) == "1s ago"


# ------------------------------------------------------------------ 7. a plan that leaves devices idle says so


def test_one_step_off_on_two_hosts_says_it_leaves_devices_idle(tmp_path):
    """``inv one-step-off -H h1,h2 --dry-run`` used 8 of 16 NPUs with no note (trainer 4 on h1, rollout 4 on h2)."""
    from dapo_ops.cli import multihost as cli_multihost
    from dapo_ops.core import topology as t

    h = [t.Node("h1", "10.0.0.1", 8), t.Node("h2", "10.0.0.2", 8)]
    topo = t.plan_topology("one-step-off", h, 4, 4)
    note = topo.unused_note()
    assert note is not None and note.startswith("uses 8 of 16 devices (h1 4 of 8, h2 4 of 8)"), note
    assert "up to 8" in note
    assert t.plan_topology("one-step-off", h, 8, 8).unused_note() is None
    assert t.plan_topology("dapo", h).unused_note() is None
    assert "uses 6 of 8" in t.plan_topology("one-step-off", h[:1], 4, 2).unused_note()

    inv = tmp_path / "hosts.toml"
    inv.write_text('[hosts.h1]\naddress = "10.0.0.1"\ndevices = 8\n\n[hosts.h2]\naddress = "10.0.0.2"\ndevices = 8\n')
    lines: list[str] = []

    class Console:
        def print(self, *a, **k):
            lines.append(" ".join(str(x) for x in a))

    plan = cli_multihost.dry_run(
        {"trainer_gpus": 4, "rollout_gpus": 4},
        mode="one-step-off",
        hosts="h1,h2",
        inventory=str(inv),
        env={},
        file_cfg={},
        console=Console(),
    )
    assert plan is not None
    assert any(ln.startswith("Note:") and "uses 8 of 16 devices" in ln for ln in lines), lines
