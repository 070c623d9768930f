"""SSH connection reuse across calls: a per-user control master per host, as OpenSSH's ``ControlMaster auto`` +
``ControlPersist`` (``ssh_config(5)``), built on :class:`dapo_ops.control.remote.Target` itself.

The first reusing call to a host starts a detached master process (``python -m dapo_ops.control.sshmux``) that opens the
SSH connection with the very same :class:`~dapo_ops.control.remote.Target` code (known_hosts verification with
``RejectPolicy`` or accept-new, every :class:`~dapo_ops.control.remote.RemoteError` kind and message), listens on a Unix
socket and runs each request as one new channel on that connection. Later calls (this process or the next CLI
run) send their host command line to the socket: no TCP connect, no key exchange, no authentication, and the
caller never imports paramiko or fabric. A master ends after :data:`DEFAULT_PERSIST_S` seconds without a request
(``DAPO_OPS_CONTROL_PERSIST``; ``0`` turns reuse off), at once when its SSH connection fails or is lost (the next
call connects afresh and reports that failure as a direct connect would), and on :func:`close_all`.

Security: a master starts with an allow-listed environment (:data:`MASTER_ENV`: no API keys or tokens of the
caller live on in it); the socket lives in a directory owned by this user with mode 0700 (``$DAPO_OPS_CONTROL_DIR``, else
``$XDG_RUNTIME_DIR/dapo-ops``, else ``/tmp/dapo-ops-<uid>``; anything else disables reuse), the socket is 0600 and
the master answers only peers of the same uid (``SO_PEERCRED``). Secrets a request feeds to stdin travel over
that socket, never on a command line. Like an OpenSSH master, a live master keeps serving after the host's sshd
stops listening (existing connections survive it) and the host key is verified when the master connects.

A dead link on a reused connection: opening the channel times out after the host's ``connect_timeout`` and is
reported as the same ``unreachable`` "timed out" error as a failed connect (``Transport.channel_timeout``,
``paramiko/transport.py:open_channel``).

Requests and answers are one JSON line each:
``{"op": "run", "command": str, "timeout": s | null, "stdin": base64 | null}`` ->
``{"ok": true, "stdout", "stderr", "exited", "added_host_key"}`` or
``{"ok": false, "kind", "message", "exit_code", "state", "result": {"stdout", "stderr", "exited"} | null}``;
``{"op": "exit"}`` ends the master.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import os
import socket
import stat
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

#: bumped when requests/answers change, so a master of an older version is never asked (another socket name)
PROTOCOL = 1
PERSIST_ENV = "DAPO_OPS_CONTROL_PERSIST"
DIR_ENV = "DAPO_OPS_CONTROL_DIR"
#: seconds a master stays up after its last request (OpenSSH ``ControlPersist``); above ``watch``'s 10 s interval.
DEFAULT_PERSIST_S = 60.0
#: seconds a caller waits for a new master to listen.
START_TIMEOUT_S = 20.0
#: the Host fields that make a connection (the socket name hashes them; a change means another master).
CONNECTION_FIELDS = ("address", "port", "user", "identity_file", "known_hosts", "connect_timeout", "ssh_config",
                     "proxy_jump")


def persist_s() -> float:
    """``$DAPO_OPS_CONTROL_PERSIST`` seconds (default :data:`DEFAULT_PERSIST_S`); 0 or a bad value = no reuse."""
    raw = os.environ.get(PERSIST_ENV, "")
    if raw == "":
        return DEFAULT_PERSIST_S
    try:
        return max(0.0, float(raw))
    except ValueError:
        return 0.0


def control_dir() -> Path | None:
    """The directory of the control sockets, created 0700; None when it is not ours alone (then no reuse)."""
    base = os.environ.get(DIR_ENV)
    if not base:
        rt = os.environ.get("XDG_RUNTIME_DIR")
        base = os.path.join(rt, "dapo-ops") if rt else "/tmp/dapo-ops-%d" % os.getuid()
    p = Path(base)
    try:
        p.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.lstat(p)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or stat.S_IMODE(st.st_mode) & 0o077:
        return None
    return p


def spec_of(target) -> dict:
    """What a master needs to connect like ``target``: its Host as a dict, accept-new, connect timeout."""
    return {"host": dataclasses.asdict(target.host), "accept_new_host_keys": bool(target.accept_new_host_keys),
            "connect_timeout": float(target.connect_timeout)}


def socket_path(target, directory: Path) -> Path:
    """``<dir>/<sha256 of the connection fields>.sock`` (hosts with equal connection settings share a master)."""
    spec = spec_of(target)
    ident = {k: spec["host"].get(k) for k in CONNECTION_FIELDS}
    ident.update(accept_new_host_keys=spec["accept_new_host_keys"], connect_timeout=spec["connect_timeout"],
                 protocol=PROTOCOL)
    digest = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:24]
    return directory / ("%s.sock" % digest)


# ------------------------------------------------------------------------------------------ caller side

def _connect(path: Path, timeout: float) -> socket.socket | None:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(str(path))
        return s
    except OSError:
        s.close()
        return None


def _start_master(target, path: Path) -> socket.socket | None:
    """Start a master for ``target`` at ``path`` (one starter at a time: ``flock`` on ``<path>.lock``)."""
    import fcntl

    with open(str(path) + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        s = _connect(path, 5.0)  # another caller may have started it while we waited for the lock
        if s is not None:
            return s
        spec = dict(spec_of(target), socket=str(path), persist_s=persist_s())
        proc = subprocess.Popen([sys.executable, "-m", "dapo_ops.control.sshmux"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True,
                                cwd="/", env=_master_env())
        try:
            proc.stdin.write(json.dumps(spec).encode() + b"\n")
            proc.stdin.close()
            ready = _readline_within(proc.stdout, START_TIMEOUT_S)
        finally:
            proc.stdout.close()
        if ready.strip() != b"ready":
            proc.kill()
            return None
        return _connect(path, 5.0)


#: the caller's environment variables a master keeps (a long-lived process holds no API keys or tokens):
#: what paramiko/ssh_config need (agent socket, home, user) and where this package and its sockets are.
MASTER_ENV = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "SSH_AUTH_SOCK", "XDG_RUNTIME_DIR", "TMPDIR",
              "VIRTUAL_ENV", "PYTHONPATH", PERSIST_ENV, DIR_ENV)


def _master_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k in MASTER_ENV}
    here = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = here + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _readline_within(fh, timeout: float) -> bytes:
    out: list[bytes] = []
    th = threading.Thread(target=lambda: out.append(fh.readline()), daemon=True)
    th.start()
    th.join(timeout)
    return out[0] if out else b""


def run(target, command: str, *, timeout: float | None, stdin: bytes | None = None):
    """Run the host command line ``command`` on ``target``'s host through its master (started when missing).

    :returns: :class:`invoke.runners.Result`, or None when reuse is not possible here (no private control dir,
        the master did not start): the caller then connects directly.
    :raises RemoteError: exactly what :meth:`Target._raw` raises for the same command on a direct connection.
    """
    from invoke.runners import Result

    from dapo_ops.control.remote import RemoteError

    directory = control_dir()
    if directory is None:
        return None
    path = socket_path(target, directory)
    s = _connect(path, 5.0) or _start_master(target, path)
    if s is None:
        return None
    req = {"op": "run", "command": command, "timeout": timeout,
           "stdin": base64.b64encode(stdin).decode() if stdin is not None else None}
    # the master enforces ``timeout``; this bound only covers a master that hangs or dies
    s.settimeout((timeout or 3600.0) + 3 * float(target.connect_timeout) + 30)
    try:
        with s, s.makefile("rb") as fh:
            s.sendall(json.dumps(req).encode() + b"\n")
            line = fh.readline()
    except OSError:
        line = b""
    if not line:
        raise RemoteError("unreachable", target.name, "connection to %s lost during `%s` (its control master "
                                                      "ended); check the host and retry"
                          % (target.host.ssh_target, " ".join(command.split())[:80]))
    ans = json.loads(line)
    if ans.get("added_host_key"):
        target.added_host_key = ans["added_host_key"]
    if ans["ok"]:
        return Result(stdout=ans["stdout"], stderr=ans["stderr"], exited=ans["exited"], command=command,
                      encoding="utf-8", hide=("stdout", "stderr"))
    res = ans.get("result")
    result = Result(stdout=res["stdout"], stderr=res["stderr"], exited=res["exited"], command=command,
                    encoding="utf-8", hide=("stdout", "stderr")) if res else None
    raise RemoteError(ans["kind"], target.name, ans["message"], exit_code=ans.get("exit_code"),
                      state=ans.get("state"), result=result)


def close_all() -> int:
    """Ask every master of this user to exit now (``ssh -O exit`` for all). Returns how many answered."""
    directory = control_dir()
    n = 0
    if directory is None:
        return 0
    for p in directory.glob("*.sock"):
        s = _connect(p, 2.0)
        if s is None:
            continue
        with s:
            try:
                s.sendall(b'{"op": "exit"}\n')
                s.recv(16)
                n += 1
            except OSError:
                pass
    return n


# ------------------------------------------------------------------------------------------ master side

class Master:
    """The master process: one :class:`~dapo_ops.control.remote.Target` (direct connection), one request at a time."""

    def __init__(self, spec: dict):
        from dapo_ops.control.inventory import Host
        from dapo_ops.control.remote import Target

        names = {f.name for f in dataclasses.fields(Host)}
        host = Host(**{k: v for k, v in spec["host"].items() if k in names})
        self.target = Target(host, accept_new_host_keys=spec["accept_new_host_keys"],
                             connect_timeout=spec["connect_timeout"])
        self.persist = float(spec["persist_s"])
        self.path = spec["socket"]
        self.lock = threading.Lock()
        self.last = time.monotonic()
        self.done = threading.Event()
        self.workers: list[threading.Thread] = []
        self.unlinked = False
        self.shell = None  # the persistent host shell session (Master.in_shell)

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
        from dapo_ops.control.remote import RemoteError

        t = self.target
        stdin = base64.b64decode(req["stdin"]) if req.get("stdin") is not None else None
        before = t.added_host_key
        try:
            if not (t._cxn is not None and t._cxn.is_connected):
                t.connect()
                t._cxn.transport.channel_timeout = max(1.0, float(t.connect_timeout))
            if stdin is None:
                res = self.in_shell(req["command"], req.get("timeout"))
            else:  # the command reads stdin (a secret env-file, put_text): a channel of its own
                res = t._raw(req["command"], timeout=req.get("timeout"), stdin=stdin, direct=True)
            ans = {"ok": True, "stdout": res.stdout, "stderr": res.stderr, "exited": res.exited}
        except RemoteError as e:
            r = e.result
            ans = {"ok": False, "kind": e.kind, "message": e.message, "exit_code": e.exit_code, "state": e.state,
                   "result": {"stdout": r.stdout, "stderr": r.stderr, "exited": r.exited} if r is not None else None}
            if t._cxn is None or not t._cxn.is_connected:
                self.done.set()  # the connection failed or was lost: the next call connects afresh
                self.stop_listening()
        except Exception as e:  # noqa: BLE001 - a master must answer, not die silently
            ans = {"ok": False, "kind": "unreachable", "message": "control master failed: %s: %s"
                   % (type(e).__name__, e), "exit_code": None, "state": None, "result": None}
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

        from dapo_ops.control.remote import RemoteError, _short_cmd, q

        t = self.target
        try:
            if self.shell is None or self.shell.closed or self.shell.exit_status_ready():
                self.shell = t._cxn.transport.open_session()
                self.shell.exec_command('exec "${SHELL:-/bin/sh}"')  # the login shell, reading stdin
            else:  # the link may have died since the last command: one channel open answers within the timeout
                t._cxn.transport.open_session().close()
        except Exception as e:  # noqa: BLE001 - translated like any SSH failure
            self.shell = None
            cxn = t._cxn
            t.close()
            raise t._ssh_error(e, cxn) from None
        ch = self.shell
        tok = secrets.token_hex(12)
        ch.sendall(("( eval %s ) </dev/null; printf '\\n%s %%d\\n' $?; printf '\\n%s\\n' >&2\n"
                    % (q(command), tok, tok)).encode())
        out, err = b"", b""
        end_out, end_err = ("\n%s " % tok).encode(), ("\n%s\n" % tok).encode()
        deadline = None if timeout is None else time.monotonic() + float(timeout)
        def finished() -> bool:
            i = out.rfind(end_out)
            return i >= 0 and b"\n" in out[i + len(end_out):] and err.endswith(end_err)

        while not finished():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                self.shell = None
                ch.close()
                raise RemoteError("timeout", t.name, f"command did not finish within {timeout:g} s: "
                                                     f"{_short_cmd(command)}",
                                  result=Result(stdout=out.decode("utf-8", "replace"),
                                                stderr=err.decode("utf-8", "replace"), exited=-1, command=command))
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
                if t._cxn.transport is None or not t._cxn.transport.is_active():
                    where = t._where()
                    t.close()
                    raise RemoteError("unreachable", t.name, f"connection to {where} lost during "
                                                             f"`{_short_cmd(command)}`; check the host and retry")
                return Result(stdout=out.decode("utf-8", "replace"), stderr=err.decode("utf-8", "replace"),
                              exited=-1, command=command)
        i = out.rindex(end_out)
        exited = int(out[i + len(end_out):].split(b"\n", 1)[0])
        return Result(stdout=out[:i].decode("utf-8", "replace"), stderr=err[:-len(end_err)].decode("utf-8", "replace"),
                      exited=exited, command=command)


def master_main() -> int:
    """``python -m dapo_ops.control.sshmux``: read the spec line on stdin, listen, print ``ready``, serve until idle."""
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
