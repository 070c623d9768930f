"""Sanity of the numbers a run sets (issue 42 item 5): dapo_ops/core/sanity.py's one table of usual ranges, the
plan's ``sanity:`` notes and preflight's ``sanity:<key>`` warnings (never a failure: the run still starts). On
main's code ``--override actor_rollout_ref.actor.optim.lr=1e30`` (the H200's diverged run, issue 42) planned and
passed preflight without a word."""

from __future__ import annotations

import re
from pathlib import Path

from dapo_ops.control import settings as settings_mod
from dapo_ops.control.preflight.inputs import sanity_checks
from dapo_ops.control.preflight.plan_view import plan_view
from dapo_ops.control.preflight.result import WARN
from dapo_ops.core import sanity
from plan_helpers import plan_for

VERL = Path("/tmp/verl091/verl")


def _plan(extra=(), **flags):
    st = settings_mod.resolve({"steps": 10, **flags}, {}, {})
    return plan_for(
        settings=st,
        host=None,
        mode="dapo",
        run_id="20260101-000000-abcd",
        swanlab_logger=False,
        extra_overrides=list(extra),
    )


def test_the_runbook_defaults_raise_no_warning():
    p = _plan()
    assert not [n for n in p.notes if n.startswith("sanity:")]
    assert sanity_checks(plan_view(p)) == []


def test_the_h200_learning_rate_is_named_with_its_usual_range_and_source_and_the_run_still_plans():
    p = _plan(["actor_rollout_ref.actor.optim.lr=1e30"])
    notes = [n for n in p.notes if n.startswith("sanity:")]
    assert notes == [
        "sanity:  actor_rollout_ref.actor.optim.lr=1e+30 is far outside what RL fine-tuning uses (usually 1e-7 to "
        "1e-5; verl's default 1e-6 (trainer/config/actor/actor.yaml:151), verl recipe/dapo/run_dapo_qwen2.5_32b.sh "
        "1e-6)"
    ]
    checks = sanity_checks(plan_view(p))
    assert [(c.name, c.status) for c in checks] == [("sanity:actor_rollout_ref.actor.optim.lr", WARN)]
    assert "\n" not in checks[0].message and "--override actor_rollout_ref.actor.optim.lr=" in checks[0].fix


def test_clip_ratios_kl_coefficients_and_a_batch_below_the_devices():
    extra = [
        "actor_rollout_ref.actor.clip_ratio_low=0.9",
        "actor_rollout_ref.actor.clip_ratio_high=5",
        "actor_rollout_ref.actor.clip_ratio_c=1.0",  # verl's dual-clip bound must be above 1
        "++actor_rollout_ref.actor.kl_loss_coef=10",
        "algorithm.kl_ctrl.kl_coef=-0.1",
    ]
    got = sanity.warnings(extra + ["data.train_batch_size=4"], devices=16)
    keys = [w.split("=", 1)[0] for w in got]
    assert keys == [
        "actor_rollout_ref.actor.clip_ratio_low",
        "actor_rollout_ref.actor.clip_ratio_high",
        "actor_rollout_ref.actor.clip_ratio_c",
        "actor_rollout_ref.actor.kl_loss_coef",
        "algorithm.kl_ctrl.kl_coef",
        "data.train_batch_size",
    ]
    assert got[-1].startswith("data.train_batch_size=4 prompts is smaller than the 16 trainer devices")
    # the last value of a key is the one verl gets: a later sane value clears the warning
    assert sanity.warnings(["actor_rollout_ref.actor.optim.lr=1", "actor_rollout_ref.actor.optim.lr=2e-6"]) == []
    # a batch below the plan's devices (no host: 1 node x 8) warns in the plan too, and the plan still builds
    p = _plan(train_batch_size=4, ppo_mini_batch_size=4)
    assert any(n.startswith("sanity:  data.train_batch_size=4 prompts is smaller than the 8 ") for n in p.notes)


def test_the_table_cites_verls_own_defaults_and_they_are_in_range():
    """Each row's default is verl 0.9.1's, read from its yaml at the cited line, and is not flagged."""
    if not VERL.exists():
        return
    for r in sanity.RANGES:
        m = re.search(r"verl's default (\S+) \(([\w/.]+):(\d+)\)", r.source)
        assert m, r
        default, path, line = m.group(1), m.group(2), int(m.group(3))
        text = (VERL / (path if "/" in path else "trainer/config/actor/" + path)).read_text().splitlines()
        assert text[line - 1].split(":", 1)[1].strip() == default, (r.key, text[line - 1])
        assert not r.outside(float(default)), r.key
