"""`hosts --check`: validates hosts.toml (and -H) through the model and contacts nobody (pure: no sandbox)."""

from __future__ import annotations

import socket

import pytest

from dapo_ops.cli._common import EXIT_USAGE


@pytest.fixture
def listener():
    """A TCP listener the inventory points at: a connection attempt would be queued on it."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    s.setblocking(False)
    yield s.getsockname()[1]
    try:
        conn, _ = s.accept()
    except BlockingIOError:
        conn = None
    s.close()
    assert conn is None, "hosts --check connected to a host"


def run(cli, inv, *extra):
    """``dapo-ops hosts --check --inventory <inv> <extra>`` through the shared runner (tests/conftest.py)."""
    return cli("dapo-ops", "hosts", "--check", "--inventory", inv, *extra, timeout=60)


def test_a_valid_file_prints_one_line_per_host_and_exits_0(tmp_path, listener, cli):
    inv = tmp_path / "hosts.toml"
    inv.write_text(
        f'[defaults]\nuser = "root"\nport = {listener}\n[hosts.h1]\naddress = "127.0.0.1"\n'
        f'[hosts.bm]\naddress = "127.0.0.1"\nruntime = "host"\naccelerator = "gpu"\n'
        f'[hosts.me]\ntransport = "local"\n'
    )
    out = run(cli, inv)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == f"{inv}: valid, 3 host(s) selected (nothing contacted)"
    assert lines[1] == f"h1: ssh root@127.0.0.1:{listener}, container verl, 8 x npu, workdir /verl"
    assert lines[2] == f"bm: ssh root@127.0.0.1:{listener}, host shell (no container), 8 x gpu, workdir /verl"
    assert lines[3] == "me: local subprocess, container verl, 8 x npu, workdir /verl"
    assert run(cli, inv, "-H", "bm").stdout.splitlines()[1].startswith("bm: ")


@pytest.mark.parametrize(
    "body,needle",
    [
        (
            '[hosts.h1]\naddress = "127.0.0.1"\nport = PORT\nproxy_jump = "root@h:22 -oProxyCommand=touch /tmp/pwn"\n',
            ":4: host 'h1': field 'proxy_jump': 'root@h:22 -oProxyCommand=touch /tmp/pwn' is not [user@]host[:port]",
        ),
        (
            '[hosts.h1]\naddress = "127.0.0.1"\nport = PORT\ndevices = 0\n',
            ":4: host 'h1': field 'devices': must be 1..64",
        ),
        (
            '[hosts.h1]\naddress = "127.0.0.1"\nport = PORT\nruntime = "host"\ncontainer = "verl"\n',
            ":5: host 'h1': field 'container': runtime = \"host\" runs without a container",
        ),
        (
            '[hosts.h1]\naddress = "127.0.0.1"\nport = PORT\nssh_config = "/nope"\n',
            ":4: host 'h1': field 'ssh_config': ssh_config file /nope does not exist: fix the path",
        ),
        (
            '[defaults]\nssh_config = "/"\n[hosts.h1]\naddress = "127.0.0.1"\nport = PORT\n',
            ":2: [defaults]: field 'ssh_config': ssh_config file / is not a file: fix the path",
        ),
        # issue 32 item 8: what the loader and the connect refuse, --check refuses too
        (
            '[hosts.h1]\naddress = "127.0.0.1"\nport = PORT\npython = "python3; touch /tmp/x;"\n',
            ":4: host 'h1': field 'python': must be a path or a bare interpreter name",
        ),
        (
            '[hosts.h1]\naddress = "127.0.0.1"\nport = PORT\ndevices = 100000\n',
            ":4: host 'h1': field 'devices': must be 1..64",
        ),
        (
            '[defaults]\nidentity_file = "/nonexistent/key"\n[hosts.h1]\naddress = "127.0.0.1"\nport = PORT\n',
            ":2: [defaults]: field 'identity_file': identity file /nonexistent/key does not exist",
        ),
        (
            '[hosts.h1]\naddress = "127.0.0.1"\nport = PORT\nknown_hosts = "/nonexistent/kh"\n',
            ":4: host 'h1': field 'known_hosts': known_hosts file /nonexistent/kh does not exist: host keys are verified",
        ),
    ],
)
def test_a_bad_file_is_one_line_exit_2_and_nothing_contacted(tmp_path, listener, cli, body, needle):
    inv = tmp_path / "hosts.toml"
    inv.write_text(body.replace("PORT", str(listener)))
    out = run(cli, inv)
    assert out.returncode == EXIT_USAGE
    assert out.stdout == ""
    assert len(out.stderr.strip().splitlines()) == 1 and out.stderr.startswith(f"{inv}{needle}"), out.stderr


def test_an_unknown_H_name_is_refused(tmp_path, listener, cli):
    inv = tmp_path / "hosts.toml"
    inv.write_text(f'[hosts.h1]\naddress = "127.0.0.1"\nport = {listener}\n')
    out = run(cli, inv, "-H", "h9")
    assert out.returncode == EXIT_USAGE and "unknown host 'h9'" in out.stderr and out.stdout == ""


def test_a_missing_ssh_config_of_the_S_flag_is_one_line_and_nothing_contacted(tmp_path, listener, cli):
    # -S bypasses the inventory: the connect (remote/target.py) says it, instead of a FileNotFoundError
    out = cli("dapo-ops", "-S", str(tmp_path / "nope"), "-H", f"root@127.0.0.1:{listener}", "hosts", timeout=60)
    assert out.returncode == 1
    assert "FAIL config" in out.stdout and f"ssh_config file {tmp_path / 'nope'} does not exist" in out.stdout
    assert "FileNotFoundError" not in out.stdout + out.stderr


def test_a_missing_known_hosts_is_fine_when_the_check_may_create_it(tmp_path, listener, cli):
    inv = tmp_path / "hosts.toml"
    inv.write_text(f'[hosts.h1]\naddress = "127.0.0.1"\nport = {listener}\nknown_hosts = "{tmp_path}/kh"\n')
    out = run(cli, inv, "--accept-new-host-keys")
    assert out.returncode == 0 and out.stdout.startswith(f"{inv}: valid"), out.stderr
