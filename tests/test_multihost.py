"""Pure tests of the multi-host launch path: the plan of a run on a Ray cluster (tasks/multihost.cluster_plan), the
supervisor-side cluster helpers (topology.lost_nodes_verdict, raysession.stop_session) and the stdlib bundle."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from dapo_ops.agent import raysession
from dapo_ops.core import topology as cluster
from dapo_ops.control import inventory
from dapo_ops.control import remote_bundle
from dapo_ops.control import settings as settings_mod
from dapo_ops.core.topology import TopologyError
from dapo_ops.control.planning import PlanError
from dapo_ops.cli.multihost import cluster_dir, cluster_plan

RAY = {"head": "198.51.100.11", "port": 6379,
       "nodes": [{"name": "h1", "address": "198.51.100.11", "devices": 8, "pid_file": "/r/.cluster/x/ray/h1.pid"},
                 {"name": "h2", "address": "198.51.100.12", "devices": 8, "pid_file": "/r/.cluster/x/ray/h2.pid"}]}


def _hosts(tmp_path, n=3, accel=("npu", "npu", "npu")):
    lines = ['[defaults]', 'devices = 8', 'container = "verl"', 'workdir = "/verl"']
    for i in range(1, n + 1):
        lines += [f"[hosts.h{i}]", f'address = "198.51.100.{10 + i}"', f'accelerator = "{accel[i - 1]}"']
    p = tmp_path / "hosts.toml"
    p.write_text("\n".join(lines) + "\n")
    inv = inventory.load(p)
    return [inv.hosts[f"h{i}"] for i in range(1, n + 1)]


def _st(**flags):
    base = {"model": "/m", "train_file": "/d/t.parquet", "val_file": "/d/v.parquet", "steps": 4}
    return settings_mod.resolve({**base, **flags}, {}, {})


def _plan(hosts, mode, **flags):
    return cluster_plan(_st(**flags), hosts[0], hosts, mode, run_id="20261129-150000-abcd", swanlab_logger=False,
                        inv_proxy={}, extra_overrides=[])


def test_dapo_on_two_hosts_asks_verl_for_two_nodes_of_eight(tmp_path):
    hosts = _hosts(tmp_path, 2)
    plan, topo = _plan(hosts, "dapo")
    assert "trainer.nnodes=2" in plan.argv and "trainer.n_gpus_per_node=8" in plan.argv
    assert plan.spec["settings"]["nnodes"] == 2 and plan.spec["host"] == "h1"
    assert [n.name for n in topo.nodes] == ["h1", "h2"]


def test_one_step_off_on_three_hosts_gives_the_rollout_pool_two_nodes(tmp_path):
    hosts = _hosts(tmp_path, 3)
    plan, topo = _plan(hosts, "one-step-off", trainer_gpus=8, rollout_gpus=8)
    for o in ("trainer.nnodes=1", "trainer.n_gpus_per_node=8", "actor_rollout_ref.rollout.nnodes=2", "actor_rollout_ref.rollout.n_gpus_per_node=8",
              "actor_rollout_ref.hybrid_engine=False"):
        assert o in plan.argv, o
    assert topo.placement == {"h1": "trainer 8", "h2": "rollout 8", "h3": "rollout 8"}


def test_one_step_off_8_plus_8_fits_two_hosts_but_not_one(tmp_path):
    hosts = _hosts(tmp_path, 2)
    plan, _ = _plan(hosts, "one-step-off", trainer_gpus=8, rollout_gpus=8)
    assert "actor_rollout_ref.rollout.n_gpus_per_node=8" in plan.argv
    with pytest.raises(TopologyError, match="per host"):
        _plan(hosts, "one-step-off", trainer_gpus=16, rollout_gpus=8)


def test_a_world_size_the_batch_does_not_split_over_is_one_line(tmp_path):
    hosts = _hosts(tmp_path, 3)   # 3 x 8 = 24 trainer devices; 64 x 8 responses do not split over 24
    with pytest.raises(PlanError) as e:
        _plan(hosts, "dapo")
    assert "\n" not in str(e.value) and "24" in str(e.value)


def test_mixed_accelerators_are_refused_naming_the_hosts(tmp_path):
    hosts = _hosts(tmp_path, 2, ("npu", "gpu", "npu"))
    with pytest.raises(TopologyError, match="h1=npu, h2=gpu"):
        _plan(hosts, "dapo")


def test_cluster_dir_is_outside_the_run_dirs():
    assert cluster_dir("/verl/dapo_runs/", "20261129-150000-abcd") == "/verl/dapo_runs/.cluster/20261129-150000-abcd"


def test_lost_worker_verdict_names_host_and_address_and_never_shrinks():
    alive = {"nodes": [{"address": "198.51.100.11", "resources": {}}, {"address": "198.51.100.12", "resources": {}}]}
    assert cluster.lost_nodes_verdict(RAY, alive) is None
    v = cluster.lost_nodes_verdict(RAY, {"nodes": alive["nodes"][:1]})
    assert v["action_kind"] == "stop" and v["detail"]["host"] == "h2" and v["detail"]["node"] == "198.51.100.12"
    assert "h2 (198.51.100.12)" in v["action"] and "relaunch with `inv launch -H h1,h2 --resume x`" in v["action"]
    assert "\n" not in v["action"]


def test_head_that_does_not_answer_is_named():
    v = cluster.lost_nodes_verdict(RAY, None)
    assert "Ray head on h1 (198.51.100.11:6379)" in v["action"] and v["detail"]["host"] == "h1"


def test_stop_session_ends_exactly_that_session(tmp_path):
    pid_file = tmp_path / "h1.pid"
    inner = f"echo $$ > {pid_file}; sleep 300 & sleep 300"
    proc = subprocess.Popen(["setsid", "sh", "-c", inner])
    other = subprocess.Popen(["sleep", "300"])   # not in the session: must survive
    try:
        end = time.time() + 10
        while not (pid_file.exists() and pid_file.read_text().strip()) and time.time() < end:
            time.sleep(0.05)
        sid = int(pid_file.read_text())
        while len(raysession.session_members(sid)) < 3 and time.time() < end:
            time.sleep(0.05)
        assert raysession.stop_session(str(pid_file), grace_s=5) == 3
        proc.wait(timeout=10)
        assert raysession.session_members(sid) == []
        assert other.poll() is None
        assert raysession.stop_session(str(pid_file)) == 0          # idempotent
        assert raysession.stop_session(str(tmp_path / "missing.pid")) == 0
    finally:
        other.kill()
        proc.kill()


def test_cluster_module_ships_in_the_stdlib_bundle_and_imports_without_site(tmp_path):
    files = remote_bundle.bundle_files()
    # the supervisor imports them for the retry check and the teardown
    assert "core/topology.py" in files and "agent/raysession.py" in files
    pkg = tmp_path / "dapo_ops"
    pkg.mkdir()
    for name, data in files.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_bytes(data)
    code = f"import sys; sys.path.insert(0, {str(tmp_path)!r}); import dapo_ops.core.topology, dapo_ops.agent.raysession, dapo_ops.agent.supervisor"
    res = subprocess.run([sys.executable, "-S", "-I", "-c", code], capture_output=True, text=True,
                         env={"PATH": os.environ.get("PATH", "")})
    assert res.returncode == 0, res.stderr


def test_dry_run_on_two_hosts_prints_the_multi_host_plan_without_contacting_them(tmp_path):
    import io

    from rich.console import Console

    from dapo_ops.cli import multihost

    _hosts(tmp_path, 2)
    buf = io.StringIO()
    con = Console(file=buf, width=4000, color_system=None, highlight=False)
    plan = multihost.dry_run({"steps": 4}, mode="dapo", hosts="h1,h2", inventory=str(tmp_path / "hosts.toml"),
                             env={}, file_cfg={}, console=con)
    text = buf.getvalue()
    assert "trainer.nnodes=2" in plan.argv and "trainer.nnodes=2" in text
    assert "Ray cluster:   head h1 (198.51.100.11:6379), workers h2 (198.51.100.12)" in text
    assert multihost.dry_run({}, mode="dapo", hosts="h1", inventory=str(tmp_path / "hosts.toml"), env={},
                             file_cfg={}, console=con) is None


def test_one_step_off_across_hosts_is_rendered_as_a_cluster_not_one_host(tmp_path):
    import io

    from rich.console import Console

    from dapo_ops.control import plan as plan_mod

    p, _ = _plan(_hosts(tmp_path, 2), "one-step-off", trainer_gpus=8, rollout_gpus=8, framework="fsdp")
    buf = io.StringIO()
    plan_mod.render(p, Console(file=buf, width=300))
    assert buf.getvalue().splitlines()[0].startswith("dry run: one-step-off on a 2-node Ray cluster, head h1")
