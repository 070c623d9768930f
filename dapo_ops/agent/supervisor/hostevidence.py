"""A failed or stalled multi-host attempt's evidence from every node, before anything is torn down (STDLIB ONLY,
shipped).

The supervisor runs on the head, in its container, with no SSH to the other hosts. It collects the head's own
files in-process (:func:`dapo_ops.agent.evidence.collect`: no Ray needed, so a dead Ray head still leaves the head's
evidence) and the workers' through the run's Ray cluster: the bundle op ``evidence cluster`` run with the spec's
``python`` (it has ``ray``), one task pinned to each live worker node, all at once, each bounded by ``wait_s``
(tunable ``evidence_s``, from the child's start: ``import ray``, ``ray.init`` and one new Ray worker process per
node; the wait ends as soon as every node answered); the child is bounded too (its own alarm, and a kill here).
The head's own files are read while the child starts. A node that is not
alive, or does not answer in time, is named as lost: its files stay on that host. Everything lands in
``<run_dir>/evidence/<host>/`` (the latest failed attempt's; an earlier one's is replaced), and
:func:`dapo_ops.core.first_error.earliest` names the host and rank of the earliest error (the root-cause rule).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from typing import Any, Dict, List, Mapping, Optional, Union

from dapo_ops.agent import evidence
from dapo_ops.agent.supervisor.record import log, now
from dapo_ops.core import first_error
from dapo_ops.core.topology import RAY_PORT
from dapo_ops.core import defaults

#: seconds before the attempt's start from which files count (clocks of NTP-synced nodes differ a little)
CLOCK_SLACK_S = 5.0
#: seconds the child gets on top of ``wait_s`` before it is killed here (its own alarm fires 5 s after ``wait_s``)
CHILD_EXTRA_S = 10.0


def collect(spec: Mapping[str, Any], run_dir: str, since: float, wait_s: float) -> Optional[Dict[str, Any]]:
    """The evidence of every node of a multi-host run (``spec["ray"]["nodes"]``, the head first), written under
    ``<run_dir>/evidence/``; None for a single-host run. ``since``: the attempt's start (seconds since the epoch);
    ``wait_s``: how long the workers' tasks may take (seconds). Returns ``{"dir", "hosts" (answered), "lost":
    [{"name", "address", "why"}], "earliest" (:func:`dapo_ops.core.first_error.earliest`'s finding, trimmed, or None),
    "line" (:func:`dapo_ops.core.first_error.summary_line`), "took_s"}``. Never raises."""
    nodes = list(((spec.get("ray") or {}).get("nodes")) or [])
    if len(nodes) < 2:
        return None
    t0 = now()
    base = os.path.join(run_dir, evidence.EVIDENCE_DIR)
    shutil.rmtree(base, ignore_errors=True)
    since = since - CLOCK_SLACK_S
    by_host: Dict[str, Dict[str, Any]] = {}
    lost: List[Dict[str, Any]] = []
    child = _start_workers(spec, run_dir, nodes[1:], since, wait_s)
    head = nodes[0]
    try:
        found = dict(evidence.collect(None, since), node=head.get("name"), address=head.get("address"))
        evidence.write(run_dir, head["name"], found)
        by_host[head["name"]] = found
    except Exception as e:  # noqa: BLE001 - the head's own files: said, never fatal
        lost.append({"name": head.get("name"), "address": head.get("address"), "why": "not readable here: %s" % e})
    answer = _workers_answer(child, wait_s)
    why = {n.get("name"): n.get("why") for n in answer.get("lost") or []}
    for n in nodes[1:]:
        try:
            with open(os.path.join(base, n["name"], "evidence.json")) as fh:
                by_host[n["name"]] = json.load(fh)
        except (OSError, ValueError):
            lost.append(
                {
                    "name": n["name"],
                    "address": n.get("address"),
                    "why": why.get(n["name"]) or answer.get("error") or "no answer",
                }
            )
    err = first_error.earliest({n["name"]: by_host[n["name"]] for n in nodes if n["name"] in by_host})
    if err is not None:
        err = dict(
            {k: err.get(k) for k in ("host", "rank", "time", "ts", "source", "cls", "tier")},
            line=str(err.get("line") or "")[:300],
        )
    hosts = [n["name"] for n in nodes if n["name"] in by_host]
    took_s = round(now() - t0, 2)
    line = first_error.summary_line(err, [x["name"] for x in lost])
    out = {"dir": base, "hosts": hosts, "lost": lost, "earliest": err, "line": line, "took_s": took_s}
    log("evidence of %d host(s) in %s in %.1f s: %s" % (len(hosts), base, took_s, line))
    return out


def _start_workers(
    spec: Mapping[str, Any], run_dir: str, workers: List[Dict[str, Any]], since: float, wait_s: float
) -> Union["subprocess.Popen[str]", str]:
    """Start the ``evidence cluster`` op for ``workers`` with the spec's ``python`` and this bundle on its
    PYTHONPATH (``RAY_ADDRESS``: the run's head). Returns the Popen, or the one-line error when it cannot start."""
    ray_spec = spec.get("ray") or {}
    bundle = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    pp = [bundle] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != bundle]
    env = dict(
        os.environ,
        RAY_ADDRESS="%s:%s" % (ray_spec.get("head"), ray_spec.get("port") or RAY_PORT),
        PYTHONPATH=os.pathsep.join(pp),
    )
    nodes = json.dumps([{"name": n["name"], "address": n.get("address")} for n in workers])
    argv = [
        spec.get("python") or defaults.HOST["python"],
        "-m",
        "dapo_ops.agent.evidence",
        "cluster",
        run_dir,
        "%.3f" % since,
        "%.1f" % wait_s,
        nodes,
    ]
    try:
        return subprocess.Popen(
            argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            universal_newlines=True,
        )
    except OSError as e:
        return "the Ray collector could not start: %s" % e


def _workers_answer(child: Union["subprocess.Popen[str]", str], wait_s: float) -> Dict[str, Any]:
    """The ``evidence cluster`` op's answer (``{"answered", "lost"}``), or ``{"error": line}`` when the child could
    not start, failed or ran out of time (killed here; its answers written so far stay)."""
    if isinstance(child, str):
        return {"error": child}
    try:
        out, err = child.communicate(timeout=wait_s + CHILD_EXTRA_S)
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()
        return {"error": "the Ray collector did not finish within %.0f s" % (wait_s + CHILD_EXTRA_S)}
    try:
        answer: Dict[str, Any] = json.loads((out or "").strip().splitlines()[-1])
        return answer
    except (ValueError, IndexError):
        tail = (err or "").strip().splitlines()
        return {"error": "the Ray collector failed (exit %s): %s" % (child.returncode, tail[-1][:200] if tail else "")}


def apply(verdict: Dict[str, Any], found: Optional[Dict[str, Any]]) -> None:
    """Put ``found`` (:func:`collect`'s answer) into the attempt's verdict as ``detail.evidence``, and the host and
    rank of the earliest error as ``detail.error_host`` / ``detail.error_rank``."""
    if not found:
        return
    d = verdict.setdefault("detail", {})
    d["evidence"] = found
    err = found.get("earliest") or {}
    if err.get("host"):
        d["error_host"], d["error_rank"] = err["host"], err.get("rank")
