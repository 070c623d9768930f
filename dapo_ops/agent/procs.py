"""Own processes only: find them in ``/proc``, end them with SIGTERM then SIGKILL (STDLIB ONLY, shipped).

:func:`pid_alive` / :func:`pid_cmdline` are the one liveness look at a recorded PID (a run's supervisor, a Ray
session leader: :mod:`dapo_ops.agent.runfiles`); this module imports nothing but ``os`` and ``time`` at load, as
the status probe loads it on every look.

Nothing here signals by name or by a pattern over other users' processes: callers say which PIDs are theirs
(a process group / session, an environment marker such as ``DAPO_OPS_RUN_ID=<run_id>``, a command-line
marker such as an attempt's own Ray temp dir) and :func:`terminate` re-lists them each round, so processes
that appear while the earlier ones are being stopped (Ray respawning a worker) are ended as well.

Users: the supervisor (:mod:`dapo_ops.agent.supervisor`: one attempt's processes), the launch rule's sweep
(:func:`dapo_ops.agent.occupancy.end_pids`: a finished run's left-overs) and the Ray session leader (its
session's members once ``ray start`` has ended). Facts: ``/proc/<pid>/stat`` fields after the ``)`` of the
command name are state, ppid, pgrp, session (proc(5)); a zombie (state ``Z``) holds no resources and is skipped.
"""

from __future__ import annotations

import os
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only (postponed): neither typing nor subprocess loads where the probe imports this
    import subprocess
    from typing import Callable, Iterable, List, Optional, Tuple

#: seconds between two looks at the process list while waiting for processes to exit
POLL_S = 0.1


def pid_alive(pid: Optional[int]) -> bool:
    """True when process ``pid`` exists in this PID namespace and is not a zombie (``kill(pid, 0)``, then the state
    field of ``/proc/<pid>/stat``; without /proc, existence alone decides). ``None`` or ``<= 0``: False."""
    if not pid or int(pid) <= 0:
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by someone else
    try:
        with open("/proc/%d/stat" % int(pid), "rb") as fh:
            stat = fh.read()
        state = stat[stat.rindex(b")") + 2 : stat.rindex(b")") + 3]
        return state != b"Z"
    except (OSError, ValueError):
        return True


def pid_cmdline(pid: int) -> Optional[bytes]:
    """``/proc/<pid>/cmdline`` (NUL-separated argv) or None when unreadable / no /proc."""
    try:
        with open("/proc/%d/cmdline" % int(pid), "rb") as fh:
            return fh.read()
    except OSError:
        return None


def proc_stat(pid: int) -> Optional[Tuple[int, int, int]]:
    """(ppid, pgrp, session) of ``pid`` from /proc/<pid>/stat, or None (gone, unreadable or a zombie)."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    try:
        fields = data[data.rindex(b")") + 2 :].split()
        if fields[0] == b"Z":
            return None
        return int(fields[1]), int(fields[2]), int(fields[3])
    except (ValueError, IndexError):
        return None


def cpu_seconds(pid: int) -> Optional[float]:
    """CPU time ``pid`` has used (user + system, seconds: fields 14 and 15 of /proc/<pid>/stat over
    ``SC_CLK_TCK``), or None (gone or unreadable)."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as fh:
            data = fh.read()
        fields = data[data.rindex(b")") + 2 :].split()
        return (int(fields[11]) + int(fields[12])) / float(os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


def own_processes(pgid: Optional[int], marker: Optional[bytes], cmd_marker: Optional[bytes] = None) -> List[int]:
    """PIDs that belong to one attempt: members of process group / session ``pgid`` (verl was started
    with ``start_new_session``, so pgid == sid == its pid), every process whose environment holds
    ``marker`` (``DAPO_OPS_RUN_ID=<run_id>``, inherited by Ray workers that called setsid or were
    re-parented) and every process whose command line holds ``cmd_marker`` (the attempt's own Ray temp dir:
    raylet, gcs_server, dashboard, log monitor and workers of THIS attempt's Ray session name it in their
    argv, ``--session_dir=<RAY_TMPDIR>/ray/session_...``; another run's cluster never does). The calling
    process is excluded. Zombies are skipped."""
    me = os.getpid()
    out: List[int] = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for n in names:
        if not n.isdigit():
            continue
        pid = int(n)
        if pid == me:
            continue
        st = proc_stat(pid)
        if st is None:
            continue
        if pgid and (st[1] == pgid or st[2] == pgid):
            out.append(pid)
            continue
        if cmd_marker:
            try:
                with open("/proc/%d/cmdline" % pid, "rb") as fh:
                    if cmd_marker in fh.read():
                        out.append(pid)
                        continue
            except OSError:
                pass
        if marker:
            try:
                with open("/proc/%d/environ" % pid, "rb") as fh:
                    env = fh.read()
            except OSError:
                continue
            if marker + b"\0" in env or env.endswith(marker):
                out.append(pid)
    return out


def signal_pids(pids: Iterable[int], sig: int) -> None:
    """``os.kill(pid, sig)`` for each of ``pids``; processes that are gone or not ours are skipped."""
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


def terminate(
    list_fn: Callable[[], List[int]],
    grace_s: float,
    kill_wait_s: float = 5.0,
    send: Callable[[List[int], int], None] = signal_pids,
) -> List[int]:
    """SIGTERM what ``list_fn()`` lists, wait up to ``grace_s`` seconds until it lists nothing, SIGKILL what it
    lists then, wait up to ``kill_wait_s`` seconds (SIGKILL is asynchronous: the kernel finishes the exits).

    ``list_fn`` is called again every :data:`POLL_S` seconds (a process that appears meanwhile is ended too);
    ``send(pids, sig)`` delivers a signal (default :func:`signal_pids`; the supervisor also signals the process
    group). Returns the PIDs that were sent SIGKILL (empty when SIGTERM sufficed). Never raises for a process
    that vanished or is not ours.
    """
    import signal  # here: the status probe, which loads this module, never signals

    killed: List[int] = []
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, kill_wait_s)):
        left = list_fn()
        if not left:
            break
        if sig == signal.SIGKILL:
            killed = list(left)
        send(left, sig)
        deadline = time.time() + wait_s
        while time.time() < deadline and list_fn():
            time.sleep(POLL_S)
    return killed


def stop_process_group(
    proc: Optional["subprocess.Popen[bytes]"],
    pgid: Optional[int],
    marker: Optional[bytes],
    grace_s: float,
    cmd_marker: Optional[bytes] = None,
) -> List[int]:
    """SIGTERM the attempt's own processes, wait up to ``grace_s`` s, SIGKILL what is left (up to 10 s for the
    exits), reap ``proc``.

    Returns the PIDs that needed SIGKILL. Never signals anything outside :func:`own_processes` (with the
    same ``cmd_marker``: the attempt's Ray temp dir, so its Ray daemons and actors go too) and the process
    group ``pgid`` itself.
    """

    def listed() -> List[int]:
        pids = own_processes(pgid, marker, cmd_marker)
        if proc is not None and proc.poll() is None and proc.pid not in pids:  # (poll: reap verl once it exits)
            pids.append(proc.pid)
        return pids

    def send(pids: List[int], sig: int) -> None:
        if pgid:
            try:
                os.killpg(pgid, sig)
            except OSError:
                pass
        signal_pids(pids, sig)

    killed = terminate(listed, grace_s, kill_wait_s=10.0, send=send)
    if proc is not None:
        import subprocess  # here: the status probe, which loads this module, never waits for a child

        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover - unkillable (D state)
            pass
    return killed
