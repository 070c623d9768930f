"""The runs disk filling up during a run: notice it, stop verl, keep room for the verdict (STDLIB ONLY, shipped).

What a full disk did before (a 20 MB runs dir filled mid-run): a traceback in supervisor.log, an empty
``run.json.tmp`` and run.json stuck at ``running``, so ``inv status`` said ``supervisor-dead`` without naming the
disk. Now:

* every write of the supervisor (run.json: :class:`dapo_ops.agent.supervisor.record.RecordWriter`; the train.log
  copy: :class:`dapo_ops.agent.supervisor.follow.TrainLog`; supervisor.log: ``record.log``) survives ENOSPC /
  EDQUOT and reports it to :meth:`DiskWatch.note`; the run dir's filesystem is also looked at (``statvfs``, at
  most every :data:`CHECK_EVERY_S` s) while verl runs, for the case where verl's own writes (checkpoints, its
  log) took the last blocks;
* the follow loop then ends the attempt (``killed_by`` ``"disk-full"``: SIGTERM, grace, SIGKILL, as any stop);
* :data:`RESERVE_BYTES` written at the start of the run (``<run_dir>/.space-reserve``) are given back once verl
  is gone (:meth:`DiskWatch.release`), so the final run.json (the verdict from :meth:`DiskWatch.verdict`, the
  ladder's stop with the fix) and the train.log end line fit; run.json itself is only ever replaced whole
  (``runfiles.write_json_atomic``), so until then it stays the last good record.

Units: bytes, seconds.
"""

from __future__ import annotations

import errno
import os
from typing import Any, Dict, Optional

from dapo_ops.agent.supervisor.record import log, now
from dapo_ops.core import policy
from dapo_ops.core.classify.hints import RESUME_CMD, action_text

#: what the supervisor keeps free for its own last writes (the final run.json is ~5-30 KiB, the train.log end line
#: and supervisor.log lines a few hundred bytes)
RESERVE_BYTES = 256 << 10
RESERVE_NAME = ".space-reserve"
#: free bytes on the run dir's filesystem (root: f_bfree, others: f_bavail) below which it counts as full
LOW_BYTES = 32 << 10
#: seconds between two statvfs looks while an attempt runs
CHECK_EVERY_S = 2.0
#: the errors that mean "no space": ENOSPC, EDQUOT (a quota), EFBIG is a file size limit, not space
FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


def is_disk_full(err: BaseException) -> bool:
    """True when ``err`` is an OSError of a full disk or an exhausted quota (ENOSPC, EDQUOT)."""
    return isinstance(err, OSError) and err.errno in FULL_ERRNOS


def free_bytes(path: str) -> Optional[int]:
    """Bytes free for this process on ``path``'s filesystem (root may use the reserved blocks: ``f_bfree``;
    others ``f_bavail``), or None when ``statvfs`` fails."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    blocks = st.f_bfree if os.geteuid() == 0 else st.f_bavail
    return int(blocks) * int(st.f_frsize or st.f_bsize)


class DiskWatch:
    """The run dir's disk as the supervisor sees it. ``full``: None, or ``{"path", "error", "at"}`` of the first
    sign that it is full (the file whose write failed, the error text, seconds since the epoch)."""

    def __init__(self, run_dir: str, reserve_bytes: int = RESERVE_BYTES):
        self.run_dir = str(run_dir)
        self.reserve_bytes = int(reserve_bytes)
        self.reserve_path = os.path.join(self.run_dir, RESERVE_NAME)
        self.full: Optional[Dict[str, Any]] = None
        self._next_look = 0.0

    def reserve(self) -> bool:
        """Write :data:`RESERVE_BYTES` real bytes (not a sparse file) to ``<run_dir>/.space-reserve``. False (and
        no file) when there is no room even for that: the run goes on without a reserve."""
        try:
            fd = os.open(self.reserve_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                chunk = b"\0" * 65536
                left = self.reserve_bytes
                while left > 0:
                    n = os.write(fd, chunk[:left])
                    if n <= 0:
                        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                    left -= n
                os.fsync(fd)
            finally:
                os.close(fd)
            return True
        except OSError as e:
            log("could not reserve %d bytes in %s: %s" % (self.reserve_bytes, self.run_dir, e))
            self.release()
            return False

    def release(self) -> None:
        """Give the reserved space back (idempotent)."""
        try:
            os.unlink(self.reserve_path)
        except OSError:
            pass

    def note(self, path: Optional[str], err: BaseException) -> bool:
        """A write to ``path`` failed with ``err``. Returns True (and remembers the first one) when it is a full
        disk; other errors are the caller's."""
        if not isinstance(err, OSError) or not is_disk_full(err):
            return False
        if self.full is None:
            self.full = {"path": str(path or self.run_dir), "error": os.strerror(err.errno or 0), "at": now()}
            log("disk full: %s: %s (free: %s bytes)" % (self.full["path"], err, free_bytes(self.run_dir)))
        return True

    def check(self, force: bool = False) -> bool:
        """True when the disk is known to be full; looks at ``statvfs`` at most every :data:`CHECK_EVERY_S` s
        (``force``: now)."""
        if self.full is not None:
            return True
        t = now()
        if t < self._next_look and not force:
            return False
        self._next_look = t + CHECK_EVERY_S
        free = free_bytes(self.run_dir)
        if free is not None and free < LOW_BYTES:
            self.note(self.run_dir, OSError(errno.ENOSPC, "only %d bytes left" % free))
        return self.full is not None

    def verdict(self, step: Optional[int] = None, total: Optional[int] = None) -> Dict[str, Any]:
        """The stop verdict of a run whose disk filled up: class ``crash-other``, ``detail.cause`` ``disk-full``
        with the path (the run dir, and the file whose write failed), the free bytes now and the progress."""
        full = self.full or {"path": self.run_dir, "error": os.strerror(errno.ENOSPC)}
        runs_dir = os.path.dirname(self.run_dir.rstrip("/")) or self.run_dir
        detail = {
            "cause": "disk-full",
            "path": runs_dir,
            "file": full["path"],
            "free_bytes": free_bytes(self.run_dir),
            "step": step,
            "total": total,
        }
        return {
            "cls": "crash-other",
            "action_kind": policy.kind("crash-other", detail).value,
            "action": "disk full: %s has no space left (%s writing %s): verl stopped; %s"
            % (runs_dir, full["error"], full["path"], action_text("crash-other", detail)),
            "hint": (
                "The filesystem of the runs dir %s is full (`df -h %s`). Free space there: remove old runs' "
                "checkpoints (<runs_dir>/<run_id>/checkpoints/global_step_*), keep fewer checkpoints "
                "(MAX_CKPT_TO_KEEP / trainer.max_actor_ckpt_to_keep), or point runs_dir / ckpt_dir in "
                "hosts.toml at a bigger volume; then a resume continues from the last complete checkpoint (%s)."
                % (runs_dir, runs_dir, RESUME_CMD)
            ),
            "evidence": ["%s: %s" % (full["path"], full["error"])],
            "detail": detail,
        }
