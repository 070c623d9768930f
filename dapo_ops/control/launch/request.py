"""The launch request: what ``inv launch`` / ``inv one-step-off`` were given, checked and resolved into a
:class:`~dapo_ops.control.launch.service.LaunchRequest` (or what ``--dry-run`` shows), or ONE usage error; and the start of
the single-host runs across the hosts.

:func:`build` is the one function the launch tasks call (:mod:`dapo_ops.cli.launch` parses the flags into
:class:`TaskArgs`, prints and exits). Its order is the order of the refusals: first what needs no host
(``--swanlab-host``, ``--link-wait``, ``--resume``, the user config file, each ``--override``, pool sizes outside
one-step-off, the run settings, ``--json`` with ``--dry-run``); then the hosts are selected (the task's own
selection, passed in: it knows the program's core flags); then the SwanLab settings (which may ask on a terminal),
the notifier and the container's proxy. Every secret dapo-ops knows is looked for in the overrides and the run
settings exactly once, as soon as it is known: the ones the operator's environment and config file name before any
host is selected (so a refusal never waits for a host or a question), the ones the inventory's ``[proxy]`` and the
SwanLab question add afterwards.

The operator's environment is a mapping passed in and never written: ``--swanlab-host`` reaches the SwanLab setup
and the dry-run plan as the ``SWANLAB_HOST`` of a copy (it used to be written into ``os.environ``).

Never prints or exits: returns :class:`DryRun` or :class:`Launch`, raises :class:`LaunchUsageError` (one line);
:func:`start` returns one :class:`~dapo_ops.control.remote.fanout.HostResult` per host.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dapo_ops.agent import notify
from dapo_ops.control.remote import fanout
from dapo_ops.control.launch import service
from dapo_ops.control.launch import plan
from dapo_ops.control.inventory import proxy
from dapo_ops.control import settings
from dapo_ops.control import swanlab_settings
from dapo_ops.control import swanlab_values
from dapo_ops.control import userconfig
from dapo_ops.control.remote.fanout import HostResult, Row
from dapo_ops.control.inventory.hosts_file import Inventory
from dapo_ops.control.inventory.model import Host
from dapo_ops.control.launch.service import LaunchProgress, LaunchRequest
from dapo_ops.control.launch.refusals import LaunchRefused
from dapo_ops.control.launch.refusals import LaunchUsageError
from dapo_ops.control.remote.target import Target
from dapo_ops.core import redact
from dapo_ops.core import runstate

#: seconds a host's launch may take besides waiting for its run to start (:data:`~dapo_ops.control.launch.service.START_WAIT_S`,
#: :data:`~dapo_ops.control.launch.service.SETTLE_S`) and for the SwanLab link (``--link-wait``): the bundle install, the
#: quick checks, the memory fit and the spec writes over SSH
HOST_WORK_S = 180.0


@dataclass(frozen=True)
class TaskArgs:
    """The launch tasks' arguments as parsed (:data:`dapo_ops.cli.launch.SIGNATURE`).

    ``mode``: the job, fixed by the task: ``dapo`` (``inv launch``) | ``one-step-off`` (``inv one-step-off``).
    ``flags``: the settings flags given, by setting name (:data:`dapo_ops.control.settings.BY_ARG`; ``""`` = given
    empty, which the settings table's ``EMPTY_RULES`` judge). ``swanlab_mode``: ``--swanlab-mode`` ("" = not given;
    the SwanLab setup decides with the key and host, it is not a run setting). ``link_wait``: seconds (>= 0).
    ``resume``: a run id to continue (None = a new run; given, empty included, it must be a run id). The rest as the flags of the same names.
    """

    mode: str
    flags: Mapping[str, Any] = field(default_factory=dict)
    swanlab_mode: str = ""
    overrides: tuple[str, ...] = ()
    hosts: str = ""
    inventory: str = ""
    dry_run: bool = False
    skip_preflight: bool = False
    link_wait: int = 20
    independent: bool = False
    resume: str | None = None
    json: bool = False


@dataclass(frozen=True)
class DryRun:
    """What ``--dry-run`` renders (:func:`dapo_ops.control.launch.dryrun.dry_run`, or the multi-host plan of several hosts
    unless ``independent``): nothing is asked; with ``-H`` (a single-host plan) the host is read as the launch reads it
    before starting anything (:func:`dapo_ops.control.launch.dryrun.host_plan`; ``skip_preflight`` as the launch's),
    else no host is contacted. ``flags`` include ``swanlab_mode`` when
    given; ``env`` is the operator's environment as the plan must see it (``--swanlab-host`` as ``SWANLAB_HOST``);
    ``resume``: the run id the launch would continue ("" = none). ``config``: the program run's
    :class:`~dapo_ops.control.userconfig.RunConfig` (the plan takes the settings it resolved, not a second copy)."""

    mode: str
    flags: dict[str, Any]
    hosts: str
    inventory: str
    env: Mapping[str, str]
    file_cfg: dict[str, Any]
    config: userconfig.RunConfig
    overrides: list[str]
    independent: bool
    resume: str
    skip_preflight: bool = False


@dataclass(frozen=True)
class Launch:
    """A launch to start: the request, the selected hosts (head first), ``cluster`` (True: ONE run on a Ray cluster
    across them, :func:`dapo_ops.control.launch.multihost_service.launch_cluster`; False: one run per host, :func:`start`),
    ``hosts_given`` (False when no ``-H`` chose them: every host of the inventory), ``secrets`` (every secret value
    known, to redact whatever is printed) and ``notes`` (redacted lines for the operator, e.g. a config file others
    can read)."""

    request: LaunchRequest
    hosts: list[Host]
    inventory: Inventory
    cluster: bool
    hosts_given: bool
    secrets: list[str]
    notes: list[str]

    @property
    def timeout_s(self) -> float:
        """Seconds the start of every host may take in all (:func:`start`): the run's start and settle time, the
        SwanLab link wait and :data:`HOST_WORK_S`."""
        return service.START_WAIT_S + service.SETTLE_S + max(0.0, self.request.link_wait) + HOST_WORK_S


def build(
    args: TaskArgs,
    env: Mapping[str, str],
    *,
    select_hosts: Callable[[], tuple[Inventory, list[Host]]],
    progress: LaunchProgress | None = None,
    stdin_isatty: bool | None = None,
    config: userconfig.RunConfig | None = None,
) -> DryRun | Launch:
    """Check the launch tasks' arguments and resolve them into what to do: :class:`DryRun` for ``--dry-run``,
    else :class:`Launch` (the refusals and their order: module docstring).

    :param env: the operator's environment (read only; ``os.environ`` from the task).
    :param select_hosts: the task's host selection (``-H``, ``--inventory``, the program's core flags), called once,
        for a launch only, after every check that needs no host; whatever it raises propagates.
    :param progress: what the task's Ctrl-C line reads (:class:`~dapo_ops.control.launch.service.LaunchProgress`): its
        ``hosts`` are set here; a new one when None.
    :param stdin_isatty: whether the SwanLab setup may ask for a missing key (None: whether stdin is a terminal).
    :param config: the program run's user config and settings (:class:`~dapo_ops.control.userconfig.RunConfig`, read
        and resolved once per program run: ``dapo_ops.cli._common.run_config``); None: a new one over ``env``.
    :raises LaunchUsageError: one line saying what is wrong and how to fix it; nothing was contacted or started.
    """
    config = userconfig.RunConfig(env) if config is None else config
    env = dict(env)
    flags = dict(args.flags)
    if flags.get("swanlab_host"):  # named as the flag's in an error, not as "(from env)"
        try:
            swanlab_values.normalize_host(flags["swanlab_host"], "--swanlab-host")
        except swanlab_values.SwanlabConfigError as e:
            raise LaunchUsageError(str(e)) from None
        env["SWANLAB_HOST"] = flags["swanlab_host"]  # the SwanLab setup reads it with the key and mode
    if args.link_wait < 0:
        raise LaunchUsageError(
            f"--link-wait={args.link_wait} is negative; give the seconds to wait for the SwanLab link (0: do not wait)"
        )
    if args.resume is not None and not runstate.is_run_id(args.resume):  # given empty ("$RUN" unset) is refused too
        raise LaunchUsageError(
            f"--resume takes a run id like 20261129-151200-a1b2 (got {args.resume!r}); list runs with `inv status --all`"
        )
    resume = args.resume or ""
    extra = list(args.overrides)  # an empty one too: runspec refuses it (a "$VAR" unset must not pass silently)
    try:
        file_cfg = config.file()
    except userconfig.UserConfigError as e:
        raise LaunchUsageError(str(e)) from None
    known = service.known_secrets(file_cfg, env)  # before any host: SwanLab key (env / file), [notify]
    service.refuse_secret_overrides(extra, known)
    service.refuse_bad_overrides(extra)
    service.refuse_plan_overrides(extra)
    if args.mode == "dapo":
        given = [f"--{k.replace('_', '-')}" for k in ("trainer_gpus", "rollout_gpus") if k in flags]
        if given:
            raise LaunchUsageError(
                f"{' and '.join(given)} size the pools of one-step-off; DAPO trains and rolls out on every device "
                f"of each host (hosts.toml `devices`): use `inv one-step-off {' '.join(g + ' N' for g in given)}`, "
                f"or drop them"
            )
    try:
        st = config.settings(flags, env)
    except settings.SettingsError as e:
        raise LaunchUsageError(str(e)) from None
    service.refuse_secret_settings(st, known)
    if args.dry_run and args.json:
        raise LaunchUsageError("--json prints the started runs and --dry-run starts none: drop one of them")
    if args.dry_run:
        try:  # the SwanLab values the launch resolves, checked the same way (only a missing cloud key is left open)
            swanlab_settings.resolve(
                env,
                file_cfg.get("swanlab") or {},
                mode_flag=args.swanlab_mode or None,
                stdin_isatty=False,
                require_key=False,
            )
        except swanlab_values.SwanlabConfigError as e:
            raise LaunchUsageError(str(e)) from None
        return DryRun(
            mode=args.mode,
            flags={**flags, "swanlab_mode": args.swanlab_mode} if args.swanlab_mode else flags,
            hosts=args.hosts,
            inventory=args.inventory,
            env=env,
            file_cfg=file_cfg,
            config=config,
            overrides=extra,
            independent=args.independent,
            resume=resume,
            skip_preflight=args.skip_preflight,
        )

    inv, chosen = select_hosts()
    progress = progress if progress is not None else LaunchProgress()
    progress.hosts = [h.name for h in chosen]
    if resume and len(chosen) > 1 and args.independent:  # one run id names one run: a cluster run, or one host's
        raise LaunchUsageError(
            f"--resume {resume!r} continues one run: drop --independent to resume the multi-host run {resume} "
            f"(same -H hosts, its head first), or resume each host's own run with -H <host> --resume <its run id>"
        )
    notes: list[str] = []
    try:
        sw = swanlab_settings.resolve_for_launch(
            mode_flag=args.swanlab_mode or None, env=env, stdin_isatty=stdin_isatty, notes=notes, tables=file_cfg
        )
    except (swanlab_values.SwanlabConfigError, userconfig.UserConfigError) as e:
        raise LaunchUsageError(str(e)) from None
    try:
        notify_cfg, notify_secret = notify.spec_from_user_config(file_cfg.get("notify"), env)
    except ValueError as e:
        raise LaunchUsageError(str(e)) from None
    try:  # --http-proxy style settings (flag/env/file) > hosts.toml [proxy] > config [proxy] > env
        proxy_public, proxy_secret = proxy.run_proxy_env(
            st.values, file_cfg.get("proxy"), inv.proxy, env, [h.address for h in chosen]
        )
    except proxy.ProxyError as e:
        raise LaunchUsageError(str(e)) from None
    secrets = [*sw.secrets(), *proxy_secret.values(), *notify_secret.values()]
    later = [s for s in secrets if s not in known]  # the SwanLab key asked for, proxy credentials of hosts.toml
    service.refuse_secret_overrides(extra, later)
    service.refuse_secret_settings(st, later)
    req = LaunchRequest(
        mode=args.mode,
        settings=st,
        sw=sw,
        notify_cfg=notify_cfg,
        extra_public=proxy_public,
        extra_secret={**proxy_secret, **notify_secret},
        inv_proxy=inv.proxy,
        extra_overrides=extra,
        skip_preflight=args.skip_preflight,
        link_wait=float(args.link_wait),
        resume=resume,
        progress=progress,
    )
    cluster = len(chosen) > 1 and not args.independent
    drafts = {}
    for i, h in enumerate(chosen if not cluster and not resume else []):
        # a run per host: each run's own draft (its run id), finished by its launch; a plan error of the first host is
        # the same on every host kind: refused before any host is contacted (another host's: its row, kind plan, from
        # its launch). A --resume run's settings come from the earlier run's spec: drafted once that is read.
        try:
            drafts[h.name] = service.draft_for(service.LaunchFacts(host=h, run_id=runstate.new_run_id()), req)
        except plan.PlanError as e:
            if i == 0:
                raise LaunchUsageError(str(e)) from None
    return Launch(
        request=dataclasses.replace(req, drafts=drafts),
        hosts=chosen,
        inventory=inv,
        cluster=cluster,
        hosts_given=bool((args.hosts or "").strip()),
        secrets=secrets,
        notes=[redact.scrub(n, secrets) for n in notes],
    )


def start(
    launch: Launch, *, accept_new_host_keys: bool = False, connect_timeout: float | None = None
) -> list[HostResult]:
    """Start one single-host run on every host of ``launch`` in parallel (:func:`dapo_ops.control.launch.service.launch_one`,
    each finishing its run's draft of ``launch.request.drafts``) within :attr:`Launch.timeout_s`. A host's plan error or refusal is its failed row (kind ``plan`` or the
    refusal's kind); every host is reported.

    :param connect_timeout: seconds per SSH connect (the program's ``-t``), None = the inventory's.
    :returns: one result per host, in ``launch.hosts`` order.
    """

    def one(target: Target) -> Row:
        try:
            return service.launch_one(target, launch.request)
        except plan.PlanError as e:
            return Row(ok=False, kind="plan", message=str(e))
        except LaunchRefused as e:
            return Row(ok=False, kind=e.kind, message=str(e))

    return fanout.run(
        launch.hosts,
        one,
        timeout=launch.timeout_s,
        accept_new_host_keys=accept_new_host_keys,
        connect_timeout=connect_timeout,
    )


def swanlab_for_preflight(mode_flag: str, env: Mapping[str, str], file_cfg: Mapping | None):
    """SwanLab settings without prompting and without failing on a missing key (that is the ``swanlab-key``
    check's job): returns ``(SwanlabSettings or None, error line or "")``. With a missing cloud key the host and
    mode are still resolved (a placeholder key is used only inside this function, never returned or shown).
    ``file_cfg``: the config file's ``[swanlab]``."""
    env = dict(env)
    file_cfg = dict(file_cfg or {})
    try:
        return swanlab_settings.resolve(env, file_cfg, mode_flag=mode_flag or None, stdin_isatty=False), ""
    except swanlab_values.SwanlabConfigError as e:
        try:
            s = swanlab_settings.resolve(
                {**env, swanlab_settings.ENV_KEY: "placeholder"},
                file_cfg,
                mode_flag=mode_flag or None,
                stdin_isatty=False,
            )
            return dataclasses.replace(s, api_key=None), str(e)
        except swanlab_values.SwanlabConfigError as e2:
            return None, str(e2)


def preflight_request(
    mode: str,
    st: settings.Settings,
    extra: list[str],
    file_cfg: Mapping[str, Any],
    env: Mapping[str, str],
    inv: Inventory,
    chosen: list[Host],
    *,
    swanlab_mode: str = "",
) -> tuple[LaunchRequest, str]:
    """The launch request ``inv preflight`` checks: the one :func:`build` would make of the same settings (the run's
    SwanLab public env, the notifier, the proxy variables: :func:`dapo_ops.control.launch.service.plan_inputs` plans
    both alike), without asking anything and without failing on a missing SwanLab key (the ``swanlab-key`` check
    says it: :func:`swanlab_for_preflight`). Returns the request and the SwanLab error line ("" = none; its SwanLab
    is then off). Raises :class:`LaunchUsageError` (one line) for a bad ``[notify]`` or proxy, as the launch does."""
    sw, sw_err = swanlab_for_preflight(swanlab_mode, env, file_cfg.get("swanlab"))
    try:
        notify_cfg, notify_secret = notify.spec_from_user_config(file_cfg.get("notify"), dict(env))
    except ValueError as e:
        raise LaunchUsageError(str(e)) from None
    try:  # the proxy launch will use (credentials: through a 0600 file to the probe, never argv)
        proxy_public, proxy_secret = proxy.run_proxy_env(
            st.values, file_cfg.get("proxy"), inv.proxy, env, [h.address for h in chosen]
        )
    except proxy.ProxyError as e:
        raise LaunchUsageError(str(e)) from None
    req = LaunchRequest(
        mode=mode,
        settings=st,
        sw=sw if sw is not None else swanlab_settings.SwanlabSettings(mode="disabled"),
        notify_cfg=notify_cfg,
        extra_public=proxy_public,
        extra_secret={**proxy_secret, **notify_secret},
        inv_proxy=inv.proxy,
        extra_overrides=list(extra),
    )
    return req, sw_err
