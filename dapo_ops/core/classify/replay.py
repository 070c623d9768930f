"""The live supervisor's detectors replayed over a log after the fact (STDLIB ONLY, shipped; pure): one analyzer.

The supervisor watches an attempt as it runs (``dapo_ops/agent/supervisor/follow.py`` ``Scanner``) and calls what a
log's last lines cannot show: an error storm (:mod:`dapo_ops.core.classify.storm`). ``dapo-ops classify``,
``inv logs --errors``, the status of a run whose supervisor died and the supervisor's own end-of-attempt verdict all
read a log through :func:`dapo_ops.core.classify.classify`, which calls :func:`replay` here: the same detector
class with the same thresholds, fed every line of the (last) attempt with the log's own timestamps
(:func:`dapo_ops.core.logformat.parse_log_time`; a line without one keeps the last one seen) in place of arrival
times. A log with no timestamp at all is judged by counts (:data:`dapo_ops.core.classify.storm.COUNT_REPEATS`).
A ``step:`` line clears the counts as it does live; a storm followed by a step line was not one (training moved on).

Hook for the other detectors (divergence: the ``health`` module of dapo_ops/core, stalls:
``dapo_ops/agent/supervisor/stall.py``): each one that is pure gets a ``feed(line, t)`` / ``progress()`` pair and a
verdict builder, and is fed in :func:`replay`'s one loop beside the storm detector (see ``# detectors`` below); its
found verdict joins :class:`Replayed`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional

import dapo_ops.core.classify.storm
from dapo_ops.core.logformat import ATTEMPT_RE, parse_log_time, parse_metrics_line, parse_total, split_lines


@dataclass
class Replayed:
    """What the live detectors would have called on a log (:func:`replay`).

    Attributes:
        storm: :class:`dapo_ops.core.classify.storm.StormDetector`'s dict, or None.
        step: the last ``step:N`` of the attempt (int) or None; ``total``: the planned total read, or None.
        clocked: True when the log carries timestamps (the spans are the log's own), False when judged by counts.
    """

    storm: Optional[Dict[str, Any]] = None
    step: Optional[int] = None
    total: Optional[int] = None
    clocked: bool = False

    def verdict(self) -> Optional[Dict[str, Any]]:
        """The verdict the supervisor would have recorded (run.json form), or None when no detector called one."""
        if self.storm is not None:
            return dapo_ops.core.classify.storm.storm_verdict(self.storm, self.step, self.total)
        return None


def _last_attempt(lines: List[str]) -> List[str]:
    """The lines of the last ``===== dapo-ops attempt <k> start`` block (all lines when the log has none)."""
    start = 0
    for i, ln in enumerate(lines):
        if "dapo-ops attempt" in ln:
            m = ATTEMPT_RE.search(ln)
            if m and m.group(2) == "start":
                start = i
    return lines[start:]


def replay(text: str) -> Replayed:
    """Feed every line of the last attempt in ``text`` (a log or its tail) to the live detectors, on the log's own
    clock. Pure; never raises on any text."""
    lines = _last_attempt(split_lines(text))
    clocked = any(parse_log_time(ln) is not None for ln in lines)
    det = dapo_ops.core.classify.storm.StormDetector(
        count_repeats=None if clocked else dapo_ops.core.classify.storm.COUNT_REPEATS
    )
    out = Replayed(clocked=clocked)
    t = 0.0
    for ln in lines:
        if not ln:
            continue
        stamp = parse_log_time(ln) if clocked else None
        if stamp is not None and stamp > t:
            t = stamp
        if "step:" in ln:
            parsed = parse_metrics_line(ln)
            if parsed is not None:
                out.step = parsed[0]
                det.progress()
                out.storm = None  # training moved on after it: it was no storm
                det.storm = None
                continue
        if "otal training steps" in ln:
            total = parse_total(ln)
            if total is not None:
                out.total = total
        # detectors: the storm detector sees each line and its time here; divergence is decided from the same log by
        # decide._diverged (core/health.py), stalls need the live clock and dumps (agent/supervisor/stall.py)
        if det.storm is None:
            found = det.feed(ln, t)
            if found is not None:
                out.storm = found
    if det.storm is None:
        found = det.flush(t)
        if found is not None:
            out.storm = found
    return out
