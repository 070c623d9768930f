"""The status table's cells: a :class:`~dapo_ops.control.status.rows.StatusRow` as display strings (operator side,
pure): the columns, durations (``1h02m``), feature lists (OOM-added ones marked ``+name(source)``), metric numbers.
``inv status`` prints them (``dapo_ops/cli/status.py`` render_table), ``watch``'s lines use the same durations and
feature lists (:mod:`dapo_ops.control.status.events`)."""

from __future__ import annotations

import math

from dapo_ops.control.status.rows import ERROR, SUPERVISOR_DEAD, StatusRow, is_oom_added


def fmt_duration(seconds: float | None) -> str:
    """``3725`` -> ``1h02m``; ``95`` -> ``1m35s``; ``None`` -> ``-``."""
    if seconds is None:
        return "-"
    s = int(round(seconds))
    if s >= 86400:
        return "%dd%02dh" % (s // 86400, (s % 86400) // 3600)
    if s >= 3600:
        return "%dh%02dm" % (s // 3600, (s % 3600) // 60)
    if s >= 60:
        return "%dm%02ds" % (s // 60, s % 60)
    return "%ds" % s


def fmt_num(v: float, unit: str = "") -> str:
    """A metric with an SI suffix and its unit, three significant digits: ``44620`` -> ``44.6k``,
    ``(44620, "tok/s")`` -> ``44.6k tok/s``, ``1.5e6`` -> ``1.5M``, ``812.0`` -> ``812``, ``0.25`` -> ``0.25``."""
    if not math.isfinite(v):
        text = str(v)
    else:
        text = "%.3g" % v
        for div, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
            if abs(v) >= div * 0.9995:
                text = ("%.3g" % (v / div)) + suffix
                break
    return "%s %s" % (text, unit) if unit else text


def fmt_features(features: list, rungs: list | None = None) -> str:
    """``flash_attn,dynamic_batch,+offload(oom-retry-1)``: OOM-added features get ``+`` and their source; features
    the plan started on for memory (source ``learned``: a learned start, ``estimate``: the memory fit's start rung,
    core/features.py) show their source, so they do not read like ones the user or the defaults asked for.

    ``rungs``: the memory rungs the attempt runs with (run.json ``attempts[].setting_changes.memory_rungs``): a
    setting rung (``update-batch``, ``rollout-util``, ...) follows in the same form, ``+update-batch(oom-retry-2)``
    for the OOM ladder's, ``rollout-util(learned)`` for a start's; a feature rung is its feature's entry already (a
    trial's status showed only ``offload(learned)`` on an attempt that ran two ladder rungs)."""
    parts = []
    for f in features:
        if f.get("oom_added"):
            parts.append("+%s(%s)" % (f["name"], f["source"]))
        elif f.get("source") in ("learned", "estimate"):
            parts.append("%s(%s)" % (f["name"], f["source"]))
        else:
            parts.append(str(f.get("name")))
    names = {f.get("name") for f in features}
    for r in rungs or []:
        if r.get("rung") in names:
            continue
        src = str(r.get("source") or "")
        parts.append("%s%s(%s)" % ("+" if is_oom_added(src) else "", r.get("rung"), src or "ladder"))
    return ",".join(dict.fromkeys(parts)) or "-"


def attempt_rungs(row: StatusRow) -> list:
    """The memory rungs the row's current attempt runs with (its ``attempts`` entry's ``rungs``), [] when unknown."""
    now = next((a for a in row.attempts if a.get("n") == row.attempt), None)
    return list((now or {}).get("rungs") or [])


COLUMNS = (
    "host",
    "run",
    "state",
    "step",
    "eta",
    "attempt",
    "features",
    "score",
    "resp_len",
    "tput",
    "verdict",
    "age",
    "swanlab",
)
#: column headers: what each number is, with its unit (verl/trainer/ppo/metric_utils.py: ``perf/throughput`` is
#: tokens per second per device, ``response_length/mean`` tokens)
HEADERS = {"resp_len": "resp len", "tput": "tput/device", "age": "last step"}
#: the block view's labels (one block per run on a narrow terminal)
LABELS = {"eta": "ETA", "resp_len": "resp len", "tput": "throughput/device", "age": "last step", "step": "step"}


def _clock(t: float) -> str:
    """``HH:MM:SS`` (local time) of an epoch time."""
    import time

    return time.strftime("%H:%M:%S", time.localtime(t))


def cells(row: StatusRow) -> dict[str, str]:
    """Display strings for the status table (keys: :data:`COLUMNS`)."""
    step = "-"
    if row.step is not None:
        step = "%s/%s" % (row.step, row.total if row.total is not None else "?")
        if row.percent is not None:
            step += " (%d%%)" % int(row.percent)
    state = row.state
    if row.stale:
        state += " STALE"
    m = row.metrics
    # the class and its cause: a full disk and a refused write are both crash-other, their cause tells which
    shown = "%s (%s)" % (row.verdict, row.verdict_cause) if row.verdict and row.verdict_cause else row.verdict
    verdict = shown or "-"
    if row.hint:
        verdict = "%s: %s" % (verdict, row.hint) if shown else row.hint
    if row.error:
        verdict = row.error
    return {
        "host": row.host,
        "run": row.run_id or "-",
        "state": state,
        "step": step,
        "eta": eta_text(row),
        "attempt": "-" if row.attempt is None else str(row.attempt),
        "features": fmt_features(row.features, attempt_rungs(row)),
        "score": (fmt_num(m["critic/score/mean"]) if "critic/score/mean" in m else "-")
        + (" (val %s @%d)" % (fmt_num(row.validation["score"]), row.validation["step"]) if row.validation else ""),
        "resp_len": fmt_num(m["response_length/mean"], "tok") if "response_length/mean" in m else "-",
        "tput": tput_text(row),
        "verdict": verdict,
        "age": age(row) + ("!" if row.stale else ""),
        "swanlab": row.swanlab_url or "-",
    }


def mfu_text(row: StatusRow) -> str | None:
    """``MFU actor 31.2%`` (verl's ``perf/mfu/actor``: the actor update) or ``MFU step 12.5%`` (computed: 6 x params
    x tokens/s/device / peak, :mod:`dapo_ops.core.mfu`); None when the row has neither."""
    f = row.mfu or {}
    v = f.get(f.get("shown") or "")
    return "MFU %s %s%%" % (f["shown"], "%.3g" % (100.0 * v)) if isinstance(v, (int, float)) else None


def tput_text(row: StatusRow, per: str = "") -> str:
    """The ``tput/device`` cell: verl's ``perf/throughput`` (tokens/s/device) and :func:`mfu_text`:
    ``919 tok/s, MFU actor 0.00307%``; ``per`` follows the unit (``/device`` in the one-line summary)."""
    m = row.metrics
    parts = [fmt_num(m["perf/throughput"], "tok/s") + per] if "perf/throughput" in m else []
    if mfu_text(row):
        parts.append(str(mfu_text(row)))
    return ", ".join(parts) or "-"


def swanlab_text(url: str) -> str:
    """What a row's SwanLab value (run.json ``swanlab_url``, :class:`dapo_ops.core.logformat.LinkScanner`) tells the
    operator, after the word ``swanlab``: a cloud run's link as it is; an offline run's ``swanlab sync <dir>`` and a
    local run's ``swanlab watch <dir>`` as what to do with them, the command whole and copyable (a new user's trial:
    ``inv status`` printed ``swanlab swanlab sync <dir>``)."""
    for cmd, what in (("swanlab sync ", "offline run, upload it with"), ("swanlab watch ", "local run, view it with")):
        if url.startswith(cmd):
            return "%s `%s`" % (what, url)
    return url


def age(row: StatusRow) -> str:
    """The ``last step`` cell: how long ago the last step came (``2m05s ago``); a run that reached no step says so
    and since when its attempt runs (``no step yet (started 5m00s ago)``; ended: ``no step (started ...)``), never
    a step age it does not have (a new user's trial: ``5m00s ago`` under ``last step`` before the first step; a
    multi-host run's ``0/8 ... 1s ago``: step 0 is no step)."""
    if row.progress_age_s is None:
        return "-"
    ago = fmt_duration(row.progress_age_s) + " ago"
    if row.step:  # verl's first step is 1 (verl/trainer/ppo/ray_trainer.py:1426,1451: global_steps = 0, then += 1
        return ago  # before the loop): step 0 (a multi-host head's run.json before its first step line) is no step
    return "no step%s (started %s)" % (" yet" if row.run_status.active else "", ago)


def eta_text(row: StatusRow) -> str:
    """The ETA cell: ``stalled 40s (last step 14:03:27)`` past the supervisor's limit, ``no step for 12s`` past what
    the step time explains (``rows._no_eta_when_idle``), ``saving checkpoint step 20 for 3m`` while verl saves
    (``rows.save_in_flight``), else the ETA (``-`` when none)."""
    if row.stalled_s is not None:
        last = " (last step %s)" % _clock(row.last_step_at) if row.last_step_at else ""
        return "stalled %s%s" % (fmt_duration(row.stalled_s), last)
    if row.no_step_s is not None:
        return "no step for %s" % fmt_duration(row.no_step_s)
    if row.saving_step is not None:
        took = " for %s" % fmt_duration(row.saving_s) if row.saving_s is not None else ""
        return "saving checkpoint step %d%s" % (row.saving_step, took)
    return fmt_duration(row.eta_s)


def summary_line(row: StatusRow) -> str | None:
    """One line for a live run, whole run id first (copyable for ``--run`` / ``--resume``): ``h1 <run id>: running,
    step 5/10 (50%), ETA 55s, 44.6k tok/s/device, MFU actor 31.2%``; None for a row that is not an active run."""
    if not row.run_id or not row.run_status.active or row.state in (ERROR, SUPERVISOR_DEAD):
        return None
    c = cells(row)
    parts = [c["state"]]
    if row.step is not None:
        parts.append("step " + c["step"])
    if row.eta_s is not None:
        parts.append("ETA " + c["eta"])
    elif row.stalled_s is not None or row.no_step_s is not None or row.saving_step is not None:
        parts.append(c["eta"])  # no ETA, and why
    if "perf/throughput" in row.metrics or row.mfu:
        parts.append(tput_text(row, "/device"))
    return "%s %s: %s" % (row.host, row.run_id, ", ".join(parts))
