"""Pure parsers for the accelerator tools' text output: ``npu-smi info`` (Ascend) and ``nvidia-smi`` (NVIDIA).

Stdlib only, no I/O: the preflight probe runs the tool inside the container and ships its stdout back;
these functions turn that text into :class:`DeviceReport`. Formats follow the real tools:

- ``npu-smi info`` (Ascend driver 23.x/24.x, Atlas 800T A2 / 910B; also the 21.x 910A layout): a box table with
  two lines per chip (``NPU Name | Health | Power Temp Hugepages`` then ``Chip | Bus-Id | AICore Memory-Usage
  HBM-Usage``) followed by a process table (``NPU Chip | Process id | Process name | Process memory(MB)``) or
  ``No running processes found in NPU <n>`` lines. Memory in MB (MiB).
- ``nvidia-smi`` (driver 470..560 table layout): per GPU a block whose second line holds
  ``<used>MiB / <total>MiB``; a ``Processes:`` table with ``GPU GI CI PID Type Process name GPU Memory Usage``.
  The CSV form of ``nvidia-smi --query-gpu=index,name,memory.total,memory.used --format=csv,noheader,nounits``
  is accepted too.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = [
    "Device",
    "DeviceProcess",
    "DeviceReport",
    "DeviceParseError",
    "parse_npu_smi",
    "parse_nvidia_smi",
    "parse",
    "parse_visible",
]


class DeviceParseError(ValueError):
    """The text is not recognisable ``npu-smi info`` / ``nvidia-smi`` output (one-line message)."""


@dataclass
class Device:
    """One accelerator as the tool reports it. Memory in MiB (npu-smi says MB; it means MiB)."""

    index: int
    name: str
    mem_total_mb: int
    mem_used_mb: int
    health: str = ""
    bus_id: str = ""
    #: busy percent (npu-smi's ``AICore(%)``, nvidia-smi's ``utilization.gpu``); None when the text has none
    util_pct: int | None = None

    @property
    def mem_free_mb(self) -> int:
        return max(0, self.mem_total_mb - self.mem_used_mb)


@dataclass
class DeviceProcess:
    """A process holding device memory (a leftover run when nothing of ours is running)."""

    device: int
    pid: int
    name: str
    mem_mb: int


@dataclass
class DeviceReport:
    """What one ``npu-smi info`` / ``nvidia-smi`` call shows: ``kind`` is ``npu`` or ``gpu``."""

    kind: str
    devices: list[Device] = field(default_factory=list)
    processes: list[DeviceProcess] = field(default_factory=list)
    tool_version: str = ""

    @property
    def count(self) -> int:
        return len(self.devices)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        for dev, src in zip(d["devices"], self.devices):
            dev["mem_free_mb"] = src.mem_free_mb
        return d


_PAIR = re.compile(r"(\d+)\s*/\s*(\d+)")


def _cells(line: str) -> list[str]:
    """``| a | b | c |`` -> ``["a", "b", "c"]`` (stripped)."""
    s = line.strip()
    if s.startswith("|"):
        s = s[1:]
    if s.endswith("|"):
        s = s[:-1]
    return [c.strip() for c in s.split("|")]


def parse_npu_smi(text: str) -> DeviceReport:
    """Parse ``npu-smi info`` output.

    Returns one :class:`Device` per chip (index = the NPU id, or ``<npu>*<chips>+chip`` renumbered in order
    of appearance when a card has several chips, which is the index ``ASCEND_RT_VISIBLE_DEVICES`` uses);
    memory is the HBM pair (``HBM-Usage(MB)``, the last ``used / total`` pair of the chip line) or, on
    910A-era layouts without HBM, the ``Memory-Usage(MB)`` pair. Processes come from the process table.

    Raises :class:`DeviceParseError` when no ``npu-smi`` header is found.
    """
    lines = text.splitlines()
    if not any("npu-smi" in ln.lower() for ln in lines[:5]) and not any("NPU" in ln and "Name" in ln for ln in lines):
        raise DeviceParseError("not npu-smi output: no 'npu-smi' header and no 'NPU Name' column")
    ver = ""
    m = re.search(r"npu-smi\s+(\S+)", text)
    if m:
        ver = m.group(1)
    report = DeviceReport(kind="npu", tool_version=ver)
    section = "head"
    pending: list[str] | None = None  # first line cells of a chip pair
    idx = 0
    for ln in lines:
        st = ln.strip()
        if not st.startswith("|"):
            continue
        cells = _cells(ln)
        if not cells:
            continue
        first = cells[0]
        if first.startswith("NPU") and "Name" in first:
            section = "devices"
            continue
        if first.startswith("NPU") and ("Chip" in first or any("Process id" in c for c in cells)):
            section = "procs"
            continue
        if first.startswith("Chip") or first.startswith("npu-smi"):
            continue
        if section == "devices":
            toks = first.split()
            if pending is None:
                if len(toks) >= 2 and toks[0].isdigit() and not toks[1].isdigit():
                    pending = cells
                continue
            # chip line: "<chip> [<phy id>]" | bus id | aicore memory hbm
            chip_cells = cells
            head_toks = pending[0].split()
            name = " ".join(head_toks[1:])
            health = pending[1] if len(pending) > 1 else ""
            bus = chip_cells[1] if len(chip_cells) > 1 else ""
            rest = " ".join(chip_cells[2:])
            pairs = _PAIR.findall(rest)
            used = total = 0
            if pairs:
                used, total = int(pairs[-1][0]), int(pairs[-1][1])
            aicore = rest.split()[:1]  # AICore(%) comes first: "<aicore> <mem used> / <mem total> <hbm used> / ..."
            report.devices.append(
                Device(
                    index=idx,
                    name=name,
                    mem_total_mb=total,
                    mem_used_mb=used,
                    health=health,
                    bus_id=bus,
                    util_pct=int(aicore[0]) if aicore and aicore[0].isdigit() else None,
                )
            )
            idx += 1
            pending = None
        elif section == "procs":
            if first.lower().startswith("no running processes"):
                continue
            toks = first.split()
            if len(cells) >= 4 and toks and toks[0].isdigit():
                try:
                    npu = int(toks[0])
                    pid = int(cells[1].split()[0])
                    mem = int(cells[3].split()[0])
                except (ValueError, IndexError):
                    continue
                report.processes.append(DeviceProcess(device=npu, pid=pid, name=cells[2], mem_mb=mem))
    if section == "head":
        raise DeviceParseError("npu-smi output has no device table ('NPU Name | Health' header missing)")
    return report


_GPU_HEAD = re.compile(r"^\|\s*(\d+)\s+(.+?)\s+(On|Off)\s+\|")
_MIB_PAIR = re.compile(r"(\d+)\s*MiB\s*/\s*(\d+)\s*MiB")
_GPU_PROC = re.compile(r"^\|\s*(\d+)\s+(\S+)\s+(\S+)\s+(\d+)\s+([A-Z+]+)\s+(.+?)\s+(\d+)\s*MiB\s*\|\s*$")
_CSV_ROW = re.compile(r"^\s*(\d+)\s*,\s*([^,]+?)\s*,\s*(\d+)(?:\s*MiB)?\s*,\s*(\d+)(?:\s*MiB)?")


def parse_nvidia_smi(text: str) -> DeviceReport:
    """Parse plain ``nvidia-smi`` output (or the ``--query-gpu=index,name,memory.total,memory.used`` CSV).

    Memory in MiB. Processes from the ``Processes:`` table (``Type`` C/G/C+G). Raises
    :class:`DeviceParseError` when neither layout is recognised.
    """
    lines = text.splitlines()
    ver = ""
    m = re.search(r"Driver Version:\s*(\S+)", text)
    if m:
        ver = m.group(1)
    report = DeviceReport(kind="gpu", tool_version=ver)
    if "NVIDIA-SMI" not in text and "Processes" not in text:
        for ln in lines:
            cm = _CSV_ROW.match(ln)
            if cm:
                report.devices.append(
                    Device(
                        index=int(cm.group(1)),
                        name=cm.group(2),
                        mem_total_mb=int(cm.group(3)),
                        mem_used_mb=int(cm.group(4)),
                    )
                )
        if report.devices:
            return report
        raise DeviceParseError("not nvidia-smi output: no 'NVIDIA-SMI' header and no CSV rows")
    if "has failed" in text:
        first = next(ln.strip() for ln in lines if "has failed" in ln)
        raise DeviceParseError(f"nvidia-smi failed inside the container: {first}")
    in_procs = False
    pending: tuple[int, str] | None = None
    for ln in lines:
        if "Processes:" in ln:
            in_procs = True
            continue
        if in_procs:
            pm = _GPU_PROC.match(ln.rstrip())
            if pm:
                report.processes.append(
                    DeviceProcess(
                        device=int(pm.group(1)), pid=int(pm.group(4)), name=pm.group(6).strip(), mem_mb=int(pm.group(7))
                    )
                )
            continue
        gm = _GPU_HEAD.match(ln)
        if gm:
            pending = (int(gm.group(1)), gm.group(2).strip())
            continue
        if pending is not None:
            mm = _MIB_PAIR.search(ln)
            if mm:
                report.devices.append(
                    Device(
                        index=pending[0], name=pending[1], mem_used_mb=int(mm.group(1)), mem_total_mb=int(mm.group(2))
                    )
                )
                pending = None
    return report


def parse(kind: str, text: str) -> DeviceReport:
    """Dispatch on the accelerator kind: ``npu`` -> :func:`parse_npu_smi`, ``gpu`` -> :func:`parse_nvidia_smi`."""
    if kind == "npu":
        return parse_npu_smi(text)
    if kind == "gpu":
        return parse_nvidia_smi(text)
    raise ValueError(f"unknown accelerator {kind!r}: use npu or gpu")


def parse_visible(value: str | None) -> list[int] | None:
    """``ASCEND_RT_VISIBLE_DEVICES`` / ``CUDA_VISIBLE_DEVICES`` value -> device indices, ``None`` when unset.

    ``""`` means no device at all (CUDA semantics). Raises :class:`ValueError` naming the bad entry
    (GPU UUIDs are not supported by this check).
    """
    if value is None:
        return None
    value = value.strip()
    if value == "":
        return []
    out = []
    for part in value.split(","):
        part = part.strip()
        if not part.isdigit():
            raise ValueError(f"visible-device entry {part!r} is not an index")
        out.append(int(part))
    return out
