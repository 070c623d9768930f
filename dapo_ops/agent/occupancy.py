"""Who holds a container's devices: the one rule ``launch`` applies on every host before it starts anything,
on the single-host and the multi-host path alike (STDLIB ONLY: shipped with the supervisor bundle).

A container is busy when

1. a live supervisor holds ``<runs_dir>/.lock`` (:func:`dapo_ops.agent.runfiles.active_run`);
2. verl processes of an earlier run (a run dir of this runs_dir) are alive although its supervisor is gone
   (SIGKILLed supervisor): every verl process carries ``DAPO_OPS_RUN_ID=<run_id>`` in its environment (the
   supervisor sets it, docs/design.md run.json), so one ``/proc`` pass finds them whatever their process group;
3. it is a Ray node of a multi-host run that is still up (:func:`dapo_ops.agent.runfiles.ray_sessions`, and processes
   carrying ``DAPO_OPS_RAY_RUN=<run_id>``, topology.RAY_RUN_ENV): a worker whose head's GCS still accepts TCP
   connections, or the head of a run whose supervisor is alive.

Processes of a run that is over are not a reason to refuse: Ray of a cluster run whose head's GCS is gone, and
processes of a finished run (terminal run.json status) that outlived it (Ray agents). With ``sweep`` they are
ended here (:func:`dapo_ops.agent.raysession.stop_session`, :func:`end_pids`: that run's processes only) and reported as
``cleaned``.

CLI in the container (what ``dapo_ops/control/launch/service.py`` refuse_if_busy calls)::

    python3 -m dapo_ops.agent.occupancy <runs_dir> [<host name>] [--sweep]    # one JSON object on stdout
"""

from __future__ import annotations

import json
import os
import socket
import sys
from typing import Any, Dict, List, Optional

from dapo_ops.agent import procs, raysession, runfiles
from dapo_ops.core import raynodes
from dapo_ops.core import runstate
from dapo_ops.core import topology
from dapo_ops.core.ladder import resume_command, resume_settings

#: seconds one TCP connect to a head's GCS may take before the head counts as gone
GCS_CONNECT_TIMEOUT_S = 2.0
#: seconds a lingering Ray session gets to exit after SIGTERM before SIGKILL
SWEEP_GRACE_S = 5.0
_MARKERS = (b"DAPO_OPS_RUN_ID=", ("%s=" % topology.RAY_RUN_ENV).encode())


def scan() -> Dict[str, Dict[str, List[int]]]:
    """One pass over ``/proc``: ``{"verl": {run_id: [pid]}, "ray": {run_id: [pid]}}`` from the environment
    markers ``DAPO_OPS_RUN_ID`` (verl, set by the supervisor) and ``DAPO_OPS_RAY_RUN`` (Ray of a cluster run).
    Zombies and this process are skipped; unreadable processes (other users) are skipped."""
    out: Dict[str, Dict[str, List[int]]] = {"verl": {}, "ray": {}}
    me = os.getpid()
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == me or not procs.pid_alive(int(d)):
            continue
        try:
            with open("/proc/%s/environ" % d, "rb") as fh:
                env = fh.read().split(b"\0")
        except OSError:
            continue
        for item in env:
            for key, marker in zip(("verl", "ray"), _MARKERS):
                if item.startswith(marker):
                    rid = item[len(marker) :].decode("utf-8", "replace")
                    out[key].setdefault(rid, []).append(int(d))
    return out


def gcs_up(address: Optional[str], port: Optional[int], timeout_s: float = GCS_CONNECT_TIMEOUT_S) -> bool:
    """True when ``address:port`` (a Ray head's GCS) accepts a TCP connection within ``timeout_s`` seconds."""
    if not address:
        return False
    try:
        with socket.create_connection((address, int(port or topology.RAY_PORT)), timeout=timeout_s):
            return True
    except (OSError, ValueError):
        return False


def occupancy(runs_dir: str, name: Optional[str] = None, sweep: bool = False) -> Dict[str, Any]:
    """What holds this container (module docstring). ``name``: the inventory host name (Ray node files).

    :returns: ``{"active": lock | None, "verl": [{"run_id", "pids", "pgid", "status", "resume_settings"}],
        "ray": [{"run_id", "role", "head", "head_address", "port", "pids"}] (serving runs only),
        "cleaned": [{"run_id", "processes"}]}``.
    """
    lock = runfiles.active_run(runs_dir)
    active_id = (lock or {}).get("run_id")
    found = scan()
    verl, cleaned = [], []
    for rid, pids in sorted(found["verl"].items(), reverse=True):
        if rid == active_id:
            continue
        rdir = runstate.run_dir_for(runs_dir, rid) if runstate.is_run_id(rid) else None
        if not rdir or not os.path.isdir(rdir):  # not a run of this runs_dir
            continue
        rec = runfiles.read_run(rdir)
        status = (rec or {}).get("status")
        if runstate.RunStatus.of(status).terminal:  # the run is over: what is left of it (Ray agents) goes
            if sweep:
                cleaned.append({"run_id": rid, "processes": end_pids(pids)})
            continue
        verl.append(
            {
                "run_id": rid,
                "pids": len(pids),
                "pgid": ((rec or {}).get("pids") or {}).get("verl_pgid"),
                "status": status,
                "resume_settings": resume_settings((rec or {}).get("spec")),  # busy_reason's resume command
            }
        )
    sessions = {s["run_id"]: s for s in runfiles.ray_sessions(runs_dir, name)}
    ray = []
    ray_ids = {r for r in found["ray"] if os.path.isdir(raynodes.cluster_dir(runs_dir, r))}
    for rid in sorted(set(sessions) | ray_ids, reverse=True):
        info = sessions.get(rid) or _node_info(runs_dir, rid, name)
        pids = found["ray"].get(rid, [])
        if info.get("role") == "head":
            serving = rid == active_id or rid in found["verl"]
        else:
            serving = gcs_up(info.get("head_address"), info.get("port"))
        if serving:
            ray.append(
                {
                    "run_id": rid,
                    "role": info.get("role"),
                    "head": info.get("head"),
                    "head_address": info.get("head_address"),
                    "port": info.get("port"),
                    "pids": len(pids),
                }
            )
        elif sweep:
            pid_file = info.get("pid_file") or raynodes.node_file(
                raynodes.cluster_dir(runs_dir, rid), name or "-", raynodes.PID
            )
            n = raysession.stop_session(pid_file, SWEEP_GRACE_S)
            cleaned.append({"run_id": rid, "processes": n})
    return {"active": lock, "verl": verl, "ray": ray, "cleaned": cleaned}


def busy_reason(occ: Dict[str, Any], host: str, where: str) -> Optional[Dict[str, str]]:
    """Why a container is busy, from an :func:`occupancy` answer, as ``{"what", "fix", "line"}`` (``line``: the one
    line ``inv launch`` refuses with, what and fix joined); None when nothing holds it. ``host``: the inventory name;
    ``where``: ``container verl`` / ``host shell``. The one wording of launch's refusal
    (dapo_ops/control/launch/service.py refuse_if_busy) and preflight's ``active-run`` check."""

    def reason(what: str, sep: str, fix: str) -> Dict[str, str]:
        return {"what": what, "fix": fix, "line": what + sep + fix}

    active = occ.get("active")
    if active:
        rid = active.get("run_id")
        return reason(
            "run %s is already active on %s (%s)" % (rid, host, where),
            "; ",
            "follow it with `inv status -H %s` or stop it with `inv stop -H %s --run %s`" % (host, host, rid),
        )
    for v in occ.get("verl") or []:
        pg = ", pgid %s" % v["pgid"] if v.get("pgid") else ""
        n = "%s process%s" % (v["pids"], "es" if v["pids"] != 1 else "")
        return reason(
            "%s: verl of run %s still runs (%s%s) although its supervisor is gone" % (host, v["run_id"], n, pg),
            ": ",
            "end it with `inv stop -H %s --run %s`, then `%s` continues from its checkpoints"
            % (
                host,
                v["run_id"],
                resume_command(dict({"hosts": [host], "run_id": v["run_id"]}, **v.get("resume_settings") or {})),
            ),
        )
    for r in occ.get("ray") or []:
        head = r.get("head") or "<its head>"
        return reason(
            "%s is already a Ray node of multi-host run %s (head %s %s)"
            % (host, r["run_id"], head, r.get("head_address") or ""),
            ": ",
            "stop that run first (inv stop -H %s --run %s) or pick other hosts" % (head, r["run_id"]),
        )
    return None


def end_pids(pids: List[int], grace_s: float = SWEEP_GRACE_S) -> int:
    """SIGTERM ``pids``, wait up to ``grace_s`` seconds, SIGKILL what is left (:func:`dapo_ops.agent.procs.terminate`);
    returns how many there were."""
    procs.terminate(lambda: [p for p in pids if procs.pid_alive(p)], grace_s)
    return len(pids)


def _node_info(runs_dir: str, run_id: str, name: Optional[str]) -> Dict[str, Any]:
    """The node record of ``run_id`` on this host even when its session leader is gone (agents left over)."""
    if name:
        cdir = raynodes.cluster_dir(runs_dir, run_id)
        try:
            info = runfiles.read_json(raynodes.node_file(cdir, name, raynodes.INFO))
        except ValueError:
            info = None
        if isinstance(info, dict):
            return dict(info, pid_file=raynodes.node_file(cdir, name, raynodes.PID))
    return {}


def main(argv: Optional[List[str]] = None) -> int:
    """``python3 -m dapo_ops.agent.occupancy <runs_dir> [<host name>] [--sweep]``: print the answer as JSON."""
    args = list(sys.argv[1:] if argv is None else argv)
    sweep = "--sweep" in args
    args = [a for a in args if a != "--sweep"]
    if not args:
        sys.stderr.write("usage: python3 -m dapo_ops.agent.occupancy <runs_dir> [<host name>] [--sweep]\n")
        return 2
    sys.stdout.write(json.dumps(occupancy(args[0], args[1] if len(args) > 1 else None, sweep)) + "\n")
    return 0


if __name__ == "__main__":  # pragma: no cover - exercised through subprocess in tests
    sys.exit(main())
