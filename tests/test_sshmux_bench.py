"""Connection reuse against real sandbox hosts (dapo_ops/control/remote/sshmux.py, master.py): later calls and later processes reuse one
SSH connection (one sshd login for many commands), and through the control master the host key is still
verified and every failure keeps its RemoteError kind and message."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

import pytest

from dapo_ops.control.inventory import hosts_file as inventory
from dapo_ops.control.remote import sshmux
from dapo_ops.control.remote.errors import RemoteError
from dapo_ops.control.remote.target import Target

pytestmark = pytest.mark.bench


@pytest.fixture(scope="module")
def inv(sandbox):
    return inventory.load(sandbox.inventory)


@pytest.fixture(autouse=True)
def fresh_masters():
    sshmux.close_all()
    yield
    sshmux.close_all()


def logins(sandbox, host: str) -> int:
    """SSH logins the host's sshd has accepted so far (its log: ``Accepted publickey for ...``)."""
    log = sandbox.state / "ssh" / f"sshd_{host}.log"
    return log.read_text(errors="replace").count("Accepted publickey")


def reusing(inv, name="h1", **changes):
    return Target(dataclasses.replace(inv.hosts[name], **changes) if changes else inv.hosts[name], reuse=True)


def test_calls_and_processes_share_one_ssh_login(sandbox, inv):
    before = logins(sandbox, "h1")
    for _ in range(3):
        with reusing(inv) as t:
            assert t.run("hostname", workdir="").stdout.strip() == "h1"
    code = (
        "import sys; from dapo_ops.control.inventory import hosts_file as inventory; from dapo_ops.control.remote.target import Target; "
        "t = Target(inventory.load(sys.argv[1]).hosts['h1'], reuse=True); print(t.host_run('hostname').stdout)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(sandbox.inventory)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0 and out.stdout.strip() == "h1", out.stderr
    assert logins(sandbox, "h1") - before == 1
    # without reuse every Target logs in again
    before = logins(sandbox, "h1")
    for _ in range(2):
        with Target(inv.hosts["h1"]) as t:
            t.host_run("true")
    assert logins(sandbox, "h1") - before == 2


def test_persist_zero_turns_reuse_off(sandbox, inv, monkeypatch):
    monkeypatch.setenv(sshmux.PERSIST_ENV, "0")
    before = logins(sandbox, "h2")
    for _ in range(2):
        with reusing(inv, "h2") as t:
            t.host_run("true")
    assert logins(sandbox, "h2") - before == 2


def test_output_exit_codes_and_isolation_through_the_master(inv):
    t = reusing(inv)
    res = t.host_run("echo out; echo err >&2; printf 'no newline'")
    assert (res.stdout, res.stderr, res.exited) == ("out\nno newline", "err\n", 0)
    assert t.host_run("exit 7", check=False).exited == 7
    t.host_run("cd /tmp && export DAPO_LEAK=1")  # one subshell per command: nothing leaks into the next
    assert t.host_run("pwd; echo ${DAPO_LEAK:-none}").stdout.split() == ["/root", "none"]
    with pytest.raises(RemoteError) as ei:
        t.run("echo the real reason >&2; exit 7")
    assert (ei.value.kind, ei.value.exit_code) == ("command", 7)
    assert ei.value.message.endswith("exited 7 in container 'verl': the real reason")
    assert t.run("cat", secret_env={"S": "x"}, check=False).exited == 0  # stdin-fed commands: own channel
    assert t.run('printf %s "$S"', secret_env={"S": "s3cret"}).stdout == "s3cret"


def test_timeout_through_the_master_is_a_timeout_and_the_next_call_works(inv):
    t = reusing(inv)
    with pytest.raises(RemoteError) as ei:
        t.run("sleep 5", timeout=1)
    assert ei.value.kind == "timeout" and "within 1 s" in ei.value.message
    assert t.run("echo usable").stdout.strip() == "usable"


def test_stopped_container_in_one_round_trip(sandbox, inv, monkeypatch):
    sandbox.ssh("h2", "docker kill verl", check=True)
    try:
        for reuse in (True, False):
            t = Target(inv.hosts["h2"], reuse=reuse)
            # state_on_failure: the state comes with the failed exec, no second docker inspect command
            monkeypatch.setattr(Target, "container_state", lambda self, **kw: pytest.fail("second round trip"))
            with pytest.raises(RemoteError) as ei:
                t.run("true", state_on_failure=True)
            monkeypatch.undo()
            e = ei.value
            assert e.kind == "container-stopped"
            assert e.state == {"status": "exited", "exit_code": 137, "oom_killed": False}
            assert "container 'verl' is exited (exit code 137); start it (docker start verl)" in e.message
            assert "dapo-ops-container-state" not in (e.result.stderr or "")
            t.close()
    finally:
        sandbox.reset("h2")


def test_missing_container_through_the_master(sandbox, inv):
    sandbox.ssh("h3", "docker rename verl verl-away", check=True)
    try:
        with pytest.raises(RemoteError) as ei:
            reusing(inv, "h3").run("true", state_on_failure=True)
        assert ei.value.kind == "container-missing"
        assert (
            "container 'verl' does not exist (Docker: Error response from daemon: No such container: verl)"
            in ei.value.message
        )
    finally:
        sandbox.ssh("h3", "docker rename verl-away verl")


def test_host_keys_are_verified_by_the_master(inv, tmp_path):
    kh = tmp_path / "known_hosts"
    with pytest.raises(RemoteError) as ei:
        reusing(inv, known_hosts=str(kh)).host_run("true")
    assert ei.value.kind == "hostkey" and "--accept-new-host-keys" in ei.value.message
    assert not kh.exists()
    t = Target(dataclasses.replace(inv.hosts["h1"], known_hosts=str(kh)), accept_new_host_keys=True, reuse=True)
    assert t.host_run("hostname").stdout.strip() == "h1"
    assert t.added_host_key.startswith("ssh-ed25519 SHA256:")
    assert kh.read_text().startswith(f"{inv.hosts['h1'].address} ssh-ed25519 ")
    other = tmp_path / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    changed = tmp_path / "changed"
    pub = (tmp_path / "other.pub").read_text().split()
    changed.write_text(f"{inv.hosts['h1'].address} {pub[0]} {pub[1]}\n")
    with pytest.raises(RemoteError) as ei:
        reusing(inv, known_hosts=str(changed)).host_run("true")
    assert ei.value.kind == "hostkey" and "CHANGED" in ei.value.message


def test_refused_and_auth_through_the_master(sandbox, inv, tmp_path):
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "stranger")], check=True)
    with pytest.raises(RemoteError) as ei:
        reusing(inv, identity_file=str(tmp_path / "stranger")).host_run("true")
    assert ei.value.kind == "auth" and "authentication" in ei.value.message
    sandbox.kill_sshd("h3")
    try:
        with pytest.raises(RemoteError) as ei:
            reusing(inv, "h3").host_run("true")
        assert ei.value.kind == "refused"
        assert ei.value.message.startswith(f"connection to root@{sandbox.addresses['h3']}:22 refused")
    finally:
        sandbox.start_sshd("h3")
    assert reusing(inv, "h3").host_run("hostname").stdout.strip() == "h3"  # a failed master did not persist


def test_a_dead_link_under_a_live_master_is_unreachable_within_the_connect_timeout(sandbox, inv):
    t = reusing(inv, "h3", connect_timeout=2)
    assert t.host_run("hostname").stdout.strip() == "h3"
    sandbox.link("h3", False)
    try:
        with pytest.raises(RemoteError) as ei:
            t.run("true", timeout=30)
    finally:
        sandbox.link("h3", True)
    assert ei.value.kind == "unreachable" and "timed out after 2 s" in ei.value.message, ei.value
    assert reusing(inv, "h3", connect_timeout=2).host_run("hostname").stdout.strip() == "h3"


def master_pid(target) -> int:
    """The pid of ``target``'s control master (its ``info`` answer)."""
    import json
    import socket

    with socket.socket(socket.AF_UNIX) as s:
        s.connect(str(sshmux.socket_path(target, sshmux.control_dir())))
        s.sendall(b'{"op": "info"}\n')
        return json.loads(s.makefile("rb").readline())["pid"]


def ended(pid: int) -> bool:
    """Wait on ``pid``'s pidfd (bounded) until the process ends; True when it did."""
    import select

    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], 30)[0])
    finally:
        os.close(fd)


def test_close_all_ends_the_masters(inv):
    # the masters counted are this worker's alone (tests/conftest.py gives each session its own control dir:
    # under a full `make test` another worker's masters were counted too, issue 32 item 10)
    assert os.environ[sshmux.DIR_ENV] and str(sshmux.control_dir()) == os.environ[sshmux.DIR_ENV]
    sshmux.close_all()
    t = reusing(inv)
    t.host_run("true")
    pid = master_pid(t)
    assert sshmux.close_all() == 1
    assert ended(pid)
    assert sshmux.close_all() == 0
    d = sshmux.control_dir()
    assert d is not None and oct(os.stat(d).st_mode & 0o777) == "0o700"


def test_close_all_under_a_directory_ends_only_the_masters_of_hosts_whose_key_files_lie_there(inv, tmp_path):
    import shutil

    sshmux.close_all()
    kh = tmp_path / "known_hosts"
    shutil.copy(inv.hosts["h1"].known_hosts, kh)
    mine, other = reusing(inv, known_hosts=str(kh)), reusing(inv)
    mine.host_run("true")
    other.host_run("true")
    pids = master_pid(mine), master_pid(other)
    assert sshmux.main(["close", "--under", str(tmp_path)]) == 0
    assert ended(pids[0])
    assert master_pid(other) == pids[1]  # the other master still answers
    assert sshmux.close_all() == 1


def test_a_master_keeps_no_secret_of_the_callers_environment(inv, monkeypatch):
    monkeypatch.setenv("SWANLAB_API_KEY", "sk-should-not-live-on")
    reusing(inv).host_run("true")
    masters = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
            env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
        except OSError:
            continue
        if b"dapo_ops.control.remote.master" in cmd:
            masters.append(env)
    assert masters
    assert not [e for env in masters for e in env if e.startswith(b"SWANLAB_API_KEY=")]
