"""Bare-metal hosts (inventory ``runtime = "host"``) and the local transport (``transport = "local"``) in Target.

Pure parts (inventory validation, the exact host shell line) need no host; the Target tests run real commands
through the local transport on this machine (the same Target code path as SSH, a local subprocess).
"""

from __future__ import annotations

import os
import shlex
import stat

import pytest

from dapo_ops.control.inventory import hosts_file as inventory
from dapo_ops.control.launch import plan as planning
from dapo_ops.control.remote import bundle as remote_bundle
from dapo_ops.control.remote.errors import RemoteError
from dapo_ops.control.remote.target import Target

BARE = """
[hosts.dev]
runtime = "host"
transport = "local"
container = ""
workdir = "/tmp"
accelerator = "gpu"
devices = 1
[hosts.dev.env]
PYTHONPATH = "/tmp/site"
PATH = "/tmp/site/bin:/usr/bin:/bin"
"""


def _load(text: str):
    return inventory.loads(text, "hosts.toml")


def test_bare_local_host_parses():
    h = _load(BARE).hosts["dev"]
    assert (h.runtime, h.transport, h.container, h.address) == ("host", "local", "", "localhost")
    assert h.env == {"PYTHONPATH": "/tmp/site", "PATH": "/tmp/site/bin:/usr/bin:/bin"}
    assert hash(h)  # still hashable (env is excluded from the hash)


def test_bare_host_without_container_field_gets_empty_container():
    h = _load('[hosts.a]\naddress = "192.0.2.1"\nruntime = "host"\n').hosts["a"]
    assert h.container == "" and h.transport == "ssh"


def test_defaults_stay_docker_ssh():
    h = _load('[hosts.a]\naddress = "192.0.2.1"\n').hosts["a"]
    assert (h.runtime, h.transport, h.container, h.env) == ("docker", "ssh", "verl", {})


# (the inventory's own one-line validation of runtime / transport / env is tests/test_inventory.py's: the schema)


def test_container_setting_refused_for_bare_host():
    h = _load(BARE).hosts["dev"]
    with pytest.raises(planning.PlanError) as e:
        planning.make_plan(
            planning.draft_plan(
                planning.PlanInputs(
                    settings={"container": "verl", "framework": "fsdp", "rollout_tp": 1},
                    host=h,
                    mode="dapo",
                    run_id="20261201-000000-abcd",
                    swanlab_logger=False,
                )
            )
        )
    assert 'runtime = "host"' in str(e.value) and "\n" not in str(e.value)


def _target(tmp_path, env=None) -> Target:
    text = BARE.replace('workdir = "/tmp"', f'workdir = "{tmp_path}"')
    h = _load(text).hosts["dev"]
    if env is not None:
        h = inventory.dataclasses.replace(h, env=env)
    return Target(h)


def test_exec_command_is_a_quoted_host_shell_line(tmp_path):
    t = _target(tmp_path, env={"PYTHONPATH": "/tmp/site", "X": "a b'c"})
    line = t.exec_command(["python3", "-c", "print('$HOME')"], env={"PYTHONPATH": "/b"}, workdir="/w d")
    assert "docker" not in line
    assert line == (
        "( cd '/w d' && export PYTHONPATH=/b:/tmp/site X='a b'\"'\"'c' && python3 -c 'print('\"'\"'$HOME'\"'\"')' )"
    )


def test_local_bare_run_keeps_values_literal(tmp_path):
    t = _target(tmp_path, env={"A": "$HOME `id` 'q'"})
    res = t.run(["sh", "-c", 'printf "%s|%s|%s" "$A" "$B" "$(pwd)"'], env={"B": "x;y"})
    assert res.stdout == f"$HOME `id` 'q'|x;y|{tmp_path}"


def test_local_bare_secret_goes_through_a_0600_file_not_argv(tmp_path, monkeypatch):
    t = _target(tmp_path, env={})
    secret = "s3cr3t'$(touch /tmp/pwned-gpu)\"`x`"
    seen = {}
    real_raw = t._raw

    def spy(command, **kw):
        seen["command"], seen["stdin"] = command, kw.get("stdin")
        return real_raw(command, **kw)

    monkeypatch.setattr(t, "_raw", spy)
    tmpdir = tmp_path / "t"
    tmpdir.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmpdir))  # the local transport's shell inherits it: mktemp puts the file there
    # the file exists while the command runs, mode 0600; it is gone afterwards
    res = t.run(
        ["sh", "-c", 'printf "%s\\n" "$TOKEN"; stat -c %a "$TMPDIR"/dapo-ops-env.*'], secret_env={"TOKEN": secret}
    )
    assert res.stdout.splitlines() == [secret, "600"]
    assert list(tmpdir.iterdir()) == []
    assert secret not in seen["command"] and shlex.quote(secret).encode() in seen["stdin"]
    assert not os.path.exists("/tmp/pwned-gpu")


def test_local_bare_errors_say_on_the_host(tmp_path):
    t = _target(tmp_path, env={})
    with pytest.raises(RemoteError) as e:
        t.run("echo boom >&2; exit 3")
    assert e.value.kind == "command" and "exited 3 on the host: boom" in str(e.value)
    with pytest.raises(RemoteError) as e:
        t.run("sleep 5", timeout=0.5)
    assert e.value.kind == "timeout"
    # a command's own text never turns into a docker kind on a bare host
    res = t.run("echo 'Error: No such container: verl' >&2; exit 1", check=False)
    assert res.exited == 1
    assert t.container_state().running


def test_put_text_mode_on_bare_host(tmp_path):
    t = _target(tmp_path, env={})
    p = tmp_path / "d" / "secret.env"
    t.put_text("K=v\n", str(p), mode=0o600)
    assert p.read_text() == "K=v\n" and stat.S_IMODE(p.stat().st_mode) == 0o600


def test_the_start_op_on_a_bare_host_refuses_a_missing_run_dir_and_starts_nothing(tmp_path):
    """The start op (``dapo_ops.agent.runstart``) through the bundle's op line in the host's shell, for real: a
    supervisor that cannot be started is exit SPAWN_FAILED with one line, not an answer (``launch.start_run``
    removes the run dir then)."""
    import sys

    from dapo_ops.agent import runstart

    t = _target(tmp_path, env={"PYTHONPATH": "/tmp/site"})
    bdir = remote_bundle.local_install(tmp_path / "runs")
    run_dir = tmp_path / "runs" / "20261201-000000-abcd"  # never made: spec.json was not written
    args = [str(run_dir), "--workdir", str(tmp_path), "--start-wait", "5", "--settle", "0", "--link-wait", "0"]
    res = t.run(remote_bundle.op_line(bdir, sys.executable, "runstart", args), workdir="", check=False)
    assert res.exited == runstart.SPAWN_FAILED and res.stdout == ""
    assert res.stderr.strip().startswith(f"could not start the supervisor of {run_dir}: [Errno 2]")


def test_inv_hosts_shows_a_local_bare_host_as_local_without_ssh(monkeypatch):
    """A new user's trial: `inv hosts` showed a local bare host (defaults user root, port 22, address 127.0.0.1) as
    `root@127.0.0.1:22`, ssh ok, container running."""
    from types import SimpleNamespace

    from dapo_ops.cli import hosts as hosts_task

    answer = SimpleNamespace(exited=0, stdout='{"found": true, "version": "0.9.1", "python": "3.11.7"}\n', stderr="")
    monkeypatch.setattr(remote_bundle, "run_op", lambda *a, **k: answer)
    text = '[defaults]\nuser = "root"\nport = 22\n' + BARE.replace("[hosts.dev]", '[hosts.dev]\naddress = "127.0.0.1"')
    row = hosts_task.check_host(Target(_load(text).hosts["dev"]))
    assert row.ok and row.cells == {
        "address": "local (no SSH)",
        "ssh": "-",
        "container": "- (bare host)",
        "python": "3.11.7",
        "verl": "0.9.1",
    }
    ssh_bare = _load('[hosts.b]\naddress = "192.0.2.1"\nuser = "root"\nport = 22\nruntime = "host"\n').hosts["b"]
    row = hosts_task.check_host(Target(ssh_bare))
    assert (row.cells["address"], row.cells["ssh"], row.cells["container"]) == (
        "root@192.0.2.1:22",
        "ok",
        "- (bare host)",
    )
