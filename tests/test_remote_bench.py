"""dapo_ops/control/remote/ against the sandbox hosts: quoting byte for byte through SSH + docker exec, secrets via a 0600
env-file that is removed, put_text, and each failure kind with its own one-line message."""

from __future__ import annotations

import dataclasses
import hashlib
import subprocess
import threading

import uuid

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from dapo_ops.control.inventory import hosts_file as inventory
from dapo_ops.control.inventory import model as inventory_model
from dapo_ops.control.remote.errors import RemoteError
from dapo_ops.control.remote.target import Target

pytestmark = pytest.mark.bench

# prints what the container process received, as hex (independent of locale and of invoke's decoding)
PROBE = (
    "import os, sys; print(os.fsencode(sys.argv[1]).hex()); print(os.environb.get(b'V', b'').hex()); "
    "print(os.environb.get(b'S', b'-').hex()); print(os.getcwd())"
)

NASTY = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=60)
ONE_LINE = NASTY.filter(lambda s: "\n" not in s and "\r" not in s)


@pytest.fixture(scope="module")
def inv(sandbox):
    return inventory.load(sandbox.inventory)


@pytest.fixture(scope="module")
def target(inv):
    t = Target(inv.hosts["h1"])
    yield t
    t.close()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(arg=NASTY, val=NASTY)
@example(arg="; echo pwned $(id) `id` 'q' \"d\" \\ \n*", val="$HOME\n${PATH}\r\t'\"`")
@example(arg="-e X=1", val="ü ✓ 中文 \u202e")
def test_argv_element_and_env_value_arrive_byte_for_byte(target, arg, val):
    res = target.run(["python3", "-c", PROBE, arg], env={"V": val})
    got_arg, got_val, _, cwd = res.stdout.splitlines()
    assert bytes.fromhex(got_arg) == arg.encode()
    assert bytes.fromhex(got_val) == val.encode()
    assert cwd == "/verl"  # inventory workdir via docker exec -w


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(secret=ONE_LINE)
@example(secret=" leading space, $(id) and 'quotes' = ok ")
def test_secret_env_arrives_and_is_never_left_on_the_host(target, secret):
    # the sandbox hosts share one /tmp with every other bench (xdist workers run at once): look for THIS call's
    # env-file by a marker it carries, not for any dapo-ops-env file
    mark = "mark-" + uuid.uuid4().hex
    res = target.run(["python3", "-c", PROBE, "x"], secret_env={"S": secret, "DAPO_TEST_MARK": mark})
    assert bytes.fromhex(res.stdout.splitlines()[2]) == secret.encode()
    left = target.host_run("grep -l %s ${TMPDIR:-/tmp}/dapo-ops-env* 2>/dev/null | wc -l" % mark).stdout.strip()
    assert left == "0"


def test_secret_env_file_is_0600_and_not_on_any_command_line(target):
    # the env-file exists while docker exec runs: the container command waits until a spy on the host has
    # looked at the file and at every process's argv, then the spy releases it. The flag is cleared before the spy
    # starts: cleared by the command itself, it raced the spy (the env file exists before docker exec starts the
    # command; a spy that touched the flag first saw it removed and the command waited out its 60 s)
    target.run("rm -f /tmp/spy-done")
    cmd = (
        "python3 -c 'import os; print(os.environ[\"S\"])'; "
        "i=0; while [ ! -e /tmp/spy-done ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done"
    )
    seen = {}

    def spy():
        with Target(target.host) as s:
            out = s.host_run(
                "i=0; while ! ls ${TMPDIR:-/tmp}/dapo-ops-env.* >/dev/null 2>&1 && [ $i -lt 600 ]; do sleep 0.1; "
                "i=$((i+1)); done; for f in ${TMPDIR:-/tmp}/dapo-ops-env.*; do stat -c '%a %n' \"$f\"; done; "
                "ps -eo args | grep -c '[s]up3r-s3cret' || true; docker exec verl touch /tmp/spy-done",
                timeout=90,
            )
            seen["out"] = out.stdout

    th = threading.Thread(target=spy)
    th.start()
    res = target.run(cmd, secret_env={"S": "sup3r-s3cret"}, timeout=90)
    th.join(90)
    assert res.stdout.splitlines()[0] == "sup3r-s3cret"
    lines = seen["out"].splitlines()
    assert lines[0].startswith("600 "), seen["out"]
    assert lines[-1].strip() == "0", "no process on the machine has the secret in its argv"
    assert target.host_run("ls ${TMPDIR:-/tmp} | grep -c dapo-ops-env || true").stdout.strip() == "0"


def test_put_text_writes_exact_bytes_with_mode(target):
    text = "line1\n$(id) `x` 'q'\n\u4e2d\n" * 2000  # > 64 KiB: several stdin chunks
    target.put_text(text, "/tmp/dapo-test/put.txt", mode=0o640)
    res = target.run("stat -c %a /tmp/dapo-test/put.txt; sha256sum /tmp/dapo-test/put.txt")
    mode, digest = res.stdout.split()[0], res.stdout.split()[1]
    assert mode == "640"
    assert digest == hashlib.sha256(text.encode()).hexdigest()


def test_command_failure_keeps_exit_code_and_last_stderr_line(target):
    with pytest.raises(RemoteError) as ei:
        target.run("echo first >&2; echo 'the real reason' >&2; exit 7")
    e = ei.value
    assert (e.kind, e.exit_code) == ("command", 7)
    assert e.message.endswith("exited 7 in container 'verl': the real reason")
    assert target.run("exit 7", check=False).exited == 7


def test_command_timeout(target):
    with pytest.raises(RemoteError) as ei:
        target.run("sleep 5", timeout=1)
    assert ei.value.kind == "timeout" and "1 s" in ei.value.message


def test_stopped_container_says_so_with_exit_code(sandbox, inv):
    sandbox.ssh("h2", "docker kill verl", check=True)
    try:
        with Target(inv.hosts["h2"]) as t:
            with pytest.raises(RemoteError) as ei:
                t.run("true")
        e = ei.value
        assert e.kind == "container-stopped"
        assert e.state == {"status": "exited", "exit_code": 137, "oom_killed": False}
        assert "container 'verl' is exited (exit code 137); start it (docker start verl)" in e.message
    finally:
        sandbox.reset("h2")


def test_missing_container_says_so(sandbox, inv):
    sandbox.ssh("h3", "docker rename verl verl-away", check=True)
    try:
        with Target(inv.hosts["h3"]) as t:
            with pytest.raises(RemoteError) as ei:
                t.run("true")
        assert ei.value.kind == "container-missing"
        assert (
            "container 'verl' does not exist (Docker: Error response from daemon: No such container: verl)"
            in ei.value.message
        )
    finally:
        sandbox.ssh("h3", "docker rename verl-away verl")


def test_missing_docker_cli(inv):
    with Target(inv.hosts["h1"]) as t:
        # a host whose PATH has no docker: run the same command line with an empty PATH
        res = t.host_run("PATH=/nonexistent; docker ps", check=False)
        err = t._docker_error(res, inspect=False)
    assert err.kind == "docker-missing", res.stderr


def host_with(inv, name, **changes):
    return dataclasses.replace(inv.hosts[name], **changes)


def test_changed_host_key_is_refused(inv, tmp_path):
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "other")], check=True)
    h = inv.hosts["h1"]
    kh = tmp_path / "known_hosts"
    kh.write_text(
        f"{h.address} {(tmp_path / 'other.pub').read_text().split()[0]} "
        f"{(tmp_path / 'other.pub').read_text().split()[1]}\n"
    )
    for accept in (False, True):  # accept-new never accepts a CHANGED key
        with pytest.raises(RemoteError) as ei:
            Target(host_with(inv, "h1", known_hosts=str(kh)), accept_new_host_keys=accept).connect()
        assert ei.value.kind == "hostkey" and "CHANGED" in ei.value.message, ei.value.message


def test_unknown_host_key_is_refused_unless_accept_new(inv, tmp_path):
    kh = tmp_path / "known_hosts"
    h = host_with(inv, "h1", known_hosts=str(kh))
    with pytest.raises(RemoteError) as ei:
        Target(h).connect()
    assert ei.value.kind == "hostkey" and "--accept-new-host-keys" in ei.value.message
    assert not kh.exists()
    t = Target(h, accept_new_host_keys=True)
    t.connect()
    t.close()
    assert t.added_host_key.startswith("ssh-ed25519 SHA256:")
    assert kh.read_text().startswith(f"{inv.hosts['h1'].address} ssh-ed25519 ")
    with Target(h) as again:  # now known: no flag needed
        assert again.host_run("hostname").stdout.strip() == "h1"


def test_unauthorized_key_is_auth(inv, tmp_path):
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "stranger")], check=True)
    with pytest.raises(RemoteError) as ei:
        Target(host_with(inv, "h1", identity_file=str(tmp_path / "stranger"))).connect()
    assert ei.value.kind == "auth" and "authentication" in ei.value.message


def test_sshd_down_is_refused(sandbox, inv):
    sandbox.kill_sshd("h3")
    try:
        with pytest.raises(RemoteError) as ei:
            Target(inv.hosts["h3"]).connect()
        assert ei.value.kind == "refused"
        assert ei.value.message.startswith(f"connection to root@{sandbox.addresses['h3']}:22 refused")
    finally:
        sandbox.start_sshd("h3")


def test_ssh_config_alias_is_honoured(sandbox, inv):
    # address = the ssh_config Host alias; HostName/User/IdentityFile/UserKnownHostsFile come from that file
    h = inventory_model.Host(name="alias", address="h2", ssh_config=str(sandbox.ssh_config))
    with Target(h) as t:
        assert t.host_run("hostname").stdout.strip() == "h2"


def test_proxy_jump_through_another_host(sandbox, inv):
    h1 = inv.hosts["h1"]
    h = host_with(inv, "h2", proxy_jump=f"root@{h1.address}:22")
    with Target(h) as t:
        assert t.run("hostname", workdir="").stdout.strip() == "h2"


def test_unreachable_proxy_jump_names_the_bastion(sandbox, inv):
    # an address on the bench's bridge that no host has: the bastion is unreachable, not h2 (reachable directly)
    gone = f"198.51.{100 + int(sandbox.id)}.99"
    h = host_with(inv, "h2", proxy_jump=f"root@{gone}:22", connect_timeout=5)
    with pytest.raises(RemoteError) as ei:
        Target(h).connect()
    assert ei.value.kind == "unreachable"
    assert ei.value.message.startswith("proxy_jump bastion: ") and f"root@{gone}:22" in ei.value.message
    assert h.address not in ei.value.message, ei.value.message


def test_timeout_with_pty_is_still_a_timeout(target):
    for _ in range(2):  # invoke's timer races with the channel close under pty; both outcomes must say timeout
        with pytest.raises(RemoteError) as ei:
            target.run("sleep 5", timeout=1, pty=True)
        assert ei.value.kind == "timeout"
    assert target.run("echo usable").stdout.strip() == "usable"


def test_host_process_killed_by_signal_is_a_command_failure_not_a_lost_connection(target):
    with pytest.raises(RemoteError) as ei:
        target.host_run("kill -9 $$")
    assert ei.value.kind == "command" and ei.value.exit_code == -1
    assert target.host_run("echo usable").stdout.strip() == "usable"
