"""Run state: per-run paths, run ids, the ``run.json`` record, atomic writes, the one-run lock.

STDLIB ONLY: this module is copied into the training container with the supervisor
(``dapo_ops/control/remote_bundle.py``) and must import nothing outside the standard library.

Layout (docs/design.md "Run directory and run.json")::

    <runs_dir>/                         default <workdir>/dapo_runs
      .lock                             {"run_id", "pid", "run_dir", "since"}: one run per container
      <run_id>/spec.json run.json train.log attempt-<k>.log supervisor.log checkpoints/ hydra/

``run.json`` is the only thing ``status`` / ``watch`` read; it is rewritten atomically
(``run.json.tmp`` + fsync + rename) so a reader never sees half a record.

Also usable as a tiny CLI inside the container (what ``launch`` / ``status`` call over
``docker exec``)::

    python3 -m dapo_ops.core.runstate active <runs_dir>     # prints the lock holder as JSON, or "null"
    python3 -m dapo_ops.core.runstate list <runs_dir>       # prints every run.json, newest first, as a JSON list
    python3 -m dapo_ops.core.runstate show <run_dir>        # prints one run.json
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only (postponed), so neither typing nor pathlib loads at import: the status
    from pathlib import Path  # probe imports this module on every look (bench/status.py "look" rows)
    from typing import Any, Dict, List, Optional

try:  # POSIX only; the container always has it
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

SCHEMA_VERSION = 1
#: the one set of run statuses: ``run.json`` ``status`` is one of these strings (docs/design.md "Run directory and
#: run.json"). The supervisor writes starting -> running (-> retrying -> running ...) -> succeeded | failed |
#: stopped; ``inv stop`` writes stopped for a dead supervisor. Every reader compares against these names.
STARTING, RUNNING, RETRYING, SUCCEEDED, FAILED, STOPPED = (
    "starting",
    "running",
    "retrying",
    "succeeded",
    "failed",
    "stopped",
)
STATUSES = (STARTING, RUNNING, RETRYING, SUCCEEDED, FAILED, STOPPED)
#: a supervisor is expected to be alive (its PID is in run.json ``pids.supervisor``)
ACTIVE_STATUSES = (STARTING, RUNNING, RETRYING)
#: the run is over; run.json is not written again (except ``inv launch --resume``, which starts a new record)
TERMINAL_STATUSES = frozenset({SUCCEEDED, FAILED, STOPPED})
LOCK_NAME = ".lock"
RUN_ID_RE = re.compile(r"^\d{8}-\d{6}-[0-9a-f]{4}$")
# argv marker of a live supervisor process (python3 -m dapo_ops.agent.supervisor <run_dir>)
SUPERVISOR_MARKER = b"dapo_ops.agent.supervisor"

SPEC_NAME = "spec.json"
RUN_NAME = "run.json"
TRAIN_LOG_NAME = "train.log"
SUPERVISOR_LOG_NAME = "supervisor.log"
SECRET_ENV_NAME = "secret.env"


class LockHeld(RuntimeError):
    """Another live supervisor holds ``<runs_dir>/.lock``.

    Attributes: ``run_id`` (str), ``pid`` (int), ``run_dir`` (str or None).
    ``str()`` is the one-line message for the operator.
    """

    def __init__(self, run_id: str, pid: int, run_dir: Optional[str] = None):
        self.run_id = run_id
        self.pid = pid
        self.run_dir = run_dir
        super().__init__(
            "run %s is already active on this container (supervisor pid %d); "
            "follow it with `inv status` or stop it with `inv stop --run %s`" % (run_id, pid, run_id)
        )


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


# ---------------------------------------------------------------------------- JSON files


def _json_safe(obj: Any) -> Any:
    """Replace non-finite floats (nan/inf, which verl prints) by None so the file is strict JSON."""
    if isinstance(obj, float):
        return obj if obj == obj and obj not in (float("inf"), float("-inf")) else None
    if isinstance(obj, dict):
        return {str(k): _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    return obj


def write_json_atomic(path: "os.PathLike[str] | str", data: Any, mode: int = 0o644) -> None:
    """Write ``data`` as JSON to ``path`` atomically: ``<path>.tmp``, fsync, rename, fsync the dir.

    A concurrent reader sees the old or the new content, never a torn file: ``os.write`` may write less than asked
    on a filling disk, so it loops until every byte is down, and a failed write (ENOSPC, EDQUOT, EIO) removes the
    temporary file and leaves ``path`` as it was (issue 32: an empty ``run.json.tmp`` on a full runs disk).
    Non-finite floats become ``null``. Raises ``OSError`` when the directory is not writable or the disk is full.
    """
    p = _path(path)
    tmp = p.with_name(p.name + ".tmp")
    text = json.dumps(_json_safe(data), indent=1, sort_keys=False, allow_nan=False)
    buf = memoryview(text.encode("utf-8") + b"\n")
    fd = os.open(str(tmp), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        try:
            while buf:
                n = os.write(fd, buf)
                if n <= 0:  # nothing written and no error: treat as a full disk rather than loop
                    raise OSError(28, "No space left on device", str(tmp))
                buf = buf[n:]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(str(tmp), str(p))
    except BaseException:
        try:
            os.unlink(str(tmp))
        except OSError:
            pass
        raise
    try:
        dfd = os.open(str(p.parent), os.O_RDONLY)
    except OSError:  # pragma: no cover - e.g. directories that cannot be opened
        return
    try:
        os.fsync(dfd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(dfd)


def read_json(path: "os.PathLike[str] | str") -> Optional[Any]:
    """Parsed JSON of ``path``, or None when it does not exist. Raises ``ValueError`` on bad JSON."""
    try:
        with open(str(path), "r", encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError:
        return None


def read_spec(run_dir: "os.PathLike[str] | str") -> Dict[str, Any]:
    """The run spec ``<run_dir>/spec.json`` (written by ``launch``), completed from the one defaults table
    (:func:`dapo_ops.core.defaults.complete_spec`: a spec of an older dapo-ops lacks the keys added since).
    Raises ``FileNotFoundError``."""
    spec: Optional[Dict[str, Any]] = read_json(RunPaths(run_dir).spec)
    if spec is None:
        raise FileNotFoundError("no spec.json in %s" % run_dir)
    from dapo_ops.core import defaults  # here: the status probe imports this module on every look

    return defaults.complete_spec(spec)


def read_run(run_dir: "os.PathLike[str] | str") -> Optional[Dict[str, Any]]:
    """The run record ``<run_dir>/run.json``, or None when the supervisor has not written it yet."""
    return read_json(os.path.join(str(run_dir), RUN_NAME))


def write_run(run_dir: "os.PathLike[str] | str", record: Dict[str, Any]) -> None:
    """Atomically replace ``<run_dir>/run.json`` with ``record`` (``updated_at`` is set to now)."""
    record["updated_at"] = time.time()
    write_json_atomic(RunPaths(run_dir).run_json, record)


# Spec keys never copied into run.json (secrets never travel in the spec anyway; "env" may hold proxies).
_SPEC_KEYS_IN_RECORD = ("host", "container", "mode", "framework", "profile", "accelerator", "workdir")


def new_record(spec: Dict[str, Any], supervisor_pid: int, now: Optional[float] = None) -> Dict[str, Any]:
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
        "status": STARTING,
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


def list_runs(runs_dir: "os.PathLike[str] | str") -> List[Dict[str, Any]]:
    """Every readable ``<runs_dir>/<run_id>/run.json``, newest run id first.

    Run dirs without a run.json (a launch that never started) appear as
    ``{"run_id": id, "status": "unknown", "run_dir": path}``. Unreadable JSON is skipped.
    """
    root = _path(runs_dir)
    out: List[Dict[str, Any]] = []
    try:
        names = sorted((n for n in os.listdir(str(root)) if is_run_id(n)), reverse=True)
    except FileNotFoundError:
        return out
    for name in names:
        try:
            rec = read_run(root / name)
        except (ValueError, OSError):
            continue
        if rec is None:
            rec = {"run_id": name, "status": "unknown", "run_dir": str(root / name)}
        out.append(rec)
    return out


# ---------------------------------------------------------------------------- processes and the lock


def pid_alive(pid: Optional[int]) -> bool:
    """True when process ``pid`` exists in this PID namespace and is not a zombie."""
    if not pid or int(pid) <= 0:
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by someone else
    try:
        with open("/proc/%d/stat" % int(pid), "rb") as fh:
            stat = fh.read()
        state = stat[stat.rindex(b")") + 2 : stat.rindex(b")") + 3]
        return state != b"Z"
    except (OSError, ValueError):
        return True


def pid_cmdline(pid: int) -> Optional[bytes]:
    """``/proc/<pid>/cmdline`` (NUL-separated argv) or None when unreadable / no /proc."""
    try:
        with open("/proc/%d/cmdline" % int(pid), "rb") as fh:
            return fh.read()
    except OSError:
        return None


def is_supervisor_pid(pid: Optional[int], run_dir: Optional[str] = None) -> bool:
    """True when ``pid`` is alive and its argv is a dapo-ops supervisor (for ``run_dir`` when given).

    Guards against PID reuse after a container restart: a recycled PID running something
    else does not hold the lock. Without /proc, liveness alone decides.
    """
    if not pid_alive(pid):
        return False
    cmd = pid_cmdline(int(pid))  # type: ignore[arg-type]
    if cmd is None:
        return True
    if SUPERVISOR_MARKER not in cmd:
        return False
    if run_dir:
        args = [a.decode("utf-8", "replace").rstrip("/") for a in cmd.split(b"\0") if a]
        return any(
            a == str(run_dir).rstrip("/") or a.endswith("/" + os.path.basename(str(run_dir).rstrip("/"))) for a in args
        )
    return True


def read_lock(runs_dir: "os.PathLike[str] | str") -> Optional[Dict[str, Any]]:
    """The content of ``<runs_dir>/.lock`` (dict with run_id, pid, run_dir, since) or None."""
    try:
        data = read_json(os.path.join(str(runs_dir), LOCK_NAME))
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def lock_is_live(lock: Optional[Dict[str, Any]]) -> bool:
    """True when ``lock`` (from :func:`read_lock`) names a live supervisor process."""
    if not lock:
        return False
    try:
        pid = int(lock.get("pid") or 0)
    except (TypeError, ValueError):
        return False
    return is_supervisor_pid(pid, lock.get("run_dir"))


def active_run(runs_dir: "os.PathLike[str] | str") -> Optional[Dict[str, Any]]:
    """The live lock holder ``{"run_id", "pid", "run_dir", "since"}`` or None (no lock / stale lock)."""
    lock = read_lock(runs_dir)
    return lock if lock_is_live(lock) else None


class _Guard:
    """Short critical section over ``<runs_dir>/.lock.guard`` (flock) so two launches cannot both
    judge a stale lock and both take it."""

    def __init__(self, runs_dir: Path):
        self.path = runs_dir / (LOCK_NAME + ".guard")
        self.fd = -1

    def __enter__(self) -> "_Guard":
        self.fd = os.open(str(self.path), os.O_RDWR | os.O_CREAT, 0o644)
        if fcntl is not None:
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        if fcntl is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


def acquire_lock(runs_dir: "os.PathLike[str] | str", run_id: str, pid: int, run_dir: Optional[str] = None) -> None:
    """Take the one-run-per-container lock ``<runs_dir>/.lock`` for ``run_id`` held by ``pid``.

    A lock whose pid is dead, a zombie, or not a dapo-ops supervisor is stale and replaced.
    Re-acquiring one's own lock (same run_id and pid) is a no-op.
    Raises :class:`LockHeld` when another live supervisor holds it; ``OSError`` when
    ``runs_dir`` cannot be created or written.
    """
    root = _path(runs_dir)
    root.mkdir(parents=True, exist_ok=True)
    with _Guard(root):
        cur = read_lock(root)
        if cur and not (cur.get("run_id") == run_id and int(cur.get("pid") or 0) == int(pid)):
            if lock_is_live(cur):
                raise LockHeld(str(cur.get("run_id")), int(cur.get("pid") or 0), cur.get("run_dir"))
        write_json_atomic(
            root / LOCK_NAME,
            {"run_id": run_id, "pid": int(pid), "run_dir": run_dir or run_dir_for(root, run_id), "since": time.time()},
        )


def release_lock(runs_dir: "os.PathLike[str] | str", run_id: str) -> bool:
    """Remove ``<runs_dir>/.lock`` if ``run_id`` holds it. Returns True when removed."""
    root = _path(runs_dir)
    try:
        with _Guard(root):
            cur = read_lock(root)
            if cur and cur.get("run_id") == run_id:
                os.unlink(str(root / LOCK_NAME))
                return True
    except OSError:
        return False
    return False


# ---------------------------------------------------------------------------- CLI


def _cli(argv: List[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("active", "list", "show"):
        sys.stderr.write("usage: python3 -m dapo_ops.core.runstate active|list <runs_dir> | show <run_dir>\n")
        return 2
    cmd, path = argv
    if cmd == "active":
        out: Any = active_run(path)
    elif cmd == "list":
        out = list_runs(path)
    else:
        out = read_run(path)
        if out is None:
            sys.stderr.write("no run.json in %s\n" % path)
            return 1
    sys.stdout.write(json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":  # pragma: no cover - exercised through subprocess in tests
    sys.exit(_cli(sys.argv[1:]))
