"""Escalation ladder: what the next attempt changes after a failure (stdlib only).

``decide`` maps (current features, the verdict's class + detail, retry counters, run settings) to a
:class:`Decision`. WHICH kind of step a verdict gets is the failure policy's (``dapo_ops/core/policy.py``
:data:`~dapo_ops.core.policy.POLICY`, the one table the verdict texts and docs/troubleshooting.md also read); this
module works out what the step changes. Per kind (runbook + docs/troubleshooting.md):

- ``oom-device``: a **ladder per OOM phase** (``detail["phase"]``, names in :data:`PHASES`;
  :func:`phase_rungs`). Each rung lowers the peak of that phase on verl 0.9.1:

  * ``rollout-init`` / ``weight-sync`` / ``generation``: ``rollout-util`` (rollout
    ``gpu_memory_utilization`` -0.1, floor :data:`KV_FLOOR`: vLLM reserves that share of the device
    while awake), then ``offload`` (colocated only: ``update_weights`` moves the actor's parameters to
    the CPU before it resumes the KV cache, ``verl/workers/engine_workers.py:810-823``). One-step-off weight sync
    by ``detail["side"]``: ``trainer``: ``weight-bucket`` (checkpoint-engine bucket / 2) twice; ``rollout``:
    ``rollout-util``, ``weight-bucket``, ``rollout-util`` (see :mod:`dapo_ops.core.memladder`).
  * ``update``: ``update-batch`` (``dynamic_batch``: ``actor.ppo_max_token_len_per_gpu`` / 2 down to
    prompt+response; else ``actor.ppo_micro_batch_size_per_gpu`` / 4 down to 1; twice), FSDP:
    ``offload-policy`` (FSDP2 ``CPUOffloadPolicy``, ``verl/workers/engine/fsdp/transformer_impl.py:451-460``),
    then ``recompute`` (FSDP activation offload, with gradient checkpointing unless the user turned it off;
    Megatron full recompute). ``offload`` is NOT a rung:
    ``EngineTrainModeCtx`` loads parameters, gradients and optimizer state back for the update
    (``verl/workers/engine/base.py:314-328``); real run 7 OOMed in ``update_actor`` with offload on.
  * ``log-prob``: ``logprob-batch`` (``rollout.log_prob_max_token_len_per_gpu`` / 2, or
    ``log_prob_micro_batch_size_per_gpu`` / 4; read at ``verl/workers/engine_workers.py:619-624``), twice.
  * ``model-load`` / ``checkpoint-load`` / ``checkpoint-save`` (``policy.NO_RUNG_PHASES``): no rung shrinks them:
    the policy stops with the fix (``memladder.STOP_FIXES``).
  * ``unknown`` (no phase): ``offload``, then ``recompute`` (the runbook's ladder).

  Rungs already on are skipped; a rung the user turned off explicitly (``-offload``) is a user
  choice, never overridden: skipped and said so. Features are only appended and settings only
  lowered (the ladder never undoes an earlier rung), bounded by ``max_oom_retries``
  (runbook ``MAX_OOM_RETRIES``, default 2, per run: an ``inv launch --resume`` run starts on the rungs the run it
  resumes had reached, ``control/launch/resume.py``, and goes on up the ladder with its own budget). Every rung applied is recorded in the setting change
  ``memory_rungs`` (list of ``{"rung", "phase", "source", "changes"}``, source ``oom-retry-<N>``
  or ``estimate``) that travels with the other setting changes into ``run.json``.
- ``oom-kv-cache``: change rollout ``gpu_memory_utilization`` by ``detail["kv_direction"]``
  (``lower``: -0.1 down to a floor of :data:`KV_FLOOR`; ``raise``: +0.1 up to :data:`KV_CEILING`;
  ``cleanup``: unchanged, one retry after cleaning up). Never offload.
- ``oom-host`` / ``oom-ray``: never add offload (it moves memory to the host); roll back what the
  ladder moved to host RAM (ladder-added ``offload``, FSDP ``recompute`` = activation offload,
  ``offload-policy``) and retry once, else stop with host-memory suggestions.
- ``network`` / ``hccl-timeout`` / ``hang``: one retry (after cleanup).
- ``config-error``, ``data-error``, fatal ``auth-error``, ``container-missing``, ``crash-other``, ``error-storm``
  (the supervisor's: the same exception repeating without a step): stop.
  Two ``crash-other`` causes stop with their own line and next steps (:func:`_crash_stop`): a full disk
  (``cause`` ``disk-full``: a retry fills it again) and an external kill (``detail["external"]``: exit 137/143
  with no error in the log). The kill is not retried: an operator's or a scheduler's kill is meant, and the OOM
  killer (when the supervisor could read its counter, that is ``oom-host``, retried once) would strike again; the
  suggestions say where to look (dmesg, the cgroup's memory.events) and give ``inv launch --resume <run_id>``.
- ``success``: done; non-fatal ``auth-error`` / ``network`` (``detail["fatal"] is False``: tracker trouble while
  steps continue): keep running, never restart. A lost Ray node (``network`` with ``detail["lost_nodes"]``): stop.

Invariant kept: no setting change lowers a token budget below ``max_prompt_length +
max_response_length`` (verl asserts ``max_token_len must be greater than the sequence length``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
import posixpath
from shlex import quote as q
from typing import Any

from dapo_ops.core import datafeed, defaults
from dapo_ops.core import health, hostcmd, policy
from dapo_ops.core.classify import hints
from dapo_ops.core.classify.verdict import PHASES
from dapo_ops.core.features import FeatureSet
from dapo_ops.core.memladder import (
    ACTOR_BUDGET,
    RUNGS,
    KV_FLOOR,
    KV_STEP,
    SIDES,
    STOP_FIXES,
    apply_rung,
    current_budget,
    rung_status,
    keep_token_budgets,
    phase_of,
    phase_rungs,
    troubleshooting_md,
)
from dapo_ops.core.policy import NO_RUNG_PHASES

#: docs/troubleshooting.md section hook (dapo_ops.core.classify.DOC_SECTION_MODULES): the device-OOM-by-phase table
troubleshooting_section = troubleshooting_md

KV_CEILING = 0.9


@dataclass
class Decision:
    """What to do after an attempt ended (or was stopped).

    ``action``: ``retry`` | ``stop`` | ``done`` | ``keep-running``. ``features``: the feature set of
    the next attempt (unchanged when not retrying). ``setting_changes``: run-setting overrides for
    the next attempt, e.g. ``{"gpu_memory_utilization": 0.75}`` (keys of the run spec's
    ``settings``; memory rungs also carry ``memory_rungs``, the record with sources). ``reason``: one
    line. ``skipped``: rungs skipped with why. ``suggestions``: on stop, next parameters to change.
    ``counter``: which retry budget the supervisor charges when it acts on a ``retry``: ``"oom"``
    (``oom_retries_used``) or a key of ``other_retries_used`` (``None`` when nothing is charged).
    """

    action: str
    features: FeatureSet
    setting_changes: dict[str, Any] = field(default_factory=dict)
    reason: str = ""
    skipped: list[str] = field(default_factory=list)
    suggestions: list[str] = field(default_factory=list)
    counter: str | None = None

    def __post_init__(self) -> None:
        self.suggestions = [s for s in self.suggestions if s]  # "": a suggestion left out (then_resume, no run id)

    def to_json(self) -> dict[str, Any]:
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


#: an OOM is "late" (:func:`late_oom`) when at least this many steps of the run completed before it ...
LATE_OOM_MIN_STEPS = 10
#: ... and at least this share of the run's steps (``trainer.total_training_steps``, the detail's ``total`` else the
#: ``steps`` setting): an OOM in a run's first steps is the setup not fitting (the memory fit's estimate, a batch of
#: long responses); one after many healthy steps of the same shapes hints at a leak or a version regression
LATE_OOM_FRACTION = 0.25


def late_oom(step: Any, total: Any) -> bool:
    """Whether an OOM at ``step`` (verl's 1-based global step: ``step - 1`` steps completed healthy) of a run of
    ``total`` steps (None: unknown) is late: ``step - 1 >= max(LATE_OOM_MIN_STEPS, LATE_OOM_FRACTION * total)``.
    Pure."""
    try:
        done = int(step) - 1
        need = max(float(LATE_OOM_MIN_STEPS), LATE_OOM_FRACTION * float(total or 0))
    except (TypeError, ValueError):
        return False
    return done >= need


def _oom_where(detail: dict[str, Any], settings: dict[str, Any]) -> list[str]:
    """The ``reached at step s/total, phase p`` fact (none without a step or phase) that an OOM stop's reason ends
    with; the leak hint only for a late OOM (:func:`late_oom`)."""
    where = []
    total = detail.get("total") or settings.get("steps")
    if detail.get("step") is not None:
        where.append(f"step {detail['step']}" + (f"/{total}" if total else ""))
    if detail.get("phase"):
        where.append(f"phase {detail['phase']}")
    if not where:
        return []
    why = ""
    if late_oom(detail.get("step"), total):
        why = (
            f" (after {int(detail['step']) - 1} healthy steps: a late OOM hints at a leak or version regression; "
            "report the step)"
        )
    return ["reached at " + ", ".join(where) + why]


def _oom_facts(features: FeatureSet, detail: dict[str, Any], settings: dict[str, Any]) -> str:
    """What an OOM stop's reason adds after its own words: where the OOM was reached (:func:`_oom_where`) and the
    memory rungs the attempts ran with. Facts, not actions: a ``try:`` line (the suggestions) is something to do (a
    new user's trial read "try: device OOM reached at phase update")."""
    # every rung the attempts ran with: feature rungs (offload, recompute) and the ladder's setting rungs
    # (settings["memory_rungs"]: what the supervisor applied, dapo_ops/agent/supervisor/machine.py)
    applied = sorted(features.names() & set(RUNGS)) + [
        str(r.get("rung")) for r in settings.get("memory_rungs") or () if isinstance(r, dict) and r.get("rung")
    ]
    on = ", ".join(dict.fromkeys(applied)) or "none"
    facts = _oom_where(detail, settings) + [
        f"memory rungs on: {on}; the model/setup does not fit the devices as configured"
    ]
    return "".join("; " + f for f in facts)


def _oom_suggestions(features: FeatureSet, detail: dict[str, Any], settings: dict[str, Any]) -> list[str]:
    prompt = int(settings["max_prompt_length"])
    resp = int(settings["max_response_length"])
    floor = prompt + resp
    out: list[str] = []
    if features.has("dynamic_batch"):
        budget = current_budget(settings)
        if budget <= floor:  # the ladder already took it to the floor: lowering it further is no advice
            out.append(
                f"token budget already at its floor: {ACTOR_BUDGET.rsplit('.', 1)[-1]}={budget} = "
                f"max_prompt_length + max_response_length (shorter responses lower that floor)"
            )
        else:
            out.append(
                "lower the token budget: actor_rollout_ref.actor.ppo_max_token_len_per_gpu / "
                f"*log_prob_max_token_len_per_gpu from {budget} toward {floor} (never below max_prompt_length + "
                f"max_response_length = {floor})"
            )
    else:
        out.append(
            "smaller micro-batch: actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1 "
            "(and ref/rollout log_prob_micro_batch_size_per_gpu=1)"
        )
    out.append(f"shorter responses: --max-response-length {max(512, resp // 2)} (MAX_RESPONSE_LENGTH, now {resp})")
    tg = settings.get("trainer_gpus")
    if settings.get("mode") == "one-step-off":
        out.append(
            "more devices for the trainer pool"
            + (f" (TRAINER_GPUS now {tg})" if tg else "")
            + ", or a larger ulysses_sequence_parallel_size / tensor parallel size"
        )
    else:  # DAPO colocates: training shares every device of each host (TRAINER_GPUS sizes one-step-off only)
        out.append(
            "more devices: more hosts in one run (-H a,b) or hosts with more devices, or a larger "
            "ulysses_sequence_parallel_size / tensor parallel size"
        )
    return out


def _host_suggestions(cls: str, settings: dict[str, Any]) -> list[str]:
    out = [
        "reduce host memory: smaller rollout n / data.train_batch_size, fewer dataloader workers, "
        "LD_PRELOAD=/usr/local/lib/libjemalloc.so.2 against allocator growth",
        "give the container more host RAM (docker --memory / cgroup limit) or use more hosts",
    ]
    if cls == "oom-ray":
        out.append("Ray memory monitor: RAY_memory_usage_threshold (default 0.95) only if the node truly has headroom")
    out.append("do not add offload: it moves parameters and optimizer state into the host RAM that ran out")
    return out


def _kv_decide(
    features: FeatureSet,
    detail: dict[str, Any],
    other_used: dict[str, int],
    settings: dict[str, Any],
    max_oom_retries: int,
) -> Decision:
    direction = str(detail.get("kv_direction") or "lower").lower()
    cur = float(settings["gpu_memory_utilization"])
    resp = int(settings["max_response_length"])
    tp = settings.get("rollout_tp")
    stop_sugg = [
        f"lower the rollout max_model_len via --max-response-length {max(512, resp // 2)} (now {resp})",
        f"raise the rollout tensor parallel size (--rollout-tp, now {tp})"
        if tp
        else "raise the rollout tensor parallel size (--rollout-tp)",
        "free the devices: leftover processes from an earlier attempt (npu-smi info / nvidia-smi)",
    ]
    if direction == "cleanup":
        key = "oom-kv-cache:cleanup"
        if other_used.get(key, 0) >= 1:
            return Decision(
                "stop",
                features,
                {},
                "rollout memory still short after a cleanup retry",
                [],
                [f"lower gpu_memory_utilization (now {cur}) if something else holds device memory"] + stop_sugg,
            )
        return Decision(
            "retry",
            features,
            {},
            "rollout found less free memory than requested: cleaning up and retrying unchanged",
            [],
            [],
            key,
        )
    key = "oom-kv-cache"
    if other_used.get(key, 0) >= max_oom_retries:
        return Decision(
            "stop",
            features,
            {},
            f"rollout KV cache still short after {other_used.get(key, 0)} adjustments",
            [],
            stop_sugg,
        )
    if direction == "raise":
        new = round(min(KV_CEILING, cur + KV_STEP), 2)
        if new <= cur:
            return Decision(
                "stop",
                features,
                {},
                f"rollout KV cache too small at gpu_memory_utilization={cur} (ceiling {KV_CEILING})",
                [],
                stop_sugg,
            )
        return Decision(
            "retry",
            features,
            {"gpu_memory_utilization": new},
            f"rollout KV cache too small: gpu_memory_utilization {cur} -> {new}",
            [],
            [],
            key,
        )
    new = round(cur - KV_STEP, 2)
    if new < KV_FLOOR - 1e-9:
        return Decision(
            "stop",
            features,
            {},
            f"rollout memory short at gpu_memory_utilization={cur} (floor {KV_FLOOR})",
            [],
            stop_sugg,
        )
    return Decision(
        "retry",
        features,
        {"gpu_memory_utilization": new},
        f"rollout could not allocate its memory: gpu_memory_utilization {cur} -> {new}",
        [],
        [],
        key,
    )


def _short(changes: dict[str, Any], before: dict[str, Any]) -> str:
    """``ppo_max_token_len_per_gpu=10240, gpu_memory_utilization=0.5``: what a rung changed, verl key tails."""
    out = []
    for k, v in changes.items():
        if k == "token_budgets":
            old = before.get("token_budgets") or {}
            out += [f"{bk.rsplit('.', 1)[-1]}={bv}" for bk, bv in v.items() if old.get(bk) != bv]
        elif k != "memory_rungs":
            out.append(f"{k}={v}")
    return ", ".join(dict.fromkeys(out))


def oom_limit_words(max_oom: int, settings: dict[str, Any]) -> str:
    """The OOM-retry limit as the user gave it: the spec's ``max_oom_retries_from`` (``--max-oom-retries 1``,
    ``MAX_OOM_RETRIES=1``, ``[run] max_oom_retries = 1 in the config file``, ``the default max_oom_retries=2``:
    control/settings.py given_as), which the supervisor adds to the settings; a spec without it: the bare
    ``max_oom_retries=N`` (never a variable the user did not set)."""
    return str(settings.get("max_oom_retries_from") or f"max_oom_retries={max_oom}")


def _oom_decide(
    features: FeatureSet, detail: dict[str, Any], oom_used: int, max_oom: int, settings: dict[str, Any]
) -> Decision:
    phase = phase_of(detail)
    side = detail.get("side") if detail.get("side") in SIDES else None
    rung, fs, ch, skipped = apply_rung(features, phase, settings, f"oom-retry-{oom_used + 1}", side)
    if oom_used >= max_oom:
        return Decision(
            "stop",
            features,
            {},
            f"device OOM in phase {phase} after {oom_used} OOM retries ({oom_limit_words(max_oom, settings)})"
            + _oom_facts(features, detail, settings),
            skipped,
            _oom_suggestions(features, detail, settings),
        )
    if rung is None:
        rungs = phase_rungs(phase, settings.get("framework"), settings.get("mode"), side)
        off = [r for r in rungs if r in features.disabled]
        state = "; ".join(
            x
            for x in (
                ("used: " + ", ".join(r for r in rungs if r not in off)) if len(off) < len(rungs) else "",
                ("turned off by --features / USER_FEATURES: " + ", ".join(off)) if off else "",
            )
            if x
        )
        return Decision(
            "stop",
            features,
            {},
            f"device OOM in phase {phase}: no rung of its ladder left ({state or ', '.join(rungs)})"
            + _oom_facts(features, detail, settings),
            skipped,
            _oom_suggestions(features, detail, settings),
        )
    n = oom_used + 1
    shown = _short(ch, settings)
    what = f"adding {rung}" if not shown else f"{rung} ({shown})"
    return Decision(
        "retry",
        fs,
        ch,
        f"device OOM in phase {phase}: {what} (OOM retry {n}/{max_oom}), resuming from the last checkpoint",
        skipped,
        [],
        "oom",
    )


#: what to check after a retried network failure came back, by the verdict's ``detail["cause"]``
#: (core/classify/decide.py ``_network``); None: the collective / unknown case
_RETRY_STOP_SUGGESTIONS: dict[tuple[str, str | None] | None, str] = {
    ("network", "tracker"): "the tracker server is unreachable from the container: check "
    + policy.SWANLAB_HOST_WORDS
    + " and the proxy (https_proxy / no_proxy in hosts.toml [proxy]) from inside the container, or launch with "
    + policy.SWANLAB_OFFLINE_WORDS,
    ("network", "hub"): "the model hub (or the proxy to it) is unreachable from the container: check http(s)_proxy "
    "and the HF_ENDPOINT mirror, or put the model and data on the host's disk (--model /path)",
    ("network", "http"): "an HTTP endpoint the run needs keeps failing (429/5xx): wait and launch again, or point "
    "the run at a local copy",
    ("network", "ray-head"): "the Ray head{at} cannot be reached: check the head's container, its address and port "
    "(firewall, no_proxy) before launching again",
    # a hang whose dumps show no rank in a collective: no network evidence, so no network hint (a trial's plain
    # hang, the driver alone in its trainer loop, was told to check the network)
    ("hang", "unknown"): "no rank waits in a collective (no network evidence): read where each process stood in "
    "{stacks} and fix what holds the step there (the driver alone in its own loop with no worker at work is the "
    "trainer's code, not the cluster)",
    None: "check the network, the Ray head and the HCCL/NCCL environment (HCCL_CONNECT_TIMEOUT, HCCL_EXEC_TIMEOUT) "
    "before launching again",
}


def _retry_stop_suggestion(cls: str, detail: dict[str, Any]) -> str:
    """What to check when ``cls`` failed again after its one retry (:data:`_RETRY_STOP_SUGGESTIONS`), naming the
    verdict's ``address`` where the text has a place for it (``{at}``: the Ray head the GCS client could not reach)."""
    said = detail.get("log_verdict") or {}
    if cls == "hang" and said.get("cls") == "network":  # the log is the network evidence: its own text
        cls, detail = "network", dict(said.get("detail") or {}, stacks_file=detail.get("stacks_file"))
    text = _RETRY_STOP_SUGGESTIONS.get((cls, detail.get("cause")), _RETRY_STOP_SUGGESTIONS[None])
    stacks = str(detail.get("stacks_file") or "the stack dumps")  # its full path: a bare name says not where
    return text.replace("{at}", " at %s" % detail["address"] if detail.get("address") else "").replace(
        "{stacks}", stacks
    )


def _repeat_suggestions(cls: str, detail: dict[str, Any]) -> list[str]:
    """What to check before resuming a hang that repeated (``detail["repeat"]``): :func:`_retry_stop_suggestion`'s
    text, which follows the dumps; nothing for any other stop."""
    if not (cls == "hang" and detail.get("repeat")):
        return []
    text, stacks = _retry_stop_suggestion(cls, detail), detail.get("stacks_file")
    # the dumps of the hang that repeated, whatever the text (the mid-run verdict named them; a trial's final one did not)
    return [text if not stacks or str(stacks) in text else f"{text}; where each process stood: {stacks}"]


def _host_rollback(features: FeatureSet, settings: dict[str, Any]) -> tuple[FeatureSet, dict[str, Any]] | None:
    """Features and setting changes that undo what the ladder moved into host RAM, or None if nothing."""
    fs = features.remove_ladder("offload")
    if settings.get("framework") != "megatron":  # FSDP recompute = activation offload into host RAM
        fs = fs.remove_ladder("recompute")
    ch = {}
    if any(r.get("rung") == "offload-policy" for r in settings.get("memory_rungs") or []) and settings.get(
        "fsdp_offload_policy"
    ):
        ch["fsdp_offload_policy"] = False
    return (fs, ch) if (fs != features or ch) else None


def resume_settings(spec: Any) -> dict[str, Any]:
    """What :func:`resume_command` reads, from a run's spec (a :class:`~dapo_ops.core.defaults.RunSpec`, or the
    ``spec`` run.json embeds): ``run_id``, ``hosts`` (the Ray nodes of a multi-host run, head first, else the run's
    host), ``mode``, the settings' ``trainer_mode`` and ``container`` when it is not the usual ``verl``. None / no spec: ``{}``; a fact the spec lacks is left out."""
    if not spec:
        return {}
    rs = defaults.RunSpec.read(spec)
    nodes = [n.get("name") for n in (rs.ray or {}).get("nodes") or [] if isinstance(n, dict)]
    out = {
        "run_id": rs.run_id,
        "hosts": [h for h in nodes if h] or ([rs.host] if rs.host else []),
        "mode": rs.mode,
        "trainer_mode": rs.settings.get("trainer_mode"),
        # a container other than the usual name came from --container / CONTAINER or the inventory: named, so the
        # pasted command looks in the run's container (a second trial: "container 'verl' does not exist")
        "container": rs.container if rs.container and rs.container != defaults.HOST["container"] else None,
    }
    return {k: v for k, v in out.items() if v}


def resume_command(settings: dict[str, Any], change: str = "") -> str:
    """``inv launch -H <hosts> [-c <container>] --resume <run_id>`` for the run of ``settings`` (the supervisor adds
    ``run_id`` and ``hosts``; one-step-off: ``inv one-step-off``; a sync run keeps ``--mode sync``: control/launch/resume.py refuses
    another trainer mode). ``change``: flags the resume must carry (a data-ran-out stop's
    ``--override trainer.total_epochs=N``: the same resume unchanged ran out again at once)."""
    cmd = "inv one-step-off" if settings.get("mode") == "one-step-off" else "inv launch"
    hosts = [str(h) for h in settings.get("hosts") or [] if h]
    mode = " --mode sync" if settings.get("mode") != "one-step-off" and settings.get("trainer_mode") == "sync" else ""
    return "%s%s%s%s --resume %s%s" % (
        cmd,
        " -H " + ",".join(hosts) if hosts else "",
        " -c " + str(settings["container"]) if settings.get("container") else "",
        mode,
        _run_id(settings),
        " " + change if change else "",
    )


def follow_command(task: str, host: str, container: str | None = None, inventory_container: str | None = None) -> str:
    """``inv <task> -H <host> [-c <container>]``: a command that looks at the run on ``host`` (``task``: ``status``,
    ``logs -f``, ``stop``), as launch and watch print it. ``-c`` is there when the run's ``container`` is not the
    host's ``inventory_container`` (it came from ``--container`` / ``CONTAINER``): without it the pasted command
    looks in the inventory's container and shows another run there (a new user's trial: ``inv launch -H h1 -c
    verl2`` printed ``follow: inv status -H h1``, which showed an earlier run in ``verl`` as succeeded)."""
    named = container and container != inventory_container
    return "inv %s -H %s%s" % (task, host, " -c " + q(str(container)) if named else "")


def _run_id(settings: dict[str, Any]) -> str:
    """The run id of ``settings``: a command names the real run, never a ``<run_id>`` placeholder a user would paste.
    :raises ValueError: settings without one."""
    if not settings.get("run_id"):
        raise ValueError("no run id in the settings: a command naming the run cannot be given")
    return str(settings["run_id"])


def _logs_command(settings: dict[str, Any]) -> str:
    """``inv logs -H <head> [-c <container>] --run <run_id>`` of the run of ``settings`` (as :func:`resume_command`'s;
    the caller checks it has a run id)."""
    hosts = [str(h) for h in settings.get("hosts") or [] if h]
    return "inv logs%s%s --run %s" % (
        " -H " + hosts[0] if hosts else "",
        " -c " + str(settings["container"]) if settings.get("container") else "",
        _run_id(settings),
    )


def then_resume(settings: dict[str, Any], change: str = "", with_fix: bool = False) -> str:
    """The last suggestion of a stop the user can fix: the run's own :func:`resume_command`, which continues from its
    last checkpoint or, when it saved none, starts it over in the same run dir (verl's ``resume_mode=auto`` finds
    nothing to load); a run stopped before its first save was told "continues from the last checkpoint" (a second
    trial). "" (left out of the suggestions, :class:`Decision`) when the settings carry no run id: no placeholder
    is printed as a command. ``change``: the flags the resume must carry (:func:`resume_command`). ``with_fix``: the
    stop is fixed by a setting (:data:`FIX_GIVEN_WITH_RESUME`), which goes on that command line (a resume unchanged
    carries the run's own settings and overrides, and fails the same way)."""
    if not settings.get("run_id"):
        return ""
    cmd = resume_command(settings, change)
    lead = "then, with the fix given as its flag or --override, " if with_fix else "then "
    return f"{lead}`{cmd}` continues from the last checkpoint (from the start if none was saved)"


#: the stops whose fix is a setting the resume itself must be given (a flag or ``--override``: given now, it wins over
#: the run's own, control/launch/resume.py ``resumed``); the plain resume would run the same config again
FIX_GIVEN_WITH_RESUME = ("config-error", "data-error")


def on_host(settings: dict[str, Any], cmd: str, node: str | None = None) -> str:
    """``cmd`` (a shell line that runs where verl runs) as the user runs it on the run's host, through the one
    spelling of a host command (:func:`dapo_ops.core.hostcmd.in_container`): ``on h1: `docker exec verl sh -c 'df -h
    /runs'``` for a container host, the line itself on a bare host (settings ``exec_container`` "", the supervisor
    adds it from the spec's runtime and container); a spec that says neither (an older one): ``in the run's
    container: `cmd```. ``node``: a multi-host run's node it concerns (``on the host of node 10.0.0.2``), else the run's
    head. A trial was told "in the run's container, `ls -ld ...`", which runs nowhere as is."""
    c = settings.get("exec_container")
    if c is None:
        return f"in the run's container: `{cmd}`"
    hosts = [str(h) for h in settings.get("hosts") or [] if h]
    where = f"the host of node {node}" if node and len(hosts) > 1 else (hosts[0] if hosts else "")
    return "%s`%s`" % ("on %s: " % where if where else "", hostcmd.in_container(cmd, str(c)))


#: the ``crash-other`` causes whose stop :func:`_crash_stop` words itself (a path, a worker, a command to run)
CRASH_STOPS = ("disk-full", "worker-died", "write-permission")


def _run_paths(detail: dict[str, Any], settings: dict[str, Any]) -> tuple[str, str]:
    """``(checkpoint dir, runs dir)`` of the run, as the commands of a stop's suggestions name them: the spec's
    ``ckpt_dir`` (else the folder of the path the error named) and the ``runs_dir`` the supervisor adds (else the
    checkpoint dir: a command on a real path, never a placeholder; a new user's trial was told
    "`df -h the run's disk`")."""
    path = str(detail.get("path") or "")
    ckpt = str(settings.get("ckpt_dir") or posixpath.dirname(path.rstrip("/")) or path)
    return ckpt, str(settings.get("runs_dir") or ckpt)


def _disk_full_stop(features: FeatureSet, detail: dict[str, Any], settings: dict[str, Any]) -> Decision:
    """The stop of a full disk: what is full, then commands on the run's real paths (``df`` on a folder that exists:
    the failed save's own ``global_step_N`` may not)."""
    ckpt, runs = _run_paths(detail, settings)
    path = str(detail.get("path") or runs)
    return Decision(
        "stop",
        features,
        {},
        f"disk full: {path} has no space left: not retried",
        [],
        [
            f"free space on that volume: {on_host(settings, 'df -h ' + q(runs))} shows it, "
            f"{on_host(settings, 'du -sh ' + q(runs) + '/*/checkpoints')} what each run's checkpoints take; delete "
            "the global_step_* of runs you no longer need or move them to a bigger volume",
            "keep fewer checkpoints (MAX_CKPT_TO_KEEP=2: trainer.max_actor_ckpt_to_keep) or point "
            "runs_dir / ckpt_dir in hosts.toml at a bigger volume",
            then_resume(settings),
        ],
    )


def _write_denied_stop(features: FeatureSet, detail: dict[str, Any], settings: dict[str, Any]) -> Decision:
    """The stop of a refused write (permission denied / read-only file system, cause ``write-permission``): the
    path, and commands on the run's checkpoint dir (a new user's trial: a failed checkpoint save named neither)."""
    ckpt, _runs = _run_paths(detail, settings)
    path = str(detail.get("path") or ckpt)
    return Decision(
        "stop",
        features,
        {},
        hints.reason_text("crash-other", dict(detail, path=path)),  # the policy's words: docs/troubleshooting.md's
        [],
        [
            on_host(settings, f"ls -ld {q(ckpt)} && id && touch {q(ckpt)}/.w && rm {q(ckpt)}/.w")
            + " shows its owner, the user verl runs as and whether that user may write there; make it writable for "
            "that user (chown / chmod it; a read-only mount: mount it read-write) or point ckpt_dir / runs_dir in "
            "hosts.toml at a writable volume",
            then_resume(settings),
        ],
    )


def _crash_stop(features: FeatureSet, detail: dict[str, Any], settings: dict[str, Any]) -> Decision:
    """The stop of a full disk or an external kill: the ending line names it, the suggestions give the fix and the
    resume (module docstring: why neither is retried)."""
    if detail.get("cause") == "disk-full":
        return _disk_full_stop(features, detail, settings)
    if detail.get("cause") == "write-permission":
        return _write_denied_stop(features, detail, settings)
    if detail.get("cause") == "worker-died":
        return _worker_died_stop(features, detail, settings)
    resume = then_resume(settings)
    signals: dict[object, str] = {137: "SIGKILL, exit 137", 143: "SIGTERM, exit 143"}
    sig = signals.get(detail.get("exit_code"), "a signal")
    return Decision(
        "stop",
        features,
        {},
        f"killed from outside ({sig}) with no error in the log: not retried",
        [],
        [
            "who killed it: the host's OOM killer (on the host `dmesg -T | grep -i -e 'killed process' -e 'out of "
            "memory'`, the container cgroup's memory.events oom_kill, `docker inspect -f '{{.State.OOMKilled}}'`) or an "
            "operator / scheduler (kill, docker kill, a job manager)",
            "if it was the OOM killer: lower host memory (data.train_batch_size, actor_rollout_ref.rollout.n, dataloader "
            "workers) or raise the container's --memory",
            resume,
        ],
    )


#: where Ray keeps a worker's own log in the container (worker-<id>-<job>-<pid>.err, python-core-worker-<id>_<pid>.log)
RAY_LOGS = "/tmp/ray/session_latest/logs"


def _worker_died_stop(features: FeatureSet, detail: dict[str, Any], settings: dict[str, Any]) -> Decision:
    """The stop of a Ray worker that died with no error of its own (ActorDiedError, cause ``worker-died``): the
    ending line names the dead worker (its actor, pid and node, as Ray printed them) and the suggestions where to look
    for what killed it, as commands with its pid (a new user's trial read "unclassified crash: ... read the evidence
    in the log")."""
    pid, node = detail.get("worker_pid"), detail.get("node")
    logs = f"ls -l {RAY_LOGS}/*-{pid}.* {RAY_LOGS}/*_{pid}.log" if pid else f"ls -lt {RAY_LOGS}/worker-*.err | head"
    return Decision(
        "stop",
        features,
        {},
        hints.reason_text("crash-other", detail),  # the policy's words: docs/troubleshooting.md's
        [],
        [
            "what killed it, on the host%s: `dmesg -T | grep -iE 'segfault|killed process|out of memory'`"
            % (f" of {node}" if node else ""),
            f"its own log: {on_host(settings, logs, node)}"
            + (f"; the driver's side: `{_logs_command(settings)} --errors`" if settings.get("run_id") else ""),
            f"a Ray left over from an earlier run: to see it, {on_host(settings, 'ray status', node)}; to stop it, "
            f"{on_host(settings, 'ray stop --force', node)}",
            then_resume(settings),
        ],
    )


def _stop(
    features: FeatureSet, cls: str, rule: policy.Rule, detail: dict[str, Any], settings: dict[str, Any]
) -> Decision:
    """The stop of a verdict whose policy is :attr:`Kind.STOP`: the rule's reason, or the class's own line and
    suggestions where the detail gives more to say (a no-rung OOM phase, an error storm's frame, a full disk, an
    external kill)."""
    if cls == "oom-device":
        reason, sugg = STOP_FIXES[phase_of(detail)]
        where = "".join("; " + w for w in _oom_where(detail, settings))
        return Decision("stop", features, {}, reason + where, [], list(sugg))
    if cls == "hang" and detail.get("cause") == "workload" and not detail.get("repeat"):
        return Decision(
            "stop",
            features,
            {},
            f"hang in the workload: every process at work waits in {detail.get('frame')}: not retried blindly",
            [],
            [str(detail.get("fix") or "read the stack dumps"), then_resume(settings)],
        )
    if cls == "error-storm" and (detail.get("user_frame") or detail.get("frame")):
        at = detail.get("user_frame") or detail.get("frame")
        return Decision(
            "stop",
            features,
            {},
            f"error storm: {detail.get('exc') or 'an exception'} raised again and "
            f"again at {at} with no training step (verl retries it for ever): not retried unchanged",
            [],
            [
                f"fix {detail.get('user_path') or at}"
                + (f" ({detail['user_func']})" if detail.get("user_func") else "")
                + f": {detail.get('exc')} {detail.get('message') or ''}".rstrip(),
                then_resume(settings),
            ],
        )
    if cls == "crash-other" and (detail.get("cause") in CRASH_STOPS or detail.get("external")):
        return _crash_stop(features, detail, settings)
    if cls == "diverged":
        return Decision("stop", features, {}, _diverged_reason(detail), [], _diverged_suggestions(detail, settings))
    if cls == "data-ran-out":  # the ending line is the verdict's own: "ended at step 30 of 40: ... 30 epochs"
        epochs, step = detail.get("epochs"), detail.get("step")
        total = detail.get("total") or settings.get("steps")
        line = datafeed.ran_out(step, total, epochs)
        # the loop ended at steps_per_epoch x epochs (trainer_base.py:467,522): the epochs that feed ``total``
        per_epoch = step // epochs if epochs and step else 0
        more = "--override trainer.total_epochs=%s" % (-(-int(total) // per_epoch) if per_epoch and total else "N")
        return Decision(
            "stop",
            features,
            {},
            line or rule.reason,
            [],
            [
                f"add training data, raise the epochs ({more}) or ask fewer --steps "
                "(`inv preflight` shows the steps the data feeds: check data-feed)",
                # the resume carries the change: unchanged it ran out again at once (a new user's trial)
                then_resume(settings, more),
            ],
        )
    # every stop the user can act on ends with the run's resume (a hang that repeated, a storm with no frame: inv
    # status pointed at a --resume command these had none of, a review)
    return Decision(
        "stop",
        features,
        {},
        hints.reason_text(cls, detail) or f"{cls}: stopped",  # the rule's reason with the detail's fields
        [],
        _repeat_suggestions(cls, detail) + [then_resume(settings, with_fix=cls in FIX_GIVEN_WITH_RESUME)],
    )


def _retried_from_start(detail: dict[str, Any]) -> bool:
    """True when the attempt that went bad again had started from scratch: the supervisor's ``retried_from`` (that
    attempt's ``resumed_from``, ``agent/supervisor/machine.py``) is present and None, i.e. no complete checkpoint
    before the bad step was left to retry from. Absent (``inv classify`` of a log): False."""
    return "retried_from" in detail and detail["retried_from"] is None


def _diverged_reason(detail: dict[str, Any]) -> str:
    """A ``diverged`` stop's headline (the run's ending line): the metric, its bad value and the bad step
    (:func:`dapo_ops.core.health.words`: ``grad_norm nan at step 4 (was 0.35, 0.36)``), as README.md promises; a new
    user's trial read "the same training metric went bad again at the same step ... stopped at step 3/12". A retry
    that started from scratch says so (:func:`_retried_from_start`; a second trial with ``MAX_CKPT_TO_KEEP=1`` was
    told "after one retry from a checkpoint before it" while verl's rotation had deleted every one of them). "That
    retry found": a checkpoint the retry saved before the bad step may be there now (the resume then starts on it)."""
    if _retried_from_start(detail):
        at = detail.get("bad_step")
        return (
            "diverged: %s again after one retry from the start (that retry found no complete checkpoint before step "
            "%s): stopped" % (health.words(detail), at if at is not None else "?")
        )
    return "diverged: %s again after one retry from a checkpoint before it: stopped" % health.words(detail)


def _diverged_suggestions(detail: dict[str, Any], settings: dict[str, Any]) -> list[str]:
    """What to change after a ``diverged`` stop: the likely causes (:data:`dapo_ops.core.health.CAUSES`), then the
    resume that starts from the last healthy checkpoint (before ``detail["bad_step"]``), or from the start when none
    was saved before it (the supervisor moved the tracker aside: ``agent/supervisor/checkpoints.py``
    roll_back; a new user's trial with save_freq 10 and a NaN at step 3 was told it continues "from the last
    checkpoint before step 3 (the last healthy one)", which did not exist)."""
    at = detail.get("bad_step")
    resume = (  # no run id: no resume command (never a placeholder)
        [
            f"then `{resume_command(settings)}` continues from the last checkpoint "
            f"before step {at if at is not None else '?'} (the last healthy one; from the start if none was saved "
            "before it)"
        ]
        if settings.get("run_id")
        else []
    )
    keep = settings.get("max_actor_ckpt_to_keep")
    rotated = (  # verl's rotation deletes the previous save when it saves step N, before step N's metrics line
        [
            f"keep 2 or more checkpoints (MAX_CKPT_TO_KEEP, now {keep}: trainer.max_actor_ckpt_to_keep): with 1, "
            "verl deletes the last healthy save when it saves the bad step, so no retry or resume can go back before it"
        ]
        if _retried_from_start(detail) and keep == 1
        else []
    )
    return [f"check {c}" for c in health.CAUSES] + rotated + resume


def decide(
    features: FeatureSet,
    verdict_cls: str,
    verdict_detail: dict[str, Any],
    oom_retries_used: int,
    max_oom_retries: int,
    other_retries_used: dict[str, int],
    settings: dict[str, Any],
) -> Decision:
    """Decide the next step after an attempt ended with a verdict of class ``verdict_cls``.

    The failure policy (:func:`dapo_ops.core.policy.rule` of the class and detail) chooses what kind of step, and
    the kind takes its step (:meth:`dapo_ops.core.policy.Kind.dispatch` on :class:`_Steps`); this module works out
    its changes. ``verdict_detail``: the verdict's ``detail`` (``phase``, ``side``,
    ``kv_direction``, ``step``, ``total``, ``fatal``, ``cause``, ``external``, ...). ``oom_retries_used``: device-OOM
    retries so far (the ``MAX_OOM_RETRIES`` budget); ``other_retries_used``: other retries so far by counter key
    (see :attr:`Decision.counter`). ``settings``: the run spec's ``settings`` with earlier ``setting_changes``
    applied (``max_prompt_length``, ``max_response_length``, ``gpu_memory_utilization``, ``token_budgets``,
    ``memory_rungs``, ``rollout_tp``, ``trainer_gpus``, ``steps``) plus ``framework`` and ``mode`` of the spec;
    a key it lacks is the defaults table's (:func:`dapo_ops.core.defaults.complete_settings`). Returns a :class:`Decision`; never raises for an unknown class (it stops).
    """
    detail = dict(verdict_detail or {})
    settings = defaults.complete_settings(settings)
    rule = policy.rule(verdict_cls, detail)
    if rule is None:
        return Decision("stop", features, {}, f"unknown failure class {verdict_cls!r}: stopped", [], [])
    steps = _Steps(
        features, verdict_cls, rule, detail, oom_retries_used, max_oom_retries, dict(other_retries_used or {}), settings
    )
    return rule.kind.dispatch(steps)


@dataclass
class _Steps:
    """The step of each :class:`~dapo_ops.core.policy.Kind` for one verdict (a :class:`dapo_ops.core.policy.Steps`:
    ``Kind.dispatch`` picks the method); the arguments are :func:`decide`'s (``other``: ``other_retries_used``,
    ``settings`` completed)."""

    features: FeatureSet
    cls: str
    rule: policy.Rule
    detail: dict[str, Any]
    oom_retries_used: int
    max_oom_retries: int
    other: dict[str, int]
    settings: dict[str, Any]

    def done(self) -> Decision:
        return Decision("done", self.features, {}, self.rule.reason)

    def keep_running(self) -> Decision:
        return Decision("keep-running", self.features, {}, self.rule.reason)

    def stop(self) -> Decision:
        return _stop(self.features, self.cls, self.rule, self.detail, self.settings)

    def escalate_memory(self) -> Decision:
        return _oom_decide(self.features, self.detail, self.oom_retries_used, self.max_oom_retries, self.settings)

    def adjust_rollout_memory(self) -> Decision:
        dec = _kv_decide(self.features, self.detail, self.other, self.settings, self.max_oom_retries)
        dec.setting_changes = keep_token_budgets(self.settings, dec.setting_changes)
        return dec

    def rollback_offload(self) -> Decision:
        features, cls, other, settings = self.features, self.cls, self.other, self.settings
        what = "host (kernel/cgroup) OOM" if cls == "oom-host" else "Ray host-memory monitor killed a worker"
        key = "rollback-offload"
        back = _host_rollback(features, settings)
        if back is not None and other.get(key, 0) < 1:
            return Decision(
                "retry",
                back[0],
                back[1],
                f"{what}: rolling back what the ladder moved to host RAM (offload, activation offload, "
                "offload_policy) and retrying once",
                [],
                [],
                key,
            )
        reason = f"{what}: stopped (offload is never added for host memory)"
        if other.get(key, 0) >= 1:
            reason = f"{what} again after rolling back offload: stopped"
        return Decision("stop", features, {}, reason, [], _host_suggestions(cls, settings))

    def retry_once(self) -> Decision:
        features, cls, detail, other, settings = self.features, self.cls, self.detail, self.other, self.settings
        if cls == "diverged" and other.get(cls, 0) >= 1:  # bad again, at another step or metric: one retry per run
            return Decision(
                "stop",
                features,
                {},
                _diverged_reason(detail),
                [],
                _diverged_suggestions(detail, settings),
            )
        if other.get(cls, 0) >= 1:
            sugg = [_retry_stop_suggestion(cls, detail), then_resume(settings)]  # the run resumes once fixed
            return Decision("stop", features, {}, f"{cls} again after one retry: stopped", [], sugg)
        return Decision("retry", features, {}, self.rule.reason, [], [], cls)


def plan_ladder(features: FeatureSet, max_oom_retries: int, settings: dict[str, Any] | None = None) -> list[str]:
    """Human lines describing what the supervisor would do on failures, for the dry-run plan.

    One line per OOM phase: the rungs it would apply (simulated with :func:`decide` until a stop,
    so skips, floors and ``MAX_OOM_RETRIES`` show), then one line each for KV-cache, host/Ray OOM
    and network failures. ``settings``: as for :func:`decide` (framework, mode, budgets).
    """
    settings = defaults.complete_settings(settings)
    lines = [why for why in (rung_status(features, r) for r in RUNGS) if why]
    sided = settings.get("mode") == "one-step-off"  # a one-step-off weight sync: one ladder per side
    for phase, side in [(p, sd) for p in PHASES for sd in (SIDES if sided and p == "weight-sync" else (None,))]:
        fs, s, used, steps = features, dict(settings), 0, []
        while True:
            d = decide(fs, "oom-device", {"phase": phase, "side": side}, used, max_oom_retries, {}, s)
            if d.action != "retry":
                break
            used += 1
            added = sorted(d.features.names() - fs.names())
            rung = d.setting_changes["memory_rungs"][-1]["rung"]
            steps.append(
                f"{used}: " + (f"+ {', '.join(added)}" if added else f"{rung} ({_short(d.setting_changes, s)})")
            )
            fs = d.features
            s.update(d.setting_changes)
        tail = "stop with the fix" if phase in NO_RUNG_PHASES else "stop with suggestions"
        where = f"{phase} ({side} side)" if side else phase
        lines.append(f"device OOM in {where}: " + " -> ".join(steps + [tail]))
    lines.append(
        "rollout KV-cache shortage: change actor_rollout_ref.rollout.gpu_memory_utilization "
        f"(lower by {KV_STEP} to >= {KV_FLOOR}, or raise to <= {KV_CEILING}, per the message), never offload"
    )
    lines.append(
        "host / Ray OOM: never add offload; roll back ladder-added offload (and activation offload, "
        "offload_policy) once, else stop"
    )
    lines.append("network / HCCL timeout / hang: one retry after cleanup; config, data, auth errors: stop")
    return lines
