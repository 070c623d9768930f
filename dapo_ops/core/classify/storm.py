"""Error storms: the same exception again and again while training does not move (STDLIB ONLY, shipped; pure).

One rule, two readers: the live supervisor feeds every line of the attempt with its arrival time
(``dapo_ops/agent/supervisor/follow.py`` ``Scanner``); :func:`dapo_ops.core.classify.classify` replays a finished
log through the same :class:`StormDetector` (:mod:`dapo_ops.core.classify.replay`) with the log's own timestamps
(:func:`dapo_ops.core.logformat.parse_log_time`), or, in a log without any, by :data:`COUNT_REPEATS` alone.

verl 0.9.1 catches a failing agent-loop session and re-queues its prompt group: ``AgentLoopWorkerTQ._run_prompt``
logs ``Error in _run_prompt for uid=...`` with the traceback (``verl/trainer/ppo/v1/agent_loop_tq.py:133-146``) and
tags the group ``failure``; the replay buffer hands it out again. A reward function that raises
(``reward.custom_reward_function.path``; ``verl/experimental/reward_loop/reward_loop.py:148`` ->
``reward_manager/dapo.py:84-86``, called through ``agent_loop.py:1026`` ``_compute_score``) therefore fails for
ever: on the H200, 13,984 identical tracebacks in 8 minutes, no step, no exit.

:class:`StormDetector` reads every line of the attempt (the supervisor's scanner feeds it), cuts Python tracebacks
out of it per Ray source (:class:`dapo_ops.core.logformat.TracebackReader`; one reader per ``pid=`` prefix, so
interleaved workers never mix) and counts each (innermost exception type, innermost frame). A ``step:`` line
clears the counts. A storm is called when one key repeats

- :data:`MIN_REPEATS` times over at least :data:`MIN_SPAN_S` seconds (a fast retry loop), or
- :data:`SLOW_REPEATS` times over at least :data:`SLOW_SPAN_S` seconds (a loop that regenerates before each try),

with no step in between. Measured on every log we hold (``bench/storm.py --healthy``; tests/fixtures/real-verl:
the 8 H200 runs and the tool runs, the 35 public reports of tests/cases): the most repeats of one key without a
step in a healthy or crashed log is far below :data:`SLOW_REPEATS`, and every burst of them (one traceback per rank
of a crash) spans under a second, so both spans exclude it; warnings that repeat harmlessly (tracker retries,
Ray's ``[repeated Nx across cluster]`` notes, verl's noisy warnings) are not tracebacks and never count. The H200
storm (29 tracebacks/s) is called :data:`MIN_SPAN_S` seconds after its first traceback.

The verdict names the innermost frame outside verl, Ray, torch, vLLM and the standard library (:func:`user_frame`):
the user's file and line (``bad_reward.py:5``).

Fatal repeats (the live supervisor only: it passes ``fatal_of``): a line of one of the classifier's fatal root-cause
signatures (:func:`dapo_ops.core.classify.logtail.fatal_signature`) that one process prints again and again with no
step in between, under the same two rules, is a process stuck in that error while it runs: Ray's GCS client retries
an unreachable head for ever (``Failed to connect to GCS at address ...`` every 35 s in
tests/cases/handed/case-31-ray-gcs-connect-timeout.log, every 5 s from the sandbox stand-in's ``network`` cue),
which is no traceback and never exits. Counted per Ray source and class, so that one warning printed once by each
rank (an offline hub lookup at start-up, tests/cases/variants/v-oom-device-after-hub-warning-first-step.log) never
adds up; one match alone never stops a run (the classifier's own precedence notes that network lines are often a
warning before the real failure). The verdict is the classifier's over the whole log (class, address, policy), not
``error-storm``; the replay of a finished log does not count them, since the classifier names the same error there.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from dapo_ops.core import policy
from dapo_ops.core.classify.hints import RESUME_CMD, action_text
from dapo_ops.core.logformat import RAY_PREFIX_RE, Traceback, TracebackReader, strip_ansi, strip_prefixes

#: a fast storm: this many tracebacks of one key ...
MIN_REPEATS = 50
#: ... spread over at least this many seconds (a crash's per-rank burst is over within a second)
MIN_SPAN_S = 10.0
#: a slow storm (each retry regenerates first): this many ...
SLOW_REPEATS = 10
#: ... over at least this many seconds (called within 2 minutes of the first traceback at >= 1 per 6 s)
SLOW_SPAN_S = 60.0
#: a log with no timestamp at all (replayed after the fact): this many tracebacks of one key with no step between,
#: by count alone; above one traceback per rank of a crash burst on any fleet we drive (16 hosts x 16 devices)
COUNT_REPEATS = 300
#: keys / sources kept at most (a log of ever-new tracebacks must not grow the supervisor's memory)
MAX_KEYS = 256
#: framework path parts: a frame whose path holds one is verl's, Ray's, torch's, vLLM's or the interpreter's
_LIB_RE = re.compile(r"(?:site-packages|dist-packages)/|/lib/python\d+(?:\.\d+)?/|^<frozen |^<string>")
#: verl's own packages (a source checkout such as /verl/verl/...: 0.9.1's top-level subpackages)
_VERL_SRC_RE = re.compile(
    r"(?:^|/)verl/(?:experimental|trainer|workers|utils|single_controller|models|"
    r"checkpoint_engine|third_party|interactions|tools|model_merger|protocol\.py|"
    r"base_config\.py)"
)
_FRAMEWORK_NAMES = re.compile(
    r"(?:^|/)(?:ray|torch|torch_npu|vllm|vllm_ascend|sglang|megatron|transformers|"
    r"tensordict|asyncio|concurrent)/"
)


def is_framework(path: str) -> bool:
    """True when a traceback frame's ``path`` is verl, Ray, torch, vLLM, an installed package or the stdlib, not the
    user's code (``/verl/gpu/bad_reward.py`` is the user's: ``gpu`` is no verl package)."""
    return bool(_LIB_RE.search(path) or _VERL_SRC_RE.search(path) or _FRAMEWORK_NAMES.search(path))


def user_frame(frames: Sequence[Tuple[str, int, str]]) -> Optional[Tuple[str, int, str]]:
    """The innermost frame outside the framework (:func:`is_framework`), or None."""
    for f in reversed(frames):
        if not is_framework(f[0]):
            return f
    return None


def where(frame: Optional[Tuple[str, int, str]]) -> Optional[str]:
    """``bad_reward.py:5`` of a ``(path, line, func)`` frame."""
    return "%s:%d" % (frame[0].rsplit("/", 1)[-1], frame[1]) if frame else None


class StormDetector:
    """Counts repeated tracebacks of one attempt; :meth:`feed` returns the storm (a dict, once) when one is called.

    ``feed(raw_line, t)``: one line as verl wrote it (ANSI and Ray prefixes are handled here), ``t`` its arrival
    time (seconds). :meth:`progress` is called on a ``step:`` line. The storm dict: ``exc``, ``message``,
    ``count``, ``first_at``, ``span_s``, ``frame`` (innermost, ``file:line``), ``user_frame`` (``file:line`` or
    None), ``user_path``, ``user_func``, ``evidence`` (the traceback's last frames and its exception line)."""

    def __init__(
        self,
        min_repeats: int = MIN_REPEATS,
        min_span_s: float = MIN_SPAN_S,
        slow_repeats: int = SLOW_REPEATS,
        slow_span_s: float = SLOW_SPAN_S,
        count_repeats: Optional[int] = None,
        fatal_of: Optional[Callable[[str], Any]] = None,
    ):
        """``count_repeats``: also call a storm after this many repeats whatever their span (only for a log with no
        clock: :mod:`dapo_ops.core.classify.replay` passes :data:`COUNT_REPEATS`; the live supervisor never).
        ``fatal_of(raw_line)``: the classifier's fatal root-cause signature of a line, or None
        (:func:`dapo_ops.core.classify.logtail.fatal_signature`; the live supervisor passes it): such lines are
        counted too, per Ray source and class, under the same rules, and a call is a *fatal repeat* (the dict's
        ``fatal`` true; see :meth:`_fatal`)."""
        rules = [(int(min_repeats), float(min_span_s)), (int(slow_repeats), float(slow_span_s))]
        if count_repeats is not None:
            rules.append((int(count_repeats), 0.0))
        self.rules = tuple(rules)
        self.fatal_of = fatal_of
        self.readers: Dict[str, TracebackReader] = {}
        self.counts: Dict[Tuple[str, str, Any], List[Any]] = {}
        self.storm: Optional[Dict[str, Any]] = None
        self.tracebacks = 0  # seen in this attempt (all keys)

    def progress(self) -> None:
        """A step went by: nothing before it is a storm."""
        self.counts.clear()

    def feed(self, raw: str, t: float) -> Optional[Dict[str, Any]]:
        if self.storm is not None:
            return None
        if self.fatal_of is not None:
            sig = self.fatal_of(raw)
            # a fatal line inside a traceback its source is printing is that traceback's (its exception line): the
            # traceback count decides (a reward function's FileNotFoundError / MemoryError storm stays error-storm
            # naming the user's frame, a review); and a line not (yet) a repeat goes on to the traceback reader
            if sig is not None and _source(strip_ansi(raw)) not in self.readers:
                called = self._fatal(sig, raw, t)
                if called is not None:
                    return called
        if not self.readers and "Traceback (most" not in raw:
            return None  # the common line: no block open anywhere, none starting
        line = strip_ansi(raw)
        src = _source(line)
        line = strip_prefixes(line)
        rd = self.readers.get(src)
        if rd is None:
            if not line.startswith("Traceback (most"):
                return None
            if len(self.readers) >= MAX_KEYS:
                self.readers.clear()
            rd = self.readers[src] = TracebackReader()
        tb = rd.feed(line)
        if rd.frames is None:
            del self.readers[src]  # block over (or none began): the fast path again
        return self._count(tb, t) if tb is not None else None

    def flush(self, t: float) -> Optional[Dict[str, Any]]:
        """End of the attempt's output: count what is still open."""
        out = None
        for rd in list(self.readers.values()):
            tb = rd.flush()
            if tb is not None and out is None and self.storm is None:
                out = self._count(tb, t)
        self.readers.clear()
        return out

    def _tally(self, key: Tuple[str, str, Any], t: float) -> Optional[Tuple[int, float, float]]:
        """One more of ``key`` at ``t``: ``(count, first_at, span_s)`` once a rule holds, else None."""
        c = self.counts.get(key)
        if c is None:
            if len(self.counts) >= MAX_KEYS:
                self.counts.clear()
            c = self.counts[key] = [0, t]
        c[0] += 1
        span = t - c[1]
        if not any(c[0] >= n and span >= s for n, s in self.rules):
            return None
        return c[0], c[1], span

    def _count(self, tb: Traceback, t: float) -> Optional[Dict[str, Any]]:
        self.tracebacks += 1
        inner = tb.frames[-1]
        called = self._tally((tb.exc, inner[0], inner[1]), t)
        if called is None:
            return None
        uf = user_frame(tb.frames)
        ev = ['File "%s", line %d, in %s' % f for f in tb.frames[-4:]]
        ev.append("%s: %s" % (tb.exc, tb.message) if tb.message else tb.exc)
        self.storm = {
            "exc": tb.exc,
            "message": tb.message,
            "count": called[0],
            "first_at": called[1],
            "span_s": round(called[2], 1),
            "frame": where(inner),
            "user_frame": where(uf),
            "user_path": uf[0] if uf else None,
            "user_func": uf[2] if uf else None,
            "evidence": ev,
        }
        return self.storm

    def _fatal(self, sig: Any, raw: str, t: float) -> Optional[Dict[str, Any]]:
        """A line of the classifier's fatal signature ``sig`` (``.name``, ``.cls``), counted per Ray source (one
        process retrying, never one line per rank) and class (Ray's GCS loop alternates two rows,
        tests/cases/handed/case-31-ray-gcs-connect-timeout.log). The dict when called: ``fatal`` (True), ``cls``,
        ``signature``, ``source``, ``count``, ``first_at``, ``span_s``, ``line``, ``evidence``. Its verdict is the
        classifier's over the whole log (``dapo_ops/agent/supervisor/escalate.py`` ``attempt_verdict``)."""
        line = strip_ansi(raw)
        src = _source(line)
        called = self._tally(("fatal", src, sig.cls), t)
        if called is None:
            return None
        text = strip_prefixes(line).strip()[:300]
        self.storm = {
            "fatal": True,
            "cls": sig.cls,
            "signature": sig.name,
            "source": src,
            "count": called[0],
            "first_at": called[1],
            "span_s": round(called[2], 1),
            "line": text,
            "evidence": [text],
        }
        return self.storm


def _source(line: str) -> str:
    """Which process wrote ``line`` (ANSI stripped): its Ray prefix's pid, ``raylet``, or ``-`` (the driver)."""
    m = RAY_PREFIX_RE.match(line)
    return (m.group("pid") or "raylet") if m else "-"


def repeats_without_progress(lines: Iterable[str], step_of: Callable[[str], object]) -> Dict[Tuple[str, str, int], int]:
    """Measurement helper (bench/storm.py, tests): for a whole log (``lines``), the most tracebacks of each key seen
    between two steps (``step_of(line)`` is not None on a step line). Pure; no clock."""
    det = StormDetector(min_repeats=10**9, slow_repeats=10**9)
    best: Dict[Tuple[str, str, int], int] = {}

    def keep() -> None:
        for k, c in det.counts.items():
            best[k] = max(best.get(k, 0), c[0])

    for raw in lines:
        if step_of(raw) is not None:
            keep()
            det.progress()
        det.feed(raw, 0.0)
    det.flush(0.0)
    keep()
    return best


def storm_verdict(found: Dict[str, Any], step: Optional[int], total: Optional[int]) -> Dict[str, Any]:
    """The same exception repeated with no step in between (``found``: :class:`StormDetector`'s dict): the attempt
    was (or, read after the fact, would have been) stopped; class ``error-storm`` (stop: the same code fails again;
    ``dapo_ops/core/policy.py``). Returns the verdict as run.json stores it (``cls``, ``action_kind``, ``action``,
    ``hint``, ``evidence``, ``detail``): the live supervisor records it, the classifier returns it as a Verdict."""
    at = found.get("user_frame") or found.get("frame")
    who = (
        "in your code at %s (%s)" % (at, found.get("user_path"))
        if found.get("user_frame")
        else "at %s (inside the framework: no frame of your own code)" % at
    )
    msg = (": %s" % found["message"][:120]) if found.get("message") else ""
    detail = {"step": step, "total": total}
    detail.update(
        (k, found.get(k))
        for k in ("exc", "message", "count", "span_s", "frame", "user_frame", "user_path", "user_func")
    )
    return {
        "cls": "error-storm",
        "action_kind": policy.kind("error-storm", detail).value,
        "action": "%s%s raised %d times in %.0f s with no training step, %s: attempt stopped; %s"
        % (
            found.get("exc"),
            msg,
            found.get("count") or 0,
            found.get("span_s") or 0,
            who,
            action_text("error-storm", {}),
        ),
        "hint": "verl catches the exception and retries the same work for ever (a failing session's prompt group is "
        "re-queued: verl/trainer/ppo/v1/agent_loop_tq.py:133-146). Fix %s (a custom reward function: "
        "reward.custom_reward_function.path; it must return a score for every sample), then a resume continues from the "
        "last checkpoint (%s)." % (at or "the code in the evidence", RESUME_CMD),
        "evidence": list(found.get("evidence") or []),
        "detail": detail,
    }
