"""verl STAND-IN of ``verl/trainer/ppo/utils.py`` (sandbox only): the two predicates preflight's verl-startup step
imports, as verl 0.9.1 writes them (verl/trainer/ppo/utils.py:75-79, 96-107; ``gae`` is AdvantageEstimator.GAE)."""

from __future__ import annotations

from typing import Any


def need_reference_policy(config: Any) -> bool:
    return config.algorithm.get("use_kl_in_reward", False) or config.actor_rollout_ref.actor.use_kl_loss


def need_critic(config: Any) -> bool:
    if config.critic.enable is not None:
        return bool(config.critic.enable)
    return config.algorithm.adv_estimator == "gae"
