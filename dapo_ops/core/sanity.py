"""Sanity of the numbers a run sets: ONE table of the ranges RL fine-tuning with verl uses, and
the warning lines for values far outside them. Stdlib only, pure.

A warning never stops a run: preflight shows it as check ``sanity`` (warn) and the plan as ``sanity:`` lines. The
value read is the one verl gets: the last override of the key in the verl argv (dapo-ops' own, then the user's
``--override``; :func:`dapo_ops.core.hydra_override.value_of`: ``+``/``++`` set it, a ``~key`` leaves no value to
check), else verl 0.9.1's default (within range by construction).

Sources of the ranges (cited per row in :data:`RANGES`):

- verl 0.9.1's defaults: ``verl/trainer/config/actor/actor.yaml`` (``optim.lr`` 1e-6 :151, ``clip_ratio`` 0.2 :36,
  ``clip_ratio_low`` 0.2 :39, ``clip_ratio_high`` 0.2 :42, ``clip_ratio_c`` 3.0 :83, ``kl_loss_coef`` 0.001
  :113), ``verl/trainer/config/ppo_trainer.yaml:117`` (``algorithm.kl_ctrl.kl_coef`` 0.001);
- verl's DAPO recipe (``recipe/dapo/run_dapo_qwen2.5_32b.sh``, verl-project/verl): ``lr`` 1e-6, ``clip_ratio_low``
  0.2, ``clip_ratio_high`` 0.28, ``clip_ratio_c`` 10.0, ``kl_coef`` / ``kl_loss_coef`` 0.0, 512 prompts per step
  on 16 nodes x 8 devices; the runbook's defaults (``dapo_ops/core/overrides.py``) are the same.

A value is flagged when it is outside ``[low, high]`` (far outside the usual range: about 10x beyond its ends).
The model's context (``max_prompt_length + max_response_length`` over ``max_position_embeddings``) is not here: the
plan refuses it (``dapo_ops/core/runspec.py`` ``check_spec``) and preflight's ``model`` check fails on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional

from dapo_ops.core.hydra_override import value_of


@dataclass(frozen=True)
class Range:
    """One row: verl ``key``; a value outside ``[low, high]`` is flagged (``low_open``: ``low`` itself too);
    ``usual``: the range RL fine-tuning uses, in words; ``source``: where that comes from."""

    key: str
    low: float
    high: float
    usual: str
    source: str
    low_open: bool = False

    def outside(self, value: float) -> bool:
        """True when ``value`` is far outside the usual range."""
        return value > self.high or value < self.low or (self.low_open and value == self.low)


_RECIPE = "verl recipe/dapo/run_dapo_qwen2.5_32b.sh"
RANGES: tuple[Range, ...] = (
    Range(
        "actor_rollout_ref.actor.optim.lr",
        1e-8,
        1e-4,
        "1e-7 to 1e-5",
        f"verl's default 1e-6 (trainer/config/actor/actor.yaml:151), {_RECIPE} 1e-6",
    ),
    Range(
        "actor_rollout_ref.actor.clip_ratio",
        0.01,
        0.5,
        "0.1 to 0.3",
        "verl's default 0.2 (actor.yaml:36)",
    ),
    Range(
        "actor_rollout_ref.actor.clip_ratio_low",
        0.01,
        0.5,
        "0.1 to 0.3",
        f"verl's default 0.2 (actor.yaml:39), {_RECIPE} 0.2",
    ),
    Range(
        "actor_rollout_ref.actor.clip_ratio_high",
        0.01,
        1.0,
        "0.2 to 0.3",
        f"verl's default 0.2 (actor.yaml:42), {_RECIPE} 0.28",
    ),
    Range(
        "actor_rollout_ref.actor.clip_ratio_c",
        1.0,
        100.0,
        "3 to 10 (dual-clip bound, above 1)",
        f"verl's default 3.0 (actor.yaml:83), {_RECIPE} 10.0",
        low_open=True,
    ),
    Range(
        "actor_rollout_ref.actor.kl_loss_coef",
        0.0,
        1.0,
        "0 to 0.01",
        f"verl's default 0.001 (actor.yaml:113), {_RECIPE} 0.0",
    ),
    Range(
        "algorithm.kl_ctrl.kl_coef",
        0.0,
        1.0,
        "0 to 0.01",
        f"verl's default 0.001 (trainer/config/ppo_trainer.yaml:117), {_RECIPE} 0.0",
    ),
)
"""The one table of usual ranges (module docstring: sources)."""


def _num(text: Optional[str]) -> Optional[float]:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def warnings(overrides: Iterable[str], devices: Optional[int] = None) -> list[str]:
    """One line per value far outside :data:`RANGES` (naming the key, the value, the usual range and its source),
    then ``data.train_batch_size`` below ``devices`` (the trainer pool's device count: each device gets less than
    one prompt per step). ``overrides``: the verl argv's ``key=value`` words, in order."""
    words = [str(o) for o in overrides]
    out = []
    for r in RANGES:
        v = _num(value_of(words, r.key))
        if v is not None and r.outside(v):
            out.append("%s=%g is far outside what RL fine-tuning uses (usually %s; %s)" % (r.key, v, r.usual, r.source))
    batch = _num(value_of(words, "data.train_batch_size"))
    if batch is not None and devices and batch < devices:
        out.append(
            "data.train_batch_size=%d prompts is smaller than the %d trainer devices: a step gives each device less "
            "than one prompt (usually a multiple of the devices; %s: 512 prompts on 128 devices)"
            % (int(batch), devices, _RECIPE)
        )
    return out
