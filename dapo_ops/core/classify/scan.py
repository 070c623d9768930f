"""The signature scan of the failure classifier (:mod:`dapo_ops.core.classify`): every signature hit in a
normalised tail, and the cheap per-line device-OOM check the supervisor runs on each new log line.

STDLIB ONLY. Candidate lines are found with ``str.find`` on each signature's needles (C speed over the whole tail);
the signature's regex then runs on those lines only, so cost grows with matching lines, not bytes
(``bench/classify.py`` measures it).
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from dapo_ops.core.classify.facts import nonsense
from dapo_ops.core.classify.normalise import Log, is_echo_text, normalise_line
from dapo_ops.core.classify.signatures import DEVICE_OOM_NEEDLES, DEVICE_OOM_RX, SIGNATURES, WARNING_LINE_RX
from dapo_ops.core.classify.sigtable import Sig


@dataclass
class Hit:
    """One signature match: the signature, the line index (into ``Log.lines``) and the match on that lower-cased
    line (its groups carry the numbers and keys the verdict reads)."""

    sig: Sig
    line: int
    m: re.Match[str]


def scan(log: Log) -> list[Hit]:
    """All signature hits on non-echo lines, in line order.

    Candidate lines are found with ``str.find`` on the needles (C speed over the whole tail); the
    signature's regex then runs on those lines only, so cost grows with matching lines, not bytes.
    """
    low = log.scan_low
    starts = log.scan_starts
    idx = log.scan_idx
    nlines = len(starts)
    hits: list[Hit] = []
    found: dict[str | re.Pattern[str], set[int]] = {}
    for sig in SIGNATURES:
        cand: set[int] = set()
        if sig.finder is not None:
            got = found.get(sig.finder)
            if got is None:
                got = found[sig.finder] = {bisect.bisect_right(starts, m.start()) - 1 for m in sig.finder.finditer(low)}
            cand |= {idx[k] for k in got} if idx is not None else got
        for needle in sig.needles:
            lines = found.get(needle)
            if lines is None:  # each needle is searched once per tail, however many signatures share it
                lines = found[needle] = set()
                pos = low.find(needle)
                while pos >= 0:
                    k = bisect.bisect_right(starts, pos) - 1
                    lines.add(idx[k] if idx is not None else k)
                    if k + 1 >= nlines:
                        break
                    pos = low.find(needle, starts[k + 1])
            cand |= lines
        for i in sorted(cand):
            m = sig.rx.search(log.low_line(i))
            if m is None or log.is_echo(i):
                continue
            if sig.cls == "oom-device" and WARNING_LINE_RX.match(log.low_line(i)):
                continue  # "... may cause CUDA out of memory" in a WARNING is advice, not an OOM
            hits.append(Hit(sig, i, m))
    hits.sort(key=lambda h: h.line)
    return hits


def is_device_oom_line(line: str) -> bool:
    """Cheap check the supervisor runs on every new log line: does it report a device OOM?

    True for torch / torch_npu device-OOM messages (``CUDA out of memory``, ``NPU out of
    memory``, torch_npu ``ERR<nn>006`` memory codes, CANN ``EL0004``), after stripping ANSI
    codes and the Ray prefix. False for config echoes (Hydra override lists, ``+ cmd``
    traces, pprinted config), Ray's OOM-killer / advice boilerplate, Ray's host-memory
    ``OutOfMemoryError`` and impossible (corrupted) allocation sizes. True means "stop
    waiting and classify the tail now": it does not decide training vs rollout KV cache.
    """
    if not line:
        return False
    low = line.lower()
    if not any(n in low for n in DEVICE_OOM_NEEDLES):
        return False
    s = normalise_line(line)
    if is_echo_text(s):
        return False
    sl = s.lower()
    if not DEVICE_OOM_RX.search(sl) or WARNING_LINE_RX.match(sl):
        return False
    return nonsense(sl) is None
