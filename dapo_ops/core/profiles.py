"""verl profiles: entry modules, config names and override keys per verl version (stdlib only).

Two profiles:

- ``"0.9"``: the verl 0.9.x release (primary; checked by composing against the 0.9.1 wheel's
  yaml). Both tasks run the V1 trainer ``verl.trainer.main_ppo`` (config ``ppo_trainer``;
  Megatron via the config-group override ``model_engine=megatron``, as verl's own
  verl's ``tests/special_e2e/run_v1_separate_async.sh`` does; ``ppo_megatron_trainer.yaml`` is marked
  deprecated in 0.9.1), in the V1 mode ``trainer.v1.trainer_mode`` (``ppo_trainer.yaml:238``, default
  ``sync``; the class is picked by ``register_trainer`` in ``verl/trainer/ppo/v1/trainer_*.py``):
  ``launch`` = ``colocate_async`` (the runbook's single-async DAPO: rollout colocated with training, one
  warm-up batch of prefetch, partial rollout; ``trainer_colocate_async.py``), or ``sync`` with
  ``--mode sync``; ``one-step-off`` = ``separate_async`` (trainer and rollout pools on separate devices,
  ``trainer_separate_async.py``; verl's CI replaced the legacy one-step-off entry with it, and the legacy
  trainer never reads ``algorithm.filter_groups``). V1 honours ``algorithm.filter_groups`` in every
  mode (``trainer_base.py:187-212``; it ignores ``max_num_gen_batches``). Reward keys:
  ``reward.reward_manager.name`` and ``+reward.reward_kwargs.*``. Megatron has no ``grad_offload``.
- ``"0.8"``: the 0.8-era ``main`` branch (volcengine/verl b178a3c, 2026-01). DAPO runs through the
  recipe submodule ``recipe.dapo.main_dapo`` (``recipe/dapo/config/dapo_trainer.yaml``, CWD = repo
  root). Reward keys ``reward_model.reward_manager=dapo``, ``reward_model.overlong_buffer.*`` and
  ``+reward_model.reward_kwargs.*``; Megatron ``grad_offload``; critic FSDP offload under
  ``critic.model.fsdp_config``.

One-step-off on ``"0.8"``: ``verl.experimental.one_step_off_policy.main_ppo`` with
``one_step_off_ppo_trainer`` / ``one_step_off_ppo_megatron_trainer``; those yaml files set
``hydra.searchpath: [file://verl/trainer/config]`` (relative to the CWD), so the generator adds an
absolute ``hydra.searchpath``. Facts: verl/trainer/main_ppo.py, verl/trainer/config/ppo_trainer.yaml, verl/trainer/config/actor/actor.yaml, verl/trainer/config/algorithm.py, hydra-core 1.3's override grammar, verl/trainer/config/
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from dapo_ops.core.hydra_override import last_by_key, truth

PROFILES = ("0.9", "0.8")
MODES = ("dapo", "one-step-off")
#: ``launch``'s DAPO trainer modes (setting ``trainer_mode``, flag ``--mode``): ``async`` = V1 ``colocate_async``
#: (the runbook's single-async DAPO), ``sync`` = V1 ``sync`` (plain synchronous DAPO).
DAPO_TRAINER_MODES = ("async", "sync")
_V1_MODE = {"async": "colocate_async", "sync": "sync"}
FRAMEWORKS = ("fsdp", "megatron")


class OverrideError(ValueError):
    """A run spec the generator cannot turn into a verl command; the message is one line: which value and the fix."""


@dataclass(frozen=True)
class Entry:
    """How one (profile, mode, framework) is launched.

    ``module``: ``python3 -m`` target. ``config_dir``: the entry's Hydra config dir relative to the
    verl source root. ``config_name``: passed as ``--config-name`` when it differs from the entry's
    ``@hydra.main`` default (``default_config_name``). ``group_overrides``: config-group overrides
    (``model_engine=megatron``). ``searchpath``: the yaml's ``hydra.searchpath`` is CWD-relative, so
    the generator emits an absolute one. ``filter_groups``: the entry does DAPO dynamic sampling.
    ``v1``: the entry is the V1 trainer (``trainer.v1.trainer_mode`` applies). ``separate``: the trainer and
    rollout pools are separate (``hybrid_engine=False``; ``separate_async`` on V1).
    """

    module: str
    config_dir: str
    config_name: str
    default_config_name: str
    group_overrides: tuple[str, ...] = ()
    searchpath: bool = False
    filter_groups: bool = False
    v1: bool = False
    separate: bool = False

    def config_args(self) -> list[str]:
        """``--config-name=...`` when needed (an empty list otherwise)."""
        if self.config_name != self.default_config_name:
            return [f"--config-name={self.config_name}"]
        return []


_OSO_MODULE = "verl.experimental.one_step_off_policy.main_ppo"
_OSO_DIR = "verl/experimental/one_step_off_policy/config"

_V1_MODULE, _V1_DIR, _V1_CONFIG = "verl.trainer.main_ppo", "verl/trainer/config", "ppo_trainer"
_MEG = ("model_engine=megatron",)

_ENTRIES: dict[tuple[str, str, str], Entry] = {
    ("0.9", "dapo", "fsdp"): Entry(_V1_MODULE, _V1_DIR, _V1_CONFIG, _V1_CONFIG, (), False, True, True),
    ("0.9", "dapo", "megatron"): Entry(_V1_MODULE, _V1_DIR, _V1_CONFIG, _V1_CONFIG, _MEG, False, True, True),
    ("0.9", "one-step-off", "fsdp"): Entry(_V1_MODULE, _V1_DIR, _V1_CONFIG, _V1_CONFIG, (), False, True, True, True),
    ("0.9", "one-step-off", "megatron"): Entry(
        _V1_MODULE, _V1_DIR, _V1_CONFIG, _V1_CONFIG, _MEG, False, True, True, True
    ),
    ("0.8", "dapo", "fsdp"): Entry(
        "recipe.dapo.main_dapo", "recipe/dapo/config", "dapo_trainer", "dapo_trainer", (), True, True
    ),
    ("0.8", "dapo", "megatron"): Entry(
        "recipe.dapo.main_dapo", "recipe/dapo/config", "dapo_megatron_trainer", "dapo_trainer", (), True, True
    ),
    ("0.8", "one-step-off", "fsdp"): Entry(
        _OSO_MODULE, _OSO_DIR, "one_step_off_ppo_trainer", "one_step_off_ppo_trainer", (), True, False, False, True
    ),
    ("0.8", "one-step-off", "megatron"): Entry(
        _OSO_MODULE,
        _OSO_DIR,
        "one_step_off_ppo_megatron_trainer",
        "one_step_off_ppo_trainer",
        (),
        True,
        False,
        False,
        True,
    ),
}


def profile_for_version(version: str) -> str:
    """Map the verl version the host reports (``verl.__version__``) to a profile name.

    ``"0.9.1" -> "0.9"``, ``"0.10.0.dev" -> "0.9"`` (newest known), ``"0.8.0.dev" -> "0.8"``.
    Raises :class:`OverrideError` for versions before 0.8 or unparsable strings.
    """
    m = re.match(r"^\s*v?(\d+)\.(\d+)", str(version or ""))
    if not m:
        raise OverrideError(f"cannot read verl version {version!r}; expected e.g. 0.9.1 (pass --profile 0.9 or 0.8)")
    major, minor = int(m.group(1)), int(m.group(2))
    if (major, minor) >= (0, 9):
        return "0.9"
    if (major, minor) == (0, 8):
        return "0.8"
    raise OverrideError(f"verl {version} is older than 0.8, which dapo-ops does not support; use verl 0.9.x")


def check_choice(value: object, choices: Iterable[str], what: str, flag: str) -> str:
    if not isinstance(value, str) or value not in choices:
        raise OverrideError(f"unknown {what} {value!r}; use one of {', '.join(choices)} ({flag})")
    return value


def entry(profile: str, mode: str | None, framework: str | None) -> Entry:
    """The :class:`Entry` for a profile, mode and framework; :class:`OverrideError` on unknown values."""
    check_choice(profile, PROFILES, "verl profile", "--profile")
    check_choice(mode, MODES, "mode", "inv launch / inv one-step-off")
    check_choice(framework, FRAMEWORKS, "framework", "FRAMEWORK / --framework")
    return _ENTRIES[(profile, str(mode), str(framework))]


# Keys that never exist in the yaml and therefore need "+" (hydra-core 1.3's override grammar).
PLUS_ATTN_FSDP = "+actor_rollout_ref.model.override_config.attn_implementation"
PLUS_FLASH_NPU_MEGATRON = "+actor_rollout_ref.actor.megatron.override_transformer_config.use_flash_attn"
PLUS_MAX_POS = "+actor_rollout_ref.model.override_config.max_position_embeddings"
#: the same context override for the rollout: vLLM checks ``max_model_len`` against its own HF config, and
#: ``engine_kwargs.vllm`` is spread last into the vLLM engine args (``workers/rollout/vllm_rollout/
#: vllm_async_server.py:346-350``, ``rollout.yaml:142`` ``vllm: {}``).
PLUS_MAX_POS_ROLLOUT = "+actor_rollout_ref.rollout.engine_kwargs.vllm.hf_overrides.max_position_embeddings"
_MTC = "actor_rollout_ref.actor.megatron.override_transformer_config"


#: What the ``gradient_checkpointing`` feature runs on Megatron (spec setting ``megatron_recompute``), by device memory:
#: ``full`` (``recompute_granularity=full``, ``recompute_method=uniform``, ``recompute_num_layers=1``: every layer's
#: input kept, the layer recomputed) on devices of <= :data:`FULL_RECOMPUTE_MAX_GIB`, what verl's NPU Megatron scripts
#: run (the DAPO nightly ``run_dapo_moonlight-16b_megatron_npu.sh:144-146`` of verl's Ascend CI, its 910B DAPO
#: practice); ``selective`` on larger devices: verl's own modules ``["core_attn"]`` (``engine/megatron.yaml:79``),
#: which recompute only the attention core: with flash attention that keeps almost every activation (what the real
#: H200 Megatron runs ran, tests/fixtures/real-verl/tool-runs/k-megatron-*). A spec without the key (an older dapo-ops')
#: ran ``selective``.
MEGATRON_RECOMPUTE = ("full", "selective")
FULL_RECOMPUTE_MAX_GIB = 64.5


def megatron_recompute_for(device_gib: float) -> str:
    """``full`` on devices of <= :data:`FULL_RECOMPUTE_MAX_GIB` GiB (an Ascend 910B's 64), else ``selective``."""
    return "full" if float(device_gib) <= FULL_RECOMPUTE_MAX_GIB else "selective"


def token_budgets(max_prompt_length: int, max_response_length: int) -> dict[str, int]:
    """Dynamic-batch token budgets (tokens per device), after verl's DAPO scripts.

    Actor/critic update: 2 x (prompt + response); log-prob passes: 3 x (prompt + response).
    Every value is >= prompt + response (verl asserts ``max_token_len must be greater than the
    sequence length``).
    """
    seq = int(max_prompt_length) + int(max_response_length)
    return {
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu": 2 * seq,
        "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu": 3 * seq,
        "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu": 3 * seq,
        "critic.ppo_max_token_len_per_gpu": 2 * seq,
        "critic.forward_max_token_len_per_gpu": 3 * seq,
    }


def feature_overrides(
    profile: str,
    framework: str | None,
    names: frozenset[str],
    *,
    max_prompt_length: int,
    max_response_length: int,
    accelerator: str = "gpu",
    micro_batch_size: int = 1,
    token_budget_overrides: dict[str, Any] | None = None,
    disabled: frozenset[str] = frozenset(),
    megatron_recompute: str | None = "selective",
) -> list[tuple[str, object]]:
    """All feature keys for ``framework`` as ``(key, value)`` pairs, on AND off states explicit.

    ``names``: enabled feature names; ``disabled``: names the user turned off (``-name``): on FSDP the
    ``recompute`` rung turns gradient checkpointing on, unless the user disabled it explicitly (a user choice is
    never overridden), and activation offload in both cases: verl's ``enable_activation_offloading(model,
    strategy, enable_ckpt=False)`` works without checkpointing (``verl/utils/activation_offload.py:500-560``,
    called at ``verl/workers/engine/fsdp/transformer_impl.py:477-479``). ``entropy_checkpointing`` alone lowers
    nothing in DAPO (entropy runs with grads only when ``entropy_coeff`` != 0, ``trainer_base.py:1831-1833``). Keys carry their ``+`` where the yaml lacks them. Values are
    Python values (formatted by :func:`dapo_ops.core.overrides.hydra_value`). ``token_budget_overrides``
    may replace individual budgets (never below prompt + response: raises :class:`OverrideError`).
    ``megatron_recompute`` (the spec setting, :data:`MEGATRON_RECOMPUTE`): what ``gradient_checkpointing`` runs on
    Megatron: ``full`` = full/uniform/1, ``selective`` = verl's ``recompute_modules: ["core_attn"]``
    (``verl/trainer/config/engine/megatron.yaml:75-87``).
    """
    on = names.__contains__
    seq = int(max_prompt_length) + int(max_response_length)
    out: list[tuple[str, object]] = []
    npu = accelerator == "npu"
    meg = framework == "megatron"

    # flash_attn (verl/trainer/config/actor/actor.yaml "attention impl"). Off on a GPU Megatron: Transformer
    # Engine's cuDNN fused attention, which keeps packed sequences (core/features.py IMPLIED_OFF says why not unfused)
    if meg:
        out.append((f"{_MTC}.attention_backend", "flash" if on("flash_attn") else ("unfused" if npu else "fused")))
        if npu:
            out.append((PLUS_FLASH_NPU_MEGATRON, on("flash_attn")))
    else:
        out.append((PLUS_ATTN_FSDP, "flash_attention_2" if on("flash_attn") else "sdpa"))

    # dynamic_batch (+ micro-batches when off)
    dyn = on("dynamic_batch")
    out += [
        ("actor_rollout_ref.actor.use_dynamic_bsz", dyn),
        ("actor_rollout_ref.ref.log_prob_use_dynamic_bsz", dyn),
        ("actor_rollout_ref.rollout.log_prob_use_dynamic_bsz", dyn),
    ]
    if dyn:
        budgets = token_budgets(max_prompt_length, max_response_length)
        for k, v in (token_budget_overrides or {}).items():
            if k not in budgets:
                raise OverrideError(f"unknown token budget {k!r}; one of {', '.join(budgets)}")
            if int(v) < seq:
                raise OverrideError(
                    f"{k}={v} is below max_prompt_length + max_response_length = {seq}; raise it to >= {seq}"
                )
            budgets[k] = int(v)
        out += list(budgets.items())
    else:
        mb = int(micro_batch_size)
        out += [
            ("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", mb),
            ("actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu", mb),
            ("actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu", mb),
        ]

    # remove_padding. 0.9 (V1 workers) copy actor_rollout_ref.model.use_remove_padding over the engine's value
    # for every engine (verl/workers/engine_workers.py:114, :585, :630): the Megatron engine key is overwritten.
    if meg and profile == "0.8":
        out += [
            ("actor_rollout_ref.actor.megatron.use_remove_padding", on("remove_padding")),
            ("critic.megatron.use_remove_padding", on("remove_padding")),
        ]
    elif meg:
        out.append(("actor_rollout_ref.model.use_remove_padding", on("remove_padding")))
    else:
        out += [
            ("actor_rollout_ref.model.use_remove_padding", on("remove_padding")),
            ("critic.model.use_remove_padding", on("remove_padding")),
        ]

    # gradient_checkpointing + recompute
    if meg:
        if on("recompute") or (on("gradient_checkpointing") and megatron_recompute == "full"):
            gran, method, layers = "full", "uniform", 1
        elif on("gradient_checkpointing"):
            gran, method, layers = "selective", None, None
        else:
            gran, method, layers = None, None, None
        out += [
            (f"{_MTC}.recompute_granularity", gran),
            (f"{_MTC}.recompute_method", method),
            (f"{_MTC}.recompute_num_layers", layers),
        ]
    else:
        gc = on("gradient_checkpointing") or (on("recompute") and "gradient_checkpointing" not in disabled)
        out += [
            ("actor_rollout_ref.model.enable_gradient_checkpointing", gc),
            ("critic.model.enable_gradient_checkpointing", gc),
            ("actor_rollout_ref.actor.entropy_checkpointing", on("recompute")),
            ("actor_rollout_ref.model.enable_activation_offload", on("recompute")),
        ]

    # offload (per version: 0.9.1 removed grad_offload and moved critic FSDP keys)
    off = on("offload")
    if meg:
        out += [
            ("actor_rollout_ref.actor.megatron.param_offload", off),
            ("actor_rollout_ref.actor.megatron.optimizer_offload", off),
        ]
        if profile == "0.8":
            out.append(("actor_rollout_ref.actor.megatron.grad_offload", off))
        out.append(("actor_rollout_ref.ref.megatron.param_offload", off))
        out += [("critic.megatron.param_offload", off), ("critic.megatron.optimizer_offload", off)]
        if profile == "0.8":
            out.append(("critic.megatron.grad_offload", off))
    else:
        out += [
            ("actor_rollout_ref.actor.fsdp_config.param_offload", off),
            ("actor_rollout_ref.actor.fsdp_config.optimizer_offload", off),
            ("actor_rollout_ref.ref.fsdp_config.param_offload", off),
        ]
        critic = "critic.fsdp" if profile == "0.9" else "critic.model.fsdp_config"
        out += [(f"{critic}.param_offload", off), (f"{critic}.optimizer_offload", off)]
    if npu and not meg and profile == "0.9":
        # the FSDP engine compiles entropy_from_logits unless its own key is off (engine/fsdp.yaml:54,
        # workers/engine/fsdp/transformer_impl.py:183-187); actor.use_torch_compile is not what it reads
        out.append(("actor_rollout_ref.actor.fsdp_config.use_torch_compile", False))

    # rollout engine features: verl turns both on (rollout/rollout.yaml:87,90; workers/config/rollout.py:245-247), so
    # a key is emitted only when the user asked: explicitly on (True, verl's own value) or off (-name, False)
    for name, key in (("prefix_cache", "enable_prefix_caching"), ("chunked_prefill", "enable_chunked_prefill")):
        if name in disabled or on(name):
            out.append((f"actor_rollout_ref.rollout.{key}", name not in disabled))
    if "chunked_prefill" in disabled:
        # chunked prefill off -> a whole prompt + response in one batch: vLLM needs max_num_batched_tokens >=
        # max_model_len (verl raises it itself with a warning, vllm_async_server.py:1113-1119); on: verl's 8192
        out.append(("actor_rollout_ref.rollout.max_num_batched_tokens", max(8192, seq)))
    return out


def reward_overrides(profile: str, ent: Entry, max_response_length: int) -> list[tuple[str, object]]:
    """DAPO reward manager + overlong buffer keys for the profile and entry (verl/trainer/config/algorithm.py, verl/trainer/config/).

    Overlong buffer length: ``min(4096, max_response_length // 2)`` tokens (the DAPO 7B scripts use 4096
    with 8192-token responses); penalty factor 1.0; ``max_resp_len = max_response_length``.
    """
    resp = int(max_response_length)
    blen = max(1, min(4096, resp // 2))
    if profile == "0.9":
        base = "+reward.reward_kwargs"
        out: list[tuple[str, object]] = [("reward.reward_manager.name", "dapo")]
    else:
        base = "+reward_model.reward_kwargs"
        out = [("reward_model.reward_manager", "dapo")]
        if ent.module == "recipe.dapo.main_dapo":
            out += [
                ("reward_model.overlong_buffer.enable", True),
                ("reward_model.overlong_buffer.len", blen),
                ("reward_model.overlong_buffer.penalty_factor", 1.0),
                ("reward_model.overlong_buffer.log", False),
            ]
    out += [
        (f"{base}.overlong_buffer_cfg.enable", True),
        (f"{base}.overlong_buffer_cfg.len", blen),
        (f"{base}.overlong_buffer_cfg.penalty_factor", 1.0),
        (f"{base}.overlong_buffer_cfg.log", False),
        (f"{base}.max_resp_len", resp),
    ]
    return out


def v1_mode(ent: Entry, trainer_mode: str = "async") -> str | None:
    """The V1 ``trainer.v1.trainer_mode`` this entry runs (``ppo_trainer.yaml:238``), or None for a non-V1 entry.

    ``trainer_mode``: ``launch``'s setting (:data:`DAPO_TRAINER_MODES`), ignored for a separate-pool entry
    (always ``separate_async``). Raises :class:`OverrideError` for an unknown mode.
    """
    if not ent.v1:
        return None
    if ent.separate:
        if trainer_mode not in (None, "", "async"):
            raise OverrideError(
                f"--mode {trainer_mode} does not apply to one-step-off (it always runs verl's V1 "
                "separate_async trainer); drop --mode, or use `inv launch --mode sync`"
            )
        return "separate_async"
    check_choice(trainer_mode or "async", DAPO_TRAINER_MODES, "DAPO trainer mode", "--mode / DAPO_MODE")
    return _V1_MODE[trainer_mode or "async"]


#: One-step-off's old log-probs are the rollout's (two policies, "bypass"), as verl's own one-step-off config forces
#: (0.9.1 ``verl/experimental/one_step_off_policy/config/one_step_off_ppo_trainer.yaml``: ``calculate_log_probs: True``,
#: ``algorithm.rollout_correction.bypass_mode: True``). Without it the V1 separate_async trainer recomputes them on the
#: trainer pool every step (a log-prob forward: time and a memory peak) and, for each mini-batch after the first of a
#: sync cycle, copies the actor to host memory and back (``save_model_to_cpu`` / ``restore_model_from_cpu``,
#: ``verl/trainer/ppo/v1/trainer_separate_async.py:187-211``); with it the copy is skipped
#: (``trainer_base.py:1641-1648``). ``--override algorithm.rollout_correction.bypass_mode=False`` restores decoupled
#: PPO (what verl's minimal separate_async CI runs).
SEPARATE_ASYNC_BYPASS: tuple[tuple[str, object], ...] = (
    ("actor_rollout_ref.rollout.calculate_log_probs", True),
    ("algorithm.rollout_correction.bypass_mode", True),
)

#: The one-step-off weight-sync backend, GPU and NPU alike. verl 0.9.1 registers its Ascend engine under the name
#: ``nccl`` (``verl/checkpoint_engine/hccl_checkpoint_engine.py:103`` ``@CheckpointEngineRegistry.register("nccl")``;
#: ``checkpoint_engine/__init__.py:33-37``: "hccl registers the "nccl" backend name on Ascend"), and an unknown name
#: raises in the actor's ``init_model`` (``checkpoint_engine/base.py:84-99``, ``workers/engine_workers.py:679-688``)
#: and in the trainer (``trainer_separate_async.py:165-170``): there is no ``hccl`` backend.
CHECKPOINT_ENGINE_BACKEND = "nccl"


#: The async V1 modes' prefetch: batches of prompts submitted ahead of the one a step trains on
#: (``trainer.v1.<mode>.num_warmup_batches``, ``trainer_base.py:624-651`` ``_add_async_warmup_batches``, called by
#: ``trainer_colocate_async.py`` / ``trainer_separate_async.py`` ``on_train_begin``). :func:`v1_overrides` sets it.
ASYNC_WARMUP_BATCHES = 1


def prompts_in_flight(v1: str | None, train_batch_size: int, overrides: Mapping[str, str | None]) -> int:
    """Prompts the rollout has submitted at once under the V1 mode ``v1`` (:func:`v1_mode`), with the user's
    ``overrides`` (``{key: value text}``, :func:`dapo_ops.core.memfit.override_values`; unparsable values count as
    verl's default).

    - async modes: the step's batch + the warm-up prompts, ``floor(num_warmup_batches x train_batch_size)`` (the
      prefetch window ``trainer_base.py:624-651`` ``_add_async_warmup_batches``; ``gen_batch_size`` is forced to 1
      there, ``:727-740``), kept full: each step's ``prepare_step`` submits one more batch (``:1524-1530``) and the
      trainer aborts what is unfinished at the sample's end and resumes it after the weight update (partial rollout,
      ``trainer_colocate_async.py`` ``on_sample_end`` / ``on_step_end``). The plan's warm-up is
      :data:`ASYNC_WARMUP_BATCHES`; ``trainer.v1.<mode>.num_warmup_batches`` overrides it.
    - ``sync``: one batch; with DAPO's ``filter_groups`` on, the replay buffer refills dropped groups up to
      ``algorithm.filter_groups.max_inflight_gen_batches`` x ``train_batch_size`` prompts (``replay_buffer.py:445-484``,
      default 1, ``ppo_trainer.yaml:99``).
    A non-V1 entry: one batch."""
    tbs = max(1, int(train_batch_size))

    def number(key: str, default: float) -> float:
        try:
            v = float(overrides.get(key) or default)
        except (TypeError, ValueError):
            return default
        return v if v >= 0 else default

    if v1 in ("colocate_async", "separate_async"):
        return tbs + int(number(f"trainer.v1.{v1}.num_warmup_batches", ASYNC_WARMUP_BATCHES) * tbs)
    if v1 == "sync" and str(overrides.get("algorithm.filter_groups.enable", "true")).lower() not in ("false", "0"):
        return tbs * max(1, int(number("algorithm.filter_groups.max_inflight_gen_batches", 1)))
    return tbs


def v1_overrides(
    ent: Entry,
    trainer_mode: str,
    *,
    accelerator: str = "gpu",
    max_staleness: int | None = 2,
    parameter_sync_step: int = 4,
) -> list[tuple[str, object]]:
    """The V1 trainer-mode keys (none for a non-V1 entry).

    - ``colocate_async``: one warm-up batch of prefetch (``trainer.v1.colocate_async.num_warmup_batches``,
      ``trainer_colocate_async.py`` ``on_train_begin``).
    - ``separate_async``: ``parameter_sync_step`` (mini-batches between weight syncs; verl asserts
      ``train_batch_size == parameter_sync_step x ppo_mini_batch_size``, ``trainer_separate_async.py:59-63``,
      checked by :func:`dapo_ops.core.runspec.check_spec`), one warm-up batch, and a checkpoint-engine backend
      other than ``naive`` (asserted at ``:68``; ``rollout.yaml:282`` defaults to ``naive``): ``nccl`` on both
      accelerators (:data:`CHECKPOINT_ENGINE_BACKEND`).
    - async modes: the staleness bound ``trainer.v1.sampler.max_off_policy_threshold`` = ``max_staleness``
      model versions, strategy ``drop`` (``replay_buffer.py:528``: a prompt submitted at step s is dropped at
      step g when ``g - s + 1 > threshold``; 2 = at most one step off-policy). ``None`` emits ``null`` (no
      bound). The sync replay buffer ignores both (``replay_buffer.py:95-97``), so they are not emitted there.
    """
    mode = v1_mode(ent, trainer_mode)
    if mode is None:
        return []
    out: list[tuple[str, object]] = [("trainer.v1.trainer_mode", mode)]
    if mode == "colocate_async":
        out.append(("trainer.v1.colocate_async.num_warmup_batches", ASYNC_WARMUP_BATCHES))
    elif mode == "separate_async":
        out += [
            ("trainer.v1.separate_async.num_warmup_batches", ASYNC_WARMUP_BATCHES),
            ("trainer.v1.separate_async.parameter_sync_step", int(parameter_sync_step)),
            ("actor_rollout_ref.rollout.checkpoint_engine.backend", CHECKPOINT_ENGINE_BACKEND),
        ]
        out += list(SEPARATE_ASYNC_BYPASS)
    if mode != "sync":
        out += [
            ("trainer.v1.sampler.max_off_policy_threshold", None if not max_staleness else int(max_staleness)),
            ("trainer.v1.sampler.max_off_policy_strategy", "drop"),
        ]
    return out


#: key prefixes no code reads when there is no reference policy (0.9: ``need_reference_policy``,
#: ``verl/trainer/ppo/utils.py:75-79``: ``algorithm.use_kl_in_reward or actor.use_kl_loss``) or no critic
#: (``need_critic``, ``:96-107``: ``critic.enable``, else only for ``adv_estimator=gae``).
REF_PREFIX, CRITIC_PREFIX = "actor_rollout_ref.ref.", "critic."


def needs_ref_critic(extra_overrides: Iterable[str]) -> tuple[bool, bool]:
    """``(use_ref, use_critic)`` as verl 0.9.1 decides them (``verl/trainer/ppo/utils.py:75-107``) for the DAPO
    algorithm keys plus the user's ``extra_overrides`` (a KL loss / KL reward needs the reference, ``gae`` or
    ``critic.enable=True`` the critic). The last override of a key decides it; a ``~key`` deletion gives it no value
    (:mod:`dapo_ops.core.hydra_override`): the KL switches then are their dataclass defaults, off
    (``verl/workers/config/actor.py:171``, ``verl/trainer/config/algorithm.py:659``). verl tests them by the
    truthiness of the composed value (:func:`dapo_ops.core.hydra_override.truth`: ``=1`` is on)."""
    last = last_by_key(list(extra_overrides))

    def on(key: str) -> bool | None:  # verl reads these DictConfig values by truthiness (utils.py:75-107)
        return truth(last[key]) if key in last else None

    use_ref = bool(on("actor_rollout_ref.actor.use_kl_loss") or on("algorithm.use_kl_in_reward"))
    c = last.get("critic.enable")
    null = c is None or c.deletes or c.null  # the estimator decides ('null' quoted is a string: on)
    adv = last.get("algorithm.adv_estimator")
    use_critic = (
        bool(truth(c)) if c is not None and not null else (adv is not None and (adv.text or "").lower() == "gae")
    )
    return use_ref, use_critic


def drop_inert(pairs: list[tuple[str, object]], *, use_ref: bool, use_critic: bool) -> list[tuple[str, object]]:
    """``pairs`` without the ``ref.*`` keys when ``use_ref`` is False and ``critic.*`` keys when ``use_critic``
    is False (keys with a leading ``+`` included)."""

    def dead(k: str) -> bool:
        k = k.lstrip("+")
        return (not use_ref and k.startswith(REF_PREFIX)) or (not use_critic and k.startswith(CRITIC_PREFIX))

    return [(k, v) for k, v in pairs if not dead(k)]


def filter_groups_overrides(profile: str, ent: Entry) -> list[tuple[str, object]]:
    """DAPO dynamic sampling where the entry supports it: every 0.9 (V1) entry, one-step-off included
    (``trainer_base.py:187-212``), and the 0.8 DAPO recipe; not the 0.8 legacy one-step-off entry.

    0.9 V1 trainer ignores ``max_num_gen_batches`` (it warns), so it is set only for the 0.8 recipe.
    """
    if not ent.filter_groups:
        return []
    out: list[tuple[str, object]] = [
        ("algorithm.filter_groups.enable", True),
        ("algorithm.filter_groups.metric", "acc"),
    ]
    if profile == "0.8":
        out.append(("algorithm.filter_groups.max_num_gen_batches", 10))
    return out


def fsdp_strategy(world: int | None, strategy: str | None = None, offload_policy: bool = False) -> str:
    """The FSDP ``actor.strategy`` a run uses: ``strategy`` when pinned (the spec's ``strategy``: a ``--resume`` keeps
    its checkpoint's, the planner pins a one-device run's), else ``fsdp`` (FSDP1) on a one-device training pool
    (``world`` 1, see :func:`strategy_overrides`) unless ``offload_policy`` (the ``fsdp_offload_policy`` setting) is
    on, else ``fsdp2``. verl's FSDP1 branch never reads ``offload_policy`` (``verl/workers/engine/fsdp/
    transformer_impl.py:423-449``; ``CPUOffloadPolicy`` exists only in the fsdp2 branch, ``:450-463``): a run that
    needs the policy runs fsdp2."""
    if strategy:
        return strategy
    return "fsdp" if world == 1 and not offload_policy else "fsdp2"


def strategy_overrides(
    framework: str, world: int | None = None, strategy: str | None = None, offload_policy: bool = False
) -> list[tuple[str, object]]:
    """Training strategy keys. The runbook's ``FRAMEWORK=fsdp`` is FSDP2 (its one-step-off script sets
    ``ACTOR_STRATEGY=fsdp2``); in 0.9.1 ``actor.strategy`` is copied into ``fsdp_config.strategy``, so the
    strategy keys themselves are set (verl/trainer/config/actor/actor.yaml). Megatron is selected by the entry/config, nothing here.

    ``world`` (int, devices of the training pool: nnodes x devices per node) of 1: verl's own default ``fsdp``
    (FSDP1), which torch turns into ``NO_SHARD`` at world size 1 (``torch/distributed/fsdp/
    fully_sharded_data_parallel.py:478``: "FSDP is switching to use NO_SHARD"), a plain module with no per-layer
    all-gather; FSDP2's ``fully_shard`` keeps DTensor parameters and its gather/reshard hooks even on one device.
    Measured on the H200 (bench/speed.md, 2026-12-02): the tool's plan (fsdp2) took 1.50 / 0.57 / 0.59 s in
    update_actor / old_log_prob / update_weights against 1.05 / 0.39 / 0.40 s for verl's own keys (fsdp), the median
    of steps >= 2, same tokens per step. Not yet re-run on the GPU with this change.

    ``strategy`` (spec ``strategy``, ``fsdp`` | ``fsdp2``) pins it: a ``--resume`` keeps the strategy its checkpoint
    was written with (dapo_ops/control/launch/resume.py; the two do not load into each other, docs/design.md "Run spec").
    ``offload_policy``: the FSDP2 ``CPUOffloadPolicy`` rung is on: fsdp2 even on one device (:func:`fsdp_strategy`).
    """
    if framework != "fsdp":
        return []
    strategy = fsdp_strategy(world, strategy, offload_policy)
    return [
        ("actor_rollout_ref.actor.strategy", strategy),
        ("actor_rollout_ref.ref.strategy", strategy),
        ("critic.strategy", strategy),
    ]


#: DAPO algorithm settings common to every profile/entry (verl/trainer/config/algorithm.py).
DAPO_ALGORITHM: tuple[tuple[str, object], ...] = (
    ("algorithm.adv_estimator", "grpo"),
    ("algorithm.use_kl_in_reward", False),
    ("algorithm.kl_ctrl.kl_coef", 0.0),
    ("actor_rollout_ref.actor.use_kl_loss", False),
    ("actor_rollout_ref.actor.kl_loss_coef", 0.0),
    ("actor_rollout_ref.actor.clip_ratio_low", 0.2),
    ("actor_rollout_ref.actor.clip_ratio_high", 0.28),
    ("actor_rollout_ref.actor.clip_ratio_c", 10.0),
    ("actor_rollout_ref.actor.loss_agg_mode", "token-mean"),
)
