"""Where a multi-host run's Ray sessions keep their files on each host, and which of them are live (STDLIB ONLY).

The one spelling of the layout (shipped into the container with the bundle; every writer and reader uses it)::

    <runs_dir>/.cluster/<run_id>/       cluster_dir(): outside the run dir, so a worker host (no run of its own) has it
      ray/<host>.pid                    session id of the node's ``raysession lead`` (ray start's session leader)
      ray/<host>.log                    ``ray start --block`` output of that node
      ray/<host>.json                   the node record {"run_id", "name", "role" head|worker, "head", "head_address",
                                        "port"}

Written by :func:`dapo_ops.control.cluster_ops.start` (``_start_node``); read by :func:`ray_sessions` (the probe's
``serves``, the launch rule :mod:`dapo_ops.agent.occupancy`), by ``inv logs``/``status`` for a worker's Ray log and by
the lost-node verdict (:func:`dapo_ops.core.topology.lost_nodes_verdict`: the run id of a pid file). Paths are POSIX
strings (the same on the operator side, which builds them for a remote container, and in the container).
"""

from __future__ import annotations

import os

from dapo_ops.core import runstate

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing does not load where the probe imports this module
    from typing import Any, Dict, List, Optional

#: the directory under ``<runs_dir>`` that holds one directory per multi-host run
CLUSTER_DIR_NAME = ".cluster"
#: the directory under a run's cluster dir that holds the node files
RAY_DIR_NAME = "ray"
#: node file kinds: ``<host>.<kind>``
PID, LOG, INFO = "pid", "log", "json"


def cluster_dir(runs_dir: "os.PathLike[str] | str", run_id: str) -> str:
    """``<runs_dir>/.cluster/<run_id>``: where a run's Ray sessions keep pid files and logs on every host."""
    return "%s/%s/%s" % (str(runs_dir).rstrip("/"), CLUSTER_DIR_NAME, run_id)


def ray_dir(cdir: str) -> str:
    """``<cluster dir>/ray``: the node files of one run (``cdir`` from :func:`cluster_dir`)."""
    return "%s/%s" % (str(cdir).rstrip("/"), RAY_DIR_NAME)


def node_file(cdir: str, host: str, kind: str) -> str:
    """``<cluster dir>/ray/<host>.<kind>``, ``kind`` one of :data:`PID`, :data:`LOG`, :data:`INFO`."""
    return "%s/%s.%s" % (ray_dir(cdir), host, kind)


def run_id_of(path: str) -> "Optional[str]":
    """The run id in a node file's path (``<runs_dir>/.cluster/<run_id>/ray/<host>.pid``), or None."""
    parts = str(path or "").rstrip("/").split("/")
    if len(parts) >= 4 and parts[-2] == RAY_DIR_NAME and parts[-4] == CLUSTER_DIR_NAME:
        return parts[-3]
    return None


def ray_sessions(runs_dir: "os.PathLike[str] | str", name: "Optional[str]" = None) -> "List[Dict[str, Any]]":
    """This container's Ray sessions of multi-host runs whose leader is still alive: the node records
    (``<host>.json``) plus ``pid_file``, ``run_id``, ``name``, ``pid``; ``name`` limits them to one inventory host
    (a shared runs_dir holds every node's files). A leader counts when its PID lives and its argv names ray (a PID
    recycled after a container restart does not). Newest run first."""
    root = "%s/%s" % (str(runs_dir).rstrip("/"), CLUSTER_DIR_NAME)
    out: List[Dict[str, Any]] = []
    try:
        runs = sorted((n for n in os.listdir(root) if runstate.is_run_id(n)), reverse=True)
    except OSError:
        return out
    for rid in runs:
        cdir = cluster_dir(runs_dir, rid)
        try:
            files = sorted(f for f in os.listdir(ray_dir(cdir)) if f.endswith("." + PID))
        except OSError:
            continue
        for f in files:
            node = f[: -len(PID) - 1]
            if name and node != name:
                continue
            pid_file = node_file(cdir, node, PID)
            try:
                with open(pid_file) as fh:
                    sid = int(fh.read().split()[0])
                info = runstate.read_json(node_file(cdir, node, INFO)) or {}
            except (OSError, ValueError, IndexError):
                continue
            cmd = runstate.pid_cmdline(sid) if runstate.pid_alive(sid) else None
            if cmd is None or b"ray" not in cmd:
                continue
            out.append(dict(info if isinstance(info, dict) else {}, run_id=rid, name=node, pid=sid, pid_file=pid_file))
    return out
