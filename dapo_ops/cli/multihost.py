"""Printing side of the multi-host launch (docs/workflow.md): ONE run on a Ray cluster across the ``-H`` hosts.

:mod:`dapo_ops.cli.launch` comes here with several hosts (``--independent`` keeps one run per host);
the steps and their teardown are :func:`dapo_ops.control.launch.multihost_service.launch_cluster`. This module makes the
SSH targets, calls the service, prints the run id, head, nodes joined and devices, or one line and a non-zero
exit (exit 2 for plan/topology errors, 1 otherwise), with nothing left running. ``inv stop`` calls
:func:`stop_cluster`; ``--dry-run`` calls :func:`dry_run`. It imports nothing of :mod:`dapo_ops.cli.launch`.
"""

from __future__ import annotations

import json
import sys

from dapo_ops.cli._common import EXIT_FAILED, EXIT_USAGE, connect_timeout_override, fail
from dapo_ops.control.launch import multihost_service
from dapo_ops.control.launch.service import LaunchRequest
from dapo_ops.control.remote.target import Target
from dapo_ops.core import topology
from dapo_ops.core import ladder, raynodes
from dapo_ops.core import redact

# names the tests and other modules use
cluster_dir = raynodes.cluster_dir
cluster_plan = multihost_service.cluster_plan
join_timeout = multihost_service.join_timeout


def launch(
    c,
    req: LaunchRequest,
    chosen: list,
    *,
    accept_new_host_keys: bool,
    secrets_all: list,
    json_: bool = False,
    hosts_given: bool = True,
) -> dict:
    """Launch one multi-host run on ``chosen`` (head first) and print it (``json_``: one JSON object per host, the
    head's the run's, each worker's ``state`` ``ray-worker`` with its Ray log; ``hosts_given``: False when no -H
    chose the hosts, so a refusal says every host of the inventory makes one run). Returns ``{"run_id", "head",
    "run_dir", "ray"}``; every failure is one line via :func:`fail` (redacted) with the cluster torn down."""
    timeout = connect_timeout_override(c)
    targets = {
        h.name: Target(h, h.container, accept_new_host_keys=accept_new_host_keys, connect_timeout=timeout)
        for h in chosen
    }  # the service points each at the plan's container
    try:
        run = multihost_service.launch_cluster(req, chosen, targets, hosts_given=hosts_given)
    except multihost_service.ClusterLaunchError as e:
        for line in e.hosts:  # several hosts refused: one line each, then the count
            print(" ".join(redact.scrub(line, secrets_all).split()), file=sys.stderr, flush=True)
        fail(redact.scrub(str(e), secrets_all), EXIT_USAGE if e.usage else EXIT_FAILED)
    finally:
        for t in targets.values():
            try:
                t.close()
            except Exception:  # noqa: BLE001
                pass
    d, spec, handle, topo = run.row.data, run.spec, run.handle, run.topo
    head = chosen[0]
    result = {"run_id": run.run_id, "head": head.name, "run_dir": run.plan.run_dir, "ray": spec["ray"]}
    if json_:
        print(json.dumps(_json_rows(run, head, chosen, secrets_all), indent=1))
        return result
    res = handle.resources
    dev_key = "GPU" if spec["accelerator"] == "gpu" else "NPU"
    print(
        f"run {run.run_id} {d['status']} on {head.name} (container {d['container']}), "
        f"Ray head {handle.head}:{handle.port}"
    )
    print(
        f"  nodes:   {len(handle.nodes)} joined: "
        + ", ".join(
            f"{n['name']} {n['address']} {n['devices']} {dev_key} ({topo.placement.get(n['name'], '')})"
            for n in handle.nodes
        )
        + f"; cluster {dev_key}={res.get(dev_key, 0):g}"
    )
    s = spec["settings"]
    pools = (
        f"trainer.nnodes={s['nnodes']} trainer.n_gpus_per_node="
        f"{s['n_gpus_per_node'] if req.mode == 'dapo' else s['trainer_gpus']}"
    )
    if req.mode == "one-step-off":
        pools += f" rollout.nnodes={s.get('rollout_nnodes', s['nnodes'])} rollout.n_gpus_per_node={s['rollout_gpus']}"
    print(f"  pools:   {pools}")
    if run.resumed:
        print(f"  resume:  {run.resumed}")
    print(f"  log:     {d['log']}  (on {head.name}; also {head.workdir.rstrip('/')}/train.log)")
    follow = [ladder.follow_command(t, head.name, d.get("container"), head.container) for t in FOLLOW]
    print("  follow:  %s   |   %s   |   stop: %s" % tuple(follow))
    if d.get("swanlab_url"):
        print(f"  swanlab: {redact.scrub(d['swanlab_url'], secrets_all)}")
    return result


#: the tasks of the ``follow:`` line (:func:`dapo_ops.core.ladder.follow_command`); the JSON's ``follow``: the first two
FOLLOW = ("status", "logs -f", "stop")


def _json_rows(run, head, chosen: list, secrets_all: list) -> list[dict]:
    """``launch --json`` of a multi-host run: the head's object (:func:`dapo_ops.cli.launch.run_json`'s fields plus
    ``nodes``: the joined nodes), then one per worker host (``state`` ``ray-worker``, ``head``, ``log``: its
    ``ray start`` log in its container, ``follow``: the head's commands)."""
    d, handle = run.row.data, run.handle
    follow = [ladder.follow_command(t, head.name, d.get("container"), head.container) for t in FOLLOW[:2]]
    rows = [
        {
            "run_id": run.run_id,
            "host": head.name,
            "state": d["status"],
            "container": d.get("container") or None,
            "log": d["log"],
            "workdir_log": f"{head.workdir.rstrip('/')}/train.log",
            "follow": follow,
            "resume": run.resumed,
            "swanlab_url": redact.scrub(d["swanlab_url"], secrets_all) if d.get("swanlab_url") else None,
            "role": "head",
            "nodes": [{"host": n["name"], "address": n["address"], "devices": n["devices"]} for n in handle.nodes],
        }
    ]
    cdir = raynodes.cluster_dir(head.runs_path, run.run_id)
    for h in chosen[1:]:
        rows.append(
            {
                "run_id": run.run_id,
                "host": h.name,
                "state": "ray-worker",
                "role": "worker",
                "head": head.name,
                "log": raynodes.node_file(cdir, h.name, raynodes.LOG),
                "follow": follow,
            }
        )
    return rows


def stop_cluster(c, inv, host_name: str, run_dir: str, *, grace_s: float = 15.0, out=None) -> dict[str, str]:
    """After ``inv stop`` stopped a run on ``host_name``: stop a multi-host run's Ray sessions on every node
    (:func:`dapo_ops.control.launch.multihost_service.stop_cluster`) and print one line per node. Returns
    ``{host: "stopped N processes" | error line}`` ({} for a single-host run). Never raises for a host."""
    timeout = connect_timeout_override(c)
    run_id, result = multihost_service.stop_cluster(
        inv.hosts if inv is not None else {},
        host_name,
        run_dir,
        grace_s=grace_s,
        make_target=lambda h, ct: Target(h, ct, connect_timeout=timeout),
    )
    for name, what in result.items():
        print(f"{name}: Ray session of run {run_id}: {what}", file=out or sys.stdout)
    return result


def dry_run(
    flags: dict,
    *,
    mode: str,
    hosts: str,
    inventory: str,
    env,
    file_cfg: dict,
    extra_overrides: list | None = None,
    console=None,
    config=None,
    resume_id: str = "",
):
    """``--dry-run`` with several hosts: print the multi-host plan and its Ray cluster (no host is contacted; with
    ``resume_id``, the run ``--resume`` continues is read on the head: the resume's plan).
    Returns the Plan, or None when fewer than two hosts are selected (or there is no inventory).

    Raises SettingsError / PlanError / InventoryError (one line).
    """
    from dapo_ops.control.launch import dryrun

    got = multihost_service.dry_run_plan(
        flags,
        mode=mode,
        hosts=hosts,
        inventory=inventory,
        env=env,
        file_cfg=file_cfg,
        extra_overrides=extra_overrides,
        config=config,
        resume_id=resume_id,
    )
    if got is None:
        return None
    plan, topo = got
    dryrun.render(plan, console)
    head = topo.head
    out = console.print if console is not None else print
    out(
        f"Ray cluster:   head {head.name} ({head.address}:{topology.RAY_PORT}), workers "
        + ", ".join(f"{n.name} ({n.address})" for n in topo.nodes[1:])
        + "; pools: "
        + ", ".join(f"{k}: {v}" for k, v in topo.placement.items())
    )
    note = topo.unused_note()
    if note:  # idle devices are said, never left unsaid (not 8 of 16 NPUs with no note)
        out(f"Note:          {note}")
    return plan
