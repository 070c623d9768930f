"""Escalation ladder: what the next attempt changes after a failure (stdlib only).

``decide`` maps (current features, the classifier's verdict class + detail, retry counters,
run settings) to a :class:`Decision`. Rules (runbook + ``failure-classes.md`` §4):

- ``oom-device``: the only class that escalates memory features: + ``offload``, then
  + ``recompute``, then stop with suggestions. Rungs already on are skipped; a rung the user
  turned off explicitly (``-offload``) is a user choice, never overridden: skipped and said so.
  Bounded by ``max_oom_retries`` (runbook ``MAX_OOM_RETRIES``, default 2).
- ``oom-kv-cache``: change rollout ``gpu_memory_utilization`` by ``detail["kv_direction"]``
  (``lower``: -0.1 down to a floor of :data:`KV_FLOOR`; ``raise``: +0.1 up to :data:`KV_CEILING`;
  ``cleanup``: unchanged, one retry after cleaning up). Never offload.
- ``oom-host`` / ``oom-ray``: never add offload (it moves memory to the host); if the ladder
  added offload, roll it back and retry once, else stop with host-memory suggestions.
- ``network`` / ``hccl-timeout`` / ``hang``: one retry (after cleanup).
- ``config-error``, ``data-error``, fatal ``auth-error``, ``container-missing``, ``crash-other``: stop.
- ``success``: done; non-fatal ``auth-error`` (``detail["fatal"] is False`` or
  ``detail["action_kind"] == "keep-running"``): keep running, never restart.

Invariant kept: no setting change lowers a token budget below ``max_prompt_length +
max_response_length`` (verl asserts ``max_token_len must be greater than the sequence length``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .features import FeatureSet

#: Memory rungs in order (failure-classes.md §3 oom-device).
RUNGS = ("offload", "recompute")
KV_STEP = 0.1
KV_FLOOR = 0.4
KV_CEILING = 0.9
DEFAULT_MAX_OOM_RETRIES = 2

_STOP_CLASSES = {
    "config-error": "configuration error: not retried unchanged; fix the setting named in the evidence",
    "data-error": "data error: not retried; fix the dataset or data.max_prompt_length / data.truncation",
    "auth-error": "tracker credentials rejected: not retried; fix SWANLAB_API_KEY / SWANLAB_HOST",
    "container-missing": "the container is gone or stopped: not retried; recreate or start it, then launch again",
    "crash-other": "unclassified crash: not retried; read the evidence in the log",
}
_RETRY_ONCE = {
    "network": "network failure: retrying once after cleanup",
    "hccl-timeout": "collective (HCCL/NCCL) timeout: retrying once after cleanup",
    "hang": "no progress within the hang timeout: retrying once after cleanup",
}


@dataclass
class Decision:
    """What to do after an attempt ended (or was stopped).

    ``action``: ``retry`` | ``stop`` | ``done`` | ``keep-running``. ``features``: the feature set of
    the next attempt (unchanged when not retrying). ``setting_changes``: run-setting overrides for
    the next attempt, e.g. ``{"gpu_memory_utilization": 0.75}`` (keys of the run spec's
    ``settings``). ``reason``: one line. ``skipped``: rungs skipped with why. ``suggestions``: on
    stop, next parameters to change. ``counter``: which retry budget the supervisor charges when
    it acts on a ``retry``: ``"oom"`` (``oom_retries_used``) or a key of ``other_retries_used``
    (``None`` when nothing is charged).
    """

    action: str
    features: FeatureSet
    setting_changes: dict = field(default_factory=dict)
    reason: str = ""
    skipped: list = field(default_factory=list)
    suggestions: list = field(default_factory=list)
    counter: str | None = None

    def to_json(self) -> dict:
        return {
            "action": self.action,
            "features": self.features.to_json(),
            "disabled_features": sorted(self.features.disabled),
            "setting_changes": dict(self.setting_changes),
            "reason": self.reason,
            "skipped": list(self.skipped),
            "suggestions": list(self.suggestions),
            "counter": self.counter,
        }


def _seq_len(settings: dict) -> int:
    return int(settings.get("max_prompt_length", 2048)) + int(settings.get("max_response_length", 8192))


def token_budget_floor(settings: dict) -> int:
    """Smallest legal ``*_max_token_len_per_gpu`` (tokens): ``max_prompt_length + max_response_length``."""
    return _seq_len(settings)


def keep_token_budgets(settings: dict, changes: dict) -> dict:
    """Return ``changes`` with every ``*max_token_len*`` value raised to at least prompt+response.

    The sequence length is taken from ``changes`` first (a change may shorten the response),
    then from ``settings``.
    """
    merged = dict(settings)
    merged.update(changes)
    floor = _seq_len(merged)
    out = dict(changes)
    for k, v in changes.items():
        if "max_token_len" in k and v is not None and int(v) < floor:
            out[k] = floor
    return out


def _rung_status(features: FeatureSet, rung: str) -> str | None:
    """Why ``rung`` cannot be the next rung, or None if it can."""
    if rung in features.disabled:
        return f"{rung}: skipped, turned off by the user (-{rung}); a user choice is never overridden"
    src = features.source_of(rung)
    if src is not None:
        return f"{rung}: skipped, already on ({src})"
    return None


def _oom_suggestions(features: FeatureSet, detail: dict, settings: dict) -> list[str]:
    prompt = int(settings.get("max_prompt_length", 2048))
    resp = int(settings.get("max_response_length", 8192))
    floor = prompt + resp
    out = []
    where = []
    if detail.get("step") is not None:
        total = detail.get("total") or settings.get("steps")
        where.append(f"step {detail['step']}" + (f"/{total}" if total else ""))
    if detail.get("phase"):
        where.append(f"phase {detail['phase']}")
    if where:
        out.append("device OOM reached at " + ", ".join(where)
                   + " (a late OOM after healthy steps hints at a leak or version regression; report the step)")
    on = ", ".join(sorted(features.names() & set(RUNGS))) or "none"
    out.append(f"memory rungs on: {on}; the model/setup does not fit the devices as configured")
    if features.has("dynamic_batch"):
        out.append(
            "lower the token budget: actor_rollout_ref.actor.ppo_max_token_len_per_gpu / *log_prob_max_token_len_per_gpu"
            f" toward {floor} (never below max_prompt_length + max_response_length = {floor})"
        )
    else:
        out.append("smaller micro-batch: actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1 "
                   "(and ref/rollout log_prob_micro_batch_size_per_gpu=1)")
    out.append(f"shorter responses: --max-response-length {max(512, resp // 2)} (MAX_RESPONSE_LENGTH, now {resp})")
    tg = settings.get("trainer_gpus")
    out.append("more devices for the trainer pool" + (f" (TRAINER_GPUS now {tg})" if tg else "")
               + ", or a larger ulysses_sequence_parallel_size / tensor parallel size")
    return out


def _host_suggestions(cls: str, settings: dict) -> list[str]:
    out = [
        "reduce host memory: smaller rollout n / data.train_batch_size, fewer dataloader workers, "
        "LD_PRELOAD=/usr/local/lib/libjemalloc.so.2 against allocator growth",
        "give the container more host RAM (docker --memory / cgroup limit) or use more hosts",
    ]
    if cls == "oom-ray":
        out.append("Ray memory monitor: RAY_memory_usage_threshold (default 0.95) only if the node truly has headroom")
    out.append("do not add offload: it moves parameters and optimizer state into the host RAM that ran out")
    return out


def _kv_decide(features, detail, other_used, settings, max_oom_retries) -> Decision:
    direction = str(detail.get("kv_direction") or "lower").lower()
    cur = float(settings.get("gpu_memory_utilization", 0.6))
    resp = int(settings.get("max_response_length", 8192))
    tp = settings.get("rollout_tp")
    stop_sugg = [
        f"lower the rollout max_model_len via --max-response-length {max(512, resp // 2)} (now {resp})",
        f"raise the rollout tensor parallel size (--rollout-tp, now {tp})" if tp else "raise the rollout tensor parallel size (--rollout-tp)",
        "free the devices: leftover processes from an earlier attempt (npu-smi info / nvidia-smi)",
    ]
    if direction == "cleanup":
        key = "oom-kv-cache:cleanup"
        if other_used.get(key, 0) >= 1:
            return Decision("stop", features, {}, "rollout memory still short after a cleanup retry", [],
                            [f"lower gpu_memory_utilization (now {cur}) if something else holds device memory"] + stop_sugg)
        return Decision("retry", features, {}, "rollout found less free memory than requested: cleaning up and retrying unchanged",
                        [], [], key)
    key = "oom-kv-cache"
    if other_used.get(key, 0) >= max_oom_retries:
        return Decision("stop", features, {}, f"rollout KV cache still short after {other_used.get(key, 0)} adjustments",
                        [], stop_sugg)
    if direction == "raise":
        new = round(min(KV_CEILING, cur + KV_STEP), 2)
        if new <= cur:
            return Decision("stop", features, {}, f"rollout KV cache too small at gpu_memory_utilization={cur} (ceiling {KV_CEILING})",
                            [], stop_sugg)
        return Decision("retry", features, {"gpu_memory_utilization": new},
                        f"rollout KV cache too small: gpu_memory_utilization {cur} -> {new}", [], [], key)
    new = round(cur - KV_STEP, 2)
    if new < KV_FLOOR - 1e-9:
        return Decision("stop", features, {}, f"rollout memory short at gpu_memory_utilization={cur} (floor {KV_FLOOR})",
                        [], stop_sugg)
    return Decision("retry", features, {"gpu_memory_utilization": new},
                    f"rollout could not allocate its memory: gpu_memory_utilization {cur} -> {new}", [], [], key)


def decide(features: FeatureSet, verdict_cls: str, verdict_detail: dict, attempt: int,
           oom_retries_used: int, max_oom_retries: int, other_retries_used: dict, settings: dict) -> Decision:
    """Decide the next step after attempt ``attempt`` (1-based) ended with ``verdict_cls``.

    ``verdict_detail``: the classifier's ``Verdict.detail`` (``kv_direction``, ``step``, ``total``,
    ``phase``, ``fatal``, ``action_kind``). ``oom_retries_used``: device-OOM retries so far (the
    ``MAX_OOM_RETRIES`` budget); ``other_retries_used``: other retries so far by counter key (see
    :attr:`Decision.counter`). ``settings``: the run spec's ``settings`` with earlier
    ``setting_changes`` applied (``max_prompt_length``, ``max_response_length``,
    ``gpu_memory_utilization``, ``rollout_tp``, ``trainer_gpus``, ``steps``).
    Returns a :class:`Decision`; never raises for an unknown class (it stops).
    """
    detail = dict(verdict_detail or {})
    other = dict(other_retries_used or {})
    settings = dict(settings or {})
    cls = verdict_cls

    if cls == "success":
        return Decision("done", features, {}, "training reached its final step")

    if cls == "oom-device":
        skipped = []
        nxt = None
        for rung in RUNGS:
            why = _rung_status(features, rung)
            if why:
                skipped.append(why)
            elif nxt is None:
                nxt = rung
        if oom_retries_used >= max_oom_retries:
            return Decision("stop", features, {},
                            f"device OOM after {oom_retries_used} OOM retries (MAX_OOM_RETRIES={max_oom_retries})",
                            skipped, _oom_suggestions(features, detail, settings))
        if nxt is None:
            return Decision("stop", features, {}, "device OOM with offload and recompute already on (or turned off by the user)",
                            skipped, _oom_suggestions(features, detail, settings))
        n = oom_retries_used + 1
        new = features.add(nxt, f"oom-retry-{n}")
        return Decision("retry", new, {}, f"device OOM: adding {nxt} (OOM retry {n}/{max_oom_retries}), resuming from the last checkpoint",
                        skipped, [], "oom")

    if cls == "oom-kv-cache":
        dec = _kv_decide(features, detail, other, settings, max_oom_retries)
        dec.setting_changes = keep_token_budgets(settings, dec.setting_changes)
        return dec

    if cls in ("oom-host", "oom-ray"):
        what = "host (kernel/cgroup) OOM" if cls == "oom-host" else "Ray host-memory monitor killed a worker"
        src = features.source_of("offload")
        key = "rollback-offload"
        if src is not None and src.startswith("oom-retry-") and other.get(key, 0) < 1:
            return Decision("retry", features.remove_ladder("offload"), {},
                            f"{what}: rolling back ladder-added offload and retrying once", [], [], key)
        reason = f"{what}: stopped (offload is never added for host memory)"
        if src is not None and src.startswith("oom-retry-"):
            reason = f"{what} again after rolling back offload: stopped"
        return Decision("stop", features, {}, reason, [], _host_suggestions(cls, settings))

    if cls in _RETRY_ONCE:
        if other.get(cls, 0) >= 1:
            return Decision("stop", features, {}, f"{cls} again after one retry: stopped", [],
                            ["check the network, the Ray head and the HCCL/NCCL environment "
                             "(HCCL_CONNECT_TIMEOUT, HCCL_EXEC_TIMEOUT) before launching again"])
        return Decision("retry", features, {}, _RETRY_ONCE[cls], [], [], cls)

    if cls == "auth-error" and (detail.get("fatal") is False or detail.get("action_kind") == "keep-running"):
        return Decision("keep-running", features, {}, "tracker credentials rejected while training continues: alert, never restart")

    if cls in _STOP_CLASSES:
        return Decision("stop", features, {}, _STOP_CLASSES[cls], [], [])

    return Decision("stop", features, {}, f"unknown failure class {cls!r}: stopped", [], [])


def plan_ladder(features: FeatureSet, max_oom_retries: int) -> list[str]:
    """Human lines describing what the supervisor would do on failures, for the dry-run plan.

    Simulates device-OOM decisions from ``features`` until a stop, then adds one line each for
    KV-cache, host/Ray OOM and network failures.
    """
    lines = []
    for rung in RUNGS:
        why = _rung_status(features, rung)
        if why:
            lines.append(why)
    fs = features
    used = 0
    while True:
        d = decide(fs, "oom-device", {}, used + 1, used, max_oom_retries, {}, {})
        if d.action != "retry":
            if used:
                lines.append(f"device OOM after retry {used}: stop with suggestions (smaller micro-batch or token "
                             "budget, shorter responses, more devices, the step reached)")
            else:
                lines.append("device OOM: stop with suggestions (no memory rung left, or MAX_OOM_RETRIES=0)")
            break
        added = sorted(d.features.names() - fs.names())
        used += 1
        lines.append(f"device OOM -> retry {used}/{max_oom_retries}: + {', '.join(added)}, resume from the last checkpoint")
        fs = d.features
    lines.append("rollout KV-cache shortage: change actor_rollout_ref.rollout.gpu_memory_utilization "
                 f"(lower by {KV_STEP} to >= {KV_FLOOR}, or raise to <= {KV_CEILING}, per the message), never offload")
    lines.append("host / Ray OOM: never add offload; roll back ladder-added offload once, else stop")
    lines.append("network / HCCL timeout / hang: one retry after cleanup; config, data, auth errors: stop")
    return lines
