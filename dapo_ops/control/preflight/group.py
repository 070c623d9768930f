"""Preflight of a fleet with ONE Hydra compose per group of hosts that compose identically.

A compose result (:mod:`dapo_ops.agent.compose`) is a deterministic function of the request (config root and
dir, config name, overrides), the yaml files it can load, and the hydra-core / omegaconf that compose them. Every
host's probe reports that as a fingerprint (:func:`dapo_ops.agent.composefp.fingerprint`, stdlib, no hydra
import); so in round 1 the first host of each distinct compose request composes (in its one round trip, beside
every other check) and the others only report their fingerprint. A host whose fingerprint equals that of a host
whose compose gave a definite answer takes that answer (its ``overrides`` check says ``composed on <host>``);
every other host that needs one (another fingerprint, no fingerprint, its group's composer down or timed out)
composes on its own in round 2 (:func:`assign`). One host is one round trip; a fleet of identical hosts is one
round trip per host and one compose in all. A mismatch never reuses another host's result.

Preflight checks the plan the launch runs, not its draft: a host's job may carry the plan's second stage
(:attr:`HostJob.finish`, the launch's own :func:`dapo_ops.control.launch.service.build_plan`), which round 1's
probe feeds with the memory facts it read (device memory, config.json, learned-start memos:
:func:`dapo_ops.control.preflight.memory.memory_facts`, what the launch finishes its draft with); every check is
then judged on the finished plan. Round 1 composes the draft's argv (asked before the facts exist); a host whose
finished argv composes another request (the fastest fit, a learned or estimate start, Megatron's TP/PP change
values or add keys) composes that request in round 2, on its own: its round-1 verdict is dropped. Why not one
round: an argv "covering" the finished one (the draft's plus each fit knob's key with a value of its type) would
not be judged the same, because the compose runs verl's start-up checks on the values
(:mod:`dapo_ops.agent.verlcheck`: ``validate_config``'s batch arithmetic and the dataclasses' ``__post_init__``,
``verl/utils/config.py:88-``; the pools' TP x PP arithmetic), and the rungs add keys no table lists in advance. The
in-container compose cache (:data:`dapo_ops.agent.preflight_probe.COMPOSE_CACHE`, keyed by the request's
fingerprint) makes a repeated preflight of the same finished plan a cache hit.

:func:`run_fleet` runs both rounds over :func:`dapo_ops.control.remote.fanout.run` and returns every host's checks
(:func:`dapo_ops.control.preflight.checks.evaluate`, the same per-host rows as
:func:`~dapo_ops.control.preflight.checks.run_all`). The decisions (:func:`composers`, :func:`definite`,
:func:`assign`) are pure.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from dapo_ops.control.remote import fanout
from dapo_ops.control.remote.fanout import Row
from dapo_ops.control.preflight.checks import evaluate, quick_all
from dapo_ops.control.preflight.plan_view import plan_view, ray_for, with_env
from dapo_ops.control.preflight.gather import collect, probe_request
from dapo_ops.control.preflight.memory import memory_facts
from dapo_ops.control.preflight.result import FAIL, Check, split_fix
from dapo_ops.control.preflight.verl import _compose_request


@dataclass
class HostJob:
    """What to check on one host: ``plan`` (a ``launch.plan.Draft`` / ``Plan``, spec dict or None), ``ray`` (the
    multi-host Ray facts or None, :func:`dapo_ops.control.preflight.plan_view.ray_for`), ``container`` (the
    container the run uses, "" = the inventory's) and ``finish``: the plan's second stage when ``plan`` is a draft
    (memory facts of :func:`dapo_ops.control.preflight.memory.memory_facts`, or None -> the plan the launch runs;
    raises ``ValueError``, e.g. ``PlanError``, when none can be made), else None (``plan`` is checked as it is)."""

    plan: Any
    ray: dict | None = None
    container: str = ""
    finish: Callable[[Mapping | None], Any] | None = None


def finished(job: HostJob, memory: Mapping | None) -> tuple[Any, list[Check]]:
    """The plan to judge: ``job.finish`` of the host's ``memory`` facts (:func:`memory_facts` of its probe), or
    ``job.plan`` without a ``finish``. When the second stage refuses (``ValueError``: nothing fits the device memory,
    a value the argv cannot carry) the draft is judged and one failing ``plan`` check carries the refusal (the
    launch would stop with it). Returns ``(plan, extra checks)``."""
    if job.finish is None:
        return job.plan, []
    try:
        return job.finish(memory), []
    except ValueError as e:
        msg, fix = split_fix(str(e))
        return job.plan, [Check("plan", FAIL, msg, fix or "see the message")]


def request_key(creq: dict | None) -> str | None:
    """The grouping key of a compose request (its canonical JSON); None for no request."""
    return None if creq is None else json.dumps(creq, sort_keys=True)


def composers(creqs: dict[str, dict | None]) -> set[str]:
    """Round 1: the hosts that compose, the first (in ``creqs`` order) of each distinct compose request. Hosts
    without a request (``None``: no plan argv, ``--no-compose``) compose nowhere. Pure."""
    first: dict[str, str] = {}
    for name, creq in creqs.items():
        k = request_key(creq)
        if k is not None:
            first.setdefault(k, name)
    return set(first.values())


def definite(comp: dict | None) -> bool:
    """Whether a compose answer is a result another host may share: the op ran and printed its JSON
    (``{"ok", "errors"}``, composing or not); not a timeout, a crash or a missing answer. Pure."""
    if not comp or comp.get("rc") != 0 or comp.get("error"):
        return False
    for line in reversed((comp.get("stdout") or "").strip().splitlines()):  # as compose_check.parse_remote_result
        if line.strip().startswith("{"):
            try:
                ans = json.loads(line)
            except ValueError:
                return False
            return isinstance(ans, dict) and "ok" in ans and "errors" in ans
    return False


def assign(fps: dict[str, str | None], composed: dict[str, dict]) -> tuple[dict[str, str], list[str]]:
    """After round 1: ``fps`` maps every host that still needs a compose verdict to its fingerprint (``None``:
    none); ``composed`` maps each host that composed to its answer and must hold their fingerprints in ``fps``
    too (keys of both may overlap: a composer needs no verdict). Returns ``(reuse, own)``: ``reuse[host] =
    composer`` whose definite answer (:func:`definite`) has exactly this host's fingerprint, and ``own``, the
    hosts (in ``fps`` order) that compose themselves in round 2. A ``None`` fingerprint is never matched. Pure."""
    by_fp: dict[str, str] = {}
    for name, comp in composed.items():
        fp = fps.get(name)
        if fp is not None and definite(comp):
            by_fp.setdefault(fp, name)
    reuse: dict[str, str] = {}
    own: list[str] = []
    for name, fp in fps.items():
        if name in composed:
            continue
        src = by_fp.get(fp) if fp is not None else None
        if src is not None:
            reuse[name] = src
        else:
            own.append(name)
    return reuse, own


def _finish_hosts(hosts: list, jobs: dict, facts: dict, probes: dict, pvs: dict, extra_env) -> dict:
    """The plan each host's launch runs: its draft finished with the facts round 1 read (:func:`finished`);
    ``pvs`` (the plan views the checks judge) take the finished plans. Returns ``{host: (plan, extra checks)}``."""
    judged: dict[str, tuple[Any, list[Check]]] = {}
    for h in hosts:
        if facts.get(h.name) is not None:
            p, extra = finished(jobs[h.name], memory_facts(h, probes.get(h.name)))
            judged[h.name] = (p, extra)
            if jobs[h.name].finish is not None:
                pvs[h.name] = with_env(plan_view(p), extra_env)
    return judged


def _assign_composes(hosts: list, jobs: dict, probes: dict, creqs: dict, pvs: dict) -> list:
    """Who answers each host's compose after round 1: a host whose finished argv composes another request than
    round 1's gets that one (``creqs`` updated) and composes it on its own in round 2; round 1's answer, of the
    draft's request, may still answer a host whose plan kept that request (:func:`assign`; ``probes`` take the
    shared answers). Returns the hosts round 2 composes on."""
    fps = {n: p.get("compose_fp") for n, p in probes.items() if creqs[n] is not None}
    composed = {n: probes[n]["compose"] for n in fps if "compose" in probes[n]}
    changed = set()
    for h in hosts:
        if h.name in probes and creqs[h.name] is not None and jobs[h.name].finish is not None:
            final = _compose_request(h, pvs[h.name])
            if final is not None and request_key(final) != request_key(creqs[h.name]):
                creqs[h.name] = final
                changed.add(h.name)
    reuse, own = assign({n: fp for n, fp in fps.items() if n not in changed or n in composed}, composed)
    for name, src in reuse.items():
        probes[name]["compose"] = dict(composed[src], **{"from": src})
    return list(own) + [n for n in fps if n in changed]


def _take_composes(probes: dict, results) -> None:
    """Round 2's answers into ``probes`` (a host without one gets a failed compose naming why)."""
    for r in results:
        f2 = r.row.data.get("facts") or {}
        p2 = f2.get("probe") or {}
        if "compose" in p2:
            probes[r.host.name]["compose"] = p2["compose"]
        else:
            why = (f2.get("ssh") or {}).get("message") or f2.get("probe_error") or r.row.message or r.row.kind
            probes[r.host.name]["compose"] = {"rc": -1, "stdout": "", "stderr": "", "error": why or "no answer"}


def run_fleet(
    hosts: list,
    jobs: dict[str, HostJob],
    *,
    quick: bool = False,
    compose: bool = True,
    inv_proxy: dict | None = None,
    extra_env: dict | None = None,
    secret_env: dict | None = None,
    timeout: float = 180,
    cmd_timeout: float | None = None,
    facts_out: dict | None = None,
    **fanout_kw,
) -> dict[str, list[Check]]:
    """Preflight every host of ``hosts`` (inventory Hosts; ``jobs[host.name]`` says what to check), in parallel:
    round 1 is each host's one round trip (:func:`~dapo_ops.control.preflight.gather.collect`, the compose only
    on :func:`composers`), round 2 composes on the hosts :func:`assign` leaves without a shared result (compose
    only, one round trip each). ``quick``: :func:`~dapo_ops.control.preflight.checks.quick_all` per host (no
    compose, no network). ``timeout``: seconds for both rounds together (a host without an answer by then gets
    one failing ``preflight`` check); ``cmd_timeout``: seconds for one host command (default ``timeout - 10``,
    at least 30). ``facts_out``: receives ``{host: facts}`` (the probe answers; a shared
    compose carries ``"from": <composer>``). ``secret_env``: env the probe gets through a 0600 file, never argv
    (the run's proxy URLs with credentials, :func:`dapo_ops.control.inventory.proxy.run_proxy_env`). ``fanout_kw``: passed
    to :func:`dapo_ops.control.remote.fanout.run` (``accept_new_host_keys``, ``connect_timeout``, ``reuse``). Returns ``{host name: checks}`` in ``hosts``
    order; never raises for remote failures."""
    t_end = time.monotonic() + timeout
    per_cmd = cmd_timeout if cmd_timeout is not None else max(30.0, timeout - 10)
    pvs = {h.name: with_env(plan_view(jobs[h.name].plan), extra_env) for h in hosts}
    rays = {h.name: ray_for(h, pvs[h.name], jobs[h.name].ray) for h in hosts}
    creqs = {h.name: (_compose_request(h, pvs[h.name]) if compose and not quick else None) for h in hosts}
    first = composers(creqs)

    def round1(target) -> Row:
        name = target.host.name
        target.container = jobs[name].container or target.container  # the plan's container wins
        if quick:
            job, refused = jobs[name], []

            def finish(mem):
                plan, more = finished(job, mem)
                refused.extend(more)
                return plan

            fin = finish if job.finish is not None else None
            checks = quick_all(target, job.plan, timeout=per_cmd, secret_env=secret_env, finish=fin)
            return Row(data={"checks": checks + refused})
        pv = pvs[name]
        req = probe_request(target.host, pv, full=True, ray=rays[name], compose_request=creqs[name])
        if "compose" in req and name not in first:
            req["compose"]["run"] = False  # fingerprint only: a composer of the same request may answer for it
        return Row(
            data={
                "facts": collect(
                    target, req, env=pv.env if pv is not None else {}, secret_env=secret_env, timeout=per_cmd
                )
            }
        )

    res1 = fanout.run(hosts, round1, timeout=timeout, **fanout_kw)
    facts = {r.host.name: r.row.data.get("facts") for r in res1}
    probes = {n: f["probe"] for n, f in facts.items() if f is not None and f.get("probe") is not None}
    judged = {} if quick else _finish_hosts(hosts, jobs, facts, probes, pvs, extra_env)
    own = _assign_composes(hosts, jobs, probes, creqs, pvs)
    if own:

        def round2(target) -> Row:
            name = target.host.name
            target.container = jobs[name].container or target.container
            pv = pvs[name]
            f = collect(
                target,
                {"compose": {"request": creqs[name]}},
                env=pv.env if pv is not None else {},
                secret_env=secret_env,
                timeout=max(10.0, min(per_cmd, t_end - time.monotonic() - 2)),
            )
            return Row(data={"facts": f})

        left = max(5.0, t_end - time.monotonic())
        _take_composes(probes, fanout.run([h for h in hosts if h.name in own], round2, timeout=left, **fanout_kw))
    out: dict[str, list[Check]] = {}
    for r in res1:
        name = r.host.name
        if quick and r.row.data.get("checks") is not None:
            out[name] = r.row.data["checks"]
        elif (f := facts.get(name)) is not None:
            extra = judged[name][1] if name in judged else []
            out[name] = evaluate(r.host, pvs[name], f, full=True, inv_proxy=inv_proxy, ray=rays[name]) + extra
        else:  # the host's function itself failed (bug or deadline): one failing check
            out[name] = [Check("preflight", FAIL, r.row.message or r.row.kind or "no answer", "see the message")]
    if facts_out is not None:
        facts_out.update({n: f for n, f in facts.items() if f is not None})
    return out
