"""Data sufficiency: how many training steps verl 0.9.1's V1 loop runs on the data before its epoch limit ends it
(stdlib only, pure).

verl's facts (0.9.1, ``verl/trainer/ppo/v1/trainer_base.py``):

- ``steps_per_epoch = len(self.train_dataset) // data.train_batch_size`` (:765): whole batches only; the train
  dataloader has ``drop_last=True`` (:747). ``len(train_dataset)`` is the rows left after
  ``data.filter_overlong_prompts`` (``verl/utils/dataset/rl_dataset.py:197-271``: prompts longer than
  ``data.max_prompt_length`` tokens dropped; off by default, ``verl/trainer/config/data/legacy_data.yaml:83``).
- ``total_training_steps = steps_per_epoch * trainer.total_epochs`` unless ``trainer.total_training_steps`` is
  set (:767-771; dapo-ops sets it to ``--steps``); ``trainer.total_epochs`` defaults to 30
  (``verl/trainer/config/ppo_trainer.yaml:144``).
- the loop runs ``while current_epoch < trainer.total_epochs and global_steps <= total_training_steps`` (:467)
  with ``current_epoch = (global_steps - 1) // steps_per_epoch`` (:522), then returns and the process exits 0: a
  ``--steps`` above ``steps_per_epoch * total_epochs`` ends early, at that step, with no error.
- ``steps_per_epoch`` 0 (fewer rows than one batch) divides by zero at :450 (``global_steps // steps_per_epoch``).
- DAPO dynamic sampling (``algorithm.filter_groups``) does NOT lower this limit on V1: the epoch counter counts
  steps, and the dataloader restarts when it is exhausted (``_fetch_one_gen_batch``, :1466-1474). Extra generation
  batches per step only cycle the prompts faster (the replay buffer also ignores ``max_num_gen_batches``,
  :205-211): :func:`passes_per_step` says how much, from a run's own keep-rate.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Optional

from dapo_ops.core.hydra_override import value_of

#: ``trainer.total_epochs`` when no override sets it (verl/trainer/config/ppo_trainer.yaml:144)
VERL_TOTAL_EPOCHS = 30


def total_epochs(overrides: Iterable[str]) -> int:
    """``trainer.total_epochs`` the run gets: what the last override of it in ``overrides`` (the user's
    ``--override`` values) gives it when that is a whole number (:func:`dapo_ops.core.hydra_override.value_of`),
    else :data:`VERL_TOTAL_EPOCHS`."""
    v = value_of(overrides, "trainer.total_epochs")
    return int(v) if v is not None and re.fullmatch(r"[0-9]+", v) else VERL_TOTAL_EPOCHS


def filters_overlong(overrides: Iterable[str]) -> bool:
    """True when the overrides turn on ``data.filter_overlong_prompts`` (verl's default: off, legacy_data.yaml:83)."""
    return (value_of(overrides, "data.filter_overlong_prompts") or "").lower() in ("true", "1")


@dataclass(frozen=True)
class DataFeed:
    """What the training data feeds: ``rows`` (train rows read, all train files), ``train_batch_size`` (prompts per
    step), ``epochs`` (``trainer.total_epochs``), ``upper_bound`` (True: ``data.filter_overlong_prompts`` may drop
    rows not counted here, so the figure is at most this)."""

    rows: int
    train_batch_size: int
    epochs: int
    upper_bound: bool = False

    @property
    def steps_per_epoch(self) -> int:
        """Whole batches per epoch (verl's ``len(dataset) // train_batch_size``, trainer_base.py:765)."""
        return self.rows // max(1, self.train_batch_size)

    @property
    def max_steps(self) -> int:
        """The last step verl runs before its epoch limit (trainer_base.py:467,522)."""
        return self.steps_per_epoch * self.epochs

    def figure(self) -> str:
        """``8 rows // batch 8 = 1 step/epoch x 30 epochs = 30 steps`` (``at most`` when an upper bound)."""
        return "%s%d rows // batch %d = %d step(s)/epoch x %d epochs = %d steps" % (
            "at most " if self.upper_bound else "",
            self.rows,
            self.train_batch_size,
            self.steps_per_epoch,
            self.epochs,
            self.max_steps,
        )

    def shortfall(self, steps: int) -> Optional[str]:
        """One line naming the numbers and the fix when ``steps`` (``--steps``) is more than the data feeds, else
        None. Fewer rows than one batch: verl divides by zero (trainer_base.py:450) whatever the steps."""
        if self.steps_per_epoch == 0:
            return (
                "the training data holds %d rows, fewer than one batch of %d prompts: verl 0.9.1 fails at start "
                "(steps_per_epoch 0, verl/trainer/ppo/v1/trainer_base.py:450, 765); use more data or "
                "--train-batch-size <= %d" % (self.rows, self.train_batch_size, self.rows)
            )
        if steps <= self.max_steps:
            return None
        need = -(-steps // self.steps_per_epoch)
        fewer = " or --steps %d" % self.max_steps if self.max_steps >= 1 else ""  # --steps 0 is refused (minimum 1)
        return (
            "--steps %d is more than the data feeds: %s; verl ends the run at step %d with exit 0 "
            "(verl/trainer/ppo/v1/trainer_base.py:467); use more data, --override trainer.total_epochs=%d%s "
            "(--allow-short-data runs it anyway)" % (steps, self.figure(), self.max_steps, need, fewer)
        )


def passes_per_step(kept_groups: float, generated_groups: float) -> Optional[float]:
    """Under DAPO dynamic sampling: prompt groups drawn per kept group (1 / keep-rate), from a run's own counters,
    or None when unknown. The data is cycled this many times faster than the epoch count says (no earlier end on
    V1: see the module docstring)."""
    if kept_groups <= 0 or generated_groups <= 0:
        return None
    return generated_groups / kept_groups


#: prompt groups DAPO dynamic sampling evicted (all-equal rewards) while one step was sampled
#: (verl/trainer/ppo/v1/replay_buffer.py:374, prefix ``training`` :238-239; absent from a step line: none)
FILTER_EVICTED_KEY = "training/filter_groups/evicted_samples"
#: steps per window of :func:`falling_keep_rate` (the first and the last ``KEEP_WINDOW`` steps are compared)
KEEP_WINDOW = 3


def keep_rates(evicted: Iterable[float], train_batch_size: int) -> list[float]:
    """Per step, the share of sampled prompt groups DAPO kept: ``batch / (batch + evicted)`` (``evicted``: each
    step's :data:`FILTER_EVICTED_KEY`, 0 when absent)."""
    b = max(1, int(train_batch_size))
    return [b / (b + max(0.0, float(e))) for e in evicted]


def falling_keep_rate(evicted: Iterable[float], train_batch_size: int) -> Optional[str]:
    """One warning line when DAPO's filter_groups keep-rate fell to under half its early level and under 50 %
    (the mean of the last :data:`KEEP_WINDOW` steps against the first), else None. A falling keep-rate means the
    prompts turn all-correct or all-wrong for the model: each step draws more generation batches (slower steps;
    verl's legacy DAPO trainer gives up at ``algorithm.filter_groups.max_num_gen_batches``, which V1 ignores,
    trainer_base.py:205-211, and keeps drawing)."""
    rates = keep_rates(evicted, train_batch_size)
    w = KEEP_WINDOW
    if len(rates) < 2 * w:
        return None
    early, recent = sum(rates[:w]) / w, sum(rates[-w:]) / w
    if recent >= 0.5 or recent >= early / 2:
        return None
    return (
        "DAPO filter_groups keep-rate fell from %.0f%% (first %d steps) to %.0f%% (last %d): each step draws ~%.1f "
        "prompt groups per kept one (%s); the prompts turn all-correct or all-wrong for the model: check the reward "
        "and the data's difficulty" % (100 * early, w, 100 * recent, w, 1 / recent, FILTER_EVICTED_KEY)
    )


def ran_out(step: Optional[int], total: Optional[int], epochs: Optional[int]) -> Optional[str]:
    """The verdict line of a run verl ended early at its epoch limit: ``ended at step 30 of 40: the training data
    ran out after 30 epochs`` (``epochs`` None: ``... ran out at verl's epoch limit``), or
    None when the run reached ``total`` (or either is unknown)."""
    if step is None or not total or step >= total:
        return None
    why = "after %d epoch%s" % (epochs, "" if epochs == 1 else "s") if epochs else "at verl's epoch limit"
    return "ended at step %d of %d: the training data ran out %s" % (step, total, why)
