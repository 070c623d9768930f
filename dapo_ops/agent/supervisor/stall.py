"""Stalls sized to the run, and where each process stood (STDLIB ONLY, shipped).

A stall: after the attempt's first ``step:`` line, nothing progresses (no step line and no new byte in the attempt
log: rollout progress, warnings, anything) for ``stall_factor`` x the run's median step time, at least
``stall_floor_s`` seconds and at most the run's ``hang_timeout_s`` (the cap, HANG_TIMEOUT, which alone applies
before the first step: start-up, model load and the first step's warm-up are not sized by steps). The first step is
timed apart: it holds the warm-up (compile, cache allocation), so the median is over the later steps while there
are any (:func:`stall_after`).

Before the supervisor stops a stalled (or hung) attempt it writes ``py-spy dump --pid`` of verl's driver and of
each of the attempt's own processes (Ray workers included: process group + ``DAPO_OPS_RUN_ID``, never by name) to
``<run_dir>/stacks-attempt-<k>.txt`` (:func:`dump_stacks`). py-spy is in verl 0.9.1's own dependency set: its
``ray[default]`` requirement brings it (Ray's dashboard takes stack dumps with it; the H200's install,
gpu/wheels-verl.txt, has py-spy 0.4.2) and its ``test`` extra names it (``verl-0.9.1.dist-info/METADATA``); where
it is absent, the file says so.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Any, Dict, List, Optional, Sequence

#: stall = no progress for this many median step times ...
STALL_FACTOR = 5.0
#: ... but never less than this (seconds): a short step must not make a checkpoint save or a validation a stall
STALL_FLOOR_S = 300.0
#: seconds one ``py-spy dump`` may take
DUMP_TIMEOUT_S = 20.0
#: processes dumped at most (the driver first)
MAX_DUMPS = 64


def _median(vals: Sequence[float]) -> float:
    v = sorted(vals)
    mid = len(v) // 2
    return v[mid] if len(v) % 2 else (v[mid - 1] + v[mid]) / 2.0


def stall_after(
    step_s: Sequence[float], hang_timeout_s: float, factor: float = STALL_FACTOR, floor_s: float = STALL_FLOOR_S
) -> Optional[float]:
    """Seconds without progress that make a stall, from this attempt's step durations ``step_s`` (seconds, in
    order; the first is the warm-up step, used alone only while it is the only one). None before the first step
    (then only ``hang_timeout_s`` applies). Never above ``hang_timeout_s``."""
    vals = [float(x) for x in step_s if x is not None and x > 0]
    if not vals:
        return None
    med = _median(vals[1:] if len(vals) > 1 else vals)
    return round(min(float(hang_timeout_s), max(float(floor_s), float(factor) * med)), 1)


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


def innermost(dump: str) -> Optional[str]:
    """Where the main thread (else the first thread) of a ``py-spy dump`` stood: its first frame line,
    ``func (file:line)`` (py-spy prints the innermost frame first)."""
    blocks: List[List[str]] = []
    for line in dump.splitlines():
        if line.startswith("Thread "):
            blocks.append([line])
        elif blocks and line.startswith("    ") and line.strip():
            blocks[-1].append(line.strip())
    main = [b for b in blocks if "MainThread" in b[0] and len(b) > 1] or [b for b in blocks if len(b) > 1]
    return main[0][1] if main else None


def dump_stacks(
    pids: Sequence[int],
    driver: Optional[int],
    out_path: str,
    python: Optional[str] = None,
    timeout_s: float = DUMP_TIMEOUT_S,
) -> List[Dict[str, Any]]:
    """``py-spy dump --pid`` of ``driver`` and each of ``pids`` into ``out_path`` (text, one section per process).
    Returns ``[{"pid", "role": "driver"|"worker", "cmd", "where": innermost frame | None, "error": str | None}]``.
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
        role = "driver" if pid == driver else "worker"
        ent: Dict[str, Any] = {"pid": pid, "role": role, "cmd": _cmdline(pid), "where": None, "error": None}
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
                    ent["where"] = innermost(text)
                else:
                    ent["error"] = (text.strip().splitlines() or ["exit %d" % r.returncode])[-1][:200]
            except (OSError, subprocess.TimeoutExpired) as e:
                text, ent["error"] = "", "py-spy: %s" % e
            parts.append("===== pid %d (%s) %s =====\n%s\n" % (pid, role, ent["cmd"], text.rstrip()))
        out.append(ent)
    try:
        with open(out_path, "w") as fh:
            fh.write("".join(parts) or "no process of the attempt was alive\n")
    except OSError:
        pass
    return out
