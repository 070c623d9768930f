"""Where a multi-host run's Ray sessions keep their files on each host: the one spelling of the layout (PURE).

Path rules only, as POSIX strings (shipped into the container with the bundle; every writer and reader uses them;
:func:`dapo_ops.agent.runfiles.ray_sessions` reads the files on the machine)::

    <runs_dir>/.cluster/<run_id>/       cluster_dir(): outside the run dir, so a worker host (no run of its own) has it
      ray/<host>.pid                    session id of the node's ``raysession lead`` (ray start's session leader)
      ray/<host>.log                    ``ray start --block`` output of that node
      ray/<host>.json                   the node record {"run_id", "name", "role" head|worker, "head", "head_address",
                                        "port"}

Written by :func:`dapo_ops.control.launch.raycluster.start` (``_start_node``); read by
:func:`dapo_ops.agent.runfiles.ray_sessions` (the probe's ``serves``, the launch rule
:mod:`dapo_ops.agent.occupancy`), by ``inv logs``/``status`` for a worker's Ray log and by
the lost-node verdict (:func:`dapo_ops.core.topology.lost_nodes_verdict`: the run id of a pid file). Paths are POSIX
strings (the same on the operator side, which builds them for a remote container, and in the container).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing does not load where the probe imports this module
    import os
    from typing import Optional

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
