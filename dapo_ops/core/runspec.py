"""The run spec's settings (stdlib only): the effective values an attempt runs with (:func:`effective_settings`:
the spec completed from the one defaults table, :mod:`dapo_ops.core.defaults`, <- the ladder's changes), values
derived from them (:func:`parameter_sync_step`) and :func:`check_spec`, which rejects a spec that cannot work
before anything is launched, with one line naming the value and the fix. check_spec is called once where a plan is
built (dapo_ops/control/launch/plan.py make_plan, with the host's device count and the model's context; a multi-host plan
after its topology is applied) and by :func:`dapo_ops.core.overrides.build_command` for every attempt's argv (the
supervisor: the ladder's changes make each attempt's spec its own).
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from dapo_ops.core import defaults
from dapo_ops.core import memfit
from dapo_ops.core import memladder
from dapo_ops.core import profiles
from dapo_ops.core.hydra_override import Override, last_by_key, parse_override, truth
from dapo_ops.core.profiles import OverrideError

__all__ = ["MAX_STEPS", "as_int", "check_spec", "data_parallel_size", "effective_settings", "parameter_sync_step"]


def effective_settings(spec: Mapping[str, Any], setting_changes: dict[str, Any] | None = None) -> dict[str, Any]:
    """The settings an attempt runs with: ``spec["settings"]`` completed from the one defaults table
    (:meth:`dapo_ops.core.defaults.RunSpec.read`: only missing keys; a None that is there stays None) <-
    ``setting_changes`` (the ladder's changes win)."""
    s = dict(defaults.RunSpec.read(spec).settings)
    s.update(setting_changes or {})
    return s


def as_int(s: dict[str, Any], key: str, flag: str) -> int:
    """``s[key]`` as an int; :class:`OverrideError` naming ``flag`` when it is not a whole number."""
    v: Any = s.get(key)  # a JSON value: int() raises TypeError/ValueError for the wrong ones
    try:
        if isinstance(v, bool):
            raise ValueError
        return int(v)
    except (TypeError, ValueError):
        raise OverrideError(f"{key}={v!r} is not an integer; set {flag} to a whole number") from None


MAX_STEPS = 1_000_000  #: upper bound of TRAIN_STEPS
#: refused when set True (check_spec): with it verl 0.9.1's V1 trainer skips the resume tracker
#: (verl/trainer/ppo/v1/trainer_base.py:1011-1020) and no V1 code calls async_calls_finalize_fn_exec, so the
#: Megatron manager's own tracker write at finalize (utils/checkpoint/megatron_checkpoint_manager.py:1136-1146)
#: never runs either: resume_mode=auto finds nothing and no save can be told complete.
ASYNC_SAVE_KEY = "actor_rollout_ref.actor.checkpoint.async_save"


def check_spec(spec: Mapping[str, Any], host_devices: int | None = None, model_max_len: int | None = None) -> None:
    """Reject a run spec that cannot work, before anything is launched.

    ``host_devices``: accelerators per host (inventory ``devices`` / what npu-smi reports); ``None``
    skips the device-count check. ``model_max_len``: the model's ``max_position_embeddings``
    (``config.json``); ``None`` skips the context check. Raises :class:`OverrideError` with one line
    for: unknown framework/mode/profile; steps <= 0; trainer + rollout devices > host devices
    (one-step-off) or ``n_gpus_per_node`` > host devices (dapo); rollout devices not divisible by the
    rollout TP; prompt + response over the model's context without ``max_position_embeddings``;
    a relative checkpoint dir; ``gpu_memory_utilization`` outside (0, 1]; ``--mode sync`` for one-step-off;
    on V1 ``separate_async`` (0.9 one-step-off) ``train_batch_size != parameter_sync_step x ppo_mini_batch_size``
    (verl asserts it in ``verl/trainer/ppo/v1/trainer_separate_async.py:59-63``, after minutes of start-up);
    an ``extra_overrides`` entry ``actor_rollout_ref.actor.checkpoint.async_save=True`` (:data:`ASYNC_SAVE_KEY`:
    nothing could be resumed from); a rollout ``mode=sync`` or ``pipeline_model_parallel_size`` > 1 override
    (verl's RolloutConfig refuses both, :func:`_rollout_refusal`).
    """
    spec = defaults.RunSpec.read(spec)
    mode, framework, profile = spec.mode, spec.framework, spec.profile
    profiles.check_choice(framework, profiles.FRAMEWORKS, "framework", "FRAMEWORK / --framework")
    profiles.check_choice(mode, profiles.MODES, "mode", "inv launch (dapo) / inv one-step-off")
    profiles.check_choice(profile, profiles.PROFILES, "verl profile", "--profile")
    s = effective_settings(spec)
    steps = as_int(s, "steps", "TRAIN_STEPS / --steps")
    if not 0 < steps <= MAX_STEPS:  # MAX_STEPS: a typo guard (10^6 steps of even a 1 s step is 11 days)
        raise OverrideError(
            f"TRAIN_STEPS={steps} must be a number of training steps in 1..{MAX_STEPS}; set --steps / "
            f"TRAIN_STEPS to the steps you mean"
        )
    prompt = as_int(s, "max_prompt_length", "--max-prompt-length")
    resp = as_int(s, "max_response_length", "MAX_RESPONSE_LENGTH / --max-response-length")
    if prompt <= 0 or resp <= 0:
        raise OverrideError(f"max_prompt_length={prompt} and MAX_RESPONSE_LENGTH={resp} must be positive")
    tp = as_int(s, "rollout_tp", "--rollout-tp")
    if tp <= 0:
        raise OverrideError(f"rollout_tp={tp} must be >= 1; set --rollout-tp")
    save_freq = as_int(s, "save_freq", "--save-freq")
    if save_freq == 0:
        raise OverrideError(
            "save_freq=0 is invalid: use a positive step interval (--save-freq 10), or -1 for no checkpoints"
        )
    _check_pools(mode, s, host_devices, tp)
    world = (
        as_int(s, "trainer_gpus", "--trainer-gpus")
        if mode == "one-step-off"
        else as_int(s, "n_gpus_per_node", "--trainer-gpus")
    ) * max(1, as_int(s, "nnodes", "--nnodes"))
    tbs = as_int(s, "train_batch_size", "--train-batch-size")
    mini = as_int(s, "ppo_mini_batch_size", "--ppo-mini-batch-size")
    n = as_int(s, "rollout_n", "--rollout-n")
    if min(tbs, mini, n) <= 0:
        raise OverrideError(f"train_batch_size={tbs}, ppo_mini_batch_size={mini}, rollout_n={n} must all be >= 1")
    if mini > tbs:
        raise OverrideError(
            f"ppo_mini_batch_size={mini} is larger than train_batch_size={tbs}; set --ppo-mini-batch-size <= {tbs}"
        )
    ent = profiles.entry(profile, mode, framework)
    profiles.v1_mode(ent, s["trainer_mode"])  # raises for --mode sync on one-step-off
    if profiles.v1_mode(ent) == "separate_async":
        pss = parameter_sync_step(s)
        if tbs != pss * mini:
            raise OverrideError(
                f"train_batch_size={tbs} must equal parameter_sync_step={pss} x ppo_mini_batch_size={mini} = "
                f"{pss * mini} for one-step-off (verl's separate_async asserts it, trainer_separate_async.py:59); "
                f"set --train-batch-size {pss * mini}, or PARAMETER_SYNC_STEP={tbs // mini if tbs % mini == 0 else 0} "
                f"(0: train_batch_size / ppo_mini_batch_size)"
            )
    # the one parse of extra_overrides every check below reads (a Megatron --override of TP / PP / CP is read by the
    # batch split): an override verl cannot read is refused before anything reads it
    last = _check_extra_overrides(s)
    bad = _batch_split_problems(spec, s, last, world, tbs, mini, n)
    if bad:  # every batch problem at once, each with the nearest values that split evenly
        raise OverrideError(bad)
    _check_context(s, prompt, resp, model_max_len)
    _check_gpu_memory_utilization(s)
    ckpt = s["ckpt_dir"]
    if not str(ckpt).startswith("/"):
        raise OverrideError(
            f"checkpoint dir {ckpt!r} is relative; verl joins it to the CWD on resume: use an absolute path"
        )
    _check_budget_overrides(spec, s, last, prompt + resp)
    _check_micro_batches(spec, s, last, data_parallel_size(spec, world, last)[0], mini, n)
    _check_step_batch(spec, s, last, world, tbs, n)
    _check_ulysses_padding(spec, last)


#: the model's bool flags verl 0.9.1 builds into HFModelConfig twice: hydra-instantiated without coercion in the
#: trainer (``verl/workers/engine_workers.py:540``) and by OmegaConf's structured merge in the vLLM server
#: (``verl/workers/rollout/vllm_rollout/vllm_async_server.py:1099``); only True / False / 0 / 1 mean the same in both
MODEL_FLAGS = ("actor_rollout_ref.model.enable_gradient_checkpointing", "actor_rollout_ref.model.use_remove_padding")
#: keys verl 0.9.1 reads straight from the composed config (``verl/workers/engine_workers.py:616-633``: attribute
#: access on a struct-mode DictConfig): a ``~key`` deletion fails verl's start with ConfigAttributeError
NOT_DELETABLE = (
    "actor_rollout_ref.actor.use_dynamic_bsz",
    "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz",
    "actor_rollout_ref.actor.ppo_max_token_len_per_gpu",
    "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
)
#: verl's one dynamic-batch switch of the actor (it asserts the rollout's log-prob one equals it,
#: ``engine_workers.py:616``) and FSDP's Ulysses sequence-parallel size (``verl/workers/engine/utils.py:110``)
DYNAMIC_KEY = "actor_rollout_ref.actor.use_dynamic_bsz"
ULYSSES_KEY = "actor_rollout_ref.actor.ulysses_sequence_parallel_size"


def _dynamic(spec: defaults.RunSpec, last: Mapping[str, Any]) -> bool:
    """Whether verl splits batches by token budget: the user's ``--override`` of :data:`DYNAMIC_KEY` (its truthiness),
    else the ``dynamic_batch`` feature."""
    o = last.get(DYNAMIC_KEY)
    return bool(truth(o)) if o is not None and not o.deletes else "dynamic_batch" in _feature_names(spec)


def _check_budget_overrides(spec: defaults.RunSpec, s: dict[str, Any], last: Mapping[str, Override], seq: int) -> None:
    """:func:`check_spec`'s token-budget and dynamic-batch keys given by ``--override``: no ``~`` deletion of one verl
    reads straight from the config (:data:`NOT_DELETABLE`), and under dynamic batch no budget below prompt + response
    over the sequence-parallel size (verl 0.9.1 asserts ``max_token_len_per_gpu x sp_size >= max_seq_len`` when it
    splits a batch, ``verl/workers/engine/utils.py:110``, ``verl/utils/seqlen_balancing.py:384-386``; sp_size: Megatron's
    CP, FSDP's Ulysses), after minutes of start-up. ``last``: the parsed ``extra_overrides`` (:func:`_check_extra_overrides`).
    Raises :class:`OverrideError`."""
    for key in NOT_DELETABLE:
        if key in last and last[key].deletes:
            raise OverrideError(
                f"--override {last[key].head} deletes a key verl 0.9.1 reads straight from the config "
                f"(engine_workers.py:616-633: its start fails with ConfigAttributeError); set a value instead"
            )
    if not spec.features or not _dynamic(spec, last):
        return
    sp = memfit.parallel_sizes(spec, user=last)["cp"] if spec.framework == "megatron" else 1
    u = last.get(ULYSSES_KEY)
    u_text = (u.text if u is not None else None) or ""
    sp = max(sp, int(u_text) if u_text.isdigit() else 1)
    budgets = profiles.token_budgets(int(s["max_prompt_length"]), int(s["max_response_length"]))
    for key, o in last.items():
        text = o.text
        if key in budgets and text is not None and text.lstrip("+-").isdigit() and int(text) * sp < seq:
            need = -(-seq // sp)
            raise OverrideError(
                f"--override {o.head}={text} is below max_prompt_length + MAX_RESPONSE_LENGTH = {seq}"
                + (f" over the sequence-parallel size {sp}" if sp > 1 else "")
                + f": verl asserts a token budget holds the longest sequence (seqlen_balancing.py:384); set it to at "
                f"least {need}"
            )


def _feature_names(spec: defaults.RunSpec) -> set[str]:
    """The names of the spec's first-attempt features (its ``features``, :meth:`FeatureSet.to_json`)."""
    return {str(f.get("name")) for f in spec.features if isinstance(f, dict)}


def _check_micro_batches(
    spec: defaults.RunSpec, s: dict[str, Any], last: Mapping[str, Override], dp: int, mini: int, n: int
) -> None:
    """:func:`check_spec`'s update micro-batch without dynamic batch: it divides what a data-parallel rank gets of a
    mini-batch (``ppo_mini_batch_size x rollout_n / dp``, ``verl/workers/engine_workers.py:267-270``): verl 0.9.1
    asserts "data size must be divisible by ... micro_batch_size_per_gpu" (``verl/workers/engine/utils.py:126``) at
    the first update, after minutes of start-up. The value verl gets: :func:`dapo_ops.core.memladder.current_micro`.
    The log-prob forward's is not checked here: its per-rank batch depends on the trainer's padding and mode
    (fastfit.py sizes it). ``last``: the parsed ``extra_overrides``. Raises :class:`OverrideError`."""
    if not spec.features or _dynamic(spec, last):
        return
    name = "ppo_micro_batch_size_per_gpu"
    per = mini * n // dp
    m = memladder.current_micro(s, name, last)
    o = last.get(memladder.SETTING_KEYS[name][0])
    where = (
        name
        if s.get(name)
        else f"--override {o.head}={o.text}"
        if o is not None and o.text == str(m)
        else "--micro-batch-size / MICRO_BATCH_SIZE"
    )
    if m > 0 and per % m:
        divs = ", ".join(str(d) for d in range(1, per + 1) if per % d == 0)
        raise OverrideError(
            f"micro-batch {m} ({where}) does not divide the {per} sequences a device gets of a mini-batch "
            f"(ppo_mini_batch_size {mini} x rollout_n {n} / {dp} data-parallel rank(s)): verl refuses it "
            f"(engine/utils.py:126); use one of {divs}, or dynamic batch"
        )


def _check_ulysses_padding(spec: defaults.RunSpec, last: Mapping[str, Override]) -> None:
    """:func:`check_spec`'s FSDP Ulysses sequence parallelism (``--override`` :data:`ULYSSES_KEY` > 1): verl 0.9.1's
    ``FSDPActorConfig.validate`` refuses it without ``actor_rollout_ref.model.use_remove_padding`` (verl/workers/config/
    actor.py:333-342, reached through ``validate_config``, verl/utils/config.py:160), at start-up. The value verl gets:
    the ``--override`` of the key (its truthiness; a ``~`` deletion reads as off there), else the ``remove_padding``
    feature (core/profiles.py). ``last``: the parsed ``extra_overrides``. Raises :class:`OverrideError`."""
    u = last.get(ULYSSES_KEY)
    u_text = (u.text if u is not None and not u.deletes else None) or ""
    if spec.framework != "fsdp" or not spec.features or not u_text.isdigit() or int(u_text) <= 1:
        return
    r = last.get(MODEL_FLAGS[1])
    if bool(truth(r)) if r is not None else "remove_padding" in _feature_names(spec):
        return
    raise OverrideError(
        f"--override {ULYSSES_KEY}={u_text} needs packed sequences: verl refuses Ulysses sequence parallelism without "
        f"{MODEL_FLAGS[1]} (verl/workers/config/actor.py:339); keep the remove_padding feature on"
    )


def _check_step_batch(
    spec: defaults.RunSpec, s: dict[str, Any], last: Mapping[str, Override], world: int, tbs: int, n: int
) -> None:
    """:func:`check_spec`'s whole step without dynamic batch (profile 0.9): verl 0.9.1's ``validate_config`` runs in the
    driver before the V1 trainer pads anything (``verl/trainer/main_ppo.py:177``) and asserts that ``train_batch_size x
    rollout_n`` splits into minimal batches: every trainer device on FSDP, ``dp x ppo_micro_batch_size_per_gpu`` on
    Megatron (``verl/utils/config.py:103-127``). The mini-batch check (:func:`_batch_split_problems`) does not cover a
    ``train_batch_size`` that is no multiple of ``ppo_mini_batch_size``. The 0.8 profile checks the step over every
    device already. ``last``: the parsed ``extra_overrides``. Raises :class:`OverrideError`."""
    if spec.profile == "0.8" or not spec.features or _dynamic(spec, last):
        return
    minimal, how = world, f"the {world} trainer devices"
    if spec.framework == "megatron":
        dp, shard = data_parallel_size(spec, world, last)
        m = memladder.current_micro(s, "ppo_micro_batch_size_per_gpu", last)
        minimal, how = dp * m, f"{dp} data-parallel rank(s) ({world} devices{shard}) x micro-batch {m}"
    if (tbs * n) % minimal:
        step = minimal // math.gcd(minimal, n)
        fits = " or ".join(str(x) for x in (tbs - tbs % step + step, tbs - tbs % step) if x >= 1)
        raise OverrideError(
            f"train_batch_size={tbs} x rollout_n={n} = {tbs * n} responses per step do not split into minimal batches "
            f"of {minimal} ({how}) without dynamic batch: verl refuses it at start-up (verl/utils/config.py:123); "
            f"try --train-batch-size {fits}, or keep dynamic_batch on"
        )


def _check_pools(mode: str | None, s: dict[str, Any], host_devices: int | None, tp: int) -> None:
    """:func:`check_spec`'s device pools: one-step-off's trainer + rollout devices, else ``n_gpus_per_node``, against
    the host's devices and the rollout TP. Raises :class:`OverrideError`."""
    if mode == "one-step-off":
        tg = as_int(s, "trainer_gpus", "TRAINER_GPUS / --trainer-gpus")
        rg = as_int(s, "rollout_gpus", "ROLLOUT_GPUS / --rollout-gpus")
        if tg <= 0 or rg <= 0:
            raise OverrideError(f"TRAINER_GPUS={tg} and ROLLOUT_GPUS={rg} must both be >= 1 for one-step-off")
        if host_devices is not None and tg + rg > int(host_devices):
            raise OverrideError(
                f"TRAINER_GPUS={tg} + ROLLOUT_GPUS={rg} = {tg + rg} devices, but the host has {host_devices}; "
                f"lower --trainer-gpus/--rollout-gpus so they add up to <= {host_devices}"
            )
        if rg % tp:
            raise OverrideError(
                f"ROLLOUT_GPUS={rg} is not divisible by the rollout tensor parallel size {tp}; "
                f"use --rollout-gpus as a multiple of {tp} or change --rollout-tp"
            )
    else:
        n = as_int(s, "n_gpus_per_node", "--trainer-gpus")
        if n <= 0:
            raise OverrideError(f"n_gpus_per_node={n} must be >= 1")
        if host_devices is not None and n > int(host_devices):
            raise OverrideError(
                f"the run asks for {n} devices per node, but the host has {host_devices}; "
                f"lower the device count to <= {host_devices}"
            )
        if n % tp:
            raise OverrideError(
                f"{n} devices are not divisible by the rollout tensor parallel size {tp}; "
                f"choose --rollout-tp that divides {n}"
            )


def _check_context(s: dict[str, Any], prompt: int, resp: int, model_max_len: int | None) -> None:
    """:func:`check_spec`'s context check: prompt + response within ``max_position_embeddings`` when set, else within
    the model's context (``model_max_len``, when known). Raises :class:`OverrideError`."""
    seq = prompt + resp
    mpe = s.get("max_position_embeddings")
    if mpe not in (None, "", 0):
        mpe = as_int(s, "max_position_embeddings", "--max-position-embeddings")
        if seq > mpe:
            raise OverrideError(
                f"max_prompt_length + MAX_RESPONSE_LENGTH = {seq} exceeds max_position_embeddings={mpe}; "
                f"raise --max-position-embeddings or lower --max-response-length"
            )
    elif model_max_len is not None and seq > int(model_max_len):
        raise OverrideError(
            f"max_prompt_length {prompt} + MAX_RESPONSE_LENGTH {resp} = {seq} exceeds the model's context "
            f"{model_max_len}; lower --max-response-length to <= {int(model_max_len) - prompt} "
            f"or set --max-position-embeddings {seq} if the model supports it"
        )


def _check_gpu_memory_utilization(s: dict[str, Any]) -> None:
    """:func:`check_spec`'s ``gpu_memory_utilization``: a number in (0, 1]. Raises :class:`OverrideError`."""
    g: Any = s.get("gpu_memory_utilization")
    try:
        g = float(g)
    except (TypeError, ValueError):
        raise OverrideError(f"gpu_memory_utilization={g!r} is not a number; use a fraction like 0.6") from None
    if not 0 < g <= 1:
        raise OverrideError(f"gpu_memory_utilization={g} must be in (0, 1]; use e.g. 0.6")


#: rollout keys whose values verl 0.9.1's ``RolloutConfig.__post_init__`` refuses (verl/workers/config/rollout.py:281-285
#: ``mode=sync``: ValueError; :319-323 ``pipeline_model_parallel_size > 1`` on vllm / sglang / trtllm:
#: NotImplementedError), raised in the rollout worker's ``init_model`` (verl/workers/engine_workers.py:651) after the
#: workers have started, in every mode dapo-ops launches (colocate_async and separate_async both build that worker)
ROLLOUT_MODE_KEY = "actor_rollout_ref.rollout.mode"
ROLLOUT_PP_KEY = "actor_rollout_ref.rollout.pipeline_model_parallel_size"


def _rollout_refusal(o: Override) -> str | None:
    """The one line :func:`_check_extra_overrides` refuses a parsed ``--override`` ``o`` of a rollout setting verl
    refuses with (:data:`ROLLOUT_MODE_KEY` ``sync``, :data:`ROLLOUT_PP_KEY` > 1), or None."""
    v = "" if o.deletes else (o.text or "").strip()
    if o.key == ROLLOUT_MODE_KEY and v.lower() == "sync":
        return (
            f"--override {o.head}={v}: verl 0.9.1 removed the sync rollout (RolloutConfig raises 'Rollout mode "
            f"'sync' has been removed', verl/workers/config/rollout.py:281); drop the override: the rollout is async "
            f"in every mode dapo-ops launches"
        )
    if o.key == ROLLOUT_PP_KEY and v.isdigit() and int(v) > 1:
        return (
            f"--override {o.head}={v}: verl 0.9.1's vLLM / SGLang rollout has no pipeline parallelism "
            f"(RolloutConfig raises NotImplementedError, verl/workers/config/rollout.py:319-323); drop it and split "
            f"the rollout with --rollout-tp instead"
        )
    return None


def _check_extra_overrides(s: dict[str, Any]) -> dict[str, Override]:
    """:func:`check_spec`'s ``extra_overrides``: each one a Hydra override (``key=value``, ``+``/``++``, ``~key``:
    :func:`dapo_ops.core.hydra_override.parse_override`), and no async checkpoint save (:data:`ASYNC_SAVE_KEY`).
    Returns them parsed, the last of each key (:func:`dapo_ops.core.hydra_override.last_by_key` over this one
    parse): what the other checks read. Raises :class:`OverrideError`."""
    parsed: list[Override] = []
    for x in s.get("extra_overrides") or []:
        o = parse_override(x) if isinstance(x, str) else None
        if isinstance(x, str) and not x.strip():  # `--override ''` / `--override "$UNSET"`
            raise OverrideError(
                f"--override {x!r} is empty; give key=value (or +key=value for a new key, ~key to delete), or drop it"
            )
        if o is None:
            raise OverrideError(
                f"extra override {x!r} is not key=value; write it as key=value (or +key=value for a new key)"
            )
        parsed.append(o)
        if (
            o.key in MODEL_FLAGS
            and not o.deletes
            and (o.value or "").strip().lower() not in ("true", "false", "0", "1")
        ):
            raise OverrideError(
                f"--override {o.head}={o.value}: verl 0.9.1 reads this model flag twice, by truthiness in the trainer "
                f"(engine_workers.py:540) and as a typed bool in the vLLM server (vllm_async_server.py:1099, which "
                f"refuses null and reads 'no' as False): write True or False"
            )
        refusal = _rollout_refusal(o)
        if refusal is not None:
            raise OverrideError(refusal)
        if o.key == ASYNC_SAVE_KEY and (o.text or "").lower() in ("true", "1", "yes", "on"):
            raise OverrideError(
                f"{ASYNC_SAVE_KEY}=True cannot be resumed: verl's V1 trainer then never writes "
                f"latest_checkpointed_iteration.txt (trainer_base.py:1012) and nothing finalizes the async save, so a "
                f"retry or --resume would start from step 0; drop the override (saves are synchronous)"
            )
    return last_by_key(parsed)


def data_parallel_size(
    spec: Mapping[str, Any], world: int, user: Mapping[str, Override] | None = None
) -> tuple[int, str]:
    """``(dp, how)``: the trainer's data-parallel size on ``world`` trainer devices and how it comes about. FSDP: every
    device is a data-parallel rank. Megatron: ``world / (TP x PP x CP)`` (megatron-core's ``initialize_model_parallel``;
    the sizes the spec runs with, :func:`dapo_ops.core.memfit.parallel_sizes`, settings then ``--override``).
    ``user``: the spec's ``extra_overrides`` parsed already (:func:`_check_extra_overrides`), else parsed here."""
    par = memfit.parallel_sizes(spec, user=user)
    shard = par["tp"] * par["pp"] * par["cp"]
    if shard <= 1:
        return world, ""
    cp = f" x CP {par['cp']}" if par["cp"] > 1 else ""
    return max(1, world // shard), f" / (TP {par['tp']} x PP {par['pp']}{cp})"


def _batch_split_problems(
    spec: defaults.RunSpec, s: dict[str, Any], last: Mapping[str, Override], world: int, tbs: int, mini: int, n: int
) -> str:
    """The one line refusing batch sizes verl cannot split over the trainer's data-parallel ranks, or "".

    verl 0.9.1's V1 trainer (profile 0.9) pads each step's batch to a multiple of ``lcm(dp, ppo_mini_batch_size x
    rollout_n)`` itself (``verl/trainer/ppo/v1/trainer_base.py:1589-1605``, ``_balance_batch`` :1620-1622), so
    ``train_batch_size`` needs nothing; what it asserts is that one mini-batch's responses split over the
    data-parallel ranks (``verl/workers/engine_workers.py:267-269``: ``mini_batch_size % get_data_parallel_size()
    == 0``). The 0.8 profile's legacy trainers split the whole step over every device: both batches are checked there.
    ``last``: the parsed ``extra_overrides`` (:func:`_check_extra_overrides`).
    """
    nodes = max(1, as_int(s, "nnodes", "--nnodes"))
    sizes: tuple[tuple[str, int], ...]
    if spec.profile == "0.8":
        dp, how, sizes = world, "", (("train_batch_size", tbs), ("ppo_mini_batch_size", mini))
    else:
        dp, how = data_parallel_size(spec, world, last)
        sizes = (("ppo_mini_batch_size", mini),)
    bad = [(k, v) for k, v in sizes if (v * n) % dp]
    if not bad:
        return ""
    step = dp // math.gcd(dp, n)
    parts = [
        f"{k}={v} x rollout_n={n} = {v * n} (try --{k.replace('_', '-')} "
        + " or ".join(str(x) for x in (v - v % step + step, v - v % step) if x >= 1)
        + ")"
        for k, v in bad
    ]
    where = f"{world} trainer devices" + (f" ({nodes} nodes x {world // nodes})" if nodes > 1 else "")
    if how:
        where = f"{dp} data-parallel ranks ({where}{how})"
    what = "responses per step" if spec.profile == "0.8" else "responses per mini-batch"
    return (
        f"{what} do not split evenly over {where}: "
        + "; ".join(parts)
        + f" (each must be a multiple of {step}; or change --rollout-n / the hosts)"
    )


def parameter_sync_step(s: dict[str, Any]) -> int:
    """``trainer.v1.separate_async.parameter_sync_step`` for effective settings ``s``: the setting, or (0 / unset)
    ``train_batch_size // ppo_mini_batch_size`` (at least 1), the value verl's assert
    (``trainer_separate_async.py:59-63``) accepts."""
    v = s.get("parameter_sync_step")
    if v not in (None, "", 0):
        return as_int(s, "parameter_sync_step", "PARAMETER_SYNC_STEP")
    return max(1, int(s["train_batch_size"]) // max(1, int(s["ppo_mini_batch_size"])))
