"""The tests' way to plan one run: draft it (:func:`dapo_ops.control.launch.plan.draft_plan`) and finish it with the
host's facts (:func:`~dapo_ops.control.launch.plan.make_plan`), as ``inv launch`` does once per run."""

from __future__ import annotations

from typing import Any, Mapping

from dapo_ops.control.launch import plan as planning


def plan_for(memory: Mapping[str, Any] | None = None, **inputs: Any) -> planning.Plan:
    """The :class:`~dapo_ops.control.launch.plan.Plan` of ``PlanInputs(**inputs)`` finished with ``memory`` (the
    probe's facts: ``{"model_config", "device_gib", "memos"}``; None: a dry run's)."""
    return planning.make_plan(planning.draft_plan(planning.PlanInputs(**inputs)), memory)
