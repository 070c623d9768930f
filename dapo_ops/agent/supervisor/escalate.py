"""From an ended attempt to the next step: its verdict, the ladder's decision, the cluster check (STDLIB ONLY).

The verdict is the classifier's (:func:`dapo_ops.core.classify.classify_file` over the attempt log's last
:data:`TAIL_BYTES` bytes) or, when the supervisor stopped a silent attempt, a ``hang``; the decision is
:func:`dapo_ops.core.ladder.decide`'s (retry with the next FeatureSet / setting changes, done, or stop with
suggestions), counted per retry counter. A multi-host run (spec ``ray``) checks before a retry, and after a
final failure of a :data:`LOST_NODE_CLASSES` class, whether a Ray node was lost (:mod:`dapo_ops.core.topology`):
a run never retries on fewer nodes (its checkpoint is tied to the world size). Verdicts are run.json dicts
(``cls``, ``action_kind``, ``action``, ``hint``, ``evidence``, ``detail``; docs/design.md "run.json").
"""

from __future__ import annotations

import re
import sys
from os import PathLike
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Union

from dapo_ops.agent.supervisor import accelerator, stall
from dapo_ops.agent.supervisor.checkpoints import healthy_before
from dapo_ops.agent.supervisor.record import log
from dapo_ops.agent import raysession
from dapo_ops.core import classify, health, ladder, policy, topology
from dapo_ops.core.classify.hints import RESUME_CMD, action_text, hint_text
from dapo_ops.core.features import FeatureSet

if TYPE_CHECKING:
    from dapo_ops.agent.runfiles import LockHeld

TAIL_BYTES = 4 << 20
#: final-failure classes after which a multi-host run checks whether a Ray node was lost (the likelier cause)
LOST_NODE_CLASSES = ("network", "hccl-timeout", "crash-other", "hang")


def verdict(
    cls: str, action: str, hint: str, evidence: Optional[List[str]] = None, detail: Optional[Dict[str, Any]] = None
) -> Dict[str, Any]:
    """A verdict of the supervisor's own; its ``action_kind`` is the failure policy's for ``cls`` and ``detail``
    (``dapo_ops/core/policy.py``)."""
    detail = dict(detail or {})
    return {
        "cls": cls,
        "action_kind": policy.kind(cls, detail).value,
        "action": action,
        "hint": hint,
        "evidence": list(evidence or []),
        "detail": detail,
    }


def attempt_verdict(log_path: str, outcome: Dict[str, Any], planned_total: Optional[int]) -> Dict[str, Any]:
    """The classifier's verdict on the attempt log at ``log_path``. Our own kill's exit code (143/137) would read as
    a host OOM: the exit code is passed only when verl ended by itself (``outcome["killed_by"]`` None)."""
    code = None if outcome["killed_by"] else outcome["exit_code"]
    v = classify.classify_file(
        log_path,
        tail_bytes=TAIL_BYTES,
        exit_code=code,
        planned_total=planned_total,
        container_state=outcome.get("container_state"),
    ).to_json()
    if (v.get("detail") or {}).get("external") and outcome.get("att") is not None:  # a kill nobody here ordered
        seen = accelerator.kill_evidence(outcome["att"])
        v["evidence"] = list(v.get("evidence") or []) + seen
        v["detail"]["kill_evidence"] = seen
        log("attempt %s killed from outside: %s" % (outcome["att"].get("n"), "; ".join(seen)))
    if outcome.get("killed_by") == "fatal" and outcome.get("storm"):
        found = outcome["storm"]
        if _no_failure(v):  # the tail read no failure (the loop's line left it, or a later line won): the line's own
            v = classify.classify(str(found.get("line") or "") + "\n", planned_total=planned_total).to_json()
        _stopped_on_repeat(v, found)
    return v


def log_says(v: Mapping[str, Any]) -> str:
    """What a classifier verdict ``v`` names, in a few words: ``network (ray-head, 198.51.140.99:6379)``; the
    class, then the detail's ``cause``, ``address`` / ``key`` / ``module`` / ``phase`` and ``non-fatal`` where
    ``fatal`` is false."""
    d = v.get("detail") or {}
    facts = [str(d[k]) for k in ("cause", "address", "key", "module", "phase") if d.get(k)]
    if d.get("fatal") is False:
        facts.append("non-fatal")
    return "%s (%s)" % (v.get("cls"), ", ".join(facts)) if facts else str(v.get("cls"))


def log_match(v: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
    """The classifier's verdict ``v`` on an attempt's log as a hang verdict carries it (``detail.log_verdict``):
    ``cls``, ``action_kind``, ``says`` (:func:`log_says`), ``detail``, ``evidence`` (its first line); None when the
    log holds no match (``crash-other`` with ``inconclusive``: silence)."""
    d = v.get("detail") or {}
    if not v.get("cls") or d.get("inconclusive"):
        return None
    return {
        "cls": v["cls"],
        "action_kind": v.get("action_kind"),
        "says": log_says(v),
        "detail": dict(d),
        "evidence": list(v.get("evidence") or [])[:1],
    }


def _no_failure(v: Mapping[str, Any]) -> bool:
    """A verdict that names no failure: success, keep running or an inconclusive crash (what an attempt stopped on a
    repeating fatal line must not end with: "... attempt stopped; keep running", a review)."""
    d = v.get("detail") or {}
    return v.get("cls") == "success" or v.get("action_kind") == "keep-running" or bool(d.get("inconclusive"))


def _stopped_on_repeat(v: Dict[str, Any], found: Mapping[str, Any]) -> None:
    """Classifier verdict ``v`` of an attempt the supervisor stopped because a fatal error of the classifier's table
    kept coming back with no step (``found``: :class:`dapo_ops.core.classify.storm.StormDetector`'s fatal dict):
    ``detail.repeated`` says how often and its action line that the attempt was stopped, then the policy's."""
    v.setdefault("detail", {})["repeated"] = {
        k: found.get(k) for k in ("signature", "cls", "count", "span_s", "source", "line")
    }
    v["action"] = "%s repeated %d times in %.0f s with no training step (%s): attempt stopped; %s" % (
        log_says(v),
        found.get("count") or 0,
        found.get("span_s") or 0,
        str(found.get("line") or "")[:160],
        v.get("action") or action_text(str(v.get("cls")), v["detail"]),
    )


def hang_verdict(hang_timeout_s: float, step: Optional[int], total: Optional[int]) -> Dict[str, Any]:
    """No ``step:`` line for ``hang_timeout_s`` seconds: the attempt was stopped (``step``/``total``: progress); the
    action line ends with the policy's (one retry after cleanup)."""
    mins = hang_timeout_s / 60.0
    detail = {"step": step, "total": total}
    return verdict(
        "hang",
        "no training progress for %.0f min: process group stopped; %s" % (mins, action_text("hang", detail)),
        "No new `step:` line for %.0f minutes. Look at the end of the log (`inv logs --errors`) for a rank "
        "stuck in a collective (HCCL/NCCL), a missing Ray head or a stalled data loader; raise "
        "HANG_TIMEOUT (`--hang-timeout`, seconds) if steps are legitimately slower." % mins,
        detail=detail,
    )


def diverged_verdict(
    flag: health.Flag,
    first: Optional[Dict[str, Any]],
    step: Optional[int],
    total: Optional[int],
    ckpt_dir: Optional[str] = None,
) -> Dict[str, Any]:
    """A training metric went bad (``flag``, :mod:`dapo_ops.core.health`); ``first``: the run's first bad step
    (run.json ``health.first_bad``, or the spec's ``diverged_at`` of a resumed run). Class ``diverged``: the first
    time, one retry from the last checkpoint before the bad step; the same metric bad again at that step or earlier
    (:func:`dapo_ops.core.health.persistent`) is persistent: stop (``dapo_ops/core/policy.py``). ``ckpt_dir``: the
    run's checkpoints, read for ``detail["healthy_step"]`` (the checkpoint the retry starts from, None: from the
    start; the action says which: the real l-diverge run was told "from the last checkpoint saved before step 1")."""
    recurred = health.persistent(first, flag)
    detail = dict(health.verdict_detail(flag, first, recurred, step), total=total)
    if ckpt_dir:
        detail["healthy_step"] = healthy_before(ckpt_dir, flag.step)
    return verdict(
        "diverged",
        "training metrics went bad: %s; attempt stopped; %s" % (flag.words(), action_text("diverged", detail)),
        hint_text("diverged", detail),
        [flag.words()],
        detail,
    )


def note_retried_from(v: Dict[str, Any], att: Dict[str, Any]) -> None:
    """A ``diverged`` verdict ``v`` of attempt ``att`` (its run.json entry) gets ``detail["retried_from"]``: the
    checkpoint step that attempt resumed from, None from scratch, so a stop after the retry says where the retry
    started (:func:`dapo_ops.core.ladder._diverged_reason`; verl's ``max_actor_ckpt_to_keep`` rotation can leave no
    checkpoint before the bad step). Other classes: unchanged."""
    if v.get("cls") == "diverged":
        v.setdefault("detail", {})["retried_from"] = att.get("resumed_from")


def flag_of(v: Dict[str, Any]) -> Optional[health.Flag]:
    """The :class:`dapo_ops.core.health.Flag` a ``diverged`` verdict of the classifier carries (verl ended by itself
    after its metrics went bad), else None."""
    d = v.get("detail") or {}
    if v.get("cls") != "diverged" or d.get("bad_step") is None:
        return None
    value = d.get("value")
    return health.Flag(
        str(d.get("metric")),
        int(d["bad_step"]),
        float(value) if value is not None else float(d.get("shown") or "nan"),
        str(d.get("reason")),
        tuple(d.get("history") or ()),
        d.get("largest"),
    )


def stall_verdict(
    idle_s: float,
    threshold_s: Optional[float],
    step_s: List[float],
    step: Optional[int],
    total: Optional[int],
    stacks: List[Dict[str, Any]],
    stacks_file: str,
    stall_by: Optional[str] = None,
    counters: Optional[List[str]] = None,
    basis: Optional[str] = None,
    log_verdict: Optional[Dict[str, Any]] = None,
) -> Dict[str, Any]:
    """The attempt stopped making progress (``stall_by``: ``silence`` = no step line and no output for ``idle_s`` >=
    ``threshold_s`` seconds, :class:`.stall.StepClock`; ``no-step`` = output but no step line for
    :data:`.stall.NO_STEP_FACTOR` x that; ``counters`` = devices idle, memory flat, no CPU, ``counters`` the
    evidence, :class:`.stall.CounterWatch`): class ``hang`` with where each process stood (``stacks``:
    :func:`.stall.dump_stacks`' entries, the dumps in ``stacks_file``) merged across ranks
    (:func:`.stall.merge_ranks`: its ``cause`` picks the policy row, ``dapo_ops/core/policy.py``). ``basis``: what
    the limit was made of (:meth:`.stall.StepClock.basis`), the action's words for it. ``log_verdict``:
    the classifier's verdict on the attempt's log (:func:`attempt_verdict`); a match there, fatal or not, is
    ``detail.log_verdict`` (:func:`log_match`) and the action line says it (``the log shows network (ray-head,
    198.51.140.99:6379)``), beside where the processes stood."""
    merged = stall.merge_ranks(stacks)
    stood = ["%s %d: %s" % (e["role"], e["pid"], e.get("where") or e.get("error") or "?") for e in stacks]
    detail = {
        "step": step,
        "total": total,
        "stalled": True,
        "stall_by": stall_by or "silence",
        "idle_s": round(idle_s, 1),
        "threshold_s": threshold_s,
        "stall_after_s": threshold_s,
        "stall_basis": basis,
        "step_s": [round(x, 3) for x in step_s[-8:]],
        "stacks_file": stacks_file,
        "stacks": stacks[:16],
        "cause": merged["cause"],
        "frame": merged.get("frame"),
        "wait_kind": merged.get("kind"),
        "missing": merged.get("missing"),
        "roles": merged.get("roles"),
        "place": merged.get("place"),
    }
    if merged.get("fix"):
        detail["fix"] = merged["fix"]
    if counters:
        detail["counters"] = list(counters)
    said = log_match(log_verdict) if log_verdict else None
    if said is not None:
        detail["log_verdict"] = said
    return _hang_with_stacks(detail, stood, stacks_file)


def _why(detail: Dict[str, Any]) -> str:
    by = detail.get("stall_by")
    lim = detail.get("threshold_s")
    if by == "counters":
        return "devices idle, memory flat and no CPU for %.0f s" % detail["idle_s"]
    if by == "no-step":
        return "output but no step line for %.0f s (%.0f x the limit %.0f s)" % (
            detail["idle_s"],
            stall.NO_STEP_FACTOR,
            lim or 0,
        )
    if by == "hang":
        return "no training progress for %.0f min" % (detail["idle_s"] / 60.0)
    return "no step and no output for %.0f s (limit %.0f s: %s)" % (
        detail["idle_s"],
        lim or 0,
        detail.get("stall_basis") or "%g x the longest step seen" % stall.STALL_FACTOR,
    )


def _where(detail: Dict[str, Any]) -> str:
    cause, frame = detail.get("cause"), detail.get("frame")
    if cause == "workload":
        return "every process at work waits in %s" % frame
    if cause == "collective-missing":
        return "ranks wait in %s for %d rank(s) that never joined: %s" % (
            frame,
            len(detail.get("missing") or []),
            ", ".join((detail.get("missing") or [])[:4]),
        )
    if cause == "collective":
        return "every rank waits in the collective %s" % frame
    return "no common frame: %s" % (detail.get("place") or "no process could be dumped")


def _hang_with_stacks(detail: Dict[str, Any], stood: List[str], stacks_file: str) -> Dict[str, Any]:
    return {
        "cls": "hang",
        "action_kind": policy.kind("hang", detail).value,
        "action": _hang_action(detail, stacks_file),
        "hint": "Where each process stood is in %s (py-spy dump), merged across ranks: ranks parked in a "
        "collective (NCCL/HCCL all_reduce, broadcast) waiting for ranks that never joined is the cluster (one "
        "retry after cleanup); every process in the same frame of the workload (a reward function, the data "
        "loader, the weight sync) is that code (no retry: fix it, then resume: %s). The limit "
        'is learned from the run\'s own steps (docs/troubleshooting.md "Stalls"); raise `stall_floor_s` / '
        "`stall_factor` in the host's `[hosts.<name>.supervisor]` table of hosts.toml if steps legitimately pause "
        "this long." % (stacks_file, RESUME_CMD),
        "evidence": (stood + list(detail.get("counters") or []))[:15]
        + list((detail.get("log_verdict") or {}).get("evidence") or []),
        "detail": detail,
    }


def _hang_action(detail: Dict[str, Any], stacks_file: str) -> str:
    """The one-line action of a hang verdict with stack dumps: why, where the ranks stood, and the policy's action for
    ``detail`` (rebuilt whole by :func:`mark_repeat`: the policy texts hold "; " themselves)."""
    said = detail.get("log_verdict")
    return (
        "stalled: %s; %s (stack dumps: %s)%s; attempt stopped; %s"
        % (
            _why(detail),
            _where(detail),
            stacks_file,  # the full path (the runs dir is the same path on the host): a bare name said not where
            "; the log shows %s: %s" % (said["says"], (said.get("evidence") or ["?"])[0][:160]) if said else "",
            action_text("hang", detail),
        )
    )


def _same_place(a: Dict[str, Any], b: Dict[str, Any]) -> bool:
    """Two hangs stood in the same place: the same cause and common frame, or with no common frame, the same
    dumps in words (``place``: :func:`.stall.stood`, pids left out; the trial's plain hang, the driver twice in
    ``StandinTrainer._fit``, was not called a repeat)."""
    if a.get("cause") != b.get("cause"):
        return False
    if a.get("frame") or b.get("frame"):
        return a.get("frame") == b.get("frame")
    pa, pb = (re.sub(r" \d+ in ", " in ", str(x.get("place") or "")) for x in (a, b))
    return bool(a.get("stacks")) and pa == pb and bool(pa)


def mark_repeat(v: Dict[str, Any], earlier: List[Dict[str, Any]], restarts_without_checkpoint: int) -> None:
    """Set ``detail.repeat`` on hang verdict ``v`` (:func:`stall_verdict`'s) when an earlier attempt's verdict (``earlier``: run.json attempt
    entries) was a hang at the same step with the same cause and frame, and ``detail.no_new_checkpoint`` when
    ``restarts_without_checkpoint`` reached :data:`dapo_ops.core.policy.MAX_RESTARTS_WITHOUT_CHECKPOINT`; the
    action kind follows (``dapo_ops/core/policy.py``)."""
    d = v.setdefault("detail", {})
    for a in earlier:
        pv = a.get("verdict") or {}
        pd = pv.get("detail") or {}
        if pv.get("cls") == "hang" and pd.get("step") == d.get("step") and _same_place(pd, d):
            d["repeat"] = True
    if restarts_without_checkpoint >= policy.MAX_RESTARTS_WITHOUT_CHECKPOINT:
        d["no_new_checkpoint"] = restarts_without_checkpoint
    v["action_kind"] = policy.kind("hang", d).value
    if d.get("repeat") or d.get("no_new_checkpoint"):
        v["action"] = _hang_action(d, str(d["stacks_file"]))  # stall_verdict's detail always names its dumps


def build_error_verdict(k: int, err: Exception, changes: Dict[str, Any]) -> Dict[str, Any]:
    """Attempt ``k``'s verl command could not be built (``err``: the one-line BuildError)."""
    return verdict(
        "config-error",
        "cannot build the verl command for attempt %d: %s" % (k, err),
        "The run spec (or a ladder setting change) is invalid for the override generator; "
        "fix the named value and launch again.",
        [str(err)],
        {"attempt": k, "setting_changes": dict(changes)},
    )


def lock_held_verdict(err: LockHeld) -> Dict[str, Any]:
    """Another run holds this container (``err``: runfiles.LockHeld)."""
    return verdict(
        "config-error",
        str(err),
        "One run per container: stop the active run first or wait for it to finish.",
        detail={"active_run": err.run_id},
    )


def crash_verdict(err: Exception, supervisor_log: Union[str, PathLike[str]]) -> Dict[str, Any]:
    """The supervisor itself failed (its traceback is in ``supervisor_log``)."""
    return verdict(
        "crash-other",
        "supervisor error: %s" % (str(err).splitlines()[0] if str(err) else type(err).__name__),
        "See %s for the traceback." % supervisor_log,
    )


def decision_json(d: ladder.Decision) -> Dict[str, Any]:
    """run.json ``decision`` of a :class:`dapo_ops.core.ladder.Decision`."""
    return dict(d.to_json())


class Ladder:
    """The retry counters of one run around :func:`dapo_ops.core.ladder.decide` (``max_oom_retries``: the
    device-OOM budget; other counters are the ladder's own, e.g. the host-OOM rollback)."""

    def __init__(self, max_oom_retries: int):
        self.max_oom_retries = max_oom_retries
        self.oom_used = 0
        self.other_used: Dict[str, int] = {}

    def decide(self, fs: FeatureSet, v: Dict[str, Any], settings: Dict[str, Any]) -> ladder.Decision:
        """The ladder's decision after an attempt (features ``fs``, verdict ``v``) under the run's settings."""
        return ladder.decide(
            fs,
            v.get("cls") or "",
            v.get("detail") or {},
            self.oom_used,
            self.max_oom_retries,
            dict(self.other_used),
            settings,
        )

    def count(self, d: ladder.Decision) -> None:
        """A retry of decision ``d`` is taken: spend its counter."""
        counter = d.counter
        if counter == "oom":
            self.oom_used += 1
        elif counter:
            self.other_used[counter] = self.other_used.get(counter, 0) + 1


def cluster_lost(spec: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
    """A stop verdict naming the lost node(s) of a multi-host run, or None when every node of ``spec["ray"]`` is
    still alive (or the run is single-host). Asks the head's Ray (``raysession.cluster_view``, at most
    ``topology.RETRY_CHECK_S`` seconds) with the spec's ``python``."""
    ray_spec = spec.get("ray") or None
    if not ray_spec or len(ray_spec.get("nodes") or []) < 2:
        return None
    view = raysession.cluster_view(spec.get("python") or sys.executable, ray_spec)
    v = topology.lost_nodes_verdict(ray_spec, view, spec.get("mode") or "dapo")
    if v is not None:
        log("cluster check: %s" % v["evidence"][0])
    return v


def teardown_cluster(spec: Mapping[str, Any], grace_s: float) -> None:
    """End the head's ``ray start`` session of a multi-host run (its pid file is
    ``spec["ray"]["nodes"][0]["pid_file"]``); each worker's session leader sees the head's GCS port refuse and ends
    its node within seconds (``topology.HEAD_GONE_REFUSALS`` probes, ``raysession.watch_head``). Never raises."""
    nodes = (spec.get("ray") or {}).get("nodes") or []
    if not nodes or not nodes[0].get("pid_file"):
        return
    try:
        n = raysession.stop_session(nodes[0]["pid_file"], grace_s)
        log("Ray head session on %s stopped (%d processes)" % (nodes[0].get("name"), n))
    except Exception as e:  # noqa: BLE001
        log("could not stop the Ray head session: %s" % e)
