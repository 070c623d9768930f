"""What ``watch`` prints between two looks at a host (operator side, pure): state changes, a new attempt and the
features it added, the finished line, suggestions, a Ray worker's one line (:func:`events`, :func:`worker_line`,
:func:`is_finished`); the rows themselves are :mod:`dapo_ops.control.status.rows`'s."""

from __future__ import annotations

from dapo_ops.control.status.table import fmt_duration, fmt_features
from dapo_ops.control.status.rows import (
    ERROR,
    FINISHED_STATES,
    RAY_WORKER,
    SUPERVISOR_DEAD,
    StatusRow,
    ending_line,
)
from dapo_ops.core.runstate import RunStatus


def _changes_text(changes: dict) -> str:
    """``{"token_budgets": {"actor_rollout_ref.actor.ppo_max_token_len_per_gpu": 10240}}`` ->
    ``ppo_max_token_len_per_gpu=10240`` (a rung's settings, the last key segment of each verl key)."""
    flat = []
    for k, v in (changes or {}).items():
        if isinstance(v, dict):
            flat += ["%s=%s" % (str(kk).rsplit(".", 1)[-1], vv) for kk, vv in v.items()]
        else:
            flat.append("%s=%s" % (k, v))
    return ", ".join(flat)


def _attempt_line(
    host: str,
    n,
    features: list,
    prev_features: list | None,
    after: str | None,
    rungs: list | None = None,
    prev_rungs: list | None = None,
) -> str:
    prev_names = {f["name"] for f in (prev_features or [])}
    added = [f for f in features if f["name"] not in prev_names and f.get("oom_added")]
    line = "%s: attempt %s started (features %s)" % (host, n, fmt_features(features))
    if prev_features is not None and added:
        line += "; OOM escalation: +" + ",+".join(f["name"] for f in added)
    # a setting rung of the memory ladder (run.json attempts[].setting_changes.memory_rungs); a feature rung
    # (offload, recompute) is said by the escalation above already
    new = [r for r in rungs or [] if r not in (prev_rungs or []) and r.get("rung") not in {f["name"] for f in added}]
    for r in new:
        ch = _changes_text(r.get("changes"))
        ph = r.get("phase") if r.get("phase") not in (None, "", "unknown") else None
        line += "; memory rung %s%s%s" % (r.get("rung"), " for phase %s" % ph if ph else "", " (%s)" % ch if ch else "")
    if after:
        line += "; after %s" % after
    return line


def suggestion_lines(row: StatusRow, indent: str = "  ") -> list[str]:
    """``<indent>try: <suggestion>`` lines of a failed run (``decision.suggestions``), one each."""
    return ["%stry: %s" % (indent, s) for s in row.suggestions]


def _finished_line(cur: StatusRow) -> str | None:
    if RunStatus.of(cur.state).terminal:
        line = "%s: finished: %s" % (cur.host, cur.ended or ending_line({"status": cur.state}, cur.step, cur.total))
        if cur.state == RunStatus.FAILED and cur.verdict:
            line += " (%s)" % cur.verdict
        return "\n".join([line] + suggestion_lines(cur, "%s:   " % cur.host))
    if cur.state == SUPERVISOR_DEAD:
        return "%s: %s" % (cur.host, cur.hint)
    return None


def _attempt_lines(cur: StatusRow, since: int) -> list[str]:
    """``attempt N started`` lines for the attempts after ``since`` that run.json records (``cur.attempts``)."""
    out = []
    by_n = {a["n"]: a for a in cur.attempts if isinstance(a.get("n"), int)}
    for n in sorted(k for k in by_n if k > since and k >= 2):
        prev = by_n.get(n - 1)
        out.append(
            _attempt_line(
                cur.host,
                n,
                by_n[n]["features"],
                prev["features"] if prev else None,
                prev.get("cls") if prev else None,
                by_n[n].get("rungs"),
                prev.get("rungs") if prev else None,
            )
        )
    return out


def _step_text(cur: StatusRow) -> str:
    """``step 12/30`` of a run's first line; an attempt that resumed from a checkpoint and has logged no step past it
    says so (``resumes from checkpoint step 10/30, no step of its own yet``; ``... step 10/30 without its data order
    (no data.pt: the data restarts), ...`` when run.json says so), never a step it has not made."""
    total = cur.total if cur.total is not None else "?"
    now: dict = next((a for a in cur.attempts if a.get("n") == cur.attempt), {})
    base = now.get("resumed_from")
    if isinstance(base, int) and (cur.step is None or cur.step <= base):
        # a checkpoint without verl's data.pt: the weights resume, the data order does not (checkpoints.py)
        data = " without its data order (no data.pt: the data restarts)" if now.get("data_order_restarts") else ""
        return "resumes from checkpoint step %s/%s%s, no step of its own yet" % (base, total, data)
    return "step %s/%s" % (cur.step if cur.step is not None else 0, total)


def events(prev: StatusRow | None, cur: StatusRow) -> list[str]:
    """State changes between two rows of the same run, one line each (what ``watch`` prints).

    Reports: a new run (with the attempts it already went through, so attaching late still shows each OOM
    escalation), status changes, a new attempt (OOM-added features called out as an escalation), a new verdict,
    the supervisor dying, a stale run, and the end of the run.
    """
    out: list[str] = []
    if cur.state == RAY_WORKER:  # not a run of its own: one line naming the run it serves
        same = prev is not None and prev.state == RAY_WORKER and prev.run_id == cur.run_id
        return [] if same else [worker_line(cur.host, cur.run_id, (cur.serves or {}).get("head"))]
    if prev is None or prev.run_id != cur.run_id:
        # a --run that names no run there has an id and nothing else: the "no run" line says so (a second trial
        # got "run ... None, attempt None, step 0/?" printed as if it ran)
        # the row's judged state, never run.json's word: a dead supervisor's run said "running" first, then rc 3;
        # a stopped container's (ERROR: its error is the watch's message) said "running ... step 12/30", then rc 4
        if cur.run_id and cur.status is not None and cur.state != ERROR:
            out.append(
                "%s: run %s %s, attempt %s, %s" % (cur.host, cur.run_id, cur.state, cur.attempt, _step_text(cur))
            )
            out += _attempt_lines(cur, 1)
            fin = _finished_line(cur)
            if fin:
                out.append(fin)
        return out
    if cur.attempt != prev.attempt and cur.attempt is not None:
        lines = _attempt_lines(cur, prev.attempt or 0)
        if not lines:  # run.json without per-attempt records: compare the current features
            lines = [_attempt_line(cur.host, cur.attempt, cur.features, prev.features, cur.verdict or prev.verdict)]
        out += lines
    elif cur.verdict and cur.verdict != prev.verdict:
        out.append("%s: verdict %s: %s" % (cur.host, cur.verdict, cur.hint or ""))
    if cur.state != prev.state:
        out.append(_finished_line(cur) or "%s: %s -> %s" % (cur.host, prev.state, cur.state))
    if cur.stale and not prev.stale:
        out.append("%s: no progress line for %s (stale)" % (cur.host, fmt_duration(cur.progress_age_s)))
    return out


def worker_line(host: str, run_id, head) -> str:
    """``h2: Ray worker of run <id> (head h1)``: a Ray worker host of a multi-host run (its record is on the head)."""
    return "%s: Ray worker of run %s (head %s)" % (host, run_id, head)


def is_finished(row: StatusRow) -> bool:
    """True when ``watch`` should stop: a terminal status, a dead supervisor, or no run / probe error."""
    return row.state in FINISHED_STATES
