"""The device-OOM ladder per phase: which rungs lower which phase's peak on verl 0.9.1 (stdlib only).

Used by :mod:`dapo_ops.core.ladder` (the supervisor's decisions) and :mod:`dapo_ops.core.memfit` (the estimate's
start rung). Why each rung lowers its phase's peak is in :mod:`dapo_ops.core.ladder`'s docstring, with the
verl files it was read in. Rung names: ``rollout-util``, ``offload``, ``update-batch``,
``offload-policy``, ``recompute``, ``logprob-batch``, ``weight-bucket``, ``rollout-eager``. Setting rungs change run settings that
:mod:`dapo_ops.core.overrides` turns into verl keys (``gpu_memory_utilization``, ``rollout_eager``, ``token_budgets``,
``ppo_micro_batch_size_per_gpu``, ``log_prob_micro_batch_size_per_gpu``, ``fsdp_offload_policy``,
``weight_sync_bucket_mb``): which keys, :data:`SETTING_KEYS` says, the one table of them. The ``settings`` every function here takes are complete (every key of
:data:`dapo_ops.core.defaults.SPEC_SETTINGS`: :func:`dapo_ops.core.defaults.complete_settings`, which
:func:`dapo_ops.core.ladder.decide` and :func:`dapo_ops.core.memfit.fit` apply).

One-step-off weight sync (V1 ``separate_async``) is chosen by the side that ran out (``Verdict.detail["side"]``,
``trainer`` | ``rollout``): the trainer gathers each bucket and sends it from its own devices
(``verl/workers/engine_workers.py:755-766``) through a checkpoint engine that holds two buffers of
``update_weights_bucket_megabytes`` on each side (``verl/checkpoint_engine/nccl_checkpoint_engine.py:124-125,169-173``;
default 2048 MB, ``verl/workers/config/rollout.py:135``): only ``weight-bucket`` (bucket / 2) lowers the trainer's
peak, the rollout pool's share (``rollout-util``) never does. On the rollout side the share does not lower the sync
peak either: verl's standalone rollout frees its KV cache before the buckets are allocated and restores it after
(``verl/checkpoint_engine/base.py:532-556``, ``verl/workers/rollout/vllm_rollout/vllm_async_server.py:875-892``,
``free_cache_engine`` default True): the bucket is halved first there too.
"""

from __future__ import annotations
from typing import Any, Mapping

from dapo_ops.core.classify.verdict import PHASES
from dapo_ops.core.features import FeatureSet
from dapo_ops.core.hydra_override import Override, last_by_key, value_of
from dapo_ops.core.policy import NO_RUNG_PHASES
from dapo_ops.core import defaults, profiles

#: Memory rungs of the phase-less (``unknown``) ladder, in order (docs/troubleshooting.md oom-device).
RUNGS = ("offload", "recompute")
KV_STEP = 0.1
KV_FLOOR = 0.4
MICRO_DIVISOR = 4
ACTOR_BUDGET = "actor_rollout_ref.actor.ppo_max_token_len_per_gpu"
LOGPROB_BUDGETS = (
    "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu",
    "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu",
)
#: The one table of the ladder's setting changes (the setting rungs below; ``token_budgets`` carries its verl keys in
#: its value) and the plan's fit choices (:mod:`dapo_ops.core.fastfit`) -> the verl keys each sets. Read here, by :func:`dapo_ops.core.overrides.overrides_for` (appended after
#: the feature keys so they win), :func:`dapo_ops.core.overrides.verl_argv` (a ladder change replaces the same key in
#: ``extra_overrides``) and :func:`dapo_ops.core.learned.conflicts` (a learned change of a key the user set with
#: ``--override`` is not used).
#: Keys read at verl/workers/engine_workers.py:619-628 and verl/workers/engine/fsdp/transformer_impl.py:456.
SETTING_KEYS: dict[str, tuple[str, ...]] = {
    # the rollout-util rung; also a run setting, set with the rollout engine's keys in overrides.overrides_for
    # (verl/workers/config/rollout.py:185, RolloutConfig.gpu_memory_utilization)
    "gpu_memory_utilization": ("actor_rollout_ref.rollout.gpu_memory_utilization",),
    # the rollout-eager rung; also a run setting, set with the rollout engine's keys (rollout.py:188)
    "rollout_eager": ("actor_rollout_ref.rollout.enforce_eager",),
    "ppo_micro_batch_size_per_gpu": ("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",),
    "log_prob_micro_batch_size_per_gpu": (
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu",
    ),
    "fsdp_offload_policy": ("actor_rollout_ref.actor.fsdp_config.offload_policy",),
    # verl/workers/config/rollout.py:135 (CheckpointEngineConfig), read by both sides' engines
    "weight_sync_bucket_mb": ("actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes",),
    # no rung's: the plan's rollout scheduler choices (dapo_ops/core/fastfit.py; rollout.yaml:78,84,
    # vllm_async_server.py:333-335), set the same way
    "rollout_max_num_seqs": ("actor_rollout_ref.rollout.max_num_seqs",),
    "rollout_max_num_batched_tokens": ("actor_rollout_ref.rollout.max_num_batched_tokens",),
}

#: the weight-sync bucket (MB): verl's key, its default (verl/workers/config/rollout.py:135, rollout/rollout.yaml:296)
#: and the floor the ``weight-bucket`` rung stops at (verl's separate_async CI runs 1024)
BUCKET_KEY = SETTING_KEYS["weight_sync_bucket_mb"][0]
BUCKET_MB_DEFAULT = 2048
BUCKET_MB_FLOOR = 256
#: the sides a device OOM can be on (``Verdict.detail["side"]``)
SIDES = ("trainer", "rollout")

#: why a device OOM of each phase no rung shrinks (:data:`dapo_ops.core.policy.NO_RUNG_PHASES`) stops, and the fix
STOP_FIXES = {
    "model-load": (
        "device OOM while loading the model: no rung lowers it (the weights must fit the trainer's shards)",
        [
            "more devices for the trainer pool, or a larger tensor/pipeline parallel size (Megatron)",
            "a smaller model or a lower-precision checkpoint; free devices held by leftover processes",
        ],
    ),
    "checkpoint-load": (
        "device OOM while loading the checkpoint on resume: no rung shrinks the restored state",
        [
            "resume on the same or more devices with offload on (ENABLE_OFFLOAD=True) so optimizer "
            "state loads onto the CPU, or start from an earlier global_step_N",
            "free devices held by leftover processes (nvidia-smi / npu-smi info)",
        ],
    ),
    "checkpoint-save": (
        "device OOM while saving a checkpoint: no rung lowers the state gathered for the save",
        [
            "save fewer contents: actor_rollout_ref.actor.checkpoint.save_contents without 'hf_model'",
            "more devices for the trainer pool (smaller shards per device)",
        ],
    ),
}
if set(STOP_FIXES) != set(NO_RUNG_PHASES):  # an explicit check (python -O keeps it)
    raise ValueError(
        f"memladder.STOP_FIXES names {sorted(STOP_FIXES)}, the policy's no-rung phases are {sorted(NO_RUNG_PHASES)}"
    )


def _seq_len(settings: dict[str, Any]) -> int:
    return int(settings["max_prompt_length"]) + int(settings["max_response_length"])


def keep_token_budgets(settings: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """Return ``changes`` with every ``*max_token_len*`` value raised to at least prompt+response: a top-level key
    and each verl key of the ladder's ``token_budgets`` (where the setting rungs put them, :func:`_shrink_budget`;
    a second trial's ``inv launch --resume R --max-prompt-length 4096`` of a run on the update-batch rung carried
    its 10240 below the new 12288 and was refused, ``core/profiles.py``). ``memory_rungs`` (the record) is left as
    it was.

    The sequence length is taken from ``changes`` first (a change may shorten the response),
    then from ``settings``.
    """
    merged = dict(settings)
    merged.update(changes)
    floor = _seq_len(merged)

    def floored(d: dict[str, Any]) -> dict[str, Any]:
        return {k: floor if "max_token_len" in k and v is not None and int(v) < floor else v for k, v in d.items()}

    out = floored(changes)
    if isinstance(changes.get("token_budgets"), dict):
        out["token_budgets"] = floored(changes["token_budgets"])
    return out


def phase_of(detail: dict[str, Any]) -> str:
    """The OOM phase of a verdict detail: a :data:`PHASES` name (``unknown`` when absent or unknown)."""
    ph = str((detail or {}).get("phase") or "unknown")
    return ph if ph in PHASES else "unknown"


def phase_rungs(
    phase: str, framework: str | None = "fsdp", mode: str | None = "dapo", side: str | None = None
) -> tuple[str, ...]:
    """The ordered rungs of one phase's ladder (see the module docstring for why each lowers the peak).

    ``framework``: ``fsdp`` | ``megatron``; ``mode``: ``dapo`` (colocated) | ``one-step-off`` (actor offload
    does not free the rollout's devices there); ``side``: ``trainer`` | ``rollout`` | None (unknown), the side of
    a one-step-off weight sync that ran out. A rung may appear twice (applied twice).
    """
    colocated = mode != "one-step-off"
    if phase == "weight-sync" and not colocated:
        if side == "trainer":  # the trainer's peak: its bucket buffers; the rollout's share is on other devices
            return ("weight-bucket", "weight-bucket")
        # the rollout side (and an unknown side: the bucket is on both): V1 standalone rollout frees the KV cache
        # before the buckets are allocated and restores it after the engine's finalize freed them
        # (verl/checkpoint_engine/base.py:532-556, workers/rollout/vllm_rollout/vllm_async_server.py:875-892,
        # free_cache_engine default True, workers/config/rollout.py:190): the sync peak is vLLM's weights + 2 buckets,
        # which only the bucket lowers; the share last, for the KV cache's re-allocation after the sync
        return ("weight-bucket", "weight-bucket", "rollout-util")
    if phase == "rollout-init":  # the KV cache and the graph capture (vLLM captures its graphs at start-up)
        return (
            ("rollout-util", "rollout-eager", "offload")
            if colocated
            else ("rollout-util", "rollout-eager", "rollout-util")
        )
    if phase in ("weight-sync", "generation"):
        return ("rollout-util", "offload") if colocated else ("rollout-util", "rollout-util")
    if phase == "update":
        return ("update-batch", "update-batch") + (("offload-policy",) if framework == "fsdp" else ()) + ("recompute",)
    if phase == "log-prob":
        return ("logprob-batch", "logprob-batch")
    if phase in NO_RUNG_PHASES:
        return ()
    return RUNGS


def rung_status(features: FeatureSet, rung: str) -> str | None:
    """Why feature ``rung`` cannot be the next rung, or None if it can."""
    if rung in features.disabled:
        return f"{rung}: skipped, turned off by the user (-{rung}); a user choice is never overridden"
    src = features.source_of(rung)
    if src is not None:
        return f"{rung}: skipped, already on ({src})"
    return None


def _full_recompute_already(features: FeatureSet, rung: str, settings: dict[str, Any]) -> str | None:
    """Why the ``recompute`` rung would change nothing on Megatron: gradient checkpointing already runs full/uniform/1
    there (``settings["megatron_recompute"]`` ``full``, :data:`dapo_ops.core.profiles.MEGATRON_RECOMPUTE`); else None."""
    if (
        rung == "recompute"
        and settings.get("framework") == "megatron"
        and settings.get("megatron_recompute") == "full"
        and features.has("gradient_checkpointing")
    ):
        return "recompute: skipped, gradient checkpointing already runs Megatron's full recompute (full/uniform/1)"
    return None


def _feature_rung_skip(features: FeatureSet, rung: str, settings: dict[str, Any]) -> str | None:
    """Why feature rung ``rung`` (``offload`` | ``recompute``) is not the next rung, else None: turned off or on
    already (:func:`rung_status`), Megatron's full recompute running already, or every key it would change set by the
    user's ``--override`` (:func:`_set_by_user`)."""
    return (
        rung_status(features, rung)
        or _full_recompute_already(features, rung, settings)
        or _set_by_user(features, rung, settings)
    )


def _set_by_user(features: FeatureSet, rung: str, settings: dict[str, Any]) -> str | None:
    """Why feature rung ``rung`` would change nothing verl runs: every verl key it changes is set by the user's
    ``--override`` (``settings["extra_overrides"]``), which verl's command line carries after the features' keys, so
    the user's value decides (:func:`dapo_ops.core.overrides.verl_argv`; the ladder never removes it). E.g.
    ``--override actor_rollout_ref.actor.fsdp_config.param_offload=True`` and ``...optimizer_offload=True`` on a DAPO
    run with no reference policy nor critic: the ``offload`` rung would retry the same run. The rung's keys are those
    whose value :func:`dapo_ops.core.profiles.feature_overrides` gives differently with it on and off, less the
    ``ref.*`` / ``critic.*`` keys of roles the run does not have (:func:`dapo_ops.core.profiles.needs_ref_critic`,
    :func:`dapo_ops.core.profiles.drop_inert`: no code reads them). None when one of them is left to change."""
    user = last_by_key(settings.get("extra_overrides") or [])
    if not user:
        return None
    changed = feature_keys(features.names(), rung, features.disabled, settings)
    if not changed or any(k not in user for k in changed):
        return None
    return f"{rung}: skipped, it would change nothing: your --override sets {', '.join(changed)} (a user choice is never overridden)"


def feature_keys(
    names: frozenset[str], feature: str, disabled: frozenset[str], settings: dict[str, Any]
) -> dict[str, tuple[object, object]]:
    """``{verl key: (its value with ``feature`` off, with it on)}`` for every key the feature changes, the other
    features as ``names`` (on) and ``disabled`` (turned off with ``-name``) say. Off is the feature not enabled AND
    turned off (``-feature``), on is it enabled and not turned off: a ``-name`` is part of what a feature's off writes
    (``-gradient_checkpointing`` is what keeps the ``recompute`` feature from turning FSDP's gradient checkpointing
    on, :func:`dapo_ops.core.profiles.feature_overrides`; ``-prefix_cache`` writes verl's key False). So
    ``actor_rollout_ref.model.enable_gradient_checkpointing`` is a key of ``gradient_checkpointing`` whatever else is
    on, as in verl, which reads it alone to turn checkpointing on (``verl/workers/engine/fsdp/transformer_impl.py:335``).
    Keys as :func:`dapo_ops.core.profiles.feature_overrides` writes them (the table of feature -> verl keys the plan's
    own :func:`dapo_ops.core.overrides.overrides_for` writes) for complete-able ``settings`` (``framework``,
    ``profile``, ``accelerator`` read from it when there), less the ``ref.*`` / ``critic.*`` keys of roles the run
    does not have (:func:`dapo_ops.core.profiles.needs_ref_critic`, :func:`dapo_ops.core.profiles.drop_inert`: no code
    reads them). The one place a feature's keys are worked out: :func:`_set_by_user` (the ladder's "set by the user"
    skip), the memory-fit estimate (:func:`dapo_ops.core.memfit.features_run`) and the dry run's features table
    (dapo_ops/control/launch/dryrun.py, "your --override ... decides") read it."""
    s = defaults.complete_settings(dict(settings))
    spec = defaults.RunSpec.read({"settings": s})  # the run's roles and the default verl profile (0.9)
    use_ref, use_critic = profiles.needs_ref_critic(settings.get("extra_overrides") or [])

    def keys(ns: frozenset[str], off: frozenset[str]) -> dict[str, object]:
        pairs = profiles.feature_overrides(
            str(s.get("profile") or spec.profile),
            s.get("framework"),
            ns,
            max_prompt_length=int(s["max_prompt_length"]),
            max_response_length=int(s["max_response_length"]),
            accelerator=str(s.get("accelerator") or defaults.HOST["accelerator"]),
            micro_batch_size=int(s["micro_batch_size"]),
            disabled=off,
            megatron_recompute=s["megatron_recompute"],
        )
        return {k.lstrip("+"): v for k, v in profiles.drop_inert(pairs, use_ref=use_ref, use_critic=use_critic)}

    off, on = keys(names - {feature}, disabled | {feature}), keys(names | {feature}, disabled - {feature})
    return {k: (off.get(k), v) for k, v in on.items() if v != off.get(k)}


def feature_contradiction(features: FeatureSet, settings: dict[str, Any]) -> str | None:
    """One line when the user's ``--override`` (``settings["extra_overrides"]``) sets a key of a feature the user
    decided explicitly (``--features x`` / ``-x``, ``--offload``) to the value the other state writes
    (``--features -offload --override ...fsdp_config.param_offload=True``): two explicit settings that contradict
    each other, so neither is taken over the other. A key's value is compared as verl tests it: a bool by its
    truthiness (:func:`dapo_ops.core.hydra_override.truth`), anything else as text; a ``~key`` deletion is not
    compared. A default feature is not a decision: an override of its key decides (the dry run's table says so).
    ``settings``: as :func:`feature_keys` takes them. None: no contradiction."""
    from dapo_ops.core.hydra_override import last_by_key, truth

    user = last_by_key(settings.get("extra_overrides") or [])
    if not user:
        return None
    for name in sorted(features.disabled | {f.name for f in features.enabled if f.source == "explicit"}):
        on = features.has(name)
        for key, vals in feature_keys(features.names(), name, features.disabled, settings).items():
            o = user.get(key)
            if o is None or o.deletes:
                continue
            mine, other = (vals[1], vals[0]) if on else (vals[0], vals[1])
            said = truth(o) if isinstance(mine, bool) else (o.value or "").strip()
            if said != (mine if isinstance(mine, bool) else str(mine)):
                choice = name if on else f"-{name}"
                return (
                    f"--override {o.head}={o.value} contradicts {choice} in the features (--features / "
                    f"USER_FEATURES{', --offload / ENABLE_OFFLOAD' if name == 'offload' else ''}), which sets "
                    f"{key}={mine}: drop one of them"
                )
    return None


def _extra_value(settings: dict[str, Any], key: str, user: Mapping[str, Override] | None = None) -> int | None:
    """The whole number the user's last ``--override`` of ``key`` in ``settings["extra_overrides"]`` gives it
    (:func:`dapo_ops.core.hydra_override.value_of`: the last one wins, as in Hydra), or None (none, not a number, or
    a ``~key`` deletion). ``user``: ``extra_overrides`` parsed already (:func:`dapo_ops.core.hydra_override.last_by_key`),
    else parsed here."""
    v = value_of(settings.get("extra_overrides") or [] if user is None else user.values(), key)
    try:
        return int(v) if v is not None else None
    except ValueError:
        return None


def current_budget(settings: dict[str, Any], key: str = ACTOR_BUDGET) -> int:
    """The dynamic-batch token budget ``key`` an attempt with ``settings`` runs with (tokens): the ladder's
    ``token_budgets``, else the user's override, else the profile's default (dapo_ops/core/profiles.py)."""
    budgets = profiles.token_budgets(int(settings["max_prompt_length"]), int(settings["max_response_length"]))
    return int((settings.get("token_budgets") or {}).get(key) or _extra_value(settings, key) or budgets[key])


def current_micro(settings: dict[str, Any], name: str, user: Mapping[str, Override] | None = None) -> int:
    """The micro-batch (sequences per device) verl runs without dynamic batch for setting ``name``
    (``ppo_micro_batch_size_per_gpu`` / ``log_prob_micro_batch_size_per_gpu``, a key of :data:`SETTING_KEYS`) with
    ``settings`` (rung changes applied): the setting (the plan's fit or a ladder rung: a rung's change drops the
    user's override from verl's argv, core/overrides.py ``verl_argv``; the fit leaves a knob the user overrides
    alone), else the user's last ``--override`` of its first verl key when a positive whole number, else
    ``micro_batch_size``. ``user``: ``settings["extra_overrides"]`` parsed already, else parsed here."""
    given = _extra_value(settings, SETTING_KEYS[name][0], user)
    return int(settings.get(name) or (given if given is not None and given > 0 else 0) or settings["micro_batch_size"])


def _shrink_budget(settings: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any] | None:
    budgets = dict(settings.get("token_budgets") or {})
    seq = _seq_len(settings)
    new = dict(budgets)
    for k in keys:
        cur = current_budget(settings, k)
        if max(seq, cur // 2) < cur:
            new[k] = max(seq, cur // 2)
    return {"token_budgets": new} if new != budgets else None


def _shrink_micro(settings: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The micro-batch rung's change of setting ``name`` (a key of the ladder's table,
    :data:`SETTING_KEYS`): its value (the setting, else an ``--override`` of its first verl
    key, else ``micro_batch_size``) divided by :data:`MICRO_DIVISOR`, down to a divisor of it: verl needs the
    micro-batch to divide what a device gets (``verl/workers/config/actor.py:233``,
    ``verl/workers/engine/utils.py:126`` "data size must be divisible by ... micro_batch_size_per_gpu"), and a
    divisor of a micro-batch that divided it still does (18 -> 3, not 4); None at 1."""
    cur = current_micro(settings, name)
    new = max(d for d in range(1, max(1, cur // MICRO_DIVISOR) + 1) if cur % d == 0)
    return {name: new} if new < cur else None


def _setting_rung(
    rung: str, features: FeatureSet, settings: dict[str, Any]
) -> tuple[dict[str, Any] | None, str | None]:
    """``(changes, why_not)`` for a setting rung: the changes it makes now, or None and why it cannot."""
    dyn = features.has("dynamic_batch")
    if rung == "rollout-util":
        cur = float(settings["gpu_memory_utilization"])
        new = round(cur - KV_STEP, 2)
        if new < KV_FLOOR - 1e-9:
            return None, f"rollout-util: skipped, gpu_memory_utilization={cur} is at the floor {KV_FLOOR}"
        return {"gpu_memory_utilization": new}, None
    if rung in ("update-batch", "logprob-batch"):
        upd = rung == "update-batch"
        if dyn:
            ch = _shrink_budget(settings, (ACTOR_BUDGET,) if upd else LOGPROB_BUDGETS)
            what = "token budget at the floor prompt+response = %d" % _seq_len(settings)
        else:
            ch = _shrink_micro(settings, "ppo_micro_batch_size_per_gpu" if upd else "log_prob_micro_batch_size_per_gpu")
            what = "micro-batch already 1"
        return (ch, None) if ch else (None, f"{rung}: skipped, {what}")
    if rung == "weight-bucket":
        cur = int(settings.get("weight_sync_bucket_mb") or _extra_value(settings, BUCKET_KEY) or BUCKET_MB_DEFAULT)
        new = max(BUCKET_MB_FLOOR, cur // 2)
        if new >= cur:
            return (
                None,
                f"weight-bucket: skipped, update_weights_bucket_megabytes={cur} is at the floor {BUCKET_MB_FLOOR}",
            )
        return {"weight_sync_bucket_mb": new}, None
    if rung == "rollout-eager":
        if settings.get("rollout_eager"):
            return None, "rollout-eager: skipped, the rollout already runs eager (ROLLOUT_EAGER)"
        return {"rollout_eager": True}, None
    if rung == "offload-policy":
        if settings.get("fsdp_offload_policy"):
            return None, "offload-policy: skipped, already on"
        if settings.get("strategy") == "fsdp":
            return None, (
                "offload-policy: skipped, the actor runs verl's FSDP1 (strategy fsdp), which never reads "
                "offload_policy (verl/workers/engine/fsdp/transformer_impl.py:423-449), and its checkpoint does not "
                "load into fsdp2"
            )
        return {"fsdp_offload_policy": True}, None
    raise ValueError(f"unknown rung {rung!r}")


def next_rung(
    features: FeatureSet, phase: str, settings: dict[str, Any], side: str | None = None
) -> tuple[str | None, FeatureSet | None, dict[str, Any], list[str]]:
    """The next rung of ``phase``'s ladder (``side``: see :func:`phase_rungs`) given what the ladder already applied.

    Returns ``(rung, new_features_or_None, changes, skipped)``: ``rung`` None when the ladder is
    exhausted. Feature rungs give ``new_features`` (source not yet set: the caller adds it);
    setting rungs give ``changes``. Rungs already applied (``settings["memory_rungs"]``) are consumed
    in order, so a rung listed twice is applied twice.
    """
    used: dict[str, Any] = {}
    for r in settings.get("memory_rungs") or []:
        used[r["rung"]] = used.get(r["rung"], 0) + 1
    skipped: list[str] = []
    for rung in phase_rungs(phase, settings.get("framework"), settings.get("mode"), side):
        if used.get(rung, 0) > 0:
            used[rung] -= 1
            continue
        if rung in ("offload", "recompute"):
            why = _feature_rung_skip(features, rung, settings)
            if why:
                skipped.append(why)
                continue
            return rung, None, {}, skipped
        ch, why = _setting_rung(rung, features, settings)
        if ch is None:
            if why:
                skipped.append(why)
            continue
        return rung, None, ch, skipped
    return None, None, {}, skipped


def apply_rung(
    features: FeatureSet, phase: str, settings: dict[str, Any], source: str, side: str | None = None
) -> tuple[str | None, FeatureSet, dict[str, Any], list[str]]:
    """Apply :func:`next_rung` with ``source`` (``oom-retry-<N>`` | ``estimate``) for the OOM's ``side``.

    Returns ``(rung, features, setting_changes, skipped)``; ``setting_changes`` include the updated
    ``memory_rungs`` record (the full list). ``rung`` None: nothing left for this phase.
    """
    rung, _, ch, skipped = next_rung(features, phase, settings, side)
    if rung is None:
        return None, features, {}, skipped
    fs = features.add(rung, source) if rung in ("offload", "recompute") else features
    ch = keep_token_budgets(settings, ch)
    entry = {"rung": rung, "phase": phase, "source": source, "changes": dict(ch)}
    if side and phase == "weight-sync" and settings.get("mode") == "one-step-off":
        entry["side"] = side  # the side chose this ladder (colocated weight syncs have one ladder)
    rec = list(settings.get("memory_rungs") or []) + [entry]
    return rung, fs, dict(ch, memory_rungs=rec), skipped


def troubleshooting_md() -> str:
    """The memory section of docs/troubleshooting.md: phase -> what runs out -> what dapo-ops does -> what you change."""
    rows = [
        (
            "model-load",
            "the actor's (sharded) weights at init",
            "stops with the fix",
            "more devices / larger TP or PP, a smaller model, free leftover processes",
        ),
        (
            "checkpoint-load",
            "the restored model + optimizer state on resume",
            "stops with the fix",
            "resume with offload on (ENABLE_OFFLOAD=True), or from an earlier `global_step_N`",
        ),
        (
            "checkpoint-save",
            "state gathered for the save",
            "stops with the fix",
            "`actor.checkpoint.save_contents` without `hf_model`; more devices",
        ),
        (
            "rollout-init",
            "vLLM's reservation (`gpu_memory_utilization` x device) next to the actor",
            "rollout-util -0.1, then eager mode (no graph capture), then + offload (colocated)",
            "lower `gpu_memory_utilization`, ROLLOUT_EAGER=true, ENABLE_OFFLOAD=True, a larger rollout TP",
        ),
        (
            "weight-sync",
            "vLLM wake-up (weights, then KV cache) while the actor's state is still resident; one-step-off: the checkpoint engine's 2 x bucket buffers on each side",
            "rollout-util -0.1, then + offload: the actor leaves the device before the KV cache resumes; one-step-off by the side that ran out: trainer: bucket / 2 (twice), rollout: bucket / 2 (twice; verl frees the KV cache for the sync), then rollout-util",
            "same as rollout-init; one-step-off: `rollout.checkpoint_engine.update_weights_bucket_megabytes` (verl's CI: 1024)",
        ),
        (
            "generation",
            "vLLM's share plus whatever the actor keeps resident",
            "rollout-util -0.1, then + offload (colocated)",
            "lower `gpu_memory_utilization`, shorter responses",
        ),
        (
            "log-prob",
            "forward activations + logits of one log-prob micro-batch",
            "log-prob token budget / 2 (or micro-batch / 4), twice",
            "`*log_prob_max_token_len_per_gpu` toward prompt+response, `log_prob_micro_batch_size_per_gpu=1`",
        ),
        (
            "update",
            "activations of one update micro-batch + params, grads, Adam state (offload does not help: they are loaded back for the update)",
            "update token budget / 2 (or micro-batch / 4), twice; FSDP2 offload_policy; recompute",
            "`ppo_max_token_len_per_gpu` / `ppo_micro_batch_size_per_gpu`, shorter responses, more devices, ulysses SP",
        ),
        ("unknown", "unknown", "+ offload, then + recompute", "read the traceback: the phase decides the lever"),
    ]
    out = [
        "## Device OOM by phase",
        "",
        "`detail.phase` of an `oom-device` verdict picks the ladder (`dapo_ops/core/ladder.py`); `MAX_OOM_RETRIES` bounds it;"
        " every rung is recorded in `setting_changes.memory_rungs` with its source (`oom-retry-N`, or `estimate` when the"
        " pre-launch memory-fit estimate (`dapo_ops/core/memfit.py`) started on it). `inv launch --dry-run` shows the ladder"
        " per phase and the per-phase estimate.",
        "",
        "| phase | what runs out | what dapo-ops does | what you can change |",
        "|---|---|---|---|",
    ]
    out += [f"| `{p}` | {a} | {b} | {c} |" for p, a, b, c in rows]
    return "\n".join(out) + "\n"
