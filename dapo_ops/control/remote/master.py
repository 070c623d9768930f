"""The control master process of :mod:`dapo_ops.control.remote.sshmux`: ``python -m dapo_ops.control.remote.master``.

It reads its spec line (``sshmux.spec_of`` + ``socket`` + ``persist_s``) on stdin, opens the SSH connection with a
:class:`~dapo_ops.control.remote.target.Target` (the same host-key verification and error kinds as a direct
connection), listens on the Unix socket (0600, peers of the same uid only: ``SO_PEERCRED``), prints ``ready`` and
answers one JSON request line per connection until idle for ``persist_s`` seconds, told to exit, or its SSH
connection fails. The request/answer lines are described in :mod:`dapo_ops.control.remote.sshmux`.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import socket
import struct
import sys
import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import paramiko


class Master:
    """The master process: one :class:`~dapo_ops.control.remote.target.Target` (direct connection), one request at a time."""

    def __init__(self, spec: dict):
        from dapo_ops.control.inventory.model import Host
        from dapo_ops.control.remote.target import Target

        names = {f.name for f in dataclasses.fields(Host)}
        host = Host(**{k: v for k, v in spec["host"].items() if k in names})
        self.target = Target(
            host, accept_new_host_keys=spec["accept_new_host_keys"], connect_timeout=spec["connect_timeout"]
        )
        self.persist = float(spec["persist_s"])
        self.path = spec["socket"]
        self.lock = threading.Lock()
        self.last = time.monotonic()
        self.done = threading.Event()
        self.workers: list[threading.Thread] = []
        self.unlinked = False
        self.shell: paramiko.Channel | None = None  # the persistent host shell session (Master.in_shell)

    def stop_listening(self) -> None:
        """Remove the socket name (once: a new master may own that name afterwards): from now on a caller
        starts a new master instead of queueing here."""
        if self.unlinked:
            return
        self.unlinked = True
        try:
            os.unlink(self.path)
        except OSError:
            pass

    def serve(self, listener: socket.socket) -> None:
        """Accept until idle for ``persist`` seconds or told to stop; then serve what is queued and in flight."""
        listener.settimeout(0.5)
        while not self.done.is_set():
            with self.lock:
                idle = time.monotonic() - self.last
            if idle > self.persist:
                break
            try:
                conn, _ = listener.accept()
            except socket.timeout:
                continue
            th = threading.Thread(target=self.handle, args=(conn,), daemon=True)
            th.start()
            self.workers = [w for w in self.workers if w.is_alive()] + [th]
        self.done.set()
        self.stop_listening()
        listener.settimeout(0.2)
        while True:  # connections already queued on the listener are answered, so no caller gets a reset
            try:
                conn, _ = listener.accept()
            except OSError:
                break
            self.handle(conn)
        for w in self.workers:  # requests in flight finish (each bounded by its own timeout)
            w.join()

    def handle(self, conn: socket.socket) -> None:
        with conn:
            creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            if struct.unpack("3i", creds)[1] != os.getuid():
                return
            conn.settimeout(30)
            with conn.makefile("rb") as fh:
                line = fh.readline()
            if not line:
                return
            req = json.loads(line)
            if req.get("op") == "info":  # who this master is (sshmux.close_all(under=...)): no secrets in it
                h = self.target.host
                conn.sendall(
                    json.dumps(
                        {
                            "ok": True,
                            "pid": os.getpid(),
                            "host": h.name,
                            "paths": [p for p in (h.known_hosts, h.identity_file, h.ssh_config) if p],
                        }
                    ).encode()
                    + b"\n"
                )
                return
            if req.get("op") == "exit":
                self.done.set()
                self.stop_listening()
                conn.sendall(b'{"ok": true}\n')
                return
            with self.lock:
                ans = self.execute(req)
                self.last = time.monotonic()
            try:
                conn.sendall(json.dumps(ans).encode() + b"\n")
            except OSError:
                pass

    def execute(self, req: dict) -> dict:
        from dapo_ops.control.remote.errors import RemoteError

        t = self.target
        stdin = base64.b64decode(req["stdin"]) if req.get("stdin") is not None else None
        before = t.added_host_key
        try:
            if not (t._cxn is not None and t._cxn.is_connected):
                t.connect()
                # connection(): the one connect() opened; connect_timeout: set from the host by Target.__post_init__
                t.connection().transport.channel_timeout = max(1.0, float(t.connect_timeout or 0))
            if stdin is None:
                res = self.in_shell(req["command"], req.get("timeout"))
            else:  # the command reads stdin (a secret env-file, put_text): a channel of its own
                res = t._raw(req["command"], timeout=req.get("timeout"), stdin=stdin, direct=True)
            ans = {"ok": True, "stdout": res.stdout, "stderr": res.stderr, "exited": res.exited}
        except RemoteError as e:
            r = e.result
            ans = {
                "ok": False,
                "kind": e.kind,
                "message": e.message,
                "exit_code": e.exit_code,
                "state": e.state,
                "result": {"stdout": r.stdout, "stderr": r.stderr, "exited": r.exited} if r is not None else None,
            }
            if t._cxn is None or not t._cxn.is_connected:
                self.done.set()  # the connection failed or was lost: the next call connects afresh
                self.stop_listening()
        except Exception as e:  # noqa: BLE001 - a master must answer, not die silently
            ans = {
                "ok": False,
                "kind": "unreachable",
                "message": "control master failed: %s: %s" % (type(e).__name__, e),
                "exit_code": None,
                "state": None,
                "result": None,
            }
            self.done.set()
            self.stop_listening()
        if t.added_host_key and t.added_host_key != before:
            ans["added_host_key"] = t.added_host_key
        return ans

    def in_shell(self, command: str, timeout: float | None):
        """Run ``command`` in the master's long-lived shell session on the host (started on first use).

        Before a command on an existing session, one channel open checks the link (answered in one round trip,
        or ``unreachable`` after ``connect_timeout``). A new SSH session per command costs the host an sshd session and a login shell that reads its rc files
        (``~/.bashrc``: sshd-started bash sources it, e.g. ``pyenv init`` there); here each command is one
        ``( eval <command> ) </dev/null`` in the same login shell, its end and exit status framed by a random
        token on stdout and stderr. A subshell per command: ``cd``/``export``/``exit`` do not leak. On a
        timeout the session is closed (the next command starts a new one), and the same RemoteError as a direct
        run is raised; a lost connection gives ``unreachable`` as in :meth:`Target._raw`.

        :returns: :class:`invoke.runners.Result`.
        """
        import secrets
        import select

        from invoke.runners import Result

        from dapo_ops.control.remote.commands import q
        from dapo_ops.control.remote.errors import RemoteError, short_cmd

        t = self.target
        try:
            transport = t.connection().transport  # the connection execute() opened
            if self.shell is None or self.shell.closed or self.shell.exit_status_ready():
                self.shell = transport.open_session()
                self.shell.exec_command('exec "${SHELL:-/bin/sh}"')  # the login shell, reading stdin
            else:  # the link may have died since the last command: one channel open answers within the timeout
                transport.open_session().close()
        except Exception as e:  # noqa: BLE001 - translated like any SSH failure
            self.shell = None
            cxn = t._cxn
            t.close()
            raise t._ssh_error(e, cxn) from None
        ch = self.shell
        tok = secrets.token_hex(12)
        ch.sendall(
            (
                "( eval %s ) </dev/null; printf '\\n%s %%d\\n' $?; printf '\\n%s\\n' >&2\n" % (q(command), tok, tok)
            ).encode()
        )
        out, err = b"", b""
        end_out, end_err = ("\n%s " % tok).encode(), ("\n%s\n" % tok).encode()
        deadline = None if timeout is None else time.monotonic() + float(timeout)

        def finished() -> bool:
            i = out.rfind(end_out)
            return i >= 0 and b"\n" in out[i + len(end_out) :] and err.endswith(end_err)

        while not finished():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                self.shell = None
                ch.close()
                raise RemoteError(
                    "timeout",
                    t.name,
                    f"command did not finish within {timeout:g} s: {short_cmd(command)}",
                    result=Result(
                        stdout=out.decode("utf-8", "replace"),
                        stderr=err.decode("utf-8", "replace"),
                        exited=-1,
                        command=command,
                    ),
                )
            select.select([ch], [], [], min(left, 1.0) if left is not None else 1.0)
            got = False
            while ch.recv_ready():
                out += ch.recv(1 << 20)
                got = True
            while ch.recv_stderr_ready():
                err += ch.recv_stderr(1 << 20)
                got = True
            if not got and (ch.closed or ch.eof_received) and not ch.recv_ready() and not ch.recv_stderr_ready():
                self.shell = None  # the shell itself ended (the command killed it, or the connection went)
                if t.connection().transport is None or not t.connection().transport.is_active():
                    where = t._where()
                    t.close()
                    raise RemoteError(
                        "unreachable",
                        t.name,
                        f"connection to {where} lost during `{short_cmd(command)}`; check the host and retry",
                    )
                return Result(
                    stdout=out.decode("utf-8", "replace"),
                    stderr=err.decode("utf-8", "replace"),
                    exited=-1,
                    command=command,
                )
        i = out.rindex(end_out)
        exited = int(out[i + len(end_out) :].split(b"\n", 1)[0])
        return Result(
            stdout=out[:i].decode("utf-8", "replace"),
            stderr=err[: -len(end_err)].decode("utf-8", "replace"),
            exited=exited,
            command=command,
        )


def master_main() -> int:
    """``python -m dapo_ops.control.remote.master``: read the spec line on stdin, listen, print ``ready``, serve until idle."""
    spec = json.loads(sys.stdin.readline())
    path = spec["socket"]
    master = Master(spec)
    try:
        os.unlink(path)  # a dead master's socket (the caller holds the start lock: no live one answered)
    except FileNotFoundError:
        pass
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        listener.bind(path)
    finally:
        os.umask(old)
    listener.listen(64)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    try:
        master.serve(listener)
    finally:
        master.stop_listening()
        listener.close()
        master.target.close()
    return 0


if __name__ == "__main__":
    sys.exit(master_main())
