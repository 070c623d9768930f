"""Override generator: argv content per profile/mode/framework, `+` placement, check_spec one-liners."""

import pytest
from hypothesis import given, settings as hsettings, strategies as st

from dapo_ops.core import defaults, profiles
from dapo_ops.core.features import resolve
from dapo_ops.core.overrides import OverrideError, build_command, hydra_value
from dapo_ops.core.runspec import check_spec


def spec(mode="dapo", framework="fsdp", profile="0.9", accelerator="gpu", **settings):
    s = {
        "steps": 100,
        "model_path": "/models/Qwen3-8B",
        "train_file": "/data/dapo-math-17k.parquet",
        "val_file": "/data/aime-2024.parquet",
    }
    s.update(settings)
    return {
        "version": 1,
        "run_id": "20261129-151200-a1b2",
        "mode": mode,
        "framework": framework,
        "profile": profile,
        "accelerator": accelerator,
        "workdir": "/verl",
        "python": "python3",
        "run_dir": "/verl/dapo_runs/20261129-151200-a1b2",
        "settings": s,
        "logger": ["console"],
    }


def kv(argv):
    out = {}
    for a in argv[3:]:
        if "=" in a and not a.startswith("--"):
            k, v = a.split("=", 1)
            out[k] = v
    return out


def test_entry_modules_and_config_names():
    a = build_command(spec(), resolve(""))
    assert a[:3] == ["python3", "-m", "verl.trainer.main_ppo"] and not a[3].startswith("--config-name")
    a = build_command(spec(framework="megatron"), resolve(""))
    assert "model_engine=megatron" in a
    a = build_command(spec("one-step-off", "megatron"), resolve(""))
    assert a[2] == "verl.trainer.main_ppo" and "model_engine=megatron" in a  # V1 separate_async, not the legacy entry
    assert not any(x.startswith("--config-name") or x.startswith("hydra.searchpath") for x in a)
    a = build_command(spec("one-step-off", "megatron", profile="0.8"), resolve(""))
    assert a[2] == "verl.experimental.one_step_off_policy.main_ppo"  # the 0.8 profile keeps its entry
    assert "--config-name=one_step_off_ppo_megatron_trainer" in a
    a = build_command(spec(profile="0.8"), resolve(""))
    assert a[2] == "recipe.dapo.main_dapo"
    a = build_command(spec(profile="0.8", framework="megatron"), resolve(""))
    assert "--config-name=dapo_megatron_trainer" in a


def test_always_present_trainer_keys():
    for mode in profiles.MODES:
        for fw in profiles.FRAMEWORKS:
            d = kv(build_command(spec(mode, fw), resolve("")))
            assert d["trainer.logger"].startswith("[console")
            assert d["trainer.default_local_dir"] == "/verl/dapo_runs/20261129-151200-a1b2/checkpoints"
            assert d["trainer.resume_mode"] == "auto"
            assert d["trainer.total_training_steps"] == "100"
            assert d["trainer.save_freq"] == "10"
            assert d["hydra.run.dir"] == "/verl/dapo_runs/20261129-151200-a1b2/hydra"
            assert d["trainer.experiment_name"] == "20261129-151200-a1b2"


def test_logger_console_plus_swanlab_when_configured():
    sp = spec()
    sp["logger"] = ["swanlab"]
    assert kv(build_command(sp, resolve("")))["trainer.logger"] == "[console,swanlab]"
    sp["logger"] = []
    assert kv(build_command(sp, resolve("")))["trainer.logger"] == "[console]"


def test_dapo_algorithm_settings():
    d = kv(build_command(spec(), resolve("")))
    assert d["actor_rollout_ref.actor.clip_ratio_low"] == "0.2"
    assert d["actor_rollout_ref.actor.clip_ratio_high"] == "0.28"
    assert d["actor_rollout_ref.actor.loss_agg_mode"] == "token-mean"
    assert d["algorithm.adv_estimator"] == "grpo"
    assert d["algorithm.use_kl_in_reward"] == "False" and d["actor_rollout_ref.actor.use_kl_loss"] == "False"
    assert d["reward.reward_manager.name"] == "dapo"
    assert d["+reward.reward_kwargs.max_resp_len"] == "8192"
    assert d["+reward.reward_kwargs.overlong_buffer_cfg.enable"] == "True"
    assert int(d["+reward.reward_kwargs.overlong_buffer_cfg.len"]) <= 8192
    assert d["algorithm.filter_groups.enable"] == "True"
    # one-step-off on 0.9 (V1 separate_async) does DAPO dynamic sampling; the 0.8 legacy entry does not
    assert kv(build_command(spec("one-step-off"), resolve("")))["algorithm.filter_groups.enable"] == "True"
    d = kv(build_command(spec("one-step-off", profile="0.8"), resolve("")))
    assert "algorithm.filter_groups.enable" not in d


def test_08_profile_keys():
    d = kv(build_command(spec(profile="0.8", framework="megatron"), resolve("offload")))
    assert d["reward_model.reward_manager"] == "dapo"
    assert d["actor_rollout_ref.actor.megatron.grad_offload"] == "True"
    assert "+reward_model.reward_kwargs.max_resp_len" in d
    d = kv(build_command(spec(profile="0.8"), resolve("offload")))
    assert d["critic.model.fsdp_config.param_offload"] == "True"
    d9 = kv(build_command(spec(profile="0.9", framework="megatron"), resolve("offload")))
    assert not any("grad_offload" in k for k in d9)
    assert d9["actor_rollout_ref.actor.megatron.param_offload"] == "True"


def test_profile_for_version():
    assert profiles.profile_for_version("0.9.1") == "0.9"
    assert profiles.profile_for_version("0.9.0") == "0.9"
    assert profiles.profile_for_version("0.10.0.dev") == "0.9"
    assert profiles.profile_for_version("0.8.0.dev") == "0.8"
    with pytest.raises(OverrideError):
        profiles.profile_for_version("0.7.1")
    with pytest.raises(OverrideError):
        profiles.profile_for_version("garbage")


def test_one_step_off_pools_and_hybrid_engine():
    d = kv(
        build_command(
            spec("one-step-off", trainer_gpus=6, rollout_gpus=2, train_batch_size=48, ppo_mini_batch_size=12),
            resolve(""),
        )
    )
    assert d["actor_rollout_ref.hybrid_engine"] == "False"
    assert d["trainer.n_gpus_per_node"] == "6" and d["actor_rollout_ref.rollout.n_gpus_per_node"] == "2"
    assert d["trainer.nnodes"] == "1" and d["actor_rollout_ref.rollout.nnodes"] == "1"
    # the legacy entry's keys are gone on the V1 path (trainer_separate_async.py:64-66 reads the rollout pool)
    assert not any(k.startswith("rollout.") or k.startswith("hydra.searchpath") for k in d)
    d = kv(
        build_command(
            spec(
                "one-step-off",
                profile="0.8",
                trainer_gpus=6,
                rollout_gpus=2,
                train_batch_size=48,
                ppo_mini_batch_size=12,
            ),
            resolve(""),
        )
    )
    assert d["rollout.n_gpus_per_node"] == "2" and d["hydra.searchpath"] == "[file:///verl/verl/trainer/config]"


# ---- verl 0.9.1 fidelity (issue 15): each finding, checked against what verl's code reads


def test_launch_runs_v1_colocate_async_dapo_with_a_staleness_bound():
    """trainer_base.py:129 reads trainer.v1.trainer_mode (ppo_trainer.yaml:238 defaults to sync)."""
    d = kv(build_command(spec(), resolve("")))
    assert d["trainer.v1.trainer_mode"] == "colocate_async"
    assert d["trainer.v1.colocate_async.num_warmup_batches"] == "1"
    assert d["trainer.v1.sampler.max_off_policy_threshold"] == "2"
    assert d["trainer.v1.sampler.max_off_policy_strategy"] == "drop"
    assert d["algorithm.filter_groups.enable"] == "True" and d["algorithm.filter_groups.metric"] == "acc"
    assert "algorithm.filter_groups.max_num_gen_batches" not in d  # V1 ignores it (trainer_base.py:203-209)
    d = kv(build_command(spec(trainer_mode="sync"), resolve("")))
    assert d["trainer.v1.trainer_mode"] == "sync" and not any(k.startswith("trainer.v1.sampler") for k in d)
    assert "trainer.v1.trainer_mode" not in kv(build_command(spec(profile="0.8"), resolve("")))


def test_one_step_off_is_v1_separate_async_dapo():
    d = kv(build_command(spec("one-step-off", accelerator="npu"), resolve("")))
    assert d["trainer.v1.trainer_mode"] == "separate_async"
    assert d["trainer.v1.separate_async.parameter_sync_step"] == "4"  # 64 = 4 x 16 (trainer_separate_async.py:59)
    assert d["algorithm.filter_groups.enable"] == "True"
    assert (
        d["actor_rollout_ref.rollout.checkpoint_engine.backend"] == "nccl"
    )  # naive is refused (:68); tests/test_npu_path.py
    g = kv(build_command(spec("one-step-off", accelerator="gpu", parameter_sync_step=4), resolve("")))
    assert g["actor_rollout_ref.rollout.checkpoint_engine.backend"] == "nccl"


def test_parameter_sync_step_mismatch_is_one_line_naming_both_settings():
    with pytest.raises(OverrideError) as e:
        check_spec(spec("one-step-off", train_batch_size=32, parameter_sync_step=4))
    msg = str(e.value)
    assert "\n" not in msg and "train_batch_size=32" in msg and "parameter_sync_step=4" in msg
    assert "ppo_mini_batch_size=16" in msg
    check_spec(spec("one-step-off", train_batch_size=32))  # 0 (default): 32 / 16 = 2
    assert (
        kv(build_command(spec("one-step-off", train_batch_size=32), resolve("")))[
            "trainer.v1.separate_async.parameter_sync_step"
        ]
        == "2"
    )
    with pytest.raises(OverrideError, match="--mode sync does not apply to one-step-off"):
        check_spec(spec("one-step-off", trainer_mode="sync"))


def test_megatron_remove_padding_uses_the_model_key_v1_copies_into_the_engine():
    """engine_workers.py:114/:585/:630 overwrite the engine's use_remove_padding with the model's."""
    d = kv(build_command(spec(framework="megatron"), resolve("-remove_padding")))
    assert d["actor_rollout_ref.model.use_remove_padding"] == "False"
    assert "actor_rollout_ref.actor.megatron.use_remove_padding" not in d
    d8 = kv(build_command(spec(framework="megatron", profile="0.8"), resolve("-remove_padding")))
    assert d8["actor_rollout_ref.actor.megatron.use_remove_padding"] == "False"


def test_npu_fsdp_turns_the_engine_torch_compile_off():
    """engine/fsdp.yaml:54 + fsdp/transformer_impl.py:183-187 read fsdp_config.use_torch_compile."""
    assert (
        kv(build_command(spec(accelerator="npu"), resolve("")))["actor_rollout_ref.actor.fsdp_config.use_torch_compile"]
        == "False"
    )
    assert "actor_rollout_ref.actor.fsdp_config.use_torch_compile" not in kv(build_command(spec(), resolve("")))


def test_max_position_embeddings_reaches_the_rollout():
    d = kv(build_command(spec(max_position_embeddings=40960), resolve("")))
    assert d[profiles.PLUS_MAX_POS] == "40960" and d[profiles.PLUS_MAX_POS_ROLLOUT] == "40960"


def test_bounded_checkpoints_when_set():
    assert kv(build_command(spec(max_actor_ckpt_to_keep=3), resolve("")))["trainer.max_actor_ckpt_to_keep"] == "3"
    assert "trainer.max_actor_ckpt_to_keep" not in kv(build_command(spec(max_actor_ckpt_to_keep=0), resolve("")))


@pytest.mark.parametrize("mode", profiles.MODES)
@pytest.mark.parametrize("fw", profiles.FRAMEWORKS)
def test_no_ref_or_critic_keys_without_a_reference_or_critic(mode, fw):
    """need_reference_policy / need_critic (verl/trainer/ppo/utils.py:75-107): KL off and GRPO need neither."""
    keys = [k.lstrip("+") for k in kv(build_command(spec(mode, fw), resolve("offload,recompute")))]
    assert not [k for k in keys if k.startswith("actor_rollout_ref.ref.") or k.startswith("critic.")]
    assert "actor_rollout_ref.nccl_timeout" not in keys
    sp = spec(mode, fw, extra_overrides=["actor_rollout_ref.actor.use_kl_loss=True"])
    keys = kv(build_command(sp, resolve("offload")))
    assert any(k.startswith("actor_rollout_ref.ref.") for k in keys)  # a KL loss brings the reference back
    assert any(k.startswith("critic.") for k in kv(build_command(spec(mode, fw, profile="0.8"), resolve(""))))


def test_plus_only_where_the_yaml_lacks_the_key():
    plus = {k for k in kv(build_command(spec(framework="fsdp", accelerator="npu"), resolve(""))) if k.startswith("+")}
    assert plus == {profiles.PLUS_ATTN_FSDP} | {k for k in plus if k.startswith("+reward.reward_kwargs.")}
    assert not any(
        k.startswith("++")
        for k in kv(build_command(spec(framework="megatron", accelerator="npu"), resolve("recompute,offload")))
    )


def test_feature_keys_follow_the_feature_set():
    d = kv(build_command(spec(), resolve("-dynamic_batch,-flash_attn,chunked_prefill,prefix_cache")))
    assert d["actor_rollout_ref.actor.use_dynamic_bsz"] == "False"
    assert d["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"] == "1"
    assert "actor_rollout_ref.actor.ppo_max_token_len_per_gpu" not in d
    assert d[profiles.PLUS_ATTN_FSDP] == "sdpa"
    assert d["actor_rollout_ref.rollout.enable_chunked_prefill"] == "True"
    assert d["actor_rollout_ref.rollout.enable_prefix_caching"] == "True"
    d = kv(build_command(spec(framework="megatron"), resolve("").add("recompute", "oom-retry-1")))
    assert d["actor_rollout_ref.actor.megatron.override_transformer_config.recompute_granularity"] == "full"
    d = kv(build_command(spec(framework="fsdp"), resolve("-gradient_checkpointing")))
    assert d["actor_rollout_ref.model.enable_gradient_checkpointing"] == "False"


def test_chunked_prefill_off_keeps_batched_tokens_at_least_model_len():
    d = kv(build_command(spec(max_response_length=30000), resolve("-chunked_prefill")))
    assert int(d["actor_rollout_ref.rollout.max_num_batched_tokens"]) >= int(
        d["actor_rollout_ref.rollout.max_model_len"]
    )


def test_setting_changes_apply():
    d = kv(build_command(spec(), resolve(""), {"gpu_memory_utilization": 0.75}))
    assert d["actor_rollout_ref.rollout.gpu_memory_utilization"] == "0.75"


#: the memory ladder's setting rungs (dapo_ops/core/memladder.py ``_setting_rung``; ``offload`` / ``recompute`` are
#: feature rungs)
SETTING_RUNGS = ("rollout-util", "update-batch", "logprob-batch", "weight-bucket", "rollout-eager", "offload-policy")


@pytest.mark.parametrize("accelerator", ["gpu", "npu"])
@pytest.mark.parametrize("user_features", ["", "-dynamic_batch"])
@pytest.mark.parametrize("rung", SETTING_RUNGS)
def test_one_ladder_key_table_the_argv_and_a_learned_start_agree_on(rung, user_features, accelerator):
    """Every setting change a ladder rung makes names its verl keys in the one table (core/memladder.py
    SETTING_KEYS; ``token_budgets`` carries its keys in its value), and both readers of that table agree: in the
    retry's argv the ladder's value beats a raw ``--override`` of the key (build_command drops the override), and a
    learned memo making the same change is not used when the user set that key with ``--override``
    (learned.conflicts). Before: learned.py kept its own copy with ``gpu_memory_utilization``, overrides.py's had
    none, so the ladder's kv-cache rung lost to a raw override of ``rollout.gpu_memory_utilization`` in the argv; and
    neither had ``rollout_eager`` (the rollout-eager rung's ``enforce_eager``)."""
    from dapo_ops.core import defaults, learned, memladder
    from dapo_ops.core.memladder import SETTING_KEYS

    fs = resolve(user_features)
    sp = spec(accelerator=accelerator, nnodes=1, n_gpus_per_node=8, micro_batch_size=8)
    settings = defaults.complete_settings(dict(sp["settings"]))
    changes, why_not = memladder._setting_rung(rung, fs, settings)
    assert changes, why_not
    for name, value in changes.items():
        keys = list(value) if name == "token_budgets" else list(SETTING_KEYS.get(name, ()))
        assert keys, f"the ladder's change {name} has no verl keys in memladder.SETTING_KEYS"
        for key in keys:
            want = hydra_value(value[key] if name == "token_budgets" else value)
            raw = f"{key}={'False' if isinstance(value, bool) else 12345}"
            sp_raw = spec(
                accelerator=accelerator, nnodes=1, n_gpus_per_node=8, micro_batch_size=8, extra_overrides=[raw]
            )
            argv = build_command(sp_raw, fs, {name: value})
            last = [a.split("=", 1)[1] for a in argv if a.split("=", 1)[0].lstrip("+") == key]
            # a key the plan does not set here (the ref's budget without a reference model) is simply not overridden
            assert raw not in argv and (not last or last[-1] == want), (key, last)
            memo = {"rung": {"setting_changes": {name: value, "memory_rungs": []}}}
            assert learned.conflicts(memo, (), {}, [raw]) == [f"it changes {key}, which you set with --override"]


def test_fsdp_means_fsdp2_strategy():
    d = kv(build_command(spec(framework="fsdp"), resolve("")))
    assert d["actor_rollout_ref.actor.strategy"] == "fsdp2" and "critic.strategy" not in d  # no critic for GRPO
    assert kv(build_command(spec(framework="fsdp", profile="0.8"), resolve("")))["critic.strategy"] == "fsdp2"
    assert "actor_rollout_ref.actor.strategy" not in kv(build_command(spec(framework="megatron"), resolve("")))


def test_fsdp_on_one_device_is_verls_fsdp_no_shard():
    """The H200 speed run (bench/speed.md): verl's own keys (strategy fsdp -> torch's NO_SHARD at world 1) trained
    faster than the tool's fsdp2 in every actor phase. One device: fsdp; more: fsdp2 (the runbook's). Old code: fsdp2."""
    one = kv(build_command(spec(framework="fsdp", nnodes=1, n_gpus_per_node=1, rollout_tp=1), resolve("")))
    assert one["actor_rollout_ref.actor.strategy"] == "fsdp" and one["trainer.n_gpus_per_node"] == "1"
    two = kv(build_command(spec(framework="fsdp", nnodes=1, n_gpus_per_node=2), resolve("")))
    assert two["actor_rollout_ref.actor.strategy"] == "fsdp2"
    multi = kv(build_command(spec(framework="fsdp", nnodes=2, n_gpus_per_node=1, rollout_tp=1), resolve("")))
    assert multi["actor_rollout_ref.actor.strategy"] == "fsdp2"


def test_npu_device():
    assert kv(build_command(spec(accelerator="npu"), resolve("")))["trainer.device"] == "npu"
    assert "trainer.device" not in kv(build_command(spec(accelerator="gpu"), resolve("")))


def test_hydra_value_rendering():
    assert hydra_value(True) == "True" and hydra_value(None) == "null"
    assert hydra_value(["console", "swanlab"]) == "[console,swanlab]"
    assert hydra_value("/a b/c") == "'/a b/c'"
    assert hydra_value("it's") == "'it\\'s'"
    assert hydra_value("true") == "'true'" and hydra_value("1e3") == "'1e3'"


@pytest.mark.parametrize(
    "sp,kw,needle",
    [
        (spec("one-step-off", trainer_gpus=6, rollout_gpus=4), {"host_devices": 8}, "TRAINER_GPUS=6 + ROLLOUT_GPUS=4"),
        (spec("one-step-off", rollout_gpus=3, trainer_gpus=4), {"host_devices": 8}, "not divisible"),
        (spec(max_response_length=40000), {"model_max_len": 32768}, "exceeds the model's context"),
        (spec(steps=0), {}, "TRAIN_STEPS=0"),
        (spec(steps=-3), {}, "TRAIN_STEPS=-3"),
        (spec(framework="jax"), {}, "unknown framework 'jax'"),
        (spec(mode="async"), {}, "unknown mode 'async'"),
        (spec(n_gpus_per_node=16), {"host_devices": 8}, "host has 8"),
        (spec(gpu_memory_utilization=1.5), {}, "gpu_memory_utilization"),
    ],
)
def test_check_spec_rejects_with_one_line(sp, kw, needle):
    with pytest.raises(OverrideError) as ei:
        check_spec(sp, **kw)
    assert needle in str(ei.value)
    assert "\n" not in str(ei.value)


def test_check_spec_accepts_context_override_and_runbook_split():
    check_spec(spec("one-step-off"), host_devices=8, model_max_len=40960)
    check_spec(spec(max_response_length=40000, max_position_embeddings=65536), model_max_len=32768)
    d = kv(build_command(spec(max_position_embeddings=65536), resolve("")))
    assert d[profiles.PLUS_MAX_POS] == "65536"


def test_token_budget_override_below_sequence_is_refused():
    with pytest.raises(OverrideError, match="below max_prompt_length"):
        build_command(spec(token_budgets={"actor_rollout_ref.actor.ppo_max_token_len_per_gpu": 100}), resolve(""))


@hsettings(max_examples=150, deadline=None)
@given(
    st.integers(1, 16384),
    st.integers(1, 65536),
    st.sampled_from(profiles.MODES),
    st.sampled_from(profiles.FRAMEWORKS),
    st.booleans(),
)
def test_property_token_budgets_cover_prompt_plus_response(prompt, resp, mode, fw, dyn):
    fs = resolve("" if dyn else "-dynamic_batch")
    d = kv(build_command(spec(mode, fw, max_prompt_length=prompt, max_response_length=resp), fs))
    budgets = {k: int(v) for k, v in d.items() if "max_token_len" in k}
    assert bool(budgets) == dyn
    assert all(v >= prompt + resp for v in budgets.values())
    if "actor_rollout_ref.rollout.max_num_batched_tokens" in d:  # emitted only with -chunked_prefill
        assert int(d["actor_rollout_ref.rollout.max_num_batched_tokens"]) >= prompt + resp


def test_recompute_respects_an_explicit_minus_gradient_checkpointing_on_fsdp():
    fs = resolve("-gradient_checkpointing").add("recompute", "oom-retry-1")
    d = kv(build_command(spec(), fs))
    assert d["actor_rollout_ref.model.enable_gradient_checkpointing"] == "False"  # the user's choice stays
    # activation offload works without checkpointing (verl/utils/activation_offload.py enable_ckpt=False)
    assert d["actor_rollout_ref.model.enable_activation_offload"] == "True"
    d = kv(build_command(spec(), resolve("").add("recompute", "oom-retry-1")))
    assert d["actor_rollout_ref.model.enable_activation_offload"] == "True"


@pytest.mark.parametrize(
    "kw,needle",
    [
        ({"ppo_mini_batch_size": 128, "train_batch_size": 64}, "larger than train_batch_size"),
        ({"train_batch_size": 3, "rollout_n": 3, "ppo_mini_batch_size": 1}, "do not split evenly"),
    ],
)
def test_batch_sizes_checked(kw, needle):
    with pytest.raises(OverrideError, match=needle):
        check_spec(spec("one-step-off", **kw))


def test_every_batch_problem_at_once_with_values_that_work():
    """The 0.8 profile's legacy trainers split the whole step over every device: both batches are checked there.
    On 0.9 (V1) the step's batch is padded by verl itself; only the mini-batch is (issue 43 F8, tests/test_issue43.py)."""
    s = spec(train_batch_size=64, ppo_mini_batch_size=16, rollout_n=8, n_gpus_per_node=8, nnodes=3, profile="0.8")
    with pytest.raises(OverrideError) as e:
        check_spec(s)
    msg = str(e.value)
    assert "24 trainer devices (3 nodes x 8)" in msg and "\n" not in msg
    assert "train_batch_size=64" in msg and "ppo_mini_batch_size=16" in msg
    assert "--train-batch-size 66 or 63" in msg and "--ppo-mini-batch-size 18 or 15" in msg
    check_spec(spec(train_batch_size=66, ppo_mini_batch_size=18, rollout_n=8, n_gpus_per_node=8, nnodes=3))
    with pytest.raises(OverrideError) as e:
        check_spec(spec(train_batch_size=64, ppo_mini_batch_size=16, rollout_n=8, n_gpus_per_node=8, nnodes=3))
    assert "train_batch_size" not in str(e.value) and "--ppo-mini-batch-size 18 or 15" in str(e.value)


# ------------------------------------------------------------ issue 32 item 1: user strings reach OmegaConf literally


def _hydra_then_omegaconf(text: str):
    """What verl's config holds for ``k=hydra_value(text)``: Hydra's override parser, then OmegaConf's resolution."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    value = OverridesParser.create().parse_overrides(["k=" + hydra_value(text)])[0].value()
    return OmegaConf.to_container(OmegaConf.create({"k": value}), resolve=True)["k"]


NASTY = [
    "exp-${oc.env:SWANLAB_API_KEY}",
    "~",
    "/home/u/~x",
    "${oc.decode:'{a: 1}'}",
    "${x}",
    "/verl/m${IFS}x",
    "$",
    "a$b",
    "${",
    "\\${x}",
    "\\\\${x}",
    "it's",
    'say "hi"',
    "back\\slash",
    "trail\\",
    "trail\\\\",
    "two words",
    "a,b=c",
    "[x]",
    "{y}",
    "${a.${oc.env:HOME}}",
    "'",
    "\\'",
    "\\",
]


@pytest.mark.parametrize("text", NASTY)
def test_hydra_value_reaches_omegaconf_literally(text):
    assert _hydra_then_omegaconf(text) == text


def test_the_old_renderer_leaked_and_doubled_backslashes():
    """Before: ``'exp-${oc.env:...}'`` was evaluated, ``a\\b`` became ``a\\\\b`` (Hydra keeps a backslash that does
    not precede a quote)."""
    assert hydra_value("exp-${oc.env:K}") == "'exp-\\${oc.env:K}'"
    assert hydra_value("a\\b") == "'a\\b'" and hydra_value("trail\\") == "'trail\\\\'"


@hsettings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab$\\{}'\" :.,=[]()\n\t")), max_size=16) | st.text(max_size=12))
def test_hydra_value_is_literal_for_any_text(text):
    """Property: for arbitrary text, Hydra's override grammar + OmegaConf interpolation give back the text."""
    assert _hydra_then_omegaconf(text) == text


@pytest.fixture(scope="module")
def verl_root():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sandbox"))
    from fetch_verl_config import verl_config_root

    return str(verl_config_root())


def test_the_compose_check_sees_the_literal_value(verl_root, monkeypatch):
    """The compose check's own path (agent/compose.py, verl 0.9.1 yaml) reads the quoted values literally; with the
    resolver's variable set, nothing of it shows up."""
    from dapo_ops.agent import compose

    monkeypatch.setenv("SWANLAB_API_KEY", "CANARY-compose-123456")
    texts = [t for t in NASTY if t not in ("${",)]
    overrides = [f"hydra.searchpath=[file://{verl_root}/verl/trainer/config]"]
    overrides += [f"+dapo_test.v{i}={hydra_value(t)}" for i, t in enumerate(texts)]
    overrides += ["actor_rollout_ref.model.path=" + hydra_value("/verl/m${IFS}x")]
    cfg = compose.composed(verl_root, f"{verl_root}/verl/trainer/config", "ppo_trainer", overrides)
    # the text the check's resolve stored (read raw: a read through the DictConfig would evaluate it again, the
    # in-place problem of test_an_escape_does_not_survive_verls_in_place_resolve)
    from omegaconf import OmegaConf

    raw = OmegaConf.to_container(cfg, resolve=False)
    assert [raw["dapo_test"][f"v{i}"] for i in range(len(texts))] == texts
    assert raw["actor_rollout_ref"]["model"]["path"] == "/verl/m${IFS}x"
    assert "CANARY" not in str(raw)


def test_an_escaped_experiment_still_leaks_through_verls_own_interpolations(verl_root, monkeypatch):
    """Why generated values with '${' are refused rather than escaped (1): verl 0.9.1's yaml interpolates
    ``trainer.default_local_dir: checkpoints/${trainer.project_name}/${trainer.experiment_name}``
    (verl/trainer/config/ppo_trainer.yaml:217); OmegaConf's in-place resolve (the compose check, main_ppo.py:145)
    evaluates the escaped experiment name again inside it."""
    from omegaconf import OmegaConf

    from dapo_ops.agent import compose

    monkeypatch.setenv("SWANLAB_API_KEY", "CANARY-compose-123456")
    cfg = compose.composed(
        verl_root,
        f"{verl_root}/verl/trainer/config",
        "ppo_trainer",
        [
            f"hydra.searchpath=[file://{verl_root}/verl/trainer/config]",
            "trainer.experiment_name=" + hydra_value("exp-${oc.env:SWANLAB_API_KEY}"),
        ],
    )
    raw = OmegaConf.to_container(cfg, resolve=False)
    assert raw["trainer"]["experiment_name"] == "exp-${oc.env:SWANLAB_API_KEY}"
    assert raw["trainer"]["default_local_dir"].endswith("exp-CANARY-compose-123456")


def test_an_escape_does_not_survive_verls_in_place_resolve():
    """Why generated values with '${' are refused rather than escaped (2): verl/trainer/main_ppo.py:144-145 prints
    ``to_container(config, resolve=True)`` and then runs ``OmegaConf.resolve(config)``, which stores the unescaped
    text back; the next read (the tracker's experiment name) evaluates it."""
    import os

    from omegaconf import OmegaConf

    os.environ["DAPO_TEST_SECRETVAR"] = "CANARY-inplace-123456"
    try:
        cfg = OmegaConf.create({"trainer": {"experiment_name": "exp-\\${oc.env:DAPO_TEST_SECRETVAR}"}})
        assert "CANARY" not in str(OmegaConf.to_container(cfg, resolve=True))  # main_ppo.py:144: literal
        OmegaConf.resolve(cfg)  # main_ppo.py:145
        assert cfg.trainer.experiment_name == "exp-CANARY-inplace-123456"  # the tracker's read: evaluated
    finally:
        del os.environ["DAPO_TEST_SECRETVAR"]


@pytest.mark.parametrize("field,value", [("run_dir", "/runs/${oc.env:HOME}/r1"), ("ckpt_dir", "/ck${IFS}x")])
def test_build_command_refuses_an_interpolation_in_any_generated_value(field, value):
    """The backstop for strings that do not pass the settings table (inventory paths, a hand-written spec)."""
    sp = spec()
    if field == "ckpt_dir":
        sp["settings"]["ckpt_dir"] = value
    else:
        sp[field] = value
    with pytest.raises(OverrideError) as e:
        build_command(sp, resolve(""))
    assert "holds '${'" in str(e.value) and "oc.env" not in str(e.value) and "IFS" not in str(e.value)


@pytest.mark.parametrize("name", ["experiment", "project", "model_path", "train_file", "val_file"])
def test_build_command_refuses_an_interpolation_in_a_setting(name):
    with pytest.raises(OverrideError, match="holds '\\$\\{'"):
        build_command(spec(**{name: "x-${oc.env:SWANLAB_API_KEY}"}), resolve(""))


@pytest.mark.parametrize("value", ["True", "true", "1"])
def test_async_checkpoint_saving_is_refused_with_one_line(value):
    """Issue 34 finding 13: with actor.checkpoint.async_save=True verl 0.9.1's V1 trainer skips the resume tracker
    and no V1 code finalizes the async save (read from the wheel below), so a retry / --resume would start at 0."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sandbox"))
    from fetch_verl_config import verl_config_root

    src = (verl_config_root() / "verl/trainer/ppo/v1/trainer_base.py").read_text()
    assert 'if actor_ckpt_cfg.get("async_save", False):' in src
    assert "skip write latest_checkpointed_iteration.txt when async_save is True" in src
    assert "async_calls_finalize_fn_exec" not in src  # (the V0 ray_trainer.py finalizes; V1 never does)
    s = spec()
    s["settings"]["extra_overrides"] = [f"actor_rollout_ref.actor.checkpoint.async_save={value}"]
    with pytest.raises(OverrideError) as e:
        build_command(s, resolve(""))
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("actor_rollout_ref.actor.checkpoint.async_save=True cannot be resumed")
    s["settings"]["extra_overrides"] = ["actor_rollout_ref.actor.checkpoint.async_save=False"]
    assert "actor_rollout_ref.actor.checkpoint.async_save=False" in build_command(s, resolve(""))


@pytest.mark.parametrize(
    "key",
    [
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu",
        "++actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu",
        "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu",
    ],
)
def test_a_token_budget_override_below_one_sequence_is_refused_under_dynamic_batch(key):
    """verl asserts max_token_len >= the padded sequence length when it splits a batch (seqlen_balancing.py:384),
    after minutes of start-up (trial: the dry run kept 2048 with prompt + response 2560)."""
    s = spec(max_prompt_length=512, max_response_length=2048, extra_overrides=[f"{key}=2048"])
    with pytest.raises(OverrideError) as e:
        check_spec(dict(s, features=resolve("").to_json()))
    msg = str(e.value)
    assert "\n" not in msg and f"{key}=2048" in msg and "at least 2560" in msg
    check_spec(dict(s, features=resolve("-dynamic_batch").to_json()))  # no budget without dynamic batch
    s["settings"]["extra_overrides"] = [f"{key}=2560"]
    check_spec(dict(s, features=resolve("").to_json()))


def test_a_users_plus_override_of_a_key_the_plan_adds_replaces_the_plans_and_composes():
    """The plan adds ``+...override_config.attn_implementation``; a user's ``+`` of the same key after it made Hydra
    refuse ("Could not append to config. An item is already at ...") at verl's start (trial). The user's wins: the
    plan's goes, and the argv composes against verl 0.9.1's own yaml."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sandbox"))
    from fetch_verl_config import verl_config_root
    from dapo_ops.control.preflight import compose_check as validate

    key = "actor_rollout_ref.model.override_config.attn_implementation"
    s = spec(extra_overrides=[f"+{key}=flash_attention_2"])
    argv = build_command(s, resolve("-flash_attn"))
    assert [a for a in argv if key in a] == [f"+{key}=flash_attention_2"]
    assert validate.compose_check(argv, str(verl_config_root())) == []
    # a plain (change) override after the plan's add is Hydra's own order: both stay
    s2 = spec(extra_overrides=[f"{key}=eager"])
    assert [a for a in build_command(s2, resolve("-flash_attn")) if key in a] == [f"+{key}=sdpa", f"{key}=eager"]


@pytest.mark.parametrize(
    "settings, extra, where",
    [
        ({"micro_batch_size": 5}, [], "(--micro-batch-size / MICRO_BATCH_SIZE)"),
        ({}, ["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=3"], "ppo_micro_batch_size_per_gpu=3)"),
    ],
)
def test_a_micro_batch_that_does_not_divide_a_devices_batch_is_refused_without_dynamic_batch(settings, extra, where):
    """verl asserts "data size must be divisible by ... micro_batch_size_per_gpu" (engine/utils.py:126) at the first
    update, after minutes of start-up (trial: '=3' passed the dry run with 16 sequences a device per mini-batch)."""
    base = dict(n_gpus_per_node=1, rollout_tp=1, train_batch_size=8, ppo_mini_batch_size=2, rollout_n=8)
    base["extra_overrides"] = extra
    s = spec(**base, **settings)
    with pytest.raises(OverrideError) as e:
        check_spec(dict(s, features=resolve("-dynamic_batch").to_json()))
    msg = str(e.value)
    assert "\n" not in msg and where in msg and "engine/utils.py:126" in msg
    check_spec(dict(s, features=resolve("").to_json()))  # dynamic batch: no micro-batch
    base["extra_overrides"] = []
    check_spec(dict(spec(**base, micro_batch_size=4), features=resolve("-dynamic_batch").to_json()))


@pytest.mark.parametrize(
    "extra, ref, critic",
    [
        (["actor_rollout_ref.actor.use_kl_loss=1"], True, False),  # verl: `or` of the DictConfig values, 1 is on
        (["algorithm.use_kl_in_reward=yes"], True, False),  # a non-empty string: truthy in verl
        (["actor_rollout_ref.actor.use_kl_loss=0"], False, False),
        (["critic.enable=1"], False, True),
        (["algorithm.adv_estimator=gae", "critic.enable=0"], False, False),  # bool(0): off though gae
        (["algorithm.adv_estimator=gae", "critic.enable=null"], False, True),  # null: the estimator decides
    ],
)
def test_the_reference_and_critic_follow_verls_truthiness_of_the_users_switches(extra, ref, critic):
    """need_reference_policy / need_critic read the composed values by truthiness (verl/trainer/ppo/utils.py:75-107):
    '=1' turns the KL loss on; the plan read only 'true' and left the reference's keys out (a ref without them)."""
    assert profiles.needs_ref_critic(
        defaults.RunSpec.read(spec(extra_overrides=extra)).settings["extra_overrides"]
    ) == (ref, critic)


def test_the_micro_batch_check_follows_verls_dynamic_switch_and_leaves_the_log_prob_forward_alone():
    """review: the user's ``use_dynamic_bsz`` override decides whether a micro-batch is used at all; the log-prob
    forward's per-rank batch depends on the V1 trainer's padding and mode, so no refusal is made of it here."""
    base = dict(n_gpus_per_node=1, rollout_tp=1, train_batch_size=8, ppo_mini_batch_size=2, rollout_n=8)
    bad = "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=3"
    on = spec(**base, extra_overrides=[bad, "actor_rollout_ref.actor.use_dynamic_bsz=True"])
    check_spec(dict(on, features=resolve("-dynamic_batch").to_json()))  # verl splits by tokens: 3 is never used
    off = spec(**base, extra_overrides=[bad, "actor_rollout_ref.actor.use_dynamic_bsz=False"])
    with pytest.raises(OverrideError, match="does not divide the 16 sequences"):
        check_spec(dict(off, features=resolve("").to_json()))
    lp = spec(**base, extra_overrides=["actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=48"])
    check_spec(dict(lp, features=resolve("-dynamic_batch").to_json()))


@pytest.mark.parametrize(
    "key", ["actor_rollout_ref.actor.ppo_max_token_len_per_gpu", "actor_rollout_ref.actor.use_dynamic_bsz"]
)
def test_deleting_a_key_verl_reads_straight_from_the_config_is_refused(key):
    """engine_workers.py:616-633 read these by attribute on the struct-mode config: '~key' fails verl's start with
    ConfigAttributeError (review: the fit's line claimed verl ran ActorConfig's default)."""
    with pytest.raises(OverrideError, match="deletes a key verl 0.9.1 reads straight from the config"):
        check_spec(dict(spec(extra_overrides=[f"~{key}"]), features=resolve("").to_json()))


def test_a_budget_over_the_sequence_parallel_size_is_accepted():
    """verl checks budget x sp_size >= the sequence (engine/utils.py:110): Megatron CP 2 takes a 12288 budget for
    16384-token sequences (review: refused)."""
    extra = [
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=12288",
        "actor_rollout_ref.actor.megatron.context_parallel_size=2",
    ]
    s = spec(framework="megatron", max_prompt_length=2048, max_response_length=14336, extra_overrides=extra)
    check_spec(dict(s, features=resolve("").to_json()))
    s["settings"]["extra_overrides"] = extra[:1]
    with pytest.raises(OverrideError, match="at least 16384"):
        check_spec(dict(s, features=resolve("").to_json()))


@pytest.mark.parametrize("value, ok", [("True", True), ("false", True), ("0", True), ("1", True), ("no", False),
                                       ("null", False), ("yes", False), ("'False'", False)])  # fmt: skip
def test_a_model_flag_override_must_mean_the_same_in_the_trainer_and_the_vllm_server(value, ok):
    """enable_gradient_checkpointing / use_remove_padding reach HFModelConfig twice: by truthiness in the trainer and
    as a typed bool in the vLLM server ('no' is on in one and off in the other; null fails the server) (review)."""
    key = "actor_rollout_ref.model.enable_gradient_checkpointing"
    s = dict(spec(extra_overrides=[f"{key}={value}"]), features=resolve("").to_json())
    if ok:
        check_spec(s)
    else:
        with pytest.raises(OverrideError, match="write True or False"):
            check_spec(s)


def test_check_spec_parses_each_extra_override_once(monkeypatch):
    """check_spec's override checks (the syntax / model-flag / async-save one, the token budgets, the micro-batch,
    the whole step, Ulysses padding) each parsed ``extra_overrides`` again: 5 parses of every ``--override`` per
    check. One parse now, handed to the checks; what they refuse is kept (the tests above)."""
    from dapo_ops.core import hydra_override, runspec

    seen: list[str] = []
    real = hydra_override.parse_override

    def counting(item):
        seen.append(str(item))
        return real(item)

    monkeypatch.setattr(hydra_override, "parse_override", counting)
    monkeypatch.setattr(runspec, "parse_override", counting)
    extra = [
        "trainer.val_before_train=False",
        "+actor_rollout_ref.actor.clip_ratio_c=10.0",
        "~trainer.rollout_data_dir",
    ]
    sp = spec(extra_overrides=extra)
    sp["features"] = resolve("").to_json()
    check_spec(sp, host_devices=8)
    assert sorted(seen) == sorted(extra), seen
    with pytest.raises(OverrideError, match="async_save"):  # still refused, from the same one parse
        check_spec(spec(extra_overrides=["actor_rollout_ref.actor.checkpoint.async_save=True"]))
