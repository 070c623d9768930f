"""The GPU retry delay waits only for device-memory release (supervisor.wait_gpu_release), read from
``nvidia-smi --query-compute-apps=pid`` (a stand-in script on PATH here)."""

from __future__ import annotations

import os
import time

from dapo_ops.agent import supervisor
from supervisor_helpers import fake_smi


def test_returns_once_the_attempts_pids_are_gone(tmp_path, monkeypatch):
    smi = fake_smi(tmp_path, apps=["4242\\n777\\n", "4242\\n777\\n", "777\\n"])
    monkeypatch.setenv("PATH", f"{smi}:{os.environ['PATH']}")
    waited = supervisor.wait_gpu_release([4242, 4243], max_s=5.0, every_s=0.05)
    assert int((tmp_path / "n").read_text()) == 3  # looked until 4242 was gone; 777 (another run's) is not ours
    assert waited < 2.0


def test_caps_at_max_s(tmp_path, monkeypatch):
    smi = fake_smi(tmp_path, apps=["4242\\n"])
    monkeypatch.setenv("PATH", f"{smi}:{os.environ['PATH']}")
    t0 = time.monotonic()
    supervisor.wait_gpu_release([4242], max_s=0.5, every_s=0.05)
    assert 0.45 <= time.monotonic() - t0 < 3.0


def test_without_nvidia_smi_waits_the_full_delay(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # empty dir: no nvidia-smi
    t0 = time.monotonic()
    supervisor.wait_gpu_release([1], max_s=0.4)
    assert time.monotonic() - t0 >= 0.38


def test_waits_for_the_memory_to_come_back_not_only_the_pids(tmp_path, monkeypatch):
    # the real run d (tests/fixtures/real-verl/tool-runs): PIDs gone, 136201 MiB still used for a while
    smi = fake_smi(tmp_path, used_mib=[136201, 136201, 90000, 300])
    monkeypatch.setenv("PATH", f"{smi}:{os.environ['PATH']}")
    waited = supervisor.wait_gpu_release([4242], max_s=3.0, every_s=0.05, baseline_mib=[0], mem_max_s=10.0)
    assert int((tmp_path / "m").read_text()) == 4  # looked until 300 MiB <= 0 + 1024 slack
    assert waited < 5.0


def test_memory_wait_is_bounded_by_mem_max_s(tmp_path, monkeypatch):
    smi = fake_smi(tmp_path, used_mib=[136201])  # something else keeps the memory: go on after mem_max_s
    monkeypatch.setenv("PATH", f"{smi}:{os.environ['PATH']}")
    t0 = time.monotonic()
    supervisor.wait_gpu_release([4242], max_s=0.2, every_s=0.05, baseline_mib=[500], mem_max_s=0.6)
    assert 0.55 <= time.monotonic() - t0 < 3.0


def test_without_a_baseline_the_pid_list_alone_decides(tmp_path, monkeypatch):
    smi = fake_smi(tmp_path, used_mib=[136201])
    monkeypatch.setenv("PATH", f"{smi}:{os.environ['PATH']}")
    assert supervisor.wait_gpu_release([4242], max_s=3.0, every_s=0.05) < 1.0
    assert int((tmp_path / "m").read_text()) == 0  # memory never asked
