"""Remote execution: a :class:`Target` (an inventory host + its container) over one Fabric connection.

Everything that reaches a shell is ``shlex.quote``-d here, so callers pass plain strings:

- ``Target.run(cmd)`` -> on the host: ``docker exec [-t] [-w DIR] [-e K=V ...] [--env-file F] <container> sh -c <cmd>``
  (or ``... <container> argv0 argv1 ...`` when ``cmd`` is a list: each element arrives as one argv element,
  byte for byte).
- non-secret ``env`` goes as ``docker exec -e K=<value>`` (quoted; visible in the host's ``ps``: not for secrets).
- ``secret_env`` goes through an env-file created on the host with ``umask 077`` (mode 0600), filled from the
  SSH channel's stdin (never on any command line), passed with ``--env-file`` and removed when ``docker exec``
  returns (also on SIGHUP/SIGTERM of the host shell).
- ``Target.host_run(cmd)`` runs on the host itself; ``Target.put_text`` writes a file inside the container from
  stdin (``docker exec -i <c> sh -c 'cat > path'``).

Host keys are verified against ``known_hosts`` (inventory field, else the ssh_config's UserKnownHostsFile, else
``~/.ssh/known_hosts``) with paramiko's ``RejectPolicy``; ``accept_new_host_keys=True`` accepts (and appends) keys
of hosts not yet listed, like OpenSSH ``StrictHostKeyChecking=accept-new``; a *changed* key is always refused.

Every failure is a :class:`RemoteError` with a ``kind`` (see :data:`KINDS`) and a one-line message that says
what to do. Docker's own messages decide the docker kinds (Docker 20.10 engine, test-bench.md section 6):
``No such container: <name>``, ``Container <id> is not running`` / ``is restarting`` / ``is paused``,
``Cannot connect to the Docker daemon``; a stopped container is then described from
``docker inspect -f '{{.State.Status}} {{.State.ExitCode}} {{.State.OOMKilled}}'``.

Bare-metal hosts (inventory ``runtime = "host"``): no container. ``Target.run(cmd)`` runs
``( cd <workdir> && export <host env> <env> && [set -a && . "$f" && set +a &&] sh -c <cmd> )`` in the host's
own shell instead of ``docker exec``; the inventory's per-host ``env`` table (non-secret; e.g. ``PYTHONPATH``,
``PATH``) is exported first, a call's ``env`` after it (``PYTHONPATH`` of both is joined, the call's first).
Secrets go through the same 0600 file fed by stdin, written as shell-quoted ``K='v'`` lines and sourced with
``set -a`` (so no value is ever evaluated), and removed after. Docker's error kinds never apply there.

Local transport (inventory ``transport = "local"``): the host is this machine; the same code path runs each
host command with :class:`invoke.Context` (``/bin/bash`` subprocess, same Result, timeout and stdin
handling as Fabric's SSH runner) instead of SSH; connect/close are no-ops.

A Target is not thread-safe: use one per thread (:mod:`dapo_ops.control.fanout` does).

Connection reuse: ``Target(..., reuse=True)`` runs plain (no pty) commands through a per-user control master
that keeps the host's SSH connection open between calls and processes (:mod:`dapo_ops.control.sshmux`, like OpenSSH's
``ControlMaster``/``ControlPersist``); the master connects with this same code, so host-key verification and the
error kinds are the same. fabric and paramiko are imported only when a direct connection is made.
"""

from __future__ import annotations

import errno
import io
import os
import re
import shlex
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from invoke.exceptions import CommandTimedOut, Failure, ThreadException, UnexpectedExit
from invoke.runners import Result

from dapo_ops.control.inventory import Host

if TYPE_CHECKING:
    import fabric

KINDS = (
    "unreachable",        # no route / connect timed out / name does not resolve / not an SSH server
    "refused",            # TCP connection refused (sshd down or wrong port)
    "auth",               # SSH authentication failed (key not accepted, identity file missing)
    "hostkey",            # host key unknown (not in known_hosts) or changed
    "timeout",            # the command did not finish within its timeout
    "docker-missing",     # no docker CLI on the host, daemon not running, or no permission on its socket
    "container-missing",  # no container of that name
    "container-stopped",  # container exists but is exited / restarting / paused / created
    "command",            # the command ran and failed (non-zero exit, check=True)
)

_ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_known_hosts_lock = threading.Lock()

INSPECT_FORMAT = "{{.State.Status}} {{.State.ExitCode}} {{.State.OOMKilled}}"


class RemoteError(Exception):
    """A per-host failure. ``str()`` is one line: ``<host>: <message>``.

    :ivar kind: one of :data:`KINDS`.
    :ivar host: inventory host name.
    :ivar message: one line without the host name (for a table cell).
    :ivar exit_code: the command's exit code (kind ``command``), else None.
    :ivar state: for ``container-stopped``: ``{"status": "exited", "exit_code": 137, "oom_killed": False}``.
    :ivar result: the :class:`invoke.runners.Result` when a command ran, else None.
    """

    def __init__(self, kind: str, host: str, message: str, *, exit_code: int | None = None,
                 state: dict | None = None, result: Result | None = None):
        assert kind in KINDS, kind
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


def _accept_new_policy(path: Path, target: "Target"):
    """OpenSSH ``accept-new``: remember an unknown host's key and append it to known_hosts (a changed key is
    still rejected: paramiko raises BadHostKeyException before consulting the policy). A paramiko
    ``MissingHostKeyPolicy``, defined on first use (paramiko is imported only for a direct connection)."""
    import paramiko

    class _AcceptNewPolicy(paramiko.MissingHostKeyPolicy):
        def missing_host_key(self, client, hostname, key):
            client.get_host_keys().add(hostname, key.get_name(), key)
            line = f"{hostname} {key.get_name()} {key.get_base64()}\n"
            with _known_hosts_lock:
                path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                with open(path, "a", encoding="ascii") as fh:
                    fh.write(line)
            target.added_host_key = f"{key.get_name()} {_fingerprint(key)}"

    return _AcceptNewPolicy()


def _fingerprint(key) -> str:
    import base64
    import hashlib

    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


class _ChunkReader:
    """File-like stdin for invoke's runner: no fileno, so invoke reads it without select; returns 64 KiB per
    read (invoke asks for 1 byte at a time from non-tty streams and sleeps 10 ms between reads)."""

    def __init__(self, data: bytes):
        self._buf = io.BytesIO(data)

    def read(self, n: int = -1) -> bytes:
        return self._buf.read(65536)


def q(s) -> str:
    """``shlex.quote`` of ``str(s)``."""
    return shlex.quote(str(s))


def _check_env(env: dict | None, what: str) -> dict[str, str]:
    out = {}
    for k, v in (env or {}).items():
        if not isinstance(k, str) or not _ENV_KEY.fullmatch(k):
            raise ValueError(f"{what} name {k!r} is not a valid environment variable name ([A-Za-z_][A-Za-z0-9_]*)")
        v = "" if v is None else str(v)
        if "\x00" in v:
            raise ValueError(f"{what} {k} contains a NUL byte, which no environment can carry")
        out[k] = v
    return out


@dataclass
class Target:
    """An inventory host and the container remote commands run in.

    :param host: the :class:`~dapo_ops.control.inventory.Host`.
    :param container: container name; defaults to ``host.container``.
    :param accept_new_host_keys: accept and record host keys missing from known_hosts (explicit opt-in).
    :param connect_timeout: seconds; defaults to ``host.connect_timeout``.
    :param reuse: run plain commands through the host's control master (:mod:`dapo_ops.control.sshmux`), which keeps
        the SSH connection for later calls and processes; off by default (``connect()``, pty and streaming
        commands always use this Target's own connection).
    """

    host: Host
    container: str | None = None
    accept_new_host_keys: bool = False
    connect_timeout: float | None = None
    reuse: bool = False
    added_host_key: str | None = field(default=None, init=False)
    _cxn: fabric.Connection | None = field(default=None, init=False, repr=False)

    def __post_init__(self):
        if self.container is None:
            self.container = self.host.container
        if self.connect_timeout is None:
            self.connect_timeout = self.host.connect_timeout

    # ---- connection -------------------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self.host.name

    def _config(self):
        import fabric

        overrides = {"run": {"in_stream": False, "encoding": "utf-8"}}
        if self.host.ssh_config:
            return fabric.Config(runtime_ssh_path=os.path.expanduser(self.host.ssh_config), overrides=overrides)
        return fabric.Config(overrides=overrides)

    def _known_hosts(self, cxn) -> Path:
        if self.host.known_hosts:
            return Path(os.path.expanduser(self.host.known_hosts))
        from_cfg = cxn.ssh_config.get("userknownhostsfile")
        if from_cfg:
            first = from_cfg.split()[0] if isinstance(from_cfg, str) else list(from_cfg)[0]
            return Path(os.path.expanduser(first))
        return Path(os.path.expanduser("~/.ssh/known_hosts"))

    def _harden(self, cxn) -> None:
        """Replace Fabric's AutoAddPolicy by known_hosts verification (recursively for gateways)."""
        import fabric
        import paramiko

        path = self._known_hosts(cxn)
        client = cxn.client
        if path.exists():
            client.load_host_keys(str(path))
        client._host_keys_filename = None  # never let paramiko rewrite the file; _AcceptNewPolicy appends
        if self.accept_new_host_keys:
            client.set_missing_host_key_policy(_accept_new_policy(path, self))
        else:
            client.set_missing_host_key_policy(paramiko.RejectPolicy())
        cxn._dapo_known_hosts = path
        if isinstance(cxn.gateway, fabric.Connection):
            self._harden(cxn.gateway)

    def _connect_kwargs(self) -> dict:
        kw: dict = {"banner_timeout": max(self.connect_timeout, 10), "auth_timeout": max(self.connect_timeout, 10)}
        if self.host.identity_file:
            kw["key_filename"] = [os.path.expanduser(self.host.identity_file)]
            kw["look_for_keys"] = False
        return kw

    @property
    def bare(self) -> bool:
        """``runtime = "host"``: commands run in the host's own shell, no container."""
        return getattr(self.host, "runtime", "docker") == "host"

    @property
    def local(self) -> bool:
        """``transport = "local"``: the host is this machine, commands run by a local subprocess."""
        return getattr(self.host, "transport", "ssh") == "local"

    @property
    def where(self) -> str:
        """``in container '<c>'`` or ``on the host`` (for messages)."""
        return "on the host" if self.bare else f"in container '{self.container}'"

    def connection(self):
        """The (lazily created, not yet opened) :class:`fabric.Connection` to the host (an
        :class:`invoke.Context` for ``transport = "local"``)."""
        if self._cxn is None and self.local:
            import invoke

            self._cxn = invoke.Context(config=invoke.Config(overrides={"run": {"in_stream": False,
                                                                              "encoding": "utf-8"}}))
        if self._cxn is None:
            import fabric

            h = self.host
            config = self._config()
            gateway = None
            if h.proxy_jump:
                gateway = fabric.Connection(h.proxy_jump, config=config, connect_timeout=int(self.connect_timeout),
                                            connect_kwargs=self._connect_kwargs())
            kwargs = dict(config=config, connect_timeout=max(1, int(round(self.connect_timeout))),
                          connect_kwargs=self._connect_kwargs())
            if h.user:
                kwargs["user"] = h.user
            if h.port:
                kwargs["port"] = h.port
            if gateway is not None:
                kwargs["gateway"] = gateway
            cxn = fabric.Connection(h.address, **kwargs)
            self._harden(cxn)
            self._cxn = cxn
        return self._cxn

    def connect(self) -> None:
        """Open the SSH connection now (normally done by the first command).

        :raises RemoteError: unreachable / refused / auth / hostkey.
        """
        cxn = self.connection()
        if self.local or cxn.is_connected:
            return
        if self.host.identity_file and not os.path.exists(os.path.expanduser(self.host.identity_file)):
            raise RemoteError("auth", self.name, f"identity file {self.host.identity_file} does not exist; "
                                                 "fix identity_file in the inventory")
        try:
            cxn.open()
        except Exception as e:  # noqa: BLE001 - translated into one line
            self.close()
            raise self._ssh_error(e, cxn) from None

    def close(self) -> None:
        """Close the SSH connection (and its gateway)."""
        if self._cxn is not None:
            try:
                if not self.local:
                    self._cxn.close()
            finally:
                self._cxn = None

    def __enter__(self) -> "Target":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- error translation ------------------------------------------------------------------------------

    def _where(self, cxn=None) -> str:
        if self.local:
            return "localhost (local transport)"
        cxn = cxn or self._cxn
        if cxn is not None:
            return f"{cxn.user}@{cxn.host}:{cxn.port}"
        return self.host.ssh_target

    def _ssh_error(self, e: BaseException, cxn) -> RemoteError:
        import paramiko

        where = self._where(cxn)
        kh = getattr(cxn, "_dapo_known_hosts", None)
        if isinstance(e, paramiko.BadHostKeyException):
            return RemoteError(
                "hostkey", self.name,
                f"host key of {where} CHANGED: server offers {e.key.get_name()} {_fingerprint(e.key)}, {kh} "
                f"has {_fingerprint(e.expected_key)}; if the host was reinstalled, verify and remove the old key "
                f"(ssh-keygen -R {cxn.host} -f {kh}), otherwise do not connect")
        if isinstance(e, paramiko.SSHException) and "not found in known_hosts" in str(e):
            port = f"-p {cxn.port} " if cxn.port != 22 else ""
            return RemoteError(
                "hostkey", self.name,
                f"host key of {where} is not in {kh}; verify it and add it (ssh-keyscan {port}{cxn.host} >> {kh}) "
                f"or pass --accept-new-host-keys")
        if isinstance(e, paramiko.PasswordRequiredException):
            return RemoteError("auth", self.name, f"identity file for {where} is passphrase-protected; "
                                                  "load it into ssh-agent (ssh-add) or use an unencrypted key")
        if isinstance(e, paramiko.AuthenticationException):
            ident = self.host.identity_file or "the default keys / ssh-agent"
            return RemoteError("auth", self.name, f"SSH authentication to {where} failed with {ident}; "
                                                  f"check user and identity_file, and that the key is in "
                                                  f"~{cxn.user}/.ssh/authorized_keys on the host")
        if isinstance(e, paramiko.ssh_exception.NoValidConnectionsError):
            codes = {getattr(x, "errno", None) for x in e.errors.values()}
            if codes <= {errno.ECONNREFUSED}:
                return RemoteError("refused", self.name, f"connection to {where} refused: sshd is not running "
                                                         f"or listens on another port; start sshd or fix port")
            return RemoteError("unreachable", self.name, f"cannot connect to {where}: {_oserror_text(e)}; "
                                                         f"check the address and the network")
        if isinstance(e, socket.gaierror):
            return RemoteError("unreachable", self.name, f"cannot resolve {cxn.host} ({e.strerror}); "
                                                         f"fix address in the inventory")
        if isinstance(e, (socket.timeout, TimeoutError)) or (
                isinstance(e, paramiko.SSHException) and str(e) == "Timeout opening channel."):
            # the second: a reused connection whose link died (Transport.channel_timeout = connect_timeout,
            # set by dapo_ops.control.sshmux; paramiko/transport.py open_channel)
            return RemoteError("unreachable", self.name, f"connection to {where} timed out after "
                                                         f"{self.connect_timeout:g} s: host down or network "
                                                         f"partitioned; check the link / firewall")
        if isinstance(e, ConnectionRefusedError):
            return RemoteError("refused", self.name, f"connection to {where} refused: sshd is not running "
                                                     f"or listens on another port; start sshd or fix port")
        if isinstance(e, OSError) and e.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EHOSTDOWN):
            return RemoteError("unreachable", self.name, f"cannot connect to {where}: {e.strerror}; "
                                                         f"check the address and the network")
        if isinstance(e, (paramiko.SSHException, EOFError, OSError)):
            text = str(e) or type(e).__name__
            return RemoteError("unreachable", self.name, f"SSH to {where} failed: {text}")
        return RemoteError("unreachable", self.name, f"SSH to {where} failed: {type(e).__name__}: {e}")

    def _docker_error(self, res: Result, *, inspect: bool = True,
                      known_state: ContainerState | None = None) -> RemoteError | None:
        """Docker CLI / daemon failure of a ``docker ...`` host command (None if the command itself failed).

        Only the first stderr line is considered: Docker prints its own error first and alone. A stopped
        container is described from ``known_state`` (read in the same round trip, :meth:`run`'s
        ``state_on_failure``), else from one more ``docker inspect`` when ``inspect``.
        """
        if res.exited == 0 or self.bare:
            return None
        lines = [ln for ln in (res.stderr or "").splitlines() if ln.strip()]
        first = lines[0] if lines else ""
        c = self.container
        if res.exited == 127 and "docker" in first and ("not found" in first or "No such file" in first):
            return RemoteError("docker-missing", self.name, f"docker CLI not found on the host ({first.strip()}); "
                                                            "install Docker or fix PATH for the SSH user",
                               result=res)
        if "Cannot connect to the Docker daemon" in first or "Is the docker daemon running" in first:
            return RemoteError("docker-missing", self.name, f"Docker daemon not running on the host ({first.strip()}); "
                                                            "start it (systemctl start docker)", result=res)
        if "permission denied" in first.lower() and "docker" in first.lower() and "sock" in first.lower():
            return RemoteError("docker-missing", self.name, f"no permission to use Docker ({first.strip()}); add "
                                                            "the SSH user to the docker group or use root",
                               result=res)
        if re.search(r"No such (container|object): ?\S*", first) and (first.startswith("Error") or res.exited in (1, 125)):
            return RemoteError("container-missing", self.name, f"container '{c}' does not exist (Docker: "
                                                               f"{first.strip()}); create it (inv container.create) "
                                                               "or fix container in the inventory", result=res)
        # Docker 20.10 writes "Container <id> is not running", newer engines "container <id> is not running"
        m = re.search(r"[Cc]ontainer \S+ is (not running|restarting|paused)", first)
        if m:
            state = known_state or (self.container_state() if inspect else None)
            desc = state.describe() if state else m.group(1)
            fix = "unpause it" if m.group(1) == "paused" else f"start it (docker start {c}) or recreate it"
            return RemoteError("container-stopped", self.name,
                               f"container '{c}' is {desc}; {fix}", state=state.to_json() if state else None,
                               result=res)
        return None

    # ---- running ----------------------------------------------------------------------------------------

    def _raw(self, command: str, *, timeout: float | None, stdin: bytes | None = None, pty: bool = False,
             hide=True, direct: bool = False) -> Result:
        """Run ``command`` on the host (already quoted); never raises on exit code.

        With ``reuse`` (and no pty, output hidden, not ``direct``) through the host's control master
        (:func:`dapo_ops.control.sshmux.run`); when no master can serve, over this Target's own connection.
        """
        if self.reuse and not direct and not pty and hide is True and getattr(self.host, "transport", "ssh") == "ssh":
            from dapo_ops.control import sshmux

            if sshmux.persist_s() > 0:
                res = sshmux.run(self, command, timeout=timeout, stdin=stdin)
                if res is not None:
                    return res
        self.connect()
        cxn = self._cxn
        kw = dict(hide=hide, warn=True, pty=pty, timeout=timeout)
        kw["in_stream"] = _ChunkReader(stdin) if stdin is not None else False
        t0 = time.monotonic()
        try:
            res = cxn.run(command, **kw)
        except CommandTimedOut as e:
            raise RemoteError("timeout", self.name, f"command did not finish within {timeout:g} s: "
                                                    f"{_short_cmd(command)}", result=e.result) from None
        except (UnexpectedExit, Failure) as e:  # pragma: no cover - warn=True makes these rare
            return e.result
        except ThreadException as e:
            inner = e.exceptions[0].value if e.exceptions else e
            self.close()
            raise self._ssh_error(inner, cxn) from None
        except Exception as e:  # noqa: BLE001 - transport dropped mid-command etc.
            self.close()
            raise self._ssh_error(e, cxn) from None
        if res.exited == -1:  # the channel closed without an exit status
            if timeout is not None and time.monotonic() - t0 >= timeout * 0.99:
                # invoke's timer killed the channel but lost the race to report CommandTimedOut (seen with pty)
                raise RemoteError("timeout", self.name, f"command did not finish within {timeout:g} s: "
                                                        f"{_short_cmd(command)}", result=res)
            if not self.local and (cxn.transport is None or not cxn.transport.is_active()):
                self.close()
                raise RemoteError("unreachable", self.name, f"connection to {self._where(cxn)} lost during "
                                                            f"`{_short_cmd(command)}`; check the host and retry")
            # else: sshd reported an exit *signal* instead of a status (the host-side process was killed);
            # callers see exited == -1 and handle it like any failed command
        return res

    def host_run(self, cmd: str | list[str], *, timeout: float = 60, check: bool = True, env: dict | None = None,
                 pty: bool = False, stdin: bytes | str | None = None) -> Result:
        """Run a command on the host (not in the container).

        :param cmd: shell command string (run by the login shell) or argv list (each element quoted).
        :param env: exported (quoted) in the same host shell; visible in ``ps``: not for secrets.
        :param timeout: seconds before RemoteError(kind="timeout").
        :param check: raise RemoteError(kind="command") on non-zero exit.
        :param stdin: bytes/str fed to the command's stdin (then EOF).
        :raises RemoteError: ssh kinds, timeout, docker-missing (exit 127 ``docker: not found``), command.
        """
        command = cmd if isinstance(cmd, str) else " ".join(q(a) for a in cmd)
        env = _check_env(env, "env")
        if env:
            command = "export " + " ".join(f"{k}={q(v)}" for k, v in env.items()) + " && " + command
        if isinstance(stdin, str):
            stdin = stdin.encode("utf-8")
        res = self._raw(command, timeout=timeout, stdin=stdin, pty=pty)
        if res.exited != 0 and check:
            raise _command_error(self.name, command, res, where="on the host")
        return res

    def container_state(self, *, timeout: float = 30) -> ContainerState:
        """``docker inspect`` the container.

        For ``runtime = "host"`` there is no container: the state is ``running`` (the host answered nothing
        yet; its own reachability shows in the first command).

        :raises RemoteError: container-missing, docker-missing, ssh kinds.
        """
        if self.bare:
            return ContainerState(status="running", exit_code=0, oom_killed=False)
        cmd = f"docker inspect -f {q(INSPECT_FORMAT)} {q(self.container)}"
        res = self._raw(cmd, timeout=timeout)
        err = self._docker_error(res, inspect=False)
        if err:
            raise err
        if res.exited != 0:
            raise _command_error(self.name, cmd, res, where="on the host")
        parts = res.stdout.split()
        if len(parts) != 3:
            raise RemoteError("command", self.name, f"unexpected docker inspect output {res.stdout.strip()!r}",
                              result=res)
        status, code, oom = parts
        return ContainerState(status=status, exit_code=int(code), oom_killed=(oom == "true"))

    def exec_command(self, cmd: str | list[str], *, env: dict | None = None, workdir: str | None = None,
                     interactive: bool = False, tty: bool = False, env_file: str | None = None) -> str:
        """The quoted host command line for ``docker exec`` (no secrets: ``env`` values appear in it); for
        ``runtime = "host"`` the host shell line of :meth:`_bare_command` (``interactive``/``tty`` are the
        transport's business there)."""
        if self.bare:
            return self._bare_command(cmd, env=env, workdir=workdir, env_file=env_file)
        parts = ["docker", "exec"]
        if interactive:
            parts.append("-i")
        if tty:
            parts.append("-t")
        if workdir:
            parts += ["-w", workdir]
        for k, v in _check_env(env, "env").items():
            parts += ["-e", f"{k}={v}"]
        line = " ".join(q(p) for p in parts)
        if env_file:
            line += f" --env-file {env_file}"  # a shell expansion such as "$f", deliberately not quoted
        line += " " + q(self.container)
        if isinstance(cmd, str):
            line += " sh -c " + q(cmd)
        else:
            if not cmd:
                raise ValueError("empty argv")
            line += " " + " ".join(q(a) for a in cmd)
        return line

    def host_env(self, env: dict | None = None) -> dict[str, str]:
        """The inventory ``env`` table merged with a call's ``env`` (the call wins; ``PYTHONPATH`` is joined,
        the call's entries first). Only bare hosts have one (docker hosts: the call's ``env``)."""
        base = dict(getattr(self.host, "env", None) or {}) if self.bare else {}
        call = _check_env(env, "env")
        out = {**_check_env(base, "inventory env"), **call}
        if "PYTHONPATH" in base and "PYTHONPATH" in call and base["PYTHONPATH"] and call["PYTHONPATH"]:
            out["PYTHONPATH"] = call["PYTHONPATH"] + ":" + base["PYTHONPATH"]
        return out

    def _bare_command(self, cmd: str | list[str], *, env: dict | None, workdir: str | None,
                      env_file: str | None) -> str:
        """``( cd <wd> && export K=V... && [set -a && . <env_file> && set +a &&] sh -c <cmd> )`` (all quoted)."""
        steps = []
        if workdir:
            steps.append(f"cd {q(workdir)}")
        merged = self.host_env(env)
        if merged:
            steps.append("export " + " ".join(f"{k}={q(v)}" for k, v in merged.items()))
        if env_file:
            steps.append(f"set -a && . {env_file} && set +a")  # "$f": a shell expansion, deliberately unquoted
        if isinstance(cmd, str):
            steps.append("sh -c " + q(cmd))
        else:
            if not cmd:
                raise ValueError("empty argv")
            steps.append(" ".join(q(a) for a in cmd))
        return "( " + " && ".join(steps) + " )"

    def run(self, cmd: str | list[str], *, env: dict | None = None, secret_env: dict | None = None,
            timeout: float = 60, workdir: str | None = None, check: bool = True, pty: bool = False,
            state_on_failure: bool = False) -> Result:
        """Run a command inside the container with ``docker exec``.

        :param cmd: a shell command (``sh -c <cmd>``) or an argv list (each element arrives verbatim).
        :param env: non-secret variables, ``-e K=<value>`` (any value but NUL).
        :param secret_env: secret variables via a 0600 ``--env-file`` fed through stdin and removed after;
            values may not contain newline, CR or NUL (Docker env-files are line based).
        :param timeout: seconds for the whole command (RemoteError kind ``timeout``; the process inside the
            container is not killed unless ``pty=True``).
        :param workdir: ``docker exec -w``; None = the inventory's ``workdir``; "" = the image's default.
        :param check: raise RemoteError(kind="command") on a non-zero exit of the command.
        :param pty: allocate a pty (``docker exec -t``): stderr merges into stdout; Ctrl-C reaches the process.
        :param state_on_failure: when ``docker exec`` fails, read the container's state in the same host command
            (one round trip for a stopped container too; not with ``pty`` or ``secret_env``).
        :returns: :class:`invoke.runners.Result` (``.stdout``, ``.stderr``, ``.exited``, ``.ok``).
        :raises RemoteError: any kind in :data:`KINDS`; ``ValueError`` for invalid env names/values.
        """
        wd = self.host.workdir if workdir is None else workdir
        secrets = _check_env(secret_env, "secret")
        for k, v in secrets.items():
            if "\n" in v or "\r" in v:
                raise ValueError(f"secret {k} contains a newline/CR, which a Docker env-file cannot carry")
        if secrets:
            # docker: an --env-file (K=V, taken literally); bare host: shell-quoted lines sourced under set -a
            fmt = (lambda k, v: f"{k}={q(v)}\n") if self.bare else (lambda k, v: f"{k}={v}\n")
            body = "".join(fmt(k, v) for k, v in secrets.items()).encode("utf-8")
            inner = self.exec_command(cmd, env=env, workdir=wd, tty=pty, env_file='"$f"')
            command = (
                'f=$(umask 077 && mktemp "${TMPDIR:-/tmp}/dapo-ops-env.XXXXXX") || exit 125; '
                "trap 'rm -f \"$f\"' HUP INT TERM; "
                'if ! cat > "$f"; then rm -f "$f"; exit 125; fi; '
                f'{inner}; rc=$?; rm -f "$f"; exit $rc'
            )
            res = self._raw(command, timeout=timeout, stdin=body, pty=False)
        else:
            command = self.exec_command(cmd, env=env, workdir=wd, tty=pty)
            if state_on_failure and not pty:
                command = (f"{command}; rc=$?; if [ $rc -ne 0 ]; then "
                           f"s=$(docker inspect -f {q(INSPECT_FORMAT)} {q(self.container)} 2>/dev/null); "
                           f"printf '\\n{_STATE_MARK} %s\\n' \"$s\" >&2; fi; exit $rc")
            res = self._raw(command, timeout=timeout, pty=pty)
        err = self._docker_error(res, known_state=_take_state(res) if state_on_failure else None)
        if err:
            raise err
        if res.exited != 0 and check:
            shown = cmd if isinstance(cmd, str) else " ".join(q(a) for a in cmd)
            raise _command_error(self.name, shown, res, where=self.where)
        return res

    def put_text(self, text: str | bytes, path_in_container: str, mode: int = 0o644, *, timeout: float = 60) -> None:
        """Write ``text`` to ``path_in_container`` (parent directories created) via stdin.

        The file is created with ``umask 077`` and then ``chmod``-ed to ``mode``, so it is never readable by
        others before it has its final mode.

        :raises RemoteError: any kind in :data:`KINDS`.
        """
        data = text.encode("utf-8") if isinstance(text, str) else text
        p = q(path_in_container)
        script = (f"umask 077 && mkdir -p \"$(dirname {p})\" && cat > {p}.dapo-tmp && "
                  f"chmod {mode:o} {p}.dapo-tmp && mv -f {p}.dapo-tmp {p}")
        command = self.exec_command(script, workdir="", interactive=True)
        res = self._raw(command, timeout=timeout, stdin=data)
        err = self._docker_error(res)
        if err:
            raise err
        if res.exited != 0:
            raise _command_error(self.name, f"write {path_in_container}", res, where=self.where)


_STATE_MARK = "dapo-ops-container-state:"


def _take_state(res: Result) -> ContainerState | None:
    """Remove the ``state_on_failure`` line from ``res.stderr``; the state it carries, if Docker gave one."""
    if _STATE_MARK not in (res.stderr or ""):
        return None
    keep, state = [], None
    for ln in res.stderr.split("\n"):
        if ln.startswith(_STATE_MARK):
            parts = ln[len(_STATE_MARK):].split()
            if len(parts) == 3 and parts[1].lstrip("-").isdigit():
                state = ContainerState(status=parts[0], exit_code=int(parts[1]), oom_killed=parts[2] == "true")
        else:
            keep.append(ln)
    res.stderr = "\n".join(keep).rstrip("\n") + ("\n" if keep and any(keep) else "")
    return state


def _oserror_text(e) -> str:
    errs = getattr(e, "errors", None)
    if errs:
        first = next(iter(errs.values()))
        return getattr(first, "strerror", None) or str(first)
    return getattr(e, "strerror", None) or str(e)


def _short_cmd(cmd: str, limit: int = 80) -> str:
    one = " ".join(str(cmd).split())
    return one if len(one) <= limit else one[: limit - 3] + "..."


def _command_error(host: str, cmd: str, res: Result, *, where: str) -> RemoteError:
    lines = [ln.strip() for ln in (res.stderr or res.stdout or "").splitlines() if ln.strip()]
    last = lines[-1] if lines else "no output"
    if len(last) > 200:
        last = last[:197] + "..."
    return RemoteError("command", host, f"`{_short_cmd(cmd)}` exited {res.exited} {where}: {last}",
                       exit_code=res.exited, result=res)
