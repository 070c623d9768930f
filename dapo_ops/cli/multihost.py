"""Multi-host launch: ONE run on a real Ray cluster across the ``-H`` hosts' containers (docs/workflow.md §7).

``inv launch -H h1,h2`` / ``inv one-step-off -H h1,h2`` come here from :func:`dapo_ops.cli.launch._launch`
(``--independent`` keeps one separate single-host run per host). The flow:

1. the pools from the inventory (:func:`dapo_ops.core.topology.plan_topology`: DAPO = every host in the trainer pool;
   one-step-off = trainer pool on the first half of the hosts, rollout pool on the rest) and the plan made for
   the head with the topology's ``trainer.nnodes`` / ``n_gpus_per_node`` (and ``rollout.nnodes`` /
   ``rollout.n_gpus_per_node``);
2. the quick checks on every host (container running, no active run, devices) — before anything is started;
3. the Ray cluster (:func:`dapo_ops.control.cluster_ops.start`: head in the first host's container, a worker in each
   other one, bounded wait for every node and device);
4. ``spec.json`` on the head with ``ray`` (the :class:`~dapo_ops.control.cluster_ops.ClusterHandle`) and
   ``RAY_ADDRESS=<head>:6379`` in verl's env (verl's ``ray.init`` joins this cluster instead of starting its own),
   then the supervisor on the head (:func:`dapo_ops.cli.launch.start_run`).

Any failure after the cluster came up tears it down (only this run's Ray sessions), prints one line and exits
non-zero: nothing is left running. The Ray sessions' pid files and logs live in
``<runs_dir>/.cluster/<run_id>/ray/<host>.{pid,log}`` on each host (outside the run dir, so a worker host shows
no half-run in ``inv status``).
"""

from __future__ import annotations

import dataclasses
import json
import posixpath
import sys
from concurrent.futures import ThreadPoolExecutor

from dapo_ops.core import topology as cluster
from dapo_ops.control import cluster_ops
from dapo_ops.core import overrides
from dapo_ops.control import planning
from dapo_ops.control import remote_bundle
from dapo_ops.core import runstate
from dapo_ops.core import redact
from dapo_ops.core.topology import Node, TopologyError
from dapo_ops.core.profiles import OverrideError
from dapo_ops.control.remote import RemoteError, Target
from dapo_ops.cli._common import EXIT_FAILED, EXIT_USAGE, connect_timeout_override, fail

#: seconds to wait for every Ray node to join (cluster_ops.start); env ``DAPO_OPS_RAY_JOIN_TIMEOUT`` overrides
JOIN_TIMEOUT_S = cluster_ops.JOIN_TIMEOUT_S

def join_timeout(env=None) -> float:
    """Seconds to wait for every node to join: ``DAPO_OPS_RAY_JOIN_TIMEOUT`` or :data:`JOIN_TIMEOUT_S`."""
    import os

    raw = (env if env is not None else os.environ).get("DAPO_OPS_RAY_JOIN_TIMEOUT", "")
    try:
        return float(raw) if raw and float(raw) > 0 else JOIN_TIMEOUT_S
    except ValueError:
        return JOIN_TIMEOUT_S


def cluster_dir(runs_dir: str, run_id: str) -> str:
    """Where a run's Ray sessions keep pid files and logs on every host: ``<runs_dir>/.cluster/<run_id>``."""
    return f"{runs_dir.rstrip('/')}/.cluster/{run_id}"


def cluster_plan(st, head, nodes_hosts: list, mode: str, *, run_id: str, swanlab_logger: bool, inv_proxy: dict,
                 extra_overrides: list):
    """The plan of a multi-host run: :func:`dapo_ops.control.planning.make_plan` for the head, its ``settings`` replaced by
    the topology's (``nnodes``, ``n_gpus_per_node``; one-step-off: ``trainer_gpus``, ``rollout_gpus``,
    ``rollout_nnodes``), checked again (:func:`dapo_ops.core.overrides.check_spec`) and the verl argv rebuilt.

    Returns ``(plan, topology)``. Raises :class:`TopologyError` / :class:`planning.PlanError` (one line).
    """
    accels = {h.accelerator for h in nodes_hosts}
    if len(accels) > 1:
        raise TopologyError("hosts mix accelerators (" + ", ".join(f"{h.name}={h.accelerator}" for h in nodes_hosts)
                            + "): one Ray cluster needs one kind; fix `accelerator` in hosts.toml or pick other -H hosts")
    nodes = [Node(h.name, h.address, int(h.devices)) for h in nodes_hosts]
    topo = cluster.plan_topology(mode, nodes, int(st.get("trainer_gpus") or 0), int(st.get("rollout_gpus") or 0))
    # plan against the whole cluster's devices: the per-node split was checked by plan_topology
    plan = planning.make_plan(st, dataclasses.replace(head, devices=topo.total_devices), mode=mode, run_id=run_id,
                              swanlab_logger=swanlab_logger, proxy=inv_proxy, extra_overrides=extra_overrides)
    plan.spec["settings"].update(topo.settings())
    try:
        overrides.check_spec(plan.spec, host_devices=None)
        plan.argv = overrides.build_command(plan.spec, plan.features)
    except OverrideError as e:
        raise planning.PlanError(str(e)) from None
    return plan, topo


def _targets(chosen, container: str, accept_new_host_keys: bool, connect_timeout) -> dict[str, Target]:
    return {h.name: Target(h, container, accept_new_host_keys=accept_new_host_keys, connect_timeout=connect_timeout)
            for h in chosen}


def _check_hosts(targets: dict[str, Target], plan, skip_preflight: bool) -> dict[str, str]:
    """Bundle + quick checks on every host in parallel; returns ``{host: bundle dir}``. Raises ``SystemExit``-style
    :func:`fail` with the first host's one-line refusal (and how many others failed)."""
    from dapo_ops.cli.launch import LaunchRefused, _quick_checks

    def one(t: Target):
        try:
            bdir = remote_bundle.ensure_bundle(t, t.host.runs_path, plan.spec["python"])
            _quick_checks(t, plan, bdir, skip_preflight)  # launch.refuse_if_busy: the same rule as one host
            return bdir
        except (RemoteError, LaunchRefused) as e:
            msg = str(e)
            return RuntimeError(msg if msg.startswith(t.name) else f"{t.name}: {msg}")

    with ThreadPoolExecutor(max_workers=len(targets)) as pool:
        out = dict(zip(targets, pool.map(one, targets.values())))
    bad = [str(v) for v in out.values() if isinstance(v, Exception)]
    if bad:
        more = f" (+{len(bad) - 1} more host(s) refused)" if len(bad) > 1 else ""
        fail(bad[0] + more + "; nothing was started", EXIT_FAILED)
    return out


def _teardown(topo, targets, cdir: str, python: str) -> dict[str, str]:
    return cluster_ops.stop(list(topo.nodes), targets, run_dir=cdir, python=python)


def launch_cluster(c, mode: str, st, inv, chosen: list, *, sw, notify_cfg: dict, extra_public: dict,
                   extra_secret: dict, extra_overrides: list, skip_preflight: bool, link_wait: float,
                   accept_new_host_keys: bool, secrets_all: list, resume: str = "") -> dict:
    """Launch one multi-host run on ``chosen`` (head first). Prints the run id, head, nodes joined and devices.

    Returns the started run's summary ``{"run_id", "head", "run_dir", "ray"}``. Every failure is one line via
    :func:`fail` (exit 2 for plan/topology errors, 1 otherwise) with the cluster torn down. ``resume``: an earlier
    multi-host run on the same hosts (its run dir is on the head) to continue from its checkpoints
    (:func:`dapo_ops.cli.launch.apply_resume`).
    """
    head = chosen[0]
    run_id = runstate.new_run_id()
    try:
        plan, topo = cluster_plan(st, head, chosen, mode, run_id=run_id, swanlab_logger=sw.logger_enabled,
                                  inv_proxy=inv.proxy, extra_overrides=extra_overrides)
    except (TopologyError, planning.PlanError) as e:
        fail(str(e), EXIT_USAGE)
    from dapo_ops.cli.launch import LaunchRefused, apply_resume, prepare_spec_env, start_run

    spec = plan.spec
    py = spec["python"]
    targets = _targets(chosen, spec["container"], accept_new_host_keys, connect_timeout_override(c))
    cdir = cluster_dir(head.runs_path, run_id)
    state = {"up": False, "done": False}   # cluster started / launch finished (nothing to tear down)

    def teardown():
        if state["up"]:
            state["up"] = False
            _teardown(topo, targets, cdir, py)

    try:
        bdirs = _check_hosts(targets, plan, skip_preflight)
        resumed = None
        if resume:
            try:
                resumed = apply_resume(targets[head.name], plan, resume)
            except LaunchRefused as e:
                fail(f"{head.name}: {e}; nothing was started", EXIT_FAILED)
        secret_env = prepare_spec_env(plan, sw=sw, notify_cfg=notify_cfg, extra_public=extra_public,
                                      extra_secret=extra_secret)
        no_proxy = spec["env"].get("no_proxy") or spec["env"].get("NO_PROXY") or ""
        try:
            handle = cluster_ops.start(topo, targets, accelerator=spec["accelerator"], python=py, run_dir=cdir,
                                       base_no_proxy=no_proxy, join_timeout=join_timeout())
        except cluster_ops.ClusterError as e:   # start() already tore down what it started
            fail(str(e), EXIT_FAILED)
        state["up"] = True
        spec["ray"] = handle.to_json()
        addresses = [n.address for n in topo.nodes]
        spec["env"]["RAY_ADDRESS"] = f"{handle.head}:{handle.port}"
        spec["env"]["no_proxy"] = spec["env"]["NO_PROXY"] = cluster.merge_no_proxy(no_proxy, addresses)
        ht = targets[head.name]

        def cleanup():
            teardown()
            ht.run(["rm", "-rf", plan.run_dir], workdir="", check=False, timeout=30)

        row = start_run(ht, plan, bdirs[head.name], secret_env, sw=sw, link_wait=float(link_wait), cleanup=cleanup)
        if not row.ok:
            fail(redact.scrub(f"{head.name}: {row.message}; Ray cluster torn down", secrets_all), EXIT_FAILED)
        state["done"] = True
    except RemoteError as e:
        msg = str(e)
        tail = "; Ray cluster torn down" if state["up"] else ""
        fail(redact.scrub(msg if msg.startswith(e.host) else f"{e.host}: {msg}", secrets_all) + tail,
             EXIT_FAILED)
    finally:
        if not state["done"]:
            teardown()
        for t in targets.values():
            try:
                t.close()
            except Exception:  # noqa: BLE001
                pass
    d = row.data
    res = handle.resources
    dev_key = "GPU" if spec["accelerator"] == "gpu" else "NPU"
    print(f"run {run_id} {d['status']} on {head.name} (container {d['container']}), Ray head {handle.head}:{handle.port}")
    print(f"  nodes:   {len(handle.nodes)} joined: "
          + ", ".join(f"{n['name']} {n['address']} {n['devices']} {dev_key} ({topo.placement.get(n['name'], '')})"
                      for n in handle.nodes)
          + f"; cluster {dev_key}={res.get(dev_key, 0):g}")
    s = spec["settings"]
    pools = f"trainer.nnodes={s['nnodes']} trainer.n_gpus_per_node={s['n_gpus_per_node'] if mode == 'dapo' else s['trainer_gpus']}"
    if mode == "one-step-off":
        pools += f" rollout.nnodes={s.get('rollout_nnodes', s['nnodes'])} rollout.n_gpus_per_node={s['rollout_gpus']}"
    print(f"  pools:   {pools}")
    if resumed:
        print(f"  resume:  {resumed}")
    print(f"  log:     {d['log']}  (on {head.name}; also {head.workdir.rstrip('/')}/train.log)")
    print(f"  follow:  inv status -H {head.name}   |   inv logs -f -H {head.name}   |   stop: inv stop -H {head.name}")
    if d.get("swanlab_url"):
        print(f"  swanlab: {redact.scrub(d['swanlab_url'], secrets_all)}")
    return {"run_id": run_id, "head": head.name, "run_dir": plan.run_dir, "ray": spec["ray"]}


def stop_cluster(c, inv, host_name: str, run_dir: str, *, grace_s: float = 15.0, out=None) -> dict[str, str]:
    """After ``inv stop`` stopped a run on ``host_name``: if the run is multi-host (its ``spec.json`` has ``ray``),
    stop this run's Ray sessions on every node (:func:`dapo_ops.control.cluster_ops.stop`, pid files only; idempotent).

    Returns ``{host: "stopped N processes" | error line}`` ({} for a single-host run). Never raises for a host.
    """
    hosts = inv.hosts if inv is not None else {}
    if host_name not in hosts:
        return {}
    h = hosts[host_name]
    t = Target(h, h.container, connect_timeout=connect_timeout_override(c))
    try:
        res = t.run(["cat", posixpath.join(run_dir, "spec.json")], workdir="", check=False, timeout=30)
        spec = json.loads(res.stdout) if res.exited == 0 and res.stdout.strip() else {}
    except (RemoteError, ValueError):
        spec = {}
    finally:
        t.close()
    ray = spec.get("ray") or {}
    nodes = ray.get("nodes") or []
    if not nodes:
        return {}
    cdir = posixpath.dirname(posixpath.dirname(nodes[0]["pid_file"]))
    missing = [n["name"] for n in nodes if n["name"] not in hosts]
    targets = {n["name"]: Target(hosts[n["name"]], spec.get("container") or hosts[n["name"]].container,
                                 connect_timeout=connect_timeout_override(c))
               for n in nodes if n["name"] in hosts}
    try:
        result = cluster_ops.stop([n for n in nodes if n["name"] in targets], targets, run_dir=cdir,
                                  python=spec.get("python") or h.python, grace_s=grace_s)
    finally:
        for tt in targets.values():
            tt.close()
    for name in missing:
        result[name] = f"host '{name}' is not in the inventory: stop its Ray session by hand ({cdir}/ray/{name}.pid)"
    for name, what in result.items():
        print(f"{name}: Ray session of run {spec.get('run_id')}: {what}", file=out or sys.stdout)
    return result


def dry_run(flags: dict, *, mode: str, hosts: str, inventory: str, env, file_cfg: dict,
            extra_overrides: list | None = None, console=None):
    """``--dry-run`` with several hosts: the multi-host plan (no host is contacted). Returns the Plan, or None when
    fewer than two hosts are selected (or there is no inventory), so the caller prints the single-host plan.

    Raises SettingsError / PlanError / InventoryError (one line; a topology error becomes a PlanError).
    """
    from dapo_ops.control import inventory as inv_mod
    from dapo_ops.control import plan as plan_mod
    from dapo_ops.control import settings as settings_mod

    path = inv_mod.resolve_path(inventory or None)
    if not (inventory or path.exists()):
        return None
    inv = inv_mod.load(inventory or None)
    chosen = inv_mod.select(inv, hosts or None)
    if len(chosen) < 2:
        return None
    st = settings_mod.resolve(flags, env, file_cfg or {})
    sw_on, sw_note = plan_mod.swanlab_status(st, env, file_cfg)
    what = (f"{len(chosen)}-node run on a Ray cluster across {','.join(h.name for h in chosen)}"
            + ("" if hosts else " (no -H: every host of the inventory; -H h1 plans one host, --independent one run "
                                "per host)"))
    try:
        plan, topo = cluster_plan(st, chosen[0], chosen, mode, run_id=runstate.new_run_id(),
                                  swanlab_logger=sw_on, inv_proxy=inv.proxy, extra_overrides=extra_overrides or [])
    except (TopologyError, planning.PlanError) as e:
        raise planning.PlanError(f"planning a {what}: {e}") from None
    plan.notes.append(f"planning a {what}")
    plan.notes.append(sw_note)
    plan_mod.render(plan, console)
    head = topo.head
    out = console.print if console is not None else print
    out(f"Ray cluster:   head {head.name} ({head.address}:{cluster.RAY_PORT}), workers "
        + ", ".join(f"{n.name} ({n.address})" for n in topo.nodes[1:])
        + "; pools: " + ", ".join(f"{k}: {v}" for k, v in topo.placement.items()))
    return plan
