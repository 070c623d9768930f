"""The preflight entry points: :func:`quick_all` / :func:`quick` (the cheap subset ``inv launch`` runs),
:func:`run_all` (every check of one host) and :func:`evaluate` (facts -> checks, pure).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from dapo_ops.control.preflight.host import _container_checks, _device_checks
from dapo_ops.control.preflight.inputs import _input_checks, sanity_checks
from dapo_ops.control.preflight.memory import _memfit_checks, memory_facts
from dapo_ops.control.preflight.network import _network_checks, tracker_check
from dapo_ops.control.preflight.plan_view import plan_view, ray_for, with_env
from dapo_ops.control.preflight.gather import collect, probe_request
from dapo_ops.control.preflight.result import FAIL, OK, WARN, Check, on_host
from dapo_ops.control.preflight.verl import _cann_checks, _compose_request, _module_checks, _verl_checks
from dapo_ops.control.remote.target import Target
from dapo_ops.control.remote.errors import is_no_space, is_workdir_missing, space_fix
from dapo_ops.core import defaults


def _space_fix(host) -> str:
    """The fix of a full runs_dir (:func:`dapo_ops.control.remote.errors.space_fix`)."""
    return space_fix(getattr(host, "runs_path", None) or getattr(host, "runs_dir", None))


#: names of the checks :func:`quick` may return (the rest are only in :func:`run_all`)
QUICK_CHECKS = (
    "ssh",
    "docker",
    "container",
    "host",
    "devices",
    "visible",
    "leftover",
    "device-mem",
    "python",
    "verl",
    "entry",
    "overrides",
    "verl-startup",
    "transfer_queue",
    "megatron.bridge",
    "transformer_engine",
    "flash_attn",
    "cupy",
    "mindspeed",
    "swanboard",
    "cann",
    "model",
    "data",
    "data-feed",
    "sanity",
    "disk",
    "memory-fit",
    "swanlab",
)


def evaluate(
    host, plan: Any, facts: dict, *, full: bool = True, inv_proxy: dict | None = None, ray: dict | None = None
) -> list[Check]:
    """Facts from :func:`collect` -> checks. Pure (no I/O). ``full`` adds the network checks; without it the
    ``swanlab`` check is there only when the probe was asked for the tracker (``probe_request(tracker=True)``)."""
    pv = plan_view(plan)
    # the container the run will use: the plan's (--container / CONTAINER) before the inventory's
    container = str(
        (pv.spec.container if pv is not None else None) or getattr(host, "container", defaults.HOST["container"])
    )
    out = _container_checks(getattr(host, "name", "?"), container, facts)
    if any(c.status == FAIL for c in out):
        return out
    p = facts.get("probe")
    if p is None and facts.get("python_error"):
        msg, _, fix = facts["python_error"].rpartition("; set python")
        out.append(Check("python", FAIL, msg, "set python" + fix))
        return out
    if p is None and facts.get("bundle_error"):
        out.append(
            Check(
                "bundle",
                FAIL,
                facts["bundle_error"],
                _space_fix(host)
                if is_no_space(facts["bundle_error"])
                else "make runs_dir writable there (or fix runs_dir in hosts.toml) and check that "
                "the container's python3 runs",
            )
        )
        return out
    if p is None and is_workdir_missing(facts.get("probe_error", "")):
        wd = getattr(host, "workdir", "?")
        where = (
            "on the host"
            if getattr(host, "runtime", defaults.HOST["runtime"]) == "host"
            else f"in container '{container}'"
        )
        out.append(
            Check(
                "workdir",
                FAIL,
                f"workdir {wd} does not exist {where}",
                "fix workdir in hosts.toml (the verl checkout, e.g. /verl) or create it in the image",
            )
        )
        return out
    if p is None:
        out.append(
            Check(
                "python",
                FAIL,
                facts.get("probe_error") or "the probe gave no answer",
                f"check that {getattr(host, 'python', defaults.HOST['python'])} runs in the container",
            )
        )
        return out
    out += _occupancy_checks(host, container, p)
    out += _device_checks(host, pv, p)
    out += _verl_checks(host, pv, p)
    out += _module_checks(pv, p)
    out += _cann_checks(p)
    out += _input_checks(host, pv, p)
    out += sanity_checks(pv)
    out += _memfit_checks(host, pv, p)
    if full:
        out += _network_checks(host, pv, p, inv_proxy, ray)
    elif (tracker := tracker_check(p)) is not None:
        out.append(tracker)
    if getattr(host, "runtime", defaults.HOST["runtime"]) == "host":
        out = [on_host(c) for c in out]
    return out


def _occupancy_checks(host, container: str, p: dict) -> list[Check]:
    """The ``active-run`` check (full preflight only: launch refuses a busy container itself before its quick checks,
    dapo_ops/control/launch/service.py refuse_if_busy): the probe's ``occupancy`` answer worded by the one rule,
    :func:`dapo_ops.agent.occupancy.busy_reason`. None when the probe was not asked."""
    from dapo_ops.agent.occupancy import busy_reason

    occ = p.get("occupancy")
    if occ is None:
        return []
    if occ.get("error"):
        return [Check("active-run", WARN, f"could not tell whether a run holds the container: {occ['error']}")]
    where = "host shell" if getattr(host, "runtime", defaults.HOST["runtime"]) == "host" else f"container {container}"
    busy = busy_reason(occ, getattr(host, "name", "?"), where)
    if busy:
        return [Check("active-run", FAIL, busy["what"], busy["fix"])]
    return [Check("active-run", OK, "no run holds the container")]


def quick_all(
    target: Target,
    plan: Any,
    *,
    timeout: float = 90,
    facts_out: dict | None = None,
    tracker: bool = False,
    secret_env: dict | None = None,
    finish: Callable[[Mapping | None], Any] | None = None,
) -> list[Check]:
    """The cheap subset ``inv launch`` runs automatically, every verdict: container state, devices (count,
    leftovers, free memory), python/verl/entry module, model and data files, disk; the compose of the argv against
    the container's verl config (and verl's start-up checks on it) only when the user gave ``--override``s. One SSH
    round trip, no network probes but, with ``tracker``, the tracker's reachability (``swanlab``: one GET from the
    container when the plan logs to SwanLab in cloud mode, with the plan's env: its proxy and SwanLab host).
    ``plan``: ``launch.plan.make_plan`` result (``.spec``, ``.argv``), a spec dict, or None. ``secret_env``: env the
    probe gets through a 0600 file (a proxy URL with credentials). Returns checks named in :data:`QUICK_CHECKS`;
    never raises for remote failures (``finish``'s own errors pass through). ``facts_out``: a dict that receives the
    facts (e.g. for :func:`memory_facts`).

    ``finish``: the plan's second stage (``plan`` is a draft): called once with the probe's memory facts
    (:func:`memory_facts`, None when unknown) it returns the plan the run starts with, and the checks judge THAT
    (``device-mem`` its rollout share, ``memory-fit`` its features and token budgets, ``sanity`` its argv); the
    probe itself is asked from ``plan``: what it reads (model, data, entry module, the extra modules of
    :func:`~dapo_ops.control.preflight.plan_view.needed_modules`, env) the second stage does not change (it changes
    token budgets, the rollout share, vLLM's batch limits, the memory rungs ``offload`` / ``recompute``, Megatron's
    TP/PP and ``--resume``'s checkpoint dir, whose free space is the runs_dir's as the draft's is). None: ``plan`` is
    judged as given."""
    pv = plan_view(plan)
    # the user's --override keys are composed against the container's verl (the plan's own keys are known to compose):
    # a mistyped key failed the run at once after a start (new-user trial), while `inv preflight` caught it
    creq = _compose_request(target.host, pv) if pv is not None and pv.settings["extra_overrides"] else None
    if creq is not None:  # the keys only: verl's start-up checks would judge this draft's values, which the second
        # stage below may still change (token budgets, Megatron TP/PP, vLLM's limits; a review)
        creq = dict(creq, startup=False)
    req = probe_request(target.host, pv, full=False, tracker=tracker, compose_request=creq)
    if "compose" in req:  # within the probe's own timeout: a slow compose is "did not answer", not a dead probe
        req["compose"]["timeout"] = min(60.0, 0.66 * timeout)
    facts = collect(target, req, env=pv.env if pv is not None else {}, secret_env=secret_env, timeout=timeout)
    if facts_out is not None:
        facts_out.update(facts)
    if finish is not None:
        pv = plan_view(finish(memory_facts(target.host, facts.get("probe"))))
    return evaluate(target.host, pv, facts, full=False)


def quick(
    target: Target,
    plan: Any,
    *,
    timeout: float = 90,
    facts_out: dict | None = None,
    tracker: bool = False,
    secret_env: dict | None = None,
    finish: Callable[[Mapping | None], Any] | None = None,
) -> list[Check]:
    """What ``inv launch`` calls before starting: the **failing** checks of :func:`quick_all` (empty = go).

    ``str(check)`` is one line with the fix, fit for launch's error message."""
    return [
        c
        for c in quick_all(
            target, plan, timeout=timeout, facts_out=facts_out, tracker=tracker, secret_env=secret_env, finish=finish
        )
        if c.status == FAIL
    ]


def run_all(
    target: Target,
    plan: Any,
    *,
    inv_proxy: dict | None = None,
    ray: dict | None = None,
    compose: bool = True,
    extra_env: dict | None = None,
    timeout: float = 180,
) -> list[Check]:
    """Every check for one host in one SSH round trip (the compose check runs inside the same ``docker exec``).

    ``inv_proxy``: the inventory ``[proxy]`` table (to warn when the container lacks it). ``ray``:
    ``{"head": address, "port": 6379, "is_head": bool}`` for multi-host runs (default: the plan's ``ray``).
    ``extra_env``: non-secret env the run will get besides the spec's (e.g. ``SwanlabSettings.public_env()``:
    ``SWANLAB_MODE``, ``SWANLAB_API_HOST``); the probe runs with it. The ``swanlab-key`` check is operator-side:
    call :func:`swanlab_key_check` once, not per host.
    """
    pv = with_env(plan_view(plan), extra_env)
    r = ray_for(target.host, pv, ray)
    creq = _compose_request(target.host, pv) if compose else None
    req = probe_request(target.host, pv, full=True, ray=r, compose_request=creq)
    facts = collect(target, req, env=pv.env if pv is not None else {}, timeout=timeout)
    return evaluate(target.host, pv, facts, full=True, inv_proxy=inv_proxy, ray=r)
