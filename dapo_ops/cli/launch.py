"""``inv launch`` (DAPO) and ``inv one-step-off``: start verl detached under the retry supervisor.

What the runbook's ``run_dapo.sh`` / ``run_one_step_off_policy.sh`` and its OOM auto-recovery flow do,
done on the host itself: per host, resolve the settings (flag > env > config file > default,
:mod:`dapo_ops.control.settings`), make the plan (:mod:`dapo_ops.control.planning`), run the quick checks that would make
the launch fail at once (container running, no run already active, the plan fits the host's devices,
``dapo_ops.control.preflight.quick`` when present), copy the stdlib bundle (:mod:`dapo_ops.control.remote_bundle`),
write ``spec.json`` and ``secret.env`` (0600), start ``python3 -m dapo_ops.agent.supervisor <run_dir>`` detached,
wait a few seconds for ``run.json`` to say ``running`` and print the run id, host, container, log path,
how to follow it and the SwanLab link. Afterwards it is silent: errors reach the operator through
``status`` / ``watch`` and the notifier.

``--dry-run`` prints the plan without touching any host (works on a fresh clone without an inventory).
With several ``-H`` hosts: ONE run on a Ray cluster across them (:mod:`dapo_ops.cli.multihost`);
``--independent`` gives each host its own single-host run instead.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
import time

from dapo_ops.agent import notify
from dapo_ops.control import planning
from dapo_ops.control import proxy
from dapo_ops.control import remote_bundle
from dapo_ops.core import runstate
from dapo_ops.control import settings as settings_mod
from dapo_ops.control import swanlab_cfg
from dapo_ops.core import redact
from dapo_ops.control import userconfig
from dapo_ops.control.fanout import Row
from dapo_ops.control.remote import RemoteError
from dapo_ops.cli._common import (
    EXIT_FAILED, EXIT_USAGE, UNSET, UNSET_FLOAT, connect_timeout_override, fail, fanout_task, given_flags,
    run_settings, select_hosts, user_config
)
from dapo_ops.cli.launch_checks import (
    LaunchRefused, _known_secrets, apply_resume, refuse_bad_overrides, refuse_if_busy, refuse_secret_overrides
)

#: seconds to wait for run.json to leave ``starting`` after the detached start
START_WAIT_S = 30.0
#: seconds a run that reached ``running`` is still watched for an immediate failure (config errors)
SETTLE_S = 4.0

HELP = {
    "steps": "training steps, trainer.total_training_steps (env TRAIN_STEPS; default 100)",
    "framework": "megatron | fsdp (env FRAMEWORK; default megatron)",
    "model": "model dir in the container (env MODEL_PATH)",
    "train_file": "training parquet (env TRAIN_FILE)",
    "val_file": "validation parquet (env VAL_FILE)",
    "trainer_gpus": "trainer pool devices (env TRAINER_GPUS; default 4)",
    "rollout_gpus": "rollout pool devices (env ROLLOUT_GPUS; default 4)",
    "max_response_length": "data.max_response_length in tokens (env MAX_RESPONSE_LENGTH; default 8192)",
    "features": "explicit features, comma list; -name turns a default off (env USER_FEATURES)",
    "offload": "start with offload on, an explicit feature (env ENABLE_OFFLOAD)",
    "max_oom_retries": "device-OOM retries of the escalation ladder (env MAX_OOM_RETRIES; default 2)",
    "container": "container name (env CONTAINER; default: the inventory's)",
    "save_freq": "checkpoint every N steps (env SAVE_FREQ; default 10)",
    "hang_timeout": "seconds without a new step before the run counts as hung (env HANG_TIMEOUT; default 1800)",
    "max_prompt_length": "data.max_prompt_length in tokens (env MAX_PROMPT_LENGTH; default 2048)",
    "rollout_tp": "rollout tensor parallel size; must divide the rollout devices (env ROLLOUT_TP; default 2)",
    "gpu_memory_utilization": "rollout (vLLM) share of device memory (env GPU_MEMORY_UTILIZATION; default 0.6)",
    "train_batch_size": "prompts per step, data.train_batch_size (env TRAIN_BATCH_SIZE; default 64)",
    "ppo_mini_batch_size": "prompts per actor update (env PPO_MINI_BATCH_SIZE; default 16)",
    "rollout_n": "responses per prompt, actor_rollout_ref.rollout.n (env ROLLOUT_N; default 8)",
    "micro_batch_size": "*_micro_batch_size_per_gpu when dynamic_batch is off (env MICRO_BATCH_SIZE; default 1)",
    "max_position_embeddings": "override the model's context length in tokens (env MAX_POSITION_EMBEDDINGS)",
    "project": "trainer.project_name, the SwanLab project (env PROJECT_NAME; default dapo-ops)",
    "experiment": "trainer.experiment_name (env EXPERIMENT_NAME; default: the run id)",
    "profile": "verl profile 0.9 | 0.8 (env VERL_PROFILE; default: from the host's verl version)",
    "swanlab_host": "self-hosted SwanLab server URL with scheme (env SWANLAB_HOST); the key only via env/config/prompt",
    "http_proxy": "proxy for the container (env http_proxy; default: hosts.toml [proxy])",
    "https_proxy": "HTTPS proxy for the container (env https_proxy; default: hosts.toml [proxy])",
    "swanlab_mode": "cloud | local | offline | disabled (env SWANLAB_MODE)",
    "mode": "launch: async (default; verl V1 colocate_async, single-async DAPO) | sync (synchronous DAPO) "
            "(env DAPO_MODE); one-step-off always runs separate_async",
    "override": "extra verl override KEY=VALUE, repeatable (appended last; never put secrets here)",
    "dry_run": "print the plan (features, ladder, command, paths) without touching any host",
    "skip_preflight": "skip the quick pre-launch checks (container, active run, devices)",
    "link_wait": "seconds to wait for the SwanLab run link after the start (0: do not wait)",
    "independent": "with several -H hosts: one separate single-host run per host instead of one multi-host run "
                   "on a Ray cluster",
    "resume": "continue an earlier run RUN_ID from its checkpoints: a new run reusing its checkpoint dir, "
              "experiment, SwanLab run and ladder-added features (same host(s), mode, framework and devices)",
}

def _swanlab(swanlab_mode: str, notes: list):
    try:
        return swanlab_cfg.resolve_for_launch(mode_flag=swanlab_mode or None, notes=notes)
    except (swanlab_cfg.SwanlabConfigError, userconfig.UserConfigError) as e:
        fail(str(e), EXIT_USAGE)


def _quick_checks(target, plan, bdir: str, skip_preflight: bool) -> None:
    """The checks that would make the launch fail at once: container running, no active run on the container
    (its lock), and ``dapo_ops.control.preflight.quick`` (devices, leftovers, python/verl, model/data, disk) unless
    ``skip_preflight``. Raises :class:`LaunchRefused` or ``RemoteError`` with one line. Returns the probe's
    facts (empty when skipped), for the memory-fit estimate."""
    host = target.host
    state = target.container_state()  # a bare host (runtime = "host") has no container: always "running"
    if not state.running:
        raise LaunchRefused("container-stopped", f"container '{target.container}' on {host.name} is "
                            f"{state.status}: start it (docker start {target.container}) and launch again")
    refuse_if_busy(target, plan.spec["python"], bdir)
    facts: dict = {}
    if skip_preflight or importlib.util.find_spec("dapo_ops.control.preflight") is None:
        return facts
    quick = getattr(importlib.import_module("dapo_ops.control.preflight"), "quick", None)
    if quick is None:
        return facts
    failed = [ck for ck in quick(target, plan, facts_out=facts) if getattr(ck, "status", "") == "fail"]
    if failed:
        ck = failed[0]
        more = f" (+{len(failed) - 1} more: inv preflight -H {host.name})" if len(failed) > 1 else ""
        raise LaunchRefused("preflight", f"preflight {ck.name} failed on {host.name}: {ck.message}"
                            + (f"; {ck.fix}" if ck.fix else "") + more + " (--skip-preflight to launch anyway)")
    return facts


def _read_run(target, py: str, bdir: str, run_dir: str) -> dict | None:
    res = target.run([py, "-m", "dapo_ops.core.runstate", "show", run_dir], env={"PYTHONPATH": bdir}, workdir="",
                     timeout=30, check=False)
    if res.exited != 0:
        return None
    try:
        return json.loads(res.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None


def _verdict_line(rec: dict) -> str:
    v = rec.get("verdict") or {}
    d = rec.get("decision") or {}
    cls = v.get("cls") or "failed"
    what = v.get("action") or d.get("reason") or "see the log"
    ev = (v.get("evidence") or [""])[0]
    line = f"run {rec.get('run_id')} failed at once: {cls}: {what}"
    if ev and ev not in what:
        line += f" ({ev})"
    return line


def prepare_spec_env(plan, *, sw, notify_cfg: dict, extra_public: dict, extra_secret: dict) -> dict:
    """Fill ``plan.spec``'s ``env`` / ``logger`` / ``notify`` (docs/design.md "SwanLab and secrets": public env in
    the spec, proxy variables from ``extra_public`` only) and return the secret env for ``secret.env``. A resumed
    run (spec ``resume_of``) continues the earlier run's SwanLab run."""
    spec = plan.spec
    public = {k: v for k, v in spec.get("env", {}).items() if k.lower() not in proxy.PROXY_VARS}
    spec["env"] = {**public, **extra_public,
                   **sw.public_env(run_dir=plan.run_dir, run_id=spec.get("resume_of") or spec["run_id"])}
    spec["logger"] = sw.loggers()
    spec["notify"] = notify_cfg
    return {**sw.secret_env(), **extra_secret}


def start_run(target, plan, bdir: str, secret_env: dict, *, sw, link_wait: float, cleanup=None) -> Row:
    """Write ``spec.json`` (+ ``secret.env``, 0600) into ``plan.run_dir``, start the supervisor detached, wait up to
    :data:`START_WAIT_S` for ``running`` and :data:`SETTLE_S` (and ``link_wait`` for the SwanLab link) more.

    Returns a :class:`Row` (``data``: run_id, run_dir, log, swanlab_url, status, container; ``ok=False`` kind
    ``failed`` when the run failed at once). ``cleanup()`` (default: remove the run dir) runs when the start itself
    fails; raises RemoteError with one line.
    """
    host = target.host
    spec = plan.spec
    run_id, py = spec["run_id"], spec["python"]
    target.put_text(json.dumps(spec, indent=1) + "\n", f"{plan.run_dir}/spec.json", mode=0o644)
    try:
        if secret_env:
            target.put_text(swanlab_cfg.env_file_text(secret_env), f"{plan.run_dir}/secret.env", mode=0o600)
        remote_bundle.start_supervisor(target, spec["workdir"], py, bdir, plan.run_dir)
    except Exception:
        if cleanup is not None:
            cleanup()
        else:
            target.run(["rm", "-rf", plan.run_dir], workdir="", check=False, timeout=30)
        raise
    rec = None
    deadline = time.monotonic() + START_WAIT_S
    while time.monotonic() < deadline:
        rec = _read_run(target, py, bdir, plan.run_dir)
        if rec and rec.get("status") not in (None, "starting"):
            break
        time.sleep(0.5)
    if not rec or rec.get("status") in (None, "starting"):
        raise RemoteError("timeout", host.name, f"run {run_id} did not start within {START_WAIT_S:g} s; "
                          f"see {plan.run_dir}/supervisor.log (inv logs -H {host.name} --run {run_id})")
    # watch a little longer: an immediate failure (bad override) and the SwanLab link
    settle_end = time.monotonic() + SETTLE_S
    link_end = time.monotonic() + (link_wait if sw.logger_enabled else 0)
    while rec.get("status") not in runstate.TERMINAL_STATUSES:
        now = time.monotonic()
        if now >= settle_end and (rec.get("swanlab_url") or now >= link_end):
            break
        time.sleep(0.5)
        rec = _read_run(target, py, bdir, plan.run_dir) or rec
    if rec.get("status") == "failed":
        if ((rec.get("verdict") or {}).get("detail") or {}).get("active_run"):
            # lost a launch race to another run (the supervisor's lock): leave no record of the loser
            target.run(["rm", "-rf", plan.run_dir], workdir="", check=False, timeout=30)
        return Row(ok=False, kind="failed", message=_verdict_line(rec), data={"run_id": run_id, "record": rec})
    return Row(cells={"run": run_id, "status": rec.get("status", "")},
               data={"run_id": run_id, "run_dir": plan.run_dir, "log": plan.log_path, "status": rec.get("status"),
                     "swanlab_url": rec.get("swanlab_url"), "container": spec["container"]})


def launch_one(target, *, st, mode: str, sw, notify_cfg: dict, extra_public: dict, extra_secret: dict,
               inv_proxy: dict, extra_overrides: list, skip_preflight: bool, link_wait: float, resume: str = "") -> Row:
    """Launch one run on ``target``: plan, checks, bundle, spec + secrets, detached start, short wait.

    Returns a :class:`Row` (``data``: run_id, run_dir, log, swanlab_url, status). Raises RemoteError /
    PlanError with one line; nothing is left behind when the start itself fails.
    """
    host = target.host
    run_id = runstate.new_run_id()
    plan = planning.make_plan(st, host, mode=mode, run_id=run_id, swanlab_logger=sw.logger_enabled,
                              proxy=inv_proxy, extra_overrides=extra_overrides)
    target.container = plan.spec["container"]
    bdir = remote_bundle.ensure_bundle(target, host.runs_path, plan.spec["python"])
    facts = _quick_checks(target, plan, bdir, skip_preflight)
    from dapo_ops.control.preflight import memory_facts
    mem = memory_facts(host, facts.get("probe"))
    if mem is not None:  # memory fit: start on the first rung that fits (source: estimate); a misfit was refused above
        fitted = planning.make_plan(st, host, mode=mode, run_id=run_id, swanlab_logger=sw.logger_enabled,
                                    proxy=inv_proxy, extra_overrides=extra_overrides, memory=mem)
        if fitted.spec.get("setting_changes"):
            plan.spec.update(features=fitted.spec["features"], setting_changes=fitted.spec["setting_changes"])
            plan.features, plan.argv, plan.ladder, plan.memory = fitted.features, fitted.argv, fitted.ladder, fitted.memory
    resumed = apply_resume(target, plan, resume) if resume else None
    secret_env = prepare_spec_env(plan, sw=sw, notify_cfg=notify_cfg, extra_public=extra_public,
                                  extra_secret=extra_secret)
    row = start_run(target, plan, bdir, secret_env, sw=sw, link_wait=link_wait)
    if row.ok and resumed:
        row.data["resume"] = resumed
    return row


def _launch(c, mode: str, flags: dict, *, hosts: str, inventory: str, dry_run: bool, skip_preflight: bool,
            link_wait: int, swanlab_mode: str, override, accept_new_host_keys: bool,
            independent: bool = False, resume: str = "") -> None:
    from dapo_ops.control import fanout

    resume = (resume or "").strip()
    if resume and not runstate.is_run_id(resume):
        fail(f"--resume takes a run id like 20261129-151200-a1b2 (got {resume!r}); list runs with `inv status --all`",
             EXIT_USAGE)

    extra = [o for o in (override or []) if o]
    file_cfg = user_config()
    refuse_secret_overrides(extra, _known_secrets(file_cfg))
    refuse_bad_overrides(extra)
    if mode == "dapo":
        given = [f"--{k.replace('_', '-')}" for k in ("trainer_gpus", "rollout_gpus") if k in flags]
        if given:
            fail(f"{' and '.join(given)} size the pools of one-step-off; DAPO trains and rolls out on every device "
                 f"of each host (hosts.toml `devices`): use `inv one-step-off {' '.join(g + ' N' for g in given)}`, "
                 f"or drop them", EXIT_USAGE)
    if dry_run:
        from dapo_ops.control import plan as plan_mod
        from dapo_ops.control.inventory import InventoryError

        if swanlab_mode:
            flags = {**flags, "swanlab_mode": swanlab_mode}
        try:
            p = None
            if not independent:  # several hosts: the multi-host plan (tasks/multihost.py)
                from dapo_ops.cli import multihost
                p = multihost.dry_run(flags, mode=mode, hosts=hosts, inventory=inventory, env=os.environ,
                                      file_cfg=file_cfg, extra_overrides=extra)
            if p is None:
                p = plan_mod.dry_run(flags, mode=mode, hosts=hosts, inventory=inventory, env=os.environ,
                                     file_cfg=file_cfg, extra_overrides=extra)
        except (settings_mod.SettingsError, planning.PlanError, InventoryError) as e:
            fail(str(e), EXIT_USAGE)
        return p
    st = run_settings(flags, file_cfg)
    inv, chosen = select_hosts(c, hosts, inventory)
    if resume and (not runstate.is_run_id(resume) or len(chosen) > 1):
        fail(f"--resume {resume!r}: give one run id (YYYYMMDD-HHMMSS-xxxx, from inv status --list) and one -H host",
             EXIT_USAGE)
    notes: list[str] = []
    sw = _swanlab(swanlab_mode, notes)
    try:
        notify_cfg, notify_secret = notify.spec_from_user_config(file_cfg.get("notify"), dict(os.environ))
    except ValueError as e:
        fail(str(e), EXIT_USAGE)
    user_proxy = {**(file_cfg.get("proxy") or {}), **{k: v for k, v in (inv.proxy or {}).items() if v}}
    for k in ("http_proxy", "https_proxy"):  # --http-proxy style settings (flag/env/file) win
        if st.get(k):
            user_proxy[k] = st.get(k)
    penv = proxy.container_proxy_env(user_proxy, os.environ, [h.address for h in chosen])
    proxy_public, proxy_secret = proxy.split_secret(penv)
    secrets_all = list(sw.secrets()) + list(proxy_secret.values()) + list(notify_secret.values())
    refuse_secret_overrides(extra, secrets_all)  # + the proxy credentials known only now
    for n in notes:
        print(redact.scrub(n, secrets_all), file=sys.stderr)
    if len(chosen) > 1 and not independent:  # ONE run on a Ray cluster across the hosts (tasks/multihost.py)
        from dapo_ops.cli import multihost

        return multihost.launch_cluster(
            c, mode, st, inv, chosen, sw=sw, notify_cfg=notify_cfg, extra_public=proxy_public,
            extra_secret={**proxy_secret, **notify_secret}, extra_overrides=extra, skip_preflight=skip_preflight,
            link_wait=float(link_wait), accept_new_host_keys=accept_new_host_keys, secrets_all=secrets_all,
            resume=resume)
    if resume and len(chosen) > 1:
        fail(f"--resume continues one run: pick the host of run {resume} with -H (without --independent)",
             EXIT_USAGE)

    # a plan error is the same on every host kind: check once before contacting anyone
    try:
        planning.make_plan(st, chosen[0], mode=mode, run_id=runstate.new_run_id(), swanlab_logger=sw.logger_enabled,
                           proxy=inv.proxy, extra_overrides=extra)
    except planning.PlanError as e:
        fail(str(e), EXIT_USAGE)

    def one(target):
        try:
            return launch_one(target, st=st, mode=mode, sw=sw, notify_cfg=notify_cfg, extra_public=proxy_public,
                              extra_secret={**proxy_secret, **notify_secret}, inv_proxy=inv.proxy,
                              extra_overrides=extra, skip_preflight=skip_preflight, link_wait=float(link_wait),
                              resume=resume)
        except planning.PlanError as e:
            return Row(ok=False, kind="plan", message=str(e))
        except LaunchRefused as e:
            return Row(ok=False, kind=e.kind, message=str(e))

    results = fanout.run(chosen, one, timeout=START_WAIT_S + SETTLE_S + max(0, link_wait) + 180,
                         accept_new_host_keys=accept_new_host_keys, connect_timeout=connect_timeout_override(c))
    failed = [r for r in results if not r.ok]
    for r in results:
        h = r.host
        if not r.ok:
            if len(results) > 1:
                msg = r.row.message or r.row.kind
                msg = redact.scrub(msg, secrets_all)
                print(msg if msg.startswith(h.name) else f"{h.name}: {msg}", file=sys.stderr)
            continue
        d = r.row.data
        print(f"run {d['run_id']} {d['status']} on {h.name} (" + (f"container {d['container']}" if d['container'] else "bare host") + ")")
        print(f"  log:     {d['log']}  (also {h.workdir.rstrip('/')}/train.log)")
        print(f"  follow:  inv status -H {h.name}   |   inv logs -f -H {h.name}")
        if d.get("resume"):
            print(f"  resume:  {d['resume']}")
        if d.get("swanlab_url"):
            print(f"  swanlab: {redact.scrub(d['swanlab_url'], secrets_all)}")
    if failed:
        if len(results) == 1:
            msg = redact.scrub(failed[0].row.message or failed[0].row.kind, secrets_all)
            h = failed[0].host.name
            fail(msg if msg.startswith(h) or msg.startswith("run ") else f"{h}: {msg}", EXIT_FAILED)
        fail(fanout.summary(results), EXIT_FAILED)


#: the task parameters that are run settings (dapo_ops.control.settings), as opposed to how to launch
SETTINGS_FLAGS = ("steps", "framework", "model", "train_file", "val_file", "trainer_gpus", "rollout_gpus",
                  "max_response_length", "max_prompt_length", "features", "offload", "max_oom_retries", "container",
                  "save_freq", "rollout_tp", "gpu_memory_utilization", "train_batch_size", "ppo_mini_batch_size",
                  "rollout_n", "micro_batch_size", "max_position_embeddings", "hang_timeout", "project", "experiment",
                  "profile", "swanlab_host", "http_proxy", "https_proxy")


def _from_task_args(c, mode: str, args: dict) -> None:
    """Body shared by ``launch`` and ``one-step-off``: split the task's arguments into settings flags (only those
    given) and launch options, then :func:`_launch`."""
    args.pop("c", None)
    flags = given_flags(**{k: args.pop(k) for k in SETTINGS_FLAGS}, trainer_mode=args.pop("mode"))
    if flags.get("swanlab_host"):  # the SwanLab setup reads it with the key and mode (swanlab_cfg), in-process only
        try:  # a bad value is reported as the flag's, not as "(from env)"
            swanlab_cfg.normalize_host(flags["swanlab_host"], "--swanlab-host")
        except swanlab_cfg.SwanlabConfigError as e:
            fail(str(e), EXIT_USAGE)
        os.environ["SWANLAB_HOST"] = flags["swanlab_host"]
    _launch(c, mode, flags, **args)


@fanout_task(help=HELP, iterable=["override"], auto_shortflags=False)
def launch(c, steps=UNSET, framework="", model="", train_file="", val_file="", trainer_gpus=UNSET, rollout_gpus=UNSET,
           max_response_length=UNSET, features="", offload=False, max_oom_retries=UNSET, container="", save_freq=UNSET,
           max_prompt_length=UNSET, rollout_tp=UNSET, gpu_memory_utilization=UNSET_FLOAT, train_batch_size=UNSET,
           ppo_mini_batch_size=UNSET, rollout_n=UNSET, micro_batch_size=UNSET, max_position_embeddings=UNSET,
           project="", experiment="", profile="", swanlab_host="", http_proxy="", https_proxy="",
           hang_timeout=UNSET, swanlab_mode="", override=None, hosts="", inventory="", dry_run=False,
           skip_preflight=False, link_wait=20, accept_new_host_keys=False,
           independent=False, mode="", resume=""):
    """Start DAPO training (the runbook's run_dapo.sh) detached under the OOM-retry supervisor."""
    _from_task_args(c, "dapo", dict(locals()))


@fanout_task(name="one-step-off", help=HELP, iterable=["override"], auto_shortflags=False)
def one_step_off(c, steps=UNSET, framework="", model="", train_file="", val_file="", trainer_gpus=UNSET, rollout_gpus=UNSET,
                 max_response_length=UNSET, features="", offload=False, max_oom_retries=UNSET, container="", save_freq=UNSET,
                 max_prompt_length=UNSET, rollout_tp=UNSET, gpu_memory_utilization=UNSET_FLOAT,
                 train_batch_size=UNSET, ppo_mini_batch_size=UNSET, rollout_n=UNSET, micro_batch_size=UNSET,
                 max_position_embeddings=UNSET, project="", experiment="", profile="", swanlab_host="", http_proxy="",
                 https_proxy="",
                 hang_timeout=UNSET, swanlab_mode="", override=None, hosts="", inventory="", dry_run=False,
                 skip_preflight=False, link_wait=20, accept_new_host_keys=False,
                 independent=False, mode="", resume=""):
    """Start one-step-off-policy training (separate trainer and rollout pools) detached under the supervisor."""
    _from_task_args(c, "one-step-off", dict(locals()))
