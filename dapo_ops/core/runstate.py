"""The run record's schema and the runs dir's path rules: run ids, per-run paths, the one run-status set, run.json.

PURE and STDLIB ONLY (shipped in the bundle, ``dapo_ops/control/remote/bundle.py``): no file, process or clock is
touched here except the clock a default ``now`` reads; :mod:`dapo_ops.agent.runfiles` reads and writes these files
on the machine (atomic writes, the one-run lock, liveness), and the operator side builds the same paths for a
remote container.

Layout (docs/design.md "Run directory and run.json")::

    <runs_dir>/                         default <workdir>/dapo_runs
      .lock                             {"run_id", "pid", "run_dir", "since"}: one run per container
      <run_id>/spec.json run.json train.log attempt-<k>.log supervisor.log checkpoints/ hydra/

``run.json`` is the only thing ``status`` / ``watch`` read; it is strict JSON (:func:`json_safe`) and rewritten
atomically (``run.json.tmp`` + fsync + rename, :func:`dapo_ops.agent.runfiles.write_json_atomic`) so a reader never
sees half a record.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import time
from enum import Enum

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only (postponed), so neither typing nor pathlib loads at import: the status
    from pathlib import Path  # probe imports this module on every look (bench/status.py "look" rows)
    from typing import Any, Dict, Iterable, List, Mapping, Optional

SCHEMA_VERSION = 1


class RunStatus(str, Enum):
    """The one set of run statuses (docs/design.md "Run directory and run.json"), with what each one means for a
    reader (SkyPilot's ``JobStatus.is_terminal()``, ``sky/skylet/job_lib.py``, is the model).

    ``run.json`` ``status`` holds the member's value, a plain string: the supervisor
    (``dapo_ops/agent/supervisor/machine.py``) writes starting -> running (-> retrying -> running ...) -> succeeded |
    failed | stopped; ``inv stop`` writes stopped (or failed, ``--by``) for a dead supervisor
    (``dapo_ops/agent/runstop.py``). :attr:`UNKNOWN` is written by no one: it is the status readers give a run dir
    whose supervisor never wrote run.json (a launch that died first: ``dapo_ops/agent/runfiles.py`` ``list_runs``,
    ``dapo_ops/agent/runprobe.py`` ``probe_status``, ``dapo_ops/agent/runstop.py``); it is neither active nor terminal.
    A member compares and hashes equal to its string (``RunStatus.RUNNING == "running"``) and prints as it.
    """

    STARTING = "starting"
    RUNNING = "running"
    RETRYING = "retrying"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    STOPPED = "stopped"
    UNKNOWN = "unknown"

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)

    @property
    def active(self) -> bool:
        """A supervisor is expected to be alive (its PID is in run.json ``pids.supervisor``): starting, running,
        retrying."""
        return self in (RunStatus.STARTING, RunStatus.RUNNING, RunStatus.RETRYING)

    @property
    def terminal(self) -> bool:
        """The run is over; run.json is not written again (``inv launch --resume`` starts a new record): succeeded,
        failed, stopped."""
        return self in (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.STOPPED)

    @property
    def written(self) -> bool:
        """A status run.json can hold (every member but :attr:`UNKNOWN`)."""
        return self is not RunStatus.UNKNOWN

    @classmethod
    def of(cls, value: object) -> RunStatus:
        """The member a run.json ``status`` value names; :attr:`UNKNOWN` for None, a missing record or a string
        that is no status (never raises)."""
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


LOCK_NAME = ".lock"
RUN_ID_RE = re.compile(r"^\d{8}-\d{6}-[0-9a-f]{4}$")
# argv marker of a live supervisor process (python3 -m dapo_ops.agent.supervisor <run_dir>)
SUPERVISOR_MARKER = b"dapo_ops.agent.supervisor"

SPEC_NAME = "spec.json"
RUN_NAME = "run.json"
TRAIN_LOG_NAME = "train.log"
SUPERVISOR_LOG_NAME = "supervisor.log"
SECRET_ENV_NAME = "secret.env"
#: verl's checkpoint tracker in a run's ckpt dir: the step ``trainer.resume_mode=auto`` resumes from (written at each
#: save, verl/trainer/ppo/ray_trainer.py:1046-1050)
TRACKER_NAME = "latest_checkpointed_iteration.txt"


# ---------------------------------------------------------------------------- ids and paths


def _path(p: "os.PathLike[str] | str") -> "Path":
    """``pathlib.Path(p)``, importing pathlib on first use."""
    from pathlib import Path

    return Path(p)


def new_run_id(now: Optional[float] = None) -> str:
    """Return a new run id ``YYYYMMDD-HHMMSS-xxxx`` (UTC time + 4 random hex digits).

    ``now`` is a Unix time in seconds (default: the current time). Ids sort by start time.
    """
    t = time.time() if now is None else now
    stamp = _dt.datetime.fromtimestamp(t, tz=_dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    import secrets  # here, not at import: the status probe never makes a run id

    return "%s-%s" % (stamp, secrets.token_hex(2))


def is_run_id(text: str) -> bool:
    """True when ``text`` has the run id shape ``YYYYMMDD-HHMMSS-xxxx``."""
    return bool(RUN_ID_RE.fullmatch(text or ""))


class RunPaths:
    """The files of one run directory (all absolute or all relative, as ``run_dir`` is given).

    Attributes (``pathlib.Path``): ``run_dir, spec, run_json, train_log, supervisor_log,
    secret_env, checkpoints, hydra``; ``attempt_log(k)`` gives ``attempt-<k>.log``.
    """

    def __init__(self, run_dir: "os.PathLike[str] | str"):
        self.run_dir = _path(run_dir)
        self.spec = self.run_dir / SPEC_NAME
        self.run_json = self.run_dir / RUN_NAME
        self.train_log = self.run_dir / TRAIN_LOG_NAME
        self.supervisor_log = self.run_dir / SUPERVISOR_LOG_NAME
        self.secret_env = self.run_dir / SECRET_ENV_NAME
        self.checkpoints = self.run_dir / "checkpoints"
        self.hydra = self.run_dir / "hydra"

    def attempt_log(self, k: int) -> Path:
        """Path of attempt ``k``'s own log (``attempt-<k>.log``; ``k`` starts at 1)."""
        return self.run_dir / ("attempt-%d.log" % int(k))


def run_dir_for(runs_dir: "os.PathLike[str] | str", run_id: str) -> str:
    """``<runs_dir>/<run_id>`` as a POSIX string (paths are container paths)."""
    return "%s/%s" % (str(runs_dir).rstrip("/"), run_id)


def run_ids_newest_first(names: "Iterable[str]") -> "List[str]":
    """The run ids among ``names`` (directory entries of a runs dir or of its ``.cluster``), newest first (run ids
    sort by start time); other names (``.lock``, ``.learned``, ``checkpoints``) are left out."""
    return sorted((n for n in names if is_run_id(n)), reverse=True)


def is_supervisor_argv(cmdline: bytes, run_dir: Optional[str] = None) -> bool:
    """True when ``cmdline`` (``/proc/<pid>/cmdline``: NUL-separated argv) is a dapo-ops supervisor's, for
    ``run_dir`` when given (an argument equal to it, or ending in its last component): the rule that tells a live
    supervisor from a PID recycled after a container restart (:func:`dapo_ops.agent.runfiles.is_supervisor_pid`)."""
    if SUPERVISOR_MARKER not in cmdline:
        return False
    if run_dir:
        want = str(run_dir).rstrip("/")
        args = [a.decode("utf-8", "replace").rstrip("/") for a in cmdline.split(b"\0") if a]
        return any(a == want or a.endswith("/" + os.path.basename(want)) for a in args)
    return True


# ---------------------------------------------------------------------------- records


def json_safe(obj: Any) -> Any:
    """``obj`` with non-finite floats (nan/inf, which verl prints) replaced by None and dict keys as strings: what
    run.json, spec.json and .lock hold is strict JSON (``json.dumps(..., allow_nan=False)`` accepts it)."""
    if isinstance(obj, float):
        return obj if obj == obj and obj not in (float("inf"), float("-inf")) else None
    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


# Spec keys never copied into run.json (secrets never travel in the spec anyway; "env" may hold proxies).
_SPEC_KEYS_IN_RECORD = ("host", "container", "mode", "framework", "profile", "accelerator", "workdir")


def new_record(spec: Mapping[str, Any], supervisor_pid: int, now: Optional[float] = None) -> Dict[str, Any]:
    """The initial run.json record for ``spec`` (status ``starting``, attempt 0).

    Schema: docs/design.md "Run directory and run.json". The spec is embedded without its
    ``env`` values (proxy URLs may carry credentials): only the env *names* are kept.
    """
    t = time.time() if now is None else now
    settings = dict(spec.get("settings") or {})
    run_dir = spec.get("run_dir", "")
    spec_copy = {k: v for k, v in spec.items() if k != "env"}
    spec_copy["env_names"] = sorted((spec.get("env") or {}).keys())
    rec: Dict[str, Any] = {
        "version": SCHEMA_VERSION,
        "run_id": spec.get("run_id"),
        "status": RunStatus.STARTING.value,
        "attempt": 0,
        "step": None,
        "total_steps": settings.get("steps"),
        "step_times": [],
        "last_progress_at": None,
        "started_at": t,
        "updated_at": t,
        "ended_at": None,
        "metrics": {},
        "attempts": [],
        "features": list(spec.get("features") or []),
        "setting_changes": {},
        "verdict": None,
        "decision": None,
        "pids": {"supervisor": supervisor_pid, "verl_pgid": None},
        "swanlab_url": None,
        "log": "%s/%s" % (str(run_dir).rstrip("/"), TRAIN_LOG_NAME) if run_dir else TRAIN_LOG_NAME,
        "run_dir": run_dir,
        "ckpt_dir": settings.get("ckpt_dir"),
        "cluster": None,
        "spec": spec_copy,
    }
    for k in _SPEC_KEYS_IN_RECORD:
        rec[k] = spec.get(k)
    return rec


def lock_record(
    runs_dir: "os.PathLike[str] | str", run_id: str, pid: int, run_dir: Optional[str], now: float
) -> Dict[str, Any]:
    """The content of ``<runs_dir>/.lock`` for ``run_id`` held by supervisor ``pid`` since ``now`` (Unix seconds):
    ``{"run_id", "pid", "run_dir", "since"}``; ``run_dir`` defaults to ``<runs_dir>/<run_id>``."""
    return {"run_id": run_id, "pid": int(pid), "run_dir": run_dir or run_dir_for(runs_dir, run_id), "since": now}
