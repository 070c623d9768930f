"""Parsers of npu-smi / nvidia-smi output against fixtures in the real tools' layouts (tests/fixtures/devices)."""

from pathlib import Path

import pytest

from dapo_ops.core import devices

FIX = Path(__file__).parent / "fixtures" / "devices"


def _read(name):
    return (FIX / name).read_text()


def test_npu_910b_idle():
    r = devices.parse_npu_smi(_read("npu-smi-910b-idle.txt"))
    assert r.kind == "npu" and r.tool_version == "23.0.6"
    assert r.count == 8
    assert [d.index for d in r.devices] == list(range(8))
    assert r.devices[0].name == "910B3" and r.devices[0].health == "OK"
    assert r.devices[0].mem_total_mb == 65536 and r.devices[0].mem_used_mb == 3378
    assert r.devices[0].mem_free_mb == 65536 - 3378
    assert r.devices[1].bus_id == "0000:C2:00.0"
    assert r.processes == []


def test_npu_910b_leftover_processes():
    r = devices.parse_npu_smi(_read("npu-smi-910b-leftover.txt"))
    assert r.count == 8
    assert [(p.device, p.pid, p.name, p.mem_mb) for p in r.processes] == [
        (0, 1195932, "python3.10", 61245),
        (1, 1195977, "ray::WorkerDict", 61245),
    ]
    assert r.devices[0].mem_free_mb == 65536 - 64623


def test_npu_910a_layout_takes_hbm_pair():
    r = devices.parse_npu_smi(_read("npu-smi-910a.txt"))
    assert r.count == 2
    assert (r.devices[0].mem_used_mb, r.devices[0].mem_total_mb) == (0, 32768)


def test_nvidia_idle_and_leftover():
    r = devices.parse_nvidia_smi(_read("nvidia-smi-idle.txt"))
    assert r.kind == "gpu" and r.count == 4 and r.tool_version == "550.54.15"
    assert r.devices[2].name == "NVIDIA A100-SXM4-80GB" and r.devices[2].mem_total_mb == 81920
    assert r.processes == []
    r = devices.parse_nvidia_smi(_read("nvidia-smi-leftover.txt"))
    assert r.devices[0].mem_used_mb == 70516
    assert [(p.device, p.pid, p.name, p.mem_mb) for p in r.processes] == [(0, 2876155, "python3", 70512)]


def test_nvidia_csv_query_form():
    text = "0, NVIDIA H100 80GB HBM3, 81559, 1\n1, NVIDIA H100 80GB HBM3, 81559, 40000\n"
    r = devices.parse_nvidia_smi(text)
    assert [(d.index, d.mem_total_mb, d.mem_used_mb) for d in r.devices] == [(0, 81559, 1), (1, 81559, 40000)]


def test_garbage_is_rejected_with_one_line():
    with pytest.raises(devices.DeviceParseError):
        devices.parse_npu_smi("bash: npu-smi: command not found\n")
    with pytest.raises(devices.DeviceParseError, match="has failed"):
        devices.parse_nvidia_smi("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n")
    with pytest.raises(devices.DeviceParseError):
        devices.parse_nvidia_smi("sh: 1: nvidia-smi: not found\n")


def test_parse_visible():
    assert devices.parse_visible(None) is None
    assert devices.parse_visible("") == []
    assert devices.parse_visible("0, 1,3") == [0, 1, 3]
    with pytest.raises(ValueError):
        devices.parse_visible("GPU-8f3e")
