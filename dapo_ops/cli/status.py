"""``status``, ``logs``, ``stop``, ``watch``: every run on every host in one glance, cheaply.

Each host costs one SSH command per look: ``docker exec <c> python3 -c <probe> <request>`` (dapo_ops.agent.remote_probe),
which reads ``run.json``, at most 64 KiB from the end of ``train.log`` and ``/proc`` (never the whole log), and
answers in JSON; when ``docker exec`` fails, the same host command reads the container's state (a stopped
container costs no second command). :mod:`dapo_ops.control.statusview` turns that into a row. Hosts are probed in
parallel (one thread per host) over each host's reused SSH connection (a control master that outlives the
process, :mod:`dapo_ops.control.sshmux`: repeated looks skip the SSH handshake); output is printed by the main thread
only, whole lines, prefixed by host name when several hosts answer.

Replaces the runbook's ``docker exec c grep "Training Progress" /verl/train.log | tail -1`` (reads the whole log
every look), ``tail -f`` and ``grep -E "Error|error|OOM|Exception"`` (runbook-zh.txt, monitoring section).
"""

from __future__ import annotations

import io
import json as _json
import sys
import threading
import time

from invoke.exceptions import Exit

from dapo_ops.control import fanout
from dapo_ops.agent import remote_probe
from dapo_ops.control import statusview
from dapo_ops.control.fanout import Row
from dapo_ops.control.remote import RemoteError, Target
from dapo_ops.cli._common import (
    EXIT_FAILED, EXIT_USAGE, connect_timeout_override, fanout_task, fail, select_hosts, with_container
)

CONTAINER_HELP = "container the run was launched in (env CONTAINER; default: the inventory's)"

#: seconds for one probe command (status/list/resolve); stop adds its grace periods.
PROBE_TIMEOUT_S = 60.0
#: lines of context around each evidence line in ``logs --errors``.
ERRORS_CONTEXT = 3


# ------------------------------------------------------------------------------------------ plumbing

def fan(c, chosen: list, fn, timeout: float) -> list[tuple[str, object]]:
    """Run ``fn(target) -> dict`` on every host in parallel (:func:`dapo_ops.control.fanout.run` over each host's reused
    SSH connection, ``Target.reuse``; overall deadline ``timeout`` seconds).

    :returns: ``[(host_name, answer_dict | error_line)]`` in host order; an error line is one line naming the host.
    """
    out = []
    for r in fanout.run(chosen, lambda t: Row(data={"answer": fn(t)}), timeout=timeout,
                        connect_timeout=connect_timeout_override(c), reuse=True):
        if r.ok:
            out.append((r.host.name, r.row.data["answer"]))
        else:
            msg = r.row.message or r.row.kind
            out.append((r.host.name, msg if msg.startswith(r.host.name) else "%s: %s" % (r.host.name, msg)))
    return out


def probe(target: Target, req: dict, timeout: float = PROBE_TIMEOUT_S) -> dict:
    """Run one :mod:`dapo_ops.agent.remote_probe` request in the target's container; returns its JSON answer.

    ``runs_dir`` defaults to the host's inventory ``runs_dir``. The answer may be ``{"error": "..."}``
    (no such run / attempt).

    :raises RemoteError: SSH / docker failures, and kind ``command`` when the probe does not answer JSON.
    """
    req = dict(req)
    req.setdefault("runs_dir", target.host.runs_path)
    # -S: the probe is stdlib only, so the container's site-packages (.pth files) are not even looked at
    res = target.run([target.host.python, "-S", "-c", remote_probe.build_script(), _json.dumps(req)],
                     timeout=timeout, workdir="", state_on_failure=True)
    try:
        return _json.loads(res.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        err = (res.stderr or res.stdout or "no output").strip().splitlines()
        raise RemoteError("command", target.name, "status probe gave no JSON (is %s a Python 3 in container %s?): %s"
                          % (target.host.python, target.container, err[-1] if err else "no output")) from None


# host shell: the container's current run.json read out of a STOPPED container (docker cp works on it): the
# lock's run id, else the newest run dir; prints nothing when there is none. $1 = container, $2 = runs_dir.
_STOPPED_RUN = ('c="$1"; d="$2"; id=$(docker cp "$c:$d/.lock" - 2>/dev/null | tar -xO 2>/dev/null | '
                'sed -n \'s/.*"run_id": *"\\([0-9a-f-]*\\)".*/\\1/p\'); '
                '[ -n "$id" ] && docker cp "$c:$d/$id/run.json" - 2>/dev/null | tar -xO 2>/dev/null; true')


def stopped_container_run(target: Target) -> dict | None:
    """run.json of the run a stopped container holds (what ``status`` shows after ``docker stop``), or None."""
    try:
        res = target.host_run(["sh", "-c", _STOPPED_RUN, "sh", target.container or "", target.host.runs_path],
                              timeout=PROBE_TIMEOUT_S, check=False)
        run = _json.loads(res.stdout) if res.stdout.strip() else None
    except (RemoteError, ValueError):
        return None
    return run if isinstance(run, dict) else None


def _status_probe(t: Target, req: dict) -> dict:
    try:
        return probe(t, dict(req, host=t.host.name))
    except RemoteError as e:
        if e.kind != "container-stopped" or req.get("op") != "status":
            raise
        return {"error": str(e), "stopped_run": stopped_container_run(t)}


def _stale_after(c) -> float:
    """``status.stale_after_s`` from the invoke/dapo_ops config, else statusview.DEFAULT_STALE_AFTER_S."""
    try:
        return float((c.config.get("status", {}) or {}).get("stale_after_s") or statusview.DEFAULT_STALE_AFTER_S)
    except (AttributeError, TypeError, ValueError):
        return statusview.DEFAULT_STALE_AFTER_S


def collect_rows(c, chosen: list, run: str = "", all_runs: bool = False,
                 stale_after_s: float = statusview.DEFAULT_STALE_AFTER_S) -> list[statusview.StatusRow]:
    """Status rows for every target (one probe each, in parallel).

    :param run: a run id (else the host's current run).
    :param all_runs: every recorded run per host, newest first (run.json only, no log tail).
    :returns: rows in host order; an unreachable host gives a row with ``state="error"``.
    """
    if all_runs:
        req = {"op": "list"}
    else:
        req = {"op": "status", "run_id": run or None, "tail_bytes": statusview.DEFAULT_TAIL_BYTES}
    rows: list[statusview.StatusRow] = []
    for name, res in fan(c, chosen, lambda t: _status_probe(t, req), PROBE_TIMEOUT_S + 15):
        if isinstance(res, str):
            rows.append(statusview.build_row(name, {"error": res}))
        elif res.get("stopped_run"):  # docker stop: the run it held, its last step, and how to go on
            run = res["stopped_run"]
            row = statusview.build_row(name, {"run": run, "tail": "", "now": time.time(),
                                              "supervisor_alive": False, "verl_alive": False})
            row.state, row.eta_s = "error", None
            row.error = "%s: %s; run %s stopped with it at step %s/%s: `docker start %s`, then `inv launch -H %s " \
                        "--resume %s` continues from its last checkpoint" % (
                            name, res["error"].split(": ", 1)[-1] if res["error"].startswith(name) else res["error"],
                            row.run_id, row.step if row.step is not None else "-", row.total or "?",
                            run.get("container") or "<container>", name, row.run_id)
            rows.append(row)
        elif res.get("error"):
            rows.append(statusview.build_row(name, {"error": "%s: %s" % (name, res["error"])}))
        elif all_runs:
            runs = res.get("runs") or []
            if not runs:
                rows.append(statusview.StatusRow(host=name))
            for item in runs:
                rows.append(statusview.build_row(name, {
                    "run": item["run"], "tail": "", "now": res.get("now"),
                    "supervisor_alive": item.get("supervisor_alive"), "verl_alive": item.get("verl_alive")},
                    stale_after_s))
        else:
            rows.append(statusview.build_row(name, res, stale_after_s))
    return rows


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
    for col in statusview.COLUMNS:
        table.add_column(col, no_wrap=col not in ("features", "swanlab"), overflow="fold")
    notes = []
    for r in rows:
        cells = statusview.cells(r)
        cells["verdict"] = r.verdict or ("-" if r.state != "error" else "error")
        style = None
        if r.state in ("failed", "supervisor-dead", "error") or r.stale:
            style = "bold red"
        elif r.state == "succeeded":
            style = "green"
        table.add_row(*[Text(cells[c], style=style if c == "state" else "") for c in statusview.COLUMNS])
        if r.cluster:  # multi-host run (tasks/multihost.py)
            cl = r.cluster
            notes.append("%s %s: Ray cluster, %s nodes joined (%s), %s devices, head %s:%s" % (
                r.host, r.run_id, cl.get("nodes"), ",".join(cl.get("hosts") or []), cl.get("devices"),
                cl.get("head"), cl.get("port")))
        note = r.error or r.hint
        if note:
            head = "%s %s" % (r.host, r.run_id) if r.run_id else r.host
            notes.append(note if note.startswith(r.host + ":") else "%s: %s" % (head, note))
        notes += statusview.suggestion_lines(r)
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
    if json_:
        print(_json.dumps([r.to_json() for r in rows], indent=1, default=str))
    else:
        render_table(rows)
    errors = [r for r in rows if r.state == "error"]
    if errors:
        if json_:
            fail("; ".join(r.error for r in errors), EXIT_FAILED)
        raise Exit(code=EXIT_FAILED)  # the table's notes already name each failing host and why


# ------------------------------------------------------------------------------------------ logs

class LineWriter(io.TextIOBase):
    """A file-like ``out_stream`` that prints whole lines only, each prefixed, under a shared lock.

    tqdm redraws (``\\r`` inside a line) keep only their last segment, as a terminal would show it; ``\\r\\n``
    from a pty becomes ``\\n``. ``flush_rest()`` prints a last line without newline.
    """

    def __init__(self, prefix: str, lock: threading.Lock, out=None, drop_ctrl_c: bool = False):
        super().__init__()
        self.prefix, self.lock, self.out = prefix, lock, out or sys.stdout
        self.drop_ctrl_c = drop_ctrl_c
        self.buf = ""

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        self.buf += s
        if "\n" in self.buf:
            *lines, self.buf = self.buf.split("\n")
            self._emit(lines)
        return len(s)

    def _emit(self, lines):
        shown = []
        for ln in lines:
            segs = [x for x in ln.split("\r") if x.strip()]
            if segs and self.drop_ctrl_c and segs[-1].strip() == "^C":  # the SSH pty's echo of our \x03
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


def _resolve_logs(c, chosen, run, attempt):
    """resolve probe on every host -> ([(host, info)], [error lines]); Exit when no host has a log."""
    req = {"op": "resolve", "run_id": run or None, "attempt": attempt or None}
    out, errs = [], []
    by_name = {h.name: h for h in chosen}
    notes = []
    for name, res in fan(c, chosen, lambda t: probe(t, req), PROBE_TIMEOUT_S + 15):
        if isinstance(res, str):
            errs.append(res)
        elif res.get("error"):
            # a host without runs is not a failure when others have logs
            (notes if res["error"].startswith("no runs") else errs).append("%s: %s" % (name, res["error"]))
        else:
            out.append((by_name[name], res))
    if not out:
        both = errs + notes
        fail(both[0] if len(both) == 1 else "no host has a log to show: " + "; ".join(both), EXIT_FAILED)
    for e in notes + errs:
        print(e, file=sys.stderr)
    return out, errs


# In the container: tail follows the log by name; ``cat`` holds the exec's stdin and returns at EOF, which comes
# when the docker CLI on the host ends (Ctrl-C through the SSH pty, SSH connection closed, client killed), and then
# the tail is killed too. ``docker exec -t`` + ``\x03`` alone leaves the tail running when the client vanishes.
FOLLOW_SCRIPT = 'tail -n "$1" -F "$0" & t=$!; cat >/dev/null; kill $t 2>/dev/null; wait $t 2>/dev/null; exit 0'


def follow(pairs, lines: int, out=None) -> int:
    """``tail -n <lines> -F <log>`` on every (Target, path) with a pty, lines prefixed by host when several.

    ``-F`` follows the file name, so a rotated/recreated ``train.log`` and a new attempt (appended to the same
    file) keep streaming. Ctrl-C (KeyboardInterrupt) sends ``\\x03`` through each SSH pty (fabric-invoke.md §7):
    the docker CLI on the host gets SIGINT, the exec's stdin closes and :data:`FOLLOW_SCRIPT` kills its tail. A
    host that does not stop within 5 s has its connection closed (same effect).

    :returns: 0 after Ctrl-C or when every tail ended.
    """
    lock = threading.Lock()
    multi = len(pairs) > 1
    promises = []
    failed = []
    for t, path in pairs:
        writer = LineWriter("%s | " % t.name if multi else "", lock, out, drop_ctrl_c=True)
        cmd = t.exec_command(["sh", "-c", FOLLOW_SCRIPT, path, str(int(lines))], interactive=True, workdir="")
        try:
            t.connect()
            p = t.connection().run(cmd, pty=True, asynchronous=True, hide=False, warn=True, in_stream=False,
                                   out_stream=writer, err_stream=writer)
        except RemoteError as e:  # e.g. the host went away between resolve and follow
            failed.append(str(e) if str(e).startswith(t.name) else "%s: %s" % (t.name, e))
            print(failed[-1], file=sys.stderr)
            continue
        promises.append((t, p, writer))
    if not promises:
        fail(failed[0] if failed else "nothing to follow", EXIT_FAILED)
    try:
        while not all(p.runner.process_is_finished for _, p, _ in promises):
            time.sleep(0.1)
    except KeyboardInterrupt:
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
    return 0


def error_excerpts(text: str, evidence: list[str], context: int = ERRORS_CONTEXT) -> list[list[str]]:
    """Blocks of log lines around each evidence line (merged when they overlap).

    :param text: log text (an attempt log tail); split on ``\\n`` and ``\\r``.
    :param evidence: normalised evidence lines (``Verdict.evidence``: ANSI and Ray prefixes stripped).
    :returns: list of blocks, each a list of lines; evidence lines are marked with ``>> ``, context with ``   ``.
    """
    lines = statusview.split_lines(text)
    norm = [statusview.normalise_line(ln).strip() for ln in lines]
    wanted = [e.strip() for e in evidence if e and e.strip()]
    hits = sorted({i for i, n in enumerate(norm) for e in wanted if n and (n == e or e in n)})
    blocks: list[list[str]] = []
    cur_lo = cur_hi = None
    spans = []
    for i in hits:
        lo, hi = max(0, i - context), min(len(lines), i + context + 1)
        if cur_hi is not None and lo <= cur_hi:
            cur_hi = max(cur_hi, hi)
        else:
            if cur_hi is not None:
                spans.append((cur_lo, cur_hi))
            cur_lo, cur_hi = lo, hi
    if cur_hi is not None:
        spans.append((cur_lo, cur_hi))
    hitset = set(hits)
    for lo, hi in spans:
        blocks.append([(">> " if j in hitset else "   ") + statusview.normalise_line(lines[j]) for j in range(lo, hi)])
    return blocks


def _evidence_for(text: str, recorded: dict | None) -> tuple[str | None, list[str]]:
    """(class, evidence lines) from the classifier on ``text``, plus the verdict the supervisor recorded."""
    cls, ev = None, []
    try:
        from dapo_ops.core import classify as _classify
    except ImportError:  # pragma: no cover - classify lands separately; recorded verdicts still work
        _classify = None
    if _classify is not None and text:
        v = _classify.classify(text)
        if v.cls != "success":
            cls, ev = v.cls, list(v.evidence)
    if recorded and recorded.get("cls") != "success":
        cls = recorded.get("cls") or cls
        ev += [e for e in (recorded.get("evidence") or []) if e not in ev]
    return cls, ev


def show_errors(target: Target, run: str, attempt: int, prefix: str, out=None) -> int:
    """Print the classifier's evidence lines of every attempt (or one) with context. Returns blocks printed."""
    out = out or sys.stdout
    res = probe(target, {"op": "errors", "run_id": run or None, "attempt": attempt or None}, timeout=120)
    if res.get("error"):
        raise RemoteError("command", target.name, res["error"])
    recorded = {a.get("n"): a.get("verdict") for a in ((res.get("run") or {}).get("attempts") or [])}
    n = 0
    for entry in res["logs"]:
        text = remote_probe.decode_tail(entry)
        cls, ev = _evidence_for(text, recorded.get(entry["attempt"]))
        blocks = error_excerpts(text, ev)
        if not blocks and not ev:
            continue
        head = "%s===== %s attempt %s: %s =====" % (prefix, res["run_id"], entry["attempt"] or "-", cls or "-")
        lines = [head]
        for b in blocks:
            lines += [prefix + ln for ln in b] + [prefix + "--"]
        if not blocks:  # evidence recorded but outside the bounded tail
            lines += [prefix + ">> " + e for e in ev]
        out.write("\n".join(lines) + "\n")
        n += len(blocks) or 1
    run_rec = res.get("run") or {}
    if n and run_rec.get("status") in statusview.TERMINAL_STATUSES:  # what ended the run, and what to change
        row = statusview.build_row(target.name, {"run": run_rec, "tail": "", "now": 0.0})
        out.write("\n".join(["%s===== %s %s =====" % (prefix, res["run_id"], row.ended)]
                            + [prefix + ln for ln in statusview.suggestion_lines(row, "")]) + "\n")
    return n


@fanout_task(help={
    "lines": "number of lines to show (default 100)",
    "follow": "keep following (tail -F with a pty; Ctrl-C stops the remote tail)",
    "errors": "only the classifier's evidence lines with context, across attempts",
    "attempt": "attempt-K.log instead of train.log",
    "run": "a run id instead of the host's current run",
    "container": CONTAINER_HELP,
})
def logs(c, hosts="", inventory="", lines=100, follow_=False, errors=False, attempt=0, run="", container=""):
    """The run's train.log: last N lines, -f to follow, --errors for failure evidence only."""
    if int(lines) < 0 or int(attempt) < 0:
        fail("logs: --lines and --attempt take a number >= 0 (e.g. --lines 200, --attempt 2)", EXIT_USAGE)
    _, chosen = select_hosts(c, hosts, inventory)
    chosen = with_container(chosen, container)
    multi = len(chosen) > 1
    if errors:
        found, failures = 0, []
        for name, res in fan(c, chosen, lambda t: _capture_errors(t, run, attempt, multi), 180):
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
    pairs, errs = _resolve_logs(c, chosen, run, attempt)
    if follow_:
        targets = [(Target(h, connect_timeout=connect_timeout_override(c)), info["log"]) for h, info in pairs]
        follow(targets, lines)
        return
    logs_by_host = {h.name: info["log"] for h, info in pairs}
    texts = fan(c, [h for h, _ in pairs],
                lambda t: {"text": t.run(["tail", "-n", str(int(lines)), logs_by_host[t.name]],
                                         timeout=PROBE_TIMEOUT_S, workdir="").stdout}, PROBE_TIMEOUT_S + 15)
    lock = threading.Lock()
    for name, res in texts:
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
    buf = io.StringIO()
    n = show_errors(t, run, attempt, "%s | " % t.name if multi else "", buf)
    return {"blocks": n, "text": buf.getvalue()}


# ------------------------------------------------------------------------------------------ stop

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
    req = {"op": "stop", "run_id": run or None, "grace_s": float(grace), "kill_grace_s": 20.0}
    failures, stopped_any = [], False
    for name, res in fan(c, chosen, lambda t: probe(t, req, timeout=float(grace) + 60), float(grace) + 90):
        if isinstance(res, str):
            failures.append(res)
            print(res, file=sys.stderr)
        elif res.get("error"):
            if run and len(chosen) > 1 and res["error"].startswith("no run "):
                continue  # --run names a run on another host
            print("%s: %s" % (name, res["error"]), file=sys.stderr)
            if not res["error"].startswith("no runs"):
                failures.append("%s: %s" % (name, res["error"]))
        elif res.get("already"):
            stopped_any = True
            print("%s: run %s already %s; nothing to stop" % (name, res["run_id"], res["after"]))
        else:
            stopped_any = True
            print("%s: run %s %s -> %s (%s); checkpoints and logs kept"
                  % (name, res["run_id"], res["before"], res["after"], "; ".join(res["actions"])))
        if isinstance(res, dict) and res.get("run_dir"):  # multi-host run: its Ray sessions on every host
            from dapo_ops.cli import multihost
            multihost.stop_cluster(c, inv, name, res["run_dir"])
    if failures:
        raise Exit(code=EXIT_FAILED)  # each failed host was reported above
    if run and not stopped_any:
        fail("no host has run %s; list runs with `inv status --all`" % run, EXIT_FAILED)


# ------------------------------------------------------------------------------------------ watch

#: watch exit codes by final state.
WATCH_CODES = {"succeeded": 0, "failed": 1, "stopped": 2, "supervisor-dead": 3, "no-run": 4, "error": 4,
               "incomplete": 4, "ray-worker": 4}


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
    prev: dict[str, statusview.StatusRow] = {}
    done: dict[str, statusview.StatusRow] = {}
    unreachable: set[str] = set()
    try:
        while True:
            live = [h for h in chosen if h.name not in done]
            for row in collect_rows(c, live, run=run, stale_after_s=_stale_after(c)):
                if row.state == "error" and row.host in prev:  # transient: keep watching
                    if row.host not in unreachable:
                        print("%s (still watching)" % row.error, flush=True)
                        unreachable.add(row.host)
                    continue
                unreachable.discard(row.host)
                for line in statusview.events(prev.get(row.host), row):
                    print(line, flush=True)
                prev[row.host] = row
                if statusview.is_finished(row):
                    done[row.host] = row
                    if row.state in ("no-run", "error") and len(chosen) > 1:
                        print(row.error or "%s: no run to watch" % row.host, flush=True)
            if len(done) == len(chosen):
                break
            time.sleep(max(0.2, float(interval)))
    except KeyboardInterrupt:
        raise Exit("watch interrupted; the runs continue", code=130) from None
    worst = max(done.values(), key=lambda r: WATCH_CODES.get(r.state, 4))
    code = WATCH_CODES.get(worst.state, 4)
    if code:
        if worst.state in ("no-run", "error"):
            fail(worst.error or "%s: no run to watch" % worst.host, code)
        if worst.ended:  # "failed: device OOM after 2 OOM retries (...) at step 4/20"
            detail = worst.ended + (" (%s)" % worst.verdict if worst.verdict and worst.state == "failed" else "")
            if worst.suggestions:
                detail += "; suggestions above (also `inv status -H %s`)" % worst.host
        else:
            detail = "%s: %s" % (worst.state, worst.hint or worst.error or "-")
        fail("%s: run %s %s" % (worst.host, worst.run_id or "-", detail), code)
