"""Status rows: ``run.json`` + a bounded log tail -> one row per host/run (pure, stdlib only).

Inputs come from :mod:`dapo_ops.agent.runprobe` (one ``docker exec`` per host): the run's ``run.json`` as a dict
(schema: docs/design.md "Run directory and run.json"), at most ``tail_bytes`` (default 64 KiB) from the end of its
``train.log``, liveness of the recorded supervisor PID and verl process group, and the container's clock.
Nothing here reads a file or talks to a host, so the cost of a row never depends on the log's size. The table's display
strings of a row are :mod:`dapo_ops.control.status.table`'s.

Log formats parsed (verl/utils/logger/aggregate_logger.py): the console metrics line ``step:<N> - <key>:<value> - ...`` (anywhere in a line,
numpy-2 values such as ``np.float64(0.25)`` unwrapped), the tqdm bar ``Training Progress:  35%|...| 212/600
[5:41:22<10:24:51, 96.63s/it]`` (split on ``\\r`` too), Ray prefixes ``(<Name> pid=<pid>[, ip=<ip>])`` and ANSI
codes (stripped), the supervisor's attempt delimiters (design.md) and SwanLab's ``View run ... at <url>`` banner
(swanlab 0.10 sdk/internal/run/greeting.py).
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field

from dapo_ops.core import datafeed, health, logformat, mfu
from dapo_ops.core.logformat import normalise_line, parse_metrics_line, split_lines
from dapo_ops.core.runstate import RunStatus

#: the key metrics shown in a row (verl/trainer/ppo/metric_utils.py); ``perf/throughput`` is tokens/s/device
#: (metric_utils.py:687), ``perf/mfu/actor`` verl's MFU of the actor update (ray_trainer.py:1373; core/mfu.py).
KEY_METRICS = ("critic/score/mean", "response_length/mean", "perf/throughput", "perf/mfu/actor")
#: default bound of the log tail a status probe reads (bytes).
DEFAULT_TAIL_BYTES = 64 << 10
#: a running run with no progress line for at least this long is flagged stale (seconds), unless recent step
#: times say steps are slower (then 3 x the recent step time).
DEFAULT_STALE_AFTER_S = 900.0
#: row states that are not run.json statuses: no run on the host, the probe failed, a launch that left no
#: run.json, a Ray worker host of another host's run, an active status whose supervisor is gone.
NO_RUN, ERROR, INCOMPLETE, RAY_WORKER, SUPERVISOR_DEAD = (
    "no-run",
    "error",
    "incomplete",
    "ray-worker",
    "supervisor-dead",
)
#: row states in which ``watch`` stops following a host.
FINISHED_STATES = frozenset(
    {s for s in RunStatus if s.terminal} | {SUPERVISOR_DEAD, NO_RUN, ERROR, INCOMPLETE, RAY_WORKER}
)


@dataclass
class TailInfo:
    """What a bounded log tail says about the current attempt.

    ``step``/``metrics`` come from the last metrics line after the last attempt-start delimiter in the tail (the
    whole tail when it holds no delimiter); ``step_times`` are the ``timing_s/step`` values (seconds) of those
    lines, oldest first; ``bar_*`` come from the last tqdm bar; ``attempt_events`` lists
    ``(attempt, "start"|"end", rest)`` for each delimiter in the tail.
    """

    step: int | None = None
    metrics: dict = field(default_factory=dict)
    step_times: list = field(default_factory=list)
    bar_step: int | None = None
    bar_total: int | None = None
    bar_remaining_s: float | None = None
    bar_s_per_step: float | None = None
    attempt_events: list = field(default_factory=list)
    swanlab_url: str | None = None
    last_line: str | None = None
    validation: dict | None = None  # ``{"step", "metrics"}`` of the last line carrying ``val-core/*`` (any attempt)
    total: int | None = None  # ``Total training steps: N`` of the current attempt
    resumed_from: int | None = None  # ``Resuming from .../global_step_N`` of the current attempt


def parse_tail(text: str) -> TailInfo:
    """Parse a log tail (the end of ``train.log``) into :class:`TailInfo`.

    :param text: decoded tail; a partial first line (the tail started mid-line) is tolerated.
    """
    info = TailInfo()
    links = logformat.LinkScanner()
    lines = split_lines(text)
    for raw in lines:
        if not links.pending and not logformat.has_marker(raw):
            continue  # worker chatter: no fact of the grammar (parsing it costs most of a status look's CPU)
        line = normalise_line(raw)
        a = logformat.ATTEMPT_RE.search(line) if "===== dapo-ops attempt" in line else None
        if a:
            info.attempt_events.append((int(a.group(1)), a.group(2), a.group(3).strip()))
            if a.group(2) == "start":  # a new attempt: progress from earlier attempts is not current
                info.step, info.metrics, info.step_times = None, {}, []
                info.bar_step = info.bar_total = info.bar_remaining_s = info.bar_s_per_step = None
                info.total = info.resumed_from = None
            continue
        if links.pending or "swanlab" in line or "View run" in line:
            url = links.feed(line)
            if url:
                info.swanlab_url = url
                links = logformat.LinkScanner()  # a later attempt's banner is the current one
        n = logformat.parse_total(line)
        if n is not None:
            info.total = n
        n = logformat.parse_resume(line)
        if n is not None:
            info.resumed_from = n
        bar = logformat.parse_progress_bar(line)
        if bar:
            info.bar_step, info.bar_total = bar.step, bar.total
            info.bar_remaining_s, info.bar_s_per_step = bar.remaining_s, bar.s_per_step
        pm = parse_metrics_line(line)
        if pm:
            info.step, info.metrics = pm[0], pm[1]
            if logformat.validation_score(pm[1]):
                info.validation = {"step": pm[0], "metrics": pm[1]}
            st = pm[1].get("timing_s/step")
            if st is not None and math.isfinite(st) and pm[0] > 0:
                info.step_times.append(st)
    if lines and not logformat.ATTEMPT_RE.search(lines[-1]):
        info.last_line = normalise_line(lines[-1])
    return info


@dataclass
class StatusRow:
    """One status row (host x run). Every field is JSON-serialisable; ``to_json`` is the ``--json`` record.

    Times are seconds; ``progress_age_s`` is measured on the container's clock (no laptop/host skew).
    ``state`` is the run.json ``status`` except ``supervisor-dead`` (status active but the supervisor PID is gone),
    ``no-run`` (no run on the host) and ``error`` (probe failed; ``error`` holds the one-line message).
    """

    host: str
    run_id: str | None = None
    state: str = NO_RUN
    status: str | None = None
    step: int | None = None
    total: int | None = None
    percent: float | None = None
    eta_s: float | None = None
    attempt: int | None = None
    features: list = field(default_factory=list)  # [{"name", "source", "oom_added": bool}]
    attempts: list = field(default_factory=list)  # [{"n", "features": [...as above], "cls", "step_reached"}]
    metrics: dict = field(default_factory=dict)  # KEY_METRICS present in the last metrics
    verdict: str | None = None
    verdict_cause: str | None = None  # the verdict's detail.cause (write-permission, disk-full, ...), shown with it
    hint: str | None = None
    swanlab_url: str | None = None
    progress_age_s: float | None = None
    stale: bool = False
    supervisor_pid: int | None = None
    supervisor_alive: bool | None = None
    verl_pgid: int | None = None
    verl_alive: bool | None = None
    container: str | None = None
    log: str | None = None
    log_bytes: int | None = None
    started_at: float | None = None
    ended_at: float | None = None
    error: str | None = None
    cluster: dict | None = None  # multi-host run: run.json "cluster" (nodes, hosts, devices, head)
    ended: str | None = None  # terminal runs: what ended it (run.json decision.ended), e.g. "failed: ... at step 4/20"
    suggestions: list = field(default_factory=list)  # failed runs: the ladder's next parameters to change
    serves: dict | None = None  # a Ray worker host: {"run_id", "head", "head_address"} of the cluster run it serves
    stalled_s: float | None = None  # active run whose step has not moved for longer than expected: for how long
    no_step_s: float | None = None  # active run with no step for longer than its step time explains (no ETA then)
    saving_step: int | None = None  # active run whose verl is saving this step's checkpoint (started, not finished)
    saving_s: float | None = None  # ... for this long (None when the supervisor did not record the start)
    last_step_at: float | None = None  # when the last step line came (container clock, seconds since the epoch)
    step_time_s: float | None = None  # the recent median step time the expectation comes from
    log_read: str | None = None  # the log the probe read: train.log, or the attempt's own log (supervisor gone)
    resume_from: int | None = None  # a run a --resume may continue: step of its last complete checkpoint
    resume_redo: int | None = None  # ... and the steps past it (done, not saved) that the resume does again
    health: dict | None = None  # run.json health (core/health.py): "trend" {metric, first, last, step, shown},
    # "flag" / "first_bad" when a metric went bad, "bad_step", "healthy_step"; "shown": the one line status prints
    validation: dict | None = None  # the last validation: {"step", "key", "score"} (trainer.test_freq; step 0: before
    #                                 training), from run.json ``validation`` or a fresher log line
    notify_failures: dict | None = None  # webhook sends that failed: run.json ``notify_failures`` {"total",
    #                                      "recent": [{"at", "event", "kind", "error"}]} (agent/supervisor/record.py)
    mfu: dict | None = None  # how close to the device: core/mfu.py figures() (verl's perf/mfu/actor, the step MFU
    #                          6 x params x tokens/s/device / peak from run.json spec.learn's model shape and device)

    def to_json(self) -> dict:
        """The ``status --json`` record of this row (a plain dict)."""
        return asdict(self)

    @property
    def run_status(self) -> RunStatus:
        """:attr:`status` as a :class:`RunStatus` (``UNKNOWN`` for no run or a status no supervisor writes)."""
        return RunStatus.of(self.status)


def last_validation(recorded: dict | None, logged: dict | None) -> dict | None:
    """The run's last validation as ``{"step", "key", "score"}``: run.json's ``validation`` (the supervisor's
    record of the last ``val-core/*`` line) or the log tail's, whichever is at the later step; None when neither."""
    best = None
    for v in (recorded, logged):
        if isinstance(v, dict) and isinstance(v.get("step"), int) and isinstance(v.get("metrics"), dict):
            if best is None or v["step"] >= best["step"]:
                best = v
    hit = logformat.validation_score(best["metrics"]) if best else None
    return {"step": best["step"], "key": hit[0], "score": hit[1]} if best and hit else None


def notify_line(row: StatusRow) -> str | None:
    """The one ``inv status`` line of a run's failed webhook sends (run.json ``notify_failures``, written by the
    supervisor: :func:`dapo_ops.agent.supervisor.record.note_notify_failures`), e.g. ``h1 <run>: notify: 2 webhook
    sends failed (last: generic: HTTP 500 Internal Server Error); the sends: <run_dir>/supervisor.log``; None when
    none failed. Names the webhook kind, never its URL (the record holds none)."""
    nf = row.notify_failures or {}
    total = int(nf.get("total") or 0)
    if not total:
        return None
    recent = [x for x in nf.get("recent") or [] if isinstance(x, dict)]
    last = recent[-1] if recent else {}
    what = "%s: %s" % (last.get("kind") or "webhook", one_line(last.get("error"), 100) or "-") if last else "-"
    return "%s %s: notify: %d webhook send%s failed (last: %s); each is in supervisor.log" % (
        row.host,
        row.run_id,
        total,
        "" if total == 1 else "s",
        what,
    )


def is_oom_added(source: str | None) -> bool:
    """True when a feature's source marks it as added by an OOM retry (``oom-retry-<N>``, features.py)."""
    return bool(source) and str(source).startswith("oom-retry")


def one_line(text: str | None, limit: int | None = 120) -> str | None:
    """First sentence / line of ``text``, at most ``limit`` characters (a webhook's error text); ``limit`` None:
    never cut (a verdict's action: its cause and its fix are one line, whole)."""
    if not text:
        return None
    first = str(text).strip().splitlines()[0].strip()
    m = re.match(r"(.+?\.)(\s|$)", first)
    if m:
        first = m.group(1)
    if limit is None:
        return first
    cut = first[: limit - 1]
    return first if len(first) <= limit else (cut.rsplit(" ", 1)[0] if " " in cut else cut).rstrip(" ,;:") + "\u2026"


def _recent_step_time(run: dict, tail: TailInfo) -> float | None:
    for src in (run.get("step_times") or [], tail.step_times):
        vals = [float(v) for v in src[-5:] if isinstance(v, (int, float)) and math.isfinite(v) and v > 0]
        if vals:
            return _median(vals)
    return tail.bar_s_per_step


def _features(feats) -> list:
    return [
        {"name": f.get("name"), "source": f.get("source"), "oom_added": is_oom_added(f.get("source"))}
        for f in (feats or [])
        if isinstance(f, dict)
    ]


def stale_threshold(step_time_s: float | None, stale_after_s: float = DEFAULT_STALE_AFTER_S) -> float:
    """Seconds without a progress line after which a running run is flagged stale:
    ``max(stale_after_s, 3 * recent step time)``."""
    return max(stale_after_s, 3.0 * step_time_s) if step_time_s else stale_after_s


def _median(vals: list) -> float:
    """Median of a non-empty list of numbers (statistics.median, without importing statistics at start-up)."""
    v = sorted(float(x) for x in vals)
    mid = len(v) // 2
    return v[mid] if len(v) % 2 else (v[mid - 1] + v[mid]) / 2.0


def _progress(
    run: dict, tail: TailInfo, attempt: object, log_mtime: float | None
) -> tuple[int | None, int | None, dict, float | None]:
    """``(step, total, metrics, last_progress_at)`` of a run: run.json's, or the log tail's where it is fresher."""
    # progress: the log tail (current attempt) is at least as fresh as run.json, which the supervisor writes
    # after each progress line; with a dead supervisor only the log moves on.
    step, total = run.get("step"), run.get("total_steps")
    metrics = dict(run.get("metrics") or {})
    last_progress = run.get("last_progress_at")
    tail_step = tail.step if tail.step is not None else tail.bar_step
    starts = [ev[0] for ev in tail.attempt_events if ev[1] == "start"]
    new_segment = bool(starts) and isinstance(attempt, int) and starts[-1] > attempt
    # parse_tail keeps only the segment after the last attempt-start delimiter; an attempt run.json does not know
    # yet (new_segment: it may resume below run.json's step) wins, otherwise the larger step is the fresher one
    if tail_step is not None and (step is None or tail_step >= step or new_segment):
        if step is None or tail_step > step:
            # newer than run.json: the supervisor did not record it (dead or lagging); the log's mtime bounds it
            last_progress = max(last_progress or 0.0, log_mtime or 0.0) or last_progress
        step = tail_step
        metrics.update({k: v for k, v in tail.metrics.items()})
    if total is None:
        total = tail.total if tail.total is not None else tail.bar_total
    bad = health.bad_step_of(run.get("verdict")) if RunStatus.of(run.get("status")).terminal else None
    if bad is not None:  # the log's bad step line is no step reached (health.step_reached)
        step = health.step_reached(step, bad)
    return step, total, metrics, last_progress


def _attempt_rows(attempts: object) -> list[dict]:
    """One ``{"n", "features", "cls", "step_reached", "resumed_from", "data_order_restarts", "rungs"}`` per attempt of
    run.json's ``attempts``."""
    out = []
    for a in attempts if isinstance(attempts, list) else []:
        if isinstance(a, dict):
            rungs = (a.get("setting_changes") or {}).get("memory_rungs") or []
            out.append(
                {
                    "n": a.get("n"),
                    "features": _features(a.get("features")),
                    "cls": (a.get("verdict") or {}).get("cls"),
                    "step_reached": a.get("step_reached"),
                    "resumed_from": a.get("resumed_from"),
                    "data_order_restarts": bool(a.get("data_order_restarts")),
                    "rungs": [r for r in rungs if isinstance(r, dict)],
                }
            )
    return out


def build_row(host: str, probe: dict, stale_after_s: float = DEFAULT_STALE_AFTER_S) -> StatusRow:
    """Turn one probe result (see :func:`dapo_ops.agent.runprobe.probe_status`) into a :class:`StatusRow`.

    :param host: inventory host name.
    :param probe: ``{"run": run.json dict | None, "tail": str, "now": float, "supervisor_alive": bool | None,
        "verl_alive": bool | None, "log_bytes": int | None, "log_mtime": float | None, "error": str | None}``.
    :param stale_after_s: minimum silence (seconds) before a running run is flagged stale.
    """
    row = StatusRow(host=host)
    if probe.get("error"):  # with the run id asked for when that run has no dir on this host
        row.state, row.error, row.run_id = ERROR, str(probe["error"]), probe.get("run_id")
        return row
    run = probe.get("run")
    serves = probe.get("serves")
    if serves and (not run or not RunStatus.of(run.get("status")).active):
        # a Ray worker of a live multi-host run: that run, not an old one or no-run (run.json lives on its head)
        row.state, row.run_id, row.serves = RAY_WORKER, serves.get("run_id"), dict(serves)
        row.hint = "Ray worker of multi-host run %s (head %s %s); follow it with `inv status -H %s`" % (
            row.run_id,
            serves.get("head"),
            serves.get("head_address") or "",
            serves.get("head"),
        )
        return row
    if not run:
        return row
    tail = parse_tail(probe.get("tail") or "")
    now = float(probe.get("now") or 0.0)
    row.run_id = run.get("run_id")
    row.status = run.get("status")
    row.container = run.get("container")
    row.cluster = run.get("cluster") or None
    row.log = run.get("log")
    row.log_bytes = probe.get("log_bytes")
    row.attempt = run.get("attempt")
    row.started_at, row.ended_at = run.get("started_at"), run.get("ended_at")
    pids = run.get("pids") or {}
    row.supervisor_pid, row.verl_pgid = pids.get("supervisor"), pids.get("verl_pgid")
    row.supervisor_alive, row.verl_alive = probe.get("supervisor_alive"), probe.get("verl_alive")

    step, total, metrics, last_progress = _progress(run, tail, row.attempt, probe.get("log_mtime"))
    row.step, row.total = step, total
    if step is not None and total:
        row.percent = round(100.0 * step / total, 1)
    row.metrics = {k: metrics[k] for k in KEY_METRICS if k in metrics}
    learned_key = ((run.get("spec") or {}).get("learn") or {}).get("key") or {}
    row.mfu = mfu.figures(row.metrics, learned_key.get("model"), (learned_key.get("host") or {}).get("device_name"))
    row.validation = last_validation(run.get("validation"), tail.validation)

    step_time = _recent_step_time(run, tail)
    if row.run_status.active and step is not None and total:
        if step_time:
            row.eta_s = round(max(0, total - step) * step_time, 1)
        elif tail.bar_remaining_s is not None:
            row.eta_s = tail.bar_remaining_s

    h = run.get("health")
    if isinstance(h, dict) and health.trend_text(h):
        h = dict(h, trend=health.trend_at(h.get("trend"), tail.step, tail.metrics)) if not h.get("flag") else h
        row.health = dict(h, shown=health.trend_text(h))
    row.features = _features(run.get("features"))
    row.attempts += _attempt_rows(run.get("attempts"))
    verdict = run.get("verdict") or {}
    if verdict:
        row.verdict = verdict.get("cls")
        row.verdict_cause = (verdict.get("detail") or {}).get("cause") or None
        # whole: the action line carries the cause and the fix (a trial read "no common frame: the driver stands
        # in…" and "stop with…"); status prints it on a line of its own under the table, watch in its lines
        row.hint = one_line(verdict.get("action") or verdict.get("hint"), None)
    if row.run_status.terminal:  # a finished run says what ended it, never the verdict's "retry ..." text
        decision = run.get("decision") or {}
        row.ended = decision.get("ended") or ending_line(run, step, total)
        row.hint = row.ended
        if row.run_status is RunStatus.FAILED:
            row.suggestions = [str(x) for x in decision.get("suggestions") or []]
    if row.run_status.active:  # DAPO's keep-rate falling: said before the steps slow to a crawl
        batch = ((run.get("spec") or {}).get("settings") or {}).get("train_batch_size")
        keep = datafeed.falling_keep_rate(run.get("filter_evicted") or [], int(batch)) if batch else None
        if keep:
            row.hint = "%s; %s" % (row.hint, keep) if row.hint else keep
    row.swanlab_url = run.get("swanlab_url") or tail.swanlab_url
    nf = run.get("notify_failures")
    if isinstance(nf, dict) and nf.get("total"):
        row.notify_failures = nf

    ref = last_progress or run.get("started_at")
    if ref and now:
        row.progress_age_s = round(max(0.0, now - float(ref)), 1)

    row.state = row.status or RunStatus.UNKNOWN.value
    if row.state == RunStatus.UNKNOWN and not run.get("started_at"):
        row.state = INCOMPLETE  # a launch that died before its supervisor wrote run.json (spec.json only)
        row.hint = "launch did not finish (no run.json): nothing runs; remove %s or ignore it" % (
            run.get("run_dir") or "the run dir"
        )
    if row.run_status.active and row.supervisor_alive is False:
        row.state = SUPERVISOR_DEAD
        row.eta_s = None
        gone = "supervisor process %s is gone but run.json says %s" % (row.supervisor_pid, row.status)
        if row.verl_alive:
            row.hint = (
                "%s; verl still runs (pgid %s) on the devices: end it with `inv stop -H %s --run %s`, then "
                "`%s` continues from its last checkpoint"
                % (gone, row.verl_pgid, host, row.run_id, resume_line(run, host))
            )
        elif _finished(probe.get("checkpoint"), total):
            # verl went on after its supervisor died and saved the last step: a resume would train nothing (and
            # launch refuses `--steps` not beyond the checkpoint); the chaos soak found the old hint (bench/soak.md)
            row.hint = (
                "%s; verl finished all %s steps after it (checkpoint global_step_%s is the last step): nothing "
                "to resume; `inv stop -H %s --run %s` marks it ended"
                % (gone, total, probe.get("checkpoint"), host, row.run_id)
            )
        else:
            row.hint = (
                "%s; verl is not running: `%s` continues from its last checkpoint; "
                "`inv stop -H %s --run %s` marks it stopped" % (gone, resume_line(run, host), host, row.run_id)
            )
    if row.run_status.active and row.progress_age_s is not None:
        row.stale = row.progress_age_s >= stale_threshold(step_time, stale_after_s)
    row.log_read = probe.get("log_read")
    row.step_time_s = round(step_time, 3) if step_time else None
    if row.run_status.active and step is not None and last_progress:
        row.last_step_at = float(last_progress)
        _no_eta_when_idle(row, run, step_time, now)
    if (
        row.state in (SUPERVISOR_DEAD, RunStatus.STOPPED, RunStatus.FAILED)
        and step is not None
        and "checkpoint" in probe
    ):
        _add_redo(row, run, host, step, probe.get("checkpoint"), total)
    return row


def _add_redo(row: StatusRow, run: dict, host: str, step: int, checkpoint: int | None, total) -> None:
    """The ``a resume redoes N steps (...)`` part of an ended or dead run's hint (none when its last checkpoint is
    its last step: nothing to resume); a stopped run's ends with its ``--resume`` command (a failed run's verdict and
    a dead supervisor's hint name theirs; a new user's trial read "a resume redoes 3 steps" and no command)."""
    row.resume_from = checkpoint
    row.resume_redo = redo_steps(step, checkpoint)
    if _finished(checkpoint, total):
        return
    redo = redo_line(step, checkpoint)
    if row.state == RunStatus.STOPPED:
        redo += ": `%s`" % resume_line(run, host)
    row.hint = "%s; %s" % (row.hint, redo) if row.hint else redo


def _finished(checkpoint, total) -> bool:
    """The last complete checkpoint (``checkpoint``: its step, from the probe) is the run's last step ``total``."""
    return isinstance(checkpoint, int) and bool(total) and checkpoint >= int(total)


#: a run with no new step for this many times its recent step time shows no ETA (``no step for ..``): the step time
#: does not explain the wait (:func:`_no_eta_when_idle`; ``stalled`` only past :func:`stalled_after`)
IDLE_STEP_FACTOR = 3.0


def _no_eta_when_idle(row: StatusRow, run: dict, step_time: float | None, now: float = 0.0) -> None:
    """No ETA for an active run whose step does not move: ``stalled_s`` past :func:`stalled_after` (the supervisor's
    own limit), else ``no_step_s`` past :data:`IDLE_STEP_FACTOR` x the recent step time. A new user's trial: attempt
    2 stuck at step 1 (2 s steps, the supervisor's 60 s floor) showed ``ETA 10s`` for the first 30 s of its hang.
    A checkpoint save in flight (:func:`save_in_flight`) is neither: the row says ``saving_step`` / ``saving_s``
    (the supervisor sizes its own limit for the save, dapo_ops/agent/supervisor/follow.py ``Scanner._on_save``).
    A dead supervisor's row (:data:`SUPERVISOR_DEAD`) says none of the three: nothing records a save verl starts
    after its supervisor died and the log tail cannot date one (verl's log timestamps are the container's local
    time), and a save recorded before it may have died with verl: the row keeps the progress age and the hint."""
    age = row.progress_age_s
    limit = stalled_after(run)
    if age is None or row.state == SUPERVISOR_DEAD:
        return
    saving = save_in_flight(run, row.step, now)
    if saving is not None:
        row.saving_step, row.saving_s = saving
        row.eta_s, row.stale = None, False  # the step time does not hold the save; a save is no silence
        return
    if limit is not None and age >= limit:
        row.stalled_s, row.eta_s = age, None  # no ETA for a run that does not move
    elif step_time and age >= IDLE_STEP_FACTOR * step_time:
        row.no_step_s, row.eta_s = age, None


def save_in_flight(run: dict, step: int | None, now: float) -> tuple[int, float | None] | None:
    """``(N, seconds)`` when verl is saving the checkpoint of step ``N`` now, else None: the current attempt of run
    record ``run`` started a save (``saved_step``, the supervisor's read of verl's ``Saving checkpoint to
    .../global_step_N``, :func:`dapo_ops.core.logformat.parse_save`) past the run's last step ``step`` (verl prints
    step N's line after its save, verl/trainer/ppo/v1/trainer_base.py:481-514). Seconds since ``save_started_at``
    (the supervisor's clock, as ``last_progress_at``), None without it or without ``now``."""
    attempts = run.get("attempts") or []
    att = attempts[-1] if attempts and isinstance(attempts[-1], dict) else {}
    n = att.get("saved_step")
    if not isinstance(n, int) or (step is not None and step >= n):
        return None
    since = att.get("save_started_at")
    return n, (round(max(0.0, now - float(since)), 1) if isinstance(since, (int, float)) and now else None)


def stalled_after(run: dict) -> float | None:
    """Seconds without a new step after which an active run shows ``stalled`` instead of an ETA: the supervisor's own
    stall limit (run.json ``stall_after_s``: factor x the longest step seen, at least the host's ``stall_floor_s``, at
    most the hang timeout; ``dapo_ops/agent/supervisor/stall.py``), the one threshold of a stall: status calls it
    exactly when the supervisor would (a new user's trial read ``stalled 33s`` on a run the supervisor calls stalled
    at 60 s). None without it (an older supervisor, or none yet: no stall is called then); below it
    :func:`_no_eta_when_idle` says ``no step for ..``."""
    lim = run.get("stall_after_s")
    return float(lim) if isinstance(lim, (int, float)) and lim > 0 else None


def resume_line(run: dict, host: str) -> str:
    """The ``inv launch|one-step-off -H <hosts> --resume <run_id>`` of the run of record ``run`` (run.json, which
    embeds its spec: :func:`dapo_ops.core.ladder.resume_settings`), seen on ``host`` (the hosts when the spec names none)."""
    # here, not at the top: the ladder imports the classifier, which `inv status` never needs otherwise (its import
    # budget, tests/test_cli.py TestImportBudget); only a dead supervisor's or stopped container's line gets here
    from dapo_ops.core.ladder import resume_command, resume_settings

    return resume_command(dict({"hosts": [host], "run_id": run.get("run_id")}, **resume_settings(run.get("spec"))))


def redo_steps(step: int, checkpoint: int | None) -> int:
    """Steps a resume does again: those past the last complete checkpoint (``checkpoint``: its step, None = no
    checkpoint, the resume starts at step 1) up to the last step done, ``step``."""
    return max(0, int(step) - int(checkpoint or 0))


def redo_line(step: int, checkpoint: int | None) -> str:
    """``a resume redoes 3 steps (8-10: past the last complete checkpoint global_step_7)``; no step done and no
    checkpoint (an attempt that failed before its first step): it starts at step 1."""
    n = redo_steps(step, checkpoint)
    if not n and not checkpoint:
        return "a resume redoes no step (no step was done yet: it starts at step 1)"
    if not n:
        return "a resume redoes no step (step %s is checkpointed)" % step
    span = "step %s" % step if n == 1 else "steps %s-%s" % (step - n + 1, step)
    where = "past the last complete checkpoint global_step_%s" % checkpoint if checkpoint else "no checkpoint yet"
    return "a resume redoes %d step%s (%s: %s)" % (n, "" if n == 1 else "s", span, where)


def worker_row(row: StatusRow, head: StatusRow) -> StatusRow:
    """The row of a Ray worker host of ``head``'s multi-host run: that run (run.json lives on the head only) with its
    state, step, ETA and times from the head's record (``head``: the head's row of that run), a hint naming the head;
    ``serves`` keeps what the worker's probe said of the live session (``head_address``, ``port``), if anything.
    The head's verdict, features, metrics and suggestions stay on the head's row (shown once)."""
    out = StatusRow(
        host=row.host,
        run_id=head.run_id,
        state=head.state,
        status=head.status,
        step=head.step,
        total=head.total,
        percent=head.percent,
        eta_s=head.eta_s,
        no_step_s=head.no_step_s,
        stalled_s=head.stalled_s,
        attempt=head.attempt,
        progress_age_s=head.progress_age_s,
        stale=head.stale,
        started_at=head.started_at,
        ended_at=head.ended_at,
        ended=head.ended,
    )
    out.serves = dict(row.serves or {}, run_id=head.run_id, head=head.host)
    out.hint = "Ray worker of run %s (head %s); its record, log and verdict are the head's (`inv status -H %s`)" % (
        head.run_id,
        head.host,
        head.host,
    )
    return out


def ending_line(run: dict, step: int | None = None, total: int | None = None) -> str:
    """What ended a terminal run, for a run.json without ``decision.ended`` (written by ``inv stop`` on behalf of
    a dead supervisor, or by an older supervisor); same form as ``supervisor.record.ending_line``."""
    status = run.get("status") or RunStatus.UNKNOWN.value
    decision = run.get("decision") or {}
    step = run.get("step") if step is None else step
    total = run.get("total_steps") if total is None else total
    where = "before the first step" if step is None else "at step %s/%s" % (step, total if total else "?")
    if status == RunStatus.SUCCEEDED:
        return "succeeded %s" % where
    if status == RunStatus.STOPPED:
        return "stopped %s %s" % ("by `inv stop`" if run.get("stop") else "by the operator", where)
    verdict = run.get("verdict") or {}
    v_action = str(verdict.get("action") or "")
    reason = (
        (decision.get("reason") if decision.get("action") == "stop" else None)
        or (v_action if verdict.get("action_kind") == "stop" or v_action.startswith("stop") else None)
        or verdict.get("cls")
        or status
    )
    return "%s: %s %s" % (status, str(reason).rstrip(". "), where)


def sort_newest_first(rows: list[StatusRow]) -> list[StatusRow]:
    """Order rows by host, then by ``started_at`` (or run id) newest first."""

    def key(r: StatusRow):
        return (r.started_at or 0.0, r.run_id or "")

    by_host: dict[str, list[StatusRow]] = {}
    for r in rows:
        by_host.setdefault(r.host, []).append(r)
    out: list[StatusRow] = []
    for h in by_host:
        out.extend(sorted(by_host[h], key=key, reverse=True))
    return out
