"""Multi-host evidence: which host and rank erred first (STDLIB ONLY, shipped).

Input: per host, what its collector found (:mod:`dapo_ops.agent.evidence`): the tails of its Ray worker logs
(``{"name", "text", "mtime"}``: Python tracebacks carry no time of their own, so a tail is dated by its file's last
write) and its CANN plog ``[ERROR]`` lines (:func:`dapo_ops.core.plog.error_lines`: each with its own time and
rank). Output: the earliest error under the classifier's root-cause rule (:mod:`dapo_ops.core.classify.decide`,
used for one host's log): a specific root cause on any rank beats a collective symptom (an HCCL/NCCL timeout is
what the other ranks print while they wait for the one that failed), which beats a bare traceback / exit; inside a
tier the earliest time wins. Host clocks are compared as they are (NTP-synced cluster nodes).
"""

from __future__ import annotations

from dapo_ops.core import plog
from dapo_ops.core.classify import classify

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional

#: tiers, best first: a specific root cause, a collective symptom, anything else that is an error
ROOT, COLLECTIVE, OTHER = "root-cause", "collective", "other"
_TIER_ORDER = {ROOT: 0, COLLECTIVE: 1, OTHER: 2}
_COLLECTIVE_CLASSES = ("hccl-timeout",)


def _tier(cls: str, inconclusive: bool) -> str:
    if cls in _COLLECTIVE_CLASSES:
        return COLLECTIVE
    if cls in ("success",) or inconclusive:
        return OTHER
    return ROOT if cls != "crash-other" else OTHER


def findings(host: str, found: "Dict[str, Any]") -> "List[Dict[str, Any]]":
    """The errors one host's collector found, each ``{"host", "rank" (int or None), "ts" (seconds), "time" (text),
    "source" (file name), "line" (the error line), "cls" (the classifier's class), "tier"}``. A plog line is judged
    alone; a Ray worker log tail is judged whole (its verdict's first evidence line, dated by its own time when it
    is a plog / torch_npu line, else by the file's mtime: the mtime alone could place it before the plog line of the
    same error and leave the verdict's line without a time, a fresh-clone CI run of 2026-12-07)."""
    out: List[Dict[str, Any]] = []
    for e in found.get("plog") or []:
        v = classify(e.get("line") or e.get("msg") or "")
        d = v.detail or {}
        out.append(
            {
                "host": host,
                "rank": e.get("rank"),
                "ts": float(e.get("ts") or 0.0),
                "time": e.get("time"),
                "source": e.get("file") or "plog",
                "line": e.get("line") or e.get("msg"),
                "cls": v.cls,
                "tier": _tier(v.cls, bool(d.get("inconclusive")) or v.cls == "crash-other"),
            }
        )
    for lg in found.get("ray_logs") or []:
        text = lg.get("text") or ""
        v = classify(text)
        d = v.detail or {}
        if v.cls == "success" or d.get("inconclusive"):
            continue
        line = (v.evidence or [""])[0]
        rank = plog.rank_of(line)
        if rank is None:
            for ln in text.splitlines():
                rank = plog.rank_of(ln)
                if rank is not None:
                    break
        dated = plog.parse_line(line)  # torch_npu's own line carries its time: "[ERROR] 2026-12-07-02:26:18 (PID:..."
        out.append(
            {
                "host": host,
                "rank": rank,
                "ts": float(dated["ts"]) if dated else float(lg.get("mtime") or 0.0),
                "time": dated["time"] if dated else None,
                "source": lg.get("name"),
                "line": line,
                "cls": v.cls,
                "tier": _tier(v.cls, False),
            }
        )
    return out


def earliest(by_host: "Dict[str, Dict[str, Any]]") -> "Optional[Dict[str, Any]]":
    """The error the run's verdict names across hosts (``by_host``: ``{host: collector dict}``): the best tier,
    then the earliest time (ties: the host order given). None when no host found an error."""
    best = None
    for order, (host, found) in enumerate(by_host.items()):
        for f in findings(host, found or {}):
            key = (_TIER_ORDER[f["tier"]], f["ts"], order)
            if best is None or key < best[0]:
                best = (key, f)
    return best[1] if best else None


def summary_line(err: "Optional[Dict[str, Any]]", lost: "List[str]") -> str:
    """One line for the verdict: ``earliest error: host h2 rank 9 at 2025-12-04-14:46:07.911.312 (HCCL ...)``;
    the lost hosts (no evidence) are named."""
    parts = []
    if err:
        rank = "rank %s" % err["rank"] if err.get("rank") is not None else "rank unknown"
        when = " at %s" % err["time"] if err.get("time") else ""
        parts.append(
            "earliest error: host %s %s%s (%s: %s)" % (err["host"], rank, when, err["source"], str(err["line"])[:160])
        )
    if lost:
        parts.append("no evidence from %s (lost: its files stay on that host)" % ", ".join(lost))
    return "; ".join(parts) or "no error found in any host's Ray worker logs or plogs"
