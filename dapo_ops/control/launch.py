"""Launch one run on one host as a service: checks, plan fitting, ``--resume``, spec + secrets, detached start.

What ``inv launch`` / ``inv one-step-off`` do per host (:mod:`dapo_ops.cli.launch` parses the flags and prints):
make the plan (:mod:`dapo_ops.control.planning`), refuse what would fail at once (container stopped, a run
already active: :func:`refuse_if_busy`; ``dapo_ops.control.preflight.quick``), install the stdlib bundle
(:mod:`dapo_ops.control.remote_bundle`), write ``spec.json`` and ``secret.env`` (0600), start
``python3 -m dapo_ops.agent.supervisor <run_dir>`` detached and wait a few seconds for ``run.json`` to say
``running``. The multi-host path (:mod:`dapo_ops.control.multihost`) uses the same checks and start.

Never prints or exits: returns values (:class:`~dapo_ops.control.fanout.Row`) or raises one-line typed errors
(:class:`LaunchRefused` on a host, :class:`LaunchUsageError` before any host,
:class:`~dapo_ops.control.remote.RemoteError`, :class:`~dapo_ops.control.planning.PlanError`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from dapo_ops.agent import notify
from dapo_ops.control import planning
from dapo_ops.control import proxy
from dapo_ops.control import resume as resume_mod
from dapo_ops.control.launch_errors import LaunchRefused, LaunchUsageError  # noqa: F401  (callers import them here)
from dapo_ops.control import remote_bundle
from dapo_ops.control import swanlab_cfg
from dapo_ops.control.fanout import Row
from dapo_ops.control.remote import RemoteError
from dapo_ops.core import runstate

#: seconds to wait for run.json to leave ``starting`` after the detached start
START_WAIT_S = 30.0
#: seconds a run that reached ``running`` is still watched for an immediate failure (config errors)
SETTLE_S = 4.0


class LaunchProgress:
    """How far a launch got, for the CLI's Ctrl-C line (thread-safe: the per-host starts run in fan-out threads).

    :meth:`begin` is called by :func:`start_run` before it writes anything of a run on a host; :meth:`cancel`
    (the CLI, on Ctrl-C) returns ``{host name: run id}`` of every run begun and makes every later :meth:`begin`
    refuse, so a host whose start had not begun yet starts nothing afterwards. Until :func:`start_run`
    returns, a begun run *may* have started: its supervisor is detached (``remote_bundle.start_supervisor``).
    """

    def __init__(self) -> None:
        #: names of the hosts the launch is for, once the caller has chosen them (for the "nothing started" line)
        self.hosts: list[str] = []
        self._lock = threading.Lock()
        self._cancelled = False
        self._runs: dict[str, str] = {}

    def begin(self, host: str, run_id: str) -> bool:
        """Record that ``run_id`` is being started on ``host``; False (record nothing) once cancelled."""
        with self._lock:
            if self._cancelled:
                return False
            self._runs[host] = run_id
            return True

    def cancel(self) -> dict[str, str]:
        """Refuse every later :meth:`begin`; returns ``{host: run id}`` of the runs begun so far (oldest first)."""
        with self._lock:
            self._cancelled = True
            return dict(self._runs)


@dataclass
class LaunchRequest:
    """Everything a launch needs besides the host: resolved settings and the operator-side secrets.

    ``settings``: :class:`dapo_ops.control.settings.Settings`. ``sw``: :class:`swanlab_cfg.SwanlabSettings`.
    ``extra_public`` / ``extra_secret``: env for verl (proxy variables; secret ones go to ``secret.env`` only).
    ``inv_proxy``: hosts.toml ``[proxy]``. ``link_wait``: seconds to wait for the SwanLab link.
    ``resume``: a run id to continue. ``progress``: what was begun where (:class:`LaunchProgress`).
    """

    mode: str
    settings: Any
    sw: Any
    notify_cfg: dict = field(default_factory=dict)
    extra_public: dict = field(default_factory=dict)
    extra_secret: dict = field(default_factory=dict)
    inv_proxy: dict = field(default_factory=dict)
    extra_overrides: list = field(default_factory=list)
    skip_preflight: bool = False
    link_wait: float = 20.0
    resume: str = ""
    progress: LaunchProgress = field(default_factory=LaunchProgress)

    def make_plan(self, host, run_id: str, **kw) -> planning.Plan:
        """:func:`planning.make_plan` for ``host`` with this request's settings. Raises PlanError (one line)."""
        return planning.make_plan(
            self.settings,
            host,
            mode=self.mode,
            run_id=run_id,
            swanlab_logger=self.sw.logger_enabled,
            proxy=self.inv_proxy,
            extra_overrides=self.extra_overrides,
            **kw,
        )


# ------------------------------------------------------------------------------- before any host


def known_secrets(file_cfg: dict, env=None) -> list[str]:
    """Secret values dapo-ops knows without prompting: the SwanLab key (env / config file), webhook URLs and
    signing secrets ([notify]); proxy credentials are added at launch (env / [proxy] / hosts.toml)."""
    env = os.environ if env is None else env
    out = [env.get("SWANLAB_API_KEY", ""), str((file_cfg.get("swanlab") or {}).get("api_key") or "")]
    try:
        out += list(notify.spec_from_user_config(file_cfg.get("notify"), dict(env))[1].values())
    except ValueError:
        pass
    return [v for v in out if v and len(v) >= 6]


#: keys of verl 0.9.1's own config whose names look secret to :func:`dapo_ops.core.redact.is_secret_name` but hold a
#: dataset column / dict key name or a profiler step (verl/trainer/config/data/legacy_data.yaml ``prompt_key`` ...,
#: distillation/*.yaml, profiler/*.yaml); tests/test_launch.py derives the same set from the pinned yaml
VERL_NAME_KEYS = frozenset(
    {
        "data.prompt_key",
        "data.reward_fn_key",
        "data.image_key",
        "data.video_key",
        "data.audio_key",
        "distillation.teacher_key",
        "distillation.teacher_models.teacher_model.key",
        "actor_rollout_ref.rollout.profiler.tool_config.npu.profile_token_start",
        "actor_rollout_ref.rollout.profiler.tool_config.npu.profile_token_end",
        "actor_rollout_ref.rollout.profiler.tool_config.torch.profile_token_start",
        "actor_rollout_ref.rollout.profiler.tool_config.torch.profile_token_end",
    }
)


def refuse_secret_overrides(extra: list, secrets: list) -> None:
    """Raise :class:`LaunchUsageError` when an ``--override`` carries a secret: a value holding a secret dapo-ops
    knows, or a key that looks secret by the one redaction rule (:func:`dapo_ops.core.redact.is_secret_name`:
    ``+trainer.api_key=...``, ``+x.hf_token=...``) and is not one of verl's own name keys (:data:`VERL_NAME_KEYS`).
    An override is printed by ``--dry-run`` and stored in spec.json, run.json, verl's argv and train.log. Nothing of
    the value is shown: one line naming the key and the fix."""
    from dapo_ops.core import redact

    for o in extra:
        key, sep, _ = o.partition("=")
        if sep and redact.is_secret_name(key) and key.lstrip("+~") not in VERL_NAME_KEYS:
            raise LaunchUsageError(
                f"--override {key}=...: the key looks secret (a key/token/secret/password name); secrets never go on "
                f"verl's command line: set them by env var or the config file (SWANLAB_API_KEY, [notify], [proxy]) "
                f"and drop the override"
            )
        if any(sec in o for sec in secrets if sec):
            raise LaunchUsageError(
                f"--override {key}=...: the value holds a secret dapo-ops knows (SwanLab key, webhook URL or "
                f"signing secret, proxy password); secrets never go on verl's command line: set them by env var "
                f"or the config file (SWANLAB_API_KEY, [notify], [proxy]) and drop the override"
            )


def refuse_secret_settings(settings, secrets: list) -> None:
    """Raise :class:`LaunchUsageError` when a run setting (``--experiment``, ``--project``, paths, ...: every
    string value of :class:`~dapo_ops.control.settings.Settings`) holds a secret dapo-ops knows: settings go into
    spec.json, run.json, verl's argv and train.log like an override. Nothing of the value is shown; the message names
    where it was set (``--experiment``, ``EXPERIMENT_NAME``, ``[run] experiment in the config file``)."""
    from dapo_ops.control.settings import PARAMS

    flags = {p.name: p.flag or (p.env[0] if p.env else p.name) for p in PARAMS}
    flags.update(getattr(settings, "origins", None) or {})  # where each was set: flag, variable or file key
    for name, value in (getattr(settings, "values", None) or dict(settings)).items():
        if name.lower() in proxy.PROXY_VARS:  # proxy URLs carry their password by design: split_secret keeps it
            continue  # out of the spec (secret.env only)
        if isinstance(value, str) and any(sec in value for sec in secrets if sec):
            raise LaunchUsageError(
                f"{flags.get(name, name)}: the value holds a secret dapo-ops knows (SwanLab key, webhook URL or "
                f"signing secret, proxy password); run settings are stored in spec.json and reach verl's command "
                f"line: give a value without it"
            )


def refuse_plan_overrides(extra: list) -> None:
    """Raise :class:`LaunchUsageError` for an ``--override`` of a key the plan itself sets (it comes last in verl's
    argv and would win silently): one line naming the setting to use instead (``--override
    trainer.total_training_steps=5: use --steps (TRAIN_STEPS)``; :data:`dapo_ops.core.overrides.PLAN_SETTING_KEYS`) or
    why dapo-ops sets it (:data:`dapo_ops.core.overrides.PLAN_FIXED_KEYS`: resume, checkpoint dir, logger, layout).
    ``+key``, ``++key`` and ``~key`` count as the key. A value is shown only when it is a number or a boolean (it may
    hold a secret dapo-ops learns only later, a proxy password). Every other key stays open."""
    from dapo_ops.control.settings import BY_NAME
    from dapo_ops.core.overrides import PLAN_FIXED_KEYS, PLAN_SETTING_KEYS

    for o in extra:
        key, sep, val = str(o).partition("=")
        name = key.strip().lstrip("+~")
        if name not in PLAN_SETTING_KEYS and name not in PLAN_FIXED_KEYS:
            continue
        shown = val if re.fullmatch(r"-?[0-9][0-9._e+-]*|(?i:true|false|null)", val.strip()) else "..."
        head = f"--override {key}" + (f"={shown}" if sep else "")
        if name in PLAN_FIXED_KEYS:
            raise LaunchUsageError(f"{head}: dapo-ops sets {name} itself: {PLAN_FIXED_KEYS[name]}; drop the override")
        p = BY_NAME[PLAN_SETTING_KEYS[name]]
        where = f"{p.flag} ({p.env[0]})" if p.flag else f"{p.env[0]} (or {p.key} in [run] of the config file)"
        raise LaunchUsageError(f"{head}: use {where}")


def refuse_bad_overrides(extra: list) -> None:
    """Raise :class:`LaunchUsageError` for an ``--override`` Hydra's override grammar rejects (``a;b``, ``$(x)``,
    backticks, ``&``, ``>``): verl would die at once in its ``@hydra.main`` (verl/trainer/main_ppo.py) with a lexer
    error that reads like a crash. Parsed with hydra-core's own ``OverridesParser`` (the grammar verl uses)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    parser = OverridesParser.create()
    for o in extra:
        if "=" not in o:  # not key=value at all: runspec.check_spec says so in its own words
            continue
        try:
            parsed = parser.parse_overrides([o])[0]
        except OverrideParseException as e:
            key, _, val = o.partition("=")
            why = (str(e).strip().splitlines() or ["not parsable"])[0]
            raise LaunchUsageError(
                f"--override {o!r} is not a valid Hydra override ({why}); quote a value with "
                f"special characters for Hydra, e.g. --override \"{key}='{val}'\""
            ) from None
        _refuse_resolvers(o.partition("=")[0], parsed.value())


def _strings(v):
    """Every str inside a parsed Hydra override value (lists and dicts walked; sweeps and numbers skipped)."""
    if isinstance(v, str):
        yield v
    elif isinstance(v, (list, tuple)):
        for x in v:
            yield from _strings(x)
    elif isinstance(v, dict):
        for k, x in v.items():
            yield from _strings(k)
            yield from _strings(x)


def _refuse_resolvers(key: str, value) -> None:
    """An ``--override`` may interpolate verl config keys on purpose (``${data.max_prompt_length}``), but may not call
    an OmegaConf resolver: ``${oc.env:VAR}`` reads verl's environment (SWANLAB_API_KEY and the proxy password are
    in it) into the config, which verl prints to train.log (verl/trainer/main_ppo.py:144) and hands to the tracker;
    ``${oc.decode:...}`` and any registered resolver run code on input. Checked on the value as given AND with
    ``\\${`` un-escaped: main_ppo.py:145 resolves the config in place, which turns an escaped ``\\${oc.env:X}``
    into a live ``${oc.env:X}`` for every later read. Parsed with OmegaConf's own grammar
    (``omegaconf.grammar_parser``); a value it cannot parse would kill verl at its first read, so it is refused too.

    :raises LaunchUsageError: one line naming the key (the value is not echoed) and the fix.
    """
    from omegaconf import grammar_parser
    from omegaconf.errors import GrammarParseError
    from omegaconf.grammar.gen.OmegaConfGrammarParser import OmegaConfGrammarParser

    for text in _strings(value):
        for form in dict.fromkeys((text, text.replace("\\${", "${"))):
            if "${" not in form:
                continue
            try:
                tree = grammar_parser.parse(form, parser_rule="configValue", lexer_mode="DEFAULT_MODE")
            except GrammarParseError:
                raise LaunchUsageError(
                    f"--override {key}=...: the value holds '${{' that is not a valid OmegaConf interpolation, which "
                    f"verl would fail on at its first read of the key (verl/trainer/main_ppo.py:144-145); interpolate "
                    f"a config key as ${{data.max_prompt_length}} or remove '${{'"
                ) from None
            stack = [tree]
            while stack:
                node = stack.pop()
                if isinstance(node, OmegaConfGrammarParser.InterpolationResolverContext):
                    raise LaunchUsageError(
                        f"--override {key}=...: the value calls OmegaConf's resolver "
                        f"'{node.resolverName().getText()}' (${{name:...}}), which verl evaluates in its own process "
                        f"(oc.env reads its environment, secrets included; verl/trainer/main_ppo.py:144-145): only "
                        f"interpolations of config keys are allowed, e.g. ${{data.max_prompt_length}}; give the value "
                        f"itself"
                    )
                stack.extend(getattr(node, "children", None) or [])


# ------------------------------------------------------------------------------- on the host


def refuse_if_busy(target, py: str, bdir: str) -> dict:
    """The one rule for every launch path (:mod:`dapo_ops.agent.occupancy`, run in the container): refuse while a
    run is active, while verl of an earlier run is still alive (its supervisor SIGKILLed), or while the host is a
    Ray node of a multi-host run that is still up; Ray left over from a finished cluster run is ended first
    (``--sweep``). Raises :class:`LaunchRefused` (kind ``active-run``) or RemoteError; returns the answer."""
    host = target.host
    res = target.run(
        [py, "-m", "dapo_ops.agent.occupancy", host.runs_path, host.name, "--sweep"],
        env={"PYTHONPATH": bdir},
        workdir="",
        timeout=60,
    )
    try:
        occ = json.loads((res.stdout or "").strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise RemoteError(
            "command",
            host.name,
            "the occupancy check gave no answer: " + ((res.stderr or "").strip().splitlines() or ["no output"])[-1],
        ) from None
    active = occ.get("active")
    if active:
        raise LaunchRefused(
            "active-run",
            f"run {active['run_id']} is already active on {host.name} "
            f"({'host shell' if getattr(target, 'bare', False) else f'container {target.container}'}); follow it with `inv status -H {host.name}` or stop "
            f"it with `inv stop -H {host.name} --run {active['run_id']}`",
        )
    for v in occ.get("verl") or []:
        pg = f", pgid {v['pgid']}" if v.get("pgid") else ""
        n = f"{v['pids']} process" + ("es" if v["pids"] != 1 else "")
        raise LaunchRefused(
            "active-run",
            f"{host.name}: verl of run {v['run_id']} still runs ({n}{pg}) although "
            f"its supervisor is gone: end it with `inv stop -H {host.name} "
            f"--run {v['run_id']}`, then `inv launch -H {host.name} --resume {v['run_id']}` "
            f"continues from its checkpoints",
        )
    for r in occ.get("ray") or []:
        head = r.get("head") or "<its head>"
        raise LaunchRefused(
            "active-run",
            f"{host.name} is already a Ray node of multi-host run {r['run_id']} "
            f"(head {head} {r.get('head_address') or ''}): stop that run first "
            f"(inv stop -H {head} --run {r['run_id']}) or pick other hosts",
        )
    return occ


def tracker_view(plan, req: "LaunchRequest") -> tuple[dict, dict]:
    """``(plan view, secret env)`` the quick checks probe with: ``plan``'s spec with the env and loggers
    :func:`prepare_spec_env` will give the run (its proxy variables, ``SWANLAB_MODE`` / ``SWANLAB_API_HOST``),
    and the proxy variables that carry credentials (``req.extra_secret``; they reach the probe through a 0600
    file, never argv). The SwanLab API key is not among them: the reachability GET needs none."""
    spec = dict(plan.spec, env=run_public_env(plan, sw=req.sw, extra_public=req.extra_public), logger=req.sw.loggers())
    secret = {k: v for k, v in req.extra_secret.items() if k.lower() in proxy.PROXY_VARS}
    return {"spec": spec, "argv": plan.argv}, secret


def quick_checks(target, plan, bdir: str, skip_preflight: bool, req: "LaunchRequest | None" = None) -> dict:
    """The checks that would make the launch fail at once: container running, no active run on the container
    (:func:`refuse_if_busy`), and ``dapo_ops.control.preflight.quick`` (devices, leftovers, python/verl,
    model/data, disk) unless ``skip_preflight``; with ``req``, in the same probe round trip, the tracker's
    reachability from the container (``swanlab``: cloud mode only, with the run's proxy env and SwanLab host,
    :func:`tracker_view`). Raises :class:`LaunchRefused` or RemoteError with one line. Returns the probe's
    facts (empty when skipped), for the memory-fit estimate."""
    host = target.host
    state = target.container_state()  # a bare host (runtime = "host") has no container: always "running"
    if not state.running:
        raise LaunchRefused(
            "container-stopped",
            f"container '{target.container}' on {host.name} is "
            f"{state.status}: start it (docker start {target.container}) and launch again",
        )
    refuse_if_busy(target, plan.spec["python"], bdir)
    facts: dict = {}
    if skip_preflight:
        return facts
    from dapo_ops.control import preflight

    view, secret = tracker_view(plan, req) if req is not None else (plan, {})
    failed = [
        ck
        for ck in preflight.quick(target, view, facts_out=facts, tracker=req is not None, secret_env=secret)
        if ck.status == "fail"
    ]
    if failed:
        ck = failed[0]
        more = f" (+{len(failed) - 1} more: inv preflight -H {host.name})" if len(failed) > 1 else ""
        raise LaunchRefused(
            "preflight",
            f"{host.name}: preflight {ck.name} failed: {ck.message}"
            + (f"; {ck.fix}" if ck.fix else "")
            + more
            + " (--skip-preflight to launch anyway)",
        )
    return facts


def fit_memory(req: LaunchRequest, host, plan, facts: dict) -> None:
    """Where the first attempt starts, from the probe's facts (one round trip): a learned start (a memo of the same
    configuration in the host's ``<runs_dir>/.learned``, :mod:`dapo_ops.core.learned`; not with ``--resume``, which
    continues the earlier run's own features), else the memory fit (``memory_fit = start``: the first OOM-ladder
    rung that fits the host's devices, source ``estimate``). Sets the spec's configuration key (``learn``: the
    supervisor files a memo under it when the run needs a rung); updates ``plan`` in place. A plan that fits on no
    rung was refused by the checks."""
    from dapo_ops.control.preflight import memory_facts

    mem = memory_facts(host, facts.get("probe"))
    if mem is None:
        return
    if req.resume:
        mem = dict(mem, memos=None, learned_skip=f"--resume continues run {req.resume} with its own features")
    fitted = req.make_plan(host, plan.spec["run_id"], memory=mem)
    for k in ("learn", "learned"):
        if k in fitted.spec:
            plan.spec[k] = fitted.spec[k]
    plan.memory = fitted.memory
    if fitted.spec.get("setting_changes"):
        plan.spec.update(features=fitted.spec["features"], setting_changes=fitted.spec["setting_changes"])
        plan.features, plan.argv, plan.ladder = fitted.features, fitted.argv, fitted.ladder


def run_public_env(plan, *, sw, extra_public: dict) -> dict:
    """The public env the run gets (docs/design.md "SwanLab and secrets"): the spec's without its proxy variables,
    those of ``extra_public``, SwanLab's public env. A resumed run (spec ``resume_of``) continues the earlier run's
    SwanLab run."""
    spec = plan.spec
    public = {k: v for k, v in spec.get("env", {}).items() if k.lower() not in proxy.PROXY_VARS}
    return {
        **public,
        **extra_public,
        **sw.public_env(run_dir=plan.run_dir, run_id=spec.get("resume_of") or spec["run_id"]),
    }


def prepare_spec_env(plan, *, sw, notify_cfg: dict, extra_public: dict, extra_secret: dict) -> dict:
    """Fill ``plan.spec``'s ``env`` (:func:`run_public_env`) / ``logger`` / ``notify`` and return the secret env
    for ``secret.env``."""
    spec = plan.spec
    spec["env"] = run_public_env(plan, sw=sw, extra_public=extra_public)
    spec["logger"] = sw.loggers()
    spec["notify"] = notify_cfg
    return {**sw.secret_env(), **extra_secret}


def read_run(target, py: str, bdir: str, run_dir: str) -> dict | None:
    """``run.json`` of ``run_dir`` through ``python -m dapo_ops.agent.runfiles show`` (None when unreadable)."""
    res = target.run(
        [py, "-m", "dapo_ops.agent.runfiles", "show", run_dir],
        env={"PYTHONPATH": bdir},
        workdir="",
        timeout=30,
        check=False,
    )
    if res.exited != 0:
        return None
    try:
        return json.loads(res.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None


def verdict_line(rec: dict) -> str:
    """One line for a run that failed at once: its verdict class, the action and the first evidence line."""
    v = rec.get("verdict") or {}
    d = rec.get("decision") or {}
    cls = v.get("cls") or "failed"
    what = v.get("action") or d.get("reason") or "see the log"
    ev = (v.get("evidence") or [""])[0]
    line = f"run {rec.get('run_id')} failed at once: {cls}: {what}"
    if ev and ev not in what:
        line += f" ({ev})"
    return line


def start_run(
    target,
    plan,
    bdir: str,
    secret_env: dict,
    *,
    sw,
    link_wait: float,
    cleanup=None,
    progress: LaunchProgress | None = None,
) -> Row:
    """Write ``spec.json`` (+ ``secret.env``, 0600) into ``plan.run_dir``, start the supervisor detached, wait up to
    :data:`START_WAIT_S` for ``running`` and :data:`SETTLE_S` (and ``link_wait`` seconds for the SwanLab link) more.

    Returns a :class:`Row` (``data``: run_id, run_dir, log, swanlab_url, status, container; ``ok=False`` kind
    ``failed`` when the run failed at once). ``cleanup()`` (default: remove the run dir) runs when the start itself
    fails; raises RemoteError with one line, :class:`LaunchRefused` (kind ``interrupted``) when ``progress`` was
    cancelled before anything of the run was written.
    """
    host = target.host
    spec = plan.spec
    run_id, py = spec["run_id"], spec["python"]
    if progress is not None and not progress.begin(host.name, run_id):
        raise LaunchRefused(
            "interrupted", f"{host.name}: launch interrupted before run {run_id} was started; nothing was started"
        )
    try:
        target.put_text(json.dumps(spec, indent=1) + "\n", f"{plan.run_dir}/spec.json", mode=0o644)
        if secret_env:
            target.put_text(swanlab_cfg.env_file_text(secret_env), f"{plan.run_dir}/secret.env", mode=0o600)
        remote_bundle.start_supervisor(target, spec["workdir"], py, bdir, plan.run_dir)
    except Exception:
        if cleanup is not None:
            cleanup()
        else:
            target.run(["rm", "-rf", plan.run_dir], workdir="", check=False, timeout=30)
        raise
    rec = None
    deadline = time.monotonic() + START_WAIT_S
    while time.monotonic() < deadline:
        rec = read_run(target, py, bdir, plan.run_dir)
        if rec and rec.get("status") not in (None, "starting"):
            break
        time.sleep(0.5)
    if not rec or rec.get("status") in (None, "starting"):
        raise RemoteError(
            "timeout",
            host.name,
            f"run {run_id} did not start within {START_WAIT_S:g} s; "
            f"see {plan.run_dir}/supervisor.log (inv logs -H {host.name} --run {run_id})",
        )
    # watch a little longer: an immediate failure (bad override) and the SwanLab link
    settle_end = time.monotonic() + SETTLE_S
    link_end = time.monotonic() + (link_wait if sw.logger_enabled else 0)
    while rec.get("status") not in runstate.TERMINAL_STATUSES:
        now = time.monotonic()
        if now >= settle_end and (rec.get("swanlab_url") or now >= link_end):
            break
        time.sleep(0.5)
        rec = read_run(target, py, bdir, plan.run_dir) or rec
    if rec.get("status") == "failed":
        active = ((rec.get("verdict") or {}).get("detail") or {}).get("active_run")
        if active:
            # lost a launch race to another run (the supervisor's lock): leave no record of the loser, and say so
            # as refuse_if_busy does for a run that was active before this launch looked
            target.run(["rm", "-rf", plan.run_dir], workdir="", check=False, timeout=30)
            return Row(
                ok=False,
                kind="active-run",
                data={"run_id": run_id},
                message=f"{host.name}: run {active} started on {host.name} at the same time and holds the "
                f"container; this launch started nothing: follow that run with `inv status -H "
                f"{host.name}`, or stop it with `inv stop -H {host.name} --run {active}` and launch "
                f"again",
            )
        return Row(ok=False, kind="failed", message=verdict_line(rec), data={"run_id": run_id, "record": rec})
    return Row(
        cells={"run": run_id, "status": rec.get("status", "")},
        data={
            "run_id": run_id,
            "run_dir": plan.run_dir,
            "log": plan.log_path,
            "status": rec.get("status"),
            "swanlab_url": rec.get("swanlab_url"),
            "container": spec["container"],
        },
    )


def launch_one(target, req: LaunchRequest) -> Row:
    """Launch one run on ``target``: plan, checks, bundle, memory fit, resume, spec + secrets, detached start.

    Returns a :class:`Row` (``data``: run_id, run_dir, log, swanlab_url, status, container, and ``resume``: one
    line naming the checkpoint when resuming). Raises RemoteError / PlanError / LaunchRefused with one line;
    nothing is left behind when the start itself fails.
    """
    host = target.host
    run_id = runstate.new_run_id()
    plan = req.make_plan(host, run_id)
    target.container = plan.spec["container"]  # (--container / CONTAINER may name another than the inventory's)
    old = None
    if req.resume:  # settings not given now come from the run it continues: plan again with them
        old = resume_mod.resumed_spec(target, req.resume)
        req = dataclasses.replace(req, settings=resume_mod.resumed_settings(req.settings, old))
        plan = req.make_plan(host, run_id)
    bdir = remote_bundle.ensure_bundle(target, host.runs_path, plan.spec["python"])
    facts = quick_checks(target, plan, bdir, req.skip_preflight, req)
    fit_memory(req, host, plan, facts)
    resumed = resume_mod.apply_resume(target, plan, req.resume, old) if req.resume else None
    secret_env = prepare_spec_env(
        plan, sw=req.sw, notify_cfg=req.notify_cfg, extra_public=req.extra_public, extra_secret=req.extra_secret
    )
    row = start_run(target, plan, bdir, secret_env, sw=req.sw, link_wait=req.link_wait, progress=req.progress)
    if row.ok and resumed:
        row.data["resume"] = resumed
    if row.ok:  # where the first attempt starts: the learned start or the estimate's rung, or why not
        row.data["start"] = [
            ln
            for ln in plan.memory
            if ln.startswith(
                (
                    "starting on the learned",
                    "learned start not used",
                    "learned start: not looked up",
                    "memory-fit: starts on",
                )
            )
        ]
    return row
