"""The decision of the failure classifier (:mod:`dapo_ops.core.classify`): which hit of the tail is the verdict.

Precedence (docs/troubleshooting.md, generated from ``dapo_ops/core/classify/docs.py``):
    1. success facts: last ``step:N`` >= planned total (``Total training steps: N`` or
       the ``Training Progress`` bar), ``Final validation metrics``, exit code 0;
    2. container state: ``OOMKilled=true`` -> ``oom-host``; container gone -> ``container-missing``;
    3. the earliest specific root cause across all ranks (device / KV-cache / Ray / host
       OOM, config, data, auth, network, container, specific crashes such as thread
       exhaustion or an impossible allocation size);
    4. collective (HCCL/NCCL) timeouts and errors -> ``hccl-timeout`` (usually a symptom), unless a real
       traceback on another rank came first (then that error is the cause: ``crash-other``, ``earlier-error``);
    5. weak network exceptions (``Connection refused`` ...) -> ``network``;
    6. exit code / generic tracebacks -> ``crash-other``;
    7. non-fatal tracker trouble while the process runs -> ``keep-running``; no evidence -> inconclusive.
An error followed by later ``step:`` lines did not stop the run and only counts as a non-fatal signal.

STDLIB ONLY.
"""

from __future__ import annotations

import re
from typing import Any

from dapo_ops.core.classify.facts import killed_line, read_facts
from dapo_ops.core.classify.normalise import Log
from dapo_ops.core.classify.phase import TRACEBACK_START, phase_of
from dapo_ops.core.classify.scan import Hit, scan
from dapo_ops.core.classify.sigtable import COLLECTIVE, GENERIC, ROOT, WEAK
from dapo_ops.core.classify.verdict import Verdict
from dapo_ops.core.classify.verdicts import ev, exit_ev, generic_ev, mk, verdict_for


def _state_get(state: dict[str, Any] | None, *names: str) -> Any:
    """The first of ``names`` in a ``docker inspect`` ``.State`` dict, keys compared without case, ``_`` and ``.``."""
    if not state:
        return None
    norm = {str(k).lower().replace("_", "").replace(".", ""): v for k, v in state.items()}
    for n in names:
        v = norm.get(n.lower().replace("_", ""))
        if v is not None:
            return v
    return None


def _truthy(v: object) -> bool:
    """``True`` / ``"true"`` / ``"1"`` / ``"yes"`` (a state value read from JSON or from a CLI flag)."""
    if isinstance(v, str):
        return v.strip().lower() in ("1", "true", "yes", "y")
    return bool(v)


def decide(
    text: object, exit_code: int | None, container_state: dict[str, Any] | None, planned_total: int | None
) -> Verdict:
    """The verdict for a log text (arguments as :func:`dapo_ops.core.classify.classify`, which never raises)."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", errors="replace")
    elif not isinstance(text, str):
        text = str(text)
    log = Log(text)
    f = read_facts(log)
    if exit_code is None:
        exit_code = f.exit_code
        if exit_code is None:
            ec = _state_get(container_state, "ExitCode")
            if ec is not None and str(_state_get(container_state, "Status") or "").lower() == "exited":
                try:
                    exit_code = int(ec)
                except (TypeError, ValueError):
                    exit_code = None
    if exit_code is not None and exit_code < 0:
        exit_code = 128 - exit_code
    total = planned_total if planned_total else f.total
    base: dict[str, Any] = {"step": f.step, "total": total}
    if exit_code is not None:
        base["exit_code"] = exit_code

    hits = scan(log)
    # a runtime / operator code printed next to an OOM or a collective failure is its echo, not a kernel fault
    oom_lines = [h.line for h in hits if h.sig.name == "device-oom"]
    hits = [
        h
        for h in hits
        if not (
            h.sig.name == "kernel-fault" and (_comm_echo(log, h.line) or any(abs(h.line - o) <= 10 for o in oom_lines))
        )
    ]
    # An error followed by later progress did not stop the run: it is a non-fatal signal.
    fatal = [h for h in hits if h.sig.fatal and h.line > f.step_line]
    nonfatal = [h for h in hits if not h.sig.fatal or h.line <= f.step_line]

    # 1. success facts
    done_line = max(
        f.final_val,
        f.progress_done,
        f.total_time,
        f.step_line if (f.step is not None and total and f.step >= total) else -1,
    )
    if done_line >= 0 or (exit_code == 0 and not [h for h in fatal if h.sig.tier <= COLLECTIVE]):
        d = dict(base)
        if done_line >= 0 and any(h.line > done_line for h in fatal):
            d["teardown_error"] = True
        return mk(
            "success", d, ev(log, *(x for x in (f.step_line, f.final_val, f.progress_done, f.total_time) if x >= 0))
        )

    # 2. container state
    if _truthy(_state_get(container_state, "OOMKilled")):
        d = dict(
            base,
            cause="oom-killed",
            phase=phase_of(log, len(log.lines) - 1, back=12, frames_only=False),
            ckpt_step=f.ckpt_step,
        )
        return mk("oom-host", d, ["docker inspect: State.OOMKilled=true"] + ev(log, len(log.lines) - 1))
    exists = _state_get(container_state, "exists")
    status = str(_state_get(container_state, "Status") or "").lower()
    if (exists is not None and not _truthy(exists)) or status in ("missing", "removed", "not-found"):
        return mk("container-missing", dict(base), [f"container state: {status or 'does not exist'}"])

    # 3. specific root cause: earliest across ranks
    root = [h for h in fatal if h.sig.tier == ROOT]
    killed = killed_line(log)
    if killed is not None and killed < f.step_line:  # something was killed, but training went on
        killed = None
    if root:
        # network trouble is often printed as a warning before the real failure (the hub lookup falls back to
        # the local cache): any other specific root cause wins over it, whatever the order.
        main = [h for h in root if h.sig.cls != "network"] or root
        # a device list naming devices the container lacks explains the device errors printed before it
        main = [h for h in main if h.sig.name == "visible-devices"] + [
            h for h in main if h.sig.name != "visible-devices"
        ]
        return verdict_for(log, f, base, main[0], main, fatal)
    if killed is not None:
        d = dict(base, cause="killed", phase=phase_of(log, killed, back=12, frames_only=False), ckpt_step=f.ckpt_step)
        return mk("oom-host", d, ev(log, killed) + exit_ev(exit_code))
    # 4. collective, unless a real traceback on another rank came first (first look for an earlier error on any
    #    rank, OOM or crash; if one exists, classify that)
    coll = [h for h in fatal if h.sig.tier == COLLECTIVE]
    if coll:
        first = _earlier_crash(log, coll, fatal)
        if first is not None:
            return mk(
                "crash-other",
                dict(base, cause="earlier-error"),
                ev(log, first.line) + [f"(then collective errors: {log.lines[coll[0].line].strip()[:160]})"],
            )
        return verdict_for(log, f, base, coll[0], coll, fatal)
    # 5. weak network exception lines
    weak = [h for h in fatal if h.sig.tier == WEAK]
    if weak:
        return verdict_for(log, f, base, weak[0], weak, fatal)
    # 6. exit code and generic crashes
    generic = [h for h in fatal if h.sig.tier == GENERIC]
    late_401 = [h for h in hits if h.sig.name == "tracker-401" and h.line > f.step_line]
    if late_401 and generic and exit_code not in (None, 0, 137):
        # a tracker 401 with no step after it, then a traceback and a failed exit: the login itself failed
        return mk("auth-error", dict(base, fatal=True), ev(log, late_401[0].line) + generic_ev(log, generic))
    if exit_code == 137:  # no error in the log: killed from outside (an operator, a scheduler, the OOM killer
        # whose counter the supervisor could not read); the ladder's policy for it is ladder.decide's
        return mk(
            "crash-other",
            dict(base, cause="sigkill", **({} if generic else {"external": True})),
            generic_ev(log, generic) + exit_ev(exit_code),
        )
    if exit_code == 139:
        return mk("crash-other", dict(base, cause="segfault"), generic_ev(log, generic) + exit_ev(exit_code))
    if generic or (exit_code not in (None, 0)):
        d = dict(base)
        if exit_code == 143:
            d["cause"] = "sigterm"
            if not generic:
                d["external"] = True
        elif exit_code == 134:
            d["cause"] = "abort"
        return mk("crash-other", d, generic_ev(log, generic) + exit_ev(exit_code))
    # 7. non-fatal signals while the process runs (or its state is unknown)
    nf_auth = [h for h in nonfatal if h.sig.cls == "auth-error"]
    if nf_auth:
        return mk("auth-error", dict(base, fatal=False), ev(log, nf_auth[-1].line))
    nf_net = [h for h in nonfatal if h.sig.cls == "network"]
    if nf_net:
        return mk("network", dict(base, fatal=False, cause="tracker"), ev(log, nf_net[-1].line))
    return mk("crash-other", dict(base, inconclusive=True), ev(log, f.step_line) if f.step_line >= 0 else [])


_SYMPTOM_EXC_RX = re.compile(
    r"connection (?:closed|reset|refused|aborted)|broken pipe|timed? ?out|distbackenderror|nccl|hccl|gloo"
    r"|raytaskerror|actordiederror|worker died|process group|watchdog|socket|store|rendezvous|sigterm|keyboardinterrupt"
)


def _earlier_crash(log: Log, coll: list[Hit], fatal: list[Hit]) -> Hit | None:
    """A real Python exception (inside a traceback, not itself a communication symptom) printed before
    the first collective error: the root cause the other ranks' timeouts are waiting on."""
    coll_lines = {h.line for h in coll}
    for h in fatal:
        if h.line >= coll[0].line:
            break
        if h.sig.name != "exception" or h.line in coll_lines:
            continue
        ll = log.low_line(h.line)
        if _SYMPTOM_EXC_RX.search(ll):
            continue
        if any(
            'file "' in log.low_line(j) or TRACEBACK_START in log.low_line(j) for j in range(max(0, h.line - 4), h.line)
        ):
            return h
    return None


_KERNEL_WORDS_RX = re.compile(r"aicore|ai core|aivec|aic error|vector core|exception of|illegal|trap")


def _comm_echo(log: Log, i: int) -> bool:
    """A runtime / operator code (EE9999, EZ9999, EH9999, 5xxxxx) that only repeats a collective failure next to it
    (HCCL task / notify timeout, a remote rank's error, a device task timeout), without an AI Core / vector fault
    of its own."""
    # (torch_npu prints the ACL code, then ERRss100, the "[Error]" advice and the CANN EIxxxx record: up to ~6
    # lines after the code line)
    near = " ".join(log.low_line(j) for j in range(max(0, i - 3), min(len(log.lines), i + 8)))
    # (a device task / stream-sync TIMEOUT, ACL 107020 / 507046 behind EH9999 / EE1002, is a wait, not a fault)
    return bool(
        re.search(
            r"hccl|notify|remote rank|\bei\d{4}\b|task timeout|stream sync(?:hronize)? timeout"
            r"|\b(?:507046|107020)\b",
            near,
        )
    ) and not _KERNEL_WORDS_RX.search(near)
