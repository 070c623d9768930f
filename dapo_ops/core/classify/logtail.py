"""What a log tail says, as the failure classifier reads it (:mod:`dapo_ops.core.classify`): the normalised tail,
its signature hits and its facts.

The tail normalised (:class:`Log`), the signature hits in it (:func:`scan`), the cheap per-line device-OOM check the
supervisor runs on each new log line (:func:`is_device_oom_line`), and its facts apart from signatures and phases
(:func:`read_facts`: the last step, the planned total, the completion markers, the exit code, the newest checkpoint
step; allocation and capacity sizes in GiB, the failing node's IP, the shell's ``Killed`` line). Which phase an
error happened in is ``dapo_ops/core/classify/phase.py``; which hit is the verdict is
``dapo_ops/core/classify/decide.py``.

STDLIB ONLY (shipped into the training container with the classifier).

Normalisation: ANSI codes, Ray / rank prefixes, boilerplate, echo lines. ANSI codes are the grammar's
``dapo_ops.core.logformat.ANSI_RE`` (CSI, OSC hyperlinks ``ESC ] 8;; url BEL``, two-character escapes, and a CSI whose
ESC a syslog copy wrote as ``#033``), so that error text wrapped in them still matches a signature. Ray prefixes (the grammar's, ``dapo_ops.core.logformat.RAY_PREFIX_RE``) and dedup suffixes
(``ray/_private/log_monitor.py``), Ray's OOM advice text (``ray/exceptions.py``), Hydra's override echo
(``hydra/_internal/utils.py``).

The scan: candidate lines are found with ``str.find`` on each signature's needles (C speed over the whole tail);
the signature's regex then runs on those lines only, so cost grows with matching lines, not bytes
(``bench/classify.py`` measures it).

Fact line formats: verl 0.9.1 ``verl/utils/logger/aggregate_logger.py`` (``step:N - k:v`` metrics lines),
``verl/trainer/ppo/v1/trainer_base.py`` (:451 the ``Training Progress`` tqdm bar, :525 ``Final validation metrics``,
:772 ``Total training steps: N``; the same in ``verl/trainer/ppo/ray_trainer.py``), the sandbox stand-in's
``total time: N seconds`` last line (``sandbox/verl_standin/verl/_standin/trainer.py``), torch
``c10/cuda/CUDACachingAllocator.cpp`` and torch_npu (``Tried to allocate``, ``total capacity``), vLLM
``vllm/v1/worker/utils.py`` (``Free memory on device (a/b GiB)``). ``Total training steps: N`` is read with the
one grammar, :data:`dapo_ops.core.logformat.TOTAL_RE`.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from dapo_ops.core import logformat
from dapo_ops.core.classify.signatures import (
    DEVICE_OOM_NEEDLES,
    DEVICE_OOM_RX,
    ROOT,
    SIGNATURES,
    WARNING_LINE_RX,
    Sig,
)
from dapo_ops.core.classify.verdict import IMPOSSIBLE_ALLOC_GIB

# --------------------------------------------------------------------------- the normalised tail

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
    text = logformat.strip_ansi(text)
    for needle, rx in _BOILERPLATE:
        if needle in text:
            text = rx.sub("", text)
    return text


def _take_ray_prefixes(line: str, i: int, names: dict[int, str], ips: dict[int, str]) -> str:
    """``line`` without its Ray prefixes (up to two), their facts recorded for line ``i``: the actor name and node
    IP. Nested prefixes (a worker's output forwarded by its parent actor, ``(vLLMHttpServer pid=1) (Worker_TP0
    pid=2)``, ``(WorkerDict pid=1) (VllmWorkerProcess pid=2)``) record the INNER prefix's facts where it has
    them: the inner one is the process that printed the line (what :func:`~dapo_ops.core.classify.phase.side_of`
    asks: a vLLM worker behind a WorkerDict is the rollout engine), the outer one only forwarded it."""
    for _ in range(2):
        pm = _RAY_PREFIX_RX.match(line)
        if not pm:
            break
        if pm.group("name"):
            names[i] = pm.group("name")
        elif pm.group("pid") is None:
            names[i] = "raylet"  # (raylet): the node's log monitor; a nameless (pid=N) has no actor
        if pm.group("ip"):
            ips[i] = pm.group("ip")
        line = line[pm.end() :]
        if not line.startswith("("):
            break
    return line


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
                line = _take_ray_prefixes(line, i, names, ips)
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


# --------------------------------------------------------------------------- facts

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
#: trainer.total_epochs in the config verl pprints at start (verl/trainer/main_ppo.py:144)
_EPOCHS_RX = re.compile(r"'total_epochs': (\d+)")
#: the step's epoch, 0-based (training/epoch: ``(global_steps - 1) // steps_per_epoch``, trainer_base.py:522)
_EPOCH_RX = re.compile(r"(?<![\w/])training/epoch:(\d+)")
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
    epochs: int | None = None  # trainer.total_epochs: verl's config echo 'total_epochs': N, else last epoch + 1
    resumed: int | None = None  # the step a resumed attempt continues from (logformat.RESUME_RE)


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
    m = _last(logformat.RESUME_RE, log.text, "lobal step")
    if m:
        f.resumed = int(m.group(1) or m.group(2))
    m = _last(_EPOCHS_RX, low, "'total_epochs': ")
    if m:
        f.epochs = int(m.group(1))
    elif f.step_line >= 0:  # the config echo left the tail: the last step's own epoch (0-based) + 1
        m = _EPOCH_RX.search(log.low_line(f.step_line))
        if m:
            f.epochs = int(m.group(1)) + 1
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


# --------------------------------------------------------------------------- the signature scan


@dataclass
class Hit:
    """One signature match: the signature, the line index (into ``Log.lines``) and the match on that lower-cased
    line (its groups carry the numbers and keys the verdict reads)."""

    sig: Sig
    line: int
    m: re.Match[str]


#: a Python traceback frame line, lower-cased: ``  File "<path>", line <n>, in <function>`` (group 1: the blanks
#: before ``File``, so a Ray / vLLM logger prefix before them is kept apart)
_FRAME_RX = re.compile(r'(\s*)file "[^"\n]*", line \d+')
#: how far after a frame's hit its exception line is looked for (:func:`traceback_line`, :func:`scan`)
_EXCEPTION_AFTER = 30


def traceback_line(log: Log, i: int) -> bool:
    """Line ``i`` is a traceback frame's own text, never what went wrong: its ``File "...", line N, in f`` line or
    the source line Python prints under it, indented past the frame (``    raise UsageError("api_key not configured
    (no-tty). ...")``, ``    raise texts.fake_exc(...)``); the exception line (``wandb.errors.UsageError: ...``) is
    not, nor a line after a frame without source (``File "<frozen os>", line 225, in makedirs`` then
    ``PermissionError: ...``). Lines of another logger prefix than the frame's are not its source."""
    ll = log.low_line(i)
    if _FRAME_RX.search(ll):
        return True
    m = _FRAME_RX.search(log.low_line(i - 1)) if i > 0 else None
    if m is None:
        return False
    prev = log.low_line(i - 1)
    p = m.start(1)  # where the previous line's logger prefix ends
    if ll[:p] != prev[:p]:
        return False
    rest = ll[p:]
    return len(rest) - len(rest.lstrip(" ")) > m.end(1) - p


def _off_frames(log: Log, hits: list[Hit]) -> list[Hit]:
    """``hits`` less those on a traceback frame or its source line (:func:`traceback_line`) where the same signature
    hits a line within :data:`_EXCEPTION_AFTER` after it that is neither: the exception line says what went wrong
    and is what a verdict quotes (a new user's run.json quoted ``raise texts.fake_exc(...)``; real tracebacks print
    ``raise UsageError("api_key not configured (no-tty) ...")`` / ``raise ProxyError(e, request=request)`` above the
    exception line). A hit with no such line after it stays."""
    lines: dict[str, list[int]] = {}
    for h in hits:
        lines.setdefault(h.sig.name, []).append(h.line)
    frame: dict[int, bool] = {}

    def tb(i: int) -> bool:
        if i not in frame:
            frame[i] = traceback_line(log, i)
        return frame[i]

    return [
        h
        for h in hits
        if not (tb(h.line) and any(h.line < j <= h.line + _EXCEPTION_AFTER and not tb(j) for j in lines[h.sig.name]))
    ]


def scan(log: Log) -> list[Hit]:
    """All signature hits on non-echo lines, in line order; a hit on a traceback frame or its source line gives way
    to the same signature's hit on the exception line after it (:func:`_off_frames`).

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
    return _off_frames(log, hits)


#: signatures that never call a live fatal repeat (:func:`fatal_signature`): a device OOM has its own live path (the
#: supervisor's OOM line, ``oom_grace_s``); the rows :func:`dapo_ops.core.classify.decide.decide` itself distrusts on
#: their own: a caught import (``missing-module``), numpy 2's banner (``numpy-abi``), the reward dispatcher's bare
#: errors (``reward-source``, only under its frame) and a device code beside an OOM or a collective (``kernel-fault``)
LIVE_EXCLUDED = ("missing-module", "numpy-abi", "reward-source", "kernel-fault", "verl-check")
#: the fatal root-cause signatures a live line is checked against, and one regex of all their needles (one search
#: per line finds the candidates, as :func:`scan` does per tail)
_LIVE_SIGS = tuple(
    s for s in SIGNATURES if s.fatal and s.tier == ROOT and s.cls != "oom-device" and s.name not in LIVE_EXCLUDED
)
_LIVE_NEEDLES_RX = re.compile(
    "|".join(sorted({re.escape(n) for s in _LIVE_SIGS for n in s.needles}, key=len, reverse=True))
    + "".join("|" + f.pattern for f in {s.finder for s in _LIVE_SIGS if s.finder is not None})
)


def _live_match(sig: Sig, low: str) -> bool:
    """``sig`` matches the lower-cased line ``low`` (its needles or its finder first, as :func:`scan`)."""
    if not any(n in low for n in sig.needles) and (sig.finder is None or sig.finder.search(low) is None):
        return False
    return sig.rx.search(low) is not None


def fatal_signature(line: str) -> Sig | None:
    """The fatal root-cause signature (tier ``ROOT``, ``fatal``: the classifier's own table,
    ``dapo_ops/core/classify/signatures.py``) one raw log line matches, or None: the check the supervisor runs on
    every new line to count a fatal error that keeps coming back while verl runs (:mod:`.storm`). ANSI codes, the
    Ray / rank prefix and boilerplate are stripped; echo lines (overrides, ``+ cmd``, the printed config) never
    match; :data:`LIVE_EXCLUDED` rows and device OOMs are left to their own paths. Whether a match is the verdict
    stays :func:`dapo_ops.core.classify.decide.decide`'s, over the whole log. About 15 us a line (one regex of all
    the needles finds the few candidate lines)."""
    if not line or _LIVE_NEEDLES_RX.search(line.lower()) is None:
        return None
    s = normalise_line(logformat.strip_ansi(line))
    if is_echo_text(s):
        return None
    low = s.lower()
    # a traceback's frame line (_FRAME_RX) or the ``raise`` statement under it: one error's traceback holds both and
    # its exception line, and the live count (:mod:`.storm`) took them for two errors
    if _FRAME_RX.match(low) or _RAISE_RX.match(low):
        return None
    return next((sig for sig in _LIVE_SIGS if _live_match(sig, low)), None)


#: the ``raise`` statement Python prints under a traceback frame (:func:`fatal_signature`; :func:`traceback_line`
#: tells it by its frame when the lines around it are at hand)
_RAISE_RX = re.compile(r"\s+raise\b")


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
