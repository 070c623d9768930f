"""``--resume``: a new run that continues an earlier one from its checkpoints (operator side; returns values or
raises :class:`~dapo_ops.control.launch.LaunchRefused`, never prints).

:func:`resumed_spec` reads the earlier run's spec.json from its container, :func:`resumed_settings` takes the
settings not given now from it (precedence: now > the resumed run > defaults), :func:`apply_resume` checks the
layout (:data:`RESUME_FIXED`), points the new run at the earlier run's checkpoint dir and experiment, keeps its
explicit and ladder-added features and the setting rungs its ladder reached (:func:`_ladder_changes`), keeps the FSDP strategy its checkpoint was written with (spec ``strategy``:
fsdp and fsdp2 checkpoints do not load into each other) and names the checkpoint it continues from. verl resumes
by itself from
``<ckpt_dir>/latest_checkpointed_iteration.txt`` (``trainer.resume_mode=auto``, verl/trainer/ppo/ray_trainer.py
``_load_checkpoint``).
"""

from __future__ import annotations

import json

from dapo_ops.control.launch_errors import LaunchRefused
from dapo_ops.core import defaults
from dapo_ops.core import runstate


def _cat_json(target, path: str) -> dict | None:
    res = target.run(["cat", path], workdir="", timeout=30, check=False)
    try:
        data = json.loads(res.stdout) if res.exited == 0 and res.stdout.strip() else None
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


#: settings that fix a checkpoint's layout (world size, parallelism): a resumed run must keep them
RESUME_FIXED = ("nnodes", "n_gpus_per_node", "trainer_gpus", "rollout_gpus", "rollout_tp")


def resumed_spec(target, run_id: str) -> dict:
    """The spec.json of run ``run_id`` in ``target``'s container (what ``--resume`` continues).

    Completed from the one defaults table (:func:`dapo_ops.core.defaults.complete_spec`): a run started by an older
    dapo-ops lacks the keys added since.

    :raises LaunchRefused: kind ``resume`` when there is no such run (one line: how to list runs).
    """
    host = target.host
    old = _cat_json(target, f"{runstate.run_dir_for(host.runs_path, run_id)}/spec.json")
    if old is None:
        raise LaunchRefused(
            "resume",
            f"no run {run_id} on {host.name} ({host.runs_path}): list runs with "
            f"`inv status --all -H {host.name}` (a multi-host run lives on its head, the first host)",
        )
    return defaults.complete_spec(old)


#: setting name -> its key in a spec's ``settings`` where they differ (planning resolves ``model`` to ``model_path``)
_SPEC_KEY = {"model": "model_path"}


def resumed_settings(settings, old_spec: dict):
    """``settings`` for a run that continues ``old_spec``'s: every setting still at its default (not given by flag,
    env var or config file now) takes the earlier run's value, source ``resume`` — its model, data, lengths,
    framework, batch sizes, features asked for, pool sizes; what is given now wins (precedence: now > the resumed
    run > defaults); a None of :data:`dapo_ops.core.defaults.NONE_IN_SPEC` is the setting's 0 (``max_actor_ckpt_to_keep``:
    keep every save). The layout keys of :data:`RESUME_FIXED` that the plan derives from the hosts are not taken:
    :func:`apply_resume` compares them. Returns a new :class:`~dapo_ops.control.settings.Settings`."""
    from dapo_ops.control.settings import Settings

    old_s = dict(old_spec.get("settings") or {})
    old_s.setdefault("framework", old_spec.get("framework"))  # the spec keeps it at its top level
    values, sources = dict(settings.values), dict(settings.sources)
    for name in values:
        key = _SPEC_KEY.get(name, name)
        if sources.get(name) != "default" or key not in old_s or key in ("nnodes", "n_gpus_per_node"):
            continue
        if old_s[key] is not None:
            values[name], sources[name] = old_s[key], "resume"
        elif name in defaults.NONE_IN_SPEC:
            values[name], sources[name] = 0, "resume"
    return Settings(values=values, sources=sources)


def apply_resume(target, plan, run_id: str, old: dict | None = None) -> str:
    """Make ``plan`` continue run ``run_id`` of ``target``'s container from its checkpoints (``--resume``).

    ``plan`` is made from :func:`resumed_settings` (the settings not given now, its total ``steps`` among them,
    are the earlier run's); ``old`` is that run's spec when the caller has read it (:func:`resumed_spec`), else it
    is read here. The new run (own run id and run dir, so nothing of the earlier run is overwritten) takes the
    earlier run's ``settings.ckpt_dir`` (verl resumes from its ``latest_checkpointed_iteration.txt``:
    ``trainer.resume_mode=auto``, verl/trainer/ppo/ray_trainer.py ``_load_checkpoint``), ``experiment`` and
    ``project``, continues its SwanLab run (spec ``resume_of``), keeps the memory features its ladder added and its
    explicit features (unless turned off now), starts on the setting rungs its ladder reached (spec
    ``setting_changes``, :func:`_ladder_changes`) and, for FSDP, the actor strategy of the checkpoint it loads (spec
    ``strategy``, :func:`_checkpoint_strategy`). An earlier run still recorded as active (its supervisor
    died; :func:`refuse_if_busy` ran) is marked stopped (the status probe's ``stop`` op). Raises
    :class:`LaunchRefused` (kind ``resume``) for a missing run, another mode, framework or V1 trainer mode, other
    devices / parallel sizes than the checkpoint was written with (:data:`RESUME_FIXED`), or a total ``steps`` not
    beyond the checkpoint's step.

    :returns: one line for the launch output: which checkpoint it resumes from.
    """
    from dapo_ops.core import overrides

    host = target.host
    old_dir = runstate.run_dir_for(host.runs_path, run_id)
    old = old if old is not None else resumed_spec(target, run_id)
    spec, new_s, old_s = plan.spec, plan.spec["settings"], old.get("settings") or {}
    if (old.get("mode"), old.get("framework")) != (spec["mode"], spec["framework"]):
        cmd = "launch" if old.get("mode") == "dapo" else "one-step-off"
        raise LaunchRefused(
            "resume",
            f"run {run_id} is a {old.get('mode')} run with framework {old.get('framework')}: "
            f"resume it with `inv {cmd} --framework {old.get('framework')} --resume {run_id}`",
        )
    if old_s.get("trainer_mode") and old_s.get("trainer_mode") != new_s.get("trainer_mode"):
        raise LaunchRefused(
            "resume",
            f"run {run_id} ran trainer mode {old_s['trainer_mode']} (its checkpoints hold "
            f"that trainer's state): resume it with `--mode {old_s['trainer_mode']}`, or start a new run",
        )
    changed = [
        f"{k} {old_s.get(k)} -> {new_s.get(k)}"
        for k in RESUME_FIXED
        if k in old_s
        and old_s.get(k) != new_s.get(k)
        and (spec["mode"] == "one-step-off" or k not in ("trainer_gpus", "rollout_gpus"))
    ]
    if changed:
        raise LaunchRefused(
            "resume",
            f"run {run_id}'s checkpoints need the same layout: "
            + ", ".join(changed)
            + " (launch on the same host(s) with the same settings, or start a new run)",
        )
    for k in ("ckpt_dir", "experiment", "project"):
        if old_s.get(k):
            new_s[k] = old_s[k]
    # refused before anything is written: a refused resume leaves the earlier run's record as it was
    it = target.run(
        ["cat", f"{new_s['ckpt_dir']}/latest_checkpointed_iteration.txt"], workdir="", timeout=30, check=False
    )
    step = (it.stdout or "").strip() if it.exited == 0 else ""
    if step.isdigit() and int(new_s["steps"]) <= int(step):
        raise LaunchRefused(
            "resume",
            f"run {run_id}'s checkpoint is at step {step}, so --steps {new_s['steps']} "
            f"would train nothing: --steps is the total, ask for more than {step}",
        )
    pinned = _checkpoint_strategy(target, new_s["ckpt_dir"], step) if spec["framework"] == "fsdp" else None
    rec = _cat_json(target, f"{old_dir}/run.json") or {}
    if rec.get("status") in ("starting", "running", "retrying"):  # its supervisor died (refuse_if_busy ran)
        from dapo_ops.control.status import probe

        # closes it as failed (its supervisor died), never as stopped by `inv stop`: nobody ran stop
        probe(
            target,
            {
                "op": "stop",
                "run_id": run_id,
                "grace_s": 5.0,
                "kill_grace_s": 5.0,
                "by": "`inv launch --resume %s`" % run_id,
            },
        )
    fs = plan.features
    for f in rec.get("features") or old.get("features") or []:
        src = str(f.get("source", ""))
        # what the earlier run asked for explicitly stays asked for (README: an explicit feature is never removed),
        # and what its OOM ladder added (or a learned start began with) stays, unless turned off now
        if (src.startswith("oom-retry") or src in ("explicit", "learned")) and f.get("name") not in fs.disabled:
            fs = fs.add(f["name"], src)
    plan.features = fs
    spec["features"] = fs.to_json()
    spec["resume_of"] = run_id
    carried, not_kept = _ladder_changes(rec, plan)
    if carried:
        spec["setting_changes"] = carried
    planned = _strategy_of(plan.argv)
    if pinned:
        spec["strategy"] = pinned
    plan.ckpt_dir = new_s["ckpt_dir"]
    plan.argv = overrides.build_command(spec, fs, spec.get("setting_changes") or None)
    added = [f.name for f in fs.enabled if f.source.startswith("oom-retry")]
    added += [
        f"{r.get('rung')}({r.get('phase')})"
        for r in (carried or {}).get("memory_rungs") or []
        if str(r.get("source", "")).startswith("oom-retry")
    ]
    return (
        f"run {run_id}'s checkpoints in {new_s['ckpt_dir']}, "
        + (f"from global_step_{step}" if step.isdigit() else "no checkpoint yet: from step 0")
        + (f"; keeps {', '.join(added)} (its OOM ladder)" if added else "")
        + (f"; does not keep its ladder's setting rungs: {not_kept}" if not_kept else "")
        + (
            f"; keeps actor strategy {pinned} (its checkpoint's FSDP version; {planned} would not load it)"
            if pinned and planned and pinned != planned
            else ""
        )
    )


def _ladder_changes(rec: dict, plan) -> tuple[dict, str]:
    """The setting changes the resumed run's first attempt starts on: the earlier run's own, from its run.json
    ``setting_changes`` (what its last attempt ran on, or what its supervisor decided the next attempt runs on when it
    was stopped mid-retry: the memory ladder's setting rungs (``update-batch``, ``logprob-batch``, ``rollout-util``,
    ``weight-bucket``, ``offload-policy``, ...) with their ``memory_rungs`` record, and the estimate's or learned start
    it began on), with every token budget kept at least prompt+response of the settings now
    (:func:`dapo_ops.core.memladder.keep_token_budgets`).

    Why: the ladder is a sequence (:func:`dapo_ops.core.memladder.next_rung` consumes the rungs listed in
    ``memory_rungs``); a resumed run that starts without them climbs it again from the bottom, repeats rungs that
    were already tried against the same OOM and spends its own ``MAX_OOM_RETRIES`` on them (chaos soak seed 1202,
    episode 21: update-batch tried twice, the resumed run failed before reaching the rungs it had not tried). Each
    run has its own ``MAX_OOM_RETRIES`` budget; the rungs carry over, the budget does not.

    Precedence now > the resumed run: when a change would override a setting given now (flag, env var, config file:
    ``GPU_MEMORY_UTILIZATION``, ``MICRO_BATCH_SIZE``, an ``--override`` of the key a rung changes;
    :func:`dapo_ops.core.learned.conflicts`, the rule of learned starts) none is kept (the rungs were tried
    together) and the second value says why. Returns ``(changes or {}, why not kept or "")``; ``({}, "")`` when the
    earlier run had none (its plan's own start, the estimate's, stands)."""
    from dapo_ops.core import learned, memladder

    ch = dict(rec.get("setting_changes") or {})
    if not ch:
        return {}, ""
    sources = getattr(plan, "sources", None) or {}
    s = plan.spec["settings"]
    given = {
        name: f"{name}={s.get(name)!r}"
        for name in set(learned.SETTING_OF_CHANGE.values())
        if sources.get(name, "default") not in ("default", "resume")
    }
    why = learned.conflicts({"rung": {"setting_changes": ch}}, (), given, s.get("extra_overrides") or [])
    if why:
        return {}, "; ".join(why)
    return memladder.keep_token_budgets(defaults.complete_settings(dict(s)), ch), ""


#: ``fsdp_config.json`` ``FSDP_version`` -> verl's ``actor.strategy``
_FSDP_STRATEGY = {1: "fsdp", 2: "fsdp2"}


def _checkpoint_strategy(target, ckpt_dir: str, step: str) -> str | None:
    """The actor strategy (``fsdp`` | ``fsdp2``) the checkpoint a resume loads was written with, or None (no
    checkpoint yet, no record: the plan's own choice stands).

    verl 0.9.1 records it beside the actor's shards: ``<ckpt_dir>/global_step_<N>/actor/fsdp_config.json``
    ``{"FSDP_version": 1 | 2, "world_size": W}`` (verl/utils/checkpoint/fsdp_checkpoint_manager.py:409-416, rank 0 at
    every save). The two are not interchangeable: the shards are ``torch.save`` of ``model.state_dict()`` under
    ``get_fsdp_state_ctx`` (:315-352; FSDP1: ``FSDP.state_dict_type(SHARDED_STATE_DICT)``, torch turns it into a full
    state dict of plain tensors on one device, NO_SHARD; FSDP2: DTensors) and ``optimizer.state_dict()``, whose
    FSDP1 optimizer holds one flat parameter per wrapped module (``use_orig_params: false``,
    verl/trainer/config/engine/fsdp.yaml:36) against FSDP2's one DTensor per parameter, so ``load_checkpoint``
    (:211-237, ``self.model.load_state_dict`` / ``self.optimizer.load_state_dict``) fails across them. A run the
    tool started with ``fsdp2`` on one device (before the plan chose ``fsdp`` there) must resume as ``fsdp2``."""
    if not step.isdigit():
        return None
    cfg = _cat_json(target, f"{ckpt_dir}/global_step_{step}/actor/fsdp_config.json") or {}
    version = cfg.get("FSDP_version")
    return _FSDP_STRATEGY.get(version) if isinstance(version, int) else None


def _strategy_of(argv: list) -> str | None:
    """``actor_rollout_ref.actor.strategy`` in a verl argv (None for Megatron)."""
    for a in argv:
        if str(a).startswith("actor_rollout_ref.actor.strategy="):
            return str(a).split("=", 1)[1]
    return None
