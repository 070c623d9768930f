"""``inv stop`` inside the container: stop one run, touching only its own processes (STDLIB ONLY, shipped).

The bundle op ``python3 -S -m dapo_ops.agent.runstop '{"op": "stop", ...}'`` (the probe's request and answer forms,
:func:`dapo_ops.agent.runprobe.handler`; a module of its own so a status look never loads it): SIGTERM the run's
supervisor (``run.json`` ``pids.supervisor``, checked against ``/proc/<pid>/cmdline``), then the run's own processes
(:func:`dapo_ops.agent.runprobe.own_processes`), SIGKILL after the grace periods (seconds), and ``run.json`` marked ``stopped`` when its supervisor could not do it. Checkpoints and logs
are kept. Raises :class:`dapo_ops.agent.runprobe.ProbeError` (no runs to stop, a bad run id).
"""

from __future__ import annotations

import os
import signal
import sys
import time

from dapo_ops.agent import runprobe, runfiles
from dapo_ops.agent.procs import pid_alive
from dapo_ops.core import runstate

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only (postponed): typing does not load at import
    from typing import Any, Callable, Dict, List, Optional, Tuple


def _wait(pred: Callable[[], bool], timeout_s: float, every_s: float = 0.2) -> bool:
    end = time.time() + timeout_s
    while time.time() < end:
        if pred():
            return True
        time.sleep(every_s)
    return pred()


#: who closes a run whose supervisor is gone: ``inv stop`` (the run is ``stopped``) or anything else, e.g.
#: ``inv launch --resume`` (the run is ``failed``: its supervisor died, nobody stopped it)
STOP_BY = "dapo-ops stop"


def probe_stop(
    runs_dir: str,
    run_id: Optional[str] = None,
    grace_s: float = 60.0,
    kill_grace_s: float = 20.0,
    host: Optional[str] = None,
    by: str = STOP_BY,
) -> Dict[str, Any]:
    """Stop a run, touching only its own recorded PIDs; keeps checkpoints and logs; idempotent.

    1. supervisor alive (``/proc/<pid>/cmdline`` names ``dapo_ops.agent.supervisor`` and this run dir): SIGTERM it and
       wait up to ``grace_s`` seconds; it stops its verl process group (and the Ray processes in it) and marks
       run.json ``stopped``. Still alive after that: SIGKILL, then step 2.
    2. then (supervisor dead, or it left something): SIGTERM the run's own processes (:func:`own_processes`:
       the recorded verl process group and processes carrying ``DAPO_OPS_RUN_ID=<run_id>``, started after the
       run), wait up to ``kill_grace_s`` seconds, SIGKILL what is left.
    3. run.json still active: mark it ``stopped`` (atomic rewrite, ``stop`` record added). When ``by`` is not
       :data:`STOP_BY` (``inv launch --resume`` closing the run it continues), nobody stopped the run: its supervisor
       died, so it is marked ``failed`` with ``decision.ended`` saying so and the ``stop`` record naming ``by``.

    A live Ray worker of another host's run (``host`` given, no active run of its own) stops nothing: its Ray
    session ends with the head's stop, so the answer is ``{"serves": {...}}``
    (:func:`dapo_ops.agent.runprobe.serves_instead`).

    :returns: ``{"run_id", "before", "supervisor_alive", "after", "actions": [str], "already": bool}`` (``before``:
        run.json's status; ``supervisor_alive``: whether its supervisor was alive when the stop began) or
        ``{"serves": {...}}``.
    """
    serves = runprobe.serves_instead(runs_dir, host, run_id)
    if serves:
        return {"serves": serves}
    run_dir = runprobe.resolve_run_dir(runs_dir, run_id)
    if run_dir is None:
        raise runprobe.ProbeError("no runs in %s: nothing to stop" % runs_dir)
    run = runfiles.read_run(run_dir) or {
        "run_id": os.path.basename(run_dir),
        "status": runstate.RunStatus.UNKNOWN.value,
    }
    before = run.get("status")
    actions: List[str] = []
    pids = run.get("pids") or {}
    sup = pids.get("supervisor")
    sup_alive = False  # when the stop began (the answer's "supervisor_alive")
    if sup and runfiles.is_supervisor_pid(sup, run_dir):
        sup_alive = True
        os.kill(int(sup), signal.SIGTERM)
        actions.append("SIGTERM supervisor pid %d" % sup)
        if not _wait(lambda: not runfiles.is_supervisor_pid(sup, run_dir), grace_s):
            os.kill(int(sup), signal.SIGKILL)
            actions.append("supervisor did not exit within %gs: SIGKILL pid %d" % (grace_s, sup))
            _wait(lambda: not pid_alive(sup), 5.0)
    run = runfiles.read_run(run_dir) or run
    pgid = (run.get("pids") or {}).get("verl_pgid")

    def signal_own(sig: signal.Signals) -> Tuple[List[int], List[int]]:
        procs = runprobe.own_processes(run)
        in_group = [p for p, how in procs if how == "pgid"]
        by_env = [p for p, how in procs if how == "env"]
        if in_group and pgid:  # own_processes reports group members only when the run records its verl_pgid
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
        if in_group and pgid:
            what.append("verl process group %d (%d processes)" % (pgid, len(in_group)))
        if by_env:
            what.append("%d processes with DAPO_OPS_RUN_ID=%s" % (len(by_env), run.get("run_id")))
        actions.append("SIGTERM " + " and ".join(what))
        if not _wait(lambda: not runprobe.own_processes(run), kill_grace_s):
            left = signal_own(signal.SIGKILL)
            actions.append("%d processes still alive after %gs: SIGKILL" % (len(left[0]) + len(left[1]), kill_grace_s))
            _wait(lambda: not runprobe.own_processes(run), 5.0)
    if not runstate.RunStatus.of(run.get("status")).terminal and os.path.exists(
        os.path.join(run_dir, runstate.RUN_NAME)
    ):
        now = time.time()
        # the attempt's own log: verl goes on writing it after its supervisor died, train.log stops with the supervisor
        logged = last_logged_step(runprobe.current_log(run, run_dir, False))
        if logged is not None and logged > int(run.get("step") or 0):  # verl outlived its supervisor and went on
            run["step"] = logged
        sup_state = "terminated" if actions and "supervisor" in actions[0] else "dead"
        run["ended_at"] = now
        run["stop"] = {"at": now, "by": by or STOP_BY, "supervisor": sup_state}
        if (by or STOP_BY) == STOP_BY:
            run["status"] = runstate.RunStatus.STOPPED.value
        else:
            step, total = run.get("step"), run.get("total_steps")
            where = "before the first step" if step is None else "at step %s/%s" % (step, total or "?")
            run["status"] = runstate.RunStatus.FAILED.value
            run["decision"] = dict(
                run.get("decision") or {},
                action="stop",
                reason="its supervisor died",
                ended="failed: its supervisor (pid %s) died %s; closed by %s" % (sup, where, by),
            )
        runfiles.write_run(run_dir, run)
        actions.append("marked run.json %s" % run["status"])
    return {
        "run_id": run.get("run_id"),
        "run_dir": run_dir,
        "before": before,
        "supervisor_alive": sup_alive,
        "after": run.get("status"),
        "actions": actions,
        "already": not actions,
    }


def last_logged_step(log: str, tail_bytes: int = runprobe.DEFAULT_TAIL_BYTES) -> Optional[int]:
    """The step of the last metrics line (``step:N - ...``, :func:`dapo_ops.core.logformat.parse_metrics_line`)
    in the last ``tail_bytes`` of ``log``, or None. What ``stop`` records when verl went on training after its
    supervisor died (run.json then lags behind the log)."""
    from dapo_ops.core import logformat

    text, _, _ = runprobe.read_tail(log, tail_bytes)
    for line in reversed(logformat.split_lines(text)):
        parsed = logformat.parse_metrics_line(line)
        if parsed is not None:
            return parsed[0]
    return None


handle = runprobe.handler(
    {
        "stop": lambda runs_dir, req: probe_stop(
            runs_dir,
            req.get("run_id"),
            float(req.get("grace_s", 60.0)),
            float(req.get("kill_grace_s", 20.0)),
            req.get("host"),
            str(req.get("by") or STOP_BY),
        ),
    }
)


if __name__ == "__main__":
    sys.exit(runprobe.main(handle=handle))
