"""``inv logs`` inside the container: where a run's logs are, and bounded tails of its attempt logs for
``logs --errors`` (STDLIB ONLY, shipped; :func:`decode_tail` is the operator side's reader of what it ships).

The bundle op ``python3 -S -m dapo_ops.agent.runlogs '{"op": "resolve" | "errors", ...}'`` (the probe's request and
answer forms, :func:`dapo_ops.agent.runprobe.handler`; a module of its own so a status look never loads it). Tails
are read with :func:`dapo_ops.agent.runprobe.read_tail` (at most ``tail_bytes`` bytes from the end of each file,
default 4 MiB) and shipped zlib level 6 + base64. Raises
:class:`dapo_ops.agent.runprobe.ProbeError` (no such run or attempt).

Two more forms of the op print a log as it is, for ``inv logs`` (``dapo_ops/control/status/look.py``
``tail_texts`` and ``follow``, through ``bundle.run_op`` / ``bundle.start_op``: the one way in)::

    python3 -S -m dapo_ops.agent.runlogs tail <lines> <log>                    # GNU ``tail -n <lines> <log>``
    python3 -S -m dapo_ops.agent.runlogs follow <log> <lines> <pid> <request>  # :data:`FOLLOW_SCRIPT`, then the
                                                                               # status probe of <request>
"""

from __future__ import annotations

import base64
import os
import sys
import zlib

from dapo_ops.agent import runprobe, runfiles
from dapo_ops.core import runstate

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only (postponed): typing does not load at import
    from typing import Any, Dict, List, Optional, Tuple


def probe_resolve(
    runs_dir: str, run_id: Optional[str] = None, attempt: Optional[int] = None, host: Optional[str] = None
) -> Dict[str, Any]:
    """Paths for ``logs``: ``{"run_id", "run_dir", "log", "attempts": [k...], "status", "cluster",
    "supervisor_pid"}`` (``supervisor_pid``: the run's live supervisor, :func:`dapo_ops.agent.runfiles.is_supervisor_pid`,
    else None: what ``logs -f`` follows until it exits); ``log`` is ``attempt-<attempt>.log`` when ``attempt`` is given (probe.ProbeError when missing), else train.log (an active run whose supervisor is gone: the current attempt's log, :func:`dapo_ops.agent.runprobe.current_log`); ``cluster`` is
    run.json's (a multi-host run's head). A live Ray worker of another host's run (``host`` given, no attempt
    asked for) answers ``{"serves": {...}}`` instead (:func:`dapo_ops.agent.runprobe.serves_instead`: the run's log is
    on its head)."""
    serves = None if attempt else runprobe.serves_instead(runs_dir, host, run_id)
    if serves:
        return {"serves": serves}
    run_dir = runprobe.resolve_run_dir(runs_dir, run_id)
    if run_dir is None:
        raise runprobe.ProbeError("no runs in %s: launch one with `inv launch`" % runs_dir)
    run = runfiles.read_run(run_dir) or {}
    attempts = sorted(
        int(n[8:-4])
        for n in os.listdir(run_dir)
        if n.startswith("attempt-") and n.endswith(".log") and n[8:-4].isdigit()
    )
    if attempt:
        log = str(runstate.RunPaths(run_dir).attempt_log(attempt))
        if not os.path.exists(log):
            raise runprobe.ProbeError(
                "run %s has no attempt %s (attempts: %s)"
                % (os.path.basename(run_dir), attempt, ",".join(map(str, attempts)) or "none")
            )
    sup = (run.get("pids") or {}).get("supervisor")
    sup_alive = bool(sup) and runfiles.is_supervisor_pid(sup, run_dir)
    if not attempt:  # train.log, or the attempt's own log once the supervisor is gone (probe.current_log)
        log = runprobe.current_log(run, run_dir, sup_alive)
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
    tail_bytes: int = runprobe.DEFAULT_ERRORS_TAIL_BYTES,
    attempt: Optional[int] = None,
) -> Dict[str, Any]:
    """Bounded tails of every attempt log (or of one attempt) for ``logs --errors``, zlib+base64 encoded.

    :returns: ``{"run_id", "run": run.json, "logs": [{"attempt": k, "path", "size", "offset", "z": b64}]}``;
        ``offset`` is the byte offset the tail starts at. Falls back to train.log when no attempt log exists.
    """
    info = probe_resolve(runs_dir, run_id, attempt)
    run_dir = info["run_dir"]
    ks = [int(attempt)] if attempt else info["attempts"]
    paths: List[Tuple[Optional[int], str]] = [(k, str(runstate.RunPaths(run_dir).attempt_log(k))) for k in ks] or [
        (None, info["log"])
    ]
    logs = []
    for k, p in paths:
        text, size, _ = runprobe.read_tail(p, tail_bytes)
        logs.append(
            {"attempt": k, "path": p, "size": size, "offset": max(0, (size or 0) - int(tail_bytes)), "z": _b64z(text)}
        )
    return {"run_id": info["run_id"], "run": runfiles.read_run(run_dir), "logs": logs}


def _b64z(text: str) -> str:
    """base64 of zlib level 6 of ``text`` (UTF-8): how ``errors`` ships log tails (:func:`decode_tail` reverses)."""
    return base64.b64encode(zlib.compress(text.encode("utf-8"), 6)).decode("ascii")


handle = runprobe.handler(
    {
        "resolve": lambda runs_dir, req: probe_resolve(
            runs_dir, req.get("run_id"), req.get("attempt"), req.get("host")
        ),
        "errors": lambda runs_dir, req: probe_logs_tails(
            runs_dir,
            req.get("run_id"),
            int(req.get("tail_bytes") or runprobe.DEFAULT_ERRORS_TAIL_BYTES),
            req.get("attempt"),
        ),
    }
)


# ------------------------------------------------------------------------------------------ tail and follow

#: the follow's heartbeat: one NUL byte every 5 s (every 10th turn of :data:`FOLLOW_SCRIPT`'s 0.5 s loop), dropped by
#: the operator side's line writer (``dapo_ops/cli/logs.py`` ``LineWriter``): a quiet log and a link that is down differ
HEARTBEAT = "\x00"
#: seconds between two heartbeats
HEARTBEAT_S = 5.0
#: what the follow prints before the run's final state (the status probe's JSON answer, same line)
END_MARK = "@@DAPO-FOLLOW-END "

# In the container (sh -c SCRIPT <log> <lines> <supervisor pid> <python> <request>): tail follows the log by name
# until the run's supervisor exits (``--pid``: GNU tail reads what is left, then ends; the supervisor writes
# run.json's terminal status before it exits, dapo_ops/agent/supervisor/); with no live supervisor (the run ended,
# or it died) a plain tail prints the last lines and ends at once. Then the same command reads the run's final
# state with the status probe op (``<python> -S -m dapo_ops.agent.runprobe <request>``, the bundle on PYTHONPATH as
# the op line put it), one line after END_MARK (no second SSH command). ``cat`` holds the exec's stdin and returns
# at EOF, which comes when the docker CLI on the host ends (Ctrl-C through the SSH pty, SSH connection closed,
# client killed): the loop then kills the tail and exits without the final read. ``docker exec -t`` + ``\x03``
# alone leaves the tail running when the client vanishes. tail's notes (rotation: "has become inaccessible" /
# "has appeared") go to its stdout (2>&1): docker exec carries stdout and stderr as two streams, and GNU tail
# writes "tail: " and the note in two writes, so a log line could land between them on the operator's terminal
# ("tail: after rotation ..."); one stream keeps tail's order.
# The loop also prints :data:`HEARTBEAT` every 10th turn (0.5 s each: :data:`HEARTBEAT_S`), so a quiet log and a
# link that is down differ on the operator's side.
FOLLOW_SCRIPT = (
    "exec 3<&0; cat <&3 >/dev/null & c=$!; n=0; "
    'if [ -n "$2" ]; then tail -n "$1" -F --pid="$2" "$0" 2>&1 & t=$!; '
    'else tail -n "$1" "$0" 2>&1 & t=$!; fi; '
    "trap 'kill $t $c 2>/dev/null; exit 0' INT TERM HUP; "
    "while kill -0 $t 2>/dev/null; do "
    "kill -0 $c 2>/dev/null || { kill $t 2>/dev/null; wait $t 2>/dev/null; exit 0; }; sleep 0.5; "
    "n=$((n + 1)); [ $((n % 10)) -ne 0 ] || printf '\\000'; done; "
    "kill $c 2>/dev/null; printf '\\n%s' '" + END_MARK + "'; "
    'exec "$3" -S -m dapo_ops.agent.runprobe "$4"'
)


def tail_argv(lines: int, log: str) -> List[str]:
    """``tail -n <lines> <log>`` (GNU tail: its output, its error line and exit status are the op's)."""
    return ["tail", "-n", str(int(lines)), log]


def follow_argv(log: str, lines: int, pid: str, request: str, python: str) -> List[str]:
    """``sh -c`` :data:`FOLLOW_SCRIPT` with its positional arguments (``$0`` log, ``$1`` lines, ``$2`` supervisor
    pid or "", ``$3`` the python that runs the final status probe, ``$4`` its request JSON)."""
    return ["sh", "-c", FOLLOW_SCRIPT, log, str(int(lines)), pid, python, request]


USAGE = (
    "usage: python3 -m dapo_ops.agent.runlogs '<request json>' | tail <lines> <log> | "
    "follow <log> <lines> <supervisor pid> <request json>"
)


def main(argv: Optional[List[str]] = None) -> int:
    """The op's command line: ``tail`` / ``follow`` replace this process (``exec``: their output, signals and exit
    status are the op's own); anything else is a probe request (:func:`dapo_ops.agent.runprobe.main`). Exit 2 with
    :data:`USAGE` for a malformed ``tail`` / ``follow``."""
    argv = sys.argv[1:] if argv is None else argv
    sub = argv[0] if argv else ""
    try:
        if sub == "tail" and len(argv) == 3:
            cmd = tail_argv(int(argv[1]), argv[2])
        elif sub == "follow" and len(argv) == 5:
            cmd = follow_argv(argv[1], int(argv[2]), argv[3], argv[4], sys.executable)
        elif sub in ("tail", "follow"):
            raise ValueError(sub)
        else:
            return runprobe.main(argv, handle=handle)
    except ValueError:
        sys.stderr.write(USAGE + "\n")
        return 2
    sys.stdout.flush()
    os.execvp(cmd[0], cmd)
    return 127  # pragma: no cover - execvp returns only by raising


# ------------------------------------------------------------------------------------------ operator side


def decode_tail(entry: Dict[str, Any]) -> str:
    """Text of one ``probe_logs_tails`` log entry (:func:`_b64z` reversed)."""
    return zlib.decompress(base64.b64decode(entry["z"])).decode("utf-8", "replace")


if __name__ == "__main__":
    sys.exit(main())
