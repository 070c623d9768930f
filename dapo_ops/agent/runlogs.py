"""``inv logs`` inside the container: where a run's logs are, and bounded tails of its attempt logs for
``logs --errors`` (STDLIB ONLY, shipped; :func:`decode_tail` is the operator side's reader of what it ships).

The bundle op ``python3 -S -m dapo_ops.agent.runlogs '{"op": "resolve" | "errors", ...}'`` (the probe's request and
answer forms, :func:`dapo_ops.agent.probe.handler`; a module of its own so a status look never loads it). Tails
are read with :func:`dapo_ops.agent.probe.read_tail` (at most ``tail_bytes`` bytes from the end of each file,
default 4 MiB) and shipped zlib level 6 + base64. Raises
:class:`dapo_ops.agent.probe.ProbeError` (no such run or attempt).
"""

from __future__ import annotations

import base64
import os
import sys
import zlib

from dapo_ops.agent import probe, runfiles
from dapo_ops.core import runstate as _rs

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only (postponed): typing does not load at import
    from typing import Any, Dict, List, Optional, Tuple


def probe_resolve(
    runs_dir: str, run_id: Optional[str] = None, attempt: Optional[int] = None, host: Optional[str] = None
) -> Dict[str, Any]:
    """Paths for ``logs``: ``{"run_id", "run_dir", "log", "attempts": [k...], "status", "cluster",
    "supervisor_pid"}`` (``supervisor_pid``: the run's live supervisor, :func:`dapo_ops.agent.runfiles.is_supervisor_pid`,
    else None: what ``logs -f`` follows until it exits); ``log`` is ``attempt-<attempt>.log`` when ``attempt`` is given (probe.ProbeError when missing), else train.log (an active run whose supervisor is gone: the current attempt's log, :func:`dapo_ops.agent.probe.current_log`); ``cluster`` is
    run.json's (a multi-host run's head). A live Ray worker of another host's run (``host`` given, no attempt
    asked for) answers ``{"serves": {...}}`` instead (:func:`dapo_ops.agent.probe.serves_instead`: the run's log is
    on its head)."""
    serves = None if attempt else probe.serves_instead(runs_dir, host, run_id)
    if serves:
        return {"serves": serves}
    run_dir = probe.resolve_run_dir(runs_dir, run_id)
    if run_dir is None:
        raise probe.ProbeError("no runs in %s: launch one with `inv launch`" % runs_dir)
    run = runfiles.read_run(run_dir) or {}
    attempts = sorted(
        int(n[8:-4])
        for n in os.listdir(run_dir)
        if n.startswith("attempt-") and n.endswith(".log") and n[8:-4].isdigit()
    )
    if attempt:
        log = str(_rs.RunPaths(run_dir).attempt_log(attempt))
        if not os.path.exists(log):
            raise probe.ProbeError(
                "run %s has no attempt %s (attempts: %s)"
                % (os.path.basename(run_dir), attempt, ",".join(map(str, attempts)) or "none")
            )
    sup = (run.get("pids") or {}).get("supervisor")
    sup_alive = bool(sup) and runfiles.is_supervisor_pid(sup, run_dir)
    if not attempt:  # train.log, or the attempt's own log once the supervisor is gone (probe.current_log)
        log = probe.current_log(run, run_dir, sup_alive)
    return {
        "run_id": os.path.basename(run_dir),
        "run_dir": run_dir,
        "log": log,
        "attempts": attempts,
        "status": run.get("status"),
        "cluster": run.get("cluster"),
        "supervisor_pid": sup if sup_alive else None,
    }


def probe_logs_tails(
    runs_dir: str,
    run_id: Optional[str] = None,
    tail_bytes: int = probe.DEFAULT_ERRORS_TAIL_BYTES,
    attempt: Optional[int] = None,
) -> Dict[str, Any]:
    """Bounded tails of every attempt log (or of one attempt) for ``logs --errors``, zlib+base64 encoded.

    :returns: ``{"run_id", "run": run.json, "logs": [{"attempt": k, "path", "size", "offset", "z": b64}]}``;
        ``offset`` is the byte offset the tail starts at. Falls back to train.log when no attempt log exists.
    """
    info = probe_resolve(runs_dir, run_id, attempt)
    run_dir = info["run_dir"]
    ks = [int(attempt)] if attempt else info["attempts"]
    paths: List[Tuple[Optional[int], str]] = [(k, str(_rs.RunPaths(run_dir).attempt_log(k))) for k in ks] or [
        (None, info["log"])
    ]
    logs = []
    for k, p in paths:
        text, size, _ = probe.read_tail(p, tail_bytes)
        logs.append(
            {"attempt": k, "path": p, "size": size, "offset": max(0, (size or 0) - int(tail_bytes)), "z": _b64z(text)}
        )
    return {"run_id": info["run_id"], "run": runfiles.read_run(run_dir), "logs": logs}


def _b64z(text: str) -> str:
    """base64 of zlib level 6 of ``text`` (UTF-8): how ``errors`` ships log tails (:func:`decode_tail` reverses)."""
    return base64.b64encode(zlib.compress(text.encode("utf-8"), 6)).decode("ascii")


handle = probe.handler(
    {
        "resolve": lambda runs_dir, req: probe_resolve(
            runs_dir, req.get("run_id"), req.get("attempt"), req.get("host")
        ),
        "errors": lambda runs_dir, req: probe_logs_tails(
            runs_dir,
            req.get("run_id"),
            int(req.get("tail_bytes") or probe.DEFAULT_ERRORS_TAIL_BYTES),
            req.get("attempt"),
        ),
    }
)


# ------------------------------------------------------------------------------------------ operator side


def decode_tail(entry: Dict[str, Any]) -> str:
    """Text of one ``probe_logs_tails`` log entry (:func:`_b64z` reversed)."""
    return zlib.decompress(base64.b64decode(entry["z"])).decode("utf-8", "replace")


if __name__ == "__main__":
    sys.exit(probe.main(handle=handle))
