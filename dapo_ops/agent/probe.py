"""The in-container probe behind ``status``, ``stop``, ``watch`` and ``logs --errors`` (STDLIB ONLY).

One op of the shipped bundle per host and call: ``PYTHONPATH=<bundle> python3 -S -m dapo_ops.agent.probe
'<request json>'`` (:func:`dapo_ops.control.remote_bundle.run_op`). It reads ``run.json`` (via
:mod:`dapo_ops.core.runstate`), at most ``tail_bytes`` from the end of the log (``seek`` + ``read``: the cost does
not grow with the log's size), checks ``/proc/<pid>`` for the recorded supervisor and verl process group, and
prints one JSON object on stdout.

Requests (``{"op": ..., ...}``), each answered by the function of the same name:

- ``status``  ``{"runs_dir", "run_id"?, "tail_bytes"?, "host"?}`` -> :func:`probe_status`
- ``list``    ``{"runs_dir"}`` -> :func:`probe_list` (``status --all``)
- ``stop``    ``{"runs_dir", "run_id"?, "grace_s"?, "kill_grace_s"?, "host"?}`` -> :func:`probe_stop`
- ``errors``  ``{"runs_dir", "run_id"?, "tail_bytes"?, "attempt"?}`` -> :func:`probe_logs_tails`
- ``resolve`` ``{"runs_dir", "run_id"?, "attempt"?, "host"?}`` -> run dir / log paths for ``logs``

The current run of a container is the one named by ``<runs_dir>/.lock`` (live or stale: the lock is rewritten
by every launch), else the newest run directory (run ids sort by start time, runstate.new_run_id). ``host`` (the
inventory name) lets ``status``/``stop``/``resolve`` see that the container is a live Ray worker of another
host's multi-host run (:func:`_serves`).
"""

import json
import os
import signal
import sys
import time

from dapo_ops.core import runstate as _rs

#: one status probe reads at most this many bytes of the log (statusview.DEFAULT_TAIL_BYTES).
DEFAULT_TAIL_BYTES = 64 << 10
#: ``logs --errors`` reads at most this many bytes from the end of each attempt log (classify_file's bound).
DEFAULT_ERRORS_TAIL_BYTES = 4 << 20
ACTIVE = _rs.ACTIVE_STATUSES


class ProbeError(Exception):
    """A one-line problem the operator can fix (no such run, no runs dir); printed as ``{"error": msg}``."""


# ------------------------------------------------------------------------------------------ helpers

def read_tail(path, tail_bytes):
    """Last ``tail_bytes`` bytes of ``path`` as text (a cut first line is dropped), its size and mtime.

    :returns: ``(text, size_bytes, mtime_s)``; ``("", None, None)`` when the file does not exist.
    Cost: one ``stat`` + one ``seek`` + one bounded ``read``, whatever the file's size.
    """
    try:
        with open(path, "rb") as fh:
            st = os.fstat(fh.fileno())
            start = max(0, st.st_size - int(tail_bytes))
            fh.seek(start)
            data = fh.read(int(tail_bytes))
    except FileNotFoundError:
        return "", None, None
    if start > 0:
        cut = min([i for i in (data.find(b"\n"), data.find(b"\r")) if i >= 0] or [-1])
        data = data[cut + 1:] if cut >= 0 else b""
    return data.decode("utf-8", "replace"), st.st_size, st.st_mtime


def _boot_time():
    try:
        with open("/proc/stat") as fh:
            for line in fh:
                if line.startswith("btime "):
                    return float(line.split()[1])
    except OSError:
        pass
    return None


def _scan(pgid, env_marker):
    """One pass over ``/proc``: live processes in process group ``pgid`` or whose environment holds
    ``env_marker`` (bytes ``DAPO_OPS_RUN_ID=<run_id>``). Returns ``[(pid, start_time_s | None, how)]`` with
    ``how`` = ``"pgid"`` or ``"env"``. Zombies and this process are skipped.

    ``/proc/<pid>/stat``: field 5 = pgrp, field 22 = start time in clock ticks since boot. Cost grows with the
    number of processes in the container, not with any log.
    """
    if not pgid and not env_marker:
        return []
    try:
        hz = os.sysconf("SC_CLK_TCK")
    except (ValueError, OSError):  # pragma: no cover
        hz = 100
    btime = _boot_time()
    me = os.getpid()
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as fh:
                stat = fh.read()
            rest = stat[stat.rindex(b")") + 2:].split()
        except (OSError, ValueError):
            continue
        if rest[0] == b"Z":
            continue
        how = "pgid" if pgid and int(rest[2]) == int(pgid) else None
        if how is None and env_marker:
            try:
                with open("/proc/%s/environ" % name, "rb") as fh:
                    if env_marker in fh.read().split(b"\0"):
                        how = "env"
            except OSError:
                pass
        if how:
            out.append((int(name), btime + int(rest[19]) / float(hz) if btime is not None else None, how))
    return out


def group_members(pgid):
    """Live processes of process group ``pgid``: ``[(pid, start_time_s | None)]``."""
    return [(p, t) for p, t, _ in _scan(pgid, None)]


def own_processes(run, slack_s=120.0):
    """The run's own live processes: members of its recorded verl process group, and processes whose environment
    carries ``DAPO_OPS_RUN_ID=<run_id>`` (Ray workers that left the group; the supervisor sets it for verl,
    docs/design.md run.json), that started after the run did (``started_at`` minus ``slack_s``), so a recycled
    process-group id never makes ``stop`` touch a foreign process.

    :returns: ``[(pid, how)]``, ``how`` = ``"pgid"`` | ``"env"``.
    """
    run = run or {}
    pgid = (run.get("pids") or {}).get("verl_pgid")
    marker = ("DAPO_OPS_RUN_ID=%s" % run["run_id"]).encode() if run.get("run_id") else None
    started = run.get("started_at")
    return [(p, how) for p, t, how in _scan(pgid, marker)
            if started is None or t is None or t >= float(started) - slack_s]


def own_members(run, slack_s=120.0):
    """Members of the run's recorded verl process group among :func:`own_processes`: ``[(pid, "pgid")]``."""
    return [x for x in own_processes(run, slack_s) if x[1] == "pgid"]


def resolve_run_dir(runs_dir, run_id=None):
    """The run dir for ``run_id``, or of the current run (lock holder, else newest run id).

    Raises :class:`ProbeError` when ``runs_dir`` or the run does not exist.
    """
    runs_dir = str(runs_dir).rstrip("/") or "/"
    if run_id:
        if not _rs.is_run_id(run_id):
            raise ProbeError("run id %r is not of the form YYYYMMDD-HHMMSS-xxxx; list runs with `inv status --all`"
                             % run_id)
        d = _rs.run_dir_for(runs_dir, run_id)
        if not os.path.isdir(d):
            raise ProbeError("no run %s in %s; list runs with `inv status --all`" % (run_id, runs_dir))
        return d
    if not os.path.isdir(runs_dir):
        return None
    lock = _rs.read_lock(runs_dir)
    if lock and lock.get("run_id") and os.path.isdir(_rs.run_dir_for(runs_dir, lock["run_id"])):
        return _rs.run_dir_for(runs_dir, lock["run_id"])
    names = sorted((n for n in os.listdir(runs_dir) if _rs.is_run_id(n)), reverse=True)
    for n in names:
        if os.path.exists(os.path.join(runs_dir, n, _rs.RUN_NAME)):
            return _rs.run_dir_for(runs_dir, n)
    return _rs.run_dir_for(runs_dir, names[0]) if names else None


def _log_path(run, run_dir):
    log = (run or {}).get("log") or ""
    if not log or not log.startswith("/"):
        log = os.path.join(run_dir, _rs.TRAIN_LOG_NAME)
    return log


def _liveness(run, run_dir):
    pids = (run or {}).get("pids") or {}
    sup = pids.get("supervisor")
    sup_alive = _rs.is_supervisor_pid(sup, run_dir) if sup else False
    verl_alive = bool(own_processes(run))
    return sup_alive, verl_alive


# ------------------------------------------------------------------------------------------ ops

def _serves(runs_dir, host, own_run_id):
    """The multi-host run whose Ray worker this container runs (a live session of another run), or None:
    ``{"run_id", "head", "head_address", "port", "ray_log"}``; ``ray_log`` is the worker's ``ray start`` output,
    ``<runs_dir>/.cluster/<run_id>/ray/<host>.log`` (written by ``dapo_ops.control.cluster_ops._start_node``)."""
    for s in _rs.ray_sessions(runs_dir, host):
        if s.get("role") == "worker" and s.get("run_id") != own_run_id:
            out = {k: s.get(k) for k in ("run_id", "head", "head_address", "port")}
            pid_file = str(s.get("pid_file") or "")
            out["ray_log"] = pid_file[:-4] + ".log" if pid_file.endswith(".pid") else None
            return out
    return None


def _serves_instead(runs_dir, host, run_id):
    """``serves`` of this host when it is a live Ray worker of another host's run and holds no active run of its
    own (an older run of its own does not count); ``run_id`` given: only when it names the served run."""
    if not host:
        return None
    try:
        run_dir = None if run_id else resolve_run_dir(runs_dir)
    except ProbeError:
        run_dir = None
    own = (_rs.read_run(run_dir) or {}) if run_dir else {}
    if own.get("status") in _rs.ACTIVE_STATUSES:
        return None
    serves = _serves(runs_dir, host, os.path.basename(run_dir or ""))
    return serves if serves and (not run_id or serves.get("run_id") == run_id) else None


def probe_status(runs_dir, run_id=None, tail_bytes=DEFAULT_TAIL_BYTES, host=None):
    """Facts for one status row (statusview.build_row's ``probe`` argument).

    :returns: ``{"run": run.json | None, "run_dir", "tail": str, "log_bytes", "log_mtime", "now",
        "supervisor_alive": bool, "verl_alive": bool, "serves": {"run_id", "head", "head_address", "port"} |
        None}``; ``run`` is None when the host has no run; ``serves`` names the multi-host run this host is a
        live Ray worker of (runstate.ray_sessions; only when no run id was asked for).
    """
    now = time.time()
    run_dir = resolve_run_dir(runs_dir, run_id)
    serves = None if run_id else _serves(runs_dir, host, os.path.basename(run_dir or ""))
    if run_dir is None:
        return {"run": None, "now": now, "serves": serves}
    run = _rs.read_run(run_dir)
    if run is None:  # launched but the supervisor never wrote run.json
        run = {"run_id": os.path.basename(run_dir), "status": "unknown", "run_dir": run_dir}
    tail, size, mtime = read_tail(_log_path(run, run_dir), tail_bytes)
    sup_alive, verl_alive = _liveness(run, run_dir)
    return {"run": run, "run_dir": run_dir, "tail": tail, "log_bytes": size, "log_mtime": mtime, "now": now,
            "supervisor_alive": sup_alive, "verl_alive": verl_alive, "probe_read_bytes": read_bytes(),
            "serves": serves}


def read_bytes():
    """Bytes this probe process has read so far (``rchar`` of ``/proc/self/io``: files, pipes, /proc), or None.
    Shows that a look's cost does not grow with the log (bench/status.py prints it)."""
    try:
        with open("/proc/self/io") as fh:
            for line in fh:
                if line.startswith("rchar:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def probe_list(runs_dir):
    """Every run on the container, newest first: ``{"runs": [{"run": run.json, "supervisor_alive",
    "verl_alive"}], "now"}`` (no log is read)."""
    out = []
    for rec in _rs.list_runs(runs_dir):
        run_dir = rec.get("run_dir") or _rs.run_dir_for(runs_dir, rec.get("run_id"))
        sup_alive, verl_alive = _liveness(rec, run_dir)
        out.append({"run": rec, "supervisor_alive": sup_alive, "verl_alive": verl_alive})
    return {"runs": out, "now": time.time()}


def _wait(pred, timeout_s, every_s=0.2):
    end = time.time() + timeout_s
    while time.time() < end:
        if pred():
            return True
        time.sleep(every_s)
    return pred()


def probe_stop(runs_dir, run_id=None, grace_s=60.0, kill_grace_s=20.0, host=None):
    """Stop a run, touching only its own recorded PIDs; keeps checkpoints and logs; idempotent.

    1. supervisor alive (``/proc/<pid>/cmdline`` names ``dapo_ops.agent.supervisor`` and this run dir): SIGTERM it and
       wait up to ``grace_s`` seconds; it stops its verl process group (and the Ray processes in it) and marks
       run.json ``stopped``. Still alive after that: SIGKILL, then step 2.
    2. then (supervisor dead, or it left something): SIGTERM the run's own processes (:func:`own_processes`:
       the recorded verl process group and processes carrying ``DAPO_OPS_RUN_ID=<run_id>``, started after the
       run), wait up to ``kill_grace_s`` seconds, SIGKILL what is left.
    3. run.json still active: mark it ``stopped`` (atomic rewrite, ``stop`` record added).

    A live Ray worker of another host's run (``host`` given, no active run of its own) stops nothing: its Ray
    session ends with the head's stop, so the answer is ``{"serves": {...}}`` (:func:`_serves`).

    :returns: ``{"run_id", "before", "after", "actions": [str], "already": bool}`` or ``{"serves": {...}}``.
    """
    serves = _serves_instead(runs_dir, host, run_id)
    if serves:
        return {"serves": serves}
    run_dir = resolve_run_dir(runs_dir, run_id)
    if run_dir is None:
        raise ProbeError("no runs in %s: nothing to stop" % runs_dir)
    run = _rs.read_run(run_dir) or {"run_id": os.path.basename(run_dir), "status": "unknown"}
    before = run.get("status")
    actions = []
    pids = run.get("pids") or {}
    sup = pids.get("supervisor")
    if sup and _rs.is_supervisor_pid(sup, run_dir):
        os.kill(int(sup), signal.SIGTERM)
        actions.append("SIGTERM supervisor pid %d" % sup)
        if not _wait(lambda: not _rs.is_supervisor_pid(sup, run_dir), grace_s):
            os.kill(int(sup), signal.SIGKILL)
            actions.append("supervisor did not exit within %gs: SIGKILL pid %d" % (grace_s, sup))
            _wait(lambda: not _rs.pid_alive(sup), 5.0)
    run = _rs.read_run(run_dir) or run
    pgid = (run.get("pids") or {}).get("verl_pgid")

    def signal_own(sig):
        procs = own_processes(run)
        in_group = [p for p, how in procs if how == "pgid"]
        by_env = [p for p, how in procs if how == "env"]
        if in_group:
            try:
                os.killpg(int(pgid), sig)
            except ProcessLookupError:
                in_group = []
        for p in by_env:
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass
        return in_group, by_env

    in_group, by_env = signal_own(signal.SIGTERM)
    if in_group or by_env:
        what = []
        if in_group:
            what.append("verl process group %d (%d processes)" % (pgid, len(in_group)))
        if by_env:
            what.append("%d processes with DAPO_OPS_RUN_ID=%s" % (len(by_env), run.get("run_id")))
        actions.append("SIGTERM " + " and ".join(what))
        if not _wait(lambda: not own_processes(run), kill_grace_s):
            left = signal_own(signal.SIGKILL)
            actions.append("%d processes still alive after %gs: SIGKILL" % (len(left[0]) + len(left[1]),
                                                                            kill_grace_s))
            _wait(lambda: not own_processes(run), 5.0)
    if run.get("status") not in _rs.TERMINAL_STATUSES and os.path.exists(os.path.join(run_dir, _rs.RUN_NAME)):
        now = time.time()
        logged = last_logged_step(_log_path(run, run_dir))
        if logged is not None and logged > int(run.get("step") or 0):  # verl outlived its supervisor and went on
            run["step"] = logged
        run["status"] = "stopped"
        run["ended_at"] = now
        run["stop"] = {"at": now, "by": "dapo-ops stop",
                       "supervisor": "terminated" if actions and "supervisor" in actions[0] else "dead"}
        _rs.write_run(run_dir, run)
        actions.append("marked run.json stopped")
    return {"run_id": run.get("run_id"), "run_dir": run_dir, "before": before, "after": run.get("status"),
            "actions": actions, "already": not actions}


def last_logged_step(log, tail_bytes=DEFAULT_TAIL_BYTES):
    """The step of the last metrics line (``step:N - ...``, :func:`dapo_ops.core.logformat.parse_metrics_line`)
    in the last ``tail_bytes`` of ``log``, or None. What ``stop`` records when verl went on training after its
    supervisor died (run.json then lags behind the log)."""
    from dapo_ops.core import logformat

    text, _, _ = read_tail(log, tail_bytes)
    for line in reversed(logformat.split_lines(text)):
        parsed = logformat.parse_metrics_line(line)
        if parsed is not None:
            return parsed[0]
    return None


def probe_resolve(runs_dir, run_id=None, attempt=None, host=None):
    """Paths for ``logs``: ``{"run_id", "run_dir", "log", "attempts": [k...], "status", "cluster",
    "supervisor_pid"}`` (``supervisor_pid``: the run's live supervisor, :func:`dapo_ops.core.runstate.is_supervisor_pid`,
    else None: what ``logs -f`` follows until it exits); ``log`` is
    ``attempt-<attempt>.log`` when ``attempt`` is given (ProbeError when missing), else train.log; ``cluster`` is
    run.json's (a multi-host run's head). A live Ray worker of another host's run (``host`` given, no attempt
    asked for) answers ``{"serves": {...}}`` instead (:func:`_serves`: the run's log is on its head)."""
    serves = None if attempt else _serves_instead(runs_dir, host, run_id)
    if serves:
        return {"serves": serves}
    run_dir = resolve_run_dir(runs_dir, run_id)
    if run_dir is None:
        raise ProbeError("no runs in %s: launch one with `inv launch`" % runs_dir)
    run = _rs.read_run(run_dir) or {}
    attempts = sorted(int(n[8:-4]) for n in os.listdir(run_dir)
                      if n.startswith("attempt-") and n.endswith(".log") and n[8:-4].isdigit())
    if attempt:
        log = str(_rs.RunPaths(run_dir).attempt_log(attempt))
        if not os.path.exists(log):
            raise ProbeError("run %s has no attempt %s (attempts: %s)" % (
                os.path.basename(run_dir), attempt, ",".join(map(str, attempts)) or "none"))
    else:
        log = _log_path(run, run_dir)
    sup = ((run.get("pids") or {}).get("supervisor"))
    return {"run_id": os.path.basename(run_dir), "run_dir": run_dir, "log": log, "attempts": attempts,
            "status": run.get("status"), "cluster": run.get("cluster"),
            "supervisor_pid": sup if sup and _rs.is_supervisor_pid(sup, run_dir) else None}


def probe_logs_tails(runs_dir, run_id=None, tail_bytes=DEFAULT_ERRORS_TAIL_BYTES, attempt=None):
    """Bounded tails of every attempt log (or of one attempt) for ``logs --errors``, zlib+base64 encoded.

    :returns: ``{"run_id", "run": run.json, "logs": [{"attempt": k, "path", "size", "offset", "z": b64}]}``;
        ``offset`` is the byte offset the tail starts at. Falls back to train.log when no attempt log exists.
    """
    info = probe_resolve(runs_dir, run_id, attempt)
    run_dir = info["run_dir"]
    ks = [int(attempt)] if attempt else info["attempts"]
    paths = [(k, str(_rs.RunPaths(run_dir).attempt_log(k))) for k in ks] or [(None, info["log"])]
    logs = []
    for k, p in paths:
        text, size, _ = read_tail(p, tail_bytes)
        logs.append({"attempt": k, "path": p, "size": size,
                     "offset": max(0, (size or 0) - int(tail_bytes)),
                     "z": _b64z(text)})
    return {"run_id": info["run_id"], "run": _rs.read_run(run_dir), "logs": logs}


def _b64z(text):
    """base64 of zlib level 6 of ``text`` (UTF-8): how ``errors`` ships log tails (:func:`decode_tail` reverses)."""
    import base64  # here: only ``logs --errors`` needs them, not every status look
    import zlib

    return base64.b64encode(zlib.compress(text.encode("utf-8"), 6)).decode("ascii")


def handle(req):
    """Dispatch one request dict to its op; returns the JSON-able answer (``{"error": msg}`` on ProbeError)."""
    op = req.get("op")
    runs_dir = req.get("runs_dir") or "/verl/dapo_runs"
    try:
        if op == "status":
            return probe_status(runs_dir, req.get("run_id"), int(req.get("tail_bytes") or DEFAULT_TAIL_BYTES),
                                req.get("host"))
        if op == "list":
            return probe_list(runs_dir)
        if op == "stop":
            return probe_stop(runs_dir, req.get("run_id"), float(req.get("grace_s", 60.0)),
                              float(req.get("kill_grace_s", 20.0)), req.get("host"))
        if op == "resolve":
            return probe_resolve(runs_dir, req.get("run_id"), req.get("attempt"), req.get("host"))
        if op == "errors":
            return probe_logs_tails(runs_dir, req.get("run_id"),
                                    int(req.get("tail_bytes") or DEFAULT_ERRORS_TAIL_BYTES), req.get("attempt"))
        raise ProbeError("unknown probe op %r" % op)
    except ProbeError as e:
        return {"error": str(e)}
    except ValueError as e:  # a run.json / .lock that is not JSON (hand-edited, disk full)
        return {"error": "unreadable run record under %s: %s; inspect it with `inv logs`" % (runs_dir, e)}
    except OSError as e:
        return {"error": "cannot read %s: %s" % (getattr(e, "filename", None) or runs_dir, e.strerror or e)}


def main(argv=None):
    """``python3 -m dapo_ops.agent.probe '<request json>'``: print the answer as one JSON line; exit 0 (errors are
    data)."""
    argv = sys.argv[1:] if argv is None else argv
    req = json.loads(argv[0]) if argv else {"op": "status"}
    sys.stdout.write(json.dumps(handle(req), allow_nan=False, default=str) + "\n")
    sys.stdout.flush()
    return 0


# ------------------------------------------------------------------------------------------ operator side

def decode_tail(entry):
    """Text of one ``probe_logs_tails`` log entry (:func:`_b64z` reversed)."""
    import base64
    import zlib

    return zlib.decompress(base64.b64decode(entry["z"])).decode("utf-8", "replace")


if __name__ == "__main__":
    sys.exit(main())
