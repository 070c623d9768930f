"""Collecting a host's preflight facts in ONE SSH round trip: the probe request (:func:`probe_request`), the host
shell line that executes the probe in the container (:func:`probe_command`, the one place that knows how the
probe is invoked) and ``docker inspect``s the container only when that fails, and :func:`collect`, which turns the
answer into facts. The probe itself is the bundle op :mod:`dapo_ops.agent.preflight_probe` (stdlib, runs in the
container, through :func:`dapo_ops.control.remote.bundle.run_op`: the one way in); a container without the bundle gets
it installed and the round trip once more (:func:`collect`).
"""

from __future__ import annotations

import json

from dapo_ops.agent import preflight_probe
from dapo_ops.control.remote import bundle
from dapo_ops.control.preflight.network import tracker_urls
from dapo_ops.control.preflight.plan_view import PlanView, needed_modules
from dapo_ops.control.remote.commands import q
from dapo_ops.control.remote.errors import INSPECT_FORMAT, RemoteError
from dapo_ops.control.remote.target import Target
from dapo_ops.core import defaults
from dapo_ops.core import topology


INSPECT_MARK = "@@DAPO-INSPECT "


def probe_request(
    host,
    pv: PlanView | None,
    *,
    full: bool,
    ray: dict | None = None,
    compose_request: dict | None = None,
    tracker: bool = False,
) -> dict:
    """The probe request (:mod:`dapo_ops.agent.preflight_probe`) for ``host`` and the plan. Pure. ``full``: the network
    probes too (tracker, Ray port); ``compose_request``: the compose (whichever ``full``); ``tracker``: the tracker GET alone (``inv launch``'s quick
    checks, :func:`~dapo_ops.control.preflight.network.tracker_urls`)."""
    req: dict = {"accelerator": getattr(host, "accelerator", defaults.HOST["accelerator"])}
    if req["accelerator"] == "npu":
        req["cann_files"] = list(topology.CANN_SET_ENV)
    runs = getattr(host, "runs_path", None) or getattr(host, "runs_dir", None)
    if pv is not None:
        req["model"] = pv.s("model_path")
        req["data"] = pv.data_files
        req["entry_module"] = pv.entry_module
        req["disk_path"] = pv.s("ckpt_dir") or pv.spec.run_dir or runs
        req["prompt_key"] = pv.s("prompt_key", "prompt")
        req["modules"] = [m for m, _ in needed_modules(pv)]
        if "megatron.bridge" in req["modules"]:  # the other model builder: named in the fix when it is the one there
            req["modules"].append("mbridge")
    else:
        req["disk_path"] = runs
    if runs:  # the memos of learned starts (core/learned.py), read in this same round trip
        from dapo_ops.core.learned import DIRNAME

        req["learned_dir"] = f"{str(runs).rstrip('/')}/{DIRNAME}"
    if (full or tracker) and tracker_urls(pv):
        req["http_urls"] = tracker_urls(pv)
    if full:
        if runs:  # a run already holding the container: launch's refusal (agent/occupancy.py), said by preflight
            req["occupancy"] = {"runs_dir": str(runs), "name": getattr(host, "name", None)}
        if ray:
            if ray.get("is_head"):
                req["listen_port"] = int(ray["port"])
            else:
                req["tcp"] = [{"name": "ray-head", "host": ray["head"], "port": int(ray["port"])}]
    if compose_request is not None:  # run in the container by the bundle op dapo_ops.agent.compose (the full
        # preflight's; the quick checks' when the user gave --override: control/preflight/checks.py quick_all)
        req["compose"] = {"request": compose_request}
        if pv is not None and pv.spec.launcher:  # verl's own start-up, as the training starts it
            req["compose"]["launcher"] = list(pv.spec.launcher)
    return req


def _host_command(target: Target, line: str, env: dict, secret_env: dict | None = None) -> tuple[str, bytes | None]:
    """One host shell line (and its stdin) around the probe's op ``line`` (built by
    :func:`dapo_ops.control.remote.bundle.run_op`: exit :data:`~dapo_ops.control.remote.bundle.MISSING_RC` + mark when
    the bundle is missing), with ``env`` and the inventory's workdir: exec the probe in the container and, only when that fails, ``docker
    inspect`` it (a healthy host costs one docker CLI call; a missing / stopped / paused container, a missing Docker
    or a failed probe get the inspect answer in the same round trip). The mark line says ``<inspect rc> <inspect
    text>``; after a successful exec it is ``0 running 0 false false false`` (what inspect prints for a running
    container). A bare host (``runtime = "host"``): no inspect; the mark says ``0 running host`` and the probe
    runs in the host's shell. ``secret_env`` (e.g. a proxy URL with credentials) reaches the probe through a 0600
    env file fed on stdin (:meth:`~dapo_ops.control.remote.target.Target.with_secret_file`), never the command line."""
    exec_line = target.exec_command(line, env=env, workdir=target.host.workdir, env_file='"$f"' if secret_env else None)
    if target.bare:
        after = "exit 0"
        head = f"printf '{INSPECT_MARK}0 running host\\n'; "
    else:
        c = q(target.container)
        fmt = q(INSPECT_FORMAT + " {{.State.Restarting}} {{.State.Paused}}")
        after = (
            f"if [ $rc = 0 ]; then printf '{INSPECT_MARK}0 running 0 false false false\\n'; else "
            f"s=$(docker inspect -f {fmt} {c} 2>&1); rc=$?; "
            f"printf '{INSPECT_MARK}%s %s\\n' \"$rc\" \"$(printf %s \"$s\" | tr '\\n' ' ')\"; fi; exit 0"
        )
        head = ""
    if secret_env:
        command, body = target.with_secret_file(secret_env, exec_line, after=after)
        return head + command, body
    return f"{head}{exec_line}; rc=$?; {after}", None


def collect(
    target: Target, req: dict, *, env: dict | None = None, secret_env: dict | None = None, timeout: float = 120
) -> dict:
    """Run the probe (+ inspect when it fails) on ``target`` in ONE SSH round trip, through
    :func:`dapo_ops.control.remote.bundle.run_op` (``around``: :func:`_host_command`); when the container lacks the
    bundle, run_op installs it and runs once more. ``env``: public env of
    the probe (``docker exec -e``); ``secret_env``: env it gets through a 0600 file (:func:`_host_command`).
    Returns facts:
    ``{"ssh": {"ok", "kind", "message"}, "inspect": {"rc", "text"}, "probe": dict | None, "probe_error": str,
    "bundle_error": str}``. Never raises for remote failures (they become facts)."""
    facts: dict = {
        "ssh": {"ok": True},
        "inspect": None,
        "probe": None,
        "probe_error": "",
        "bundle_error": "",
        "bare": target.bare,
        "local": target.local,
    }
    failed: list[RemoteError] = []  # the bundle's install, when it failed (run_op then answers the first result)
    try:
        res = bundle.run_op(
            target,
            "preflight_probe",
            [json.dumps(req)],
            check=False,
            timeout=timeout,
            around=lambda line: _host_command(target, line, env or {}, secret_env),
            on_install_error=failed.append,
        )
    except RemoteError as e:
        facts["ssh"] = {"ok": False, "kind": e.kind, "message": e.message}
        return facts
    if failed and failed[0].kind != "command":
        facts["ssh"] = {"ok": False, "kind": failed[0].kind, "message": failed[0].message}
        return facts
    if failed and "(hosts.toml `python`)" in failed[0].message:  # bundle.install: the interpreter cannot run
        facts["python_error"] = failed[0].message
    elif failed:
        facts["bundle_error"] = (
            f"cannot install the dapo-ops bundle {target.where} under "
            f"{target.host.runs_path}/.dapo_ops: {failed[0].message}"
        )
    out = res.stdout or ""
    for line in out.splitlines():
        if line.startswith(INSPECT_MARK):
            rest = line[len(INSPECT_MARK) :]
            rc, _, text = rest.partition(" ")
            facts["inspect"] = {"rc": int(rc) if rc.lstrip("-").isdigit() else -1, "text": text.strip()}
            break
    if facts["inspect"] is None:
        lines = (res.stderr or out).strip().splitlines()
        facts["inspect"] = {"rc": res.exited, "text": lines[-1] if lines else ""}
    if facts["inspect"]["rc"] == 0 and facts["inspect"]["text"].startswith("running"):
        try:
            facts["probe"] = preflight_probe.parse_output(out)
        except ValueError as e:
            # docker exec prints runc's start failure (e.g. the workdir's chdir) on stdout, the probe's own on stderr
            err = [ln for ln in out.splitlines() if "OCI runtime exec failed" in ln] or [
                ln for ln in (res.stderr or "").splitlines() if ln.strip()
            ]
            facts["probe_error"] = f"{e}" + (f" ({err[-1].strip()})" if err else "")
    return facts
