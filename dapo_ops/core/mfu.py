"""How close to the device a run is: model FLOPs utilisation (MFU) against the device's peak (stdlib only).

From verl's per-step figures, the model shape and the device's peak table; ``inv status`` shows it beside
tokens/s/device (:mod:`dapo_ops.control.status.table`).

Figures (fractions of the device's peak, 0..1):

- ``actor``: verl's own ``perf/mfu/actor`` (``verl/trainer/ppo/ray_trainer.py:1373``,
  ``verl/trainer/ppo/v1/trainer_base.py:1862``), the actor update phase only: per update mini-batch, the model's
  training FLOPs (``6 x dense params x tokens`` + the attention term ``6 x sum(seqlen^2) x head_dim x heads x
  layers``, ``verl/utils/flops_counter.py:96-125``) over the ``train_batch`` time of that mini-batch, the device's
  peak and the trainer world size (``verl/workers/engine_workers.py:228-235``), averaged over the mini-batches.
  verl prints 0 where it knows no peak for the device (``get_device_flops`` returns ``inf``,
  ``verl/utils/flops_counter.py:64-80``) or no formula for the ``model_type`` (``_estimate_unknown_flops``); 0 is not
  shown as a figure.
- ``step``: the whole step, computed here with the training formula ``6 x P x tokens/s/device / peak``
  (:func:`step_mfu`): ``P`` = :func:`dapo_ops.core.memfit.param_count` of the run's ``config.json`` shape,
  tokens/s/device = verl's ``perf/throughput`` (``total_num_tokens / (step time x n_gpus)``,
  ``verl/trainer/ppo/metric_utils.py:679-687``). It prices every token of the step as one training token (no
  separate ``2 x P`` for generation or the old-log-prob forward), so it is the share of the device's peak the step
  turned into training work, comparable between runs and devices.

Device peaks (:data:`PEAK_TFLOPS`, bf16 dense, no sparsity): H100 / H200 989 TFLOP/s (NVIDIA's H100 / H200 datasheets:
the H200 has the H100's compute; the same figure as verl's ``_DEVICE_FLOPS``, ``verl/utils/flops_counter.py:21-44``);
Ascend 910B 354 TFLOP/s: verl's own figure for ``910B`` / ``Ascend910`` (``verl/utils/flops_counter.py:39,42``); no
Huawei datasheet number for the 910B's bf16 dense peak was found to cite, and this one is what verl's printed
``perf/mfu/actor`` divides by on an Ascend host, so the two figures stay comparable.
"""

from __future__ import annotations

import math
from typing import Any

#: bf16 dense peak (TFLOP/s) by a substring of the device name (nvidia-smi ``NVIDIA H200``, npu-smi / torch_npu
#: ``Ascend910B2``); the first match in this order wins (``H200`` before ``H20``). Sources: the module docstring.
PEAK_TFLOPS = (
    ("H200", 989.0),
    ("H100", 989.0),
    ("H800", 989.0),
    ("H20", 148.0),
    ("A100", 312.0),
    ("A800", 312.0),
    ("910B", 354.0),
    ("Ascend910", 354.0),
)
#: the formula the computed figure uses, as shown in ``inv status --json`` (``mfu.formula``)
STEP_FORMULA = "6 x params x tokens/s/device / peak (training formula over the whole step)"
VERL_ACTOR_KEY = "perf/mfu/actor"
THROUGHPUT_KEY = "perf/throughput"


def peak_flops(device_name: str | None) -> float | None:
    """The device's bf16 dense peak in FLOP/s from :data:`PEAK_TFLOPS` (substring match on ``device_name``), or
    None for a device not in the table (no MFU is computed against a guessed peak)."""
    name = str(device_name or "")
    for key, tflops in PEAK_TFLOPS:
        if key in name:
            return tflops * 1e12
    return None


def step_mfu(params: int, tokens_per_s_per_device: float, peak: float) -> float:
    """Whole-step MFU (fraction): ``6 * params * tokens_per_s_per_device / peak`` (``peak`` in FLOP/s)."""
    return 6.0 * params * tokens_per_s_per_device / peak


def figures(
    metrics: dict[str, Any], model_config: dict[str, Any] | None, device_name: str | None
) -> dict[str, Any] | None:
    """The run's MFU record for ``inv status --json`` (None when there is nothing to show).

    :param metrics: the step's metrics (verl's names); reads :data:`VERL_ACTOR_KEY` and :data:`THROUGHPUT_KEY`.
    :param model_config: the model's ``config.json`` keys (:func:`dapo_ops.core.memfit.model_facts`), or None.
    :param device_name: the device's name (``NVIDIA H200``), or None.
    :returns: ``{"actor": verl's perf/mfu/actor or None, "step": computed step MFU or None, "shown": "actor" |
        "step", "params": P or None, "peak_tflops": float or None, "device": name or None, "formula":
        :data:`STEP_FORMULA`, "why": why the step figure is missing or None}``; ``shown`` is verl's figure where it
        printed one (> 0), else the computed one.
    """
    from dapo_ops.core import memfit

    actor = metrics.get(VERL_ACTOR_KEY)
    actor = float(actor) if isinstance(actor, (int, float)) and math.isfinite(actor) and actor > 0 else None
    tput = metrics.get(THROUGHPUT_KEY)
    params = None
    why = None
    if model_config:
        try:
            params = memfit.param_count(memfit.Model.from_config(model_config))
        except memfit.EstimateUnavailable as ex:
            why = str(ex)
    else:
        why = "model shape not recorded (run.json spec.learn: a launch with device facts records it)"
    peak = peak_flops(device_name)
    if device_name and peak is None:
        why = "no bf16 peak known for %s (dapo_ops/core/mfu.py PEAK_TFLOPS)" % device_name
    elif not device_name and why is None:
        why = "device name not recorded (run.json spec.learn)"
    step = None
    if params and peak and isinstance(tput, (int, float)) and math.isfinite(tput) and tput > 0:
        step, why = step_mfu(params, float(tput), peak), None
    if actor is None and step is None:
        return None
    return {
        "actor": actor,
        "step": step,
        "shown": "actor" if actor is not None else "step",
        "params": params,
        "peak_tflops": peak / 1e12 if peak else None,
        "device": device_name or None,
        "formula": STEP_FORMULA,
        "why": why,
    }
