"""The failure kinds of remote execution and how SSH / Docker failures map onto them.

Every failure of :class:`dapo_ops.control.remote.target.Target` is a :class:`RemoteError` with a ``kind`` (one of
:data:`KINDS`) and a one-line message that says what to do. SSH kinds come from paramiko's exceptions
(``paramiko/ssh_exception.py``: ``BadHostKeyException``, ``AuthenticationException``,
``NoValidConnectionsError``...) and socket errors (:func:`ssh_error`). Docker's own messages decide the docker
kinds (Docker 20.10 engine, test-bench.md section 6; :func:`docker_error`): ``No such container: <name>``,
``Container <id> is not running`` / ``is restarting`` / ``is paused``, ``Cannot connect to the Docker daemon``;
a stopped container is then described from ``docker inspect -f`` :data:`INSPECT_FORMAT`.

paramiko is imported only when an SSH exception is translated.
"""

from __future__ import annotations

import errno
import re
import socket
from dataclasses import dataclass
from typing import Any

from invoke.runners import Result

KINDS = (
    "unreachable",  # no route / connect timed out / name does not resolve / not an SSH server
    "refused",  # TCP connection refused (sshd down or wrong port)
    "auth",  # SSH authentication failed (key not accepted, identity file missing)
    "hostkey",  # host key unknown (not in known_hosts) or changed
    "timeout",  # the command did not finish within its timeout
    "docker-missing",  # no docker CLI on the host, daemon not running, or no permission on its socket
    "container-missing",  # no container of that name
    "container-stopped",  # container exists but is exited / restarting / paused / created
    "command",  # the command ran and failed (non-zero exit, check=True)
    "config",  # the operator side's SSH setup is wrong (the ssh_config file is missing); nothing contacted
)

INSPECT_FORMAT = "{{.State.Status}} {{.State.ExitCode}} {{.State.OOMKilled}}"


class RemoteError(Exception):
    """A per-host failure. ``str()`` is one line: ``<host>: <message>``.

    :ivar kind: one of :data:`KINDS` (anything else raises ``ValueError``: a programming error).
    :ivar host: inventory host name.
    :ivar message: one line without the host name (for a table cell).
    :ivar exit_code: the command's exit code (kind ``command``), else None.
    :ivar state: for ``container-stopped``: ``{"status": "exited", "exit_code": 137, "oom_killed": False}``.
    :ivar result: the :class:`invoke.runners.Result` when a command ran, else None.
    """

    def __init__(
        self,
        kind: str,
        host: str,
        message: str,
        *,
        exit_code: int | None = None,
        state: dict | None = None,
        result: Result | None = None,
    ):
        if kind not in KINDS:
            raise ValueError(f"RemoteError kind {kind!r} is not one of {', '.join(KINDS)}")
        self.kind = kind
        self.host = host
        self.message = " ".join(message.split())  # one line, always
        self.exit_code = exit_code
        self.state = state
        self.result = result
        super().__init__(f"{host}: {self.message}")


@dataclass
class ContainerState:
    """``docker inspect`` state of a container: ``status`` (running/exited/restarting/paused/created/dead),
    ``exit_code`` (last exit code of PID 1), ``oom_killed`` (Docker's .State.OOMKilled)."""

    status: str
    exit_code: int
    oom_killed: bool

    @property
    def running(self) -> bool:
        return self.status == "running"

    def describe(self) -> str:
        """e.g. ``exited (exit code 137, OOMKilled)``."""
        if self.running:
            return "running"
        extra = f"exit code {self.exit_code}"
        if self.oom_killed:
            extra += ", OOMKilled"
        return f"{self.status} ({extra})"

    def to_json(self) -> dict:
        return {"status": self.status, "exit_code": self.exit_code, "oom_killed": self.oom_killed}


#: the stderr line :meth:`Target.run` (``state_on_failure``) appends with the container's inspect state
STATE_MARK = "dapo-ops-container-state:"


def take_state(res: Result) -> ContainerState | None:
    """Remove the ``state_on_failure`` line from ``res.stderr``; the state it carries, if Docker gave one."""
    if STATE_MARK not in (res.stderr or ""):
        return None
    keep, state = [], None
    for ln in res.stderr.split("\n"):
        if ln.startswith(STATE_MARK):
            parts = ln[len(STATE_MARK) :].split()
            if len(parts) == 3 and parts[1].lstrip("-").isdigit():
                state = ContainerState(status=parts[0], exit_code=int(parts[1]), oom_killed=parts[2] == "true")
        else:
            keep.append(ln)
    res.stderr = "\n".join(keep).rstrip("\n") + ("\n" if keep and any(keep) else "")
    return state


def oserror_text(e) -> str:
    """The OS error text of ``e`` (the first of a ``NoValidConnectionsError``'s errors)."""
    errs = getattr(e, "errors", None)
    if errs:
        first = next(iter(errs.values()))
        return getattr(first, "strerror", None) or str(first)
    return getattr(e, "strerror", None) or str(e)


def short_cmd(cmd: str, limit: int = 80) -> str:
    """``cmd`` on one line, cut to ``limit`` characters (for messages)."""
    one = " ".join(str(cmd).split())
    return one if len(one) <= limit else one[: limit - 3] + "..."


def command_error(host: str, cmd: str, res: Result, *, where: str) -> RemoteError:
    """Kind ``command``: ``cmd`` ran ``where`` and exited non-zero; the message ends with its last output line."""
    lines = [ln.strip() for ln in (res.stderr or res.stdout or "").splitlines() if ln.strip()]
    last = lines[-1] if lines else "no output"
    if len(last) > 200:
        last = last[:197] + "..."
    return RemoteError(
        "command", host, f"`{short_cmd(cmd)}` exited {res.exited} {where}: {last}", exit_code=res.exited, result=res
    )


def fingerprint(key) -> str:
    """OpenSSH-style ``SHA256:<base64>`` fingerprint of a paramiko ``PKey``."""
    import base64
    import hashlib

    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


#: paramiko's message when a TCP connection opened but no ``SSH-`` banner came within ``banner_timeout`` (or the peer
#: closed it first): ``paramiko/transport.py`` ``_check_banner``, ``"Error reading SSH protocol banner" + str(e)``
NO_BANNER = "Error reading SSH protocol banner"


def no_banner_error(target, cxn, detail: str = "") -> RemoteError:
    """Kind ``unreachable`` for :data:`NO_BANNER`: the host could not be reached over SSH at its address and port
    (nothing answered as sshd: host down behind a NAT or proxy, a firewall, another service on the port)."""
    why = f" ({detail.strip()})" if detail.strip() else ""
    return RemoteError(
        "unreachable",
        target.name,
        f"could not reach {cxn.host} port {cxn.port} over SSH: no SSH server answered{why}; check the address and "
        f"port in the inventory or -H, and that sshd runs there (`ssh -p {cxn.port} {cxn.user}@{cxn.host} true`)",
    )


def ssh_error(target, e: BaseException, cxn) -> RemoteError:
    """The :class:`RemoteError` for an SSH-level exception ``e`` of ``target`` on connection ``cxn`` (paramiko's
    exception types, ``paramiko/ssh_exception.py``; socket errors). Never raises."""
    import paramiko

    where = target._where(cxn)
    kh = getattr(cxn, "_dapo_known_hosts", None)
    if isinstance(e, paramiko.BadHostKeyException):
        return RemoteError(
            "hostkey",
            target.name,
            f"host key of {where} CHANGED: server offers {e.key.get_name()} {fingerprint(e.key)}, {kh} "
            f"has {fingerprint(e.expected_key)}; if the host was reinstalled, verify and remove the old key "
            f"(ssh-keygen -R {cxn.host} -f {kh}), otherwise do not connect",
        )
    if isinstance(e, paramiko.SSHException) and "not found in known_hosts" in str(e):
        port = f"-p {cxn.port} " if cxn.port != 22 else ""
        return RemoteError(
            "hostkey",
            target.name,
            f"host key of {where} is not in {kh}; verify it and add it (ssh-keyscan {port}{cxn.host} >> {kh}) "
            f"or pass --accept-new-host-keys",
        )
    if isinstance(e, paramiko.PasswordRequiredException):
        return RemoteError(
            "auth",
            target.name,
            f"identity file for {where} is passphrase-protected; "
            "load it into ssh-agent (ssh-add) or use an unencrypted key",
        )
    if isinstance(e, paramiko.AuthenticationException):
        ident = target.host.identity_file or "the default keys / ssh-agent"
        return RemoteError(
            "auth",
            target.name,
            f"SSH authentication to {where} failed with {ident}; "
            f"check user and identity_file, and that the key is in "
            f"~{cxn.user}/.ssh/authorized_keys on the host",
        )
    if isinstance(e, paramiko.ssh_exception.NoValidConnectionsError):
        codes = {getattr(x, "errno", None) for x in e.errors.values()}
        if codes <= {errno.ECONNREFUSED}:
            return RemoteError(
                "refused",
                target.name,
                f"connection to {where} refused: sshd is not running "
                f"or listens on another port; start sshd or fix port",
            )
        return RemoteError(
            "unreachable",
            target.name,
            f"cannot connect to {where}: {oserror_text(e)}; check the address and the network",
        )
    if isinstance(e, socket.gaierror):
        return RemoteError(
            "unreachable", target.name, f"cannot resolve {cxn.host} ({e.strerror}); fix address in the inventory"
        )
    if isinstance(e, (socket.timeout, TimeoutError)) or (
        isinstance(e, paramiko.SSHException) and str(e) == "Timeout opening channel."
    ):
        # the second: a reused connection whose link died (Transport.channel_timeout = connect_timeout,
        # set by dapo_ops.control.remote.sshmux; paramiko/transport.py open_channel)
        return RemoteError(
            "unreachable",
            target.name,
            f"connection to {where} timed out after "
            f"{target.connect_timeout:g} s: host down or network "
            f"partitioned; check the link / firewall",
        )
    if isinstance(e, ConnectionRefusedError):
        return RemoteError(
            "refused",
            target.name,
            f"connection to {where} refused: sshd is not running or listens on another port; start sshd or fix port",
        )
    if isinstance(e, OSError) and e.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EHOSTDOWN):
        return RemoteError(
            "unreachable", target.name, f"cannot connect to {where}: {e.strerror}; check the address and the network"
        )
    return _other_ssh_error(target, e, cxn, where)


def _other_ssh_error(target, e: BaseException, cxn, where: str) -> RemoteError:
    """:func:`ssh_error`'s last cases: no SSH banner (:func:`no_banner_error`), else paramiko's / the OS's text."""
    import paramiko

    if isinstance(e, paramiko.SSHException) and str(e).startswith(NO_BANNER):
        return no_banner_error(target, cxn, str(e)[len(NO_BANNER) :])
    if isinstance(e, (paramiko.SSHException, EOFError, OSError)):
        text = str(e) or type(e).__name__
        return RemoteError("unreachable", target.name, f"SSH to {where} failed: {text}")
    return RemoteError("unreachable", target.name, f"SSH to {where} failed: {type(e).__name__}: {e}")


def docker_error(
    target, res: Result, *, inspect: bool = True, known_state: ContainerState | None = None
) -> RemoteError | None:
    """Docker CLI / daemon failure of a ``docker ...`` host command (None if the command itself failed).

    Only the first stderr line is considered: Docker prints its own error first and alone. A stopped
    container is described from ``known_state`` (read in the same round trip, :meth:`Target.run`'s
    ``state_on_failure``), else from one more ``docker inspect`` when ``inspect``.
    """
    if res.exited == 0 or target.bare:
        return None
    lines = [ln for ln in (res.stderr or "").splitlines() if ln.strip()]
    first = lines[0] if lines else ""
    c = target.container
    if res.exited == 127 and "docker" in first and ("not found" in first or "No such file" in first):
        return RemoteError(
            "docker-missing",
            target.name,
            f"docker CLI not found on the host ({first.strip()}); install Docker or fix PATH for the SSH user",
            result=res,
        )
    if "Cannot connect to the Docker daemon" in first or "Is the docker daemon running" in first:
        return RemoteError(
            "docker-missing",
            target.name,
            f"Docker daemon not running on the host ({first.strip()}); start it (systemctl start docker)",
            result=res,
        )
    if "permission denied" in first.lower() and "docker" in first.lower() and "sock" in first.lower():
        return RemoteError(
            "docker-missing",
            target.name,
            f"no permission to use Docker ({first.strip()}); add the SSH user to the docker group or use root",
            result=res,
        )
    if re.search(r"No such (container|object): ?\S*", first) and (first.startswith("Error") or res.exited in (1, 125)):
        src = _container_source(c, getattr(target, "host", None))
        return RemoteError(
            "container-missing",
            target.name,
            f"container '{c}' does not exist (Docker: {first.strip()}); create it (inv container.create) or fix {src}",
            result=res,
        )
    # Docker 20.10 writes "Container <id> is not running", newer engines "container <id> is not running"
    m = re.search(r"[Cc]ontainer \S+ is (not running|restarting|paused)", first)
    if m:
        state = known_state or (target.container_state() if inspect else None)
        desc = state.describe() if state else m.group(1)
        fix = "unpause it" if m.group(1) == "paused" else f"start it (docker start {c}) or recreate it"
        return RemoteError(
            "container-stopped",
            target.name,
            f"container '{c}' is {desc}; {fix}",
            state=state.to_json() if state else None,
            result=res,
        )
    return None


def exec_start_failure(res: Result) -> str | None:
    """Docker's reason a ``docker exec`` could not start its process (exit 126, runc's ``OCI runtime exec failed:
    ...``), or None. The Docker CLI prints that line on STDOUT, not stderr (the sandbox's Docker, docker exec -w
    /nonexist: ``OCI runtime exec failed: exec failed: unable to start container process: chdir to cwd
    ("/nonexist") set in config.json failed: no such file or directory: unknown``), so both are searched."""
    if res.exited != 126:
        return None
    for ln in f"{res.stderr or ''}\n{res.stdout or ''}".splitlines():
        if "OCI runtime exec failed" in ln or "chdir to cwd" in ln:
            return ln.strip()
    return None


#: a write that failed for want of space (ENOSPC, EDQUOT) as tar, cat, sh and Python print it
NO_SPACE_RX = re.compile(r"no space left on device|errno 28\b|enospc|disk quota exceeded|edquot", re.I)


def is_no_space(text: str) -> bool:
    """True when ``text`` (a command's output or a one-line message) says a write failed for want of space
    (``cat: write error: No space left on device``, ``OSError: [Errno 28] ...``, ``Disk quota exceeded``)."""
    return bool(NO_SPACE_RX.search(text or ""))


def space_fix(runs_dir: str | None) -> str:
    """The fix of a full runs_dir (preflight's ``bundle`` check, the bundle upload): space, not permissions (issue
    32)."""
    runs = runs_dir or "runs_dir"
    return (
        f"free space on the filesystem of runs_dir {runs} (`df -h {runs}` in the container; old runs' "
        "checkpoints are under it), or point runs_dir in hosts.toml at a bigger volume"
    )


def is_workdir_missing(text: str) -> bool:
    """True when ``text`` (a docker exec's output, either stream) says the exec's working directory does not
    exist in the container: runc's ``... chdir to cwd ("/x") set in config.json failed: no such file or
    directory`` (docker exec -w). The one test of it (``inv hosts``, preflight's ``workdir`` check)."""
    low = (text or "").lower()
    return "chdir to cwd" in low and "no such file or directory" in low


def workdir_missing_message(target, res: Result) -> str | None:
    """One line when ``res`` failed because the exec's working directory (the host's ``workdir``) does not exist
    in the container (:func:`exec_start_failure` names ``chdir to cwd``), else None."""
    why = exec_start_failure(res)
    if not why or not is_workdir_missing(why):
        return None
    m = re.search(r'chdir to cwd \("?([^")]*)"?\)', why)
    wd = m.group(1) if m else getattr(getattr(target, "host", None), "workdir", "?")
    return (
        f"workdir {wd} does not exist {target.where} (Docker: chdir to cwd failed: no such "
        f"file or directory); fix workdir in hosts.toml (the verl checkout, e.g. /verl) or create it in the image"
    )


def python_cannot_run(target, python: str, res: Result) -> str | None:
    """One line when ``res`` (a command that ran ``python`` first, in the container or a bare host's shell) failed
    because that interpreter cannot be executed: the shell's ``<python>: not found`` (127) / ``Permission denied``
    (126), or Docker's ``OCI runtime exec failed: ... exec: "<python>": ...`` (126/127). Names the inventory's
    ``python`` field and the fix; None for any other failure."""
    if res is None or res.exited not in (126, 127):
        return None
    text = f"{res.stderr or ''}\n{res.stdout or ''}"
    why = next(
        (
            ln.strip()
            for ln in text.splitlines()
            if python in ln
            and re.search(
                r"not found|Permission denied|No such file|Is a directory|"
                r"executable file not found|OCI runtime exec failed",
                ln,
            )
        ),
        None,
    )
    if why is None:
        return None
    return (
        f"python {python!r} (hosts.toml `python`) cannot run {target.where}: {why[:200]}; set python in "
        f"hosts.toml to the interpreter's path or a name on {'the host' if target.bare else 'the container'}'s "
        f"PATH (e.g. python3)"
    )


def _container_source(container: str, host: Any) -> str:
    """What the user fixes for a missing ``container``: the ``--container`` flag or the ``CONTAINER`` env var the CLI
    took it from (``Host.container_from``), the run setting when the launch's target names another container than
    its host (``--container`` / ``CONTAINER``, settings.py), else the inventory's ``container``."""
    source = getattr(host, "container_from", "")
    if source == "CONTAINER":
        return "the CONTAINER env var"
    if source:
        return source
    return (
        "container in the inventory"
        if container == getattr(host, "container", container)
        else "--container / CONTAINER"
    )
