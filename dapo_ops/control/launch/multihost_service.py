"""Multi-host launch as a service: ONE run on a Ray cluster across the hosts' containers, and its teardown.

``inv launch -H h1,h2`` / ``inv one-step-off -H h1,h2`` (:mod:`dapo_ops.cli.launch` parses and prints) come here.
:func:`launch_cluster` walks these steps, recording each thing it started:

1. ``plan``: the pools from the inventory (:func:`dapo_ops.core.topology.plan_topology`: DAPO = every host in the
   trainer pool; one-step-off = trainer pool on the first half of the hosts, rollout pool on the rest) and the
   plan made for the head with the topology's ``trainer.nnodes`` / ``n_gpus_per_node`` (and ``rollout.*``);
2. ``checks``: bundle + quick checks on every host (container running, no active run, devices), ``--resume``;
3. ``ray``: the Ray cluster (:func:`dapo_ops.control.launch.raycluster.start`: head in the first host's container, a
   worker in each other one, bounded wait for every node; it ends what it started itself when it fails);
4. ``run``: ``spec.json`` on the head with ``ray`` (the :class:`~dapo_ops.control.launch.raycluster.ClusterHandle`)
   and ``RAY_ADDRESS=<head>:6379`` in verl's env (verl's ``ray.init`` joins this cluster instead of starting
   its own), then the supervisor on the head (:func:`dapo_ops.control.launch.service.start_run`).

On any failure after step 2 what was started is torn down in reverse (the run dir, then this run's Ray
sessions) and :class:`ClusterLaunchError` says what went wrong in one line. The Ray sessions' pid files and logs
live in ``<runs_dir>/.cluster/<run_id>/ray/<host>.{pid,log}`` on each host (outside the run dir, so a worker host
shows no half-run in ``inv status``). Never prints; tests drive it with a fake Target (tests/test_multihost.py).
"""

from __future__ import annotations

import dataclasses
import json
import os
import posixpath
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Callable

from dapo_ops.control.launch import raycluster
from dapo_ops.control.launch import service
from dapo_ops.control.launch import resume
import dapo_ops.control.launch.plan
from dapo_ops.control.launch.service import LaunchRequest
from dapo_ops.control.launch.refusals import LaunchRefused
from dapo_ops.control.remote import bundle
from dapo_ops.control.remote.errors import RemoteError
from dapo_ops.core import defaults, topology
from dapo_ops.core import raynodes
from dapo_ops.core.raynodes import cluster_dir
from dapo_ops.core import runstate
from dapo_ops.core.topology import Node, TopologyError

if TYPE_CHECKING:
    from dapo_ops.control.remote.fanout import Row

#: seconds the Ray workers get to join once the head is up (raycluster.start); env ``DAPO_OPS_RAY_JOIN_TIMEOUT``
JOIN_TIMEOUT_S = raycluster.JOIN_TIMEOUT_S


class ClusterLaunchError(Exception):
    """A multi-host launch failed; ``str()`` is one line naming the host and the fix. ``usage``: bad input (plan /
    topology; nothing was contacted), else a host refused or failed. ``torn_down``: a Ray cluster had been
    started and was torn down. ``hosts``: when several hosts refused, one line per host (each naming its host and
    its fix), to print before ``str()``, which then only counts them."""

    def __init__(self, message: str, *, usage: bool = False, torn_down: bool = False, hosts: tuple = ()):
        self.usage = usage
        self.torn_down = torn_down
        self.hosts = tuple(hosts)
        super().__init__(message)


@dataclasses.dataclass
class ClusterRun:
    """A started multi-host run: ``row`` is :func:`launch.service.start_run`'s (``data``: run_id, run_dir, log, status,
    swanlab_url, container); ``spec`` the spec.json written (the plan's, with the cluster's ``ray`` handle and
    ``RAY_ADDRESS``); ``resumed`` the ``--resume`` line or None."""

    run_id: str
    head: str
    plan: dapo_ops.control.launch.plan.Plan
    spec: dict
    topo: topology.Topology
    handle: raycluster.ClusterHandle
    row: Row
    resumed: str | None = None


def join_timeout(env=None) -> float:
    """Seconds the workers get to join once the head is up: ``DAPO_OPS_RAY_JOIN_TIMEOUT`` or :data:`JOIN_TIMEOUT_S`."""
    raw = (env if env is not None else os.environ).get("DAPO_OPS_RAY_JOIN_TIMEOUT", "")
    try:
        return float(raw) if raw and float(raw) > 0 else JOIN_TIMEOUT_S
    except ValueError:
        return JOIN_TIMEOUT_S


def cluster_topology(st, nodes_hosts: list, mode: str) -> topology.Topology:
    """The pools of a multi-host run of settings ``st`` on ``nodes_hosts`` (head first):
    :func:`dapo_ops.core.topology.plan_topology`. Raises :class:`TopologyError` (one line), also for hosts of mixed
    accelerators."""
    accels = {h.accelerator for h in nodes_hosts}
    if len(accels) > 1:
        raise TopologyError(
            "hosts mix accelerators ("
            + ", ".join(f"{h.name}={h.accelerator}" for h in nodes_hosts)
            + "): one Ray cluster needs one kind; fix `accelerator` in hosts.toml or pick other -H hosts"
        )
    nodes = [Node(h.name, h.address, int(h.devices)) for h in nodes_hosts]
    v = dapo_ops.control.launch.plan.run_values(st)
    return topology.plan_topology(mode, nodes, int(v["trainer_gpus"]), int(v["rollout_gpus"]))


def cluster_plan(
    st,
    head,
    nodes_hosts: list,
    mode: str,
    *,
    run_id: str,
    swanlab_logger: bool,
    inv_proxy: dict,
    extra_overrides: list,
    memory=None,
    earlier=None,
):
    """The plan of a multi-host run (``--dry-run``): both stages of the planner (:func:`plan.draft_plan`,
    :func:`plan.make_plan`) for the head with the whole cluster's
    devices and the topology's settings (``nnodes``, ``n_gpus_per_node``; one-step-off: ``trainer_gpus``,
    ``rollout_gpus``, ``rollout_nnodes``; :func:`cluster_topology`), checked once after they are applied. The launch
    builds the same plan through :func:`dapo_ops.control.launch.service.build_plan`.

    ``earlier``: the :class:`~dapo_ops.control.launch.resume.ResumeFacts` of the run ``--resume`` continues (``st``
    and ``extra_overrides`` already merged with its: :func:`dapo_ops.control.launch.resume.resumed`), else
    None.

    Returns ``(plan, topology)``. Raises :class:`TopologyError` / :class:`plan.PlanError` (one line);
    :class:`LaunchRefused` (``resume``): the plan cannot continue its checkpoints.
    """
    topo = cluster_topology(st, nodes_hosts, mode)
    inputs = dapo_ops.control.launch.plan.PlanInputs(
        settings=st,
        host=dataclasses.replace(head, devices=topo.total_devices),  # the per-node split was checked by plan_topology
        mode=mode,
        run_id=run_id,
        swanlab_logger=swanlab_logger,
        proxy=inv_proxy,
        extra_overrides=tuple(extra_overrides),
        topology=topo.settings(),
        resume=earlier,
    )
    plan = dapo_ops.control.launch.plan.make_plan(dapo_ops.control.launch.plan.draft_plan(inputs), memory)
    if earlier is not None:
        resume.check(plan, earlier)
    return plan, topo


def _prefixed(name: str, msg: str) -> str:
    return msg if msg.startswith(name) else f"{name}: {msg}"


def check_hosts(targets: dict, plan, skip_preflight: bool, req: LaunchRequest | None = None) -> None:
    """The quick checks (:func:`launch.service.quick_checks`, the same rule as one host; each op installs the bundle where
    it is missing) on every host in parallel. Raises :class:`ClusterLaunchError` with the host's one-line refusal, or,
    when several refused, one line per host in ``hosts`` (inventory order) and their count as the message; nothing is started by the checks. ``req``: every host also checks the tracker
    (verl's ``Tracking``, ``verl/trainer/ppo/v1/trainer_base.py:423``, runs in the ``TaskRunnerV1`` Ray actor,
    ``verl/trainer/main_ppo.py:92``, which Ray may place on any node)."""

    def one(t):
        try:
            # the cluster's plan takes no probe facts: with --skip-preflight the probe is skipped too
            service.quick_checks(t, plan, skip_preflight, req, need_facts=False)
            return None
        except (RemoteError, LaunchRefused) as e:
            return _prefixed(t.name, str(e))

    with ThreadPoolExecutor(max_workers=len(targets)) as pool:
        bad = [v for v in pool.map(one, targets.values()) if v is not None]
    if len(bad) == 1:
        raise ClusterLaunchError(bad[0] + "; nothing was started")
    if bad:  # one line per host: each host's own reason and fix (a busy h1 must not hide h2's stopped sshd)
        raise ClusterLaunchError(
            f"{len(bad)} of {len(targets)} hosts refused (each said above); nothing was started", hosts=tuple(bad)
        )


def launch_cluster(req: LaunchRequest, chosen: list, targets: dict, *, hosts_given: bool = True) -> ClusterRun:
    """Launch one multi-host run on ``chosen`` (head first) through ``targets`` (``{host name: Target}``, connected
    lazily; the caller closes them). The steps and the teardown: module docstring.

    Returns the :class:`ClusterRun`. Raises :class:`ClusterLaunchError` (one line; ``usage`` for plan/topology
    errors, naming the cluster and, with ``hosts_given`` False, that no -H means every inventory host:
    :func:`cluster_what`) with everything this call started torn down.
    """
    head = chosen[0]
    run_id = runstate.new_run_id()
    for t in targets.values():  # the run's container on every host (what gather_facts does for one host)
        t.container = dapo_ops.control.launch.plan.container_for(req.settings, head)
    ht = targets[head.name]
    facts = service.LaunchFacts(host=head, run_id=run_id)
    if req.resume:  # settings not given now come from the run it continues
        try:
            facts = dataclasses.replace(facts, resume=resume.read_facts(ht, req.resume))
        except (LaunchRefused, RemoteError) as e:
            raise ClusterLaunchError(f"{_prefixed(head.name, str(e))}; nothing was started") from None
    try:  # the one plan: against the whole cluster's devices, with the topology's settings
        topo = cluster_topology(service.plan_settings(facts, req), chosen, req.mode)
        facts = dataclasses.replace(
            facts, host=dataclasses.replace(head, devices=topo.total_devices), topology=topo.settings()
        )
        plan = service.build_plan(facts, req)
    except (TopologyError, dapo_ops.control.launch.plan.PlanError) as e:
        raise ClusterLaunchError(
            f"planning a {cluster_what(chosen, hosts_given=hosts_given)}: {e}", usage=True
        ) from None
    except LaunchRefused as e:  # --resume: the checkpoints cannot be continued
        raise ClusterLaunchError(f"{_prefixed(head.name, str(e))}; nothing was started") from None
    spec = plan.run_spec  # typed reads; the spec.json written is the plan's dict (+ ray, env)
    py = spec.python or defaults.HOST["python"]  # a plan's spec names it (the host's interpreter)
    cdir = cluster_dir(head.runs_path, run_id)
    started: list[tuple[str, Callable[[], object]]] = []  # (what, how to undo it), oldest first

    def teardown() -> None:
        while started:
            _, undo = started.pop()
            try:
                undo()
            except Exception:  # noqa: BLE001 - every step is undone even when one undo fails
                pass

    check_hosts(targets, plan, req.skip_preflight, req)
    resumed = None
    if facts.resume is not None:
        try:
            resume.close_earlier(ht, facts.resume)
        except RemoteError as e:
            raise ClusterLaunchError(f"{_prefixed(head.name, str(e))}; nothing was started") from None
        resumed = plan.resume_line
    no_proxy = spec.env.get("no_proxy") or spec.env.get("NO_PROXY") or ""
    try:
        try:
            handle = raycluster.start(
                topo,
                targets,
                accelerator=spec.accelerator or defaults.HOST["accelerator"],
                python=py,
                run_dir=cdir,
                base_no_proxy=no_proxy,
                join_timeout=join_timeout(),
                run_env=dict(spec.env),
                launcher=spec.launcher,
            )
        except raycluster.ClusterError as e:  # start() already tore down what it started
            raise ClusterLaunchError(str(e)) from None
        started.append(("ray", lambda: raycluster.stop(list(topo.nodes), targets, run_dir=cdir, python=py)))
        # what the cluster's start gave the run: its handle, and verl's ray.init joins it (RAY_ADDRESS)
        merged = topology.merge_no_proxy(no_proxy, [n.address for n in topo.nodes])
        env = {**spec.env, "RAY_ADDRESS": f"{handle.head}:{handle.port}", "no_proxy": merged, "NO_PROXY": merged}
        written = {**plan.spec, "ray": handle.to_json(), "env": env}
        started.append(("run dir", lambda: service.remove_run_dir(ht, plan.run_dir)))
        row = service.start_run(
            ht,
            plan,
            service.run_secret_env(req),
            link_wait=req.link_wait if req.sw.logger_enabled else 0.0,
            spec=written,
            cleanup=teardown,
            progress=req.progress,
        )
        if not row.ok:
            started.pop()  # the run failed at once: its record stays for `inv status`; the cluster goes
            teardown()
            raise ClusterLaunchError(f"{head.name}: {row.message}; Ray cluster torn down", torn_down=True)
    except RemoteError as e:
        teardown()
        raise ClusterLaunchError(_prefixed(e.host, str(e)) + "; Ray cluster torn down", torn_down=True) from None
    except BaseException:
        teardown()
        raise
    return ClusterRun(
        run_id=run_id, head=head.name, plan=plan, spec=written, topo=topo, handle=handle, row=row, resumed=resumed
    )


def stop_cluster(hosts: dict, host_name: str, run_dir: str, *, make_target: Callable, grace_s: float = 15.0):
    """After ``inv stop`` stopped a run on ``host_name``: if the run is multi-host (its ``spec.json`` has ``ray``),
    stop this run's Ray sessions on every node (:func:`raycluster.stop`, pid files only; idempotent).

    ``hosts``: the inventory's ``{name: Host}``; ``make_target(host, container)`` builds a Target. Returns
    ``(run_id, {host: "stopped N processes" | error line})`` (``(None, {})`` for a single-host run). Never raises
    for a host.
    """
    if host_name not in hosts:
        return None, {}
    h = hosts[host_name]
    t = make_target(h, h.container)
    try:
        res = bundle.run_op(t, "runfiles", ["show-spec", run_dir], site=False, workdir="", check=False, timeout=30)
        spec = defaults.RunSpec.read(json.loads(res.stdout)) if res.exited == 0 and res.stdout.strip() else None
    except (RemoteError, ValueError, TypeError):  # TypeError: spec.json is not a JSON object / has a wrong value
        spec = None
    finally:
        t.close()
    nodes = ((spec.ray if spec is not None else None) or {}).get("nodes") or []
    if spec is None or not nodes:
        return None, {}
    cdir = posixpath.dirname(posixpath.dirname(nodes[0]["pid_file"]))
    missing = [n["name"] for n in nodes if n["name"] not in hosts]
    targets = {
        n["name"]: make_target(hosts[n["name"]], spec.container or hosts[n["name"]].container)
        for n in nodes
        if n["name"] in hosts
    }
    try:
        result = raycluster.stop(
            [n for n in nodes if n["name"] in targets],
            targets,
            run_dir=cdir,
            python=spec.python or h.python,
            grace_s=grace_s,
        )
    finally:
        for tt in targets.values():
            tt.close()
    for name in missing:
        pid_file = raynodes.node_file(cdir, name, raynodes.PID)
        result[name] = f"host '{name}' is not in the inventory: stop its Ray session by hand ({pid_file})"
    return spec.run_id, result


def cluster_what(chosen: list, *, hosts_given: bool) -> str:
    """``N-node run on a Ray cluster across h1,h2,...`` and, when ``-H`` was not given, why every inventory host
    is in it (the plan's note and the first words of a planning error, dry run and launch alike)."""
    return f"{len(chosen)}-node run on a Ray cluster across {','.join(h.name for h in chosen)}" + (
        ""
        if hosts_given
        else " (no -H: every host of the inventory; -H h1 plans one host, --independent one run per host)"
    )


def dry_run_plan(
    flags: dict,
    *,
    mode: str,
    hosts: str,
    inventory: str,
    env,
    file_cfg: dict,
    extra_overrides: list | None = None,
    config=None,
    resume_id: str = "",
):
    """``--dry-run`` with several hosts: the multi-host plan (no host is contacted). Returns ``(plan, topo)``, or
    None when fewer than two hosts are selected (or there is no inventory): the single-host plan applies.
    ``config``: the program run's :class:`~dapo_ops.control.userconfig.RunConfig`, whose settings the launch resolved
    (None: one over ``env`` and ``file_cfg``). ``resume_id``: the run id ``--resume`` continues, read on the head
    (:func:`dapo_ops.control.launch.dryrun.resume_facts`, reads only): the plan is the resume's.

    Raises SettingsError / PlanError / InventoryError (one line; a topology error becomes a PlanError); with
    ``resume_id`` also LaunchRefused / RemoteError (one line): the refusals of the launch, its SwanLab mode
    included (:func:`dapo_ops.control.launch.dryrun.check_resume_logging`).
    """
    from dapo_ops.control.inventory import hosts_file
    from dapo_ops.control.launch import dryrun
    from dapo_ops.control import userconfig

    path = hosts_file.resolve_path(inventory or None)
    if not (inventory or path.exists()):
        return None
    inv = hosts_file.load(inventory or None)
    chosen = hosts_file.select(inv, hosts or None)
    if len(chosen) < 2:
        return None
    config = userconfig.RunConfig(env, file_cfg or {}) if config is None else config
    st = config.settings(flags, env)
    sw_on, sw_note = dryrun.swanlab_status(st, env, config.file())
    what = cluster_what(chosen, hosts_given=bool(hosts))
    facts = dryrun.resume_facts(resume_id, chosen[0], st) if resume_id else None
    st, extra = resume.resumed(st, extra_overrides or (), facts)
    try:
        plan, topo = cluster_plan(
            st,
            chosen[0],
            chosen,
            mode,
            run_id=runstate.new_run_id(),
            swanlab_logger=sw_on,
            inv_proxy=inv.proxy,
            extra_overrides=list(extra),
            memory=dryrun._local_memory_facts(st, chosen[0]),
            earlier=facts,
        )
    except (TopologyError, dapo_ops.control.launch.plan.PlanError) as e:
        raise dapo_ops.control.launch.plan.PlanError(f"planning a {what}: {e}") from None
    if facts is not None:  # the SwanLab refusal the launch applies (service.build_plan), as the one-host dry run
        dryrun.check_resume_logging(facts, st, env, config.file())
    unchecked = dryrun.not_checked_note(
        "a dry run over several hosts contacts none",
        f"`inv preflight -H {','.join(h.name for h in chosen)}` runs the launch's checks on every host, starting nothing",
    )
    return dataclasses.replace(plan, notes=[*plan.notes, f"planning a {what}", sw_note, unchecked]), topo
