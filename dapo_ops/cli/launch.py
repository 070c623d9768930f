"""``inv launch`` (DAPO) and ``inv one-step-off``: start verl detached under the retry supervisor.

What the runbook's ``run_dapo.sh`` / ``run_one_step_off_policy.sh`` and its OOM auto-recovery flow do, done on
the host itself. The two tasks are built from ONE parameter list (:data:`SIGNATURE`: every settings flag of the
table, then how to launch) and differ only in the job they fix (``dapo`` | ``one-step-off``). Each parses its flags
into :class:`~dapo_ops.control.launch.request.TaskArgs`, calls :func:`dapo_ops.control.launch.request.build` (every
refusal, the settings, the SwanLab / notifier / proxy secrets) and then the start (one run per host:
:func:`dapo_ops.control.launch.request.start`; one run across the hosts: :mod:`dapo_ops.cli.multihost`), and prints
the run id, host, container, log path, how to follow it and the SwanLab link, or one line and a non-zero exit.
Afterwards it is silent: errors reach the operator through ``status`` / ``watch`` and the notifier.

``--dry-run`` prints the plan and starts nothing: with ``-H`` the launch's own plan, from the facts the launch reads on the
host before starting anything; without ``-H`` no host is contacted (works on a fresh clone without an inventory).
With several ``-H`` hosts: ONE run on a Ray cluster across them (:mod:`dapo_ops.cli.multihost` prints,
:mod:`dapo_ops.control.launch.multihost_service` does it); ``--independent`` gives each host its own single-host run instead.
Every flag's help comes from the settings table (:func:`dapo_ops.control.settings.task_help`) or
:data:`OPTIONS_HELP` (how to launch, not what to train).
"""

from __future__ import annotations

import inspect
import json
import os
import sys
from collections.abc import Mapping
from typing import Any

from dapo_ops.cli._common import (
    EXIT_FAILED,
    EXIT_USAGE,
    UNSET,
    UNSET_BOOL,
    UNSET_FLOAT,
    FanoutTask,
    connect_timeout_override,
    fail,
    refuse_empty_hosts,
    fanout_task,
    given_flags,
    on_interrupt,
    refuse_job_as_mode,
    run_config,
    select_hosts,
)
from dapo_ops.control.launch import request
from dapo_ops.control.launch import plan
from dapo_ops.control import settings
from dapo_ops.control.remote.fanout import HostResult
from dapo_ops.control.launch.service import LaunchProgress
from dapo_ops.control.launch.refusals import LaunchUsageError
from dapo_ops.core import ladder, redact

#: help of the flags that say how to launch (the settings flags' help comes from the settings table)
OPTIONS_HELP = {
    "override": "extra verl override KEY=VALUE, repeatable (appended last; never put secrets here; a key a setting "
    "sets is refused: use the setting, docs/params.md)",
    "dry_run": "print the plan (features, ladder, command, paths) and start nothing; with -H the launch's own plan, "
    "read on the host as the launch reads it (learned start, memory fit, quick checks; exit 1 when the launch would "
    "be refused); without -H no host is contacted (with --resume: the resume's plan, reading the earlier run's spec "
    "on its host)",
    "skip_preflight": "launch even if a quick pre-launch check fails (devices, leftovers, python/verl, model/data, disk, memory fit, "
    "SwanLab reachability; not a stopped container or another active run); printed as skipped (one host; several "
    "hosts skip these checks unprinted)",
    "link_wait": "seconds to wait for the SwanLab run link after the start (0: do not wait)",
    "independent": "with several -H hosts: one separate single-host run per host instead of one multi-host run "
    "on a Ray cluster",
    "resume": "continue an earlier run RUN_ID from its checkpoints: a new run reusing its checkpoint dir, "
    "experiment, SwanLab run, the memory rungs its OOM ladder reached and every setting, feature and --override it "
    "ran with (same host(s), mode, framework and devices); a setting or --override key given now wins",
    "json": "print the started runs as a JSON list (one object per host: run_id, host, state, log, follow) instead "
    "of text; exit codes are the same",
}
HELP = {**settings.task_help(), **OPTIONS_HELP}

#: a settings flag's default when not given, by the table's type (invoke types a flag by its default; a string or
#: features flag left off is None, so one given empty, ``--model ''``, is told apart: the table's EMPTY_RULES judge it;
#: a bool is ``--name`` / ``--no-name``, None when left off)
_NOT_GIVEN: dict[str, Any] = {"int": UNSET, "float": UNSET_FLOAT, "bool": UNSET_BOOL}
#: the flags that say how to launch (not what to train) and their defaults; ``hosts``, ``inventory`` and
#: ``accept_new_host_keys`` are every fan-out task's (:func:`dapo_ops.cli._common.fanout_task`)
OPTIONS: dict[str, Any] = {
    "override": None,
    "hosts": "",
    "inventory": "",
    "dry_run": False,
    "skip_preflight": False,
    "link_wait": 20,
    "accept_new_host_keys": False,
    "independent": False,
    "resume": None,
    "json_": False,
}
#: THE parameters of both launch tasks (``launch`` and ``one-step-off`` are built from it, :func:`_launch_task`):
#: the context, every settings flag of the table (:data:`dapo_ops.control.settings.BY_ARG`, ``--mode`` being verl's
#: trainer mode), then :data:`OPTIONS`. The job is not a flag: each task fixes its own.
SIGNATURE = inspect.Signature(
    [
        inspect.Parameter("c", inspect.Parameter.POSITIONAL_OR_KEYWORD),
        *(
            inspect.Parameter(arg, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=_NOT_GIVEN.get(p.type))
            for arg, p in settings.BY_ARG.items()
        ),
        *(inspect.Parameter(arg, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=d) for arg, d in OPTIONS.items()),
    ]
)


def task_args(job: str, kw: Mapping[str, Any]) -> request.TaskArgs:
    """The request's view of one call of a launch task: ``kw`` holds every parameter of :data:`SIGNATURE` but the
    context; the settings flags given (not at their "not given" default) become ``flags`` by setting name, a string
    flag given empty included; ``--swanlab-mode`` goes to the SwanLab setup (it decides with the key and host), not
    into the settings."""
    raw = {p.name: kw[arg] for arg, p in settings.BY_ARG.items() if arg != "swanlab_mode"}
    flags = given_flags(**raw)
    flags.update({name: "" for name, v in raw.items() if v == ""})
    return request.TaskArgs(
        mode=job,
        flags=flags,
        swanlab_mode=kw["swanlab_mode"] or "",
        overrides=tuple(kw["override"] or ()),
        hosts=kw["hosts"] or "",
        inventory=kw["inventory"] or "",
        dry_run=bool(kw["dry_run"]),
        skip_preflight=bool(kw["skip_preflight"]),
        link_wait=kw["link_wait"],
        independent=bool(kw["independent"]),
        resume=kw["resume"],  # None: not given; the request judges a given one (empty included)
        json=bool(kw["json_"]),
    )


def _dry_run(d: request.DryRun) -> None:
    """Print the plan of ``d`` (the multi-host plan for several hosts unless ``--independent``); with ``--resume``
    the plan of the resume, read from the earlier run's spec on its host (reads only); with ``-H`` the launch's own
    plan, from the facts it reads on the host before starting anything. A plan error is one line, exit 2; what the
    launch would refuse (a failing quick check, no such run, checkpoints it cannot continue, a busy container) or a
    host that cannot be reached: one line, exit 1."""
    from dapo_ops.control.launch import dryrun
    from dapo_ops.control.inventory.hosts_file import InventoryError
    from dapo_ops.control.launch.refusals import LaunchRefused
    from dapo_ops.control.remote.errors import RemoteError

    kw: dict[str, Any] = dict(
        mode=d.mode,
        hosts=d.hosts,
        inventory=d.inventory,
        env=d.env,
        file_cfg=d.file_cfg,
        extra_overrides=d.overrides,
        config=d.config,
        resume_id=d.resume,
    )
    try:
        p = None
        if not d.independent:  # several hosts: the multi-host plan
            from dapo_ops.cli import multihost

            p = multihost.dry_run(d.flags, **kw)
        if p is None:
            dryrun.dry_run(d.flags, **kw, skip_preflight=d.skip_preflight)
    except (settings.SettingsError, plan.PlanError, InventoryError, LaunchUsageError) as e:
        fail(str(e), EXIT_USAGE)
    except (LaunchRefused, RemoteError) as e:
        fail(str(e), EXIT_FAILED)


def follow_commands(h, d: dict) -> list[str]:
    """The commands that follow the run of row data ``d`` launched on inventory host ``h`` (the text's ``follow:``
    line, the JSON's ``follow``): with ``-c`` when the run's container is not the inventory's
    (:func:`dapo_ops.core.ladder.follow_command`)."""
    return [ladder.follow_command(t, h.name, d.get("container"), h.container) for t in ("status", "logs -f")]


def run_json(h, d: dict, secrets_all: list) -> dict:
    """``launch --json``'s object of a started run on host ``h`` (``d``: :func:`dapo_ops.control.launch.service.start_run`'s
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
        "follow": follow_commands(h, d),
        "resume": d.get("resume") or None,
        "swanlab_url": redact.scrub(d["swanlab_url"], secrets_all) if d.get("swanlab_url") else None,
    }


def _print_run(h, d: dict, secrets_all: list) -> None:
    where = f"container {d['container']}" if d.get("container") else "bare host"
    print(f"run {d['run_id']} {d['status']} on {h.name} ({where})")
    print(f"  log:     {d['log']}  (also {h.workdir.rstrip('/')}/train.log)")
    print("  follow:  " + "   |   ".join(follow_commands(h, d)))
    if d.get("resume"):
        print(f"  resume:  {d['resume']}")
    for line in d.get("start") or []:  # the learned start (or why not) and the estimate's start rung
        print(f"  start:   {line}")
    for line in d.get("fit") or []:  # the fastest fit: each chosen value and why (kept / falls back)
        print(f"  fit:     {line}")
    for line in d.get("skipped") or []:  # failing quick checks --skip-preflight let through
        print(f"  skipped: preflight {line} (--skip-preflight)")
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


def _print_results(results: list[HostResult], secrets: list[str], *, json_: bool) -> None:
    """Print the started runs (text, or ``--json``'s list) and end with one line and exit 1 if a host failed."""
    from dapo_ops.control.remote import fanout

    failed = [r for r in results if not r.ok]
    if json_:  # one object per host; a failed host: state "failed", its kind and line (the exit code is the same)
        print(
            json.dumps(
                [
                    run_json(r.host, r.row.data, secrets)
                    if r.ok
                    else {
                        "run_id": r.row.data.get("run_id"),  # a run that failed at once has one (its logs, --resume)
                        "host": r.host.name,
                        "state": "failed",
                        "kind": r.row.kind or None,
                        "error": redact.scrub(r.row.message or r.row.kind, secrets),
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
                msg = redact.scrub(r.row.message or r.row.kind, secrets)
                print(msg if msg.startswith(h.name) else f"{h.name}: {msg}", file=sys.stderr)
            continue
        if not json_:
            _print_run(h, r.row.data, secrets)
    if failed:
        if len(results) == 1:
            msg = redact.scrub(failed[0].row.message or failed[0].row.kind, secrets)
            name = failed[0].host.name
            fail(msg if msg.startswith(name) or msg.startswith("run ") else f"{name}: {msg}", EXIT_FAILED)
        fail(fanout.summary(results), EXIT_FAILED)


def _launch(c, job: str, task_name: str, kw: dict[str, Any]) -> None:
    """The body of both launch tasks (``job`` fixed by the task): parse, build the request, start, print."""
    refuse_job_as_mode(kw["mode"], task_name)
    args = task_args(job, kw)
    refuse_empty_hosts(args.hosts)  # the dry run plans before any host is selected: -H '' is not every host
    progress = LaunchProgress()
    with on_interrupt(lambda: interrupted_line(progress)):
        try:
            got = request.build(
                args,
                os.environ,
                select_hosts=lambda: select_hosts(c, args.hosts, args.inventory),
                progress=progress,
                config=run_config(c),
            )
        except LaunchUsageError as e:
            fail(str(e), EXIT_USAGE)
        if isinstance(got, request.DryRun):
            _dry_run(got)
            return
        start(c, got, accept_new_host_keys=kw["accept_new_host_keys"], json_=args.json)


def start(c, got: request.Launch, *, accept_new_host_keys: bool, json_: bool) -> None:
    """Start the launch ``got`` (:func:`dapo_ops.control.launch.request.build`'s, the launch tasks' and quickstart's)
    and print it: its notes, then ONE run on a Ray cluster across the hosts (:mod:`dapo_ops.cli.multihost`) or one run
    per host (:func:`dapo_ops.control.launch.request.start`, each finishing its host's draft); one line and exit 1
    when a host failed. Call it inside the task's :func:`~dapo_ops.cli._common.on_interrupt` of the launch's
    progress."""
    for n in got.notes:
        print(n, file=sys.stderr)
    if got.cluster:  # ONE run on a Ray cluster across the hosts
        from dapo_ops.cli import multihost

        multihost.launch(
            c,
            got.request,
            got.hosts,
            accept_new_host_keys=accept_new_host_keys,
            secrets_all=got.secrets,
            json_=json_,
            hosts_given=got.hosts_given,
        )
        return
    results = request.start(got, accept_new_host_keys=accept_new_host_keys, connect_timeout=connect_timeout_override(c))
    _print_results(results, got.secrets, json_=json_)


def _launch_task(name: str, job: str, doc: str) -> FanoutTask:
    """A launch task named ``name`` with the parameters :data:`SIGNATURE` and the job ``job`` fixed. The body's
    ``__signature__`` is :data:`SIGNATURE` (invoke reads the flags from it, ``-H`` finds ``hosts`` in it); a direct
    call (quickstart's) gets the defaults of the parameters it leaves out."""

    def body(c, **kw):
        bound = SIGNATURE.bind(c, **kw)
        bound.apply_defaults()
        bound.arguments.pop("c")
        _launch(c, job, name, bound.arguments)

    body.__signature__ = SIGNATURE  # type: ignore[attr-defined]
    body.__name__ = body.__qualname__ = name.replace("-", "_")
    body.__doc__ = doc
    return fanout_task(name=name, help=HELP, iterable=["override"])(body)


launch = _launch_task(
    "launch", "dapo", "Start DAPO training (the runbook's run_dapo.sh) detached under the OOM-retry supervisor."
)
one_step_off = _launch_task(
    "one-step-off",
    "one-step-off",
    "Start one-step-off-policy training (separate trainer and rollout pools) detached under the supervisor.",
)
