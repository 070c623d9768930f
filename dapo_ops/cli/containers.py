"""``inv container.list`` and ``inv container.create``: choose or create the training container on each host.

``list``: every container on each host (one SSH round trip per host, hosts in parallel) with image, state,
uptime, and for running ones whether verl is found inside and its version (the bundle op
``dapo_ops.agent.verlinfo``: located with ``find_spec``, version read from its files, without importing it:
``import verl`` pulls torch and takes seconds). The bundle travels on the command's stdin and is installed in a
container that lacks it under ``/tmp/.dapo_ops/<version>-<hash>`` (:data:`LIST_ROOT`: these containers need not
be the inventory's, so their runs dir is not assumed).

``create``: ``docker run -d`` with what a training container needs on that accelerator
(:mod:`dapo_ops.control.inventory.container_spec`: device nodes, driver mounts or ``--gpus all``, host network and IPC, a large
``/dev/shm``, the proxy variables, bind mounts for model/data dirs and the runs dir so checkpoints outlive the
container). Refuses to replace an existing container unless ``--replace``; names an image it cannot find;
``--dry-run`` prints the exact ``docker run`` line without contacting any host.
"""

from __future__ import annotations

import json as jsonlib
import sys

from rich.table import Table
from rich.text import Text

from dapo_ops.control.inventory import container_spec
from dapo_ops.control.remote import fanout
from dapo_ops.control.remote import bundle
import dapo_ops.control.inventory.proxy
from dapo_ops.control.remote.fanout import Row
from dapo_ops.control.remote.commands import q
from dapo_ops.control.remote.errors import RemoteError
from dapo_ops.cli._common import EXIT_FAILED, EXIT_USAGE, connect_timeout_override, fail, fanout_task, select_hosts

#: where ``list`` installs the bundle in each running container (any container: no runs dir is assumed)
LIST_ROOT = "/tmp"
_FMT = "{{.Names}}\t{{.Image}}\t{{.State}}\t{{.Status}}\t{{.ID}}"
_LIST_COLUMNS = ["container", "image", "state", "status", "verl"]


def list_command(python: str, workdir: str) -> str:
    """Host shell text: ``docker ps -a`` rows, then ``@@V <name> <verlinfo JSON>`` per running container.

    Its stdin is the bundle (:func:`dapo_ops.control.remote.bundle.bundle_b64`), kept in a host temp file and fed
    to each container that lacks the bundle (:func:`~dapo_ops.control.remote.bundle.stdin_install_line`)."""
    bdir = bundle.bundle_dir(LIST_ROOT)
    inner = f"{{ {bundle.stdin_install_line(bdir, python)}; }} >/dev/null 2>&1; " + bundle.op_line(
        bdir, python, "verlinfo", [workdir]
    )
    return (
        f"docker ps -a --format {q(_FMT)} || exit $?; "
        f't=$(mktemp) && cat > "$t" || exit $?; '
        f"for c in $(docker ps --format '{{{{.Names}}}}'); do "
        f'v=$(timeout 30 docker exec -i "$c" sh -c {q(inner)} < "$t" 2>/dev/null | tail -n 1); '
        f'printf \'@@V %s %s\\n\' "$c" "${{v:--}}"; done; rm -f "$t"'
    )


def _verl_cell(raw: str) -> str:
    """The ``verl`` cell from a ``@@V`` value: the version, ``"?"`` when verl has no readable version, ``"-"`` when
    not found (or the container gave no answer)."""
    raw = raw.strip()
    try:
        info = jsonlib.loads(raw)
    except ValueError:
        return "-"
    if not isinstance(info, dict) or not info.get("found"):
        return "-"
    return info.get("version") or "?"


def parse_list(stdout: str) -> list[dict]:
    """``list_command`` output -> ``[{"name", "image", "state", "status", "id", "verl"}]``; ``verl`` is the version,
    ``"-"`` when not found, ``""`` for containers that are not running (not probed)."""
    rows: dict[str, dict] = {}
    for line in stdout.splitlines():
        if line.startswith("@@V "):
            _, name, ver = (line.split(" ", 2) + [""])[:3]
            if name in rows:
                rows[name]["verl"] = _verl_cell(ver)
            continue
        parts = line.split("\t")
        if len(parts) >= 5:
            rows[parts[0]] = {
                "name": parts[0],
                "image": parts[1],
                "state": parts[2],
                "status": parts[3],
                "id": parts[4],
                "verl": "",
            }
    return list(rows.values())


def list_one(target) -> Row:
    """Containers on one host (one round trip). Raises RemoteError for SSH/docker failures."""
    h = target.host
    res = target.host_run(list_command(h.python, h.workdir), timeout=120, check=False, stdin=bundle.bundle_b64())
    err = target._docker_error(res, inspect=False) if res.exited != 0 else None  # noqa: SLF001 - same package
    if err:
        raise err
    if res.exited != 0:
        lines = [ln for ln in (res.stderr or "").splitlines() if ln.strip()]
        raise RemoteError("command", h.name, f"docker ps failed: {lines[-1] if lines else res.exited}")
    return Row(data={"containers": parse_list(res.stdout)})


@fanout_task(
    name="list",
    help={
        "json": "print JSON {host: [{name, image, state, status, id, verl}]}",
        "timeout": "seconds to wait for all hosts",
    },
)
def list_(c, hosts="", inventory="", accept_new_host_keys=False, json=False, timeout=120):
    """Containers on each host: image, state, uptime, verl found inside and its version."""
    _, chosen = select_hosts(c, hosts, inventory)
    results = fanout.run(
        chosen,
        list_one,
        timeout=timeout + 2 * max(h.connect_timeout for h in chosen) + 5,
        accept_new_host_keys=accept_new_host_keys,
        connect_timeout=connect_timeout_override(c),
    )
    if json:
        out = {
            r.host.name: (r.row.data.get("containers") if r.ok else {"error": r.row.kind, "message": r.row.message})
            for r in results
        }
        print(jsonlib.dumps(out, indent=1))
    else:
        t = Table(title="containers", title_justify="left", pad_edge=False)
        for col in ["host"] + _LIST_COLUMNS:
            t.add_column(col, no_wrap=col != "status")
        for r in results:
            if not r.ok:
                t.add_row(
                    Text(r.host.name), Text(f"FAIL {r.row.kind}", style="bold red"), Text(r.row.message), "", "", ""
                )
                continue
            cs = r.row.data.get("containers") or []
            if not cs:
                t.add_row(Text(r.host.name), Text("(none)"), "", "", "", "")
            for ct in cs:
                mark = " *" if ct["name"] == r.host.container else ""
                t.add_row(
                    Text(r.host.name),
                    Text(ct["name"] + mark),
                    Text(ct["image"]),
                    Text(ct["state"], style="green" if ct["state"] == "running" else "yellow"),
                    Text(ct["status"]),
                    Text(ct["verl"] or ""),
                )
        fanout.console().print(t)
        print("* = the inventory's container for that host")
    if fanout.exit_code(results):
        fail(fanout.summary(results), EXIT_FAILED)


def _host_dirs(host) -> list[str]:
    """Host directories ``create`` makes before ``docker run`` (sources of the bind mounts)."""
    return [src for src, _, _ in container_spec.bind_mounts(host)]


def create_one(target, *, image: str, name: str, argv: list, env: dict, replace: bool, pull: bool) -> Row:
    """Create the container on one host. Raises RemoteError; returns a Row with the new container id."""
    h = target.host
    res = target.host_run(f"docker image inspect -f '{{{{.Id}}}}' {q(image)}", timeout=60, check=False)
    err = target._docker_error(res, inspect=False)  # noqa: SLF001
    if err and err.kind == "docker-missing":
        raise err
    if res.exited != 0:
        if not pull:
            return Row(
                ok=False,
                kind="image-missing",
                message=f"image '{image}' not found on {h.name}: docker pull {image} (or docker load -i "
                f"<file>.tar) on {h.name} first, or pass --pull",
            )
        pres = target.host_run(f"docker pull {q(image)}", timeout=3600, check=False)
        if pres.exited != 0:
            lines = [ln for ln in (pres.stderr or pres.stdout or "").splitlines() if ln.strip()]
            return Row(
                ok=False,
                kind="image-missing",
                message=f"image '{image}' not found on {h.name} and docker pull failed "
                f"({lines[-1] if lines else pres.exited}); load it on {h.name} (docker load -i <file>.tar)",
            )
    res = target.host_run(
        f"docker inspect -f '{{{{.State.Status}}}} {{{{.State.ExitCode}}}}' {q(name)}", timeout=60, check=False
    )
    if res.exited == 0:
        status = res.stdout.split()[0] if res.stdout.split() else "?"
        if not replace:
            what = "is running" if status == "running" else f"exists ({status})"
            return Row(
                ok=False,
                kind="exists",
                message=f"container '{name}' {what} on {h.name}: pass --replace to remove and recreate it "
                f"(whatever runs in it ends), or choose another --name",
            )
        target.host_run(f"docker rm -f {q(name)}", timeout=120)
    dirs = _host_dirs(h)
    if dirs:
        target.host_run("mkdir -p " + " ".join(q(d) for d in dirs), timeout=60)
    line = " ".join(q(a) for a in argv)
    stdin = None
    if env:  # proxy URLs with credentials: read from stdin into the docker client's env, never on a command line
        line = "".join(f"IFS= read -r {k} && export {k} && " for k in env) + line
        stdin = "".join(f"{v}\n" for v in env.values())
    res = target.host_run(line, timeout=300, check=False, stdin=stdin)
    if res.exited != 0:
        # the docker CLI's reason (its first line), not the usage block / note after it ("Usage:  docker run ...",
        # "See 'docker run --help'." / "Run 'docker run --help' for more information")
        lines = [
            ln.strip()
            for ln in (res.stderr or "").splitlines()
            if ln.strip() and "docker run --help" not in ln and not ln.startswith("Usage:")
        ]
        return Row(
            ok=False,
            kind="docker-run",
            message=f"docker run failed on {h.name}: {lines[0] if lines else 'exit %d' % res.exited}",
        )
    cid = (res.stdout or "").strip().splitlines()[-1][:12] if (res.stdout or "").strip() else "?"
    st = target.host_run(
        f"docker inspect -f '{{{{.State.Status}}}} {{{{.State.ExitCode}}}}' {q(name)}", timeout=60, check=False
    )
    state = (st.stdout or "").split()
    if not state or state[0] != "running":
        logs = target.host_run(f"docker logs --tail 3 {q(name)} 2>&1", timeout=60, check=False)
        tail = " | ".join(ln.strip() for ln in (logs.stdout or "").splitlines() if ln.strip())
        return Row(
            ok=False,
            kind="container-stopped",
            message=f"container '{name}' started but is {' '.join(state) or 'gone'} on {h.name}"
            + (f": {tail}" if tail else "")
            + "; check the image (it needs sh and sleep)",
        )
    return Row(
        cells={"container": name, "id": cid, "image": image},
        message=f"created '{name}' ({cid}) from {image}",
        data={"id": cid},
    )


@fanout_task(
    help={
        "image": "image to run (e.g. the verl Ascend image tag); required",
        "name": "container name (default: the inventory's container)",
        "replace": "remove and recreate an existing container of that name (its processes end)",
        "dry_run": "print the exact docker run line per host without contacting any host",
        "shm_size": "size of /dev/shm (docker --shm-size; default 64g)",
        "volume": "extra bind mount HOST:CONTAINER[:ro], repeatable",
        "pull": "docker pull the image when the host does not have it",
        "timeout": "seconds to wait for all hosts",
    },
    iterable=["volume"],
)
def create(
    c,
    image="",
    name="",
    replace=False,
    dry_run=False,
    shm_size="64g",
    volume=None,
    pull=False,
    hosts="",
    inventory="",
    accept_new_host_keys=False,
    timeout=600,
):
    """Create the training container (docker run -d with devices, host network/IPC, shm, proxy, bind mounts)."""
    if not image:
        fail("no image given: pass --image IMAGE (the verl image for this accelerator)", EXIT_USAGE)
    inv, chosen = select_hosts(c, hosts, inventory)
    proxy = dict(inv.proxy or {})
    if any(proxy.get(k) for k in ("http_proxy", "https_proxy")):
        # no_proxy also gets loopback and every inventory host: Ray / HCCL traffic between the hosts stays direct
        try:
            proxy = dapo_ops.control.inventory.proxy.container_proxy_env(
                inv.proxy, {}, [h.address for h in inv.hosts.values()]
            )
        except dapo_ops.control.inventory.proxy.ProxyError as e:
            fail(str(e), EXIT_USAGE)
    plans = {}
    for h in chosen:
        try:
            plans[h.name] = container_spec.docker_run_argv(
                h, image, name or h.container, proxy=proxy, shm_size=shm_size, volumes=list(volume or [])
            )
        except container_spec.ContainerSpecError as e:
            fail(f"{h.name}: {e}", EXIT_USAGE)
    if dry_run:
        for h in chosen:
            argv, env = plans[h.name]
            if len(chosen) > 1:
                print(f"# {h.name}")
            if env:
                print("# exported for docker (values not shown): " + " ".join(sorted(env)))
            print(container_spec.render(argv))
        return

    def one(target):
        argv, env = plans[target.host.name]
        return create_one(
            target, image=image, name=name or target.host.container, argv=argv, env=env, replace=replace, pull=pull
        )

    results = fanout.run(
        chosen,
        one,
        timeout=timeout,
        accept_new_host_keys=accept_new_host_keys,
        connect_timeout=connect_timeout_override(c),
    )
    fanout.render(results, ["container", "id", "image"], title="container.create", file=sys.stdout)
    if fanout.exit_code(results):
        bad = [r for r in results if not r.ok]
        if len(results) == 1:
            fail(bad[0].row.message or bad[0].row.kind, EXIT_FAILED)
        fail(fanout.summary(results), EXIT_FAILED)


__all__ = ["list_", "create", "parse_list", "list_command"]
