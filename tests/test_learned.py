"""Learned starts (dapo_ops/core/learned.py): what counts as the same configuration, when a memo is due, and how
a plan starts on it (source ``learned``) or says why not; learned vs the memory-fit estimate. Pure: no hosts."""

import copy
import re

from dapo_ops.control import settings
from dapo_ops.control.inventory.model import Host
from dapo_ops.control.launch.dryrun import render_text
from dapo_ops.core import learned
from plan_helpers import plan_for

ONE_GPU = Host(
    name="h1",
    address="198.51.100.11",
    accelerator="gpu",
    devices=1,
    workdir="/work",
    runs_dir="/runs",
    model_dir="/models",
    data_dir="/data",
    container="c1",
)
# bench/memory_fit_models.json "tiny-1.46b" (tests/test_memfit.py)
TINY_146B = {
    "model_type": "qwen2",
    "hidden_size": 2048,
    "num_hidden_layers": 24,
    "intermediate_size": 8192,
    "num_attention_heads": 16,
    "num_key_value_heads": 4,
    "vocab_size": 576,
    "tie_word_embeddings": True,
}
H200_MIB = 143771
FLAGS = {
    "framework": "fsdp",
    "max_prompt_length": 128,
    "max_response_length": 64,
    "rollout_tp": 1,
    "train_batch_size": 8,
    "ppo_mini_batch_size": 8,
    "rollout_n": 1,
    "steps": 3,
    "model": "/models/tiny",
}
RID = "20261129-151200-a1b2"


def memory(cfg=TINY_146B, mib=H200_MIB, name="NVIDIA H200", memos=()):
    return {"model_config": cfg, "device_gib": mib / 1024, "device_mib": mib, "device_name": name, "memos": list(memos)}


def plan(flags=None, env=None, mem=None, run_id=RID):
    st = settings.resolve(dict(FLAGS, **(flags or {})), env or {}, {})
    return plan_for(
        settings=st,
        host=ONE_GPU,
        mode="dapo",
        run_id=run_id,
        swanlab_logger=False,
        memory=mem if mem is not None else memory(),
    )


def memo_of(p, rung="rollout-util", phase="weight-sync", changes=None, features=(), run_id="20261128-101010-beef"):
    """The memo the supervisor files for plan ``p``'s run after ``rung`` got it past ``phase`` (learned.memo)."""
    ch = dict(changes if changes is not None else {"gpu_memory_utilization": 0.5})
    ch["memory_rungs"] = [
        {
            "rung": rung,
            "phase": phase,
            "source": "oom-retry-1",
            "changes": {k: v for k, v in ch.items() if k != "memory_rungs"},
        }
    ]
    rec = {
        "features": p.spec["features"] + [{"name": f, "source": "oom-retry-1"} for f in features],
        "setting_changes": ch,
        "step": 4,
    }
    spec = dict(p.spec, run_id=run_id)
    return learned.memo(spec, rec, {"phase": phase, "phases": [phase], "attempt": 1, "step": 3}, now=1764410000.0)


# ------------------------------------------------------------------------------------- same configuration


def test_same_configuration_despite_steps_save_freq_run_and_model_path():
    a = plan()
    b = plan(
        {"steps": 50, "save_freq": 5, "experiment": "other", "model": "/elsewhere/tiny-copy"},
        run_id="20261130-000000-0001",
    )
    assert a.spec["learn"]["key"] == b.spec["learn"]["key"]
    assert a.spec["learn"]["fingerprint"] == b.spec["learn"]["fingerprint"]
    assert learned.find([memo_of(a)], b.spec["learn"]["key"]) is not None


def test_a_different_model_device_or_memory_setting_does_not_match():
    base = plan()
    m = memo_of(base)
    others = {
        "model.num_hidden_layers": plan(mem=memory(cfg=dict(TINY_146B, num_hidden_layers=28))),
        "model.vocab_size": plan(mem=memory(cfg=dict(TINY_146B, vocab_size=151936))),
        "host.device_gib": plan(mem=memory(mib=81559)),
        "host.device_name": plan(mem=memory(name="NVIDIA H100 80GB HBM3")),
        "run.max_response_length": plan({"max_response_length": 128}),
        "run.rollout_n": plan({"rollout_n": 2}),
        "run.gpu_memory_utilization": plan({"gpu_memory_utilization": 0.5}),
        "run.disabled": plan({"features": "-chunked_prefill"}),
        "run.features": plan({"features": "-gradient_checkpointing"}),
        "run.overrides": None,
    }
    st = settings.resolve(FLAGS, {}, {})
    others["run.overrides"] = plan_for(
        settings=st,
        host=ONE_GPU,
        mode="dapo",
        run_id=RID,
        swanlab_logger=False,
        extra_overrides=["trainer.val_before_train=False"],
        memory=memory(),
    )
    for what, p in others.items():
        k = p.spec["learn"]["key"]
        assert learned.find([m], k) is None, what
        part, name = what.split(".")
        assert m["key"][part].get(name) != k[part].get(name), what
        assert p.spec["learn"]["fingerprint"] != base.spec["learn"]["fingerprint"], what


def test_a_model_without_its_shape_is_told_apart_by_its_path():
    small = {"model_type": "qwen2", "hidden_size": 16}  # the sandbox's tiny model: no layer count
    a = plan(mem=memory(cfg=small))
    b = plan({"model": "/models/other"}, mem=memory(cfg=small))
    assert a.spec["learn"]["key"]["model"]["path"] == "/models/tiny"
    assert learned.find([memo_of(a)], b.spec["learn"]["key"]) is None
    assert learned.find([memo_of(a)], plan(mem=memory(cfg=small)).spec["learn"]["key"]) is not None


def test_without_device_facts_there_is_no_key_and_no_lookup():
    p = plan(mem={"model_config": TINY_146B, "device_gib": None})
    assert "learn" not in p.spec and "learned" not in p.spec


# ------------------------------------------------------------------------------------- the plan starts there


def test_a_matching_memo_starts_the_plan_on_its_rung_with_source_learned():
    first = plan()
    m = memo_of(first, rung="offload", phase="weight-sync", changes={}, features=("offload",))
    p = plan(mem=memory(memos=[m]))
    assert p.features.source_of("offload") == "learned"
    assert p.spec["setting_changes"]["memory_rungs"] == [
        {
            "rung": "offload",
            "phase": "weight-sync",
            "source": "learned",
            "changes": {},
            "learned_from": "20261128-101010-beef",
        }
    ]
    line = (
        "starting on the learned rung offload(weight-sync) (run 20261128-101010-beef ran out in phase weight-sync "
        "without it on 2025-11-29)"
    )
    assert line in p.memory and p.spec["learned"]["used"] is True
    text = render_text(p, width=400)
    assert line in text and re.search(r"offload +│ memory +│ on +│ learned ", text), text
    assert "actor_rollout_ref.actor.fsdp_config.param_offload=True" in p.argv


def test_a_setting_rung_memo_changes_the_argv():
    m = memo_of(plan())
    p = plan(mem=memory(memos=[m]))
    assert p.spec["setting_changes"]["gpu_memory_utilization"] == 0.5
    assert "actor_rollout_ref.rollout.gpu_memory_utilization=0.5" in p.argv


def test_an_explicit_contrary_setting_wins_and_the_plan_says_why():
    m = memo_of(plan())  # rollout-util: gpu_memory_utilization 0.6 -> 0.5
    p = plan(env={"GPU_MEMORY_UTILIZATION": "0.6"}, mem=memory(memos=[m]))  # the same value, set explicitly
    assert not p.spec.get("setting_changes") and "actor_rollout_ref.rollout.gpu_memory_utilization=0.6" in p.argv
    assert p.spec["learned"]["used"] is False
    assert any(
        ln.startswith("learned start not used: run 20261128-101010-beef ran on rollout-util(weight-sync)")
        and "you set GPU_MEMORY_UTILIZATION=0.6" in ln
        and "never overrides an explicit setting" in ln
        for ln in p.memory
    ), p.memory
    # an explicit -offload (the same configuration: it only bounds the ladder): a memo that adds offload is not used
    off = plan({"features": "-offload"})
    assert off.spec["learn"]["key"] == plan().spec["learn"]["key"]
    m2 = memo_of(plan(), rung="offload", changes={}, features=("offload",))
    p2 = plan({"features": "-offload"}, mem=memory(memos=[m2]))
    assert not p2.features.has("offload") and p2.spec["learned"]["used"] is False
    assert any("it adds offload, which you turned off (-offload)" in ln for ln in p2.memory)


def test_an_override_of_the_key_a_rung_changes_wins():
    key = "actor_rollout_ref.actor.ppo_max_token_len_per_gpu"
    st = settings.resolve(FLAGS, {}, {})

    def mk(memos):
        return plan_for(
            settings=st,
            host=ONE_GPU,
            mode="dapo",
            run_id=RID,
            swanlab_logger=False,
            extra_overrides=[f"{key}=4096"],
            memory=memory(memos=memos),
        )

    m = memo_of(mk([]), rung="update-batch", phase="update", changes={"token_budgets": {key: 2048}})
    p = mk([m])
    assert p.spec["learned"]["used"] is False and not p.spec.get("setting_changes")
    assert any(f"it changes {key}, which you set with --override" in ln for ln in p.memory)


def test_conflicts_rules():
    m = {
        "rung": {
            "features": [{"name": "offload", "source": "oom-retry-1"}],
            "setting_changes": {"gpu_memory_utilization": 0.5, "ppo_micro_batch_size_per_gpu": 1, "memory_rungs": []},
        }
    }
    assert learned.conflicts(m, (), {}, []) == []
    assert learned.conflicts(m, ("offload",), {}, []) == ["it adds offload, which you turned off (-offload)"]
    assert learned.conflicts(m, (), {"micro_batch_size": "--micro-batch-size=4"}, []) == [
        "it sets ppo_micro_batch_size_per_gpu=1, but you set --micro-batch-size=4"
    ]
    assert learned.conflicts(m, (), {}, ["+actor_rollout_ref.rollout.gpu_memory_utilization=0.7"]) == [
        "it changes actor_rollout_ref.rollout.gpu_memory_utilization, which you set with --override"
    ]


def test_learned_wins_over_the_estimate_which_only_reports():
    # tests/test_memfit.py: this plan's estimate starts on rollout-util(weight-sync) (0.9 -> 0.8) on the H200
    flags = {"gpu_memory_utilization": 0.9, "features": "-dynamic_batch,-gradient_checkpointing", "micro_batch_size": 8}
    est = plan(flags)
    assert est.spec["setting_changes"]["memory_rungs"][0]["source"] == "estimate"
    # the memo: an earlier run of the same configuration measured that offload got it past weight-sync
    m = memo_of(est, rung="offload", changes={}, features=("offload",))
    p = plan(flags, mem=memory(memos=[m]))
    assert p.features.source_of("offload") == "learned"
    assert [r["source"] for r in p.spec["setting_changes"]["memory_rungs"]] == ["learned"]
    assert "gpu_memory_utilization" not in p.spec["setting_changes"]  # the estimate's rung did not start
    assert "actor_rollout_ref.rollout.gpu_memory_utilization=0.9" in p.argv
    assert p.memory[0].startswith("starting on the learned rung offload(weight-sync)")
    assert not any("starts on rung(s)" in ln for ln in p.memory), p.memory
    # a memo contrary to the explicit GPU_MEMORY_UTILIZATION=0.9 is not used: the estimate's start applies as before
    m2 = memo_of(est, changes={"gpu_memory_utilization": 0.7})
    p2 = plan(flags, mem=memory(memos=[m2]))
    assert p2.spec["learned"]["used"] is False
    assert [r["source"] for r in p2.spec["setting_changes"]["memory_rungs"]] == ["estimate"]


# ------------------------------------------------------------------------------------- when a memo is due


def _rec(step, cur_step_reached, sources=("oom-retry-1",), verdict_phase="update"):
    rungs = [{"rung": "update-batch", "phase": "update", "source": s, "changes": {}} for s in sources]
    return {
        "step": step,
        "setting_changes": {"memory_rungs": rungs},
        "attempts": [
            {"n": 1, "step_reached": 2, "verdict": {"cls": "oom-device", "detail": {"phase": verdict_phase}}},
            {"n": 2, "step_reached": cur_step_reached, "features": [], "resumed_from": 2},
        ],
    }


def test_a_memo_is_due_once_the_attempt_on_the_rung_passes_the_step_that_ran_out():
    assert learned.passed(_rec(2, 2)) is None  # resumed from step 2: step 3 (where it ran out) not done
    assert learned.passed(_rec(3, 3)) == {"phase": "update", "phases": ["update"], "attempt": 1, "step": 3}
    assert learned.passed(_rec(5, 5, sources=("estimate",))) is None  # no ladder rung: nothing was learned
    one = _rec(3, 3)
    one["attempts"] = one["attempts"][1:]
    assert learned.passed(one) is None  # no OOM before it


def test_start_line_names_every_rung_and_phase():
    m = {
        "run_id": "r1",
        "recorded_at": 0,
        "ran_out": {"phase": "update", "phases": ["weight-sync", "update"]},
        "rung": {
            "setting_changes": {
                "memory_rungs": [
                    {"rung": "rollout-util", "phase": "weight-sync"},
                    {"rung": "update-batch", "phase": "update"},
                ]
            }
        },
    }
    assert learned.start_line(copy.deepcopy(m)) == (
        "starting on the learned rungs rollout-util(weight-sync), update-batch(update) (run r1 ran out in phase "
        "weight-sync, update without them on 1970-01-01)"
    )


def test_a_memo_of_a_phaseless_oom_reads_without_unknown():
    """A device OOM whose log names no phase (the unknown ladder: offload first): the start line says so in words
    instead of 'offload(unknown) ... ran out in phase unknown' (sandbox trial of 2026-12-02)."""
    m = {
        "run_id": "r1",
        "recorded_at": 0,
        "ran_out": {"phase": "unknown", "phases": ["unknown"]},
        "rung": {
            "features": [{"name": "offload", "source": "oom-retry-1"}],
            "setting_changes": {"memory_rungs": [{"rung": "offload", "phase": "unknown"}]},
        },
    }
    assert learned.rung_names(m) == ["offload"]
    assert learned.start_line(m) == (
        "starting on the learned rung offload (run r1 ran out of device memory (its log named no phase) without it "
        "on 1970-01-01)"
    )
    assert "unknown" not in learned.not_used_line(m, ["it adds offload, which you turned off (-offload)"])


def test_the_dry_run_says_when_no_checkpoint_is_saved():
    """``--save-freq -1``: verl saves nothing (verl/trainer/ppo/v1/trainer_base.py:481), so the dry run does not
    print a checkpoint dir as if it would fill (sandbox trial, 2026-12-02)."""
    off = render_text(plan({"save_freq": -1}), width=400)
    assert "checkpoints:   none (save_freq -1: a retry after a failure starts over from step 0)" in off
    on = render_text(plan({"save_freq": 2}), width=400)
    assert "checkpoints:   /runs/" in on and "(every 2 steps and the last)" in on


def test_an_explicit_no_offload_in_any_form_keeps_a_learned_offload_rung_off():
    """A new-user trial: ``inv launch --framework fsdp --no-offload`` started on the learned rung offload (verl ran
    param_offload=True) although the README says a learned rung is never over a setting given explicitly; only
    ``--features -offload`` kept it off. Every form of "no offload" is that setting: the flag, ENABLE_OFFLOAD, the
    config file, and an --override of the feature's own verl key."""
    m = memo_of(plan(), rung="offload", phase="update", changes={}, features=("offload",))
    forms = {
        "--no-offload": (settings.resolve(dict(FLAGS, offload=False), {}, {}), []),
        "ENABLE_OFFLOAD=false": (settings.resolve(FLAGS, {"ENABLE_OFFLOAD": "false"}, {}), []),
        "[run] offload = false in the config file": (settings.resolve(FLAGS, {}, {"run": {"offload": False}}), []),
        "actor_rollout_ref.actor.fsdp_config.param_offload, which you set with --override": (
            settings.resolve(FLAGS, {}, {}),
            ["actor_rollout_ref.actor.fsdp_config.param_offload=False"],
        ),
    }
    for said, (st, extra) in forms.items():

        def mk(memos, st=st, extra=extra):
            return plan_for(
                settings=st,
                host=ONE_GPU,
                mode="dapo",
                run_id=RID,
                swanlab_logger=False,
                extra_overrides=extra,
                memory=memory(memos=memos),
            )

        # the same configuration (an --override is part of the key: the memo of a run with the same override)
        p = mk([m if not extra else memo_of(mk([]), rung="offload", phase="update", changes={}, features=("offload",))])
        assert not p.features.has("offload"), said
        assert "actor_rollout_ref.actor.fsdp_config.param_offload=True" not in p.argv, said
        assert p.spec["learned"]["used"] is False, said
        (line,) = [ln for ln in p.memory if ln.startswith("learned start not used")]
        assert said in line, (said, line)
        # what the memo says may happen without the rung
        assert "ran out of device memory in phase update at step 3, so this run may too" in line, line
    # offload left at its default is no choice: the memo is used
    assert plan(mem=memory(memos=[m])).features.source_of("offload") == "learned"
