"""``inv launch`` (DAPO) and ``inv one-step-off``: start verl detached under the retry supervisor.

What the runbook's ``run_dapo.sh`` / ``run_one_step_off_policy.sh`` and its OOM auto-recovery flow do, done on
the host itself. This module parses the flags, resolves the settings (flag > env > config file > default,
:mod:`dapo_ops.control.settings`), the SwanLab / notifier / proxy secrets, calls the launch service
(:func:`dapo_ops.control.launch.launch_one` on every host in parallel) and prints the run id, host, container,
log path, how to follow it and the SwanLab link, or one line and a non-zero exit. Afterwards it is silent:
errors reach the operator through ``status`` / ``watch`` and the notifier.

``--dry-run`` prints the plan without touching any host (works on a fresh clone without an inventory).
With several ``-H`` hosts: ONE run on a Ray cluster across them (:mod:`dapo_ops.cli.multihost` prints,
:mod:`dapo_ops.control.multihost` does it); ``--independent`` gives each host its own single-host run instead.
Every flag's help comes from the settings table (:func:`dapo_ops.control.settings.task_help`) or
:data:`OPTIONS_HELP` (how to launch, not what to train).
"""

from __future__ import annotations

import json
import os
import sys

from dapo_ops.agent import notify
from dapo_ops.cli._common import (
    EXIT_FAILED,
    EXIT_USAGE,
    UNSET,
    UNSET_FLOAT,
    connect_timeout_override,
    fail,
    fanout_task,
    given_flags,
    on_interrupt,
    refuse_job_as_mode,
    run_settings,
    select_hosts,
    user_config,
)
from dapo_ops.control import launch as svc
from dapo_ops.control import planning
from dapo_ops.control import proxy
from dapo_ops.control import settings as settings_mod
from dapo_ops.control import swanlab_cfg
from dapo_ops.control import userconfig
from dapo_ops.control.fanout import Row
from dapo_ops.control.launch import LaunchProgress, LaunchRefused, LaunchRequest, LaunchUsageError
from dapo_ops.core import redact
from dapo_ops.core import runstate

#: help of the flags that say how to launch (the settings flags' help comes from the settings table)
OPTIONS_HELP = {
    "override": "extra verl override KEY=VALUE, repeatable (appended last; never put secrets here)",
    "dry_run": "print the plan (features, ladder, command, paths) without touching any host",
    "skip_preflight": "skip the quick pre-launch checks (container, active run, devices)",
    "link_wait": "seconds to wait for the SwanLab run link after the start (0: do not wait)",
    "independent": "with several -H hosts: one separate single-host run per host instead of one multi-host run "
    "on a Ray cluster",
    "resume": "continue an earlier run RUN_ID from its checkpoints: a new run reusing its checkpoint dir, "
    "experiment, SwanLab run and ladder-added features (same host(s), mode, framework and devices)",
    "json": "print the started runs as a JSON list (one object per host: run_id, host, state, log, follow) instead "
    "of text; exit codes are the same",
}
HELP = {**settings_mod.task_help(), **OPTIONS_HELP}


def _swanlab(swanlab_mode: str, notes: list):
    try:
        return swanlab_cfg.resolve_for_launch(mode_flag=swanlab_mode or None, notes=notes)
    except (swanlab_cfg.SwanlabConfigError, userconfig.UserConfigError) as e:
        fail(str(e), EXIT_USAGE)


def _dry_run(
    flags: dict,
    mode: str,
    *,
    hosts: str,
    inventory: str,
    swanlab_mode: str,
    file_cfg: dict,
    extra: list,
    independent: bool,
):
    from dapo_ops.control import plan as plan_mod
    from dapo_ops.control.inventory import InventoryError

    if swanlab_mode:
        flags = {**flags, "swanlab_mode": swanlab_mode}
    try:
        p = None
        if not independent:  # several hosts: the multi-host plan
            from dapo_ops.cli import multihost

            p = multihost.dry_run(
                flags,
                mode=mode,
                hosts=hosts,
                inventory=inventory,
                env=os.environ,
                file_cfg=file_cfg,
                extra_overrides=extra,
            )
        if p is None:
            p = plan_mod.dry_run(
                flags,
                mode=mode,
                hosts=hosts,
                inventory=inventory,
                env=os.environ,
                file_cfg=file_cfg,
                extra_overrides=extra,
            )
    except (settings_mod.SettingsError, planning.PlanError, InventoryError) as e:
        fail(str(e), EXIT_USAGE)
    return p


def follow_commands(host: str) -> list[str]:
    """The commands that follow a run launched on ``host`` (the text's ``follow:`` line, the JSON's ``follow``)."""
    return [f"inv status -H {host}", f"inv logs -f -H {host}"]


def run_json(h, d: dict, secrets_all: list) -> dict:
    """``launch --json``'s object of a started run on host ``h`` (``d``: :func:`dapo_ops.control.launch.start_run`'s
    row data): ``run_id``, ``host``, ``state`` (run.json's status), ``container`` (None on a bare host), ``log``
    (the run's train.log), ``workdir_log`` (the workdir's copy), ``follow`` (commands), ``resume``,
    ``swanlab_url`` (redacted)."""
    return {
        "run_id": d["run_id"],
        "host": h.name,
        "state": d["status"],
        "container": d.get("container") or None,
        "log": d["log"],
        "workdir_log": f"{h.workdir.rstrip('/')}/train.log",
        "follow": follow_commands(h.name),
        "resume": d.get("resume") or None,
        "swanlab_url": redact.scrub(d["swanlab_url"], secrets_all) if d.get("swanlab_url") else None,
    }


def _print_run(h, d: dict, secrets_all: list) -> None:
    where = f"container {d['container']}" if d["container"] else "bare host"
    print(f"run {d['run_id']} {d['status']} on {h.name} ({where})")
    print(f"  log:     {d['log']}  (also {h.workdir.rstrip('/')}/train.log)")
    print("  follow:  " + "   |   ".join(follow_commands(h.name)))
    if d.get("resume"):
        print(f"  resume:  {d['resume']}")
    for line in d.get("start") or []:  # the learned start (or why not) and the estimate's start rung
        print(f"  start:   {line}")
    if d.get("swanlab_url"):
        print(f"  swanlab: {redact.scrub(d['swanlab_url'], secrets_all)}")


def interrupted_line(progress: LaunchProgress) -> str:
    """The Ctrl-C line of a launch: which run may have started where and how to check / stop it, or that nothing
    was started. Cancels ``progress`` first, so no host begins a start after the line was decided."""
    runs = progress.cancel()
    if not runs:
        where = f" on {','.join(progress.hosts)}" if progress.hosts else ""
        return f"interrupted: nothing was started{where} (Ctrl-C before any run's supervisor was started)"
    names = ",".join(runs)
    what = "; ".join(f"run {rid} may have started on {h}" for h, rid in runs.items())
    their = "its supervisor is" if len(runs) == 1 else "their supervisors are"
    return f"interrupted: {what} ({their} detached): `inv status -H {names}`, `inv stop -H {names}`"


def _launch(
    c,
    mode: str,
    flags: dict,
    *,
    hosts: str,
    inventory: str,
    dry_run: bool,
    skip_preflight: bool,
    link_wait: int,
    swanlab_mode: str,
    override,
    accept_new_host_keys: bool,
    independent: bool = False,
    resume: str = "",
    progress: LaunchProgress | None = None,
    json_: bool = False,
):
    from dapo_ops.control import fanout

    if link_wait < 0:
        fail(
            f"--link-wait={link_wait} is negative; give the seconds to wait for the SwanLab link (0: do not wait)",
            EXIT_USAGE,
        )
    resume = (resume or "").strip()
    if resume and not runstate.is_run_id(resume):
        fail(
            f"--resume takes a run id like 20261129-151200-a1b2 (got {resume!r}); list runs with `inv status --all`",
            EXIT_USAGE,
        )
    extra = [o for o in (override or []) if o]
    file_cfg = user_config()
    try:
        svc.refuse_secret_overrides(extra, svc.known_secrets(file_cfg))
        svc.refuse_bad_overrides(extra)
    except LaunchUsageError as e:
        fail(str(e), EXIT_USAGE)
    if mode == "dapo":
        given = [f"--{k.replace('_', '-')}" for k in ("trainer_gpus", "rollout_gpus") if k in flags]
        if given:
            fail(
                f"{' and '.join(given)} size the pools of one-step-off; DAPO trains and rolls out on every device "
                f"of each host (hosts.toml `devices`): use `inv one-step-off {' '.join(g + ' N' for g in given)}`, "
                f"or drop them",
                EXIT_USAGE,
            )
    st = run_settings(flags, file_cfg)
    try:
        svc.refuse_secret_settings(st, svc.known_secrets(file_cfg))
    except LaunchUsageError as e:
        fail(str(e), EXIT_USAGE)
    if dry_run and json_:
        fail("--json prints the started runs and --dry-run starts none: drop one of them", EXIT_USAGE)
    if dry_run:
        p = _dry_run(
            flags,
            mode,
            hosts=hosts,
            inventory=inventory,
            swanlab_mode=swanlab_mode,
            file_cfg=file_cfg,
            extra=extra,
            independent=independent,
        )
        if resume:
            print(
                f"resume:  continues run {resume}: at launch the settings not given now (model, data, lengths, "
                f"framework, batch sizes, features) come from its spec.json, and its checkpoint dir, experiment, "
                f"SwanLab run and ladder-added features are kept; the plan above is before that (--dry-run "
                f"contacts no host)"
            )
        return p
    inv, chosen = select_hosts(c, hosts, inventory)
    progress = progress if progress is not None else LaunchProgress()
    progress.hosts = [h.name for h in chosen]
    if resume and len(chosen) > 1 and independent:  # one run id names one run: a cluster run, or one host's
        fail(
            f"--resume {resume!r} continues one run: drop --independent to resume the multi-host run {resume} "
            f"(same -H hosts, its head first), or resume each host's own run with -H <host> --resume <its run id>",
            EXIT_USAGE,
        )
    notes: list[str] = []
    sw = _swanlab(swanlab_mode, notes)
    try:
        notify_cfg, notify_secret = notify.spec_from_user_config(file_cfg.get("notify"), dict(os.environ))
    except ValueError as e:
        fail(str(e), EXIT_USAGE)
    try:  # --http-proxy style settings (flag/env/file) > hosts.toml [proxy] > config [proxy] > env
        proxy_public, proxy_secret = proxy.run_proxy_env(
            st, file_cfg.get("proxy"), inv.proxy, os.environ, [h.address for h in chosen]
        )
    except proxy.ProxyError as e:
        fail(str(e), EXIT_USAGE)
    secrets_all = list(sw.secrets()) + list(proxy_secret.values()) + list(notify_secret.values())
    try:
        svc.refuse_secret_overrides(extra, secrets_all)  # + the proxy credentials known only now
        svc.refuse_secret_settings(st, secrets_all)
    except LaunchUsageError as e:
        fail(str(e), EXIT_USAGE)
    for n in notes:
        print(redact.scrub(n, secrets_all), file=sys.stderr)
    req = LaunchRequest(
        mode=mode,
        settings=st,
        sw=sw,
        notify_cfg=notify_cfg,
        extra_public=proxy_public,
        extra_secret={**proxy_secret, **notify_secret},
        inv_proxy=inv.proxy,
        extra_overrides=extra,
        skip_preflight=skip_preflight,
        link_wait=float(link_wait),
        resume=resume,
        progress=progress,
    )
    if len(chosen) > 1 and not independent:  # ONE run on a Ray cluster across the hosts
        from dapo_ops.cli import multihost

        return multihost.launch(
            c,
            req,
            chosen,
            accept_new_host_keys=accept_new_host_keys,
            secrets_all=secrets_all,
            json_=json_,
            hosts_given=bool((hosts or "").strip()),
        )

    # a plan error is the same on every host kind: check once before contacting anyone (the launch's own builder,
    # without the hosts' facts; each host's launch builds its one plan from its facts)
    try:
        svc.build_plan(svc.LaunchFacts(host=chosen[0], run_id=runstate.new_run_id()), req)
    except planning.PlanError as e:
        fail(str(e), EXIT_USAGE)

    def one(target):
        try:
            return svc.launch_one(target, req)
        except planning.PlanError as e:
            return Row(ok=False, kind="plan", message=str(e))
        except LaunchRefused as e:
            return Row(ok=False, kind=e.kind, message=str(e))

    results = fanout.run(
        chosen,
        one,
        timeout=svc.START_WAIT_S + svc.SETTLE_S + max(0, link_wait) + 180,
        accept_new_host_keys=accept_new_host_keys,
        connect_timeout=connect_timeout_override(c),
    )
    failed = [r for r in results if not r.ok]
    if json_:  # one object per host; a failed host: state "failed", its kind and line (the exit code is the same)
        print(
            json.dumps(
                [
                    run_json(r.host, r.row.data, secrets_all)
                    if r.ok
                    else {
                        "run_id": None,
                        "host": r.host.name,
                        "state": "failed",
                        "kind": r.row.kind or None,
                        "error": redact.scrub(r.row.message or r.row.kind, secrets_all),
                    }
                    for r in results
                ],
                indent=1,
            )
        )
    for r in results:
        h = r.host
        if not r.ok:
            if len(results) > 1 and not json_:
                msg = r.row.message or r.row.kind
                msg = redact.scrub(msg, secrets_all)
                print(msg if msg.startswith(h.name) else f"{h.name}: {msg}", file=sys.stderr)
            continue
        if not json_:
            _print_run(h, r.row.data, secrets_all)
    if failed:
        if len(results) == 1:
            msg = redact.scrub(failed[0].row.message or failed[0].row.kind, secrets_all)
            name = failed[0].host.name
            fail(msg if msg.startswith(name) or msg.startswith("run ") else f"{name}: {msg}", EXIT_FAILED)
        fail(fanout.summary(results), EXIT_FAILED)


def _from_task_args(c, mode: str, args: dict) -> None:
    """Body shared by ``launch`` and ``one-step-off``: split the task's arguments into settings flags (those of the
    settings table that were given) and launch options, then :func:`_launch`. ``--swanlab-mode`` goes to the
    SwanLab setup (it decides with the key and host), not into the settings."""
    args.pop("c", None)
    raw = {p.name: args.pop(a) for a, p in settings_mod.BY_ARG.items() if a != "swanlab_mode"}
    flags = given_flags(**raw)
    # a string flag given empty (--model '') is passed on: the settings table's EMPTY_RULES decide what it means (the
    # string flags default to None, so '' is only ever typed)
    flags.update({name: "" for name, v in raw.items() if v == ""})
    if flags.get("swanlab_host"):  # the SwanLab setup reads it with the key and mode (swanlab_cfg), in-process only
        try:  # a bad value is reported as the flag's, not as "(from env)"
            swanlab_cfg.normalize_host(flags["swanlab_host"], "--swanlab-host")
        except swanlab_cfg.SwanlabConfigError as e:
            fail(str(e), EXIT_USAGE)
        os.environ["SWANLAB_HOST"] = flags["swanlab_host"]
    progress = LaunchProgress()
    with on_interrupt(lambda: interrupted_line(progress)):
        _launch(c, mode, flags, progress=progress, **args)


@fanout_task(help=HELP, iterable=["override"])
def launch(
    c,
    steps=UNSET,
    framework=None,
    model=None,
    train_file=None,
    val_file=None,
    trainer_gpus=UNSET,
    rollout_gpus=UNSET,
    max_response_length=UNSET,
    features=None,
    offload=False,
    max_oom_retries=UNSET,
    container=None,
    save_freq=UNSET,
    max_prompt_length=UNSET,
    rollout_tp=UNSET,
    gpu_memory_utilization=UNSET_FLOAT,
    train_batch_size=UNSET,
    ppo_mini_batch_size=UNSET,
    rollout_n=UNSET,
    micro_batch_size=UNSET,
    max_position_embeddings=UNSET,
    project=None,
    experiment=None,
    profile=None,
    swanlab_host=None,
    http_proxy=None,
    https_proxy=None,
    hang_timeout=UNSET,
    swanlab_mode="",
    override=None,
    hosts="",
    inventory="",
    dry_run=False,
    skip_preflight=False,
    link_wait=20,
    accept_new_host_keys=False,
    independent=False,
    mode=None,
    resume="",
    json_=False,
):
    """Start DAPO training (the runbook's run_dapo.sh) detached under the OOM-retry supervisor."""
    refuse_job_as_mode(mode, "launch")
    _from_task_args(c, "dapo", dict(locals()))


@fanout_task(name="one-step-off", help=HELP, iterable=["override"])
def one_step_off(
    c,
    steps=UNSET,
    framework=None,
    model=None,
    train_file=None,
    val_file=None,
    trainer_gpus=UNSET,
    rollout_gpus=UNSET,
    max_response_length=UNSET,
    features=None,
    offload=False,
    max_oom_retries=UNSET,
    container=None,
    save_freq=UNSET,
    max_prompt_length=UNSET,
    rollout_tp=UNSET,
    gpu_memory_utilization=UNSET_FLOAT,
    train_batch_size=UNSET,
    ppo_mini_batch_size=UNSET,
    rollout_n=UNSET,
    micro_batch_size=UNSET,
    max_position_embeddings=UNSET,
    project=None,
    experiment=None,
    profile=None,
    swanlab_host=None,
    http_proxy=None,
    https_proxy=None,
    hang_timeout=UNSET,
    swanlab_mode="",
    override=None,
    hosts="",
    inventory="",
    dry_run=False,
    skip_preflight=False,
    link_wait=20,
    accept_new_host_keys=False,
    independent=False,
    mode=None,
    resume="",
    json_=False,
):
    """Start one-step-off-policy training (separate trainer and rollout pools) detached under the supervisor."""
    refuse_job_as_mode(mode, "one-step-off")
    _from_task_args(c, "one-step-off", dict(locals()))
