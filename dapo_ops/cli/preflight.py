"""``inv preflight``: catch what would kill the run before it starts, on every host in parallel.

Per host ONE SSH round trip (:mod:`dapo_ops.control.preflight`, :func:`~dapo_ops.control.preflight.group.run_fleet`):
container state, devices inside the container,
python/verl/entry module, the generated overrides composed against the container's own verl config (once per group
of hosts with the same verl config, hydra and overrides; a host that differs composes in a second round), model and
data files, disk, proxy, SwanLab reachability from the container, and for ``--cluster`` the Ray port between
hosts. The operator-side SwanLab key check runs once. A rich table per host, a summary line, ``--json``;
exit 1 if any check fails.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from rich.table import Table
from rich.text import Text

from dapo_ops.control.remote import fanout
from dapo_ops.control.launch import plan
from dapo_ops.control.launch import request
from dapo_ops.control.launch import service
from dapo_ops.control.launch.refusals import LaunchUsageError
from dapo_ops.control.launch.service import LaunchRequest
from dapo_ops.control.preflight import group
from dapo_ops.control.preflight.group import HostJob
from dapo_ops.control.preflight.network import swanlab_key_check
from dapo_ops.control.preflight.result import FAIL, Check, to_json, worst
from dapo_ops.control.inventory import proxy
from dapo_ops.control import settings
from dapo_ops.cli._common import (
    EXIT_FAILED,
    EXIT_USAGE,
    JOBS,
    UNSET,
    connect_timeout_override,
    fail,
    fanout_task,
    given_flags,
    refuse_job_as_mode,
    run_settings,
    select_hosts,
    user_config,
)

#: settings flags: help from the settings table (steps / save_freq only size the disk estimate here)
HELP = {
    **settings.task_help(
        "model",
        "train_file",
        "val_file",
        "trainer_gpus",
        "rollout_gpus",
        "max_response_length",
        "framework",
        "swanlab_mode",
        "container",
        steps=settings.flag_help(settings.BY_NAME["steps"]) + ", for the disk estimate",
        save_freq=settings.flag_help(settings.BY_NAME["save_freq"]) + ", for the disk estimate",
    ),
    "job": "dapo | one-step-off: which launch to check for, `inv launch` or `inv one-step-off` (device split, entry "
    "module; default dapo)",
    "mode": settings.flag_help(settings.BY_NAME["trainer_mode"]) + "; checks what `inv launch --mode X` runs",
    "override": "extra verl override KEY=VALUE, repeatable (composed with the rest)",
    "json": "print JSON ({status, hosts: {name: {status, checks: [{name, status, message, fix}]}}}) instead of tables",
    "quick": "only the cheap subset that inv launch runs (no compose, no network probes)",
    "no_compose": "skip the Hydra compose check of the overrides",
    "cluster": "the selected hosts form ONE multi-host run: check the Ray port (first host = Ray head)",
    "ray_port": "Ray head port for --cluster (default 6379)",
    "timeout": "seconds to wait for all hosts",
}

#: run id of the plans preflight checks (a launch makes its own); constant so the in-container compose cache hits
PREFLIGHT_RUN_ID = "00000000-000000-pref"


def _longest_word(texts) -> int:
    return max([len(w) for t in texts for w in str(t).split()] + [1])


def render_host(name: str, checks: list, file=None) -> None:
    """One host's checks for the width of the printout (:func:`dapo_ops.control.remote.fanout.output_width`, the one
    width rule): a table (check | status | found | fix) when it fits with no word of ``found`` / ``fix`` split, else
    one block per check (``status check: found``, then ``fix: ...``) wrapped at spaces only. No layout splits a
    path or any other word: a word wider than the printout sticks out whole."""
    import textwrap

    st = worst(checks)
    style = {"ok": "green", "warn": "yellow", "fail": "bold red"}
    con = fanout.console(file)
    mins = {"found": _longest_word(c.message for c in checks), "fix": _longest_word(c.fix for c in checks)}
    need = max(len(c.name) for c in checks) + len("status") + mins["found"] + mins["fix"] + 3 * 4 + 1 if checks else 0
    if need <= con.width:
        t = Table(title=f"{name}: {st}", title_justify="left", pad_edge=False)
        t.add_column("check", no_wrap=True)
        t.add_column("status", no_wrap=True)
        t.add_column("found", overflow="fold", min_width=mins["found"])
        t.add_column("fix", overflow="fold", min_width=mins["fix"])
        for c in checks:
            t.add_row(Text(c.name), Text(c.status, style=style[c.status]), Text(c.message), Text(c.fix))
        con.print(t)
        return

    def wrap(text: str, indent: str) -> list[str]:
        return textwrap.wrap(
            text, con.width, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False
        ) or [text]

    con.print(Text(f"{name}: {st}", style="bold"))
    for c in checks:
        head = wrap(f"{c.status:<4} {c.name}: {c.message}", "     ")
        con.print(Text(head[0], style=style[c.status] if c.status != "ok" else ""), overflow="ignore", crop=False)
        for ln in head[1:] + (wrap(f"     fix: {c.fix}", "          ") if c.fix else []):
            con.print(Text(ln), overflow="ignore", crop=False)


def summary_line(results: dict) -> str:
    """``preflight: 3 hosts: h1 ok, h2 FAIL (devices, leftover), h3 warn (disk)``."""
    parts = []
    for h, cs in results.items():
        st = worst(cs)
        names = [c.name for c in cs if c.status == st] if st != "ok" else []
        parts.append(f"{h} {'FAIL' if st == 'fail' else st}" + (f" ({', '.join(names)})" if names else ""))
    n = len(results)
    return f"preflight: {n} host{'s' if n != 1 else ''}: " + ", ".join(parts)


@fanout_task(help=HELP, iterable=["override"])
def preflight(
    c,
    job="dapo",
    mode="",
    model="",
    train_file="",
    val_file="",
    trainer_gpus=UNSET,
    rollout_gpus=UNSET,
    max_response_length=UNSET,
    steps=UNSET,
    save_freq=UNSET,
    framework="",
    swanlab_mode="",
    override=None,
    json=False,
    quick=False,
    no_compose=False,
    cluster=False,
    ray_port=6379,
    container="",
    hosts="",
    inventory="",
    accept_new_host_keys=False,
    timeout=180,
):
    """Check every host before a launch: container, devices, verl + overrides, model, data, disk, network."""
    refuse_job_as_mode(mode, "preflight")
    if job not in JOBS:
        fail(f"unknown job {job!r}: --job takes dapo (`inv launch`) or one-step-off (`inv one-step-off`)", EXIT_USAGE)
    trainer_mode = mode or UNSET  # the settings table judges async | sync, as for launch
    flags = given_flags(
        model=model,
        train_file=train_file,
        val_file=val_file,
        trainer_gpus=trainer_gpus,
        rollout_gpus=rollout_gpus,
        max_response_length=max_response_length,
        steps=steps,
        save_freq=save_freq,
        framework=framework,
        container=container,
        trainer_mode=trainer_mode,
    )
    file_cfg = user_config(c)
    st = run_settings(c, flags)
    inv, chosen = select_hosts(c, hosts, inventory)
    extra = [o for o in (override or []) if o]
    env = dict(os.environ)
    try:
        req, sw_err = request.preflight_request(job, st, extra, file_cfg, env, inv, chosen, swanlab_mode=swanlab_mode)
    except LaunchUsageError as e:
        fail(str(e), EXIT_USAGE)
    per_host = check_request(
        c,
        req,
        chosen,
        env=env,
        file_cfg=file_cfg,
        sw_err=sw_err,
        swanlab_mode=swanlab_mode,
        quick=quick,
        compose=not no_compose,
        cluster=cluster,
        ray_port=ray_port,
        timeout=timeout,
        accept_new_host_keys=accept_new_host_keys,
    )
    report(per_host, json_=json)


def check_request(
    c,
    req: LaunchRequest,
    chosen: list,
    *,
    env: Mapping[str, str],
    file_cfg: Mapping,
    sw_err: str = "",
    swanlab_mode: str = "",
    quick: bool = False,
    compose: bool = True,
    cluster: bool = False,
    ray_port: int = 6379,
    timeout: float = 180,
    accept_new_host_keys: bool = False,
) -> dict[str, list[Check]]:
    """Every check of the launch request ``req`` on the hosts ``chosen``, in parallel: each host's run as the launch
    drafts it (``req.drafts[host name]``, the launch's own run: ``inv quickstart``; a host without one is drafted here
    from ``req`` with :data:`PREFLIGHT_RUN_ID`, :func:`dapo_ops.control.launch.service.draft_for`) and finishes it with
    the facts the probe reads (:func:`dapo_ops.control.launch.service.finisher`: the launch's own
    :func:`~dapo_ops.control.launch.service.build_plan`, so the checks judge the plan the launch runs), one SSH round
    trip per host and one compose per group of identical hosts (:func:`dapo_ops.control.preflight.group.run_fleet`;
    a host whose finished argv differs from its draft's composes it in a second round trip), then
    the operator-side SwanLab key check once (``sw_err``: the SwanLab error :func:`preflight_request
    <dapo_ops.control.launch.request.preflight_request>` returned). A plan error is one line and exit 2.
    Returns ``{host name: checks}``."""
    jobs = {}
    head = chosen[0]
    for h in chosen:
        try:
            draft = req.drafts.get(h.name) or service.draft_for(
                service.LaunchFacts(host=h, run_id=PREFLIGHT_RUN_ID), req
            )
        except plan.PlanError as e:
            fail(f"{h.name}: {e}", EXIT_USAGE)
        ray = None
        if cluster and len(chosen) > 1:
            ray = {"head": head.address, "port": int(ray_port), "is_head": h.name == head.name}
        jobs[h.name] = HostJob(
            plan=draft,
            ray=ray,
            container=draft.spec["container"] or "",  # CONTAINER wins
            finish=service.finisher(service.LaunchFacts(host=h, run_id=draft.inputs.run_id, draft=draft), req),
        )
    # the proxy credentials reach the probe through a 0600 file, never argv
    secret = {k: v for k, v in req.extra_secret.items() if k.lower() in proxy.PROXY_VARS}
    # the control masters (dapo_ops/control/remote/sshmux.py) as status; one compose per group of identical hosts
    per_host = group.run_fleet(
        chosen,
        jobs,
        quick=quick,
        compose=compose,
        inv_proxy=req.inv_proxy,
        secret_env=secret or None,
        timeout=timeout + 2 * max(h.connect_timeout for h in chosen) + 5,
        cmd_timeout=max(30.0, timeout - 10),
        accept_new_host_keys=accept_new_host_keys,
        connect_timeout=connect_timeout_override(c),
        reuse=True,
    )
    if not quick and req.sw.mode != "disabled":
        kc = swanlab_key_check(
            jobs[head.name].plan, env=dict(env), file_cfg=file_cfg.get("swanlab") or {}, mode_flag=swanlab_mode
        )
        if kc is not None:
            for h in per_host:
                per_host[h] = per_host[h] + [kc]
    elif sw_err and req.sw.mode == "disabled":
        for h in per_host:
            per_host[h] = per_host[h] + [Check("swanlab-key", FAIL, sw_err, "fix the SwanLab settings")]
    return per_host


def report(per_host: dict[str, list[Check]], *, json_: bool = False) -> None:
    """Print every host's checks (tables, or ``--json``) and the summary line; exit 1 with the first failing host's
    line when a check failed."""
    status = worst([ck for cs in per_host.values() for ck in cs])
    if json_:
        print(to_json(per_host))
    else:
        for h, cs in per_host.items():
            render_host(h, cs)
        print(summary_line(per_host))
    if status == FAIL:
        raise_exit = [
            f"{h}: {next(str(ck) for ck in cs if ck.status == FAIL)}" for h, cs in per_host.items() if worst(cs) == FAIL
        ]
        fail(
            raise_exit[0] + (f" (+{len(raise_exit) - 1} more host(s) failing)" if len(raise_exit) > 1 else ""),
            EXIT_FAILED,
        )
