"""The GPU retry wait on real verl (tests/fixtures/real-verl/tool-runs/d-update-oom-release/, 2026-12-01 12:28 UTC).

Scenario d (gpu/d-update-oom.sh: 1.46 B model, a real CUDA OOM in ``update_actor``) ran again on the H200 after
the retry wait was changed to wait for the device memory too (dapo_ops/agent/supervisor/devices.py ``wait_gpu_release``;
the earlier run, tool-runs/d-update-oom/, started attempt 2 while 136 201 MiB were still held). This record is
what the supervisor wrote for that run; the rule it must show: attempt 2 starts only once every GPU's used memory
is back within 1 GiB of what attempt 1 started with.
"""

import json
from datetime import datetime
from pathlib import Path

import pytest

from dapo_ops.agent.supervisor import devices

RUN = Path(__file__).resolve().parent / "fixtures" / "real-verl" / "tool-runs" / "d-update-oom-release"
SLACK_MIB = 1024  # the wait's tolerance (supervisor: within 1 GiB of attempt 1's baseline)


@pytest.fixture(scope="module")
def record():
    return json.loads((RUN / "run.json").read_text())


def test_the_run_recovered_from_a_real_update_oom(record):
    assert record["status"] == "succeeded" and record["step"] == record["total_steps"] == 1
    a1, a2 = record["attempts"]
    assert a1["killed_by"] == "oom" and a1["verdict"]["cls"] == "oom-device"
    assert a1["verdict"]["detail"]["phase"] == "update"
    assert a2["setting_changes"]["ppo_micro_batch_size_per_gpu"] == 16 and a2["verdict"]["cls"] == "success"


def test_memory_was_still_held_after_teardown_and_back_before_the_retry(record):
    a1, a2 = record["attempts"]
    held = a1["device_mem_after_mib"]
    base = a1["device_mem_before_mib"]
    at_retry = a1["device_mem_at_retry_mib"]
    # what the earlier version did not wait for: verl's memory still in use once its processes were gone
    assert max(held) > 100_000, held
    assert len(at_retry) == len(base) and all(r <= b + SLACK_MIB for r, b in zip(at_retry, base)), (at_retry, base)
    assert a1["release_wait_s"] > 0
    # attempt 2 began after the OOM line, the teardown and the wait, in that order
    assert a1["oom_line_at"] <= a1["ended_at"] <= a2["started_at"]
    assert a2["started_at"] - a1["oom_line_at"] >= a1["release_wait_s"]


def test_the_supervisor_log_says_so():
    log = (RUN / "supervisor.log").read_text()
    assert "attempt 1 torn down in 0.1 s; device memory used now (MiB): [136201]" in log
    assert "device memory used before attempt 2 (MiB): [0] (before attempt 1: [0])" in log


def test_the_samples_saw_the_peak_and_the_release():
    rows = [ln.split(", ") for ln in (RUN / "gpu-mem.csv").read_text().splitlines()[1:] if ln.strip()]
    rows += [ln.split(", ") for ln in (RUN / "gpu-mem-watch.csv").read_text().splitlines()[1:] if ln.strip()]
    used = [int(r[1].split()[0]) for r in rows]
    peak = used.index(max(used))
    assert max(used) > 130_000 and min(used[peak:]) < SLACK_MIB


def test_the_wait_replayed_on_the_recorded_samples_starts_the_retry_after_the_release(monkeypatch):
    """The project's wait (:func:`devices.wait_gpu_release`) fed the recorded nvidia-smi samples after the OOM, in
    their own clock: it must keep waiting while verl's memory is held and return at the first sample back within
    the slack of attempt 1's baseline (the earlier version returned as soon as the PIDs were gone)."""
    rows = [ln.split(", ") for ln in (RUN / "gpu-mem.csv").read_text().splitlines()[1:] if ln.strip()]
    samples = [(datetime.strptime(r[0], "%Y/%m/%d %H:%M:%S.%f").timestamp(), int(r[1].split()[0])) for r in rows]
    peak = max(range(len(samples)), key=lambda i: samples[i][1])
    after = samples[peak:]  # from the OOM's peak on: held, then released
    clock = {"i": 0}
    monkeypatch.setattr(devices, "now", lambda: after[min(clock["i"], len(after) - 1)][0])
    monkeypatch.setattr(devices, "gpu_compute_pids", lambda timeout_s=10.0: [])  # the PIDs are gone at once
    monkeypatch.setattr(devices, "device_memory_used_mib", lambda timeout_s=10.0: [after[clock["i"]][1]])
    monkeypatch.setattr(devices.time, "sleep", lambda s: clock.__setitem__("i", min(clock["i"] + 1, len(after) - 1)))
    waited = devices.wait_gpu_release([4242], max_s=10.0, baseline_mib=[0], slack_mib=SLACK_MIB, mem_max_s=3600.0)
    first_free = next(i for i, (_, mib) in enumerate(after) if mib <= SLACK_MIB)
    assert first_free > 0 and clock["i"] == first_free, (clock, first_free)
    assert waited == pytest.approx(after[first_free][0] - after[0][0])
