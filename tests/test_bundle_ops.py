"""The bundle ops that replaced the calls around ``run_op`` (issue 46 item 1), run for real: through
:func:`dapo_ops.control.remote.bundle.run_op` on a local bare host (transport ``local``, runtime ``host``: the same
Target code path as SSH, a local subprocess; the bundle installed on first use), or as the op's own command line.

- ``runstart --stdin``: spec.json and secret.env from stdin (modes, never on the command line), a missing or
  malformed spec, quoting of the run dir;
- ``runfiles show-spec / resume-facts / remove``;
- ``runlogs tail / follow``;
- ``raysession start``: the node's session under its launcher, its pid, info and log files;
- ``preflight`` through ``run_op(around=...)``: the bundle missing, installed, the probe answering in the retry.
"""

from __future__ import annotations

import dataclasses
import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dapo_ops.agent import raysession, runfiles, runlogs, runstart
from dapo_ops.control.inventory import hosts_file as inventory
from dapo_ops.control.launch import service as launch_svc
from dapo_ops.control.remote import bundle as remote_bundle
from dapo_ops.control.remote.errors import RemoteError
from dapo_ops.control.remote.target import Target

REPO = Path(__file__).resolve().parent.parent

BARE = """
[hosts.dev]
runtime = "host"
transport = "local"
container = ""
accelerator = "gpu"
devices = 1
"""


def _target(tmp_path: Path) -> Target:
    """A local bare host whose runs dir (and so its bundle) is under ``tmp_path``; the op's python is this one."""
    h = inventory.loads(BARE, "hosts.toml").hosts["dev"]
    runs = tmp_path / "runs dir"
    h = dataclasses.replace(h, workdir=str(tmp_path), runs_dir=str(runs), python=sys.executable)
    return Target(h)


def _spy(monkeypatch, t: Target) -> list:
    """Every host command line ``t`` runs, with its stdin: ``[(command, stdin bytes | None)]``."""
    seen: list = []
    real = t._raw

    def spy(command, **kw):
        seen.append((command, kw.get("stdin")))
        return real(command, **kw)

    monkeypatch.setattr(t, "_raw", spy)
    return seen


# ------------------------------------------------------------------ runstart --stdin


def test_the_start_op_writes_spec_and_secrets_from_stdin_never_the_command_line(tmp_path, monkeypatch):
    """The launch's one call: the files come on stdin with their modes (spec 0644, secret 0600, the run dir 0700 as
    put_text's ``umask 077 && mkdir -p`` made it); the secret is in no command line. The workdir is missing here, so
    the supervisor cannot start: exit SPAWN_FAILED with one line, after the files were written."""
    t = _target(tmp_path)
    seen = _spy(monkeypatch, t)
    run_dir = f"{t.host.runs_path}/20261201-000000-ab'c"  # quoting: a space in the runs dir, a quote in the name
    spec = {"run_id": "20261201-000000-abcd", "python": sys.executable, "workdir": str(tmp_path / "no such")}
    args = [run_dir, "--workdir", spec["workdir"], "--start-wait", "5", "--settle", "0", "--link-wait", "0", "--stdin"]
    stdin = launch_svc.start_input(spec, {"SWANLAB_API_KEY": "sk-secret-0123"})
    res = remote_bundle.run_op(t, "runstart", args, check=False, workdir="", stdin=stdin)
    assert res.exited == runstart.SPAWN_FAILED, (res.stdout, res.stderr)
    assert res.stderr.strip().startswith(f"could not start the supervisor of {run_dir}: [Errno 2]"), res.stderr
    rd = Path(run_dir)
    assert json.loads((rd / "spec.json").read_text()) == spec
    assert (rd / "spec.json").read_text() == json.dumps(spec, indent=1) + "\n"  # what put_text wrote, byte for byte
    assert "sk-secret-0123" in (rd / "secret.env").read_text()
    modes = {p: stat.S_IMODE(os.stat(p).st_mode) for p in (rd, rd / "spec.json", rd / "secret.env")}
    assert modes == {rd: 0o700, rd / "spec.json": 0o644, rd / "secret.env": 0o600}, modes
    assert not list(rd.glob("*.dapo-tmp"))
    assert all("sk-secret-0123" not in cmd for cmd, _ in seen)
    assert any(body and b"sk-secret-0123" in body for _, body in seen)  # it went through stdin


@pytest.mark.parametrize(
    "stdin, why",
    [
        (b"", "the start's stdin has no spec"),
        (b"{}", "the start's stdin has no spec"),
        (b"{not json", "the start's stdin is not JSON"),
        (json.dumps({"spec": "[1, 2]"}).encode(), "the run's spec is not a JSON object"),
        (json.dumps({"spec": "{torn"}).encode(), "the run's spec is not JSON"),
    ],
)
def test_a_start_without_a_usable_spec_writes_nothing_and_starts_nothing(tmp_path, stdin, why):
    """The op as the bundle runs it (its own command line, stdin a pipe): one stderr line, exit SPAWN_FAILED, no run
    dir."""
    run_dir = tmp_path / "20261201-000000-abcd"
    res = subprocess.run(
        [sys.executable, "-S", "-m", "dapo_ops.agent.runstart", str(run_dir), "--workdir", str(tmp_path)]
        + ["--start-wait", "1", "--settle", "0", "--link-wait", "0", "--stdin"],
        input=stdin,
        capture_output=True,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO), "PATH": os.environ["PATH"]},
    )
    err = res.stderr.decode()
    assert res.returncode == runstart.SPAWN_FAILED and res.stdout == b"", err
    assert err.startswith(f"could not start run {run_dir.name}: {why}") and len(err.splitlines()) == 1, err
    assert not run_dir.exists()


def test_a_start_whose_run_dir_cannot_be_written_says_which_file(tmp_path):
    """A runs dir that cannot hold the run dir (here: a file in its place; root writes anywhere else): one line that
    names the path, no umask left changed for the supervisor started next."""
    (tmp_path / "runs").write_text("not a dir")
    before = os.umask(0o022)
    os.umask(before)
    with pytest.raises(runstart.StartInputError, match=r"^cannot write .*/runs/r1: Not a directory$"):
        runstart.write_files(str(tmp_path / "runs" / "r1"), runstart.read_input(json.dumps({"spec": "{}"})))
    assert os.umask(before) == before


def test_stdin_cannot_go_with_secrets_or_a_pty(tmp_path):
    t = _target(tmp_path)
    with pytest.raises(ValueError, match="stdin cannot go with secret_env"):
        t.run("cat", stdin=b"x", secret_env={"K": "v"})
    with pytest.raises(ValueError, match="stdin cannot go with secret_env"):
        t.run("cat", stdin=b"x", pty=True)


# ------------------------------------------------------------------ runfiles


def test_runfiles_show_spec_remove_and_resume_facts(tmp_path):
    t = _target(tmp_path)
    runs = Path(t.host.runs_path)
    old = runs / "20261201-000000-0001"
    ckpt = tmp_path / "ckpt dir"
    (ckpt / "global_step_3" / "actor").mkdir(parents=True)
    (ckpt / "latest_checkpointed_iteration.txt").write_text("3\n")
    (ckpt / "global_step_3" / "actor" / "fsdp_config.json").write_text('{"FSDP_version": 2, "world_size": 1}')
    spec = {"run_id": old.name, "framework": "fsdp", "settings": {"ckpt_dir": str(ckpt)}}
    old.mkdir(parents=True)
    (old / "spec.json").write_text(json.dumps(spec))
    (old / "run.json").write_text('{"status": "stopped", "step": 3}')

    res = remote_bundle.run_op(t, "runfiles", ["show-spec", str(old)], site=False, workdir="")
    assert json.loads(res.stdout) == spec
    facts = json.loads(remote_bundle.run_op(t, "runfiles", ["resume-facts", str(old)], workdir="").stdout)
    assert facts == {
        "spec": spec,
        "record": {"status": "stopped", "step": 3},
        "step": "3",
        "fsdp_version": 2,
        "later": [],  # no later run continues its checkpoints (runfiles.later_runs)
    }
    # a Megatron run has no fsdp_config; a missing run answers no spec (exit 0: the launch refuses in one line)
    assert runfiles.resume_facts(str(old), {**{str(old / "spec.json"): json.dumps({**spec, "framework": "megatron"})}}.get)[
        "fsdp_version"
    ] is None  # fmt: skip
    none = json.loads(remote_bundle.run_op(t, "runfiles", ["resume-facts", str(runs / "nope")], workdir="").stdout)
    assert none == {"spec": None, "record": None, "step": "", "fsdp_version": None, "later": []}
    missing = remote_bundle.run_op(t, "runfiles", ["show-spec", str(runs / "nope")], workdir="", check=False)
    assert (missing.exited, missing.stderr.strip()) == (1, f"no spec.json in {runs / 'nope'}")

    launch_svc.remove_run_dir(t, str(old))
    assert not old.exists() and runs.exists()
    launch_svc.remove_run_dir(t, str(old))  # again: nothing there is no error


# ------------------------------------------------------------------ runlogs


def test_runlogs_tail_is_tail(tmp_path):
    from dapo_ops.control.status import look as status_probe

    t = _target(tmp_path)
    log = tmp_path / "a log's dir" / "train.log"
    log.parent.mkdir()
    log.write_text("".join(f"step:{i}\n" for i in range(1, 8)) + "no newline")
    [(name, ans)] = status_probe.tail_texts([(t.host, {"log": str(log)})], 3)
    assert (name, ans) == ("dev", {"text": "step:6\nstep:7\nno newline"})
    with pytest.raises(RemoteError) as e:  # tail's own error line, through run_op's one line
        remote_bundle.run_op(t, "runlogs", ["tail", "5", str(log) + ".gone"], site=False, workdir="")
    assert e.value.kind == "command" and "tail: cannot open" in str(e.value)


def test_runlogs_follow_prints_the_log_then_the_runs_final_state(tmp_path):
    """``runlogs follow`` of a run whose supervisor is gone (no pid): the last lines at once, then END_MARK and the
    status probe's answer for the request, in the same command (what ``inv logs -f`` reads its ending from)."""
    runs = tmp_path / "runs"
    rd = runs / "20261201-000000-abcd"
    rd.mkdir(parents=True)
    runfiles.write_run(rd, {"run_id": rd.name, "status": "succeeded", "step": 2, "total_steps": 2})
    (rd / "train.log").write_text("step:1\nstep:2\n")
    req = {"op": "status", "run_id": rd.name, "runs_dir": str(runs), "host": "h1", "tail_bytes": 4096}
    # stdin held open while the follow runs (subprocess.run would close it at once: EOF = the client went away,
    # which ends a follow early, before tail printed: a race the CI machine under load lost)
    with subprocess.Popen(
        [
            sys.executable,
            "-S",
            "-m",
            "dapo_ops.agent.runlogs",
            "follow",
            str(rd / "train.log"),
            "5",
            "",
            json.dumps(req),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO), "PATH": os.environ["PATH"]},
    ) as proc:
        stdout = proc.stdout.read()  # to EOF: the follow ends by itself (no supervisor pid), stdin still open
        stderr = proc.stderr.read()
        proc.stdin.close()
        res = subprocess.CompletedProcess(proc.args, proc.wait(timeout=120), stdout, stderr)
    assert res.returncode == 0, res.stderr
    text, _, end = res.stdout.partition("\n" + runlogs.END_MARK)
    assert text.replace(runlogs.HEARTBEAT, "") == "step:1\nstep:2\n"
    answer = json.loads(end)
    assert answer["run"]["status"] == "succeeded" and answer["run"]["run_id"] == rd.name
    bad = subprocess.run(
        [sys.executable, "-S", "-m", "dapo_ops.agent.runlogs", "follow", "x"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO), "PATH": os.environ["PATH"]},
    )
    assert bad.returncode == 2 and bad.stderr.startswith("usage: python3 -m dapo_ops.agent.runlogs")


# ------------------------------------------------------------------ raysession start


def _wait_for(path: Path, timeout: float = 60.0) -> str:
    """The text of ``path`` once it exists and is not empty (polls the event: the file written)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text():
            return path.read_text()
        time.sleep(0.05)
    raise AssertionError(f"{path} not written within {timeout} s")


def test_raysession_start_runs_the_node_under_its_launcher_detached(tmp_path, monkeypatch):
    """``raysession start`` (what raycluster._start_node asks for): the info file, the session under the launcher
    (``exec "$@"``: the pid file names the leader, the session's id), ``ray`` from PATH, the run's marker in the
    node's environment, its output in the node's log."""
    from dapo_ops.core import raynodes

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    seen = tmp_path / "ray-saw"
    ray = bin_dir / "ray"  # the stand-in Ray CLI: says what it got and ends (the leader then ends its session)
    ray.write_text(f'#!/bin/sh\necho "ray $*"\nprintf "%s\\n" "$* $DAPO_OPS_RAY_RUN $LAUNCHED" > "{seen}.tmp"\n'
                   f'mv "{seen}.tmp" "{seen}"\n')  # fmt: skip
    ray.chmod(0o755)
    run_dir = tmp_path / "runs" / ".cluster" / "20261201-000000-abcd"
    req = {
        "run_dir": str(run_dir),
        "name": "h1",
        "info": {"head": "h1", "head_address": "198.51.100.11", "port": 6379, "role": "head"},
        "launcher": ["sh", "-c", 'LAUNCHED=yes exec "$@"', "launcher"],
        "args": ["start", "--head", "--block", "--port=6379"],
    }
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    pid = raysession.start_node(req, sys.executable)
    assert _wait_for(seen).split() == ["start", "--head", "--block", "--port=6379", "20261201-000000-abcd", "yes"]
    assert _wait_for(Path(raynodes.node_file(str(run_dir), "h1", raynodes.PID))) == f"{pid}\n"
    info = json.loads(Path(raynodes.node_file(str(run_dir), "h1", raynodes.INFO)).read_text())
    assert info == {"run_id": "20261201-000000-abcd", "name": "h1", **req["info"]}
    assert "ray start --head --block --port=6379" in _wait_for(Path(raynodes.node_file(str(run_dir), "h1", "log")))
    assert os.getsid(0) != pid  # its own session, not this process's
    assert raysession.ray_cli(sys.executable) == [str(ray)]
    monkeypatch.setenv("PATH", "/nonexistent")
    assert raysession.ray_cli("/usr/bin/python3") == ["/usr/bin/python3", "-m", "ray.scripts.scripts"]


# ------------------------------------------------------------------ preflight through run_op


def test_preflight_installs_a_missing_bundle_through_run_op_and_answers_in_the_retry(tmp_path, monkeypatch):
    """preflight's probe goes through run_op (``around``: its host command with the inspect step); a host
    without the bundle gets it installed and the probe answers in the one retry (preflight had its own copy of
    this loop)."""
    from dapo_ops.control.preflight import gather as preflight_probe

    t = _target(tmp_path)
    seen = _spy(monkeypatch, t)
    bdir = remote_bundle.bundle_dir(t.host.runs_path)
    assert not Path(bdir).exists()
    facts = preflight_probe.collect(t, {"accelerator": "gpu", "disk_path": str(tmp_path)})
    assert facts["ssh"] == {"ok": True} and not facts["bundle_error"] and facts["probe"] is not None, facts
    assert Path(bdir, "dapo_ops", remote_bundle.COMPLETE_MARK).exists()
    probes = [c for c, _ in seen if "dapo_ops.agent.preflight_probe" in c]
    assert len(probes) == 2  # the missing bundle's answer, then the retry
    facts = preflight_probe.collect(t, {"accelerator": "gpu", "disk_path": str(tmp_path)})
    assert facts["probe"] is not None and len([c for c, _ in seen if "dapo_ops.agent.preflight_probe" in c]) == 3
