"""The memory-fit estimate (dapo_ops/core/memfit.py): arithmetic against hand-computed figures, the start rung
(source estimate) in the plan and its argv, the one-line refusal, and the calibration CSV kept in sync."""

import json
import re
from pathlib import Path

import pytest

from conftest import repo_module

from dapo_ops.core import memfit
from dapo_ops.control.launch import plan as planning
from dapo_ops.control import settings
from dapo_ops.core.features import resolve
from dapo_ops.control.inventory.model import Host
from plan_helpers import plan_for

ROOT = Path(__file__).resolve().parents[1]
GIB = 1024**3
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
# Qwen/Qwen3-8B config.json (the keys the estimate reads; the rest of the file is irrelevant here)
QWEN3_8B = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "hidden_size": 4096,
    "num_hidden_layers": 36,
    "intermediate_size": 12288,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "vocab_size": 151936,
    "tie_word_embeddings": False,
    "attention_bias": False,
    "torch_dtype": "bfloat16",
    "max_position_embeddings": 40960,
}
# bench/memory_fit_models.json "tiny-1.46b": the random Qwen2 of the real H200 runs (make_tiny.py 2048 24 8192 16 4)
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


def test_qwen3_8b_parameter_count_by_hand():
    # per layer: q 4096*4096 + k,v 2*4096*1024 + o 4096*4096 = 41,943,040 (+ q/k norm 2*128)
    #            mlp 3*4096*12288 = 150,994,944; norms 2*4096            -> 192,946,432
    # 36 layers 6,946,071,552 + embed and lm_head 2*151936*4096 = 1,244,659,712 + final norm 4096
    assert memfit.param_count(memfit.Model.from_config(QWEN3_8B)) == 8_190_735_360
    # the verl log of the real runs says "Qwen2ForCausalLM contains 1.46B parameters"
    assert round(memfit.param_count(memfit.Model.from_config(TINY_146B)) / 1e9, 2) == 1.46


def test_qwen3_8b_bf16_fsdp_8_devices_by_hand():
    m = memfit.Model.from_config(QWEN3_8B)
    s = memfit.Setup(
        device_gib=80.0,
        framework="fsdp",
        world=8,
        rollout_tp=2,
        util=0.6,
        seq=10240,
        update_tokens=20480,
        logprob_tokens=30720,
        gc=True,
    )
    e = memfit.estimate(m, s)
    P = 8_190_735_360
    params, adam = 4 * P / 8 / GIB, 8 * P / 8 / GIB  # 3.814, 7.628 GiB (fp32 master params, Adam m+v)
    assert memfit.act_bytes_per_token_layer(m) == 30 * 4096 + 6 * 8 * 128 + 8 * 12288 == 227_328
    act = 20480 * (36 * 2 * 4096 + 227_328 + 10 * 151936) / GIB  # checkpointed inputs + one layer + logits: 38.94
    assert e.phases["update"] == pytest.approx(1.16 + 0.83 + params + adam + act, abs=0.01)
    assert e.phases["update"] == pytest.approx(52.37, abs=0.01)
    # weight-sync without offload: the actor keeps params + Adam + the 2 GiB sync bucket while vLLM wakes (0.6 x 80)
    assert (
        e.phases["weight-sync"]
        == pytest.approx(1.16 + params + adam + 2.0 + 48.0, abs=0.01)
        == pytest.approx(62.60, abs=0.01)
    )
    assert e.phases["generation"] == pytest.approx(1.16 + params + adam + 48.0, abs=0.01)
    lp = (
        30720 * (4 * 4096 + 6 * 12288 + 6 * 151936) / GIB
    )  # no-grad forward: bf16 logits + the entropy's softmax and product (6V)
    assert e.phases["log-prob"] == pytest.approx(1.16 + 0.83 + params + lp + adam, abs=0.01)
    assert e.tightest == "weight-sync" and e.fits
    # the estimate names its phases as the classifier does (one PHASES; memfit's own copy was never read): the start
    # rung is taken from the tightest phase's ladder (memladder.phase_rungs), which knows only those names
    from dapo_ops.core.classify.verdict import PHASES

    assert set(e.phases) == set(PHASES) - {"checkpoint-save", "unknown"}, sorted(e.phases)


def test_offload_frees_the_rollout_phases_but_not_the_update():
    m = memfit.Model.from_config(TINY_146B)
    base = dict(
        device_gib=139.8,
        world=1,
        rollout_tp=1,
        util=0.9,
        seq=192,
        update_tokens=8 * 192,
        logprob_tokens=8 * 192,
        gc=False,
    )
    off, on = memfit.estimate(m, memfit.Setup(**base)), memfit.estimate(m, memfit.Setup(**base, offload=True))
    assert not off.fits and off.tightest == "weight-sync"  # real run 3: OOM in the sleep-mode wake-up
    assert on.fits and on.phases["weight-sync"] < off.phases["weight-sync"] - 15  # real run 4: offload fixed it
    assert on.phases["update"] == off.phases["update"]  # loaded back for the update (engine/base.py:314)


def test_plan_starts_on_the_first_rung_that_fits_and_records_the_source():
    flags = {
        "framework": "fsdp",
        "gpu_memory_utilization": 0.9,
        "max_prompt_length": 128,
        "max_response_length": 64,
        "features": "-dynamic_batch,-gradient_checkpointing",
        "micro_batch_size": 8,
        "rollout_tp": 1,
        "train_batch_size": 8,
        "ppo_mini_batch_size": 8,
        "rollout_n": 1,
        "steps": 3,
    }
    st = settings.resolve(flags, {}, {})
    p = plan_for(
        settings=st,
        host=ONE_GPU,
        mode="dapo",
        run_id="20261129-151200-a1b2",
        swanlab_logger=False,
        memory={"model_config": TINY_146B, "device_gib": 139.8},
    )
    ch = p.spec["setting_changes"]
    assert ch["gpu_memory_utilization"] == 0.8
    assert ch["memory_rungs"] == [
        {
            "rung": "rollout-util",
            "phase": "weight-sync",
            "source": "estimate",
            "changes": {"gpu_memory_utilization": 0.8},
        }
    ]
    assert "actor_rollout_ref.rollout.gpu_memory_utilization=0.8" in p.argv
    assert any("starts on rung(s) rollout-util(weight-sync) (source: estimate)" in ln for ln in p.memory)
    assert any(ln.startswith("memory-fit estimate: tightest weight-sync 145.3 of 139.8 GiB") for ln in p.memory)


def test_a_feature_rung_from_the_estimate_carries_source_estimate():
    cfg, spec = (
        TINY_146B,
        {
            "mode": "dapo",
            "framework": "fsdp",
            "settings": {
                "gpu_memory_utilization": 0.4,
                "max_prompt_length": 128,
                "max_response_length": 64,
                "n_gpus_per_node": 1,
                "rollout_tp": 1,
                "micro_batch_size": 8,
                "steps": 3,
            },
        },
    )
    # 30 GiB, share at its floor 0.4: the wake-up does not fit next to the resident actor (31.5), everything else does
    f = memfit.fit(cfg, spec, resolve("-dynamic_batch,-gradient_checkpointing"), 30.0)
    assert f.features.source_of("offload") == "estimate" and f.rungs == ["offload(weight-sync)"]
    assert f.started.fits and not f.planned.fits


def test_nothing_fits_refuses_in_one_line_with_the_numbers():
    st = settings.resolve(
        {
            "framework": "fsdp",
            "max_response_length": 32768,
            "rollout_tp": 1,
            "train_batch_size": 8,
            "ppo_mini_batch_size": 8,
            "rollout_n": 1,
        },
        {},
        {},
    )
    with pytest.raises(planning.PlanError) as ei:
        plan_for(
            settings=st,
            host=ONE_GPU,
            mode="dapo",
            run_id="20261129-151200-a1b2",
            swanlab_logger=False,
            memory={"model_config": QWEN3_8B, "device_gib": 24.0},
        )
    msg = str(ei.value)
    assert "\n" not in msg and msg.startswith("memory-fit: the run cannot fit: tightest ")
    assert "of 24.0 GiB per device" in msg and "activations 57.2 GiB" in msg
    assert "update-batch(update)" in msg and "offload-policy(update), recompute(update)" in msg  # every rung tried
    assert "more devices" in msg


def test_without_device_memory_the_plan_shows_peaks_only():
    st = settings.resolve({"framework": "fsdp"}, {}, {})
    p = plan_for(
        settings=st,
        host=None,
        mode="dapo",
        run_id="20261129-151200-a1b2",
        swanlab_logger=False,
        memory={"model_config": QWEN3_8B, "device_gib": None},
    )
    assert "setting_changes" not in p.spec and "fit" not in p.spec
    est = [ln for ln in p.memory if ln.startswith("memory-fit")]
    assert len(est) == 1 and "device memory unknown here" in est[0] and "update 52.4" in est[0]
    # the fastest-fit choices (core/fastfit.py) are shown for the assumed device but not applied (issue 45)
    fit = [ln for ln in p.memory if ln.startswith("fit: ")]
    chosen = [ln for ln in fit if not ln.endswith(": kept on")]  # a knob left as planned changes nothing
    assert chosen and all(ln.endswith("not applied, inv launch chooses on the real one)") for ln in chosen)
    assert fit[-1] == (
        "fit: gradient_checkpointing on: the update does not fit without it at a budget as large as it gets with it: "
        "kept on"
    )


def test_missing_config_keys_say_which_and_refuse_nothing():
    with pytest.raises(memfit.EstimateUnavailable, match="hidden_size"):
        memfit.Model.from_config({"model_type": "qwen3"})
    st = settings.resolve({"framework": "fsdp"}, {}, {})
    p = plan_for(
        settings=st,
        host=None,
        mode="dapo",
        run_id="20261129-151200-a1b2",
        swanlab_logger=False,
        memory={"model_config": {"model_type": "qwen2", "hidden_size": 16}, "device_gib": 8.0},
    )
    assert p.memory == ["memory-fit estimate unavailable: config.json lacks 'num_attention_heads'"]


def test_calibration_csv_estimates_are_current_and_adding_a_row_is_one_line():
    bench = _bench("memory_fit")
    rows, models = bench.load()
    assert len({(r["config"], r["phase"], r["measure"]) for r in rows if r["measure"] != "oom"}) >= 6
    for r in bench.evaluate(rows, models):
        assert f"{r['estimate']:.2f}" == r["estimate_gib"], (r["config"], "run bench/memory_fit.py --write")
    assert set(json.loads((ROOT / "bench" / "memory_fit_models.json").read_text())) >= {r["model"] for r in rows}


def test_memory_fit_warn_reports_the_rung_but_launches_as_planned(monkeypatch):
    """MEMORY_FIT=warn (dapo_ops/control/settings.py): the estimate is shown, no rung is applied, nothing is refused,
    and preflight's memory-fit check warns instead of failing (the real-OOM ladder runs of gpu/ need this)."""
    from dapo_ops.control.preflight import memory as preflight_checks
    from dapo_ops.control.preflight import plan_view as preflight_plan
    from dapo_ops.control.preflight import result as preflight_result

    flags = {
        "framework": "fsdp",
        "gpu_memory_utilization": 0.9,
        "max_prompt_length": 128,
        "max_response_length": 64,
        "features": "-dynamic_batch,-gradient_checkpointing",
        "micro_batch_size": 8,
        "rollout_tp": 1,
        "train_batch_size": 8,
        "ppo_mini_batch_size": 8,
        "rollout_n": 1,
        "steps": 3,
    }
    st = settings.resolve(flags, {"MEMORY_FIT": "warn"}, {})
    p = plan_for(
        settings=st,
        host=ONE_GPU,
        mode="dapo",
        run_id="20261129-151200-a1b2",
        swanlab_logger=False,
        memory={"model_config": TINY_146B, "device_gib": 139.8},
    )
    assert "setting_changes" not in p.spec
    assert "actor_rollout_ref.rollout.gpu_memory_utilization=0.9" in p.argv
    assert any(
        "MEMORY_FIT=warn: launching as planned; MEMORY_FIT=start would start on rung(s) rollout-util(weight-sync)" in ln
        for ln in p.memory
    )
    # nothing fits (Qwen3-8B, 32k responses on 24 GiB): start refuses, warn reports and plans
    big = dict(flags, max_response_length=32768, features="", micro_batch_size=1)
    with pytest.raises(planning.PlanError):
        plan_for(
            settings=settings.resolve(big, {}, {}),
            host=ONE_GPU,
            mode="dapo",
            run_id="20261129-151200-a1b2",
            swanlab_logger=False,
            memory={"model_config": QWEN3_8B, "device_gib": 24.0},
        )
    p2 = plan_for(
        settings=settings.resolve(big, {"MEMORY_FIT": "warn"}, {}),
        host=ONE_GPU,
        mode="dapo",
        run_id="20261129-151200-a1b2",
        swanlab_logger=False,
        memory={"model_config": QWEN3_8B, "device_gib": 24.0},
    )
    assert any("cannot fit" in ln and "MEMORY_FIT=warn" in ln for ln in p2.memory)
    facts = {"model_config": QWEN3_8B, "device_gib": 24.0}
    monkeypatch.setattr(preflight_checks, "memory_facts", lambda host, p: facts)
    [warn] = preflight_checks._memfit_checks(ONE_GPU, preflight_plan.plan_view(p2), {})
    assert warn.status == preflight_result.WARN and "cannot fit" in warn.message and "MEMORY_FIT=warn" in warn.fix
    started = plan_for(
        settings=settings.resolve(big, {}, {}),
        host=ONE_GPU,
        mode="dapo",
        run_id="20261129-151200-a1b2",
        swanlab_logger=False,
    )  # no memory facts at plan time: preflight judges
    [fail] = preflight_checks._memfit_checks(ONE_GPU, preflight_plan.plan_view(started), {})
    assert fail.status == preflight_result.FAIL


def _bench(name: str):
    return repo_module(f"bench/{name}.py")


HOLDOUT = ROOT / "tests" / "fixtures" / "real-verl" / "holdout"


def test_memory_fit_csv_marks_fit_and_holdout_and_reports_them_apart():
    """issue 33 item 3: every row is ``fit`` (calibrated on) or ``holdout`` (measured after, never fitted); the
    holdout rows are the 2026-12-02 H200 runs (fixtures under tests/fixtures/real-verl/tool-runs and, for the real
    Qwen shapes of gpu/i-holdout.sh, tests/fixtures/real-verl/holdout), reported per phase apart from the fit
    residual."""
    bench = _bench("memory_fit")
    rows, models = bench.load()
    assert {r["split"] for r in rows} == {"fit", "holdout"}
    hold = [r for r in rows if r["split"] == "holdout"]
    runs = {r["config"] for r in hold}
    assert runs == {
        "g-features-a",
        "g-features-b-resume",
        "g-features-a+b",
        "h-speed-tool",
        "h-speed-verl-by-hand",
        "f-storm",
        "w14-qwen3-1.7b-r8192-offload",
        "w41-qwen2.5-0.5b-r1024",
        "w42-qwen2.5-1.5b-r2048",
        "w61-qwen3-0.6b-r1024-offload",
        "j1-qwen3-4b-48l-u0.6",
        "j1-qwen3-4b-48l-u0.5",
        "k-megatron-a",
        "k-megatron-b-resume",
        "p11-qwen2.5-0.5b-r2048",
        "o1-tool1-qwen3-1.7b-r2048",
        "p31-qwen3-4b-r2048-offload",
        "p32-qwen2.5-7b-r2048",
        "p12-qwen3-0.6b-r4096",
    }
    assert {r["framework"] for r in hold} == {"fsdp", "megatron"}  # the Megatron rows: tool-runs/k-megatron-a, -b
    for r in hold:
        if "tool-runs/" in r["source"]:
            fixture = r["source"].split("tool-runs/")[1].split()[0]
            assert (ROOT / "tests" / "fixtures" / "real-verl" / "tool-runs" / fixture).is_dir(), r["source"]
        else:
            assert (HOLDOUT / r["config"].split("-")[0] / "run.json").is_file(), r["source"]
    real_shapes = [r for r in hold if models[r["model"]]["vocab_size"] >= 151936]
    assert {r["model"] for r in real_shapes} == {
        "qwen2.5-0.5b",
        "qwen2.5-1.5b",
        "qwen3-0.6b",
        "qwen3-1.7b",
        "qwen3-4b",
        "qwen3-4b-48l",
        "qwen2.5-7b",
    }
    assert {r["offload"] for r in real_shapes} == {"0", "1"} and max(int(r["response"]) for r in real_shapes) == 8192
    lines = bench.split_report(bench.evaluate(rows, models))
    assert lines[0].startswith("fit: 18 measured rows") and lines[1].startswith("holdout: 28 measured rows")
    assert lines[1].endswith("OOM rows predicted 2/2")
    assert any(ln.strip().startswith("holdout peak/nvidia-smi: 11 rows") for ln in lines)
    assert any(ln.strip().startswith("holdout update/torch-max-allocated: 16 rows") for ln in lines)
    res = bench.evaluate(hold, models)
    errs = [r["error"] for r in res if r["error"] is not None]
    assert max(map(abs, errs)) <= 0.15  # issue 33: holdout max relative error <= 15 % per phase peak
    # issue 33: on a holdout configuration that really went OOM the estimate said "does not fit" (0 false fits)
    ooms = [r for r in res if r["measure"] == "oom"]
    assert ooms and all(r["estimate"] > float(r["device_gib"]) for r in ooms)


def test_holdout_rows_are_what_the_real_runs_recorded():
    """The real-shape holdout rows of bench/memory_fit.csv are bench/holdout_rows.py's reading of the H200 run files
    (run.json, spec.json, train.log's actor/perf/max_memory_allocated_gb, gpu/proc_mem.py's per-run samples), not
    typed in: regenerate them from the fixtures and compare every measured column."""
    hr = _bench("holdout_rows")
    got = []
    for wave, hosts in (("wave4", ("w11", "w12", "w13", "w14", "w41", "w42")), ("wave6", ("w61",))):
        peaks = hr.proc_mem_peaks(HOLDOUT / f"proc-mem-{wave}.csv")
        for h in hosts:
            got += [ln for ln in hr.rows_of(HOLDOUT / h, peaks, 139.80) if not ln.startswith("#")]
    rows, _ = _bench("memory_fit").load()
    import csv as _csv

    want = {(r["config"], r["phase"], r["measure"]): r["measured_gib"] for r in rows if r["config"][:2] == "w1"
            or r["config"][:2] in ("w4", "w6")}  # fmt: skip
    have = {(r[0], r[18], r[19]): r[20] for r in _csv.reader(got)}
    assert have == want and len(have) == 7
    # the three runs started at once on one device (wave 1) failed in vLLM's KV-cache profiling: no figure from them
    assert [ln for h in ("w11", "w12", "w13") for ln in hr.rows_of(HOLDOUT / h, {}, 139.80)] == [
        f"# {h}: no figure (failed, verdict oom-kv-cache)" for h in ("w11", "w12", "w13")
    ]


def test_log_prob_logits_are_six_bytes_per_vocab_entry_the_held_out_8k_row_says_so():
    """verl 0.9.1's no-grad log-prob forward keeps bf16 logits and the entropy's softmax and product (6V bytes per
    token, memfit module doc); the old 10V (fp32 upcast) put held-out row w14 (Qwen3-1.7B, 8 704 tokens, budget
    26 112) 38 % over its real actor peak, 6V puts it within 10 %."""
    bench = _bench("memory_fit")
    rows, models = bench.load()
    [w14] = [r for r in rows if r["config"] == "w14-qwen3-1.7b-r8192-offload"]
    [res] = bench.evaluate([w14], models)
    assert abs(res["error"]) <= 0.10
    assert memfit.LOGPROB_LOGIT_BYTES == 6 and memfit.LOGIT_BYTES == 10


def test_the_j_learned_holdout_rows_are_what_the_real_run_recorded():
    """bench/memory_fit.csv's j1 rows against tests/fixtures/real-verl/tool-runs/j-learned: the OOM row's lower bound
    is gpu-mem.csv's largest sample inside attempt 1 (run.json's window), the update rows attempt 2's largest sample
    and verl's actor/perf/max_memory_allocated_gb in train.log."""
    import datetime

    from dapo_ops.agent import runfiles

    d = ROOT / "tests" / "fixtures" / "real-verl" / "tool-runs" / "j-learned"
    a1, a2 = runfiles.read_run(d)["attempts"]
    samples = []
    for line in (d / "gpu-mem.csv").read_text().splitlines()[1:]:
        t, used = line.split(",")[:2]
        ts = datetime.datetime.strptime(t.strip(), "%Y/%m/%d %H:%M:%S.%f").replace(tzinfo=datetime.timezone.utc)
        samples.append((ts.timestamp(), int(used.split()[0])))
    peak1 = max(m for t, m in samples if a1["started_at"] <= t <= a1["ended_at"])
    peak2 = max(m for t, m in samples if a2["started_at"] <= t <= a2["ended_at"])
    alloc = max(
        float(x) for x in re.findall(r"actor/perf/max_memory_allocated_gb:([0-9.]+)", (d / "train.log").read_text())
    )
    rows = {(r["config"], r["measure"]): float(r["measured_gib"]) for r in _bench("memory_fit").load()[0]}
    assert rows[("j1-qwen3-4b-48l-u0.6", "oom")] == round(peak1 / 1024, 2)
    assert rows[("j1-qwen3-4b-48l-u0.5", "nvidia-smi")] == round(peak2 / 1024, 2)
    assert rows[("j1-qwen3-4b-48l-u0.5", "torch-max-allocated")] == round(alloc, 2)


def test_one_step_off_weight_sync_counts_both_sides_and_the_bucket_rung_fits_the_rollout_pool():
    """One-step-off (separate_async): the checkpoint engine's send + receive buffers of the bucket on every rank of
    both pools (verl/checkpoint_engine/nccl_checkpoint_engine.py:121-124,165-172; hccl: 139-140) come on top of the
    trainer's state, and of vLLM's weights on the rollout pool: verl frees the KV cache before the buckets and
    restores it once ``finalize`` freed them (verl/checkpoint_engine/base.py:532-556, issue 43 F6), so the share
    and the buffers are never held at once. (Issue 34's version of this test added them: a 0.95 share on 64 GiB
    'did not fit' the sync, which verl's own order makes impossible.)"""
    m = memfit.Model.from_config(QWEN3_8B)
    base = dict(device_gib=64.0, framework="megatron", colocated=False, world=4, rollout_tp=4, seq=10240, tp=2, pp=2)
    e = memfit.estimate(m, memfit.Setup(util=0.8, **base))
    P = 8_190_735_360
    trainer = 1.16 + (2 * P / 4 + 12 * P / 4) / GIB + 2 * 2.0  # ctx + bf16 params + distributed optimizer + 2 buckets
    rollout_sync = 1.16 + 2 * P / 4 / GIB + 2 * 2.0  # ctx + vLLM's weights (rollout TP 4) + 2 buckets, KV cache freed
    assert e.phases["weight-sync"] == pytest.approx(max(trainer, rollout_sync, 0.8 * 64), abs=0.01)
    hot = memfit.estimate(m, memfit.Setup(util=0.95, **base))
    assert hot.phases["weight-sync"] == pytest.approx(0.95 * 64, abs=0.01) and hot.phases["weight-sync"] < 64
    assert hot.terms["weight_sync_side"] == "rollout"
    # the weight-bucket rung (bucket / 2) lowers both sides' sync by 2 x 1 GiB; the share does not lower it
    half = memfit.estimate(m, memfit.Setup(util=0.1, bucket_gib=1.0, **base))
    low = memfit.estimate(m, memfit.Setup(util=0.1, **base))
    assert low.phases["weight-sync"] - half.phases["weight-sync"] == pytest.approx(2.0, abs=0.01)
    assert low.terms["weight_sync_side"] == "trainer"


def test_the_h100_real_shape_holdout_rows_are_what_the_real_runs_recorded(tmp_path):
    """bench/memory_fit.csv's p11 (Qwen2.5-0.5B, response 2048, gpu/p-holdout.sh), o1-tool1 (Qwen3-1.7B, response
    2048, the speed run's tool half, gpu/o-speed.sh) and p12 (Qwen3-0.6B, response 4096, 2026-12-07 eighth session)
    rows, H100 2026-12-07: bench/holdout_rows.py's reading of the fixtures (gzipped train.log / proc-mem samples),
    every column but the estimate; at the plan's own budgets."""
    import shutil

    hr = _bench("holdout_rows")
    o1 = tmp_path / "o1-tool1"
    shutil.copytree(ROOT / "tests" / "fixtures" / "real-verl" / "tool-runs" / "o-speed-tool1-h100", o1)
    got = [ln for ln in hr.rows_of(HOLDOUT / "p11", hr.proc_mem_peaks(HOLDOUT / "p11" / "proc-mem.csv"), 79.65,
                                   "H100", "gpu/p-holdout.sh")]  # fmt: skip
    got += hr.rows_of(o1, {}, 79.65, "H100", "tool-runs/o-speed-tool1-h100")  # the source names the fixture
    got += hr.rows_of(HOLDOUT / "p12", hr.proc_mem_peaks(HOLDOUT / "p12" / "proc-mem.csv"), 79.65, "H100",
                      "gpu/p-holdout.sh")  # fmt: skip
    import csv as _csv

    header = (ROOT / "bench" / "memory_fit.csv").read_text().splitlines()[0].split(",")
    have = [dict(zip(header, r)) for r in _csv.reader(got)]
    rows, _ = _bench("memory_fit").load()
    want = [r for r in rows if r["config"].startswith(("p11-", "o1-tool1-"))]
    want += [r for r in rows if r["config"].startswith("p12-")]
    drop = lambda r: {k: v for k, v in r.items() if k != "estimate_gib"}  # noqa: E731
    assert [drop(r) for r in have] == [drop(r) for r in want] and len(want) == 5
    assert {r["response"] for r in want} == {"2048", "4096"} and all(r["update_tokens"] for r in want)


def test_the_h100_4b_and_7b_holdout_rows_are_what_the_real_runs_recorded():
    """bench/memory_fit.csv's p31 (Qwen3-4B, response 2048: the estimate started it on the offload rung) and p32
    (Qwen2.5-7B at the planned defaults under MEMORY_FIT=warn: the estimate said "does not fit", the real run ran out
    in the update), H100 2026-12-07 fifth session: bench/holdout_rows.py's reading of the fixtures, every column but
    the estimate; the OOM row is predicted as not fitting."""
    import csv as _csv

    hr = _bench("holdout_rows")
    got = []
    for rid in ("p31", "p32"):
        got += hr.rows_of(HOLDOUT / rid, hr.proc_mem_peaks(HOLDOUT / rid / "proc-mem.csv"), 79.65, "H100",
                          "gpu/p-holdout.sh")  # fmt: skip
    header = (ROOT / "bench" / "memory_fit.csv").read_text().splitlines()[0].split(",")
    have = [dict(zip(header, r)) for r in _csv.reader(got)]
    bench = _bench("memory_fit")
    rows, models = bench.load()
    want = [r for r in rows if r["config"].startswith(("p31-", "p32-"))]
    drop = lambda r: {k: v for k, v in r.items() if k != "estimate_gib"}  # noqa: E731
    assert [drop(r) for r in have] == [drop(r) for r in want] and len(want) == 3
    assert [r["measure"] for r in want] == ["torch-max-allocated", "nvidia-smi", "oom"]
    assert want[0]["offload"] == "1"  # the start rung ran (config name "-offload")
    [oom] = [r for r in bench.evaluate(want, models) if r["measure"] == "oom"]
    assert oom["estimate"] > float(oom["device_gib"])  # predicted "does not fit", observed


def test_a_dry_run_without_the_models_config_says_the_fit_is_the_launchs():
    """A dry run whose model lives only in the container (the usual case) printed the draft's budgets and rollout share
    as if they ran (a new-user trial: 20480 / 30720 / 0.6 printed, 23552 / 48128 / 0.65 + vLLM limits ran): its
    lines say the launch chooses them from the config.json and the device memory, and that a setting given stays."""
    st = settings.resolve({"framework": "fsdp"}, {}, {})
    p = plan_for(settings=st, host=None, mode="dapo", run_id="20261129-151200-a1b2", swanlab_logger=False)
    assert p.memory[0].startswith("memory-fit estimate: the model's config.json is not readable here")
    assert p.memory[1].startswith("fit: not chosen here (no config.json, no device memory): inv launch sets the token")
    assert "(what you set stays)" in p.memory[1] and len(p.memory) == 2


def test_the_estimate_reads_what_the_users_overrides_run():
    """The estimate took the features alone: a run whose ``--override`` offloads the actor (param_offload=True and
    optimizer_offload=True, appended after the features' keys, so verl runs them) was estimated without offload, did
    not fit on 18 GiB, and the ladder's offload rung was skipped ("your --override sets ..."): the plan refused it
    ("memory-fit: the run cannot fit"). The estimate now reads the user's overrides (the one parse, memfit.user_overrides): what
    they turn on or off of a memory feature, and FSDP2's offload policy."""
    over = [
        "actor_rollout_ref.actor.fsdp_config.param_offload=True",
        "actor_rollout_ref.actor.fsdp_config.optimizer_offload=true",
    ]
    spec = {
        "mode": "dapo",
        "framework": "fsdp",
        "settings": {
            "gpu_memory_utilization": 0.4,
            "max_prompt_length": 128,
            "max_response_length": 64,
            "n_gpus_per_node": 2,
            "rollout_tp": 1,
            "micro_batch_size": 8,
            "steps": 3,
            "extra_overrides": over,
        },
    }
    fs = resolve("-dynamic_batch,-gradient_checkpointing")
    bare = dict(spec, settings=dict(spec["settings"], extra_overrides=[]))
    assert memfit.fit(TINY_146B, bare, fs, 18.0).rungs == ["offload(weight-sync)"]  # 18.5 of 18 GiB without it
    f = memfit.fit(TINY_146B, spec, fs, 18.0)  # main's code: FitError "the run cannot fit: tightest weight-sync 18.5"
    assert f.planned.fits and f.rungs == [], f.lines()
    setup = memfit.setup_from_spec(spec, fs, 30.0)
    assert setup.offload and not setup.gc

    def setup_with(overrides, features="-dynamic_batch"):
        s = dict(spec, settings=dict(spec["settings"], extra_overrides=overrides))
        return memfit.setup_from_spec(s, resolve(features), 30.0)

    assert not setup_with(over[:1]).offload  # the optimizer state stays: counted as the feature off, whole
    assert not setup_with([over[0], "~actor_rollout_ref.actor.fsdp_config.optimizer_offload"]).offload
    assert setup_with([]).gc and not setup_with(["actor_rollout_ref.model.enable_gradient_checkpointing=False"]).gc
    assert setup_with(["actor_rollout_ref.model.enable_gradient_checkpointing=1"], "-gradient_checkpointing").gc
    assert setup_with(["actor_rollout_ref.actor.fsdp_config.offload_policy=True"]).offload_policy
    # a later override of the same key wins (Hydra applies them in order)
    assert not setup_with(over + ["actor_rollout_ref.actor.fsdp_config.param_offload=False"]).offload


GC_KEY = "actor_rollout_ref.model.enable_gradient_checkpointing"


def test_one_place_works_out_a_features_keys_and_gradient_checkpointing_owns_its_key_under_recompute():
    """Two copies worked out "which verl keys a feature sets": the dry run's table (overrides_for with the feature on
    and off, its ``-name`` toggled too) and memladder.feature_keys (the estimate, the ladder's "set by the user"
    skip; ``-name`` left as it was). They disagreed with the ``recompute`` feature on (FSDP): it turns gradient
    checkpointing on unless ``-gradient_checkpointing``, so the ladder's copy gave ``gradient_checkpointing`` no keys
    and the estimate never saw ``--override ...enable_gradient_checkpointing=False``. verl reads that key alone to
    turn checkpointing on (verl/workers/engine/fsdp/transformer_impl.py:335) and the user's override comes last in the
    argv: it is the feature's key. Now memladder.feature_keys is the one place (off = not on and ``-name``), and the
    dry run's table reads it."""
    from dapo_ops.core import memladder

    s = {"framework": "fsdp", "profile": "0.9", "max_prompt_length": 128, "max_response_length": 64}
    fs = resolve("recompute")
    keys = memladder.feature_keys(fs.names(), "gradient_checkpointing", fs.disabled, s)
    assert keys.get(GC_KEY) == (False, True)
    assert GC_KEY not in memladder.feature_keys(fs.names(), "recompute", fs.disabled, s)
    fs = resolve("-gradient_checkpointing,recompute")  # -gradient_checkpointing: recompute leaves it off
    assert memladder.feature_keys(fs.names(), "gradient_checkpointing", fs.disabled, s)[GC_KEY] == (False, True)
    spec = {
        "mode": "dapo",
        "framework": "fsdp",
        "settings": dict(s, n_gpus_per_node=2, rollout_tp=1, extra_overrides=[f"{GC_KEY}=False"]),
    }
    assert not memfit.setup_from_spec(spec, resolve("recompute"), 30.0).gc  # main's code: gc counted on


def test_a_users_gradient_checkpointing_off_with_recompute_on_is_estimated_as_verl_runs_it():
    """FSDP's ``recompute`` feature and ``gradient_checkpointing`` both write ``enable_gradient_checkpointing``.
    The plan writes the features' keys first and the user's ``--override`` last (overrides.verl_argv), so Hydra
    leaves the user's False; verl reads it apart from ``enable_activation_offload`` (transformer_impl.py:335,477-479):
    activation offload runs without checkpointing. The estimate counted ``recompute`` off too (its keys were worked
    out with gradient checkpointing already counted off, so the user's False read as "recompute's key off"), i.e.
    neither checkpointing nor activation offload: now it is gradient checkpointing off, recompute on, and the update's
    activations are those of activation offload alone (two layers' worth)."""
    from dapo_ops.core import overrides

    base = {"max_prompt_length": 128, "max_response_length": 64, "n_gpus_per_node": 2, "rollout_tp": 1}
    spec = {"mode": "dapo", "framework": "fsdp", "settings": dict(base, extra_overrides=[f"{GC_KEY}=False"])}
    fs = resolve("recompute")
    argv = overrides.verl_argv(spec, fs)
    assert argv.index(f"{GC_KEY}=True") < argv.index(f"{GC_KEY}=False")  # the user's comes later: Hydra keeps it
    assert "actor_rollout_ref.model.enable_activation_offload=True" in argv
    setup = memfit.setup_from_spec(spec, fs, 80.0)
    assert (setup.gc, setup.recompute) == (False, True)
    models = json.loads((Path(__file__).parents[1] / "bench" / "memory_fit_models.json").read_text())
    m = memfit.Model.from_config(models["qwen3-1.7b"])
    act = memfit.estimate(m, setup).terms["activations_gib"]
    per_token = 2 * memfit.act_bytes_per_token_layer(m) + memfit.LOGIT_BYTES * m.vocab
    assert act == pytest.approx(setup.update_tokens * per_token / memfit.GIB)


def test_an_explicit_no_offload_keeps_the_estimates_offload_rung_off():
    """A new-user trial: ``--no-offload`` (or ENABLE_OFFLOAD=false, or the config file's ``offload = false``) kept a
    learned offload rung off (commit 9528817) but the memory-fit estimate still started on offload when the run did
    not fit without it (verl ran param_offload=True). The estimate follows the same rule now: it never starts on
    offload over that setting, the launch is refused in one line naming it, and MEMORY_FIT=warn launches as planned
    with that line as its warning."""
    flags = {
        "framework": "fsdp",
        "gpu_memory_utilization": 0.4,
        "max_prompt_length": 128,
        "max_response_length": 64,
        "features": "-dynamic_batch,-gradient_checkpointing",
        "micro_batch_size": 8,
        "rollout_tp": 1,
        "train_batch_size": 8,
        "ppo_mini_batch_size": 8,
        "rollout_n": 1,
        "steps": 3,
    }
    mem = {"model_config": TINY_146B, "device_gib": 30.0}  # weight-sync 31.5 of 30 GiB: fits only with offload

    def mk(st):
        return plan_for(
            settings=st, host=ONE_GPU, mode="dapo", run_id="20261129-151200-a1b2", swanlab_logger=False, memory=mem
        )

    # offload left at its default: the estimate starts on it
    assert mk(settings.resolve(flags, {}, {})).features.source_of("offload") == "estimate"
    forms = {
        "--no-offload": settings.resolve(dict(flags, offload=False), {}, {}),
        "ENABLE_OFFLOAD=false": settings.resolve(flags, {"ENABLE_OFFLOAD": "false"}, {}),
        "offload = false": settings.resolve(flags, {}, {"run": {"offload": False}}),
    }
    for said, st in forms.items():
        with pytest.raises(planning.PlanError) as e:
            mk(st)
        line = str(e.value)
        assert "\n" not in line
        assert line.startswith("memory-fit: the run does not fit without offload, which you turned off ("), line
        assert said in line and "tightest weight-sync 31.5 of 30.0 GiB" in line, line
        assert "MEMORY_FIT=warn" in line, line
    warn = settings.resolve(dict(flags, offload=False), {"MEMORY_FIT": "warn"}, {})
    p = mk(warn)
    assert not p.features.has("offload")
    assert "actor_rollout_ref.actor.fsdp_config.param_offload=True" not in p.argv
    (line,) = [ln for ln in p.memory if "does not fit without offload" in ln]
    assert "--no-offload" in line and line.endswith(
        "(MEMORY_FIT=warn: launching as planned; the device-OOM ladder decides)"
    )
