"""Learned starts: what fitted, remembered per configuration, and where the next matching launch starts (stdlib only).

When an attempt needed a device-OOM rung (:mod:`dapo_ops.core.memladder`, applied by the supervisor) and the attempt
running on it got past the phase that ran out, the supervisor writes one small JSON *memo* into
``<runs_dir>/.learned/<fingerprint>.json`` (:func:`memo_path`; atomic, :func:`dapo_ops.agent.runfiles.write_json_atomic`).
The next launch of a matching configuration reads it in its probe round trip and starts on those rungs (feature and
``memory_rungs`` source ``learned``); the plan says so (:func:`start_line`).

*When a memo is written* (the supervisor, ``agent/supervisor/learn.py``): as soon as an attempt that runs on a rung the
ladder added (source ``oom-retry-<N>``) logs a training step beyond the step the run was in when it ran out
(:func:`passed`): every phase of that step (rollout, log-prob, update, the next weight sync) ran on the rung. Not only
at success: RL runs are long and are often stopped; the rung that got past the OOM is measured either way. A later
rung that gets past a later OOM rewrites the memo (a memo only grows stronger within one run).

*What is the same configuration* (:func:`key`): the host class (accelerator kind, device name, device memory in
whole GiB of the smallest device), the model's shape (:func:`dapo_ops.core.memfit.model_facts` of ``config.json``;
a config without ``num_hidden_layers`` adds the model path, as nothing else tells two such models apart), and
every setting that moves a phase's peak: framework, mode, verl profile, V1 trainer mode, nodes, devices per node
(one-step-off: both pools), trainer TP/PP, rollout TP, prompt and response length, train / mini / micro batch sizes,
rollout n, rollout ``gpu_memory_utilization`` as planned, eager rollout, the features asked for (on by
``explicit`` / ``default``, and the ``-name`` ones except ``-offload`` / ``-recompute``, which only bound the ladder:
the first attempt's memory is the same, so they are a conflict, not another configuration), the user's
``--override`` list. Not: steps, save frequency,
data files, run names, the model's path when its shape is known. Matching is equality of the whole key
(:func:`find`); its sha256 prefix is only the file name.

*Precedence* (:mod:`dapo_ops.core.features`): explicit > defaults > learned / estimate > OOM-appended. A memo is
never trusted over a user's explicit setting (:func:`conflicts`): a memo that would turn on a feature the user turned
off (``-offload``, ``--no-offload`` / ``ENABLE_OFFLOAD=false`` / the config file's ``offload = false``, an
``--override`` of one of the feature's verl keys) or change a setting the user set (``GPU_MEMORY_UTILIZATION``, ``MICRO_BATCH_SIZE``, an
``--override`` of the key a rung changes) is not used at all (a part of a memo was never measured alone), and the
plan says which setting and why. *Learned and estimate*: a used memo is measured on this host class, the estimate is
a model of it (max error ~10 %); the memo wins: the plan starts on the learned rungs and the estimate only reports
(as ``MEMORY_FIT=warn`` does), also when it says "does not fit" (the memo says it ran). Without a usable memo the
estimate's start rung applies as before. ``inv launch --resume`` does not look memos up: it continues the earlier
run's own features.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from dapo_ops.core.hydra_override import key_of
from dapo_ops.core.memladder import SETTING_KEYS

if TYPE_CHECKING:
    from dapo_ops.core.features import FeatureSet

VERSION = 1
#: the folder under the runs dir
DIRNAME = ".learned"
#: what the probe reads of that folder: at most this many memos, each at most this many bytes
MAX_MEMOS = 256
MAX_BYTES = 65536
#: spec settings that move a phase's peak (docs/design.md "Run spec"); ``trainer_gpus`` / ``rollout_gpus`` /
#: ``rollout_nnodes`` count for one-step-off only (DAPO trains and rolls out on every device)
RUN_SETTINGS = (
    "nnodes",
    "n_gpus_per_node",
    "trainer_tp",
    "trainer_pp",
    "rollout_tp",
    "max_prompt_length",
    "max_response_length",
    "train_batch_size",
    "ppo_mini_batch_size",
    "rollout_n",
    "micro_batch_size",
    "gpu_memory_utilization",
    "trainer_mode",
    "rollout_eager",
    "token_budgets",
    "ppo_micro_batch_size_per_gpu",
    "log_prob_micro_batch_size_per_gpu",
    "fsdp_offload_policy",
    "weight_sync_bucket_mb",
)
POOL_SETTINGS = ("trainer_gpus", "rollout_gpus", "rollout_nnodes")
#: ``-name`` of these only bounds the ladder (the first attempt's memory is the same): not in the key, a conflict
MEMORY_FEATURES = ("offload", "recompute")
#: feature sources a user (or the defaults) chose: what the key holds; the rest are rungs
ASKED_SOURCES = ("explicit", "default")
#: a memo's setting change -> the run setting whose explicit value it would override (control/settings.py names)
SETTING_OF_CHANGE = {
    "gpu_memory_utilization": "gpu_memory_utilization",
    "rollout_eager": "rollout_eager",
    "ppo_micro_batch_size_per_gpu": "micro_batch_size",
    "log_prob_micro_batch_size_per_gpu": "micro_batch_size",
}


def host_class(accelerator: str, device_name: str, device_mib: float) -> dict[str, Any]:
    """The host class of a key: accelerator kind (``npu`` | ``gpu``), device name (``NVIDIA H200``) and the
    smallest device's total memory in whole GiB (``device_mib``: MiB, as nvidia-smi / npu-smi report it)."""
    return {
        "accelerator": str(accelerator or ""),
        "device_name": str(device_name or "").strip(),
        "device_gib": int(round(float(device_mib) / 1024.0)),
    }


def model_identity(model_config: dict[str, Any], model_path: str = "") -> dict[str, Any]:
    """The model part of a key: the shape keys of ``config.json`` (:func:`dapo_ops.core.memfit.model_facts`), plus
    ``path`` when the config has no ``num_hidden_layers`` (its shape does not tell models apart)."""
    from dapo_ops.core.memfit import model_facts

    facts = {k: v for k, v in model_facts(model_config).items() if k != "torch_dtype"}
    facts["dtype"] = (model_config or {}).get("torch_dtype") or (model_config or {}).get("dtype")
    if "num_hidden_layers" not in facts:
        facts["path"] = str(model_path or "")
    return facts


def key(
    spec: dict[str, Any],
    features: list[dict[str, Any]],
    disabled: Iterable[str],
    model: dict[str, Any],
    host: dict[str, Any],
) -> dict[str, Any]:
    """The configuration key of a run: ``spec`` (docs/design.md "Run spec"; its ``settings``), the first attempt's
    features as asked (``[{"name", "source"}]``: only ``explicit`` / ``default`` ones count), the ``-name``
    features, :func:`model_identity` and :func:`host_class`. JSON-able; equal keys = the same configuration."""
    s = spec.get("settings") or {}
    run = {k: s.get(k) for k in RUN_SETTINGS}
    if spec.get("mode") == "one-step-off":
        run.update({k: s.get(k) for k in POOL_SETTINGS})
    run.update(
        framework=spec.get("framework"),
        mode=spec.get("mode"),
        profile=spec.get("profile"),
        features=sorted(f["name"] for f in features or [] if f.get("source") in ASKED_SOURCES),
        disabled=sorted(d for d in disabled or () if d not in MEMORY_FEATURES),
        overrides=sorted(str(x) for x in s.get("extra_overrides") or []),
    )
    return {"version": VERSION, "host": dict(host), "model": dict(model), "run": run}


def fingerprint(k: dict[str, Any]) -> str:
    """sha256 (first 16 hex digits) of a :func:`key`: the memo's file name."""
    return hashlib.sha256(json.dumps(k, sort_keys=True, default=str).encode()).hexdigest()[:16]


def memo_path(runs_dir: str, fp: str) -> str:
    """``<runs_dir>/.learned/<fingerprint>.json``."""
    return os.path.join(str(runs_dir), DIRNAME, fp + ".json")


def timing_path(runs_dir: str, fp: str) -> str:
    """``<runs_dir>/.learned/timing/<fingerprint>.json``: the step timings a run of this configuration showed (the
    supervisor's stall timer, ``dapo_ops/agent/supervisor/stall.py`` ``StepClock`` / ``merge_learned``); a folder
    of its own, so the probe's memo read (one file per memo) never takes it for a memo."""
    return os.path.join(str(runs_dir), DIRNAME, "timing", fp + ".json")


def find(memos: list[Any], k: dict[str, Any]) -> dict[str, Any] | None:
    """The memo whose key equals ``k`` (the newest one by ``recorded_at`` if several), else None."""
    hits = [m for m in memos or [] if isinstance(m, dict) and m.get("key") == k and m.get("rung")]
    return max(hits, key=lambda m: m.get("recorded_at") or 0) if hits else None


def conflicts(
    memo: dict[str, Any],
    disabled: Iterable[str],
    given: dict[str, str],
    overrides: list[Any],
    settings: Mapping[str, Any] | None = None,
    enabled: Iterable[str] = (),
) -> list[str]:
    """Why a memo cannot be used: one phrase per explicit user choice it would override, whatever form the user
        gave it in. ``disabled``: the ``-name`` features; ``given``: run setting name -> where the user set it
        (``GPU_MEMORY_UTILIZATION=0.6``, ``--micro-batch-size=4``, ``--no-offload``) for the settings the user set (a
        setting named like a feature, ``offload``, is there only when the user turned it off: ``--no-offload`` /
        ``ENABLE_OFFLOAD=false`` / ``[run] offload = false``); ``overrides``: the user's ``--override`` items, matched
        against the verl keys a change sets (the ladder's one table, :data:`dapo_ops.core.memladder.SETTING_KEYS`) and,
        with ``settings`` (the run's spec settings with ``framework`` / ``profile`` / ``accelerator``), the keys a
        rung's feature sets (:func:`dapo_ops.core.memladder.feature_keys`, the one place they are worked out), whatever
        their op; ``enabled``: the features the plan has on before the memo (what a feature's keys are worked out
    against) (:func:`dapo_ops.core.hydra_override.key_of`: a ``~key`` deletion counts, the user chose what verl runs
        with there). Empty: usable."""
    rung = memo.get("rung") or {}
    out = []
    keys = {key_of(o) for o in overrides or []}
    off = set(disabled or ())
    for f in rung.get("features") or []:
        out += _feature_conflicts(f["name"], off, given or {}, keys, frozenset(enabled), settings)
    for name, val in (rung.get("setting_changes") or {}).items():
        if name == "memory_rungs":
            continue
        setting = SETTING_OF_CHANGE.get(name)
        if setting and setting in (given or {}):
            out.append(f"it sets {name}={val!r}, but you set {given[setting]}")
        hit = [x for x in SETTING_KEYS.get(name, ()) if x in keys]
        if name == "token_budgets":
            hit = [x for x in (val or {}) if x in keys]
        if hit:
            out.append(f"it changes {hit[0]}, which you set with --override")
    return out


def _feature_conflicts(
    name: str,
    off: set[str],
    given: Mapping[str, str],
    keys: set[Any],
    enabled: frozenset[str],
    settings: Mapping[str, Any] | None,
) -> list[str]:
    """:func:`conflicts` of one feature a memo's rung adds: turned off with ``-name``, turned off by its own setting
    (``--no-offload``), or one of its verl keys set with ``--override``."""
    if name in off:
        return [f"it adds {name}, which you turned off (-{name})"]
    if name in given:
        return [f"it adds {name}, which you turned off ({given[name]})"]
    if settings is None or not keys:
        return []
    from dapo_ops.core.memladder import feature_keys

    hit = sorted(k for k in feature_keys(enabled, name, frozenset(off), dict(settings)) if k in keys)
    return [f"it adds {name}, which sets {hit[0]}, which you set with --override"] if hit else []


def rung_names(memo: dict[str, Any]) -> list[str]:
    """``["rollout-util(weight-sync)", "offload(weight-sync)"]``: the rungs of a memo, in the order applied."""
    rungs = ((memo.get("rung") or {}).get("setting_changes") or {}).get("memory_rungs") or []
    return [r["rung"] if r.get("phase") in (None, "", "unknown") else f"{r['rung']}({r['phase']})" for r in rungs]


def apply(memo: dict[str, Any], fs: FeatureSet) -> tuple[FeatureSet, dict[str, Any]]:
    """The first attempt's ``(features, setting_changes)`` on a memo's rungs: its features added with source
    ``learned`` (:meth:`dapo_ops.core.features.FeatureSet.add`: never over a ``-name``) and its setting changes, the
    ``memory_rungs`` records with source ``learned`` and the run they were measured in (``learned_from``)."""
    rung = memo.get("rung") or {}
    for f in rung.get("features") or []:
        fs = fs.add(f["name"], "learned")
    ch = {k: v for k, v in (rung.get("setting_changes") or {}).items() if k != "memory_rungs"}
    ch["memory_rungs"] = [
        dict(r, source="learned", learned_from=memo.get("run_id"))
        for r in (rung.get("setting_changes") or {}).get("memory_rungs") or []
    ]
    return fs, ch


def when(memo: dict[str, Any]) -> str:
    """The memo's date, ``YYYY-MM-DD`` (UTC)."""
    return time.strftime("%Y-%m-%d", time.gmtime(float(memo.get("recorded_at") or 0)))


def start_line(memo: dict[str, Any]) -> str:
    """``starting on the learned rung rollout-util(weight-sync) (run <id> ran out in phase weight-sync without it on
    <date>)`` for the plan and the launch output."""
    names = rung_names(memo) or [f["name"] for f in (memo.get("rung") or {}).get("features") or []]
    ran = memo.get("ran_out") or {}
    known = [p for p in dict.fromkeys(ran.get("phases") or [ran.get("phase")]) if p and p != "unknown"]
    where = f"ran out in phase {', '.join(known)}" if known else "ran out of device memory (its log named no phase)"
    what = "rung" if len(names) == 1 else "rungs"
    return (
        f"starting on the learned {what} {', '.join(names)} (run {memo.get('run_id')} {where} "
        f"without {'it' if len(names) == 1 else 'them'} on {when(memo)})"
    )


def not_used_line(memo: dict[str, Any], why: list[str]) -> str:
    """``learned start not used: run <id> ...; <why>: a memo never overrides an explicit setting; without it run <id>
    ran out in phase <p>: this run may too (...)``: what was skipped, why, and what the memo says may happen."""
    ran = memo.get("ran_out") or {}
    known = [p for p in dict.fromkeys(ran.get("phases") or [ran.get("phase")]) if p and p != "unknown"]
    where = f"in phase {', '.join(known)}" if known else "(its log named no phase)"
    return (
        f"learned start not used: run {memo.get('run_id')} ran on {', '.join(rung_names(memo)) or 'a rung'} "
        f"({when(memo)}), but {'; '.join(why)}: a memo never overrides an explicit setting; without it run "
        f"{memo.get('run_id')} ran out of device memory {where} at step {ran.get('step') or '?'}, so this run may "
        f"too (the device-OOM ladder then retries from the last checkpoint on a rung your settings allow)"
    )


def passed(rec: dict[str, Any]) -> dict[str, Any] | None:
    """When the run in ``rec`` (run.json) has got past the phase that ran out on a ladder rung: the memo's
    ``ran_out`` facts (``phase``, ``phases``, ``attempt``, ``step``: the step it was in), else None.

    Due when the current attempt runs on a rung with source ``oom-retry-<N>`` and logged a training step beyond the
    step in which the last device-OOM attempt before it ran out (its ``step_reached`` + 1)."""
    atts = rec.get("attempts") or []
    if len(atts) < 2:
        return None
    cur = atts[-1]
    rungs = (rec.get("setting_changes") or {}).get("memory_rungs") or []
    from_ladder = [r for r in rungs if str(r.get("source", "")).startswith("oom-retry-")]
    feats = [f for f in cur.get("features") or [] if str(f.get("source", "")).startswith("oom-retry-")]
    if not from_ladder and not feats:
        return None
    ooms = [a for a in atts[:-1] if ((a.get("verdict") or {}).get("cls") == "oom-device")]
    if not ooms:
        return None
    last = ooms[-1]
    ran_in = int(last.get("step_reached") or 0) + 1
    if int(rec.get("step") or 0) < ran_in or int(cur.get("step_reached") or 0) < ran_in:
        return None
    phases = [((a.get("verdict") or {}).get("detail") or {}).get("phase") or "unknown" for a in ooms]
    return {"phase": phases[-1], "phases": list(dict.fromkeys(phases)), "attempt": last.get("n"), "step": ran_in}


def memo(
    spec: Mapping[str, Any], rec: dict[str, Any], ran_out: dict[str, Any], now: float | None = None
) -> dict[str, Any]:
    """The memo of a run whose attempt got past the phase that ran out: the spec's ``learn`` (``key``,
    ``fingerprint``), the rung (features added by ``oom-retry-*`` / ``estimate`` / ``learned`` and the run's
    cumulative ``setting_changes`` with their ``memory_rungs``), which run, host and when."""
    learn = spec.get("learn") or {}
    feats = [f for f in rec.get("features") or [] if f.get("source") not in ASKED_SOURCES]
    ch = dict(rec.get("setting_changes") or {})
    return {
        "version": VERSION,
        "fingerprint": learn.get("fingerprint"),
        "key": learn.get("key"),
        "rung": {"features": feats, "setting_changes": ch},
        "ran_out": dict(ran_out),
        "run_id": spec.get("run_id"),
        "host": spec.get("host"),
        "recorded_at": round(float(time.time() if now is None else now), 3),
        "passed_step": rec.get("step"),
    }
