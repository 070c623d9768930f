"""The one grammar of verl's training log: metrics lines, the step total, resume and checkpoint-save lines, the
SwanLab run link, and the ANSI colour codes Ray's log forwarding adds (stdlib only, shipped).

Every reader of a training log uses these: the supervisor (progress into run.json,
``dapo_ops/agent/supervisor.py``), the status view (``dapo_ops/control/statusview.py``), the classifier
(``dapo_ops/core/classify.py``) and the notifier's link scanner (``dapo_ops/agent/notify.py``).
Line formats are read in verl 0.9.1: ``verl/utils/logger/aggregate_logger.py`` (metrics),
``verl/trainer/ppo/v1/trainer_base.py`` (total, resume, save), ``verl/trainer/ppo/ray_trainer.py`` (classic / one-step-off);
real logs: ``tests/fixtures/real-verl/``.
"""

from __future__ import annotations

import re
from typing import Dict, Optional, Tuple

ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
STEP_START_RE = re.compile(r"(?<![A-Za-z0-9_/.\-])step:(\d+)(?= - |\s*$)")
NP_WRAP_RE = re.compile(r"^np\.[A-Za-z0-9_]+\((.*)\)$")
TOTAL_RE = re.compile(r"Total training steps:\s*(\d+)")
RESUME_RE = re.compile(r"(?:Resuming from\s+\S*global_step_(\d+)|Setting global step to\s+(\d+))")
#: a checkpoint save starting: V1 trainer ``INFO:<date>:Saving checkpoint to <dir>/global_step_N``
#: (verl/trainer/ppo/v1/trainer_base.py; real log tests/fixtures/real-verl/verl-run-1-grpo-3steps.log), classic /
#: one-step-off ``local_global_step_folder: <dir>/global_step_N`` (verl/trainer/ppo/ray_trainer.py)
SAVE_RE = re.compile(r"(?:Saving checkpoint to|local_global_step_folder:)\s+\S*global_step_(\d+)")
SCRATCH_MARK = "Training from scratch"


def _num(text: str) -> Optional[float]:
    t = text.strip()
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

    Format (verl.md §8.2, ``verl/utils/logger/aggregate_logger.py:26-32``): ``step:<N> - <k>:<v> - …``;
    values may be numpy-2 reprs ``np.float64(0.12)``; ``nan``/``inf`` are kept as floats. ``step:`` may
    appear mid-line after a tqdm redraw (``…3.00it/s]step:3 - …``); ``timing_s/step:`` or
    ``training/global_step:`` are not line starts. ANSI codes are stripped.
    """
    if "step:" not in line:
        return None
    if "\x1b" in line:
        line = ANSI_RE.sub("", line)
    m = STEP_START_RE.search(line)
    if not m:
        return None
    step = int(m.group(1))
    metrics: Dict[str, float] = {}
    rest = line[m.end():]
    for item in rest.split(" - "):
        if ":" not in item:
            continue
        k, v = item.split(":", 1)
        k = k.strip()
        val = _num(v)
        if k and val is not None:
            metrics[k] = val
    return step, metrics


def parse_swanlab_url(line: str) -> Optional[str]:
    """The run URL from SwanLab's ``swanlab: 🚀 View run [<name>] at <url>`` line (swanlab.md §7), else None."""
    if "View run" not in line:
        return None
    if "\x1b" in line:
        line = ANSI_RE.sub("", line)
    for tok in reversed(line.split()):
        if tok.startswith(("http://", "https://")):
            return tok
    return None


def swanlab_run_id(url: Optional[str]) -> Optional[str]:
    """The SwanLab run id: the path segment after ``/runs/`` in the run URL (swanlab.md §7), else None."""
    if not url or "/runs/" not in url:
        return None
    rid = url.split("/runs/", 1)[1].split("/")[0].split("?")[0]
    return rid or None

