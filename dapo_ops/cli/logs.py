"""``logs``: a run's train.log on every host — the last N lines, ``-f`` to follow it until the run ends (then its
ending line and ``inv watch``'s exit code), ``--errors`` for the failure evidence of each attempt only.

Replaces the runbook's ``tail -f`` and ``grep -E "Error|error|OOM|Exception"`` (runbook-zh.txt, monitoring section).
Flags are parsed here; the look goes through :mod:`dapo_ops.control.status.look` (resolve, tails, errors, and the
follow: one SSH command per host, :func:`dapo_ops.control.status.look.follow_log`, printed by :func:`follow`); output is printed by the main thread only, whole lines,
prefixed by host name when several hosts answer.
"""

from __future__ import annotations

import io
import json as _json
import sys
import threading
import time

from invoke.exceptions import Exit

from dapo_ops.agent.runlogs import END_MARK, HEARTBEAT
from dapo_ops.control.status import look
from dapo_ops.control.status import rows
from dapo_ops.control.remote.errors import RemoteError
from dapo_ops.control.remote.target import Target
from dapo_ops.control.status.rows import ERROR
from dapo_ops.core.runstate import RunStatus
from dapo_ops.cli._common import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    connect_timeout_override,
    fanout_task,
    fail,
    run_id_flag,
    select_hosts,
    with_container,
)
from dapo_ops.cli.status import CONTAINER_HELP


#: a follow that hears nothing (no log line, no heartbeat: :data:`dapo_ops.agent.runlogs.HEARTBEAT` every
#: :data:`~dapo_ops.agent.runlogs.HEARTBEAT_S` seconds) for this many seconds says so (:meth:`LineWriter.silence`)
SILENT_S = 15.0


class LineWriter(io.TextIOBase):
    """A file-like ``out_stream`` that prints whole lines only, each prefixed, under a shared lock.

    tqdm redraws (``\\r`` inside a line) keep only their last segment, as a terminal would show it; ``\\r\\n``
    from a pty becomes ``\\n``. ``flush_rest()`` prints a last line without newline.
    """

    def __init__(
        self,
        prefix: str,
        lock: threading.Lock,
        out=None,
        drop_ctrl_c: bool = False,
        end_mark: str = "",
        host: str = "",
    ):
        super().__init__()
        self.host = host
        #: when (time.monotonic, seconds) bytes last came: a log line or the follow's heartbeat (:data:`HEARTBEAT`)
        self.heard_at = time.monotonic()
        self.silent = False  # said "still watching" for the current silence
        self.prefix, self.lock, self.out = prefix, lock, out or sys.stdout
        self.drop_ctrl_c = drop_ctrl_c
        self.end_mark = end_mark
        #: the JSON after ``end_mark`` (a line that is kept, not printed), once seen
        self.end: dict | None = None
        self.buf = ""

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        self.heard_at = time.monotonic()
        self.silent = False
        n = len(s)
        s = s.replace(HEARTBEAT, "")  # one character: never split across two writes
        self.buf += s
        if "\n" in self.buf:
            *lines, self.buf = self.buf.split("\n")
            self._emit(lines)
        return n

    def silence(self, now: float, after_s: float = SILENT_S) -> str | None:
        """The line to print when nothing (no log line, no heartbeat) came for ``after_s`` seconds up to ``now``
        (time.monotonic): the link is down or the host stopped answering. Said once per silence, as ``inv watch``
        says an unreachable host (:func:`dapo_ops.control.status.watch.still_watching`); None otherwise."""
        from dapo_ops.control.status.watch import still_watching

        if self.silent or now - self.heard_at < after_s:
            return None
        self.silent = True
        return still_watching(
            "%s: unreachable: no answer for %d s (link down?)" % (self.host or "host", now - self.heard_at)
        )

    def _emit(self, lines):
        shown = []
        for ln in lines:
            segs = [x for x in ln.split("\r") if x.strip()]
            if segs and self.drop_ctrl_c and segs[-1].strip() == "^C":  # the SSH pty's echo of our \x03
                continue
            if segs and self.end_mark and segs[-1].startswith(self.end_mark):
                try:
                    self.end = _json.loads(segs[-1][len(self.end_mark) :])
                except ValueError:
                    pass
                continue
            if segs:
                shown.append(self.prefix + segs[-1])
        if shown:
            with self.lock:
                self.out.write("\n".join(shown) + "\n")
                self.out.flush()

    def flush(self) -> None:
        pass

    def flush_rest(self) -> None:
        if self.buf.strip():
            self._emit([self.buf])
        self.buf = ""


def ending(host: str, answer: dict | None) -> tuple[int, str]:
    """``(exit code, one line)`` for a followed run's final state (the status probe's ``answer``, None when the
    follow ended without one): the code is ``inv watch``'s (:data:`dapo_ops.control.status.watch.WATCH_CODES`), the line what ended the run as
    ``status``/``watch`` word it (run.json ``decision.ended``, :func:`rows.ending_line`)."""
    from dapo_ops.control.status.watch import WATCH_CODES

    if not answer:
        return WATCH_CODES[
            ERROR
        ], "%s: the log follow ended before the run did (connection lost?): `inv logs -f -H %s` follows it again" % (
            host,
            host,
        )
    row = rows.build_row(host, answer)
    code = WATCH_CODES.get(row.state, WATCH_CODES[ERROR])
    if row.state == ERROR or not row.run_id:
        return code, row.error or "%s: no run" % host
    if row.ended:
        detail = row.ended + (" (%s)" % row.verdict if row.verdict and row.state == RunStatus.FAILED else "")
        if row.suggestions:
            detail += "; what to change: `inv status -H %s`" % host
    else:
        detail = "%s: %s" % (row.state, row.hint or "-")
    return code, "%s: run %s %s" % (host, row.run_id, detail)


#: the most lines ``inv logs -n`` shows; a larger count is refused, not cut in silence
MAX_LINES = 1_000_000


def follow(pairs, lines: int, out=None) -> int:
    """Follow every (Target, resolve answer) pair's log until its run ends, lines prefixed by host when several.

    One SSH command per host, with a pty (:func:`dapo_ops.control.status.look.follow_log`: the bundle op
    ``runlogs follow``, :data:`dapo_ops.agent.runlogs.FOLLOW_SCRIPT`, ``tail -n <lines> -F --pid=<supervisor>``) and
    then the run's final state, printed as one ending line per host (:func:`ending`).
    ``-F`` follows the file name, so a rotated/recreated ``train.log`` and a new attempt (appended to the same
    file) keep streaming. A run that already ended (no live supervisor: the resolve answer's ``supervisor_pid``)
    prints its last lines and its ending at once. Ctrl-C (KeyboardInterrupt) sends ``\\x03`` through each SSH pty
    (fabric/connection.py): the docker CLI on the host gets SIGINT, the exec's stdin closes and the script kills
    its tail; one line says the run goes on. A host that does not stop within 5 s has its connection closed.

    :returns: 0 after Ctrl-C; else ``inv watch``'s exit code of the worst run (0 when every run succeeded).
    """
    lock = threading.Lock()
    multi = len(pairs) > 1
    promises = []
    failed = []
    for t, info in pairs:
        writer = LineWriter(
            "%s | " % t.name if multi else "", lock, out, drop_ctrl_c=True, end_mark=END_MARK, host=t.name
        )
        try:
            p = look.follow_log(t, info, lines, writer)
        except RemoteError as e:  # e.g. the host went away between resolve and follow
            failed.append(str(e) if str(e).startswith(t.name) else "%s: %s" % (t.name, e))
            print(failed[-1], file=sys.stderr)
            continue
        promises.append((t, p, writer))
    if not promises:
        fail(failed[0] if failed else "nothing to follow", EXIT_FAILED)
    interrupted = False
    try:
        while not all(p.runner.process_is_finished for _, p, _ in promises):
            for _, p, w in promises:  # a link down: said once, as `inv watch` says it, and the follow goes on
                quiet = None if p.runner.process_is_finished else w.silence(time.monotonic())
                if quiet:
                    with lock:
                        (out or sys.stdout).write(quiet + "\n")
                        (out or sys.stdout).flush()
            time.sleep(0.1)
    except KeyboardInterrupt:
        interrupted = True
        for _, p, _ in promises:
            try:
                p.runner.send_interrupt(KeyboardInterrupt())
            except Exception:  # noqa: BLE001 - best effort, the connection is closed below anyway
                pass
        deadline = time.time() + 5
        while time.time() < deadline and not all(p.runner.process_is_finished for _, p, _ in promises):
            time.sleep(0.05)
    for t, p, w in promises:
        if p.runner.process_is_finished:
            try:
                p.join()
            except Exception:  # noqa: BLE001 - exit code of an interrupted tail is irrelevant
                pass
        w.flush_rest()
        t.close()
    if interrupted:
        names = ",".join(t.name for t, _, _ in promises)
        print(
            "logs -f interrupted; the run goes on (`inv logs -f -H %s` follows it again, `inv status -H %s`)"
            % (names, names),
            file=sys.stderr,
            flush=True,
        )
        return EXIT_INTERRUPTED  # as `inv watch` (and a shell) says a Ctrl-C: 130
    codes = []
    f = out or sys.stdout
    for t, _, w in promises:
        code, line = ending(t.name, w.end)
        codes.append(code)
        with lock:
            f.write(line + "\n")
            f.flush()
    from dapo_ops.control.status.watch import WATCH_CODES, worst_code

    if failed:  # a host whose follow could not start (said above)
        codes.append(WATCH_CODES[ERROR])
    return worst_code(codes)


@fanout_task(
    help={
        "lines": "number of lines to show (default 100)",
        "follow": "keep following until the run ends (then its ending line; exit code as `inv watch`); Ctrl-C stops "
        "following, the run goes on",
        "errors": "only the classifier's evidence lines with context, across attempts",
        "attempt": "attempt-K.log instead of train.log",
        "run": "a run id instead of the host's current run",
        "container": CONTAINER_HELP,
    }
)
def logs(c, hosts="", inventory="", lines=100, follow_=False, errors=False, attempt=0, run=None, container=""):
    """The run's train.log: last N lines, -f to follow, --errors for failure evidence only."""
    if int(lines) < 0 or int(attempt) < 0:
        fail("logs: --lines and --attempt take a number >= 0 (e.g. --lines 200, --attempt 2)", EXIT_USAGE)
    if int(lines) > MAX_LINES:  # `-n 99999999999` quietly returned the whole log (960 lines)
        fail(
            f"logs: --lines {int(lines)} is above the maximum {MAX_LINES}; give at most {MAX_LINES} "
            f"(more than any train.log holds: the supervisor caps its growth)",
            EXIT_USAGE,
        )
    run = run_id_flag(run)
    _, chosen = select_hosts(c, hosts, inventory)
    chosen = with_container(chosen, container)
    multi = len(chosen) > 1
    ct = connect_timeout_override(c)
    if errors:
        found, failures = 0, []
        for name, res in look.fan(chosen, lambda t: _capture_errors(t, run, attempt, multi), 180, ct):
            if isinstance(res, str):
                failures.append(res)
                print(res, file=sys.stderr)
            else:
                sys.stdout.write(res["text"])
                found += res["blocks"]
        if failures:
            raise Exit(code=EXIT_FAILED)  # each failed host was reported above
        if not found:
            print("no failure evidence in the logs", file=sys.stderr)
        return
    try:
        logs_found = look.resolve_logs(chosen, run, attempt, ct)
    except look.StatusError as e:
        fail(str(e), e.code)
    errs = list(logs_found.errors)
    for line in logs_found.notes + logs_found.errors:
        print(line, file=sys.stderr)
    if follow_:
        code = follow([(Target(h, connect_timeout=ct), info) for h, info in logs_found.found], lines)
        if code:
            raise Exit(code=code)  # the ending line above says why
        return
    lock = threading.Lock()
    for name, res in look.tail_texts(logs_found.found, lines, ct):
        if isinstance(res, str):
            errs.append(res)
            print(res, file=sys.stderr)
            continue
        w = LineWriter("%s | " % name if multi else "", lock)
        w.write(res["text"])
        w.flush_rest()
    if errs:
        raise Exit(code=EXIT_FAILED)  # each failed host was reported above


def _capture_errors(t, run, attempt, multi):
    text, n = look.errors_text(t, run, attempt, "%s | " % t.name if multi else "")
    return {"blocks": n, "text": text}


# ------------------------------------------------------------------------------------------ stop
