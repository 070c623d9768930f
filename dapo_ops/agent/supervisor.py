"""The detached retry supervisor: runs verl attempts for one run, escalates on OOM, resumes.

STDLIB ONLY (shipped into the training container, see ``dapo_ops/control/remote_bundle.py``)::

    cd <workdir> && PYTHONPATH=<bundle> python3 -m dapo_ops.agent.supervisor <run_dir>

Per run (``<run_dir>/spec.json``, docs/design.md "Run spec"):

1. read ``spec.json`` and ``secret.env`` (then delete it; secrets stay in memory only), take the
   one-run-per-container lock (``runstate.acquire_lock``), write ``run.json``;
2. per attempt ``k``: argv = ``overrides.build_command(spec, features, setting_changes)``; start verl in
   its **own session / process group** with stdout+stderr into ``attempt-<k>.log``; follow that file
   incrementally (kept offset, never re-read), copy it into ``train.log`` between delimiter lines, parse
   ``step:N - k:v`` metrics, ``Total training steps: N``, resume lines and SwanLab's ``View run … at <url>``;
3. as soon as ``classify.is_device_oom_line`` fires (not at exit: the other ranks hang in a collective),
   or the process exits, or no progress for ``hang_timeout_s``: stop the attempt's process group (SIGTERM,
   then SIGKILL; own processes only, never by name), classify the attempt log's tail, ask
   ``ladder.decide`` and either retry (next FeatureSet / setting changes, ``trainer.resume_mode=auto`` on the
   same checkpoint dir, same experiment, same SwanLab run id) or stop with the suggestions;
4. SIGTERM/SIGINT to the supervisor (``inv stop``) stops the verl group and marks the run ``stopped``.

Tunables (optional ``spec["supervisor"]`` dict; seconds): ``poll_interval_s`` (0.25), ``oom_grace_s`` (1.0:
output still collected after the OOM line before the kill), ``kill_grace_s`` (15: SIGTERM → SIGKILL),
``retry_delay_s`` (10 on NPU — HCCL ``EJ0001`` if restarted too soon —; on GPU at most 3: the wait ends as soon as
``nvidia-smi --query-compute-apps`` lists none of the stopped attempt's PIDs and the GPUs' used memory is back
near what it was before attempt 1, :func:`wait_gpu_release`), ``release_wait_max_s`` (60: the bound on the latter),
``write_interval_s`` (1.0: run.json progress throttle), ``oom_counter_files`` (list of paths, default
:data:`OOM_COUNTER_FILES`). ``hang_timeout_s`` is top-level in the spec.
"""

from __future__ import annotations

import argparse
import codecs
import importlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from dapo_ops.agent import notify
from dapo_ops.core import classify, features, ladder, overrides, redact, runstate
from dapo_ops.core.logformat import (ANSI_RE, RESUME_RE, SAVE_RE, SCRATCH_MARK, TOTAL_RE,  # noqa: F401
                                     parse_metrics_line, parse_swanlab_url, swanlab_run_id)
#: secret.env names the notifier owns (notify.spec_from_user_config: DAPO_NOTIFY_URL_<i>, DAPO_NOTIFY_SIGN_<i>)
NOTIFY_SECRET_PREFIX = "DAPO_NOTIFY_"
#: root of the per-attempt Ray temp dirs (RAY_TMPDIR, read by ray/_common/utils.py get_default_system_temp_dir).
#: Short on purpose: Ray's socket paths <RAY_TMPDIR>/ray/session_<date>_<pid>/sockets/plasma_store must stay
#: under the 107-byte AF_UNIX limit.
RAY_TMP_ROOT = "/tmp/dray"
TRACKER_NAME = "latest_checkpointed_iteration.txt"

# metrics kept in run.json (the full set stays in the log); plus every val-core/* key
KEY_METRICS = (
    "critic/score/mean",
    "critic/rewards/mean",
    "response_length/mean",
    "response_length/clip_ratio",
    "perf/throughput",
    "perf/time_per_step",
    "perf/max_memory_allocated_gb",
    "actor/pg_loss",
    "actor/entropy",
    "actor/grad_norm",
    "timing_s/step",
    "timing_s/gen",
    "timing_s/update_actor",
)
MAX_STEP_TIMES = 50
TAIL_BYTES = 4 << 20

#: final-failure classes after which a multi-host run checks whether a Ray node was lost (the likelier cause)
LOST_NODE_CLASSES = ("network", "hccl-timeout", "crash-other", "hang")

DEFAULT_TUNABLES = {
    "poll_interval_s": 0.25,
    "oom_grace_s": 1.0,
    "kill_grace_s": 15.0,
    "write_interval_s": 1.0,
    "release_wait_max_s": 60.0,
}


def _now() -> float:
    return time.time()


def _iso(t: Optional[float] = None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(_now() if t is None else t))


def log(msg: str) -> None:
    """One line to the supervisor's own log (its stderr is ``<run_dir>/supervisor.log``)."""
    sys.stderr.write("%s supervisor[%d]: %s\n" % (_iso(), os.getpid(), msg))
    sys.stderr.flush()


# ---------------------------------------------------------------------------- secret.env (pure)


def parse_env_file(text: str) -> Dict[str, str]:
    """``KEY=VALUE`` lines (``export`` prefix, ``#`` comments, one level of matching quotes allowed)."""
    out: Dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[7:].lstrip()
        if "=" not in line:
            continue
        k, v = line.split("=", 1)
        k = k.strip()
        v = v.strip()
        if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"":
            v = v[1:-1]
        if re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", k):
            out[k] = v
    return out


# ---------------------------------------------------------------------------- processes (own only)


def _proc_stat(pid: int) -> Optional[Tuple[int, int, int]]:
    """(ppid, pgrp, session) of ``pid`` from /proc/<pid>/stat, or None."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    try:
        fields = data[data.rindex(b")") + 2 :].split()
        if fields[0] == b"Z":
            return None
        return int(fields[1]), int(fields[2]), int(fields[3])
    except (ValueError, IndexError):
        return None


def own_processes(pgid: Optional[int], marker: Optional[bytes], cmd_marker: Optional[bytes] = None) -> List[int]:
    """PIDs that belong to one attempt: members of process group / session ``pgid`` (verl was started
    with ``start_new_session``, so pgid == sid == its pid), every process whose environment holds
    ``marker`` (``DAPO_OPS_RUN_ID=<run_id>``, inherited by Ray workers that called setsid or were
    re-parented) and every process whose command line holds ``cmd_marker`` (the attempt's own Ray temp dir:
    raylet, gcs_server, dashboard, log monitor and workers of THIS attempt's Ray session name it in their
    argv, ``--session_dir=<RAY_TMPDIR>/ray/session_...``; another run's cluster never does). The supervisor
    itself is excluded. Zombies are skipped."""
    me = os.getpid()
    out: List[int] = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for n in names:
        if not n.isdigit():
            continue
        pid = int(n)
        if pid == me:
            continue
        st = _proc_stat(pid)
        if st is None:
            continue
        if pgid and (st[1] == pgid or st[2] == pgid):
            out.append(pid)
            continue
        if cmd_marker:
            try:
                with open("/proc/%d/cmdline" % pid, "rb") as fh:
                    if cmd_marker in fh.read():
                        out.append(pid)
                        continue
            except OSError:
                pass
        if marker:
            try:
                with open("/proc/%d/environ" % pid, "rb") as fh:
                    env = fh.read()
            except OSError:
                continue
            if marker + b"\0" in env or env.endswith(marker):
                out.append(pid)
    return out


def _signal_all(pgid: Optional[int], pids: List[int], sig: int) -> None:
    if pgid:
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def stop_process_group(
    proc: Optional[subprocess.Popen], pgid: Optional[int], marker: Optional[bytes], grace_s: float,
    cmd_marker: Optional[bytes] = None,
) -> List[int]:
    """SIGTERM the attempt's own processes, wait up to ``grace_s`` s, SIGKILL what is left, reap ``proc``.

    Returns the PIDs that needed SIGKILL. Never signals anything outside :func:`own_processes` (with the
    same ``cmd_marker``: the attempt's Ray temp dir, so its Ray daemons and actors go too).
    """
    pids = own_processes(pgid, marker, cmd_marker)
    if not pids and (proc is None or proc.poll() is not None):
        return []
    _signal_all(pgid, pids, signal.SIGTERM)
    deadline = _now() + grace_s
    left = pids
    while _now() < deadline:
        if proc is not None:
            proc.poll()
        left = own_processes(pgid, marker, cmd_marker)
        if not left and (proc is None or proc.returncode is not None):
            break
        time.sleep(0.1)
    killed: List[int] = []
    if left:
        killed = list(left)
        _signal_all(pgid, left, signal.SIGKILL)
        deadline = _now() + 10.0
        while _now() < deadline and own_processes(pgid, marker, cmd_marker):
            if proc is not None:
                proc.poll()
            time.sleep(0.1)
    if proc is not None:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover - unkillable (D state)
            pass
    return killed


def _smi(*query: str, timeout_s: float = 10.0) -> Optional[List[str]]:
    """The whitespace-separated fields ``nvidia-smi <query...>`` prints, or None when nvidia-smi is missing,
    fails or hangs past ``timeout_s`` s."""
    try:
        r = subprocess.run(["nvidia-smi", *query], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout.decode().split() if r.returncode == 0 else None


def gpu_compute_pids(timeout_s: float = 10.0) -> Optional[List[int]]:
    """PIDs holding GPU memory (``nvidia-smi --query-compute-apps=pid --format=csv,noheader``), or None when
    nvidia-smi is missing or fails."""
    out = _smi("--query-compute-apps=pid", "--format=csv,noheader", timeout_s=timeout_s)
    return None if out is None else [int(x) for x in out if x.strip().isdigit()]


def wait_gpu_release(pids: List[int], max_s: float, every_s: float = 0.2,
                     stop: Callable[[], bool] = lambda: False, baseline_mib: Optional[List[int]] = None,
                     slack_mib: int = 1024, mem_max_s: float = 60.0) -> float:
    """Wait until the stopped attempt's device memory is free again. Returns the seconds waited.

    Two conditions, both read from nvidia-smi: no PID of ``pids`` (the attempt's processes) is listed by
    ``--query-compute-apps`` (at most ``max_s`` s), and, when ``baseline_mib`` (per-GPU MiB used before the run's
    first attempt) is given, every GPU's ``memory.used`` is back within ``slack_mib`` MiB of it (at most
    ``mem_max_s`` s in all). The second condition exists because of a real run (tests/fixtures/real-verl/tool-runs,
    scenario d): the PID wait ended after 0.97 s while 136201 MiB were still in use; the driver frees a dead
    process's memory a while after the process leaves the list. Without nvidia-smi the full ``max_s`` (the old
    fixed delay). Ends early when ``stop()`` is true (a SIGTERM to the supervisor)."""
    t0 = _now()
    own = set(pids)
    smi = True
    pids_gone = False
    while not stop():
        waited = _now() - t0
        if smi and not pids_gone:
            apps = gpu_compute_pids()
            if apps is None:
                smi = False  # no nvidia-smi: the fixed delay
            elif not own.intersection(apps) or waited >= max_s:
                pids_gone = True  # (still listed after max_s: judge by the memory alone)
        if not smi:
            if waited >= max_s:
                break
        elif pids_gone:
            if not baseline_mib:
                break
            used = device_memory_used_mib()
            if used is None or (len(used) == len(baseline_mib)
                                and all(u <= b + slack_mib for u, b in zip(used, baseline_mib))):
                break
            if waited >= mem_max_s:
                break
        time.sleep(every_s)
    return _now() - t0


def device_memory_used_mib(timeout_s: float = 10.0) -> Optional[List[int]]:
    """Per-GPU used memory (MiB) from ``nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits``, or
    None when nvidia-smi is missing or fails (recorded after an attempt's teardown: what the next one finds)."""
    out = _smi("--query-gpu=memory.used", "--format=csv,noheader,nounits", timeout_s=timeout_s)
    try:
        return None if out is None else [int(float(x)) for x in out if x.strip()]
    except ValueError:
        return None


# ---------------------------------------------------------------------------- kernel OOM kills

# Where the OOM-kill counter of this container is visible from inside it: cgroup v2, cgroup v1, then the
# kernel's global counter (``/proc/vmstat`` ``oom_kill``, Linux >= 4.13; not namespaced).
OOM_COUNTER_FILES = ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control", "/proc/vmstat")


def oom_kill_count(files=OOM_COUNTER_FILES) -> Optional[Tuple[str, int]]:
    """``(file, count)`` of the first readable ``oom_kill <N>`` counter in ``files``, or None.

    The supervisor compares it before and after an attempt: a SIGKILLed verl (exit 137) plus a grown
    counter is the kernel / cgroup OOM killer (``oom-host``), which ``docker inspect`` cannot tell from
    inside the container; a bare 137 is not (failure-classes.md ``oom-host``).
    """
    for path in files:
        try:
            with open(path, "r") as fh:
                for line in fh:
                    parts = line.split()
                    if len(parts) == 2 and parts[0] == "oom_kill":
                        return path, int(parts[1])
        except (OSError, ValueError):
            continue
    return None


# ---------------------------------------------------------------------------- checkpoints


def latest_checkpoint(ckpt_dir: Optional[str], repair: bool = True) -> Optional[int]:
    """The step the next attempt resumes from (verl ``resume_mode=auto`` reads
    ``<ckpt_dir>/latest_checkpointed_iteration.txt``; verl.md §10), or None (fresh start).

    When the tracker names a ``global_step_N`` that is missing or empty (a kill during save), the
    newest non-empty older ``global_step_M`` is used and, with ``repair``, the tracker is rewritten to M
    (failure-classes.md §4: "verify that the checkpoint the tracker file names is complete").
    """
    if not ckpt_dir:
        return None
    root = Path(ckpt_dir)
    try:
        n = int((root / TRACKER_NAME).read_text().strip())
    except (OSError, ValueError):
        return None

    def ok(step: int) -> bool:
        d = root / ("global_step_%d" % step)
        try:
            return d.is_dir() and any(d.iterdir())
        except OSError:
            return False

    if ok(n):
        return n
    older = []
    for p in root.glob("global_step_*"):
        try:
            s = int(p.name.split("_")[-1])
        except ValueError:
            continue
        if s < n and ok(s):
            older.append(s)
    m = max(older) if older else None
    if repair:
        try:
            tmp = root / (TRACKER_NAME + ".tmp")
            if m is None:
                os.replace(str(root / TRACKER_NAME), str(root / (TRACKER_NAME + ".torn")))
            else:
                tmp.write_text(str(m))
                os.replace(str(tmp), str(root / TRACKER_NAME))
            log("checkpoint global_step_%d is incomplete; resuming from %s" % (n, m if m is not None else "scratch"))
        except OSError as e:
            log("could not repair checkpoint tracker: %s" % e)
    return m


# ---------------------------------------------------------------------------- the supervisor


class _Stop(Exception):
    """Raised inside the attempt loop when the supervisor was asked to stop."""


def ending_line(status: str, reason: Optional[str], step: Optional[int], total: Optional[int]) -> str:
    """What ended a run, one line, as ``status`` / ``watch`` / the notifier show it (run.json ``decision.ended``):
    ``failed: device OOM after 2 OOM retries (MAX_OOM_RETRIES=2) at step 4/20``, ``succeeded at step 6/6``,
    ``stopped: stopped by the operator before the first step``. ``reason`` is the terminal decision's reason
    (ladder.Decision.reason) or the verdict's action; ``step``/``total`` in steps (None: no step reached)."""
    where = "before the first step" if step is None else "at step %s/%s" % (step, total if total else "?")
    if status == "succeeded":
        return "succeeded %s" % where
    reason = (reason or "").rstrip(". ")
    if not reason or reason.startswith(status):  # "stopped by the operator"
        return "%s %s" % (reason or status, where)
    return "%s: %s %s" % (status, reason, where)


class _BuildError(Exception):
    """The verl command for the next attempt cannot be built (one-line reason)."""


class Supervisor:
    """One run's supervisor. ``run()`` returns the process exit code (0 succeeded/stopped, 1 failed).

    ``command_factory(spec, features, setting_changes) -> list[str]`` defaults to
    ``overrides.build_command``; tests and ``bench/reaction.py`` pass a fake verl instead.
    The first attempt starts from the spec's ``setting_changes`` (the memory-fit estimate's rungs,
    recorded in ``memory_rungs`` with source ``estimate``); the ladder's changes are merged on top.
    """

    def __init__(self, run_dir: str, command_factory: Optional[Callable[..., List[str]]] = None):
        self.run_dir = str(run_dir)
        self.paths = runstate.RunPaths(run_dir)
        self.command_factory = command_factory
        self.stop_requested = False
        self.spec: Dict[str, Any] = {}
        self.secret_env: Dict[str, str] = {}
        self.rec: Dict[str, Any] = {}
        self.tun = dict(DEFAULT_TUNABLES)
        self.train_log = None  # binary append handle
        self.proc: Optional[subprocess.Popen] = None
        self.pgid: Optional[int] = None
        self.marker: Optional[bytes] = None
        self.cmd_marker: Optional[bytes] = None  # the current attempt's Ray temp dir (ray_tmpdir)
        self.att_pids: List[int] = []  # the current attempt's processes when its teardown began
        self._last_write = 0.0
        self._dirty = False
        self._notify_threads: List[threading.Thread] = []
        self.lock_taken = False
        self.swanlab_id: Optional[str] = None
        self._tl_nl = True
        self._scanner: Any = None

    # -- setup -------------------------------------------------------------

    def _load(self) -> None:
        self.spec = runstate.read_spec(self.run_dir)
        try:
            text = self.paths.secret_env.read_text()
        except FileNotFoundError:
            text = ""
        if text:
            self.secret_env = parse_env_file(text)
        try:
            os.unlink(str(self.paths.secret_env))
        except FileNotFoundError:
            pass
        sup = self.spec.get("supervisor") or {}
        self.tun.update({k: float(v) for k, v in sup.items() if k in DEFAULT_TUNABLES or k == "retry_delay_s"})
        if "retry_delay_s" not in self.tun:
            self.tun["retry_delay_s"] = 10.0 if self.spec.get("accelerator", "npu") == "npu" else 3.0
        self.hang_timeout_s = float(self.spec.get("hang_timeout_s") or 1800)
        self.max_oom_retries = int(self.spec.get("max_oom_retries", 2))
        self.marker = ("DAPO_OPS_RUN_ID=%s" % self.spec.get("run_id")).encode()

    def _runs_dir(self) -> str:
        return str(Path(self.run_dir).resolve().parent)

    def _settings(self) -> Dict[str, Any]:
        s = dict(self.spec.get("settings") or {})
        s.update(self.rec.get("setting_changes") or {})
        s.setdefault("framework", self.spec.get("framework"))  # the memory ladder's rungs depend on both
        s.setdefault("mode", self.spec.get("mode"))
        return s

    # -- run.json ----------------------------------------------------------

    def _write(self, force: bool = True) -> None:
        now = _now()
        if not force and now - self._last_write < self.tun["write_interval_s"]:
            self._dirty = True
            return
        try:
            runstate.write_run(self.run_dir, self.rec)
            self._last_write = now
            self._dirty = False
        except OSError as e:  # disk full etc.: keep running, say so in our own log
            log("could not write run.json: %s" % e)

    def _set_status(self, status: str) -> None:
        self.rec["status"] = status
        self._write()

    # -- notifications (never fatal) ----------------------------------------

    def _notify(self, event: str, verdict: Optional[Dict[str, Any]] = None, reason: str = "",
                suggestions: Optional[List[str]] = None) -> None:
        """Post ``event`` (escalation|failure|hang|success) via ``notify.send_event`` in a daemon thread;
        whether it is due is ``notify.should_notify``'s call (spec ``notify``). Errors go to supervisor.log.
        ``reason``: the action line (for a final failure the run's ending line, never the verdict's "retry ...");
        ``suggestions``: the ladder's next parameters to change (final failures)."""
        cfg = self.spec.get("notify") or {}
        if not cfg.get("webhooks"):
            return
        verdict = verdict or {}
        payload = {
            "kind": event,
            "host": self.spec.get("host"),
            "container": self.spec.get("container"),
            "run_id": self.spec.get("run_id"),
            "status": self.rec.get("status"),
            "attempt": self.rec.get("attempt"),
            "step": self.rec.get("step"),
            "total_steps": self.rec.get("total_steps"),
            "verdict": verdict.get("cls"),
            "action": reason or verdict.get("action"),
            "hint": None if suggestions else verdict.get("hint"),
            "suggestions": list(suggestions or []),
            "features": [f.get("name") for f in self.rec.get("features") or []],
            "log": self.rec.get("log"),
            "swanlab_url": self.rec.get("swanlab_url"),
        }

        def send() -> None:
            try:
                errors = notify.send_event(cfg, self.secret_env, payload) or []
            except Exception as e:  # noqa: BLE001 - a notifier problem must never crash the run
                errors = ["notifier error: %s" % (str(e).splitlines()[0] if str(e) else type(e).__name__)]
            for err in errors:
                log("notification %s: %s" % (event, err))

        t = threading.Thread(target=send, name="notify-" + event, daemon=True)
        t.start()
        self._notify_threads.append(t)

    # -- train.log symlink ---------------------------------------------------

    def _link_workdir_log(self) -> None:
        workdir = self.spec.get("workdir")
        if not workdir:
            return
        link = Path(workdir) / "train.log"
        target = str(self.paths.train_log.resolve())
        try:
            if link.exists() and not link.is_symlink():
                log("%s is a regular file; not replacing it with a link to %s" % (link, target))
                return
            tmp = Path(workdir) / (".train.log.%d" % os.getpid())
            try:
                os.unlink(str(tmp))
            except FileNotFoundError:
                pass
            os.symlink(target, str(tmp))
            os.replace(str(tmp), str(link))
        except OSError as e:
            log("could not link %s -> %s: %s" % (link, target, e))

    # -- one attempt ---------------------------------------------------------

    def _child_env(self, k: int) -> Dict[str, str]:
        env = dict(os.environ)
        bundle = str(Path(__file__).resolve().parent.parent)
        pp = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and os.path.abspath(p) != bundle]
        if pp:
            env["PYTHONPATH"] = os.pathsep.join(pp)
        else:
            env.pop("PYTHONPATH", None)
        for key, val in (self.spec.get("env") or {}).items():
            env[str(key)] = str(val)
        # the webhook URLs / signing secrets are the notifier's, not verl's: keep them out of its environment
        env.update({k: v for k, v in self.secret_env.items() if not k.startswith(NOTIFY_SECRET_PREFIX)})
        env["PYTHONUNBUFFERED"] = "1"
        rtd = self.ray_tmpdir(k, env)
        if rtd:
            env["RAY_TMPDIR"] = rtd
        env["DAPO_OPS_RUN_ID"] = str(self.spec.get("run_id"))
        env["DAPO_OPS_ATTEMPT"] = str(k)
        if self.swanlab_id and "SWANLAB_RUN_ID" not in env:
            env["SWANLAB_RUN_ID"] = self.swanlab_id  # same SwanLab run across attempts (swanlab.md §9)
            env.setdefault("SWANLAB_RESUME", "allow")
        return env

    def ray_tmpdir(self, k: int, env: Optional[Dict[str, str]] = None) -> Optional[str]:
        """``/tmp/dray/<run_id>.<k>``: attempt ``k``'s own Ray temp dir (verl's ``ray.init()`` starts a local
        cluster there), so its Ray daemons can be found by command line and stopped with the attempt, and never
        another run's. None for a multi-host run (spec ``ray`` / ``RAY_ADDRESS``: the cluster is
        ``cluster_ops``'s) or when the run's env sets ``RAY_TMPDIR`` itself."""
        env = dict(os.environ) if env is None else env
        if self.spec.get("ray") or env.get("RAY_ADDRESS") or (self.spec.get("env") or {}).get("RAY_TMPDIR"):
            return None
        return "%s/%s.%d" % (RAY_TMP_ROOT, self.spec.get("run_id"), k)

    def _redact_argv(self, argv: List[str]) -> List[str]:
        """argv for supervisor.log: ``name=value`` items whose name looks secret (:func:`dapo_ops.core.redact.is_secret_name`:
        KEY/TOKEN/SECRET/PASSWORD words, but not sizes such as ``ppo_max_token_len_per_gpu``) and
        any value from secret.env are replaced by ``***`` (secrets never belong in argv; this is a safety net)."""
        out = []
        for a in argv:
            if "=" in a and redact.is_secret_name(a.split("=", 1)[0]):
                a = a.split("=", 1)[0] + "=***"
            for v in self.secret_env.values():
                if v and len(v) >= 4:
                    a = a.replace(v, "***")
            out.append(a)
        return out

    def _build_argv(self, fs, changes: Dict[str, Any]) -> List[str]:
        if self.command_factory is not None:
            return list(self.command_factory(self.spec, fs, dict(changes)))
        return list(overrides.build_command(self.spec, fs, dict(changes)))

    def _train_log_write(self, data: bytes) -> None:
        if self.train_log is not None and data:
            self.train_log.write(data)
            self.train_log.flush()
            self._tl_nl = data.endswith(b"\n")

    def _scan(self, lines: List[str], att: Dict[str, Any], is_oom: Callable[[str], bool], state: Dict[str, Any]) -> None:
        """Inspect complete lines: OOM, metrics, totals, resume, SwanLab link."""
        for line in lines:
            if not line:
                continue
            if "step:" in line:
                parsed = parse_metrics_line(line)
                if parsed is not None:
                    self._on_step(parsed[0], parsed[1], att)
            if "Total training steps" in line:
                m = TOTAL_RE.search(line)
                if m:
                    self.rec["total_steps"] = int(m.group(1))
                    self._dirty = True
            if "global_step" in line or "global step" in line:
                m = RESUME_RE.search(line)
                if m:
                    att["resumed_from"] = int(m.group(1) or m.group(2))
                    self._dirty = True
                m = SAVE_RE.search(line)
                if m:
                    att["saved_step"] = int(m.group(1))  # a save started (complete = on disk: latest_checkpoint)
                    self._dirty = True
            if not self.rec.get("swanlab_url") and (
                "View run" in line or "swanlab" in line or self._link_pending()
            ):
                url = self._feed_link(line)
                if url:
                    self.rec["swanlab_url"] = url
                    self.swanlab_id = swanlab_run_id(url)
                    self._write()
            if state.get("oom_line") is None and is_oom(line):
                state["oom_line"] = ANSI_RE.sub("", line).strip()[:500]
                state["oom_at"] = _now()
                att["oom_line_at"] = state["oom_at"]
                log("device OOM line in attempt %d: %s" % (att["n"], state["oom_line"][:200]))

    def _link_scanner(self):
        if self._scanner is None:
            try:
                env = dict(self.spec.get("env") or {})
                self._scanner = notify.LinkScanner(env.get("SWANLAB_RUN_ID"), env.get("SWANLAB_LOG_DIR"))
            except (ImportError, AttributeError):
                self._scanner = False
        return self._scanner

    def _link_pending(self) -> bool:
        sc = self._scanner
        return bool(sc) and bool(getattr(sc, "pending", False))

    def _feed_link(self, line: str) -> Optional[str]:
        """SwanLab's run link (or local/offline ``swanlab watch|sync`` command) from the output, once."""
        sc = self._link_scanner()
        if sc:
            try:
                return sc.feed(line)
            except Exception:  # noqa: BLE001 - a parser problem never stops supervision
                self._scanner = False
        return parse_swanlab_url(line)

    def _on_step(self, step: int, metrics: Dict[str, float], att: Dict[str, Any]) -> None:
        now = _now()
        prev_t = self.rec.get("last_progress_at")
        prev_step = self.rec.get("step")
        self.rec["step"] = step
        att["step_reached"] = step
        if step > 0:
            st = metrics.get("timing_s/step")
            if st is None and prev_t and prev_step is not None and step > prev_step and att.get("_had_step"):
                st = (now - prev_t) / (step - prev_step)
            if st is not None:
                self.rec["step_times"] = (list(self.rec.get("step_times") or []) + [round(st, 3)])[-MAX_STEP_TIMES:]
            att["_had_step"] = True
        self.rec["last_progress_at"] = now
        keep = {k: v for k, v in metrics.items() if k in KEY_METRICS or k.startswith("val-core/")}
        if keep:
            merged = dict(self.rec.get("metrics") or {})
            merged.update(keep)
            self.rec["metrics"] = merged
        self._dirty = True

    def _run_attempt(self, k: int, fs, changes: Dict[str, Any]) -> Dict[str, Any]:
        """Start attempt ``k`` and follow it to its end. Returns the outcome dict:
        ``exit_code`` (shell convention, 128+signal), ``killed_by`` (None|"oom"|"hang"|"stop"), ``oom_line``."""
        is_oom = classify.is_device_oom_line
        names = sorted(fs.names())
        resumed_from = latest_checkpoint(self._settings().get("ckpt_dir"))
        att: Dict[str, Any] = {
            "n": k,
            "features": fs.to_json(),
            "setting_changes": dict(changes),
            "started_at": _now(),
            "ended_at": None,
            "exit_code": None,
            "verdict": None,
            "step_reached": resumed_from,  # a resumed attempt starts at its checkpoint's step
            "resumed_from": resumed_from,
            "log": self.paths.attempt_log(k).name,
            "pid": None,
            "killed_by": None,
        }
        try:
            argv = self._build_argv(fs, changes)
        except Exception as e:  # noqa: BLE001 - e.g. overrides.OverrideError for a ladder setting change
            raise _BuildError(str(e).splitlines()[0] if str(e) else type(e).__name__) from None
        oom0 = oom_kill_count(tuple(self.spec.get("supervisor", {}).get("oom_counter_files") or OOM_COUNTER_FILES))
        if self.spec.get("accelerator") == "gpu" and k == 1:
            att["device_mem_before_mib"] = device_memory_used_mib()  # the baseline the retry waits return to
        self.rec["attempts"].append(att)
        self.rec["attempt"] = k
        self.rec["features"] = fs.to_json()
        self._train_log_write(
            ("===== dapo-ops attempt %d start %s features=%s =====\n" % (k, _iso(), ",".join(names))).encode()
        )
        alog = self.paths.attempt_log(k)
        wfd = os.open(str(alog), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        reader = open(str(alog), "rb")
        try:
            if self.stop_requested:
                raise _Stop()
            log("attempt %d: %s" % (k, " ".join(self._redact_argv(argv))))
            child_env = self._child_env(k)
            rtd = child_env.get("RAY_TMPDIR") if self.ray_tmpdir(k, child_env) else None
            self.cmd_marker = (rtd + "/").encode() if rtd else None  # a path component: never <rtd>0 / <rtd>-x
            att["ray_tmpdir"] = rtd
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=wfd,
                stderr=subprocess.STDOUT,
                cwd=self.spec.get("workdir") or None,
                env=child_env,
                start_new_session=True,
                close_fds=True,
            )
        except _Stop:
            os.close(wfd)
            reader.close()
            raise
        except OSError as e:
            os.close(wfd)
            reader.close()
            msg = "cannot start verl (%s): %s" % (argv[0] if argv else "?", e)
            with open(str(alog), "ab") as fh:
                fh.write((msg + "\n").encode())
            self._train_log_write((msg + "\n").encode())
            return {"exit_code": 127, "killed_by": None, "oom_line": None, "att": att, "container_state": None}
        os.close(wfd)
        self.pgid = self.proc.pid
        att["pid"] = self.proc.pid
        self.rec["pids"]["verl_pgid"] = self.pgid
        self.rec["last_progress_at"] = att["started_at"]
        self._set_status("running")

        state: Dict[str, Any] = {"oom_line": None, "oom_at": None}
        partial = ""
        decoder = codecs.getincrementaldecoder("utf-8")("replace")  # chunk ends may split a character
        killed_by: Optional[str] = None
        poll = self.tun["poll_interval_s"]

        def pump() -> bool:
            nonlocal partial
            data = reader.read(8 << 20)
            if not data:
                return False
            self._train_log_write(data)
            text = partial + decoder.decode(data)
            parts = re.split(r"[\r\n]", text)
            partial = parts.pop()
            if len(partial) > 1 << 20:  # a line without end: scan it anyway, keep the tail
                parts.append(partial)
                partial = ""
            self._scan(parts, att, is_oom, state)
            return True

        while True:
            got = pump()
            rc = self.proc.poll()
            if rc is not None:
                while pump():
                    pass
                break
            now = _now()
            if self.stop_requested:
                killed_by = "stop"
                break
            if state["oom_at"] is not None and now - state["oom_at"] >= self.tun["oom_grace_s"]:
                killed_by = "oom"
                break
            last = self.rec.get("last_progress_at") or att["started_at"]
            if now - last > self.hang_timeout_s:
                killed_by = "hang"
                log("no progress for %.0f s: hang" % (now - last))
                break
            if self._dirty:
                self._write(force=False)
            if not got:
                time.sleep(poll)

        if killed_by is not None:
            log("stopping attempt %d (%s), process group %d" % (k, killed_by, self.pgid))
        t_stop = _now()
        self.att_pids = own_processes(self.pgid, self.marker, self.cmd_marker)
        killed = stop_process_group(self.proc, self.pgid, self.marker, self.tun["kill_grace_s"], self.cmd_marker)
        att["teardown_s"] = round(_now() - t_stop, 3)
        if killed:
            log("SIGKILLed leftover own processes: %s" % killed)
        mem = device_memory_used_mib() if self.spec.get("accelerator") == "gpu" else None
        if mem is not None:
            att["device_mem_after_mib"] = mem
            log("attempt %d torn down in %.1f s; device memory used now (MiB): %s" % (k, att["teardown_s"], mem))
        while pump():
            pass
        if partial:
            self._scan([partial], att, is_oom, state)
        reader.close()
        rc = self.proc.returncode
        exit_code = (128 - rc) if rc is not None and rc < 0 else rc
        container_state = None
        if killed_by is None and exit_code in (137, 9) and oom0 is not None:
            oom1 = oom_kill_count((oom0[0],))
            if oom1 is not None and oom1[1] > oom0[1]:
                att["oom_kills"] = oom1[1] - oom0[1]
                container_state = {"OOMKilled": True, "source": oom0[0]}
                log("kernel OOM killer fired during attempt %d (%s oom_kill +%d)" % (k, oom0[0], oom1[1] - oom0[1]))
        return {"exit_code": exit_code, "killed_by": killed_by, "oom_line": state["oom_line"], "att": att,
                "container_state": container_state}

    # -- verdicts and decisions ------------------------------------------------

    def _classify(self, k: int, outcome: Dict[str, Any]) -> Dict[str, Any]:
        # our own kill's exit code (143/137) would read as a host OOM: pass None then
        code = None if outcome["killed_by"] else outcome["exit_code"]
        planned = self.rec.get("total_steps") or (self.spec.get("settings") or {}).get("steps")
        v = classify.classify_file(str(self.paths.attempt_log(k)), tail_bytes=TAIL_BYTES, exit_code=code,
                                   planned_total=planned, container_state=outcome.get("container_state"))
        return v.to_json()

    def _hang_verdict(self) -> Dict[str, Any]:
        mins = self.hang_timeout_s / 60.0
        return {
            "cls": "hang",
            "action_kind": "stop",
            "action": "no training progress for %.0f min: process group stopped" % mins,
            "hint": "No new `step:` line for %.0f minutes. Look at the end of the log (`inv logs --errors`) for a rank "
            "stuck in a collective (HCCL/NCCL), a missing Ray head or a stalled data loader; raise "
            "`hang_timeout_s` if steps are legitimately slower." % mins,
            "evidence": [],
            "detail": {"step": self.rec.get("step"), "total": self.rec.get("total_steps")},
        }

    def _decision_json(self, d) -> Dict[str, Any]:
        if hasattr(d, "to_json"):
            return dict(d.to_json())
        return {
            "action": d.action,
            "features": d.features.to_json(),
            "setting_changes": dict(d.setting_changes or {}),
            "reason": d.reason,
            "skipped": list(d.skipped or []),
            "suggestions": list(d.suggestions or []),
        }

    def _tried(self) -> List[Dict[str, Any]]:
        return [
            {
                "attempt": a["n"],
                "features": [f["name"] for f in a["features"]],
                "setting_changes": a.get("setting_changes") or {},
                "step_reached": a.get("step_reached"),
                "class": (a.get("verdict") or {}).get("cls"),
            }
            for a in self.rec["attempts"]
        ]

    def _final(self, status: str, verdict: Optional[Dict[str, Any]], decision: Dict[str, Any], notify: bool = True) -> int:
        tried = self._tried()
        decision["tried"] = tried
        decision["summary"] = "%d attempt(s); step reached %s/%s; last features: %s; %s" % (
            len(tried),
            self.rec.get("step"),
            self.rec.get("total_steps"),
            ",".join(tried[-1]["features"]) if tried else "-",
            decision.get("reason") or status,
        )
        decision["ended"] = ending_line(status, decision.get("reason") or (verdict or {}).get("action"),
                                        self.rec.get("step"), self.rec.get("total_steps"))
        self.rec["decision"] = decision
        if verdict is not None:
            self.rec["verdict"] = verdict
        self.rec["ended_at"] = _now()
        left = own_processes(self.pgid, self.marker)
        if left:  # leave nothing of the run behind (Ray agents outlive verl's driver): pgid + DAPO_OPS_RUN_ID only
            log("ending %d leftover process(es) of the run" % len(left))
            stop_process_group(None, self.pgid, self.marker, self.tun["kill_grace_s"])
        self.rec["pids"]["verl_pgid"] = None
        self._teardown_cluster()
        self._set_status(status)
        log("run %s: %s" % (status, decision["summary"]))
        if not notify:
            pass
        elif status == "succeeded":
            self._notify("success", verdict, decision["summary"])
        elif status == "failed":
            self._notify("failure", verdict, decision["ended"], suggestions=decision.get("suggestions"))
        return 0 if status in ("succeeded", "stopped") else 1

    # -- multi-host (spec "ray") ------------------------------------------------

    def _cluster_lost(self) -> Optional[Dict[str, Any]]:
        """Before a retry of a multi-host run: a stop verdict naming the lost node(s), or None when every
        node of ``spec["ray"]`` is still alive (or the run is single-host)."""
        ray_spec = self.spec.get("ray") or None
        if not ray_spec or len(ray_spec.get("nodes") or []) < 2:
            return None
        from dapo_ops.core import cluster

        view = cluster.cluster_view(self.spec.get("python") or sys.executable, ray_spec)
        verdict = cluster.lost_nodes_verdict(ray_spec, view)
        if verdict is not None:
            log("cluster check: %s" % verdict["evidence"][0])
        return verdict

    def _teardown_cluster(self) -> None:
        """End the head's ``ray start`` session of a multi-host run (its pid file is
        ``spec["ray"]["nodes"][0]["pid_file"]``); the workers' raylets lose the head and exit by themselves
        within seconds (``cluster.WORKER_GCS_RECONNECT_S``). Never raises."""
        nodes = (self.spec.get("ray") or {}).get("nodes") or []
        if not nodes or not nodes[0].get("pid_file"):
            return
        try:
            from dapo_ops.core import cluster

            n = cluster.stop_session(nodes[0]["pid_file"], self.tun["kill_grace_s"])
            log("Ray head session on %s stopped (%d processes)" % (nodes[0].get("name"), n))
        except Exception as e:  # noqa: BLE001
            log("could not stop the Ray head session: %s" % e)

    # -- main ------------------------------------------------------------------

    def _on_signal(self, signum, _frame) -> None:
        log("signal %d: stopping" % signum)
        self.stop_requested = True

    def _sleep(self, seconds: float) -> None:
        end = _now() + seconds
        while _now() < end and not self.stop_requested:
            time.sleep(min(0.1, max(0.0, end - _now())))

    def run(self) -> int:
        """Supervise the run to its end. Returns 0 (succeeded / stopped) or 1 (failed)."""
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        try:
            self._load()
        except Exception as e:  # noqa: BLE001
            log("cannot read the run spec: %s" % e)
            return 2
        self.rec = runstate.new_record(self.spec, os.getpid())
        ray_spec = self.spec.get("ray") or None
        if ray_spec:  # multi-host run: what `inv status` shows (docs/design.md run.json "cluster")
            self.rec["cluster"] = {
                "head": ray_spec.get("head"), "port": ray_spec.get("port"),
                "nodes": len(ray_spec.get("nodes") or []),
                "hosts": [n.get("name") for n in ray_spec.get("nodes") or []],
                "devices": sum(int(n.get("devices") or 0) for n in ray_spec.get("nodes") or []),
                "resources": ray_spec.get("resources") or {},
            }
        try:
            runstate.acquire_lock(self._runs_dir(), str(self.spec.get("run_id")), os.getpid(), self.run_dir)
            self.lock_taken = True
        except runstate.LockHeld as e:
            self.rec["ended_at"] = _now()
            self.rec["verdict"] = {
                "cls": "config-error",
                "action_kind": "stop",
                "action": str(e),
                "hint": "One run per container: stop the active run first or wait for it to finish.",
                "evidence": [],
                "detail": {"active_run": e.run_id},
            }
            self.rec["status"] = "failed"
            self._write()
            log(str(e))
            return 1
        self._write()
        try:
            return self._supervise()
        except Exception as e:  # noqa: BLE001 - record, clean up, never leave verl orphaned silently
            log("supervisor error: %s\n%s" % (e, traceback.format_exc()))
            try:
                stop_process_group(self.proc, self.pgid, self.marker, self.tun["kill_grace_s"], self.cmd_marker)
            except Exception:  # noqa: BLE001
                pass
            verdict = {
                "cls": "crash-other",
                "action_kind": "stop",
                "action": "supervisor error: %s" % (str(e).splitlines()[0] if str(e) else type(e).__name__),
                "hint": "See %s for the traceback." % self.paths.supervisor_log,
                "evidence": [],
                "detail": {},
            }
            return self._final("failed", verdict, {"action": "stop", "reason": verdict["action"], "suggestions": []})
        finally:
            if self.train_log is not None:
                self.train_log.close()
            if self.lock_taken:
                runstate.release_lock(self._runs_dir(), str(self.spec.get("run_id")))
            for t in self._notify_threads:
                t.join(timeout=20)

    def _supervise(self) -> int:
        fs = features.FeatureSet.from_json(self.spec.get("features") or [], self.spec.get("disabled_features") or ())
        changes: Dict[str, Any] = dict(self.spec.get("setting_changes") or {})  # memfit's start rung (source estimate)
        self.rec["setting_changes"] = dict(changes)
        oom_used = 0
        other_used: Dict[str, int] = {}
        self.train_log = open(str(self.paths.train_log), "ab")
        self._link_workdir_log()
        k = 0
        while True:
            k += 1
            try:
                out = self._run_attempt(k, fs, changes)
            except _Stop:
                return self._final("stopped", None, {"action": "stop", "reason": "stopped by the operator"})
            except _BuildError as e:
                verdict = {"cls": "config-error", "action_kind": "stop",
                           "action": "cannot build the verl command for attempt %d: %s" % (k, e),
                           "hint": "The run spec (or a ladder setting change) is invalid for the override generator; "
                                   "fix the named value and launch again.",
                           "evidence": [str(e)], "detail": {"attempt": k, "setting_changes": dict(changes)}}
                return self._final("failed", verdict, {"action": "stop", "reason": verdict["action"], "suggestions": []})
            att = out["att"]
            att["exit_code"] = out["exit_code"]
            att["killed_by"] = out["killed_by"]
            att["ended_at"] = _now()
            att.pop("_had_step", None)
            if out["killed_by"] == "stop":
                self._end_delimiter(k, out["exit_code"], "stopped")
                return self._final("stopped", None, {"action": "stop", "reason": "stopped by the operator"})
            if out["killed_by"] == "hang":
                verdict = self._hang_verdict()
            else:
                verdict = self._classify(k, out)
            att["verdict"] = verdict
            self.rec["verdict"] = verdict
            cls = verdict.get("cls")
            self._end_delimiter(k, out["exit_code"], cls)
            if cls == "hang":
                self._notify("hang", verdict, verdict["action"])
            settings = self._settings()
            d = ladder.decide(fs, cls, verdict.get("detail") or {}, k, oom_used, self.max_oom_retries, dict(other_used), settings)
            dj = self._decision_json(d)
            self.rec["decision"] = dj
            log("attempt %d: class=%s exit=%s -> %s (%s)" % (k, cls, out["exit_code"], d.action, d.reason))
            if d.action == "retry":
                counter = getattr(d, "counter", None)
                if counter == "oom":
                    oom_used += 1
                elif counter:
                    other_used[counter] = other_used.get(counter, 0) + 1
                fs = d.features
                changes.update(d.setting_changes or {})
                self.rec["setting_changes"] = dict(changes)
                self.rec["features"] = fs.to_json()
                self._set_status("retrying")
                self._notify("escalation", verdict, d.reason)
                if self.spec.get("accelerator") == "gpu" and not self.stop_requested:
                    # GPU: the delay only waits out device-memory release (HCCL needs the full one on NPU)
                    base = (self.rec["attempts"][0] or {}).get("device_mem_before_mib")
                    att["release_wait_s"] = round(wait_gpu_release(
                        self.att_pids, self.tun["retry_delay_s"], stop=lambda: self.stop_requested,
                        baseline_mib=base, mem_max_s=self.tun["release_wait_max_s"]), 3)
                    after = device_memory_used_mib()
                    if after is not None:
                        att["device_mem_at_retry_mib"] = after
                        log("device memory used before attempt %d (MiB): %s (before attempt 1: %s)"
                            % (k + 1, after, base))
                else:
                    self._sleep(self.tun["retry_delay_s"])
                left = own_processes(self.pgid, self.marker, self.cmd_marker)
                if left:
                    stop_process_group(None, self.pgid, self.marker, self.tun["kill_grace_s"], self.cmd_marker)
                if self.stop_requested:
                    return self._final("stopped", verdict, {"action": "stop", "reason": "stopped by the operator"})
                lost = self._cluster_lost()
                if lost is not None:  # never retry on fewer nodes: the checkpoint is tied to the world size
                    self.rec["verdict"] = lost
                    return self._final("failed", lost, {"action": "stop", "reason": lost["action"], "suggestions": []})
                continue
            if d.action == "done" or (d.action == "keep-running" and out["exit_code"] == 0):
                return self._final("succeeded", verdict, dj)
            if cls in LOST_NODE_CLASSES:  # multi-host: a lost node is the likelier cause; say which one
                lost = self._cluster_lost()
                if lost is not None:
                    lost["detail"]["attempt_verdict"] = {k: verdict.get(k) for k in ("cls", "action", "evidence")}
                    att["verdict"] = self.rec["verdict"] = lost
                    return self._final("failed", lost, {"action": "stop", "reason": lost["action"], "suggestions": []})
            if cls == "hang":  # already notified as a hang
                self.rec["decision"] = dj
                return self._final("failed", verdict, dj, notify=False)
            return self._final("failed", verdict, dj)

    def _end_delimiter(self, k: int, exit_code: Optional[int], cls: Optional[str]) -> None:
        self._train_log_write(
            (b"" if self._tl_nl else b"\n")
            + ("===== dapo-ops attempt %d end exit=%s class=%s =====\n" % (k, exit_code, cls or "-")).encode()
        )


def _load_factory(spec: str) -> Callable[..., List[str]]:
    mod, _, attr = spec.partition(":")
    return getattr(importlib.import_module(mod), attr or "build_command")


def main(argv: Optional[List[str]] = None) -> int:
    """``python3 -m dapo_ops.agent.supervisor RUN_DIR [--command-factory module:function]``.

    ``--command-factory`` replaces ``overrides.build_command`` (same signature); for tests and benches
    with a fake verl only.
    """
    p = argparse.ArgumentParser(prog="python3 -m dapo_ops.agent.supervisor", description=__doc__.splitlines()[0])
    p.add_argument("run_dir")
    p.add_argument("--command-factory", default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    try:  # own session: survives the docker exec / SSH session that started it (fabric-invoke.md §8)
        os.setsid()
    except OSError:
        pass  # already a session leader
    factory = _load_factory(a.command_factory) if a.command_factory else None
    return Supervisor(a.run_dir, factory).run()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
