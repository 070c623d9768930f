"""The ``watch`` loop's state across looks (operator side, pure: rows in, lines and an exit code out): the last row
per host, the hosts whose run ended, the hosts briefly unreachable, the Ray worker hosts of a watched head's run
(:func:`dapo_ops.control.status.look.worker_of`). What a change prints is :mod:`dapo_ops.control.status.events`'s; the
looks themselves are :func:`dapo_ops.control.status.look.collect_rows` (``dapo_ops/cli/status.py`` loops)."""

from __future__ import annotations

from dapo_ops.control.status import events
import dapo_ops.control.status.rows
from dapo_ops.control.status.look import cluster_heads, worker_of
from dapo_ops.control.status.rows import ERROR, NO_RUN, SUPERVISOR_DEAD, StatusRow
from dapo_ops.core import ladder
from dapo_ops.core.runstate import RunStatus

#: ``watch`` exit codes by final row state (:class:`dapo_ops.core.runstate.RunStatus`, rows.py's row states); ``inv
#: logs -f`` exits with the same. 2 is every task's usage error (:data:`dapo_ops.cli._common.EXIT_USAGE`: a bad flag or
#: inventory, nothing contacted), so "stopped" has its own 5. README.md and docs/workflow.md list them all.
WATCH_CODES = {
    RunStatus.SUCCEEDED: 0,
    RunStatus.FAILED: 1,
    RunStatus.STOPPED: 5,
    SUPERVISOR_DEAD: 3,
    NO_RUN: 4,
    ERROR: 4,
    dapo_ops.control.status.rows.INCOMPLETE: 4,
    dapo_ops.control.status.rows.RAY_WORKER: 4,
}
#: the codes of :data:`WATCH_CODES` from best to worst: several hosts exit with the worst (stopped ranks between
#: failed and a dead supervisor, as it did when its code was 2)
WATCH_SEVERITY = (0, 1, 5, 3, 4)


def worst_code(codes) -> int:
    """The worst of ``codes`` (:data:`WATCH_SEVERITY`; a code outside it ranks worst); 0 for none."""
    return max(codes, key=lambda c: WATCH_SEVERITY.index(c) if c in WATCH_SEVERITY else len(WATCH_SEVERITY), default=0)


def still_watching(error: str) -> str:
    """The one line for a watched host that stopped answering (``error``: one line naming the host, e.g. ``h1:
    unreachable: timed out``): said once per outage, the watch goes on. ``inv watch`` (:meth:`Watch.see_events`)
    and ``inv logs -f`` (:meth:`dapo_ops.cli.logs.LineWriter.silence`) both word it so."""
    return "%s (still watching)" % error


#: seconds without a line about a live run after which ``watch`` on a terminal prints its progress line
PROGRESS_EVERY_S = 60.0


class Watch:
    """The ``watch`` loop's state across looks: the last row per host, the hosts whose run ended, the hosts
    briefly unreachable. :meth:`see` takes one look's rows and returns the lines to print; :attr:`finished` says
    when every host is done; :meth:`outcome` is the exit code and message."""

    def __init__(self, hosts: list):
        self.hosts = list(hosts)
        self.prev: dict[str, StatusRow] = {}
        self.done: dict[str, StatusRow] = {}
        self.unreachable: set[str] = set()
        self.workers: dict[str, StatusRow] = {}  # Ray worker hosts of a watched head's run: not runs of their own
        self.said_at: dict[str, float] = {}  # host -> when (caller's clock, seconds) a line last named its run

    def live(self) -> list:
        """The hosts still to look at."""
        return [h for h in self.hosts if h.name not in self.done]

    @property
    def finished(self) -> bool:
        return len(self.done) == len(self.hosts)

    def see(self, rows: list[StatusRow], now: float = 0.0) -> list[str]:
        """Lines for one look: state changes (:func:`events.events`), an unreachable host once (it does not
        end the watch once it was seen), and why a host without a run stops being watched. ``now``: the caller's
        clock in seconds (a state change resets that host's :meth:`progress` timer)."""
        return [e["line"] for e in self.see_events(rows, now)]

    def see_events(self, rows: list[StatusRow], now: float = 0.0) -> list[dict]:
        """:meth:`see`'s lines as ``watch --json`` objects: ``{"event": "change", "host", "run_id", "state",
        "step", "total", "attempt", "verdict", "line"}`` (``event`` is ``unreachable`` for a host that did not
        answer, ``ray-worker`` for a worker host of a watched head's run, ``no-run`` for a host with nothing to
        watch); ``line`` is the text :meth:`see` prints."""
        out: list[dict] = []

        def add(kind: str, row: StatusRow, line: str) -> None:
            out.append(
                {
                    "event": kind,
                    "host": row.host,
                    "run_id": row.run_id,
                    "state": row.state,
                    "step": row.step,
                    "total": row.total,
                    "attempt": row.attempt,
                    "verdict": row.verdict,
                    "line": line,
                }
            )

        heads = cluster_heads((r.host, r.run_id, r.cluster) for r in list(rows) + list(self.prev.values()))
        watched = {h.name for h in self.hosts}
        for row in rows:
            head = heads.get(row.host) or (
                ((row.serves or {}).get("head"), row.run_id)
                if row.state == dapo_ops.control.status.rows.RAY_WORKER
                else None
            )
            if head and head[0] in watched and worker_of(row, head):
                hn, rid = head
                # a Ray worker of a watched head's run (live, or its session already ended): the head's run decides
                self.workers[row.host] = self.done[row.host] = row
                add("ray-worker", row, events.worker_line(row.host, rid, hn))
                continue
            if row.state == ERROR and row.host in self.prev:  # transient: keep watching
                if row.host not in self.unreachable:
                    add("unreachable", row, still_watching(str(row.error)))
                    self.unreachable.add(row.host)
                continue
            self.unreachable.discard(row.host)
            changes = events.events(self.prev.get(row.host), row)
            if changes or row.host not in self.said_at:
                self.said_at[row.host] = now
            for line in changes:
                add("change", row, line)
            self.prev[row.host] = row
            if events.is_finished(row):
                self.done[row.host] = row
                if row.state in (NO_RUN, ERROR) and len(self.hosts) > 1:
                    add("no-run", row, row.error or "%s: no run to watch" % row.host)
        return out

    def progress(self, now: float, every_s: float = PROGRESS_EVERY_S) -> list[str]:
        """Progress lines (run id, step, rate, ETA: :func:`dapo_ops.control.status.table.summary_line`) of the live
        runs no line has named for ``every_s`` seconds of the caller's clock ``now``; each resets its timer.
        ``watch`` prints them on a terminal only, between state changes (at most one a minute per run)."""
        from dapo_ops.control.status.table import summary_line

        out = []
        for host, row in self.prev.items():
            if host in self.done or now - self.said_at.get(host, now) < every_s:
                continue
            line = summary_line(row)
            if line:
                out.append(line)
                self.said_at[host] = now
        return out

    def outcome_json(self) -> dict:
        """``watch --json``'s last line: ``{"event": "outcome", "code", "message", "runs": [{"host", "run_id",
        "state", "step", "total", "ended", "verdict", "suggestions"}]}`` (``code`` / ``message``: :meth:`outcome`,
        the exit code ``watch`` exits with)."""
        code, message = self.outcome()
        runs = [
            {
                "host": h,
                "run_id": r.run_id,
                "state": r.state,
                "step": r.step,
                "total": r.total,
                "ended": r.ended,
                "verdict": r.verdict,
                "suggestions": list(r.suggestions or []),
            }
            for h, r in self.done.items()
            if h not in self.workers
        ]
        return {"event": "outcome", "code": code, "message": message, "runs": runs}

    def outcome(self) -> tuple[int, str]:
        """``(exit code, message)`` of the worst finished host (:data:`WATCH_CODES`); message "" for code 0."""
        own = [r for h, r in self.done.items() if h not in self.workers] or list(self.done.values())
        code = worst_code([WATCH_CODES.get(r.state, 4) for r in own])
        worst = next(r for r in own if WATCH_CODES.get(r.state, 4) == code)
        if not code:
            return 0, ""
        if worst.state == dapo_ops.control.status.rows.RAY_WORKER:  # its head is not watched
            head = (worst.serves or {}).get("head")
            return code, "%s, not a run of its own: watch the run with `inv watch -H %s`" % (
                events.worker_line(worst.host, worst.run_id, head),
                head,
            )
        if worst.state in (NO_RUN, ERROR):
            return code, worst.error or "%s: no run to watch" % worst.host
        if worst.ended:  # "failed: device OOM after 2 OOM retries (...) at step 4/20"
            detail = worst.ended + (
                " (%s)" % worst.verdict if worst.verdict and worst.state == RunStatus.FAILED else ""
            )
            if worst.suggestions:
                # -c when the watch's own came from --container / CONTAINER (Host.container_from)
                named = [h.container for h in self.hosts if h.name == worst.host and getattr(h, "container_from", None)]
                detail += "; suggestions above (also `%s`)" % ladder.follow_command("status", worst.host, *named[:1])
        else:
            detail = "%s: %s" % (worst.state, worst.hint or worst.error or "-")
        return code, "%s: run %s %s" % (worst.host, worst.run_id or "-", detail)
