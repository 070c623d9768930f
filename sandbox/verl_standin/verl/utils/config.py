"""verl STAND-IN of ``verl/utils/config.py`` (sandbox only): what preflight's verl-startup step imports
(dapo_ops/agent/verlcheck.py ``dataclass_errors``). ``validate_config`` runs verl 0.9.1's batch-size checks with its
exact wording (verl/utils/config.py:100-127); ``omega_conf_to_dataclass`` returns the config as it is (the stand-in
has none of verl's config dataclasses, so their ``__post_init__`` checks do not run here)."""

from __future__ import annotations

from typing import Any

__all__ = ["omega_conf_to_dataclass", "validate_config"]


def omega_conf_to_dataclass(config: Any, dataclass_type: Any = None) -> Any:
    return config


def validate_config(config: Any, use_reference_policy: bool, use_critic: bool) -> None:
    n_gpus = config.trainer.n_gpus_per_node * config.trainer.nnodes  # verl/utils/config.py:101
    actor = config.actor_rollout_ref.actor
    if not actor.use_dynamic_bsz:
        if actor.strategy == "megatron":
            model_parallel_size = (
                actor.megatron.tensor_model_parallel_size * actor.megatron.pipeline_model_parallel_size
            )
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
