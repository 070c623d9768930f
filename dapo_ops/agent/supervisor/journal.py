"""The supervisor's own log and clock (STDLIB ONLY, shipped).

The supervisor's stderr is ``<run_dir>/supervisor.log`` (``dapo_ops/agent/runstart.py``, which starts it,
redirects it); :func:`log` writes one timestamped line there. Times are wall-clock seconds since the epoch
(run.json stores them so), shown as UTC ISO-8601.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Optional


def now() -> float:
    """Wall-clock seconds since the epoch (``time.time``: run.json's timestamps)."""
    return time.time()


def iso(t: Optional[float] = None) -> str:
    """``t`` (seconds since the epoch, default now) as ``YYYY-MM-DDTHH:MM:SSZ`` (UTC)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now() if t is None else t))


def log(msg: str) -> None:
    """One line to the supervisor's own log (its stderr is ``<run_dir>/supervisor.log``). Never raises: on a full
    disk (ENOSPC) the line is lost, the supervision goes on (issue 32: a traceback from here ended it)."""
    try:
        sys.stderr.write("%s supervisor[%d]: %s\n" % (iso(), os.getpid(), msg))
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
