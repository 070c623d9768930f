"""A :class:`Target`: an inventory host and its container over one Fabric connection (``run``, ``host_run``,
``put_text``, ``container_state``). The overview (quoting, secrets, bare hosts, local transport, reuse) is the
package docstring, :mod:`dapo_ops.control.remote`. Host keys are verified against ``known_hosts`` (inventory field,
else the ssh_config's UserKnownHostsFile, else ``~/.ssh/known_hosts``) with paramiko's ``RejectPolicy``, or
accept-new (:mod:`dapo_ops.control.remote.hostkeys`); failures are :class:`~dapo_ops.control.remote.errors.RemoteError`.
A Target is not thread-safe: use one per thread (:mod:`dapo_ops.control.remote.fanout` does).
"""

from __future__ import annotations

import io
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from invoke.exceptions import CommandTimedOut, Failure, ThreadException, UnexpectedExit
from invoke.runners import Result

from dapo_ops.control.inventory.model import Host
from dapo_ops.control.remote.commands import CommandLines, check_env, q
from dapo_ops.control.remote.errors import (
    INSPECT_FORMAT,
    STATE_MARK,
    ContainerState,
    RemoteError,
    command_error,
    docker_error,
    short_cmd,
    ssh_error,
    take_state,
)
from dapo_ops.control.remote.hostkeys import accept_new_policy
from dapo_ops.core import defaults

if TYPE_CHECKING:
    import fabric


class _ChunkReader:
    """File-like stdin for invoke's runner: no fileno, so invoke reads it without select; returns 64 KiB per
    read (invoke asks for 1 byte at a time from non-tty streams and sleeps 10 ms between reads)."""

    def __init__(self, data: bytes):
        self._buf = io.BytesIO(data)

    def read(self, n: int = -1) -> bytes:
        return self._buf.read(65536)


@dataclass
class Target(CommandLines):
    """An inventory host and the container remote commands run in.

    :param host: the :class:`~dapo_ops.control.inventory.hosts_file.Host`.
    :param container: container name; defaults to ``host.container``.
    :param accept_new_host_keys: accept and record host keys missing from known_hosts (explicit opt-in).
    :param connect_timeout: seconds; defaults to ``host.connect_timeout``.
    :param reuse: run plain commands through the host's control master (:mod:`dapo_ops.control.remote.sshmux`), which keeps
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
    #: False once this host refused ``nsenter`` (``run(look=True)`` then uses ``docker exec``)
    _nsenter_ok: bool = field(default=True, init=False, repr=False)

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
            path = os.path.expanduser(self.host.ssh_config)
            if not os.path.isfile(path):  # fabric would raise FileNotFoundError (fabric/config.py load_ssh_config)
                raise RemoteError(
                    "config",
                    self.name,
                    f"ssh_config file {self.host.ssh_config} does not exist or "
                    f"is not a file: fix ssh_config in the inventory (or -S)",
                )
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
            client.set_missing_host_key_policy(accept_new_policy(path, self))
        else:
            client.set_missing_host_key_policy(paramiko.RejectPolicy())
        cxn._dapo_known_hosts = path
        if isinstance(cxn.gateway, fabric.Connection):
            self._harden(cxn.gateway)

    def _connect_kwargs(self) -> dict:
        t = self.connect_timeout or 0  # set from the host by __post_init__
        kw: dict = {"banner_timeout": max(t, 10), "auth_timeout": max(t, 10)}
        if self.host.identity_file:
            kw["key_filename"] = [os.path.expanduser(self.host.identity_file)]
            kw["look_for_keys"] = False
        return kw

    @property
    def bare(self) -> bool:
        """``runtime = "host"``: commands run in the host's own shell, no container."""
        return getattr(self.host, "runtime", defaults.HOST["runtime"]) == "host"

    @property
    def local(self) -> bool:
        """``transport = "local"``: the host is this machine, commands run by a local subprocess."""
        return getattr(self.host, "transport", defaults.HOST["transport"]) == "local"

    @property
    def where(self) -> str:
        """``in container '<c>'`` or ``on the host`` (for messages)."""
        return "on the host" if self.bare else f"in container '{self.container}'"

    def connection(self):
        """The (lazily created, not yet opened) :class:`fabric.Connection` to the host (an
        :class:`invoke.Context` for ``transport = "local"``)."""
        if self._cxn is None and self.local:
            import invoke

            self._cxn = invoke.Context(
                config=invoke.Config(overrides={"run": {"in_stream": False, "encoding": "utf-8"}})
            )
        if self._cxn is None:
            import fabric

            h = self.host
            config = self._config()
            gateway = None
            if h.proxy_jump:
                gateway = fabric.Connection(
                    h.proxy_jump,
                    config=config,
                    connect_timeout=int(self.connect_timeout),
                    connect_kwargs=self._connect_kwargs(),
                )
            kwargs = dict(
                config=config,
                connect_timeout=max(1, int(round(self.connect_timeout))),
                connect_kwargs=self._connect_kwargs(),
            )
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

        A connection that was open and dropped (e.g. the host went away under a control master) is rebuilt, so
        ``known_hosts`` is read again: the old Connection's paramiko client holds the keys read when it was made
        (:meth:`_harden`), and a host brought up again with a new key would be refused as CHANGED against them.
        """
        if self._cxn is not None and not self.local and not self._cxn.is_connected:
            self.close()
        cxn = self.connection()
        if self.local or cxn.is_connected:
            return
        from dapo_ops.control.inventory.hosts_file import key_file_problem

        why = key_file_problem(self.host, "identity_file")
        if why:
            raise RemoteError("auth", self.name, why)
        gw = cxn.gateway
        if gw is not None and not isinstance(gw, str) and not gw.is_connected:
            # the bastion first, so its failure names the bastion (fabric's open() would open it inside the
            # target's connect: fabric/connection.py open_gateway, and the error would name the target)
            try:
                gw.open()
            except Exception as e:  # noqa: BLE001 - translated into one line
                self.close()
                err = self._ssh_error(e, gw)
                raise RemoteError(err.kind, self.name, f"proxy_jump bastion: {err.message}") from None
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

    # ---- error translation (dapo_ops/control/remote/errors.py) -------------------------------------------

    def _where(self, cxn=None) -> str:
        if self.local:
            return "localhost (local transport)"
        cxn = cxn or self._cxn
        if cxn is not None:
            return f"{cxn.user}@{cxn.host}:{cxn.port}"
        return self.host.ssh_target

    def _ssh_error(self, e: BaseException, cxn) -> RemoteError:
        """:func:`dapo_ops.control.remote.errors.ssh_error` for this Target."""
        return ssh_error(self, e, cxn)

    def _docker_error(
        self, res: Result, *, inspect: bool = True, known_state: ContainerState | None = None
    ) -> RemoteError | None:
        """:func:`dapo_ops.control.remote.errors.docker_error` for this Target."""
        return docker_error(self, res, inspect=inspect, known_state=known_state)

    # ---- running ----------------------------------------------------------------------------------------

    def _raw(
        self,
        command: str,
        *,
        timeout: float | None,
        stdin: bytes | None = None,
        pty: bool = False,
        hide=True,
        direct: bool = False,
    ) -> Result:
        """Run ``command`` on the host (already quoted); never raises on exit code.

        With ``reuse`` (and no pty, output hidden, not ``direct``) through the host's control master
        (:func:`dapo_ops.control.remote.sshmux.run`); when no master can serve, over this Target's own connection.
        """
        if (
            self.reuse
            and not direct
            and not pty
            and hide is True
            and getattr(self.host, "transport", defaults.HOST["transport"]) == "ssh"
        ):
            from dapo_ops.control.remote import sshmux

            if sshmux.persist_s() > 0:
                res = sshmux.run(self, command, timeout=timeout, stdin=stdin)
                if res is not None:
                    return res
        self.connect()
        cxn = self.connection()  # the one connect() opened
        kw = dict(hide=hide, warn=True, pty=pty, timeout=timeout)
        kw["in_stream"] = _ChunkReader(stdin) if stdin is not None else False
        t0 = time.monotonic()
        try:
            res = cxn.run(command, **kw)
        except CommandTimedOut as e:
            raise RemoteError(
                "timeout",
                self.name,
                f"command did not finish within {timeout:g} s: {short_cmd(command)}",
                result=e.result,
            ) from None
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
                raise RemoteError(
                    "timeout",
                    self.name,
                    f"command did not finish within {timeout:g} s: {short_cmd(command)}",
                    result=res,
                )
            if not self.local and (cxn.transport is None or not cxn.transport.is_active()):
                self.close()
                raise RemoteError(
                    "unreachable",
                    self.name,
                    f"connection to {self._where(cxn)} lost during `{short_cmd(command)}`; check the host and retry",
                )
            # else: sshd reported an exit *signal* instead of a status (the host-side process was killed);
            # callers see exited == -1 and handle it like any failed command
        return res

    def host_run(
        self,
        cmd: str | list[str],
        *,
        timeout: float = 60,
        check: bool = True,
        env: dict | None = None,
        pty: bool = False,
        stdin: bytes | str | None = None,
    ) -> Result:
        """Run a command on the host (not in the container).

        :param cmd: shell command string (run by the login shell) or argv list (each element quoted).
        :param env: exported (quoted) in the same host shell; visible in ``ps``: not for secrets.
        :param timeout: seconds before RemoteError(kind="timeout").
        :param check: raise RemoteError(kind="command") on non-zero exit.
        :param stdin: bytes/str fed to the command's stdin (then EOF).
        :raises RemoteError: ssh kinds, timeout, docker-missing (exit 127 ``docker: not found``), command.
        """
        command = cmd if isinstance(cmd, str) else " ".join(q(a) for a in cmd)
        env = check_env(env, "env")
        if env:
            command = "export " + " ".join(f"{k}={q(v)}" for k, v in env.items()) + " && " + command
        if isinstance(stdin, str):
            stdin = stdin.encode("utf-8")
        res = self._raw(command, timeout=timeout, stdin=stdin, pty=pty)
        if res.exited != 0 and check:
            raise command_error(self.name, command, res, where="on the host")
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
            raise command_error(self.name, cmd, res, where="on the host")
        parts = res.stdout.split()
        if len(parts) != 3:
            raise RemoteError(
                "command", self.name, f"unexpected docker inspect output {res.stdout.strip()!r}", result=res
            )
        status, code, oom = parts
        return ContainerState(status=status, exit_code=int(code), oom_killed=(oom == "true"))

    def run(
        self,
        cmd: str | list[str],
        *,
        env: dict | None = None,
        secret_env: dict | None = None,
        timeout: float = 60,
        workdir: str | None = None,
        check: bool = True,
        pty: bool = False,
        state_on_failure: bool = False,
        look: bool = False,
        stdin: bytes | None = None,
    ) -> Result:
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
        :param look: a short read-only look (a string ``cmd``, no env, ``workdir=""``): entered with ``nsenter``
            where the host allows it (:meth:`look_command`), else ``docker exec``; not with ``pty`` or secrets.
        :param stdin: bytes fed to the command's stdin, then EOF (``docker exec -i``; through the SSH channel, never
            a command line: how a bundle op gets a run's spec and secrets, :func:`dapo_ops.control.remote.bundle.run_op`).
            Not with ``secret_env`` (whose env-file is fed through stdin) or ``pty``.
        :returns: :class:`invoke.runners.Result` (``.stdout``, ``.stderr``, ``.exited``, ``.ok``).
        :raises RemoteError: any kind in :data:`KINDS`; ``ValueError`` for invalid env names/values, or ``stdin``
            with ``secret_env`` or ``pty``.
        """
        wd = self.host.workdir if workdir is None else workdir
        if stdin is not None and (secret_env or pty):
            raise ValueError("stdin cannot go with secret_env (its env-file is fed through stdin) or pty")
        if (
            look
            and self._nsenter_ok
            and not self.bare
            and isinstance(cmd, str)
            and stdin is None
            and not (env or secret_env or pty or wd)
        ):
            command = self.look_command(cmd)
            if state_on_failure:
                command = self._with_state(command)
            res = self._raw(command, timeout=timeout)
            if res.exited == 0 or "nsenter: " not in (res.stderr or ""):
                return self._checked(cmd, res, check, take_state(res) if state_on_failure else None)
            self._nsenter_ok = False  # refused on this host (user namespace, seccomp): docker exec from now on
        secrets = check_env(secret_env, "secret")
        for k, v in secrets.items():
            if "\n" in v or "\r" in v:
                raise ValueError(f"secret {k} contains a newline/CR, which a Docker env-file cannot carry")
        if secrets:
            command, body = self.with_secret_file(
                secrets, self.exec_command(cmd, env=env, workdir=wd, tty=pty, env_file='"$f"')
            )
            res = self._raw(command, timeout=timeout, stdin=body, pty=False)
        else:
            command = self.exec_command(cmd, env=env, workdir=wd, tty=pty, interactive=stdin is not None)
            if state_on_failure and not pty:
                command = self._with_state(command)
            res = self._raw(command, timeout=timeout, pty=pty, stdin=stdin)
        return self._checked(cmd, res, check, take_state(res) if state_on_failure else None)

    def stream(self, cmd: str, *, out_stream, err_stream=None, workdir: str = ""):
        """Start ``cmd`` in the container (``docker exec -i``; a bare host: its shell) with a pty on the SSH side and
        return at once: an :class:`invoke.runners.Promise` (``.runner.process_is_finished``,
        ``.runner.send_interrupt``, ``.join()``) whose output goes to ``out_stream`` / ``err_stream`` as it comes.
        Ctrl-C (``send_interrupt``) sends ``\\x03`` through the pty (fabric/connection.py): the docker CLI on the host
        gets SIGINT and the exec's stdin closes. For a follow that streams until the run ends
        (:func:`dapo_ops.control.remote.bundle.start_op`).

        :raises RemoteError: unreachable / refused / auth / hostkey (the connection is opened first).
        """
        self.connect()
        command = self.exec_command(cmd, interactive=True, workdir=workdir)
        return self.connection().run(
            command,
            pty=True,
            asynchronous=True,
            hide=False,
            warn=True,
            in_stream=False,
            out_stream=out_stream,
            err_stream=err_stream if err_stream is not None else out_stream,
        )

    def with_secret_file(self, secrets: dict, inner: str, after: str = "exit $rc") -> tuple[str, bytes]:
        """The host command (and its stdin) that writes ``secrets`` to a 0600 temp file ``$f`` fed through stdin,
        runs ``inner`` (an :meth:`exec_command` line with ``env_file='"$f"'``), removes the file, then runs
        ``after`` (``$rc``: the exit status of ``inner``). Docker: an ``--env-file`` (K=V, taken literally); bare
        host: shell-quoted lines sourced under ``set -a``. Values were checked by the caller (no newline/CR)."""
        fmt = (lambda k, v: f"{k}={q(v)}\n") if self.bare else (lambda k, v: f"{k}={v}\n")
        body = "".join(fmt(k, v) for k, v in secrets.items()).encode("utf-8")
        command = (
            'f=$(umask 077 && mktemp "${TMPDIR:-/tmp}/dapo-ops-env.XXXXXX") || exit 125; '
            "trap 'rm -f \"$f\"' HUP INT TERM; "
            'if ! cat > "$f"; then rm -f "$f"; exit 125; fi; '
            f'{inner}; rc=$?; rm -f "$f"; {after}'
        )
        return command, body

    def _with_state(self, command: str) -> str:
        """``command``, then (when it failed) the container's state on stderr (``run(state_on_failure=True)``)."""
        return (
            f"{command}; rc=$?; if [ $rc -ne 0 ]; then "
            f"s=$(docker inspect -f {q(INSPECT_FORMAT)} {q(self.container)} 2>/dev/null); "
            f"printf '\\n{STATE_MARK} %s\\n' \"$s\" >&2; fi; exit $rc"
        )

    def _checked(self, cmd, res: Result, check: bool, known_state: ContainerState | None) -> Result:
        """``res``, or the RemoteError it means (docker kinds first; kind ``command`` for a failed ``check``)."""
        err = self._docker_error(res, known_state=known_state)
        if err:
            raise err
        if res.exited != 0 and check:
            shown = cmd if isinstance(cmd, str) else " ".join(q(a) for a in cmd)
            raise command_error(self.name, shown, res, where=self.where)
        return res

    def put_text(self, text: str | bytes, path_in_container: str, mode: int = 0o644, *, timeout: float = 60) -> None:
        """Write ``text`` to ``path_in_container`` (parent directories created) via stdin.

        The file is created with ``umask 077`` and then ``chmod``-ed to ``mode``, so it is never readable by
        others before it has its final mode.

        :raises RemoteError: any kind in :data:`KINDS`.
        """
        data = text.encode("utf-8") if isinstance(text, str) else text
        p = q(path_in_container)
        script = (
            f'umask 077 && mkdir -p "$(dirname {p})" && cat > {p}.dapo-tmp && '
            f"chmod {mode:o} {p}.dapo-tmp && mv -f {p}.dapo-tmp {p}"
        )
        command = self.exec_command(script, workdir="", interactive=True)
        res = self._raw(command, timeout=timeout, stdin=data)
        err = self._docker_error(res)
        if err:
            raise err
        if res.exited != 0:
            raise command_error(self.name, f"write {path_in_container}", res, where=self.where)
