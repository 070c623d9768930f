"""The supervisor's half of learned starts: file a memo once an attempt on a ladder rung got past the phase that
ran out (STDLIB ONLY, shipped); and the step timings of the configuration (the stall timer's, :mod:`.stall`), in
``<runs_dir>/.learned/timing/<fingerprint>.json`` (:func:`dapo_ops.core.learned.timing_path`). What a memo holds, when it is due and how a launch uses it:
:mod:`dapo_ops.core.learned`. Written atomically (:func:`dapo_ops.agent.runfiles.write_json_atomic`) to
``<runs_dir>/.learned/<fingerprint>.json``; a failed write (a full disk) is logged, never fatal.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Mapping, Optional, Set

from dapo_ops.agent import runfiles
from dapo_ops.agent.supervisor import stall
from dapo_ops.agent.supervisor.record import log
from dapo_ops.core import learned


def _file(path: str, data: Dict[str, Any], what: str) -> bool:
    """Write ``data`` to ``path`` atomically (its folder made); False (logged, ``what`` names it) on a failed write."""
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        runfiles.write_json_atomic(path, data)
    except OSError as e:
        log("could not file %s %s: %s" % (what, path, e))
        return False
    return True


class Memos:
    """Files at most one memo per distinct rung set of one run (``spec["learn"]`` names the configuration; a spec
    without it, e.g. a launch that could not read the model's config.json or the devices, files none)."""

    def __init__(self, spec: Mapping[str, Any], runs_dir: str):
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
        if not _file(path, memo, "the learned start"):
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

    def _timing_path(self) -> Optional[str]:
        fp = (self.spec.get("learn") or {}).get("fingerprint")
        return learned.timing_path(self.runs_dir, fp) if fp else None

    def timing(self) -> Optional[Dict[str, Any]]:
        """The step timings earlier runs of this configuration left (:func:`.stall.merge_learned`'s dict), or None
        (none, unreadable, or a spec without ``learn``)."""
        path = self._timing_path()
        try:
            data = runfiles.read_json(path) if path else None
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def file_timing(self, measured: Dict[str, Any]) -> Optional[str]:
        """Merge an attempt's step timings (:meth:`.stall.StepClock.to_json`) into the configuration's file
        (:func:`.stall.merge_learned`). Returns the path written, None when nothing was (no step, no ``learn``, a
        failed write: logged)."""
        path = self._timing_path()
        if not path or not measured.get("steps"):
            return None
        return path if _file(path, stall.merge_learned(self.timing(), measured), "the step timings") else None
