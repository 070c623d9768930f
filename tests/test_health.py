"""The training-health rule (dapo_ops/core/health.py, issue 42 item 1, issue 44 family 6): pure, no hosts.

Metric keys and prints are verl 0.9.1's: ``actor/grad_norm`` / ``actor/lr`` (verl/workers/engine_workers.py:212-216,
prefixed at verl/trainer/ppo/v1/trainer_base.py:1861), ``WARN: grad_norm is not finite: nan``
(verl/workers/engine/fsdp/transformer_impl.py:824). The explosion rule is Megatron-LM's spiky-loss rule
(``SPIKY_LOSS_FACTOR = 10``, megatron/core/rerun_state_machine.py ``is_unexpectedly_large``).
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dapo_ops.core import health
from dapo_ops.core.logformat import parse_metrics_line

NAN, INF = float("nan"), float("inf")


def _line(step: int, **kv: str) -> str:
    return " - ".join([f"step:{step}"] + [f"actor/{k}:{v}" for k, v in kv.items()])


def _feed(w: health.HealthWatch, line: str):
    parsed = parse_metrics_line(line)
    assert parsed is not None
    return w.feed(*parsed)


def test_a_nan_grad_norm_in_verls_line_format_is_flagged_at_its_step():
    w = health.HealthWatch()
    for s in (1, 2):
        assert _feed(w, _line(s, grad_norm="np.float64(0.35)", pg_loss="np.float64(0.01)", lr="1e-06")) is None
    f = _feed(w, _line(3, grad_norm="np.float64(nan)", pg_loss="np.float64(nan)", lr="1e-06"))
    assert f is not None and f.reason == "non-finite" and f.step == 3
    assert f.metric in ("actor/pg_loss", "actor/grad_norm") and math.isnan(f.value)
    assert w.flag == f
    assert _feed(w, _line(4, grad_norm="nan")) is None  # raised once
    j = f.to_json()
    assert j["value"] is None and j["shown"] == "nan"  # run.json is strict JSON


def test_inf_loss_is_flagged():
    w = health.HealthWatch()
    f = w.feed(1, {"actor/pg_loss": INF, "actor/grad_norm": 0.4})
    assert f is not None and f.metric == "actor/pg_loss" and f.reason == "non-finite"


def test_a_nan_score_is_flagged_a_reward_returning_nan():
    f = health.HealthWatch().feed(2, {"critic/score/mean": NAN, "actor/grad_norm": 0.3})
    assert f is not None and f.metric == "critic/score/mean"


def test_verls_skip_print_belongs_to_the_step_after_the_last_line():
    w = health.HealthWatch()
    w.feed(4, {"actor/grad_norm": 0.3})
    assert w.feed_line("(WorkerDict pid=12) an unrelated line") is None
    f = w.feed_line("(WorkerDict pid=12) WARN: grad_norm is not finite: nan")
    assert f is not None and f.reason == "skip" and f.step == 5 and f.metric == health.GRAD_NORM
    assert w.feed_line("(WorkerDict pid=13) WARN: grad_norm is not finite: nan") is None  # other ranks: once


def test_torchtitan_warning_and_megatron_failed_step_are_skips():
    w = health.HealthWatch()
    assert w.feed_line("WARNING:verl.workers.engine.torchtitan:grad_norm is not finite: inf").reason == "skip"
    w2 = health.HealthWatch()
    w2.feed(7, {"actor/grad_norm": 0.5})
    f = w2.feed_line("NotImplementedError: Megatron optimizer step failed. This should not happen")
    assert f is not None and f.step == 8


@pytest.mark.parametrize(
    "line",
    [
        # older Megatron-LM: param_and_grad_buffer.py's assert (Pai-Megatron-Patch#366, Megatron-LM#780)
        "AssertionError: Rank 11: found NaN in local grad norm in backward pass before data-parallel communication"
        " collective. Device: 3",
        # Megatron core's RerunStateMachine (slime#795, NeMo Speech#14348): the same check raised as a RuntimeError
        "RuntimeError: Rank 2, node node-a, device 2, iteration -1: Unexpected result nan (message='found NaN in local"
        " grad norm for bucket #0 in backward pass before data-parallel communication collective')",
        "RuntimeError: Rank 0, node node-a, device 0, iteration 9: Unexpected result inf (message='found Inf in local"
        " grad norm for bucket #1 in backward pass before data-parallel communication collective')",
    ],
)
def test_megatrons_nan_grad_norm_check_is_a_skip_of_the_next_step(line):
    """Megatron's NaN/Inf gradient-norm check raises during the gradient sync, before the optimizer step verl's
    'Megatron optimizer step failed' comes from: the same non-finite gradient, the step after the last step line."""
    w = health.HealthWatch()
    w.feed(204, {"actor/grad_norm": 0.19})
    f = w.feed_line(line)
    assert f is not None and f.reason == "skip" and f.step == 205 and f.metric == health.GRAD_NORM


def test_absurd_lr_is_flagged_at_step_one():
    w = health.HealthWatch()
    f = _feed(w, _line(1, grad_norm="np.float64(0.81)", lr="1e+30"))
    assert f is not None and f.reason == "lr" and f.metric == health.LR and f.value == 1e30
    assert "lr 1e+30 at step 1" in f.words()


def test_a_normal_lr_is_not():
    assert health.HealthWatch().feed(1, {"actor/lr": 1e-5, "actor/grad_norm": 0.5}) is None


def test_explosion_needs_ten_times_the_largest_seen_and_history():
    w = health.HealthWatch()
    for s, g in enumerate((0.8, 0.6, 0.7), start=1):
        assert w.feed(s, {"actor/grad_norm": g}) is None
    assert w.feed(4, {"actor/grad_norm": 7.9}) is None  # < 10 x 0.8
    f = w.feed(5, {"actor/grad_norm": 3e12})
    assert f is not None and f.reason == "explosion" and f.largest == 7.9 and f.history[-1] == 7.9
    assert "grad_norm 3e+12 at step 5" in f.words()


def test_no_explosion_on_the_first_steps_or_below_the_floor():
    w = health.HealthWatch()
    assert w.feed(1, {"actor/grad_norm": 0.01}) is None
    assert w.feed(2, {"actor/grad_norm": 5.0}) is None  # history too short
    w2 = health.HealthWatch()
    for s in range(1, 6):
        w2.feed(s, {"actor/pg_loss": 0.001})
    assert w2.feed(6, {"actor/pg_loss": 0.05}) is None  # 50 x, but a pg_loss of 0.05 is noise (floor 1.0)


@given(st.lists(st.floats(min_value=1e-4, max_value=5.0), min_size=1, max_size=60))
def test_healthy_bounded_series_never_flag(values):
    """Finite grad norms that never jump 10 x above their running maximum (the clip range of a healthy run) are
    never flagged, whatever their order."""
    w = health.HealthWatch()
    big = 0.0
    for s, v in enumerate(values, start=1):
        f = w.feed(s, {"actor/grad_norm": v, "actor/lr": 1e-6})
        if big and v >= 10 * big and v >= 10.0:
            continue  # cannot happen with max 5.0: the floor keeps it healthy
        assert f is None, (s, v)
        big = max(big, v)


@given(  # a healthy prefix: within 10x of each other (0.5..2.0), so the spike rule never fires before the bad value
    st.lists(st.floats(min_value=0.5, max_value=2.0), min_size=0, max_size=20),
    st.sampled_from(["nan", "inf", "-inf"]),
    st.sampled_from(sorted(health.FINITE_KEYS)),
)
def test_any_non_finite_watched_metric_flags_at_its_step(prefix, bad, key):
    w = health.HealthWatch()
    for s, v in enumerate(prefix, start=1):
        assert w.feed(s, {key: v}) is None
    step = len(prefix) + 1
    f = w.feed(step, {key: float(bad)})
    assert f is not None and f.step == step and f.metric == key and f.reason == "non-finite"


def test_rewind_forgets_the_steps_a_resumed_attempt_repeats():
    w = health.HealthWatch()
    for s in range(1, 6):
        w.feed(s, {"actor/grad_norm": 0.5 + s})
    w.feed(6, {"actor/grad_norm": NAN})
    assert w.flag is not None
    w.rewind(3)
    assert w.flag is None and [s for s, _ in w.hist[health.GRAD_NORM]] == [1, 2, 3]
    assert w.largest[health.GRAD_NORM] == 3.5
    f = w.feed(4, {"actor/grad_norm": NAN})
    assert f is not None and f.step == 4


def test_persistent_is_the_same_metric_at_the_same_step_or_earlier():
    first = health.Flag(health.GRAD_NORM, 5, NAN, "non-finite").to_json()
    assert health.persistent(first, health.Flag(health.GRAD_NORM, 5, NAN, "skip"))
    assert health.persistent(first, health.Flag(health.GRAD_NORM, 4, INF, "non-finite"))
    assert not health.persistent(first, health.Flag(health.GRAD_NORM, 6, NAN, "non-finite"))
    assert not health.persistent(first, health.Flag(health.LR, 5, 1e30, "lr"))
    assert not health.persistent(None, health.Flag(health.GRAD_NORM, 5, NAN, "skip"))


def test_trend_shows_first_and_latest_then_the_bad_value():
    w = health.HealthWatch()
    w.feed(1, {"actor/grad_norm": 0.8})
    w.feed(2, {"actor/grad_norm": 0.9})
    t = w.trend()
    assert t is not None and t["shown"] == "grad_norm 0.8 -> 0.9 (step 2)"
    for s in (3, 4):
        w.feed(s, {"actor/grad_norm": 0.7})
    w.feed(5, {"actor/grad_norm": 3e12})
    t = w.trend()
    assert t is not None and t["shown"] == "grad_norm 0.8 -> 3e+12 (step 5)"
    assert health.trend_text({"trend": t, "flag": w.flag.to_json()}) == "grad_norm 0.8 -> 3e+12 (step 5) (explosion)"
    assert health.trend_text(None) is None and health.trend_text({}) is None


def test_scan_lines_reads_a_whole_log_and_rewinds_on_resume():
    lines = [
        _line(1, grad_norm="0.5"),
        _line(2, grad_norm="0.6"),
        "(WorkerDict pid=3) WARN: grad_norm is not finite: nan",
        "INFO:2026-01-01 00:00:00,000:Resuming from /c/global_step_1, setting global step to 1",
        _line(2, grad_norm="0.55"),
    ]
    f, i, _ = health.scan_lines(lines)
    assert f is not None and f.step == 3 and i == 2
    f2, _, w = health.scan_lines(lines[:2] + lines[3:])
    assert f2 is None and w.step == 2


def test_verdict_detail_names_metric_step_value_and_causes():
    f = health.Flag(health.GRAD_NORM, 5, NAN, "skip", (0.3, 0.4))
    d = health.verdict_detail(f)
    assert (d["metric"], d["bad_step"], d["shown"], d["recurred"]) == (health.GRAD_NORM, 5, "nan", False)
    assert d["first_bad"]["step"] == 5 and len(d["causes"]) == 4
    assert any("learning rate" in c for c in d["causes"]) and any("NaN/inf" in c for c in d["causes"])
    assert any("fp16" in c for c in d["causes"]) and any("data" in c for c in d["causes"])


def test_a_diverged_verdicts_words_name_the_bad_step_not_the_runs_last():
    """A verdict's detail carries ``step`` (the run's last step, decide.py's base detail) beside ``bad_step``: the
    hint read "grad_norm nan at step 100" for a run that went bad at step 5 and stepped on (the review of 2026-12-07)."""
    detail = {"metric": "actor/grad_norm", "value": float("nan"), "bad_step": 5, "step": 100, "reason": "non-finite"}
    assert " at step 5" in health.words(detail) and "step 100" not in health.words(detail)
    flag = {"metric": "actor/grad_norm", "value": float("nan"), "step": 7, "reason": "non-finite"}  # Flag.to_json
    assert " at step 7" in health.words(flag)


# ------------------------------------------------------------------ every metric, on verl 0.9.1's own step line

import re  # noqa: E402
from pathlib import Path  # noqa: E402

from dapo_ops.core import classify  # noqa: E402

REAL_LOG = Path(__file__).parent / "fixtures" / "real-verl" / "verl-run-5-dapo-async-3steps.log"


def _with(text: str, step: int, **values: str) -> str:
    """``text`` with ``key:value`` set in the step line of ``step`` (keys as verl prints them, ``/`` for ``__``)."""
    lines = text.split("\n")
    at = next(i for i, ln in enumerate(lines) if re.search(r"\bstep:%d - " % step, ln))
    for key, value in values.items():
        key = key.replace("__", "/")
        new = re.sub(r"( - %s:)[^ ]+" % re.escape(key), lambda m: m.group(1) + value, lines[at])
        assert new != lines[at], key
        lines[at] = new
    return "\n".join(lines)


@pytest.mark.parametrize(
    "key",
    [
        "critic/rewards/mean",
        "critic/advantages/mean",
        "critic/returns/min",
        "training/rollout_probs_diff_mean",
        "rollout_corr/kl",
        "actor/pg_clipfrac",
        "response_length/mean",
    ],
)
@pytest.mark.parametrize("bad", ["np.float64(nan)", "nan", "inf", "np.float64(-inf)"])
def test_any_non_finite_step_metric_of_a_real_verl_line_is_a_bad_step(key, bad):
    """A real verl 0.9.1 log with one metric of step 2 made NaN / inf (loss, grad_norm, entropy, KL and the score
    finite): the classifier calls it diverged at step 2 on that metric; only the watched six were read before."""
    text = _with(REAL_LOG.read_text(encoding="utf-8"), 2, **{key.replace("/", "__"): bad})
    v = classify.classify(text)
    assert (v.cls, v.detail.get("metric"), v.detail.get("bad_step")) == ("diverged", key, 2), (v.cls, v.detail)
    assert health.short(key) in v.action  # the whole key: "mean" alone named no metric


def test_verls_own_empty_set_values_are_no_bad_step():
    """verl fills NaN into the score / rewards / advantages / returns / non-aborted lengths / log-prob differences of
    a step whose every sample was aborted (metric_utils.py:474-526, utils/debug/metrics.py:102-111) and -inf / +inf
    into a rollout_corr IS-weight / rejection max / min over no token (rollout_corr_helper.py:465-466,737-738): no
    flag. The same NaN with
    samples left is one."""
    empty = {
        "critic__score__mean": "nan",
        "critic__rewards__mean": "nan",
        "critic__advantages__max": "nan",
        "critic__returns__min": "nan",
        "response_length_non_aborted__mean": "nan",
        "training__rollout_probs_diff_max": "nan",
        "training__rollout_actor_probs_pearson_corr": "nan",
    }
    text = REAL_LOG.read_text(encoding="utf-8")
    assert classify.classify(_with(text, 2, response__aborted_ratio="1.0", **empty)).cls == "success"
    assert classify.classify(_with(text, 2, **empty)).cls == "diverged"
    assert classify.classify(_with(text, 2, rollout_corr__log_ppl_diff_max="-inf")).cls == "diverged"
    is_max = text.replace(" - rollout_corr/kl:", " - rollout_corr/rollout_is_max:-inf - rollout_corr/kl:", 1)
    assert classify.classify(is_max).cls == "success"
    assert classify.classify(is_max.replace("rollout_is_max:-inf", "rollout_is_max:inf")).cls == "diverged"


def test_a_diverged_verdicts_step_is_the_step_reached_not_the_raw_last_step():
    """A diverged verdict's ``detail.step`` was run.json's raw step (the bad step's own line, or later) while the
    run's ending line and ``inv status`` use :func:`health.step_reached` (the last healthy step): two numbers called
    "step" that differ. ``step`` is now step_reached, ``bad_step`` the bad one, from the supervisor and the
    classifier alike."""
    from dapo_ops.agent.supervisor import escalate

    flag = health.Flag(health.GRAD_NORM, 5, NAN, "non-finite", (0.3, 0.4))
    v = escalate.diverged_verdict(flag, None, 7, 20)
    assert (v["detail"]["step"], v["detail"]["bad_step"]) == (health.step_reached(7, 5), 5) == (4, 5)
    log = "\n".join(
        "step:%d - training/global_step:%d - actor/grad_norm:%s - actor/pg_loss:0.1"
        % (n, n, "nan" if n == 3 else "0.3")
        for n in (1, 2, 3)
    )
    d = classify.classify(log, exit_code=1).detail
    assert (d["step"], d["bad_step"]) == (2, 3), d
