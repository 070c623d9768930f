"""Run spec + FeatureSet -> the verl command line (stdlib only).

:func:`build_command` is called by the supervisor for every attempt (with the ladder's
``setting_changes``): it checks the attempt's spec (:func:`dapo_ops.core.runspec.check_spec`, one line naming the
value and the fix) and renders it (:func:`verl_argv`). The planner (``dapo_ops/control/launch/plan.py`` make_plan)
checks the spec once, with the host's facts, and renders it with :func:`verl_argv` alone.

The argv is a list (no shell): ``[python, "-m", <entry>, (--config-name=...), overrides...]``.
Values are rendered in Hydra's override grammar (``True``/``False``, ``null``, ``['a','b']``,
quoted strings when they contain characters outside the plain-value set, escaped so that Hydra and OmegaConf read
them literally: :func:`literal_string`); a generated value holding ``${`` is refused (:func:`check_literal`). ``+`` is used exactly
for keys the verl yaml lacks (see :mod:`dapo_ops.core.profiles`); ``++`` never. The run spec schema is
in docs/design.md "Run spec".
"""

from __future__ import annotations

import re
import shlex
from typing import Any, Mapping

from dapo_ops.core import defaults
from dapo_ops.core import memfit
from dapo_ops.core import memladder
from dapo_ops.core import profiles
from dapo_ops.core.features import FeatureSet
from dapo_ops.core.hydra_override import ADD, key_of, parse_override
from dapo_ops.core.profiles import OverrideError  # re-exported: the contract names overrides.OverrideError
from dapo_ops.core.runspec import check_spec, effective_settings, parameter_sync_step

__all__ = [
    "OverrideError",
    "build_command",
    "check_literal",
    "hydra_value",
    "literal_string",
    "overrides_for",
    "command_string",
    "verl_argv",
]

#: the ladder changes of :data:`dapo_ops.core.memladder.SETTING_KEYS` that are run settings too: :func:`overrides_for`
#: sets their keys with the rollout engine's (``enforce_eager`` only on NPU or when on), not again with the ladder's
RUN_SETTING_RUNGS = ("gpu_memory_utilization", "rollout_eager")

#: verl keys the plan sets from a run setting (the settings table, docs/params.md) -> that setting: the setting is the
#: one way to set the key, so an ``--override`` of it (which comes last in the argv and would win silently against
#: the setting, the plan's checks and what the supervisor, status and ``--resume`` read from the spec) is refused
#: naming the setting's flag / variable (dapo_ops/control/launch/service.py ``refuse_plan_overrides``). The other keys
#: of the OOM ladder's setting rungs (:data:`dapo_ops.core.memladder.SETTING_KEYS` but :data:`RUN_SETTING_RUNGS`, the
#: token budgets) stay open: the ladder's change replaces such an override (:func:`build_command`) and a learned start
#: respects it (dapo_ops/core/learned.py); so do the feature keys (``--features`` switches a feature, which sets
#: several keys per framework; an override sets one key).
PLAN_SETTING_KEYS: dict[str, str] = {
    "trainer.total_training_steps": "steps",
    "actor_rollout_ref.model.path": "model",
    "data.train_files": "train_file",
    "data.val_files": "val_file",
    "data.max_prompt_length": "max_prompt_length",
    "data.max_response_length": "max_response_length",
    "data.train_batch_size": "train_batch_size",
    "actor_rollout_ref.actor.ppo_mini_batch_size": "ppo_mini_batch_size",
    "actor_rollout_ref.rollout.n": "rollout_n",
    "actor_rollout_ref.rollout.tensor_model_parallel_size": "rollout_tp",
    # the ladder's kv-cache rung changes the setting: a raw override of the key would beat the ladder
    "actor_rollout_ref.rollout.gpu_memory_utilization": "gpu_memory_utilization",
    "actor_rollout_ref.rollout.enforce_eager": "rollout_eager",
    "actor_rollout_ref.actor.megatron.vanilla_mbridge": "vanilla_mbridge",
    "actor_rollout_ref.actor.megatron.tensor_model_parallel_size": "trainer_tp",
    "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size": "trainer_pp",
    "actor_rollout_ref.ref.megatron.tensor_model_parallel_size": "trainer_tp",
    "actor_rollout_ref.ref.megatron.pipeline_model_parallel_size": "trainer_pp",
    profiles.PLUS_MAX_POS.lstrip("+"): "max_position_embeddings",
    profiles.PLUS_MAX_POS_ROLLOUT.lstrip("+"): "max_position_embeddings",
    "trainer.v1.trainer_mode": "trainer_mode",
    "trainer.v1.sampler.max_off_policy_threshold": "max_staleness",
    "trainer.v1.separate_async.parameter_sync_step": "parameter_sync_step",
    "actor_rollout_ref.rollout.n_gpus_per_node": "rollout_gpus",
    "rollout.n_gpus_per_node": "rollout_gpus",  # the 0.8 profile's legacy one-step-off
    "trainer.project_name": "project",
    "trainer.experiment_name": "experiment",
    "trainer.save_freq": "save_freq",
    "trainer.max_actor_ckpt_to_keep": "max_actor_ckpt_to_keep",
    "model_engine": "framework",  # the entry's config group (megatron)
}

#: verl keys the plan sets for the run to work under dapo-ops (the supervisor, retries, ``--resume``, the inventory's
#: layout) -> why, for the one line that refuses an ``--override`` of one (``refuse_plan_overrides``)
PLAN_FIXED_KEYS: dict[str, str] = {
    "trainer.resume_mode": "auto, so every retry resumes from the run's last checkpoint "
    "(continue an earlier run with --resume RUN_ID)",
    "trainer.default_local_dir": "it is the run's checkpoint dir, where retries and --resume find the checkpoints "
    "(set runs_dir or ckpt_dir in hosts.toml)",
    "trainer.logger": "the supervisor reads the console logger's lines (steps, errors); SwanLab is --swanlab-mode "
    "(SWANLAB_MODE)",
    "hydra.run.dir": "Hydra writes under the run dir (verl's working dir may be read-only)",
    "trainer.nnodes": "the training pool is the -H hosts and hosts.toml `devices` (one-step-off: --trainer-gpus "
    "(TRAINER_GPUS))",
    "trainer.n_gpus_per_node": "the training pool is hosts.toml `devices` (one-step-off: --trainer-gpus "
    "(TRAINER_GPUS))",
    "actor_rollout_ref.rollout.nnodes": "one-step-off's rollout pool spans the -H hosts (per host: --rollout-gpus "
    "(ROLLOUT_GPUS))",
    "rollout.nnodes": "one-step-off's rollout pool spans the -H hosts (per host: --rollout-gpus (ROLLOUT_GPUS))",
    "trainer.device": "it follows hosts.toml `accelerator`",
}

_PLAIN = re.compile(r"^[A-Za-z0-9_./:@%+\-]+$")  # Hydra's unquoted value characters (no "~": its lexer refuses it)


def hydra_value(v: object) -> str:
    """Render a Python value in Hydra's override grammar so that verl's config holds exactly ``v``.

    ``True``/``False``; ``None`` -> ``null``; ints/floats via ``repr``; lists -> ``['a','b']``; strings unquoted
    when they match the plain-value character set (no ``$``, ``\\``, quote, blank), else :func:`literal_string`.
    For any text ``s``: Hydra's override parser + OmegaConf's resolution of ``k=hydra_value(s)`` give back ``s``
    (tests/test_overrides.py, property test against the real hydra-core / omegaconf). :raises: nothing.
    """
    if v is True:
        return "True"
    if v is False:
        return "False"
    if v is None:
        return "null"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(hydra_value(x) for x in v) + "]"
    s = str(v)
    if _PLAIN.fullmatch(s) and s.lower() not in ("true", "false", "null", "none") and not _looks_numeric(s):
        return s
    return literal_string(s)


def _looks_numeric(s: str) -> bool:
    try:
        float(s)
        return True
    except ValueError:
        return False


_INTERP = re.compile(r"(\\*)\$\{")
_QUOTE_OR_END = re.compile(r"(\\*)('|\Z)")


def literal_string(s: str) -> str:
    """``s`` as a single-quoted Hydra override value that OmegaConf reads as the literal text ``s`` (str -> str).

    Two layers read the value, in this order:

    1. OmegaConf (``omegaconf/grammar/OmegaConfGrammarLexer.g4``, top-level strings): ``${`` opens an interpolation
       (``${oc.env:VAR}`` reads the process environment, ``${oc.decode:...}`` parses text); ``\\${`` is a literal
       ``${`` and ``\\\\${`` a literal backslash before an interpolation; other backslashes are literal. So every
       ``${`` preceded by n backslashes becomes 2n backslashes + ``\\${``.
    2. Hydra's override lexer (``hydra/grammar/OverrideLexer.g4`` ``QUOTED_VALUE``; unescaped in
       ``hydra/core/override_parser/overrides_visitor.py`` ``_unescape_quoted_string``): inside quotes only a quote
       and the backslashes right before a quote or the closing quote are escapes. So a run of backslashes before
       ``'`` or the end is doubled and ``'`` becomes ``\\'``; every other backslash stays as it is.

    The escape keeps the FIRST resolution literal (verl's printed config, ``verl/trainer/main_ppo.py:144``; the
    compose check, :mod:`dapo_ops.agent.compose`). It cannot keep later reads literal: ``main_ppo.py:145``
    (``OmegaConf.resolve(config)``) stores the resolved text back, escape gone, and every later read of the key
    evaluates ``${...}`` again, and so does any key of verl's yaml that interpolates it (``trainer.default_local_dir:
    checkpoints/${trainer.project_name}/${trainer.experiment_name}``, verl/trainer/config/ppo_trainer.yaml:217);
    that is why :func:`check_literal` refuses ``${`` in generated values (tests/test_overrides.py shows both).
    """
    s = _INTERP.sub(lambda m: m.group(1) * 2 + "\\${", s)
    s = _QUOTE_OR_END.sub(lambda m: m.group(1) * 2 + ("\\'" if m.group(2) else ""), s)
    return "'" + s + "'"


def check_literal(key: str, value: object) -> None:
    """Refuse a generated override value holding ``${`` (str or list of str; other types pass).

    verl evaluates ``${...}`` in any config value: ``verl/trainer/main_ppo.py:144-145`` prints
    ``OmegaConf.to_container(config, resolve=True)`` and then resolves the config in place, which stores even an
    escaped ``\\${`` back as a live interpolation, so the tracker (``trainer.experiment_name``), the datasets
    (``data.train_files``) and the model loader read the EVALUATED text: ``exp-${oc.env:SWANLAB_API_KEY}`` would
    become the API key, ``/m${IFS}x`` an ``InterpolationKeyError``. No value dapo-ops generates (paths, names,
    project, experiment) needs a literal ``${``, so it is refused rather than escaped. The settings table refuses it
    first with the flag's name (:mod:`dapo_ops.control.settings`); this is the backstop for every other string
    (inventory paths, a spec written by hand). The value is not echoed (it may name a secret's variable).

    :raises OverrideError: one line naming the verl key and the fix.
    """
    for x in value if isinstance(value, (list, tuple)) else (value,):
        if isinstance(x, str) and "${" in x:
            raise OverrideError(
                f"the value for verl's {key} holds '${{', which verl's config (OmegaConf) evaluates "
                f"as an interpolation (verl/trainer/main_ppo.py:145 resolves the config in place, "
                f"so no escape keeps it literal); remove '${{' from the setting or path it comes from"
            )


def overrides_for(
    spec: Mapping[str, Any], features: FeatureSet, setting_changes: dict[str, Any] | None = None
) -> list[tuple[str, object]]:
    """The ordered ``(key, value)`` overrides (keys carry ``+`` where needed), before rendering.

    Later entries win when a key repeats (``extra_overrides`` are appended verbatim by
    :func:`build_command`, after everything else).
    """
    spec = defaults.RunSpec.read(spec)
    mode, framework, profile = spec.mode, spec.framework, spec.profile
    ent = profiles.entry(profile, mode, framework)
    s = effective_settings(spec, setting_changes)
    prompt, resp = int(s["max_prompt_length"]), int(s["max_response_length"])
    seq = prompt + resp
    accel = spec.get("accelerator", defaults.HOST["accelerator"])
    run_dir = str(spec.run_dir or "").rstrip("/")
    ckpt = s["ckpt_dir"]
    out: list[tuple[str, object]] = []

    if ent.searchpath:
        verl_root = str(spec.get("verl_root") or spec.workdir or defaults.HOST["workdir"]).rstrip("/")
        out.append(("hydra.searchpath", [f"file://{verl_root}/verl/trainer/config"]))
    if run_dir:
        out.append(("hydra.run.dir", f"{run_dir}/hydra"))

    # data + model
    out += [
        ("data.train_files", s.get("train_file")),
        ("data.val_files", s.get("val_file")),
        ("data.max_prompt_length", prompt),
        ("data.max_response_length", resp),
        ("data.train_batch_size", int(s["train_batch_size"])),
        ("actor_rollout_ref.model.path", s.get("model_path")),
    ]
    if s.get("max_position_embeddings") not in (None, "", 0):
        out.append((profiles.PLUS_MAX_POS, int(s["max_position_embeddings"])))
        if profile == "0.9":  # vLLM checks max_model_len against its own HF config: the same override for it
            out.append((profiles.PLUS_MAX_POS_ROLLOUT, int(s["max_position_embeddings"])))

    # V1 trainer mode (colocate_async / sync / separate_async) + staleness bound
    out += profiles.v1_overrides(
        ent,
        s["trainer_mode"],
        accelerator=accel,
        max_staleness=s.get("max_staleness"),
        parameter_sync_step=parameter_sync_step(s),
    )

    # DAPO algorithm
    out += list(profiles.DAPO_ALGORITHM)
    out += profiles.filter_groups_overrides(profile, ent)
    out += profiles.reward_overrides(profile, ent, resp)
    out.append(("actor_rollout_ref.actor.ppo_mini_batch_size", int(s["ppo_mini_batch_size"])))
    if s.get("dapo_recipe") and profile == "0.9":  # verl's DAPO recipe where the runbook is silent (an older
        out += [(k, v) for k, v, _ in defaults.DAPO_RECIPE]  # dapo-ops' spec has none: core/defaults.py SPEC_SETTINGS)

    # rollout engine
    out += [
        ("actor_rollout_ref.rollout.name", "vllm"),
        ("actor_rollout_ref.rollout.n", int(s["rollout_n"])),
        ("actor_rollout_ref.rollout.tensor_model_parallel_size", int(s["rollout_tp"])),
        ("actor_rollout_ref.rollout.gpu_memory_utilization", float(s["gpu_memory_utilization"])),
        ("actor_rollout_ref.rollout.max_model_len", seq),
    ]
    # graph mode (verl's default, rollout.yaml:52, and its NPU examples'); eager only as the chosen fallback
    # (setting rollout_eager): vllm-ascend 0.23 turns its ACL graph mode off under enforce_eager (platform.py:513-531)
    if accel == "npu" or s.get("rollout_eager"):
        out.append(("actor_rollout_ref.rollout.enforce_eager", bool(s.get("rollout_eager"))))
    if framework == "megatron" and s.get("trainer_tp"):
        out += parallel_overrides(int(s["trainer_tp"]), int(s["trainer_pp"] or 1))
    # the model builder: mbridge instead of Megatron-Bridge (engine/megatron.yaml:99; the ref follows the actor's key,
    # ref/megatron_ref.yaml:25; verl/workers/engine/megatron/transformer_impl.py:326-341)
    if framework == "megatron" and s.get("vanilla_mbridge"):
        out.append(("actor_rollout_ref.actor.megatron.vanilla_mbridge", True))

    # features
    train_world = memfit.trainer_world(s, mode == "one-step-off")
    out += profiles.strategy_overrides(
        str(framework or ""), train_world, spec.strategy, bool(s.get("fsdp_offload_policy"))
    )
    budgets = {k: v for k, v in (s.get("token_budgets") or {}).items()}
    out += profiles.feature_overrides(
        profile,
        framework,
        features.names(),
        max_prompt_length=prompt,
        max_response_length=resp,
        accelerator=accel,
        micro_batch_size=int(s["micro_batch_size"]),
        token_budget_overrides=budgets,
        disabled=features.disabled,
        megatron_recompute=s["megatron_recompute"],
    )

    out += [
        (k, s[name])
        for name, keys in memladder.SETTING_KEYS.items()
        if s.get(name) is not None and name not in RUN_SETTING_RUNGS
        for k in keys
        if framework == "fsdp" or name != "fsdp_offload_policy"
    ]

    out += _pool_overrides(s, mode, ent)
    out += _trainer_overrides(spec, s, ckpt, accel)
    if ent.v1:  # keys no code reads without a reference policy / a critic (profiles.drop_inert)
        use_ref, use_critic = profiles.needs_ref_critic(spec.settings.get("extra_overrides") or [])
        out = profiles.drop_inert(out, use_ref=use_ref, use_critic=use_critic)
    if ent.group_overrides:
        out = [(g.split("=", 1)[0], g.split("=", 1)[1]) for g in ent.group_overrides] + out
    return out


def _pool_overrides(s: dict[str, Any], mode: str | None, ent: profiles.Entry) -> list[tuple[str, object]]:
    """:func:`overrides_for`'s resources: the trainer pool's nodes and devices, and one-step-off's rollout pool (V1
    ``separate_async`` reads it from the rollout config, the 0.8 profile's legacy entry from ``rollout.*``)."""
    out: list[tuple[str, object]] = []
    nnodes = int(s["nnodes"])
    if mode == "one-step-off" and ent.v1:  # V1 separate_async reads the pool from the rollout config
        out += [
            ("actor_rollout_ref.hybrid_engine", False),
            ("trainer.nnodes", nnodes),
            ("trainer.n_gpus_per_node", int(s["trainer_gpus"])),
            (
                "actor_rollout_ref.rollout.nnodes",
                int(s.get("rollout_nnodes") or nnodes),
            ),  # multi-host: cluster.Topology
            ("actor_rollout_ref.rollout.n_gpus_per_node", int(s["rollout_gpus"])),
        ]
    elif mode == "one-step-off":
        out += [
            ("actor_rollout_ref.hybrid_engine", False),
            ("trainer.nnodes", nnodes),
            ("trainer.n_gpus_per_node", int(s["trainer_gpus"])),
            ("rollout.nnodes", int(s.get("rollout_nnodes") or nnodes)),  # multi-host: cluster.Topology
            ("rollout.n_gpus_per_node", int(s["rollout_gpus"])),
        ]
    else:
        out += [("trainer.nnodes", nnodes), ("trainer.n_gpus_per_node", int(s["n_gpus_per_node"]))]
    return out


def _trainer_overrides(spec: defaults.RunSpec, s: dict[str, Any], ckpt: str, accel: str) -> list[tuple[str, object]]:
    """:func:`overrides_for`'s trainer bookkeeping: loggers (console first: the supervisor reads it), names, steps,
    saves, validation, the checkpoint dir and ``resume_mode=auto`` (every retry resumes), the device."""
    out: list[tuple[str, object]] = []
    logger = ["console"]
    for name in spec.logger:
        if name not in logger:
            logger.append(name)
    out += [
        ("trainer.logger", logger),
        ("trainer.project_name", s["project"]),
        ("trainer.experiment_name", s["experiment"] or spec.run_id or "dapo"),
        ("trainer.total_training_steps", int(s["steps"])),
        ("trainer.save_freq", int(s["save_freq"])),
        *([("trainer.test_freq", int(s["test_freq"]))] if s.get("test_freq") is not None else []),
        ("trainer.default_local_dir", ckpt),
        ("trainer.resume_mode", "auto"),
    ]
    if skips_validation(spec):  # the model did not change since the first attempt's validation
        out.append(("trainer.val_before_train", False))
    if s.get("max_actor_ckpt_to_keep") not in (None, "", 0):  # verl keeps every save when null (trainer_base.py:964)
        out.append(("trainer.max_actor_ckpt_to_keep", int(s["max_actor_ckpt_to_keep"])))
    if accel == "npu":
        out.append(("trainer.device", "npu"))
    return out


#: the trainer's Megatron parallel keys (``engine/megatron.yaml:11,20``; the ref's own copy, ``ref/megatron_ref.yaml``,
#: does not follow the actor's, so it is set too and dropped when there is no reference policy)
MEGATRON_TP_PP = (
    (
        "actor_rollout_ref.actor.megatron.tensor_model_parallel_size",
        "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size",
    ),
    (
        "actor_rollout_ref.ref.megatron.tensor_model_parallel_size",
        "actor_rollout_ref.ref.megatron.pipeline_model_parallel_size",
    ),
)


def parallel_overrides(tp: int, pp: int) -> list[tuple[str, object]]:
    """The Megatron TP/PP keys of the actor (and the reference policy) for the settings ``trainer_tp`` /
    ``trainer_pp`` (verl's default is 1/1, ``engine/megatron.yaml:11,20``)."""
    return [kv for keys in MEGATRON_TP_PP for kv in zip(keys, (tp, pp))]


def skips_validation(spec: defaults.RunSpec) -> bool:
    """True when this attempt skips verl's validation before training (``trainer.val_before_train=False``;
    verl validates at start by default, ``trainer_base.py:439-442``): every attempt after the first (the
    supervisor sets ``spec["attempt"]``) and a ``--resume`` (``spec["resume_of"]``). A user's
    ``--override trainer.val_before_train=True`` comes last in the argv and wins."""
    return spec.attempt > 1 or bool(spec.resume_of)


def build_command(
    spec: Mapping[str, Any], features: FeatureSet, setting_changes: dict[str, Any] | None = None
) -> list[str]:
    """The verl argv for one attempt, e.g. ``["python3", "-m", "verl.trainer.main_ppo", "k=v", ...]``.

    ``spec``: the run spec (docs/design.md "Run spec"); ``features``: this attempt's features;
    ``setting_changes``: the ladder's changes to ``spec["settings"]`` (e.g.
    ``{"gpu_memory_utilization": 0.75}``; :data:`dapo_ops.core.memladder.SETTING_KEYS` names map to verl keys, and
    replace the same keys in ``extra_overrides``). Runs :func:`check_spec` first (without host facts) and
    raises :class:`OverrideError` on a bad spec, then :func:`verl_argv`. The argv carries no secrets (none are in
    the spec).
    """
    spec = defaults.RunSpec.read(spec)  # completed once here (a spec.json of an older dapo-ops, a hand-written one)
    check_spec(spec.with_settings(setting_changes))
    return verl_argv(spec, features, setting_changes)


def verl_argv(
    spec: Mapping[str, Any], features: FeatureSet, setting_changes: dict[str, Any] | None = None
) -> list[str]:
    """:func:`build_command` without its :func:`check_spec`: for a spec its caller has checked (the planner checks
    once, with the host's device count and the model's context length). Raises :class:`OverrideError` for a
    generated value OmegaConf would interpolate (:func:`check_literal`)."""
    spec = defaults.RunSpec.read(spec)
    ent = profiles.entry(spec.profile, spec.mode, spec.framework)
    pairs = overrides_for(spec, features, setting_changes)
    extra = effective_settings(spec, setting_changes).get("extra_overrides") or []
    laddered = {k for name in (setting_changes or {}) for k in memladder.SETTING_KEYS.get(name, ())}
    laddered |= set((setting_changes or {}).get("token_budgets") or {})
    # a key the user adds with '+key=v' that the plan adds too: the plan's goes (Hydra refuses a second add, "Could
    # not append to config. An item is already at ..."; the user's value wins anyway), unless the ladder changes it
    user_adds = {o.key for o in map(parse_override, extra) if o is not None and o.op == ADD} - laddered
    # de-duplicate: last value per key wins, first position kept (Hydra would reject some duplicates)
    order: list[str] = []
    vals: dict[str, object] = {}
    for k, v in pairs:
        if k.lstrip("+") in user_adds:
            continue
        if k not in vals:
            order.append(k)
        vals[k] = v
    argv = list(spec.launcher) + [spec.python or defaults.HOST["python"], "-m", ent.module] + ent.config_args()
    for k in order:
        check_literal(k, vals[k])
    argv += [f"{k}={hydra_value(vals[k])}" for k in order]
    argv += [str(x) for x in extra if key_of(x) not in laddered]  # the ladder's change wins over a raw override
    return argv


def command_string(argv: list[str], workdir: str | None = None) -> str:
    """Shell form of ``argv`` (``shlex.join``), prefixed with ``cd <workdir> &&`` when given."""
    cmd = shlex.join(argv)
    return f"cd {shlex.quote(workdir)} && {cmd}" if workdir else cmd


def config_location(spec: dict[str, Any]) -> tuple[str, str, list[str]]:
    """``(config_dir relative to the verl root, config_name, group_overrides)`` of the spec's entry,
    for the compose check (:mod:`dapo_ops.control.preflight.compose_check`)."""
    ent = profiles.entry(spec["profile"], spec["mode"], spec["framework"])
    return ent.config_dir, ent.config_name, list(ent.group_overrides)
