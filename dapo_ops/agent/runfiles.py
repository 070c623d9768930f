"""A runs dir's files on the machine: atomic JSON writes, spec.json / run.json reads, the one-run lock, Ray node files.

STDLIB ONLY (shipped in the bundle, ``dapo_ops/control/remote/bundle.py``). The schema and the path rules are
core's (:mod:`dapo_ops.core.runstate`: run ids, per-run paths, run.json, the lock record; :mod:`dapo_ops.core.raynodes`:
a multi-host run's node files); this module is what touches the disk and ``/proc`` for them, in the container
(the supervisor, the probe, the stop and launch-rule ops) and in tests and benches on a local runs dir.

- JSON: :func:`write_json_atomic` (``<path>.tmp`` + fsync + rename + fsync of the dir), :func:`read_json`,
  :func:`read_spec`, :func:`read_run`, :func:`write_run`, :func:`list_runs`;
- the one-run-per-container lock ``<runs_dir>/.lock``: :func:`acquire_lock` / :func:`release_lock` (under a
  ``flock`` of ``.lock.guard``), :func:`read_lock`, :func:`active_run` (a lock counts while its supervisor lives:
  :func:`is_supervisor_pid`), :class:`LockHeld`;
- :func:`ray_sessions`: the node files of multi-host runs whose Ray session leader is alive.

One op of the bundle (:func:`main`; through ``bundle.run_op``, the one way in)::

    python3 -m dapo_ops.agent.runfiles show <run_dir>          # one run.json as JSON; exit 1 when there is none
    python3 -m dapo_ops.agent.runfiles show-spec <run_dir>     # its spec.json as JSON; exit 1 when there is none
    python3 -m dapo_ops.agent.runfiles resume-facts <run_dir>  # what --resume reads (resume_facts), one JSON line
    python3 -m dapo_ops.agent.runfiles remove <run_dir>        # rm -rf a run dir a launch that started nothing left
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time

from dapo_ops.agent.procs import pid_alive, pid_cmdline
from dapo_ops.core import raynodes
from dapo_ops.core import runstate

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only (postponed), so neither typing nor pathlib loads at import: the status
    from typing import Any, Callable, Dict, List, Optional  # probe imports this module on every look

    from dapo_ops.core.defaults import RunSpec


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


# ---------------------------------------------------------------------------- JSON files


def write_json_atomic(path: "os.PathLike[str] | str", data: Any, mode: int = 0o644) -> None:
    """Write ``data`` as JSON to ``path`` atomically (:func:`write_bytes_atomic`). Non-finite floats become ``null``
    (:func:`dapo_ops.core.runstate.json_safe`). Raises ``OSError`` when the directory is not writable or the disk is
    full."""
    text = json.dumps(runstate.json_safe(data), indent=1, sort_keys=False, allow_nan=False)
    write_bytes_atomic(path, text.encode("utf-8") + b"\n", mode)


def write_bytes_atomic(
    path: "os.PathLike[str] | str", data: bytes, mode: int = 0o644, tmp_suffix: str = ".tmp"
) -> None:
    """Write ``data`` to ``path`` atomically: ``<path><tmp_suffix>`` (created with ``mode``, less the umask), fsync,
    rename, fsync the dir.

    A concurrent reader sees the old or the new content, never a torn file: ``os.write`` may write less than asked
    on a filling disk, so it loops until every byte is down, and a failed write (ENOSPC, EDQUOT, EIO) removes the
    temporary file and leaves ``path`` as it was (never an empty ``run.json.tmp`` on a full runs disk). Raises
    ``OSError`` when the directory is not writable or the disk is full.
    """
    p = str(path)
    tmp = p + tmp_suffix
    buf = memoryview(data)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        try:
            while buf:
                n = os.write(fd, buf)
                if n <= 0:  # nothing written and no error: treat as a full disk rather than loop
                    raise OSError(28, "No space left on device", tmp)
                buf = buf[n:]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, p)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:
        dfd = os.open(os.path.dirname(p) or ".", os.O_RDONLY)
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


def read_spec(run_dir: "os.PathLike[str] | str") -> "RunSpec":
    """The run spec ``<run_dir>/spec.json`` (written by ``launch``), completed ONCE from the one defaults table
    (:meth:`dapo_ops.core.defaults.RunSpec.read`: a spec of an older dapo-ops lacks the keys added since).
    Raises ``FileNotFoundError``."""
    spec: Optional[Dict[str, Any]] = read_json(os.path.join(str(run_dir), runstate.SPEC_NAME))
    if spec is None:
        raise FileNotFoundError("no spec.json in %s" % run_dir)
    from dapo_ops.core import defaults  # here: the status probe imports this module on every look

    return defaults.RunSpec.read(spec)


def read_run(run_dir: "os.PathLike[str] | str") -> Optional[Dict[str, Any]]:
    """The run record ``<run_dir>/run.json``, or None when the supervisor has not written it yet."""
    rec: Optional[Dict[str, Any]] = read_json(os.path.join(str(run_dir), runstate.RUN_NAME))
    return rec


def write_run(run_dir: "os.PathLike[str] | str", record: Dict[str, Any]) -> None:
    """Atomically replace ``<run_dir>/run.json`` with ``record`` (``updated_at`` is set to now)."""
    record["updated_at"] = time.time()
    write_json_atomic(os.path.join(str(run_dir), runstate.RUN_NAME), record)


def list_runs(runs_dir: "os.PathLike[str] | str") -> List[Dict[str, Any]]:
    """Every readable ``<runs_dir>/<run_id>/run.json``, newest run id first.

    Run dirs without a run.json (a launch that never started) appear as
    ``{"run_id": id, "status": "unknown", "run_dir": path}``. Unreadable JSON is skipped.
    """
    out: List[Dict[str, Any]] = []
    try:
        names = runstate.run_ids_newest_first(os.listdir(str(runs_dir)))
    except FileNotFoundError:
        return out
    for name in names:
        run_dir = os.path.join(str(runs_dir), name)
        try:
            rec = read_run(run_dir)
        except (ValueError, OSError):
            continue
        out.append(
            rec if rec is not None else {"run_id": name, "status": runstate.RunStatus.UNKNOWN.value, "run_dir": run_dir}
        )
    return out


# ---------------------------------------------------------------------------- the lock


def is_supervisor_pid(pid: Optional[int], run_dir: Optional[str] = None) -> bool:
    """True when ``pid`` is alive and its argv is a dapo-ops supervisor (for ``run_dir`` when given).

    Guards against PID reuse after a container restart: a recycled PID running something
    else does not hold the lock (:func:`dapo_ops.core.runstate.is_supervisor_argv`). Without /proc, liveness
    alone decides.
    """
    if not pid or not pid_alive(pid):
        return False
    cmd = pid_cmdline(int(pid))
    return True if cmd is None else runstate.is_supervisor_argv(cmd, run_dir)


def read_lock(runs_dir: "os.PathLike[str] | str") -> Optional[Dict[str, Any]]:
    """The content of ``<runs_dir>/.lock`` (dict with run_id, pid, run_dir, since) or None."""
    try:
        data = read_json(os.path.join(str(runs_dir), runstate.LOCK_NAME))
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

    def __init__(self, runs_dir: str):
        self.path = os.path.join(runs_dir, runstate.LOCK_NAME + ".guard")
        self.fd = -1

    def __enter__(self) -> "_Guard":
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


def acquire_lock(runs_dir: "os.PathLike[str] | str", run_id: str, pid: int, run_dir: Optional[str] = None) -> None:
    """Take the one-run-per-container lock ``<runs_dir>/.lock`` for ``run_id`` held by ``pid``.

    A lock whose pid is dead, a zombie, or not a dapo-ops supervisor is stale and replaced.
    Re-acquiring one's own lock (same run_id and pid) is a no-op.
    Raises :class:`LockHeld` when another live supervisor holds it; ``OSError`` when
    ``runs_dir`` cannot be created or written.
    """
    root = str(runs_dir)
    os.makedirs(root, exist_ok=True)
    with _Guard(root):
        cur = read_lock(root)
        if cur and not (cur.get("run_id") == run_id and int(cur.get("pid") or 0) == int(pid)):
            if lock_is_live(cur):
                raise LockHeld(str(cur.get("run_id")), int(cur.get("pid") or 0), cur.get("run_dir"))
        write_json_atomic(
            os.path.join(root, runstate.LOCK_NAME), runstate.lock_record(root, run_id, pid, run_dir, time.time())
        )


def release_lock(runs_dir: "os.PathLike[str] | str", run_id: str) -> bool:
    """Remove ``<runs_dir>/.lock`` if ``run_id`` holds it. Returns True when removed."""
    root = str(runs_dir)
    try:
        with _Guard(root):
            cur = read_lock(root)
            if cur and cur.get("run_id") == run_id:
                os.unlink(os.path.join(root, runstate.LOCK_NAME))
                return True
    except OSError:
        return False
    return False


# ---------------------------------------------------------------------------- Ray node files


def ray_sessions(runs_dir: "os.PathLike[str] | str", name: Optional[str] = None) -> List[Dict[str, Any]]:
    """This container's Ray sessions of multi-host runs whose leader is still alive: the node records
    (``<host>.json``, :mod:`dapo_ops.core.raynodes`) plus ``pid_file``, ``run_id``, ``name``, ``pid``; ``name``
    limits them to one inventory host (a shared runs_dir holds every node's files). A leader counts when its PID
    lives and its argv names ray (a PID recycled after a container restart does not). Newest run first."""
    root = "%s/%s" % (str(runs_dir).rstrip("/"), raynodes.CLUSTER_DIR_NAME)
    out: List[Dict[str, Any]] = []
    try:
        runs = runstate.run_ids_newest_first(os.listdir(root))
    except OSError:
        return out
    for rid in runs:
        cdir = raynodes.cluster_dir(runs_dir, rid)
        try:
            files = sorted(f for f in os.listdir(raynodes.ray_dir(cdir)) if f.endswith("." + raynodes.PID))
        except OSError:
            continue
        for f in files:
            node = f[: -len(raynodes.PID) - 1]
            if name and node != name:
                continue
            pid_file = raynodes.node_file(cdir, node, raynodes.PID)
            try:
                with open(pid_file) as fh:
                    sid = int(fh.read().split()[0])
                info = read_json(raynodes.node_file(cdir, node, raynodes.INFO)) or {}
            except (OSError, ValueError, IndexError):
                continue
            cmd = pid_cmdline(sid) if pid_alive(sid) else None
            if cmd is None or b"ray" not in cmd:
                continue
            out.append(dict(info if isinstance(info, dict) else {}, run_id=rid, name=node, pid=sid, pid_file=pid_file))
    return out


# ---------------------------------------------------------------------------- the op


def _read_text(path: str) -> Optional[str]:
    """The text of ``path``, None when it cannot be read (missing, a directory, no permission)."""
    try:
        with open(path, "r", encoding="utf-8") as fh:
            return fh.read()
    except (OSError, UnicodeDecodeError):
        return None


def _json_object(text: Optional[str]) -> Optional[Dict[str, Any]]:
    """``text`` parsed when it is a JSON object, else None (empty, not JSON, another JSON value)."""
    try:
        data = json.loads(text) if text and text.strip() else None
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _list_dir(path: str) -> List[str]:
    """The names in ``path``, [] when it cannot be listed."""
    try:
        return os.listdir(path)
    except OSError:
        return []


def later_runs(
    run_dir: str,
    ckpt_dir: Optional[str],
    read_text: "Callable[[str], Optional[str]]" = _read_text,
    list_dir: "Callable[[str], List[str]]" = _list_dir,
) -> List[Dict[str, Any]]:
    """The runs of the same runs dir started after the run of ``run_dir`` that continue its checkpoints: their
    spec.json says ``resume_of`` is that run, or names the same ``ckpt_dir`` (a resume of a resume keeps the first
    run's checkpoint dir). Newest first (run ids sort by start time), each ``{"run_id", "spec", "status", "trained"}`` (run.json's
    status, None when unreadable; ``trained``: :func:`trained_a_step`). Reads only; the cost grows with the number of later runs."""
    runs_dir, me = os.path.split(run_dir.rstrip("/"))
    from dapo_ops.core import defaults  # here: the status probe imports this module on every look

    out = []
    for rid in [n for n in runstate.run_ids_newest_first(list_dir(runs_dir)) if n > me]:
        spec = _json_object(read_text(os.path.join(runs_dir, rid, runstate.SPEC_NAME)))
        if spec is None:
            continue
        rs = defaults.RunSpec.read(spec)
        if rs.resume_of != me and not (ckpt_dir and rs.settings.get("ckpt_dir") == ckpt_dir):
            continue
        rec = _json_object(read_text(os.path.join(runs_dir, rid, runstate.RUN_NAME))) or {}
        out.append({"run_id": rid, "spec": spec, "status": rec.get("status"), "trained": trained_a_step(rec)})
    return out


def trained_a_step(rec: Dict[str, Any]) -> bool:
    """Whether the run of run.json ``rec`` trained a step (so may have written a checkpoint): False only for a run
    that ended (failed / stopped) with attempts none of which got past the step it started at (``step_reached`` vs
    ``resumed_from``): a resume that ran out of data or failed at start wrote nothing on the checkpoints it shares.
    Anything else (running, no attempts recorded, an older run.json) reads as True."""
    atts = rec.get("attempts")
    ended = (runstate.RunStatus.FAILED.value, runstate.RunStatus.STOPPED.value)
    if rec.get("status") not in ended or not isinstance(atts, list) or not atts:
        return True
    return any(
        isinstance(a, dict)
        and isinstance(a.get("step_reached"), int)
        and a["step_reached"] > (a.get("resumed_from") if isinstance(a.get("resumed_from"), int) else 0)
        for a in atts
    )


def resume_facts(
    run_dir: str,
    read_text: "Callable[[str], Optional[str]]" = _read_text,
    list_dir: "Callable[[str], List[str]]" = _list_dir,
) -> Dict[str, Any]:
    """What ``inv launch --resume`` reads of an earlier run, in one call (``dapo_ops/control/launch/resume.py``
    ``read_facts``): ``{"spec": spec.json as written | None, "record": run.json | None, "step": str,
    "fsdp_version": int | None, "later": [...]}``.

    ``step``: the text of the checkpoint tracker ``<ckpt_dir>/latest_checkpointed_iteration.txt`` (stripped; "" when
    there is none), ``ckpt_dir`` from the spec completed from the defaults table (a spec of an older dapo-ops lacks
    the keys added since); verl resumes from that file itself (``trainer.resume_mode=auto``,
    verl/trainer/ppo/ray_trainer.py:1046-1050). ``fsdp_version``: for an FSDP run whose tracker names a step, the
    ``FSDP_version`` verl records beside the actor's shards, ``<ckpt_dir>/global_step_<N>/actor/fsdp_config.json``
    (verl/utils/checkpoint/fsdp_checkpoint_manager.py:409-416). A file that is missing or not a JSON object reads as
    None. ``later``: the runs started after it that continue its checkpoints (:func:`later_runs`, newest first): a
    resume of it would go back to its settings on their checkpoints. ``read_text(path) -> text | None`` reads a file,
    ``list_dir(path) -> names`` lists a dir (tests give their own)."""
    spec = _json_object(read_text(os.path.join(run_dir, runstate.SPEC_NAME)))
    if spec is None:
        return {"spec": None, "record": None, "step": "", "fsdp_version": None, "later": []}
    from dapo_ops.core import defaults  # here: the status probe imports this module on every look

    done = defaults.RunSpec.read(spec)
    ckpt = done.settings.get("ckpt_dir")
    step = ((read_text("%s/%s" % (ckpt, runstate.TRACKER_NAME)) if ckpt else None) or "").strip()
    version = None
    if ckpt and done.framework == "fsdp" and step.isdigit():
        cfg = _json_object(read_text("%s/global_step_%s/actor/fsdp_config.json" % (ckpt, step))) or {}
        version = cfg.get("FSDP_version") if isinstance(cfg.get("FSDP_version"), int) else None
    return {
        "spec": spec,
        "record": _json_object(read_text(os.path.join(run_dir, runstate.RUN_NAME))),
        "step": step,
        "fsdp_version": version,
        "later": later_runs(run_dir, ckpt, read_text, list_dir),
    }


def remove_run_dir(run_dir: str) -> None:
    """Remove ``run_dir`` and everything in it (what a launch that started nothing leaves behind); a dir that is not
    there is no error. Errors inside are skipped (``rm -rf``)."""
    import shutil

    shutil.rmtree(run_dir, ignore_errors=True)


USAGE = "usage: python3 -m dapo_ops.agent.runfiles show|show-spec|resume-facts|remove <run_dir>"


def main(argv: Optional[List[str]] = None) -> int:
    """The op's command line (``python3 -m dapo_ops.agent.runfiles <sub> <run_dir>``), each answer ONE JSON line:

    - ``show``: ``<run_dir>/run.json`` (what the launch reads right after starting a supervisor);
    - ``show-spec``: ``<run_dir>/spec.json`` as written (``inv stop`` of a multi-host run reads its ``ray`` nodes);
    - ``resume-facts``: :func:`resume_facts` (exit 0, also when there is no such run: ``"spec": null``);
    - ``remove``: :func:`remove_run_dir`, prints nothing.

    Exit 0 with the answer; 1 (one stderr line) when ``show`` / ``show-spec`` find no file or no JSON; 2 for a usage
    error.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2 or args[0] not in ("show", "show-spec", "resume-facts", "remove"):
        sys.stderr.write(USAGE + "\n")
        return 2
    sub, run_dir = args
    if sub == "remove":
        remove_run_dir(run_dir)
        return 0
    if sub == "resume-facts":
        sys.stdout.write(json.dumps(resume_facts(run_dir)) + "\n")
        return 0
    name = runstate.RUN_NAME if sub == "show" else runstate.SPEC_NAME
    try:
        rec = read_json(os.path.join(run_dir, name))
    except (ValueError, OSError) as e:
        sys.stderr.write("cannot read %s in %s: %s\n" % (name, run_dir, e))
        return 1
    if rec is None:
        sys.stderr.write("no %s in %s\n" % (name, run_dir))
        return 1
    sys.stdout.write(json.dumps(rec) + "\n")
    return 0


if __name__ == "__main__":  # pragma: no cover - exercised through subprocess in tests
    sys.exit(main())
