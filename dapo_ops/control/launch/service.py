"""Launch one run on one host as a service: gather the host's facts, build ONE plan, then execute it.

What ``inv launch`` / ``inv one-step-off`` do per host (:mod:`dapo_ops.cli.launch` parses the flags and prints), in
the shape of invoke's ``Executor.execute`` (expand once, then run):

1. :func:`gather_facts`: the run's container, ``--resume``'s earlier run (:func:`dapo_ops.control.launch.resume.read_facts`),
   and the checks that would make the launch fail at once (:func:`quick_checks`: container stopped, a run already
   active: :func:`refuse_if_busy`; ``dapo_ops.control.preflight.checks.quick``), whose one probe round trip also reads the
   device memory, the model's config.json and the learned-start memos (:class:`LaunchFacts`);
2. :func:`build_plan`: the run's draft (:func:`draft_for`, made from :func:`plan_inputs` of the :class:`LaunchRequest`
   before the probe: ``check_spec`` once, the run's env and notifier) + the facts -> one immutable
   :class:`~dapo_ops.control.launch.plan.Plan` (the learned start or memory fit, ``--resume``), made inside step 1
   as soon as the probe answers, so the quick checks judge the plan that runs (:func:`finisher`);
3. execute: close an earlier run ``--resume`` continues whose supervisor died, and start the supervisor with ONE
   call of the bundle op :mod:`dapo_ops.agent.runstart`, which writes ``spec.json`` and ``secret.env`` (0600) from its
   stdin (never a command line) and answers once verl has started (:func:`start_run`). The multi-host path
   (:mod:`dapo_ops.control.launch.multihost_service`) uses the same
   builder, checks and start.

Every call into the container goes through :func:`dapo_ops.control.remote.bundle.run_op` (the one way in).
Never prints or exits: returns values (:class:`~dapo_ops.control.remote.fanout.Row`) or raises one-line typed errors
(:class:`LaunchRefused` on a host, :class:`LaunchUsageError` before any host,
:class:`~dapo_ops.control.remote.errors.RemoteError`, :class:`~dapo_ops.control.launch.plan.PlanError`).
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
import re
import shlex
import threading
from dataclasses import dataclass, field
from typing import Any, Mapping

from dapo_ops.agent import notify
from dapo_ops.agent import runstart
import dapo_ops.control.launch.plan
from dapo_ops.control.inventory import proxy
import dapo_ops.control.launch.resume
from dapo_ops.control.launch.refusals import LaunchRefused, LaunchUsageError
from dapo_ops.control.remote import bundle
from dapo_ops.control import swanlab_values
from dapo_ops.control.remote.fanout import Row
from dapo_ops.control.remote.errors import RemoteError
from dapo_ops.control.launch.resume import ResumeFacts
from dapo_ops.core import defaults, fastfit, runstate

#: seconds the start op waits for run.json to leave ``starting`` after it started the supervisor
START_WAIT_S = 30.0
#: seconds a run that reached ``running`` is still watched for an immediate failure (config errors)
SETTLE_S = 4.0


class LaunchProgress:
    """How far a launch got, for the CLI's Ctrl-C line (thread-safe: the per-host starts run in fan-out threads).

    :meth:`begin` is called by :func:`start_run` before it writes anything of a run on a host; :meth:`cancel`
    (the CLI, on Ctrl-C) returns ``{host name: run id}`` of every run begun and makes every later :meth:`begin`
    refuse, so a host whose start had not begun yet starts nothing afterwards. Until :func:`start_run`
    returns, a begun run *may* have started: its supervisor is detached (the op ``dapo_ops.agent.runstart``).
    """

    def __init__(self) -> None:
        #: names of the hosts the launch is for, once the caller has chosen them (for the "nothing started" line)
        self.hosts: list[str] = []
        self._lock = threading.Lock()
        self._cancelled = False
        self._runs: dict[str, str] = {}

    def begin(self, host: str, run_id: str) -> bool:
        """Record that ``run_id`` is being started on ``host``; False (record nothing) once cancelled."""
        with self._lock:
            if self._cancelled:
                return False
            self._runs[host] = run_id
            return True

    def cancel(self) -> dict[str, str]:
        """Refuse every later :meth:`begin`; returns ``{host: run id}`` of the runs begun so far (oldest first)."""
        with self._lock:
            self._cancelled = True
            return dict(self._runs)


@dataclass
class LaunchRequest:
    """Everything a launch needs besides the host: resolved settings and the operator-side secrets.

    ``settings``: :class:`dapo_ops.control.settings.Settings`. ``sw``: :class:`swanlab_settings.SwanlabSettings`.
    ``extra_public`` / ``extra_secret``: env for verl (proxy variables; secret ones go to ``secret.env`` only).
    ``inv_proxy``: hosts.toml ``[proxy]``. ``link_wait``: seconds to wait for the SwanLab link.
    ``resume``: a run id to continue. ``progress``: what was begun where (:class:`LaunchProgress`). ``drafts``: the
    drafts of its runs by host name (:func:`draft_for`), made before any host was contacted
    (:func:`dapo_ops.control.launch.request.build`: a run per host, without ``--resume``): what ``inv quickstart``'s
    preflight checks and each host's launch finishes (:func:`gather_facts`); a run without one is drafted on its way.
    ``finished``: ``{host name: (draft, memory facts, plan)}``, the last plan :func:`finisher` made of a draft:
    :func:`dapo_ops.control.launch.plan.make_plan` is pure, so the launch after a preflight of the same request
    (``inv quickstart``) whose probe reads the same facts starts the plan preflight checked, made once.
    """

    mode: str
    settings: Any
    sw: Any
    notify_cfg: dict = field(default_factory=dict)
    extra_public: dict = field(default_factory=dict)
    extra_secret: dict = field(default_factory=dict)
    inv_proxy: dict = field(default_factory=dict)
    extra_overrides: list = field(default_factory=list)
    skip_preflight: bool = False
    link_wait: float = 20.0
    resume: str = ""
    progress: LaunchProgress = field(default_factory=LaunchProgress)
    drafts: Mapping[str, dapo_ops.control.launch.plan.Draft] = field(default_factory=dict)
    finished: dict[str, tuple[Any, Mapping | None, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class LaunchFacts:
    """What is known of one launch on one host before its plan is built (:func:`gather_facts`, or the caller's).

    ``host``: the inventory ``Host`` (a multi-host run: its head, with the cluster's device count). ``run_id``: the
    new run's id (:func:`dapo_ops.core.runstate.new_run_id`). ``resume``: the run ``--resume`` continues, as its
    container has it (:class:`~dapo_ops.control.launch.resume.ResumeFacts`), else None. ``memory``: the launch probe's
    device memory, model config.json and learned-start memos (:func:`dapo_ops.control.preflight.memory.memory_facts`), None
    without a probe (a multi-host run, the CLI's check before any host). ``topology``: a
    multi-host run's settings (:meth:`dapo_ops.core.topology.Topology.settings`), else None. ``skipped``: one line
    per failing quick check ``--skip-preflight`` let through (the launch prints them). ``draft``: the run's first
    stage (:func:`draft_for`), once made: what the probe reads and :func:`build_plan` finishes. ``plan``: the plan
    :func:`build_plan` made of ``draft`` and ``memory`` (:func:`gather_facts`: the one its quick checks judged),
    else None.
    """

    host: Any
    run_id: str
    resume: ResumeFacts | None = None
    memory: Mapping | None = None
    topology: Mapping | None = None
    skipped: tuple[str, ...] = ()
    draft: dapo_ops.control.launch.plan.Draft | None = None
    plan: dapo_ops.control.launch.plan.Plan | None = None


def plan_settings(facts: LaunchFacts, req: LaunchRequest):
    """The settings the plan is made from: ``req``'s, with what is not given now taken from the run ``--resume``
    continues (:func:`dapo_ops.control.launch.resume.resumed`)."""
    return dapo_ops.control.launch.resume.resumed(req.settings, (), facts.resume)[0]


def plan_overrides(facts: LaunchFacts, req: LaunchRequest) -> tuple[str, ...]:
    """The ``--override`` values the plan is made from: ``req``'s, after those of the run ``--resume`` continues
    whose keys are not given now (:func:`dapo_ops.control.launch.resume.resumed`)."""
    return dapo_ops.control.launch.resume.resumed(req.settings, req.extra_overrides, facts.resume)[1]


def plan_inputs(facts: LaunchFacts, req: LaunchRequest) -> dapo_ops.control.launch.plan.PlanInputs:
    """THE planner inputs of ``req`` on ``facts.host``: the one place a launch request becomes
    :class:`~dapo_ops.control.launch.plan.PlanInputs` (launch, ``inv preflight``, ``inv prepare``, quickstart). The
    settings (:func:`plan_settings`), the run's public env (docs/design.md "SwanLab and secrets": the proxy
    variables of ``req.extra_public`` and SwanLab's public env; a resumed run continues the earlier run's SwanLab
    run: the ``SWANLAB_RUN_ID`` of the earlier spec, which is the chain's first run's, so ``A -> B -> C`` all log to
    A's SwanLab run), the notifier, the topology and the run ``--resume`` continues."""
    run_dir = runstate.run_dir_for(facts.host.runs_path, facts.run_id)
    earlier = facts.resume.spec if facts.resume is not None else {}
    chain_id = str((earlier.get("env") or {}).get("SWANLAB_RUN_ID") or "")
    return dapo_ops.control.launch.plan.PlanInputs(
        settings=plan_settings(facts, req),
        host=facts.host,
        mode=req.mode,
        run_id=facts.run_id,
        # SwanLab's mode, not its key: a launch's cloud mode has its key (request.build refuses one without), and the
        # run preflight checks without one logs to SwanLab too (its swanlab-key check says the key is missing)
        swanlab_logger=req.sw.mode != "disabled",
        proxy=req.inv_proxy,
        extra_overrides=plan_overrides(facts, req),
        topology=facts.topology,
        public_env={
            **req.extra_public,
            **req.sw.public_env(run_dir=run_dir, run_id=req.resume or facts.run_id, swanlab_id=chain_id),
        },
        notify=req.notify_cfg,
        resume=facts.resume,
    )


def draft_for(facts: LaunchFacts, req: LaunchRequest) -> dapo_ops.control.launch.plan.Draft:
    """Stage 1 of the plan of ``req`` on ``facts.host`` (:func:`dapo_ops.control.launch.plan.draft_plan` of
    :func:`plan_inputs`): what the launch's probe, ``inv preflight`` and the CLI's check before any host look at,
    checked once. Pure. Raises PlanError (one line)."""
    return dapo_ops.control.launch.plan.draft_plan(plan_inputs(facts, req))


def build_plan(facts: LaunchFacts, req: LaunchRequest) -> dapo_ops.control.launch.plan.Plan:
    """THE plan of one launch: the run's draft (``facts.draft``, else :func:`draft_for`) finished with the probe's
    facts (:func:`dapo_ops.control.launch.plan.make_plan`, called once: the learned start, else the memory fit,
    ``--resume``'s checkpoint dir, names and features) -> one immutable :class:`~dapo_ops.control.launch.plan.Plan`.
    Pure. A multi-host run plans with no probe facts.

    A learned start is not looked up with ``--resume``, which continues the earlier run's own features.
    :raises PlanError: one line (settings, features: a draft made here; the memory fit).
    :raises LaunchRefused: kind ``resume``: the plan cannot continue the earlier run's checkpoints
        (:func:`dapo_ops.control.launch.resume.check`), or would log to SwanLab in another mode than it
        (:func:`dapo_ops.control.launch.resume.check_logging`).
    """
    memory = facts.memory
    if memory is not None and req.resume:
        memory = dict(memory, memos=None, learned_skip=f"--resume continues run {req.resume} with its own features")
    plan = dapo_ops.control.launch.plan.make_plan(facts.draft or draft_for(facts, req), memory)
    if facts.resume is not None:
        dapo_ops.control.launch.resume.check(plan, facts.resume)
    refuse_resume_logging(facts, req)
    return plan


def refuse_resume_logging(facts: LaunchFacts, req: LaunchRequest) -> None:
    """The request's own refusal of a ``--resume`` that would log to SwanLab in another mode than the run it
    continues (:func:`dapo_ops.control.launch.resume.check_logging`; the mode counts as given unless it is the
    default). Needs only the earlier run's facts and ``req``: :func:`gather_facts` calls it before the host's quick
    checks, so a resume of an offline run without ``--swanlab-mode`` is refused for that, not for a tracker DNS check
    of a mode the user never meant. Nothing without ``facts.resume``. Raises :class:`LaunchRefused` (``resume``)."""
    if facts.resume is not None:
        dapo_ops.control.launch.resume.check_logging_with(facts.resume, req.sw)


def finisher(facts: LaunchFacts, req: LaunchRequest):
    """The plan's second stage for a probe (:attr:`dapo_ops.control.preflight.group.HostJob.finish`,
    :func:`dapo_ops.control.preflight.checks.quick_all`'s ``finish``): memory facts (or None) -> :func:`build_plan` of
    ``facts`` with them, i.e. ``inv preflight`` and the launch's quick checks finish a draft exactly as the launch
    does. The same draft with the same facts again (the launch after ``inv quickstart``'s preflight) gets the plan
    made the first time (``req.finished``): the plan preflight judged is the plan that starts, made once. Raises
    what :func:`build_plan` raises."""

    def finish(memory: Mapping | None) -> dapo_ops.control.launch.plan.Plan:
        done = req.finished.get(facts.host.name)
        if done is not None and facts.draft is not None and done[0] is facts.draft and done[1] == memory:
            return done[2]
        plan = build_plan(dataclasses.replace(facts, memory=memory), req)
        if facts.draft is not None:
            req.finished[facts.host.name] = (facts.draft, memory, plan)
        return plan

    return finish


def run_secret_env(req: LaunchRequest) -> dict:
    """The run's ``secret.env`` (0600, read and deleted by the supervisor): SwanLab's key and ``req.extra_secret``
    (proxy credentials, the notifier's secrets)."""
    return {**req.sw.secret_env(), **req.extra_secret}


# ------------------------------------------------------------------------------- before any host


def known_secrets(file_cfg: dict, env=None) -> list[str]:
    """Secret values dapo-ops knows without prompting: the SwanLab key (env / config file), webhook URLs and
    signing secrets ([notify]); proxy credentials are added at launch (env / [proxy] / hosts.toml)."""
    env = os.environ if env is None else env
    out = [env.get("SWANLAB_API_KEY", ""), str((file_cfg.get("swanlab") or {}).get("api_key") or "")]
    try:
        out += list(notify.spec_from_user_config(file_cfg.get("notify"), dict(env))[1].values())
    except ValueError:
        pass
    return [v for v in out if v and len(v) >= 6]


#: keys of verl 0.9.1's own config whose names look secret to :func:`dapo_ops.core.redact.is_secret_name` but hold a
#: dataset column / dict key name or a profiler step (verl/trainer/config/data/legacy_data.yaml ``prompt_key`` ...,
#: distillation/*.yaml, profiler/*.yaml); tests/test_launch.py derives the same set from the pinned yaml
VERL_NAME_KEYS = frozenset(
    {
        "data.prompt_key",
        "data.reward_fn_key",
        "data.image_key",
        "data.video_key",
        "data.audio_key",
        "distillation.teacher_key",
        "distillation.teacher_models.teacher_model.key",
        "actor_rollout_ref.rollout.profiler.tool_config.npu.profile_token_start",
        "actor_rollout_ref.rollout.profiler.tool_config.npu.profile_token_end",
        "actor_rollout_ref.rollout.profiler.tool_config.torch.profile_token_start",
        "actor_rollout_ref.rollout.profiler.tool_config.torch.profile_token_end",
    }
)


def refuse_secret_overrides(extra: list, secrets: list) -> None:
    """Raise :class:`LaunchUsageError` when an ``--override`` carries a secret: a value holding a secret dapo-ops
    knows, or a key that looks secret by the one redaction rule (:func:`dapo_ops.core.redact.is_secret_name`:
    ``+trainer.api_key=...``, ``+x.hf_token=...``) and is not one of verl's own name keys (:data:`VERL_NAME_KEYS`).
    Such a key without ``+`` (``trainer.nonexistent_key=1``) is refused as an unknown key, not as a secret: verl's
    config has every secret-looking key of its own in :data:`VERL_NAME_KEYS`, and Hydra refuses an unknown key
    without ``+`` (``Could not override ... Key '...' is not in struct``); the nearest name key is named when close.
    An override is printed by ``--dry-run`` and stored in spec.json, run.json, verl's argv and train.log. Nothing of
    the value is shown: one line naming the key and the fix."""
    from dapo_ops.core import redact
    from dapo_ops.core.hydra_override import ADD, FORCE_ADD, parse_override

    for o in extra:
        key = o.partition("=")[0]
        ov = parse_override(o)
        name = ov.key if ov and ov.value is not None else ""  # a key given a value (or ~key=value's guard)
        if ov is None and "=" in o:  # not an override ('+~key=v'): refused later, where the text is shown, so its
            name = key.strip().lstrip("+~")  # value must not be a secret's
        plain = ov is not None and ov.op not in (ADD, FORCE_ADD)
        if name and redact.is_secret_name(name) and name not in VERL_NAME_KEYS and plain:
            # every key of verl's own config whose name looks secret is in VERL_NAME_KEYS (tests/test_launch.py), so
            # a plain (no +) key here is one verl lacks: Hydra refuses it ("Could not override ... is not in struct")
            near = difflib.get_close_matches(name, sorted(VERL_NAME_KEYS), n=1, cutoff=0.75)
            raise LaunchUsageError(
                f"--override {key}=...: unknown key: verl's config has no {name}"
                + (f" (did you mean {near[0]}?)" if near else " (Hydra would refuse it at verl's start)")
                + "; fix the key or drop the override"
            )
        if name and redact.is_secret_name(name) and name not in VERL_NAME_KEYS:
            raise LaunchUsageError(
                f"--override {key}=...: the key looks secret (a key/token/secret/password name); secrets never go on "
                f"verl's command line: set them by env var or the config file (SWANLAB_API_KEY, [notify], [proxy]) "
                f"and drop the override"
            )
        if any(sec in o for sec in secrets if sec):
            raise LaunchUsageError(
                f"--override {key}=...: the value holds a secret dapo-ops knows (SwanLab key, webhook URL or "
                f"signing secret, proxy password); secrets never go on verl's command line: set them by env var "
                f"or the config file (SWANLAB_API_KEY, [notify], [proxy]) and drop the override"
            )


def refuse_secret_settings(settings, secrets: list) -> None:
    """Raise :class:`LaunchUsageError` when a run setting (``--experiment``, ``--project``, paths, ...: every
    string value of :class:`~dapo_ops.control.settings.Settings`) holds a secret dapo-ops knows: settings go into
    spec.json, run.json, verl's argv and train.log like an override. Nothing of the value is shown; the message names
    where it was set (``--experiment``, ``EXPERIMENT_NAME``, ``[run] experiment in the config file``)."""
    from dapo_ops.control.settings import PARAMS

    flags = {p.name: p.flag or (p.env[0] if p.env else p.name) for p in PARAMS}
    flags.update(getattr(settings, "origins", None) or {})  # where each was set: flag, variable or file key
    for name, value in (getattr(settings, "values", None) or dict(settings)).items():
        if name.lower() in proxy.PROXY_VARS:  # proxy URLs carry their password by design: split_secret keeps it
            continue  # out of the spec (secret.env only)
        if isinstance(value, str) and any(sec in value for sec in secrets if sec):
            raise LaunchUsageError(
                f"{flags.get(name, name)}: the value holds a secret dapo-ops knows (SwanLab key, webhook URL or "
                f"signing secret, proxy password); run settings are stored in spec.json and reach verl's command "
                f"line: give a value without it"
            )


def refuse_plan_overrides(extra: list) -> None:
    """Raise :class:`LaunchUsageError` for an ``--override`` of a key the plan itself sets (it comes last in verl's
    argv and would win silently): one line naming the setting to use instead (``--override
    trainer.total_training_steps=5: use --steps (TRAIN_STEPS)``; :data:`dapo_ops.core.overrides.PLAN_SETTING_KEYS`) or
    why dapo-ops sets it (:data:`dapo_ops.core.overrides.PLAN_FIXED_KEYS`: resume, checkpoint dir, logger, layout).
    ``+key``, ``++key`` and ``~key`` count as the key. A value is shown only when it is a number or a boolean (it may
    hold a secret dapo-ops learns only later, a proxy password). Every other key stays open."""
    from dapo_ops.core.hydra_override import parse_override
    from dapo_ops.core.overrides import PLAN_FIXED_KEYS, PLAN_SETTING_KEYS

    for o in extra:
        ov = parse_override(o)
        if ov is None or ov.key not in PLAN_SETTING_KEYS and ov.key not in PLAN_FIXED_KEYS:
            continue
        name, val = ov.key, ov.value or ""
        shown = val if re.fullmatch(r"-?[0-9][0-9._e+-]*|(?i:true|false|null)", val.strip()) else "..."
        head = f"--override {ov.head}" + (f"={shown}" if ov.value is not None else "")
        if name in PLAN_FIXED_KEYS:
            raise LaunchUsageError(f"{head}: dapo-ops sets {name} itself: {PLAN_FIXED_KEYS[name]}; drop the override")
        raise LaunchUsageError(f"{head}: use {_setting_owning(name)}")


def _setting_owning(name: str) -> str | None:
    """How a user sets the verl key ``name`` (an override's key without its op prefix,
    ``key`` of :class:`dapo_ops.core.hydra_override.Override`) that a dapo-ops setting owns (core/overrides.py
    PLAN_SETTING_KEYS): ``--project (PROJECT_NAME)``, or the env / config key of a setting with no flag; None for any
    other key."""
    from dapo_ops.control.settings import BY_NAME
    from dapo_ops.core.overrides import PLAN_SETTING_KEYS

    if name not in PLAN_SETTING_KEYS:
        return None
    p = BY_NAME[PLAN_SETTING_KEYS[name]]
    return f"{p.flag} ({p.env[0]})" if p.flag else f"{p.env[0]} (or {p.key} in [run] of the config file)"


def refuse_bad_overrides(extra: list) -> None:
    """Raise :class:`LaunchUsageError` for an ``--override`` Hydra's override grammar rejects (``a;b``, ``$(x)``,
    backticks, ``&``, ``>``): verl would die at once in its ``@hydra.main`` (verl/trainer/main_ppo.py) with a lexer
    error that reads like a crash. Parsed with hydra-core's own ``OverridesParser`` (the grammar verl uses)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    from dapo_ops.control.settings import SHOWN_MAX, shown
    from dapo_ops.core.hydra_override import PREFIX, parse_override

    parser = OverridesParser.create()
    for o in extra:
        ov = parse_override(o)
        if ov is None and "=" not in o:  # neither key=value nor ~key: runspec.check_spec says so in its own words
            continue
        prefix = o[: len(o) - len(o.lstrip("+~"))]
        if prefix not in PREFIX.values():  # the fault is the prefix: quoting the value would not help
            raise LaunchUsageError(
                f"--override {shown(o.partition('=')[0])[1:-1]}=...: {prefix!r} is not a Hydra prefix; use key=value, "
                "+key=value (add), ++key=value (add or set) or ~key (delete)"
            )
        try:
            parsed = parser.parse_overrides([o])[0]
        except OverrideParseException as e:
            key, _, val = o.partition("=")
            why = (str(e).strip().splitlines() or ["not parsable"])[0]
            example = f"{key}='{val}'" if len(o) <= SHOWN_MAX else "key='value'"
            owner = _setting_owning(ov.key) if ov else None
            if ov and owner:  # quoting would only lead to the next refusal (refuse_plan_overrides): the real fix now
                raise LaunchUsageError(
                    f"--override {shown(o)} is not a valid Hydra override ({shown(why)[1:-1]}), and "
                    f"{ov.key} is a setting of dapo-ops: use {owner} instead of --override"
                ) from None
            raise LaunchUsageError(  # the example shell-quoted as a whole: pasted into a shell it runs nothing
                f"--override {shown(o)} is not a valid Hydra override ({shown(why)[1:-1]}); quote a value with "
                f"special characters for Hydra, e.g. --override {shlex.quote(example)}"
            ) from None
        # '=5': Hydra's grammar takes an empty key; verl then dies with "Config group override must be a string or a
        # list. Got int"
        if ov is None or not str(parsed.key_or_group or "").strip():
            raise LaunchUsageError(
                f"--override {shown(o)} names no key; give key=value, e.g. --override trainer.val_before_train=False"
            )
        if parsed.is_sweep_override():  # 'a,b', choice(...), range(...): verl's @hydra.main refuses a sweep
            raise LaunchUsageError(  # ("Ambiguous value for argument ... --multirun"); a value with a comma is quoted
                f"--override {shown(o)} is a Hydra sweep (a multirun over several values), which verl's single run "
                f"refuses; quote a value with a comma, e.g. --override {shlex.quote(ov.head + '=' + repr(ov.value))}"
                if ov.value is not None and "(" not in ov.value
                else f"--override {shown(o)} is a Hydra sweep, which verl's single run refuses"
            )
        _refuse_resolvers(ov.head, parsed.value())


def _strings(v):
    """Every str inside a parsed Hydra override value (lists and dicts walked; sweeps and numbers skipped)."""
    if isinstance(v, str):
        yield v
    elif isinstance(v, (list, tuple)):
        for x in v:
            yield from _strings(x)
    elif isinstance(v, dict):
        for k, x in v.items():
            yield from _strings(k)
            yield from _strings(x)


def _refuse_resolvers(key: str, value) -> None:
    """An ``--override`` may interpolate verl config keys on purpose (``${data.max_prompt_length}``), but may not call
    an OmegaConf resolver: ``${oc.env:VAR}`` reads verl's environment (SWANLAB_API_KEY and the proxy password are
    in it) into the config, which verl prints to train.log (verl/trainer/main_ppo.py:144) and hands to the tracker;
    ``${oc.decode:...}`` and any registered resolver run code on input. Checked on the value as given AND with
    ``\\${`` un-escaped: main_ppo.py:145 resolves the config in place, which turns an escaped ``\\${oc.env:X}``
    into a live ``${oc.env:X}`` for every later read. Parsed with OmegaConf's own grammar
    (``omegaconf.grammar_parser``); a value it cannot parse would kill verl at its first read, so it is refused too.

    :raises LaunchUsageError: one line naming the key (the value is not echoed) and the fix.
    """
    from omegaconf import grammar_parser
    from omegaconf.errors import GrammarParseError
    from omegaconf.grammar.gen.OmegaConfGrammarParser import OmegaConfGrammarParser

    for text in _strings(value):
        for form in dict.fromkeys((text, text.replace("\\${", "${"))):
            if "${" not in form:
                continue
            try:
                tree = grammar_parser.parse(form, parser_rule="configValue", lexer_mode="DEFAULT_MODE")
            except GrammarParseError:
                raise LaunchUsageError(
                    f"--override {key}=...: the value holds '${{' that is not a valid OmegaConf interpolation, which "
                    f"verl would fail on at its first read of the key (verl/trainer/main_ppo.py:144-145); interpolate "
                    f"a config key as ${{data.max_prompt_length}} or remove '${{'"
                ) from None
            stack = [tree]
            while stack:
                node = stack.pop()
                if isinstance(node, OmegaConfGrammarParser.InterpolationResolverContext):
                    raise LaunchUsageError(
                        f"--override {key}=...: the value calls OmegaConf's resolver "
                        f"'{node.resolverName().getText()}' (${{name:...}}), which verl evaluates in its own process "
                        f"(oc.env reads its environment, secrets included; verl/trainer/main_ppo.py:144-145): only "
                        f"interpolations of config keys are allowed, e.g. ${{data.max_prompt_length}}; give the value "
                        f"itself"
                    )
                stack.extend(getattr(node, "children", None) or [])


# ------------------------------------------------------------------------------- on the host


def refuse_if_busy(target, py: str, *, sweep: bool = True) -> dict:
    """The one rule for every launch path (:mod:`dapo_ops.agent.occupancy`, the bundle op run in the container by
    :func:`dapo_ops.control.remote.bundle.run_op` with interpreter ``py``): refuse while a run is active, while verl
    of an earlier run is still alive (its supervisor SIGKILLed), or while the host is a Ray node of a multi-host run
    that is still up; Ray left over from a finished cluster run is ended first (``--sweep``; ``sweep=False``: a
    ``--dry-run --resume``, which only reads, leaves it: the refusal is the same, leftovers are no reason to refuse,
    :func:`dapo_ops.agent.occupancy.occupancy`). Raises :class:`LaunchRefused` (kind ``active-run``) or RemoteError;
    returns the answer."""
    host = target.host
    args = [host.runs_path, host.name] + (["--sweep"] if sweep else [])
    res = bundle.run_op(target, "occupancy", args, python=py, workdir="", timeout=60)
    try:
        occ = json.loads((res.stdout or "").strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise RemoteError(
            "command",
            host.name,
            "the occupancy check gave no answer: " + ((res.stderr or "").strip().splitlines() or ["no output"])[-1],
        ) from None
    from dapo_ops.agent.occupancy import busy_reason

    where = "host shell" if getattr(target, "bare", False) else f"container {target.container}"
    busy = busy_reason(occ, host.name, where)
    if busy:
        raise LaunchRefused("active-run", busy["line"])
    return occ


#: the key of :func:`quick_checks`'s facts that lists the failing checks ``--skip-preflight`` let through
SKIPPED_KEY = "skipped_checks"


def quick_checks(
    target,
    view,
    skip_preflight: bool,
    req: "LaunchRequest | None" = None,
    *,
    need_facts: bool = True,
    finish=None,
    sweep: bool = True,
) -> dict:
    """The checks that would make the launch fail at once: container running, no active run on the container
    (:func:`refuse_if_busy`), and ``dapo_ops.control.preflight.checks.quick`` (devices, leftovers, python/verl,
    model/data, disk, the memory fit); ``skip_preflight`` turns the failures of the last into lines
    (``facts[SKIPPED_KEY]``) instead of a refusal, and the probe still runs: its facts (device memory, config.json,
    learned-start memos) are inputs of the plan, not checks (a skipped probe silently turned off learned starts and
    the memory fit: H200 run 20261202-065903-4ae6 filed no memo); a caller that plans without them
    (``need_facts=False``: a multi-host run) skips the probe with the checks. With ``req``, in the same probe round
    trip, the
    tracker's reachability from the container (``swanlab``: cloud mode only, with the run's env: its proxy and
    SwanLab host; the proxy variables that carry credentials reach the probe through a 0600 file, never argv).
    ``view``: what the run reads (its :class:`~dapo_ops.control.launch.plan.Draft`, or a multi-host run's plan): the
    probe is asked from it. ``finish``: the draft's second stage (:func:`finisher`, as :func:`gather_facts` passes
    it): the checks judge the plan it makes of the probe's memory facts, the plan the launch runs (the fastest fit
    changes the rollout share ``device-mem`` compares, the features and budgets ``memory-fit`` estimates); None:
    ``view`` is judged (a multi-host run's plan, finished without probe facts). ``sweep``: :func:`refuse_if_busy`'s
    (False: a ``--dry-run``, which only reads). Raises :class:`LaunchRefused`
    or RemoteError with one line. Returns the probe's facts (empty when skipped): the device memory, config.json
    and memos :func:`build_plan` fits the plan to."""
    from dapo_ops.control.preflight.plan_view import plan_view

    host = target.host
    pv = plan_view(view)
    assert pv is not None, "quick_checks needs what the run reads (its draft, or a plan)"
    state = target.container_state()  # a bare host (runtime = "host") has no container: always "running"
    if not state.running:
        raise LaunchRefused(
            "container-stopped",
            f"container '{target.container}' on {host.name} is "
            f"{state.status}: start it (docker start {target.container}) and launch again",
        )
    refuse_if_busy(target, pv.spec.python or defaults.HOST["python"], sweep=sweep)
    facts: dict = {}
    if skip_preflight and not need_facts:
        return facts
    from dapo_ops.control.preflight import checks

    secret = {k: v for k, v in req.extra_secret.items() if k.lower() in proxy.PROXY_VARS} if req is not None else {}
    failed = [
        ck
        for ck in checks.quick(target, pv, facts_out=facts, tracker=req is not None, secret_env=secret, finish=finish)
        if ck.status == "fail"
    ]
    if skip_preflight:
        facts[SKIPPED_KEY] = [f"{ck.name} failed: {ck.message}" for ck in failed]
        return facts
    if failed:
        ck = failed[0]
        more = f" (+{len(failed) - 1} more: inv preflight -H {host.name})" if len(failed) > 1 else ""
        raise LaunchRefused(
            "preflight",
            f"{host.name}: preflight {ck.name} failed: {ck.message}"
            + (f"; {ck.fix}" if ck.fix else "")
            + more
            + " (--skip-preflight to launch anyway)",
        )
    return facts


def gather_facts(target, req: LaunchRequest, *, sweep: bool = True) -> LaunchFacts:
    """Step 1 of a launch on ``target``: point it at the run's container, read the run ``--resume`` continues, take
    the run's draft (``req.drafts``, made before any host was contacted, with its run id; else :func:`draft_for`:
    a ``--resume`` run is drafted from the earlier run's spec), probe what it reads and finish it with the probe's
    memory facts (:func:`build_plan`, once), and run the quick checks on that plan (:func:`quick_checks`): the
    facts keep the memory facts and the plan. When the plan cannot be made the draft is judged and the plan's
    error is raised after the checks (a failing check speaks first, as before the two stages met). Reads and
    refusals only: nothing of the new run is written. ``sweep=False``: Ray left over from a finished cluster run is
    left as it is (:func:`refuse_if_busy`): ``inv launch --dry-run -H``, which plans from these same facts and starts
    nothing. Raises LaunchRefused / RemoteError / PlanError (one line)."""
    host = target.host
    target.container = dapo_ops.control.launch.plan.container_for(
        req.settings, host
    )  # --container / CONTAINER over the inventory's
    draft = None if req.resume else req.drafts.get(host.name)
    facts = LaunchFacts(host=host, run_id=draft.inputs.run_id if draft is not None else runstate.new_run_id())
    if req.resume:
        facts = dataclasses.replace(facts, resume=dapo_ops.control.launch.resume.read_facts(target, req.resume))
    refuse_resume_logging(facts, req)  # the request's own refusal speaks before the host's checks
    facts = dataclasses.replace(facts, draft=draft or draft_for(facts, req))
    made: list[tuple[Mapping | None, dapo_ops.control.launch.plan.Plan]] = []
    refused: list[Exception] = []
    stage2 = finisher(facts, req)

    def finish(memory: Mapping | None):
        try:
            made.append((memory, stage2(memory)))
        except (dapo_ops.control.launch.plan.PlanError, LaunchRefused) as e:
            refused.append(e)
            return facts.draft
        return made[-1][1]

    probe = quick_checks(target, facts.draft, req.skip_preflight, req, finish=finish, sweep=sweep)
    if refused:
        raise refused[0]
    mem, plan = made[-1] if made else (None, None)
    return dataclasses.replace(facts, memory=mem, plan=plan, skipped=tuple(probe.get(SKIPPED_KEY) or ()))


def verdict_line(rec: dict) -> str:
    """One line for a run that failed within the launch's wait: its verdict class, the action and the first
    evidence line; where it stopped when it had made steps (``failed at step 2/8``, else ``failed at once``). A
    verdict whose action is a retry the supervisor did not take (``MAX_OOM_RETRIES=0``, retries used up) gives the
    supervisor's reason instead, as ``inv status`` does (``status.rows.ending_line``)."""
    v = rec.get("verdict") or {}
    d = rec.get("decision") or {}
    cls = v.get("cls") or "failed"
    v_action = str(v.get("action") or "")
    retry_not_taken = d.get("action") == "stop" and not (v.get("action_kind") == "stop" or v_action.startswith("stop"))
    what = (d.get("reason") if retry_not_taken else None) or v_action or d.get("reason") or "see the log"
    ev = (v.get("evidence") or [""])[0]
    step, total = rec.get("step"), rec.get("total_steps")
    when = f"at step {step}/{total or '?'}" if isinstance(step, int) and step > 0 else "at once"
    line = f"run {rec.get('run_id')} failed {when}: {cls}: {what}"
    if ev and ev not in what:
        line += f" ({ev})"
    return line


def remove_run_dir(target, run_dir: str) -> None:
    """Remove ``run_dir`` in ``target``'s container (the bundle op ``runfiles remove``): what a launch that started
    nothing leaves behind. Never raises for the op's own failure (a run dir left behind is shown by ``inv status``).

    :raises RemoteError: the host cannot be reached."""
    bundle.run_op(target, "runfiles", ["remove", run_dir], site=False, workdir="", check=False, timeout=30)


def start_input(spec: Mapping, secret_env: dict) -> bytes:
    """The stdin of the start op (:func:`dapo_ops.agent.runstart.read_input`): ``{"spec": <spec.json text>,
    "secret_env": <secret.env text>}`` as UTF-8 JSON; the spec's text is what spec.json holds (``json.dumps(spec,
    indent=1)`` and a newline), ``secret_env`` only when there are secrets (:func:`swanlab_values.env_file_text`)."""
    data = {"spec": json.dumps(spec, indent=1) + "\n"}
    if secret_env:
        data["secret_env"] = swanlab_values.env_file_text(secret_env)
    return json.dumps(data).encode("utf-8")


def start_run(
    target,
    plan: dapo_ops.control.launch.plan.Plan,
    secret_env: dict,
    *,
    link_wait: float,
    spec: Mapping | None = None,
    cleanup=None,
    progress: LaunchProgress | None = None,
) -> Row:
    """Start the supervisor of ``plan.run_dir`` with the bundle op :mod:`dapo_ops.agent.runstart` (ONE remote call):
    it writes ``spec.json`` (``spec``, default ``plan.spec``; + ``secret.env``, 0600) from its stdin
    (:func:`start_input`: secrets never on a command line), starts the supervisor and answers once the run left
    ``starting`` (up to :data:`START_WAIT_S`), after :data:`SETTLE_S` more and up to ``link_wait`` seconds for the
    SwanLab link (0: the run logs no SwanLab).

    Returns a :class:`Row` (``data``: run_id, run_dir, log, swanlab_url, status, container; ``ok=False`` kind
    ``failed`` when the run failed at once). ``cleanup()`` (default: remove the run dir, :func:`remove_run_dir`) runs
    when nothing was started (the op could not write a file or start the supervisor: its exit
    :data:`dapo_ops.agent.runstart.SPAWN_FAILED`); raises RemoteError with one line (a failure of the call itself:
    the run may have started, and the line says how to look), :class:`LaunchRefused` (kind ``interrupted``) when
    ``progress`` was cancelled before anything of the run was written.
    """
    host = target.host
    spec = plan.spec if spec is None else spec  # what spec.json holds: the plan's dict (multi-host: + ray, env)
    rs = plan.run_spec if spec is plan.spec else defaults.RunSpec.read(spec)
    run_id, py = str(rs.run_id), rs.python or defaults.HOST["python"]  # a plan's spec names both
    if progress is not None and not progress.begin(host.name, run_id):
        raise LaunchRefused(
            "interrupted", f"{host.name}: launch interrupted before run {run_id} was started; nothing was started"
        )

    def undo() -> None:
        if cleanup is not None:
            cleanup()
        else:
            remove_run_dir(target, plan.run_dir)

    args = [plan.run_dir, "--workdir", str(rs.workdir), "--start-wait", f"{START_WAIT_S:g}"]
    args += ["--settle", f"{SETTLE_S:g}", "--link-wait", f"{link_wait:g}", "--stdin"]
    try:
        res = bundle.run_op(
            target,
            "runstart",
            args,
            python=py,
            workdir="",
            check=False,
            timeout=START_WAIT_S + SETTLE_S + link_wait + 60,
            stdin=start_input(spec, secret_env),
        )
    except RemoteError as e:  # the supervisor may be running: its run dir stays, for `inv status` / `inv stop`
        raise RemoteError(
            e.kind,
            e.host,
            f"{e.message}; run {run_id} may have started: `inv status -H {host.name}` (or `inv stop -H "
            f"{host.name} --run {run_id}`)",
            exit_code=e.exit_code,
            result=e.result,
        ) from None
    lines = [ln.strip() for ln in (res.stderr or res.stdout or "").splitlines() if ln.strip()]
    if res.exited == runstart.SPAWN_FAILED:
        undo()
        raise RemoteError(
            "command", host.name, lines[-1] if lines else f"could not start the supervisor of run {run_id}"
        )
    try:
        answer = json.loads((res.stdout or "").strip().splitlines()[-1]) if res.exited == 0 else None
    except (ValueError, IndexError):
        answer = None
    if not isinstance(answer, dict):
        raise RemoteError(
            "command",
            host.name,
            f"the start of run {run_id} gave no answer (`python3 -m dapo_ops.agent.runstart` exited {res.exited} "
            f"{target.where}: {lines[-1][:200] if lines else 'no output'}); it may have started: `inv status -H "
            f"{host.name}`",
            exit_code=res.exited,
            result=res,
        )
    rec = answer.get("record") or {}
    follow = f"see {plan.run_dir}/supervisor.log (inv logs -H {host.name} --run {run_id})"
    if not answer.get("started") and answer.get("supervisor_exit") is not None:
        raise RemoteError(
            "command",
            host.name,
            f"run {run_id} did not start: its supervisor exited ({answer['supervisor_exit']}) before verl "
            f"started; {follow}",
        )
    if not answer.get("started"):
        raise RemoteError("timeout", host.name, f"run {run_id} did not start within {START_WAIT_S:g} s; {follow}")
    if rec.get("status") == runstate.RunStatus.FAILED:
        active = ((rec.get("verdict") or {}).get("detail") or {}).get("active_run")
        if active:
            # lost a launch race to another run (the supervisor's lock): leave no record of the loser, and say so
            # as refuse_if_busy does for a run that was active before this launch looked
            remove_run_dir(target, plan.run_dir)
            return Row(
                ok=False,
                kind="active-run",
                data={"run_id": run_id},
                message=f"{host.name}: run {active} started on {host.name} at the same time and holds the "
                f"container; this launch started nothing: follow that run with `inv status -H "
                f"{host.name}`, or stop it with `inv stop -H {host.name} --run {active}` and launch "
                f"again",
            )
        return Row(ok=False, kind="failed", message=verdict_line(rec), data={"run_id": run_id, "record": rec})
    return Row(
        cells={"run": run_id, "status": rec.get("status", "")},
        data={
            "run_id": run_id,
            "run_dir": plan.run_dir,
            "log": plan.log_path,
            "status": rec.get("status"),
            "swanlab_url": rec.get("swanlab_url"),
            "container": rs.container,
        },
    )


#: the plan's memory lines the launch prints as ``start:``: the learned start (or why not) and the estimate's rung
START_LINES = (
    "starting on the learned",
    "learned start not used",
    "learned start: not looked up",
    "memory-fit: starts on",
)


def launch_one(target, req: LaunchRequest) -> Row:
    """Launch one run on ``target``: :func:`gather_facts` (the run's draft, the probe's facts and the plan it
    finished: :func:`build_plan`, once), then execute it (close the earlier run ``--resume`` continues
    when its supervisor died, :func:`start_run`).

    Returns a :class:`Row` (``data``: run_id, run_dir, log, swanlab_url, status, container, ``start``: the plan's
    learned-start / memory-fit lines, ``fit``: the fastest fit's lines without their ``fit: `` prefix, ``skipped``: the failing quick checks ``--skip-preflight`` let through, and
    ``resume``: one line naming the checkpoint when resuming; a run that failed at once: ``ok=False`` kind ``failed``,
    its one-line message ending in the checks it was launched past). Raises
    RemoteError / PlanError / LaunchRefused with one line; nothing is left behind when the start itself fails.
    """
    facts = gather_facts(target, req)
    plan = facts.plan or build_plan(facts, req)
    if facts.resume is not None:
        dapo_ops.control.launch.resume.close_earlier(target, facts.resume)
    link_wait = req.link_wait if req.sw.logger_enabled else 0.0
    row = start_run(target, plan, run_secret_env(req), link_wait=link_wait, progress=req.progress)
    if row.ok and facts.resume is not None:
        row.data["resume"] = plan.resume_line
    if row.ok:
        row.data["start"] = [ln for ln in plan.memory if ln.startswith(START_LINES)]
        fit = fastfit.LINE_PREFIX  # the fastest fit's lines: each chosen value and why, or kept / falls back
        row.data["fit"] = [ln[len(fit) :] for ln in plan.memory if ln.startswith(fit)]
        row.data["skipped"] = list(facts.skipped)
    elif row.kind == "failed" and facts.skipped:  # failed at once: the check it launched past is the first suspect
        row.message += "; launched past " + "; ".join(f"preflight {s}" for s in facts.skipped) + " (--skip-preflight)"
    return row
