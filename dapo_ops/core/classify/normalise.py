"""Log normalisation for the failure classifier (:mod:`dapo_ops.core.classify`): ANSI codes, Ray / rank prefixes,
boilerplate, echo lines, and :class:`Log` (the normalised tail with a lower-cased copy).

STDLIB ONLY (shipped into the training container with the classifier).
The ANSI regex here is wider than ``dapo_ops.core.logformat.ANSI_RE`` (CSI with a letter final only): it also
removes OSC sequences (terminal hyperlinks ``ESC ] 8;; url BEL``) and two-character escapes, so that error
text wrapped in them still matches a signature.
Facts: Ray prefixes (the grammar's, ``dapo_ops.core.logformat.RAY_PREFIX_RE``) and dedup suffixes
(``ray/_private/log_monitor.py``), Ray's OOM advice text
(``ray/exceptions.py``), Hydra's override echo (``hydra/_internal/utils.py``).
"""

from __future__ import annotations

import bisect
import re

from dapo_ops.core import logformat

_ANSI_RX = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
# Ray / rank prefixes: THE log grammar's (dapo_ops/core/logformat.py): (WorkerDict pid=123[, ip=...]), the
# nameless (pid=123) of tasks and (raylet[, ip=...]); [rank0]: / [rank-1]:
_RAY_PREFIX_RX = logformat.RAY_PREFIX_RE
_RANK_PREFIX_RX = logformat.RANK_PREFIX_RE
# Boilerplate removed from inside lines before any matching (ray/_private/..., ray/exceptions.py).
# (needle, regex): the regex runs only when the needle occurs (each starts with a literal: fast scan).
_BOILERPLATE = (
    (" across cluster]", re.compile(r" ?\[repeated \d+x across cluster\]")),
    ("(Ray deduplicates logs", re.compile(r" ?\(Ray deduplicates logs by default\.[^\n]*")),
    (
        "potential root causes",
        re.compile(r"There are some potential root causes\.[^\n]*?(?:unexpected errors\.|$)", re.MULTILINE),
    ),
    # (newer Ray's wording of the same list, verl-project/verl#4921: "Some common causes include: (1) the process
    # was killed by the OOM killer due to high memory usage, (2) ray stop --force was called, or (3) the worker
    # crashed unexpectedly due to SIGSEGV or another unexpected error.")
    (
        "Some common causes include",
        re.compile(
            r"Some common causes include: \(1\) the process was killed by the OOM "
            r"killer[^\n]*?(?:another unexpected error\.|$)",
            re.MULTILINE,
        ),
    ),
    (
        "by OOM killer due to high memory",
        re.compile(
            r"\(1\) The process is killed by SIGKILL by OOM killer due to "
            r"high memory usage\.[^\n]*"
        ),
    ),
    (
        "how to address the out of memory",
        re.compile(
            r"Refer to the documentation on how to address the out of "
            r"memory issue[^\n]*"
        ),
    ),
    ("To adjust the kill threshold", re.compile(r"To adjust the kill threshold, set the environment variable[^\n]*")),
)


def _strip_boilerplate(text: str) -> str:
    if "\x1b" in text:
        text = _ANSI_RX.sub("", text)
    for needle, rx in _BOILERPLATE:
        if needle in text:
            text = rx.sub("", text)
    return text


_ATTEMPT_START_RX = re.compile(r"^===== dapo-ops attempt \d+ start .*$", re.MULTILINE)


class Log:
    """The normalised tail of the last attempt: lines, their Ray prefix facts and a lower-cased copy.

    Attributes:
        lines: the lines with Ray ``(Name pid=N, ip=...)`` and ``[rankN]:`` prefixes, ANSI codes and
            boilerplate removed (``\r`` splits lines: tqdm redraws).
        text: ``"\n".join(lines)`` (original case); ``low``: its lower-cased copy, same offsets.
        starts: offset in ``text`` / ``low`` of each line's first character.
        names / ips: line index -> the Ray actor name / node IP of its prefix.
        scan_low / scan_starts / scan_idx: ``low`` without the metrics and progress lines (what the signature
            scan reads), its line offsets and the map back to line indices (``None``: nothing removed).
    """

    __slots__ = ("lines", "text", "starts", "low", "names", "ips", "_echo", "scan_low", "scan_starts", "scan_idx")

    def __init__(self, text: str):
        m = None
        for m in _ATTEMPT_START_RX.finditer(text):
            pass
        if m is not None:  # one train.log spans attempts: judge only the last one
            text = text[m.start() :]
        text = _strip_boilerplate(text)
        raw = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        lines: list[str] = []
        names: dict[int, str] = {}
        ips: dict[int, str] = {}
        for i, line in enumerate(raw):
            if line.startswith(("(", " (", "[rank")):
                pm = _RAY_PREFIX_RX.match(line)
                if pm:
                    if pm.group("name"):
                        names[i] = pm.group("name")
                    elif pm.group("pid") is None:
                        names[i] = "raylet"  # (raylet): the node's log monitor; a nameless (pid=N) has no actor
                    if pm.group("ip"):
                        ips[i] = pm.group("ip")
                    line = line[pm.end() :]
                    if line.startswith("("):  # nested: (vLLMHttpServer pid=1) (Worker pid=2) ...; keep the outer name
                        pm2 = _RAY_PREFIX_RX.match(line)
                        if pm2:
                            line = line[pm2.end() :]
                rm = _RANK_PREFIX_RX.match(line)
                if rm:
                    line = line[rm.end() :]
            lines.append(line)
        self.lines = lines
        self.names = names
        self.ips = ips
        joined = "\n".join(lines)
        self.text = joined
        low = joined.replace("\u0130", "I").lower()
        if len(low) != len(joined):  # pragma: no cover - exotic case folding
            low = "".join(c.lower() if len(c.lower()) == 1 else c for c in joined)
        self.low = low
        starts = [0] * len(lines)
        pos = 0
        for i, line in enumerate(lines):
            starts[i] = pos
            pos += len(line) + 1
        self.starts = starts
        self._echo: dict[int, bool] = {}
        # Signature scans skip metrics lines and progress bars (the bulk of a long run's tail; they never
        # carry an error): scan_low holds the other lines, scan_idx maps them back.
        keep = [i for i, ln in enumerate(lines) if not ln.startswith(_PROGRESS_STARTS)]
        if len(keep) == len(lines):
            self.scan_low, self.scan_starts, self.scan_idx = low, starts, None
        else:
            parts = [self.low_line(i) for i in keep]
            self.scan_low = "\n".join(parts)
            ss = [0] * len(parts)
            pos = 0
            for k, part in enumerate(parts):
                ss[k] = pos
                pos += len(part) + 1
            self.scan_starts, self.scan_idx = ss, keep

    def line_of(self, offset: int) -> int:
        return bisect.bisect_right(self.starts, offset) - 1

    def low_line(self, i: int) -> str:
        s = self.starts[i]
        return self.low[s : s + len(self.lines[i])]

    def is_echo(self, i: int) -> bool:
        v = self._echo.get(i)
        if v is None:
            v = is_echo_text(self.lines[i])
            self._echo[i] = v
        return v


_PROGRESS_STARTS = ("step:", "Training Progress:")
_PPRINT_RX = re.compile(r"^[\[{(\s]*'[^'\n]{1,160}'\s*:\s")
MEM_TABLE_ROW_RX = re.compile(r"^\d+\s+\d+(?:\.\d+)?\s+\S")
KILLED_RX = re.compile(r"^(?:\S+: line \d+:\s+)?(?:\d+\s+)?Killed(?:\s{2,}|\s*$)")
_ECHO_STARTS = (  # lower case
    "error executing job with overrides",
    "+ ",
    "++ ",
    "+++ ",
    "set the environment variable hydra_full_error",
    "ray init kwargs:",
    "kwargs: {",
    "to append to your config use",
    "model config after override",
)


def is_echo_text(line: str) -> bool:
    """True for lines that only echo configuration or commands (never evidence): Hydra's override
    list, ``+ cmd`` shell traces (``set -x``), the pprinted config, Ray's memory-users table rows,
    the shell's ``Killed  <command line>`` report (matched separately for oom-host)."""
    t = line.lstrip()
    if t[:40].lower().startswith(_ECHO_STARTS):
        return True
    if _PPRINT_RX.match(t) or MEM_TABLE_ROW_RX.match(t):
        return True
    if KILLED_RX.match(t):  # the shell's "Killed  python3 -m verl ... <overrides>"
        return True
    return False


def normalise_line(line: str) -> str:
    line = _strip_boilerplate(line)
    for _ in range(2):
        pm = _RAY_PREFIX_RX.match(line)
        if not pm:
            break
        line = line[pm.end() :]
    rm = _RANK_PREFIX_RX.match(line)
    if rm:
        line = line[rm.end() :]
    return line
