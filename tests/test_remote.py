"""dapo_ops/control/remote/ without hosts: the host command line Target builds survives a real shell byte for byte, Docker's
own error texts map to the right RemoteError kinds, bad env input is refused before anything runs."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from invoke.runners import Result

from dapo_ops.control.inventory.model import Host
from dapo_ops.control.remote.errors import KINDS, RemoteError
from dapo_ops.control.remote.target import Target

HOST = Host(name="h1", address="192.0.2.11", user="root", port=22)

# A stand-in `docker` for the *local* shell: parses `exec [-i] [-t] [-w DIR] [-e K=V]... [--env-file F] CTR argv...`
# like the Docker CLI and prints what the container process would receive, as hex. It stands in for the CLI's
# argument parsing only; the real engine is exercised by tests/test_remote_bench.py.
DOCKER_SHIM = textwrap.dedent(f"""\
    #!{sys.executable}
    import os, sys
    a = sys.argv[1:]
    assert a.pop(0) == "exec"
    env, wd = {{}}, None
    while a[0].startswith("-"):
        o = a.pop(0)
        if o in ("-i", "-t"):
            continue
        if o == "-w":
            wd = a.pop(0)
        elif o == "-e":
            k, v = a.pop(0).split("=", 1); env[k] = v
        elif o == "--env-file":
            for line in open(a.pop(0), encoding="utf-8").read().splitlines():
                k, v = line.split("=", 1); env[k] = v
        else:
            sys.exit("unknown option " + o)
    ctr = a.pop(0)
    print("CTR", ctr.encode().hex())
    print("WD", (wd or "").encode().hex())
    for k in sorted(env):
        print("ENV", k, env[k].encode("utf-8", "surrogateescape").hex())
    for x in a:
        print("ARG", os.fsencode(x).hex())
""")


@pytest.fixture(scope="module")
def shim_path(tmp_path_factory):
    d = tmp_path_factory.mktemp("shim")
    p = d / "docker"
    p.write_text(DOCKER_SHIM)
    p.chmod(p.stat().st_mode | stat.S_IXUSR)
    return str(d)


def through_local_shell(line: str, shim_path: str) -> list[tuple[str, ...]]:
    env = dict(os.environ, PATH=f"{shim_path}:{os.environ['PATH']}")
    out = subprocess.run(["sh", "-c", line], capture_output=True, env=env, timeout=30)
    assert out.returncode == 0, out.stderr
    return [tuple(ln.split(" ")) for ln in out.stdout.decode().splitlines()]


NASTY = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=80)


@settings(max_examples=150, deadline=None)
@given(arg=NASTY, val=NASTY, wd=NASTY.filter(lambda s: s != ""))
@example(arg="; rm -rf / $(id) `id` 'x' \"y\" \\ \n\t*", val="$HOME ${PATH} $(echo x)\r\n", wd="/v erl;id")
@example(arg="-rm", val="--env-file=/etc/passwd", wd="-w")
def test_host_command_line_survives_the_shell_byte_for_byte(shim_path, arg, val, wd):
    t = Target(HOST)
    line = t.exec_command(["python3", arg, ""], env={"V": val}, workdir=wd)
    rows = through_local_shell(line, shim_path)
    assert ("CTR", b"verl".hex()) in rows
    assert ("WD", wd.encode().hex()) in rows
    assert ("ENV", "V", val.encode().hex()) in rows
    args = [r[1] for r in rows if r[0] == "ARG"]
    assert args == [b"python3".hex(), arg.encode().hex(), ""]


def test_string_command_goes_through_sh_c_as_one_argument(shim_path):
    line = Target(HOST).exec_command("echo $HOME; id", workdir="")
    rows = through_local_shell(line, shim_path)
    assert [bytes.fromhex(r[1]) for r in rows if r[0] == "ARG"] == [b"sh", b"-c", b"echo $HOME; id"]


class TestEnvValidation:
    @pytest.mark.parametrize("name", ["1X", "A-B", "A B", "", "X=Y", "$(id)"])
    def test_invalid_names_are_refused_before_anything_runs(self, name):
        with pytest.raises(ValueError, match="not a valid environment variable name"):
            Target(HOST).exec_command("true", env={name: "v"})

    def test_nul_is_refused(self):
        with pytest.raises(ValueError, match="NUL"):
            Target(HOST).exec_command("true", env={"A": "x\x00y"})

    @pytest.mark.parametrize("value", ["a\nb", "a\rb"])
    def test_secret_with_newline_is_refused_before_connecting(self, value):
        # the host address is unroutable: a connect attempt would fail differently (RemoteError)
        with pytest.raises(ValueError, match="newline/CR"):
            Target(HOST).run("true", secret_env={"TOKEN": value})


def res(exited, stderr="", stdout=""):
    return Result(stdout=stdout, stderr=stderr, exited=exited, command="docker exec verl true")


# Docker 20.10 texts as observed on the bench (test-bench.md section 6) and current CLI variants
DOCKER_TEXTS = [
    ("no-such-container", res(1, "Error response from daemon: No such container: verl\n"), "container-missing"),
    ("inspect-no-such-object", res(1, "Error: No such object: verl\n"), "container-missing"),
    ("docker-not-installed-dash", res(127, "sh: 1: docker: not found\n"), "docker-missing"),
    ("docker-not-installed-bash", res(127, "bash: line 1: docker: command not found\n"), "docker-missing"),
    (
        "daemon-down",
        res(1, "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?\n"),
        "docker-missing",
    ),
    (
        "socket-permission",
        res(
            1,
            "permission denied while trying to connect to the Docker daemon socket at "
            "unix:///var/run/docker.sock: Get ...: dial unix /var/run/docker.sock: "
            "connect: permission denied\n",
        ),
        "docker-missing",
    ),
]


OCI_CWD = (
    'OCI runtime exec failed: exec failed: unable to start container process: chdir to cwd ("/nonexist") '
    "set in config.json failed: no such file or directory: unknown\r\n"
)


@pytest.mark.parametrize("result", [res(126, stdout=OCI_CWD), res(126, stderr=OCI_CWD)], ids=["stdout", "stderr"])
def test_missing_workdir_is_named_from_dockers_exec_failure(result):
    from dapo_ops.control.remote.errors import exec_start_failure, workdir_missing_message

    assert exec_start_failure(result).startswith("OCI runtime exec failed")
    msg = workdir_missing_message(Target(HOST), result)
    assert msg.startswith("workdir /nonexist does not exist in container 'verl'") and "fix workdir in hosts.toml" in msg
    assert "\n" not in msg and "\r" not in msg


@pytest.mark.parametrize(
    "result",
    [
        res(126, stdout="sh: 1: ./x: Permission denied\n"),
        res(1, stdout=OCI_CWD),
        res(127, stderr="sh: python3: not found\n"),
    ],
)
def test_other_failures_are_not_a_missing_workdir(result):
    from dapo_ops.control.remote.errors import workdir_missing_message

    assert workdir_missing_message(Target(HOST), result) is None


@pytest.mark.parametrize("result,kind", [d[1:] for d in DOCKER_TEXTS], ids=[d[0] for d in DOCKER_TEXTS])
def test_docker_messages_map_to_kinds(result, kind):
    err = Target(HOST)._docker_error(result, inspect=False)
    assert err is not None and err.kind == kind
    assert "\n" not in str(err) and str(err).startswith("h1: ")


@pytest.mark.parametrize(
    "container,env,fix",
    [
        ("", {}, "fix container in the inventory"),
        ("", {"CONTAINER": "nope"}, "fix the CONTAINER env var"),
        ("nope", {}, "fix --container"),
        ("nope", {"CONTAINER": "other"}, "fix --container"),
    ],
)
def test_a_missing_container_names_where_its_name_came_from(container, env, fix):
    """``CONTAINER=nope inv status`` said "fix container in the inventory" (the CLI's ``with_container`` had put the
    env var's name into the host record, so the message could not tell): the host now records where it came from."""
    from dapo_ops.cli._common import with_container

    (host,) = with_container([HOST], container, env=env)
    err = Target(host)._docker_error(
        res(1, f"Error response from daemon: No such container: {host.container}\n"), inspect=False
    )
    assert err is not None and err.kind == "container-missing"
    assert str(err).endswith(fix), str(err)


@pytest.mark.parametrize(
    "stderr",
    [
        "Error response from daemon: Container 3f2a is not running\n",
        "Error response from daemon: Container 3f2a is restarting, wait until the container is running\n",
        "Error response from daemon: Container 3f2a is paused, unpause the container before exec\n",
        # the sandbox's engine, seen in a clean-clone CI run when the exec raced a `docker kill`
        "Error response from daemon: container 3f2a0c9e7d194286 is not running\n",
    ],
)
def test_not_running_texts_are_container_stopped(stderr):
    err = Target(HOST)._docker_error(res(1, stderr), inspect=False)
    assert err.kind == "container-stopped"


def test_the_commands_own_failure_is_not_mistaken_for_docker():
    # the command printed something first and then a docker-looking line: that is the command's business
    r = res(1, "Traceback (most recent call last):\nError response from daemon: No such container: x\n")
    assert Target(HOST)._docker_error(r, inspect=False) is None
    assert Target(HOST)._docker_error(res(0, "Error: No such object: verl"), inspect=False) is None


def test_remote_error_is_one_line_and_kinds_are_closed():
    e = RemoteError("command", "h2", "a\nb   c")
    assert str(e) == "h2: a b c" and e.message == "a b c"
    with pytest.raises(ValueError, match="'weird' is not one of unreachable, refused"):  # also under python -O
        RemoteError("weird", "h2", "x")
    assert "container-stopped" in KINDS and "hostkey" in KINDS


def test_missing_identity_file_is_auth_without_connecting(tmp_path):
    h = Host(name="h1", address="192.0.2.11", identity_file=str(tmp_path / "nokey"))
    with pytest.raises(RemoteError) as ei:
        Target(h).connect()
    assert ei.value.kind == "auth" and "does not exist" in ei.value.message


def test_missing_ssh_config_is_one_line_without_connecting(tmp_path):
    h = Host(name="h1", address="192.0.2.11", ssh_config=str(tmp_path / "nope"))
    with pytest.raises(RemoteError) as ei:
        Target(h).connect()
    assert ei.value.kind == "config"
    assert ei.value.message == (
        f"ssh_config file {tmp_path / 'nope'} does not exist or is not a file: fix ssh_config in the inventory (or -S)"
    )


def test_refused_proxy_jump_names_the_bastion_not_the_target():
    # nothing listens on 127.0.0.1:1: the bastion refuses; the target (TEST-NET) is never tried
    h = Host(name="h1", address="192.0.2.11", user="root", proxy_jump="ops@127.0.0.1:1", connect_timeout=5)
    with pytest.raises(RemoteError) as ei:
        Target(h).connect()
    assert ei.value.kind == "refused"
    assert ei.value.message.startswith("proxy_jump bastion: connection to ops@127.0.0.1:1 refused"), ei.value.message
    assert "192.0.2.11" not in ei.value.message


def test_missing_container_names_the_source_of_its_name():
    """The host's container: fix the inventory; one given by --container / CONTAINER: fix that (new-user trial)."""
    nosuch = "Error response from daemon: No such container: {}\n"
    own = Target(HOST)._docker_error(res(1, nosuch.format("verl")), inspect=False)
    assert own.kind == "container-missing" and own.message.endswith("fix container in the inventory")
    given = Target(HOST, container="other")._docker_error(res(1, nosuch.format("other")), inspect=False)
    assert given.kind == "container-missing" and given.message.endswith("or fix --container / CONTAINER")
    assert "inventory" not in given.message


@pytest.mark.parametrize(
    "python,res,named",
    [
        ("nopython3", Result(stderr="sh: 1: nopython3: not found\n", exited=127), True),
        ("/etc/hostname", Result(stderr="sh: 1: /etc/hostname: Permission denied\n", exited=126), True),
        (
            "/opt/py",
            Result(
                stdout="OCI runtime exec failed: exec failed: unable to start container process: exec: "
                '"/opt/py": stat /opt/py: no such file or directory: unknown\n',
                exited=126,
            ),
            True,
        ),
        (
            "python3",
            Result(stderr="python3: can't open file 'x': [Errno 2] No such file or directory\n", exited=2),
            False,
        ),
        ("python3", Result(stderr="tar: Cannot open: Permission denied\n", exited=126), False),
    ],
)
def test_a_python_that_cannot_run_names_the_inventory_field(python, res, named):
    """Issue 32 minor: a host `python` that cannot exec is named as hosts.toml's `python`, not Docker's raw error."""
    from dapo_ops.control.remote.errors import python_cannot_run

    msg = python_cannot_run(Target(Host(name="h1", address="192.0.2.11", python=python)), python, res)
    if not named:
        assert msg is None
        return
    assert msg.startswith(f"python {python!r} (hosts.toml `python`) cannot run in container 'verl': "), msg
    assert msg.endswith(
        "set python in hosts.toml to the interpreter's path or a name on the container's PATH (e.g. python3)"
    )
    bare = python_cannot_run(
        Target(Host(name="h1", address="a", python=python, runtime="host", container="")), python, res
    )
    assert " cannot run on the host: " in bare and "in container" not in bare and "on the host's PATH" in bare


def test_the_bundle_install_names_a_python_that_cannot_run():
    from dapo_ops.control.remote import bundle as remote_bundle

    class T(Target):
        def put_text(self, *a, **kw):
            pass

        def run(self, cmd, **kw):
            raise RemoteError(
                "command",
                "h1",
                "`nopython3 -c ...` exited 127 in container 'verl': sh: 1: nopython3: not found",
                exit_code=127,
                result=Result(stderr="sh: 1: nopython3: not found\n", exited=127),
            )

    with pytest.raises(RemoteError) as ei:
        remote_bundle.install(T(Host(name="h1", address="a", python="nopython3")), "/r/.dapo_ops/x", "nopython3")
    assert ei.value.message.startswith("python 'nopython3' (hosts.toml `python`) cannot run in container 'verl'")


def test_an_address_where_no_ssh_server_answers_is_said_unreachable_over_ssh_not_a_banner_error():
    """``-H root@10.255.255.1:22`` failed with paramiko's "Error reading SSH protocol banner" (a new user's trial):
    the host could not be reached over SSH at that address and port; the line says so and how to check."""
    from types import SimpleNamespace

    import paramiko

    from dapo_ops.control.remote.errors import ssh_error

    cxn = SimpleNamespace(host="10.255.255.1", port=22, user="root")
    target = SimpleNamespace(name="root@10.255.255.1:22", _where=lambda c: f"{c.user}@{c.host}:{c.port}")
    for raw in ("Error reading SSH protocol banner", "Error reading SSH protocol banner[Errno 104] Connection reset"):
        err = ssh_error(target, paramiko.SSHException(raw), cxn)
        msg = err.message
        assert err.kind == "unreachable" and "\n" not in msg and "protocol banner" not in msg, msg
        assert "could not reach 10.255.255.1 port 22 over SSH" in msg and "ssh -p 22 root@10.255.255.1 true" in msg
