"""``hosts``: the first fan-out task. Per host: SSH reachable? container state? Python and verl versions inside?

``hosts --check`` only validates the inventory (and the ``-H`` selection) and prints one line per host; it
contacts nobody."""

from __future__ import annotations

from dapo_ops.control.fanout import Row
from dapo_ops.control.inventory import Host
from dapo_ops.control.remote import ContainerState, RemoteError, Target
from dapo_ops.cli._common import fanout_task, run_fanout, select_hosts, with_container

COLUMNS = ["address", "ssh", "container", "python", "verl"]

# one docker exec for both versions; verl is imported from the inventory's workdir (e.g. /verl), like verl's
# own entry points (`python3 -m verl.trainer.main_ppo` run from the repo checkout)
_PROBE = "import sys; print('%d.%d.%d' % sys.version_info[:3]); import verl; print(verl.__version__)"


def check_host(target: Target, *, timeout: float = 60) -> Row:
    """Probe one host: ``docker exec <container> <python> -c 'import verl'`` in the workdir (one SSH round trip;
    ``docker inspect`` only when Docker says the container is not running).

    :returns: a :class:`~dapo_ops.control.fanout.Row` with cells ``address, ssh, container, python, verl``; not ok when the
        container is missing/stopped, python is missing, or verl does not import.
    :raises RemoteError: SSH-level failures (unreachable, refused, auth, hostkey, timeout, docker-missing).
    """
    h = target.host
    cells = {"address": h.ssh_target, "ssh": "ok"}
    # one round trip when all is well: docker exec straight away; Docker's own error says missing/stopped, and
    # only then Target.run asks `docker inspect` for the state (status, exit code, OOMKilled)
    try:
        res = target.run([h.python, "-c", _PROBE], check=False, timeout=timeout)
    except RemoteError as e:
        if e.kind == "container-missing":
            cells["container"] = "missing"
        elif e.kind == "docker-missing":
            cells["container"] = "no docker"
        elif e.kind == "container-stopped":
            cells["container"] = ContainerState(**e.state).describe() if e.state else "not running"
        else:
            raise
        return Row(cells=cells, ok=False, kind=e.kind, message=e.message, data={"container": e.state})
    cells["container"] = "running"
    from dapo_ops.control.preflight import workdir_missing

    if res.exited != 0 and workdir_missing(res.stderr):
        cells["python"] = cells["verl"] = "-"
        return Row(cells=cells, ok=False, kind="workdir-missing",
                   message=f"workdir {h.workdir} does not exist in container '{target.container}'; fix workdir in "
                           f"hosts.toml (the verl checkout, e.g. /verl)")
    out = res.stdout.split()
    err_lines = [ln.strip() for ln in res.stderr.splitlines() if ln.strip()]
    last_err = err_lines[-1] if err_lines else f"exit {res.exited}"
    if res.exited in (126, 127) and not out:
        return Row(cells=cells, ok=False, kind="python-missing",
                   message=f"'{h.python}' not runnable in container '{target.container}' ({last_err}); "
                           f"fix python in the inventory")
    cells["python"] = out[0] if out else "?"
    if res.exited != 0 or len(out) < 2:
        cells["verl"] = "import failed"
        return Row(cells=cells, ok=False, kind="verl-missing",
                   message=f"`import verl` failed in {h.workdir} ({last_err}); install verl in the image or fix "
                           f"workdir", data={"python": cells["python"]})
    cells["verl"] = out[1]
    return Row(cells=cells, data={"python": out[0], "verl": out[1]})


def describe(h: Host) -> str:
    """One line for ``hosts --check``: name, how it is reached, where commands run, its accelerators."""
    reach = "local subprocess" if h.transport == "local" else f"ssh {h.ssh_target}" + (
        f" via {h.proxy_jump}" if h.proxy_jump else "")
    where = "host shell (no container)" if h.runtime == "host" else f"container {h.container}"
    return f"{h.name}: {reach}, {where}, {h.devices} x {h.accelerator}, workdir {h.workdir}"


@fanout_task(help={"timeout": "seconds to wait for all hosts; each remote command gets the same limit",
                   "check": "only validate the inventory file and -H (types, ranges, names); contacts nobody",
                   "container": "container to look into (env CONTAINER; default: the inventory's)"})
def hosts(c, hosts="", inventory="", accept_new_host_keys=False, timeout=60, check=False, container=""):
    """Show each host: SSH reachable, container state, Python and verl version inside (one row per host)."""
    inv, chosen = select_hosts(c, hosts, inventory)
    chosen = with_container(chosen, container)
    if check:  # select_hosts exited 2 with one line on any problem; nothing was contacted
        print(f"{inv.path or 'no inventory file'}: valid, {len(chosen)} host(s) selected (nothing contacted)")
        print("\n".join(describe(h) for h in chosen))
        return
    run_fanout(c, chosen, lambda t: check_host(t, timeout=timeout), columns=COLUMNS, title="hosts",
               timeout=timeout + 2 * max(h.connect_timeout for h in chosen) + 5,
               accept_new_host_keys=accept_new_host_keys)
