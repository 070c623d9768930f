"""The checks ``launch`` runs before anything starts, shared by the single-host and the multi-host path
(:mod:`dapo_ops.cli.launch`, :mod:`dapo_ops.cli.multihost`): the one occupancy rule
(:func:`refuse_if_busy`, :mod:`dapo_ops.agent.occupancy` in the container), ``--resume RUN_ID``
(:func:`apply_resume`), and the override refusals (a known secret, a value Hydra cannot parse).
Each failure is one line: :class:`LaunchRefused` on a host, or ``fail(..., EXIT_USAGE)`` before any host.
"""

from __future__ import annotations

import json
import os

from dapo_ops.agent import notify
from dapo_ops.core import runstate
from dapo_ops.control.remote import RemoteError
from dapo_ops.cli._common import EXIT_USAGE, fail


class LaunchRefused(Exception):
    """A quick check failed on one host; ``kind`` (``active-run`` | ``preflight`` | ``container-stopped``) and a
    one-line ``str()`` saying what is wrong and how to fix it."""

    def __init__(self, kind: str, message: str):
        self.kind = kind
        super().__init__(message)


def refuse_if_busy(target, py: str, bdir: str) -> dict:
    """The one rule for every launch path (:mod:`dapo_ops.agent.occupancy`, run in the container): refuse while a run
    is active, while verl of an earlier run is still alive (its supervisor SIGKILLed), or while the host is a Ray
    node of a multi-host run that is still up; Ray left over from a finished cluster run is ended first
    (``--sweep``). Raises :class:`LaunchRefused` (kind ``active-run``) with one line; returns the answer."""
    host = target.host
    res = target.run([py, "-m", "dapo_ops.agent.occupancy", host.runs_path, host.name, "--sweep"],
                     env={"PYTHONPATH": bdir}, workdir="", timeout=60)
    try:
        occ = json.loads((res.stdout or "").strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise RemoteError("command", host.name, "the occupancy check gave no answer: "
                          + ((res.stderr or "").strip().splitlines() or ["no output"])[-1]) from None
    active = occ.get("active")
    if active:
        raise LaunchRefused("active-run", f"run {active['run_id']} is already active on {host.name} "
                            f"(container {target.container}); follow it with `inv status -H {host.name}` or stop "
                            f"it with `inv stop -H {host.name} --run {active['run_id']}`")
    for v in occ.get("verl") or []:
        pg = f", pgid {v['pgid']}" if v.get("pgid") else ""
        n = f"{v['pids']} process" + ("es" if v["pids"] != 1 else "")
        raise LaunchRefused("active-run", f"{host.name}: verl of run {v['run_id']} still runs ({n}{pg}) although "
                            f"its supervisor is gone: end it with `inv stop -H {host.name} "
                            f"--run {v['run_id']}`, then `inv launch -H {host.name} --resume {v['run_id']}` "
                            f"continues from its checkpoints")
    for r in occ.get("ray") or []:
        head = r.get("head") or "<its head>"
        raise LaunchRefused("active-run", f"{host.name} is already a Ray node of multi-host run {r['run_id']} "
                            f"(head {head} {r.get('head_address') or ''}): stop that run first "
                            f"(inv stop -H {head} --run {r['run_id']}) or pick other hosts")
    return occ


def _cat_json(target, path: str) -> dict | None:
    res = target.run(["cat", path], workdir="", timeout=30, check=False)
    try:
        data = json.loads(res.stdout) if res.exited == 0 and res.stdout.strip() else None
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


#: settings that fix a checkpoint's layout (world size, parallelism): a resumed run must keep them
RESUME_FIXED = ("nnodes", "n_gpus_per_node", "trainer_gpus", "rollout_gpus", "rollout_tp")


def apply_resume(target, plan, run_id: str) -> str:
    """Make ``plan`` continue run ``run_id`` of ``target``'s container from its checkpoints (``--resume``).

    The new run (own run id and run dir, so nothing of the earlier run is overwritten) takes the earlier run's
    ``settings.ckpt_dir`` (verl resumes from its ``latest_checkpointed_iteration.txt``: ``trainer.resume_mode=auto``,
    verl/trainer/ppo/ray_trainer.py ``_load_checkpoint``), ``experiment`` and ``project``, continues its SwanLab run
    (spec ``resume_of``: ``SWANLAB_RUN_ID`` of the earlier run), and keeps the memory features its ladder added
    and its explicit features (unless turned off now), and its total ``steps`` when none is given now. Refuses
    (:class:`LaunchRefused` kind ``resume``) a missing run, another mode, framework or V1 trainer mode, other
    devices / parallel sizes than the checkpoint was written with (:data:`RESUME_FIXED`), or a total ``steps`` not
    beyond the checkpoint's step.

    :returns: one line for the launch output: which checkpoint it resumes from.
    """
    from dapo_ops.core import overrides

    host = target.host
    old_dir = runstate.run_dir_for(host.runs_path, run_id)
    old = _cat_json(target, f"{old_dir}/spec.json")
    if old is None:
        raise LaunchRefused("resume", f"no run {run_id} on {host.name} ({host.runs_path}): list runs with "
                            f"`inv status --all -H {host.name}` (a multi-host run lives on its head, the first host)")
    spec, new_s, old_s = plan.spec, plan.spec["settings"], old.get("settings") or {}
    if (old.get("mode"), old.get("framework")) != (spec["mode"], spec["framework"]):
        cmd = "launch" if old.get("mode") == "dapo" else "one-step-off"
        raise LaunchRefused("resume", f"run {run_id} is a {old.get('mode')} run with framework {old.get('framework')}: "
                            f"resume it with `inv {cmd} --framework {old.get('framework')} --resume {run_id}`")
    if old_s.get("trainer_mode") and old_s.get("trainer_mode") != new_s.get("trainer_mode"):
        raise LaunchRefused("resume", f"run {run_id} ran trainer mode {old_s['trainer_mode']} (its checkpoints hold "
                            f"that trainer's state): resume it with `--mode {old_s['trainer_mode']}`, or start a new run")
    if (getattr(plan, "sources", {}) or {}).get("steps", "default") == "default" and old_s.get("steps"):
        new_s["steps"] = old_s["steps"]  # no --steps / TRAIN_STEPS now: the earlier run's total
    changed = [f"{k} {old_s.get(k)} -> {new_s.get(k)}" for k in RESUME_FIXED
               if k in old_s and old_s.get(k) != new_s.get(k)
               and (spec["mode"] == "one-step-off" or k not in ("trainer_gpus", "rollout_gpus"))]
    if changed:
        raise LaunchRefused("resume", f"run {run_id}'s checkpoints need the same layout: " + ", ".join(changed)
                            + " (launch on the same host(s) with the same settings, or start a new run)")
    for k in ("ckpt_dir", "experiment", "project"):
        if old_s.get(k):
            new_s[k] = old_s[k]
    rec = _cat_json(target, f"{old_dir}/run.json") or {}
    if rec.get("status") in ("starting", "running", "retrying"):  # its supervisor died (refuse_if_busy ran)
        from dapo_ops.cli.status import probe

        probe(target, {"op": "stop", "run_id": run_id, "grace_s": 5.0, "kill_grace_s": 5.0})  # marks it stopped
    fs = plan.features
    for f in rec.get("features") or old.get("features") or []:
        src = str(f.get("source", ""))
        # what the earlier run asked for explicitly stays asked for (README: an explicit feature is never removed),
        # and what its OOM ladder added stays, unless turned off now
        if (src.startswith("oom-retry") or src == "explicit") and f.get("name") not in fs.disabled:
            fs = fs.add(f["name"], src)
    plan.features = fs
    spec["features"] = fs.to_json()
    spec["resume_of"] = run_id
    plan.ckpt_dir = new_s["ckpt_dir"]
    plan.argv = overrides.build_command(spec, fs, spec.get("setting_changes") or None)
    it = target.run(["cat", f"{new_s['ckpt_dir']}/latest_checkpointed_iteration.txt"], workdir="", timeout=30,
                    check=False)
    step = (it.stdout or "").strip() if it.exited == 0 else ""
    if step.isdigit() and int(new_s["steps"]) <= int(step):
        raise LaunchRefused("resume", f"run {run_id}'s checkpoint is at step {step}, so --steps {new_s['steps']} "
                            f"would train nothing: --steps is the total, ask for more than {step}")
    added = [f.name for f in fs.enabled if f.source.startswith("oom-retry")]
    return (f"run {run_id}'s checkpoints in {new_s['ckpt_dir']}, "
            + (f"from global_step_{step}" if step.isdigit() else "no checkpoint yet: from step 0")
            + (f"; keeps {','.join(added)} (its OOM ladder)" if added else ""))


def _known_secrets(file_cfg: dict, env=None) -> list[str]:
    """Secret values dapo-ops knows without prompting: the SwanLab key (env / config file), webhook URLs and
    signing secrets ([notify]), proxy credentials (env / [proxy] / hosts.toml are checked at launch)."""
    env = os.environ if env is None else env
    out = [env.get("SWANLAB_API_KEY", ""), str((file_cfg.get("swanlab") or {}).get("api_key") or "")]
    try:
        out += list(notify.spec_from_user_config(file_cfg.get("notify"), dict(env))[1].values())
    except ValueError:
        pass
    return [v for v in out if v and len(v) >= 6]


def refuse_secret_overrides(extra: list, secrets: list) -> None:
    """One line, exit 2, when an ``--override`` carries a secret dapo-ops knows: it would be printed by
    ``--dry-run`` and stored in spec.json, run.json, verl's argv and train.log. Nothing is shown of the value."""
    for o in extra:
        if any(sec in o for sec in secrets if sec):
            key = o.split("=", 1)[0]
            fail(f"--override {key}=...: the value holds a secret dapo-ops knows (SwanLab key, webhook URL or "
                 f"signing secret, proxy password); secrets never go on verl's command line: set them by env var "
                 f"or the config file (SWANLAB_API_KEY, [notify], [proxy]) and drop the override", EXIT_USAGE)


def refuse_bad_overrides(extra: list) -> None:
    """One line, exit 2, for an ``--override`` Hydra's override grammar rejects (``a;b``, ``$(x)``, backticks,
    ``&``, ``>``): verl would die at once in its ``@hydra.main`` (verl/trainer/main_ppo.py) with a lexer error that
    reads like a crash. Parsed with hydra-core's own ``OverridesParser`` (the grammar verl's Hydra uses)."""
    try:
        from hydra.core.override_parser.overrides_parser import OverridesParser
        from hydra.errors import OverrideParseException
    except ImportError:  # pragma: no cover - hydra-core is a dependency
        return
    parser = OverridesParser.create()
    for o in extra:
        if "=" not in o:  # not key=value at all: overrides.check_spec says so in its own words
            continue
        try:
            parser.parse_overrides([o])
        except OverrideParseException as e:
            key, _, val = o.partition("=")
            why = (str(e).strip().splitlines() or ["not parsable"])[0]
            fail(f"--override {o!r} is not a valid Hydra override ({why}); quote a value with special characters "
                 f"for Hydra, e.g. --override \"{key}='{val}'\"", EXIT_USAGE)
