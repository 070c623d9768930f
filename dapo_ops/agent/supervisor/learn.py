"""The supervisor's half of learned starts: file a memo once an attempt on a ladder rung got past the phase that
ran out (STDLIB ONLY, shipped). What a memo holds, when it is due and how a launch uses it:
:mod:`dapo_ops.core.learned`. Written atomically (:func:`dapo_ops.agent.runfiles.write_json_atomic`) to
``<runs_dir>/.learned/<fingerprint>.json``; a failed write (a full disk) is logged, never fatal.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Optional, Set

from dapo_ops.agent import runfiles
from dapo_ops.agent.supervisor.record import log
from dapo_ops.core import learned


class Memos:
    """Files at most one memo per distinct rung set of one run (``spec["learn"]`` names the configuration; a spec
    without it, e.g. a launch that could not read the model's config.json or the devices, files none)."""

    def __init__(self, spec: Dict[str, Any], runs_dir: str):
        self.spec = spec
        self.runs_dir = runs_dir
        self.filed: Set[str] = set()

    def check(self, rec: Dict[str, Any]) -> Optional[str]:
        """File the memo if ``rec`` (run.json) says the attempt on the rung got past the phase that ran out
        (:func:`dapo_ops.core.learned.passed`) and this rung set was not filed yet. Returns the path written."""
        fp = (self.spec.get("learn") or {}).get("fingerprint")
        if not fp:
            return None
        ran = learned.passed(rec)
        if ran is None:
            return None
        memo = learned.memo(self.spec, rec, ran)
        sig = json.dumps(memo["rung"], sort_keys=True, default=str)
        if sig in self.filed:
            return None
        self.filed.add(sig)
        path = learned.memo_path(self.runs_dir, fp)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            runfiles.write_json_atomic(path, memo)
        except OSError as e:
            log("could not file the learned start %s: %s" % (path, e))
            return None
        rec["learned_memo"] = {
            "path": path,
            "rungs": learned.rung_names(memo),
            "phase": ran["phase"],
            "step": rec.get("step"),
        }
        log(
            "learned start filed: %s (got past phase %s at step %s on %s)"
            % (path, ran["phase"], rec.get("step"), ", ".join(learned.rung_names(memo)) or "its features")
        )
        return path
