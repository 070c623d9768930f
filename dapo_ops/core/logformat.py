"""The one grammar of verl's training log (stdlib only, shipped): metrics lines, the step total, resume and
checkpoint-save lines, tqdm progress bars, the SwanLab run link, the supervisor's attempt delimiters, and what Ray's
log forwarding adds (ANSI colour codes, ``(<Actor> pid=<pid>[, ip=<ip>])`` prefixes, ``[rank<N>]:`` prefixes).

Every reader of a training log uses these: the supervisor (progress into run.json, ``dapo_ops/agent/supervisor/``),
the status view (``dapo_ops/control/status/rows.py``), the classifier (``dapo_ops/core/classify/``) and the
notifier (``dapo_ops/agent/notify.py``); ``tests/test_log_grammar_golden.py`` checks they agree on the handed cases
and the real logs.

Line formats, as printed by verl 0.9.1 (``/work/verl-src/verl`` is the unpacked wheel):

- metrics: ``step:<N> - <key>:<value> - ...`` (``verl/utils/logger/aggregate_logger.py:26`` ``concat_dict_to_str``;
  values are ``pprint.pformat`` of numbers, numpy-2 reprs ``np.float64(0.12)`` included);
- total: ``Total training steps: <N>`` (``verl/trainer/ppo/v1/trainer_base.py:772``, ``ray_trainer.py:441``);
- resume: ``Resuming from <dir>/global_step_<N>, setting global step to <N>`` (``v1/trainer_base.py:877``),
  classic ``Setting global step to <N>`` + ``Resuming from <dir>/global_step_<N>`` (``ray_trainer.py:1085``);
- save: ``Saving checkpoint to <dir>/global_step_<N>`` (``v1/trainer_base.py:955``),
  ``local_global_step_folder: <dir>/global_step_<N>`` (``ray_trainer.py:991``);
- progress bar: tqdm ``Training Progress:  35%|###| 212/600 [5:41:22<10:24:51, 96.63s/it]``
  (``v1/trainer_base.py:451``; redrawn with ``\\r``, so split lines on ``\\r`` too);
- SwanLab banner: ``swanlab: 🚀 View run <name> at <url>`` (SwanLab ``sdk/internal/run/greeting.py``), see
  :class:`LinkScanner`.

Real logs: ``tests/fixtures/real-verl/`` (8 H200 runs and the tool runs).
"""

from __future__ import annotations

import calendar
import re
from typing import Dict, List, NamedTuple, Optional, Tuple, Union

#: terminal escapes: CSI (colours, cursor moves), OSC (rich's hyperlinks, ended by BEL or ST) and two-byte escapes;
#: a CSI also where a copy wrote its ESC out as text: rsyslog's ``#033`` (``$EscapeControlCharactersOnReceive``,
#: journald forwarded to syslog) or the caret form ``^[`` (``cat -v``, ``less``)
ANSI_RE = re.compile(r"(?:\x1b|#033|\^\[)\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
#: the introducers :data:`ANSI_RE` knows (a cheap test before the regex runs)
ESCAPE_MARKS = ("\x1b", "#033[", "^[[")
#: Ray's log-forwarding prefix (``ray/_private/log_monitor.py``): ``(TaskRunner pid=123)``, ``(pid=123)`` (a task
#: without a name), ``(WorkerDict pid=123, ip=192.0.2.1)``, ``(raylet)``, ``(raylet, ip=...)``
RAY_PREFIX_RE = re.compile(
    r"^\s*\((?:(?:(?P<name>[^()\s=]+) )?pid=(?P<pid>\d+)|raylet)(?:, ip=(?P<ip>[0-9A-Fa-f.:]+))?\)\s?"
)
#: torchrun / accelerate rank prefix: ``[rank0]: ...``, ``[rank-1]: ...``
RANK_PREFIX_RE = re.compile(r"^\[rank-?(?P<rank>\d+)\]:\s?")
#: the start of a metrics line: ``step:N`` not part of a key (``timing_s/step:``, ``training/global_step:``,
#: ``a.step:``, ``pre-step:``) and followed by `` - `` or the line end
STEP_START_RE = re.compile(r"(?<![A-Za-z0-9_/.\-])step:(\d+)(?= - |\s*$)")
NP_WRAP_RE = re.compile(r"^np\.[A-Za-z0-9_]+\((.*)\)$")
TOTAL_RE = re.compile(r"Total training steps:\s*(\d+)", re.IGNORECASE)
RESUME_RE = re.compile(r"(?:Resuming from\s+\S*global_step_(\d+)|Setting global step to\s+(\d+))", re.IGNORECASE)
SAVE_RE = re.compile(r"(?:Saving checkpoint to|local_global_step_folder:)\s+\S*global_step_(\d+)")
SCRATCH_MARK = "Training from scratch"
#: the last line of the driver's failure report (Hydra 1.3 ``hydra/_internal/utils.py`` ``run_and_report``, printed
#: after the traceback of ``main_ppo.main``'s exception when HYDRA_FULL_ERROR is unset): the traceback that tells
#: the phase of a failure (its frames) is in the log once this is (tests/fixtures/real-verl/tool-runs/d-update-oom)
REPORT_END_MARK = "HYDRA_FULL_ERROR=1 for a complete stack trace"
#: tqdm bar: percent, done/total, then (optional) ``[elapsed<remaining, rate]``
PROGRESS_BAR_RE = re.compile(
    r"Training Progress:\s*(\d+)%\|[^|\n]*\|\s*(\d+)/(\d+)(?:\s*\[([^<\]\n]*)<([^,\]\n]*),\s*([^\]\n]*)\])?",
    re.IGNORECASE,
)
#: the supervisor's delimiters in train.log (``dapo_ops/agent/supervisor/``):
#: ``===== dapo-ops attempt <k> start <iso> features=<a,b> =====`` / ``... end exit=<n> class=<cls> =====``
ATTEMPT_RE = re.compile(r"===== dapo-ops attempt (\d+) (start|end)\b(.*?)=====")
#: every line a fact above is read from holds one of these (a cheap pre-filter: most lines of a verl log are worker
#: chatter); a folded SwanLab banner's continuation lines do not, :attr:`LinkScanner.pending` says when to look
#: (case-sensitive, as verl prints them: an IGNORECASE alternation costs ten times as much)
MARKER_RE = re.compile(
    r"step:|Training Progress|===== dapo-ops attempt|swanlab|View run|Total training steps|"
    r"lobal step|global_step_"
)
_LINE_SPLIT_RE = re.compile(r"[\r\n]")
_URL_RE = re.compile(r"https?://\S+")


# ------------------------------------------------------------------------------------------------ lines


def strip_ansi(line: str) -> str:
    """``line`` without terminal escapes (:data:`ANSI_RE`)."""
    return ANSI_RE.sub("", line) if has_escape(line) else line


def has_escape(text: str) -> bool:
    """True when ``text`` may hold a terminal escape of :data:`ANSI_RE` (:data:`ESCAPE_MARKS`)."""
    return any(m in text for m in ESCAPE_MARKS)


def strip_prefixes(line: str) -> str:
    """``line`` without up to two Ray prefixes (a worker's output forwarded through its driver) and a rank prefix.

    :param line: a line already without ANSI codes (:func:`strip_ansi`).
    """
    for _ in range(2):
        m = RAY_PREFIX_RE.match(line)
        if not m:
            break
        line = line[m.end() :]
    m = RANK_PREFIX_RE.match(line)
    return line[m.end() :] if m else line


def normalise_line(line: str) -> str:
    """One physical log line as verl printed it: ANSI codes, Ray prefixes and a rank prefix removed."""
    return strip_prefixes(strip_ansi(line))


def has_marker(line: str) -> bool:
    """True when ``line`` may hold a fact of this grammar (:data:`MARKER_RE`); False lines can be skipped."""
    return MARKER_RE.search(line) is not None


def split_lines(text: str) -> List[str]:
    """Split log text on ``\\n`` and ``\\r`` (tqdm redraws with carriage returns); drops blank lines."""
    return [ln for ln in _LINE_SPLIT_RE.split(text) if ln.strip()]


# ------------------------------------------------------------------------------------------------ metrics


def parse_value(raw: str) -> Optional[float]:
    """One metric value as verl prints it (``pprint.pformat`` of a number): ``0.25``, ``np.float64(0.25)``,
    ``np.int64(3)``, ``nan``, ``inf``, ``1e-06``; ``None`` when it is not a number (``True``, text)."""
    t = raw.strip()
    m = NP_WRAP_RE.match(t)
    if m:
        t = m.group(1).strip()
    if t in ("True", "False", "None") or not t:
        return None
    try:
        return float(t)
    except ValueError:
        return None


def parse_metrics_line(line: str) -> Optional[Tuple[int, Dict[str, float]]]:
    """Parse verl's console metrics line; returns ``(step, {key: value})`` or None.

    Format (``verl/utils/logger/aggregate_logger.py:26-32``): ``step:<N> - <k>:<v> - …``; values may be numpy-2
    reprs ``np.float64(0.12)``; ``nan``/``inf`` are kept as floats. ``step:`` may appear mid-line after a tqdm
    redraw or a Ray prefix (``…3.00it/s]step:3 - …``); ``timing_s/step:`` or ``training/global_step:`` are not line
    starts. ANSI codes are stripped.
    """
    if "step:" not in line:
        return None
    line = strip_ansi(line)
    m = STEP_START_RE.search(line)
    if not m:
        return None
    step = int(m.group(1))
    metrics: Dict[str, float] = {}
    for item in line[m.end() :].split(" - "):
        k, sep, v = item.partition(":")
        k = k.strip()
        if not sep or not k:
            continue
        val = parse_value(v)
        if val is not None:
            metrics[k] = val
    return step, metrics


#: the wall-clock stamps verl's loggers and Ray print near a line's start: verl's ``ERROR:2026-12-02 01:32:01,674:``
#: (``logging`` ``%(levelname)s:%(asctime)s:``), Ray's C++ ``[2026-12-02 01:32:17,693 E 16535 16535]`` and Python
#: ``2026-12-02 01:28:47,343\tINFO``; read as UTC (only differences between them are used)
LOG_TIME_RE = re.compile(r"(?<!\d)(20\d\d)-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:[,.](\d{1,6}))?")
#: how far into a line (after ANSI and Ray prefixes are counted in) a stamp is looked for
LOG_TIME_WINDOW = 80


def parse_log_time(line: str) -> Optional[float]:
    """The wall-clock stamp near the start of a log line (:data:`LOG_TIME_RE`), as seconds since the epoch (UTC),
    else None. A stamp further in than :data:`LOG_TIME_WINDOW` characters (inside a message or a path) is not the
    line's own time."""
    if "-" not in line[:LOG_TIME_WINDOW]:
        return None
    m = LOG_TIME_RE.search(line, 0, LOG_TIME_WINDOW + 26)
    if m is None or m.start() > LOG_TIME_WINDOW:
        return None
    y, mo, d, h, mi, sec, frac = m.groups()
    try:
        t = calendar.timegm((int(y), int(mo), int(d), int(h), int(mi), int(sec), 0, 0, 0))
    except (ValueError, OverflowError):
        return None
    return t + (int(frac) / 10 ** len(frac) if frac else 0.0)


#: verl's validation metrics: ``val-core/<data source>/<var>/<metric>@N`` for the core variable (``acc`` when the
#: reward reports it, else ``reward``) at the largest N, the rest ``val-aux/...``
#: (``verl/trainer/ppo/v1/trainer_base.py:1357-1371``)
VAL_PREFIX = "val-core/"


def validation_score(metrics: Dict[str, float]) -> Optional[Tuple[str, float]]:
    """``(key, value)`` of the validation score in a metrics dict: the first (sorted) ``val-core/.../mean@N`` key
    (``acc`` before ``reward``), else the first ``val-core/`` key; None without one."""
    keys = sorted(k for k in metrics if k.startswith(VAL_PREFIX))
    if not keys:
        return None
    mean = [k for k in keys if "/mean@" in k]
    best = ([k for k in mean if "/acc/" in k] or mean or keys)[0]
    return best, metrics[best]


def is_validation_only(metrics: Dict[str, float]) -> bool:
    """True when a step line's ``metrics`` (:func:`parse_metrics_line`) are the validation before training alone
    (``trainer.val_before_train``, verl/trainer/ppo/v1/trainer_base.py:439-445, logged at the start or resume step,
    so ``step:0`` on a fresh run): every key ``val-core/*`` / ``val-aux/*`` (trainer_base.py:1367-1377). A training
    step's line carries ``timing_s/step`` and ``training/global_step`` besides (trainer_base.py:473, :1935)."""
    return bool(metrics) and all(k.startswith("val-") for k in metrics)


def parse_total(line: str) -> Optional[int]:
    """N of ``Total training steps: N`` (the planned total, steps), else None."""
    m = TOTAL_RE.search(line) if "otal training steps" in line or "OTAL TRAINING" in line else None
    return int(m.group(1)) if m else None


def parse_resume(line: str) -> Optional[int]:
    """The step a resumed run continues from (``Resuming from …/global_step_N`` / ``Setting global step to N``)."""
    m = RESUME_RE.search(line) if "lobal step" in line or "global_step_" in line else None
    return int(m.group(1) or m.group(2)) if m else None


def parse_save(line: str) -> Optional[int]:
    """N of a checkpoint save that started (``Saving checkpoint to …/global_step_N``; complete = the tracker file
    ``latest_checkpointed_iteration.txt`` names it), else None."""
    m = SAVE_RE.search(line) if "global_step_" in line else None
    return int(m.group(1)) if m else None


def parse_save_path(line: str) -> Optional[str]:
    """The folder of a checkpoint save that started (the ``…/global_step_N`` of :func:`parse_save`'s line, as verl
    printed it: ``verl/trainer/ppo/v1/trainer_base.py:955``), else None."""
    m = SAVE_RE.search(line) if "global_step_" in line else None
    return m.group(0).split()[-1] if m else None


class ProgressBar(NamedTuple):
    """The last tqdm ``Training Progress`` bar of a line: ``step``/``total`` (steps), ``remaining_s`` and
    ``s_per_step`` (seconds; None when tqdm prints ``?``)."""

    step: int
    total: int
    remaining_s: Optional[float]
    s_per_step: Optional[float]


def _clock_s(s: Optional[str]) -> Optional[float]:
    """tqdm ``[H:]MM:SS`` -> seconds; ``?`` -> None."""
    if not s:
        return None
    total = 0
    for p in s.strip().split(":"):
        if not p.isdigit():
            return None
        total = total * 60 + int(p)
    return float(total)


def _rate_s(s: Optional[str]) -> Optional[float]:
    """tqdm rate ``96.63s/it`` or ``3.00it/s`` -> seconds per step."""
    s = (s or "").strip()
    try:
        if s.endswith("s/it"):
            return float(s[:-4])
        if s.endswith("it/s"):
            v = float(s[:-4])
            return 1.0 / v if v > 0 else None
    except ValueError:
        return None
    return None


def parse_progress_bar(line: str) -> Optional[ProgressBar]:
    """The last ``Training Progress`` bar in ``line`` (a redraw may hold several), else None."""
    if "raining Progress" not in line and "RAINING PROGRESS" not in line:
        return None
    b = None
    for b in PROGRESS_BAR_RE.finditer(line):
        pass
    if b is None:
        return None
    return ProgressBar(int(b.group(2)), int(b.group(3)), _clock_s(b.group(5)), _rate_s(b.group(6)))


# ------------------------------------------------------------------------------------------------ SwanLab link


def parse_swanlab_url(line: str) -> Optional[str]:
    """The run URL from SwanLab's one-line ``swanlab: 🚀 View run [<name>] at <url>`` banner, else None
    (a banner folded over several lines needs :class:`LinkScanner`)."""
    if "View run" not in line:
        return None
    line = strip_ansi(line)
    for tok in reversed(line.split()):
        if tok.startswith(("http://", "https://")):
            return tok
    return None


def swanlab_run_id(url: Optional[str]) -> Optional[str]:
    """The SwanLab run id: the path segment after ``/runs/`` in the run URL, else None."""
    if not url or "/runs/" not in url:
        return None
    rid = url.split("/runs/", 1)[1].split("/")[0].split("?")[0]
    return rid or None


#: the offline-mode command SwanLab prints per process (``swanlab sync <dir>``, 0.10 ``sdk/internal/run/greeting.py``)
SWANLAB_SYNC = "swanlab sync "


def join_swanlab_links(old: Optional[str], new: Optional[str]) -> Optional[str]:
    """The run's ONE SwanLab link after an attempt found ``new``, given the link of the earlier attempts ``old``.

    A cloud run keeps its first URL: every attempt logs to that SwanLab run (``SWANLAB_RUN_ID`` +
    ``SWANLAB_RESUME=allow``, swanlab 0.10 ``sdk/cmd/init.py``). Offline mode cannot hold one directory: swanlab
    writes ``run-<timestamp>-<run id>`` per process (0.10 ``sdk/cmd/init.py`` ``_generate_run_dir_name``), so an
    OOM retry writes a second one. Their ``swanlab sync`` commands are joined into one command over every directory
    in attempt order (``swanlab sync d1 d2``: the CLI takes several paths, 0.10 ``swanlab/cli/sync/__init__.py`` ``nargs=-1``;
    each replays into the run id its records carry, the same id for every attempt). Anything else keeps ``old``."""
    if not old or not new:
        return old or new
    if old.startswith(SWANLAB_SYNC) and new.startswith(SWANLAB_SYNC):
        dirs = old[len(SWANLAB_SYNC) :].split()
        extra = [d for d in new[len(SWANLAB_SYNC) :].split() if d not in dirs]
        return SWANLAB_SYNC + " ".join(dirs + extra)
    return old


class LinkScanner:
    """Find SwanLab's run link in training output, fed one line at a time.

    Recognises (SwanLab 0.10 ``sdk/internal/run/greeting.py``, 0.7 ``data/callbacker/utils.py``), with or without
    a Ray ``(TaskRunner pid=…)`` prefix and ANSI codes:

    * cloud: ``swanlab: 🚀 View run <name> at <url>`` (0.10) / ``… View run at <url>`` (0.7) → the URL;
    * local: ``swanlab: 🌟 Run `swanlab watch <dir>` to view …`` → ``swanlab watch <dir>``;
    * offline: ``swanlab: ⚡️ Run `swanlab sync <dir>` to sync this run`` → ``swanlab sync <dir>``.

    SwanLab prints through rich, which wraps at 80 columns when stdout is not a terminal: the URL then starts on
    the next line, and a URL longer than 80 characters is folded over several lines. ``run_id`` (the
    ``SWANLAB_RUN_ID`` dapo-ops set) lets the scanner join folded pieces until the URL ends with
    ``/runs/<run_id>``; without it, pieces are joined while each is exactly as long as the first. ``log_dir``
    (``SWANLAB_LOG_DIR``) is used for the local-mode command when the banner is wrapped.

    ``feed(line) -> str | None`` returns the link once, when complete.
    """

    def __init__(self, run_id: Optional[str] = None, log_dir: Optional[str] = None):
        self.run_id = run_id
        self.log_dir = log_dir
        self.link: Optional[str] = None
        self._pending: Optional[List[str]] = None  # URL pieces
        self._cmd: Optional[List[str]] = None  # backtick command pieces

    @property
    def pending(self) -> bool:
        """True while a wrapped banner is being assembled: feed the next line even if it has no 'swanlab'."""
        return self._pending is not None or self._cmd is not None

    def _url_done(self, url: str) -> bool:
        return bool(self.run_id) and url.rstrip("/").endswith("/runs/%s" % self.run_id)

    def feed(self, line: str) -> Optional[str]:
        if self.link is not None:
            return None
        s = strip_prefixes(strip_ansi(line.rstrip("\r\n")))
        if self._pending is not None:
            return self._continue_url(s)
        if self._cmd is not None:
            return self._continue_cmd(s)
        if "View run" in s:
            m = _URL_RE.search(s.split("View run", 1)[1])
            if m:
                url = m.group(0)
                if self.run_id and not self._url_done(url) and len(s) >= 79:
                    self._pending = [url]  # folded at the line end
                    return None
                return self._finish(url)
            if s.rstrip().endswith(" at") or s.rstrip().endswith("View run"):
                self._pending = []
            return None
        for word in ("swanlab watch", "swanlab sync"):
            if "Run" in s and "`" in s and (word in s or s.rstrip().endswith("`swanlab")):
                self._cmd = []
                return self._continue_cmd(s[s.index("`") + 1 :])
        return None

    def _finish(self, link: str) -> str:
        self.link = link.rstrip("`'\".,")
        self._pending = self._cmd = None
        return self.link

    def _continue_url(self, s: str) -> Optional[str]:
        piece = s.strip()
        pieces = self._pending or []
        if not piece or " " in piece or (not pieces and not piece.startswith("http")):
            # the banner ended; keep what we have
            if pieces:
                return self._finish("".join(pieces))
            self._pending = None
            return None
        pieces.append(piece)
        self._pending = pieces
        url = "".join(pieces)
        if self._url_done(url):
            return self._finish(url)
        if self.run_id is None and len(pieces) >= 2 and len(piece) != len(pieces[0]):
            return self._finish(url)
        if self.run_id is None and len(pieces) == 1 and len(piece) < 79:
            return self._finish(url)
        if len(pieces) >= 8:
            return self._finish(url)
        return None

    def _continue_cmd(self, s: str) -> Optional[str]:
        pieces = self._cmd or []
        if "`" in s:
            pieces.append(s[: s.index("`")])
            # rich folds a word longer than the 80 columns (an offline run dir) at the edge: a full-width piece
            # continues on the next line without a space (swanlab 0.10 offline banner, observed in the sandbox)
            cmd = ""
            for i, p in enumerate(pieces):
                if p.strip():
                    full = i > 0 and len(pieces[i - 1].rstrip()) >= 79
                    cmd += ("" if not cmd or full else " ") + p.strip()
            if (
                cmd.startswith("swanlab watch")
                and self.log_dir
                and cmd.replace(" ", "") == ("swanlabwatch" + self.log_dir.replace(" ", ""))
            ):
                cmd = "swanlab watch %s" % self.log_dir
            return self._finish(cmd)
        pieces.append(s)
        self._cmd = pieces
        if len(pieces) >= 6:
            self._cmd = None
        return None


# ------------------------------------------------------------------------------------------------ tracebacks

#: Python's traceback (``traceback.py`` ``format_exception``; ``logging`` with ``exc_info`` prints the same): a
#: header, ``  File "<path>", line <N>, in <func>`` frames (each followed by indented source / caret lines), then
#: the exception line ``<type>: <message>``; Ray's task errors put ``ray.exceptions.RayTaskError(<cause>): ray::
#: <Actor>.<method>() (pid=N, ip=...)`` mid-way and continue with the remote frames (``ray/exceptions.py``).
TRACEBACK_HEAD = "Traceback (most recent call last):"
FRAME_RE = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)')
EXC_LINE_RE = re.compile(r"^(?P<type>[A-Za-z_][\w.]*?)(?:\((?P<cause>[A-Za-z_][\w.]*)\))?(?::\s(?P<msg>.*)|:?$)")
#: lines that continue a chained traceback (``traceback.py``: __cause__ / __context__)
CHAIN_MARKS = ("During handling of the above exception", "The above exception was the direct cause")
#: Ray's dedup note at a line's end (``ray/_private/log_monitor.py``): the repeats it stands for are not counted
RAY_REPEAT_RE = re.compile(r" ?\[repeated (\d+)x across cluster\]")


class Traceback(NamedTuple):
    """One complete traceback: ``exc`` (the innermost exception's type, last dotted name: ``KeyError``),
    ``message`` (its text, at most 300 characters) and ``frames`` (``(path, line, func)`` outermost first)."""

    exc: str
    message: str
    frames: Tuple[Tuple[str, int, str], ...]


class TracebackReader:
    """Python tracebacks in a stream of lines of ONE source (a Ray worker's lines: one reader per ``pid=``).

    :meth:`feed` takes a line without ANSI codes and prefixes (:func:`normalise_line`) and returns a
    :class:`Traceback` when one ended (the line after its exception line, so a Ray task error's remote frames and
    chained exceptions stay in one block), else None. :meth:`flush` ends the pending one (end of the output)."""

    __slots__ = ("frames", "exc", "msg", "open")

    def __init__(self) -> None:
        self.frames: Optional[List[Tuple[str, int, str]]] = None
        self.exc: Optional[str] = None
        self.msg = ""
        self.open: Union[bool, str] = False  # inside a block: frames may still follow

    def flush(self) -> Optional[Traceback]:
        tb = None
        if self.frames and self.exc:
            tb = Traceback(self.exc, self.msg[:300], tuple(self.frames))
        self.frames, self.exc, self.msg, self.open = None, None, "", False
        return tb

    def feed(self, line: str) -> Optional[Traceback]:
        if "[repeated" in line:
            line = RAY_REPEAT_RE.sub("", line)
        if line.startswith(TRACEBACK_HEAD):
            if self.frames and self.exc and self.open == "chain":
                self.exc, self.open = None, True  # a chained traceback continues the block (its frames are innermost)
                return None
            done = self.flush()
            self.frames, self.open = [], True
            return done
        if self.frames is None:
            return None
        m = FRAME_RE.match(line) if 'File "' in line else None
        if m:
            self.frames.append((m.group("path"), int(m.group("line")), m.group("func")))
            self.open = True
            return None
        if not line.strip() or line[0] in " \t":  # source, caret lines, blank lines inside a block
            return None
        if any(line.startswith(c) for c in CHAIN_MARKS):
            self.open = "chain"
            return None
        e = EXC_LINE_RE.match(line) if self.frames else None
        if e and self.open:
            self.exc = (e.group("cause") or e.group("type")).rsplit(".", 1)[-1]
            if not e.group("cause") or not self.msg:
                self.msg = (e.group("msg") or "").strip()
            self.open = False
            return None
        return self.flush()
