"""Pure tests of the multi-host launch path: the plan of a run on a Ray cluster (control/launch/multihost_service.cluster_plan), the
launch service's steps and teardown driven through a fake Target (no SSH), the supervisor-side cluster helpers
(topology.lost_nodes_verdict, raysession.stop_session) and the stdlib bundle."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

import fake_ops

from dapo_ops.agent import raysession
from dapo_ops.core import topology as cluster
from dapo_ops.control.launch import raycluster as cluster_ops
from dapo_ops.control.inventory import hosts_file as inventory
from dapo_ops.control.remote import bundle as remote_bundle
from dapo_ops.control import settings as settings_mod
from dapo_ops.core.topology import TopologyError
from dapo_ops.control.launch.plan import PlanError
from dapo_ops.control.launch.multihost_service import cluster_plan
from dapo_ops.core.raynodes import cluster_dir

RAY = {
    "head": "198.51.100.11",
    "port": 6379,
    "nodes": [
        {"name": "h1", "address": "198.51.100.11", "devices": 8, "pid_file": "/r/.cluster/x/ray/h1.pid"},
        {"name": "h2", "address": "198.51.100.12", "devices": 8, "pid_file": "/r/.cluster/x/ray/h2.pid"},
    ],
}


def _hosts(tmp_path, n=3, accel=("npu", "npu", "npu")):
    lines = ["[defaults]", "devices = 8", 'container = "verl"', 'workdir = "/verl"']
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
    return cluster_plan(
        _st(**flags),
        hosts[0],
        hosts,
        mode,
        run_id="20261129-150000-abcd",
        swanlab_logger=False,
        inv_proxy={},
        extra_overrides=[],
    )


def test_dapo_on_two_hosts_asks_verl_for_two_nodes_of_eight(tmp_path):
    hosts = _hosts(tmp_path, 2)
    plan, topo = _plan(hosts, "dapo")
    assert "trainer.nnodes=2" in plan.argv and "trainer.n_gpus_per_node=8" in plan.argv
    assert plan.spec["settings"]["nnodes"] == 2 and plan.spec["host"] == "h1"
    assert [n.name for n in topo.nodes] == ["h1", "h2"]


def test_one_step_off_on_three_hosts_gives_the_rollout_pool_two_nodes(tmp_path):
    hosts = _hosts(tmp_path, 3)
    plan, topo = _plan(hosts, "one-step-off", trainer_gpus=8, rollout_gpus=8)
    for o in (
        "trainer.nnodes=1",
        "trainer.n_gpus_per_node=8",
        "actor_rollout_ref.rollout.nnodes=2",
        "actor_rollout_ref.rollout.n_gpus_per_node=8",
        "actor_rollout_ref.hybrid_engine=False",
    ):
        assert o in plan.argv, o
    assert topo.placement == {"h1": "trainer 8", "h2": "rollout 8", "h3": "rollout 8"}


def test_one_step_off_8_plus_8_fits_two_hosts_but_not_one(tmp_path):
    hosts = _hosts(tmp_path, 2)
    plan, _ = _plan(hosts, "one-step-off", trainer_gpus=8, rollout_gpus=8)
    assert "actor_rollout_ref.rollout.n_gpus_per_node=8" in plan.argv
    with pytest.raises(TopologyError, match="per host"):
        _plan(hosts, "one-step-off", trainer_gpus=16, rollout_gpus=8)


def test_a_world_size_the_batch_does_not_split_over_is_one_line(tmp_path):
    hosts = _hosts(tmp_path, 3)  # 3 x 8 = 24 trainer devices; 64 x 8 responses do not split over 24
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


class _FakeRay:
    """``ray`` as :func:`raysession.cluster_wait` uses it: ``init`` and ``nodes``, which answers ``views`` in turn
    (the last one again once they run out) and counts its calls."""

    def __init__(self, *views):
        self.views, self.calls = list(views), 0

    def init(self, **_kw):
        pass

    def nodes(self):
        self.calls += 1
        return self.views[min(self.calls, len(self.views)) - 1]


def _node(address, alive):
    return {"NodeManagerAddress": address, "Alive": alive, "Resources": {"NPU": 8.0}}


@pytest.fixture
def fake_ray(monkeypatch):
    """Install a :class:`_FakeRay` (``fake_ray(*views)``) for :func:`raysession.cluster_wait`; no SIGALRM armed in
    this process, no real sleep."""
    monkeypatch.setattr(raysession.signal, "alarm", lambda _s: 0)
    monkeypatch.setattr(raysession.time, "sleep", lambda _s: None)

    def install(*views):
        fake = _FakeRay(*views)
        monkeypatch.setitem(sys.modules, "ray", fake)
        return fake

    return install


def test_the_cluster_check_stops_waiting_once_a_lost_node_is_listed_dead(fake_ray):
    """The check before a retry: h2 is listed dead by the GCS (Ray never revives a dead node), so the answer is
    decided at the first look, not at the end of the wait; the verdict names h2."""
    head, worker = (n["address"] for n in RAY["nodes"])
    fake = fake_ray([_node(head, True), _node(worker, False)])
    view, rc = raysession.cluster_wait(3600.0, 2)
    assert fake.calls == 1 and rc == raysession.FEWER_NODES_RC, (fake.calls, rc)
    assert view == {"nodes": [{"address": head, "resources": {"NPU": 8.0}}], "gone": [worker]}
    assert cluster.lost_nodes_verdict(RAY, view)["detail"]["host"] == "h2"


def test_the_cluster_wait_goes_on_for_a_node_not_listed_yet_and_a_dead_entry_of_an_alive_address(fake_ray):
    """Undecided: a node Ray has not listed yet (joining), or an address whose old node is dead while a new one is
    alive; the wait goes on until every node is alive."""
    head, worker = (n["address"] for n in RAY["nodes"])
    fake = fake_ray(
        [_node(head, True)],
        [_node(head, True), _node(head, False)],
        [_node(head, True), _node(worker, True)],
    )
    view, rc = raysession.cluster_wait(3600.0, 2)
    assert (fake.calls, rc, view["gone"]) == (3, 0, []), (fake.calls, rc, view)
    assert [n["address"] for n in view["nodes"]] == [head, worker]


def test_lost_worker_verdict_of_a_one_step_off_run_names_its_own_task():
    alive = {"nodes": [{"address": RAY["nodes"][0]["address"]}]}
    v = cluster.lost_nodes_verdict(RAY, alive, "one-step-off")
    assert "relaunch with `inv one-step-off -H h1,h2 --resume " in v["action"], v["action"]


def test_head_that_does_not_answer_is_named():
    v = cluster.lost_nodes_verdict(RAY, None)
    assert "Ray head on h1 (198.51.100.11:6379)" in v["action"] and v["detail"]["host"] == "h1"


def test_stop_session_ends_exactly_that_session(tmp_path):
    pid_file = tmp_path / "h1.pid"
    inner = f"echo $$ > {pid_file}; sleep 300 & sleep 300"
    proc = subprocess.Popen(["setsid", "sh", "-c", inner])
    other = subprocess.Popen(["sleep", "300"])  # not in the session: must survive
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
        assert raysession.stop_session(str(pid_file)) == 0  # idempotent
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
    code = f"import sys; sys.path.insert(0, {str(tmp_path)!r}); import dapo_ops.core.topology, dapo_ops.agent.raysession, dapo_ops.agent.supervisor.machine"
    res = subprocess.run(
        [sys.executable, "-S", "-I", "-c", code],
        capture_output=True,
        text=True,
        env={"PATH": os.environ.get("PATH", "")},
    )
    assert res.returncode == 0, res.stderr


def test_dry_run_on_two_hosts_prints_the_multi_host_plan_without_contacting_them(tmp_path):
    import io

    from rich.console import Console

    from dapo_ops.cli import multihost

    _hosts(tmp_path, 2)
    buf = io.StringIO()
    con = Console(file=buf, width=4000, color_system=None, highlight=False)
    plan = multihost.dry_run(
        {"steps": 4},
        mode="dapo",
        hosts="h1,h2",
        inventory=str(tmp_path / "hosts.toml"),
        env={},
        file_cfg={},
        console=con,
    )
    text = buf.getvalue()
    assert "trainer.nnodes=2" in plan.argv and "trainer.nnodes=2" in text
    assert "Ray cluster:   head h1 (198.51.100.11:6379), workers h2 (198.51.100.12)" in text
    assert (
        multihost.dry_run(
            {}, mode="dapo", hosts="h1", inventory=str(tmp_path / "hosts.toml"), env={}, file_cfg={}, console=con
        )
        is None
    )


def test_one_step_off_across_hosts_is_rendered_as_a_cluster_not_one_host(tmp_path):
    import io

    from rich.console import Console

    from dapo_ops.control.launch import dryrun as plan_mod

    p, _ = _plan(_hosts(tmp_path, 2), "one-step-off", trainer_gpus=8, rollout_gpus=8, framework="fsdp")
    buf = io.StringIO()
    plan_mod.render(p, Console(file=buf, width=300))
    assert buf.getvalue().splitlines()[0].startswith("dry run: one-step-off on a 2-node Ray cluster, head h1")


# ------------------------------------------------------------------ the launch service through a fake Target

import json as _json  # noqa: E402
import threading  # noqa: E402
from types import SimpleNamespace  # noqa: E402

from dapo_ops.control.launch import service as launch_svc  # noqa: E402
from dapo_ops.control.launch import multihost_service as mh  # noqa: E402
from dapo_ops.control.remote.errors import RemoteError  # noqa: E402
from dapo_ops.control.swanlab_settings import SwanlabSettings  # noqa: E402


class FakeCluster:
    """What the fake hosts share: the commands in the order they ran, the Ray nodes up, a step that fails."""

    def __init__(self, fail_host: str = "", fail_step: str = "", run_status: str = "running"):
        self.log: list[tuple[str, str, str]] = []  # (host, step, command text)
        self.up: dict[str, str] = {}  # host -> address of a Ray session that was started
        self.fail_host, self.fail_step, self.run_status = fail_host, fail_step, run_status
        self.specs: dict[str, str] = {}  # host -> the spec.json text written there
        self.envs: dict[tuple[str, str], dict] = {}  # (host, step) -> the env the command was given
        self.lock = threading.Lock()


def _step(cmd) -> str:
    """Which launch step a command is (what the fake answers, and where it fails): the bundle op it runs
    (:func:`fake_ops.op_of`); a node's ``raysession start`` is its ``ray start --block`` (head or worker)."""
    op = fake_ops.op_of(cmd) or [""]
    if op[0] == "occupancy":
        return "occupancy"
    if op[:2] == ["raysession", "start"]:
        args = _json.loads(op[2])["args"]
        assert "--block" in args, args
        return "head" if "--head" in args else "worker"
    if op[0] == "raysession" and op[1] in ("stop", "wait", "iface"):
        return op[1]
    if op[0] == "runstart":
        return "supervisor"
    if op[:2] == ["runfiles", "remove"]:
        return "rm"
    return "bundle-check"


class FakeTarget:
    """The Target methods the launch service uses (run, put_text, container_state, close), in memory:
    every command is recorded in the shared :class:`FakeCluster`; the step it names fails with a RemoteError."""

    bare = False

    def __init__(self, host, fc: FakeCluster):
        self.host, self.name, self.container, self.fc = host, host.name, host.container, fc
        self.closed = False

    def _do(self, step: str, text: str):
        with self.fc.lock:
            self.fc.log.append((self.name, step, text))
        if (self.fc.fail_step, self.fc.fail_host or self.name) == (step, self.name):
            raise RemoteError("unreachable", self.name, f"{step} failed (injected)")

    def run(self, cmd, env=None, timeout=None, check=True, workdir=None, stdin=None, **kw):
        step = _step(cmd)
        if step == "supervisor" and stdin is not None:  # the start op writes spec.json from its stdin first
            spec = _json.loads(stdin)["spec"]
            self._do("spec", spec)
            self.fc.specs[self.name] = spec
        self._do(step, cmd if isinstance(cmd, str) else " ".join(cmd))
        with self.fc.lock:
            self.fc.envs[(self.name, step)] = dict(env or {})
        out = ""
        if step == "occupancy":
            out = _json.dumps({"active": None, "verl": [], "ray": []})
        elif step in ("head", "worker"):
            with self.fc.lock:
                self.fc.up[self.name] = self.host.address
        elif step == "wait":
            want = int(cmd.split()[-1] if isinstance(cmd, str) else cmd[-1])
            nodes = [{"address": a, "resources": {"NPU": 8.0, "CPU": 4.0}} for a in self.fc.up.values()]
            return SimpleNamespace(
                exited=0 if len(nodes) >= want else 1, stdout=_json.dumps({"nodes": nodes}), stderr=""
            )
        elif step == "iface":
            out = "eth0"
        elif step == "stop":
            with self.fc.lock:
                self.fc.up.pop(self.name, None)
            out = "3"
        elif step == "supervisor":  # the start op: it answers once the run left "starting"
            rec = {"status": self.fc.run_status, "run_id": "x"}
            if self.fc.run_status == "failed":
                rec["verdict"] = {"cls": "config-error", "action": "fix the override", "evidence": ["bad key"]}
            out = _json.dumps({"started": True, "record": rec, "supervisor_exit": None})
        return SimpleNamespace(exited=0, stdout=out + "\n", stderr="")

    def put_text(self, text, path, mode=0o644, timeout=None):
        self._do("spec" if path.endswith("spec.json") else "put", path)
        if path.endswith("spec.json"):
            self.fc.specs[self.name] = text

    @property
    def where(self) -> str:
        return f"in container '{self.container}'"

    def container_state(self):
        return SimpleNamespace(running=True, status="running")

    def close(self):
        self.closed = True


@pytest.fixture
def fake_launch(tmp_path, monkeypatch):
    """``run(fail_host, fail_step, n, run_status)`` -> (ClusterRun or ClusterLaunchError, FakeCluster)."""
    monkeypatch.setattr(launch_svc, "SETTLE_S", 0.0)
    monkeypatch.setenv("DAPO_OPS_RAY_JOIN_TIMEOUT", "1")
    monkeypatch.setattr(cluster_ops, "HEAD_UP_TIMEOUT_S", 1.0)

    def run(fail_host="", fail_step="", n=2, run_status="running", mode="dapo", hosts_given=True):
        hosts = _hosts(tmp_path, n)
        flags = {"trainer_gpus": 8, "rollout_gpus": 8} if mode == "one-step-off" else {}
        req = launch_svc.LaunchRequest(
            mode=mode, settings=_st(**flags), sw=SwanlabSettings(mode="disabled"), skip_preflight=True, link_wait=0.0
        )
        fc = FakeCluster(fail_host, fail_step, run_status)
        targets = {h.name: FakeTarget(h, fc) for h in hosts}
        try:
            return mh.launch_cluster(req, hosts, targets, hosts_given=hosts_given), fc
        except mh.ClusterLaunchError as e:
            return e, fc

    return run


def _steps(fc, step):
    return [h for h, s, _ in fc.log if s == step]


def test_a_cluster_launch_starts_head_then_workers_then_the_run_and_tears_nothing_down(fake_launch):
    run, fc = fake_launch()
    assert isinstance(run, mh.ClusterRun), run
    steps = [s for _, s, _ in fc.log]
    assert steps.index("head") < steps.index("worker") < steps.index("spec") < steps.index("supervisor")
    assert _steps(fc, "stop") == [] and _steps(fc, "rm") == [] and set(fc.up) == {"h1", "h2"}
    spec = run.spec  # the spec.json written: the plan's, with what the cluster's start gave
    assert spec == _json.loads(fc.specs["h1"]) and run.plan.spec["ray"] is None
    assert spec["env"]["RAY_ADDRESS"] == "198.51.100.11:6379" and [n["name"] for n in spec["ray"]["nodes"]] == [
        "h1",
        "h2",
    ]
    assert run.row.ok and run.handle.resources["NPU"] == 16.0


def test_a_cluster_launch_plans_once_and_starts_the_run_in_one_call(fake_launch, monkeypatch):
    """Issue 30: the plan is built once (the topology's settings applied before its one check), never copied into
    or re-built; the head's start is one call of the start op (no run.json polls)."""
    from dapo_ops.control.launch import plan as planning_mod
    from dapo_ops.core import overrides, runspec

    counts = {"make_plan": 0, "check_spec": 0}

    def counted(name, fn):
        def wrapper(*a, **kw):
            counts[name] += 1
            return fn(*a, **kw)

        return wrapper

    monkeypatch.setattr(planning_mod, "make_plan", counted("make_plan", planning_mod.make_plan))
    check = counted("check_spec", runspec.check_spec)
    monkeypatch.setattr(runspec, "check_spec", check)
    monkeypatch.setattr(overrides, "check_spec", check)
    run, fc = fake_launch()
    assert isinstance(run, mh.ClusterRun), run
    assert counts == {"make_plan": 1, "check_spec": 1}
    assert _steps(fc, "supervisor") == ["h1"] and run.spec["settings"]["nnodes"] == 2


def test_a_refusing_host_starts_nothing(fake_launch):
    err, fc = fake_launch("h2", "occupancy")
    assert isinstance(err, mh.ClusterLaunchError) and not err.usage and not err.torn_down
    assert str(err).startswith("h2: ") and str(err).endswith("nothing was started")
    assert {s for _, s, _ in fc.log} <= {"bundle-check", "occupancy"} and fc.up == {}


def test_a_head_that_does_not_start_leaves_nothing_and_starts_no_worker(fake_launch):
    err, fc = fake_launch("h1", "head")
    assert isinstance(err, mh.ClusterLaunchError) and "host 'h1'" in str(err)
    assert _steps(fc, "worker") == [] and _steps(fc, "supervisor") == [] and fc.up == {}


def test_a_failing_worker_tears_down_exactly_the_nodes_that_were_started(fake_launch):
    err, fc = fake_launch("h2", "worker", n=3, mode="one-step-off")
    assert isinstance(err, mh.ClusterLaunchError) and "host 'h2'" in str(err)
    # h1 (head) and h3 (the other worker, started in parallel) were up: both stopped; h2 never came up
    assert sorted(_steps(fc, "stop")) == ["h1", "h3"] and fc.up == {}
    assert _steps(fc, "supervisor") == []


def test_a_head_that_never_registers_is_stopped_before_any_worker_starts(fake_launch):
    err, fc = fake_launch("h1", "wait")
    assert isinstance(err, mh.ClusterLaunchError)
    assert _steps(fc, "worker") == [] and _steps(fc, "stop") == ["h1"] and fc.up == {}


def test_a_worker_that_never_joins_is_named_and_every_node_is_stopped(fake_launch, monkeypatch):
    orig = FakeTarget.run

    def no_join(self, cmd, *a, **kw):  # h2's raylet starts but never reaches the head
        res = orig(self, cmd, *a, **kw)
        if self.name == "h2" and _step(cmd) == "worker":
            self.fc.up.pop("h2")
        return res

    monkeypatch.setattr(FakeTarget, "run", no_join)
    err, fc = fake_launch()
    assert isinstance(err, mh.ClusterLaunchError) and "host 'h2'" in str(err) and "did not join" in str(err)
    assert sorted(_steps(fc, "stop")) == ["h1", "h2"] and _steps(fc, "supervisor") == []


@pytest.mark.parametrize("step", ["spec", "supervisor"])
def test_a_run_that_cannot_start_removes_its_run_dir_then_the_cluster(fake_launch, step):
    err, fc = fake_launch("h1", step)
    assert isinstance(err, mh.ClusterLaunchError) and err.torn_down
    assert str(err).startswith("h1: ") and str(err).endswith("Ray cluster torn down")
    assert _steps(fc, "rm") == ["h1"] and sorted(_steps(fc, "stop")) == ["h1", "h2"] and fc.up == {}
    order = [s for _, s, _ in fc.log]
    assert order.index("rm") < order.index("stop")  # in reverse: the run dir, then the cluster


def test_a_run_that_fails_at_once_keeps_its_record_and_the_cluster_goes(fake_launch):
    err, fc = fake_launch(run_status="failed")
    assert isinstance(err, mh.ClusterLaunchError) and err.torn_down
    assert "failed at once: config-error: fix the override (bad key)" in str(err)
    assert _steps(fc, "rm") == [] and sorted(_steps(fc, "stop")) == ["h1", "h2"] and fc.up == {}


def test_a_plan_error_is_a_usage_error_before_any_host(fake_launch):
    err, fc = fake_launch(n=3)  # 3 x 8 devices: the batch does not split (see above)
    assert isinstance(err, mh.ClusterLaunchError) and err.usage and fc.log == []
    assert str(err).startswith(
        "planning a 3-node run on a Ray cluster across h1,h2,h3: responses per mini-batch do not "
        "split evenly over 24 trainer devices"
    ), err
    # issue 32 item 6: `inv launch` without -H is every inventory host; the refusal says so, as the dry run does
    err, fc = fake_launch(n=3, hosts_given=False)
    assert str(err).startswith(
        "planning a 3-node run on a Ray cluster across h1,h2,h3 (no -H: every host of the "
        "inventory; -H h1 plans one host, --independent one run per host): responses per mini-batch"
    ), err


def test_every_ray_node_starts_under_the_cann_launcher_with_the_runs_env(fake_launch):
    """Issue 43 F2: Ray's workers (verl's TaskRunner too, verl/trainer/main_ppo.py:92) inherit the raylet's
    environment, so each node's ``ray start`` runs under the run's CANN launcher with the spec's env (main: a bare
    ``sh -c`` with only the topology env, so torch_npu failed on every worker of an image that needs set_env.sh)."""
    from dapo_ops.core.topology import CANN_LAUNCHER

    run, fc = fake_launch()
    assert isinstance(run, mh.ClusterRun), run
    assert run.spec["launcher"] == list(CANN_LAUNCHER)
    for host, step in (("h1", "head"), ("h2", "worker")):
        text = next(t for h, s, t in fc.log if (h, s) == (host, step))
        # the node's session starts under the launcher (raysession start, agent/raysession.py start_node: issue 46;
        # it was a `setsid <launcher> sh -c` script around the op line)
        assert _json.loads(fake_ops.op_of(text)[2])["launcher"] == list(CANN_LAUNCHER), text
        env = fc.envs[(host, step)]
        assert (
            env["VERL_LOGGING_LEVEL"] == "INFO"
            and env["HCCL_IF_IP"] == run.spec["ray"]["nodes"][["h1", "h2"].index(host)]["address"]
        )
        assert "RAY_ADDRESS" not in env and "RAY_gcs_rpc_server_reconnect_timeout_s" not in env


def test_a_worker_leader_ends_its_node_once_the_heads_gcs_port_refuses():
    """Issue 43 F5: Ray's 60 s GCS reconnect timeout stays for the training processes; the tool's teardown of a
    worker node is its session leader seeing the head's port refuse (topology.HEAD_GONE_REFUSALS probes)."""
    head = socket.socket()
    head.bind(("127.0.0.1", 0))
    head.listen(8)
    port = head.getsockname()[1]
    child = subprocess.Popen(["sleep", "300"])
    try:
        t = threading.Thread(target=raysession.watch_head, args=(child, ("127.0.0.1", port), 0.05))
        t.start()
        t.join(1.0)
        assert t.is_alive() and child.poll() is None  # the head answers: the node stays
        head.close()  # the head's GCS is gone: connections are refused
        t.join(60)
        assert not t.is_alive() and child.wait(timeout=30) == -15
    finally:
        head.close()
        child.kill()
    assert raysession.head_of(cluster.ray_worker_argv("ray", H_W, H_HEAD, "npu")) == (H_HEAD.address, 6379)
    assert raysession.head_of(cluster.ray_head_argv("ray", H_HEAD, "npu")) is None


H_HEAD = cluster.Node("h1", "198.51.100.11", 8)
H_W = cluster.Node("h2", "198.51.100.12", 8)
