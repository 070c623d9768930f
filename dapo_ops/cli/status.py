"""``status``, ``stop``, ``watch``: every run on every host in one glance, cheaply (``logs``: :mod:`dapo_ops.cli.logs`).

These tasks parse flags, call :mod:`dapo_ops.control.status.look` (one probe per host per look, in parallel, over each
host's reused SSH connection), print and exit; output is printed by the main thread only, whole lines, prefixed by
host name when several hosts answer.

Replaces the runbook's ``docker exec c grep "Training Progress" /verl/train.log | tail -1`` (reads the whole log
every look), ``tail -f`` and ``grep -E "Error|error|OOM|Exception"`` (runbook-zh.txt, monitoring section).
"""

from __future__ import annotations

import json as _json
import sys
import time

from invoke.exceptions import Exit

import dapo_ops.control.remote.fanout
from dapo_ops.control.status import look
from dapo_ops.control.status import events
import dapo_ops.control.status.table
import dapo_ops.control.status.rows
from dapo_ops.control.status.rows import ERROR, SUPERVISOR_DEAD
from dapo_ops.core.runstate import RunStatus
from dapo_ops.cli._common import (
    EXIT_FAILED,
    EXIT_USAGE,
    run_id_flag,
    connect_timeout_override,
    fanout_task,
    fail,
    select_hosts,
    with_container,
)

CONTAINER_HELP = "container the run was launched in (env CONTAINER; default: the inventory's)"


def collect_rows(
    c,
    chosen: list,
    run: str = "",
    all_runs: bool = False,
    stale_after_s: float = dapo_ops.control.status.rows.DEFAULT_STALE_AFTER_S,
) -> list[dapo_ops.control.status.rows.StatusRow]:
    """:func:`dapo_ops.control.status.look.collect_rows` with the ``-t`` connect timeout of context ``c``."""
    return look.collect_rows(
        chosen, run=run, all_runs=all_runs, stale_after_s=stale_after_s, connect_timeout=connect_timeout_override(c)
    )


def _stale_after(c) -> float:
    return look.stale_after(getattr(c, "config", None))


#: the table's columns that wrap at spaces (every other column keeps its whole text on one line), with the narrowest
#: width each may take (at least its longest word); a terminal too narrow for that table gets one block per run
#: instead (:func:`render_table`)
WRAP_MIN = {"features": 16, "verdict": 16}
#: the table's columns: the SwanLab link is a line of its own under the table (a link folded inside a cell can be
#: neither clicked nor copied)
TABLE_COLUMNS = tuple(c for c in dapo_ops.control.status.table.COLUMNS if c != "swanlab")


def _console(f, width: int | None):
    """The status printout's Console: ``width`` (tests), else the one width rule
    (:func:`dapo_ops.control.remote.fanout.output_width`: ``$COLUMNS`` if valid, the terminal's, the pipe default);
    a piped table without ``$COLUMNS`` then grows to keep one physical line per row (:func:`render_table`)."""
    from dapo_ops.control.remote import fanout

    return fanout.console(f, width=width)


def _wrap_min(col: str, all_cells: list[dict]) -> int:
    words = [w for c in all_cells for w in c[col].split()] + [dapo_ops.control.status.table.HEADERS.get(col, col)]
    return max([WRAP_MIN[col]] + [len(w) for w in words])


def table_width(all_cells: list[dict], natural: bool = False) -> int:
    """Columns the status table needs so that no cell is cut: the widest cell or header of each column that does not
    wrap, the wrapping ones (:data:`WRAP_MIN`) at their minimum (never below their longest word), plus rich's padding
    (one space each side of a cell, a separator between columns; an upper bound). ``natural``: the wrapping
    columns at their widest cell too (no cell wraps)."""
    total = 0
    for col in TABLE_COLUMNS:
        if col in WRAP_MIN:
            total += max([_wrap_min(col, all_cells)] + [len(c[col]) for c in all_cells if natural])
        else:
            total += max([len(dapo_ops.control.status.table.HEADERS.get(col, col))] + [len(c[col]) for c in all_cells])
    return total + 3 * len(TABLE_COLUMNS) + 1


def _style(r: dapo_ops.control.status.rows.StatusRow) -> str | None:
    if r.state in (RunStatus.FAILED, SUPERVISOR_DEAD, ERROR) or r.stale:
        return "bold red"
    return "green" if r.state == RunStatus.SUCCEEDED else None


def _row_cells(r: dapo_ops.control.status.rows.StatusRow) -> dict:
    cells = dapo_ops.control.status.table.cells(r)
    cells["verdict"] = r.verdict or ("-" if r.state != ERROR else "error")
    cells["features"] = cells["features"].replace(",", ", ")  # wraps at the spaces
    return cells


def _block(r: dapo_ops.control.status.rows.StatusRow, cells: dict):
    """One run as a few labelled lines (a narrow terminal): host, whole run id and state first, then progress,
    metrics with units, features, verdict and the SwanLab link (long values wrap, never cut)."""
    from rich.text import Text

    L = dapo_ops.control.status.table.LABELS
    head = Text(r.host, style="bold")
    head.append("  " + (r.run_id or "no run") + "  ")
    head.append(cells["state"], style=_style(r) or "")
    lines = [head]

    def line(*keys):
        parts = ["%s %s" % (L.get(k, k), cells[k]) for k in keys if cells.get(k) not in (None, "-", "")]
        if parts:
            lines.append(Text("  " + "   ".join(parts), overflow="fold"))

    line("step", "eta", "attempt", "age")
    line("score", "resp_len", "tput")
    if cells["features"] != "-":
        lines.append(Text("  features " + cells["features"], overflow="fold"))
    if cells["verdict"] != "-":
        lines.append(Text("  verdict " + cells["verdict"], overflow="fold"))
    if cells["swanlab"] != "-":
        lines.append(Text("  swanlab " + dapo_ops.control.status.table.swanlab_text(cells["swanlab"]), overflow="fold"))
    return lines


def note_lines(rows: list[dapo_ops.control.status.rows.StatusRow]) -> list[str]:
    """The notes :func:`render_table` prints below the rows (each row's cluster, hint or error, health, failed
    notifications, suggestions; then each live run's summary line), each one physical line: a backticked command in
    one stays whole when copied (the terminal wraps it on screen, ``soft_wrap``)."""
    notes = []
    for r in rows:
        if r.cluster:  # multi-host run (control/launch/multihost_service.py)
            cl = r.cluster
            notes.append(
                "%s %s: Ray cluster, %s nodes joined (%s), %s devices, head %s:%s"
                % (
                    r.host,
                    r.run_id,
                    cl.get("nodes"),
                    ",".join(cl.get("hosts") or []),
                    cl.get("devices"),
                    cl.get("head"),
                    cl.get("port"),
                )
            )
        note = r.error or r.hint
        if note:
            head = "%s %s" % (r.host, r.run_id) if r.run_id else r.host
            notes.append(note if note.startswith(r.host + ":") else "%s: %s" % (head, note))
        if r.health and r.run_id:  # the watched training metric's trend (core/health.py)
            notes.append("%s %s: %s" % (r.host, r.run_id, r.health["shown"]))
        notes += [
            x for x in (dapo_ops.control.status.rows.notify_line(r),) if x
        ]  # failed webhook sends (run.json notify_failures)
        notes += events.suggestion_lines(r)
    notes += [x for x in (dapo_ops.control.status.table.summary_line(r) for r in rows) if x]
    return notes


def render_table(rows: list[dapo_ops.control.status.rows.StatusRow], out=None, width: int | None = None) -> None:
    """Print rows for the terminal they land on, then one note line per row that has a hint (verdict hint, dead
    supervisor) and one summary line per live run (its whole run id, step, ETA, throughput).

    A terminal wide enough for :func:`table_width` gets a table (one row per run; features and verdict wrap inside
    their columns; the SwanLab link is a line below it, whole); a narrower one gets one block of labelled lines per run (:func:`_block`). No
    layout cuts the host name or the run id. The width is the one rule's
    (:func:`dapo_ops.control.remote.fanout.output_width`); piped without ``$COLUMNS``: a table of one physical line
    per row (wider than the pipe default when a row needs it).

    :param out: a file (default stdout); its ``isatty()`` picks the terminal layout.
    :param width: columns to lay out for (tests; default: the terminal's, see above).
    """
    from rich import box
    from rich.table import Table
    from rich.text import Text

    f = out or sys.stdout
    console = _console(f, width)
    all_cells = [_row_cells(r) for r in rows]
    if (
        not width
        and not dapo_ops.control.remote.fanout.is_terminal(f)
        and not dapo_ops.control.remote.fanout.columns_env()
    ):  # piped: one line per row
        console.width = max(console.width, table_width(all_cells, natural=True))
    notes = note_lines(rows)
    need = table_width(all_cells)
    if need <= console.width:
        # the room left goes to the wrapping columns, the features first, each up to its widest cell
        spare, mins = console.width - need, {col: _wrap_min(col, all_cells) for col in WRAP_MIN}
        for col in ("features", "verdict"):
            grow = max(0, min(spare, max(len(c[col]) for c in all_cells) - mins[col]))
            mins[col] += grow
            spare -= grow
        table = Table(box=box.SIMPLE_HEAD, show_lines=False, show_edge=False)
        for col in TABLE_COLUMNS:
            wrap = col in WRAP_MIN
            table.add_column(
                dapo_ops.control.status.table.HEADERS.get(col, col),
                no_wrap=not wrap,
                overflow="fold",
                min_width=mins.get(col),
            )
        for r, cells in zip(rows, all_cells):
            table.add_row(*[Text(cells[c], style=(_style(r) or "") if c == "state" else "") for c in TABLE_COLUMNS])
        console.print(table)
        notes = [
            "%s %s: swanlab %s" % (r.host, r.run_id, dapo_ops.control.status.table.swanlab_text(r.swanlab_url))
            for r in rows
            if r.swanlab_url
        ] + notes
    else:
        for i, (r, cells) in enumerate(zip(rows, all_cells)):
            if i:
                console.print()
            for t in _block(r, cells):
                console.print(t)
        console.print()
    for n in notes:
        console.print(Text(n), soft_wrap=True)  # one physical line: a copied command is not cut by a newline


# ------------------------------------------------------------------------------------------ status


@fanout_task(
    help={
        "json": "print the rows as a JSON list instead of a table",
        "all": "every run recorded on each host (from run.json), newest first",
        "run": "a run id instead of the host's current run",
        "container": CONTAINER_HELP,
    }
)
def status(c, hosts="", inventory="", json_=False, all_=False, run=None, container=""):
    """One row per host/run: state, step/total, ETA, attempt, features, key metrics, verdict, log age.

    A run is flagged STALE after max(900 s, 3 x its step time) without a progress line; the 900 s is
    ``status.stale_after_s`` in the program's config file (docs/workflow.md "Monitoring").
    """
    run = run_id_flag(run)
    _, chosen = select_hosts(c, hosts, inventory)
    chosen = with_container(chosen, container)
    rows = collect_rows(c, chosen, run=run, all_runs=all_, stale_after_s=_stale_after(c))
    if all_:
        rows = dapo_ops.control.status.rows.sort_newest_first(rows)
    else:  # a Ray worker host of a chosen head's multi-host run: that run's row, live or ended
        rows = look.with_cluster_workers(rows)
    if json_:
        print(_json.dumps([r.to_json() for r in rows], indent=1, default=str))
    else:
        render_table(rows)
    errors = [r for r in rows if r.state == ERROR]
    if errors:
        if json_:
            fail("; ".join(r.error for r in errors), EXIT_FAILED)
        raise Exit(code=EXIT_FAILED)  # the table's notes already name each failing host and why


# ------------------------------------------------------------------------------------------ logs


@fanout_task(
    help={
        "run": "the run id to stop (default: the host's current run)",
        "grace": "seconds to wait for the supervisor to stop verl before SIGKILL (default 60)",
        "container": CONTAINER_HELP,
    }
)
def stop(c, hosts="", inventory="", run=None, grace=60.0, container=""):
    """Stop the run (supervisor, verl, Ray sessions); keeps checkpoints and logs; idempotent.

    SIGTERM its supervisor (it stops its verl process group and marks run.json stopped); with a dead supervisor,
    kill the run's own verl processes and mark it stopped. Own PIDs only. A multi-host run's Ray sessions end on
    every node."""
    run = run_id_flag(run)
    inv, chosen = select_hosts(c, hosts, inventory)
    chosen = with_container(chosen, container)
    import dapo_ops.control.status.stop

    results = dapo_ops.control.status.stop.stop_runs(chosen, run, float(grace), connect_timeout_override(c))
    for r in results:
        if r.kind in ("stopped", "already", "with-head"):
            print(r.message)
        elif r.kind != "skipped":
            print(r.message, file=sys.stderr)
        if r.run_dir:  # multi-host run: its Ray sessions on every host
            from dapo_ops.cli import multihost

            multihost.stop_cluster(c, inv, r.host, r.run_dir)
    if any(r.kind in ("failed", "worker") for r in results):  # a worker: nothing stopped, the line says how
        raise Exit(code=EXIT_FAILED)  # each failed host was reported above
    if run and not any(r.kind in ("stopped", "already") for r in results):
        fail("no host has run %s; list runs with `inv status --all`" % run, EXIT_FAILED)


# ------------------------------------------------------------------------------------------ watch


@fanout_task(
    help={
        "run": "a run id instead of the host's current run",
        "interval": "seconds between looks (default 10)",
        "container": CONTAINER_HELP,
        "json": "print one JSON object per line: each event, then the outcome (exit code and message); exit codes "
        "are the same",
    }
)
def watch(c, hosts="", inventory="", run=None, interval=10.0, container="", json_=False):
    """Block until the run ends, printing state changes (attempt started, OOM escalation, finished).

    On a terminal, a run that made no such line for a minute gets a progress line (run id, step, rate, ETA).

    Exit 0 when every watched run succeeded; else the worst host's: 1 failed, 5 stopped, 3 supervisor died, 4 no run /
    error (:data:`~dapo_ops.control.status.watch.WATCH_CODES`), with the verdict as the message; 2 a usage error
    (nothing contacted), 130 Ctrl-C, 141 a closed pipe. A host that is briefly unreachable does not end the watch. ``--json``: one
    JSON object per line (:meth:`~dapo_ops.control.status.watch.Watch.see_events`, no progress lines), the last one
    the outcome (:meth:`~dapo_ops.control.status.watch.Watch.outcome_json`).
    """
    if float(interval) <= 0:
        fail("watch: --interval takes seconds > 0 (e.g. --interval 10)", EXIT_USAGE)
    run = run_id_flag(run)
    _, chosen = select_hosts(c, hosts, inventory)
    chosen = with_container(chosen, container)
    import dapo_ops.control.status.watch

    w = dapo_ops.control.status.watch.Watch(chosen)
    stale_s = _stale_after(c)
    tty = sys.stdout.isatty()
    try:
        while True:
            rows = collect_rows(c, w.live(), run=run, stale_after_s=stale_s)
            for ev in w.see_events(rows, now=time.monotonic()):
                print(_json.dumps(ev, default=str) if json_ else ev["line"], flush=True)
            if w.finished:
                break
            for line in (
                w.progress(time.monotonic()) if tty and not json_ else ()
            ):  # a terminal: a sign of life once a minute
                print(line, flush=True)
            time.sleep(max(0.2, float(interval)))
    except KeyboardInterrupt:
        raise Exit("watch interrupted; the runs continue", code=130) from None
    if json_:
        print(_json.dumps(w.outcome_json(), default=str), flush=True)
    code, message = w.outcome()
    if code:
        fail(message, code)
