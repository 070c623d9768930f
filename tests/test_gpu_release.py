"""The GPU retry delay waits only for device-memory release (devices.wait_gpu_release), read from
``nvidia-smi --query-compute-apps=pid`` / ``--query-gpu=memory.used`` (a stand-in script on PATH here).

The wait runs on a virtual clock: ``devices.now`` reads it and the wait's ``sleep`` advances it, so every bound is
checked in the wait's own seconds (no wall clock, no real sleeping) and the number of nvidia-smi looks is exact."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from dapo_ops.agent.supervisor import accelerator
from supervisor_helpers import fake_smi


class Clock:
    """Virtual time for :func:`devices.wait_gpu_release`: ``now()`` is ``t``; ``sleep(s)`` adds ``s``. A wait that
    never ends fails at ``limit`` virtual seconds instead of hanging the test."""

    def __init__(self, limit: float = 60.0):
        self.t, self.limit, self.sleeps = 0.0, limit, []

    def now(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.sleeps.append(s)
        self.t += s
        if self.t > self.limit:
            raise AssertionError("wait_gpu_release still waiting after %g virtual seconds" % self.limit)


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(accelerator, "now", c.now)
    monkeypatch.setattr(accelerator, "time", SimpleNamespace(sleep=c.sleep))  # this module's sleep only
    return c


def looks(tmp_path, name: str) -> int:
    """How often the stand-in nvidia-smi answered: ``n`` compute-apps queries, ``m`` memory queries."""
    p = tmp_path / name
    return int(p.read_text()) if p.exists() else 0


def test_returns_once_the_attempts_pids_are_gone(tmp_path, monkeypatch, clock):
    smi = fake_smi(tmp_path, apps=["4242\\n777\\n", "4242\\n777\\n", "777\\n"])
    monkeypatch.setenv("PATH", f"{smi}:{os.environ['PATH']}")
    waited = accelerator.wait_gpu_release([4242, 4243], max_s=5.0, every_s=0.25)
    assert looks(tmp_path, "n") == 3  # looked until 4242 was gone; 777 (another run's) is not ours
    assert waited == 0.5 and clock.sleeps == [0.25, 0.25]


def test_caps_at_max_s(tmp_path, monkeypatch, clock):
    smi = fake_smi(tmp_path, apps=["4242\\n"])  # the PID never leaves the list
    monkeypatch.setenv("PATH", f"{smi}:{os.environ['PATH']}")
    waited = accelerator.wait_gpu_release([4242], max_s=1.0, every_s=0.25)
    assert waited == 1.0 and looks(tmp_path, "n") == 5  # at 0, 0.25, 0.5, 0.75 and 1.0 s: then it goes on


def test_without_nvidia_smi_waits_the_full_delay(tmp_path, monkeypatch, clock):
    monkeypatch.setenv("PATH", str(tmp_path))  # empty dir: no nvidia-smi
    waited = accelerator.wait_gpu_release([1], max_s=1.0, every_s=0.25)
    assert waited == 1.0 and clock.sleeps == [0.25] * 4  # the old fixed delay, no more


def test_waits_for_the_memory_to_come_back_not_only_the_pids(tmp_path, monkeypatch, clock):
    # the real run d (tests/fixtures/real-verl/tool-runs): PIDs gone, 136201 MiB still used for a while
    smi = fake_smi(tmp_path, used_mib=[136201, 136201, 90000, 300])
    monkeypatch.setenv("PATH", f"{smi}:{os.environ['PATH']}")
    waited = accelerator.wait_gpu_release([4242], max_s=3.0, every_s=0.25, baseline_mib=[0], mem_max_s=10.0)
    assert looks(tmp_path, "m") == 4  # looked until 300 MiB <= 0 + 1024 slack
    assert waited == 0.75


def test_memory_wait_is_bounded_by_mem_max_s(tmp_path, monkeypatch, clock):
    smi = fake_smi(tmp_path, used_mib=[136201])  # something else keeps the memory: go on after mem_max_s
    monkeypatch.setenv("PATH", f"{smi}:{os.environ['PATH']}")
    waited = accelerator.wait_gpu_release([4242], max_s=0.25, every_s=0.25, baseline_mib=[500], mem_max_s=1.0)
    assert waited == 1.0 and looks(tmp_path, "m") == 5


def test_without_a_baseline_the_pid_list_alone_decides(tmp_path, monkeypatch, clock):
    smi = fake_smi(tmp_path, used_mib=[136201])
    monkeypatch.setenv("PATH", f"{smi}:{os.environ['PATH']}")
    assert accelerator.wait_gpu_release([4242], max_s=3.0, every_s=0.25) == 0.0
    assert looks(tmp_path, "m") == 0  # memory never asked


def test_a_stop_request_ends_the_wait(tmp_path, monkeypatch, clock):
    smi = fake_smi(tmp_path, apps=["4242\\n"])
    monkeypatch.setenv("PATH", f"{smi}:{os.environ['PATH']}")
    asked = iter([False, False, True])  # SIGTERM to the supervisor during the second pause
    waited = accelerator.wait_gpu_release([4242], max_s=60.0, every_s=0.25, stop=lambda: next(asked))
    assert waited == 0.5 and looks(tmp_path, "n") == 2
