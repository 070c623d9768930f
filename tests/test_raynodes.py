"""The one spelling of a multi-host run's Ray node files (dapo_ops.core.raynodes): what control/launch/raycluster.py writes and the
probe, occupancy, status and the lost-node verdict read."""

from __future__ import annotations

from dapo_ops.core import raynodes, topology

RID = "20261129-150000-abcd"


def test_the_layout_is_runs_dir_cluster_run_id_ray_host_kind():
    cdir = raynodes.cluster_dir("/verl/dapo_runs/", RID)
    assert cdir == f"/verl/dapo_runs/.cluster/{RID}"
    assert raynodes.ray_dir(cdir) == f"/verl/dapo_runs/.cluster/{RID}/ray"
    assert [raynodes.node_file(cdir, "h2", k) for k in (raynodes.PID, raynodes.LOG, raynodes.INFO)] == [
        f"/verl/dapo_runs/.cluster/{RID}/ray/h2.pid",
        f"/verl/dapo_runs/.cluster/{RID}/ray/h2.log",
        f"/verl/dapo_runs/.cluster/{RID}/ray/h2.json",
    ]


def test_the_run_id_of_a_node_file_and_of_other_paths():
    assert raynodes.run_id_of(raynodes.node_file(raynodes.cluster_dir("/r", RID), "h1", raynodes.PID)) == RID
    assert raynodes.run_id_of(f"/r/{RID}/train.log") is None
    assert raynodes.run_id_of("h1.pid") is None and raynodes.run_id_of("") is None


def test_the_lost_node_verdict_names_the_run_of_the_head_pid_file():
    nodes = [
        {
            "name": "h1",
            "address": "198.51.100.11",
            "pid_file": raynodes.node_file(raynodes.cluster_dir("/r", RID), "h1", raynodes.PID),
        },
        {
            "name": "h2",
            "address": "198.51.100.12",
            "pid_file": raynodes.node_file(raynodes.cluster_dir("/r", RID), "h2", raynodes.PID),
        },
    ]
    v = topology.lost_nodes_verdict({"nodes": nodes}, {"nodes": [{"address": "198.51.100.11"}]}, "dapo")
    assert f"--resume {RID}" in v["action"] and "h2 (198.51.100.12)" in v["action"], v
