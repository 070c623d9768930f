"""Follow one attempt's log as it grows: copy it into train.log, read what verl says (STDLIB ONLY, shipped).

verl's stdout+stderr go to ``<run_dir>/attempt-<k>.log``; the supervisor reads that file incrementally (a kept
offset, never re-read), copies the bytes into ``train.log`` between ``===== dapo-ops attempt k start/end``
delimiter lines and splits them into lines at ``\\r`` or ``\\n`` (tqdm redraws with ``\\r``). Each line goes
through the one verl-log grammar (:mod:`dapo_ops.core.logformat`: ``step:N - k:v`` metrics, ``Total training
steps``, resume and save lines, SwanLab's link) and the per-line device-OOM check
(:func:`dapo_ops.core.classify.is_device_oom_line`). :func:`follow` is the loop that decides when an attempt
is stopped: it exited, the operator stopped the run, ``oom_grace_s`` seconds after an OOM line (the other ranks
hang in a collective), or no progress for ``hang_timeout_s`` seconds.
"""

from __future__ import annotations

import codecs
import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Literal, Optional, Union

from dapo_ops.agent.supervisor import logcap, record, stall
from dapo_ops.agent.supervisor.record import iso, log, now
from dapo_ops.core import defaults, health
from dapo_ops.core.classify import storm
from dapo_ops.core.classify.logtail import fatal_signature
from dapo_ops.core.logformat import (
    LinkScanner,
    REPORT_END_MARK,
    is_validation_only,
    parse_metrics_line,
    parse_resume,
    parse_save,
    SWANLAB_SYNC,
    parse_swanlab_url,
    parse_total,
    strip_ansi,
)

#: bytes read from the attempt log per call
READ_BYTES = 8 << 20
#: a line without an end longer than this (characters) is scanned anyway; the rest continues the next one
MAX_PARTIAL = 1 << 20


class TrainLog:
    """``<run_dir>/train.log``: every attempt's output, appended, between delimiter lines; verl's output passes
    through the growth bound (:class:`.logcap.LogCap`; ``cap`` = its keyword arguments, ``on_cap(info)`` once). A
    failed write (a full disk) never raises: ``on_error(path, err)`` hears of it (``diskspace.DiskWatch.note``), else
    it is logged."""

    def __init__(
        self,
        path: str,
        cap: Optional[Dict[str, Any]] = None,
        on_cap: Optional[Callable[[Dict[str, Any]], None]] = None,
        on_error: Optional[Callable[[str, BaseException], Any]] = None,
    ):
        self.path = path
        self.fh = open(path, "ab")
        self._nl = True  # the last byte written ends a line
        self.on_error = on_error
        self.cap = logcap.LogCap(self._raw, now, on_cap=on_cap, **(cap or {}))

    def _raw(self, data: bytes) -> None:
        if self.fh is not None and data:
            try:
                self.fh.write(data)
                self.fh.flush()
            except OSError as e:
                if self.on_error is None or not self.on_error(self.path, e):
                    log("could not write %s: %s" % (self.path, e))
                return
            self._nl = data.endswith(b"\n")

    def write(self, data: bytes) -> None:
        if data:
            self.cap.feed(data)

    def start(self, k: int, names: List[str]) -> None:
        self.cap.end()
        self._raw(("===== dapo-ops attempt %d start %s features=%s =====\n" % (k, iso(), ",".join(names))).encode())

    def end(self, k: int, exit_code: Optional[int], cls: Optional[str]) -> None:
        self.cap.end()
        self._raw(
            (b"" if self._nl else b"\n")
            + ("===== dapo-ops attempt %d end exit=%s class=%s =====\n" % (k, exit_code, cls or "-")).encode()
        )

    def close(self) -> None:
        self.cap.end()
        try:
            self.fh.close()
        except OSError:  # the last buffered bytes on a full disk
            pass


class LinkFinder:
    """SwanLab's run link (or local/offline ``swanlab watch|sync`` command) from the output, once:
    :class:`dapo_ops.core.logformat.LinkScanner` (it knows the run's ``SWANLAB_RUN_ID`` / ``SWANLAB_LOG_DIR``), else
    :func:`dapo_ops.core.logformat.parse_swanlab_url`."""

    def __init__(self, env: Dict[str, Any]):
        self.env = dict(env or {})
        self._scanner: Union[LinkScanner, None, Literal[False]] = None

    def _get(self) -> Union[LinkScanner, Literal[False]]:
        if self._scanner is None:
            try:
                self._scanner = LinkScanner(self.env.get("SWANLAB_RUN_ID"), self.env.get("SWANLAB_LOG_DIR"))
            except (ImportError, AttributeError):
                self._scanner = False
        return self._scanner

    def pending(self) -> bool:
        """The scanner saw the start of a link that continues on the next lines."""
        sc = self._scanner
        return bool(sc) and bool(getattr(sc, "pending", False))

    def feed(self, line: str) -> Optional[str]:
        sc = self._get()
        if sc:
            try:
                return sc.feed(line)
            except Exception:  # noqa: BLE001 - a parser problem never stops supervision
                self._scanner = False
        return parse_swanlab_url(line)


class Scanner:
    """Reads complete lines of attempt ``att`` into the run record ``rec``: OOM, metrics, totals, resume, save,
    SwanLab link. ``oom_line`` / ``oom_at`` (seconds since the epoch): the first device-OOM line and when it was
    seen. ``on_link(url)`` is called once with the link."""

    def __init__(
        self,
        rec: Dict[str, Any],
        att: Dict[str, Any],
        writer: record.RecordWriter,
        links: LinkFinder,
        on_link: Callable[[str], None],
        is_oom: Callable[[str], bool],
        tun: Optional[Dict[str, float]] = None,
        hang_timeout_s: float = float(defaults.SPEC["hang_timeout_s"]),
        learned_timing: Optional[Dict[str, Any]] = None,
        settings: Optional[Dict[str, Any]] = None,
        counters: Optional[stall.CounterWatch] = None,
        watch: Optional[health.HealthWatch] = None,
    ):
        self.rec, self.att, self.writer, self.links = rec, att, writer, links
        self.on_link, self.is_oom = on_link, is_oom
        self.link_seen = False  # this attempt's SwanLab link was found
        self.oom_line: Optional[str] = None
        self.oom_at: Optional[float] = None
        # when the driver's failure report ended after the OOM line (logformat.REPORT_END_MARK): its frames, which
        # tell the phase, are in the log; a worker's own line (torch_npu's PTA code) comes before the report
        self.oom_report_at: Optional[float] = None
        tun = tun or {}
        self.storms = storm.StormDetector(
            min_span_s=tun.get("storm_min_span_s", storm.MIN_SPAN_S),
            slow_span_s=tun.get("storm_slow_span_s", storm.SLOW_SPAN_S),
            fatal_of=fatal_signature,
        )
        # the storm called (storm.StormDetector's dict): an error storm, or a fatal error repeating (its "fatal")
        self.storm: Optional[Dict[str, Any]] = None
        self.step_s: List[float] = []  # this attempt's step durations (s), the first one (warm-up) included
        self._step_at: Optional[float] = None
        self.hang_timeout_s = float(hang_timeout_s)
        self.clock = stall.StepClock(
            learned_timing,
            float(tun.get("stall_factor", stall.STALL_FACTOR)),
            float(tun.get("stall_floor_s", stall.STALL_FLOOR_S)),
            self.hang_timeout_s,
        )
        self.settings = dict(settings or {})
        self.counters = counters
        # None before the attempt's first step unless a run of this configuration left its timings
        self.stall_after_s: Optional[float] = self.clock.limit(None, None, self.settings)
        if self.stall_after_s is not None:
            rec["stall_after_s"] = self.stall_after_s
        self.stall_basis = self.clock.basis(self.stall_after_s)  # what the limit is made of (the verdict's words)
        self.idle_s: Optional[float] = None  # a stall: seconds without a step (or output) when it was called
        self.stall_by: Optional[str] = None  # what called it: "silence", "no-step" or "counters"
        self.health = watch if watch is not None else health.HealthWatch()  # the run's, across attempts
        self.bad: Optional[health.Flag] = None  # the first bad training metric of this attempt (core/health.py)
        self.saving: Optional[int] = None  # the step whose checkpoint save verl started and has not finished

    def _on_step(self, step: int, metrics: Dict[str, float], t: float) -> None:
        """A step line: its duration (``timing_s/step``, else the time since the previous step line; the first
        step of the attempt is measured from the attempt's start), what the clock learns from its phases and the
        stall threshold that gives for the next step. The line of the validation before training
        (:func:`dapo_ops.core.logformat.is_validation_only`) is progress but not a step: step 1's interval spans it.
        A save in flight (:meth:`_on_save`) ends with it."""
        self.saving = None
        self.storms.progress()
        if self.counters is not None:
            self.counters.progress()
        if is_validation_only(metrics):
            return
        interval = t - (self._step_at if self._step_at is not None else self.att.get("started_at", t))
        st = metrics.get("timing_s/step")
        self._step_at = t
        self.step_s.append(float(st if st is not None else interval))
        self.clock.observe(metrics, interval)
        self.stall_after_s = self.clock.limit(step + 1, self.rec.get("total_steps"), self.settings)
        self.stall_basis = self.clock.basis(self.stall_after_s)
        self.rec["stall_after_s"] = self.stall_after_s

    def _on_save(self, step: int, t: float) -> None:
        """verl started saving the checkpoint of ``step`` (:func:`dapo_ops.core.logformat.parse_save`); that step's
        line ends it (verl logs the step's metrics after the save, verl/trainer/ppo/v1/trainer_base.py:481-514).
        run.json's attempt gets ``saved_step`` (a save started; complete = on disk: latest_checkpoint) and
        ``save_started_at`` (``inv status`` says "saving checkpoint step N for ..." until the step line). A save is
        no stall: the limit gets the step's save allowance (:meth:`.stall.StepClock.save_limit`) and the counters
        hold (:meth:`.stall.CounterWatch.hold`)."""
        self.att["saved_step"], self.att["save_started_at"] = step, t
        self.saving = step
        lim = self.clock.save_limit(step, self.rec.get("total_steps"), self.settings)
        if lim is not None and self.stall_after_s is not None and lim > self.stall_after_s:
            self.stall_after_s = self.rec["stall_after_s"] = lim
            self.stall_basis = self.clock.basis(lim)
        if self.counters is not None:
            self.counters.hold()
        self.writer.dirty = True

    def _on_health(self, flag: Optional[health.Flag]) -> None:
        """After a step line or a skip print: run.json ``health.trend`` (what ``inv status`` shows) and, the first
        time a metric goes bad, :attr:`bad` (:func:`follow` then stops the attempt: ``"diverged"``)."""
        trend = self.health.trend()
        if trend is not None:
            self.rec.setdefault("health", {})["trend"] = trend
        if flag is not None and self.bad is None:
            self.bad = flag
            self.rec.setdefault("health", {})["flag"] = flag.to_json()
            log("training metrics went bad in attempt %d: %s" % (self.att["n"], flag.words()))

    def _on_storm(self, found: Optional[Dict[str, Any]]) -> None:
        """The storm detector called one (``found``, else None): kept in :attr:`storm` and said in supervisor.log."""
        if found is None:
            return
        self.storm = found
        if found.get("fatal"):
            log(
                "fatal %s error repeating in attempt %d: x%d in %.0f s with no step: %s"
                % (found["cls"], self.att["n"], found["count"], found["span_s"], found["line"][:200])
            )
            return
        log(
            "error storm in attempt %d: %s x%d in %.0f s at %s (user code: %s)"
            % (self.att["n"], found["exc"], found["count"], found["span_s"], found["frame"], found["user_frame"])
        )

    def _wants_link(self) -> bool:
        """This attempt still looks for SwanLab's link: the run has none yet, or it is an offline run's
        ``swanlab sync`` command, to which each attempt adds its own directory
        (:func:`dapo_ops.core.logformat.join_swanlab_links`)."""
        url = self.rec.get("swanlab_url")
        return not self.link_seen and (not url or str(url).startswith(SWANLAB_SYNC))

    def scan(self, lines: List[str]) -> None:
        rec, att = self.rec, self.att
        t = now()
        for line in lines:
            if not line:
                continue
            if "step:" in line:
                parsed = parse_metrics_line(line)
                if parsed is not None:
                    record.on_step(rec, att, parsed[0], parsed[1])
                    self._on_step(parsed[0], parsed[1], t)
                    self._on_health(self.health.feed(parsed[0], parsed[1]))
                    self.writer.dirty = True
            if "finite" in line or "step failed" in line:  # verl's skipped update (core/health.py SKIP_MARKS)
                self._on_health(self.health.feed_line(line))
            if self.storm is None:
                self._on_storm(self.storms.feed(line, t))
            total = parse_total(line)
            if total is not None:
                rec["total_steps"] = total
                self.writer.dirty = True
            resumed = parse_resume(line)
            if resumed is not None:
                att["resumed_from"] = resumed
                self.writer.dirty = True
            saved = parse_save(line)
            if saved is not None:
                self._on_save(saved, t)
            if self._wants_link() and ("View run" in line or "swanlab" in line or self.links.pending()):
                url = self.links.feed(line)
                if url:
                    self.link_seen = True
                    self.on_link(url)
            self._watch_oom(line, att)

    def _watch_oom(self, line: str, att: Dict[str, Any]) -> None:
        """The attempt's first device-OOM line (``oom_line`` / ``oom_at``), then the end of the driver's failure
        report after it (``oom_report_at``: :data:`dapo_ops.core.logformat.REPORT_END_MARK`)."""
        if self.oom_line is None and self.is_oom(line):
            self.oom_line = strip_ansi(line).strip()[:500]
            self.oom_at = now()
            att["oom_line_at"] = self.oom_at
            log("device OOM line in attempt %d: %s" % (att["n"], self.oom_line[:200]))
        elif self.oom_at is not None and self.oom_report_at is None and REPORT_END_MARK in line:
            self.oom_report_at = now()


class Follower:
    """The attempt log at ``path`` read from its start as it grows; each chunk is copied with ``tee`` and its
    complete lines handed to ``on_lines``. Chunk ends may split a UTF-8 character: decoded incrementally."""

    def __init__(self, path: str, tee: Callable[[bytes], None], on_lines: Callable[[List[str]], None]):
        self.reader = open(path, "rb")
        self.tee, self.on_lines = tee, on_lines
        self.partial = ""
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def pump(self) -> bool:
        """Read what is new; False when nothing was."""
        data = self.reader.read(READ_BYTES)
        if not data:
            return False
        self.tee(data)
        text = self.partial + self.decoder.decode(data)
        parts = re.split(r"[\r\n]", text)
        self.partial = parts.pop()
        if len(self.partial) > MAX_PARTIAL:  # a line without end: scan it anyway, keep the tail
            parts.append(self.partial)
            self.partial = ""
        self.on_lines(parts)
        return True

    def drain(self) -> None:
        """Read everything that is there now."""
        while self.pump():
            pass

    def finish(self) -> None:
        """Read the rest, hand over an unterminated last line, close the file."""
        self.drain()
        if self.partial:
            self.on_lines([self.partial])
        self.reader.close()


def _oom_seen_out(scanner: Scanner, t: float, oom_grace_s: float, oom_report_wait_s: float) -> bool:
    """Time to stop an attempt after its device-OOM line (``scanner.oom_at``): ``oom_grace_s`` s after it once the
    driver's failure report has ended (``scanner.oom_report_at``: the frames that tell the phase are in the log), else
    ``oom_report_wait_s`` s after it at most (a report that never comes: the other ranks hang in a collective). On a
    GPU the OOM line is in the report itself; torch_npu's worker prints its ``ERR00006 PTA memory error`` line first,
    and a stop 1 s later lost the report's frames: phase unknown, the ladder offloaded instead of lowering the
    update's budget (a helper's read of the V1 text)."""
    waited = t - float(scanner.oom_at or t)
    if waited >= max(oom_grace_s, oom_report_wait_s):
        return True
    return waited >= oom_grace_s and scanner.oom_report_at is not None


def follow(
    proc: "subprocess.Popen[bytes]",
    follower: Follower,
    scanner: Scanner,
    rec: Dict[str, Any],
    att: Dict[str, Any],
    *,
    stop: Callable[[], Union[str, bool]],
    oom_grace_s: float,
    hang_timeout_s: float,
    oom_report_wait_s: float = 0.0,
    poll_s: float,
    writer: record.RecordWriter,
    tick: Optional[Callable[[], Any]] = None,
) -> Optional[str]:
    """Follow the attempt until it ends. Returns None (verl exited; its output is read to the end), or why the
    supervisor must stop it: ``"stop"`` (``stop()`` true; a string it returns, e.g. ``"disk-full"``, is returned as
    the reason), ``"oom"`` (``oom_grace_s`` s after the OOM line), ``"storm"`` (the scanner called an error storm,
    :mod:`.storm`), ``"fatal"`` (a fatal error of the classifier's table repeating with no step, ``scanner.storm``
    with ``fatal``: :mod:`dapo_ops.core.classify.storm`), ``"diverged"`` (a training metric went bad: ``scanner.bad``,
    :mod:`dapo_ops.core.health`), ``"stall"`` (no step line and no new output for ``scanner.stall_after_s`` s;
    output but no step line for :data:`.stall.NO_STEP_FACTOR` x that, before step 1 too when a run of this
    configuration left its start-up time; or the counters idle, ``scanner.counters``: :mod:`.stall`;
    ``scanner.stall_by`` says which) or ``"hang"`` (no ``step:`` line, i.e. ``rec["last_progress_at"]``, for
    ``hang_timeout_s`` s: the cap). Progress is written to run.json at most every ``writer.interval_s`` s; the loop sleeps ``poll_s`` s
    when nothing is new. ``tick()`` is called after each read that brought new output (the learned-start memo)."""
    grew_at = att["started_at"]
    while True:
        got = follower.pump()
        if proc.poll() is not None:
            follower.drain()
            return None
        t = now()
        if got:
            grew_at = t
            if tick is not None:
                tick()
        why = stop()
        if why:
            return why if isinstance(why, str) else "stop"
        if scanner.oom_at is not None and _oom_seen_out(scanner, t, oom_grace_s, oom_report_wait_s):
            return "oom"
        if scanner.storm is not None and scanner.oom_at is None:
            return "fatal" if scanner.storm.get("fatal") else "storm"
        if scanner.bad is not None and scanner.oom_at is None:
            return "diverged"
        last = rec.get("last_progress_at") or att["started_at"]
        if t - last > hang_timeout_s:
            log("no progress for %.0f s: hang" % (t - last))
            return "hang"
        lim = scanner.stall_after_s
        if lim is not None and t - max(last, grew_at) > lim:
            scanner.idle_s, scanner.stall_by = round(t - max(last, grew_at), 1), "silence"
            log("no step and no output for %.0f s (stall threshold %.0f s): stall" % (t - max(last, grew_at), lim))
            return "stall"
        if lim is not None and t - last > stall.NO_STEP_FACTOR * lim:  # before step 1 too, once a limit is learned
            scanner.idle_s, scanner.stall_by = round(t - last, 1), "no-step"
            log(
                "output but no step line for %.0f s (%.0f x the stall threshold %.0f s): stall"
                % (t - last, stall.NO_STEP_FACTOR, lim)
            )
            return "stall"
        watch = scanner.counters
        idle = watch.sample(t) if watch is not None else None
        if idle is not None and watch is not None:
            scanner.idle_s, scanner.stall_by = idle, "counters"
            log("devices idle, memory flat, no CPU for %.0f s: stall (%s)" % (idle, "; ".join(watch.evidence)))
            return "stall"
        if writer.dirty:
            writer.write(rec, force=False)
        if not got:
            time.sleep(poll_s)


def link_workdir_log(workdir: Optional[str], train_log: Path) -> None:
    """``<workdir>/train.log`` -> the run's train.log (a symlink, replaced atomically). A regular file there is
    left alone. Never raises: problems go to supervisor.log."""
    if not workdir:
        return
    link = Path(workdir) / "train.log"
    target = str(train_log.resolve())
    try:
        if link.exists() and not link.is_symlink():
            log("%s is a regular file; not replacing it with a link to %s" % (link, target))
            return
        tmp = Path(workdir) / (".train.log.%d" % os.getpid())
        try:
            os.unlink(str(tmp))
        except FileNotFoundError:
            pass
        os.symlink(target, str(tmp))
        os.replace(str(tmp), str(link))
    except OSError as e:
        log("could not link %s -> %s: %s" % (link, target, e))
