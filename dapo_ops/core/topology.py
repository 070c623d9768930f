"""Multi-host topology, Ray head/worker commands and the environment of verl's processes: per-node collectives, and
the Ascend CANN launcher (pure, stdlib only).

The Ray session processes on the hosts (leader, teardown, cluster view) are :mod:`dapo_ops.agent.raysession`.

A multi-host run is one Ray cluster across the hosts' containers (verl's own engine, no other
scheduler): the Ray head runs in the first host's container, a Ray worker in each other one,
and the supervisor starts verl on the head with ``trainer.nnodes`` / ``trainer.n_gpus_per_node``
(and, for one-step-off, the rollout pool's ``rollout.nnodes`` / ``rollout.n_gpus_per_node``)
computed here from the inventory.

Every Ray process is started as ``ray start ... --block`` in its own session, so the run owns
exactly that session: stopping it (SIGTERM to the session) stops only the Ray processes this
run started, never another user's. The Ray processes keep Ray's own GCS reconnect timeout (60 s, Ray's
src/ray/common/ray_config_def.h
``RAY_gcs_rpc_server_reconnect_timeout_s``): a GCS blip shorter than that costs the training nothing. The tool's own
teardown is shorter: a worker's session leader (:func:`dapo_ops.agent.raysession.run_session`) ends its node once
the head's GCS port refuses connections :data:`HEAD_GONE_REFUSALS` probes in a row (the head is gone: final failure,
``inv stop``; a refused port is a head that stopped, not a network blip, which times out instead).

Facts: verl/trainer/ppo/v1/trainer_separate_async.py (pools add up; trainer pool = ``trainer.nnodes`` x ``trainer.n_gpus_per_node``,
rollout pool = ``rollout.nnodes`` x ``rollout.n_gpus_per_node``), verl/utils/device.py and verl's Ascend
scripts and Ascend multi-node guide (the HCCL env every node needs, :func:`ray_process_env`), verl/single_controller/ray/base.py (verl counts ``GPU`` or,
when no GPU exists, ``NPU`` Ray resources).
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from typing import Any

from dapo_ops.core import policy, raynodes
from dapo_ops.core.ladder import resume_command

RAY_PORT = 6379
RAY_DASHBOARD_PORT = 8265
#: seconds between a worker session leader's probes of the head's GCS port (:func:`dapo_ops.agent.raysession.run_session`)
HEAD_PROBE_S = 1.0
#: refused connections in a row after which a worker's leader ends its node: the head's GCS is gone (no Redis-backed
#: GCS fault tolerance here, so a restarted GCS would not know this cluster). A probe that times out or finds the host
#: unreachable (a network blip) resets the count: Ray's own reconnect timeout governs that case.
HEAD_GONE_REFUSALS = 3

#: Run-spec ``env`` names that never reach ``ray start``: the driver's pointer at this cluster (``ray start`` has
#: its own ``--address``) and the proxy exclusions (:func:`ray_process_env` merges its own).
NOT_FOR_RAY_NODES = ("RAY_ADDRESS", "no_proxy", "NO_PROXY")

#: Ascend CANN environment files verl's NPU images source from a shell profile (not the image ENV), in order.
CANN_SET_ENV = ("/usr/local/Ascend/ascend-toolkit/set_env.sh", "/usr/local/Ascend/nnal/atb/set_env.sh")
#: ``spec["launcher"]`` on NPU (planning: :mod:`dapo_ops.control.launch.plan`; the Ray session of a multi-host run
#: starts under it too): a ``docker exec`` has no login shell, so when ``ASCEND_TOOLKIT_HOME`` is unset, source the
#: CANN files that exist, then ``exec`` verl (bash: the files use bash syntax). Preflight reports which of
#: :data:`CANN_SET_ENV` a container has.
CANN_LAUNCHER = (
    "bash",
    "-c",
    'if [ -z "${ASCEND_TOOLKIT_HOME:-}" ]; then for f in '
    + " ".join(CANN_SET_ENV)
    + '; do if [ -f "$f" ]; then . "$f"; fi; done; fi; exec "$@"',
    "dapo-ops-cann",
)


class TopologyError(ValueError):
    """A device split that cannot be placed on the given hosts. ``str()`` is one line with the fix."""


@dataclass(frozen=True)
class Node:
    """One host of the cluster: inventory name, address (the Ray node IP) and device count."""

    name: str
    address: str
    devices: int


@dataclass(frozen=True)
class Topology:
    """Where the trainer and rollout pools sit.

    ``trainer_nodes`` x ``trainer_per_node`` devices form the trainer pool; for one-step-off,
    ``rollout_nodes`` x ``rollout_per_node`` form the rollout pool (0 for DAPO, whose rollout is
    colocated with the trainer). ``overrides()`` gives the values for the run spec's settings.
    """

    mode: str
    nodes: tuple[Node, ...]
    trainer_nodes: int
    trainer_per_node: int
    rollout_nodes: int = 0
    rollout_per_node: int = 0
    placement: dict[str, Any] = field(default_factory=dict)

    @property
    def head(self) -> Node:
        return self.nodes[0]

    @property
    def total_devices(self) -> int:
        return sum(n.devices for n in self.nodes)

    def used(self) -> dict[str, int]:
        """``{host name: devices the pools use on it}``: trainer hosts ``trainer_per_node``, rollout hosts
        ``rollout_per_node`` (one host: both), DAPO every host ``trainer_per_node``."""
        if self.mode == "one-step-off" and len(self.nodes) == 1:
            return {self.nodes[0].name: self.trainer_per_node + self.rollout_per_node}
        if self.mode == "one-step-off":
            trainer = self.nodes[: self.trainer_nodes]
            return {n.name: self.trainer_per_node if n in trainer else self.rollout_per_node for n in self.nodes}
        return {n.name: self.trainer_per_node for n in self.nodes}

    def unused_note(self) -> str | None:
        """One line when the pools leave devices of the hosts idle (``-H h1,h2`` of 8 devices each with
        ``--trainer-gpus 4 --rollout-gpus 4``: the trainer pool takes h1, the rollout pool h2, 4 of each), naming the
        hosts and how to use them; None when every device is used."""
        used = self.used()
        idle = [n for n in self.nodes if used[n.name] < n.devices]
        if not idle:
            return None
        total = sum(used.values())
        where = ", ".join(f"{n.name} {used[n.name]} of {n.devices}" for n in idle)
        if self.mode == "one-step-off" and len(self.nodes) > 1:
            per = min(n.devices for n in self.nodes)
            fix = (
                f"--trainer-gpus / --rollout-gpus are per host: up to {per} each uses them "
                f"(the trainer pool takes {self.trainer_nodes} host(s), the rollout pool the rest)"
            )
        elif self.mode == "one-step-off":
            fix = "raise --trainer-gpus / --rollout-gpus to use them (the pools add up)"
        else:
            fix = "every host gives the smallest host's device count (fix `devices` in hosts.toml if it is wrong)"
        return f"uses {total} of {self.total_devices} devices ({where}): {fix}"

    def settings(self) -> dict[str, Any]:
        """Settings for the run spec (keys of docs/design.md "Run spec" ``settings``)."""
        out = {"nnodes": self.trainer_nodes, "n_gpus_per_node": self.trainer_per_node}
        if self.mode == "one-step-off":
            out.update(
                trainer_gpus=self.trainer_per_node,
                rollout_gpus=self.rollout_per_node,
                rollout_nnodes=self.rollout_nodes,
            )
        return out


def plan_topology(mode: str, nodes: list[Node], trainer_gpus: int = 0, rollout_gpus: int = 0) -> Topology:
    """Compute the pools for ``mode`` ("dapo" | "one-step-off") on ``nodes`` (head first).

    DAPO: every node joins the trainer pool with ``min(devices)`` devices per node
    (``trainer.nnodes = len(nodes)``). One-step-off: the pools are additive (verl/trainer/ppo/v1/trainer_separate_async.py); with
    several hosts the trainer pool takes whole hosts first (``trainer_gpus`` per host on the first
    hosts) and the rollout pool the remaining hosts, so ``-H h1,h2`` puts trainer on h1 and rollout
    on h2. ``trainer_gpus`` / ``rollout_gpus`` are per-node counts (the runbook's
    TRAINER_GPUS / ROLLOUT_GPUS).

    Raises :class:`TopologyError` (one line, with the fix) when the split does not fit.
    """
    if not nodes:
        raise TopologyError("no hosts selected: pass -H name1,name2 with names from hosts.toml")
    per_node = min(n.devices for n in nodes)
    if per_node <= 0:
        bad = min(nodes, key=lambda n: n.devices)
        raise TopologyError(f"host '{bad.name}' has {bad.devices} devices: fix `devices` in hosts.toml")
    if mode == "dapo":
        return Topology(
            mode,
            tuple(nodes),
            trainer_nodes=len(nodes),
            trainer_per_node=per_node,
            placement={n.name: "trainer+rollout" for n in nodes},
        )
    if mode != "one-step-off":
        raise TopologyError(f"unknown mode '{mode}': use dapo or one-step-off")
    if trainer_gpus <= 0 or rollout_gpus <= 0:
        raise TopologyError("one-step-off needs --trainer-gpus and --rollout-gpus > 0 (TRAINER_GPUS / ROLLOUT_GPUS)")
    if len(nodes) == 1:
        node = nodes[0]
        if trainer_gpus + rollout_gpus > node.devices:
            raise TopologyError(
                f"trainer {trainer_gpus} + rollout {rollout_gpus} devices > {node.devices} on '{node.name}': "
                f"pools add up; e.g. --trainer-gpus {max(node.devices - max(node.devices // 4, 1), 1)} "
                f"--rollout-gpus {max(node.devices // 4, 1)}"
            )
        return Topology(
            mode,
            tuple(nodes),
            1,
            trainer_gpus,
            1,
            rollout_gpus,
            placement={node.name: f"trainer {trainer_gpus} + rollout {rollout_gpus}"},
        )
    # several hosts: whole hosts per pool, trainer first
    n_trainer = max(1, len(nodes) // 2) if len(nodes) > 1 else 1
    trainer_hosts, rollout_hosts = nodes[:n_trainer], nodes[n_trainer:]
    if trainer_gpus > per_node or rollout_gpus > per_node:
        raise TopologyError(
            f"--trainer-gpus {trainer_gpus} / --rollout-gpus {rollout_gpus} are per host and exceed the "
            f"{per_node} devices of the smallest host: lower them to <= {per_node}"
        )
    placement = {n.name: f"trainer {trainer_gpus}" for n in trainer_hosts}
    placement.update({n.name: f"rollout {rollout_gpus}" for n in rollout_hosts})
    return Topology(
        mode, tuple(nodes), len(trainer_hosts), trainer_gpus, len(rollout_hosts), rollout_gpus, placement=placement
    )


def ray_resources_arg(accelerator: str, devices: int) -> list[str]:
    """``ray start`` arguments advertising the node's accelerators.

    GPU: ``--num-gpus N`` (Ray's own resource). NPU: ``--resources {"NPU": N}`` (the resource
    name verl counts when no GPU exists; tests/cases/).
    """
    if accelerator == "gpu":
        return ["--num-gpus", str(devices)]
    return ["--resources", json.dumps({"NPU": devices}, separators=(",", ":"))]


def ray_head_argv(ray: str, node: Node, accelerator: str, port: int = RAY_PORT) -> list[str]:
    """argv of the blocking Ray head start (node IP = the host's address, dashboard bound to it)."""
    return [
        ray,
        "start",
        "--head",
        "--block",
        "--disable-usage-stats",
        f"--node-ip-address={node.address}",
        f"--port={port}",
        f"--dashboard-host={node.address}",
        f"--dashboard-port={RAY_DASHBOARD_PORT}",
        *ray_resources_arg(accelerator, node.devices),
    ]


def ray_worker_argv(ray: str, node: Node, head: Node, accelerator: str, port: int = RAY_PORT) -> list[str]:
    """argv of a blocking Ray worker start pointing at the head's GCS."""
    return [
        ray,
        "start",
        "--block",
        "--disable-usage-stats",
        f"--address={head.address}:{port}",
        f"--node-ip-address={node.address}",
        *ray_resources_arg(accelerator, node.devices),
    ]


def ray_process_env(
    accelerator: str,
    node: Node,
    cluster: list[Node],
    iface: str | None,
    base_no_proxy: str = "",
    run_env: dict[str, Any] | None = None,
) -> dict[str, str]:
    """Environment for ``ray start`` on ``node`` (inherited by every Ray worker process there).

    - the run spec's ``env`` (``run_env``; e.g. ``VERL_LOGGING_LEVEL``, ``SWANLAB_MODE``, the proxies, the HCCL
      timeouts and socket port ranges): Ray's workers, verl's TaskRunner among them (``verl/trainer/main_ppo.py:92``
      ``task_runner_class.remote()``), inherit their raylet's environment, not the driver's; verl's job runtime env
      adds only its own fixed list (``verl/trainer/constants_ppo.py:94-97,125-127``: the two HCCL port ranges as
      ``auto`` and only when the driver lacks them). verl's Ascend multi-node guide sets the HCCL variables on all
      nodes (its Ascend multi-machine startup guide). Not :data:`NOT_FOR_RAY_NODES`;
    - collectives: HCCL (Ascend) ``HCCL_IF_IP`` / ``HCCL_SOCKET_IFNAME``, or NCCL ``NCCL_SOCKET_IFNAME`` (NVIDIA);
      ``GLOO_SOCKET_IFNAME`` on both — derived from the host's address and the interface that carries it
      (``iface``; omitted when unknown);
    - ``no_proxy``/``NO_PROXY`` with loopback and every cluster address, so Ray's gRPC and the
      collectives never go through an HTTP proxy (ray-project/ray#6662).

    Ray's own GCS reconnect timeout stays (module docstring). Values are strings; empty or None values are left out.
    """
    env: dict[str, str] = {
        k: str(v) for k, v in (run_env or {}).items() if k not in NOT_FOR_RAY_NODES and v not in (None, "")
    }
    if accelerator == "npu":
        env["HCCL_IF_IP"] = node.address
        if iface:
            env["HCCL_SOCKET_IFNAME"] = iface
    elif iface:
        env["NCCL_SOCKET_IFNAME"] = iface
    if iface:
        env["GLOO_SOCKET_IFNAME"] = iface
    no_proxy = merge_no_proxy(base_no_proxy, [n.address for n in cluster])
    env["no_proxy"] = env["NO_PROXY"] = no_proxy
    return env


def merge_no_proxy(base: str, addresses: list[str]) -> str:
    """``no_proxy`` value: ``base`` entries + localhost, 127.0.0.1, ::1 + ``addresses``, deduplicated, order kept."""
    items: list[str] = []
    for part in [*base.split(","), "localhost", "127.0.0.1", "::1", *addresses]:
        part = part.strip()
        if part and part not in items:
            items.append(part)
    return ",".join(items)


def quoted(argv: list[str]) -> str:
    """Shell-quoted command line for ``argv``."""
    return " ".join(shlex.quote(a) for a in argv)


# ---------------------------------------------------------------------------- the run's Ray sessions
# The processes themselves (session leader, teardown, cluster view) run on the hosts: dapo_ops/agent/raysession.py.

#: seconds the supervisor waits at most for every node to answer before a retry (less once each node is alive or
#: listed dead by Ray: dapo_ops/agent/raysession.py ``cluster_wait``)
RETRY_CHECK_S = 10.0


#: environment variable every Ray process of a multi-host run carries (``control/launch/raycluster.py`` sets it for
#: ``ray start``; raylet, GCS, DashboardAgent, RuntimeEnvAgent and workers inherit it): ``<run_id>``
RAY_RUN_ENV = "DAPO_OPS_RAY_RUN"


def lost_nodes_verdict(
    ray_spec: dict[str, Any], view: dict[str, Any] | None, mode: str = "dapo"
) -> dict[str, Any] | None:
    """A stop verdict (docs/design.md "Verdict" JSON) when a node of ``ray_spec`` is not alive in
    ``view`` (:func:`dapo_ops.agent.raysession.cluster_view`), else None.

    The run is never shrunk: a checkpoint is tied to its world size (``model_world_size_<W>_rank_*``),
    so the fix is to bring the node back and relaunch on the same hosts (the run resumes from it).
    ``mode`` (the run's: ``dapo`` | ``one-step-off``) picks the task the relaunch line names.
    """
    nodes = ray_spec.get("nodes") or []
    hosts = ",".join(n["name"] for n in nodes)
    if view is None:
        head = nodes[0] if nodes else {"name": "?", "address": ray_spec.get("head")}
        lost = list(nodes)
        what = f"the Ray head on {head['name']} ({head['address']}:{ray_spec.get('port', RAY_PORT)}) does not answer"
    else:
        alive = {n["address"] for n in view.get("nodes") or []}
        lost = [n for n in nodes if n["address"] not in alive]
        if not lost:
            return None
        what = "Ray node " + ", ".join(f"{n['name']} ({n['address']})" for n in lost) + " left the cluster"
    pid_file = (nodes[0].get("pid_file") if nodes else "") or ""
    run_id = raynodes.run_id_of(pid_file) or "<run id>"
    detail = {
        "lost_nodes": lost,
        "node": lost[0]["address"] if lost else None,
        "host": lost[0]["name"] if lost else None,
    }
    action = (
        f"{what}; {_network_action(detail)}; bring "
        f"{' and '.join(n['name'] for n in lost) or 'it'} back (inv preflight -H {hosts}) and relaunch with "
        f"`{resume_command({'mode': mode, 'hosts': [n['name'] for n in nodes], 'run_id': run_id})}`: it "
        f"continues from the last checkpoint"
    )
    return {
        "cls": "network",
        "action_kind": policy.kind("network", detail).value,
        "action": action,
        "hint": (
            "A multi-host run keeps its nodes and world size across retries; a lost node stops it. "
            "Check the node's link, container and Ray log (<run_dir>/ray/<host>.log in its container)."
        ),
        "evidence": [what],
        "detail": detail,
    }


def _network_action(detail: dict[str, Any]) -> str:
    """The failure policy's action line for a lost node (class ``network``; dapo_ops/core/policy.py)."""
    r = policy.rule("network", detail)
    assert r is not None  # every class has a catch-all rule (policy.py is checked at import)
    return r.action
