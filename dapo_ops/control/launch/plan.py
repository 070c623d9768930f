"""Settings + host (+ the host's facts) -> a launch plan: the run spec, features, verl argv, ladder, paths.

Two stages, each run once per run (invoke's ``Executor.execute``: expand once, then run):

1. :func:`draft_plan`: :class:`PlanInputs` (the settings, host, mode, run id, env, notifier: known before any host
   is contacted) -> a :class:`Draft`, checked once (:func:`dapo_ops.core.runspec.check_spec`). What the launch's
   probe and ``inv preflight``'s are asked from (model, data, modules: stage 2 does not change them);
2. :func:`make_plan`: the draft + the host's facts (device memory, config.json, learned-start memos, read by the
   launch's probe) -> the :class:`Plan` launch runs (the learned start or memory fit, ``--resume``'s carry, the
   verl argv, the ladder), whose ``spec`` launch writes as ``<run_dir>/spec.json``. What the launch's quick checks
   and ``inv preflight`` judge and compose (:func:`dapo_ops.control.launch.service.finisher`).

Launch, preflight and prepare make their inputs from one launch request
(:func:`dapo_ops.control.launch.service.plan_inputs`); ``inv launch --dry-run`` / ``inv one-step-off --dry-run``
from their settings (rendered by :mod:`dapo_ops.control.launch.dryrun`). Pure: no SSH, no file reads; works with
``host=None`` (the inventory's defaults, :data:`dapo_ops.core.defaults.HOST`: NPU, 8 devices, container ``verl``,
workdir ``/verl``). A :class:`Draft` and a :class:`Plan` are immutable (their spec, argv and lists too): what a
launch learns later is passed in as facts, never copied into them.
"""

from __future__ import annotations

import copy
import functools
import posixpath
from dataclasses import dataclass, field
from typing import Any, Mapping, NoReturn

from dapo_ops.control.inventory.proxy import PROXY_VARS
from dapo_ops.control.settings import HCCL_SETTINGS, Settings, SettingsError, check_tracker_names, given_as
from dapo_ops.core import defaults
import dapo_ops.core.features
from dapo_ops.core import ladder
from dapo_ops.core import memfit
from dapo_ops.core import overrides
from dapo_ops.core import profiles
from dapo_ops.core import runspec
from dapo_ops.core import sanity
from dapo_ops.core import topology
from dapo_ops.core.features import FeatureError, FeatureSet
from dapo_ops.core.profiles import OverrideError
from dapo_ops.core.redact import display_url, has_credentials, redact_argv

SPEC_VERSION = 1
#: the spec's ``host`` of a plan made without a host (``--dry-run`` without an inventory); every other host field of
#: such a plan is the inventory's default (:data:`dapo_ops.core.defaults.HOST`, the ``Host`` model's)
NO_HOST_NAME = "local"


class PlanError(ValueError):
    """A plan cannot be made; one line naming the value and the fix (wraps feature/override/setting errors)."""


def _immutable(self, *args, **kwargs) -> NoReturn:
    raise TypeError(
        f"a Plan is immutable ({type(self).__name__}): build another with make_plan, or copy it "
        f"(dict(...), list(...)) to change the copy"
    )


class FrozenDict(dict):
    """A ``dict`` that refuses every change (``TypeError``); ``json.dumps`` and ``dict(...)`` read it as a dict, a
    copy (``copy.copy``, ``dict(d)``, ``{**d}``) is a plain, changeable dict."""

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _immutable

    def __reduce_ex__(self, protocol):
        return (dict, (dict(self),))


class FrozenList(list):
    """A ``list`` that refuses every change (``TypeError``); equal to a list with the same items, ``json.dumps``
    writes it as an array, a copy (``list(x)``, ``x + [...]``) is a plain list."""

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _immutable
    append = extend = insert = pop = remove = clear = sort = reverse = _immutable

    def __reduce_ex__(self, protocol):
        return (list, (list(self),))


def freeze(value: Any) -> Any:
    """``value`` with every dict / list / tuple inside it (recursively) made a :class:`FrozenDict` /
    :class:`FrozenList`; other values as they are."""
    if isinstance(value, dict):
        return FrozenDict({k: freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return FrozenList(freeze(v) for v in value)
    return value


@dataclass(frozen=True)
class Plan:
    """Everything a launch would do, computed without touching a host; immutable (``dataclasses.FrozenInstanceError``
    on an attribute, ``TypeError`` on a change inside ``spec``, ``argv`` or a list: :func:`freeze`).

    ``spec``: the run spec (docs/design.md "Run spec"; no secrets). ``features``: first attempt's
    :class:`~dapo_ops.core.features.FeatureSet`. ``argv``: the verl argv of attempt 1 (run from
    ``spec["workdir"]``). ``ladder``: human lines of the escalation that would follow.
    ``ckpt_dir``, ``log_path``, ``run_dir``: absolute paths in the container. ``sources``: setting
    name -> flag | env | file | default. ``notes``: one-line remarks (e.g. relative paths resolved).
    ``resume_line``: with ``resume=``, the launch output's line about what the resume continues (made here, once).
    Another note: ``dataclasses.replace(plan, notes=[*plan.notes, line])`` (a new plan, this one unchanged).
    """

    spec: dict
    features: FeatureSet
    argv: list
    ladder: list
    ckpt_dir: str
    log_path: str
    run_dir: str
    sources: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)
    memory: list = field(default_factory=list)  # memory-fit estimate lines (dapo_ops.core.memfit), empty if unknown
    resume_line: str | None = None  # --resume: the launch output's line (control/launch/resume.py line), else None

    def __post_init__(self) -> None:
        for f in ("spec", "argv", "ladder", "sources", "notes", "memory"):
            object.__setattr__(self, f, freeze(getattr(self, f)))

    @functools.cached_property
    def run_spec(self) -> defaults.RunSpec:
        """``spec`` as a :class:`~dapo_ops.core.defaults.RunSpec` (typed keys: ``plan.run_spec.python``), read once
        per plan (:meth:`~dapo_ops.core.defaults.RunSpec.read`; a plan's spec is complete, so it reads back equal):
        what the launch, its quick checks and preflight's ``PlanView`` read of this plan."""
        return defaults.RunSpec.read(self.spec)

    @property
    def command(self) -> str:
        """Shell form (``cd <workdir> && python3 -m ...``), secrets redacted."""
        return overrides.command_string(redact_argv(self.argv), self.spec.get("workdir"))


def _host_attr(host, name: str):
    """``host``'s field ``name``; the inventory's default (:data:`dapo_ops.core.defaults.HOST`) when there is no host
    or the field is None (:data:`NO_HOST_NAME` for ``name``)."""
    v = getattr(host, name, None)
    if v is not None:
        return v
    return NO_HOST_NAME if name == "name" else defaults.HOST[name]


def _resolve_path(value: str, base: str | None, workdir: str) -> str:
    v = str(value or "")
    if not v or v.startswith("/"):
        return v
    return posixpath.normpath(posixpath.join(base or workdir, v))


def run_values(settings) -> dict:
    """Every run setting's value: a resolved :class:`~dapo_ops.control.settings.Settings` has them all; a plain dict
    of some gets the others from the one defaults table (:func:`dapo_ops.core.defaults.run_settings`)."""
    return defaults.run_settings(settings.values if isinstance(settings, Settings) else settings)


@dataclass(frozen=True, kw_only=True)
class PlanInputs:
    """What one run is planned from: the planner's ONE parameter list (:func:`draft_plan`). Launch, preflight and
    prepare make it from a launch request (:func:`dapo_ops.control.launch.service.plan_inputs`); the dry run and the
    multi-host dry run from their settings. Known before any host is contacted, except a ``--resume`` run's, whose
    settings and ``resume`` come from the earlier run's spec on the host. Immutable.

    ``settings``: :class:`dapo_ops.control.settings.Settings` (or a plain dict with the same names). ``host``:
    inventory ``Host`` or None (its fields: :data:`dapo_ops.core.defaults.HOST`). ``mode``: ``dapo`` | ``one-step-off``. ``run_id``: e.g.
    :func:`dapo_ops.core.runstate.new_run_id`. ``swanlab_logger``: add ``swanlab`` to ``trainer.logger``.
    ``profile``: ``0.9`` | ``0.8`` (``settings["profile"]`` wins when set). ``proxy``: the inventory's ``[proxy]``
    (settings' ``http_proxy``/``https_proxy`` win). ``extra_overrides``: ``--override`` values, appended last.
    ``topology``: a multi-host run's settings (:meth:`dapo_ops.core.topology.Topology.settings`: ``nnodes``,
    ``n_gpus_per_node``, the pools), over the settings before the check (which then skips the per-host device count:
    the topology checked it). ``public_env``: the launch's public env of verl (its proxy variables and SwanLab's,
    :func:`dapo_ops.control.launch.service.plan_inputs`): the plan's proxy variables give way to it; None: the
    settings' and inventory's proxy only (the dry run). ``notify``: the spec's ``notify`` (the notifier's public
    config). ``resume``: :class:`dapo_ops.control.launch.resume.ResumeFacts` of the run ``--resume`` continues
    (``settings`` are already :func:`~dapo_ops.control.launch.resume.resumed_settings`), else None: the plan's
    second stage takes its checkpoint dir, experiment and project, keeps its explicit, learned and ladder-added
    features and sets ``spec["resume_of"]`` (:func:`dapo_ops.control.launch.resume.carry`).
    """

    settings: Any
    host: Any = None
    mode: str
    run_id: str
    swanlab_logger: bool
    profile: str = "0.9"
    proxy: Mapping[str, str] | None = None
    extra_overrides: tuple[str, ...] = ()
    topology: Mapping | None = None
    public_env: Mapping[str, str] | None = None
    notify: Mapping | None = None
    resume: Any = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "extra_overrides", tuple(self.extra_overrides or ()))


@dataclass(frozen=True)
class Draft:
    """Stage 1 of a plan (:func:`draft_plan`): the run spec of ``inputs``, checked once
    (:func:`dapo_ops.core.runspec.check_spec`, with the host's device count), before the host's facts are known: no
    learned start, memory fit, ``--resume`` carry or pinned FSDP strategy yet (:func:`make_plan` adds them).
    ``features``: the first attempt's as set (:class:`~dapo_ops.core.features.FeatureSet`). ``argv``: the verl argv
    of this spec and these features (``[launcher.., python, -m, module, overrides..]``); the plan's may differ (the
    fastest fit, memory rungs). ``notes``: the plan's one-line remarks so far. Immutable as :class:`Plan` is
    (:func:`freeze`). What the launch's probe and preflight's are asked from, and what :func:`make_plan` finishes
    (the checks judge the finished plan): ONE draft per run."""

    inputs: PlanInputs
    spec: dict
    features: FeatureSet
    argv: list
    notes: list

    def __post_init__(self) -> None:
        for f in ("spec", "argv", "notes"):
            object.__setattr__(self, f, freeze(getattr(self, f)))


def draft_plan(inputs: PlanInputs) -> Draft:
    """Stage 1 of the planner: ``inputs`` -> the run's :class:`Draft` (paths, settings, features, env, notifier,
    verl entry), checked once (:func:`dapo_ops.core.runspec.check_spec` with the host's device count; a topology's
    per-node split was checked by :func:`dapo_ops.core.topology.plan_topology`). Pure: no host is contacted.

    :raises PlanError: one line: unknown features, impossible splits, bad values, a container setting on a bare
        host, names the tracker of ``trainer.logger`` would refuse
        (:func:`dapo_ops.control.settings.check_tracker_names`).
    """
    try:
        check_tracker_names(inputs.settings, ["swanlab"] if inputs.swanlab_logger else [])
        return _draft(inputs)
    except (FeatureError, OverrideError, SettingsError) as e:
        raise PlanError(str(e)) from None


def make_plan(draft: Draft, memory: Mapping | None = None) -> Plan:
    """Stage 2 of the planner: ``draft`` finished with the host's facts -> the one immutable :class:`Plan` a launch
    runs: the FSDP strategy of the run ``--resume`` continues, the learned start, else the memory fit, the pinned
    one-device FSDP strategy, ``--resume``'s checkpoint dir, names and features, the verl argv
    (:func:`dapo_ops.core.overrides.verl_argv`), the sanity warnings and the ladder. Pure; ``draft`` is unchanged.

    ``memory``: the host's facts, ``{"model_config": config.json dict, "device_gib": float | None}`` for the
    memory-fit estimate (:func:`dapo_ops.core.memfit.fit`): when the first attempt cannot fit, the plan starts on the
    first rung that fits (features and ``spec["setting_changes"]`` with source ``estimate``); without ``device_gib``
    only the per-phase peaks are shown. With the host class too (``device_name``, ``device_mib``: the probe's) the
    spec gets its configuration key (``spec["learn"]``, :mod:`dapo_ops.core.learned`), and ``memos`` (the host's
    ``<runs_dir>/.learned``, the same probe) give a learned start: a memo of the same key, not contrary to an
    explicit setting, starts the plan on its rungs (source ``learned``; the estimate then only reports); ``memos``
    None: not looked up (``--resume``, with ``learned_skip``: why). None: no facts (a dry run, a multi-host run).

    :raises PlanError: one line (nothing fits the device memory, with ``memory_fit`` = ``start``; a value the verl
        argv cannot carry).
    """
    try:
        return _finish(draft, memory)
    except (FeatureError, OverrideError, memfit.FitError, SettingsError) as e:
        raise PlanError(str(e)) from None


def container_for(settings, host=None) -> str:
    """The container a run of ``settings`` on ``host`` uses (spec ``container``): the ``container`` setting
    (``--container`` / ``CONTAINER``), else the inventory's. A bare host (``runtime = "host"``) has none in fact:
    its Target ignores it."""
    return run_values(settings)["container"] or _host_attr(host, "container")


def _draft(inputs: PlanInputs) -> Draft:
    settings, host, mode, run_id = inputs.settings, inputs.host, inputs.mode, inputs.run_id
    v = run_values(settings)
    if _host_attr(host, "runtime") == "host" and v["container"]:
        raise PlanError(
            f"container '{v['container']}' was given (--container / CONTAINER) but host "
            f"'{_host_attr(host, 'name')}' has runtime = \"host\" (no container); drop the setting or "
            'use a runtime = "docker" host'
        )
    profile = v["profile"] or inputs.profile
    framework = v["framework"]
    profiles.check_choice(mode, profiles.MODES, "mode", "inv launch (dapo) / inv one-step-off")
    profiles.check_choice(framework, profiles.FRAMEWORKS, "framework", "FRAMEWORK / --framework")
    v09 = profile == "0.9"
    fs = dapo_ops.core.features.resolve(
        v["features"],
        bool(v["offload"]),
        implied_off=dapo_ops.core.features.implies_off(profile, framework, _host_attr(host, "accelerator")),
    )

    workdir = _host_attr(host, "workdir")
    runs_dir = (
        host.runs_path if hasattr(host, "runs_path") else defaults.runs_path(getattr(host, "runs_dir", None), workdir)
    )
    run_dir = f"{runs_dir.rstrip('/')}/{run_id}"
    ckpt_dir = f"{run_dir}/checkpoints"
    devices = int(_host_attr(host, "devices"))
    notes: list[str] = []

    model = _resolve_path(v["model"], _host_attr(host, "model_dir"), workdir)
    train = _resolve_path(v["train_file"], _host_attr(host, "data_dir"), workdir)
    val = _resolve_path(v["val_file"], _host_attr(host, "data_dir"), workdir)
    for name, raw, res in (
        ("model", v["model"], model),
        ("train_file", v["train_file"], train),
        ("val_file", v["val_file"], val),
    ):
        if raw and raw != res:
            notes.append(f"{name} {raw!r} is relative: using {res}")

    trainer_gpus = int(v["trainer_gpus"])
    rollout_gpus = int(v["rollout_gpus"])
    # the spec's forms (dapo_ops/core/defaults.py SPEC_SETTINGS): 0 -> None where None is verl's own "unset"
    mpe = int(v["max_position_embeddings"] or 0) or None
    s = {
        "model_path": model,
        "train_file": train,
        "val_file": val,
        "steps": v["steps"],
        "trainer_gpus": trainer_gpus,
        "rollout_gpus": rollout_gpus,
        "nnodes": 1,
        "n_gpus_per_node": devices if host is not None else trainer_gpus + rollout_gpus,
        "max_prompt_length": int(v["max_prompt_length"]),
        "max_response_length": int(v["max_response_length"]),
        "save_freq": int(v["save_freq"]),
        "rollout_tp": int(v["rollout_tp"]),
        "gpu_memory_utilization": _rollout_share(settings, v, mode),
        "train_batch_size": int(v["train_batch_size"]),
        "ppo_mini_batch_size": int(v["ppo_mini_batch_size"]),
        "rollout_n": int(v["rollout_n"]),
        "micro_batch_size": int(v["micro_batch_size"]),
        "max_position_embeddings": mpe,
        "trainer_mode": v["trainer_mode"],
        "max_staleness": int(v["max_staleness"]),
        "memory_fit": v["memory_fit"],
        "parameter_sync_step": int(v["parameter_sync_step"]),
        # 0: keep every save (null, verl's own default); 0.8: not emitted (the 0.8-era behaviour: every save kept),
        # so preflight's disk check must not count it
        "max_actor_ckpt_to_keep": (int(v["max_actor_ckpt_to_keep"]) or None) if v09 else None,
        "project": v["project"],
        "experiment": v["experiment"] or run_id,
        "ckpt_dir": ckpt_dir,
        "extra_overrides": list(inputs.extra_overrides),
    }
    s["rollout_eager"] = bool(v["rollout_eager"])
    s["allow_short_data"] = bool(v["allow_short_data"])
    s["test_freq"] = int(v["test_freq"])
    s["dapo_recipe"] = v09  # verl's DAPO recipe keys where the runbook is silent (core/defaults.py DAPO_RECIPE)
    s["vanilla_mbridge"] = bool(v["vanilla_mbridge"]) and framework == "megatron"
    # the Megatron sizes by the accelerator's usual memory: the host's facts are not known yet
    notes += _parallel(v, s, framework, mode, model, None, _host_attr(host, "accelerator"))
    if inputs.topology:  # a multi-host run: the pools of the topology (the per-node split was checked by plan_topology)
        s.update(inputs.topology)
    env: dict[str, str] = {}
    for k in ("http_proxy", "https_proxy", "no_proxy"):
        val = v.get(k) or (inputs.proxy or {}).get(k) or ""  # no_proxy: the inventory's only
        if val and k != "no_proxy" and has_credentials(val):
            # credentials never enter the spec or the plan: launch sends them in secret.env (proxy.split_secret)
            notes.append(f"{k} carries credentials ({display_url(val)}): sent in secret.env, not in the spec")
        elif val:
            env[k] = val
    if v["swanlab_mode"]:
        env["SWANLAB_MODE"] = v["swanlab_mode"]
    env.update(run_env(v, profile, _host_attr(host, "accelerator")))
    if (
        inputs.public_env is not None
    ):  # the launch's: its proxy variables (control.inventory.proxy.run_proxy_env), SwanLab's
        env = {k: x for k, x in env.items() if k.lower() not in PROXY_VARS}
        env.update(inputs.public_env)
    notify = inputs.notify
    spec = {
        "version": SPEC_VERSION,
        "run_id": run_id,
        "host": _host_attr(host, "name"),
        "container": container_for(v, host),
        "runtime": _host_attr(host, "runtime"),  # a bare host runs no container: its commands run as they are
        "mode": mode,
        "framework": framework,
        "profile": profile,
        "accelerator": _host_attr(host, "accelerator"),
        "workdir": workdir,
        "python": _host_attr(host, "python"),
        "run_dir": run_dir,
        "settings": s,
        "features": fs.to_json(),
        "disabled_features": sorted(fs.disabled),
        "max_oom_retries": int(v["max_oom_retries"]),
        # where it came from, as the user gave it (`--max-oom-retries 1`, `MAX_OOM_RETRIES=1`, the config file, the
        # default): the supervisor's "after N OOM retries (...)" and the dry run quote it
        "max_oom_retries_from": given_as(settings, "max_oom_retries", int(v["max_oom_retries"])),
        "hang_timeout_s": int(v["hang_timeout"]),
        "logger": ["console", "swanlab"] if inputs.swanlab_logger else ["console"],
        "env": env,
        "notify": dict(notify) if notify is not None else {"on_escalation": False, "on_success": False, "webhooks": []},
        "ray": None,
    }
    tunables = _host_attr(host, "supervisor")
    if tunables:  # the host's [hosts.<name>.supervisor] table: the supervisor's tunables for this run
        spec["supervisor"] = dict(tunables)
    if v09 and spec["accelerator"] == "npu":
        spec["launcher"] = list(topology.CANN_LAUNCHER)
        notes.append(
            "CANN: verl starts through bash, which sources "
            + " and ".join(topology.CANN_SET_ENV)
            + " (those present) when ASCEND_TOOLKIT_HOME is unset; inv preflight says which it found"
        )
    notes.append(
        "validation before training (verl's trainer.val_before_train): the first attempt only; retries and "
        "--resume skip it (--override trainer.val_before_train=True keeps it)"
    )
    _refuse_feature_contradiction(spec, fs)
    # the one check of the plan (with the host's device count; a topology checked its own per node)
    host_devices = devices if host is not None and not inputs.topology else None
    runspec.check_spec(spec, host_devices=host_devices)
    return Draft(inputs=inputs, spec=spec, features=fs, argv=overrides.verl_argv(spec, fs), notes=notes)


def _refuse_feature_contradiction(spec: dict, fs: FeatureSet) -> None:
    """Refuse an ``--override`` of a feature's key that contradicts the user's explicit choice of that feature
    (:func:`dapo_ops.core.memladder.feature_contradiction`). :raises PlanError: one line naming both."""
    from dapo_ops.core import memladder

    rs = defaults.RunSpec.read(spec)
    why = memladder.feature_contradiction(
        fs, dict(rs.settings, framework=rs.framework, profile=rs.profile, accelerator=rs.accelerator)
    )
    if why:
        raise PlanError(why)


def _finish(draft: Draft, memory: Mapping | None) -> Plan:
    inputs = draft.inputs
    settings, earlier = inputs.settings, inputs.resume
    spec = copy.deepcopy(draft.spec)  # plain dicts and lists: the draft stays as it is
    s = spec["settings"]
    fs, notes = draft.features, list(draft.notes)
    mode, framework, run_dir, ckpt_dir = spec["mode"], spec["framework"], spec["run_dir"], s["ckpt_dir"]
    if framework == "megatron" and memory and (memory.get("model_config") or memory.get("device_gib")):
        # the Megatron sizes by the model's config.json and the device memory the host's facts give (the draft sized
        # them by the model's name and the accelerator's usual memory): its notes replaced where they stood
        at = [i for i, n in enumerate(notes) if n.startswith(MEGATRON_NOTES)]
        sized = _parallel(run_values(settings), s, framework, mode, s["model_path"], memory, spec["accelerator"])
        notes[at[0] : at[-1] + 1] = sized
    if earlier is not None and earlier.strategy:  # FSDP: its checkpoint's strategy (fsdp / fsdp2 do not load across)
        spec["strategy"] = earlier.strategy
    fs, learned_lines = _learned_start(spec, fs, memory, settings, notes)
    fs, fit_lines = _fastest_fit(spec, fs, memory, settings)
    fs, mem_lines = _memory_fit(spec, fs, memory, explicit_off(settings), capped=bool(fit_lines))
    _pin_fsdp_strategy(spec)
    mem_lines = learned_lines + fit_lines + mem_lines
    resume_line = None
    if earlier is not None:  # --resume: the earlier run's checkpoint dir, names and features
        from dapo_ops.control.launch import resume

        # --no-offload / ENABLE_OFFLOAD=False given now: the resumed run starts without the offload it carried
        sources = getattr(settings, "sources", None)  # a plain dict of settings has none: nothing given
        off_now = resume.given_now(sources, "offload") and not run_values(settings)["offload"]
        carried, fs = resume.carry(earlier, fs, frozenset({"offload"}) if off_now else frozenset())
        s.update(carried)
        spec["features"] = fs.to_json()
        spec["resume_of"] = earlier.run_id
        bad = resume.diverged_at(earlier)
        if bad is not None:  # its metrics went bad: the supervisor resumes from the checkpoint before that step
            spec["diverged_at"] = bad
        rungs, not_kept = resume.ladder_changes(earlier.record, s, dict(getattr(settings, "sources", {}) or {}))
        if rungs:  # its ladder goes on where the earlier run's was (resume.ladder_changes)
            spec["setting_changes"] = rungs
        ckpt_dir = s["ckpt_dir"]
        changed = resume.replaced(settings, earlier.spec, spec) if hasattr(settings, "sources") else []
        resume_line = resume.line(spec, fs, earlier, not_kept, changed)
    argv = overrides.verl_argv(spec, fs, spec.get("setting_changes"))
    notes += dapo_ops.core.features.implied_notes(fs, run_values(settings)["features"])
    trainer_devs = memfit.trainer_world(s, mode == "one-step-off")
    notes += ["sanity:  " + w for w in sanity.warnings(argv, trainer_devs)]  # warn only
    lad = ladder.plan_ladder(
        fs,
        spec["max_oom_retries"],
        dict(s, **(spec.get("setting_changes") or {}), framework=framework, mode=mode, strategy=spec.get("strategy")),
    )
    return Plan(
        spec=spec,
        features=fs,
        argv=argv,
        ladder=lad,
        ckpt_dir=ckpt_dir,
        log_path=f"{run_dir}/train.log",
        run_dir=run_dir,
        sources=dict(getattr(settings, "sources", {}) or {}),
        notes=notes,
        memory=mem_lines,
        resume_line=resume_line,
    )


def _pin_fsdp_strategy(spec: dict) -> None:
    """Pin ``spec["strategy"]`` of a one-device FSDP training pool (``inv launch`` on one device, ``one-step-off
    --trainer-gpus 1``): ``fsdp2`` when the first attempt starts with the FSDP2 offload policy (an estimate or learned
    rung: verl's FSDP1 never reads it, ``verl/workers/engine/fsdp/transformer_impl.py:423-463``), else ``fsdp``
    (:func:`dapo_ops.core.profiles.fsdp_strategy`). Every attempt then runs the strategy its checkpoints were written
    with (the two do not load into each other): the ladder skips the offload-policy rung on ``fsdp`` and a rollback of
    the policy keeps ``fsdp2``. In place; a strategy already pinned (``--resume``) stays."""
    s = dict(spec["settings"], **(spec.get("setting_changes") or {}))
    if spec["framework"] != "fsdp" or spec.get("strategy"):
        return
    world = memfit.trainer_world(s, spec["mode"] == "one-step-off")
    if world == 1:
        spec["strategy"] = profiles.fsdp_strategy(world, None, bool(s.get("fsdp_offload_policy")))


def _given(settings, name: str) -> bool:
    """True when the user set ``name`` (flag, env, file, resume), not its default (a plain dict: the key is there)."""
    sources = getattr(settings, "sources", None)
    if sources is not None:
        return sources.get(name, "default") != "default"
    return hasattr(settings, "get") and settings.get(name) is not None


#: one-step-off's rollout pool holds only vLLM, so its share defaults higher than a colocated one (verl's DAPO
#: one-step-off example: ``gpu_memory_utilization=0.80``, ``verl/experimental/one_step_off_policy/shell/
#: dapo_7b_math_megatron_4_12.sh``; the colocated default 0.6 leaves the actor its memory)
DEDICATED_ROLLOUT_SHARE = 0.8


def _rollout_share(settings, v: dict, mode: str) -> float:
    if mode == "one-step-off" and not _given(settings, "gpu_memory_utilization"):
        return DEDICATED_ROLLOUT_SHARE
    return float(v["gpu_memory_utilization"])


#: how the notes of :func:`_parallel` begin (the plan's second stage replaces the draft's with the host's facts)
MEGATRON_NOTES = ("Megatron trainer TP ", "Megatron gradient checkpointing: ")


def _parallel(v: dict, s: dict, framework: str, mode: str, model: str, memory, accelerator: str) -> list[str]:
    """Resolve ``trainer_tp`` / ``trainer_pp`` (settings ``v``) into ``s`` (Megatron: the setting, or 0 = by model
    size and device memory, :func:`dapo_ops.core.memfit.default_parallel`; FSDP: None) and return the plan's note."""
    tp, pp = int(v["trainer_tp"] or 0), int(v["trainer_pp"] or 0)
    if framework != "megatron":
        if tp > 1 or pp > 1:
            raise PlanError(
                f"TRAINER_TP={tp} / TRAINER_PP={pp} set Megatron's parallel sizes, but FRAMEWORK=fsdp; "
                "unset them or use FRAMEWORK=megatron"
            )
        s["trainer_tp"] = s["trainer_pp"] = s["megatron_recompute"] = None
        return []
    world = (s["trainer_gpus"] if mode == "one-step-off" else s["n_gpus_per_node"]) * max(1, int(s["nnodes"]))
    cfg = (memory or {}).get("model_config")
    try:
        params_b = memfit.param_count(memfit.Model.from_config(cfg)) / 1e9 if cfg else None
    except memfit.EstimateUnavailable:
        params_b = None
    params_b = params_b or memfit.params_from_name(model)
    gib = (memory or {}).get("device_gib")
    dev_gib = gib or memfit.DEVICE_GIB_BY_ACCELERATOR.get(accelerator, 64.0)
    dtp, dpp = memfit.default_parallel(params_b, dev_gib, world)
    # what gradient checkpointing runs: full/uniform/1 on <= 64 GiB devices like verl's NPU Megatron scripts
    s["megatron_recompute"] = profiles.megatron_recompute_for(dev_gib)
    s["trainer_tp"], s["trainer_pp"] = tp or dtp, pp or dpp
    if (s["trainer_tp"] * s["trainer_pp"]) and world % (s["trainer_tp"] * s["trainer_pp"]):
        raise PlanError(
            f"TRAINER_TP={s['trainer_tp']} x TRAINER_PP={s['trainer_pp']} does not divide the "
            f"{world} trainer devices; choose sizes whose product divides {world}"
        )
    rec = (
        "Megatron gradient checkpointing: full recompute (recompute_granularity=full, method uniform, 1 layer) on "
        f"{dev_gib:g} GiB devices, like verl's NPU Megatron scripts"
        if s["megatron_recompute"] == "full"
        else f"Megatron gradient checkpointing: verl's selective core_attn recompute on {dev_gib:g} GiB devices"
    )
    if tp and pp:
        return [rec]
    size = f"~{params_b:.1f}B parameters" if params_b else "model size unknown"
    where = (
        f"{gib:g} GiB"
        if gib
        else f"<= {memfit.DEVICE_GIB_BY_ACCELERATOR.get(accelerator, 64.0):g} GiB (assumed for {accelerator})"
    )
    return [
        f"Megatron trainer TP {s['trainer_tp']} PP {s['trainer_pp']} (TRAINER_TP/TRAINER_PP unset: {size}, "
        f"{where} devices, like verl's Megatron examples; dapo_ops/core/memfit.py PARALLEL_TABLE)",
        rec,
    ]


def _learned_start(
    spec: dict, fs: FeatureSet, memory: Mapping | None, settings, notes: list
) -> tuple[FeatureSet, list[str]]:
    """The learned start (:mod:`dapo_ops.core.learned`): set ``spec["learn"]`` (the configuration key the supervisor
    files a memo under) when the host class is known, and start on a matching memo's rungs unless it would override
    an explicit setting. In place on ``spec`` (``features``, ``setting_changes``, ``learned``); returns the features
    and the plan's memory lines; without device facts (a dry run) a note says where the launch looks."""
    from dapo_ops.core import learned

    mem = memory or {}
    if not mem.get("device_mib") or not mem.get("model_config"):
        runs = posixpath.dirname(spec["run_dir"])
        notes.append(
            f"learned starts: inv launch looks them up in {runs}/{learned.DIRNAME} (its probe reads them "
            f"with the device memory; this plan has no device facts)"
        )
        return fs, []
    k = learned.key(
        spec,
        fs.to_json(),
        fs.disabled,
        learned.model_identity(mem["model_config"], spec["settings"]["model_path"]),
        learned.host_class(spec["accelerator"], mem.get("device_name") or "", mem["device_mib"]),
    )
    fp = learned.fingerprint(k)
    spec["learn"] = {"fingerprint": fp, "key": k}
    if mem.get("memos") is None:
        return fs, [f"learned start: not looked up ({mem.get('learned_skip') or 'no memos read'})"]
    memo = learned.find(mem["memos"], k)
    if memo is None:
        return fs, []
    given = {}
    for name in set(learned.SETTING_OF_CHANGE.values()):
        if _given(settings, name):
            where = (getattr(settings, "origins", None) or {}).get(name) or name
            given[name] = f"{where}={run_values(settings)[name]}"
    given.update(explicit_off(settings))  # --no-offload / ENABLE_OFFLOAD=false / [run] offload = false
    rs = defaults.RunSpec.read(spec)
    keyed = dict(rs.settings, framework=rs.framework, profile=rs.profile, accelerator=rs.accelerator)
    why = learned.conflicts(memo, fs.disabled, given, rs.settings.get("extra_overrides") or [], keyed, fs.names())
    if why:
        spec["learned"] = {"used": False, "run_id": memo.get("run_id"), "fingerprint": fp, "why": why}
        return fs, [learned.not_used_line(memo, why)]
    fs, changes = learned.apply(memo, fs)
    spec["features"] = fs.to_json()
    spec["setting_changes"] = changes
    line = learned.start_line(memo)
    spec["learned"] = {"used": True, "run_id": memo.get("run_id"), "fingerprint": fp, "line": line}
    return fs, [line]


def explicit_off(settings) -> dict[str, str]:
    """The feature rungs the user turned off by their own setting, feature -> how (``{"offload": "--no-offload"}``,
    :func:`_said_no_offload`): neither a learned start (:func:`dapo_ops.core.learned.conflicts`) nor the memory-fit
    estimate's start rung (:func:`dapo_ops.core.memfit.fit`'s ``off``) adds one."""
    said_no = _said_no_offload(settings)
    return {"offload": said_no} if said_no else {}


def _said_no_offload(settings) -> str | None:
    """Where the user turned offload off by its own setting (``--no-offload``, ``ENABLE_OFFLOAD=false``, ``[run]
    offload = false in the config file``), as the settings' precedence settled it
    (:func:`dapo_ops.control.settings.resolve`); None when offload is on or left at its default."""
    if not _given(settings, "offload") or run_values(settings)["offload"]:
        return None
    if not isinstance(settings, Settings):  # a plain dict of settings: no source to name
        return "offload=False"
    where = {"flag": "--no-offload", "file": settings.origins["offload"].replace(" offload ", " offload = false ", 1)}
    return where.get(settings.sources["offload"], f"{settings.origins['offload']}=false")


def _fastest_fit(spec: dict, fs: FeatureSet, memory: Mapping | None, settings) -> tuple[FeatureSet, list[str]]:
    """The fastest configuration that fits (:func:`dapo_ops.core.fastfit.choose`: token budgets or
    micro-batches, gradient checkpointing, the rollout share, vLLM's ``max_num_seqs`` / ``max_num_batched_tokens``),
    after the user's explicit settings and under a used learned memo's phases. In place on ``spec`` (``settings``,
    ``features``, ``fit``); returns the features and the plan's ``fit:`` lines. Without the model's shape: nothing;
    without the device memory (a dry run) or with ``MEMORY_FIT=warn``: reported (a dry run: against the
    accelerator's usual memory), not applied; the launch chooses on the real figure."""
    from dapo_ops.core import fastfit

    given = [n for n in ("gpu_memory_utilization", "micro_batch_size") if _given(settings, n)]
    try:
        m = memfit.Model.from_config((memory or {}).get("model_config") or {})
    except memfit.EstimateUnavailable:
        return _packed_cap(spec, fs, given, [])
    gib = (memory or {}).get("device_gib")
    dev = float(
        gib or memfit.DEVICE_GIB_BY_ACCELERATOR.get(spec.get("accelerator", defaults.HOST["accelerator"]), 64.0)
    )
    rungs = (spec.get("setting_changes") or {}).get("memory_rungs") or []
    c = fastfit.choose(
        m,
        spec,
        fs,
        dev,
        given=given,
        ran_out=[r.get("phase") for r in rungs if r.get("source") == "learned"],
    )
    if not gib:  # a dry run: what a device of the usual memory would get; the launch chooses on the real figure
        why = (
            f"{dev:g} GiB assumed per {spec.get('accelerator')} device: not applied, inv launch chooses on the real one"
        )
        return _packed_cap(spec, fs, given, c.lines(why), c)
    if spec["settings"].get("memory_fit") == "warn":
        return _packed_cap(spec, fs, given, c.lines("MEMORY_FIT=warn: not applied"), c)
    spec["settings"].update(c.settings)
    spec["features"] = c.features.to_json()
    spec["fit"] = c.record()
    return c.features, c.lines()


def _packed_cap(spec: dict, fs: FeatureSet, given: list[str], lines: list[str], proposed=None):
    """The packed-attention cap (:func:`dapo_ops.core.fastfit.packed_cap`) applied to ``spec`` (in place: its
    ``settings``) where the fastest fit was not (no model shape, no device memory, ``MEMORY_FIT=warn``): the cap is
    about sdpa's speed over a packed micro-batch, not memory, so it holds whatever the estimate knows. ``lines``: the
    fit's lines so far, ``proposed``: its :class:`~dapo_ops.core.fastfit.Choices` (a knob it proposes a value for
    keeps that line alone: its proposal is within the cap). Returns the features and the lines."""
    from dapo_ops.core import fastfit

    cap = fastfit.packed_cap(spec, fs, given=given)
    spec["settings"].update(cap.settings)
    said = {c.name for c in (proposed.chosen if proposed is not None else [])}
    return fs, lines + [ln for c, ln in zip(cap.chosen, cap.lines()) if c.name not in said]


def not_chosen_line(capped: bool) -> str:
    """The ``fit:`` line of a plan made without config.json and device memory (a dry run without ``-H``): what the
    launch's fastest fit chooses there, and what the command shows instead. ``capped``: the packed-attention cap
    (:func:`_packed_cap`, its own ``fit:`` lines) changed a budget or micro-batch of this plan: it holds here as in
    the launch, whose fastest fit stays within it (:func:`dapo_ops.core.fastfit.choose`)."""
    head = (
        "fit: not chosen here (no config.json, no device memory): inv launch sets the token budgets, "
        "gpu_memory_utilization, max_num_seqs / max_num_batched_tokens and gradient checkpointing from them "
        "(what you set stays"
    )
    if not capped:
        return head + "); the others in the command below are the defaults it starts from"
    return (
        head + ", and so does the packed-attention cap of the fit: lines above: the launch chooses within it); the "
        "command below has the defaults it starts from with that cap applied"
    )


def _memory_fit(
    spec: dict,
    fs: FeatureSet,
    memory: Mapping | None,
    off: Mapping[str, str] | None = None,
    capped: bool = False,
) -> tuple[FeatureSet, list[str]]:
    """Apply the memory-fit estimate to ``spec`` (in place: features, ``setting_changes``); the plan's lines.
    Raises :class:`dapo_ops.core.memfit.FitError` when nothing fits, unless the ``memory_fit`` setting is ``warn``
    (then the lines only report what the estimate says). ``off``: the feature rungs the user turned off by their own
    setting (:func:`explicit_off`): the estimate never starts on one; a run that fits only with it is refused (warned
    under ``MEMORY_FIT=warn``) in one line naming it."""
    cfg = (memory or {}).get("model_config")
    if not cfg:
        return fs, [
            "memory-fit estimate: the model's config.json is not readable here (inv preflight reads it "
            "in the container)",
            # the launch's fastest fit (core/fastfit.py) reads it there with the device memory: a new-user trial
            # took this dry run's 20480 / 30720 / 0.6 for what ran (23552 / 48128 / 0.65 + vLLM's limits)
            not_chosen_line(capped),
        ]
    gib = (memory or {}).get("device_gib")
    try:
        memfit.Model.from_config(cfg)
    except memfit.EstimateUnavailable as e:
        return fs, [str(e)]
    if not gib:  # dry run: judged against the accelerator's usual memory, nothing changed (launch re-plans)
        assumed = memfit.DEVICE_GIB_BY_ACCELERATOR.get(spec["accelerator"], 64.0)
        m = memfit.Model.from_config(cfg)
        est = memfit.estimate(m, memfit.setup_from_spec(spec, fs, assumed))
        par = memfit.parallel_sizes(spec)
        tp = f" with trainer TP {par['tp']} PP {par['pp']}" if spec.get("framework") == "megatron" else ""
        out = [
            f"memory-fit estimate{tp} (device memory unknown here: assuming {assumed:g} GiB per "
            f"{spec.get('accelerator')} device; inv preflight checks the real figure): "
            f"{'fits' if est.fits else 'does not fit'}: {est.line()}"
        ]
        if not est.fits:
            prop = memfit.propose_parallel(m, spec, fs, assumed)
            out += [f"memory-fit: {prop}"] if prop else []
        return fs, out
    if (spec.get("learned") or {}).get("used"):  # measured beats estimated: the estimate only reports
        try:
            f = memfit.fit(cfg, spec, fs, float(gib), off=off)
        except memfit.FitError as e:
            return fs, [f"{e} (not used: the learned start was measured on this host class)"]
        start = "memory-fit: starts on rung(s)"
        return fs, [
            ln.replace(start, "memory-fit: the estimate would add rung(s)")
            + " (not used: the learned start was measured on this host class)"
            if ln.startswith(start)
            else ln
            for ln in f.lines()
        ]
    if spec["settings"].get("memory_fit") == "warn":  # report only: the first attempt runs as planned
        try:
            f = memfit.fit(cfg, spec, fs, float(gib), off=off)
        except memfit.FitError as e:
            return fs, [f"{e} (MEMORY_FIT=warn: launching as planned; the device-OOM ladder decides)"]
        return fs, [
            ln.replace(
                "starts on rung(s)", "MEMORY_FIT=warn: launching as planned; MEMORY_FIT=start would start on rung(s)"
            )
            for ln in f.lines()
        ]
    f = memfit.fit(cfg, spec, fs, float(gib), off=off)
    if f.rungs:
        spec["features"] = f.features.to_json()
        spec["setting_changes"] = dict(f.setting_changes)
    return f.features, f.lines()


#: verl 0.9.1 sends the total-steps, save and resume lines the supervisor reads through Python logging at INFO
#: (``verl/trainer/ppo/v1/trainer_base.py:102``: ``logger.setLevel(os.getenv("VERL_LOGGING_LEVEL", "INFO"))``):
#: a container-wide WARN would hide them, so the run's environment pins INFO.
VERL_LOGGING_LEVEL = "INFO"


def run_env(v: Mapping, profile: str, accelerator: str) -> dict:
    """Public environment the run's verl gets (``spec["env"]``; shown in the plan): ``VERL_LOGGING_LEVEL=INFO``
    on the 0.9 profile, and on NPU the HCCL timeouts (seconds) and socket port ranges from the settings ``v``
    (every run setting, :func:`_values`; empty value: not set, verl's own default applies)."""
    env: dict[str, str] = {}
    if profile == "0.9":
        env["VERL_LOGGING_LEVEL"] = VERL_LOGGING_LEVEL
    if accelerator == "npu":
        for name, var in HCCL_SETTINGS:
            if v[name] not in (None, ""):
                env[var] = str(v[name])
    return env


def trainer_note(spec: dict) -> str:
    """One line naming the verl trainer and mode the spec runs, and why (for the plan)."""
    ent = profiles.entry(spec["profile"], spec["mode"], spec["framework"])
    s = spec["settings"]
    mode = profiles.v1_mode(ent, s["trainer_mode"])
    if mode is None:
        return f"trainer: {ent.module} (verl {spec['profile']} profile; the 0.8-era entry, no V1 trainer mode)"
    why = {
        "colocate_async": f"single-async DAPO (colocated rollout, 1 warm-up batch, partial rollout, staleness "
        f"<= {s['max_staleness'] or 'unbounded'}); --mode sync for synchronous DAPO",
        "sync": "synchronous DAPO (--mode sync)",
        "separate_async": f"one-step-off: trainer {s['trainer_gpus']} + rollout {s['rollout_gpus']} devices, "
        f"weights synced every {runspec.parameter_sync_step(s)} mini-batches",
    }[mode]
    return f"trainer: {ent.module} V1 trainer_mode={mode}: {why}"
