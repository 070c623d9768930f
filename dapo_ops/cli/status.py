"""``status``, ``stop``, ``watch``: every run on every host in one glance, cheaply (``logs``: :mod:`dapo_ops.cli.logs`).

These tasks parse flags, call :mod:`dapo_ops.control.status` (one probe per host per look, in parallel, over each
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

from dapo_ops.control import status as svc
from dapo_ops.control import statusevents, statustable, statusview
from dapo_ops.control.status import probe  # noqa: F401  (re-exported: callers and tests use it)
from dapo_ops.control.statusview import ERROR, SUPERVISOR_DEAD
from dapo_ops.core.runstate import FAILED, SUCCEEDED
from dapo_ops.cli._common import (
    EXIT_FAILED, EXIT_USAGE, connect_timeout_override, fanout_task, fail, select_hosts, with_container
)

CONTAINER_HELP = "container the run was launched in (env CONTAINER; default: the inventory's)"


def collect_rows(c, chosen: list, run: str = "", all_runs: bool = False,
                 stale_after_s: float = statusview.DEFAULT_STALE_AFTER_S) -> list[statusview.StatusRow]:
    """:func:`dapo_ops.control.status.collect_rows` with the ``-t`` connect timeout of context ``c``."""
    return svc.collect_rows(chosen, run=run, all_runs=all_runs, stale_after_s=stale_after_s,
                            connect_timeout=connect_timeout_override(c))


def _stale_after(c) -> float:
    return svc.stale_after(getattr(c, "config", None))


def render_table(rows: list[statusview.StatusRow], out=None) -> None:
    """Print rows as a rich table (one physical line per row when not a terminal), then one note line per row
    that has a hint (verdict hint, dead supervisor)."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    f = out or sys.stdout
    if hasattr(f, "isatty") and f.isatty():
        console = Console(file=f, highlight=False)
    else:
        import os
        width = int(os.environ.get("COLUMNS", "0") or 0) or 250
        console = Console(file=f, width=max(width, 160), highlight=False, color_system=None, soft_wrap=False)
    table = Table(show_lines=False)
    for col in statustable.COLUMNS:
        table.add_column(col, no_wrap=col not in ("features", "swanlab"), overflow="fold")
    notes = []
    for r in rows:
        cells = statustable.cells(r)
        cells["verdict"] = r.verdict or ("-" if r.state != ERROR else "error")
        style = None
        if r.state in (FAILED, SUPERVISOR_DEAD, ERROR) or r.stale:
            style = "bold red"
        elif r.state == SUCCEEDED:
            style = "green"
        table.add_row(*[Text(cells[c], style=style if c == "state" else "") for c in statustable.COLUMNS])
        if r.cluster:  # multi-host run (tasks/multihost.py)
            cl = r.cluster
            notes.append("%s %s: Ray cluster, %s nodes joined (%s), %s devices, head %s:%s" % (
                r.host, r.run_id, cl.get("nodes"), ",".join(cl.get("hosts") or []), cl.get("devices"),
                cl.get("head"), cl.get("port")))
        note = r.error or r.hint
        if note:
            head = "%s %s" % (r.host, r.run_id) if r.run_id else r.host
            notes.append(note if note.startswith(r.host + ":") else "%s: %s" % (head, note))
        notes += statusevents.suggestion_lines(r)
    console.print(table)
    for n in notes:
        console.print(Text(n))


# ------------------------------------------------------------------------------------------ status

@fanout_task(help={
    "json": "print the rows as a JSON list instead of a table",
    "all": "every run recorded on each host (from run.json), newest first",
    "run": "a run id instead of the host's current run",
    "container": CONTAINER_HELP,
})
def status(c, hosts="", inventory="", json_=False, all_=False, run="", container=""):
    """One row per host/run: state, step/total, ETA, attempt, features, key metrics, verdict, log age.

    A run is flagged STALE after max(900 s, 3 x its step time) without a progress line; the 900 s is
    ``status.stale_after_s`` in the program's config file (docs/workflow.md "Monitoring").
    """
    _, chosen = select_hosts(c, hosts, inventory)
    chosen = with_container(chosen, container)
    rows = collect_rows(c, chosen, run=run, all_runs=all_, stale_after_s=_stale_after(c))
    if all_:
        rows = statusview.sort_newest_first(rows)
    else:  # a Ray worker host of a chosen head's multi-host run: that run's row, live or ended
        rows = svc.with_cluster_workers(rows)
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

@fanout_task(help={
    "run": "the run id to stop (default: the host's current run)",
    "grace": "seconds to wait for the supervisor to stop verl before SIGKILL (default 60)",
    "container": CONTAINER_HELP,
})
def stop(c, hosts="", inventory="", run="", grace=60.0, container=""):
    """Stop the run (supervisor, verl, Ray sessions); keeps checkpoints and logs; idempotent.

    SIGTERM its supervisor (it stops its verl process group and marks run.json stopped); with a dead supervisor,
    kill the run's own verl processes and mark it stopped. Own PIDs only. A multi-host run's Ray sessions end on
    every node."""
    inv, chosen = select_hosts(c, hosts, inventory)
    chosen = with_container(chosen, container)
    from dapo_ops.control import stopruns  # here: `inv status` does not load it

    results = stopruns.stop_runs(chosen, run, float(grace), connect_timeout_override(c))
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

@fanout_task(help={
    "run": "a run id instead of the host's current run",
    "interval": "seconds between looks (default 10)",
    "container": CONTAINER_HELP,
})
def watch(c, hosts="", inventory="", run="", interval=10.0, container=""):
    """Block until the run ends, printing only state changes (attempt started, OOM escalation, finished).

    Exit 0 when every watched run succeeded; else 1 failed, 2 stopped, 3 supervisor died, 4 no run / error,
    with the verdict as the message. A host that is briefly unreachable does not end the watch.
    """
    if float(interval) <= 0:
        fail("watch: --interval takes seconds > 0 (e.g. --interval 10)", EXIT_USAGE)
    _, chosen = select_hosts(c, hosts, inventory)
    chosen = with_container(chosen, container)
    from dapo_ops.control import watchloop  # here: `inv status` does not load it

    w = watchloop.Watch(chosen)
    stale_s = _stale_after(c)
    try:
        while True:
            for line in w.see(collect_rows(c, w.live(), run=run, stale_after_s=stale_s)):
                print(line, flush=True)
            if w.finished:
                break
            time.sleep(max(0.2, float(interval)))
    except KeyboardInterrupt:
        raise Exit("watch interrupted; the runs continue", code=130) from None
    code, message = w.outcome()
    if code:
        fail(message, code)
