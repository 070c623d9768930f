"""The in-container probe behind ``status``, ``stop``, ``watch`` and ``logs --errors`` (STDLIB ONLY).

One op of the shipped bundle per host and call: ``PYTHONPATH=<bundle> python3 -S -m dapo_ops.agent.runprobe
'<request json>'`` (:func:`dapo_ops.control.remote.bundle.run_op`). It reads ``run.json`` (via
:mod:`dapo_ops.agent.runfiles`), at most ``tail_bytes`` from the end of the log (``seek`` + ``read``: the cost does
not grow with the log's size), checks ``/proc/<pid>`` for the recorded supervisor and verl process group, and
prints one JSON object on stdout.

Requests (``{"op": ..., ...}``), each answered by the function of the same name:

- ``status``  ``{"runs_dir", "run_id"?, "tail_bytes"?, "host"?}`` -> :func:`probe_status`
- ``list``    ``{"runs_dir"}`` -> :func:`probe_list` (``status --all``)
- ``stop``    ``{"runs_dir", "run_id"?, "grace_s"?, "kill_grace_s"?, "host"?}`` ->
  :func:`dapo_ops.agent.runstop.probe_stop` (op module ``runstop``)
- ``errors``  ``{"runs_dir", "run_id"?, "tail_bytes"?, "attempt"?}`` -> :func:`dapo_ops.agent.runlogs.probe_logs_tails`
  (op module ``runlogs``)
- ``resolve`` ``{"runs_dir", "run_id"?, "attempt"?, "host"?}`` -> :func:`dapo_ops.agent.runlogs.probe_resolve` (run
  dir / log paths for ``logs``; op module ``runlogs``)

``stop``, ``resolve`` and ``errors`` are bundle ops of their own (``python3 -S -m dapo_ops.agent.runstop|runlogs
'<request json>'``, the same request and answer forms; :data:`dapo_ops.control.status.look.PROBE_OPS` picks the module), so
a status look loads this module, :mod:`dapo_ops.agent.runfiles` (with :mod:`dapo_ops.agent.procs`,
:mod:`dapo_ops.core.runstate` and :mod:`dapo_ops.core.raynodes`), nothing else of the package; they import this module's helpers.

The current run of a container is the one named by ``<runs_dir>/.lock`` (live or stale: the lock is rewritten
by every launch), else the newest run directory (run ids sort by start time, runstate.new_run_id). ``host`` (the
inventory name) lets ``status``/``stop``/``resolve`` see that the container is a live Ray worker of another
host's multi-host run (:func:`_serves`).
"""

from __future__ import annotations

import json
import os
import sys
import time

from dapo_ops.agent import runfiles
from dapo_ops.core import raynodes
from dapo_ops.core import runstate

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only (postponed): typing does not load at import (every status look runs this)
    from typing import Any, Callable, Dict, List, Optional, Tuple

    Handle = Callable[[Dict[str, Any]], Dict[str, Any]]

#: one status probe reads at most this many bytes of the log (control/status/rows.py DEFAULT_TAIL_BYTES).
DEFAULT_TAIL_BYTES = 64 << 10
#: ``logs --errors`` reads at most this many bytes from the end of each attempt log (classify_file's bound).
DEFAULT_ERRORS_TAIL_BYTES = 4 << 20


class ProbeError(Exception):
    """A one-line problem the operator can fix (no such run, no runs dir); printed as ``{"error": msg}``, with
    ``"run_id"`` when the run asked for has no dir here (a Ray worker host of a multi-host run has none: run.json
    lives on its head, dapo_ops/control/status/look.py ``worker_of``)."""

    def __init__(self, msg: str, run_id: Optional[str] = None):
        super().__init__(msg)
        self.run_id = run_id


# ------------------------------------------------------------------------------------------ helpers


def read_tail(path: str, tail_bytes: int) -> Tuple[str, Optional[int], Optional[float]]:
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
        data = data[cut + 1 :] if cut >= 0 else b""
    return data.decode("utf-8", "replace"), st.st_size, st.st_mtime


def _boot_time() -> Optional[float]:
    try:
        with open("/proc/stat") as fh:
            for line in fh:
                if line.startswith("btime "):
                    return float(line.split()[1])
    except OSError:
        pass
    return None


def _scan(pgid: Optional[int], env_marker: Optional[bytes]) -> List[Tuple[int, Optional[float], str]]:
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
            rest = stat[stat.rindex(b")") + 2 :].split()
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


def own_processes(run: Optional[Dict[str, Any]], slack_s: float = 120.0) -> List[Tuple[int, str]]:
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
    return [
        (p, how) for p, t, how in _scan(pgid, marker) if started is None or t is None or t >= float(started) - slack_s
    ]


def resolve_run_dir(runs_dir: str, run_id: Optional[str] = None) -> Optional[str]:
    """The run dir for ``run_id``, or of the current run (lock holder, else newest run id).

    Raises :class:`ProbeError` when ``runs_dir`` or the run does not exist.
    """
    runs_dir = str(runs_dir).rstrip("/") or "/"
    if run_id:
        if not runstate.is_run_id(run_id):
            raise ProbeError(
                "run id %r is not of the form YYYYMMDD-HHMMSS-xxxx; list runs with `inv status --all`" % run_id
            )
        d = runstate.run_dir_for(runs_dir, run_id)
        if not os.path.isdir(d):
            raise ProbeError("no run %s in %s; list runs with `inv status --all`" % (run_id, runs_dir), run_id)
        return d
    if not os.path.isdir(runs_dir):
        return None
    lock = runfiles.read_lock(runs_dir)
    if lock and lock.get("run_id") and os.path.isdir(runstate.run_dir_for(runs_dir, lock["run_id"])):
        return runstate.run_dir_for(runs_dir, lock["run_id"])
    names = runstate.run_ids_newest_first(os.listdir(runs_dir))
    for n in names:
        if os.path.exists(os.path.join(runs_dir, n, runstate.RUN_NAME)):
            return runstate.run_dir_for(runs_dir, n)
    return runstate.run_dir_for(runs_dir, names[0]) if names else None


def log_path(run: Optional[Dict[str, Any]], run_dir: str) -> str:
    log = (run or {}).get("log") or ""
    if not log or not log.startswith("/"):
        log = os.path.join(run_dir, runstate.TRAIN_LOG_NAME)
    return log


def _liveness(run: Optional[Dict[str, Any]], run_dir: str) -> Tuple[bool, bool]:
    pids = (run or {}).get("pids") or {}
    sup = pids.get("supervisor")
    sup_alive = runfiles.is_supervisor_pid(sup, run_dir) if sup else False
    verl_alive = bool(own_processes(run))
    return sup_alive, verl_alive


# ------------------------------------------------------------------------------------------ ops


def _serves(runs_dir: str, host: Optional[str], own_run_id: str) -> Optional[Dict[str, Any]]:
    """The multi-host run whose Ray worker this container runs (a live session of another run), or None:
    ``{"run_id", "head", "head_address", "port", "ray_log"}``; ``ray_log`` is the worker's ``ray start`` output,
    ``<runs_dir>/.cluster/<run_id>/ray/<host>.log`` (:mod:`dapo_ops.core.raynodes`, written by
    ``dapo_ops.control.launch.raycluster._start_node``)."""
    for s in runfiles.ray_sessions(runs_dir, host):
        if s.get("role") == "worker" and s.get("run_id") != own_run_id:
            out = {k: s.get(k) for k in ("run_id", "head", "head_address", "port")}
            out["ray_log"] = raynodes.node_file(raynodes.cluster_dir(runs_dir, s["run_id"]), s["name"], raynodes.LOG)
            return out
    return None


def serves_instead(runs_dir: str, host: Optional[str], run_id: Optional[str]) -> Optional[Dict[str, Any]]:
    """``serves`` of this host when it is a live Ray worker of another host's run and holds no active run of its
    own (an older run of its own does not count); ``run_id`` given: only when it names the served run."""
    if not host:
        return None
    try:
        run_dir = None if run_id else resolve_run_dir(runs_dir)
    except ProbeError:
        run_dir = None
    own = (runfiles.read_run(run_dir) or {}) if run_dir else {}
    if runstate.RunStatus.of(own.get("status")).active:
        return None
    serves = _serves(runs_dir, host, os.path.basename(run_dir or ""))
    return serves if serves and (not run_id or serves.get("run_id") == run_id) else None


def probe_status(
    runs_dir: str, run_id: Optional[str] = None, tail_bytes: int = DEFAULT_TAIL_BYTES, host: Optional[str] = None
) -> Dict[str, Any]:
    """Facts for one status row (control/status/rows.py build_row's ``probe`` argument).

    :returns: ``{"run": run.json | None, "run_dir", "tail": str, "log_bytes", "log_mtime", "now",
        "supervisor_alive": bool, "verl_alive": bool, "serves": {"run_id", "head", "head_address", "port"} |
        None, "checkpoint": int | None (:func:`resume_checkpoint`)}``; ``run`` is None when the host has no run; ``serves`` names the multi-host run this host is a
        live Ray worker of (runfiles.ray_sessions; only when no run id was asked for).
    """
    now = time.time()
    run_dir = resolve_run_dir(runs_dir, run_id)
    serves = None if run_id else _serves(runs_dir, host, os.path.basename(run_dir or ""))
    if run_dir is None:
        return {"run": None, "now": now, "serves": serves}
    run = runfiles.read_run(run_dir)
    if run is None:  # launched but the supervisor never wrote run.json
        run = {"run_id": os.path.basename(run_dir), "status": runstate.RunStatus.UNKNOWN.value, "run_dir": run_dir}
    sup_alive, verl_alive = _liveness(run, run_dir)
    return dict(
        log_facts(run, run_dir, sup_alive, tail_bytes),
        run=run,
        run_dir=run_dir,
        now=now,
        supervisor_alive=sup_alive,
        verl_alive=verl_alive,
        probe_read_bytes=read_bytes(),
        serves=serves,
    )


def current_log(run: Optional[Dict[str, Any]], run_dir: str, sup_alive: bool) -> str:
    """The log that holds the run's latest progress: train.log, or for an active run whose supervisor is gone the
    current attempt's own log (:func:`attempt_log_path`; verl goes on writing it, train.log stops with the
    supervisor). What ``status`` (every form) and ``logs`` read."""
    path = log_path(run, run_dir)
    if runstate.RunStatus.of((run or {}).get("status")).active and not sup_alive:
        path = attempt_log_path(run, run_dir) or path
    return path


def log_facts(
    run: Dict[str, Any], run_dir: str, sup_alive: bool, tail_bytes: int = DEFAULT_TAIL_BYTES
) -> Dict[str, Any]:
    """A status row's facts from the run's log (:func:`current_log`): ``{"tail", "log_bytes", "log_mtime",
    "log_read", "checkpoint"}`` (``checkpoint``: :func:`resume_checkpoint`). Cost: one bounded tail read."""
    path = current_log(run, run_dir, sup_alive)
    tail, size, mtime = read_tail(path, tail_bytes)
    return {
        "tail": tail,
        "log_bytes": size,
        "log_mtime": mtime,
        "log_read": path,
        "checkpoint": resume_checkpoint(run, sup_alive),
    }


def attempt_log_path(run: Optional[Dict[str, Any]], run_dir: str) -> Optional[str]:
    """The current attempt's own log (``attempt-<k>.log``: verl's stdout+stderr, written by verl itself), or None.
    train.log is the supervisor's copy of it: when the supervisor is gone (SIGKILL, OOM killer) verl goes on
    writing here and train.log stops, so a status look of an active run without its supervisor reads this one."""
    atts = [a for a in (run or {}).get("attempts") or [] if isinstance(a, dict)]
    name = atts[-1].get("log") if atts else None
    if not name:
        return None
    path = name if name.startswith("/") else os.path.join(run_dir, name)
    return path if os.path.exists(path) else None


def resume_checkpoint(run: Dict[str, Any], sup_alive: bool) -> Optional[int]:
    """The step of the last complete checkpoint a ``--resume`` of ``run`` would start from (what the supervisor's
    next attempt would load: :func:`dapo_ops.agent.supervisor.checkpoints.latest_checkpoint`, read-only), or None:
    no checkpoint yet, or a run that is alive or succeeded (nothing to resume; the look then reads no more). A run
    that ended (failed, stopped) is read even while its supervisor still finishes up: ``inv watch`` looks at it then,
    and a None read as "no checkpoint yet" told a data-ran-out run with global_step_15 on disk to redo all 16 steps."""
    status = runstate.RunStatus.of(run.get("status"))
    if (
        (sup_alive and status.active)
        or status in (runstate.RunStatus.SUCCEEDED, runstate.RunStatus.UNKNOWN)
        or not run.get("ckpt_dir")
    ):
        return None
    from dapo_ops.agent.supervisor.checkpoints import latest_checkpoint  # only for a run a resume may continue

    return latest_checkpoint(run.get("ckpt_dir"), repair=False)


def read_bytes() -> Optional[int]:
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


def probe_list(runs_dir: str, tail_bytes: int = DEFAULT_TAIL_BYTES) -> Dict[str, Any]:
    """Every run on the container, newest first: ``{"runs": [{"run": run.json, "supervisor_alive",
    "verl_alive"}], "now"}``. No log is read, except for an active run whose supervisor is gone: its run.json stopped
    with the supervisor while verl may have gone on, so its item also carries :func:`log_facts` (the step verl
    really reached, from the attempt's own log; a new user's trial saw ``status --all`` show run.json's stale step)."""
    out = []
    for rec in runfiles.list_runs(runs_dir):
        run_dir = rec.get("run_dir") or runstate.run_dir_for(runs_dir, str(rec.get("run_id")))
        sup_alive, verl_alive = _liveness(rec, run_dir)
        item = {"run": rec, "supervisor_alive": sup_alive, "verl_alive": verl_alive}
        if runstate.RunStatus.of(rec.get("status")).active and not sup_alive:
            item.update(log_facts(rec, run_dir, sup_alive, tail_bytes))
        out.append(item)
    return {"runs": out, "now": time.time()}


def handler(ops: Dict[str, Callable[[str, Dict[str, Any]], Dict[str, Any]]]) -> Handle:
    """A request handler over ``ops`` (``{op name: fn(runs_dir, req) -> answer}``): the JSON-able answer of the op
    ``req["op"]`` names, ``{"error": "<one line>"}`` for a :class:`ProbeError`, an unreadable record or file, or an
    op that module does not answer. Each op module (this one, :mod:`dapo_ops.agent.runstop`,
    :mod:`dapo_ops.agent.runlogs`) answers its own ops with it."""

    def handle(req: Dict[str, Any]) -> Dict[str, Any]:
        runs_dir = req.get("runs_dir")
        if not runs_dir:  # a request without one: the inventory's default (defaults loads typing: only here)
            from dapo_ops.core import defaults

            runs_dir = defaults.runs_path()
        try:
            op = req.get("op")
            fn = ops.get(op) if isinstance(op, str) else None
            if fn is None:
                raise ProbeError("unknown probe op %r (this module answers %s)" % (req.get("op"), ", ".join(ops)))
            return fn(runs_dir, req)
        except ProbeError as e:
            return {"error": str(e), "run_id": e.run_id} if e.run_id else {"error": str(e)}
        except ValueError as e:  # a run.json / .lock that is not JSON (hand-edited, disk full)
            return {"error": "unreadable run record under %s: %s; inspect it with `inv logs`" % (runs_dir, e)}
        except OSError as e:
            return {"error": "cannot read %s: %s" % (getattr(e, "filename", None) or runs_dir, e.strerror or e)}

    return handle


handle = handler(
    {
        "status": lambda runs_dir, req: probe_status(
            runs_dir, req.get("run_id"), int(req.get("tail_bytes") or DEFAULT_TAIL_BYTES), req.get("host")
        ),
        "list": lambda runs_dir, req: probe_list(runs_dir),
    }
)


def main(argv: Optional[List[str]] = None, handle: Handle = handle) -> int:
    """``python3 -m dapo_ops.agent.<op module> '<request json>'``: print ``handle``'s answer as one JSON line; exit 0
    (errors are data)."""
    argv = sys.argv[1:] if argv is None else argv
    req = json.loads(argv[0]) if argv else {"op": "status"}
    sys.stdout.write(json.dumps(handle(req), allow_nan=False, default=str) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
