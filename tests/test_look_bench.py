"""``Target.run(look=True)`` against the sandbox hosts: a read-only look enters the running container with
``nsenter`` (no ``docker exec``: Docker records no exec for it), answers exactly what ``docker exec`` answers
(stdout, stderr, exit status, the container's PATH and files), and falls back to ``docker exec`` in the same
call on a host that refuses ``nsenter`` (dapo_ops/control/remote/commands.py ``look_command``)."""

from __future__ import annotations

import pytest

from dapo_ops.control.inventory import hosts_file as inventory
from dapo_ops.control.remote.errors import RemoteError
from dapo_ops.control.remote.target import Target

pytestmark = pytest.mark.bench

# what the command sees: its PATH, its cwd, the container's PID 1, a file only the container has, stderr + status
CMD = (
    'echo "$PATH"; pwd; tr "\\0" " " < /proc/1/cmdline; echo; test -d /verl/dapo_runs && echo runs-dir; '
    "echo to-stderr >&2; exit 3"
)


@pytest.fixture(scope="module")
def host(sandbox):
    return inventory.load(sandbox.inventory).hosts["h1"]


def _execs_during(t: Target, fn) -> tuple[object, list[str]]:
    """``fn()``'s value and the ``exec_create`` events the host's Docker engine logged meanwhile."""
    since = t.host_run("date +%s.%N").stdout.strip()
    out = fn()
    until = t.host_run("date +%s.%N").stdout.strip()
    ev = t.host_run(
        f"docker events --since {since} --until {until} --filter event=exec_create "
        "--format '{{.Actor.Attributes.execID}}'",
        timeout=30,
    ).stdout.split()
    return out, ev


def test_look_answers_what_docker_exec_answers_without_an_exec(host):
    t = Target(host)
    try:
        looked, execs = _execs_during(t, lambda: t.run(CMD, look=True, check=False, workdir=""))
        assert execs == [] and t._nsenter_ok
        plain, execs2 = _execs_during(t, lambda: t.run(CMD, check=False, workdir=""))
        assert len(execs2) == 1  # the check above can fail: a docker exec is seen
        assert (looked.exited, looked.stdout, looked.stderr) == (plain.exited, plain.stdout, plain.stderr)
        assert looked.exited == 3 and "runs-dir" in looked.stdout and "to-stderr" in looked.stderr
        # the container's PATH (its venv first, as the sandbox image sets it), not the SSH session's
        assert looked.stdout.split("\n")[0].split(":")[0].endswith("/.venv/bin")
    finally:
        t.close()


def test_look_falls_back_to_docker_exec_where_nsenter_is_refused(host, monkeypatch):
    t = Target(host)
    refused = "echo \"nsenter: reassociate to namespace 'ns/pid' failed: Operation not permitted\" >&2; exit 1"
    monkeypatch.setattr(Target, "look_command", lambda self, cmd: refused)
    try:
        res, execs = _execs_during(t, lambda: t.run("echo in-container; exit 5", look=True, check=False, workdir=""))
        assert (res.exited, res.stdout) == (5, "in-container\n") and len(execs) == 1
        assert not t._nsenter_ok  # this Target no longer tries
        _, execs = _execs_during(t, lambda: t.run("true", look=True, workdir=""))
        assert len(execs) == 1
    finally:
        t.close()


def test_look_at_a_stopped_container_gives_the_same_error_kind(host, sandbox):
    t = Target(host)
    try:
        t.host_run("docker stop -t 0 verl", timeout=60)
        with pytest.raises(RemoteError) as looked:
            t.run("true", look=True, workdir="", state_on_failure=True)
        with pytest.raises(RemoteError) as plain:
            t.run("true", workdir="", state_on_failure=True)
        assert looked.value.kind == plain.value.kind == "container-stopped"
        assert str(looked.value) == str(plain.value)
    finally:
        t.close()
        sandbox.reset("h1")


def _mark(t: Target, text: str) -> None:
    t.run(f"echo {text} > /tmp/dapo-look-mark", workdir="")


def _look_mark(t: Target) -> tuple[str, list[str]]:
    res, execs = _execs_during(
        t, lambda: t.run("cat /tmp/dapo-look-mark 2>/dev/null || echo none", look=True, workdir="")
    )
    return res.stdout.strip(), execs


def test_the_remembered_pid_follows_restart_rename_and_each_engine(sandbox):
    """The host remembers the container's init PID (/run/dapo-ops): a restarted container (new PID), a renamed one
    replaced by a new container of the same name, and two Docker engines sharing one /run (the sandbox hosts do)
    are each entered correctly, and never through a stale PID (that would fail over to a docker exec)."""
    hosts = inventory.load(sandbox.inventory).hosts
    t1, t2 = Target(hosts["h1"]), Target(hosts["h2"])
    try:
        _mark(t1, "first-h1")
        _mark(t2, "first-h2")
        for _ in range(2):  # the second round is served from the remembered entries
            assert _look_mark(t1) == ("first-h1", []) and _look_mark(t2) == ("first-h2", [])
        t1.host_run("docker restart -t 0 verl", timeout=60)
        assert _look_mark(t1) == ("first-h1", [])  # same container, new init PID
        t1.host_run("docker rename verl verl-old", timeout=30)
        sandbox.reset("h1")  # bench.sh container h1: a new container named verl
        assert _look_mark(t1) == ("none", [])  # the new one, not verl-old (still running)
        assert _look_mark(t2) == ("first-h2", [])
        entries = t1.host_run("cat /run/dapo-ops/look-verl").stdout
        assert (
            sum(1 for ln in entries.splitlines() if ln.split()[0].endswith(f"dapo-bench-{sandbox.id}/h1/docker.sock|"))
            == 1
        )
    finally:
        t1.host_run("docker rm -f verl-old", check=False, timeout=60)
        t1.close()
        t2.close()
