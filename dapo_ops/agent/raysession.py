"""A multi-host run's Ray sessions on the host: the session leader, its teardown, the node's interface and the
cluster view (STDLIB ONLY; ``ray`` is imported by the ``wait`` op alone, inside a function, from the Python that
runs verl: the run needs Ray there anyway).

One op of the shipped bundle (``PYTHONPATH=<bundle> python3 -m dapo_ops.agent.raysession <sub> ...``, built by
:func:`dapo_ops.control.remote.bundle.op_line`)::

    start <request JSON>           start one node's ``ray start --block`` detached under ``lead`` (:func:`start_node`)
    lead  <marker> <ray argv...>   leader of one ``ray start --block`` session (:func:`run_session`); exit = ray's
    stop  <pid_file> <grace_s>     end that session (:func:`stop_session`); prints how many processes it had
    iface <address>                the interface that carries ``address`` (:func:`iface_for`); prints it or ""
    wait  <timeout_s> <want>       wait for ``want`` alive Ray nodes, no longer once every node is alive or dead
                                   (:func:`cluster_wait`, ``RAY_ADDRESS`` from the env); prints
                                   ``{"nodes": [{"address", "resources"}], "gone": [address]}``; exit 0, or 3 when
                                   fewer

Every Ray process of a run carries ``DAPO_OPS_RAY_RUN=<run_id>`` (:data:`dapo_ops.core.topology.RAY_RUN_ENV`):
Ray's DashboardAgent / RuntimeEnvAgent may leave the leader's session, never their environment. Facts about the
``/proc`` fields: proc(5) (``stat`` field 6 = session id, field 3 = state).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

from dapo_ops.core.topology import HEAD_GONE_REFUSALS, HEAD_PROBE_S, RAY_PORT, RAY_RUN_ENV, RETRY_CHECK_S

#: exit status of ``wait`` when fewer nodes than wanted are alive at the deadline
FEWER_NODES_RC = 3


def session_members(sid: int, marker: bytes | None = None) -> list[int]:
    """Live PIDs (zombies skipped) whose session id is ``sid`` (``/proc/<pid>/stat`` field 6), plus, when
    ``marker`` is given (``b"DAPO_OPS_RAY_RUN=<run_id>"``), every process whose environment holds it: Ray's
    agents may leave the session, never the environment. The calling process is never listed."""
    out: list[int] = []
    me = os.getpid()
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == me:
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if fields[0] == "Z":
                continue
            if int(fields[3]) == sid:
                out.append(int(d))
            elif marker:
                with open(f"/proc/{d}/environ", "rb") as f:
                    if marker in f.read().split(b"\0"):
                        out.append(int(d))
        except (OSError, IndexError, ValueError):
            pass
    return out


def head_of(argv: list[str]) -> tuple[str, int] | None:
    """``(host, port)`` of the head's GCS a worker's ``ray start`` argv joins (its ``--address=<host>:<port>``,
    :func:`dapo_ops.core.topology.ray_worker_argv`); None for a head's argv."""
    for a in argv:
        if a.startswith("--address="):
            host, _, port = a.split("=", 1)[1].rpartition(":")
            try:
                return host, int(port)
            except ValueError:
                return None
    return None


def head_refuses(host: str, port: int, timeout_s: float = 2.0) -> bool:
    """True when a TCP connect to the head's GCS port is refused (ECONNREFUSED: the host answers, nothing listens:
    the GCS is gone); False when it connects, times out or the host is unreachable (a network blip)."""
    import errno
    import socket

    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
        return False
    except OSError as e:
        return e.errno == errno.ECONNREFUSED


def watch_head(child: "subprocess.Popen[bytes]", head: tuple[str, int], every_s: float = HEAD_PROBE_S) -> None:
    """Until ``child`` (a worker's ``ray start``) ends: probe ``head`` every ``every_s`` seconds; after
    :data:`~dapo_ops.core.topology.HEAD_GONE_REFUSALS` refusals in a row, SIGTERM ``child`` (the run's head is
    gone; Ray's own 60 s GCS reconnect timeout would keep this node's raylet and workers a minute longer), SIGKILL
    when it has not ended a few seconds later."""
    refused = 0
    while child.poll() is None:
        refused = refused + 1 if head_refuses(*head) else 0
        if refused >= HEAD_GONE_REFUSALS:
            # SIGTERM, then SIGKILL after ``every_s`` x HEAD_GONE_REFUSALS seconds: a ``ray start --block`` whose
            # GCS is gone can sit in its graceful shutdown while Ray's agents live on; the leader ends those next
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    child.send_signal(sig)
                except OSError:
                    return
                end = time.time() + max(every_s * HEAD_GONE_REFUSALS, 3.0)
                while child.poll() is None and time.time() < end:
                    time.sleep(0.1)
                if child.poll() is not None:
                    return
            return
        time.sleep(every_s)


def run_session(argv: list[str], marker: bytes | None, grace_s: float = 5.0) -> int:
    """Leader of a ``ray start --block`` session (what ``control/launch/raycluster.py`` starts under ``setsid``): run
    ``argv``, forward SIGTERM/SIGINT/SIGHUP to it, on a worker node end it once the head's GCS is gone
    (:func:`watch_head`, in a thread), and once it has ended — stopped, or by itself — end every process left in
    this session or carrying ``marker`` (Ray's DashboardAgent / RuntimeEnvAgent outlive the raylet for minutes
    otherwise): SIGTERM, up to ``grace_s`` seconds, SIGKILL. Returns ``argv``'s exit code."""
    child = subprocess.Popen(argv)

    def forward(signum: int, _frame: object) -> None:
        try:
            child.send_signal(signum)
        except OSError:
            pass

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)
    head = head_of(argv)
    if head is not None:
        import threading

        threading.Thread(target=watch_head, args=(child, head), daemon=True).start()
    rc = child.wait()
    sid = os.getsid(0)
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        left = session_members(sid, marker)
        for pid in left:
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        deadline = time.time() + wait_s
        while left and session_members(sid, marker) and time.time() < deadline:
            time.sleep(0.1)
    return rc


def stop_session(pid_file: str, grace_s: float = 15.0) -> int:
    """End the ``ray start --block`` session whose leader pid is in ``pid_file`` (written by
    ``control/launch/raycluster.py``): SIGTERM the leader (``ray start`` stops every Ray process it started),
    wait up to ``grace_s`` seconds, SIGKILL any process still in that session.

    Only that session is touched (never ``ray stop``, never another run's Ray), plus the processes that carry
    this run's ``DAPO_OPS_RAY_RUN=<run_id>`` (the run id is the pid file's ``<runs_dir>/.cluster/<run_id>/ray/``
    directory), so Ray agents that left the session go too. Returns how many processes it had (0 when the pid
    file is missing or nothing is left). Waits until they are gone (at most ``grace_s`` + 5 seconds).
    """
    run_id = os.path.basename(os.path.dirname(os.path.dirname(os.path.abspath(pid_file))))
    marker = ("%s=%s" % (RAY_RUN_ENV, run_id)).encode() if run_id and run_id[:1].isdigit() else None
    try:
        with open(pid_file) as f:
            sid = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        sid = -1
    found = session_members(sid, marker)
    if not found:
        return 0
    if sid > 1:  # never kill(-1) / kill(0, ...): only a real session leader
        try:
            os.kill(sid, signal.SIGTERM)
        except OSError:
            pass
    for pid in found:  # processes outside the session get no signal from its leader
        try:
            if os.getsid(pid) != sid:
                os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
    deadline = time.time() + grace_s
    while session_members(sid, marker) and time.time() < deadline:
        time.sleep(0.2)
    for pid in session_members(sid, marker):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    deadline = time.time() + 5.0  # SIGKILL is asynchronous: let the kernel finish the exits
    while session_members(sid, marker) and time.time() < deadline:
        time.sleep(0.05)
    return len(found)


def ray_cli(python: str) -> list[str]:
    """The Ray CLI: ``ray`` where it is on PATH, else ``<python> -m ray.scripts.scripts`` (an image whose ray has no
    console script on PATH)."""
    import shutil

    found = shutil.which("ray")
    return [found] if found else [python, "-m", "ray.scripts.scripts"]


def start_node(req: dict[str, Any], python: str) -> int:
    """Start one node's ``ray start --block`` detached in its own session (``setsid``) under the ``lead`` op of this
    bundle, and return its session id (the leader's pid) once it is spawned (what ``control/launch/raycluster.py``
    asks for; its one remote call per node).

    ``req``: ``{"run_dir": the run's cluster dir, "name": the inventory host, "info": what the node is (head,
    head_address, port, role), "launcher": argv it starts under (the CANN launcher on NPU, may be []), "args": the
    ``ray start`` arguments after ``ray``}``. Writes ``<run_dir>/ray/<name>.json`` (``{"run_id", "name", **info}``),
    starts ``[*launcher, python, -m, dapo_ops.agent.raysession, lead, DAPO_OPS_RAY_RUN=<run_id>, *ray, *args]``
    (``ray``: :func:`ray_cli`; this process's environment, the bundle first on PYTHONPATH, ``DAPO_OPS_RAY_RUN`` set)
    with stdin from ``/dev/null`` and stdout + stderr into ``<run_dir>/ray/<name>.log``, and writes its pid to
    ``<run_dir>/ray/<name>.pid`` (the launcher ``exec``s: the pid is the leader's and the session's id; the paths
    are :mod:`dapo_ops.core.raynodes`'). It outlives this op, the ``docker exec`` and the SSH session.

    :raises OSError: the run dir cannot be written, the launcher or python cannot be started."""
    from dapo_ops.core import raynodes

    run_dir, name = str(req["run_dir"]), str(req["name"])
    run_id = os.path.basename(run_dir.rstrip("/"))
    os.makedirs(raynodes.ray_dir(run_dir), exist_ok=True)
    with open(raynodes.node_file(run_dir, name, raynodes.INFO), "w") as fh:
        fh.write(json.dumps({"run_id": run_id, "name": name, **(req.get("info") or {})}) + "\n")
    marker = "%s=%s" % (RAY_RUN_ENV, run_id)
    argv = [*(req.get("launcher") or []), python, "-m", "dapo_ops.agent.raysession", "lead", marker]
    argv += ray_cli(python) + [str(a) for a in req.get("args") or []]
    env = dict(os.environ, **{RAY_RUN_ENV: run_id})
    with open(raynodes.node_file(run_dir, name, raynodes.LOG), "wb") as log:
        child = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    with open(raynodes.node_file(run_dir, name, raynodes.PID), "w") as fh:
        fh.write("%d\n" % child.pid)
    return child.pid


def iface_for(address: str) -> str:
    """Name of the network interface whose IPv4 address is ``address`` (``SIOCGIFADDR`` = 0x8915, linux/sockios.h),
    ``""`` when none carries it."""
    import fcntl
    import socket
    import struct

    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for _, name in socket.if_nameindex():
            try:
                raw = fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", name[:15].encode()))
            except OSError:
                continue
            if socket.inet_ntoa(raw[20:24]) == address:
                return name
    finally:
        s.close()
    return ""


def cluster_wait(timeout_s: float, want: int) -> tuple[dict[str, Any], int]:
    """Join the Ray cluster at ``RAY_ADDRESS`` (the env) and wait up to ``timeout_s`` seconds for ``want`` alive
    nodes. Returns ``({"nodes": [{"address", "resources"}], "gone": [address, ...]}, rc)``, rc 0 or
    :data:`FEWER_NODES_RC`.

    The wait ends early once it is decided: every one of the ``want`` nodes is alive or listed dead by the GCS
    (``gone``: addresses whose node Ray marked dead and that no alive node has). Ray never revives a dead node (a
    raylet started again registers as a new node), so waiting longer for it only delays the answer.

    ``ray.init`` can block on a dead GCS: ``SIGALRM`` ends this process ``timeout_s`` + 20 s after the start, so no
    probe outlives the caller's command timeout. Imports ``ray`` (the Python that runs verl has it)."""
    signal.alarm(int(float(timeout_s)) + 20)
    import logging

    import ray

    deadline = time.time() + float(timeout_s)
    ray.init(address="auto", logging_level=logging.ERROR, log_to_driver=False)
    while True:
        listed = ray.nodes()
        nodes = [{"address": n["NodeManagerAddress"], "resources": n["Resources"]} for n in listed if n["Alive"]]
        alive = {n["address"] for n in nodes}
        gone = sorted({n["NodeManagerAddress"] for n in listed if not n["Alive"]} - alive)
        if len(nodes) + len(gone) >= want or time.time() > deadline:
            break
        time.sleep(0.5)
    return {"nodes": nodes, "gone": gone}, (0 if len(nodes) >= want else FEWER_NODES_RC)


def cluster_view(python: str, ray_spec: dict[str, Any], timeout_s: float = RETRY_CHECK_S) -> dict[str, Any] | None:
    """The supervisor's question to the Ray head: which nodes are alive. Runs the ``wait`` op with ``python``
    (which must have ``ray``) from this same bundle (this process's ``PYTHONPATH`` carries it), waiting up to
    ``timeout_s`` seconds for every node of ``ray_spec`` (the run spec's ``ray``), less once each node is alive or
    known dead (:func:`cluster_wait`). Returns ``{"nodes": [{"address", "resources"}], "gone": [address, ...]}`` or
    None when the head does not answer (its GCS is gone)."""
    want = len(ray_spec.get("nodes") or [])
    bundle = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    pp = [bundle] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != bundle]
    env = dict(
        os.environ, RAY_ADDRESS=f"{ray_spec['head']}:{ray_spec.get('port', RAY_PORT)}", PYTHONPATH=os.pathsep.join(pp)
    )
    try:
        res = subprocess.run(
            [python, "-m", "dapo_ops.agent.raysession", "wait", f"{timeout_s:.1f}", str(want)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            universal_newlines=True,
            timeout=timeout_s + 60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    try:
        view: dict[str, Any] = json.loads((res.stdout or "").strip().splitlines()[-1])
        return view
    except (ValueError, IndexError):
        return None


USAGE = (
    "usage: python3 -m dapo_ops.agent.raysession start <request json> | lead <marker> <ray argv...> | "
    "stop <pid_file> <grace_s> | iface <address> | wait <timeout_s> <want>"
)


def main(argv: list[str] | None = None) -> int:
    """The op's command line (module docstring). Exit 2 with :data:`USAGE` on a malformed call."""
    argv = sys.argv[1:] if argv is None else argv
    sub, args = (argv[0], argv[1:]) if argv else ("", [])
    if sub == "start" and len(args) == 1:
        try:
            print(start_node(json.loads(args[0]), sys.executable))
        except (OSError, ValueError, KeyError) as e:
            sys.stderr.write("could not start the Ray session: %s\n" % e)
            return 1
        return 0
    if sub == "lead" and len(args) >= 2:
        return run_session(args[1:], args[0].encode() or None)
    if sub == "stop" and len(args) == 2:
        print(stop_session(args[0], float(args[1])))
        return 0
    if sub == "iface" and len(args) == 1:
        print(iface_for(args[0]))
        return 0
    if sub == "wait" and len(args) == 2:
        view, rc = cluster_wait(float(args[0]), int(args[1]))
        print(json.dumps(view))
        return rc
    sys.stderr.write(USAGE + "\n")
    return 2


if __name__ == "__main__":
    sys.exit(main())
