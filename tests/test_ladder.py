"""Escalation ladder: every failure class, the runbook's precedence rules, bounds and invariants."""

import pytest
from hypothesis import given, settings as hsettings, strategies as st

from dapo_ops.core import ladder
from dapo_ops.core.features import resolve

S = {
    "max_prompt_length": 2048,
    "max_response_length": 8192,
    "gpu_memory_utilization": 0.85,
    "rollout_tp": 2,
    "trainer_gpus": 4,
    "steps": 100,
}


def dec(fs, cls, detail=None, oom_used=0, max_oom=2, other=None, settings=None):
    return ladder.decide(fs, cls, detail or {}, oom_used, max_oom, other or {}, settings or S)


def test_device_oom_adds_offload_then_recompute_then_stops():
    fs = resolve("")
    d1 = dec(fs, "oom-device")
    assert d1.action == "retry" and d1.counter == "oom"
    assert d1.features.source_of("offload") == "oom-retry-1"
    assert [r["rung"] for r in d1.setting_changes["memory_rungs"]] == ["offload"]  # the record, nothing else
    assert set(d1.setting_changes) == {"memory_rungs"}
    d2 = dec(d1.features, "oom-device", oom_used=1)
    assert d2.action == "retry" and d2.features.source_of("recompute") == "oom-retry-2"
    assert d2.features.source_of("offload") == "oom-retry-1"
    d3 = dec(d2.features, "oom-device", {"step": 4, "total": 100, "phase": "unknown"}, oom_used=2, max_oom=5)
    assert d3.action == "stop"
    text = " ".join(d3.suggestions)
    assert "step 4/100" in d3.reason and "phase unknown" in d3.reason  # facts: the reason, not a try: line
    assert "--max-response-length" in text and "more devices" in text
    assert any("token budget" in s or "micro" in s for s in d3.suggestions)


def test_a_ladder_run_dry_because_the_user_turned_rungs_off_says_so_and_fits_the_mode():
    fs = resolve("-offload,-recompute")
    d = dec(fs, "oom-device", {"phase": "unknown"}, settings={**S, "mode": "dapo"})
    assert d.action == "stop" and "turned off by --features / USER_FEATURES: offload, recompute" in d.reason, d.reason
    text = " ".join(d.suggestions)
    assert "TRAINER_GPUS" not in text and "more hosts in one run (-H a,b)" in text  # DAPO has no trainer pool
    d2 = dec(fs, "oom-device", {"phase": "unknown"}, settings={**S, "mode": "one-step-off"})
    assert "TRAINER_GPUS now 4" in " ".join(d2.suggestions)


@pytest.mark.parametrize(
    "step,total,late",
    [
        (3, 100, False),
        (11, 20, True),
        (10, 20, False),
        (11, 100, False),
        (26, 100, True),
        (40, None, True),
        (None, 9, False),
    ],
)
def test_the_leak_hint_is_given_only_for_an_oom_after_many_healthy_steps(step, total, late):
    """The update-OOM ``try:`` line said "a late OOM after healthy steps hints at a leak" for an OOM at step 3 (a new
    user's trial). Late now means at least LATE_OOM_MIN_STEPS completed steps and LATE_OOM_FRACTION of the run."""
    fs = resolve("offload,recompute")
    detail = {"phase": "update", **({"step": step} if step is not None else {})}
    d = dec(fs, "oom-device", detail, oom_used=2, max_oom=2, settings={**S, "steps": total})
    where = [s for s in d.reason.split("; ") if s.startswith("reached at")]
    assert len(where) == 1 and ("leak" in where[0]) is late, d.reason
    # a try: line is something to do: where the OOM was reached and the rungs on are the reason's facts
    assert not [s for s in d.suggestions if "reached at" in s or s.startswith("memory rungs on")], d.suggestions
    assert ladder.late_oom(step, total) is late
    if late:
        assert f"after {step - 1} healthy steps" in where[0]


def test_oom_rungs_appended_even_when_user_chose_other_features():
    fs = resolve("prefix_cache,-flash_attn")
    d = dec(fs, "oom-device")
    assert d.action == "retry" and d.features.has("offload")
    assert d.features.source_of("prefix_cache") == "explicit"
    assert "flash_attn" in d.features.disabled and not d.features.has("flash_attn")


def test_explicit_minus_offload_is_never_overridden_and_the_skip_is_said():
    fs = resolve("-offload")
    d = dec(fs, "oom-device")
    assert d.action == "retry"
    assert not d.features.has("offload")
    assert d.features.source_of("recompute") == "oom-retry-1"
    assert any("offload" in s and "turned off by the user" in s for s in d.skipped)
    d2 = dec(d.features, "oom-device", oom_used=1)
    assert d2.action == "stop" and not d2.features.has("offload")
    assert any("turned off by the user" in s for s in d2.skipped)
    plan = ladder.plan_ladder(fs, 2)
    assert any("offload" in line and "never overridden" in line for line in plan)
    assert not any("+ offload" in line for line in plan)


def test_rungs_already_on_are_skipped():
    fs = resolve("offload")
    d = dec(fs, "oom-device")
    assert d.features.source_of("offload") == "explicit"
    assert d.features.source_of("recompute") == "oom-retry-1"
    assert any("already on (explicit)" in s for s in d.skipped)


def test_explicit_features_are_never_removed_by_any_decision():
    fs = resolve("offload,recompute,prefix_cache")
    for cls in ("oom-device", "oom-host", "oom-ray", "oom-kv-cache", "network", "config-error", "success"):
        d = dec(fs, cls)
        assert {"offload", "recompute", "prefix_cache"} <= d.features.names(), cls


def test_max_oom_retries_bounds_the_ladder():
    fs = resolve("")
    assert dec(fs, "oom-device", max_oom=0).action == "stop"
    d1 = dec(fs, "oom-device", max_oom=1)
    assert dec(d1.features, "oom-device", oom_used=1, max_oom=1).action == "stop"


def test_kv_cache_lower_steps_down_to_a_floor_and_never_offloads():
    fs = resolve("")
    s = dict(S)
    seen = []
    other = {}
    for _ in range(10):
        d = dec(fs, "oom-kv-cache", {"kv_direction": "lower"}, other=other, settings=s, max_oom=10)
        assert not d.features.has("offload")
        if d.action != "retry":
            break
        seen.append(d.setting_changes["gpu_memory_utilization"])
        s.update(d.setting_changes)
        other[d.counter] = other.get(d.counter, 0) + 1
    assert seen[:3] == [0.75, 0.65, 0.55]
    assert min(seen) >= ladder.KV_FLOOR
    assert d.action == "stop" and d.suggestions


def test_kv_cache_raise_caps_at_ceiling():
    s = dict(S, gpu_memory_utilization=0.85)
    d = dec(resolve(""), "oom-kv-cache", {"kv_direction": "raise"}, settings=s)
    assert d.setting_changes == {"gpu_memory_utilization": 0.9}
    s["gpu_memory_utilization"] = 0.9
    assert dec(resolve(""), "oom-kv-cache", {"kv_direction": "raise"}, settings=s).action == "stop"


def test_kv_cache_cleanup_retries_once_unchanged():
    d = dec(resolve(""), "oom-kv-cache", {"kv_direction": "cleanup"})
    assert d.action == "retry" and d.setting_changes == {} and d.counter
    d2 = dec(resolve(""), "oom-kv-cache", {"kv_direction": "cleanup"}, other={d.counter: 1})
    assert d2.action == "stop"


@pytest.mark.parametrize("cls", ["oom-host", "oom-ray"])
def test_host_and_ray_oom_roll_back_ladder_offload_once(cls):
    fs = resolve("").add("offload", "oom-retry-1")
    d = dec(fs, cls)
    assert d.action == "retry" and not d.features.has("offload")
    d2 = dec(fs, cls, other={d.counter: 1})
    assert d2.action == "stop"
    assert any("do not add offload" in s for s in d2.suggestions)


@pytest.mark.parametrize("cls", ["oom-host", "oom-ray"])
def test_host_and_ray_oom_never_add_offload(cls):
    d = dec(resolve(""), cls)
    assert d.action == "stop" and not d.features.has("offload")
    d = dec(resolve("offload"), cls)  # explicit offload stays: a user choice
    assert d.action == "stop" and d.features.source_of("offload") == "explicit"


@pytest.mark.parametrize("cls", ["network", "hccl-timeout", "hang"])
def test_retry_once_classes(cls):
    d = dec(resolve(""), cls)
    assert d.action == "retry" and d.counter == cls and d.features == resolve("")
    assert dec(resolve(""), cls, other={cls: 1}).action == "stop"


@pytest.mark.parametrize(
    "cls", ["config-error", "data-error", "auth-error", "container-missing", "crash-other", "weird"]
)
def test_stop_classes(cls):
    d = dec(resolve(""), cls)
    assert d.action == "stop" and d.reason and "\n" not in d.reason


def test_success_and_non_fatal_auth():
    assert dec(resolve(""), "success").action == "done"
    assert dec(resolve(""), "auth-error", {"fatal": False}).action == "keep-running"


def test_decision_json_round_trips_features():
    from dapo_ops.core.features import FeatureSet

    d = dec(resolve("-offload"), "oom-device")
    j = d.to_json()
    assert FeatureSet.from_json(j) == d.features


@hsettings(max_examples=200, deadline=None)
@given(
    st.integers(1, 32768),
    st.integers(1, 65536),
    st.dictionaries(
        st.sampled_from(
            ["actor_rollout_ref.actor.ppo_max_token_len_per_gpu", "critic.ppo_max_token_len_per_gpu", "other"]
        ),
        st.integers(0, 100000),
    ),
)
def test_property_token_budget_invariant(prompt, resp, changes):
    s = {"max_prompt_length": prompt, "max_response_length": resp}
    out = ladder.keep_token_budgets(s, changes)
    for k, v in out.items():
        if "max_token_len" in k:
            assert v >= prompt + resp
        else:
            assert v == changes[k]


def test_the_ladders_token_budgets_are_kept_at_least_prompt_plus_response():
    """A second new user's trial: a run on the update-batch rung (ppo_max_token_len_per_gpu 10240, prompt 2048 +
    response 8192) stopped on a data error; `inv launch --resume R --max-prompt-length 4096` carried the rung's
    10240 (under ``token_budgets``, where the rungs put it) below the new 12288 and was refused."""
    from dapo_ops.control.launch.resume import ladder_changes

    actor, logp = (
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu",
        "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu",
    )
    rung = {"token_budgets": {actor: 10240, logp: 20480}, "memory_rungs": [{"rung": "update-batch"}]}
    out = ladder.keep_token_budgets({"max_prompt_length": 4096, "max_response_length": 8192}, rung)
    assert out["token_budgets"] == {actor: 12288, logp: 20480}, out
    assert out["memory_rungs"] == rung["memory_rungs"] and rung["token_budgets"][actor] == 10240  # input untouched
    ch, why = ladder_changes(
        {"setting_changes": rung},
        {"max_prompt_length": 4096, "max_response_length": 8192},
        {"max_prompt_length": "flag"},
    )
    assert why == "" and ch["token_budgets"][actor] == 12288, (ch, why)


@pytest.mark.parametrize(
    "cause,word",
    [
        ("tracker", "check SWANLAB_HOST (--swanlab-host"),
        ("hub", "HF_ENDPOINT"),
        ("ray-head", "Ray head"),
        (None, "HCCL"),
    ],
)
def test_a_network_failure_that_came_back_after_its_retry_names_what_to_check(cause, word):
    s = dict(S, run_id="20261129-150000-abcd")
    d = dec(resolve(""), "network", {"cause": cause} if cause else {}, other={"network": 1}, settings=s)
    assert d.action == "stop" and len(d.suggestions) == 2 and word in d.suggestions[0], d.suggestions
    # then the run's own resume (a second trial: a one-step-off hang retried and hung again had no command to paste)
    assert d.suggestions[1].startswith("then `inv launch --resume 20261129-150000-abcd` continues from the last")
    if cause == "tracker":
        assert (
            "HCCL" not in d.suggestions[0] and "--swanlab-mode offline" in d.suggestions[0]
        )  # issue 44: offline syncs


def test_the_stop_after_the_ladder_ran_dry_names_the_rungs_it_applied_and_no_change_already_made():
    """The suggestions of a stop read the settings the last attempt ran with (memory_rungs, token_budgets): the
    setting rungs count as rungs on, and a token budget the ladder already took to its floor is not suggested again
    (the new-user trial: 'memory rungs on: none' and 'lower ... toward 10240' after update-batch set it to 10240)."""
    floor = S["max_prompt_length"] + S["max_response_length"]
    ran = {
        **S,
        "framework": "fsdp",
        "mode": "dapo",
        "token_budgets": {"actor_rollout_ref.actor.ppo_max_token_len_per_gpu": floor},
        "memory_rungs": [
            {
                "rung": "update-batch",
                "phase": "update",
                "source": "oom-retry-1",
                "changes": {"token_budgets": {"actor_rollout_ref.actor.ppo_max_token_len_per_gpu": floor}},
            },
            {
                "rung": "offload-policy",
                "phase": "update",
                "source": "oom-retry-2",
                "changes": {"fsdp_offload_policy": True},
            },
        ],
        "fsdp_offload_policy": True,
    }
    d = dec(resolve(""), "oom-device", {"phase": "update", "step": 1, "total": 6}, oom_used=2, max_oom=2, settings=ran)
    assert d.action == "stop"
    on = next(s for s in d.reason.split("; ") if s.startswith("memory rungs on:"))
    assert "update-batch" in on and "offload-policy" in on and "none" not in on, on
    assert not any(s.startswith("lower the token budget") for s in d.suggestions), d.suggestions
    assert any(f"token budget already at its floor: ppo_max_token_len_per_gpu={floor}" in s for s in d.suggestions)
    # a budget still above the floor is suggested, from where it is
    d = dec(resolve(""), "oom-device", {"phase": "update"}, oom_used=2, max_oom=2, settings={**S, "mode": "dapo"})
    low = next(s for s in d.suggestions if s.startswith("lower the token budget"))
    assert f"toward {floor}" in low and " from " in low


@pytest.mark.parametrize(
    "cls, detail",
    [("hang", {"repeat": True}), ("error-storm", {}), ("config-error", {"cause": "hydra-override"})],
)
def test_every_stop_the_user_can_act_on_ends_with_the_runs_resume(cls, detail):
    """A hang that repeated and a storm with no frame stopped with no suggestion at all, while `inv status` pointed
    at the run's --resume command (a review): every such stop ends with ``then_resume``, the one wording."""
    d = dec(resolve(""), cls, detail, settings={**S, "run_id": "20261207-000000-abcd", "hosts": ["h1"]})
    assert d.action == "stop", d
    # a config error's fix is a setting: the resume must be given it (unchanged, it runs the same config again)
    fix = ", with the fix given as its flag or --override," if cls == "config-error" else ""
    assert d.suggestions[-1] == (
        f"then{fix} `inv launch -H h1 --resume 20261207-000000-abcd` continues from the last checkpoint (from the "
        "start if none was saved)"
    )


def test_a_diverged_stop_names_the_metric_and_the_bad_step_in_its_ending_line():
    """A new user's trial: "failed: the same training metric went bad again at the same step after one retry ...
    stopped at step 3/12" named neither the metric nor the bad step (4), which README.md promises."""
    from dapo_ops.agent.supervisor.record import ending_line
    from dapo_ops.core import health, ladder
    from dapo_ops.core.features import FeatureSet
    from dapo_ops.core.runstate import RunStatus

    flag = health.Flag("actor/grad_norm", 4, float("nan"), "non-finite", (0.35, 0.36))
    d = ladder.decide(FeatureSet(), "diverged", health.verdict_detail(flag, recurred=True, step=4), 0, 2, {}, {})
    assert d.action == "stop"
    line = ending_line(RunStatus.FAILED, d.reason, 3, 12)
    assert line == (
        "failed: diverged: grad_norm nan at step 4 (was 0.35, 0.36) again after one retry from a checkpoint before "
        "it: stopped at step 3/12"
    ), line
    # bad again at another step after its one retry: named the same way
    again = health.Flag("actor/pg_loss", 6, float("inf"), "non-finite")
    d = ladder.decide(FeatureSet(), "diverged", health.verdict_detail(again, step=6), 0, 2, {"diverged": 1}, {})
    assert d.action == "stop" and d.reason.startswith("diverged: pg_loss inf at step 6 "), d.reason


def test_a_diverged_stop_after_a_retry_from_scratch_says_so_and_names_a_keep_of_one():
    """A second new user's trial: MAX_CKPT_TO_KEEP=1 with a save every step; verl's rotation deleted global_step_3
    when it saved the bad step 4, so the retry trained from scratch (the supervisor's ``retried_from`` None), yet
    the stop said "after one retry from a checkpoint before it" and named no cause for the missing checkpoint."""
    from dapo_ops.core import health, ladder
    from dapo_ops.core.features import FeatureSet

    flag = health.Flag("actor/lr", 4, 1e30, "absurd lr")
    detail = dict(health.verdict_detail(flag, recurred=True, step=3), retried_from=None)
    d = ladder.decide(FeatureSet(), "diverged", detail, 0, 2, {}, {"max_actor_ckpt_to_keep": 1, "run_id": "R"})
    want = "again after one retry from the start (that retry found no complete checkpoint before step 4): stopped"
    assert d.action == "stop" and want in d.reason, d.reason
    assert any(s.startswith("keep 2 or more checkpoints (MAX_CKPT_TO_KEEP, now 1") for s in d.suggestions), d
    # a retry that did start from a checkpoint keeps the old words, and no keep suggestion
    d = ladder.decide(
        FeatureSet(), "diverged", dict(detail, retried_from=3), 0, 2, {}, {"max_actor_ckpt_to_keep": 1, "run_id": "R"}
    )
    assert "from a checkpoint before it" in d.reason and not any(s.startswith("keep 2") for s in d.suggestions)


def test_a_data_ran_out_stop_resumes_with_the_change_that_makes_the_data_last():
    """A new user's trial: the stop suggested `inv launch -H h1 --resume R` unchanged, which ran out of data again at
    once: the printed resume carries the epochs that feed the planned steps."""
    rid = "20261207-000000-abcd"
    detail = {"step": 6, "total": 10, "epochs": 3}
    d = dec(resolve(""), "data-ran-out", detail, settings={**S, "run_id": rid, "hosts": ["h1"], "steps": 10})
    assert d.action == "stop", d
    assert d.suggestions[-1].startswith(
        f"then `inv launch -H h1 --resume {rid} --override trainer.total_epochs=5` continues"
    ), d.suggestions


def test_a_stop_suggestion_reads_as_a_sentence_before_a_host_command():
    """A new user's trial read "a Ray left over from an earlier run (...) is stopped with on h1: `docker exec ...`":
    the host command's ``on h1:`` follows a label, never "with"."""
    ran = {**S, "exec_container": "verl", "hosts": ["h1"], "run_id": "r1"}
    d = dec(resolve(""), "crash-other", {"cause": "worker-died", "worker_pid": 42}, settings=ran)
    assert d.action == "stop"
    text = "\n".join(d.suggestions)
    assert "to stop it, on h1: `docker exec verl sh -c 'ray stop --force'`" in text, text
    assert "with on " not in text and "with `" not in text, text


def test_a_repeated_hangs_stop_names_its_common_frame_and_stack_dumps():
    """A new user's trial: the mid-run verdict named all_reduce and the dumps' path, the final one said only "the
    hang repeats at the same step with the same frames"."""
    dumps = "/runs/r1/stacks-attempt-2.txt"
    detail = {"cause": "collective", "frame": "all_reduce", "step": 7, "repeat": True, "stacks_file": dumps}
    d = dec(resolve(""), "hang", detail, settings={**S, "run_id": "r1"})
    assert d.action == "stop"
    assert "(all_reduce)" in d.reason and dumps in d.reason, d.reason
    assert "$" not in d.reason, d.reason
    assert any(dumps in s for s in d.suggestions), d.suggestions
