"""Issue 45 item 1: the plan picks the fastest configuration that fits (dapo_ops/core/fastfit.py).

Properties over random model shapes and runs (hypothesis): no chosen value puts its phase over the device with the
margin; the token budgets grow with the device memory; explicit settings and a learned memo's phases stay as
planned. The margin is recomputed from the holdout rows of bench/memory_fit.csv. The chosen keys compose against
verl 0.9.1's own yaml. A REAL run's record (tool-runs/j-learned, the H200) replayed through today's planner gets its
choices recorded in the spec, and the supervisor's command builder rebuilds the plan's argv from that spec, while
the old spec still rebuilds the old run's argv.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from dapo_ops.agent.supervisor import attempt
from dapo_ops.control import settings
from dapo_ops.control.launch import plan as planning
from dapo_ops.core import defaults, fastfit, features, memfit, overrides, profiles
from dapo_ops.agent import runfiles
from supervisor_helpers import logged_verl_argv

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "tests" / "fixtures" / "real-verl" / "tool-runs" / "j-learned"
QWEN3_1_7B = json.loads((ROOT / "bench" / "memory_fit_models.json").read_text())["qwen3-1.7b"]

PHASE = {
    "ppo_max_token_len_per_gpu": "update",
    "ppo_micro_batch_size_per_gpu": "update",
    "log_prob_max_token_len_per_gpu": "log-prob",
    "log_prob_micro_batch_size_per_gpu": "log-prob",
}


def spec_for(fw="fsdp", world=1, prompt=512, response=2048, batch=32, mini=8, n=8, tp=1, mode="dapo", **extra):
    s = {
        "n_gpus_per_node": world,
        "max_prompt_length": prompt,
        "max_response_length": response,
        "rollout_tp": 1,
        "train_batch_size": batch,
        "ppo_mini_batch_size": mini,
        "rollout_n": n,
        "trainer_tp": tp if fw == "megatron" else None,
        "trainer_pp": 1 if fw == "megatron" else None,
        "steps": 20,
        **extra,
    }
    return defaults.complete_spec({"framework": fw, "mode": mode, "profile": "0.9", "settings": s})


def applied(spec, c: fastfit.Choices) -> dict:
    return dict(spec, settings=dict(spec["settings"], **c.settings))


models = st.builds(
    lambda layers, hidden, ratio, heads, kv, vocab, tied: {
        "model_type": "qwen3",
        "num_hidden_layers": layers,
        "hidden_size": hidden,
        "intermediate_size": hidden * ratio,
        "num_attention_heads": heads,
        "num_key_value_heads": kv,
        "head_dim": 128,
        "vocab_size": vocab,
        "tie_word_embeddings": tied,
    },
    st.integers(4, 48),
    st.sampled_from([512, 1024, 2048, 3072, 4096]),
    st.integers(2, 4),
    st.sampled_from([8, 16, 32]),
    st.sampled_from([2, 4, 8]),
    st.sampled_from([32000, 151936]),
    st.booleans(),
)
runs = st.fixed_dictionaries(
    {
        "fw": st.sampled_from(["fsdp", "megatron"]),
        "world": st.sampled_from([1, 2, 8]),
        "prompt": st.sampled_from([256, 512, 2048]),
        "response": st.sampled_from([256, 2048, 8192]),
        "batch": st.sampled_from([8, 32, 64]),
        "n": st.sampled_from([1, 4, 8]),
    }
)
dynamic = st.booleans()
HS = dict(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def feats(dyn: bool, gc_explicit: bool = False) -> features.FeatureSet:
    spec = ("gradient_checkpointing" if gc_explicit else "") + ("" if dyn else ",-dynamic_batch")
    return features.resolve(spec.strip(","), False)


@hsettings(**HS)
@given(models, runs, dynamic, st.floats(16.0, 160.0))
def test_no_chosen_value_puts_its_phase_over_the_device_with_the_margin(cfg, run, dyn, gib):
    m = memfit.Model.from_config(cfg)
    spec = spec_for(**run, mini=run["batch"])
    c = fastfit.choose(m, spec, feats(dyn), gib)
    e = memfit.estimate(m, memfit.setup_from_spec(applied(spec, c), c.features, gib))
    for ch in c.chosen:
        phases = [PHASE[ch.name]] if ch.name in PHASE else []
        if ch.name == "gpu_memory_utilization":
            phases = ["rollout-init", "generation", "weight-sync"]
        if ch.name == "gradient_checkpointing":
            phases = ["update"]
        for p in phases:
            assert e.phases[p] * (1 + fastfit.FIT_MARGIN) <= gib + 1e-9, (ch, p, e.phases[p], gib)
    if "gpu_memory_utilization" in c.settings:
        assert 0.4 <= c.settings["gpu_memory_utilization"] <= 0.9
    for k, v in (c.settings.get("token_budgets") or {}).items():
        assert v >= run["prompt"] + run["response"], k  # verl/utils/seqlen_balancing.py:384-386


@hsettings(**HS)
@given(models, runs, dynamic, st.floats(16.0, 120.0), st.floats(1.0, 40.0))
def test_the_budgets_grow_with_the_device_memory(cfg, run, dyn, gib, more):
    """With gradient checkpointing the user's (so the update's activations per token are fixed), a larger device
    never gets a smaller budget or micro-batch."""
    m = memfit.Model.from_config(cfg)
    spec = spec_for(**run, mini=run["batch"])
    fs = feats(dyn, gc_explicit=True)
    small, large = (fastfit.choose(m, spec, fs, g) for g in (gib, gib + more))
    for name in PHASE:
        a = {x.name: x.value for x in small.chosen}.get(name)
        b = {x.name: x.value for x in large.chosen}.get(name)
        if a is not None:
            assert b is not None and b >= a, (name, a, b)


@hsettings(**HS)
@given(models, runs, st.floats(16.0, 160.0))
def test_explicit_settings_are_never_changed(cfg, run, gib):
    m = memfit.Model.from_config(cfg)
    seq = run["prompt"] + run["response"]
    ov = [
        f"actor_rollout_ref.actor.ppo_max_token_len_per_gpu={seq}",
        f"actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu={seq}",
        "actor_rollout_ref.rollout.max_num_seqs=17",
        "actor_rollout_ref.rollout.max_num_batched_tokens=12345",
    ]
    spec = spec_for(**run, mini=run["batch"], gpu_memory_utilization=0.55, extra_overrides=ov)
    fs = feats(True, gc_explicit=True)
    c = fastfit.choose(m, spec, fs, gib, given=["gpu_memory_utilization"])
    assert c.chosen == [] and c.settings == {} and c.features == fs
    assert {k.name for k in c.kept} == {
        "ppo_max_token_len_per_gpu",
        "log_prob_max_token_len_per_gpu",
        "gpu_memory_utilization",
        "max_num_seqs",
        "max_num_batched_tokens",
        "gradient_checkpointing",  # every knob has its line (trial): "you set it (--features ...)"
    }
    assert next(k for k in c.kept if k.name == "gradient_checkpointing").why.startswith("you set it")
    # the argv carries the user's values, last (core/overrides.py verl_argv)
    argv = overrides.verl_argv(applied(spec, c), c.features)
    assert argv[-4:] == ov and "actor_rollout_ref.rollout.gpu_memory_utilization=0.55" in argv


@hsettings(**HS)
@given(models, runs, st.floats(16.0, 160.0))
def test_a_learned_memos_phases_stay_as_planned(cfg, run, gib):
    """A used memo that ran out in the update and the weight sync: no budget, checkpointing or share is chosen for
    them; the log-prob forward is still chosen."""
    m = memfit.Model.from_config(cfg)
    spec = spec_for(**run, mini=run["batch"])
    c = fastfit.choose(m, spec, feats(True), gib, ran_out=["update", "weight-sync"])
    names = {x.name for x in c.chosen}
    assert not names & {"ppo_max_token_len_per_gpu", "gradient_checkpointing", "gpu_memory_utilization"}
    assert not names & {"max_num_seqs", "max_num_batched_tokens"}
    assert c.features.has("gradient_checkpointing")
    assert fastfit.ACTOR_BUDGET not in (c.settings.get("token_budgets") or {}) or (
        c.settings["token_budgets"][fastfit.ACTOR_BUDGET]
        == (spec["settings"].get("token_budgets") or {}).get(fastfit.ACTOR_BUDGET)
    )


def test_the_margin_is_the_largest_underestimate_of_the_holdout_rows():
    """FIT_MARGIN: measured / estimated - 1 over the holdout rows of bench/memory_fit.csv that measured a peak
    (``oom`` rows are lower bounds), rounded up to the whole percent; a new holdout row that the estimate
    undershoots by more fails here."""
    rows = list(csv.DictReader((ROOT / "bench" / "memory_fit.csv").open()))
    hold = [r for r in rows if r["split"] == "holdout" and r["measure"] != "oom"]
    worst = max(float(r["measured_gib"]) / float(r["estimate_gib"]) - 1 for r in hold)
    assert worst <= fastfit.FIT_MARGIN < worst + 0.01, worst


def test_the_h200_one_device_shape_of_the_speed_table_chooses_every_knob_with_its_why():
    """gpu/o-speed.sh's shape: Qwen3-1.7B, prompt 512, response 2048, 32 prompts x 8 on one H200 (139.8 GiB)."""
    m = memfit.Model.from_config(QWEN3_1_7B)
    c = fastfit.choose(m, spec_for(), feats(True), 139.8)
    got = {x.name: x for x in c.chosen}
    assert set(got) == {
        "gradient_checkpointing",
        "ppo_max_token_len_per_gpu",
        "log_prob_max_token_len_per_gpu",
        "gpu_memory_utilization",
        "max_num_seqs",
        "max_num_batched_tokens",
    }
    # 32 prompts x 8, twice: colocate_async keeps a warm-up batch in flight beside the step's own
    assert got["ppo_max_token_len_per_gpu"].value > 2 * 2560 and got["max_num_seqs"].value == 512
    assert got["ppo_max_token_len_per_gpu"].line().startswith("ppo_max_token_len_per_gpu ")
    assert "of 139.8 GiB (margin 9 %)" in got["ppo_max_token_len_per_gpu"].why
    assert not c.features.has("gradient_checkpointing")


@pytest.mark.parametrize(
    "mode, trainer_mode, world, rollout_gpus, want",
    [
        ("dapo", "async", 1, None, 2 * 32 * 8),  # colocate_async: the step's batch + one warm-up batch
        ("dapo", "sync", 1, None, 32 * 8),  # sync: one batch
        ("dapo", "async", 4, None, 2 * 32 * 8 // 4),  # four replicas share the in-flight batches
        ("one-step-off", "async", 2, 1, 2 * 32 * 8),  # separate_async: the rollout pool's one replica
    ],
)
def test_max_num_seqs_is_what_a_replica_has_in_flight_in_the_trainer_mode(
    mode, trainer_mode, world, rollout_gpus, want
):
    """verl 0.9.1's async V1 modes submit ``num_warmup_batches`` (the plan's 1) batches of prompts ahead and one more
    each step (``trainer_base.py`` ``_add_async_warmup_batches`` / ``prepare_step``), aborting what is unfinished at
    the sample's end and resuming it after the weight update: vLLM decodes both batches at once. The fit's
    ``max_num_seqs`` covers them (a cap of one batch would queue the prefetched one behind the step's), and the
    share is sized for that many sequences; ``--mode sync`` has one batch in flight."""
    extra = {"trainer_mode": trainer_mode}
    if rollout_gpus:
        extra.update(trainer_gpus=world - rollout_gpus, rollout_gpus=rollout_gpus, ppo_mini_batch_size=8)
    spec = spec_for(world=world, mode=mode, **extra)
    m = memfit.Model.from_config(QWEN3_1_7B)
    c = fastfit.choose(m, spec, feats(True), 139.8)
    assert c.settings["rollout_max_num_seqs"] == want
    why = {x.name: x.why for x in c.chosen}["max_num_seqs"]
    assert ("warm-up prefetch" in why) == (trainer_mode == "async"), why
    assert profiles.v1_overrides(profiles.entry("0.9", mode, "fsdp"), trainer_mode).count(
        (f"trainer.v1.{'separate' if mode == 'one-step-off' else 'colocate'}_async.num_warmup_batches", 1)
    ) == (trainer_mode == "async")


@pytest.mark.parametrize(
    "trainer_mode, extra, want",
    [
        ("async", ["trainer.v1.colocate_async.num_warmup_batches=2"], 3 * 32 * 8),
        ("async", ["trainer.v1.colocate_async.num_warmup_batches=0.5"], (32 + 16) * 8),
        ("async", ["trainer.v1.colocate_async.num_warmup_batches=0"], 32 * 8),
        ("sync", ["algorithm.filter_groups.max_inflight_gen_batches=3"], 3 * 32 * 8),
        ("sync", ["algorithm.filter_groups.max_inflight_gen_batches=3", "algorithm.filter_groups.enable=False"], 256),
    ],
)
def test_the_users_in_flight_keys_size_max_num_seqs(trainer_mode, extra, want):
    """The two verl keys that change what is in flight, when the user overrides them (the override comes after the
    plan's and wins): the async warm-up ``num_warmup_batches`` (``floor(x * train_batch_size)`` prompts,
    ``trainer_base.py:624-651``), and sync DAPO's ``max_inflight_gen_batches`` (``replay_buffer.py:445-484``; only
    with ``filter_groups`` on)."""
    spec = spec_for(trainer_mode=trainer_mode, extra_overrides=extra)
    c = fastfit.choose(memfit.Model.from_config(QWEN3_1_7B), spec, feats(True), 139.8)
    assert c.settings["rollout_max_num_seqs"] == want


def test_the_chosen_keys_compose_against_verl_091(tmp_path):
    sys.path.insert(0, str(ROOT / "sandbox"))
    from fetch_verl_config import verl_config_root
    from dapo_ops.control.preflight import compose_check as validate

    root = str(verl_config_root())
    m = memfit.Model.from_config(QWEN3_1_7B)
    for fw, dyn in (("fsdp", True), ("fsdp", False), ("megatron", True)):
        spec = dict(spec_for(fw=fw), run_id="r1", run_dir="/verl/dapo_runs/r1", workdir="/verl", accelerator="gpu")
        spec["settings"].update(
            model_path="/m", train_file="/d/t.parquet", val_file="/d/v.parquet", ckpt_dir="/verl/dapo_runs/r1/ckpt"
        )
        c = fastfit.choose(m, spec, feats(dyn), 139.8)
        argv = overrides.build_command(applied(spec, c), c.features)
        assert "actor_rollout_ref.rollout.max_num_seqs=512" in argv
        assert validate.compose_check(argv, root) == [], (fw, dyn)


# the REAL record -------------------------------------------------------------------------------------------------
H200_MIB = 143771


def gpu_plan(run_id: str, memory: dict, flags: dict | None = None, env: dict | None = None):
    """gpu/lib.sh's bare H200 host planned by today's planner (tests/test_learned_real.py's recipe by default)."""
    from test_learned_real import ENV, FLAGS, HOST

    st_ = settings.resolve(FLAGS if flags is None else flags, ENV if env is None else env, {})
    inputs = planning.PlanInputs(settings=st_, host=HOST, mode="dapo", run_id=run_id, swanlab_logger=False)
    return planning.make_plan(planning.draft_plan(inputs), memory)


def real_plan(run_id: str):
    from test_learned_real import ENV, FLAGS, HOST

    st_ = settings.resolve(FLAGS, ENV, {})
    cfg = json.loads((RUN / "model-config.json").read_text())
    mem = {"model_config": cfg, "device_gib": H200_MIB / 1024, "device_mib": H200_MIB, "device_name": "NVIDIA H200"}
    spec = runfiles.read_spec(RUN)
    inputs = planning.PlanInputs(
        settings=st_,
        host=HOST,
        mode="dapo",
        run_id=run_id,
        swanlab_logger=False,
        extra_overrides=list(spec["settings"]["extra_overrides"]),
    )
    return planning.make_plan(planning.draft_plan(inputs), dict(mem, memos=[]))


def test_a_real_run_replayed_through_todays_planner_records_its_choices_and_rebuilds_from_them():
    """tool-runs/j-learned (Qwen3-4B's shape with 48 layers on the H200, the default share 0.6 ran out in the weight
    sync): today's planner chooses a share that fits instead (no estimate rung), records every choice in
    ``spec["fit"]``, and the supervisor's command builder rebuilds the plan's argv from that spec; the run's OWN
    recorded spec still rebuilds the argv the real supervisor logged."""
    p = real_plan("20261207-000000-0001")
    fit = p.spec["fit"]
    assert fit["margin"] == fastfit.FIT_MARGIN and fit["device_gib"] == round(H200_MIB / 1024, 2)
    names = [c["name"] for c in fit["choices"]]
    assert "gpu_memory_utilization" in names and "ppo_max_token_len_per_gpu" in names
    share = next(c for c in fit["choices"] if c["name"] == "gpu_memory_utilization")["value"]
    assert share < 0.6 and "setting_changes" not in p.spec  # fits as chosen: the estimate adds no rung
    assert f"actor_rollout_ref.rollout.gpu_memory_utilization={share}" in p.argv
    for c in fit["choices"]:
        assert any(ln == f"fit: {c['name']} {c['value']}: {c['why']}" for ln in p.memory)
    # the spec is self-contained: the supervisor's builder (attempt 1) gives the plan's argv
    spec = json.loads(json.dumps(p.spec))
    fs = features.FeatureSet.from_json(spec["features"], spec.get("disabled_features") or [])
    assert overrides.build_command(spec, fs) == list(p.argv)
    # the estimate of the plan as chosen fits the H200 with the margin
    m = memfit.Model.from_config(json.loads((RUN / "model-config.json").read_text()))
    e = memfit.estimate(m, memfit.setup_from_spec(spec, fs, H200_MIB / 1024))
    assert e.peak_gib * (1 + fastfit.FIT_MARGIN) <= H200_MIB / 1024
    # the old record, replayed from its own spec, still rebuilds its old argv (no fit key: nothing new emitted)
    old = runfiles.read_spec(RUN)
    assert "fit" not in old
    fs_old = features.FeatureSet.from_json(old.get("features") or [], old.get("disabled_features") or ())
    argv = attempt.build_argv(None, attempt.attempt_spec(old, 1), fs_old, {})
    real = dict(a.strip("'").split("=", 1) for a in logged_verl_argv(RUN, 1) if "=" in a)
    knobs = [k for k in real if k.rsplit(".", 1)[-1] in KNOB_TAILS]
    assert knobs and all(f"{k}={real[k]}" in argv for k in knobs)
    vllm = [a for a in argv if a.split("=", 1)[0].endswith(("max_num_seqs", "max_num_batched_tokens"))]
    assert vllm == [a for a in old["settings"]["extra_overrides"] if a in vllm]  # only the run's own --override
    # ... which today's plan keeps as the user's (gpu/lib.sh passes max_num_seqs=64)
    assert any(k["name"] == "max_num_seqs" and "--override" in k["why"] for k in fit["kept"])


KNOB_TAILS = {
    "gpu_memory_utilization",
    "ppo_max_token_len_per_gpu",
    "log_prob_max_token_len_per_gpu",
    "enable_gradient_checkpointing",
    "ppo_micro_batch_size_per_gpu",
    "log_prob_micro_batch_size_per_gpu",
}


@pytest.mark.parametrize("warn", [True, False])
def test_memory_fit_warn_reports_the_choices_without_applying_them(warn):
    from test_learned_real import ENV

    cfg = json.loads((RUN / "model-config.json").read_text())
    env = dict(ENV, MEMORY_FIT="warn") if warn else ENV
    p = gpu_plan("20261207-000000-0002", {"model_config": cfg, "device_gib": H200_MIB / 1024}, env=env)
    fit = [ln for ln in p.memory if ln.startswith("fit: ")]
    assert fit
    assert ("fit" in p.spec) is not warn
    assert all(ln.endswith("(MEMORY_FIT=warn: not applied)") for ln in fit) is warn


# the rollout share against vLLM's preemption (issue 45 item 1 follow-up) ------------------------------------------
def _kv_bytes(cfg: dict, seq: int) -> int:
    """One sequence's bf16 KV cache at full length in vLLM's 16-token blocks (keys + values of every layer)."""
    return -(-seq // 16) * 16 * 2 * cfg["num_hidden_layers"] * cfg["num_key_value_heads"] * cfg["head_dim"] * 2


def _rollout_fits(m, spec, c, gib, share) -> bool:
    trial = dict(spec, settings={**spec["settings"], **c.settings, "gpu_memory_utilization": share})
    e = memfit.estimate(m, memfit.setup_from_spec(trial, c.features, gib))
    return all(
        e.phases[p] * (1 + fastfit.FIT_MARGIN) <= gib + 1e-9 for p in ("rollout-init", "generation", "weight-sync")
    )


@hsettings(**HS)
@given(models, runs, dynamic, st.floats(16.0, 160.0))
def test_the_share_holds_max_num_seqs_at_full_length_with_the_margin_or_is_the_largest_that_fits(cfg, run, dyn, gib):
    """vLLM preempts the newest running sequence when the KV cache is short and recomputes it from its prompt
    (vllm/v1/core/sched/scheduler.py Scheduler.schedule): a share chosen down to the bare need makes generation
    slower. So the chosen share holds vLLM's weights + max_num_seqs sequences at the full prompt + response, raised
    by the margin, unless no larger share fits the rollout-side phases (or it is the ladder's ceiling 0.9)."""
    m = memfit.Model.from_config(cfg)
    spec = spec_for(**run, mini=run["batch"])
    c = fastfit.choose(m, spec, feats(dyn), gib)
    if "gpu_memory_utilization" not in c.settings:
        return  # no share fits: the line says it falls back
    u, nseq = c.settings["gpu_memory_utilization"], c.settings["rollout_max_num_seqs"]
    # a replica per device: its responses in flight (the step's batch + colocate_async's warm-up batch), all at once
    assert nseq == -(-profiles.prompts_in_flight("colocate_async", run["batch"], {}) * run["n"] // run["world"])
    need = (1 + fastfit.FIT_MARGIN) * (
        2 * memfit.param_count(m) + nseq * _kv_bytes(cfg, run["prompt"] + run["response"])
    )
    if u * gib * memfit.GIB < need:
        assert u >= 0.9 - 1e-9 or not _rollout_fits(m, spec, c, gib, round(u + 0.05, 2)), (u, need / memfit.GIB)
        why = {x.name: x.why for x in c.chosen}["max_num_seqs"]
        assert "beyond that vLLM preempts" in why or "vLLM refuses to start" in why


def test_the_speed_shape_gets_the_least_share_whose_kv_cache_holds_the_batch_with_the_margin():
    """gpu/o-speed.sh's shape at the runbook batch (32 x 8 = 256 responses of 512 + 2048 tokens) on one H200, one
    batch in flight (``--mode sync``): 0.6, not the 0.55 whose KV cache would hold the 256 responses only without the
    margin (vLLM would preempt when the estimate of vLLM's own memory is short by more than a few GiB)."""
    m = memfit.Model.from_config(QWEN3_1_7B)
    c = fastfit.choose(m, spec_for(trainer_mode="sync"), feats(True), 139.8)
    u = c.settings["gpu_memory_utilization"]
    kv = 256 * _kv_bytes(QWEN3_1_7B, 2560)
    weights = 2 * memfit.param_count(m)
    assert u == 0.6
    assert u * 139.8 * memfit.GIB >= (1 + fastfit.FIT_MARGIN) * (weights + kv)
    assert 0.55 * 139.8 * memfit.GIB >= weights + kv  # enough without the margin: the margin decided it
    assert 0.55 * 139.8 * memfit.GIB < (1 + fastfit.FIT_MARGIN) * (weights + kv)
    why = {x.name: x.why for x in c.chosen}
    assert "none preempted" in why["max_num_seqs"] and "preempt and recompute" in why["gpu_memory_utilization"]


def test_a_users_max_num_seqs_sets_the_kv_cache_the_share_holds():
    """``--override actor_rollout_ref.rollout.max_num_seqs=64``: the share is sized for 64 sequences at once, not for
    the 256 the batch has (vLLM never runs more than max_num_seqs at once)."""
    m = memfit.Model.from_config(QWEN3_1_7B)
    spec = spec_for(extra_overrides=["actor_rollout_ref.rollout.max_num_seqs=64"])
    c = fastfit.choose(m, spec, feats(True), 139.8)
    assert "rollout_max_num_seqs" not in c.settings
    assert {x.name: x.value for x in c.kept}["max_num_seqs"] == 64
    assert c.settings["gpu_memory_utilization"] == 0.4  # 64 x 2560 tokens need ~20 GiB: the ladder's floor


def _feature_row(text: str, name: str) -> list[str]:
    [row] = [ln for ln in text.splitlines() if ln.strip().startswith(name + " ")]
    return [c.strip() for c in row.split("│")]


def test_the_plans_features_table_names_the_fit_as_the_source_of_what_it_turned_off():
    """The dry-run table must not contradict the fit: gradient checkpointing turned off by the fit shows ``off`` with
    the fit's why as its source (not ``off | default``); a dry run (device memory unknown: the fit is only reported)
    shows it on, pointing at the ``fit:`` line."""
    from dapo_ops.control.launch import dryrun

    p = real_plan("20261207-000000-0003")
    assert not p.features.has("gradient_checkpointing")
    row = _feature_row(dryrun.render_text(p, width=400), "gradient_checkpointing")
    assert row[2] == "off" and row[3].startswith("fit: the update fits without it at ppo_max_token_len_per_gpu "), row
    assert "actor_rollout_ref.model.enable_gradient_checkpointing=False" in p.argv

    dry = gpu_plan("20261207-000000-0004", {"model_config": QWEN3_1_7B, "device_gib": None})  # 80 GiB assumed
    assert dry.features.has("gradient_checkpointing") and "fit" not in dry.spec
    assert any(ln.startswith("fit: gradient_checkpointing off: ") and "not applied" in ln for ln in dry.memory)
    row = _feature_row(dryrun.render_text(dry, width=400), "gradient_checkpointing")
    assert row[2] == "on" and "inv launch's fit may change it" in row[3], row


def test_a_holdout_row_of_a_fitted_run_re_estimates_to_the_plans_own_estimate(tmp_path):
    """gpu/p-holdout.sh's rows come from runs at the plan's own choices (budgets, share, checkpointing off):
    bench/holdout_rows.py writes the run's budgets into ``update_tokens`` / ``logprob_tokens`` and its share and
    checkpointing into ``util`` / ``gc``, so bench/memory_fit.py re-estimates the row to exactly what the plan
    estimated (without the two columns it would assume the old 2x / 3x budgets and miss the run by a factor)."""
    from conftest import repo_module
    from test_learned_real import ENV, FLAGS

    hr, bench = repo_module("bench/holdout_rows.py"), repo_module("bench/memory_fit.py")
    m_dir = "/tmp/p/qwen3-1.7b-p512"
    env = {k: v for k, v in ENV.items() if k not in ("MICRO_BATCH_SIZE",)} | {"MAX_RESPONSE_LENGTH": "2048"}
    flags = dict(FLAGS, model=f"{m_dir}/model", steps=1)
    p = gpu_plan("20261207-000000-0005", {"model_config": QWEN3_1_7B, "device_gib": 139.8}, flags, env)
    spec = json.loads(json.dumps(p.spec))
    budgets = spec["settings"]["token_budgets"]
    assert not p.features.has("gradient_checkpointing") and spec["settings"]["gpu_memory_utilization"] == 0.4
    run = tmp_path / "p31"
    run.mkdir()
    (run / "spec.json").write_text(json.dumps(spec))
    (run / "run.json").write_text(json.dumps({"status": "succeeded", "step": 1, "features": spec["features"]}))
    (run / "train.log").write_text("step:1 - actor/perf/max_memory_allocated_gb:120.00 - x:1\n")
    [line] = hr.rows_of(run, {}, 139.8, "H200", "gpu/p-holdout.sh")
    header = (ROOT / "bench" / "memory_fit.csv").read_text().splitlines()[0].split(",")
    row = dict(zip(header, next(csv.reader([line]))))
    assert row["model"] == "qwen3-1.7b" and row["config"] == "p31-qwen3-1.7b-r2048" and row["gc"] == "0"
    assert row["update_tokens"] == str(budgets[fastfit.ACTOR_BUDGET]) != str(2 * 2560)
    assert row["source"].startswith("real-verl gpu/p-holdout.sh run 20261207-000000-0005 (succeeded, step 1/1)")
    [res] = bench.evaluate([row], json.loads((ROOT / "bench" / "memory_fit_models.json").read_text()))
    fs = features.FeatureSet.from_json(spec["features"], spec.get("disabled_features") or [])
    want = memfit.estimate(memfit.Model.from_config(QWEN3_1_7B), memfit.setup_from_spec(spec, fs, 139.8))
    assert res["estimate"] == round(want.actor_alloc_gib, 2)


def test_a_value_the_user_set_is_never_called_not_applied():
    """A value the user set applies whether the fit's choices do or not (a dry run, MEMORY_FIT=warn): its line
    says "you set" and nothing else; the chosen values say they are only reported (a new-user trial read "you set
    gpu_memory_utilization ... (not applied, inv launch chooses on the real one)")."""
    from test_learned_real import ENV

    cfg = json.loads((RUN / "model-config.json").read_text())
    env = dict(ENV, MEMORY_FIT="warn", GPU_MEMORY_UTILIZATION="0.5")
    p = gpu_plan("20261207-000000-0003", {"model_config": cfg, "device_gib": H200_MIB / 1024}, env=env)
    fit = [ln for ln in p.memory if ln.startswith("fit: ")]
    kept = [ln for ln in fit if "gpu_memory_utilization" in ln]
    assert kept and all("you set" in ln and "not applied" not in ln for ln in kept), kept
    chosen = [ln for ln in fit if "you set" not in ln]
    assert chosen and all(ln.endswith("(MEMORY_FIT=warn: not applied)") for ln in chosen), chosen


@pytest.mark.parametrize("value", ["abc", "null", "1e3", "64.7", "${data.train_batch_size}", "0", "-5"])
@pytest.mark.parametrize(
    "key",
    [
        "actor_rollout_ref.rollout.max_num_seqs",
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu",
        "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu",
    ],
)
def test_an_override_the_fit_cannot_read_as_a_count_stays_the_users_without_a_traceback(key, value):
    """A new user's ``--override actor_rollout_ref.rollout.max_num_seqs=abc`` (or an interpolation, null, a float)
    ended the dry run in ``ValueError: invalid literal for int()``: the fit keeps the value as the user's (verl and
    Hydra judge it at the start) and estimates from verl's default."""
    spec = spec_for(extra_overrides=[f"{key}={value}"])
    c = fastfit.choose(memfit.Model.from_config(QWEN3_1_7B), spec, feats(True), 139.8)
    knob = key.rsplit(".", 1)[1]
    kept = {x.name: x for x in c.kept}
    assert knob in kept and "you set it" in kept[knob].why, [x.line() for x in c.kept]
    assert knob not in {x.name for x in c.chosen}


@pytest.mark.parametrize("value, gib", [("False", 40.0), ("True", 139.8)])
def test_an_override_of_gradient_checkpointing_is_what_the_update_is_estimated_with(value, gib):
    """``--override actor_rollout_ref.model.enable_gradient_checkpointing=False`` comes last in verl's argv and wins:
    on a 40 GiB device the fit kept checkpointing on and sized the update's token budget for it (9216), which verl
    then ran without checkpointing (an OOM waiting at step 1); ``=True`` on an H200, where the fit turns it off, got
    the line "gradient_checkpointing off" and budgets sized without it. Now the override is the feature the estimate
    sees, kept with its line, never chosen over."""
    m = memfit.Model.from_config(QWEN3_1_7B)
    ov = [f"actor_rollout_ref.model.enable_gradient_checkpointing={value}"]
    c = fastfit.choose(m, spec_for(batch=8, mini=2, extra_overrides=ov), feats(True), gib)
    plain = fastfit.choose(m, spec_for(batch=8, mini=2), feats(True), gib)
    assert "gradient_checkpointing" not in {x.name for x in c.chosen}
    kept = {x.name: x for x in c.kept}["gradient_checkpointing"]
    assert kept.value == ("on" if value == "True" else "off") and "you set it with --override" in kept.why
    assert c.features.has("gradient_checkpointing") == (value == "True")
    budget = fastfit.ACTOR_BUDGET
    if value == "False":  # the plain plan keeps it on here; without it a token costs more: a smaller budget
        assert plain.features.has("gradient_checkpointing")
        assert c.settings["token_budgets"][budget] < plain.settings["token_budgets"][budget]
    else:  # the plain plan turns it off here and budgets for that; with it on the budget is not that one's
        assert not plain.features.has("gradient_checkpointing")


def test_a_kept_line_shows_the_users_value_and_what_the_estimate_goes_on_with():
    """``--override actor_rollout_ref.rollout.max_num_batched_tokens=4096`` printed ``max_num_batched_tokens 8192: you
    set it with ...=4096`` (the value the estimate used, not the user's); a budget of 0 printed its default."""
    m = memfit.Model.from_config(QWEN3_1_7B)
    ov = [
        "actor_rollout_ref.rollout.max_num_batched_tokens=4096",
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=0",
    ]
    kept = {x.name: x for x in fastfit.choose(m, spec_for(extra_overrides=ov), feats(True), 139.8).kept}
    assert kept["max_num_batched_tokens"].line().startswith("max_num_batched_tokens 4096: you set it with --override")
    assert "(the estimate goes on with 8192)" in kept["max_num_batched_tokens"].why
    assert kept["ppo_max_token_len_per_gpu"].value == "0"
    assert "the estimate goes on with" in kept["ppo_max_token_len_per_gpu"].why


def test_a_kv_cache_that_holds_no_full_sequence_says_vllm_refuses_to_start():
    """vLLM raises "To serve at least one request with the models's max seq len ..." at start when not one sequence
    of max_model_len fits its KV cache (vllm/v1/core/kv_cache_utils.py): the line said "beyond that vLLM preempts"."""
    m = memfit.Model.from_config(QWEN3_1_7B)
    spec = spec_for(response=40000, extra_overrides=["actor_rollout_ref.rollout.max_num_seqs=64"])
    spec["settings"]["gpu_memory_utilization"] = 0.05
    c = fastfit.choose(m, spec, feats(True), 79.2, given=("gpu_memory_utilization",))
    why = {x.name: x.why for x in c.kept}["max_num_seqs"]
    assert "holds no sequence" in why and "vLLM refuses to start" in why, why


def test_max_num_batched_tokens_at_least_max_num_seqs_says_why():
    """A huge batch: max_num_batched_tokens is max_num_seqs (vLLM requires it), not "the prompts of ... (at most
    32768)" above 32768."""
    m = memfit.Model.from_config(QWEN3_1_7B)
    c = fastfit.choose(m, spec_for(batch=4000, mini=4000), feats(True), 139.8)
    got = {x.name: x for x in c.chosen}["max_num_batched_tokens"]
    assert got.value == c.settings["rollout_max_num_seqs"] > fastfit.PREFILL_CAP
    assert "vLLM needs max_num_batched_tokens >= max_num_seqs" in got.why


# packed attention: FSDP + remove_padding without flash_attn (sdpa under a block-diagonal mask) ------------------------
SPEED_RUN = ROOT / "tests" / "fixtures" / "real-verl" / "tool-runs" / "o-speed-tool1-h100"


@pytest.mark.parametrize("dyn", [True, False])
def test_without_flash_attn_the_budgets_stop_at_the_packed_cap_and_with_it_they_do_not(dyn):
    """sdpa attends a packed micro-batch whole: the largest budget that fits is the slowest. The cap holds for the
    update and the log-prob forward (tokens, or sequences x prompt + response without dynamic batch); with flash
    attention (varlen) or on Megatron (TE's fused attention, per sequence) the budgets are the largest that fit."""
    m = memfit.Model.from_config(QWEN3_1_7B)
    spec = spec_for(batch=8, mini=2)  # the speed run's shape: 8 x 8, prompt 512, response 2048
    sdpa = features.resolve("-flash_attn" + ("" if dyn else ",-dynamic_batch"), False)
    c = fastfit.choose(m, spec, sdpa, 79.65)
    got = {x.name: x for x in c.chosen}
    seq = 512 + 2048
    if dyn:
        upd, lp = got["ppo_max_token_len_per_gpu"], got["log_prob_max_token_len_per_gpu"]
        assert upd.value == lp.value == max(seq, fastfit.PACKED_TOKENS) == 4096
    else:
        upd, lp = got["ppo_micro_batch_size_per_gpu"], got["log_prob_micro_batch_size_per_gpu"]
        assert upd.value == lp.value == 1  # 2 x 2560 tokens > 4096: one sequence per micro-batch
    for x in (upd, lp):
        assert x.why.startswith("attention without flash (sdpa / eager) takes the packed micro-batch whole")
    assert not c.features.has("gradient_checkpointing")  # fits without it at the cap: nothing lost
    want = "(the packed-attention cap)" if dyn else "(>= the default 1)"  # micro-batch 1 is the plan's default
    assert want in got["gradient_checkpointing"].why
    flash = fastfit.choose(m, spec, feats(dyn), 79.65)
    fgot = {x.name: x.value for x in flash.chosen}
    assert fgot[upd.name] > upd.value and fgot[lp.name] > lp.value
    meg = fastfit.choose(m, spec_for(fw="megatron", batch=8, mini=2), sdpa, 79.65)
    assert {x.name: x.value for x in meg.chosen}[upd.name] > upd.value


def test_a_sequence_longer_than_the_packed_cap_is_one_micro_batch():
    """prompt + response above PACKED_TOKENS: the budget is one sequence (verl refuses less, seqlen_balancing.py)."""
    m = memfit.Model.from_config(QWEN3_1_7B)
    spec = spec_for(batch=8, mini=2, prompt=1024, response=8192)
    c = fastfit.choose(m, spec, features.resolve("-flash_attn", False), 139.8)
    got = {x.name: x.value for x in c.chosen}
    assert got["ppo_max_token_len_per_gpu"] == got["log_prob_max_token_len_per_gpu"] == 1024 + 8192


@hsettings(**HS)
@given(models, runs, dynamic, st.floats(16.0, 160.0))
def test_under_packed_attention_no_budget_passes_the_cap(cfg, run, dyn, gib):
    m = memfit.Model.from_config(cfg)
    spec = spec_for(**run, mini=run["batch"])
    seq = run["prompt"] + run["response"]
    fs = features.resolve("-flash_attn" + ("" if dyn else ",-dynamic_batch"), False)
    c = fastfit.choose(m, spec, fs, gib)
    assert fastfit.packed_attention(spec["framework"], fs) is (run["fw"] == "fsdp")
    cap = max(seq, fastfit.PACKED_TOKENS) if run["fw"] == "fsdp" else 10**9  # Megatron: TE's fused, per sequence
    for ch in c.chosen:
        if ch.name.endswith("max_token_len_per_gpu"):
            assert seq <= ch.value <= -(-cap // fastfit.BUDGET_STEP) * fastfit.BUDGET_STEP
        elif ch.name.endswith("micro_batch_size_per_gpu"):
            assert ch.value == 1 or ch.value * seq <= cap


def _replayed(spec: dict, model_config: dict, device_mib: int) -> fastfit.Choices:
    """Today's ``fastfit.choose`` on a real run's pre-fit settings: the learned key its launch recorded
    (``spec["learn"]["key"]["run"]``: the share, token budgets and features before the fit), no vLLM limits."""
    key = spec["learn"]["key"]
    pre = dict(
        spec["settings"],
        gpu_memory_utilization=key["run"]["gpu_memory_utilization"],
        token_budgets=key["run"]["token_budgets"],
        rollout_max_num_seqs=None,
        rollout_max_num_batched_tokens=None,
    )
    fs = features.FeatureSet.from_json(
        [{"name": n, "source": "default"} for n in key["run"]["features"]], key["run"]["disabled"]
    )
    return fastfit.choose(memfit.Model.from_config(model_config), dict(spec, settings=pre), fs, device_mib / 1024)


def test_the_real_speed_run_replayed_through_todays_planner():
    """tool-runs/o-speed-tool1-h100 (Qwen3-1.7B's shape, prompt 512 + response 2048, 8 x 8 on one H100, sdpa): its
    pre-fit settings (the learned key the launch recorded, ``spec["learn"]["key"]["run"]``) through today's
    ``fastfit.choose`` give the rollout choices the run got, word for word (share 0.55, max_num_seqs 128,
    max_num_batched_tokens 32768), and the token budgets the packed-attention cap: the run's own 11264 / 57344 (the
    largest that fit) are what that run measured as slow. The record matches what verl was given."""
    spec = runfiles.read_spec(SPEED_RUN)
    key = spec["learn"]["key"]
    assert {k: QWEN3_1_7B[k] for k in key["model"] if k in QWEN3_1_7B} == {
        k: v for k, v in key["model"].items() if k in QWEN3_1_7B
    }
    h100_mib = 81559  # gpu-mem-tool.csv's memory.total (the record keeps device_gib rounded: 79.65)
    assert spec["fit"]["device_gib"] == round(h100_mib / 1024, 2)
    c = _replayed(spec, QWEN3_1_7B, h100_mib)
    then = {x["name"]: x for x in spec["fit"]["choices"]}
    now = {x.name: x.to_json() for x in c.chosen}
    assert set(now) == set(then)
    for name in ("gpu_memory_utilization", "max_num_seqs", "max_num_batched_tokens", "gradient_checkpointing"):
        assert now[name]["value"] == then[name]["value"], name
    for name in ("gpu_memory_utilization", "max_num_seqs", "max_num_batched_tokens"):
        assert now[name] == then[name]
    assert (
        then["ppo_max_token_len_per_gpu"]["value"] == 11264 and then["log_prob_max_token_len_per_gpu"]["value"] == 57344
    )
    assert now["ppo_max_token_len_per_gpu"]["value"] == now["log_prob_max_token_len_per_gpu"]["value"] == 4096
    # the record is what verl got (the supervisor's logged argv of attempt 1)
    argv = dict(a.strip("'").split("=", 1) for a in logged_verl_argv(SPEED_RUN, 1) if "=" in a)
    assert argv[fastfit.ACTOR_BUDGET] == "11264" and argv[fastfit.LOGPROB_BUDGETS[0]] == "57344"
    assert argv[fastfit.UTIL_KEY] == "0.55" and argv[fastfit.MAX_NUM_SEQS_KEY] == "128"
    assert argv[fastfit.MAX_BATCHED_KEY] == "32768" and argv[fastfit.GC_KEY] == "False"
    assert argv["+actor_rollout_ref.model.override_config.attn_implementation"] == "sdpa"


@pytest.mark.parametrize(
    "feats_spec, override, capped",
    [
        ("-flash_attn", "+actor_rollout_ref.model.override_config.attn_implementation=flash_attention_2", False),
        (None, "+actor_rollout_ref.model.override_config.attn_implementation=sdpa", True),
        (None, "+actor_rollout_ref.model.override_config.attn_implementation='eager'", True),
        ("-flash_attn", "actor_rollout_ref.model.use_remove_padding=False", False),
        ("-flash_attn,-remove_padding", "actor_rollout_ref.model.use_remove_padding=True", True),
        # verl tests the flag by truthiness, no coercion (trial): 'no' is a non-empty string, 0 an int
        ("-flash_attn,-remove_padding", "actor_rollout_ref.model.use_remove_padding=no", True),
        ("-flash_attn", "actor_rollout_ref.model.use_remove_padding=0", False),
        # a deletion runs verl's default: HFModelConfig.use_remove_padding True, attention flash_attention_2
        ("-flash_attn,-remove_padding", "~actor_rollout_ref.model.use_remove_padding", True),
        ("-flash_attn", "~actor_rollout_ref.model.override_config.attn_implementation", False),
    ],
)
def test_an_override_of_the_attention_or_remove_padding_decides_packed_attention(feats_spec, override, capped):
    """The user's ``--override`` is appended last to verl's argv and wins over the features there (review): an
    override to flash attention is varlen (not capped), one to sdpa / eager on a flash plan is packed (capped), and
    ``use_remove_padding=False`` packs nothing."""
    m = memfit.Model.from_config(QWEN3_1_7B)
    spec = spec_for(batch=8, mini=2, extra_overrides=[override])
    c = fastfit.choose(m, spec, features.resolve(feats_spec, False), 79.65)
    got = {x.name: x for x in c.chosen}
    upd = got["ppo_max_token_len_per_gpu"]
    assert (upd.value == 4096) is capped and upd.why.startswith("attention without flash") is capped


def test_a_start_rungs_update_budget_keeps_gradient_checkpointing_as_planned():
    """A start rung (learned or the estimate's) that sets the update budget made its memory decision with the plan's
    features: the fit leaves gradient checkpointing on and names no budget it does not use (review: the line said
    'fits without it at ppo_max_token_len_per_gpu 4096 (the packed-attention cap)' while the rung's 11264 ran)."""
    m = memfit.Model.from_config(QWEN3_1_7B)
    spec = dict(spec_for(batch=8, mini=2), setting_changes={"token_budgets": {fastfit.ACTOR_BUDGET: 11264}})
    c = fastfit.choose(m, spec, features.resolve("-flash_attn", False), 78.0)
    assert c.features.has("gradient_checkpointing")
    assert "gradient_checkpointing" not in {x.name for x in c.chosen}
    assert any(x.name == "ppo_max_token_len_per_gpu" and "start rung" in x.why for x in c.kept)


@pytest.mark.parametrize("value, on", [("0", False), ("null", False), ("1", True), ("yes", True), ("'false'", True)])
def test_a_gradient_checkpointing_override_is_read_by_its_truthiness_in_verl(value, on):
    """``enable_gradient_checkpointing=0`` runs without checkpointing in verl (an int 0, tested by truthiness at
    transformer_impl.py:335); the fit estimated the update with it on (trial: an OOM at the first update)."""
    m = memfit.Model.from_config(QWEN3_1_7B)
    spec = spec_for(extra_overrides=[f"{fastfit.GC_KEY}={value}"])
    c = fastfit.choose(m, spec, feats(True), 79.65)
    assert c.features.has("gradient_checkpointing") is on
    [line] = [k for k in c.kept if k.name == "gradient_checkpointing"]
    assert line.value == ("on" if on else "off") and f"{fastfit.GC_KEY}={value}" in line.why


def test_megatron_model_parallel_ranks_share_a_data_parallel_ranks_mini_batch():
    """verl splits the mini-batch over the data-parallel ranks only (engine_workers.py:267-270): with TP 2 on 2
    devices one rank's update micro-batch can hold the whole mini-batch, 2 x 8 sequences (trial: the cap counted
    every device, 'all of a device's mini-batch' at half of it)."""
    m = memfit.Model.from_config(QWEN3_1_7B)
    spec = spec_for(fw="megatron", world=2, tp=2, batch=8, mini=2, prompt=512, response=512)
    c = fastfit.choose(m, spec, feats(True), 139.8)
    upd = {x.name: x for x in c.chosen}["ppo_max_token_len_per_gpu"]
    assert upd.value == 2 * 8 * 1024 and upd.why.startswith("all of a device's mini-batch")


def test_a_users_value_the_start_rung_changes_shows_what_runs():
    """The estimate's start rung halves an overridden budget that does not fit (its change wins in verl's argv): the
    kept line showed the user's 65536 and 'you set it' (trial); it shows the 32768 that runs and says why."""
    m = memfit.Model.from_config(QWEN3_1_7B)
    spec = dict(
        spec_for(batch=8, mini=2, extra_overrides=[f"{fastfit.ACTOR_BUDGET}=65536"]),
        setting_changes={"token_budgets": {fastfit.ACTOR_BUDGET: 32768}},
    )
    c = fastfit.choose(m, spec, features.resolve("-flash_attn", False), 79.65)
    [line] = [k for k in c.kept if k.name == "ppo_max_token_len_per_gpu"]
    assert line.value == 32768
    assert line.why.startswith(f"you set it with --override {fastfit.ACTOR_BUDGET}=65536; the estimate's start rung")


def test_a_deleted_knob_shows_the_default_verl_then_runs():
    """``~actor_rollout_ref.rollout.gpu_memory_utilization`` runs RolloutConfig's 0.5 (verl/workers/config/rollout.py:185),
    not the plan's share the line showed (trial). (A deleted token budget fails verl's start: the launch refuses it,
    tests/test_overrides.py.)"""
    m = memfit.Model.from_config(QWEN3_1_7B)
    c = fastfit.choose(m, spec_for(batch=8, mini=2, extra_overrides=[f"~{fastfit.UTIL_KEY}"]), feats(True), 79.65)
    [line] = [k for k in c.kept if k.name == "gpu_memory_utilization"]
    assert line.value == 0.5 and "verl runs its config's default 0.5" in line.why


def test_the_log_prob_micro_batch_divides_the_padded_per_rank_batch():
    """The V1 trainer pads a step of 6 prompts to a multiple of the 4-prompt mini-batch, 8 (trainer_base.py:1589-1621):
    the log-prob micro-batch must divide 8, not 6 (review: the fit chose 6)."""
    m = memfit.Model.from_config(QWEN3_1_7B)
    c = fastfit.choose(m, spec_for(batch=6, mini=4, n=1), feats(False), 139.8)
    lp = {x.name: x.value for x in c.chosen}["log_prob_micro_batch_size_per_gpu"]
    assert 8 % lp == 0


def test_a_micro_batch_override_is_what_the_update_is_estimated_with():
    """Without dynamic batch an ``--override`` of the micro-batch wins in verl's argv: the estimate goes on with it
    (trial: 'the estimate goes on with 1' beside a plain 16)."""
    m = memfit.Model.from_config(QWEN3_1_7B)
    spec = spec_for(batch=8, mini=2, extra_overrides=[f"{fastfit.PPO_MICRO_KEY}=16"])
    fs = features.resolve("-flash_attn,-dynamic_batch", False)
    c = fastfit.choose(m, spec, fs, 79.65)
    [line] = [k for k in c.kept if k.name == "ppo_micro_batch_size_per_gpu"]
    assert line.value == 16 and "estimate goes on" not in line.why
    one = memfit.estimate(m, memfit.setup_from_spec(spec_for(batch=8, mini=2), fs, 79.65)).phases["update"]
    assert memfit.estimate(m, memfit.setup_from_spec(spec, fs, 79.65)).phases["update"] > one


def test_an_override_of_the_reference_models_budget_holds_nothing_without_a_reference():
    """No KL: verl builds no reference model, so ``actor_rollout_ref.ref.log_prob_max_token_len_per_gpu`` is inert;
    it froze the rollout's log-prob budget at the planned 7680, above the packed cap (trial). With a KL loss it is
    the user's, and holds the knob."""
    m = memfit.Model.from_config(QWEN3_1_7B)
    ref = "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu=65536"
    sdpa = features.resolve("-flash_attn", False)
    c = fastfit.choose(m, spec_for(batch=8, mini=2, extra_overrides=[ref]), sdpa, 79.65)
    assert {x.name: x.value for x in c.chosen}["log_prob_max_token_len_per_gpu"] == 4096
    kl = spec_for(batch=8, mini=2, extra_overrides=[ref, "actor_rollout_ref.actor.use_kl_loss=True"])
    c = fastfit.choose(m, kl, sdpa, 79.65)
    assert "log_prob_max_token_len_per_gpu" in {x.name for x in c.kept}


def test_a_start_rungs_micro_batch_beats_the_users_override_in_the_estimate():
    """The ladder's (start rung's) micro-batch drops the user's override from verl's argv (overrides.verl_argv): the
    estimate goes on with the rung's 4, not the override's 16 (review: it kept 16 and added rungs it did not need)."""
    m = memfit.Model.from_config(QWEN3_1_7B)
    fs = features.resolve("-flash_attn,-dynamic_batch", False)
    spec = dict(
        spec_for(batch=8, mini=2, extra_overrides=[f"{fastfit.PPO_MICRO_KEY}=16"]),
        setting_changes={"ppo_micro_batch_size_per_gpu": 4},
    )
    setup = memfit.setup_from_spec(spec, fs, 79.65, spec["setting_changes"])
    assert setup.update_tokens == 4 * 2560
    c = fastfit.choose(m, spec, fs, 79.65)
    [line] = [k for k in c.kept if k.name == "ppo_micro_batch_size_per_gpu"]
    assert line.value == 4 and "start rung runs 4" in line.why


def test_megatrons_recompute_is_kept_with_a_line_that_names_the_plans_setting():
    """Megatron runs the plan's recompute (megatron_recompute: full by default, core/profiles.py); the fit takes only
    FSDP's checkpointing off, and says so instead of leaving the knob without a line (trial)."""
    m = memfit.Model.from_config(QWEN3_1_7B)
    c = fastfit.choose(m, spec_for(fw="megatron", batch=8, mini=2), feats(True), 139.8)
    [line] = [k for k in c.kept if k.name == "gradient_checkpointing"]
    assert line.value == "on" and line.why.startswith("Megatron's recompute as planned (megatron_recompute)")


def test_the_features_table_names_a_users_override_of_a_features_key():
    """``--override ...enable_gradient_checkpointing=False`` / ``...fsdp_config.param_offload=True`` /
    ``...use_remove_padding=False`` are appended last, so verl runs them; the table showed gradient checkpointing
    on and offload "ladder may add" without a word (a new-user trial). Each row now names the override that decides;
    a feature whose keys the user left alone says nothing more, and an override of an unrelated key names no row."""
    from dapo_ops.control.launch import dryrun
    from test_learned_real import ENV, FLAGS, HOST

    mine = [
        "actor_rollout_ref.model.enable_gradient_checkpointing=False",
        "actor_rollout_ref.actor.fsdp_config.param_offload=True",
        "actor_rollout_ref.model.use_remove_padding=False",
        "trainer.val_before_train=False",
    ]
    st_ = settings.resolve(FLAGS, ENV, {})
    inputs = planning.PlanInputs(
        settings=st_, host=HOST, mode="dapo", run_id="20261207-000000-0005", swanlab_logger=False, extra_overrides=mine
    )
    text = dryrun.render_text(planning.make_plan(planning.draft_plan(inputs), None), width=400)
    for name, o in (("gradient_checkpointing", mine[0]), ("offload", mine[1]), ("remove_padding", mine[2])):
        assert _feature_row(text, name)[3].endswith(f"(your --override {o} decides)"), name
    for name in ("flash_attn", "dynamic_batch", "recompute", "prefix_cache", "chunked_prefill"):
        assert "your --override" not in _feature_row(text, name)[3], name


def test_the_features_table_names_a_gradient_checkpointing_override_with_recompute_on():
    """With ``recompute`` on, ``--override ...enable_gradient_checkpointing=False`` still decides gradient
    checkpointing (verl reads the key alone, verl/workers/engine/fsdp/transformer_impl.py:335): its row names it, the
    recompute row does not (its own keys, activation offload, are the plan's). The table reads the one place a
    feature's keys are worked out, core/memladder.py feature_keys."""
    from dapo_ops.control.launch import dryrun
    from test_learned_real import ENV, FLAGS, HOST

    mine = ["actor_rollout_ref.model.enable_gradient_checkpointing=False"]
    st_ = settings.resolve(FLAGS, dict(ENV, USER_FEATURES="recompute"), {})
    inputs = planning.PlanInputs(
        settings=st_, host=HOST, mode="dapo", run_id="20261207-000000-0006", swanlab_logger=False, extra_overrides=mine
    )
    text = dryrun.render_text(planning.make_plan(planning.draft_plan(inputs), None), width=400)
    assert _feature_row(text, "recompute")[2] == "on"
    assert _feature_row(text, "gradient_checkpointing")[3].endswith(f"(your --override {mine[0]} decides)")
    assert "your --override" not in _feature_row(text, "recompute")[3]


SANDBOX_MODEL = {"model_type": "qwen2", "hidden_size": 16}  # the sandbox's tiny stand-in: no attention-head counts


@pytest.mark.parametrize(
    "what, memory, env",
    [
        ("the sandbox's model without head counts", {"model_config": SANDBOX_MODEL, "device_gib": 140.0}, {}),
        ("a dry run (no facts)", None, {}),
        ("a dry run with the model's shape", {"model_config": QWEN3_1_7B, "device_gib": None}, {}),
        ("MEMORY_FIT=warn", {"model_config": QWEN3_1_7B, "device_gib": 140.0}, {"MEMORY_FIT": "warn"}),
    ],
)
def test_the_packed_cap_holds_under_sdpa_whatever_the_memory_estimate_knows(what, memory, env):
    """A new-user trial: ``-flash_attn`` on the sandbox ran ``ppo_max_token_len_per_gpu=20480`` under sdpa, while the
    README says the packed sdpa budgets stop at 4096: the cap was applied only inside the memory fit, which needs the
    model's shape and the device memory. The cap is about sdpa's speed over a packed micro-batch, so it holds on
    every plan with packed attention; with flash attention it does not apply."""
    st_ = settings.resolve(
        {"framework": "fsdp", "features": "-flash_attn", "max_prompt_length": 512, "max_response_length": 2048},
        env,
        {},
    )
    inputs = dict(settings=st_, host=None, mode="dapo", run_id="20261207-000000-0003", swanlab_logger=False)
    p = planning.make_plan(planning.draft_plan(planning.PlanInputs(**inputs)), memory)
    budgets = {a.split("=")[0]: int(a.split("=")[1]) for a in p.argv if "_max_token_len_per_gpu=" in a}
    assert budgets and all(v <= fastfit.PACKED_TOKENS for v in budgets.values()), (what, budgets)
    assert any(ln.startswith("fit: ppo_max_token_len_per_gpu") for ln in p.memory), (what, p.memory)
    st_flash = settings.resolve({"framework": "fsdp", "max_prompt_length": 512, "max_response_length": 2048}, {}, {})
    flash = planning.make_plan(planning.draft_plan(planning.PlanInputs(**dict(inputs, settings=st_flash))), None)
    assert "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=5120" in flash.argv  # profiles.token_budgets' default


def test_the_real_p12_holdout_run_replayed_through_todays_planner_gets_its_choices_word_for_word():
    """holdout/p12 (Qwen3-0.6B's shape, prompt 512 + response 4096, 4 x 4 on one H100, sdpa; 2026-12-07 eighth
    session) ran today's plan: its pre-fit settings (the learned key the launch recorded) through today's
    ``fastfit.choose`` give every choice the run recorded, value and reason (token budgets 5120 = one sequence under
    the packed-attention cap, gradient checkpointing off, share 0.4, max_num_seqs 32, max_num_batched_tokens 16384),
    and what verl was given is that record (the supervisor's logged argv of attempt 1)."""
    run = ROOT / "tests" / "fixtures" / "real-verl" / "holdout" / "p12"
    spec = runfiles.read_spec(run)
    model = json.loads((ROOT / "bench" / "memory_fit_models.json").read_text())["qwen3-0.6b"]
    h100_mib = 81559  # the H100 80GB HBM3's memory.total (the record keeps device_gib rounded: 79.65)
    assert spec["fit"]["device_gib"] == round(h100_mib / 1024, 2)
    c = _replayed(spec, model, h100_mib)
    assert [x.to_json() for x in c.chosen] == spec["fit"]["choices"]
    then = {x["name"]: x["value"] for x in spec["fit"]["choices"]}
    assert then["ppo_max_token_len_per_gpu"] == then["log_prob_max_token_len_per_gpu"] == 5120
    assert (then["gpu_memory_utilization"], then["max_num_seqs"], then["max_num_batched_tokens"]) == (0.4, 32, 16384)
    argv = dict(a.strip("'").split("=", 1) for a in logged_verl_argv(run, 1) if "=" in a)
    assert argv[fastfit.ACTOR_BUDGET] == "5120" and argv[fastfit.LOGPROB_BUDGETS[0]] == "5120"
    assert argv[fastfit.UTIL_KEY] == "0.4" and argv[fastfit.MAX_NUM_SEQS_KEY] == "32"
    assert argv[fastfit.MAX_BATCHED_KEY] == "16384" and argv[fastfit.GC_KEY] == "False"
