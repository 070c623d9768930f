"""Pure tests of the multi-host topology and Ray/collective environment (dapo_ops.core.topology)."""

import json

import pytest

from dapo_ops.core import topology as cluster
from dapo_ops.core.topology import Node, TopologyError, plan_topology

H1 = Node("h1", "198.51.100.11", 8)
H2 = Node("h2", "198.51.100.12", 8)
H3 = Node("h3", "198.51.100.13", 8)


def test_dapo_over_two_hosts_is_one_trainer_pool_of_two_nodes():
    topo = plan_topology("dapo", [H1, H2])
    assert topo.settings() == {"nnodes": 2, "n_gpus_per_node": 8}
    assert topo.head == H1


def test_dapo_uses_the_smallest_host_device_count():
    topo = plan_topology("dapo", [H1, Node("h2", "198.51.100.12", 4)])
    assert topo.settings()["n_gpus_per_node"] == 4


def test_one_step_off_across_two_hosts_puts_trainer_on_first_and_rollout_on_second():
    topo = plan_topology("one-step-off", [H1, H2], trainer_gpus=8, rollout_gpus=8)
    assert topo.settings() == {
        "nnodes": 1,
        "n_gpus_per_node": 8,
        "trainer_gpus": 8,
        "rollout_gpus": 8,
        "rollout_nnodes": 1,
    }
    assert topo.placement == {"h1": "trainer 8", "h2": "rollout 8"}


def test_one_step_off_on_one_host_pools_add_up():
    with pytest.raises(TopologyError, match=r"trainer 8 \+ rollout 8 devices > 8 on 'h1'"):
        plan_topology("one-step-off", [H1], trainer_gpus=8, rollout_gpus=8)
    topo = plan_topology("one-step-off", [H1], trainer_gpus=4, rollout_gpus=4)
    assert topo.settings()["rollout_nnodes"] == 1


def test_one_step_off_per_host_counts_must_fit_smallest_host():
    with pytest.raises(TopologyError, match="lower them to <= 8"):
        plan_topology("one-step-off", [H1, H2, H3], trainer_gpus=16, rollout_gpus=8)


def test_errors_are_one_line():
    for args in (("dapo", []), ("nope", [H1]), ("one-step-off", [H1])):
        with pytest.raises(TopologyError) as e:
            plan_topology(*args)
        assert "\n" not in str(e.value)


def test_npu_nodes_advertise_npu_resources_and_gpu_nodes_num_gpus():
    assert cluster.ray_resources_arg("npu", 8) == ["--resources", json.dumps({"NPU": 8}, separators=(",", ":"))]
    assert cluster.ray_resources_arg("gpu", 4) == ["--num-gpus", "4"]


def test_head_binds_to_the_host_address_and_workers_point_at_it():
    head = cluster.ray_head_argv("ray", H1, "npu")
    assert "--head" in head and "--block" in head
    assert f"--node-ip-address={H1.address}" in head and f"--dashboard-host={H1.address}" in head
    worker = cluster.ray_worker_argv("ray", H2, H1, "npu")
    assert f"--address={H1.address}:{cluster.RAY_PORT}" in worker
    assert f"--node-ip-address={H2.address}" in worker


def test_collective_env_for_ascend_and_nvidia():
    npu = cluster.ray_process_env(
        "npu",
        H2,
        [H1, H2],
        "eth0",
        base_no_proxy="corp.example",
        run_env={
            "HCCL_CONNECT_TIMEOUT": "7200",
            "SWANLAB_MODE": "local",
            "VERL_LOGGING_LEVEL": "INFO",
            "RAY_ADDRESS": "198.51.100.11:6379",
            "no_proxy": "ignored.example",
        },
    )
    assert npu["HCCL_IF_IP"] == H2.address and npu["HCCL_SOCKET_IFNAME"] == "eth0"
    assert npu["GLOO_SOCKET_IFNAME"] == "eth0" and npu["HCCL_CONNECT_TIMEOUT"] == "7200"
    # issue 43 F2: the whole run env reaches the raylet, whose workers (verl's TaskRunner too) inherit it
    assert npu["SWANLAB_MODE"] == "local" and npu["VERL_LOGGING_LEVEL"] == "INFO"
    assert "RAY_ADDRESS" not in npu  # ray start has its own --address
    assert npu["no_proxy"].split(",") == ["corp.example", "localhost", "127.0.0.1", "::1", H1.address, H2.address]
    gpu = cluster.ray_process_env("gpu", H1, [H1, H2], "eth0")
    assert gpu["NCCL_SOCKET_IFNAME"] == "eth0" and "HCCL_IF_IP" not in gpu
    assert "NCCL_SOCKET_IFNAME" not in cluster.ray_process_env("gpu", H1, [H1], None)


def test_ray_nodes_keep_rays_own_gcs_reconnect_timeout():
    """Issue 43 F5: main set RAY_gcs_rpc_server_reconnect_timeout_s=5 on every node, which every raylet and worker
    reads (Ray's default is 60 s): a GCS blip over 5 s killed every worker. No node env carries it now."""
    for accel in ("npu", "gpu"):
        for node in (H1, H2):
            env = cluster.ray_process_env(accel, node, [H1, H2], "eth0", run_env={"HCCL_EXEC_TIMEOUT": "1"})
            assert not [k for k in env if k.startswith("RAY_gcs")], env
