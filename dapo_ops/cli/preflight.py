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

import dataclasses
import os

from rich.table import Table
from rich.text import Text

from dapo_ops.control.remote import fanout
from dapo_ops.control.launch import plan as planning
from dapo_ops.control.preflight import group as preflight_group
from dapo_ops.control.preflight.checks import run_all
from dapo_ops.control.preflight.group import HostJob
from dapo_ops.control.preflight.network import swanlab_key_check
from dapo_ops.control.preflight.result import FAIL, Check, to_json, worst
from dapo_ops.control.inventory import proxy
from dapo_ops.control import settings
from dapo_ops.control.remote.fanout import Row
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


def swanlab_for_preflight(mode_flag: str, env=None, file_cfg=None):
    """SwanLab settings without prompting and without failing on a missing key (that is the ``swanlab-key``
    check's job): returns ``(SwanlabSettings or None, error line or "")``. With a missing cloud key the host and
    mode are still resolved (a placeholder key is used only inside this function, never returned or shown)."""
    from dapo_ops.control.launch import swanlab_settings as swanlab_cfg
    from dapo_ops.control.launch import swanlab_values

    env = dict(os.environ if env is None else env)
    file_cfg = file_cfg or {}  # the [swanlab] table of the program run's config file (cli/_common.py user_config)
    try:
        return swanlab_cfg.resolve(env, file_cfg, mode_flag=mode_flag or None, stdin_isatty=False), ""
    except swanlab_values.SwanlabConfigError as e:
        try:
            s = swanlab_cfg.resolve(
                {**env, swanlab_cfg.ENV_KEY: "placeholder"}, file_cfg, mode_flag=mode_flag or None, stdin_isatty=False
            )
            return swanlab_cfg.SwanlabSettings(
                mode=s.mode,
                host=s.host,
                web_host=s.web_host,
                api_key=None,
                log_dir=s.log_dir,
                project=s.project,
                workspace=s.workspace,
                sources=s.sources,
            ), str(e)
        except swanlab_values.SwanlabConfigError as e2:
            return None, str(e2)


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
    sw, sw_err = swanlab_for_preflight(swanlab_mode, file_cfg=(file_cfg or {}).get("swanlab", {}))
    logger_on = bool(sw and sw.mode != "disabled")
    extra = [o for o in (override or []) if o]
    run_id = PREFLIGHT_RUN_ID  # fixed: the compose result is cached in the container by content
    plans = {}
    for h in chosen:
        try:
            plans[h.name] = planning.make_plan(
                st, h, mode=job, run_id=run_id, swanlab_logger=logger_on, proxy=inv.proxy, extra_overrides=extra
            )
        except planning.PlanError as e:
            fail(f"{h.name}: {e}", EXIT_USAGE)
    try:  # the proxy launch will use (credentials: through a 0600 file to the probe, never argv)
        proxy_public, proxy_secret = proxy.run_proxy_env(
            st, (file_cfg or {}).get("proxy"), inv.proxy, os.environ, [h.address for h in chosen]
        )
    except proxy.ProxyError as e:
        fail(str(e), EXIT_USAGE)
    for name, plan in plans.items():  # as launch's public env: the plan's proxy variables give way to the run's
        env = {k: v for k, v in plan.spec.get("env", {}).items() if k.lower() not in proxy.PROXY_VARS}
        plans[name] = dataclasses.replace(plan, spec={**plan.spec, "env": env})
    extra_env = {**proxy_public, **(sw.public_env() if sw is not None else {})}
    head = chosen[0]
    jobs = {}
    for h in chosen:
        ray = None
        if cluster and len(chosen) > 1:
            ray = {"head": head.address, "port": int(ray_port), "is_head": h.name == head.name}
        plan = plans[h.name]
        jobs[h.name] = HostJob(plan=plan, ray=ray, container=plan.spec["container"] or "")  # CONTAINER wins
    # the control masters (dapo_ops/control/remote/sshmux.py) as status; one compose per group of identical hosts
    per_host = preflight_group.run_fleet(
        chosen,
        jobs,
        quick=quick,
        compose=not no_compose,
        inv_proxy=inv.proxy,
        extra_env=extra_env,
        secret_env=proxy_secret or None,
        timeout=timeout + 2 * max(h.connect_timeout for h in chosen) + 5,
        cmd_timeout=max(30.0, timeout - 10),
        accept_new_host_keys=accept_new_host_keys,
        connect_timeout=connect_timeout_override(c),
        reuse=True,
    )
    if not quick and logger_on:
        kc = swanlab_key_check(
            plans[chosen[0].name],
            env=dict(os.environ),
            file_cfg=(file_cfg or {}).get("swanlab", {}),
            mode_flag=swanlab_mode,
        )
        if kc is not None:
            for h in per_host:
                per_host[h] = per_host[h] + [kc]
    elif sw is None and sw_err:
        for h in per_host:
            per_host[h] = per_host[h] + [Check("swanlab-key", FAIL, sw_err, "fix the SwanLab settings")]
    status = worst([ck for cs in per_host.values() for ck in cs])
    if json:
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


#: container dir holding ``model/``, ``train.parquet``, ``val.parquet`` for :func:`bench_fn`
BENCH_INPUTS_ENV = "DAPO_PREFLIGHT_BENCH_INPUTS"


def bench_fn(target) -> Row:
    """Per-host function for ``bench/fanout.py --task preflight``: every check (compose included) for a DAPO plan
    whose inputs live in ``$DAPO_PREFLIGHT_BENCH_INPUTS`` (default ``/verl/dapo_runs/pf-inputs``; made by
    ``bench/preflight_fanout.py``). SwanLab off (no network wait in a timing)."""
    base = os.environ.get(BENCH_INPUTS_ENV, "/verl/dapo_runs/pf-inputs").rstrip("/")
    s = {
        "model": f"{base}/model",
        "train_file": f"{base}/train.parquet",
        "val_file": f"{base}/val.parquet",
        "framework": "fsdp",
        "steps": 4,
        "save_freq": 2,
        "max_prompt_length": 512,
        "max_response_length": 1024,
    }
    plan = planning.make_plan(s, target.host, mode="dapo", run_id="20261129-000000-bnch", swanlab_logger=False)
    checks = run_all(target, plan)
    bad = [c for c in checks if c.status == FAIL]
    return Row(ok=not bad, kind="preflight" if bad else "", message=str(bad[0]) if bad else "", data={"checks": checks})
