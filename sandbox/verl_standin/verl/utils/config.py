"""verl STAND-IN of ``verl/utils/config.py`` (sandbox only): what preflight's verl-startup step imports
(dapo_ops/agent/verlcheck.py ``dataclass_errors``) and what the stand-in ``main_ppo`` runs before the trainer, as the
real one does (verl/trainer/main_ppo.py:177-181). ``validate_config`` runs verl 0.9.1's checks with their exact
wording: the batch arithmetic (verl/utils/config.py:100-127), the actor's ``ActorConfig.__post_init__`` / ``validate``
micro-batch checks (verl/workers/config/actor.py:195-243, reached through ``omega_conf_to_dataclass`` at
verl/utils/config.py:159-160), the log-prob micro-batch pairs (:162-175), the validation temperature (:200-203), then
the pass line (:217). ``omega_conf_to_dataclass`` returns the config as it is, after the ``__post_init__`` checks of
the verl dataclass its ``_target_`` names (nested ``_target_`` nodes first, as ``hydra.utils.instantiate`` builds them,
verl/utils/config.py:42-50) where dapo-ops' plan sets their keys: the actor (``ActorConfig`` /
``FSDPActorConfig`` / ``McoreActorConfig``, verl/workers/config/actor.py), its engine (``FSDPEngineConfig`` /
``McoreEngineConfig``, verl/workers/config/engine.py) and the rollout (``RolloutConfig``,
verl/workers/config/rollout.py). Other dataclasses (critic, VeOmni, TorchTitan, ...) are not checked here."""

from __future__ import annotations

import warnings
from typing import Any, Callable

__all__ = ["omega_conf_to_dataclass", "validate_config"]

VALID_LOSS_AGG_MODES = [
    "token-mean",
    "token-sum",
    "seq-mean-token-sum",
    "seq-mean-token-mean",
    "seq-mean-token-sum-norm",
]


def _fsdp_engine(c: Any) -> None:
    """verl/workers/config/engine.py:304-306 ``FSDPEngineConfig.__post_init__``."""
    assert c.strategy in ["fsdp", "fsdp2", "fsdp_turbo"], f"strategy {c.strategy} not supported"


def _mcore_engine(c: Any) -> None:
    """verl/workers/config/engine.py:214-218 ``McoreEngineConfig.__post_init__`` (its strategy and dtype)."""
    assert c.get("strategy", "megatron") == "megatron"  # the dataclass default: engine/megatron.yaml sets none
    assert c.dtype in ["bfloat16", "float16"], f"dtype {c.dtype} not supported"


def _rollout(c: Any) -> None:
    """verl/workers/config/rollout.py:278-345 ``RolloutConfig.__post_init__`` (the TensorRT-LLM rewrites left out)."""
    if c.mode == "sync":
        raise ValueError(
            "Rollout mode 'sync' has been removed. Please set "
            "`actor_rollout_ref.rollout.mode=async` or remove the mode setting entirely."
        )
    if c.mode != "async":
        warnings.warn(
            f"Unknown rollout mode '{c.mode}'. Only 'async' mode is supported. "
            "The 'mode' field is deprecated and will be removed in a future version.",
            DeprecationWarning,
            stacklevel=2,
        )
    if c.name != "trtllm" and c.expert_parallel_size > 1:
        assert c.expert_parallel_size == (c.tensor_model_parallel_size * c.data_parallel_size), (
            "expert_parallel_size must be equal to tensor_model_parallel_size * data_parallel_size"
        )
    moe_tp = c.get("moe_tensor_parallel_size")
    if moe_tp is not None and moe_tp > 1:
        assert c.name == "trtllm", "moe_tensor_parallel_size is only supported for trtllm"
    if c.pipeline_model_parallel_size > 1 and c.name in ("vllm", "sglang", "trtllm"):
        name = c.name
        raise NotImplementedError(
            f"Current rollout self.name={name!r} not implemented pipeline_model_parallel_size > 1 yet."
        )
    disagg = c.get("disaggregation") or {}
    if disagg.get("enabled") and c.name not in ("sglang", "vllm"):
        raise ValueError(
            f"rollout.disaggregation.enabled=True requires rollout.name in ('sglang', 'vllm'); got {c.name!r}."
        )


def _actor_post_init(c: Any) -> None:
    """verl/workers/config/actor.py:195-220 ``ActorConfig.__post_init__`` (FSDP and Megatron call it first: :282-284,
    :318-320)."""
    if not c.use_dynamic_bsz:
        if c.ppo_micro_batch_size is not None and c.ppo_micro_batch_size_per_gpu is not None:
            raise ValueError(
                "[actor] You have set both 'actor.ppo_micro_batch_size' AND 'actor.ppo_micro_batch_size_per_gpu'. "
                "Please remove 'actor.ppo_micro_batch_size' because only '*_ppo_micro_batch_size_per_gpu' is "
                "supported (the former is deprecated)."
            )
        assert not (c.ppo_micro_batch_size is None and c.ppo_micro_batch_size_per_gpu is None), (
            "[actor] Please set at least one of 'actor.ppo_micro_batch_size' or "
            "'actor.ppo_micro_batch_size_per_gpu' if use_dynamic_bsz is not enabled."
        )
    if c.loss_agg_mode not in VALID_LOSS_AGG_MODES:
        raise ValueError(f"Invalid loss_agg_mode: {c.loss_agg_mode}")


#: ``_target_`` -> the stand-in's copy of that dataclass's ``__post_init__`` checks
POST_INIT: dict[str, Callable[[Any], None]] = {
    "verl.workers.config.ActorConfig": _actor_post_init,
    "verl.workers.config.FSDPActorConfig": _actor_post_init,
    "verl.workers.config.McoreActorConfig": _actor_post_init,
    "verl.workers.config.FSDPEngineConfig": _fsdp_engine,
    "verl.workers.config.McoreEngineConfig": _mcore_engine,
    "verl.workers.config.RolloutConfig": _rollout,
}


def omega_conf_to_dataclass(config: Any, dataclass_type: Any = None) -> Any:
    """verl/utils/config.py:23-50: with a ``_target_`` and no ``dataclass_type``, hydra builds the dataclass, nested
    ``_target_`` nodes first, each running its ``__post_init__``; the stand-in runs its copies (:data:`POST_INIT`) in
    that order and returns the config unchanged."""
    if dataclass_type is None and hasattr(config, "items"):
        for _, child in config.items():
            if hasattr(child, "items") and "_target_" in child:
                omega_conf_to_dataclass(child)
        check = POST_INIT.get(str(config.get("_target_")))
        if check is not None:
            check(config)
    return config


def _check_batch_arithmetic(config: Any, n_gpus: int) -> None:
    """verl/utils/config.py:103-127: without dynamic batch, one step's responses split over the minimal batch."""
    actor = config.actor_rollout_ref.actor
    if actor.use_dynamic_bsz:
        return
    if actor.strategy == "megatron":
        model_parallel_size = actor.megatron.tensor_model_parallel_size * actor.megatron.pipeline_model_parallel_size
        assert n_gpus % (model_parallel_size * actor.megatron.context_parallel_size) == 0, (
            f"n_gpus ({n_gpus}) must be divisible by model_parallel_size ({model_parallel_size}) times "
            f"context_parallel_size ({actor.megatron.context_parallel_size})"
        )
        megatron_dp = n_gpus // (model_parallel_size * actor.megatron.context_parallel_size)
        minimal_bsz = megatron_dp * actor.ppo_micro_batch_size_per_gpu
    else:
        minimal_bsz = n_gpus
    real_train_batch_size = config.data.train_batch_size * config.actor_rollout_ref.rollout.n
    assert real_train_batch_size % minimal_bsz == 0, (
        f"real_train_batch_size ({real_train_batch_size}) must be divisible by minimal possible batch size "
        f"({minimal_bsz})"
    )


def _check_actor(actor: Any, n_gpus: int, train_batch_size: int, model: Any) -> None:
    """verl/utils/config.py:159-160: the actor's dataclass (its ``__post_init__`` checks, :func:`omega_conf_to_dataclass`)
    then its ``validate`` (verl/workers/config/actor.py:222-243; FSDP's adds the Ulysses check, :331-342)."""
    omega_conf_to_dataclass(actor)
    _validate_actor(actor, n_gpus, train_batch_size)
    if str(actor.get("_target_")) == "verl.workers.config.FSDPActorConfig":  # after the base validate (actor.py:333)
        sp = actor.get("ulysses_sequence_parallel_size", 1) or 1
        if sp > 1 and model and not model.get("use_remove_padding", False):
            raise ValueError(
                "When using sequence parallelism for actor/ref policy, you must enable `use_remove_padding`."
            )


def _validate_actor(actor: Any, n_gpus: int, train_batch_size: int) -> None:
    """verl/workers/config/actor.py:222-243 ``ActorConfig.validate``."""
    if actor.use_dynamic_bsz:
        return
    if train_batch_size < actor.ppo_mini_batch_size:
        raise ValueError(
            f"train_batch_size ({train_batch_size}) must be >= actor.ppo_mini_batch_size ({actor.ppo_mini_batch_size})"
        )
    sp_size = actor.get("ulysses_sequence_parallel_size", 1) or 1
    if actor.ppo_micro_batch_size is not None:
        if actor.ppo_mini_batch_size % actor.ppo_micro_batch_size != 0:
            raise ValueError(
                f"ppo_mini_batch_size ({actor.ppo_mini_batch_size}) must be divisible by "
                f"ppo_micro_batch_size ({actor.ppo_micro_batch_size})"
            )
        if actor.ppo_micro_batch_size * sp_size < n_gpus:
            raise ValueError(
                f"ppo_micro_batch_size ({actor.ppo_micro_batch_size}) * "
                f"ulysses_sequence_parallel_size ({sp_size}) must be >= n_gpus ({n_gpus})"
            )


def _check_mutually_exclusive(mbs: Any, mbs_per_gpu: Any, name: str) -> None:
    """verl/utils/config.py:129-156 (``log_prob_micro_batch_size`` vs its ``_per_gpu``)."""
    param = "log_prob_micro_batch_size"
    param_per_gpu = f"{param}_per_gpu"
    if mbs is None and mbs_per_gpu is None:
        raise ValueError(f"[{name}] Please set at least one of '{name}.{param}' or '{name}.{param_per_gpu}'.")
    if mbs is not None and mbs_per_gpu is not None:
        raise ValueError(
            f"[{name}] You have set both '{name}.{param}' AND '{name}.{param_per_gpu}'. Please remove "
            f"'{name}.{param}' because only '*_{param_per_gpu}' is supported (the former is deprecated)."
        )


def validate_config(config: Any, use_reference_policy: bool, use_critic: bool) -> None:
    n_gpus = config.trainer.n_gpus_per_node * config.trainer.nnodes  # verl/utils/config.py:101
    _check_batch_arithmetic(config, n_gpus)
    arr = config.actor_rollout_ref
    _check_actor(arr.actor, n_gpus, config.data.train_batch_size, arr.model)
    if not arr.actor.use_dynamic_bsz:
        if use_reference_policy:
            _check_mutually_exclusive(
                arr.ref.log_prob_micro_batch_size, arr.ref.log_prob_micro_batch_size_per_gpu, "actor_rollout_ref.ref"
            )
        _check_mutually_exclusive(
            arr.rollout.log_prob_micro_batch_size,
            arr.rollout.log_prob_micro_batch_size_per_gpu,
            "actor_rollout_ref.rollout",
        )
    if arr.rollout.val_kwargs.do_sample:
        assert arr.rollout.temperature > 0, (
            "validation gen temperature should be greater than 0 when enabling do_sample"
        )
    print("[validate_config] All configuration checks passed successfully!")
