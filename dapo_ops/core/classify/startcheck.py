"""verl's own start-up checks of a configuration value (:mod:`dapo_ops.core.classify`): an exception one of them
raised before the first training step, the key and value it is about, and how to fix it.

Hydra composes verl's config before these checks run, so dapo-ops' pre-launch compose check passes the values they
refuse. verl 0.9.1 checks a value at start-up in (paths under ``verl/``):

- ``utils/config.py`` ``validate_config`` (the driver, ``trainer/main_ppo.py:177``, before Ray; the one-step-off
  entry in its TaskRunner) and ``omega_conf_to_dataclass``, which builds the config dataclasses whose
  ``__post_init__`` / ``validate`` assert or raise on a value (``workers/config/*.py``, ``trainer/config/*.py``,
  ``base_config.py``): e.g. ``optimizer.py:123`` ``assert self.lr_scheduler_type in ["constant", "cosine"]``,
  ``actor.py:220`` ``ValueError: Invalid loss_agg_mode: <v>``, ``rollout.py:282`` the removed sync mode;
- the V1 trainer's constructor (``trainer/ppo/v1/trainer_base.py:120-212``: ``_build_replay_buffer`` ->
  ``replay_buffer.py:165-177`` ``AssertionError: Invalid max off policy threshold: <v>, must be an integer greater
  than 0, or null ...`` / ``Invalid max off policy strategy``; ``_resolve_filter_groups_metric``;
  ``get_trainer_cls`` :2023; ``trainer_separate_async.py`` ``__init__``);
- the RL dataset (``utils/dataset/rl_dataset.py:169-178`` ``_read_files_and_tokenize``: ``ValueError: Unsupported
  file format: <path>`` for anything but .parquet / .json / .jsonl);
- the algorithm registries (``trainer/ppo/core_algos.py`` ``get_policy_loss_fn`` :82, ``get_adv_estimator_fn``
  :149, ``get_kl_controller`` :212);
- the resume mode (``trainer/ppo/v1/trainer_base.py:873``: ``logger.exception(f"Unknown resume mode {mode}")``, then
  an ``UnboundLocalError`` on ``global_step_folder``; ``utils/checkpoint/checkpoint_handler.py:219`` ``ValueError:
  Invalid resume_mode: <v>. Must be 'auto', 'disable', or 'resume_path'``).

The evidence that an exception is one of these: its innermost traceback frame is one of :data:`CHECK_PLACES` and no
``step:`` line came before it (:func:`is_check`); the exception line stays the evidence. The key: the override of
the failing job (Hydra's ``Error executing job with overrides: [...]``) that the message or the frame's source line
names, else a key the message spells out, else the place's own key (:func:`check_detail`).

STDLIB ONLY.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from dapo_ops.core.classify.logtail import STEP_RX, Log

#: (what the place is, path regex, function regex, the key it checks when the message names none): the innermost
#: frame of an exception raised by one of verl 0.9.1's start-up checks of a config value (module docstring)
CHECK_PLACES: tuple[tuple[str, str, str, str | None], ...] = (
    ("validate_config", r"verl/utils/config\.py", r".", None),
    ("a config dataclass", r"verl/(?:workers|trainer)/config/[\w/]+\.py|verl/base_config\.py", r".", None),
    ("the V1 replay buffer", r"verl/trainer/ppo/v1/replay_buffer\.py", r"__init__$", None),
    (
        "the V1 trainer",
        r"verl/trainer/ppo/v1/trainer_\w+\.py",
        r"^(?:__init__|_build_replay_buffer|_resolve_filter_groups_metric|get_trainer_cls)$",
        None,
    ),
    ("the RL dataset", r"verl/utils/dataset/rl_dataset\.py", r"^_read_files_and_tokenize$", "data.train_files"),
    ("the policy-loss registry", r"verl/trainer/ppo/core_algos\.py", r"^get_policy_loss_fn$", None),
    (
        "the advantage registry",
        r"verl/trainer/ppo/core_algos\.py",
        r"^get_adv_estimator_fn$",
        "algorithm.adv_estimator",
    ),
    ("the KL controller", r"verl/trainer/ppo/core_algos\.py", r"^get_kl_controller$", "algorithm.kl_ctrl.type"),
    ("the resume mode", r"verl/utils/checkpoint/checkpoint_handler\.py", r"^_determine_resume_path$", None),
    ("the one-step-off trainer", r"verl/experimental/one_step_off_policy/ray_trainer\.py", r"^__init__$", None),
)
_PLACES = tuple((what, re.compile(p), re.compile(f), key) for what, p, f, key in CHECK_PLACES)
#: the check a message row of ``dapo_ops/core/classify/signatures.py`` quotes, and its key: ``(what, key)``
ROW_CHECKS: dict[str, tuple[str, str]] = {
    "data-format": ("the RL dataset", "data.train_files"),
    "resume-mode": ("the resume mode", "trainer.resume_mode"),
}
#: (lower-cased message regex, how to fix it), first match wins; else :data:`DEFAULT_FIX`
FIXES: tuple[tuple[str, str], ...] = (
    (
        r"unsupported file format",
        "verl's RL dataset reads only .parquet, .json and .jsonl files: convert the file (e.g. pandas "
        "read_csv(...).to_parquet(...)) and point the key at the new file",
    ),
    (
        r"resume[ _]mode",
        "set it to auto, disable or resume_path (resume_path with trainer.resume_from_path=<.../global_step_N>)",
    ),
    (r"max off policy threshold", "set an integer > 0, or null to turn off-policy version control off"),
    (r"max off policy strategy", "set drop or wait"),
)
DEFAULT_FIX = "set a value the check accepts (its message or assert statement says which)"

_FRAME_RX = re.compile(r'^\s*file "([^"\n]+)", line \d+, in (\S+)')
_CARET_RX = re.compile(r"^\s*[\^~]+\s*$")
_FRAMES_BACK = 12
#: Hydra's list of the failing job's overrides (hydra/core/utils.py JobReturn.return_value)
_OVERRIDES_RX = re.compile(r"error executing job with overrides: (\[.*\])\s*$")
_DOTTED_RX = re.compile(r"\b([a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)+)\b")
_FIELD_RX = re.compile(r"\b([a-z][a-z0-9]*(?:_[a-z0-9]+)+)\b")
_INVALID_RX = re.compile(r"\b(?:invalid|unknown|unsupported) ([a-z][a-z_ ]{2,60}?): ")
_SELF_RX = re.compile(r"\bself\.([a-z_]\w*)")
_PATH_RX = re.compile(r"(/[^\s'\",]+|[\w.-]+\.(?:csv|tsv|txt|parquet|jsonl?|arrow))")
#: the sections of verl's config (verl/trainer/config/_generated_ppo_trainer.yaml): a dotted word of a message that
#: starts with one is a key
_SECTIONS = ("actor_rollout_ref.", "algorithm.", "critic.", "data.", "reward.", "trainer.", "ray_kwargs.", "rollout.")


def innermost_frame(log: Log, i: int) -> tuple[str, str, int | None] | None:
    """``(path, function, source line index)`` of the traceback frame right above the exception line ``i`` (path and
    function lower-cased; the index None when Python printed no source line), or None when line ``i`` does not close
    a traceback."""
    src = None
    for j in range(i - 1, max(-1, i - 1 - _FRAMES_BACK), -1):
        ll = log.low_line(j)
        m = _FRAME_RX.match(ll)
        if m:
            return m.group(1).replace("\\", "/"), m.group(2), src
        if _CARET_RX.match(ll):
            continue
        if ll.startswith("    ") and src is None:
            src = j
            continue
        return None
    return None


def check_place(log: Log, i: int) -> tuple[str, str | None] | None:
    """``(what, key)`` of :data:`CHECK_PLACES` whose place is the innermost frame of the exception at line ``i``."""
    fr = innermost_frame(log, i)
    if fr is None:
        return None
    path, func, _src = fr
    return next(((what, key) for what, p, f, key in _PLACES if p.search(path) and f.search(func)), None)


def before_training(log: Log, i: int) -> bool:
    """No ``step:`` line comes before line ``i``: the run has not finished a training step."""
    return STEP_RX.search(log.low, 0, log.starts[i]) is None


def is_check(log: Log, i: int) -> bool:
    """The exception line ``i`` was raised by one of verl's start-up checks of a config value: its innermost frame is
    a :data:`CHECK_PLACES` place and no training step came before it (an assert in a worker's compute, or after
    step lines, is not)."""
    return before_training(log, i) and check_place(log, i) is not None


def overrides(log: Log) -> dict[str, str]:
    """``{key: value}`` of the failing job's overrides (Hydra's ``Error executing job with overrides: [...]``;
    ``+`` / ``~`` prefixes dropped), ``{}`` when the log has none or it does not parse."""
    for j in range(len(log.lines) - 1, -1, -1):
        if "executing job with overrides" not in log.low_line(j):
            continue
        m = _OVERRIDES_RX.search(log.lines[j].lower())
        if m is None:
            continue
        start = log.lines[j].lower().rfind(m.group(1))
        try:
            items = ast.literal_eval(log.lines[j][start : start + len(m.group(1))])
        except (ValueError, SyntaxError):
            return {}
        out: dict[str, str] = {}
        for item in items if isinstance(items, list) else []:
            k, eq, v = str(item).partition("=")
            if eq:
                out[k.lstrip("+~")] = v
        return out
    return {}


def _names(msg: str, src: str) -> list[str]:
    """Candidate key names of a check's message (lower-cased) and source line: dotted keys, the words of
    ``Invalid <words>:`` joined with ``_``, ``self.<field>`` of the source, identifiers with ``_``."""
    out = _DOTTED_RX.findall(msg) + ["_".join(m.split()) for m in _INVALID_RX.findall(msg)]
    out += _SELF_RX.findall(src) + _FIELD_RX.findall(msg) + _FIELD_RX.findall(src)
    return list(dict.fromkeys(out))


def _resolve(msg: str, names: list[str], ov: dict[str, str], known: str | None) -> tuple[str, str] | None:
    """The override a check is about: one whose value is a path the message names, else the one override whose key
    is (or ends with) a candidate name, first name first, else the ``known`` key of the place."""
    for p in _PATH_RX.findall(msg):
        hit = [k for k, v in ov.items() if v and v.lower() in (p, p.strip("'\""))]
        if hit:
            return hit[0], ov[hit[0]]
    for n in names:
        hit = [k for k in ov if k.lower() == n or k.lower().endswith("." + n)]
        if len(hit) == 1:
            return hit[0], ov[hit[0]]
    return (known, ov[known]) if known in ov else None


def message(log: Log, i: int) -> str:
    """The message of the exception line ``i`` (after ``<Type>: ``; a bare ``AssertionError`` has none), else the
    line itself for a log record (``ERROR:<time>:Unknown resume mode foo``)."""
    line = log.lines[i].strip()
    m = re.match(r"(?:[\w.]+\.)?\w+(?:error|exception)(?::\s*(.*))?$", line, re.I)
    if m:
        return (m.group(1) or "").strip()
    return re.sub(r"^(?:error|critical):[\d\- :,.]+:", "", line, flags=re.I).strip()


def evidence_lines(log: Log, i: int) -> list[int]:
    """The evidence of a check's exception line ``i``: the line, after the ``assert`` statement above it when the
    exception is a bare ``AssertionError`` (no message of its own)."""
    fr = innermost_frame(log, i)
    if fr is not None and fr[2] is not None and not message(log, i):
        return [fr[2], i]
    return [i]


def check_detail(log: Log, i: int, row: str) -> dict[str, Any]:
    """The detail of a ``verl-check`` verdict for the hit of signature ``row`` at line ``i``: ``cause``
    (``verl-check``), ``key`` and ``value`` (module docstring; ``value`` only from the job's overrides),
    ``check`` (the place, :data:`CHECK_PLACES`), ``message`` (cut to 200 characters; a bare ``AssertionError``'s is
    its ``assert`` statement), ``fix`` (:data:`FIXES`)."""
    fr = innermost_frame(log, i)
    src = log.lines[fr[2]].strip() if fr and fr[2] is not None else ""
    msg = message(log, i) or src  # a bare AssertionError: its assert statement says what it checks
    low = msg.lower()
    place = ROW_CHECKS.get(row) or check_place(log, i)
    known = place[1] if place else None
    names = _names(low, src.lower())
    got = _resolve(low, names, overrides(log), known)
    key, value = got if got else (None, None)
    if key is None:
        key = next((n for n in names if n.startswith(_SECTIONS)), None) or known or (names[0] if names else None)
    fix = next((text for rx, text in FIXES if re.search(rx, low)), DEFAULT_FIX)
    return {
        "cause": "verl-check",
        "key": key,
        "value": value,
        "check": place[0] if place else None,
        "message": msg[:200] or None,
        "fix": fix,
    }
