"""SSH connection reuse across calls: a per-user control master per host, as OpenSSH's ``ControlMaster auto`` +
``ControlPersist`` (``ssh_config(5)``), built on :class:`dapo_ops.control.remote.target.Target` itself (this module: the caller side; the master process is
:mod:`dapo_ops.control.remote.master`).

The first reusing call to a host starts a detached master process (``python -m dapo_ops.control.remote.master``) that opens the
SSH connection with the very same :class:`~dapo_ops.control.remote.target.Target` code (known_hosts verification with
``RejectPolicy`` or accept-new, every :class:`~dapo_ops.control.remote.errors.RemoteError` kind and message), listens on a Unix
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
``{"op": "info"}`` -> ``{"ok": true, "pid", "host", "paths": [known_hosts, identity_file, ssh_config as given]}``;
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
import subprocess
import sys
import threading
from pathlib import Path

#: bumped when requests/answers change, so a master of an older version is never asked (another socket name)
PROTOCOL = 2
PERSIST_ENV = "DAPO_OPS_CONTROL_PERSIST"
DIR_ENV = "DAPO_OPS_CONTROL_DIR"
#: seconds a master stays up after its last request (OpenSSH ``ControlPersist``); above ``watch``'s 10 s interval.
DEFAULT_PERSIST_S = 60.0
#: seconds a caller waits for a new master to listen.
START_TIMEOUT_S = 20.0
#: the Host fields that make a connection (the socket name hashes them; a change means another master).
CONNECTION_FIELDS = (
    "address",
    "port",
    "user",
    "identity_file",
    "known_hosts",
    "connect_timeout",
    "ssh_config",
    "proxy_jump",
)


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
    return {
        "host": dataclasses.asdict(target.host),
        "accept_new_host_keys": bool(target.accept_new_host_keys),
        "connect_timeout": float(target.connect_timeout),
    }


def socket_path(target, directory: Path) -> Path:
    """``<dir>/<sha256 of the connection fields>.sock`` (hosts with equal connection settings share a master)."""
    spec = spec_of(target)
    ident = {k: spec["host"].get(k) for k in CONNECTION_FIELDS}
    ident.update(
        accept_new_host_keys=spec["accept_new_host_keys"], connect_timeout=spec["connect_timeout"], protocol=PROTOCOL
    )
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
        proc = subprocess.Popen(
            [sys.executable, "-m", "dapo_ops.control.remote.master"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            cwd="/",
            env=_master_env(),
        )
        assert proc.stdin is not None and proc.stdout is not None  # both are PIPEs
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
MASTER_ENV = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_ALL",
    "SSH_AUTH_SOCK",
    "XDG_RUNTIME_DIR",
    "TMPDIR",
    "VIRTUAL_ENV",
    "PYTHONPATH",
    PERSIST_ENV,
    DIR_ENV,
)


def _master_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k in MASTER_ENV}
    here = str(Path(__file__).resolve().parents[3])  # the directory holding dapo_ops/ (the master runs with cwd /)
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

    from dapo_ops.control.remote.errors import RemoteError

    directory = control_dir()
    if directory is None:
        return None
    path = socket_path(target, directory)
    s = _connect(path, 5.0) or _start_master(target, path)
    if s is None:
        return None
    req = {
        "op": "run",
        "command": command,
        "timeout": timeout,
        "stdin": base64.b64encode(stdin).decode() if stdin is not None else None,
    }
    # the master enforces ``timeout``; this bound only covers a master that hangs or dies
    s.settimeout((timeout or 3600.0) + 3 * float(target.connect_timeout) + 30)
    try:
        with s, s.makefile("rb") as fh:
            s.sendall(json.dumps(req).encode() + b"\n")
            line = fh.readline()
    except OSError:
        line = b""
    if not line:
        raise RemoteError(
            "unreachable",
            target.name,
            "connection to %s lost during `%s` (its control master "
            "ended); check the host and retry" % (target.host.ssh_target, " ".join(command.split())[:80]),
        )
    ans = json.loads(line)
    if ans.get("added_host_key"):
        target.added_host_key = ans["added_host_key"]
    if ans["ok"]:
        return Result(
            stdout=ans["stdout"],
            stderr=ans["stderr"],
            exited=ans["exited"],
            command=command,
            encoding="utf-8",
            hide=("stdout", "stderr"),
        )
    res = ans.get("result")
    result = (
        Result(
            stdout=res["stdout"],
            stderr=res["stderr"],
            exited=res["exited"],
            command=command,
            encoding="utf-8",
            hide=("stdout", "stderr"),
        )
        if res
        else None
    )
    raise RemoteError(
        ans["kind"], target.name, ans["message"], exit_code=ans.get("exit_code"), state=ans.get("state"), result=result
    )


def _ask(path: Path, req: dict) -> dict | None:
    """Send one request line to the master at ``path``; its answer, or None when nobody answers."""
    s = _connect(path, 2.0)
    if s is None:
        return None
    try:
        with s, s.makefile("rb") as fh:
            s.sendall(json.dumps(req).encode() + b"\n")
            line = fh.readline()
        return json.loads(line) if line else None
    except (OSError, ValueError):
        return None


def _under(path: str, directory: str) -> bool:
    p, d = os.path.realpath(os.path.expanduser(path)), os.path.realpath(os.path.expanduser(directory))
    return p == d or p.startswith(d.rstrip("/") + "/")


def close_all(under: str | os.PathLike | None = None) -> int:
    """Ask every master of this user to exit now (``ssh -O exit`` for all). With ``under`` (a directory): only
    the masters whose host's ``known_hosts``, ``identity_file`` or ``ssh_config`` lies under it (a sandbox
    bench's state dir: ``sandbox/bench.sh down`` ends the masters of the hosts it removes, so none of them
    answers for the next bench of that id with the old connection). Returns how many exited."""
    directory = control_dir()
    n = 0
    if directory is None:
        return 0
    for p in directory.glob("*.sock"):
        if under is not None:
            info = _ask(p, {"op": "info"})
            if not info or not any(_under(x, str(under)) for x in info.get("paths") or []):
                continue
        if (_ask(p, {"op": "exit"}) or {}).get("ok"):
            n += 1
    return n


def main(argv: list[str] | None = None) -> int:
    """``python -m dapo_ops.control.remote.sshmux close [--under DIR]``: :func:`close_all`; prints how many."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m dapo_ops.control.remote.sshmux")
    ap.add_argument("op", choices=["close"])
    ap.add_argument("--under", default=None, help="only masters of hosts whose key files lie under this directory")
    a = ap.parse_args(argv)
    print(f"control masters ended: {close_all(a.under)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
