"""Bring a Ray cluster up across the hosts' containers, wait for it, and tear it down (operator side).

The pure parts (topology, ``ray start`` argv, per-node collective env) are in
:mod:`dapo_ops.core.topology`; this module does the remote calls through :class:`dapo_ops.control.remote.target.Target`,
each one bundle op ``python3 -m dapo_ops.agent.raysession <iface|start|wait|stop> ...``
(:func:`dapo_ops.control.remote.bundle.run_op`, the one way in: the bundle is installed first where it is missing).

Each ``ray start --block`` runs detached in its own session inside the container (``setsid``) under a
stdlib leader (``raysession lead``: :func:`dapo_ops.agent.raysession.run_session`), the session id written to ``<run_dir>/ray/<host>.pid``
and what the node is (``{"run_id", "name", "role", "head", "head_address", "port"}``) to
``<run_dir>/ray/<host>.json`` (``run_dir`` is the run's cluster dir; the one spelling of these paths is
:mod:`dapo_ops.core.raynodes`). Every Ray process carries ``DAPO_OPS_RAY_RUN=<run_id>``. When ``ray start``
ends — stopped, or by itself once a worker's raylet lost the head at the run's end — the leader ends whatever
Ray left in the session or with that marker (DashboardAgent / RuntimeEnvAgent outlive the raylet otherwise).
Tearing down signals exactly those processes (SIGTERM to the leader, then SIGKILL to any left) — never
``ray stop`` and never another user's Ray.
"""

from __future__ import annotations

import json
import posixpath
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from dapo_ops.control.remote import bundle
from dapo_ops.control.remote.errors import RemoteError
from dapo_ops.control.remote.target import Target
from dapo_ops.core import raynodes, topology
from dapo_ops.core.topology import Node, Topology

#: seconds the workers get to join once the head is up, before giving up
JOIN_TIMEOUT_S = 90.0
#: seconds the head gets to come up (registered in its own GCS), at least; a longer join timeout raises it
HEAD_UP_TIMEOUT_S = 90.0


class ClusterError(RuntimeError):
    """The cluster could not be brought up. ``str()`` is one line naming the host and the fix."""


@dataclass
class ClusterHandle:
    """What a multi-host run records about its cluster (goes into the run spec's ``ray`` field)."""

    head: str
    port: int
    nodes: list[dict]  # [{"name", "address", "devices", "pid_file"}]
    resources: dict  # cluster totals as Ray reports them, e.g. {"NPU": 16.0, "CPU": 4.0}

    def to_json(self) -> dict:
        return {"head": self.head, "port": self.port, "nodes": self.nodes, "resources": self.resources}


def _start_node(
    target: Target,
    argv: list[str],
    env: dict,
    run_dir: str,
    name: str,
    python: str,
    info: dict | None = None,
    launcher: list[str] | tuple[str, ...] = (),
) -> None:
    """Start one blocking ``ray start`` detached in its own session under the ``raysession lead`` op of the bundle
    (installed by :func:`_iface`, the first op on every host), with ``DAPO_OPS_RAY_RUN=<run id>`` (the last part of
    ``run_dir``) in its env and ``info`` in ``<run_dir>/ray/<name>.json``; returns once it is spawned: ONE bundle op,
    ``raysession start`` (:func:`dapo_ops.agent.raysession.start_node`; the Ray CLI is ``ray`` on the container's
    PATH, else ``<python> -m ray.scripts.scripts``). ``launcher``: the run spec's ``launcher`` (the CANN launcher on
    NPU, ``core.topology.CANN_LAUNCHER``): the session starts under it, so the raylet, and every Ray worker it forks,
    has the environment verl's driver has.

    :raises RemoteError: the op failed (kind ``command``, its one line) or the host cannot be reached."""
    run_id = posixpath.basename(run_dir.rstrip("/"))
    req = {"run_dir": run_dir, "name": name, "info": info or {}, "launcher": list(launcher), "args": list(argv[1:])}
    bundle.run_op(
        target, "raysession", ["start", json.dumps(req)], python=python, env={**env, topology.RAY_RUN_ENV: run_id}
    )


def _iface(target: Target, python: str, address: str) -> str | None:
    res = bundle.run_op(target, "raysession", ["iface", address], python=python, site=False, timeout=30, check=False)
    name = (res.stdout or "").strip()
    return name or None


def start(
    topo: Topology,
    targets: dict[str, Target],
    *,
    accelerator: str,
    python: str,
    run_dir: str,
    base_no_proxy: str = "",
    join_timeout: float = JOIN_TIMEOUT_S,
    run_env: dict | None = None,
    launcher: list[str] | tuple[str, ...] = (),
) -> ClusterHandle:
    """Start the Ray head on ``topo.head`` and workers on the other nodes, then wait for all of them.

    ``targets`` maps host names to connected :class:`Target` s (their containers); ``run_dir`` is the
    run's directory inside every container (the same path on each host). The head gets
    ``max(join_timeout, HEAD_UP_TIMEOUT_S)`` seconds to come up, then the workers ``join_timeout`` seconds to
    join (two bounds: a head slow to start on a loaded host is not a worker that cannot reach it, and each error
    names the one that ran out). On any failure everything started is torn down and :class:`ClusterError` names
    the host (a node that never joined, an unreachable container, a head that did not start). ``run_env``: the run
    spec's ``env``, which reaches every node's ``ray start`` (:func:`topology.ray_process_env`); ``launcher``: the
    run spec's ``launcher`` (:func:`_start_node`): Ray's workers on every node inherit the raylet's environment
    (verl's TaskRunner too, ``verl/trainer/main_ppo.py:92``), so on NPU they need CANN's ``set_env.sh`` exactly as
    the driver does.
    """
    head = topo.head
    nodes = list(topo.nodes)
    started: list[Node] = []
    try:
        with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
            ifaces = dict(
                zip([n.name for n in nodes], pool.map(lambda n: _iface(targets[n.name], python, n.address), nodes))
            )
        env = topology.ray_process_env(accelerator, head, nodes, ifaces[head.name], base_no_proxy, run_env)
        info = {"head": head.name, "head_address": head.address, "port": topology.RAY_PORT}
        address = f"{head.address}:{topology.RAY_PORT}"
        head_up_s = max(join_timeout, HEAD_UP_TIMEOUT_S)
        _start_node(
            targets[head.name],
            topology.ray_head_argv("ray", head, accelerator),
            env,
            run_dir,
            head.name,
            python,
            {**info, "role": "head"},
            launcher,
        )
        started.append(head)
        workers = nodes[1:]
        # workers only once the head node is registered in its GCS: a worker that starts earlier gives up by itself
        # ("No node info found for head node in GCS") when the head is slow to come up (a loaded host)
        if workers and not _wait(targets[head.name], python, 1, head_up_s, address)["nodes"]:
            raise ClusterError(
                f"the Ray head on '{head.name}' ({address}) did not come up within {head_up_s:.0f} s: see "
                f"{raynodes.node_file(run_dir, head.name, raynodes.LOG)} in its container (port {topology.RAY_PORT} "
                "taken? ray installed?)"
            )

        def start_worker(n: Node) -> None:
            wenv = topology.ray_process_env(accelerator, n, nodes, ifaces[n.name], base_no_proxy, run_env)
            _start_node(
                targets[n.name],
                topology.ray_worker_argv("ray", n, head, accelerator),
                wenv,
                run_dir,
                n.name,
                python,
                {**info, "role": "worker"},
                launcher,
            )
            started.append(n)  # as soon as it runs: a failing sibling must not leave this one up

        deadline = time.monotonic() + join_timeout  # the workers' bound starts when they do
        with ThreadPoolExecutor(max_workers=max(len(workers), 1)) as pool:
            for fut in [pool.submit(start_worker, n) for n in workers]:
                fut.result()
        view = _wait(targets[head.name], python, len(nodes), max(deadline - time.monotonic(), 1.0), address)
        joined = {n["address"] for n in view["nodes"]}
        missing = [n for n in nodes if n.address not in joined]
        if missing:
            m = missing[0]
            raise ClusterError(
                f"host '{m.name}' ({m.address}) did not join the Ray cluster at {head.address}:{topology.RAY_PORT} "
                f"within {join_timeout:.0f} s: check that it can reach the head on TCP {topology.RAY_PORT} "
                f"(firewall, link, no_proxy) and see {raynodes.node_file(run_dir, m.name, raynodes.LOG)} in its "
                "container"
            )
        totals: dict = {}
        for n in view["nodes"]:
            for k, v in n["resources"].items():
                if not k.startswith("node:"):
                    totals[k] = totals.get(k, 0) + v
        return ClusterHandle(
            head.address,
            topology.RAY_PORT,
            [
                {
                    "name": n.name,
                    "address": n.address,
                    "devices": n.devices,
                    "pid_file": raynodes.node_file(run_dir, n.name, raynodes.PID),
                }
                for n in nodes
            ],
            totals,
        )
    except RemoteError as e:
        stop(started, targets, run_dir=run_dir, python=python)
        raise ClusterError(f"host '{e.host}': {e.message} (Ray cluster not started; nothing left running)") from e
    except ClusterError:
        stop(started, targets, run_dir=run_dir, python=python)
        raise
    except BaseException:
        stop(started, targets, run_dir=run_dir, python=python)
        raise


def _wait(head: Target, python: str, want: int, timeout: float, address: str) -> dict:
    """Poll Ray on the head until ``want`` nodes are alive, one that joined is dead (``gone``), or ``timeout``
    seconds pass. Each probe joins this run's GCS at ``address`` (``<head>:6379``, never ``auto``: an earlier
    session's ``/tmp/ray`` files must not pick the cluster) and ends itself within its budget + 20 s (``raysession wait``'s alarm), so no probe is left
    running in the container when the SSH command times out."""
    deadline = time.monotonic() + timeout
    last: dict[str, Any] = {"nodes": []}
    while True:
        left = max(deadline - time.monotonic(), 1.0)
        res = bundle.run_op(
            head,
            "raysession",
            ["wait", f"{left:.1f}", str(want)],
            python=python,
            env={"RAY_ADDRESS": address},
            timeout=left + 30,
            check=False,
        )
        try:
            last = json.loads((res.stdout or "").strip().splitlines()[-1])
        except (ValueError, IndexError):
            last = {"nodes": []}  # GCS not up yet: ray.init failed; retry until the deadline
        if res.exited == 0 or last.get("gone") or time.monotonic() >= deadline:
            return last
        time.sleep(1.0)


def stop(nodes, targets: dict[str, Target], *, run_dir: str, python: str, grace_s: float = 15.0) -> dict[str, str]:
    """Stop the Ray sessions this run started on ``nodes`` (Node objects or {"name": ...} dicts).

    Returns {host: "stopped N processes" | "<one-line error>"}; never raises for one host's failure,
    so the others are still cleaned up.
    """
    names = [n["name"] if isinstance(n, dict) else n.name for n in nodes]

    def one(name: str) -> str:
        try:
            pid_file = raynodes.node_file(run_dir, name, raynodes.PID)
            res = bundle.run_op(
                targets[name],
                "raysession",
                ["stop", pid_file, str(grace_s)],
                python=python,
                site=False,
                timeout=grace_s + 60,
                check=False,
            )
            return f"stopped {(res.stdout or '0').strip() or '0'} processes"
        except RemoteError as e:
            return str(e)

    if not names:
        return {}
    with ThreadPoolExecutor(max_workers=len(names)) as pool:
        return dict(zip(names, pool.map(one, names)))
