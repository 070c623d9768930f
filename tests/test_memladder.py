"""The device-OOM ladder per phase (dapo_ops/core/memladder.py via ladder.decide): one test per phase's rungs, the
runbook contract (explicit features kept, append only, MAX_OOM_RETRIES, sources recorded), the host-OOM
rollback of what the ladder moved to host RAM, and the setting changes reaching verl's argv."""

import pytest

from dapo_ops.core import ladder
from dapo_ops.core import memladder
from dapo_ops.core import overrides
from dapo_ops.core.features import resolve
from dapo_ops.core.classify.verdict import PHASES as C_PHASES

BASE = {
    "max_prompt_length": 2048,
    "max_response_length": 8192,
    "gpu_memory_utilization": 0.6,
    "rollout_tp": 2,
    "trainer_gpus": 4,
    "steps": 100,
    "framework": "fsdp",
    "mode": "dapo",
}
SEQ = 2048 + 8192
ACTOR = "actor_rollout_ref.actor.ppo_max_token_len_per_gpu"
ROLLOUT_LP = "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu"


def run_ladder(fs, phase, settings=None, max_oom=10, steps=10, side=None):
    """Feed the same-phase OOM back until the ladder stops, as the supervisor does. Returns (decisions, settings)."""
    s = dict(BASE, **(settings or {}))
    out = []
    for used in range(steps):
        d = ladder.decide(fs, "oom-device", {"phase": phase, "side": side}, used, max_oom, {}, s)
        out.append(d)
        if d.action != "retry":
            break
        assert d.counter == "oom"
        fs = d.features
        s.update(d.setting_changes)
    return out, s


def rungs(decisions):
    return [d.setting_changes["memory_rungs"][-1]["rung"] for d in decisions if d.action == "retry"]


@pytest.mark.parametrize("phase", ["weight-sync", "generation"])
def test_rollout_phases_lower_the_rollout_share_then_offload_the_actor(phase):
    ds, s = run_ladder(resolve(""), phase)
    assert rungs(ds) == ["rollout-util", "offload"]
    assert ds[0].setting_changes["gpu_memory_utilization"] == 0.5
    assert ds[1].features.source_of("offload") == "oom-retry-2"
    assert ds[-1].action == "stop"
    assert [r["source"] for r in s["memory_rungs"]] == ["oom-retry-1", "oom-retry-2"]
    assert all(r["phase"] == phase for r in s["memory_rungs"])


def test_rollout_init_falls_back_to_eager_before_offload():
    """Issue 34 finding 8: graph mode is verl's default (and what its NPU examples run); the rollout's start-up
    captures its graphs, so the rollout-init ladder's second rung is eager mode (enforce_eager=True), then offload."""
    ds, s = run_ladder(resolve(""), "rollout-init")
    assert rungs(ds) == ["rollout-util", "rollout-eager", "offload"]
    assert ds[1].setting_changes["rollout_eager"] is True
    for accel in ("gpu", "npu"):
        sp = {
            "mode": "dapo",
            "framework": "fsdp",
            "profile": "0.9",
            "run_dir": "/r",
            "accelerator": accel,
            "settings": {
                "steps": 10,
                "n_gpus_per_node": 8,
                "train_file": "/d/t.parquet",
                "val_file": "/d/v.parquet",
                "model_path": "/m",
            },
        }
        assert "actor_rollout_ref.rollout.enforce_eager=True" not in overrides.build_command(sp, resolve(""))
        assert "actor_rollout_ref.rollout.enforce_eager=True" in overrides.build_command(
            sp, resolve(""), ds[1].setting_changes
        )
    # a rollout that already runs eager (ROLLOUT_EAGER=true) skips the rung: it would change nothing
    ds, s = run_ladder(resolve(""), "rollout-init", {"rollout_eager": True})
    assert rungs(ds) == ["rollout-util", "offload"]


def test_rollout_share_at_its_floor_goes_straight_to_offload():
    ds, _ = run_ladder(resolve(""), "weight-sync", {"gpu_memory_utilization": 0.4})
    assert rungs(ds) == ["offload"]
    assert any("at the floor 0.4" in s for s in ds[0].skipped)


def test_one_step_off_never_offloads_for_a_rollout_oom():
    ds, s = run_ladder(resolve(""), "generation", {"mode": "one-step-off", "gpu_memory_utilization": 0.8})
    assert rungs(ds) == ["rollout-util", "rollout-util"]
    assert s["gpu_memory_utilization"] == 0.6 and not ds[-1].features.has("offload")


def test_weight_sync_with_offload_turned_off_by_the_user_says_so():
    ds, _ = run_ladder(resolve("-offload"), "weight-sync")
    assert rungs(ds) == ["rollout-util"]
    assert ds[-1].action == "stop" and any("turned off by the user" in x for x in ds[-1].skipped)


def test_update_fsdp_dynamic_batch_halves_the_token_budget_then_offload_policy_then_recompute_never_offload():
    ds, s = run_ladder(resolve(""), "update")
    assert rungs(ds) == ["update-batch", "offload-policy", "recompute"]
    assert ds[0].setting_changes["token_budgets"] == {ACTOR: SEQ}  # 2 x seq -> seq, the floor verl asserts
    assert any("update-batch: skipped, token budget at the floor" in x for x in ds[1].skipped)
    assert ds[1].setting_changes["fsdp_offload_policy"] is True
    assert not ds[-1].features.has("offload")  # offload does not lower the update's peak (engine/base.py:314-328)
    assert ds[2].features.source_of("recompute") == "oom-retry-3"


def test_update_without_dynamic_batch_divides_the_micro_batch_from_the_users_override():
    s0 = {"extra_overrides": ["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=64"]}
    ds, s = run_ladder(resolve("-dynamic_batch"), "update", s0)
    assert rungs(ds)[:2] == ["update-batch", "update-batch"]
    assert ds[0].setting_changes["ppo_micro_batch_size_per_gpu"] == 16
    assert ds[1].setting_changes["ppo_micro_batch_size_per_gpu"] == 4


@pytest.mark.parametrize("cur, steps", [(18, [3, 1]), (12, [3, 1]), (16, [4, 1]), (6, [1]), (9, [1])])
def test_the_micro_batch_rung_steps_to_a_divisor_verl_accepts(cur, steps):
    """The fit may choose a micro-batch that is a device's whole mini-batch, 18: /4 gave 4, which does not divide 18
    and verl refuses at its start (trial); the rung takes the largest divisor of the micro-batch at or under /4."""
    s0 = {"extra_overrides": [f"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={cur}"]}
    ds, _ = run_ladder(resolve("-dynamic_batch"), "update", s0)
    got = [
        d.setting_changes["ppo_micro_batch_size_per_gpu"]
        for d in ds
        if "ppo_micro_batch_size_per_gpu" in d.setting_changes
    ]
    assert got[: len(steps)] == steps and all(cur % g == 0 for g in got)


def test_update_megatron_has_no_offload_policy_rung():
    ds, _ = run_ladder(resolve(""), "update", {"framework": "megatron"})
    assert rungs(ds) == ["update-batch", "recompute"]


def test_log_prob_halves_the_log_prob_budgets_down_to_the_floor_then_stops():
    ds, s = run_ladder(resolve(""), "log-prob")
    assert rungs(ds) == ["logprob-batch", "logprob-batch"]
    assert ds[0].setting_changes["token_budgets"][ROLLOUT_LP] == 3 * SEQ // 2
    assert s["token_budgets"][ROLLOUT_LP] == SEQ
    assert ds[-1].action == "stop" and not ds[-1].features.has("offload")


@pytest.mark.parametrize(
    "phase,words",
    [("model-load", "loading the model"), ("checkpoint-load", "on resume"), ("checkpoint-save", "saving a checkpoint")],
)
def test_load_and_save_phases_stop_with_the_fix(phase, words):
    d = ladder.decide(resolve(""), "oom-device", {"phase": phase}, 0, 2, {}, BASE)
    assert d.action == "stop" and words in d.reason and d.suggestions
    assert d.features == resolve("")


def test_unknown_phase_keeps_the_runbook_ladder():
    ds, _ = run_ladder(resolve(""), "unknown")
    assert rungs(ds) == ["offload", "recompute"]


def test_phase_of_keeps_only_the_classifier_phases():
    assert memladder.phase_of({"phase": "update"}) == "update"
    assert memladder.phase_of({"phase": "update_actor"}) == "unknown"  # a verl function name is no phase
    assert memladder.phase_of({}) == "unknown" and memladder.phase_of({"phase": "bogus"}) == "unknown"


def test_max_oom_retries_bounds_every_phase_and_explicit_features_stay():
    fs = resolve("recompute,prefix_cache")
    for phase in C_PHASES:
        ds, _ = run_ladder(fs, phase, max_oom=1)
        assert len([d for d in ds if d.action == "retry"]) <= 1, phase
        assert {"recompute", "prefix_cache"} <= ds[-1].features.names(), phase


def test_host_oom_rolls_back_activation_offload_and_offload_policy_the_ladder_added():
    ds, s = run_ladder(resolve(""), "update", steps=3)
    fs = ds[-1].features
    assert fs.source_of("recompute") == "oom-retry-3" and s["fsdp_offload_policy"] is True
    d = ladder.decide(fs, "oom-host", {}, 3, 5, {}, s)
    assert d.action == "retry" and d.counter == "rollback-offload"
    assert not d.features.has("recompute") and d.setting_changes == {"fsdp_offload_policy": False}
    # an explicit recompute (the user's) is not rolled back; Megatron's full recompute uses no host RAM
    assert ladder.decide(resolve("recompute"), "oom-host", {}, 0, 2, {}, BASE).action == "stop"
    meg = resolve("").add("recompute", "oom-retry-1")
    assert ladder.decide(meg, "oom-host", {}, 1, 2, {}, dict(BASE, framework="megatron")).action == "stop"


def test_setting_rungs_reach_verls_argv_and_replace_a_raw_override():
    spec = {
        "mode": "dapo",
        "framework": "fsdp",
        "profile": "0.9",
        "run_dir": "/r",
        "accelerator": "gpu",
        "settings": {
            "steps": 10,
            "n_gpus_per_node": 8,
            "train_file": "/d/t.parquet",
            "val_file": "/d/v.parquet",
            "model_path": "/m",
            "extra_overrides": ["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=64"],
        },
    }
    fs = resolve("-dynamic_batch")
    argv = overrides.build_command(
        spec,
        fs,
        {"ppo_micro_batch_size_per_gpu": 4, "fsdp_offload_policy": True, "memory_rungs": [{"rung": "update-batch"}]},
    )
    assert "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4" in argv
    assert "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=64" not in argv
    assert "actor_rollout_ref.actor.fsdp_config.offload_policy=True" in argv
    before = overrides.build_command(spec, fs)
    assert before[-1] == "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=64"  # untouched without a ladder change
    dyn = overrides.build_command(spec, resolve(""), {"token_budgets": {ACTOR: SEQ}})
    assert f"{ACTOR}={SEQ}" in dyn


def test_plan_shows_the_ladder_per_phase():
    lines = ladder.plan_ladder(resolve(""), 2, dict(BASE))
    by = {ln.split(":")[0]: ln for ln in lines if ln.startswith("device OOM in ")}
    assert set(by) == {f"device OOM in {p}" for p in C_PHASES}
    assert "offload-policy" in by["device OOM in update"] and "+ offload" not in by["device OOM in update"]
    assert "rollout-util" in by["device OOM in weight-sync"] and "+ offload" in by["device OOM in weight-sync"]
    assert by["device OOM in checkpoint-load"].endswith("stop with the fix")


@pytest.mark.parametrize(
    "log,settings,first",
    [
        # run 3: 1.46 B, colocated, gpu_memory_utilization 0.9, no offload: OOM in vLLM's wake-up (update_weights);
        # run 4 finished with offload; the ladder first lowers the share, then offloads
        ("verl-run-3-oom.log", {"gpu_memory_utilization": 0.9}, ("rollout-util", {"gpu_memory_utilization": 0.8})),
        # run 7: OOM in update_actor with offload already on and micro-batch 64; run 8 finished with micro-batch 4
        (
            "verl-run-7-big-update-oom-offload.log",
            {
                "gpu_memory_utilization": 0.5,
                "extra_overrides": ["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=64"],
            },
            ("update-batch", {"ppo_micro_batch_size_per_gpu": 16}),
        ),
    ],
)
def test_real_verl_oom_logs_get_their_phases_rung(log, settings, first):
    from pathlib import Path

    from dapo_ops.core import classify

    v = classify.classify_file(str(Path(__file__).parent / "fixtures" / "real-verl" / log), exit_code=1)
    assert v.cls == "oom-device"
    fs = resolve("offload,-dynamic_batch") if "run-7" in log else resolve("-dynamic_batch")
    ds, s = run_ladder(fs, v.detail["phase"], settings)
    rung, changes = first
    assert rungs(ds)[0] == rung and {k: ds[0].setting_changes[k] for k in changes} == changes
    if "run-7" in log:  # 64 -> 16 -> 4: the micro-batch that made run 8 finish, on the second retry
        assert s["ppo_micro_batch_size_per_gpu"] == 4 and rungs(ds)[:2] == ["update-batch", "update-batch"]
    else:
        assert rungs(ds) == ["rollout-util", "offload"]


# ---------------------------------------------------------------- one-step-off weight sync by side (issue 34 F4)

BUCKET = "actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes"


def _verl_rollout_yaml():
    import sys
    from pathlib import Path

    import yaml

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sandbox"))
    from fetch_verl_config import verl_config_root

    root = verl_config_root()
    return yaml.safe_load((root / "verl/trainer/config/rollout/rollout.yaml").read_text()), root


def test_bucket_default_is_verls_and_both_engines_allocate_two_buckets():
    """The rung's start value is verl 0.9.1's own default, and verl's nccl engine holds 2 x bucket on the device
    (the reason halving it lowers the trainer's peak), read from the wheel."""
    y, root = _verl_rollout_yaml()
    assert y["checkpoint_engine"]["update_weights_bucket_megabytes"] == memladder.BUCKET_MB_DEFAULT
    src = (root / "verl/checkpoint_engine/nccl_checkpoint_engine.py").read_text()
    assert (
        "self.send_buf = torch.zeros(self.bucket_size" in src and "self.recv_buf = torch.zeros(self.bucket_size" in src
    )
    assert memladder.BUCKET_KEY == BUCKET


def test_one_step_off_trainer_side_weight_sync_oom_halves_the_bucket_never_the_rollout_share():
    ds, s = run_ladder(
        resolve(""), "weight-sync", {"mode": "one-step-off", "gpu_memory_utilization": 0.8}, side="trainer"
    )
    assert rungs(ds) == ["weight-bucket", "weight-bucket"]
    assert [d.setting_changes["weight_sync_bucket_mb"] for d in ds if d.action == "retry"] == [1024, 512]
    assert s["gpu_memory_utilization"] == 0.8  # the rollout pool's share is on other devices
    assert s["memory_rungs"][0]["side"] == "trainer"
    spec = {
        "mode": "one-step-off",
        "framework": "fsdp",
        "profile": "0.9",
        "run_dir": "/r",
        "accelerator": "gpu",
        "settings": {
            "steps": 10,
            "trainer_gpus": 4,
            "rollout_gpus": 4,
            "train_batch_size": 32,
            "ppo_mini_batch_size": 32,
            "train_file": "/d/t.parquet",
            "val_file": "/d/v.parquet",
            "model_path": "/m",
            "extra_overrides": [f"{BUCKET}=4096"],
        },
    }
    argv = overrides.build_command(spec, resolve(""), ds[0].setting_changes)
    assert f"{BUCKET}=1024" in argv and f"{BUCKET}=4096" not in argv  # the rung wins over the raw override


def test_one_step_off_rollout_side_weight_sync_halves_the_bucket_first():
    """issue 43 F6: verl frees the rollout's KV cache for the sync (tests/test_issue43.py reads it in the wheel): the
    share cannot lower the sync peak, the bucket can; the share comes last (the KV cache's re-allocation after)."""
    for side in ("rollout", None):
        ds, _ = run_ladder(
            resolve(""), "weight-sync", {"mode": "one-step-off", "gpu_memory_utilization": 0.8}, side=side
        )
        assert rungs(ds) == ["weight-bucket", "weight-bucket", "rollout-util"], side


def test_classifier_records_the_side_of_a_weight_sync_oom():
    from dapo_ops.core import classify

    oom = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
        "79.11 GiB of which 1.02 GiB is free."
    )
    trainer = "\n".join(
        [
            "step:3 - actor/pg_loss:0.1",
            "Traceback (most recent call last):",
            '  File "/verl/verl/workers/engine_workers.py", line 766, in update_weights',
            "    metrics = await self.checkpoint_engine.send_weights(per_tensor_param, global_steps=global_steps)",
            '  File "/verl/verl/checkpoint_engine/nccl_checkpoint_engine.py", line 340, in send_weights',
            "    self.send_buf[offset:offset + size].copy_(weight.view(-1).view(torch.uint8))",
            oom,
        ]
    )
    rollout = "\n".join(
        [
            "step:3 - actor/pg_loss:0.1",
            "Traceback (most recent call last):",
            '  File "/verl/verl/checkpoint_engine/base.py", line 356, in update_weights',
            "    weights = self.checkpoint_engine.receive_weights(global_steps=global_steps)",
            '  File "/verl/verl/checkpoint_engine/nccl_checkpoint_engine.py", line 390, in receive_weights',
            "    self.recv_buf = torch.zeros(self.bucket_size, dtype=torch.uint8, device='cuda')",
            oom,
        ]
    )
    vt, vr = classify.classify(trainer, exit_code=1), classify.classify(rollout, exit_code=1)
    assert vt.cls == "oom-device" and vt.detail["phase"] == "weight-sync" and vt.detail["side"] == "trainer", vt
    assert vr.detail.get("phase") == "weight-sync" and vr.detail.get("side") == "rollout", vr


def test_plan_shows_one_weight_sync_ladder_per_side_in_one_step_off():
    lines = ladder.plan_ladder(resolve(""), 2, dict(BASE, mode="one-step-off"))
    by = {ln.split(":")[0]: ln for ln in lines if ln.startswith("device OOM in weight-sync")}
    assert "weight-bucket" in by["device OOM in weight-sync (trainer side)"]
    assert "rollout-util" not in by["device OOM in weight-sync (trainer side)"]
    # issue 43 F6: the bucket first on the rollout side too (the share would not lower the sync peak)
    assert "weight-bucket" in by["device OOM in weight-sync (rollout side)"]
    assert "rollout-util" not in by["device OOM in weight-sync (rollout side)"]  # third, past MAX_OOM_RETRIES=2


# ---------------------------------------------------------------- every rung changes the argv (issue 34 F5)

#: keys whose change lowers no peak in DAPO: entropy checkpointing acts only when entropy has grads
#: (verl/trainer/ppo/v1/trainer_base.py:1831-1833: calculate_entropy or entropy_coeff != 0; DAPO's is 0)
INERT = {"actor_rollout_ref.actor.entropy_checkpointing"}


def _argv_spec(mode, framework, accelerator):
    s = {
        "steps": 10,
        "train_file": "/d/t.parquet",
        "val_file": "/d/v.parquet",
        "model_path": "/m",
        "gpu_memory_utilization": 0.7,
    }
    if mode == "one-step-off":
        s.update(trainer_gpus=4, rollout_gpus=4, train_batch_size=32, ppo_mini_batch_size=32)
    else:
        s.update(n_gpus_per_node=8)
    return {
        "mode": mode,
        "framework": framework,
        "profile": "0.9",
        "run_dir": "/r",
        "accelerator": accelerator,
        "settings": s,
    }


def _kv(argv):
    return dict(a.split("=", 1) for a in argv if "=" in a and not a.startswith("-"))


@pytest.mark.parametrize("framework", ["fsdp", "megatron"])
@pytest.mark.parametrize("mode", ["dapo", "one-step-off"])
@pytest.mark.parametrize(
    "feats",
    ["", "-gradient_checkpointing", "-dynamic_batch", "-gradient_checkpointing,-offload", "offload", "-recompute"],
)
def test_every_rung_changes_what_verl_runs(framework, mode, feats):
    """A rung the supervisor takes relaunches a different configuration: its argv differs from the previous
    attempt's in a key that lowers a peak (never only in an inert key), for every phase and side."""
    spec = _argv_spec(mode, framework, "gpu")
    for phase in C_PHASES:
        for side in (None, "trainer", "rollout"):
            fs, changes, used = resolve(feats), {}, 0
            s = dict(spec["settings"], framework=framework, mode=mode)
            prev = _kv(overrides.build_command(spec, fs, changes))
            while True:
                d = ladder.decide(fs, "oom-device", {"phase": phase, "side": side}, used, 10, {}, s)
                if d.action != "retry":
                    break
                used += 1
                fs = d.features
                changes = dict(changes, **d.setting_changes)
                s.update(d.setting_changes)
                cur = _kv(overrides.build_command(spec, fs, changes))
                diff = {k for k in set(cur) | set(prev) if cur.get(k) != prev.get(k)} - INERT
                assert diff, (phase, side, feats, d.setting_changes["memory_rungs"][-1])
                prev = cur


def test_activation_offload_needs_no_gradient_checkpointing_in_verl():
    """The recompute rung with -gradient_checkpointing turns activation offload on: verl's
    enable_activation_offloading takes enable_ckpt=False (verl/utils/activation_offload.py), read from the wheel."""
    _, root = _verl_rollout_yaml()
    src = (root / "verl/utils/activation_offload.py").read_text()
    assert "def enable_activation_offloading(model, strategy, enable_ckpt=False):" in src
    impl = (root / "verl/workers/engine/fsdp/transformer_impl.py").read_text()
    assert "if self.model_config.enable_activation_offload:" in impl


PARAM_OFF = "actor_rollout_ref.actor.fsdp_config.param_offload"
OPTIM_OFF = "actor_rollout_ref.actor.fsdp_config.optimizer_offload"


def test_a_rung_the_users_overrides_already_set_is_skipped_for_the_next_that_lowers_the_peak():
    """The ladder offered ``offload`` to a run whose ``--override`` already set the actor's param and optimizer
    offload (a review): the retry would have run the same command again and spent an OOM retry. A rung that changes
    nothing verl runs is skipped (the next rung of the phase is taken), and the user's overrides stay in the argv,
    last, as given."""
    both = [f"{PARAM_OFF}=True", f"{OPTIM_OFF}=True"]
    ds, s = run_ladder(resolve(""), "unknown", {"extra_overrides": both})
    assert rungs(ds) == ["recompute"]  # the phase-less ladder: offload, recompute
    assert any("offload: skipped, it would change nothing" in x and PARAM_OFF in x for x in ds[0].skipped)
    ds, _ = run_ladder(resolve(""), "generation", {"extra_overrides": both})
    assert rungs(ds) == ["rollout-util"] and ds[-1].action == "stop"  # nothing after it lowers the rollout's peak
    # one of the two left to change: the rung changes the other, and the user's value stays what verl runs
    ds, s = run_ladder(resolve(""), "unknown", {"extra_overrides": [f"{PARAM_OFF}=False"]}, steps=1)
    assert rungs(ds) == ["offload"]
    spec = {"mode": "dapo", "framework": "fsdp", "settings": dict(s, extra_overrides=[f"{PARAM_OFF}=False"])}
    argv = overrides.verl_argv(spec, ds[0].features)
    assert argv[-1] == f"{PARAM_OFF}=False" and f"{OPTIM_OFF}=True" in argv
