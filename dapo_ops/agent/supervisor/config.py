"""What one run tells its supervisor: ``spec.json``, ``secret.env`` and the tunables (STDLIB ONLY, shipped).

``spec.json`` is written by the launch (docs/design.md "Run spec"; read by :func:`dapo_ops.agent.runfiles.read_spec`).
``secret.env`` (0600, ``KEY=VALUE`` lines) is read once and deleted: secrets stay in the supervisor's memory and
in verl's environment only, never on disk, in argv or in run.json.

Tunables (optional ``spec["supervisor"]`` dict; seconds): ``poll_interval_s`` (0.25), ``oom_grace_s`` (1.0:
output still collected after the OOM line before the kill, once the driver's failure report has ended),
``oom_report_wait_s`` (20: the longest wait for that report after the OOM line, :func:`.follow._oom_seen_out`), ``kill_grace_s`` (15: SIGTERM -> SIGKILL),
``retry_delay_s`` (10 on NPU -- HCCL ``EJ0001`` if restarted too soon --; on GPU at most 3: the wait ends as soon
as the stopped attempt's device memory is free, :func:`dapo_ops.agent.supervisor.accelerator.wait_gpu_release`),
``release_wait_max_s`` (60: the bound on the latter), ``write_interval_s`` (1.0: run.json progress throttle),
``oom_counter_files`` (list of paths, default :data:`dapo_ops.agent.supervisor.accelerator.OOM_COUNTER_FILES`),
``stall_factor`` / ``stall_floor_s`` (a stall: no progress for factor x the longest step seen, at least the floor;
:class:`.stall.StepClock`), ``counter_window_s`` / ``counter_sample_s`` (:class:`.stall.CounterWatch`),
``storm_min_span_s`` / ``storm_slow_span_s`` (:mod:`.storm`), ``log_rate_bytes_s`` / ``log_burst_bytes`` (train.log's
bound, :mod:`.logcap`), ``evidence_s`` (30: the bound on how long the worker nodes of
a multi-host run take to hand in a failed attempt's evidence, all at once; it ends as soon as every node answered,
usually the few seconds Ray takes to start one worker process per node; :mod:`.hostevidence`).
``hang_timeout_s`` and ``max_oom_retries`` are top-level in the spec (defaults: :data:`dapo_ops.core.defaults.SPEC`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Dict, Mapping
from dapo_ops.core import defaults

#: secret.env names the notifier owns (notify.spec_from_user_config: DAPO_NOTIFY_URL_<i>, DAPO_NOTIFY_SIGN_<i>)
NOTIFY_SECRET_PREFIX = "DAPO_NOTIFY_"

DEFAULT_TUNABLES = {
    "poll_interval_s": 0.25,
    "oom_grace_s": 1.0,
    "oom_report_wait_s": 20.0,
    "kill_grace_s": 15.0,
    "write_interval_s": 1.0,
    "release_wait_max_s": 60.0,
    "stall_factor": 5.0,  # stall.STALL_FACTOR
    "stall_floor_s": 60.0,  # stall.STALL_FLOOR_S
    "counter_window_s": 180.0,  # stall.COUNTER_WINDOW_S
    "counter_sample_s": 15.0,  # stall.COUNTER_SAMPLE_S
    "storm_min_span_s": 10.0,  # storm.MIN_SPAN_S
    "storm_slow_span_s": 60.0,  # storm.SLOW_SPAN_S
    "log_rate_bytes_s": 16384.0,  # logcap.RATE_BYTES_S
    "log_burst_bytes": 16777216.0,  # logcap.BURST_BYTES
    "evidence_s": 30.0,  # hostevidence: how long the worker nodes get to hand in a failed attempt's evidence
}

#: the tunables an inventory host may set (``[hosts.<name>.supervisor]``, written into the spec's ``supervisor``):
#: :data:`DEFAULT_TUNABLES` and ``retry_delay_s``
HOST_TUNABLES = tuple(DEFAULT_TUNABLES) + ("retry_delay_s",)


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


def take_secret_env(path: Path) -> Dict[str, str]:
    """The variables of ``secret.env`` at ``path`` (empty when it is missing), after which the file is deleted.

    :raises OSError: the file exists but cannot be read or deleted.
    """
    try:
        text = path.read_text()
    except FileNotFoundError:
        text = ""
    out = parse_env_file(text) if text else {}
    try:
        os.unlink(str(path))
    except FileNotFoundError:
        pass
    return out


def tunables(spec: Mapping[str, Any]) -> Dict[str, float]:
    """:data:`DEFAULT_TUNABLES` updated from ``spec["supervisor"]``, plus ``retry_delay_s`` (seconds; 10 on NPU,
    3 on GPU unless the spec sets it). ``oom_counter_files`` is read from the spec where it is used.

    :raises ValueError: a tunable in the spec is not a number.
    """
    tun = dict(DEFAULT_TUNABLES)
    sup = spec.get("supervisor") or {}
    tun.update({k: float(v) for k, v in sup.items() if k in DEFAULT_TUNABLES or k == "retry_delay_s"})
    if "retry_delay_s" not in tun:
        tun["retry_delay_s"] = 10.0 if spec.get("accelerator", defaults.HOST["accelerator"]) == "npu" else 3.0
    return tun
