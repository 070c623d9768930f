"""CANN plog error lines (STDLIB ONLY, shipped): what a multi-host run's evidence takes from each NPU host's
``~/ascend/log/`` (``debug/plog/plog-<pid>_<time>.log``, ``run/plog/``; ``/root/ascend/log/debug/plog/`` in a
root container), and the rank an error line names.

The line format is CANN's slog (``ASCEND_PROCESS_LOG_PATH`` / ``ASCEND_SLOG_PRINT_TO_STDOUT``; the same text torch_npu
and HCCL print to stdout when the log goes there)::

    [ERROR] HCCL(60570,python):2025-12-04-14:46:07.911.312 [hccl_socket.cc:106] [60570][HcclSocket][Listen] ...
     level  module(pid,proc): date-time.ms.us               [file:line]          message

(public reports quoting it: vllm-project/vllm-ascend#4725 (HCCL listen port in use), the visible-devices report in
tests/cases/variants/v-config-visible-devices-npu-set-visible-device-failed.log (RUNTIME / ASCENDCL),
vllm-project/vllm-ascend#3413 (EI0002 notify wait, ``RankID``, ``remote rank``), Ascend/pytorch#43 (EH9999
task timeout); tests/test_plog.py holds the samples with their sources). Only ``[ERROR]`` lines count: CANN's
``[WARNING]`` / ``[EVENT]`` / ``[INFO]`` lines are routine.

Ranks: a line's own rank is ``RankID:N`` (torch_npu's PTA lines), ``[Rank N]`` / ``[rankN]:`` (the process group
watchdog), ``userRank[N]`` / ``localRank[N]`` / ``rank[N]`` (HCCL). ``remote rank[N]`` / ``remote rank: [N]`` is the
rank it waited for, never its own (:func:`rank_of` skips it; :func:`remote_rank_of` reads it).
"""

from __future__ import annotations

import calendar
import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional

#: one slog line: level, module, pid, process name, time, source file:line, message
LINE_RE = re.compile(
    r"^\s*\[(?P<level>ERROR|WARNING|INFO|DEBUG|EVENT|TRACE)\]\s+(?P<module>[A-Z_][A-Z0-9_]*)"
    r"\((?P<pid>\d+),(?P<proc>[^)]*)\):\s*(?P<time>\d{4}-\d{2}-\d{2}-\d{2}:\d{2}:\d{2})\.(?P<ms>\d{1,3})\.(?P<us>\d{1,3})"
    r"\s*(?:\[(?P<where>[^\]\s]+:\d+)\])?\s*(?P<msg>.*)$"
)
#: torch_npu's own error line (PTA): ``[ERROR] 2025-10-11-15:09:34 (PID:2969, Device:0, RankID:101) ERR00100 ...``
PTA_RE = re.compile(
    r"^\s*\[(?P<level>ERROR)\]\s+(?P<time>\d{4}-\d{2}-\d{2}-\d{2}:\d{2}:\d{2})\s+"
    r"\(PID:(?P<pid>\d+),\s*Device:(?P<device>-?\d+),\s*RankID:(?P<rank>-?\d+)\)\s*(?P<msg>.*)$"
)
#: the plog directories the collector looks in (``~`` expanded by it), first the user's, then root's
PLOG_DIRS = (
    "~/ascend/log/debug/plog",
    "~/ascend/log/run/plog",
    "/root/ascend/log/debug/plog",
    "/root/ascend/log/run/plog",
)

_OWN_RANK_RXS = (
    re.compile(r"\bRankID:\s*(\d+)"),
    re.compile(r"\[Rank (\d+)\]"),
    re.compile(r"\[rank(\d+)\]:"),
    re.compile(r"(?<!remote )\b(?:userRank|localRank|rankId|rank)\s*[\[:=]\s*\[?(\d+)", re.IGNORECASE),
)
_REMOTE_RANK_RX = re.compile(r"remote rank\s*:?\s*\[?\s*(\d+)", re.IGNORECASE)


def parse_line(line: str) -> "Optional[Dict[str, Any]]":
    """One slog line as ``{"level", "module", "pid" (int), "proc", "time" ("YYYY-MM-DD-HH:MM:SS.mmm.uuu"), "ts"
    (seconds since the epoch, the line's clock read as UTC: for ordering lines of hosts whose clocks agree),
    "where" (file:line or None), "msg", "rank" (int or None), "remote_rank" (int or None)}``; None for any other
    line (Ray's ``(WorkerDict pid=.., ip=..)`` prefix is tolerated in front)."""
    s = line.rstrip("\n")
    if s.startswith("(") and ") [" in s:  # a Ray worker prefix: the plog text printed to stdout
        s = s.split(") ", 1)[1]
    m = LINE_RE.match(s)
    if not m:
        m = PTA_RE.match(s)
        if not m:
            return None
        msg = m.group("msg").strip()
        ts = _epoch(m.group("time"))
        return (
            None
            if ts is None
            else {
                "level": "ERROR",
                "module": "PTA",
                "pid": int(m.group("pid")),
                "proc": "",
                "time": m.group("time"),
                "ts": ts,
                "where": None,
                "msg": msg,
                "rank": int(m.group("rank")),
                "remote_rank": remote_rank_of(msg),
            }
        )
    d = m.group("time")
    ts = _epoch(d)
    if ts is None:
        return None
    ts += int(m.group("ms")) / 1e3 + int(m.group("us")) / 1e6
    msg = m.group("msg").strip()
    return {
        "level": m.group("level"),
        "module": m.group("module"),
        "pid": int(m.group("pid")),
        "proc": m.group("proc"),
        "time": "%s.%s.%s" % (d, m.group("ms"), m.group("us")),
        "ts": round(ts, 6),
        "where": m.group("where"),
        "msg": msg,
        "rank": rank_of(msg),
        "remote_rank": remote_rank_of(msg),
    }


def _epoch(d: str) -> "Optional[float]":
    """``YYYY-MM-DD-HH:MM:SS`` read as UTC, in seconds since the epoch; None when it is no date."""
    try:
        return float(
            calendar.timegm(
                (int(d[0:4]), int(d[5:7]), int(d[8:10]), int(d[11:13]), int(d[14:16]), int(d[17:19]), 0, 0, 0)
            )
        )
    except (ValueError, IndexError):
        return None


def rank_of(text: str) -> "Optional[int]":
    """The rank a line says it is (its own: ``RankID:N``, ``[Rank N]``, ``[rankN]:``, ``userRank[N]``, ``rank[N]``),
    never the ``remote rank`` it waited for; None when it names none."""
    cleaned = _REMOTE_RANK_RX.sub(" ", text or "")
    for rx in _OWN_RANK_RXS:
        m = rx.search(cleaned)
        if m:
            return int(m.group(1))
    return None


def remote_rank_of(text: str) -> "Optional[int]":
    """The rank an HCCL wait names as the one it did not hear from (``remote rank: [24]``), or None."""
    m = _REMOTE_RANK_RX.search(text or "")
    return int(m.group(1)) if m else None


def error_lines(text: str, limit: int = 50) -> "List[Dict[str, Any]]":
    """The ``[ERROR]`` lines of a plog text (:func:`parse_line` dicts plus ``line``: the text as written), oldest
    first, at most ``limit``: the first ``limit - 10`` and the last 10 (a storm of one line keeps its start and end;
    ``skipped`` on the last kept entry counts what is left out). An error line that names no rank takes the rank an
    earlier line of the same pid named (HCCL's ``[HcclComm][Init] rankSize[16], userRank[9]`` INFO line names it
    once; its error lines do not), marked ``rank_from: "pid"``."""
    out: List[Dict[str, Any]] = []
    ranks: Dict[int, int] = {}
    for raw in (text or "").splitlines():
        if "]" not in raw or "(" not in raw:
            continue
        p = parse_line(raw)
        if p is None:
            continue
        if p["rank"] is not None:
            ranks[p["pid"]] = p["rank"]
        if p["level"] == "ERROR":
            if p["rank"] is None and p["pid"] in ranks:
                p["rank"], p["rank_from"] = ranks[p["pid"]], "pid"
            p["line"] = raw.strip()
            out.append(p)
    out.sort(key=lambda e: e["ts"])
    if len(out) > limit:
        head, tail = out[: max(0, limit - 10)], out[-10:]
        tail[-1] = dict(tail[-1], skipped=len(out) - len(head) - len(tail))
        out = head + tail
    return out
