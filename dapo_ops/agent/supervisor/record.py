"""What the supervisor writes down about a run: run.json (the record) and supervisor.log (its journal), on one
clock (STDLIB ONLY, shipped).

The record is a plain dict (:func:`dapo_ops.core.runstate.new_record` makes it,
:func:`dapo_ops.agent.runfiles.write_run` writes it atomically; the fields are docs/design.md "run.json"). This
module holds what the supervisor writes into it: one attempt's entry, the progress of a ``step:N`` line, the
``tried`` list and summary of the end, the one-line ``decision.ended`` and the notifier's payload. Steps are verl's
global steps.

The journal: the supervisor's stderr is ``<run_dir>/supervisor.log`` (``dapo_ops/agent/runstart.py``, which starts
it, redirects it); :func:`log` writes one timestamped line there. Times (:func:`now`) are wall-clock seconds since
the epoch, as run.json stores them, shown in the journal as UTC ISO-8601 (:func:`iso`).
"""

from __future__ import annotations

import os
import sys
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional

from dapo_ops.agent import runfiles
from dapo_ops.core import datafeed, health, runstate
from dapo_ops.core.logformat import VAL_PREFIX

if TYPE_CHECKING:
    from dapo_ops.core.features import FeatureSet

# --------------------------------------------------------------------------- the clock and the journal (supervisor.log)


def now() -> float:
    """Wall-clock seconds since the epoch (``time.time``: run.json's timestamps)."""
    return time.time()


def iso(t: Optional[float] = None) -> str:
    """``t`` (seconds since the epoch, default now) as ``YYYY-MM-DDTHH:MM:SSZ`` (UTC)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now() if t is None else t))


def log(msg: str) -> None:
    """One line to the supervisor's own log (its stderr is ``<run_dir>/supervisor.log``). Never raises: on a full
    disk (ENOSPC) the line is lost, the supervision goes on (a traceback from here once ended it)."""
    try:
        sys.stderr.write("%s supervisor[%d]: %s\n" % (iso(), os.getpid(), msg))
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


# --------------------------------------------------------------------------- the record (run.json)

# metrics kept in run.json (the full set stays in the log); plus every val-core/* key
KEY_METRICS = (
    "critic/score/mean",
    "critic/rewards/mean",
    "response_length/mean",
    "response_length/clip_ratio",
    "perf/throughput",
    "perf/mfu/actor",  # verl's MFU of the actor update (verl/trainer/ppo/ray_trainer.py:1373): inv status shows it
    "perf/time_per_step",
    "perf/max_memory_allocated_gb",
    "actor/pg_loss",
    "actor/entropy",
    "actor/grad_norm",
    "timing_s/step",
    "timing_s/gen",
    "timing_s/update_actor",
)
MAX_STEP_TIMES = 50


class RecordWriter:
    """Writes run.json, at most once per ``interval_s`` seconds for progress (``write(rec, force=False)``).

    ``dirty``: the record changed since the last write (set by the readers of the log, flushed by the
    follow loop). A failed write (disk full) is logged and never raises: supervision goes on, run.json stays the
    last good record, and ``on_error(path, err)`` (the supervisor's ``diskspace.DiskWatch.note``) hears of it.
    ``before(rec)``, when set, runs first on the writing thread: it adds what other threads found (the notify
    threads' failed sends, ``Supervisor._take_notify_failures``)."""

    def __init__(
        self, run_dir: str, interval_s: float = 1.0, on_error: Optional[Callable[[str, BaseException], Any]] = None
    ):
        self.run_dir = run_dir
        self.interval_s = interval_s
        self.dirty = False
        self._last = 0.0
        self.on_error = on_error
        self.before: Optional[Callable[[Dict[str, Any]], None]] = None

    def write(self, rec: Dict[str, Any], force: bool = True) -> None:
        if self.before is not None:
            self.before(rec)
        t = now()
        if not force and t - self._last < self.interval_s:
            self.dirty = True
            return
        try:
            runfiles.write_run(self.run_dir, rec)
            self._last = t
            self.dirty = False
        except OSError as e:  # disk full etc.: keep running, say so in our own log
            log("could not write run.json: %s" % e)
            self.dirty = True
            if self.on_error is not None:
                self.on_error(str(runstate.RunPaths(self.run_dir).run_json), e)


#: the most notifier failures run.json ``notify_failures.recent`` keeps (the count goes on: ``total``)
MAX_NOTIFY_FAILURES = 10


def note_notify_failures(rec: Dict[str, Any], event: str, failures: List[Dict[str, str]], at: float) -> None:
    """Record webhook sends that failed (:func:`dapo_ops.agent.notify.post_event`'s dicts) in run.json
    ``notify_failures``: ``{"total": int, "recent": [{"at": seconds since the epoch, "event": escalation|failure|
    hang|success, "kind": the webhook kind (generic, feishu, ...), "error": one line}]}``, the last
    :data:`MAX_NOTIFY_FAILURES` only. Never the URL, the ``url_env`` name's value or a signing secret: ``error`` is
    already scrubbed by the notifier. ``inv status`` shows them (:func:`dapo_ops.control.status.rows.notify_line`)."""
    if not failures:
        return
    nf = rec.get("notify_failures") or {"total": 0, "recent": []}
    recent = list(nf.get("recent") or []) + [
        {"at": at, "event": event, "kind": str(f.get("kind") or ""), "error": str(f.get("error") or "")}
        for f in failures
    ]
    rec["notify_failures"] = {
        "total": int(nf.get("total") or 0) + len(failures),
        "recent": recent[-MAX_NOTIFY_FAILURES:],
    }


def cluster_summary(ray_spec: Dict[str, Any]) -> Dict[str, Any]:
    """run.json ``cluster`` of a multi-host run (what ``inv status`` shows; docs/design.md run.json "cluster")."""
    nodes = ray_spec.get("nodes") or []
    return {
        "head": ray_spec.get("head"),
        "port": ray_spec.get("port"),
        "nodes": len(nodes),
        "hosts": [n.get("name") for n in nodes],
        "devices": sum(int(n.get("devices") or 0) for n in nodes),
        "resources": ray_spec.get("resources") or {},
    }


def new_attempt(
    k: int, fs: FeatureSet, changes: Dict[str, Any], resumed_from: Optional[int], log_name: str
) -> Dict[str, Any]:
    """Attempt ``k``'s run.json entry before it starts (``fs``: its features.FeatureSet; ``resumed_from``: the
    checkpoint step it resumes from, None from scratch)."""
    return {
        "n": k,
        "features": fs.to_json(),
        "setting_changes": dict(changes),
        "started_at": now(),
        "ended_at": None,
        "exit_code": None,
        "verdict": None,
        "step_reached": resumed_from,  # a resumed attempt starts at its checkpoint's step
        "resumed_from": resumed_from,
        "log": log_name,
        "pid": None,
        "killed_by": None,
    }


def on_step(rec: Dict[str, Any], att: Dict[str, Any], step: int, metrics: Dict[str, float]) -> None:
    """A ``step:N - k:v`` line: step, step time (``timing_s/step``, else the time since the previous step line of
    this attempt, seconds), last progress, the kept metrics (:data:`KEY_METRICS` and ``val-core/*``), per
    training step the prompt groups DAPO evicted (``filter_evicted``, last :data:`MAX_STEP_TIMES`: the keep-rate trend
    ``inv status`` warns on, :func:`dapo_ops.core.datafeed.falling_keep_rate`) and, when the line carries
    ``val-core/*`` (verl's validation metrics, ``verl/trainer/ppo/v1/trainer_base.py:1357-1371``), run.json
    ``validation``: ``{"step", "metrics"}`` of the last validation."""
    t = now()
    prev_t = rec.get("last_progress_at")
    prev_step = rec.get("step")
    rec["step"] = step
    att["step_reached"] = step
    if step > 0:
        st = metrics.get("timing_s/step")
        if st is None and prev_t and prev_step is not None and step > prev_step and att.get("_had_step"):
            st = (t - prev_t) / (step - prev_step)
        if st is not None:
            rec["step_times"] = (list(rec.get("step_times") or []) + [round(st, 3)])[-MAX_STEP_TIMES:]
        att["_had_step"] = True
    rec["last_progress_at"] = t
    if step > 0 and "training/global_step" in metrics:  # a training step: DAPO's evicted groups (0 when absent)
        ev = metrics.get(datafeed.FILTER_EVICTED_KEY) or 0.0
        rec["filter_evicted"] = (list(rec.get("filter_evicted") or []) + [ev])[-MAX_STEP_TIMES:]
    keep = {k: v for k, v in metrics.items() if k in KEY_METRICS or k.startswith(VAL_PREFIX)}
    val = {k: v for k, v in keep.items() if k.startswith(VAL_PREFIX)}
    if val:  # a validation ran at this step (trainer.test_freq, or the one before step 1 at step 0)
        rec["validation"] = {"step": step, "metrics": val}
    if keep:
        merged = dict(rec.get("metrics") or {})
        merged.update(keep)
        rec["metrics"] = merged


def tried(rec: Dict[str, Any]) -> List[Dict[str, Any]]:
    """run.json ``decision.tried``: per attempt its features, setting changes, step reached and class."""
    return [
        {
            "attempt": a["n"],
            "features": [f["name"] for f in a["features"]],
            "setting_changes": a.get("setting_changes") or {},
            "step_reached": a.get("step_reached"),
            "class": (a.get("verdict") or {}).get("cls"),
        }
        for a in rec["attempts"]
    ]


def ending_line(status: runstate.RunStatus, reason: Optional[str], step: Optional[int], total: Optional[int]) -> str:
    """What ended a run, one line, as ``status`` / ``watch`` / the notifier show it (run.json ``decision.ended``):
    ``failed: device OOM after 2 OOM retries (MAX_OOM_RETRIES=2) at step 4/20``, ``succeeded at step 6/6``,
    ``stopped: stopped by the operator before the first step``. ``reason`` is the terminal decision's reason
    (ladder.Decision.reason) or the verdict's action; ``step``/``total`` in steps (None: no step reached)."""
    where = "before the first step" if step is None else "at step %s/%s" % (step, total if total else "?")
    if status == runstate.RunStatus.SUCCEEDED:
        return "succeeded %s" % where
    reason = (reason or "").rstrip(". ")
    if reason.startswith("ended at step "):  # data-ran-out: the reason names the step (datafeed.ran_out)
        return "%s: %s" % (status, reason)
    if not reason or reason.startswith(status):  # "stopped by the operator"
        return "%s %s" % (reason or status, where)
    return "%s: %s %s" % (status, reason, where)


def _settle_step(rec: Dict[str, Any], verdict: Optional[Dict[str, Any]]) -> None:
    """run.json ``step`` (and the last attempt's ``step_reached``) at the run's end: :func:`dapo_ops.core.health.
    step_reached`, so a diverged run counts its last healthy step whether the bad value came on the step's own
    line (a bad lr at step 2: 1) or before it (a NaN skip print before step 3: 2)."""
    bad = health.bad_step_of(verdict)
    if bad is None:
        return
    rec["step"] = health.step_reached(rec.get("step"), bad)
    if rec.get("attempts"):
        last = rec["attempts"][-1]
        last["step_reached"] = health.step_reached(last.get("step_reached"), bad)


def end_run(
    rec: Dict[str, Any], status: runstate.RunStatus, verdict: Optional[Dict[str, Any]], decision: Dict[str, Any]
) -> None:
    """Fill the run's end into ``rec``: ``decision`` with ``tried``, ``summary`` and ``ended``, the verdict
    (when given) and ``ended_at``. The status itself is set by the caller once the run's processes are gone."""
    _settle_step(rec, verdict)
    t = tried(rec)
    decision["tried"] = t
    decision["summary"] = "%d attempt(s); %s; last features: %s; %s" % (
        len(t),
        health.reached_text(rec.get("step"), rec.get("total_steps")),
        ",".join(t[-1]["features"]) if t else "-",
        decision.get("reason") or status,
    )
    decision["ended"] = ending_line(
        status, decision.get("reason") or (verdict or {}).get("action"), rec.get("step"), rec.get("total_steps")
    )
    where = (((verdict or {}).get("detail") or {}).get("evidence") or {}).get("line")
    if where and status == runstate.RunStatus.FAILED:  # multi-host: the host and rank of the earliest error
        decision["evidence"] = where
        decision["ended"] += "; " + where
    rec["decision"] = decision
    if verdict is not None:
        rec["verdict"] = verdict
    rec["ended_at"] = now()


def notify_payload(
    spec: Mapping[str, Any],
    rec: Dict[str, Any],
    event: str,
    verdict: Optional[Dict[str, Any]],
    reason: str = "",
    suggestions: Optional[List[str]] = None,
) -> Dict[str, Any]:
    """What ``notify.send_event`` posts for ``event`` (escalation|failure|hang|success). ``reason``: the action line
    (for a final failure the run's ending line, never the verdict's "retry ..."); ``suggestions``: the ladder's next
    parameters to change (final failures; the verdict's hint is left out then)."""
    verdict = verdict or {}
    return {
        "kind": event,
        "host": spec.get("host"),
        "container": spec.get("container"),
        "run_id": spec.get("run_id"),
        "status": rec.get("status"),
        "attempt": rec.get("attempt"),
        "step": rec.get("step"),
        "total_steps": rec.get("total_steps"),
        "verdict": verdict.get("cls"),
        "action": reason or verdict.get("action"),
        "hint": None if suggestions else verdict.get("hint"),
        "suggestions": list(suggestions or []),
        "features": [f.get("name") for f in rec.get("features") or []],
        "log": rec.get("log"),
        "swanlab_url": rec.get("swanlab_url"),
    }
