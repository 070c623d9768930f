"""Run one function per host in parallel and report ONE table row per host.

Raw remote output is never printed while hosts run (Fabric's ThreadingGroup interleaves it, fabric#2166): each
host's function returns the cells of its row, the table is rendered when every host has answered or the overall
deadline passed. A failed host never hides the others; :func:`exit_code` is non-zero if any host failed.

Usage (what a fan-out task does, see ``dapo_ops/cli/hosts.py``)::

    def check(target: Target) -> Row:
        res = target.run("python3 -V")
        return Row({"python": res.stdout.strip()})

    results = fanout.run(hosts, check, timeout=60)
    fanout.render(results, columns=["python"], title="hosts")
    code = fanout.exit_code(results)
"""

from __future__ import annotations

import errno
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable

from dapo_ops.control.inventory.model import Host
from dapo_ops.control.remote.errors import RemoteError
from dapo_ops.control.remote.target import Target

# rich is imported by the functions that render (a task that prints no table never loads it)


@dataclass
class Row:
    """One host's outcome.

    :ivar cells: column name -> text for the table (one line each).
    :ivar ok: False marks the host failed (exit code non-zero).
    :ivar kind: failure kind (a :data:`dapo_ops.control.remote.errors.KINDS` value, or a task's own word) or "" when ok.
    :ivar message: one line shown in the ``detail`` column.
    :ivar data: anything the task wants to keep (not rendered), e.g. parsed versions.
    """

    cells: dict = field(default_factory=dict)
    ok: bool = True
    kind: str = ""
    message: str = ""
    data: dict = field(default_factory=dict)


@dataclass
class HostResult:
    """A :class:`Row` plus the host it belongs to and the wall time in seconds."""

    host: Host
    row: Row
    seconds: float

    @property
    def ok(self) -> bool:
        return self.row.ok


#: the bound of an unexpected exception's text in a row (a bug's message can be anything); a row's own message is
#: the product's one line (what failed and its fix, written to be shown whole) and is never cut
BUG_TEXT_LIMIT = 300


def _one_line(s: str, limit: int | None = BUG_TEXT_LIMIT) -> str:
    """``s`` on one line (whitespace runs collapsed), cut to ``limit`` characters with ``...`` (None: never cut)."""
    s = " ".join(str(s).split())
    return s if limit is None or len(s) <= limit else s[: limit - 3] + "..."


def call_on_host(
    host: Host,
    fn: Callable[[Target], "Row | dict | None"],
    *,
    accept_new_host_keys: bool = False,
    connect_timeout: float | None = None,
    reuse: bool = False,
) -> HostResult:
    """Run ``fn(target)`` for one host, turning every exception into a failed :class:`Row`.

    The Target's connection is closed afterwards (with ``reuse``, the host's control master stays:
    :mod:`dapo_ops.control.remote.sshmux`). ``fn`` may return a Row, a dict of cells (ok) or None.
    """
    t0 = time.monotonic()
    target = Target(host, accept_new_host_keys=accept_new_host_keys, connect_timeout=connect_timeout, reuse=reuse)
    try:
        out = fn(target)
        if out is None:
            row = Row()
        elif isinstance(out, Row):
            row = out
        else:
            row = Row(cells=dict(out))
        if target.added_host_key and not row.message:
            row.message = f"host key added to known_hosts: {target.added_host_key}"
    except RemoteError as e:
        row = Row(ok=False, kind=e.kind, message=e.message)
    except Exception as e:  # noqa: BLE001 - a bug in one host's check must not hide the other hosts
        row = Row(ok=False, kind="error", message=_one_line(f"{type(e).__name__}: {e}"))
    finally:
        try:
            target.close()
        except Exception:  # noqa: BLE001
            pass
    # whole: a refusal's fix comes last (a new user's trial: the launch's SwanLab refusal lost its fix at 300 chars)
    row.message = _one_line(row.message, None)
    return HostResult(host=host, row=row, seconds=time.monotonic() - t0)


def run(
    hosts: Iterable[Host],
    fn: Callable[[Target], "Row | dict | None"],
    *,
    timeout: float,
    max_workers: int | None = None,
    accept_new_host_keys: bool = False,
    connect_timeout: float | None = None,
    reuse: bool = False,
) -> list[HostResult]:
    """Run ``fn(Target(host))`` for every host in parallel threads.

    :param hosts: the hosts (order kept in the result).
    :param fn: per-host function; exceptions become failed rows (RemoteError keeps its kind).
    :param timeout: overall deadline in seconds; a host without an answer by then gets a ``timeout`` row
        (its daemon thread is abandoned: neither this call nor interpreter exit waits for it). Per-command timeouts in ``fn`` should be
        shorter so the real reason is reported.
    :param max_workers: thread count; default ``min(32, len(hosts))``.
    :param accept_new_host_keys: passed to each :class:`~dapo_ops.control.remote.target.Target`.
    :param reuse: each Target runs its plain commands through the host's control master (``Target.reuse``).
    :returns: one :class:`HostResult` per host, in input order.
    """
    hosts = list(hosts)
    if not hosts:
        return []
    # daemon threads, not a ThreadPoolExecutor: its workers are joined at interpreter exit, so one hung host
    # would keep the CLI alive past the deadline
    slots = threading.Semaphore(max_workers or min(32, len(hosts)))
    done: list[HostResult | None] = [None] * len(hosts)
    t0 = time.monotonic()

    def work(i: int, h: Host) -> None:
        with slots:
            done[i] = call_on_host(
                h, fn, accept_new_host_keys=accept_new_host_keys, connect_timeout=connect_timeout, reuse=reuse
            )

    threads = [
        threading.Thread(target=work, args=(i, h), name=f"dapo-fanout-{h.name}", daemon=True)
        for i, h in enumerate(hosts)
    ]
    for th in threads:
        th.start()
    deadline = t0 + timeout
    for th in threads:
        th.join(max(0.0, deadline - time.monotonic()))
    results = []
    for h, r in zip(hosts, done):
        if r is None:
            r = HostResult(
                h,
                Row(ok=False, kind="timeout", message=f"no answer within {timeout:g} s (overall deadline)"),
                time.monotonic() - t0,
            )
        results.append(r)
    return results


#: columns of a printout that goes to a pipe or a file when ``$COLUMNS`` does not say (:func:`output_width`)
PIPE_WIDTH = 160


def is_terminal(file=None) -> bool:
    """True when ``file`` (default stdout) is a terminal."""
    f = file or sys.stdout
    try:
        return bool(f.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def columns_env(env=None) -> int | None:
    """``$COLUMNS`` (of ``env``, default the process's) when it is a positive number in ASCII digits, else None."""
    import os

    cols = (os.environ if env is None else env).get("COLUMNS", "").strip()
    return int(cols) if cols.isascii() and cols.isdigit() and int(cols) > 0 else None


def output_width(file=None, env=None) -> int:
    """THE width rule of every task's printout (tables, the dry-run plan, status): ``$COLUMNS`` when it is a
    positive number in ASCII digits (anything else, ``COLUMNS=abc``, is ignored), else the terminal's width when
    ``file`` (default stdout) is one, else :data:`PIPE_WIDTH`. A table whose rows must stay one physical line each
    in a pipe (status, a fan-out's host rows) may grow past it (:func:`console`)."""
    import os
    import shutil

    cols = columns_env(env)
    if cols:
        return cols
    f = file or sys.stdout
    if is_terminal(f):
        try:
            return os.get_terminal_size(f.fileno()).columns or shutil.get_terminal_size().columns
        except (AttributeError, ValueError, OSError):
            return shutil.get_terminal_size((PIPE_WIDTH, 24)).columns
    return PIPE_WIDTH


def console(file=None, width: int | None = None):
    """A rich Console for ``file`` (default stdout) laid out for :func:`output_width` (or ``width``); colours only
    on a terminal. A reader that closed the pipe raises ``BrokenPipeError`` out of ``print`` (the task class ends
    it quietly, exit 141: dapo_ops/cli/_common.py ``closed_pipe``) instead of rich's default, which points stdout at
    /dev/null and raises ``SystemExit(1)`` with no line (rich/console.py ``Console.on_broken_pipe``)."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True  # nothing more to this reader
            raise BrokenPipeError(errno.EPIPE, "the reader closed the pipe")

    f = file or sys.stdout
    tty = is_terminal(f)
    return _Console(
        file=f,
        width=width or output_width(f),
        highlight=False,
        color_system="auto" if tty else None,
        force_terminal=tty,
        soft_wrap=False,
    )


def render(
    results: list[HostResult], columns: list[str], *, title: str = "", file=None, show_time: bool = True
) -> None:
    """Print one rich table row per host: host, result (``ok`` or ``FAIL <kind>``), ``columns``, time, detail.

    Cells are single-line (newlines collapsed); on a terminal long details are folded by rich, in pipes and
    files nothing wraps, so each host is exactly one line (greppable).
    """
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title or None, title_justify="left", show_lines=False)
    table.add_column("host", no_wrap=True)
    table.add_column("result", no_wrap=True)
    for c in columns:
        table.add_column(c, no_wrap=True)
    if show_time:
        table.add_column("time", justify="right", no_wrap=True)
    con = console(file)
    table.add_column("detail", overflow="fold")
    for r in results:
        status = Text("ok", style="green") if r.ok else Text(f"FAIL {r.row.kind or 'error'}", style="bold red")
        cells = [Text(r.host.name), status]
        cells += [Text(_one_line(r.row.cells.get(c, "-"), 80)) for c in columns]
        if show_time:
            cells.append(Text(f"{r.seconds:.1f}s"))
        cells.append(Text(r.row.message))
        table.add_row(*cells)
    if not is_terminal(file) and not columns_env():
        con.width = max(con.width, _natural_width(table, con))  # piped: one physical line per host (greppable)
    con.print(table)


def _natural_width(table, con) -> int:
    """The width ``table`` takes when nothing wraps (rich's own measure of each column, plus its borders)."""
    from rich.measure import Measurement

    return Measurement.get(con, con.options.update(width=100_000), table).maximum


def exit_code(results: list[HostResult]) -> int:
    """0 when every host is ok, 1 otherwise."""
    return 0 if all(r.ok for r in results) else 1


def summary(results: list[HostResult]) -> str:
    """One line, e.g. ``1 of 3 hosts failed: h2 (refused)`` or ``3 hosts ok``."""
    bad = [r for r in results if not r.ok]
    if not bad:
        return f"{len(results)} host{'s' if len(results) != 1 else ''} ok"
    names = ", ".join(f"{r.host.name} ({r.row.kind})" for r in bad)
    return f"{len(bad)} of {len(results)} hosts failed: {names}"
