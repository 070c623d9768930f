"""One host's evidence of a failed or stalled multi-host attempt, and the collection from every node of the run
(STDLIB ONLY, shipped; ``ray`` is imported by the ``cluster`` op alone, inside a function).

What one host holds, all written since the attempt started (``since``, seconds since the epoch):

- the tails (:data:`TAIL_BYTES`) of the newest :data:`MAX_LOGS` Ray worker logs (``worker-*.err`` / ``.out`` of the
  node's session, ``<RAY_TMPDIR or TMPDIR or /tmp>/ray/session_latest/logs``: where Ray writes each worker
  process's stdout/stderr; ray/_common/utils.py ``get_user_temp_dir``);
- the ``[ERROR]`` lines (:func:`dapo_ops.core.plog.error_lines`) of the CANN plogs in ``plog_dirs`` (default
  :data:`dapo_ops.core.plog.PLOG_DIRS`: ``~/ascend/log/{debug,run}/plog``, ``/root/ascend/log/...``).

:func:`read_host` only reads files on its own host and needs nothing but the stdlib, so it answers from every host
that is reachable, whatever state Ray is in. The transports: the supervisor calls :func:`collect` in-process for
the head; the ``cluster`` op (a child of the supervisor, run with the Python that runs verl, which has ``ray``)
runs :func:`read_host` as a Ray task pinned to each live worker node (``NodeAffinitySchedulingStrategy``, 0 CPUs,
pickled by value: nothing of the bundle is imported there), all nodes at once, each bounded in time; a node that
is not alive or does not answer in time is named as lost. :func:`write` puts one host's answer under
``<run_dir>/evidence/<host>/`` and :func:`dapo_ops.core.first_error.earliest` picks the error the verdict names.

Ops::

    python3 -m dapo_ops.agent.evidence local <ray_logs_dir> <since> [plog_dir ...]   this host: one JSON object
    python3 -m dapo_ops.agent.evidence cluster <run_dir> <since> <wait_s> <nodes>  RAY_ADDRESS from the env;
        <nodes>: JSON [{"name", "address"}] of the worker nodes; writes each answer under <run_dir>/evidence/<name>/
        and prints {"answered": [names], "lost": [{"name", "address", "why"}]}; waits at most wait_s from its start
        and ends itself (SIGALRM) 5 s after that
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from dapo_ops.core import plog

#: bytes read from the end of each Ray worker log / plog file
TAIL_BYTES = 16 << 10
#: newest worker logs / plog files read at most
MAX_LOGS = 16
#: the directory under ``<run_dir>`` that holds one directory per host
EVIDENCE_DIR = "evidence"


def ray_logs_dir() -> str:
    """This host's Ray session log directory: ``<RAY_TMPDIR | TMPDIR | /tmp>/ray/session_latest/logs`` (the temp dir
    ray/_common/utils.py ``get_user_temp_dir`` picks; ``ray start`` without ``--temp-dir``, as control/launch/raycluster.py starts it)."""
    base = os.environ.get("RAY_TMPDIR") or os.environ.get("TMPDIR") or "/tmp"
    return os.path.join(base, "ray", "session_latest", "logs")


def read_host(
    ray_logs: Optional[str],
    since: float,
    plog_dirs: Sequence[str],
    tail_bytes: int = TAIL_BYTES,
    max_logs: int = MAX_LOGS,
) -> Dict[str, Any]:
    """The raw evidence of this host: ``{"host" (hostname), "utc_offset_s" (this host's local time minus UTC: CANN
    dates plog lines in local time), "ray_logs": [{"name", "mtime", "text"}], "plog_texts": [{"file", "path",
    "mtime", "text"}], "errors": [unreadable files]}``, newest files first. ``ray_logs`` None: :func:`ray_logs_dir`.
    Self-contained (stdlib imports inside, no module state) so that Ray can ship it by value to a node that has no
    bundle. Never raises for a missing or unreadable file."""
    import glob as _glob
    import os as _os
    import socket as _socket
    import time as _time

    def tail(path: str) -> str:
        with open(path, "rb") as fh:
            fh.seek(0, _os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - tail_bytes))
            data = fh.read()
        if size > tail_bytes:
            data = data.split(b"\n", 1)[-1]
        return data.decode("utf-8", "replace")

    def newest(paths: List[str]) -> List[Tuple[float, str]]:
        out: List[Tuple[float, str]] = []
        for p in paths:
            try:
                m = _os.path.getmtime(p)
            except OSError:
                continue
            if m >= since:
                out.append((m, p))
        return sorted(out, reverse=True)[:max_logs]

    if ray_logs is None:
        base = _os.environ.get("RAY_TMPDIR") or _os.environ.get("TMPDIR") or "/tmp"
        ray_logs = _os.path.join(base, "ray", "session_latest", "logs")
    lt = _time.localtime()
    found: Dict[str, Any] = {
        "host": _socket.gethostname(),
        "utc_offset_s": int(getattr(lt, "tm_gmtoff", 0) or 0),
        "ray_logs": [],
        "plog_texts": [],
        "errors": [],
    }
    logs = _glob.glob(_os.path.join(ray_logs, "worker-*.err")) + _glob.glob(_os.path.join(ray_logs, "worker-*.out"))
    files = []
    for d in plog_dirs:
        files += _glob.glob(_os.path.join(_os.path.expanduser(d), "*.log"))
    for key, paths in (("ray_logs", logs), ("plog_texts", sorted(set(files)))):
        for m, p in newest(paths):
            try:
                text = tail(p)
            except OSError as e:
                found["errors"].append("%s: %s" % (p, e))
                continue
            if text.strip():
                entry = (
                    {"name": _os.path.basename(p)} if key == "ray_logs" else {"file": _os.path.basename(p), "path": p}
                )
                found[key].append(dict(entry, mtime=m, text=text))
    return found


def parse(raw: Dict[str, Any]) -> Dict[str, Any]:
    """:func:`read_host`'s answer with the plog texts read: ``plog`` (the ``[ERROR]`` lines, oldest first, each with
    its ``file``; ``ts`` moved from the host's local time to UTC by ``utc_offset_s``) and ``plog_files`` (paths)."""
    found = {k: v for k, v in raw.items() if k != "plog_texts"}
    off = float(raw.get("utc_offset_s") or 0)
    found["plog"], found["plog_files"] = [], []
    for f in raw.get("plog_texts") or []:
        found["plog_files"].append(f.get("path") or f.get("file"))
        for e in plog.error_lines(f.get("text") or ""):
            found["plog"].append(dict(e, file=f.get("file"), ts=round(e["ts"] - off, 6)))
    found["plog"].sort(key=lambda e: e["ts"])
    return found


def collect(ray_logs: Optional[str], since: float = 0.0, plog_dirs: Sequence[str] = plog.PLOG_DIRS) -> Dict[str, Any]:
    """This host's evidence (module docstring): ``{"host", "utc_offset_s", "ray_logs", "plog", "plog_files",
    "errors"}``. Never raises for a missing or unreadable file (``errors`` says which)."""
    return parse(read_host(ray_logs, since, list(plog_dirs)))


def write(run_dir: str, host: str, found: Dict[str, Any]) -> str:
    """Write one host's answer under ``<run_dir>/evidence/<host>/``: ``ray-worker-logs.txt`` (each tail under a
    ``==== <file>`` header), ``plog-errors.txt`` (the error lines as written) and ``evidence.json`` (the answer).
    Returns the directory. :raises OSError: the run dir is not writable."""
    d = os.path.join(run_dir, EVIDENCE_DIR, host)
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


def cluster(
    run_dir: str, nodes: List[Dict[str, Any]], since: float, wait_s: float, t0: Optional[float] = None
) -> Dict[str, Any]:
    """Collect from each of ``nodes`` (``[{"name", "address"}]``, Ray node addresses as ``ray start
    --node-ip-address`` gave them) through the run's Ray cluster at ``RAY_ADDRESS``: :func:`read_host` as one task
    pinned to each alive node (0 CPUs: a cluster whose CPUs verl holds still runs it; no retry), all at once; each
    answer is written (:func:`write`) as it comes. Returns ``{"answered": [names], "lost": [{"name", "address",
    "why"}]}``: a node Ray does not list as alive, or that did not answer within ``wait_s`` seconds of ``t0`` (the
    process start: ``import ray`` and ``ray.init`` count, each node then starts one Ray worker process), is lost.
    Imports ``ray``; ``ray.init`` on a dead head may block: the ``cluster`` op's alarm bounds the process."""
    t0 = time.time() if t0 is None else t0
    import logging

    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    if __name__ != "__main__":  # run as a module, not the op: ship read_host by value all the same
        ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(address=os.environ.get("RAY_ADDRESS") or "auto", logging_level=logging.ERROR, log_to_driver=False)
    alive = {n["NodeManagerAddress"]: n["NodeID"] for n in ray.nodes() if n.get("Alive")}
    out: Dict[str, Any] = {"answered": [], "lost": []}
    pending = {}
    task = ray.remote(read_host)
    for n in nodes:
        nid = alive.get(n["address"])
        if nid is None:
            out["lost"].append({"name": n["name"], "address": n["address"], "why": "not alive in the Ray cluster"})
            continue
        ref = task.options(
            num_cpus=0,
            max_retries=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(nid, soft=False),
            name="dapo-ops-evidence",
        ).remote(None, since, list(plog.PLOG_DIRS))
        pending[ref] = n
    deadline = t0 + wait_s
    while pending and time.time() < deadline:
        done, _ = ray.wait(list(pending), num_returns=1, timeout=max(0.1, deadline - time.time()))
        for ref in done:
            n = pending.pop(ref)
            try:
                write(run_dir, n["name"], dict(parse(ray.get(ref)), node=n["name"], address=n["address"]))
                out["answered"].append(n["name"])
            except Exception as e:  # noqa: BLE001 - a node whose task failed is named, never fatal
                out["lost"].append(
                    {
                        "name": n["name"],
                        "address": n["address"],
                        "why": "its collector failed: %s" % (str(e).splitlines() or [type(e).__name__])[0],
                    }
                )
    for n in pending.values():
        out["lost"].append({"name": n["name"], "address": n["address"], "why": "did not answer within %.0f s" % wait_s})
    return out


USAGE = (
    "usage: python3 -m dapo_ops.agent.evidence local <ray_logs_dir> <since> [plog_dir ...] | "
    "cluster <run_dir> <since> <wait_s> <nodes json>"
)


def main(argv: List[str]) -> int:
    """The op's command line (module docstring). Exit 2 with :data:`USAGE` on a malformed call."""
    sub, args = (argv[0], argv[1:]) if argv else ("", [])
    try:
        if sub == "local" and len(args) >= 2:
            print(json.dumps(collect(args[0], float(args[1]), args[2:] or plog.PLOG_DIRS)))
            return 0
        if sub == "cluster" and len(args) == 4:
            t0 = time.time()
            signal.alarm(int(float(args[2])) + 5)  # ray.init can block on a dead head
            print(json.dumps(cluster(args[0], json.loads(args[3]), float(args[1]), float(args[2]), t0)))
            return 0
    except ValueError as e:
        sys.stderr.write("%s\n%s\n" % (e, USAGE))
        return 2
    sys.stderr.write(USAGE + "\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
