"""Training health: the ONE rule that reads verl's step metrics and names a diverging run (STDLIB ONLY, shipped).

A run can be alive and learn nothing: verl 0.9.1 prints ``WARN: grad_norm is not finite: nan`` and skips the
optimizer step (``verl/workers/engine/fsdp/transformer_impl.py:822-824``; the same print in
``fsdp/fsdp_turbo_impl.py:132-134``, ``veomni/transformer_impl.py:397-399``, ``automodel/transformer_impl.py:289-291``;
``torchtitan/transformer_impl.py:439-441`` logs it through ``logger.warning``), so a NaN loss steps on for hours.
Megatron's optimizer returns ``update_successful=False`` for non-finite gradients and verl raises
``NotImplementedError("Megatron optimizer step failed. This should not happen")``
(``verl/workers/engine/megatron/transformer_impl.py:700-706``); with Megatron's NaN check on
(``check_for_nan_in_grad``) the gradient sync itself raises first: ``found NaN in local grad norm in backward pass
before data-parallel communication collective`` (an ``AssertionError`` in older Megatron-LM
``megatron/core/distributed/param_and_grad_buffer.py``), or ``Unexpected result nan (message='found NaN in local grad
norm for bucket #0 ...')`` (the RerunStateMachine's ``RuntimeError`` of newer Megatron core; ``found Inf`` for an
infinite one). And a diverged DAPO run whose responses all score
the same makes ``filter_groups`` drop every group: the V1 ReplayBuffer ignores
``algorithm.filter_groups.max_num_gen_batches`` (``verl/trainer/ppo/v1/trainer_base.py:205-211``) and generates for
ever with no new step line; the bad value is already in the last step line printed.

:class:`HealthWatch` is fed a run's step metrics in order (:meth:`HealthWatch.feed`, the ``(step, metrics)`` of
:func:`dapo_ops.core.logformat.parse_metrics_line`) and its other lines (:meth:`HealthWatch.feed_line`, the skip
prints above); the first bad sign is a :class:`Flag`:

- ``non-finite``: NaN/inf in any step metric (a loss, ``actor/grad_norm``, entropy, KL, the score, the rewards, the
  advantages, a log-prob difference ...; :data:`FINITE_KEYS` are named first), except the values verl itself fills in
  for an empty set (:func:`nonfinite_metric`);
- ``skip``: verl's ``grad_norm is not finite`` print (the update was skipped), Megatron's failed step, or Megatron's
  NaN / Inf gradient-norm check raising before the step;
- ``explosion``: ``|value| >= 10 x`` the largest ``|value|`` seen so far in this run (:data:`SPIKE_FACTOR`, Megatron-LM's
  spiky-loss rule: ``SPIKY_LOSS_FACTOR = 10`` in ``pretrain_gpt.py`` and
  ``RerunStateMachine.is_unexpectedly_large`` in ``megatron/core/rerun_state_machine.py``, which flags
  ``value >= max_values[context] * threshold`` after a warm-up of samples), here after :data:`MIN_HISTORY` steps and
  above an absolute floor (:data:`SPIKE_KEYS`), so the noise of tiny values is no explosion;
- ``lr``: ``actor/lr`` at or above :data:`ABSURD_LR` (verl's default actor lr is ``1e-6``,
  ``verl/trainer/config/actor/actor.yaml:151``; an RL fine-tune runs at ~1e-7..1e-5).

What follows a flag is decided by recurrence, as Megatron-LM's RerunStateMachine tells a transient fault from a
persistent one: the supervisor stops the attempt and retries once from the last checkpoint saved before the bad
step; the same metric bad again at that step or earlier (:func:`persistent`) is a ``diverged`` verdict
(``dapo_ops/core/policy.py``). The same rule reads a finished log (``dapo-ops classify``:
:func:`scan_lines`) and feeds ``inv status``'s trend (:func:`trend_text`).

Metric keys are verl 0.9.1's: ``actor/pg_loss`` (``verl/workers/utils/losses.py:119``), ``actor/loss``,
``actor/grad_norm``, ``actor/lr`` (``verl/workers/engine_workers.py:212-216``, prefixed ``actor/`` at
``verl/trainer/ppo/v1/trainer_base.py:1861``), ``actor/entropy`` (``trainer_base.py:1684``), ``actor/ppo_kl``
(``verl/trainer/ppo/core_algos.py:1373``), ``critic/score/mean`` (``verl/trainer/ppo/metric_utils.py:556``).
"""

from __future__ import annotations

import math
import re
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Tuple

GRAD_NORM = "actor/grad_norm"
LR = "actor/lr"
#: metrics whose NaN / inf is a bad step (a reward returning NaN shows in the score first)
FINITE_KEYS: Tuple[str, ...] = (
    "actor/pg_loss",
    "actor/loss",
    GRAD_NORM,
    "actor/entropy",
    "actor/ppo_kl",
    "critic/score/mean",
)
#: the metrics verl 0.9.1 sets to NaN when the step had no response token at all (every sample aborted, so the
#: response mask is all False: ``response/aborted_ratio`` 1): means / max / min over an empty set
#: (verl/trainer/ppo/metric_utils.py:474-526 score, rewards, advantages, returns, non-aborted lengths; :541-549 critic
#: values; verl/utils/debug/metrics.py:102-111 rollout / actor log-prob differences)
EMPTY_SET_PREFIXES: Tuple[str, ...] = (
    "critic/score/",
    "critic/rewards/",
    "critic/advantages/",
    "critic/returns/",
    "critic/values/",
    "critic/vf_explained_var",
    "response_length_non_aborted/",
    "training/rollout_probs_diff_",
    "training/rollout_actor_probs_pearson_corr",
)
#: the step metric that says the step had no response token (verl/trainer/ppo/metric_utils.py:468,511,587)
ABORTED_RATIO = "response/aborted_ratio"
#: metric -> the absolute floor its explosion must also reach (a pg_loss near 0 jumps 10x on noise)
SPIKE_KEYS: Dict[str, float] = {GRAD_NORM: 10.0, "actor/pg_loss": 1.0, "actor/loss": 1.0}
#: Megatron-LM's spiky-loss factor (``pretrain_gpt.py`` ``SPIKY_LOSS_FACTOR = 10``)
SPIKE_FACTOR = 10.0
#: steps of history before an explosion can be called (Megatron-LM warms up on 100 samples; RL runs are short)
MIN_HISTORY = 3
#: an ``actor/lr`` at or above this is absurd for RL fine-tuning
ABSURD_LR = 1.0
#: the metric ``inv status`` follows when nothing went bad
TREND_METRIC = GRAD_NORM
#: lines that say the optimizer step was skipped or failed on non-finite gradients (module docstring)
SKIP_MARKS: Tuple[Tuple[str, str], ...] = (
    ("grad_norm is not finite:", GRAD_NORM),
    ("Megatron optimizer step failed", GRAD_NORM),
    ("found NaN in local grad norm", GRAD_NORM),
    ("found Inf in local grad norm", GRAD_NORM),
)
#: likely causes a ``diverged`` verdict names, in order
CAUSES: Tuple[str, ...] = (
    "the learning rate (actor_rollout_ref.actor.optim.lr; RL fine-tuning uses ~1e-7..1e-5)",
    "a reward function that returns NaN/inf for some samples",
    "fp16 overflow (use bf16: actor_rollout_ref.actor.fsdp_config.mixed_precision / Megatron params_dtype)",
    "bad data at that step (empty or absurdly long samples)",
)
HISTORY_KEPT = 5


def short(name: str) -> str:
    """A metric key without verl's prefix: ``actor/grad_norm`` -> ``grad_norm``."""
    return name.rsplit("/", 1)[-1] if name.startswith("actor/") else name


def fmt(value: Optional[float]) -> str:
    """A value as a person reads it: ``0.8``, ``3e+12``, ``nan``, ``inf``; ``?`` for None."""
    if value is None:
        return "?"
    return "%.3g" % value


def finite(value: Optional[float]) -> bool:
    return value is not None and not math.isnan(value) and not math.isinf(value)


#: the rollout-correction max / min verl takes over a masked_fill(-inf / +inf) (rollout_corr_helper.py:445,465-466,
#: 737-738; "rollout_corr/" prefixed at :892)
_MASKED_EXTREME_RE = re.compile(r"rollout_corr/rollout_(?:rs_\w+|is)_(max|min)$")


def _verl_fill(key: str, value: float, metrics: Dict[str, float]) -> bool:
    """True when verl prints ``value`` of ``key`` for an empty set, not a broken number: :data:`EMPTY_SET_PREFIXES`
    in a step with no response token, or a rejection-sampling / IS-weight max of -inf / min of +inf, the masked_fill
    sentinel of a max / min over no token (:data:`_MASKED_EXTREME_RE`)."""
    m = _MASKED_EXTREME_RE.match(key)
    if m is not None and math.isinf(value):
        return (m.group(1) == "max") == (value < 0)
    return metrics.get(ABORTED_RATIO) == 1.0 and key.startswith(EMPTY_SET_PREFIXES)


def nonfinite_metric(metrics: Dict[str, float]) -> Optional[str]:
    """The step metric whose NaN / inf says the training is broken (:data:`FINITE_KEYS` first, then the line's
    order), or None. Every metric counts: a NaN reward or advantage poisons the update as a NaN loss does; only
    the empty-set values verl fills in itself are no sign (:func:`_verl_fill`)."""
    for key in FINITE_KEYS + tuple(metrics):
        v = metrics.get(key)
        if v is not None and not finite(v) and not _verl_fill(key, v, metrics):
            return key
    return None


class Flag(NamedTuple):
    """The first bad sign: ``metric`` (verl's key), ``step`` (the training step it belongs to), ``value`` (float,
    nan/inf kept), ``reason`` (``non-finite`` | ``skip`` | ``explosion`` | ``lr``), ``history`` (the metric's last
    values before it, oldest first) and ``largest`` (the largest ``|value|`` seen before it, None without history)."""

    metric: str
    step: int
    value: float
    reason: str
    history: Tuple[float, ...] = ()
    largest: Optional[float] = None

    def words(self) -> str:
        """``grad_norm nan at step 5 (was 0.35, 0.36)``: one line (:func:`words`)."""
        return words(self.to_json())

    def to_json(self) -> Dict[str, Any]:
        """run.json form (strict JSON: a non-finite value is None in ``value``, its text in ``shown``)."""
        return {
            "metric": self.metric,
            "step": self.step,
            "value": self.value if finite(self.value) else None,
            "shown": fmt(self.value),
            "reason": self.reason,
            "history": [v for v in self.history if finite(v)],
            "largest": self.largest,
        }


def words(d: Dict[str, Any]) -> str:
    """One line for a flag as :meth:`Flag.to_json` or a ``diverged`` verdict's detail (:func:`verdict_detail`) give
    it: ``grad_norm nan at step 5 (was 0.35, 0.36)``, ``lr 1e+30 at step 1 (an RL fine-tune runs at ~1e-7..1e-5)``."""
    step = d.get("bad_step", d.get("step"))  # a verdict's detail: "step" is the run's last, "bad_step" the flag's
    was = ", ".join(fmt(v) for v in (d.get("history") or [])[-3:])
    why = {
        "skip": " (verl skipped the update: grad_norm is not finite)",
        "explosion": " (>= %g x the largest seen, %s)" % (SPIKE_FACTOR, fmt(d.get("largest"))),
        "lr": " (an RL fine-tune runs at ~1e-7..1e-5)",
    }.get(str(d.get("reason")), "")
    return "%s %s at step %s%s%s" % (
        short(str(d.get("metric") or "a metric")),
        d.get("shown") or fmt(d.get("value")),
        "?" if step is None else step,
        " (was %s)" % was if was else "",
        why,
    )


def persistent(first: Optional[Dict[str, Any]], again: Flag) -> bool:
    """True when ``again`` repeats ``first`` (a :meth:`Flag.to_json` dict of the run's first bad step): the same
    metric bad at the same step or earlier, after a retry from a checkpoint before it (Megatron-LM's
    RerunStateMachine: a fault that reproduces is persistent, ``megatron/core/rerun_state_machine.py``)."""
    if not first:
        return False
    return first.get("metric") == again.metric and again.step <= int(first.get("step") or 0)


class HealthWatch:
    """One run's training health, fed in log order. :attr:`flag`: the first :class:`Flag` (None while healthy);
    :meth:`feed` / :meth:`feed_line` return a flag once, when it is raised. :meth:`rewind` forgets the steps a
    resumed attempt does again."""

    def __init__(self) -> None:
        self.hist: Dict[str, List[Tuple[int, float]]] = {}
        self.largest: Dict[str, float] = {}
        self.flag: Optional[Flag] = None
        self.step: Optional[int] = None  # the last step line seen
        self.first: Dict[str, Tuple[int, float]] = {}  # per metric: its first (step, value) of the run

    def rewind(self, step: Optional[int]) -> None:
        """A new attempt resumes from checkpoint ``step`` (None: from scratch): forget what came after it and any
        flag (the recurrence is the supervisor's to judge, :func:`persistent`)."""
        at = step or 0
        for k in list(self.hist):
            self.hist[k] = [(s, v) for s, v in self.hist[k] if s <= at]
        self.largest = {k: max((abs(v) for _, v in h), default=0.0) for k, h in self.hist.items() if h}
        self.flag = None
        self.step = step

    def _raise(self, flag: Flag) -> Optional[Flag]:
        if self.flag is not None:
            return None
        self.flag = flag
        return flag

    def feed(self, step: int, metrics: Dict[str, float]) -> Optional[Flag]:
        """One step line's metrics (values as :func:`dapo_ops.core.logformat.parse_value` gives them). Returns the
        first flag when this step raises it."""
        self.step = step
        found: Optional[Flag] = None
        bad = nonfinite_metric(metrics)
        if bad is not None:
            found = self._flag(bad, step, metrics[bad], "non-finite")
        lr = metrics.get(LR)
        if lr is not None and finite(lr) and lr >= ABSURD_LR:
            found = found or self._flag(LR, step, lr, "lr")
        for key, floor in SPIKE_KEYS.items():
            v = metrics.get(key)
            if v is None or not finite(v):
                continue
            big = self.largest.get(key)
            h = self.hist.get(key) or []
            if big is not None and len(h) >= MIN_HISTORY and abs(v) >= SPIKE_FACTOR * big and abs(v) >= floor:
                found = found or self._flag(key, step, v, "explosion")
        for key in set(FINITE_KEYS) | {LR}:
            v = metrics.get(key)
            if v is None:
                continue
            self.first.setdefault(key, (step, v))
            if finite(v):
                self.hist.setdefault(key, []).append((step, v))
                del self.hist[key][:-64]
                self.largest[key] = max(self.largest.get(key, 0.0), abs(v))
        return self._raise(found) if found is not None else None

    def _flag(self, key: str, step: int, v: float, reason: str) -> Flag:
        h = tuple(x for _, x in (self.hist.get(key) or [])[-HISTORY_KEPT:])
        return Flag(key, step, v, reason, h, self.largest.get(key))

    def feed_line(self, line: str) -> Optional[Flag]:
        """A line that is no step line: verl's skip print (it comes before the step's metrics line, so it belongs
        to the step after the last one seen). Returns the first flag when this line raises it."""
        low = line.lower()  # a re-cased paste ('found nan in local grad norm') is the same line
        if "finite" not in low and "optimizer step failed" not in low and "in local grad norm" not in low:
            return None
        for mark, key in SKIP_MARKS:
            mark = mark.lower()
            if mark in low:
                raw = low.split(mark, 1)[1].strip().split()[:1] if mark.endswith(":") else []
                try:
                    v = float(raw[0]) if raw else float("nan")
                except ValueError:
                    v = float("nan")
                return self._raise(self._flag(key, (self.step or 0) + 1, v, "skip"))
        return None

    def trend(self, metric: Optional[str] = None) -> Optional[Dict[str, Any]]:
        """``{"metric", "first", "last", "step", "shown"}`` of ``metric`` (default: the flagged one, else
        :data:`TREND_METRIC`): its first value of the run and its latest (the flag's when one is raised)."""
        key = metric or (self.flag.metric if self.flag else TREND_METRIC)
        if key not in self.first:
            return None
        first = self.first[key][1]
        if self.flag is not None and self.flag.metric == key:
            last, step = self.flag.value, self.flag.step
        else:
            h = self.hist.get(key) or []
            step, last = h[-1] if h else self.first[key]
        return _trend(key, first, last, step)


def _trend(key: str, first: float, last: float, step: int) -> Dict[str, Any]:
    return {
        "metric": key,
        "first": first if finite(first) else None,
        "last": last if finite(last) else None,
        "step": step,
        "shown": "%s %s -> %s (step %d)" % (short(key), fmt(first), fmt(last), step),
    }


def trend_at(trend: Any, step: Optional[int], metrics: Dict[str, float]) -> Any:
    """run.json's ``health.trend`` brought up to a newer step line (``step``, ``metrics``: the log tail's, fresher
    than run.json, which the supervisor writes every few seconds): ``inv status`` showed ``grad_norm a -> b (step
    4)`` beside step 5 of the step column. Unchanged when the line is not newer or lacks the metric."""
    if not isinstance(trend, dict) or step is None or not isinstance(trend.get("step"), int):
        return trend
    key, first = str(trend.get("metric")), trend.get("first")
    v = metrics.get(key)
    if step <= trend["step"] or v is None or first is None:
        return trend
    return _trend(key, float(first), float(v), int(step))


def bad_step_of(verdict: Optional[Dict[str, Any]]) -> Optional[int]:
    """The bad step a ``diverged`` verdict names (``detail.bad_step``), else None (any other verdict)."""
    d = (verdict or {}).get("detail") or {}
    bad = d.get("bad_step") if (verdict or {}).get("cls") == "diverged" else None
    return int(bad) if isinstance(bad, (int, float)) else None


def step_reached(step: Optional[int], bad_step: Optional[int] = None) -> Optional[int]:
    """A run's "step reached", the one definition the ending line, supervisor.log's summary, ``inv status`` and
    the health trend use: the last step whose metrics line came, and when a metric went bad at ``bad_step`` the
    last healthy step before it (a NaN caught by verl's skip print before step 3's line and a bad lr seen on step
    2's own line both count only the steps before them). None: no step yet (step 0 is no step)."""
    if step is None:
        return None
    if bad_step is not None:
        step = min(int(step), int(bad_step) - 1)
    return int(step) if step > 0 else None


def reached_text(step: Optional[int], total: Optional[int]) -> str:
    """``step reached 2/20`` of :func:`step_reached`'s step, ``no step reached yet (of 20)`` for None; never
    ``None/3``."""
    of = total if total else "?"
    return "no step reached yet (of %s)" % of if step is None else "step reached %s/%s" % (step, of)


def trend_text(health: Optional[Dict[str, Any]]) -> Optional[str]:
    """``inv status``'s words for run.json ``health``: ``grad_norm 0.8 -> 3e+12 (step 3)``, plus ``: bad`` when a
    flag was raised; None when the run has no health record yet."""
    if not health or not isinstance(health, dict):
        return None
    t = health.get("trend") or {}
    shown = t.get("shown") if isinstance(t, dict) else None
    if not shown:
        return None
    bad = health.get("flag") or health.get("first_bad")
    return str(shown) + (" (%s)" % bad.get("reason") if isinstance(bad, dict) and bad.get("reason") else "")


def scan_lines(lines: Iterable[str]) -> Tuple[Optional[Flag], Optional[int], HealthWatch]:
    """The rule over a whole log, for the classifier: ``(first flag, index of the line that raised it, the watch)``.
    Attempt delimiters and resumes rewind the history as the supervisor does."""
    from dapo_ops.core.logformat import parse_metrics_line, parse_resume

    w = HealthWatch()
    for i, line in enumerate(lines):
        if "step:" in line:
            parsed = parse_metrics_line(line)
            if parsed is not None:
                if w.feed(parsed[0], parsed[1]) is not None:
                    return w.flag, i, w
                continue
        if "lobal step" in line:
            r = parse_resume(line)
            if r is not None:
                w.rewind(r)
                continue
        if w.feed_line(line) is not None:
            return w.flag, i, w
    return None, None, w


def verdict_detail(
    flag: Flag, first: Optional[Dict[str, Any]] = None, recurred: bool = False, step: Optional[int] = None
) -> Dict[str, Any]:
    """A ``diverged`` verdict's detail (``Verdict.detail``): the flag's facts, ``first_bad`` (the run's first flag,
    this one when None), ``recurred`` (the policy's condition: stop) and the likely ``causes``. ``step`` is the
    run's :func:`step_reached` (the last healthy step, below ``bad_step``) from its last logged ``step`` (run.json's
    or the log's), the same number the run's ending line and ``inv status`` show."""
    f = flag.to_json()
    return {
        "step": step_reached(step, flag.step),
        "metric": flag.metric,
        "bad_step": flag.step,
        "value": f["value"],
        "shown": f["shown"],
        "reason": flag.reason,
        "history": f["history"],
        "largest": flag.largest,
        "first_bad": dict(first) if first else f,
        "recurred": recurred,
        "causes": list(CAUSES),
    }
