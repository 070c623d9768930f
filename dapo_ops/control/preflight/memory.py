"""The ``memory-fit`` check: the per-phase memory estimate of :mod:`dapo_ops.core.memfit` from the container's
``config.json`` and the smallest device's memory (:func:`memory_facts`, also used by ``inv launch``). Pure.
"""

from __future__ import annotations

from dapo_ops.core import defaults
from dapo_ops.core import devices
from dapo_ops.control.preflight.plan_view import PlanView, memory_fit_mode
from dapo_ops.control.preflight.result import FAIL, OK, WARN, Check, split_fix


def memory_facts(host, p: dict | None) -> dict | None:
    """``{"model_config", "device_gib", "device_mib", "device_name", "memos"}`` from the probe's facts (the
    container's ``config.json``, the smallest device's total memory and name, the memos of
    ``<runs_dir>/.learned``: :mod:`dapo_ops.core.learned`), for :func:`dapo_ops.control.launch.plan.make_plan`; None
    when the config or the devices are unknown."""
    cfg = ((p or {}).get("model") or {}).get("config")
    d = (p or {}).get("devices") or {}
    if not cfg or d.get("rc") != 0:
        return None
    try:
        rep = devices.parse(getattr(host, "accelerator", defaults.HOST["accelerator"]), d.get("stdout", ""))
    except devices.DeviceParseError:
        return None
    devs = sorted((x for x in rep.devices if x.mem_total_mb), key=lambda x: x.mem_total_mb)
    if not devs:
        return None
    return {
        "model_config": cfg,
        "device_gib": devs[0].mem_total_mb / 1024,
        "device_mib": devs[0].mem_total_mb,
        "device_name": devs[0].name,
        "memos": list((p or {}).get("learned") or []),
    }


def _memfit_checks(host, pv: PlanView | None, p: dict) -> list[Check]:
    """The memory-fit estimate (:mod:`dapo_ops.core.memfit`): per-phase peak, tightest phase, start rung or refusal.
    ``pv`` is a draft (the rungs the launch would add) or the finished plan the launch runs (its ``setting_changes``
    ``memory_rungs``: the estimate or learned rungs it already starts on, :func:`dapo_ops.core.memfit.fit` counts
    them)."""
    from dapo_ops.core import features
    from dapo_ops.core import memfit

    mem = memory_facts(host, p)
    if pv is None or mem is None:
        return []
    fs = features.FeatureSet.from_json(list(pv.spec.features), pv.spec.disabled_features)
    try:
        f = memfit.fit(mem["model_config"], pv.spec, fs, mem["device_gib"])
    except memfit.EstimateUnavailable as e:
        return [
            Check(
                "memory-fit",
                WARN,
                str(e),
                "the device-OOM ladder still applies; complete config.json to get the estimate",
            )
        ]
    except memfit.FitError as e:
        msg, fix = split_fix(str(e))
        if memory_fit_mode(pv) == "warn":
            return [Check("memory-fit", WARN, msg, "MEMORY_FIT=warn: the first attempt runs as planned; " + fix)]
        return [Check("memory-fit", FAIL, msg, fix)]
    if f.rungs and memory_fit_mode(pv) == "warn":
        return [
            Check(
                "memory-fit",
                WARN,
                f"first attempt as planned: {f.planned.line()}",
                f"MEMORY_FIT=warn: launch starts as planned; MEMORY_FIT=start would begin on "
                f"{', '.join(f.rungs)}: {f.started.line()}",
            )
        ]
    if f.rungs:
        return [
            Check(
                "memory-fit",
                WARN,
                f"first attempt as planned: {f.planned.line()}",
                f"inv launch starts on {', '.join(f.rungs)} (source: estimate): {f.started.line()}",
            )
        ]
    started = [r for r in pv.spec.setting_changes.get("memory_rungs") or [] if isinstance(r, dict)]
    if started:  # a finished plan (the launch's) already starts on rungs: say so, as for a draft that would
        names = ", ".join(f"{r.get('rung')}({r.get('phase')})" for r in started)
        src = ", ".join(sorted({str(r.get("source")) for r in started}))
        return [
            Check(
                "memory-fit",
                WARN,
                f"inv launch starts on {names} (source: {src}): {f.planned.line()}",
                "the device-OOM ladder goes on from there; a larger device, shorter responses or a smaller batch "
                "start without them",
            )
        ]
    return [Check("memory-fit", OK, f"estimate: {f.planned.line()}")]
