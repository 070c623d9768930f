"""Render a launch :class:`~dapo_ops.control.launch.plan.Plan` (``inv launch --dry-run``), secrets redacted.

Shows the resolved features with their sources (and the user's ``-name`` choices), the escalation
ladder that would follow, the exact command line, the checkpoint dir and the log path, plus the
settings that did not come from defaults. :func:`dry_run` is the whole ``--dry-run`` path for a
task: resolve settings, read the inventory if there is one (nothing is contacted), plan, render.
"""

from __future__ import annotations

import dataclasses
import io
import os
from typing import TYPE_CHECKING, Mapping

from rich.console import Console
from rich.table import Table
from rich.text import Text

from dapo_ops.core import features
from dapo_ops.core import ladder
from dapo_ops.control.launch.plan import Plan, PlanInputs, draft_plan, make_plan, trainer_note

if TYPE_CHECKING:
    from dapo_ops.control.userconfig import RunConfig
from dapo_ops.control.preflight.inputs import NO_CHECKPOINTS, checkpoint_saves
from dapo_ops.core.redact import redact_env
from dapo_ops.core.fastfit import LINE_PREFIX


def _features_table(plan: Plan) -> Table:
    t = Table(title="features", show_edge=False, title_justify="left")
    t.add_column("feature")
    t.add_column("kind")
    t.add_column("state")
    t.add_column("source")
    fit = {c["name"]: c for c in (plan.spec.get("fit") or {}).get("choices") or []}  # the fastest fit, applied
    proposed = {ln[len(LINE_PREFIX) :].split(" ", 1)[0] for ln in plan.memory if ln.startswith(LINE_PREFIX)}
    by_user = _overridden_features(plan)
    for name, (kind, help_) in features.CATALOG.items():
        src = plan.features.source_of(name)
        if name in fit:  # e.g. gradient checkpointing off: the update fits without it
            state, src = str(fit[name]["value"]), f"fit: {fit[name]['why']}"
        elif src is not None:
            state = "on"
            if name in proposed:  # a dry run: the fit's line says what the launch would choose on the real device
                src += " (inv launch's fit may change it: fit: line below)"
        elif kind == "verl-default" and name not in plan.features.disabled:
            state, src = "on", "verl's default (-%s turns it off)" % name
        elif name in plan.features.disabled:
            by = [n for n, deps in features.IMPLIED_OFF.items() if name in deps and n in plan.features.disabled]
            state, src = "off", (f"-{by[0]} implies it" if by else "explicit (-%s)" % name)
        else:
            state, src = "off", "default" if kind != "memory" else "ladder may add"
        if name in by_user:  # the user's --override of the feature's own key decides what verl runs
            src += f" (your --override {by_user[name]} decides)"
        t.add_row(name, kind, state, src)
    return t


def _overridden_features(plan: Plan) -> dict[str, str]:
    """``{feature: the user's --override that sets one of its keys}`` (``enable_gradient_checkpointing=False``,
    ``...fsdp_config.param_offload=True``): it is appended last, so verl runs it whatever the table says (a new-user
    trial: the table showed gradient checkpointing on and offload "ladder may add" while the override decided).
    A feature's keys: :func:`dapo_ops.core.memladder.feature_keys`, the one place they are worked out (the OOM
    ladder's "set by the user" skip and the memory-fit estimate read it too)."""
    from dapo_ops.core import memladder
    from dapo_ops.core.hydra_override import last_by_key
    from dapo_ops.core.runspec import effective_settings

    spec, fs = plan.run_spec, plan.features
    s = effective_settings(spec, dict(spec.setting_changes) or None)
    user = last_by_key(s["extra_overrides"] or ())
    if not user:
        return {}
    s.update(framework=spec.framework, profile=spec.profile, accelerator=spec.accelerator)
    out: dict[str, str] = {}
    for name in features.CATALOG:
        keys = memladder.feature_keys(fs.names(), name, fs.disabled, s)
        hit = [o for k, o in user.items() if k in keys]
        if hit:
            o = hit[-1]
            out[name] = o.head + ("" if o.value is None else f"={o.value}")
    return out


def render(plan: Plan, console: Console | None = None) -> None:
    """Print the plan to ``console`` (default: stdout's, laid out by the one width rule,
    :func:`dapo_ops.control.remote.fanout.output_width`)."""
    from dapo_ops.control.remote import fanout

    con = console or fanout.console()
    spec = plan.run_spec
    s = spec.settings
    nodes = int(s["nnodes"])
    if spec.mode == "one-step-off" and s.get("rollout_nnodes"):  # pools on separate hosts: both count
        nodes += int(s["rollout_nnodes"])
    ctr = f"container {spec.container}" if spec.container else "host shell, no container"
    where = f"{spec.host} ({ctr})" if nodes == 1 else f"a {nodes}-node Ray cluster, head {spec.host} ({ctr})"
    con.print(
        Text(
            f"dry run: {spec.mode} on {where}, {spec.framework}, verl profile {spec.profile}, {spec.accelerator}",
            style="bold",
        )
    )
    con.print(f"run id:        {spec.run_id}")
    con.print(Text(trainer_note(plan.spec)))
    per_node = "" if nodes == 1 else f" per node x {nodes} nodes"
    con.print(
        f"steps:         {s['steps']}   max response {s['max_response_length']}   "
        + (
            f"trainer pool {s['trainer_gpus']} + rollout pool {s['rollout_gpus']} devices"
            if spec.mode == "one-step-off"
            else f"{s['n_gpus_per_node']} devices{per_node} (colocated)"
        )
    )
    con.print(_features_table(plan))
    limit = ladder.oom_limit_words(spec.max_oom_retries, {"max_oom_retries_from": spec.max_oom_retries_from})
    con.print(Text("escalation ladder (%s):" % limit, style="bold"))
    for line in plan.ladder:
        con.print(Text("  " + line))
    for line in plan.memory:
        con.print(Text(line))
    con.print(Text("command (run in the container):", style="bold"))
    con.print(Text(plan.command), soft_wrap=True)
    env = redact_env(spec.env)
    if env:
        con.print(Text("environment: " + " ".join(f"{k}={v}" for k, v in sorted(env.items()))))
    s = spec.settings
    if checkpoint_saves(int(s["steps"]), int(s["save_freq"])):
        con.print(f"checkpoints:   {plan.ckpt_dir} (every {s['save_freq']} steps and the last)")
    else:
        con.print(f"checkpoints:   none (save_freq {s['save_freq']}: {NO_CHECKPOINTS})")
    con.print(f"log:           {plan.log_path}")
    if plan.resume_line:  # --resume: the earlier run's checkpoints, names and ladder this plan continues
        con.print(Text(f"resume:        {plan.resume_line}"))
    given = [(k, v) for k, v in plan.sources.items() if v != "default"]
    if given:
        con.print("settings from: " + ", ".join(f"{k}={v}" for k, v in given))
    for n in plan.notes:
        con.print(Text("note: " + n))


def render_text(plan: Plan, width: int = 160) -> str:
    """The rendered plan as plain text (no colours), e.g. for tests and logs."""
    buf = io.StringIO()
    render(plan, Console(file=buf, width=width, color_system=None, force_terminal=False, highlight=False))
    return buf.getvalue()


def _swanlab(settings, env: Mapping[str, str], file_cfg: Mapping | None):
    """SwanLab's settings as a launch resolves them, without prompting
    (:func:`dapo_ops.control.swanlab_settings.resolve`). :raises SwanlabConfigError: as the launch would."""
    from dapo_ops.control import swanlab_settings

    return swanlab_settings.resolve(
        env, (file_cfg or {}).get("swanlab") or {}, mode_flag=settings.get("swanlab_mode") or None, stdin_isatty=False
    )


def swanlab_status(settings, env: Mapping[str, str], file_cfg: Mapping | None) -> tuple[bool, str]:
    """``(logger_enabled, note)`` by the rule a real launch applies
    (:meth:`dapo_ops.control.swanlab_settings.SwanlabSettings.logger_enabled`), resolved without prompting; the note (one
    line) says what the launch would do about SwanLab, e.g. that cloud mode (the default) needs a key it does
    not have (counted as "no swanlab" here; the launch itself refuses in one line)."""
    from dapo_ops.control import swanlab_values

    try:
        sw = _swanlab(settings, env, file_cfg)
    except swanlab_values.SwanlabConfigError as e:
        return False, f"SwanLab: a launch would stop here: {e}"
    if sw.logger_enabled:
        return True, f"SwanLab: mode {sw.mode}" + (f", server {sw.host}" if sw.host else "")
    return False, f"SwanLab: off (mode {sw.mode})"


def _local_memory_facts(st, host) -> dict | None:
    """``{"model_config": ...}`` when the model dir is readable on this machine (an absolute ``--model`` path or
    the host's ``model_dir``); the device memory is only known in preflight (``nvidia-smi`` / ``npu-smi``)."""
    import json

    model = str(st["model"])  # resolved settings: every setting is there
    base = getattr(host, "model_dir", "") or ""
    path = model if model.startswith("/") else os.path.join(base, model) if base else model
    try:
        with open(os.path.join(path, "config.json"), encoding="utf-8") as fh:
            return {"model_config": json.load(fh), "device_gib": None}
    except (OSError, ValueError):
        return None


def local_data_note(plan: Plan) -> str | None:
    """The data-feed line of the plan when every train file is a parquet readable on this machine
    (rows from its footer, :func:`dapo_ops.agent.parquet.parquet_schema`): ``data:    8 rows // batch 8 = 1
    step(s)/epoch x 30 epochs = 30 steps < --steps 40: ...`` (:class:`dapo_ops.core.datafeed.DataFeed`); None
    when a file is not here (``inv preflight`` reads it on the host: check data-feed)."""
    from dapo_ops.agent.parquet import parquet_schema
    from dapo_ops.core import datafeed

    s = plan.run_spec.settings
    files = s.get("train_file")
    names = [str(f) for f in (files if isinstance(files, (list, tuple)) else [files]) if f]
    rows = 0
    for f in names:
        if not f.endswith(".parquet") or not os.path.isfile(f):
            return None
        try:
            rows += parquet_schema(f)[0]
        except (OSError, ValueError, IndexError):
            return None
    if not names:
        return None
    extra = list(s.get("extra_overrides") or [])
    feed = datafeed.DataFeed(
        rows, int(s["train_batch_size"]), datafeed.total_epochs(extra), datafeed.filters_overlong(extra)
    )
    short = feed.shortfall(int(s["steps"]))
    return "data:    " + (short or "%s >= --steps %d" % (feed.figure(), int(s["steps"])))


def check_resume_logging(facts, settings, env: Mapping[str, str], file_cfg: Mapping | None) -> None:
    """The SwanLab refusal of a resume for a dry run, single- or multi-host: the mode the launch would log in
    (:func:`_swanlab`, resolved as the launch resolves it) against the earlier run's, by the one check the launch
    applies (:func:`dapo_ops.control.launch.resume.check_logging`, from ``service.build_plan``). A SwanLab setup the
    launch would refuse is the dry run's SwanLab note already (:func:`swanlab_status`), not checked here.

    :raises LaunchRefused: kind ``resume``, one line."""
    from dapo_ops.control import swanlab_values
    from dapo_ops.control.launch import resume

    try:
        sw = _swanlab(settings, env, file_cfg)
    except swanlab_values.SwanlabConfigError:
        return
    resume.check_logging_with(facts, sw)


def resume_facts(run_id: str, host, settings):
    """The run ``--resume`` continues, read on ``host`` (in the container the launch would target:
    :func:`dapo_ops.control.launch.plan.container_for`) for a ``--dry-run`` of the resume: the dry run shows the plan
    the resume runs (the earlier run's settings, overrides, features, checkpoint dir and experiment), so it reads that
    run's spec.json, run.json and checkpoint step (:func:`dapo_ops.control.launch.resume.read_facts`; reads only),
    then asks whether the container is busy as the launch does (:func:`dapo_ops.control.launch.service.refuse_if_busy`,
    without its sweep): a run still active there is refused in the launch's words, not planned (a review).

    :raises LaunchRefused: kind ``resume``: no inventory host to read it on (``host`` None), no such run; kind
        ``active-run``: the container is busy (the run itself still active, another run, verl left over).
    :raises dapo_ops.control.remote.errors.RemoteError: the host cannot be reached."""
    from dapo_ops.control.launch import resume, service
    from dapo_ops.control.launch.plan import container_for
    from dapo_ops.control.launch.refusals import LaunchRefused
    from dapo_ops.control.remote.target import Target

    if host is None:
        raise LaunchRefused(
            "resume",
            f"--dry-run --resume {run_id} shows the plan of the resume, read from run {run_id}'s spec on its host: "
            "give its host with -H (an inventory host, hosts.toml)",
        )
    with Target(host, container_for(settings, host)) as t:
        facts = resume.read_facts(t, run_id)
        service.refuse_if_busy(t, host.python, sweep=False)
        return facts


def host_plan(
    st,
    host,
    inv,
    chosen: list,
    *,
    mode: str,
    env: Mapping[str, str],
    file_cfg: Mapping,
    extra,
    resume_id: str,
    skip_preflight: bool,
    swanlab_mode: str | None = None,
) -> tuple[Plan, list[str]]:
    """The launch's own plan on ``host`` (``--dry-run -H``) and the notes that go with it: the request the launch
    makes of the same settings, without asking anything (:func:`dapo_ops.control.launch.request.preflight_request`),
    and the facts the launch reads before it starts anything (:func:`dapo_ops.control.launch.service.gather_facts`,
    ``sweep=False``: the container's state, a busy container, ``--resume``'s earlier run, the quick checks' probe
    with the device memory, config.json and learned-start memos, the data feed, the memory fit), finished into the
    plan the launch would start (:func:`~dapo_ops.control.launch.service.build_plan`: the learned start, the fastest
    fit, the estimate's start rung). No process of the run is started, no file of the run is written.

    :raises LaunchRefused: what the launch would refuse (one line, its own); :raises PlanError: as the launch;
        :raises LaunchUsageError: a bad ``[notify]`` or proxy; :raises RemoteError: the host cannot be reached."""
    from dapo_ops.control.launch import request, service
    from dapo_ops.control.launch.plan import container_for
    from dapo_ops.control.remote.target import Target

    req, sw_err = request.preflight_request(
        mode, st, list(extra), file_cfg, env, inv, chosen, swanlab_mode=swanlab_mode or ""
    )
    req = dataclasses.replace(req, resume=resume_id, skip_preflight=skip_preflight)
    with Target(host, container_for(st, host)) as t:
        facts = service.gather_facts(t, req, sweep=False)
    plan = facts.plan or service.build_plan(facts, req)
    notes = [f"skipped: preflight {s} (--skip-preflight: the launch goes ahead)" for s in facts.skipped]
    return plan, [*notes, still_checks(host.name, sw_err)]


def still_checks(host: str, sw_err: str = "") -> str:
    """The note of a ``--dry-run -H``: what the launch checks that the dry run cannot (``sw_err``: the SwanLab
    key's problem the launch asks about or refuses, "" = none)."""
    return (
        f"the launch will still check: that no run took the container on {host} since (its occupancy check and the "
        "start's lock)"
        + (f"; the SwanLab key ({sw_err})" if sw_err else "")
        + "; verl's own start-up (the launch waits for the run to leave 'starting')"
    )


def not_checked_note(why: str, how: str) -> str:
    """The note of a dry run that contacted no host: what it could not know (``why``: which dry run; ``how``: the
    command that reads them, starting nothing)."""
    return (
        f"not checked here ({why}): the container, devices, python/verl, the model and data files, the data feed, "
        f"disk and the memory fit, and the plan's learned start, fastest fit and start rung (no device facts): {how}"
    )


#: the note of a dry run that contacted no host (no ``-H``)
NO_HOST_NOTE = not_checked_note(
    "no -H host", "`inv launch --dry-run -H <host> ...` reads them as the launch does, starting nothing"
)


def _no_host_plan(
    st, host, proxy, *, mode: str, run_id: str | None, sw_on: bool, extra, resume_id: str, env, file_cfg
) -> Plan:
    """The plan of a dry run that contacts no host (no ``-H``): made without device facts (the model's config.json
    only when it is readable here); ``--resume``'s earlier run read on ``host`` (:func:`resume_facts`) and refused
    as the launch would."""
    from dapo_ops.control.launch import resume
    from dapo_ops.core import runstate

    facts = resume_facts(resume_id, host, st) if resume_id else None
    st, extra = resume.resumed(st, extra, facts)
    inputs = PlanInputs(
        settings=st,
        host=host,
        mode=mode,
        run_id=run_id or runstate.new_run_id(),
        swanlab_logger=sw_on,
        proxy=proxy,
        extra_overrides=extra,
        resume=facts,
    )
    plan = make_plan(draft_plan(inputs), _local_memory_facts(st, host))
    if facts is not None:  # the refusals of the launch (control/launch/service.py build_plan)
        resume.check(plan, facts)
        check_resume_logging(facts, st, env, file_cfg)
    return plan


def dry_run(
    flags: Mapping,
    *,
    mode: str,
    hosts: str = "",
    inventory: str = "",
    env: Mapping[str, str] | None = None,
    file_cfg: Mapping | None = None,
    console: Console | None = None,
    run_id: str | None = None,
    extra_overrides: list[str] | None = None,
    config: RunConfig | None = None,
    resume_id: str = "",
    skip_preflight: bool = False,
) -> Plan:
    """Resolve settings (flag > env > file > default), pick the first ``-H`` host if an inventory
    exists (no host is contacted; without an inventory the defaults are used), make and print the plan.
    ``config``: the program run's :class:`~dapo_ops.control.userconfig.RunConfig`, which resolved the launch's
    settings already (None: one over ``env`` and ``file_cfg``, the config file's tables). ``resume_id``: the run id
    ``--resume`` continues: its spec is read on the host (:func:`resume_facts`, reads only) and the plan is the
    resume's (its settings, overrides, features, checkpoint dir, experiment), refused as the launch would refuse it.
    With ``hosts`` (``-H``) and a single-host plan the plan is the launch's own on the first of them
    (:func:`host_plan`: the facts the launch reads before starting anything, its quick checks and refusals;
    ``skip_preflight`` as ``--skip-preflight``); without, no host is contacted and a note says what was not known.

    Raises :class:`dapo_ops.control.settings.SettingsError`, :class:`dapo_ops.control.launch.plan.PlanError` or
    :class:`dapo_ops.control.inventory.hosts_file.InventoryError` (all one line) for a task to turn into ``Exit``;
    with ``resume_id`` also :class:`~dapo_ops.control.launch.refusals.LaunchRefused` and
    :class:`~dapo_ops.control.remote.errors.RemoteError` (one line).
    """
    from dapo_ops.control.inventory import hosts_file
    from dapo_ops.control import userconfig

    env = os.environ if env is None else env
    config = userconfig.RunConfig(env, file_cfg or {}) if config is None else config
    st = config.settings(flags, env)
    file_cfg = config.file()
    host = inv = None
    proxy = None
    chosen: list = []
    path = hosts_file.resolve_path(inventory or None)
    if inventory or path.exists():
        inv = hosts_file.load(inventory or None)
        proxy = inv.proxy
        chosen = hosts_file.select(inv, hosts or None)
        host = chosen[0] if chosen else None
    sw_on, sw_note = swanlab_status(st, env, file_cfg)
    if host is not None and (hosts or "").strip():  # -H: the launch's own plan, from the facts it reads
        plan, notes = host_plan(
            st, host, inv, chosen, mode=mode, env=env, file_cfg=file_cfg, extra=extra_overrides or (),
            resume_id=resume_id, skip_preflight=skip_preflight, swanlab_mode=st["swanlab_mode"],
        )  # fmt: skip
        notes.insert(0, sw_note)
    else:
        plan = _no_host_plan(st, host, proxy, mode=mode, run_id=run_id, sw_on=sw_on, extra=extra_overrides or (),
                             resume_id=resume_id, env=env, file_cfg=file_cfg)  # fmt: skip
        notes = [sw_note, NO_HOST_NOTE]
    data_note = local_data_note(plan)
    if data_note:
        notes.append(data_note)
    if host is not None and len(chosen) > 1:  # --independent: one run per host
        shape = lambda h: (h.accelerator, int(h.devices), h.container, h.workdir, h.runs_path)  # noqa: E731
        other = [h.name for h in chosen[1:] if shape(h) != shape(host)]
        notes.append(
            f"independent runs on {', '.join(h.name for h in chosen)} (one run per host, own run id): "
            f"this plan is {host.name}'s"
            + (
                f"; {', '.join(other)} differ in accelerator, devices, "
                f"container or paths: see `inv launch --dry-run -H <host>`"
                if other
                else ", the others are the same"
            )
        )
    plan = dataclasses.replace(plan, notes=[*plan.notes, *notes])
    render(plan, console)
    return plan
