"""Stalls sized to the run, and where each process stood (STDLIB ONLY, shipped).

A stall: nothing progresses (no step line and no new byte in the attempt log) for :class:`StepClock`'s limit,
``stall_factor`` x the longest step the run has shown (its save / validation added on the steps that save or
validate), at least ``stall_floor_s``, at most ``hang_timeout_s`` (HANG_TIMEOUT, which alone applies before the
first step unless a run of the same configuration left its timings: :func:`merge_learned`); output without a step
line for :data:`NO_STEP_FACTOR` x that; or, with no log line at all, the host's counters (:class:`CounterWatch`).
The verdict reads its own dumps (:func:`parse_dump`, :func:`merge_ranks`: stuck vs missing ranks).

Before the supervisor stops a stalled (or hung) attempt it writes ``py-spy dump --pid`` of verl's driver and of
each of the attempt's own processes (Ray workers included: process group + ``DAPO_OPS_RUN_ID``, never by name) to
``<run_dir>/stacks-attempt-<k>.txt`` (:func:`dump_stacks`). py-spy is in verl 0.9.1's own dependency set: its
``ray[default]`` requirement brings it (Ray's dashboard takes stack dumps with it; the H200's install,
gpu/wheels-verl.txt, has py-spy 0.4.2) and its ``test`` extra names it (``verl-0.9.1.dist-info/METADATA``); where
it is absent, the file says so.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from dapo_ops.core import hydra_override
from dapo_ops.core.classify import storm

#: stall = no progress for this many times the longest step the run has shown (NVIDIA resiliency extension's
#: safety factor: ``TimeoutsCalc.__init__(safety_factor=5.0)`` in NVIDIA/nvidia-resiliency-ext
#: src/nvidia_resiliency_ext/fault_tolerance/timeouts_calc.py)
STALL_FACTOR = 5.0
#: ... but never less than this (seconds). Derived, not guessed: below a minute the supervisor's own sampling
#: decides, not the run (a py-spy dump of every process takes up to DUMP_TIMEOUT_S = 20 s, the counter watch
#: samples every COUNTER_SAMPLE_S = 15 s, Ray's log monitor batches worker output); the factor already covers the
#: spread between steps (the largest ratio of a step to the longest step before it in the real fixtures,
#: tests/fixtures/real-verl/tool-runs/*/train.log, is 2.26: docs/troubleshooting.md "Stalls")
STALL_FLOOR_S = 60.0
#: output that is not a step line holds the stall off, but not for ever: no step line for this many times the stall
#: threshold is a stall even while verl prints (a DAPO run that generates for ever keeps logging)
NO_STEP_FACTOR = 2.0
#: seconds one ``py-spy dump`` may take
DUMP_TIMEOUT_S = 20.0
#: processes dumped at most (the driver first)
MAX_DUMPS = 64
#: verl 0.9.1's phase timers, logged as ``timing_s/<name>`` on each step line (``marked_timer`` names:
#: verl/trainer/ppo/v1/trainer_base.py:473-494 step, save_checkpoint, testing; :565-609 gen, reward,
#: old_log_prob, ref, values, adv, update_critic, update_actor; update_weights from the checkpoint engine)
PHASES = (
    "gen",
    "reward",
    "old_log_prob",
    "ref",
    "values",
    "adv",
    "update_critic",
    "update_actor",
    "update_weights",
    "save_checkpoint",
    "testing",
    "step",
)
#: phases that run only on some steps, with the trainer setting that says which (trainer_base.py:482-494: a save
#: every ``trainer.save_freq`` steps and on the last step, inside ``timing_s/step``; a validation every
#: ``trainer.test_freq`` steps and on the last step, after ``timing_s/step`` but before the step line)
OCCASIONAL = {"save_checkpoint": "save_freq", "testing": "test_freq"}
#: persisted timings decay towards the newest run by this weight (1.0 = the newest alone): a run's longer step
#: raises the learned figure at once (max), a shorter one lowers it only by half the gap
SMOOTHING = 0.5


def _timing(metrics: Dict[str, float]) -> Dict[str, float]:
    return {
        k[len("timing_s/") :]: float(v)
        for k, v in (metrics or {}).items()
        if k.startswith("timing_s/") and isinstance(v, (int, float)) and v == v and v >= 0
    }


class StepClock:
    """How long the run may go without a step line, learned from what it has shown (the NVIDIA resiliency
    extension's rule, ``TimeoutsCalc.update`` / ``get_timeouts`` in fault_tolerance/timeouts_calc.py: an *initial* timeout
    from the start to the first heartbeat, a *subsequent* one from the longest interval between heartbeats, each
    ``factor`` x the longest seen). Here the heartbeat is verl's step line, and the longest step is split by phase
    so that the steps that save a checkpoint or validate get their own allowance.

    ``learned``: the timings a run of the same configuration persisted (:meth:`to_json`, ``<runs_dir>/.learned/
    <fingerprint>.timing.json``); a fresh attempt of a known configuration starts with a sized timer. Seconds
    throughout."""

    def __init__(
        self,
        learned: Optional[Dict[str, Any]] = None,
        factor: float = STALL_FACTOR,
        floor_s: float = STALL_FLOOR_S,
        cap_s: float = 1800.0,
    ):
        self.factor, self.floor_s, self.cap_s = float(factor), float(floor_s), float(cap_s)
        lr = learned or {}
        self.learned_first_s: Optional[float] = lr.get("first_s")
        self.learned_work_s: Optional[float] = lr.get("work_s")
        self.learned_phases: Dict[str, float] = dict(lr.get("phases") or {})
        self.first_s: Optional[float] = None  # attempt start -> first step line (wall)
        self.step1_work_s: Optional[float] = None  # the first step's own work (warm-up included)
        self.work_s: Optional[float] = None  # the longest later step, less its occasional phases
        self.phases: Dict[str, float] = {}  # the longest of each phase seen in this attempt
        self.steps = 0

    def observe(self, metrics: Dict[str, float], interval_s: float) -> None:
        """One step line: its ``timing_s/*`` ``metrics`` and the wall seconds since the previous step line (the
        attempt's start for the first one)."""
        t = _timing(metrics)
        for k, v in t.items():
            self.phases[k] = max(self.phases.get(k, 0.0), v)
        occasional = sum(t.get(p, 0.0) for p in OCCASIONAL)
        work = max(float(interval_s), t.get("step", 0.0) + t.get("testing", 0.0)) - occasional
        self.steps += 1
        if self.steps == 1:
            self.first_s = float(interval_s)
            self.step1_work_s = max(0.0, (t["step"] - t.get("save_checkpoint", 0.0)) if "step" in t else work)
        else:
            self.work_s = max(self.work_s or 0.0, max(0.0, work))

    def _clamp(self, s: float) -> float:
        return round(min(self.cap_s, max(self.floor_s, s)), 1)

    def limit(self, next_step: Optional[int], total: Optional[int], settings: Dict[str, Any]) -> Optional[float]:
        """Seconds without a step line (and without output) that make a stall before step ``next_step``, or None
        (only the cap, HANG_TIMEOUT, applies: nothing learned before the first step). ``settings``: the run's
        ``save_freq`` / ``test_freq``. A step that saves or validates adds the longest save / validation seen
        (this attempt or learned); one whose save or validation was never seen gets the cap."""
        if self.steps == 0:
            return self._clamp(self.factor * self.learned_first_s) if self.learned_first_s else None
        base = self.work_s
        if base is None:  # only step 1 (warm-up included: an upper bound of the later steps) ...
            base = self.step1_work_s or self.first_s or 0.0
            if self.learned_work_s:  # ... unless a run of this configuration showed its later steps
                base = float(self.learned_work_s)
        elif self.learned_work_s:
            base = max(base, self.learned_work_s)
        extra = 0.0
        for phase, key in OCCASIONAL.items():
            freq = int(settings.get(key) or -1)
            if freq <= 0 or next_step is None:
                continue
            if next_step % freq == 0 or (total is not None and next_step >= int(total)):
                seen = max(self.phases.get(phase, 0.0), float(self.learned_phases.get(phase) or 0.0))
                if seen <= 0:
                    return self._clamp(self.cap_s)
                extra += seen
        return self._clamp(self.factor * (base + extra))

    def save_limit(self, step: int, total: Optional[int], settings: Dict[str, Any]) -> Optional[float]:
        """:meth:`limit` for step ``step`` as a step that saves a checkpoint, whatever ``save_freq`` predicted: verl
        printed that it is saving (``Saving checkpoint to .../global_step_<step>``, verl/trainer/ppo/v1/
        trainer_base.py:955, :func:`dapo_ops.core.logformat.parse_save`), so the longest save seen (or the cap, for
        a first save) is added to the step's allowance (a save runs inside ``timing_s/step``, trainer_base.py:481-485)."""
        return self.limit(step, total, dict(settings, save_freq=1))

    def basis(self, limit_s: Optional[float]) -> str:
        """What ``limit_s`` (this clock's last :meth:`limit`) was made of, in words: the floor or the cap when it
        is clamped to one, else the factor and what it multiplied (before step 1 only an earlier run of this
        configuration can size it; after step 1 alone, that step's time, warm-up included)."""
        if limit_s is None:
            return "no step yet: only the cap hang_timeout_s applies"
        if limit_s <= self.floor_s:
            return "the floor stall_floor_s"
        if limit_s >= self.cap_s:
            return "the cap (a save or validation not seen yet, or hang_timeout_s)"
        if self.steps == 0:
            return "%g x the time to step 1 of an earlier run of this configuration" % self.factor
        if self.work_s is None and not self.learned_work_s:
            return "%g x step 1's time, warm-up included" % self.factor
        return "%g x the longest step seen" % self.factor

    def to_json(self) -> Dict[str, Any]:
        """What this attempt measured, for :func:`merge_learned`: ``first_s``, ``work_s`` (None until a second
        step), ``phases`` (longest per phase, step 1 excluded while later steps exist but kept for the occasional
        phases), ``steps``."""
        return {"first_s": self.first_s, "work_s": self.work_s, "phases": dict(self.phases), "steps": self.steps}


def merge_learned(old: Optional[Dict[str, Any]], new: Dict[str, Any], smoothing: float = SMOOTHING) -> Dict[str, Any]:
    """Persisted timings after a run: each figure is the newest when it is larger (a longer step is believed at
    once), else moves ``smoothing`` of the way from the old figure to it (a run of the same configuration on a
    faster day lowers the timer slowly). Figures the new run did not measure keep their old value."""
    old = old or {}

    def mix(a: Any, b: Any) -> Any:
        if not isinstance(b, (int, float)) or b <= 0:
            return a
        if not isinstance(a, (int, float)) or a <= 0 or b >= a:
            return round(float(b), 3)
        return round(a + smoothing * (b - a), 3)

    phases = dict(old.get("phases") or {})
    for k, v in (new.get("phases") or {}).items():
        phases[k] = mix(phases.get(k), v)
    return {
        "first_s": mix(old.get("first_s"), new.get("first_s")),
        "work_s": mix(old.get("work_s"), new.get("work_s")),
        "phases": phases,
        "runs": int(old.get("runs") or 0) + 1,
    }


#: the counter watch (MindCluster's idea, on a bare host): devices at most this busy (%) ...
UTIL_IDLE_PCT = 2
#: ... with their used memory moving less than this (MiB) between samples ...
MEM_FLAT_MIB = 64
#: ... and the attempt's processes together using less than this share of one CPU core ...
CPU_IDLE_SHARE = 0.05
#: ... for this long (seconds), with no step line meanwhile, is a stall
COUNTER_WINDOW_S = 180.0
#: seconds between two counter samples
COUNTER_SAMPLE_S = 15.0


class CounterWatch:
    """A stall told by the host's counters, no log line needed: every device idle (busy % at most
    :data:`UTIL_IDLE_PCT`), device memory flat (within :data:`MEM_FLAT_MIB` MiB of the previous sample) and the
    attempt's processes' CPU time growing by less than :data:`CPU_IDLE_SHARE` of a core, at every sample for
    ``window_s`` seconds. Armed only once a device was seen busy in this attempt (start-up, model load and a
    download are not training). ``read_devices()``: ``[(busy %, used MiB)]`` or None (no tool: never calls a
    stall), :func:`.accelerator.device_load`; ``read_cpu()``: CPU seconds of the attempt's processes, or None.

    A diverged DAPO run that generates for ever (verl 0.9.1's V1 ReplayBuffer ignores ``max_num_gen_batches``,
    verl/trainer/ppo/v1/trainer_base.py:205-211) keeps the devices busy: the counters never call it; the step
    timer (:class:`StepClock`) does."""

    def __init__(
        self,
        read_devices: Callable[[], Optional[List[Tuple[int, int]]]],
        read_cpu: Callable[[], Optional[float]],
        window_s: float = COUNTER_WINDOW_S,
        sample_s: float = COUNTER_SAMPLE_S,
    ):
        self.read_devices, self.read_cpu = read_devices, read_cpu
        self.window_s, self.sample_s = float(window_s), float(sample_s)
        self.armed = False
        self.idle_since: Optional[float] = None
        self._last: Optional[Tuple[float, List[Tuple[int, int]], Optional[float]]] = None
        self.evidence: List[str] = []
        self.held = False  # a checkpoint save is in flight (:meth:`hold`)

    def progress(self) -> None:
        """A step line: whatever idled before it was not a stall (and a save held since, :meth:`hold`, is done)."""
        self.idle_since = None
        self.held = False

    def hold(self) -> None:
        """verl started saving a checkpoint (``Saving checkpoint to ...``, :func:`dapo_ops.core.logformat.parse_save`):
        until the step's line (:meth:`progress`) the devices may idle, memory stay flat and the processes wait on the
        disk (verl/trainer/ppo/v1/trainer_base.py:948-1030 writes the actor's shards, data.pt and the tracker), which
        is not a stall. The counters call nothing meanwhile; the step clock (:meth:`StepClock.save_limit`) and the
        hang cap still apply."""
        self.held, self.idle_since, self._last = True, None, None

    def sample(self, t: float) -> Optional[float]:
        """Read the counters if ``sample_s`` passed since the last read. Returns the seconds the attempt has been
        idle by every counter once that reaches ``window_s``, else None."""
        if self.held or (self._last is not None and t - self._last[0] < self.sample_s):
            return None
        dev = self.read_devices()
        cpu = self.read_cpu()
        prev, self._last = self._last, (t, dev or [], cpu)
        if not dev:
            self.idle_since = None
            return None
        busy = [u for u, _ in dev if u > UTIL_IDLE_PCT]
        if busy:
            self.armed = True
        if not self.armed or prev is None or not prev[1]:
            return None
        dt = max(1e-6, t - prev[0])
        flat = len(prev[1]) == len(dev) and all(abs(m - pm) < MEM_FLAT_MIB for (_, m), (_, pm) in zip(dev, prev[1]))
        cpu_share = None if cpu is None or prev[2] is None else max(0.0, cpu - prev[2]) / dt
        idle = not busy and flat and (cpu_share is None or cpu_share < CPU_IDLE_SHARE)
        if not idle:
            self.idle_since = None
            return None
        if self.idle_since is None:
            self.idle_since = prev[0]
        self.evidence = [
            "devices busy %s %%, used %s MiB (flat within %d MiB)"
            % ("/".join(str(u) for u, _ in dev), "/".join(str(m) for _, m in dev), MEM_FLAT_MIB),
            "CPU of the attempt's processes: %s of a core" % ("?" if cpu_share is None else "%.3f" % cpu_share),
        ]
        idle_s = t - self.idle_since
        return round(idle_s, 1) if idle_s >= self.window_s else None


def find_pyspy(python: Optional[str] = None) -> Optional[str]:
    """``py-spy`` on PATH, else next to the run's Python (a venv's bin dir), else None."""
    found = shutil.which("py-spy")
    if found:
        return found
    for exe in (python and shutil.which(python), python):
        if exe and os.path.isabs(exe):
            cand = os.path.join(os.path.dirname(exe), "py-spy")
            if os.access(cand, os.X_OK):
                return cand
    return None


def _cmdline(pid: int) -> str:
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()[:300]
    except OSError:
        return ""


_PROC_RE = re.compile(r"^Process (\d+): (.*)$")
_THREAD_RE = re.compile(r'^Thread (\S+) \(([^)]*)\)(?:: "(.*)")?')
_FRAME_RE = re.compile(r"^    (\S.*) \((.+):(\d+)\)\s*$")
#: who a process is, from its command line (Ray's workers carry ``ray::<Actor>.<method>`` as their process title;
#: the actor names are verl 0.9.1's: trainer/main_ppo.py:103 TaskRunnerV1, single_controller's fused WorkerDict
#: of ActorRolloutRefWorker (trainer/ppo/v1/trainer_base.py:805), experimental/reward_loop/reward_loop.py:93
#: RewardLoopWorker, experimental/reward_loop/reward_manager/remote.py:27 RewardComputeWorker,
#: trainer/ppo/v1/agent_loop_tq.py:53 AgentLoopWorkerTQ; vLLM's engine core process is ``VLLM::EngineCore``)
ROLES = (
    ("task-runner", re.compile(r"TaskRunner")),
    ("actor", re.compile(r"WorkerDict|ActorRolloutRefWorker|DetachActorWorker|TrainingWorker")),
    ("vllm-engine", re.compile(r"EngineCore|vLLMHttpServer|vLLMReplica")),
    ("reward", re.compile(r"Reward\w*Worker")),
    ("agent-loop", re.compile(r"AgentLoopWorker")),
    ("ray-idle", re.compile(r"^ray::IDLE")),
)
#: a frame of a collective: torch.distributed (c10d, NCCL/HCCL process groups), vLLM's NCCL communicator
_COLLECTIVE_RE = re.compile(r"(?:^|/)torch/distributed/|pynccl|hccl|nccl|/device_communicators/")
_COLLECTIVE_FUNCS = re.compile(
    r"(?:^|\.)(?:all_reduce|all_gather\w*|reduce_scatter\w*|broadcast\w*|barrier|all_to_all\w*|send|recv|"
    r"monitored_barrier|_wait_for_workers)$"
)
_DATA_RE = re.compile(r"(?:^|/)torch/utils/data/|(?:^|/)datasets/|dataloader|rl_dataset")
_SYNC_RE = re.compile(r"checkpoint_engine|update_weights|sync_weights|_update_weights")
_RAY_WAIT_RE = re.compile(r"(?:^|/)ray/_private/worker\.py$|(?:^|/)ray/")
_STDLIB = frozenset(getattr(sys, "stdlib_module_names", ())) or frozenset(
    ("threading", "queue", "selectors", "socket", "subprocess", "asyncio", "concurrent", "time", "multiprocessing")
)
#: what to do about a workload that every process waits in, per kind of frame (the fix only: the stop's
#: suggestions add the resume, dapo_ops/core/ladder.py resume_command)
FIXES = {
    "user": "fix or bound that code (a custom reward function: reward.custom_reward_function.path; give it a timeout)",
    "data-loader": "check the data files and data.dataloader_num_workers (a worker that never yields a batch)",
    "weight-sync": "the weight sync from the trainer to the rollout never ends: check "
    "actor_rollout_ref.rollout.checkpoint_engine (backend, update_weights_bucket_megabytes)",
    "compute": "a kernel or a loop that never returns in that frame; read the dump",
}


def _is_stdlib(path: str) -> bool:
    head = path.lstrip("/").split("/", 1)[0]
    return head.rsplit(".py", 1)[0] in _STDLIB or head.startswith("<frozen")


def parse_dump(text: str) -> Dict[str, Any]:
    """One ``py-spy dump`` text (py-spy 0.3/0.4: ``Process <pid>: <cmdline>`` (the command line may span lines),
    ``Python v<x> (<exe>)``, then per thread ``Thread <id> (<state>): "<name>"`` and its frames innermost first,
    ``    <func> (<file>:<line>)``; ``--locals`` adds deeper-indented lines, skipped). Returns ``{"pid", "cmd",
    "threads": [{"name", "state", "frames": [(func, file, line)]}]}`` (``pid`` None when no Process line)."""
    pid: Optional[int] = None
    cmd: List[str] = []
    threads: List[Dict[str, Any]] = []
    in_cmd = False
    for line in text.splitlines():
        m = _PROC_RE.match(line)
        if m and pid is None:
            pid, in_cmd = int(m.group(1)), True
            cmd.append(m.group(2))
            continue
        if line.startswith("Python v"):
            in_cmd = False
            continue
        t = _THREAD_RE.match(line)
        if t:
            in_cmd = False
            threads.append({"name": t.group(3) or t.group(1), "state": t.group(2), "frames": []})
            continue
        f = _FRAME_RE.match(line)
        if f and threads:
            threads[-1]["frames"].append((f.group(1), f.group(2), int(f.group(3))))
        elif in_cmd:
            cmd.append(line)
    return {"pid": pid, "cmd": " ".join(" ".join(cmd).split()), "threads": threads}


def role(cmd: str) -> str:
    """The role of a process by its command line (:data:`ROLES`), else ``worker``."""
    for name, rx in ROLES:
        if rx.search(cmd or ""):
            return name
    return "worker"


def _fmt(fr: Tuple[str, str, int]) -> str:
    return "%s (%s:%d)" % fr


def is_user_path(path: str, user_files: Sequence[str] = ()) -> bool:
    """True when a py-spy frame's ``path`` is the user's code, not verl, a library or the standard library. py-spy
    prints a file under a ``sys.path`` entry relative to it (``zmq/sugar/poll.py``, ``verl/trainer/...``: an
    importable package, never the user's script) and any other file by its absolute path; verl adds a custom
    reward function's directory to ``sys.path`` (the real H200 dump of tests/fixtures/real-verl/tool-runs/n-stall
    shows ``compute_score (hang_reward.py:10)``). So: a file named in ``user_files`` (basenames of the run's own
    code, e.g. ``reward.custom_reward_function.path``) is the user's; a framework path
    (:func:`dapo_ops.core.classify.storm.is_framework`) is not; an absolute path or a bare file name outside the
    standard library is; a relative path with a directory (an installed package) is not."""
    base = path.rsplit("/", 1)[-1]
    if base in user_files:
        return True
    if storm.is_framework(path) or _is_stdlib(path) or path.startswith("<"):
        return False
    return path.startswith("/") or "/" not in path


def wait_kind(
    frames: Sequence[Tuple[str, str, int]], user_files: Sequence[str] = ()
) -> Tuple[str, Optional[Tuple[str, str, int]]]:
    """What one thread waits in, from its frames (innermost first): ``(kind, frame)``. Kinds, first match from
    the innermost frame out: ``collective`` (a torch.distributed / NCCL / HCCL call), ``data-loader``,
    ``weight-sync``, ``user`` (the innermost frame outside the standard library is the user's code:
    :func:`is_user_path`), ``ray-wait`` (waiting on Ray: the driver's ``ray.get`` or an idle Ray worker's task
    loop), ``idle`` (standard-library frames only: a thread parked in ``threading`` / ``selectors``), else
    ``compute`` (the innermost frame that is not the standard library)."""
    if not frames:
        return "unknown", None
    for fr in frames:
        func, path = fr[0], fr[1]
        if _COLLECTIVE_RE.search(path) and (
            _COLLECTIVE_FUNCS.search(func) or "distributed_c10d" in path or "nccl" in path
        ):
            return "collective", fr
    for fr in frames:
        if _DATA_RE.search(fr[1]):
            return "data-loader", fr
        if _SYNC_RE.search(fr[0]) or _SYNC_RE.search(fr[1]):
            return "weight-sync", fr
    inner = next((fr for fr in frames if not _is_stdlib(fr[1])), None)
    if inner is None:
        return "idle", frames[0]
    if is_user_path(inner[1], user_files):
        return "user", inner
    if _RAY_WAIT_RE.search(inner[1]):
        return "ray-wait", inner
    return "compute", inner


#: which thread of a process tells where it stands, best first (:func:`where_process`)
_THREAD_RANK = ("collective", "user", "data-loader", "weight-sync", "compute", "ray-wait", "idle", "unknown")


def where_process(parsed: Dict[str, Any], user_files: Sequence[str] = ()) -> Tuple[str, Optional[str]]:
    """``(kind, "func (file:line)")`` of a parsed dump: the thread that says most (:data:`_THREAD_RANK`: a
    collective, then the user's code, ... then a thread parked in the standard library), the main thread first
    among equals. A Ray actor runs its task off the main thread while the main one idles in Ray's loop (the real
    reward worker of tests/fixtures/real-verl/tool-runs/n-stall: MainThread in ``main_loop``, the ``uvloop_N``
    threads in the user's ``compute_score``)."""
    ths = sorted(parsed.get("threads") or [], key=lambda t: t.get("name") != "MainThread")
    best: Optional[Tuple[int, str, Optional[Tuple[str, str, int]]]] = None
    for t in ths:
        k, fr = wait_kind(t["frames"], user_files)
        rank = _THREAD_RANK.index(k)
        if best is None or rank < best[0]:
            best = (rank, k, fr)
    if best is None:
        return "unknown", None
    return best[1], _fmt(best[2]) if best[2] else None


def user_files(overrides: Sequence[str]) -> Tuple[str, ...]:
    """Basenames of the user's own code a run names in its verl overrides (``reward.custom_reward_function.path``,
    verl 0.9.1's ``trainer/config/reward/reward.yaml``; the older top-level ``custom_reward_function.path``): the
    value the last override of each such key gives it (a ``~key`` deletion names no file,
    :func:`dapo_ops.core.hydra_override.last_by_key`)."""
    out = []
    for key, o in hydra_override.last_by_key(overrides).items():
        if key.endswith("custom_reward_function.path") and o.text:
            out.append(o.text.rsplit("/", 1)[-1])
    return tuple(out)


def read_stacks(text: str, user_files: Sequence[str] = ()) -> List[Dict[str, Any]]:
    """The entries of a written ``stacks-attempt-<k>.txt`` (:func:`dump_stacks`' sections ``===== pid N (role)
    cmd =====``), as :func:`dump_stacks` returns them: what a finished run's dumps say after the fact."""
    parts = re.split(r"^===== pid (\d+) \((\S+)\) ?(.*?) =====$", text, flags=re.M)
    out: List[Dict[str, Any]] = []
    for i in range(1, len(parts) - 3, 4):
        parsed = parse_dump(parts[i + 3])
        kind, where = where_process(parsed, user_files) if parsed["threads"] else ("unknown", None)
        out.append(
            {
                "pid": int(parts[i]),
                "role": parts[i + 1],
                "cmd": parts[i + 2],
                "kind": kind,
                "where": where,
                "error": None if parsed["threads"] else (parts[i + 3].strip().splitlines() or ["no dump"])[-1][:200],
            }
        )
    return out


def merge_ranks(stacks: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """Where the attempt's processes stand together (DLRover's xpu_timer idea, stuck vs missing ranks: the ranks
    parked in a collective are waiting for the ones that are not). ``stacks``: :func:`dump_stacks`' entries
    (``role``, ``kind``, ``where``, ``error``). Returns ``{"cause", "frame", "kind", "waiting", "missing",
    "roles"}``:

    * ``collective-missing``: some actor ranks wait in a collective, others are elsewhere or gave no dump (the
      missing ones are named): infrastructure, one retry after cleanup;
    * ``collective``: every rank waits in the same collective: a peer or the network, one retry after cleanup;
    * ``workload``: a process stands in the user's own code (:func:`is_user_path`; the frame most of them share),
      or every process at work (not waiting on Ray) stands in the same frame, outside a collective
      (the user's code, the data loader, the weight sync, a compute loop): no blind retry, ``frame`` and ``fix``
      say where and what;
    * ``unknown``: none of these (or no dumps); ``place`` then says what the dumps do show (:func:`stood`: the
      driver's frame, the workers' or that none was dumped), never a guess at the cause."""
    ents = [e for e in stacks if e.get("role") not in ("ray-idle",)]
    roles: Dict[str, List[str]] = {}
    for e in ents:
        roles.setdefault(str(e.get("role")), []).append(
            "%s %s" % (e.get("kind") or "?", e.get("where") or e.get("error") or "?")
        )
    ranks = [e for e in ents if e.get("role") == "actor"] or [
        e for e in ents if e.get("role") not in ("driver", "task-runner")
    ]
    coll = [e for e in ranks if e.get("kind") == "collective"]
    out: Dict[str, Any] = {
        "cause": "unknown",
        "frame": None,
        "kind": None,
        "waiting": [],
        "missing": [],
        "roles": roles,
    }
    if coll:
        others = [e for e in ranks if e.get("kind") != "collective"]
        frames = sorted({str(e.get("where")) for e in coll})
        out.update(kind="collective", frame=frames[0], waiting=[e["pid"] for e in coll])
        if others:
            out.update(
                cause="collective-missing",
                missing=["%s (%s)" % (e["pid"], e.get("where") or e.get("error") or "no dump") for e in others],
            )
        else:
            out["cause"] = "collective"
        return out
    user = [e for e in ents if e.get("kind") == "user" and e.get("role") != "driver"]
    if user:  # processes parked in the user's own code while the rest wait for them (the H200's n-stall run)
        frames = [str(e.get("where")) for e in user]
        top = max(sorted(set(frames)), key=frames.count)
        out.update(cause="workload", kind="user", frame=top, waiting=[e["pid"] for e in user if e.get("where") == top])
        out["fix"] = FIXES["user"]
        return out
    busy = [e for e in ents if e.get("kind") not in (None, "ray-wait", "unknown", "idle") and e.get("role") != "driver"]
    if busy and len({(e.get("kind"), e.get("where")) for e in busy}) == 1:
        k = str(busy[0].get("kind"))
        out.update(cause="workload", kind=k, frame=busy[0].get("where"), waiting=[e["pid"] for e in busy])
        out["fix"] = FIXES.get(k, FIXES["compute"])
        return out
    out["place"] = stood(stacks)
    return out


def _at(e: Dict[str, Any]) -> str:
    return str(e.get("where") or "(no dump: %s)" % (e.get("error") or "?"))


def stood(stacks: Sequence[Dict[str, Any]]) -> str:
    """What the dumps show when no frame is common to the processes (:func:`merge_ranks`' ``unknown``), in words
    and with no cause guessed: where the driver stands, then the workers' frames or that none was dumped (a plain
    hang in the driver's own loop: ``the driver stands in StandinTrainer._fit (trainer.py:903), no worker process
    dumped``). No "; " inside: the hang's action joins its parts with it."""
    if not stacks:
        return "no process could be dumped"
    drv = next((e for e in stacks if e.get("role") == "driver"), None)
    parts = ["no dump of the driver"]
    if drv is not None:
        parts = ["the driver %s %s" % ("waits on Ray in" if drv.get("kind") == "ray-wait" else "stands in", _at(drv))]
    workers = [e for e in stacks if e.get("role") not in ("driver", "ray-idle")]
    idle = len(stacks) - len(workers) - (drv is not None)
    if not workers:
        parts.append("no worker process dumped" + (" (%d idle Ray worker(s))" % idle if idle else ""))
    else:
        shown = ", ".join("%s %s in %s" % (e.get("role"), e.get("pid"), _at(e)) for e in workers[:4])
        more = " and %d more" % (len(workers) - 4) if len(workers) > 4 else ""
        parts.append("workers in different frames (%s%s)" % (shown, more))
    return ", ".join(parts)


def dump_stacks(
    pids: Sequence[int],
    driver: Optional[int],
    out_path: str,
    python: Optional[str] = None,
    timeout_s: float = DUMP_TIMEOUT_S,
    user_files: Sequence[str] = (),
) -> List[Dict[str, Any]]:
    """``py-spy dump --pid`` of ``driver`` and each of ``pids`` into ``out_path`` (text, one section per process).
    Returns ``[{"pid", "role": "driver" | a :data:`ROLES` name | "worker", "cmd", "kind": :func:`wait_kind`'s,
    "where": "func (file:line)" | None, "error": str | None}]``.
    ``user_files``: basenames of the run's own code (:func:`user_files`), read as the user's wherever they stand.
    Never raises: a missing py-spy or a failed dump is written into the file and the entry's ``error``."""
    order = ([driver] if driver else []) + [p for p in pids if p != driver]
    order = order[:MAX_DUMPS]
    exe = find_pyspy(python)
    out: List[Dict[str, Any]] = []
    parts: List[str] = []
    if exe is None:
        parts.append(
            "py-spy not found (PATH, or next to %s): no stack dumps. verl 0.9.1 lists py-spy in its "
            "requirements; `pip install py-spy` in the training image gives them.\n" % (python or "python3")
        )
    for pid in order:
        cmd = _cmdline(pid)
        role_of = "driver" if pid == driver else None
        ent: Dict[str, Any] = {
            "pid": pid,
            "role": role_of or role(cmd),
            "cmd": cmd,
            "kind": None,
            "where": None,
            "error": None,
        }
        if exe is None:
            ent["error"] = "py-spy not found"
        else:
            try:
                r = subprocess.run(
                    [exe, "dump", "--pid", str(pid)],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    timeout=timeout_s,
                )
                text = r.stdout.decode("utf-8", "replace")
                if r.returncode == 0:
                    parsed = parse_dump(text)
                    ent["kind"], ent["where"] = where_process(parsed, user_files)
                    ent["role"] = role(parsed["cmd"] or ent["cmd"]) if role_of is None else role_of
                    if pid == driver:
                        ent["role"] = "driver"
                else:
                    ent["error"] = (text.strip().splitlines() or ["exit %d" % r.returncode])[-1][:200]
            except (OSError, subprocess.TimeoutExpired) as e:
                text, ent["error"] = "", "py-spy: %s" % e
            parts.append("===== pid %d (%s) %s =====\n%s\n" % (pid, ent["role"], ent["cmd"], text.rstrip()))
        out.append(ent)
    try:
        with open(out_path, "w") as fh:
            fh.write("".join(parts) or "no process of the attempt was alive\n")
    except OSError:
        pass
    return out
