"""One host's evidence of a failed or stalled multi-host attempt (STDLIB ONLY, shipped; issue 29 item 5).

``python3 -m dapo_ops.agent.evidence <ray_logs_dir> <since_epoch_s> [plog_dir ...]`` prints one JSON object:
``{"host": <hostname>, "ray_logs": [{"name", "mtime", "text"}], "plog": [plog error lines], "plog_files": [...],
"errors": [...]}``. What it reads, all written since the attempt started (``since``):

- the tails (:data:`TAIL_BYTES`) of the newest :data:`MAX_LOGS` Ray worker logs (``worker-*.err`` / ``.out`` of the
  node's session, ``<RAY_TMPDIR or /tmp/ray>/session_latest/logs``: where Ray writes each worker process's
  stdout/stderr);
- the ``[ERROR]`` lines (:func:`dapo_ops.core.plog.error_lines`) of the CANN plogs in ``plog_dirs`` (default
  :data:`dapo_ops.core.plog.PLOG_DIRS`: ``~/ascend/log/{debug,run}/plog``, ``/root/ascend/log/...``).

It only reads files on its own host, so it answers from every host that is reachable, whatever state Ray is in;
:func:`write` puts one host's answer under ``<run_dir>/evidence/<host>/`` and :func:`dapo_ops.core.evidence.earliest`
picks the error the verdict names.
"""

from __future__ import annotations

import glob
import json
import os
import socket
import sys
from typing import Any, Dict, List, Sequence

from dapo_ops.core import plog

#: bytes read from the end of each Ray worker log / plog file
TAIL_BYTES = 16 << 10
#: newest worker logs / plog files read at most
MAX_LOGS = 16


def _tail(path: str, n: int = TAIL_BYTES) -> str:
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        fh.seek(max(0, size - n))
        data = fh.read()
    if size > n:
        data = data.split(b"\n", 1)[-1]
    return data.decode("utf-8", "replace")


def _newest(paths: Sequence[str], since: float) -> List[tuple]:
    out = []
    for p in paths:
        try:
            m = os.path.getmtime(p)
        except OSError:
            continue
        if m >= since:
            out.append((m, p))
    return sorted(out, reverse=True)[:MAX_LOGS]


def collect(ray_logs_dir: str, since: float = 0.0, plog_dirs: Sequence[str] = plog.PLOG_DIRS) -> Dict[str, Any]:
    """This host's evidence (module docstring). Never raises for a missing or unreadable file (``errors`` says
    which)."""
    out: Dict[str, Any] = {"host": socket.gethostname(), "ray_logs": [], "plog": [], "plog_files": [], "errors": []}
    logs = glob.glob(os.path.join(ray_logs_dir, "worker-*.err")) + glob.glob(os.path.join(ray_logs_dir, "worker-*.out"))
    for m, p in _newest(logs, since):
        try:
            text = _tail(p)
        except OSError as e:
            out["errors"].append("%s: %s" % (p, e))
            continue
        if text.strip():
            out["ray_logs"].append({"name": os.path.basename(p), "mtime": m, "text": text})
    files: List[str] = []
    for d in plog_dirs:
        files += glob.glob(os.path.join(os.path.expanduser(d), "*.log"))
    for m, p in _newest(sorted(set(files)), since):
        try:
            errs = plog.error_lines(_tail(p))
        except OSError as e:
            out["errors"].append("%s: %s" % (p, e))
            continue
        out["plog_files"].append(p)
        out["plog"] += [dict(e, file=os.path.basename(p)) for e in errs]
    out["plog"].sort(key=lambda e: e["ts"])
    return out


def write(run_dir: str, host: str, found: Dict[str, Any]) -> str:
    """Write one host's answer under ``<run_dir>/evidence/<host>/``: ``ray-worker-logs.txt`` (each tail under a
    ``==== <file>`` header), ``plog-errors.txt`` (the error lines as written) and ``evidence.json`` (the answer).
    Returns the directory."""
    d = os.path.join(run_dir, "evidence", host)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "ray-worker-logs.txt"), "w") as fh:
        for lg in found.get("ray_logs") or []:
            fh.write("==== %s\n%s\n" % (lg.get("name"), lg.get("text") or ""))
    with open(os.path.join(d, "plog-errors.txt"), "w") as fh:
        for e in found.get("plog") or []:
            fh.write("%s  (%s)\n" % (e.get("line"), e.get("file")))
    with open(os.path.join(d, "evidence.json"), "w") as fh:
        json.dump(found, fh, indent=1)
    return d


def main(argv: List[str]) -> int:
    if len(argv) < 2:
        print("usage: python3 -m dapo_ops.agent.evidence <ray_logs_dir> <since_epoch_s> [plog_dir ...]",
              file=sys.stderr)
        return 2
    found = collect(argv[0], float(argv[1]), argv[2:] or plog.PLOG_DIRS)
    print(json.dumps(found))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
