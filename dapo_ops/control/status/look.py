"""Looking at runs on hosts: the status probe, status rows (a Ray worker host of a multi-host run as part of its
head's run), log paths and ``logs --errors`` excerpts (operator side; returns values or raises typed errors, never
prints or exits). ``stop`` across hosts is :mod:`dapo_ops.control.status.stop`, the ``watch`` loop
:mod:`dapo_ops.control.status.watch`; both look through this module's :func:`probe` / :func:`fan`.

Each host costs one SSH command per look: ``python3 -S -m dapo_ops.agent.runprobe <request>`` in the container, entered
with ``nsenter`` where the host allows it, else ``docker exec`` (:meth:`dapo_ops.control.remote.target.Target.look_command`; the
bundle op :mod:`dapo_ops.agent.runprobe`, :func:`dapo_ops.control.remote.bundle.run_op`), which reads ``run.json``, at most 64 KiB from the end of ``train.log`` and
``/proc`` (never the whole log), and answers one JSON line; when ``docker exec`` fails, the same host command reads
the container's state (a stopped container costs no second command). :mod:`dapo_ops.control.status.rows` turns that
into a row. Hosts are probed in parallel (:func:`dapo_ops.control.remote.fanout.run`, one thread per host) over each host's
reused SSH connection (a control master that outlives the process, :mod:`dapo_ops.control.remote.sshmux`).
The CLI tasks (``dapo_ops/cli/status.py``) parse flags, call these, print and exit.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from dapo_ops.agent import runlogs
from dapo_ops.control.remote import fanout
from dapo_ops.control.remote import bundle
from dapo_ops.control.status import events
import dapo_ops.control.status.rows
from dapo_ops.core import logformat
from dapo_ops.control.remote.fanout import Row
from dapo_ops.control.remote.errors import RemoteError
from dapo_ops.control.remote.target import Target
from dapo_ops.control.status.rows import ERROR, NO_RUN, StatusRow
from dapo_ops.core import raynodes
from dapo_ops.core.runstate import RunStatus

#: the bundle op (module under dapo_ops/agent/) that answers each probe request op (dapo_ops/agent/runprobe.py)
PROBE_OPS = {"status": "runprobe", "list": "runprobe", "stop": "runstop", "resolve": "runlogs", "errors": "runlogs"}
#: seconds for one probe command (status/list/resolve); stop adds its grace periods.
PROBE_TIMEOUT_S = 60.0
#: lines of context around each evidence line in ``logs --errors``.
ERRORS_CONTEXT = 3


class StatusError(Exception):
    """A one-line problem of a status task (``str()`` is the message for the operator; no host has a log to show,
    a run id no host has). ``code`` is the exit code the CLI uses (1)."""

    def __init__(self, message: str, code: int = 1):
        super().__init__(message)
        self.code = code


# ------------------------------------------------------------------------------------------ plumbing


def fan(
    chosen: list, fn, timeout: float, connect_timeout: float | None = None
) -> list[tuple[str, dict[str, Any] | str]]:
    """Run ``fn(target) -> dict`` on every host in parallel (:func:`dapo_ops.control.remote.fanout.run` over each host's
    reused SSH connection, ``Target.reuse``; overall deadline ``timeout`` seconds).

    :returns: ``[(host_name, answer_dict | error_line)]`` in host order; an error line is one line naming the host.
    """
    out: list[tuple[str, dict[str, Any] | str]] = []
    for r in fanout.run(
        chosen, lambda t: Row(data={"answer": fn(t)}), timeout=timeout, connect_timeout=connect_timeout, reuse=True
    ):
        if r.ok:
            out.append((r.host.name, r.row.data["answer"]))
        else:
            out.append((r.host.name, named(r.host.name, r.row.message or r.row.kind)))
    return out


def named(host: str, message: str) -> str:
    """``message`` as one line naming ``host`` once (``h2: ...``; a message that already starts so is kept)."""
    return message if message.startswith(host + ":") else "%s: %s" % (host, message)


def cluster_heads(runs) -> dict[str, tuple[str, str]]:
    """``{worker host: (head host, run id)}`` from ``(host, run id, run.json cluster)`` of multi-host runs' heads
    (``cluster.hosts`` names every node, the head first); the newest run wins where several name a host."""
    out: dict[str, tuple[str, str]] = {}
    for host, run_id, cluster in runs:
        for h in ((cluster or {}).get("hosts") or []) if run_id else []:
            if h != host and (h not in out or out[h][1] < run_id):
                out[h] = (host, run_id)
    return out


def worker_of(row: StatusRow, head: tuple[str | None, str | None]) -> bool:
    """True when ``row`` (one look at a host) is that of a Ray worker of ``head`` = ``(head host, run id)``
    (:func:`cluster_heads`): a live session (the probe's ``serves``: state ``ray-worker``), or no run / only an older,
    inactive run of its own (the session ended with the head's run), or, asked for that run by id (``--run``), no
    dir of it (the probe's error names the run: run.json lives on the head). Any other probe error is never one."""
    if row.state == ERROR:  # only the probe's "no run <id>" (no status: a stopped container's row has its run's)
        return row.status is None and bool(row.run_id) and row.run_id == head[1]
    if row.state == dapo_ops.control.status.rows.RAY_WORKER:
        return True
    return not row.run_status.active and (row.state == NO_RUN or (row.run_id or "") < (head[1] or ""))


def with_cluster_workers(rows: list[StatusRow]) -> list[StatusRow]:
    """``rows`` with each Ray worker host of a chosen head's multi-host run shown as part of that run
    (:func:`rows.worker_row`: the head's state, live or ended), not as ``no-run`` or an old run of its own.
    Rows of hosts whose head was not chosen are kept (a live worker alone stays ``ray-worker``)."""
    heads = cluster_heads((r.host, r.run_id, r.cluster) for r in rows)
    by_run = {(r.host, r.run_id): r for r in rows if r.run_id}
    return [
        dapo_ops.control.status.rows.worker_row(r, by_run[heads[r.host]])
        if r.host in heads and worker_of(r, heads[r.host])
        else r
        for r in rows
    ]


def probe(target: Target, req: dict, timeout: float = PROBE_TIMEOUT_S) -> dict:
    """Run one :mod:`dapo_ops.agent.runprobe` request in the target's container (through the op module
    :data:`PROBE_OPS` names for ``req["op"]``); returns its JSON answer.

    ``runs_dir`` defaults to the host's inventory ``runs_dir``. The answer may be ``{"error": "..."}``
    (no such run / attempt).

    :raises RemoteError: SSH / docker failures, and kind ``command`` when the probe does not answer JSON.
    """
    req = dict(req)
    req.setdefault("runs_dir", target.host.runs_path)
    # site=False (-S): the probe is stdlib only, so the container's site-packages (.pth files) are not even looked at
    # look=True: read-only ops enter with nsenter where the host allows it (Target.look_command); stop execs
    op, look = PROBE_OPS.get(str(req.get("op")), "runprobe"), req.get("op") != "stop"
    res = bundle.run_op(
        target, op, [json.dumps(req)], site=False, timeout=timeout, workdir="", state_on_failure=True, look=look
    )
    try:
        return json.loads(res.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        err = (res.stderr or res.stdout or "no output").strip().splitlines()
        raise RemoteError(
            "command",
            target.name,
            "status probe gave no JSON (is %s a Python 3 in container %s?): %s"
            % (target.host.python, target.container, err[-1] if err else "no output"),
        ) from None


# host shell: the container's current run.json read out of a STOPPED container (docker cp works on it): the
# lock's run id, else the newest run dir; prints nothing when there is none. $1 = container, $2 = runs_dir.
_STOPPED_RUN = (
    'c="$1"; d="$2"; id=$(docker cp "$c:$d/.lock" - 2>/dev/null | tar -xO 2>/dev/null | '
    'sed -n \'s/.*"run_id": *"\\([0-9a-f-]*\\)".*/\\1/p\'); '
    '[ -n "$id" ] && docker cp "$c:$d/$id/run.json" - 2>/dev/null | tar -xO 2>/dev/null; true'
)


def stopped_container_run(target: Target) -> dict | None:
    """run.json of the run a stopped container holds (what ``status`` shows after ``docker stop``), or None."""
    try:
        res = target.host_run(
            ["sh", "-c", _STOPPED_RUN, "sh", target.container or "", target.host.runs_path],
            timeout=PROBE_TIMEOUT_S,
            check=False,
        )
        run = json.loads(res.stdout) if res.stdout.strip() else None
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


def stale_after(config) -> float:
    """``status.stale_after_s`` from the invoke/dapo_ops config (a mapping or invoke ``Config``), else
    :data:`rows.DEFAULT_STALE_AFTER_S` (seconds)."""
    try:
        return float(
            (config.get("status", {}) or {}).get("stale_after_s") or dapo_ops.control.status.rows.DEFAULT_STALE_AFTER_S
        )
    except (AttributeError, TypeError, ValueError):
        return dapo_ops.control.status.rows.DEFAULT_STALE_AFTER_S


# ------------------------------------------------------------------------------------------ status rows


def _stopped_row(name: str, res: dict) -> StatusRow:
    """docker stop: the run the container held, its last step, and how to go on."""
    run = res["stopped_run"]
    row = dapo_ops.control.status.rows.build_row(
        name, {"run": run, "tail": "", "now": time.time(), "supervisor_alive": False, "verl_alive": False}
    )
    row.state, row.eta_s = ERROR, None
    row.error = (
        "%s: %s; run %s stopped with it at step %s/%s: `docker start %s`, then `%s` continues from its last "
        "checkpoint"
        % (
            name,
            res["error"].split(": ", 1)[-1] if res["error"].startswith(name) else res["error"],
            row.run_id,
            row.step if row.step is not None else "-",
            row.total or "?",
            run.get("container") or "<container>",
            dapo_ops.control.status.rows.resume_line(run, name),
        )
    )
    return row


def collect_rows(
    chosen: list,
    run: str = "",
    all_runs: bool = False,
    stale_after_s: float = dapo_ops.control.status.rows.DEFAULT_STALE_AFTER_S,
    connect_timeout: float | None = None,
) -> list[StatusRow]:
    """Status rows for every host (one probe each, in parallel).

    :param run: a run id (else the host's current run).
    :param all_runs: every recorded run per host, newest first (run.json; a log tail only for an active run whose
        supervisor is gone, :func:`dapo_ops.agent.runprobe.probe_list`).
    :returns: rows in host order; an unreachable host gives a row with ``state="error"``.
    """
    req: dict[str, Any]
    if all_runs:
        req = {"op": "list"}
    else:
        req = {"op": "status", "run_id": run or None, "tail_bytes": dapo_ops.control.status.rows.DEFAULT_TAIL_BYTES}
    rows: list[StatusRow] = []
    for name, res in fan(chosen, lambda t: _status_probe(t, req), PROBE_TIMEOUT_S + 15, connect_timeout):
        if isinstance(res, str):
            rows.append(dapo_ops.control.status.rows.build_row(name, {"error": res}))
        elif res.get("stopped_run"):
            rows.append(_stopped_row(name, res))
        elif res.get("error"):
            rows.append(
                dapo_ops.control.status.rows.build_row(
                    name, {"error": named(name, res["error"]), "run_id": res.get("run_id")}
                )
            )
        elif all_runs:
            runs = res.get("runs") or []
            if not runs:
                rows.append(StatusRow(host=name))
            for item in runs:  # run.json, and the log's facts of a run whose supervisor is gone (probe_list)
                rows.append(
                    dapo_ops.control.status.rows.build_row(
                        name, dict(item, tail=item.get("tail") or "", now=res.get("now")), stale_after_s
                    )
                )
        else:
            rows.append(dapo_ops.control.status.rows.build_row(name, res, stale_after_s))
    return rows


# ------------------------------------------------------------------------------------------ logs


@dataclass
class LogsFound:
    """``resolve`` answers: ``found`` [(Host, {"log": path, ...})], ``errors`` (one line per failed host) and
    ``notes`` (hosts without runs, Ray workers of a multi-host run: not a failure while another host has a log)."""

    found: list = field(default_factory=list)
    errors: list = field(default_factory=list)
    notes: list = field(default_factory=list)


def resolve_logs(chosen: list, run: str = "", attempt: int = 0, connect_timeout: float | None = None) -> LogsFound:
    """The log path of the run (or of one attempt) on every host.

    A Ray worker host of a multi-host run (a live session: the probe's ``serves``; or named in the ``cluster.hosts``
    of a chosen head's run while it has no run, or only an older one, of its own) gets one note: its run's log is
    the head's, its own Ray log is ``<runs_dir>/.cluster/<run_id>/ray/<host>.log`` (:mod:`dapo_ops.core.raynodes`).

    :raises StatusError: no host has a log to show (the message names each host's reason).
    """
    req = {"op": "resolve", "run_id": run or None, "attempt": attempt or None}
    by_name = {h.name: h for h in chosen}
    out = LogsFound()
    answers = fan(chosen, lambda t: probe(t, dict(req, host=t.name)), PROBE_TIMEOUT_S + 15, connect_timeout)
    heads = cluster_heads(
        (n, a.get("run_id"), a.get("cluster")) for n, a in answers if isinstance(a, dict) and a.get("log")
    )
    for name, res in answers:
        head, rid = heads.get(name, (None, ""))
        if (
            isinstance(res, dict)
            and head
            and not res.get("serves")
            and ((res.get("error") or "").startswith("no runs") or (res.get("run_id") or "") < rid)
        ):
            ray_log = raynodes.node_file(raynodes.cluster_dir(by_name[name].runs_path, rid), name, raynodes.LOG)
            res = {"serves": {"run_id": rid, "head": head, "ray_log": ray_log}}
        if isinstance(res, str):
            out.errors.append(res)
        elif res.get("serves"):
            sv = res["serves"]
            out.notes.append(
                "%s; its log is the head's (`inv logs -H %s`), its Ray log is %s in its container"
                % (events.worker_line(name, sv.get("run_id"), sv.get("head")), sv.get("head"), sv.get("ray_log"))
            )
        elif res.get("error"):
            (out.notes if res["error"].startswith("no runs") else out.errors).append(named(name, res["error"]))
        else:
            out.found.append((by_name[name], res))
    if not out.found:
        both = out.errors + out.notes
        raise StatusError(both[0] if len(both) == 1 else "no host has a log to show: " + "; ".join(both))
    return out


def tail_texts(pairs: list, lines: int, connect_timeout: float | None = None) -> list[tuple[str, dict[str, Any] | str]]:
    """``tail -n <lines>`` of each found log (the bundle op ``runlogs tail``, :func:`dapo_ops.agent.runlogs.main`):
    ``[(host, {"text": str} | error line)]`` in host order."""
    logs_by_host = {h.name: info["log"] for h, info in pairs}
    return fan(
        [h for h, _ in pairs],
        lambda t: {
            "text": bundle.run_op(
                t, "runlogs", ["tail", str(int(lines)), logs_by_host[t.name]], site=False, timeout=PROBE_TIMEOUT_S,
                workdir="",
            ).stdout
        },
        PROBE_TIMEOUT_S + 15,
        connect_timeout,
    )  # fmt: skip


def follow_log(target: Target, info: dict, lines: int, out_stream):
    """Start following one found log (``info``: a :func:`resolve_logs` answer) until its run ends: the bundle op
    ``runlogs follow`` (:data:`dapo_ops.agent.runlogs.FOLLOW_SCRIPT`: ``tail -n <lines> -F --pid=<supervisor>``,
    a heartbeat, then the run's final state from the status probe after
    :data:`~dapo_ops.agent.runlogs.END_MARK`) with a pty, its output streamed to ``out_stream`` as it comes
    (:func:`dapo_ops.control.remote.bundle.start_op`; the resolve ran an op of the same bundle just before). Returns
    the :class:`invoke.runners.Promise` (the CLI prints, waits and interrupts it: ``dapo_ops/cli/logs.py`` ``follow``).

    :raises RemoteError: the host cannot be reached."""
    req = {
        "op": "status",
        "run_id": info.get("run_id"),
        "runs_dir": target.host.runs_path,
        "host": target.name,
        "tail_bytes": 4096,
    }
    args = ["follow", info["log"], str(int(lines)), str(info.get("supervisor_pid") or ""), json.dumps(req)]
    return bundle.start_op(target, "runlogs", args, out_stream=out_stream, site=False)


def error_excerpts(text: str, evidence: list[str], context: int = ERRORS_CONTEXT) -> list[list[str]]:
    """Blocks of log lines around each evidence line (merged when they overlap).

    :param text: log text (an attempt log tail); split on ``\\n`` and ``\\r``.
    :param evidence: normalised evidence lines (``Verdict.evidence``: ANSI and Ray prefixes stripped).
    :returns: list of blocks, each a list of lines; evidence lines are marked with ``>> ``, context with ``   ``.
    """
    lines = logformat.split_lines(text)
    norm = [logformat.normalise_line(ln).strip() for ln in lines]
    wanted = [e.strip() for e in evidence if e and e.strip()]
    hits = sorted({i for i, n in enumerate(norm) for e in wanted if n and (n == e or e in n)})
    spans: list[tuple[int, int]] = []
    for i in hits:
        lo, hi = max(0, i - context), min(len(lines), i + context + 1)
        if spans and lo <= spans[-1][1]:
            spans[-1] = (spans[-1][0], max(spans[-1][1], hi))
        else:
            spans.append((lo, hi))
    hitset = set(hits)
    return [
        [(">> " if j in hitset else "   ") + logformat.normalise_line(lines[j]) for j in range(lo, hi)]
        for lo, hi in spans
    ]


#: what a live attempt's log (no exit yet) may read as without being a failure: no error (``success`` of the steps
#: so far) or ``crash-other`` (a generic traceback, or nothing: a crash needs the process to have ended)
LIVE_NOT_FAILURE = ("success", "crash-other")


def attempt_is_live(run_rec: dict, n: int | None) -> bool:
    """True when attempt ``n`` of the run record ``run_rec`` (run.json) is still running: the run is not terminal
    and the attempt has no recorded end (``ended_at`` / ``exit_code`` / ``verdict``). A dead supervisor's run stays
    "running" in run.json; its attempt counts as live here, and status names the dead supervisor."""
    if RunStatus.of(run_rec.get("status")).terminal:
        return False
    for a in run_rec.get("attempts") or []:
        if a.get("n") == n:
            return a.get("ended_at") is None and a.get("exit_code") is None and not a.get("verdict")
    return False


def attempt_stopped(run_rec: dict, n: int | None) -> bool:
    """True when attempt ``n`` of the run record ``run_rec`` (run.json) was ended by the operator (``inv stop``): the
    supervisor recorded ``killed_by: "stop"`` for it (agent/supervisor/machine.py, its follow loop saw the stop), or
    the run is ``stopped`` and ``n`` is its last attempt with no verdict of its own (the supervisor was stopped
    before it judged the attempt, or was dead and agent/runstop.py closed the run: run.json ``stop``)."""
    atts = run_rec.get("attempts") or []
    for a in atts:
        if a.get("n") == n and a.get("killed_by") == "stop":
            return True
    if RunStatus.of(run_rec.get("status")) is not RunStatus.STOPPED or not atts:
        return False
    last = max(atts, key=lambda a: a.get("n") or 0)
    return last.get("n") == n and not last.get("verdict")


#: the header ``logs --errors`` gives an attempt the operator stopped that shows no failure (:func:`errors_text`)
STOPPED_ATTEMPT = "stopped by the operator (inv stop), no failure"


def _evidence_for(text: str, recorded: dict | None, live: bool = False) -> tuple[str | None, list[str]]:
    """(class, evidence lines) from the classifier on ``text``, plus the verdict the supervisor recorded. ``live``
    (the attempt is still running, :func:`attempt_is_live`, or the operator stopped it, :func:`attempt_stopped`:
    the traceback of its SIGTERM is the stop's): a verdict of :data:`LIVE_NOT_FAILURE` is no failure
    (``logs --errors`` on a healthy running run never prints ``attempt 1: crash-other``); what the
    live supervisor would call (an OOM line, an error storm replayed on the log's clock) still shows."""
    from dapo_ops.core import classify  # heavy-ish: only ``logs --errors`` needs it

    cls, ev = None, []
    if text:
        v = classify.classify(text)
        if v.cls not in (LIVE_NOT_FAILURE if live else ("success",)):
            cls, ev = v.cls, list(v.evidence)
    if recorded and recorded.get("cls") != "success":
        cls = recorded.get("cls") or cls
        ev += [e for e in (recorded.get("evidence") or []) if e not in ev]
    return cls, ev


def errors_text(target: Target, run: str, attempt: int, prefix: str) -> tuple[str, int]:
    """The classifier's evidence lines of every attempt (or one) with context, as text lines prefixed by
    ``prefix``; a terminal run ends with what ended it and the suggestions. Returns ``(text, blocks)``.

    :raises RemoteError: the probe failed, or kind ``command`` for the probe's own error (no such run/attempt).
    """
    res = probe(target, {"op": "errors", "run_id": run or None, "attempt": attempt or None}, timeout=120)
    if res.get("error"):
        raise RemoteError("command", target.name, res["error"])
    recorded = {a.get("n"): a.get("verdict") for a in ((res.get("run") or {}).get("attempts") or [])}
    out: list[str] = []
    n = 0
    for entry in res["logs"]:
        text = runlogs.decode_tail(entry)
        live = attempt_is_live(res.get("run") or {}, entry["attempt"])
        stopped = attempt_stopped(res.get("run") or {}, entry["attempt"])
        cls, ev = _evidence_for(text, recorded.get(entry["attempt"]), live or stopped)
        blocks = error_excerpts(text, ev)
        if not blocks and not ev:
            if stopped:  # said, so the stop is not mistaken for a failure nor for a missing log; no evidence block
                out.append(
                    "%s===== %s attempt %s: %s ====="
                    % (prefix, res["run_id"], entry["attempt"] or "-", STOPPED_ATTEMPT)
                )
            continue
        out.append("%s===== %s attempt %s: %s =====" % (prefix, res["run_id"], entry["attempt"] or "-", cls or "-"))
        for b in blocks:
            out += [prefix + ln for ln in b] + [prefix + "--"]
        if not blocks:  # evidence recorded but outside the bounded tail
            out += [prefix + ">> " + e for e in ev]
        hosts = ((recorded.get(entry["attempt"]) or {}).get("detail") or {}).get("evidence") or {}
        if hosts.get("line"):  # multi-host: every host's evidence, collected by the supervisor on the head
            out += [
                prefix + ">> " + hosts["line"],
                "%s   every host's Ray worker log tails and plog errors: %s/<host>/" % (prefix, hosts.get("dir")),
            ]
        n += len(blocks) or 1
    run_rec = res.get("run") or {}
    if n and RunStatus.of(run_rec.get("status")).terminal:  # what ended the run, and what to change
        row = dapo_ops.control.status.rows.build_row(target.name, {"run": run_rec, "tail": "", "now": 0.0})
        out += ["%s===== %s %s =====" % (prefix, res["run_id"], row.ended)]
        out += [prefix + ln for ln in events.suggestion_lines(row, "")]
    return "".join(ln + "\n" for ln in out), n
