"""A real Ray cluster across sandbox hosts' containers (dapo_ops.control.launch.raycluster), torn down to nothing."""

import pytest

from dapo_ops.core import topology as cluster
from dapo_ops.control.launch import raycluster as cluster_ops
from dapo_ops.control.inventory import hosts_file as inventory
from dapo_ops.control.remote.target import Target

pytestmark = pytest.mark.bench

RUN_DIR = "/verl/dapo_runs/cluster-test"


def _ray_processes(sandbox, host: str) -> list[str]:
    out = sandbox.exec(host, "ps -eo args | grep -E '[r]aylet|[g]cs_server|[r]ay start' || true").stdout
    return [line for line in out.splitlines() if line.strip()]


def _setup(sandbox, names):
    inv = inventory.load(sandbox.inventory)
    hosts = [inv.hosts[n] for n in names]
    targets = {h.name: Target(h, h.container) for h in hosts}
    nodes = [cluster.Node(h.name, h.address, h.devices) for h in hosts]
    return targets, nodes


def test_two_hosts_form_one_cluster_with_their_npus_and_stop_leaves_no_ray(sandbox):
    targets, nodes = _setup(sandbox, ["h1", "h2"])
    topo = cluster.plan_topology("dapo", nodes)
    try:
        handle = cluster_ops.start(topo, targets, accelerator="npu", python="python3", run_dir=RUN_DIR)
        assert handle.head == sandbox.addresses["h1"]
        assert handle.resources["NPU"] == 16.0
        assert {n["address"] for n in handle.nodes} == {sandbox.addresses["h1"], sandbox.addresses["h2"]}
        assert _ray_processes(sandbox, "h2"), "the worker's raylet should be running on h2"
    finally:
        result = cluster_ops.stop(nodes, targets, run_dir=RUN_DIR, python="python3")
    assert set(result) == {"h1", "h2"}
    assert _ray_processes(sandbox, "h1") == [] and _ray_processes(sandbox, "h2") == []


def test_a_worker_whose_link_is_down_is_named_and_nothing_is_left_running(sandbox):
    targets, nodes = _setup(sandbox, ["h1", "h2"])
    topo = cluster.plan_topology("dapo", nodes)
    sandbox.link("h2", False)
    try:
        with pytest.raises(cluster_ops.ClusterError) as e:
            cluster_ops.start(topo, targets, accelerator="npu", python="python3", run_dir=RUN_DIR, join_timeout=20)
    finally:
        sandbox.link("h2", True)
    msg = str(e.value)
    assert "\n" not in msg and "'h2'" in msg
    assert _ray_processes(sandbox, "h1") == []
