"""``--resume``: a new run that continues an earlier one from its checkpoints (operator side; returns values or
raises :class:`~dapo_ops.control.launch.refusals.LaunchRefused`, never prints).

The launch gathers the facts first: :func:`read_facts` reads the earlier run's spec.json, run.json and checkpoint
step from its container (:class:`ResumeFacts`); :func:`resumed` takes everything the earlier run was launched with
and is not given now from its spec: every setting of the table (:func:`resumed_settings`; :data:`NOT_CARRIED` names
the few it does not take and why), its features turned on and off by name (:func:`resumed_features`) and its
``--override`` values by key (:func:`resumed_overrides`); precedence: now > the resumed run > defaults. The launch
and ``--dry-run --resume`` plan from the same (the dry run reads the facts too). The plan is then built once
(:func:`dapo_ops.control.launch.plan.make_plan` with ``resume``: :func:`carry` points the new run at the earlier run's
checkpoint dir and experiment, keeps its explicit and ladder-added features, the setting rungs its ladder
reached (:func:`ladder_changes`) and the FSDP strategy its checkpoint was
written with: fsdp and fsdp2 checkpoints do not load into each other); :func:`check` refuses a layout
(:data:`RESUME_FIXED`), mode or step count the checkpoints cannot continue, :func:`check_logging` another SwanLab
mode not asked for; only then :func:`close_earlier` marks an
earlier run whose supervisor died as ended, and :func:`line` names the checkpoint it continues from. verl resumes by
itself from ``<ckpt_dir>/latest_checkpointed_iteration.txt`` (``trainer.resume_mode=auto``,
verl/trainer/ppo/ray_trainer.py ``_load_checkpoint``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from dapo_ops.control.launch.refusals import LaunchRefused
from dapo_ops.control.remote import bundle
from dapo_ops.core import defaults, features, overrides, runstate
from dapo_ops.core.hydra_override import key_of, value_of
from dapo_ops.core.ladder import resume_command, resume_settings


def _read(target, run_dir: str) -> dict:
    """The earlier run's files, in ONE call of the bundle op ``runfiles resume-facts``
    (:func:`dapo_ops.agent.runfiles.resume_facts`): ``{"spec", "record", "step", "fsdp_version"}``.

    :raises dapo_ops.control.remote.errors.RemoteError: the host cannot be reached, or the op failed (kind
        ``command``, its one line)."""
    res = bundle.run_op(target, "runfiles", ["resume-facts", run_dir], site=False, workdir="", timeout=30)
    try:
        answer = json.loads((res.stdout or "").strip().splitlines()[-1])
    except (ValueError, IndexError):
        answer = None
    return answer if isinstance(answer, dict) else {}


@dataclass(frozen=True)
class ResumeFacts:
    """What the host says of run ``run_id`` (the one ``--resume`` continues): ``spec`` (its spec.json as a
    :class:`~dapo_ops.core.defaults.RunSpec`, completed once when read: a spec of an older dapo-ops lacks the keys
    added since; a dict given here is read so), ``record``
    (its run.json; empty when unreadable), ``step``: the step of its checkpoint tracker
    (``<ckpt_dir>/latest_checkpointed_iteration.txt``; "" when there is none yet) and, for FSDP, ``strategy``: the
    actor strategy that checkpoint was written with (None: no checkpoint or no record)."""

    run_id: str
    spec: defaults.RunSpec
    record: dict = field(default_factory=dict)
    step: str = ""
    strategy: str | None = None  # fsdp | fsdp2 of that checkpoint (:func:`_checkpoint_strategy`), None: unknown
    supersedes: tuple[str, ...] = ()  # later runs on its checkpoints that trained no step (:func:`_refuse_later`)

    def __post_init__(self) -> None:
        object.__setattr__(self, "spec", defaults.RunSpec.read(self.spec))


#: settings that fix a checkpoint's layout (world size, parallelism): a resumed run must keep them
RESUME_FIXED = ("nnodes", "n_gpus_per_node", "trainer_gpus", "rollout_gpus", "rollout_tp")


def read_facts(target, run_id: str) -> ResumeFacts:
    """The :class:`ResumeFacts` of run ``run_id`` in ``target``'s container (reads only).

    :raises LaunchRefused: kind ``resume`` when there is no such run (one line: how to list runs).
    :raises dapo_ops.control.remote.errors.RemoteError: the host cannot be reached.
    """
    host = target.host
    old_dir = runstate.run_dir_for(host.runs_path, run_id)
    got = _read(target, old_dir)
    old = got.get("spec") if isinstance(got.get("spec"), dict) else None
    if old is None:
        raise LaunchRefused(
            "resume",
            f"no run {run_id} on {host.name} ({host.runs_path}): list runs with "
            f"`inv status --all -H {host.name}` (a multi-host run lives on its head, the first host)",
        )
    superseded = _refuse_later(run_id, host, old, got.get("later"))
    record = got.get("record")
    return ResumeFacts(
        run_id=run_id,
        spec=defaults.RunSpec.read(old),  # a spec of an older dapo-ops lacks the keys added since
        record=record if isinstance(record, dict) else {},
        step=str(got.get("step") or ""),
        strategy=_checkpoint_strategy(got.get("fsdp_version")),
        supersedes=superseded,
    )


def _refuse_later(run_id: str, host: Any, old: Mapping[str, Any], later: Any) -> tuple[str, ...]:
    """Refuse a resume of ``run_id`` when a later run continues its checkpoints (``later``: the op's answer,
    :func:`dapo_ops.agent.runfiles.later_runs`, newest first): resuming ``run_id`` would go back to its own settings
    (overrides, features) on the checkpoints the later run wrote with its changes, silently (a new-user trial: run R
    with lr 2e-6 and -flash_attn, resumed as R2 with lr 3e-6 and flash_attn, then `--resume R` ran lr 2e-6 on sdpa).
    One line: the newest such run and the command that resumes it. A later run that ended having trained no step
    (``trained`` false: a resume that ran out of data or failed at start, so no checkpoint of its own) blocks nothing:
    its run ids are returned, the ones this resume supersedes (a new user's trial: a failed `--resume R` then refused
    `--resume R --override trainer.total_epochs=2`).

    :raises LaunchRefused: kind ``resume``."""
    runs = [r for r in later or [] if isinstance(r, dict) and r.get("run_id")]
    failed = tuple(str(r["run_id"]) for r in runs if r.get("trained") is False)
    runs = [r for r in runs if r.get("trained") is not False]
    if not runs:
        return failed
    new = runs[0]
    spec = new.get("spec") if isinstance(new.get("spec"), dict) else {}
    ckpt = defaults.RunSpec.read(old).settings.get("ckpt_dir")
    status = f" ({new['status']})" if new.get("status") else ""
    more = f" (the newest of {len(runs)} later runs on them)" if len(runs) > 1 else ""
    raise LaunchRefused(
        "resume",
        f"run {run_id} on {host.name} was resumed later: run {new['run_id']}{status} continues its checkpoints "
        f"({ckpt}) with its own settings{more}, and resuming {run_id} would go back to {run_id}'s overrides and "
        f"features on them: resume {new['run_id']} instead: `{resume_command(dict(resume_settings(spec), run_id=new['run_id']))}` "
        f"(--override / --features change its settings)",
    )


#: setting name -> its key in a spec's ``settings`` where they differ (planning resolves ``model`` to ``model_path``)
_SPEC_KEY = {"model": "model_path"}

#: settings the spec keeps at its top level (docs/design.md "Run spec"), read back as the setting's value
_TOP: dict[str, Any] = {
    "framework": lambda old: old.framework,
    "profile": lambda old: old.profile,
    "max_oom_retries": lambda old: int(old.max_oom_retries),
    "hang_timeout": lambda old: int(old.hang_timeout_s),
}

#: settings a resume does not take from the earlier run's spec, and why. Every other setting of the table
#: (:data:`dapo_ops.control.settings.PARAMS`) is carried (:func:`_earlier_value`; tests/test_launch.py keeps the two
#: covering the table, so a new setting is carried unless it is named here with its reason)
NOT_CARRIED = {
    "container": "the resume reads the earlier run in the container this launch targets (--container / the "
    "inventory's): that run's own",
    "offload": "an explicit offload is a feature of the earlier run's spec: carried with features",
    "http_proxy": "the host's way out, resolved at each launch (flag > env > hosts.toml > config file; its "
    "credentials reach secret.env, never the spec)",
    "https_proxy": "as http_proxy",
    "swanlab_mode": "SwanLab's setup resolves it with its key at each launch; a resume that would log in another "
    "mode than the earlier run without --swanlab-mode is refused (check_logging)",
    "swanlab_host": "SwanLab's setup resolves it with its key at each launch (the SwanLab run id is carried)",
}

_MISSING = object()

#: the sources of a setting "given now" for a resume: a flag or an environment variable. A config file's ``[run]``
#: value is a standing default, not given for this resume: the run's own value wins over it (a second trial)
GIVEN_NOW = ("flag", "env")


def given_now(sources: Mapping[str, str] | None, name: str) -> bool:
    """Whether setting ``name`` was given for this resume (:data:`GIVEN_NOW`), by its source in ``sources``."""
    return (sources or {}).get(name) in GIVEN_NOW


def _hccl_value(name: str, old: defaults.RunSpec):
    """An HCCL setting (the spec keeps it in ``env``, on an NPU only: ``plan.run_env``): its value, "" for a port
    range the earlier NPU run left unset (verl's own ``auto``), :data:`_MISSING` off an NPU (not emitted there)."""
    from dapo_ops.control.settings import BY_NAME, HCCL_SETTINGS

    var = dict(HCCL_SETTINGS)[name]
    if old.accelerator != "npu":
        return _MISSING
    if var not in old.env:
        return "" if BY_NAME[name].type == "str" else _MISSING
    raw = old.env[var]
    return int(raw) if BY_NAME[name].type == "int" and str(raw).isdigit() else str(raw)


def _earlier_value(name: str, old: defaults.RunSpec):
    """What the earlier run's spec ``old`` says setting ``name`` was, in the setting's form, or :data:`_MISSING`
    (not recorded: a layout key :func:`check` compares, a Megatron size of an FSDP run). A None of
    :data:`dapo_ops.core.defaults.NONE_IN_SPEC` is the setting's 0."""
    from dapo_ops.control.settings import HCCL_SETTINGS

    if name in _TOP:
        return _TOP[name](old)
    if name in dict(HCCL_SETTINGS):
        return _hccl_value(name, old)
    key = _SPEC_KEY.get(name, name)
    if key not in old.settings or key in ("nnodes", "n_gpus_per_node"):
        return _MISSING
    if old.settings[key] is not None:
        return old.settings[key]
    return 0 if name in defaults.NONE_IN_SPEC else _MISSING


def resumed_features(now: str, offload_now: bool | None, old: defaults.RunSpec) -> str:
    """The ``features`` setting of a run that continues ``old``'s: the features its user asked for (source
    ``explicit``, an ``--offload`` included) and turned off (``disabled_features``: ``-flash_attn``), each unless
    ``now`` (the features given now) names it or ``offload_now`` (``--[no-]offload`` / ``ENABLE_OFFLOAD`` given now:
    True / False; None: not given) decides offload; then ``now``'s. ``disabled_features`` holds the dependents of
    :data:`dapo_ops.core.features.IMPLIED_OFF` turned off with their feature too (``-flash_attn`` on an NPU Megatron:
    ``remove_padding``, the plan records ``sorted(fs.disabled)``): they stay off like any other unless named now, so
    ``--features flash_attn`` turns flash attention back on and leaves ``remove_padding`` off as the run had it (it
    turned it back on unasked, a review), and on a GPU, where the rule does not apply, a ``-remove_padding`` the
    user gave beside ``-flash_attn`` is kept. Pure."""
    on, off = features.parse_user_features(now)
    named = set(on) | set(off)
    # --no-offload given now starts without an offload the earlier run asked for; it leaves its -offload (never)
    named_on, named_off = (
        named | ({"offload"} if offload_now is not None else set()),
        named | ({"offload"} if offload_now else set()),
    )
    old_on = [str(f.get("name")) for f in old.features if f.get("source") == "explicit"]
    old_off = list(old.disabled_features)
    kept = [n for n in old_on if n not in named_on] + ["-" + n for n in old_off if n not in named_off]
    return ",".join(kept + on + ["-" + n for n in off])


def resumed_settings(settings, old_spec: Mapping[str, Any]):
    """``settings`` for a run that continues ``old_spec``'s: every setting of the table not given now (flag, env
    var, config file) takes the earlier run's value from its spec (:func:`_earlier_value`), source ``resume``: its
    model, data, lengths, framework, batch sizes, pool sizes, hang timeout, ``max_oom_retries``, HCCL settings,
    verl profile, ... (all but :data:`NOT_CARRIED`); the features merge by name (:func:`resumed_features`: its
    ``-flash_attn`` stays off unless ``flash_attn`` is given now, and what it turned off with it unless named now). What is given now wins (precedence: now > the
    resumed run > defaults). The layout keys of :data:`RESUME_FIXED` that the plan derives from the hosts are not
    taken: :func:`check` compares them. Returns a new :class:`~dapo_ops.control.settings.Settings`; the
    ``--override`` values merge in :func:`resumed_overrides`."""
    from dapo_ops.control.settings import Settings

    old = defaults.RunSpec.read(old_spec)  # ResumeFacts.spec: read once already, kept as it is
    values, sources = dict(settings.values), dict(settings.sources)
    _refuse_renaming(settings, old)
    for name in values:
        # a config file's [run] value is a standing default, not given for this resume: the run's own wins (a
        # second trial: a file's max_response_length 4096 replaced the run's 8192 unsaid)
        if given_now(sources, name) or name in NOT_CARRIED or name == "features":
            continue
        got = _earlier_value(name, old)
        if got is not _MISSING:
            values[name], sources[name] = got, "resume"
    given = {name: given_now(sources, name) for name in ("features", "offload")}
    now = str(values["features"]) if given["features"] else ""
    merged = resumed_features(now, bool(values["offload"]) if given["offload"] else None, old)
    if merged != values["features"]:
        values["features"], sources["features"] = merged, "resume"
    return Settings(values=values, sources=sources, origins=dict(getattr(settings, "origins", {}) or {}))


#: settings a resume keeps from the earlier run whatever is given now (:func:`carry`): its SwanLab run continues
_KEPT_NAMES = ("experiment", "project")


def _refuse_renaming(settings, old: defaults.RunSpec) -> None:
    """``--experiment`` / ``--project`` (or their env vars) given for a resume with another value than the earlier
    run's: :func:`carry` keeps the earlier run's (its SwanLab run continues under them), so the value given would be
    ignored unsaid (a second trial). :raises LaunchRefused: kind ``resume``, one line."""
    for name in _KEPT_NAMES:
        was = old.settings.get(name)
        if given_now(settings.sources, name) and was and settings.values.get(name) != was:
            raise LaunchRefused(
                "resume",
                f"{settings.origins.get(name) or name}={settings.values.get(name)!r}: a resume keeps the run's {name} "
                f"{was!r} (its SwanLab run goes on under it); drop it, or launch a new run for a new {name}",
            )


def replaced(settings, old_spec: Mapping[str, Any], new_spec: Mapping[str, Any]) -> list[str]:
    """``name earlier -> now (where)`` for each carried setting a flag or env var given now changed (the resume line
    says so: the resumed run does not train as the earlier one did there), both read from their specs the same way
    (:func:`_earlier_value`: a relative ``MODEL_PATH`` resolved to the same model is no change). Pure."""
    old, new = defaults.RunSpec.read(old_spec), defaults.RunSpec.read(new_spec)
    out = []
    for name in settings.values:
        # the total steps is what a resume gives anew (its checkpoint's step is below it: check)
        if not given_now(settings.sources, name) or name in (*NOT_CARRIED, *_KEPT_NAMES, "steps", "features"):
            continue
        was, now = _earlier_value(name, old), _earlier_value(name, new)
        if was is not _MISSING and now is not _MISSING and was != now:
            out.append(f"{name} {was} -> {now} ({settings.origins.get(name) or settings.sources[name]})")
    return out


def resumed_overrides(now, old_spec: Mapping[str, Any]) -> list[str]:
    """The ``--override`` values of a run that continues ``old_spec``'s: the earlier run's (spec
    ``settings.extra_overrides``) whose key none given now sets (:func:`dapo_ops.core.hydra_override.key_of`: ``+k``,
    ``++k`` and ``~k`` count as ``k``), then those given now (``now``), which win (a plain ``k=v2`` after the earlier
    ``+k=v1`` keeps that one first: the key is not in verl's config). A bare ``~k`` given now for a key the earlier run
    ADDED (``+k=v`` / ``++k=v``) only drops that: ``k`` is not in verl's config, so emitting ``~k`` failed the
    compose with "Could not delete ... does not exist" and the carried override could not be removed (a second
    trial). Pure."""
    from dapo_ops.core.hydra_override import ADD, CHANGE, FORCE_ADD, parse_override

    old = defaults.RunSpec.read(old_spec)
    earlier = [str(o) for o in old.settings.get("extra_overrides") or []]
    added = {o.key for o in map(parse_override, earlier) if o is not None and o.op in (ADD, FORCE_ADD)}
    mine = [str(o) for o in now]
    ops = {p.key: p.op for p in map(parse_override, mine) if p is not None}
    drop_only = {o for o in mine if (p := parse_override(o)) is not None and p.deletes and p.key in added}

    def keep(o: str) -> bool:
        # a key given now replaces the earlier override, but a key the earlier run ADDED stays added under a plain
        # change given now (k=v2 after +k=v1: Hydra adds, then changes; k=v2 alone is "not in struct", a review)
        k = key_of(o)
        return k not in ops or (k in added and ops[k] == CHANGE)

    return [o for o in earlier if keep(o)] + [o for o in mine if o not in drop_only]


def resumed(settings, extra_overrides, facts: "ResumeFacts | None") -> tuple[Any, tuple[str, ...]]:
    """THE settings and ``--override`` values a plan is made from (a launch: ``service.plan_settings`` /
    ``plan_overrides``; a dry run): ``settings`` and ``extra_overrides`` as given, or, with ``facts`` (the run
    ``--resume`` continues), merged with that run's (:func:`resumed_settings`, :func:`resumed_overrides`). Pure."""
    extra = tuple(str(o) for o in extra_overrides or ())
    if facts is None:
        return settings, extra
    return resumed_settings(settings, facts.spec), tuple(resumed_overrides(extra, facts.spec))


def check_logging_with(facts: ResumeFacts, sw: Any) -> None:
    """:func:`check_logging` with the SwanLab settings a launch (or its dry run) resolved
    (:class:`dapo_ops.control.swanlab_settings.SwanlabSettings`): their mode, given unless its source is the default.

    :raises LaunchRefused: as :func:`check_logging`."""
    given = (getattr(sw, "sources", None) or {}).get("mode", "default") != "default"
    check_logging(facts, sw.mode, given)


def check_logging(facts: ResumeFacts, mode: str, given: bool) -> None:
    """Refuse a resume that would log to SwanLab in another ``mode`` than the earlier run (its spec ``env``
    ``SWANLAB_MODE``) when the mode was not given now (``given``: ``--swanlab-mode`` / ``SWANLAB_MODE`` / the config
    file): the resumed run continues the earlier run's SwanLab run, which lives where that mode logged (a ``local``
    run resumed in ``cloud`` would send its metrics off the site).

    :raises LaunchRefused: kind ``resume``, one line naming the mode to give."""
    old = str(facts.spec.env.get("SWANLAB_MODE") or "")
    if old and old != mode and not given:
        raise LaunchRefused(
            "resume",
            f"run {facts.run_id} logged to SwanLab in mode {old}, this launch would use mode {mode}: resume it with "
            f"--swanlab-mode {old} (or give --swanlab-mode to choose another)",
        )


def carry(facts: ResumeFacts, fs, start_without: frozenset[str] = frozenset()):
    """What a plan that continues ``facts``'s run takes from it: ``(settings, features)``, the spec settings
    ``ckpt_dir`` (verl resumes from its ``latest_checkpointed_iteration.txt``), ``experiment`` and ``project`` of the
    earlier run (the spec's ``strategy`` is ``facts.strategy``: the planner sets it), and ``fs`` (:class:`~dapo_ops.core.features.FeatureSet`) with the features the earlier run asked for
    explicitly, began with from a learned start or had its OOM ladder add, unless turned off now (``-name``: never
    again) or named in ``start_without`` (``--no-offload`` given now: the resumed run starts without it, its ladder
    may add it again). Pure; called by :func:`dapo_ops.control.launch.plan.make_plan`."""
    old_s = facts.spec.settings
    carried = {k: old_s[k] for k in ("ckpt_dir", "experiment", "project") if old_s.get(k)}
    for f in facts.record.get("features") or facts.spec.features:
        src = str(f.get("source", ""))
        # what the earlier run asked for explicitly stays asked for (README: an explicit feature is never removed),
        # and what its OOM ladder added (or a learned start began with) stays, unless turned off now
        keep = f.get("name") not in fs.disabled and f.get("name") not in start_without
        if (src.startswith("oom-retry") or src in ("explicit", "learned")) and keep:
            fs = fs.add(f["name"], src)
    return carried, fs


def diverged_at(facts: ResumeFacts) -> dict | None:
    """``{"metric", "step"}`` of the first bad step of a run whose training metrics went bad (its run.json
    ``health``: ``bad_step``, ``first_bad``; ``dapo_ops/core/health.py``), else None. The new spec carries it as
    ``diverged_at``: its supervisor resumes from the last checkpoint saved BEFORE that step, never a later one (verl
    saves step N before printing its metrics line, verl/trainer/ppo/v1/trainer_base.py:479-511), and the same metric
    bad again at that step stops it at once (persistent). Pure."""
    h = facts.record.get("health") or {}
    step = h.get("bad_step")
    if not isinstance(step, int):
        return None
    first = h.get("first_bad") or {}
    return {"metric": first.get("metric"), "step": step}


def resume_step(facts: ResumeFacts) -> str:
    """The checkpoint step a resume of ``facts``'s run starts from: its tracker's step (``facts.step``), or the last
    healthy one (run.json ``health.healthy_step``) when the tracker names a step at or after its bad step (a
    supervisor that died before setting the tracker back); "" from step 0."""
    bad = diverged_at(facts)
    if bad is None or not facts.step.isdigit() or int(facts.step) < bad["step"]:
        return facts.step
    healthy = (facts.record.get("health") or {}).get("healthy_step")
    return str(healthy) if isinstance(healthy, int) and healthy < bad["step"] else ""


def check(plan, facts: ResumeFacts) -> None:
    """Refuse a ``plan`` (built with ``resume=facts``) that cannot continue ``facts``'s run from its checkpoints.

    A run that saved no checkpoint to continue (``resume_step`` "": verl starts it from step 1) holds no state a
    change could break: only another mode is refused then (the run's command is ``inv launch`` or ``inv
    one-step-off``), so a run stopped before its first save (a config error verl raised at start-up: rollout TP,
    devices) resumes with the fix its stop named (``--rollout-tp 1``) instead of being refused for the layout.

    :raises LaunchRefused: kind ``resume``, one line: another mode, framework or V1 trainer mode, other devices /
        parallel sizes than the checkpoint was written with (:data:`RESUME_FIXED`), or a total ``steps`` not beyond
        the checkpoint's step.
    """
    run_id, old = facts.run_id, facts.spec
    spec, old_s = plan.run_spec, old.settings
    new_s = spec.settings
    if not resume_step(facts).isdigit():
        if old.mode != spec.mode:
            raise LaunchRefused(
                "resume",
                f"run {run_id} is a {old.mode} run: resume it with "
                f"`{resume_command(dict(resume_settings(old), run_id=run_id))}`, or start a new run",
            )
        return
    if (old.mode, old.framework) != (spec.mode, spec.framework):
        raise LaunchRefused(
            "resume",
            f"run {run_id} is a {old.mode} run with framework {old.framework}: "
            f"resume it with `{resume_command(dict(resume_settings(old), run_id=run_id))}` (it keeps the run's framework)",
        )
    _refuse_other_model(run_id, old, old_s, new_s)
    if old_s.get("trainer_mode") and old_s.get("trainer_mode") != new_s.get("trainer_mode"):
        raise LaunchRefused(
            "resume",
            f"run {run_id} ran trainer mode {old_s['trainer_mode']} (its checkpoints hold "
            f"that trainer's state): resume it with `{resume_command(dict(resume_settings(old), run_id=run_id))}`, or start "
            "a new run",
        )
    changed = [
        f"{k} {old_s.get(k)} -> {new_s.get(k)}"
        for k in RESUME_FIXED
        if k in old_s
        and old_s.get(k) != new_s.get(k)
        and (spec.mode == "one-step-off" or k not in ("trainer_gpus", "rollout_gpus"))
    ]
    if changed:
        raise LaunchRefused(
            "resume",
            f"run {run_id}'s checkpoints need the same layout: "
            + ", ".join(changed)
            + f" (resume it as it ran: `{resume_command(dict(resume_settings(old), run_id=run_id))}`, or start a new "
            "run)",
        )
    step = resume_step(facts)
    if step.isdigit() and int(new_s["steps"]) <= int(step):
        # not given now: the run's own total came with the resume (a second trial was told "--steps 100" unasked)
        what = (
            "--steps %s" % new_s["steps"] if new_s["steps"] != old_s.get("steps") else "its %s steps" % new_s["steps"]
        )
        raise LaunchRefused(
            "resume",
            f"run {run_id}'s checkpoint is at step {step}, so {what} would train nothing: --steps is the total, "
            f"give --steps above {step}",
        )


def _refuse_other_model(run_id: str, old, old_s: Mapping, new_s: Mapping) -> None:
    """A resume with another model (``--model`` / ``MODEL_PATH`` given now, resolved to another path) is another
    run: its checkpoints hold the earlier model's weights and optimizer state, so it is refused like another
    framework. :raises LaunchRefused: kind ``resume``, one line."""
    if old_s.get("model_path") and new_s.get("model_path") and old_s["model_path"] != new_s["model_path"]:
        raise LaunchRefused(
            "resume",
            f"run {run_id} trained model {old_s['model_path']} (its checkpoints hold that model's weights), not "
            f"{new_s['model_path']}: resume it without --model / MODEL_PATH "
            f"(`{resume_command(dict(resume_settings(old), run_id=run_id))}`), or start a new run with the other model",
        )


def close_earlier(target, facts: ResumeFacts) -> None:
    """Mark the earlier run ended when its record still says it is active: its supervisor died (the launch's
    occupancy check found no live one). Closed as failed by the status probe's ``stop`` op, never as stopped by
    ``inv stop``: nobody ran stop. Call it after :func:`check` and the quick checks passed: a refused resume
    leaves the earlier run's record as it was."""
    if runstate.RunStatus.of(facts.record.get("status")).active:
        from dapo_ops.control.status.look import probe

        probe(
            target,
            {
                "op": "stop",
                "run_id": facts.run_id,
                "grace_s": 5.0,
                "kill_grace_s": 5.0,
                "by": "`%s`" % resume_command(dict(resume_settings(facts.spec), run_id=facts.run_id)),  # its task
            },
        )


def line(spec: dict, fs, facts: ResumeFacts, not_kept: str, changed: list[str] | None = None) -> str:
    """One line for the launch output, built by the planner once (``Plan.resume_line``): which checkpoint the plan
    resumes from, the features and memory rungs its ladder added (``spec["setting_changes"]``, from
    :func:`ladder_changes`), why the ladder's setting rungs were not kept (``not_kept``, its second value), and the
    FSDP strategy kept for the checkpoint when the plan's own choice would differ. Pure."""
    added = [f.name for f in fs.enabled if f.source.startswith("oom-retry")]
    added += [
        f"{r.get('rung')}({r.get('phase')})"
        for r in (spec.get("setting_changes") or {}).get("memory_rungs") or []
        if str(r.get("source", "")).startswith("oom-retry")
    ]
    planned = (
        _strategy_of(overrides.verl_argv(dict(spec, strategy=None), fs, spec.get("setting_changes")))
        if facts.strategy
        else None
    )  # the plan's own choice without the checkpoint's
    step, bad = resume_step(facts), diverged_at(facts)
    return (
        f"run {facts.run_id}'s checkpoints in {spec['settings']['ckpt_dir']}, "
        + (f"from global_step_{step}" if step.isdigit() else "no checkpoint yet: from step 0")
        + (
            f" (the last healthy one: its metrics went bad at step {bad['step']})"
            if bad is not None and step.isdigit()
            else (f" (its metrics went bad at step {bad['step']}: no checkpoint before it)" if bad else "")
        )
        + (
            f"; supersedes the failed attempt{'s' if len(facts.supersedes) > 1 else ''} "
            f"{', '.join(facts.supersedes)} (trained no step, no checkpoint of {'their' if len(facts.supersedes) > 1 else 'its'} own)"
            if facts.supersedes
            else ""
        )
        + (f"; keeps {', '.join(added)} (its OOM ladder)" if added else "")
        + (f"; given now: {', '.join(changed)}" if changed else "")
        + (f"; does not keep its ladder's setting rungs: {not_kept}" if not_kept else "")
        + (
            f"; keeps actor strategy {facts.strategy} (its checkpoint's FSDP version; {planned} would not load it)"
            if facts.strategy and planned and facts.strategy != planned
            else ""
        )
    )


def ladder_changes(record: dict, new_settings: dict, sources: dict) -> tuple[dict, str]:
    """The setting changes the resumed run's first attempt starts on: the earlier run's own, from its run.json
    ``setting_changes`` (``record``: what its last attempt ran on, or what its supervisor decided the next attempt
    runs on when it was stopped mid-retry: the memory ladder's setting rungs (``update-batch``, ``logprob-batch``,
    ``rollout-util``, ``weight-bucket``, ``offload-policy``, ...) with their ``memory_rungs`` record, and the
    estimate's or learned start it began on), with every token budget kept at least prompt+response of
    ``new_settings`` (the new spec's settings; :func:`dapo_ops.core.memladder.keep_token_budgets`).

    Why: the ladder is a sequence (:func:`dapo_ops.core.memladder.next_rung` consumes the rungs listed in
    ``memory_rungs``); a resumed run that starts without them climbs it again from the bottom, repeats rungs that
    were already tried against the same OOM and spends its own ``MAX_OOM_RETRIES`` on them (chaos soak seed 1202,
    episode 21: update-batch tried twice, the resumed run failed before reaching the rungs it had not tried). Each
    run has its own ``MAX_OOM_RETRIES`` budget; the rungs carry over, the budget does not.

    Precedence now > the resumed run: when a change would override a setting given now (``sources``: flag or env var,
    :func:`given_now`: ``GPU_MEMORY_UTILIZATION``, ``MICRO_BATCH_SIZE``, an ``--override`` of the key a rung changes;
    :func:`dapo_ops.core.learned.conflicts`, the rule of learned starts) none is kept (the rungs were tried
    together) and the second value says why. Returns ``(changes or {}, why not kept or "")``; ``({}, "")`` when the
    earlier run had none (the plan's own start, the estimate's, stands). Pure."""
    from dapo_ops.core import learned, memladder

    ch = dict(record.get("setting_changes") or {})
    if not ch:
        return {}, ""
    given = {
        name: f"{name}={new_settings.get(name)!r}"
        for name in set(learned.SETTING_OF_CHANGE.values())
        if given_now(sources, name)
    }
    why = learned.conflicts({"rung": {"setting_changes": ch}}, (), given, new_settings.get("extra_overrides") or [])
    if why:
        return {}, "; ".join(why)
    return memladder.keep_token_budgets(defaults.complete_settings(dict(new_settings)), ch), ""


#: ``fsdp_config.json`` ``FSDP_version`` -> verl's ``actor.strategy``
_FSDP_STRATEGY = {1: "fsdp", 2: "fsdp2"}


def _checkpoint_strategy(version) -> str | None:
    """The actor strategy (``fsdp`` | ``fsdp2``) the checkpoint a resume loads was written with, or None (no
    checkpoint yet, no record: the plan's own choice stands).

    verl 0.9.1 records it beside the actor's shards: ``<ckpt_dir>/global_step_<N>/actor/fsdp_config.json``
    ``{"FSDP_version": 1 | 2, "world_size": W}`` (verl/utils/checkpoint/fsdp_checkpoint_manager.py:409-416, rank 0 at
    every save). The two are not interchangeable: the shards are ``torch.save`` of ``model.state_dict()`` under
    ``get_fsdp_state_ctx`` (:315-352; FSDP1: ``FSDP.state_dict_type(SHARDED_STATE_DICT)``, torch turns it into a full
    state dict of plain tensors on one device, NO_SHARD; FSDP2: DTensors) and ``optimizer.state_dict()``, whose
    FSDP1 optimizer holds one flat parameter per wrapped module (``use_orig_params: false``,
    verl/trainer/config/engine/fsdp.yaml:36) against FSDP2's one DTensor per parameter, so ``load_checkpoint``
    (:211-237, ``self.model.load_state_dict`` / ``self.optimizer.load_state_dict``) fails across them. A run the
    tool started with ``fsdp2`` on one device (before the plan chose ``fsdp`` there) must resume as ``fsdp2``.

    ``version``: that file's ``FSDP_version`` as the op ``runfiles resume-facts`` read it (None for a Megatron run,
    no tracker step or no file)."""
    return _FSDP_STRATEGY.get(version) if isinstance(version, int) else None


def _strategy_of(argv: list) -> str | None:
    """``actor_rollout_ref.actor.strategy`` in a verl argv: what its last override gives it
    (:func:`dapo_ops.core.hydra_override.value_of`; None for Megatron)."""
    return value_of(argv, "actor_rollout_ref.actor.strategy")
