"""The verdict of the failure classifier (:mod:`dapo_ops.core.classify`): which hit of the tail it is, and what it
carries.

Which hit: :func:`decide`; what it carries: :func:`verdict_for` (the detail each class carries -- phase, role, KV
direction, node, address, failing key, cause, numbers from the message --, its evidence lines, and the action and
hint texts of ``dapo_ops/core/classify/hints.py``, the action kind of the failure policy
``dapo_ops/core/policy.py``).

Precedence (docs/troubleshooting.md, generated from ``dapo_ops/core/classify/docs.py``):
    1. success facts: last ``step:N`` >= planned total (``Total training steps: N`` or
       the ``Training Progress`` bar), ``Final validation metrics``, exit code 0; exit 0 with the last step below the
       planned total and no final line -> ``data-ran-out`` (verl's epoch limit ended the loop early);
    2. container state: ``OOMKilled=true`` (or the supervisor's grown oom_kill counter) -> ``oom-host``, unless the
       log names a stronger root cause (any but a lost node / Ray head or a host / Ray OOM row: then that cause,
       ``detail["oom_killed"]`` set); container gone -> ``container-missing``;
    3. the earliest specific root cause across all ranks (device / KV-cache / Ray / host
       OOM, config, data, auth, network, container, specific crashes such as thread
       exhaustion or an impossible allocation size); a module the trainer cannot import (config-error, cause
       ``missing-module``) only when no other root cause is in the log, network trouble last;
    4. collective (HCCL/NCCL) timeouts and errors -> ``hccl-timeout`` (usually a symptom), unless a real
       traceback on another rank came first (then that error is the cause: ``crash-other``, ``earlier-error``);
    5. weak network exceptions (``Connection refused`` ...) -> ``network``;
    6. exit code / generic tracebacks -> ``crash-other``;
    7. non-fatal tracker trouble while the process runs -> ``keep-running``; no evidence -> inconclusive.
An error followed by later ``step:`` lines did not stop the run and only counts as a non-fatal signal.
Keys named here are verl 0.9.1's (``verl/trainer/config/_generated_ppo_trainer.yaml``); the messages they are read
from are cited at each signature (``dapo_ops/core/classify/signatures.py``).

STDLIB ONLY.
"""

from __future__ import annotations

import re
from typing import Any

from dapo_ops.core import health, logformat
from dapo_ops.core.classify import device_codes, startcheck
from dapo_ops.core.classify.hints import action_text, hint_text
from dapo_ops.core.classify.logtail import (
    STEP_RX,
    Facts,
    Hit,
    Log,
    alloc_gib,
    killed_line,
    node,
    nonsense,
    ray_oom_node,
    read_facts,
    scan,
    total_gib,
    zero_total,
)
from dapo_ops.core.classify.phase import (
    TRACEBACK_START,
    oom_context,
    phase_of,
    ray_call_line,
    ray_oom_phase,
    role_of,
    side_of,
)
from dapo_ops.core.classify.signatures import (
    SIGNATURES,
    COLLECTIVE,
    GENERIC,
    OOM_WORDS_RX,
    ROOT,
    WEAK,
    divisible_key,
    import_failure,
)
from dapo_ops.core.classify.verdict import Verdict
from dapo_ops.core import policy

# --------------------------------------------------------------------------- which hit is the verdict


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


def _as_text(text: object) -> str:
    """``text`` as a str: bytes decoded as UTF-8 (undecodable bytes replaced), anything else ``str()``-ed."""
    if isinstance(text, (bytes, bytearray)):
        return bytes(text).decode("utf-8", errors="replace")
    return text if isinstance(text, str) else str(text)


def _exit_code(given: int | None, logged: int | None, container_state: dict[str, Any] | None) -> int | None:
    """The attempt's exit status: ``given`` (the caller's), else the one the log states, else an exited container's
    ``State.ExitCode``; a negative one (a signal, as Python reports it) becomes the shell's ``128 - code``."""
    exit_code = given if given is not None else logged
    if exit_code is None:
        ec = _state_get(container_state, "ExitCode")
        if ec is not None and str(_state_get(container_state, "Status") or "").lower() == "exited":
            try:
                exit_code = int(ec)
            except (TypeError, ValueError):
                exit_code = None
    if exit_code is not None and exit_code < 0:
        exit_code = 128 - exit_code
    return exit_code


def _screened_hits(log: Log) -> list[Hit]:
    """The signature hits of ``log`` (:func:`scan`) less the ones that only echo another error."""
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
    # hits that count only in their context (_SCREENS)
    return [h for h in hits if _SCREENS.get(h.sig.name, _always)(log, h)]


def _root_causes(root: list[Hit]) -> list[Hit]:
    """The specific root-cause hits (tier ``ROOT``, non-empty) in the order :func:`decide` trusts them: the first
    is the verdict's."""
    # network trouble is often printed as a warning before the real failure (the hub lookup falls back to
    # the local cache): any other specific root cause wins over it, whatever the order.
    main = [h for h in root if h.sig.cls != "network"] or root
    # an import failure is the cause only when no other root cause is: a caught import (an optional
    # dependency, logged with its traceback) must not hide the real failure, and a more specific row on the
    # same line reads it better (runtime-env: "ImportError: libhccl.so: cannot open shared object file")
    main = [h for h in main if h.sig.name != "missing-module"] or main
    # numpy 2 beside modules built for numpy 1 (a banner, often only a warning) is the cause only when nothing
    # else is, or when what else there is are the CANN / runtime codes it explains
    numpy = [h for h in main if h.sig.name == "numpy-abi"]
    rest = [h for h in main if h.sig.name != "numpy-abi"]
    main = numpy if numpy and all(h.sig.name in NUMPY_EXPLAINS for h in rest) else (rest or main)
    # a device list naming devices the container lacks explains the device errors printed before it
    return [h for h in main if h.sig.name == "visible-devices"] + [h for h in main if h.sig.name != "visible-devices"]


def decide(
    text: object, exit_code: int | None, container_state: dict[str, Any] | None, planned_total: int | None
) -> Verdict:
    """The verdict for a log text (arguments as :func:`dapo_ops.core.classify.classify`, which never raises)."""
    log = Log(_as_text(text))
    f = read_facts(log)
    exit_code = _exit_code(exit_code, f.exit_code, container_state)
    total = planned_total if planned_total else f.total
    base: dict[str, Any] = {"step": f.step, "total": total}
    if exit_code is not None:
        base["exit_code"] = exit_code

    hits = _screened_hits(log)
    # An error followed by later progress did not stop the run: it is a non-fatal signal.
    fatal = [h for h in hits if h.sig.fatal and h.line > f.step_line]
    nonfatal = [h for h in hits if not h.sig.fatal or h.line <= f.step_line]

    # training health (dapo_ops/core/health.py, the rule the live supervisor runs): a NaN / exploding metric, verl's
    # skipped update or an absurd lr names a run that goes on, or one that "succeeded" learning nothing
    bad = _diverged(log, base)

    # 1. success facts
    done_line = max(
        f.final_val,
        f.progress_done,
        f.total_time,
        f.step_line if (f.step is not None and total and f.step >= total) else -1,
    )
    if done_line >= 0 or (exit_code == 0 and not [h for h in fatal if h.sig.tier <= COLLECTIVE]):
        return bad if bad is not None else _ended_verdict(log, f, base, done_line, exit_code, fatal)

    # 2. container state: an OOM kill (docker's OOMKilled, or the supervisor's grown oom_kill counter) is the verdict
    #    unless the log names a stronger cause (_stronger_than_oom_kill); a container that is gone always is
    main = _root_causes([h for h in fatal if h.sig.tier == ROOT])
    by_state = _container_verdict(log, f, base, container_state, _stronger_than_oom_kill(main))
    if by_state is not None:
        return by_state

    # 3. specific root cause: earliest across ranks
    killed = killed_line(log)
    if killed is not None and killed < f.step_line:  # something was killed, but training went on
        killed = None
    if main:
        return verdict_for(log, f, base, main[0], main, fatal)
    if bad is not None:  # the metrics went bad before whatever generic end followed
        return bad
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
    # 6. exit code and generic crashes; 7. non-fatal signals
    return _exit_verdict(log, f, base, exit_code, hits, fatal, nonfatal)


def _stronger_than_oom_kill(main: list[Hit]) -> bool:
    """Whether the log's root cause (``main[0]``, :func:`_root_causes`) beats an OOM kill of the container: a
    specific error the kill does not explain (a device OOM, a config / data / disk error ...). A dead worker, a
    collective timeout, a lost node or Ray head, a host / Ray OOM row are what the kill leaves behind."""
    if not main:
        return False
    h = main[0]
    return h.sig.name not in OOM_KILL_SYMPTOMS and h.sig.cls not in ("oom-host", "oom-ray")


def _container_verdict(
    log: Log, f: Facts, base: dict[str, Any], container_state: dict[str, Any] | None, stronger: bool = False
) -> Verdict | None:
    """What the container's ``docker inspect`` ``.State`` says by itself: ``oom-host`` when the kernel's OOM killer
    ended it and the log names no ``stronger`` cause (then None: that cause is the verdict, with
    ``detail["oom_killed"]`` added to ``base``), ``container-missing`` when it is gone; else None."""
    if _truthy(_state_get(container_state, "OOMKilled")) and stronger:
        base["oom_killed"] = True  # the kill is recorded beside the stronger cause, never lost
    elif _truthy(_state_get(container_state, "OOMKilled")):
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
    return None


def _ended_verdict(
    log: Log, f: Facts, base: dict[str, Any], done_line: int, exit_code: int | None, fatal: list[Hit]
) -> Verdict:
    """:func:`decide`'s verdict for a run that ended by itself (``done_line``: the last line that says so, -1 when
    only exit 0 did): ``success``, or ``data-ran-out`` below the planned total (``base["total"]``)."""
    d = dict(base)
    total = base["total"]
    last = f.step if f.step is not None else f.resumed  # a resume past the epoch limit trains no step
    if done_line < 0 and last is not None and total and last < total:
        # exit 0 below the planned total and no "Final validation metrics": verl's V1 loop ran out of epochs
        # (verl/trainer/ppo/v1/trainer_base.py:467; its last step prints the final line, :525-529)
        d["step"] = last
        return mk("data-ran-out", dict(d, epochs=f.epochs), ev(log, f.step_line) + exit_ev(exit_code))
    if done_line >= 0 and any(h.line > done_line for h in fatal):
        d["teardown_error"] = True
    return mk("success", d, ev(log, *(x for x in (f.step_line, f.final_val, f.progress_done, f.total_time) if x >= 0)))


def _exit_verdict(
    log: Log,
    f: Facts,
    base: dict[str, Any],
    exit_code: int | None,
    hits: list[Hit],
    fatal: list[Hit],
    nonfatal: list[Hit],
) -> Verdict:
    """:func:`decide`'s last steps, for a log with no root-cause, collective or weak-network error: the exit code
    and the generic tracebacks, then the non-fatal signals (:func:`_nonfatal_verdict`)."""
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
        wrapped = _wrapped_error(log, generic)
        if wrapped is not None:  # Ray's unpickle failure / vLLM's engine death: the error they wrap is the verdict
            d.update(wrapped[0])
            return mk("crash-other", d, ev(log, *wrapped[1]) + exit_ev(exit_code))
        if exit_code == 143:
            d["cause"] = "sigterm"
            if not generic:
                d["external"] = True
        elif exit_code == 134:
            d["cause"] = "abort"
        elif _worker_died(log, generic):
            d.update(_dead_worker(log, generic), cause="worker-died")
        return mk("crash-other", d, generic_ev(log, generic) + exit_ev(exit_code))
    # non-fatal signals while the process runs (or its state is unknown)
    return _nonfatal_verdict(log, f, base, nonfatal)


#: an exception line that only says a Ray worker / actor died (ray/exceptions.py ActorDiedError, RayActorError, the
#: RayTaskError(ActorDiedError) wrapper): the worker's death itself, not an error it raised
_DIED_EXC_RX = re.compile(r"actordiederror|rayactorerror|actorunavailableerror|workercrashederror")


def _worker_died(log: Log, generic: list[Hit]) -> bool:
    """Whether the generic evidence is a Ray worker that died with no error of its own: an ``actor-died`` line (Ray's
    "The actor died unexpectedly" / the raylet's "A worker died or was killed") and no exception line but the death's
    own. No OOM evidence either: an OOM row or the OOM-kill counter (the container state) decided before this."""
    if not any(h.sig.name == "actor-died" for h in generic):
        return False
    return all(_DIED_EXC_RX.search(log.low_line(h.line)) for h in generic if h.sig.name == "exception")


#: the raylet's "A worker died or was killed ..." line: ``Worker IP address: <ip> Worker port: <n> Worker PID: <pid>``
_RAYLET_WORKER_RX = re.compile(r"worker ip address: (\S+) .*?worker pid: (\d+)")
#: ActorDiedError's fields (ray/exceptions.py:497-510): ``\tclass_name: ...``, ``\tpid: <pid>``, ``\tip: <ip>``
_ACTOR_FIELD_RX = re.compile(r"^\s*(class_name|pid|ip): ?(\S+)\s*$")


def _dead_worker(log: Log, generic: list[Hit]) -> dict[str, Any]:
    """The dead Ray worker a ``worker-died`` verdict names: ``worker_pid``, ``node`` (its IP) and ``actor`` (the
    actor class) from ActorDiedError's fields after its message, else from the raylet's "A worker died or was
    killed" line; what neither gives is left out."""
    out: dict[str, Any] = {}
    for h in generic:
        low = log.low_line(h.line)
        m = _RAYLET_WORKER_RX.search(low)
        if m:
            out.setdefault("node", m.group(1))
            out.setdefault("worker_pid", m.group(2))
        if "actordiederror" in low:
            for j in range(h.line + 1, min(len(log.lines), h.line + 1 + _ACTOR_FIELDS)):
                f = _ACTOR_FIELD_RX.match(log.lines[j])
                if f:
                    key = {"class_name": "actor", "pid": "worker_pid", "ip": "node"}[f.group(1)]
                    out[key] = f.group(2).rsplit(".", 1)[-1] if key == "actor" else f.group(2)
    return out


def _nonfatal_verdict(log: Log, f: Facts, base: dict[str, Any], nonfatal: list[Hit]) -> Verdict:
    """:func:`decide`'s last step, for a log with no fatal error: a non-fatal auth, tracker-server or network signal
    (the run goes on), else ``crash-other`` marked ``inconclusive``."""
    nf_auth = [h for h in nonfatal if h.sig.cls == "auth-error"]
    if nf_auth:
        return mk("auth-error", dict(base, fatal=False), ev(log, nf_auth[-1].line))
    nf_cfg = [h for h in nonfatal if h.sig.cls == "config-error" and h.sig.name in TRACKER_SERVER_SIGS]
    if nf_cfg:
        return mk("config-error", _tracker_detail(log, dict(base), nf_cfg[-1], fatal=False), ev(log, nf_cfg[-1].line))
    nf_net = [h for h in nonfatal if h.sig.cls == "network"]
    if nf_net:
        return mk("network", dict(base, fatal=False, cause="tracker"), ev(log, nf_net[-1].line))
    return mk("crash-other", dict(base, inconclusive=True), ev(log, f.step_line) if f.step_line >= 0 else [])


_SYMPTOM_EXC_RX = re.compile(
    r"connection (?:closed|reset|refused|aborted)|broken pipe|timed? ?out|distbackenderror|nccl|hccl|gloo"
    r"|raytaskerror|actordiederror|worker died|process group|watchdog|socket|store|rendezvous|sigterm|keyboardinterrupt"
)


def _diverged(log: Log, base: dict[str, Any]) -> Verdict | None:
    """The ``diverged`` verdict of a log whose training metrics went bad (:func:`dapo_ops.core.health.scan_lines`),
    else None. Recurrence is the supervisor's to judge: a log alone gives the first-occurrence policy (retry once
    from the last checkpoint before the bad step)."""
    flag, i, _ = health.scan_lines(log.lines)
    if flag is None or i is None:
        return None
    return mk("diverged", dict(base, **health.verdict_detail(flag, step=base.get("step"))), ev(log, i))


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


# --------------------------------------------------------------------------- what the verdict carries

# --------------------------------------------------------------------------- data: signature name -> detail

#: the Hydra / verl key a config-error signature names when the message itself does not (``full_key:`` or
#: ``Could not override`` lines next to it are read first)
CONFIG_KEYS: dict[str, str] = {
    "hydra-load": "--config-name",
    "hydra-primary": "--config-name",
    "gpus-less": "trainer.n_gpus_per_node",
    "pool-unsatisfied": "trainer.n_gpus_per_node",
    "tp-divisible": "actor_rollout_ref.rollout.tensor_model_parallel_size",
    "n-gpus-zero": "trainer.n_gpus_per_node",
    "rollout-mode": "actor_rollout_ref.rollout.mode",
    "rollout-pp": "actor_rollout_ref.rollout.pipeline_model_parallel_size",
    "trainer-mode": "trainer.v1.trainer_mode",
    "token-budget": "actor_rollout_ref.actor.ppo_max_token_len_per_gpu",
    "model-len-pos": "actor_rollout_ref.rollout.max_model_len",
    "batched-tokens": "actor_rollout_ref.rollout.max_num_batched_tokens",
    "batch-divisible": "data.train_batch_size",
    "batch-ge-mini": "actor_rollout_ref.actor.ppo_mini_batch_size",
    "remove-padding": "actor_rollout_ref.model.use_remove_padding",
    "bucket": "actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes",
    "not-supported": "trainer.logger",
    "hybrid-engine": "actor_rollout_ref.hybrid_engine",
    "resume-world-size": "trainer.resume_mode",
    "resume-megatron": "trainer.resume_mode",
    "data-missing": "data.train_files",
    "model-path": "actor_rollout_ref.model.path",
    "raylet-register": "ray_kwargs.ray_init.num_cpus",
    "chat-template": "actor_rollout_ref.model.custom_chat_template",
}
#: Hydra's override-application rows (cause ``hydra-override``) -> ``detail["op"]``: what the override tried
#: (:data:`dapo_ops.core.classify.hints.OVERRIDE_FIXES` says how to fix each)
HYDRA_OPS: dict[str, str] = {
    "hydra-override": "override",
    "hydra-struct": "override",
    "hydra-append": "append",
    "hydra-delete": "delete",
    "hydra-delete-value": "delete-value",
    "hydra-group": "group",
    "hydra-merge": "merge",
}
#: config-error signature -> ``detail["cause"]`` (selects the hint); others have none
CONFIG_CAUSES: dict[str, str] = {
    "hydra-override": "hydra-override",
    "hydra-struct": "hydra-override",
    "hydra-append": "hydra-override",
    "hydra-delete": "hydra-override",
    "hydra-delete-value": "hydra-override",
    "hydra-group": "hydra-override",
    "hydra-merge": "hydra-override",
    "dataclass-kwarg": "stale-key",
    "omegaconf-key": "stale-key",
    "gpus-less": "gpus",
    "pool-unsatisfied": "gpus",
    "tp-divisible": "tp",
    "token-budget": "token-budget",
    "resume-world-size": "resume-layout",
    "resume-megatron": "resume-layout",
    "data-missing": "data-missing",
    "model-path": "model-path",
    "entry-module": "entry-module",
    "missing-module": "missing-module",
    "raylet-register": "ray-cpus",
    "chat-template": "chat-template",
    "runtime-env": "runtime-env",
    "driver-lib": "driver-lib",
    "toolchain": "toolchain",
    "numpy-abi": "numpy-abi",
    "cann-env": "cann-env",
    "tracker-server": "tracker-version",
    "tracker-server-log": "tracker-version",
    "visible-devices": "visible-devices",
}
#: oom-host signature -> cause (default ``kernel-oom``)
HOST_CAUSES: dict[str, str] = {
    "pinned-host-oom": "pinned-memory",
    "loader-killed": "dataloader-killed",
    "host-alloc": "host-alloc",
}
#: data-error signature -> the key to change (default ``data.train_files``) and the cause (default none)
DATA_KEYS: dict[str, str] = {
    "seq-too-long": "data.max_prompt_length",
    "prompt-too-long": "data.max_prompt_length",
    "dapo-give-up": "algorithm.filter_groups.max_num_gen_batches",
}
DATA_CAUSES: dict[str, str] = {"data-schema": "schema", "dapo-give-up": "too-difficult", "empty-data": "empty"}
#: oom-kv-cache signatures that mean "free the devices first" (the rest: raise the share / shorten max_model_len)
KV_CLEANUP = ("kv-free-below-util", "kv-profiling-dirty")
#: network signatures -> cause (the Ray head, the hub / a proxy)
RAY_HEAD_SIGS = ("gcs-connect", "gcs-cluster-id", "ray-no-instance", "gcs-lost")
#: root-cause rows an OOM kill explains: the OOM killer's victim was the raylet / GCS (a node marked dead, the Ray
#: head unreachable) or the host-memory rows themselves; any other root cause the log names is stronger
OOM_KILL_SYMPTOMS = ("node-died",) + RAY_HEAD_SIGS
#: crash-other signature -> ``detail["cause"]`` where it is not the signature's name
CRASH_CAUSES: dict[str, str] = {}
#: the tracker-server rows (a tracker server that answers this client with 404 / 5xx)
TRACKER_SERVER_SIGS = ("tracker-server", "tracker-server-log")
#: root-cause rows a numpy-2 hit explains (CANN's op compiler and the runtime codes it prints once numpy 2 broke it)
NUMPY_EXPLAINS = ("kernel-fault", "device-unavailable", "cann-env", "missing-module")
#: data-error signature -> the detail it carries beside key / cause (the reward dispatcher's data_source)
_REWARD_FRAME_RX = re.compile(r"in (?:default_compute_score|_default_compute_score|_select_rm_score_fn)\b")
HUB_SIGS = ("proxy", "hub")

# communicator set-up (HCCL: communicator init, then transport / link set-up; hcclug "three phases"), not execution
# (torch c10d: "is setting up NCCL communicator and retrieving ncclUniqueId ... via c10d key-value store", torch_npu
# the same with HCCL / hcclUniqueId; vLLM's
# worker init_device builds its communicator; the store's own connect timeout)
_COMM_INIT_RX = re.compile(
    r"hcclcomminit|comminitrootinfo|\bei0009\b|transport init|createlink|create dest"
    r"|init_communicator|ncclcomminit|failed to bind the ip port|[nh]ccluniqueid"
    r"|method init_device|client socket has timed out|tcp client failed to connect"
    r"|initcommrootinfo|hccl initialize failed|hcclcomm init"
)


# --------------------------------------------------------------------------- building a verdict


def ev(log: Log, *idx: int) -> list[str]:
    """The evidence: lines ``idx`` stripped, cut to 400 characters, without blanks and repeats, at most 6."""
    out: list[str] = []
    for i in idx:
        if 0 <= i < len(log.lines):
            s = log.lines[i].strip()
            if len(s) > 400:
                s = s[:397] + "..."
            if s and s not in out:
                out.append(s)
    return out[:6]


def mk(cls: str, detail: dict[str, Any], evidence: list[str]) -> Verdict:
    """The :class:`Verdict` (``None`` detail values dropped; the action kind and action from the failure policy,
    ``dapo_ops/core/policy.py``; the hint from hints)."""
    detail = {k: v for k, v in detail.items() if v is not None}
    return Verdict(
        cls=cls,
        action_kind=policy.kind(cls, detail),
        action=action_text(cls, detail),
        hint=hint_text(cls, detail),
        evidence=evidence,
        detail=detail,
    )


def exit_ev(exit_code: int | None) -> list[str]:
    """``["exit code N"]`` (evidence), or nothing when the code is unknown."""
    return [f"exit code {exit_code}"] if exit_code is not None else []


def generic_ev(log: Log, generic: list[Hit]) -> list[str]:
    """Evidence from generic crash hits: the innermost (last) exception line and the first actor-died line."""
    if not generic:
        return []
    # innermost error: the last exception line (Ray wrappers excluded by the signature)
    exc = [h for h in generic if h.sig.name == "exception"]
    died = [h for h in generic if h.sig.name != "exception"]
    idx = []
    if exc:
        idx.append(exc[-1].line)
    if died:
        idx.append(died[0].line)
    return ev(log, *sorted(set(idx)))


# --------------------------------------------------------------------------- per class


def _worded_oom_line(log: Log, h: Hit, same_tier: list[Hit]) -> int:
    """The line to judge a device OOM on: ``h``'s, unless it is a bare device code (torch_npu's ``ERR00006 PTA
    memory error``, which the worker prints on its own stream before the driver's report) and a later device-OOM
    hit of the same tier says it in the allocator's words (``NPU out of memory. Tried to allocate ...``: the
    RayTaskError's innermost line, under the worker's frames): that line names the allocation and the frames name
    the phase and side."""
    if OOM_WORDS_RX.search(log.low_line(h.line)):
        return h.line
    for x in same_tier:
        if x.sig.name == "device-oom" and x.line > h.line and OOM_WORDS_RX.search(log.low_line(x.line)):
            return x.line
    return h.line


def verdict_for(log: Log, f: Facts, base: dict[str, Any], h: Hit, same_tier: list[Hit], fatal: list[Hit]) -> Verdict:
    """The verdict for hit ``h`` (the chosen root cause); ``same_tier``: the hits of its precedence tier in line
    order (collective hits say together whether the communicator ever came up), ``fatal``: all fatal hits."""
    if h.sig.name == "device-oom":
        return device_oom_verdict(log, dict(base), _worded_oom_line(log, h, same_tier))
    return _BY_CLASS.get(h.sig.cls, _crash)(log, f, dict(base), h, same_tier, fatal)


def _kv_cache(log: Log, f: Facts, d: dict[str, Any], h: Hit, same_tier: list[Hit], fatal: list[Hit]) -> Verdict:
    i, name = h.line, h.sig.name
    if name == "kv-free-below-util" and zero_total(log.low_line(i)):
        d["cause"] = "device-unavailable"
        return mk("crash-other", d, ev(log, i))
    d["kv_direction"] = "cleanup" if name in KV_CLEANUP else "raise"
    # (sglang-mem: "Not enough memory. Please try to increase --mem-fraction-static": the KV pool is too small)
    d["phase"] = "rollout-init"
    return mk(h.sig.cls, d, ev(log, i))


def _ray_oom(log: Log, f: Facts, d: dict[str, Any], h: Hit, same_tier: list[Hit], fatal: list[Hit]) -> Verdict:
    i = h.line
    d["phase"] = ray_oom_phase(log, i) or phase_of(log, i)
    d["node"] = ray_oom_node(log, i) or node(log, i)
    d["ckpt_step"] = f.ckpt_step if d["phase"] == "checkpoint-save" else None
    nxt = [j for j in range(i + 1, min(len(log.lines), i + 3)) if "memory on the node" in log.low_line(j)]
    return mk(h.sig.cls, d, ev(log, i, *nxt))


def _host_oom(log: Log, f: Facts, d: dict[str, Any], h: Hit, same_tier: list[Hit], fatal: list[Hit]) -> Verdict:
    i = h.line
    d["phase"] = phase_of(log, i, back=12, frames_only=False)
    d["ckpt_step"] = f.ckpt_step
    d["cause"] = HOST_CAUSES.get(h.sig.name, "kernel-oom")
    return mk(h.sig.cls, d, ev(log, i))


def _config(log: Log, f: Facts, d: dict[str, Any], h: Hit, same_tier: list[Hit], fatal: list[Hit]) -> Verdict:
    i, name = h.line, h.sig.name
    if name == "missing-module":
        return _missing_module(log, f, d, i)
    if name in TRACKER_SERVER_SIGS:
        return mk("config-error", _tracker_detail(log, d, h, fatal=True), ev(log, i))
    if name in ENV_SIGS:
        return mk("config-error", _env_detail(log, d, h, same_tier), ev(log, i, *_env_more(log, h)))
    i = h.line  # the exception line, never a frame's source line (logtail.scan)
    if name in VERL_CHECK_SIGS:
        d.update(startcheck.check_detail(log, i, name))
        return mk("config-error", d, ev(log, *startcheck.evidence_lines(log, i)))
    d["key"] = _config_key(log, h)
    d["cause"] = CONFIG_CAUSES.get(name)
    d.update(_hydra_op(log, h))
    if name == "data-missing":
        m = re.search(r"'([^'\n]+\.(?:parquet|jsonl?|csv|arrow))'", log.lines[i], re.I) or re.search(
            r"(/[^\s'\"]+\.(?:parquet|jsonl?|csv|arrow))\b", log.lines[i], re.I
        )
        if m:
            d["path"] = m.group(1)
            if re.search(r"val_files=[^\s']*" + re.escape(m.group(1).lower()), log.low):
                d["key"] = "data.val_files"
    if name == "gpus-less":
        d["available"], d["desired"] = float(h.m.group(1)), float(h.m.group(2))
    elif name == "tp-divisible":
        d["world_size"], d["tp"] = int(h.m.group(1)), int(h.m.group(2))
    elif name == "token-budget":
        m = re.search(r"max_token_len=(\d+) and max_seq_len=(\d+)", log.low_line(i))
        if m:
            d["value"], d["need"] = int(m.group(1)), int(m.group(2))
    return mk(h.sig.cls, d, ev(log, i, *_full_key_line(log, i)))


def _hydra_op(log: Log, h: Hit) -> dict[str, str]:
    """``{"op": ...}`` of a Hydra override-application hit (:data:`HYDRA_OPS`), else ``{}``. A ``Could not override``
    followed by ``Did you mean to override ...?`` / ``To append to your default list use ...`` is a config group's
    (hydra-core hydra/_internal/defaults_list.py), not a key's."""
    op = HYDRA_OPS.get(h.sig.name)
    if op is None:
        return {}
    if op == "override" and any(
        "default list use" in ln or "did you mean to override" in ln
        for ln in (log.low_line(j) for j in range(h.line, min(len(log.lines), h.line + 4)))
    ):
        op = "group"
    return {"op": op}


def _missing_module(log: Log, f: Facts, d: dict[str, Any], i: int) -> Verdict:
    """config-error, cause ``missing-module``: the import failure at line ``i`` (``form`` / ``module`` / ``name`` of
    :func:`~dapo_ops.core.classify.signatures.import_failure`; a wrapper line, ``RayTaskError(ModuleNotFoundError)``
    or transformers' ``Failed to import ... because of the following error``, names no module: the first import
    failure after it that names one does, within 200 lines and not past a ``step:`` line). ``phase``: where it died
    (``checkpoint-save`` for Megatron-Bridge's HF save after a trained step: a resume reaches the same import)."""
    form, mod, name = import_failure(log.lines[i]) or ("other", None, None)
    at = i
    if mod is None:
        for j in range(i + 1, min(len(log.lines), i + 200)):
            if STEP_RX.search(log.low_line(j)):
                break
            if log.is_echo(j):
                continue
            got = import_failure(log.lines[j])
            if got is None and j <= i + 2:  # transformers: the message continues on the next line, unprefixed
                got = import_failure("ImportError: " + log.lines[j].strip())
            if got is not None and got[1] is not None:
                (form, mod, name), at = got, j
                break
    d.update(cause=CONFIG_CAUSES["missing-module"], form=form, module=mod, name=name, phase=phase_of(log, i))
    if form in ("symbol", "library"):
        low_at = log.low_line(at)
        d["pairing"] = next((key for word, key in PAIRING_WORDS if word in low_at), None)
    if d["phase"] == "checkpoint-save":
        d["ckpt_step"] = f.ckpt_step
    return mk("config-error", d, ev(log, at, *ray_call_line(log, at), i))


#: (words in the path of a shared object that failed to load, the version pairing to check: hints.ABI_PAIRS), first
#: match wins (ATB's libraries live under Ascend/nnal/atb; torch_npu's under torch_npu/lib)
PAIRING_WORDS: tuple[tuple[str, str], ...] = (
    ("/nnal/", "atb"),
    ("/atb/", "atb"),
    ("libatb", "atb"),
    ("vllm_ascend", "vllm_ascend"),
    ("torch_npu", "torch_npu"),
    ("flash_attn", "flash_attn"),
    ("transformer_engine", "transformer_engine"),
    ("/vllm/", "vllm"),
    ("apex", "apex"),
    ("/torch/lib/", "torch"),
    ("libc10", "torch"),
)
#: the container-environment rows: their detail is :func:`_env_detail`'s
ENV_SIGS = ("runtime-env", "driver-lib", "toolchain", "numpy-abi", "cann-env")
_NUMPY_RX = re.compile(r"compiled using numpy 1\.x|_array_api not found|removed in the numpy 2\.0 release")


def _env_detail(log: Log, d: dict[str, Any], h: Hit, same_tier: list[Hit]) -> dict[str, Any]:
    """The detail of a container-environment verdict: ``cause`` (the row's, ``numpy-abi`` for CANN's op compiler
    when numpy 2's banner or errors are in the tail), ``library`` (the ``-l<lib>`` the linker missed, the header a
    compile missed, or the shared object the loader could not open)."""
    d["cause"] = CONFIG_CAUSES[h.sig.name]
    ll = log.low_line(h.line)
    if (
        h.sig.name == "cann-env"
        and any(x.sig.name == "numpy-abi" for x in same_tier)
        or (h.sig.name == "cann-env" and _NUMPY_RX.search(log.low))
    ):
        d["cause"] = "numpy-abi"
    if h.sig.name == "toolchain":
        d["library"] = next((g for g in h.m.groups() if g), None) or ("cuda" if "libcuda" in ll else None)
    else:
        m = re.search(r"(lib[\w.+-]*?\.so)[.\d]*: cannot open shared object file", log.lines[h.line], re.I)
        if m:
            d["library"] = m.group(1)
    return d


def _env_more(log: Log, h: Hit) -> list[int]:
    """Evidence after an environment hit: the failed command (Triton's gcc / CalledProcessError) or numpy's
    failure after its banner, within 6 lines."""
    for j in range(h.line + 1, min(len(log.lines), h.line + 7)):
        lj = log.low_line(j)
        if "calledprocesserror" in lj or "returned non-zero exit status" in lj or "_array_api not found" in lj:
            return [j]
    return []


def _tracker_detail(log: Log, d: dict[str, Any], h: Hit, fatal: bool) -> dict[str, Any]:
    """The detail of a tracker-server verdict: ``cause`` ``tracker-version``, ``fatal``, ``tracker`` (swanlab /
    wandb / mlflow, from the line) and ``status`` (the HTTP status the server answered, ``schema`` for a GraphQL
    field the server does not know)."""
    ll = log.low_line(h.line)
    d.update(cause="tracker-version", fatal=fatal)
    d["tracker"] = next((t for t in ("swanlab", "wandb", "mlflow") if t in ll), None)
    if d["tracker"] is None:
        d["tracker"] = "wandb" if "graphql" in ll or "w&b" in ll else "swanlab" if "/api/" in ll else None
    d["status"] = next((g for g in h.m.groups() if g), None) or ("schema" if "cannot query field" in ll else None)
    return d


def _always(log: Log, h: Hit) -> bool:
    return True


def _reward_source(log: Log, h: Hit) -> bool:
    """A bare NotImplementedError / the None.startswith AttributeError is the reward dispatcher's only under its
    frame."""
    return h.m.group(1) is not None or _reward_frame(log, h.line)


#: a frame of one-step-off's trainer loop (verl/experimental/one_step_off_policy/ray_trainer.py: fit :265,
#: fit_step :323, _fit_generate :385, _async_gen_next_batch :206)
_ONE_STEP_OFF_FRAME_RX = re.compile(
    r"one_step_off_policy[/\\]ray_trainer\.py\"?, line \d+, in (?:fit|fit_step|_fit_generate|_async_gen_next_batch)\b"
)
#: _async_gen_next_batch's other None: an error it caught and printed (ray_trainer.py:214-216), not the data's end
_GEN_ERROR = "error in async_gen_next_batch"
_FRAME_BACK = 6


def _one_step_off_ran_out(log: Log, h: Hit) -> bool:
    """The None-unpack TypeError is one-step-off running out of data only right under that trainer's frames, and
    only when _async_gen_next_batch printed no caught error before it."""
    i = h.line
    if not any(_ONE_STEP_OFF_FRAME_RX.search(log.low_line(j)) for j in range(max(0, i - _FRAME_BACK), i)):
        return False
    return _GEN_ERROR not in log.low[: log.starts[i]]


def _verl_check(log: Log, h: Hit) -> bool:
    """An AssertionError / ValueError ... line is one of verl's start-up checks of a config value only under such a
    check's frame, before the first training step (:func:`dapo_ops.core.classify.startcheck.is_check`)."""
    return startcheck.is_check(log, h.line)


#: the config-error rows of verl's own start-up checks of a value (detail: startcheck.check_detail)
VERL_CHECK_SIGS = ("verl-check", "data-format", "resume-mode")
#: signature -> whether its hit counts in its context (the rest always count)
_SCREENS = {"reward-source": _reward_source, "one-step-off-ran-out": _one_step_off_ran_out, "verl-check": _verl_check}


def _reward_frame(log: Log, i: int) -> bool:
    """True when one of the 4 lines above ``i`` is a frame of verl's reward dispatcher (``default_compute_score``,
    verl <= 0.2 ``_select_rm_score_fn``)."""
    return any(_REWARD_FRAME_RX.search(log.low_line(j)) for j in range(max(0, i - 4), i))


#: lines that only wrap another error: Ray could not unpickle the exception a worker
#: raised (ray/exceptions.py from_ray_exception: "RaySystemError: System error: Failed to unpickle serialized
#: exception", older Ray "RuntimeError: Failed to unpickle serialized exception"; ray#54341, verl#2360, verl#3618),
#: vLLM's engine died (V1 vllm/v1/engine/exceptions.py EngineDeadError "EngineCore encountered an issue. See stack
#: trace (above) for the root cause.", v1/engine/core.py "EngineCore encountered a fatal error."; V0
#: engine/async_llm_engine.py _log_task_completion "Engine background task failed", AsyncEngineDeadError "Task finished
#: unexpectedly. This should never happen! ..." / "Background loop has errored already.")
WRAPPER_RX = re.compile(
    r"failed to unpickle serialized exception|(?:async)?enginedeaderror|engine background task failed"
    r"|background loop has (?:errored|stopped)|enginecore encountered (?:an issue|a fatal error)"
    r"|task finished unexpectedly\. this should never happen"
)
#: the TypeError Ray's unpickling raises for an exception class whose __init__ wants more arguments than it pickled
#: ("TypeError: BackendCompilerFailed.__init__() missing 1 required positional argument: 'inner_exception'": a
#: torch.compile failure; "APIStatusError.__init__() missing 2 required keyword-only arguments": Mem-alpha#12)
UNPICKLE_RX = re.compile(r"typeerror: (\w+)\.__init__\(\) missing \d+ required (?:keyword-only |positional )?argument")


#: a vLLM / Python logging record's head ("ERROR 08-06 21:18:16 [core.py:700] ", V0 "ERROR 07-01 08:12:10
#: async_llm_engine.py:52] "), dropped from the error a wrapper hides
_LOG_RECORD_RX = re.compile(r"^(?:ERROR|CRITICAL) [\d-]+ [\d:.]+ (?:\[[^\]]*\]|[\w.]+:\d+\]) ")


def _wrapped_error(log: Log, generic: list[Hit]) -> tuple[dict[str, Any], list[int]] | None:
    """The error a wrapper line hides (:data:`WRAPPER_RX`), as ``(detail, evidence lines)``, or None when the tail
    holds no wrapper. The FIRST exception line from 300 lines before the first wrapper up to the last one that is
    neither a wrapper nor Ray's unpickling TypeError is the error (``detail["error"]``); with none, Ray's unpickling
    TypeError names the class (``wrapped_class``; ``BackendCompilerFailed``: cause ``torch-compile``)."""
    marks = [log.line_of(m.start()) for m in WRAPPER_RX.finditer(log.low)]
    if not marks:
        return None
    first_w, last_w = marks[0], marks[-1]
    engine = any("engine" in log.low_line(i) or "background loop" in log.low_line(i) for i in marks)
    d: dict[str, Any] = {"cause": "engine-dead" if engine else "ray-unpickle"}
    unpickle = None
    for h in generic:
        if h.sig.name != "exception" or not first_w - 300 <= h.line <= last_w:
            continue
        ll = log.low_line(h.line)
        if WRAPPER_RX.search(ll):
            continue
        m = UNPICKLE_RX.search(ll)
        if m:
            unpickle = unpickle or (h.line, log.lines[h.line][m.start(1) : m.end(1)])
            continue
        d["error"] = _LOG_RECORD_RX.sub("", log.lines[h.line].strip(), count=1)[:200]
        return d, [h.line, first_w]
    if unpickle is not None:
        d["wrapped_class"] = unpickle[1]
        if unpickle[1] == "BackendCompilerFailed":
            d["cause"] = "torch-compile"
        return d, [unpickle[0], first_w]
    return d, [first_w]


def _data(log: Log, f: Facts, d: dict[str, Any], h: Hit, same_tier: list[Hit], fatal: list[Hit]) -> Verdict:
    i, name = h.line, h.sig.name
    if name == "reward-source":
        d.update(cause="reward-source", key="reward.custom_reward_function.path")
        src = h.m.group(1)
        d["data_source"] = src.strip() if src is not None else None
        return mk(h.sig.cls, d, ev(log, *ray_call_line(log, i), i))
    if name in ("seq-too-long", "prompt-too-long"):
        nums = [int(x) for x in h.m.groups() if x] if h.m else []
        if len(nums) < 2:
            nums = [int(x) for x in re.findall(r"\((\d+)\)|=(\d+)", log.low_line(i)) for x in x if x]
        if len(nums) >= 2:
            d["length"], d["limit"] = nums[0], nums[1]
    d["key"] = DATA_KEYS.get(name, "data.train_files")
    if name in DATA_CAUSES:
        d["cause"] = DATA_CAUSES[name]
    if name == "dapo-give-up":
        d["score_mean"] = _score_mean(log, f)
    return mk(h.sig.cls, d, ev(log, i))


#: the step-line metric that says which way a DAPO give-up went: verl's mean sequence score of the step
#: (verl/trainer/ppo/metric_utils.py:556 ``critic/score/mean``); near 1 every group is all-correct, near 0 (or
#: the low end of the reward) all-wrong: either way the groups have no score spread for filter_groups to keep
SCORE_MEAN_KEY = "critic/score/mean"


def _score_mean(log: Log, f: Facts) -> float | None:
    """The last step line's ``critic/score/mean`` (the give-up's direction: too easy or too hard), or None."""
    if f.step_line < 0:
        return None
    parsed = logformat.parse_metrics_line(log.lines[f.step_line])
    return parsed[1].get(SCORE_MEAN_KEY) if parsed else None


def _network(log: Log, f: Facts, d: dict[str, Any], h: Hit, same_tier: list[Hit], fatal: list[Hit]) -> Verdict:
    i, name = h.line, h.sig.name
    d["fatal"] = True
    d["node"] = node(log, i)
    if name in RAY_HEAD_SIGS:
        d["cause"] = "ray-head"
        m = re.search(r"address ([0-9a-z.\-:]+?)(?::(\d+))?(?: within|\s|$)", log.low_line(i))
        if name == "gcs-lost":  # "Unable to connect to GCS at <host:port>" (the 60 s line names no address)
            m = re.search(r"gcs (?:\(ray head\) )?at ([0-9a-z.\-]+)(?::(\d+))", log.low_line(i))
        if m:
            d["address"] = m.group(1) + (":" + m.group(2) if m.group(2) else "")
            d["node"] = log.ips.get(i) or d.get("node")
    elif name in HUB_SIGS:
        d["cause"] = "hub"
        for j in range(i, min(len(log.lines), i + 6)):
            m = re.search(r"host='([^']+)'|https?://([^'/\s]+)", log.low_line(j))
            if m:
                d["address"] = m.group(1) or m.group(2)
                break
    elif name == "http-transient":
        # 429 / 5xx from an HTTP endpoint: the Hub (or a mirror) when the URL names one, else some other service
        m = re.search(r"for url: https?://([^/\s]+)", log.low_line(i))
        d["address"] = m.group(1) if m else None
        d["cause"] = "hub" if m and re.search(r"huggingface|hf\.co|hf-mirror|modelscope", m.group(1)) else "http"
    elif name in TRACKER_NET_SIGS or _after_tracker_retries(log, i):
        # the tracker's own give-up, or a network exception after its retry lines: a tracker at init, not the hub
        d["cause"] = "tracker"
    elif name == "ssh":
        d["cause"] = "ssh"
        d["address"] = next((g for g in h.m.groups() if g), None)
    elif name == "swanlab-http-auth":
        # swanlab 0.10 reports an unreachable server as a key problem; the [HTTP] retry lines decide
        if not any("[http] retry" in log.low_line(j) for j in range(max(0, i - 200), i)):
            d.pop("node", None)
            return mk("auth-error", dict(d, fatal=True, cause="bad-key"), ev(log, i))
        d["cause"] = "tracker"
    return mk(h.sig.cls, d, ev(log, i))


#: network rows that are the tracker giving up by itself (cause ``tracker``)
TRACKER_NET_SIGS = ("tracker-init-timeout", "tracker-comm")
#: the tracker's NONFATAL retry lines (swanlab "network error ...", wandb "Network error (ReadTimeout), entering retry
#: loop"): a network exception that ends the run after them is the tracker's, and how far back they count
_TRACKER_RETRY = next(s for s in SIGNATURES if s.name == "tracker-net")
_TRACKER_RETRY_BACK = 200


def _after_tracker_retries(log: Log, i: int) -> bool:
    """Whether the tracker's retry lines (:data:`_TRACKER_RETRY`) come shortly before line ``i``."""
    for j in range(max(0, i - _TRACKER_RETRY_BACK), i):
        ll = log.low_line(j)
        if any(n in ll for n in _TRACKER_RETRY.needles) and _TRACKER_RETRY.rx.search(ll):
            return True
    return False


def _collective(log: Log, f: Facts, d: dict[str, Any], h: Hit, same_tier: list[Hit], fatal: list[Hit]) -> Verdict:
    i = h.line
    d["node"] = node(log, i)
    init = False
    for x in same_tier:
        ll = log.low_line(x.line)
        m = re.search(r"seqnum=(\d+)", ll)
        if (
            (m and int(m.group(1)) <= 1)
            or "last completed nccl work: -1" in ll
            or x.sig.name == "dist-store"
            or "connectfullmesh" in ll
            or _COMM_INIT_RX.search(ll)
        ):
            init = True
    if not init and any(
        _COMM_INIT_RX.search(log.low_line(j))
        for x in same_tier[:4]
        for j in range(max(0, x.line - 3), min(len(log.lines), x.line + 4))
    ):
        init = True
    if any(
        x.sig.name == "cann-hccl" and ("ej0001" in log.low_line(x.line) or "hccp process" in log.low_line(x.line))
        for x in same_tier
    ):
        d["cause"] = "hccp-busy"
    d["init"] = init
    more = [x.line for x in same_tier[1:4] if x.line != i]
    return mk(h.sig.cls, d, ev(log, i, *more))


#: auth-error signatures whose text says the key is absent (no TTY to prompt for it): ``detail["cause"]``
#: ``key-missing`` selects the "pass the key" action; the rest were refused by a server (``key-rejected``): passing
#: it again as an env var fixes nothing (a new-user trial got "credentials missing" for a key it had passed)
AUTH_MISSING = ("no-tty-key", "swanlab-no-tty", "prompt-no-tty")


def _auth(log: Log, f: Facts, d: dict[str, Any], h: Hit, same_tier: list[Hit], fatal: list[Hit]) -> Verdict:
    d["fatal"] = True
    d["cause"] = "key-missing" if h.sig.name in AUTH_MISSING else "key-rejected"
    return mk(h.sig.cls, d, ev(log, h.line))


def _container(log: Log, f: Facts, d: dict[str, Any], h: Hit, same_tier: list[Hit], fatal: list[Hit]) -> Verdict:
    return mk(h.sig.cls, d, ev(log, h.line))


#: a node-death line's own address ("... and address: a.b.c.d ... has been marked dead")
_DIED_ADDR_RX = re.compile(r"(?:address|ip):? (\d{1,3}(?:\.\d{1,3}){3})")
#: ActorDiedError's ``\tip: <addr>`` field (ray/exceptions.py:497-510: the fields class_name, actor_id, pid, name,
#: namespace, ip follow "The actor died unexpectedly before finishing this task." and precede the cause line,
#: "The actor died because its node has died. ..."): the dead actor's node
_ACTOR_IP_RX = re.compile(r"^\s*ip: ?(\d{1,3}(?:\.\d{1,3}){3})\s*$")
_ACTOR_FIELDS = 6


def _died_node(log: Log, i: int) -> str | None:
    """The node a node-death hit at line ``i`` names: an address on the line itself, else the ``ip:`` field of the
    ActorDiedError message the line closes (read back no further than that message's first line)."""
    m = _DIED_ADDR_RX.search(log.low_line(i))
    if m:
        return m.group(1)
    for j in range(i - 1, max(-1, i - 1 - _ACTOR_FIELDS), -1):
        ll = log.low_line(j)
        m = _ACTOR_IP_RX.search(ll)
        if m:
            return m.group(1)
        if "the actor died unexpectedly" in ll:
            break
    return None


def _ran_out(log: Log, f: Facts, d: dict[str, Any], h: Hit, same_tier: list[Hit], fatal: list[Hit]) -> Verdict:
    """data-ran-out read from an error (one-step-off's None unpack): the step it ran out at is the last one logged;
    with no planned total above it the error is not the data's end but a crash."""
    if f.step is None or not d.get("total") or f.step >= d["total"]:
        return mk("crash-other", d, ev(log, h.line) + generic_ev(log, [x for x in fatal if x.sig.tier == GENERIC]))
    return mk(h.sig.cls, dict(d, epochs=f.epochs, cause="one-step-off"), ev(log, f.step_line, h.line))


_DENIED_PATH_RX = re.compile(r"\[errno (?:13|30|28|122)\] [^:]+: '(.+)'\s*$", re.I)


def _denied_path(line: str) -> str | None:
    """The path of an ``[Errno 13] Permission denied: '<path>'`` / ``[Errno 30] Read-only file system: '<path>'`` /
    ``[Errno 28] No space left on device: '<path>'`` / ``[Errno 122] Disk quota exceeded: '<path>'`` line, or
    None."""
    m = _DENIED_PATH_RX.search(line)
    return m.group(1) if m else None


def _full_path(log: Log, i: int) -> str | None:
    """Where a full disk (the disk-full hit at line ``i``) was written: the path the error names, else the folder of
    the checkpoint save under way (verl's ``Saving checkpoint to …/global_step_N`` with no step line after it: the
    log grammar's :func:`dapo_ops.core.logformat.parse_save_path`), else None."""
    named = _denied_path(log.lines[i])
    if named is not None:
        return named
    for j in range(i - 1, -1, -1):
        line = log.lines[j]
        if STEP_RX.search(line):
            return None
        path = logformat.parse_save_path(line)
        if path is not None:
            return path
    return None


def _crash(log: Log, f: Facts, d: dict[str, Any], h: Hit, same_tier: list[Hit], fatal: list[Hit]) -> Verdict:
    """crash-other with a specific cause: the signature's name (thread-limit, segfault, shm, kernel-fault, ...)."""
    i, name = h.line, h.sig.name
    d["cause"] = CRASH_CAUSES.get(name, name)
    if name == "node-died":
        d["node"] = _died_node(log, i)
    if name in ("device-unavailable", "kernel-fault"):
        d["code"] = next((t for _f, _c, t in device_codes.find_codes(log.low_line(i))), None)
    if name == "write-permission":
        d["path"] = _denied_path(log.lines[i])
    if name == "disk-full":
        d["path"] = _full_path(log, i)
    generic = [x for x in fatal if x.sig.tier == GENERIC]
    return mk("crash-other", d, ev(log, i) + generic_ev(log, generic))


_BY_CLASS = {
    "oom-kv-cache": _kv_cache,
    "oom-ray": _ray_oom,
    "oom-host": _host_oom,
    "config-error": _config,
    "data-error": _data,
    "network": _network,
    "hccl-timeout": _collective,
    "auth-error": _auth,
    "container-missing": _container,
    "data-ran-out": _ran_out,
}


def device_oom_verdict(log: Log, d: dict[str, Any], i: int) -> Verdict:
    """A device-OOM line: corrupted / impossible -> crash-other; the rollout engine's own start-up or generation
    memory, or a bare driver result code from its allocator -> oom-kv-cache; else oom-device with its phase
    (checkpoint-load stops: no rung shrinks ``torch.load`` of the saved shards onto the device)."""
    ll = log.low_line(i)
    near = ll + " " + (log.low_line(i + 1) if i + 1 < len(log.lines) else "")
    gib = alloc_gib(ll)
    bad = nonsense(near)
    if bad:
        d["cause"] = bad
        if gib is not None:
            d["alloc_gib"] = round(gib, 2)
        total = total_gib(near)
        if total is not None:
            d["total_gib"] = round(total, 2)
        return mk("crash-other", d, ev(log, i, i + 1 if bad == "device-unavailable" or total is not None else i))
    phase = phase_of(log, i)
    driver_only = not OOM_WORDS_RX.search(ll)
    # (a phase of rollout-init, from the frames or the engine's own start-up lines just before, is the engine's
    # start-up whatever the innermost frame: vLLM "Capturing CUDA graph shapes", SGLang "Capture cuda graph begin")
    if (
        phase == "rollout-init"
        or oom_context(log, i) == "rollout"
        and (phase in (None, "rollout-init", "model-load", "generation") or (phase == "weight-sync" and driver_only))
    ):
        # the rollout engine's own memory (KV cache, weights at start-up, a re-map reported only as a result
        # code by its allocator): lower its share, never offload/recompute
        d.update(kv_direction="lower", phase=phase if phase in ("weight-sync", "generation") else "rollout-init")
        return mk("oom-kv-cache", d, ev(log, i, *_symptom_lines(log, i)))
    d["phase"] = phase or "unknown"
    d["role"] = role_of(log, i)
    side = side_of(log, i)
    if side:
        d["side"] = side
    if gib is not None:
        d["alloc_gib"] = round(gib, 2)
    return mk("oom-device", d, ev(log, *ray_call_line(log, i), i))


def _symptom_lines(log: Log, i: int) -> list[int]:
    """The first request-timeout line after a rollout memory error (the only thing the trainer sees)."""
    for j in range(i + 1, min(len(log.lines), i + 20)):
        if "timed out" in log.low_line(j) or "timeout" in log.low_line(j):
            return [j]
    return []


def _full_key_line(log: Log, i: int) -> list[int]:
    """OmegaConf's ``full_key: <key>`` line just after line ``i`` (evidence)."""
    for j in range(i + 1, min(len(log.lines), i + 4)):
        if "full_key:" in log.low_line(j):
            return [j]
    return []


def _config_key(log: Log, h: Hit) -> str | None:
    """The failing key of a config-error hit: Hydra's ``Could not override '<key>'`` (the override the launch
    passed, which is what the user must fix), else OmegaConf's ``full_key:`` (the node it missed: for an override
    under an absent parent, e.g. ``reward_model.reward_kwargs.n`` with ``reward_kwargs`` absent, that is only the
    parent), a key in the message itself, else :data:`CONFIG_KEYS`."""
    i = h.line
    for j in range(max(0, i - 3), min(len(log.lines), i + 8)):
        m = re.search(r"Could not override '([^']+)'", log.lines[j])
        if m:
            return m.group(1)
    for j in range(max(0, i - 3), min(len(log.lines), i + 8)):
        m = re.search(r"full_key: ?([\w.\[\]-]+)", log.lines[j])
        if m:
            return m.group(1)
    name = h.sig.name
    if name == "n-gpus-zero":
        k = h.m.group(1).replace("config.", "", 1)
        return k if "." in k else "trainer." + k
    if name == "micro-batch":
        k = h.m.group(1) or h.m.group(2)
        return k if k.startswith(("actor_rollout_ref.", "critic.")) else "actor_rollout_ref." + k
    if name == "separate-async":
        ll = log.low_line(i)
        if "parameter_sync_step" in ll:
            return "trainer.v1.separate_async.parameter_sync_step"
        if "backend" in ll:
            return "actor_rollout_ref.rollout.checkpoint_engine.backend"
        return "actor_rollout_ref.rollout.nnodes" if "nnodes" in ll else "actor_rollout_ref.rollout.n_gpus_per_node"
    if name == "size-divisible":
        return divisible_key(log.low_line(i))
    if name == "visible-devices":
        return "CUDA_VISIBLE_DEVICES" if "cuda" in log.low_line(i) else "ASCEND_RT_VISIBLE_DEVICES"
    if name == "hydra-merge":
        return log.lines[i][h.m.start(1) : h.m.end(1)] if h.m else None
    if name in ("interpolation", "dataclass-kwarg"):
        return h.m.group(1)
    if name in (
        "hydra-append",
        "hydra-parse",
        "omegaconf-missing",
        "hydra-delete",
        "hydra-delete-value",
        "hydra-group",
    ):
        orig = log.lines[i]
        m = re.search(r"'([^']*)'|: ?([\w.]+)\s*$", orig[h.m.start() :])
        if m:
            return m.group(1) or m.group(2)
    return CONFIG_KEYS.get(name)
