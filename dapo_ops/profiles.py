"""verl profiles: entry modules, config names and override keys per verl version (stdlib only).

Two profiles:

- ``"0.9"``: the verl 0.9.x release (primary; checked by composing against the 0.9.1 wheel's
  yaml). DAPO runs through the V1 trainer ``verl.trainer.main_ppo`` (config ``ppo_trainer``;
  Megatron via the config-group override ``model_engine=megatron``, as verl's own
  ``tests/special_e2e/run_v1_separate_async.sh`` does; ``ppo_megatron_trainer.yaml`` is marked
  deprecated in 0.9.1). ``algorithm.filter_groups`` is in the 0.9.1 base config. Reward keys:
  ``reward.reward_manager.name`` and ``+reward.reward_kwargs.*``. Megatron has no ``grad_offload``.
- ``"0.8"``: the 0.8-era ``main`` branch (volcengine/verl b178a3c, 2026-01). DAPO runs through the
  recipe submodule ``recipe.dapo.main_dapo`` (``recipe/dapo/config/dapo_trainer.yaml``, CWD = repo
  root). Reward keys ``reward_model.reward_manager=dapo``, ``reward_model.overlong_buffer.*`` and
  ``+reward_model.reward_kwargs.*``; Megatron ``grad_offload``; critic FSDP offload under
  ``critic.model.fsdp_config``.

One-step-off in both: ``verl.experimental.one_step_off_policy.main_ppo`` with
``one_step_off_ppo_trainer`` / ``one_step_off_ppo_megatron_trainer``; those yaml files set
``hydra.searchpath: [file://verl/trainer/config]`` (relative to the CWD), so the generator adds an
absolute ``hydra.searchpath``. Facts: verl.md §1, §2, §4, §5, §12, §16.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PROFILES = ("0.9", "0.8")
MODES = ("dapo", "one-step-off")
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
    """

    module: str
    config_dir: str
    config_name: str
    default_config_name: str
    group_overrides: tuple[str, ...] = ()
    searchpath: bool = False
    filter_groups: bool = False

    def config_args(self) -> list[str]:
        """``--config-name=...`` when needed (an empty list otherwise)."""
        if self.config_name != self.default_config_name:
            return [f"--config-name={self.config_name}"]
        return []


_OSO_MODULE = "verl.experimental.one_step_off_policy.main_ppo"
_OSO_DIR = "verl/experimental/one_step_off_policy/config"

_ENTRIES: dict[tuple[str, str, str], Entry] = {
    ("0.9", "dapo", "fsdp"): Entry("verl.trainer.main_ppo", "verl/trainer/config", "ppo_trainer", "ppo_trainer",
                                   (), False, True),
    ("0.9", "dapo", "megatron"): Entry("verl.trainer.main_ppo", "verl/trainer/config", "ppo_trainer", "ppo_trainer",
                                       ("model_engine=megatron",), False, True),
    ("0.9", "one-step-off", "fsdp"): Entry(_OSO_MODULE, _OSO_DIR, "one_step_off_ppo_trainer", "one_step_off_ppo_trainer",
                                           (), True, False),
    ("0.9", "one-step-off", "megatron"): Entry(_OSO_MODULE, _OSO_DIR, "one_step_off_ppo_megatron_trainer",
                                               "one_step_off_ppo_trainer", (), True, False),
    ("0.8", "dapo", "fsdp"): Entry("recipe.dapo.main_dapo", "recipe/dapo/config", "dapo_trainer", "dapo_trainer",
                                   (), True, True),
    ("0.8", "dapo", "megatron"): Entry("recipe.dapo.main_dapo", "recipe/dapo/config", "dapo_megatron_trainer",
                                       "dapo_trainer", (), True, True),
    ("0.8", "one-step-off", "fsdp"): Entry(_OSO_MODULE, _OSO_DIR, "one_step_off_ppo_trainer", "one_step_off_ppo_trainer",
                                           (), True, False),
    ("0.8", "one-step-off", "megatron"): Entry(_OSO_MODULE, _OSO_DIR, "one_step_off_ppo_megatron_trainer",
                                               "one_step_off_ppo_trainer", (), True, False),
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


def check_choice(value, choices, what: str, flag: str) -> str:
    if value not in choices:
        raise OverrideError(f"unknown {what} {value!r}; use one of {', '.join(choices)} ({flag})")
    return value


def entry(profile: str, mode: str, framework: str) -> Entry:
    """The :class:`Entry` for a profile, mode and framework; :class:`OverrideError` on unknown values."""
    check_choice(profile, PROFILES, "verl profile", "--profile")
    check_choice(mode, MODES, "mode", "inv launch / inv one-step-off")
    check_choice(framework, FRAMEWORKS, "framework", "FRAMEWORK / --framework")
    return _ENTRIES[(profile, mode, framework)]


# Keys that never exist in the yaml and therefore need "+" (verl.md §12).
PLUS_ATTN_FSDP = "+actor_rollout_ref.model.override_config.attn_implementation"
PLUS_FLASH_NPU_MEGATRON = "+actor_rollout_ref.actor.megatron.override_transformer_config.use_flash_attn"
PLUS_MAX_POS = "+actor_rollout_ref.model.override_config.max_position_embeddings"
_MTC = "actor_rollout_ref.actor.megatron.override_transformer_config"


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


def feature_overrides(profile: str, framework: str, names: frozenset, *, max_prompt_length: int,
                      max_response_length: int, accelerator: str = "gpu", micro_batch_size: int = 1,
                      token_budget_overrides: dict | None = None, disabled: frozenset = frozenset()
                      ) -> list[tuple[str, object]]:
    """All feature keys for ``framework`` as ``(key, value)`` pairs, on AND off states explicit.

    ``names``: enabled feature names; ``disabled``: names the user turned off (``-name``): on FSDP the
    ``recompute`` rung turns gradient checkpointing on, unless the user disabled it explicitly (then
    only entropy checkpointing is added: activation offload needs gradient checkpointing). Keys carry their ``+`` where the yaml lacks them. Values are
    Python values (formatted by :func:`dapo_ops.overrides.hydra_value`). ``token_budget_overrides``
    may replace individual budgets (never below prompt + response: raises :class:`OverrideError`).
    """
    on = names.__contains__
    seq = int(max_prompt_length) + int(max_response_length)
    out: list[tuple[str, object]] = []
    npu = accelerator == "npu"
    meg = framework == "megatron"

    # flash_attn (verl.md §4.1 "attention impl")
    if meg:
        out.append((f"{_MTC}.attention_backend", "flash" if on("flash_attn") else "unfused"))
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
                    f"{k}={v} is below max_prompt_length + max_response_length = {seq}; raise it to >= {seq}")
            budgets[k] = int(v)
        out += list(budgets.items())
    else:
        mb = int(micro_batch_size)
        out += [
            ("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", mb),
            ("actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu", mb),
            ("actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu", mb),
        ]

    # remove_padding
    if meg:
        out += [("actor_rollout_ref.actor.megatron.use_remove_padding", on("remove_padding")),
                ("critic.megatron.use_remove_padding", on("remove_padding"))]
    else:
        out += [("actor_rollout_ref.model.use_remove_padding", on("remove_padding")),
                ("critic.model.use_remove_padding", on("remove_padding"))]

    # gradient_checkpointing + recompute
    if meg:
        if on("recompute"):
            gran, method, layers = "full", "uniform", 1
        elif on("gradient_checkpointing"):
            gran, method, layers = "selective", None, None
        else:
            gran, method, layers = None, None, None
        out += [(f"{_MTC}.recompute_granularity", gran), (f"{_MTC}.recompute_method", method),
                (f"{_MTC}.recompute_num_layers", layers)]
    else:
        gc = on("gradient_checkpointing") or (on("recompute") and "gradient_checkpointing" not in disabled)
        out += [("actor_rollout_ref.model.enable_gradient_checkpointing", gc),
                ("critic.model.enable_gradient_checkpointing", gc),
                ("actor_rollout_ref.actor.entropy_checkpointing", on("recompute")),
                ("actor_rollout_ref.model.enable_activation_offload", on("recompute") and gc)]

    # offload (per version: 0.9.1 removed grad_offload and moved critic FSDP keys)
    off = on("offload")
    if meg:
        out += [("actor_rollout_ref.actor.megatron.param_offload", off),
                ("actor_rollout_ref.actor.megatron.optimizer_offload", off)]
        if profile == "0.8":
            out.append(("actor_rollout_ref.actor.megatron.grad_offload", off))
        out.append(("actor_rollout_ref.ref.megatron.param_offload", off))
        out += [("critic.megatron.param_offload", off), ("critic.megatron.optimizer_offload", off)]
        if profile == "0.8":
            out.append(("critic.megatron.grad_offload", off))
    else:
        out += [("actor_rollout_ref.actor.fsdp_config.param_offload", off),
                ("actor_rollout_ref.actor.fsdp_config.optimizer_offload", off),
                ("actor_rollout_ref.ref.fsdp_config.param_offload", off)]
        critic = "critic.fsdp" if profile == "0.9" else "critic.model.fsdp_config"
        out += [(f"{critic}.param_offload", off), (f"{critic}.optimizer_offload", off)]

    # rollout engine features
    out.append(("actor_rollout_ref.rollout.enable_prefix_caching", on("prefix_cache")))
    out.append(("actor_rollout_ref.rollout.enable_chunked_prefill", on("chunked_prefill")))
    # chunked prefill off -> max_num_batched_tokens >= max_model_len (verl.md §13); on -> vLLM default 8192
    out.append(("actor_rollout_ref.rollout.max_num_batched_tokens", 8192 if on("chunked_prefill") else max(8192, seq)))
    return out


def reward_overrides(profile: str, ent: Entry, max_response_length: int) -> list[tuple[str, object]]:
    """DAPO reward manager + overlong buffer keys for the profile and entry (verl.md §5, §16.2-3).

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
            out += [("reward_model.overlong_buffer.enable", True), ("reward_model.overlong_buffer.len", blen),
                    ("reward_model.overlong_buffer.penalty_factor", 1.0), ("reward_model.overlong_buffer.log", False)]
    out += [(f"{base}.overlong_buffer_cfg.enable", True), (f"{base}.overlong_buffer_cfg.len", blen),
            (f"{base}.overlong_buffer_cfg.penalty_factor", 1.0), (f"{base}.overlong_buffer_cfg.log", False),
            (f"{base}.max_resp_len", resp)]
    return out


def filter_groups_overrides(profile: str, ent: Entry) -> list[tuple[str, object]]:
    """DAPO dynamic sampling where the entry supports it (none for one-step-off).

    0.9 V1 trainer ignores ``max_num_gen_batches`` (it warns), so it is set only for the 0.8 recipe.
    """
    if not ent.filter_groups:
        return []
    out: list[tuple[str, object]] = [("algorithm.filter_groups.enable", True), ("algorithm.filter_groups.metric", "acc")]
    if profile == "0.8":
        out.append(("algorithm.filter_groups.max_num_gen_batches", 10))
    return out


def strategy_overrides(framework: str) -> list[tuple[str, object]]:
    """Training strategy keys. The runbook's ``FRAMEWORK=fsdp`` is FSDP2 (its one-step-off script sets
    ``ACTOR_STRATEGY=fsdp2``); in 0.9.1 ``actor.strategy`` is copied into ``fsdp_config.strategy``, so the
    strategy keys themselves are set (verl.md §4.1). Megatron is selected by the entry/config, nothing here.
    """
    if framework != "fsdp":
        return []
    return [("actor_rollout_ref.actor.strategy", "fsdp2"), ("actor_rollout_ref.ref.strategy", "fsdp2"),
            ("critic.strategy", "fsdp2")]


#: DAPO algorithm settings common to every profile/entry (verl.md §5).
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
