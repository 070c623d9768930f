"""The GPU retry wait on real verl (tests/fixtures/real-verl/tool-runs/d-update-oom-release/, 2026-12-01 12:28 UTC).

Scenario d (gpu/d-update-oom.sh: 1.46 B model, a real CUDA OOM in ``update_actor``) ran again on the H200 after
the retry wait was changed to wait for the device memory too (dapo_ops/agent/supervisor/accelerator.py ``wait_gpu_release``;
the earlier run, tool-runs/d-update-oom/, started attempt 2 while 136 201 MiB were still held). This record is
what the supervisor wrote for that run; the rule it must show: attempt 2 starts only once every GPU's used memory
is back within 1 GiB of what attempt 1 started with. The test replays the recorded nvidia-smi samples through the
project's wait; the record itself is read by tests/test_real_tool_runs.py (classifier, status row).
"""

from datetime import datetime
from pathlib import Path
from types import SimpleNamespace

import pytest

from dapo_ops.agent.supervisor import accelerator

RUN = Path(__file__).resolve().parent / "fixtures" / "real-verl" / "tool-runs" / "d-update-oom-release"
SLACK_MIB = 1024  # the wait's tolerance (supervisor: within 1 GiB of attempt 1's baseline)


def test_the_wait_replayed_on_the_recorded_samples_starts_the_retry_after_the_release(monkeypatch):
    """The project's wait (:func:`devices.wait_gpu_release`) fed the recorded nvidia-smi samples after the OOM, in
    their own clock: it must keep waiting while verl's memory is held and return at the first sample back within
    the slack of attempt 1's baseline (the earlier version returned as soon as the PIDs were gone)."""
    rows = [ln.split(", ") for ln in (RUN / "gpu-mem.csv").read_text().splitlines()[1:] if ln.strip()]
    samples = [(datetime.strptime(r[0], "%Y/%m/%d %H:%M:%S.%f").timestamp(), int(r[1].split()[0])) for r in rows]
    peak = max(range(len(samples)), key=lambda i: samples[i][1])
    after = samples[peak:]  # from the OOM's peak on: held, then released
    clock = {"i": 0}
    monkeypatch.setattr(accelerator, "now", lambda: after[min(clock["i"], len(after) - 1)][0])
    monkeypatch.setattr(accelerator, "gpu_compute_pids", lambda timeout_s=10.0: [])  # the PIDs are gone at once
    monkeypatch.setattr(accelerator, "device_memory_used_mib", lambda timeout_s=10.0: [after[clock["i"]][1]])
    step = lambda s: clock.__setitem__("i", min(clock["i"] + 1, len(after) - 1))  # noqa: E731 - next sample
    monkeypatch.setattr(accelerator, "time", SimpleNamespace(sleep=step))  # this module's sleep only
    waited = accelerator.wait_gpu_release([4242], max_s=10.0, baseline_mib=[0], slack_mib=SLACK_MIB, mem_max_s=3600.0)
    first_free = next(i for i, (_, mib) in enumerate(after) if mib <= SLACK_MIB)
    assert first_free > 0 and clock["i"] == first_free, (clock, first_free)
    assert waited == pytest.approx(after[first_free][0] - after[0][0])
