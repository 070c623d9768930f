"""What the failure classifier reads out of a log (:mod:`dapo_ops.core.classify`), apart from signatures and phases:
the last step, the planned total, the completion markers, the exit code, the newest checkpoint step, allocation
and capacity sizes (GiB), the failing node's IP and the shell's ``Killed`` line.

STDLIB ONLY. Line formats: verl 0.9.1 ``verl/utils/logger/aggregate_logger.py`` (``step:N - k:v`` metrics lines),
``verl/trainer/ppo/v1/trainer_base.py`` (:451 the ``Training Progress`` tqdm bar, :525 ``Final validation metrics``,
:772 ``Total training steps: N``; the same in ``verl/trainer/ppo/ray_trainer.py``), the sandbox stand-in's
``total time: N seconds`` last line (``sandbox/verl_standin/verl/_standin/trainer.py``), torch
``c10/cuda/CUDACachingAllocator.cpp`` and torch_npu (``Tried to allocate``, ``total capacity``), vLLM
``vllm/v1/worker/utils.py`` (``Free memory on device (a/b GiB)``). ``Total training steps: N`` is read with the
one grammar, :data:`dapo_ops.core.logformat.TOTAL_RE`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dapo_ops.core import logformat
from dapo_ops.core.classify.normalise import KILLED_RX, Log
from dapo_ops.core.classify.verdict import IMPOSSIBLE_ALLOC_GIB

#: any ``step:N`` token not preceded by a word character or ``/`` (``global_step:``, ``timing_s/step:`` are metric
#: names): a progress line, and the boundary the phase / role searches stop at. Looser than
#: ``logformat.STEP_START_RE`` (which also wants `` - `` or the line end after N); they agree on every fixture log.
STEP_RX = re.compile(r"(?<![\w/])step:(\d+)")
_STEP_NUM_RX = re.compile(r"\d+")
_PROGRESS_RX = re.compile(r"training progress:\s*(\d+)%\|[^|\n]*\|\s*(\d+)/(\d+)")
_FINAL_VAL_RX = re.compile(r"final validation metrics")
_TOTAL_TIME_RX = re.compile(r"(?m)^total time: [\d.]+ seconds\s*$")
_EXIT_RXS = (  # (needle, regex): an EXIT=<n> trailer, "... exited with code <n>", the attempt end delimiter
    ("exit=", re.compile(r"(?m)^exit=(-?\d+)\s*$")),
    ("exited with code", re.compile(r"exited with code (-?\d+)")),
    ("end exit=", re.compile(r"(?m)^===== dapo-ops attempt \d+ end exit=(-?\d+)")),
)
#: any ``global_step_N`` (save, resume or a path): the newest checkpoint seen, which may be partial
_GLOBAL_STEP_RX = re.compile(r"global_step_(\d+)")
# (torch_npu for an absurd size: "Tried to allocate more than 1EB memory")
_ALLOC_RX = re.compile(r"tried to allocate (?:more than )?(-?[\d.,]+)\s*([kmgtpe]?i?b|bytes)\b")
_IP_RX = re.compile(r"(?:\bip=|ip: ?|worker ip address: ?)(\d{1,3}(?:\.\d{1,3}){3})")
_TOTAL_RXS = (
    re.compile(r"total capacity of (-?[\d.,]+)\s*([kmgtpe]?i?b|bytes)\b"),
    re.compile(r"(-?[\d.,]+)\s*([kmgtpe]?i?b|bytes) total capacity"),
)
_FREE_TOTAL_RX = re.compile(r"\((-?[\d.]+)/(-?[\d.]+) gib\)")

_UNIT = {
    "b": 1,
    "bytes": 1,
    "kb": 1e3,
    "mb": 1e6,
    "gb": 1e9,
    "tb": 1e12,
    "pb": 1e15,
    "eb": 1e18,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
    "pib": 2**50,
    "eib": 2**60,
}


@dataclass
class Facts:
    """Progress and exit facts of one tail. Line indices are into :attr:`Log.lines`; ``-1``: not seen."""

    step: int | None = None  # last step:N
    step_line: int = -1
    total: int | None = None  # planned steps: Total training steps, else the progress bar's total
    final_val: int = -1  # line of "Final validation metrics" (not an echo)
    progress_done: int = -1  # line of a Training Progress bar at 100%
    total_time: int = -1  # line of "Total time: N seconds" (verl's last line)
    exit_code: int | None = None  # from the text: EXIT=<n>, "exited with code <n>", the attempt end delimiter
    ckpt_step: int | None = None  # newest global_step_N seen (may be partial)


def last_step(low: str) -> tuple[int | None, int]:
    """(N, offset) of the last :data:`STEP_RX` token in ``low``, found backwards with ``rfind``; (None, -1)."""
    end = len(low)
    while True:
        pos = low.rfind("step:", 0, end)
        if pos < 0:
            return None, -1
        prev = low[pos - 1] if pos else " "
        m = _STEP_NUM_RX.match(low, pos + 5)
        if m and not (prev.isalnum() or prev in "_/"):
            return int(m.group(0)), pos
        end = pos


def _last(rx: re.Pattern[str], text: str, needle: str) -> re.Match[str] | None:
    """The last match of ``rx`` in ``text`` (searched from just before the last ``needle``), or None."""
    if needle not in text:
        return None
    m = None
    for m in rx.finditer(text, max(0, text.rfind(needle) - 200)):
        pass
    if m is None:  # the last occurrence of the needle was not a match: look at all of them
        for m in rx.finditer(text):
            pass
    return m


def read_facts(log: Log) -> Facts:
    """The :class:`Facts` of a normalised tail."""
    low = log.low
    f = Facts()
    step, pos = last_step(low)
    if step is not None:
        f.step = step
        f.step_line = log.line_of(pos)
    m = _last(logformat.TOTAL_RE, log.text, "Total training steps:")
    if m:
        f.total = int(m.group(1))
    m = _last(_PROGRESS_RX, low, "training progress:")
    if m:
        done, tot = int(m.group(2)), int(m.group(3))
        if f.total is None:
            f.total = tot
        if done >= tot > 0:
            f.progress_done = log.line_of(m.start())
    m = _last(_FINAL_VAL_RX, low, "final validation metrics")
    if m is not None and not log.is_echo(log.line_of(m.start())):
        f.final_val = log.line_of(m.start())
    m = _last(_TOTAL_TIME_RX, low, "total time: ")
    if m is not None:
        f.total_time = log.line_of(m.start())
    best = -1
    for needle, rx in _EXIT_RXS:
        m = _last(rx, low, needle)
        if m is not None and m.start() > best:
            best, f.exit_code = m.start(), int(m.group(1))
    m = _last(_GLOBAL_STEP_RX, low, "global_step_")
    if m:
        f.ckpt_step = int(m.group(1))
    return f


def killed_line(log: Log) -> int | None:
    """The last shell ``Killed`` report (``./run.sh: line 41:  1120 Killed  python3 ...``) in the last 400 lines."""
    for i in range(len(log.lines) - 1, max(-1, len(log.lines) - 400), -1):
        if KILLED_RX.match(log.lines[i].lstrip()):
            return i
    return None


# --------------------------------------------------------------------------- sizes (GiB)


def _size_gib(num: str, unit: str) -> float | None:
    try:
        return float(num.replace(",", "")) * _UNIT.get(unit, 1) / 2**30
    except ValueError:
        return None


def alloc_gib(low_line: str) -> float | None:
    """GiB of ``Tried to allocate <n> <unit>`` in a lower-cased line (may be negative or absurd), else None."""
    m = _ALLOC_RX.search(low_line)
    if not m:
        return None
    return _size_gib(m.group(1), m.group(2))


def total_gib(text: str) -> float | None:
    """GiB of the device's ``total capacity`` in lower-cased text, else None."""
    for rx in _TOTAL_RXS:
        m = rx.search(text)
        if m:
            return _size_gib(m.group(1), m.group(2))
    return None


def zero_total(low_line: str) -> bool:
    """``Free memory on device (0.0/0.0 GiB)``: the device reports no memory at all (not visible / not mounted)."""
    m = _FREE_TOTAL_RX.search(low_line)
    return m is not None and float(m.group(2)) <= 0


def nonsense(text: str) -> str | None:
    """Why an OOM message makes no physical sense, or ``None``: ``impossible-allocation`` (a size >= 1 TiB, negative,
    or larger than the device's own total capacity: a corrupted shape, not memory pressure) or
    ``device-unavailable`` (the device reports 0 bytes total: it is not visible or not mounted)."""
    gib = alloc_gib(text)
    if gib is not None and (gib >= IMPOSSIBLE_ALLOC_GIB or gib < 0):
        return "impossible-allocation"
    total = total_gib(text)
    if total is not None:
        if total <= 0:
            return "device-unavailable"
        if gib is not None and gib > total:
            return "impossible-allocation"
    return None


# --------------------------------------------------------------------------- nodes


def node(log: Log, i: int, radius: int = 40) -> str | None:
    """IP of the node a hit comes from: its Ray prefix, else the nearest ``ip=``/``IP:`` text."""
    if i in log.ips:
        return log.ips[i]
    for d in range(0, radius):
        for j in (i - d, i + d):
            if 0 <= j < len(log.lines):
                if j in log.ips:
                    return log.ips[j]
                m = _IP_RX.search(log.low_line(j))
                if m:
                    return m.group(1)
    return None


def ray_oom_node(log: Log, i: int) -> str | None:
    """The node IP of Ray's memory monitor message (``Memory on the node (IP: a.b.c.d, ...``) near line ``i``."""
    for j in range(max(0, i - 2), min(len(log.lines), i + 4)):
        m = re.search(r"memory on the node \(ip: ?([0-9a-f.:]+)", log.low_line(j))
        if m:
            return m.group(1)
    return None
