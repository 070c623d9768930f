"""``hosts``: per host, SSH reachable? container state? Python and verl versions inside (the bundle op
``dapo_ops.agent.verlinfo``: verl located and its version read without importing it)?

``hosts --check`` only validates the inventory (and the ``-H`` selection) and prints one line per host; it
contacts nobody."""

from __future__ import annotations

import json

from dapo_ops.control.inventory import hosts_file
from dapo_ops.control.remote import bundle
from dapo_ops.control.remote.fanout import Row
from dapo_ops.control.inventory.model import Host
from dapo_ops.control.remote.errors import ContainerState, RemoteError
from dapo_ops.control.remote.target import Target
from dapo_ops.control.remote.errors import is_workdir_missing, workdir_missing_message
from dapo_ops.cli._common import (
    EXIT_FAILED,
    EXIT_USAGE,
    connect_timeout_override,
    fail,
    fanout_task,
    run_fanout,
    select_hosts,
    with_container,
)

COLUMNS = ["address", "ssh", "container", "python", "verl"]


def check_host(target: Target, *, timeout: float = 60) -> Row:
    """Probe one host: ``docker exec -w <workdir> <container> ... python3 -m dapo_ops.agent.verlinfo`` (one SSH round
    trip once the bundle is installed; ``docker inspect`` only when Docker says the container is not running).
    verl is looked for from the inventory's workdir (e.g. /verl), like verl's own entry points
    (``python3 -m verl.trainer.main_ppo`` run from the repo checkout), without importing it.

    :returns: a :class:`~dapo_ops.control.remote.fanout.Row` with cells ``address, ssh, container, python, verl``; not ok when the
        container is missing/stopped, python is missing, or verl is not found. A ``transport = "local"`` host has
        address ``local (no SSH)`` and ssh ``-``; a ``runtime = "host"`` one container ``- (bare host)``.
    :raises RemoteError: SSH-level failures (unreachable, refused, auth, hostkey, timeout, docker-missing).
    """
    h = target.host
    # a local host is reached without SSH (a new user's trial: it showed `root@127.0.0.1:22`, ssh ok)
    cells = {"address": "local (no SSH)", "ssh": "-"} if target.local else {"address": h.ssh_target, "ssh": "ok"}
    running = "- (bare host)" if target.bare else "running"  # runtime = "host": the commands run in its own shell
    # one round trip when all is well: docker exec straight away; Docker's own error says missing/stopped, and
    # only then Target.run asks `docker inspect` for the state (status, exit code, OOMKilled)
    try:
        res = bundle.run_op(target, "verlinfo", check=False, timeout=timeout)
    except RemoteError as e:
        if e.kind == "container-missing":
            cells["container"] = "missing"
        elif e.kind == "docker-missing":
            cells["container"] = "no docker"
        elif e.kind == "container-stopped":
            cells["container"] = ContainerState(**e.state).describe() if e.state else "not running"
        elif e.kind == "command" and e.result is not None and (missing := workdir_missing_message(target, e.result)):
            cells["container"] = running
            return Row(cells=cells, ok=False, kind="workdir-missing", message=missing)
        elif e.kind == "command" and e.exit_code in (126, 127):  # the bundle install found no python
            cells["container"] = running
            return Row(
                cells=cells,
                ok=False,
                kind="python-missing",
                message=e.message
                if "(hosts.toml `python`)" in e.message
                else f"'{h.python}' not runnable {target.where} ({e.message}); fix python in the inventory",
            )
        else:
            raise
        return Row(cells=cells, ok=False, kind=e.kind, message=e.message, data={"container": e.state})
    cells["container"] = running
    missing = workdir_missing_message(target, res)  # Docker prints why on stdout (remote/errors.py)
    if res.exited != 0 and (missing or is_workdir_missing(res.stderr)):
        cells["python"] = cells["verl"] = "-"
        return Row(
            cells=cells,
            ok=False,
            kind="workdir-missing",
            message=missing
            or f"workdir {h.workdir} does not exist {target.where}; fix "
            f"workdir in hosts.toml (the verl checkout, e.g. /verl)",
        )
    try:
        info = json.loads(res.stdout.strip().splitlines()[-1]) if res.exited == 0 else None
    except (ValueError, IndexError):
        info = None
    err_lines = [ln.strip() for ln in res.stderr.splitlines() if ln.strip()]
    last_err = err_lines[-1] if err_lines else f"exit {res.exited}"
    if res.exited in (126, 127) and info is None:
        return Row(
            cells=cells,
            ok=False,
            kind="python-missing",
            message=f"'{h.python}' not runnable {target.where} ({last_err}); fix python in the inventory",
        )
    if not isinstance(info, dict):
        cells["python"] = cells["verl"] = "?"
        return Row(
            cells=cells, ok=False, kind="command", message=f"the verl probe gave no answer {target.where} ({last_err})"
        )
    cells["python"] = info.get("python") or "?"
    if not info.get("found"):
        cells["verl"] = "not found"
        return Row(
            cells=cells,
            ok=False,
            kind="verl-missing",
            message=f"verl is not importable from {h.workdir} with '{h.python}'; install verl in the image "
            f"or fix workdir",
            data={"python": cells["python"]},
        )
    cells["verl"] = info.get("version") or "?"
    return Row(cells=cells, data={"python": cells["python"], "verl": cells["verl"], "verl_path": info.get("path")})


def describe(h: Host) -> str:
    """One line for ``hosts --check``: name, how it is reached, where commands run, its accelerators."""
    reach = (
        "local subprocess"
        if h.transport == "local"
        else f"ssh {h.ssh_target}" + (f" via {h.proxy_jump}" if h.proxy_jump else "")
    )
    where = "host shell (no container)" if h.runtime == "host" else f"container {h.container}"
    return f"{h.name}: {reach}, {where}, {h.devices} x {h.accelerator}, workdir {h.workdir}"


@fanout_task(
    help={
        "timeout": "seconds to wait for all hosts; each remote command gets the same limit",
        "check": "only validate the inventory file and -H (types, ranges, names); contacts nobody",
        "container": "container to look into (env CONTAINER; default: the inventory's)",
        "json": "print JSON ({inventory, hosts: {name: {ok, kind, message, cells}}}) instead of the table",
    }
)
def hosts(c, hosts="", inventory="", accept_new_host_keys=False, timeout=60, check=False, container="", json=False):
    """Show each host: SSH reachable, container state, Python and verl version inside (one row per host)."""
    inv, chosen = select_hosts(c, hosts, inventory)
    chosen = with_container(chosen, container)
    if check:  # select_hosts exited 2 with one line on any problem; nothing was contacted
        try:
            hosts_file.check_key_files(inv, chosen, accept_new_host_keys=accept_new_host_keys)
        except hosts_file.InventoryError as e:
            fail(str(e), EXIT_USAGE)
        if json:
            _print_json(inv, {h.name: {"ok": True, "kind": "", "message": describe(h), "cells": {}} for h in chosen})
            return
        print(f"{inv.path or 'no inventory file'}: valid, {len(chosen)} host(s) selected (nothing contacted)")
        print("\n".join(describe(h) for h in chosen))
        return
    if json:
        from dapo_ops.control.remote import fanout

        results = fanout.run(
            chosen,
            lambda t: check_host(t, timeout=timeout),
            timeout=timeout + 2 * max(h.connect_timeout for h in chosen) + 5,
            accept_new_host_keys=accept_new_host_keys,
            connect_timeout=connect_timeout_override(c),
        )
        _print_json(
            inv,
            {
                r.host.name: {"ok": r.ok, "kind": r.row.kind, "message": r.row.message, "cells": r.row.cells}
                for r in results
            },
        )
        if fanout.exit_code(results):
            fail(fanout.summary(results), EXIT_FAILED)
        return
    run_fanout(
        c,
        chosen,
        lambda t: check_host(t, timeout=timeout),
        columns=COLUMNS,
        title="hosts",
        timeout=timeout + 2 * max(h.connect_timeout for h in chosen) + 5,
        accept_new_host_keys=accept_new_host_keys,
    )


def _print_json(inv, hosts: dict) -> None:
    import json as jsonlib

    print(jsonlib.dumps({"inventory": str(inv.path) if inv.path else None, "hosts": hosts}, indent=1, default=str))
