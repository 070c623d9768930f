"""Scenario and device cues of the verl STAND-IN (sandbox / test equipment only).

The test (never the tool) writes ``/sandbox/scenario.json`` and ``/sandbox/devices.json`` on the host;
the container sees them read-only. ``DAPO_STANDIN_SCENARIO`` / ``DAPO_STANDIN_DEVICES`` override the
paths. The schema is documented in ``sandbox/README.md``.
"""

from __future__ import annotations

import hashlib
import json
import os

SCENARIO_PATH = "/sandbox/scenario.json"
DEVICES_PATH = "/sandbox/devices.json"

FAILURE_KINDS = (
    "oom-device",
    "oom-kv-cache",
    "oom-host",
    "oom-ray",
    "hccl-timeout",
    "hang",
    "swanlab-auth",
    "noisy-success",
    "crash",
    "data-error",
    "network",
    "stall",
    "diverge",
    "save-error",
    "actor-died",
)


def _load(path: str) -> dict:
    try:
        with open(path) as f:
            data = json.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:  # a broken cue file is a test bug: say so loudly
        raise SystemExit(f"verl stand-in: cannot read cue file {path}: {e}")
    if not isinstance(data, dict):
        raise SystemExit(f"verl stand-in: cue file {path} must hold a JSON object")
    return data


def scenario() -> dict:
    """The scenario dict (``{}`` when no file). Keys: see sandbox/README.md."""
    path = os.environ.get("DAPO_STANDIN_SCENARIO", SCENARIO_PATH)
    data = _load(path)
    fail = data.get("failure")
    if fail is not None:
        if isinstance(fail, str):
            fail = {"kind": fail}
        if fail.get("kind") not in FAILURE_KINDS:
            raise SystemExit(f"verl stand-in: scenario failure kind {fail.get('kind')!r} is not one of {FAILURE_KINDS}")
        data["failure"] = fail
    data["_hash"] = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]
    return data


def devices() -> dict:
    """The devices dict: accelerator ("npu"|"gpu"), count (default 8), hbm_total_mb, used_mb, processes."""
    path = os.environ.get("DAPO_STANDIN_DEVICES", DEVICES_PATH)
    d = _load(path)
    d.setdefault("accelerator", "npu")
    d.setdefault("count", 8)
    d.setdefault("hbm_total_mb", 65536)
    return d


def fire_allowed(scn: dict) -> bool:
    """True when the scenario failure may fire in this run.

    ``failure.times = N`` limits firing to the first N runs that reach the failure point; the count lives
    in ``/tmp/dapo-standin/<scenario hash>.count`` inside the container (fresh per scenario content).
    Without ``times`` the failure fires every run.
    """
    fail = scn.get("failure") or {}
    times = fail.get("times")
    if times is None:
        return True
    d = "/tmp/dapo-standin"
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, scn["_hash"] + ".count")
    try:
        n = int(open(path).read().strip() or 0)
    except (OSError, ValueError):
        n = 0
    if n >= int(times):
        return False
    with open(path, "w") as f:
        f.write(str(n + 1))
    return True
