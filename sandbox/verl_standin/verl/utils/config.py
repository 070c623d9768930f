"""verl STAND-IN of ``verl/utils/config.py`` (sandbox only): what preflight's verl-startup step imports
(dapo_ops/agent/verlcheck.py ``dataclass_errors``) and what the stand-in ``main_ppo`` runs before the trainer, as the
real one does (verl/trainer/main_ppo.py:177-181). ``validate_config`` runs verl 0.9.1's checks with their exact
wording: the batch arithmetic (verl/utils/config.py:100-127), the actor's ``ActorConfig.__post_init__`` / ``validate``
micro-batch checks (verl/workers/config/actor.py:195-243, reached through ``omega_conf_to_dataclass`` at
verl/utils/config.py:159-160), the log-prob micro-batch pairs (:162-175), the validation temperature (:200-203), then
the pass line (:217). ``omega_conf_to_dataclass`` returns the config as it is (the stand-in has none of verl's config
dataclasses, so their other ``__post_init__`` checks do not run here)."""

from __future__ import annotations

from typing import Any

__all__ = ["omega_conf_to_dataclass", "validate_config"]

VALID_LOSS_AGG_MODES = [
    "token-mean",
    "token-sum",
    "seq-mean-token-sum",
    "seq-mean-token-mean",
    "seq-mean-token-sum-norm",
]


def omega_conf_to_dataclass(config: Any, dataclass_type: Any = None) -> Any:
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


def _check_actor(actor: Any, n_gpus: int, train_batch_size: int) -> None:
    """verl/workers/config/actor.py:195-243 (``ActorConfig.__post_init__`` then ``validate``)."""
    if not actor.use_dynamic_bsz:
        if actor.ppo_micro_batch_size is not None and actor.ppo_micro_batch_size_per_gpu is not None:
            raise ValueError(
                "[actor] You have set both 'actor.ppo_micro_batch_size' AND 'actor.ppo_micro_batch_size_per_gpu'. "
                "Please remove 'actor.ppo_micro_batch_size' because only '*_ppo_micro_batch_size_per_gpu' is "
                "supported (the former is deprecated)."
            )
        assert not (actor.ppo_micro_batch_size is None and actor.ppo_micro_batch_size_per_gpu is None), (
            "[actor] Please set at least one of 'actor.ppo_micro_batch_size' or "
            "'actor.ppo_micro_batch_size_per_gpu' if use_dynamic_bsz is not enabled."
        )
    if actor.loss_agg_mode not in VALID_LOSS_AGG_MODES:
        raise ValueError(f"Invalid loss_agg_mode: {actor.loss_agg_mode}")
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
    _check_actor(arr.actor, n_gpus, config.data.train_batch_size)
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
