"""Planning and the dry-run plan: spec, features with sources, ladder, command, paths; no host needed."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dapo_ops.control.launch import dryrun as plan_mod
from dapo_ops.control.launch import plan as planning
from dapo_ops.control import settings
from dapo_ops.control.inventory.model import Host
from dapo_ops.core import redact
from plan_helpers import plan_for
from config_helpers import no_config

RUN_ID = "20261129-151200-a1b2"


def st(**flags):
    return settings.resolve(flags, {}, {})


def test_plan_without_host_uses_defaults_and_is_complete():
    p = plan_for(settings=st(steps=100, framework="fsdp"), host=None, mode="dapo", run_id=RUN_ID, swanlab_logger=False)
    assert p.spec["host"] == "local" and p.spec["container"] == "verl" and p.spec["accelerator"] == "npu"
    assert p.run_dir == f"/verl/dapo_runs/{RUN_ID}"
    assert p.ckpt_dir == f"/verl/dapo_runs/{RUN_ID}/checkpoints" and p.log_path == f"/verl/dapo_runs/{RUN_ID}/train.log"
    assert p.spec["settings"]["steps"] == 100 and p.spec["max_oom_retries"] == 2
    assert p.spec["features"] == p.features.to_json() and p.spec["disabled_features"] == []
    n = len(p.spec["launcher"])  # NPU: the CANN launcher first (test_npu_plan_sources_cann_...)
    assert p.argv[n : n + 3] == ["python3", "-m", "verl.trainer.main_ppo"]
    assert f"trainer.default_local_dir={p.ckpt_dir}" in p.argv
    assert "trainer.logger=[console]" in p.argv
    assert (
        p.command.startswith("cd /verl && bash -c ") and " dapo-ops-cann python3 -m verl.trainer.main_ppo " in p.command
    )


def test_plan_with_inventory_host():
    h = Host(
        name="h1",
        address="198.51.100.11",
        accelerator="gpu",
        devices=8,
        workdir="/work",
        runs_dir="/runs",
        model_dir="/models",
        data_dir="/data",
        container="c1",
    )
    p = plan_for(settings=st(), host=h, mode="one-step-off", run_id=RUN_ID, swanlab_logger=True)
    assert p.spec["host"] == "h1" and p.spec["container"] == "c1" and p.spec["workdir"] == "/work"
    assert p.run_dir == f"/runs/{RUN_ID}"
    s = p.spec["settings"]
    assert s["model_path"] == "/models/Qwen3-8B" and s["train_file"] == "/data/dapo-math-17k.parquet"
    assert "trainer.logger=[console,swanlab]" in p.argv
    assert "trainer.v1.trainer_mode=separate_async" in p.argv and not any("hydra.searchpath" in a for a in p.argv)
    assert "trainer.device=npu" not in p.argv
    p8 = plan_for(settings=st(profile="0.8"), host=h, mode="one-step-off", run_id=RUN_ID, swanlab_logger=True)
    assert "hydra.searchpath=[file:///work/verl/trainer/config]" in p8.argv


@pytest.mark.parametrize(
    "mode,flags,want",
    [
        ("dapo", {}, "trainer_mode=colocate_async"),
        ("dapo", {"trainer_mode": "sync"}, "trainer_mode=sync"),
        ("one-step-off", {}, "trainer_mode=separate_async"),
    ],
)
def test_plan_says_which_verl_trainer_and_mode_runs(mode, flags, want):
    p = plan_for(settings=st(**flags), host=None, mode=mode, run_id=RUN_ID, swanlab_logger=False)
    text = plan_mod.render_text(p, width=400)
    line = [ln for ln in text.splitlines() if ln.startswith("trainer: ")]
    assert line and "verl.trainer.main_ppo V1 " + want in line[0], text
    assert f"trainer.v1.{want}" in p.argv


def test_plan_env_pins_verl_logging_info_and_shows_overridable_hccl_defaults():
    """trainer_base.py:102: the lines the supervisor reads are INFO logging; HCCL defaults of verl's NPU scripts."""
    p = plan_for(settings=st(), host=None, mode="dapo", run_id=RUN_ID, swanlab_logger=False)
    env = p.spec["env"]
    assert env["VERL_LOGGING_LEVEL"] == "INFO"
    assert env["HCCL_CONNECT_TIMEOUT"] == "7200" and env["HCCL_EXEC_TIMEOUT"] == "60000"
    assert env["HCCL_HOST_SOCKET_PORT_RANGE"] == "60000-60050" and env["HCCL_NPU_SOCKET_PORT_RANGE"] == "61000-61050"
    text = plan_mod.render_text(p, width=400)
    assert "HCCL_CONNECT_TIMEOUT=7200" in text and "VERL_LOGGING_LEVEL=INFO" in text
    p = plan_for(
        settings=settings.resolve({}, {"HCCL_CONNECT_TIMEOUT": "1800", "HCCL_NPU_SOCKET_PORT_RANGE": ""}, {}),
        host=None,
        mode="dapo",
        run_id=RUN_ID,
        swanlab_logger=False,
    )
    assert p.spec["env"]["HCCL_CONNECT_TIMEOUT"] == "1800"
    gpu = Host(name="g", address="x", accelerator="gpu", devices=8)
    assert not any(
        k.startswith("HCCL_")
        for k in plan_for(settings=st(), host=gpu, mode="dapo", run_id=RUN_ID, swanlab_logger=False).spec["env"]
    )


def test_npu_plan_sources_cann_set_env_when_the_toolkit_env_is_missing(tmp_path):
    p = plan_for(settings=st(), host=None, mode="dapo", run_id=RUN_ID, swanlab_logger=False)
    assert p.argv[:2] == ["bash", "-c"] and p.argv[3] == "dapo-ops-cann"
    ascend = tmp_path / "set_env.sh"
    ascend.write_text("export ASCEND_TOOLKIT_HOME=/x; export FROM_CANN=yes\n")
    script = p.argv[2].replace("/usr/local/Ascend/ascend-toolkit/set_env.sh", str(ascend))
    probe = [
        "bash",
        "-c",
        script,
        "dapo-ops-cann",
        sys.executable,
        "-c",
        "import os; print(os.environ.get('FROM_CANN'))",
    ]
    env = {k: v for k, v in os.environ.items() if k != "ASCEND_TOOLKIT_HOME"}
    assert subprocess.run(probe, capture_output=True, text=True, env=env).stdout.strip() == "yes"
    env["ASCEND_TOOLKIT_HOME"] = "/already"  # the image's ENV has it: nothing sourced
    assert subprocess.run(probe, capture_output=True, text=True, env=env).stdout.strip() == "None"
    gpu = Host(name="g", address="x", accelerator="gpu", devices=8)
    assert plan_for(settings=st(), host=gpu, mode="dapo", run_id=RUN_ID, swanlab_logger=False).argv[0] == "python3"
    assert (
        "launcher"
        not in plan_for(settings=st(profile="0.8"), host=None, mode="dapo", run_id=RUN_ID, swanlab_logger=False).spec
    )


def test_flash_attn_off_implies_remove_padding_off_and_the_plan_says_so():
    p = plan_for(settings=st(features="-flash_attn"), host=None, mode="dapo", run_id=RUN_ID, swanlab_logger=False)
    assert not p.features.has("remove_padding") and "remove_padding" in p.features.disabled
    assert "actor_rollout_ref.model.use_remove_padding=False" in p.argv
    text = plan_mod.render_text(p, width=400)
    assert "-flash_attn implies -remove_padding" in text
    with pytest.raises(planning.PlanError, match="remove_padding needs flash_attn"):
        plan_for(
            settings=st(features="-flash_attn,remove_padding"),
            host=None,
            mode="dapo",
            run_id=RUN_ID,
            swanlab_logger=False,
        )
    p8 = plan_for(
        settings=st(features="-flash_attn", profile="0.8"), host=None, mode="dapo", run_id=RUN_ID, swanlab_logger=False
    )
    assert p8.features.has("remove_padding")  # the 0.8 profile keeps its behaviour


def test_flash_attn_off_on_fsdp_09_keeps_remove_padding_and_the_rest_on():
    """verl 0.9.1 FSDP unpads without flash_attn (pure-torch fallbacks) and transformers >= 5.5 masks each packed
    sequence apart for sdpa (core/features.py IMPLIED_OFF); the real H200 runs g-features-a/-b trained and resumed
    with sdpa + remove_padding + dynamic_batch + gradient checkpointing. Old code turned remove_padding off."""
    p = plan_for(
        settings=st(features="-flash_attn", framework="fsdp"),
        host=None,
        mode="dapo",
        run_id=RUN_ID,
        swanlab_logger=False,
    )
    assert sorted(p.features.names()) == ["dynamic_batch", "gradient_checkpointing", "remove_padding"]
    assert p.features.disabled == frozenset({"flash_attn"})
    assert "+actor_rollout_ref.model.override_config.attn_implementation=sdpa" in p.argv
    for on in (
        "actor_rollout_ref.model.use_remove_padding=True",
        "actor_rollout_ref.actor.use_dynamic_bsz=True",
        "actor_rollout_ref.model.enable_gradient_checkpointing=True",
    ):
        assert on in p.argv, on
    assert "implies" not in plan_mod.render_text(p, width=400)
    p2 = plan_for(
        settings=st(features="-flash_attn,remove_padding", framework="fsdp"),
        host=None,
        mode="dapo",
        run_id=RUN_ID,
        swanlab_logger=False,
    )  # asking for it explicitly is fine on FSDP
    assert p2.features.source_of("remove_padding") == "explicit"
    pm = plan_for(
        settings=st(features="-flash_attn", framework="megatron"),
        host=None,
        mode="dapo",
        run_id=RUN_ID,
        swanlab_logger=False,
    )
    assert not pm.features.has("remove_padding")  # an NPU Megatron (the default host): still implied off


def test_flash_attn_off_on_a_gpu_megatron_is_fused_attention_with_packed_sequences():
    """On a GPU Megatron -flash_attn is TE's cuDNN fused attention and keeps remove_padding (thd): the H200 runs
    k-megatron-a/-b trained and resumed that way; the old spelling (unfused, remove_padding implied off: bshd) died
    in its first forward (k-megatron-unfused-bshd). The plan no longer says "implies"; an NPU keeps the old rule."""
    gpu = Host(name="g", address="x", accelerator="gpu", devices=8)
    p = plan_for(
        settings=st(features="-flash_attn", framework="megatron"),
        host=gpu,
        mode="dapo",
        run_id=RUN_ID,
        swanlab_logger=False,
    )
    assert sorted(p.features.names()) == ["dynamic_batch", "gradient_checkpointing", "remove_padding"]
    assert p.features.disabled == frozenset({"flash_attn"})
    assert "actor_rollout_ref.actor.megatron.override_transformer_config.attention_backend=fused" in p.argv
    assert "actor_rollout_ref.model.use_remove_padding=True" in p.argv
    assert "implies" not in plan_mod.render_text(p, width=400)
    npu = Host(name="n", address="x", accelerator="npu", devices=8)
    pn = plan_for(
        settings=st(features="-flash_attn", framework="megatron"),
        host=npu,
        mode="dapo",
        run_id=RUN_ID,
        swanlab_logger=False,
    )
    assert "remove_padding" in pn.features.disabled
    assert "actor_rollout_ref.actor.megatron.override_transformer_config.attention_backend=unfused" in pn.argv


def test_checkpoints_are_bounded_by_default_on_09():
    p = plan_for(settings=st(), host=None, mode="dapo", run_id=RUN_ID, swanlab_logger=False)
    assert p.spec["settings"]["max_actor_ckpt_to_keep"] == 3 and "trainer.max_actor_ckpt_to_keep=3" in p.argv
    p = plan_for(
        settings=settings.resolve({}, {"MAX_CKPT_TO_KEEP": "0"}, {}),
        host=None,
        mode="dapo",
        run_id=RUN_ID,
        swanlab_logger=False,
    )
    assert p.spec["settings"]["max_actor_ckpt_to_keep"] is None
    assert not any("max_actor_ckpt_to_keep" in a for a in p.argv)


def test_plan_errors_are_one_line():
    h = Host(name="h1", address="x", devices=8)
    with pytest.raises(planning.PlanError, match="TRAINER_GPUS=6 \\+ ROLLOUT_GPUS=4"):
        plan_for(settings=st(trainer_gpus=6), host=h, mode="one-step-off", run_id=RUN_ID, swanlab_logger=False)
    with pytest.raises(planning.PlanError, match="unknown feature"):
        plan_for(settings={"features": "warp"}, host=None, mode="dapo", run_id=RUN_ID, swanlab_logger=False)
    with pytest.raises(planning.PlanError, match="unknown mode"):
        plan_for(settings=st(), host=None, mode="async", run_id=RUN_ID, swanlab_logger=False)


def test_rendered_plan_shows_sources_ladder_command_and_paths():
    p = plan_for(
        settings=settings.resolve({"steps": 100}, {"USER_FEATURES": "-offload,prefix_cache"}, {}),
        host=None,
        mode="dapo",
        run_id=RUN_ID,
        swanlab_logger=False,
    )
    text = plan_mod.render_text(p, width=400)
    assert "prefix_cache" in text and "explicit" in text
    assert "explicit (-offload)" in text
    assert "offload: skipped, turned off by the user (-offload); a user choice is never overridden" in text
    assert "+ offload" not in text
    # Megatron on an NPU (64 GiB assumed): gradient checkpointing runs full recompute already (issue 43 F3)
    upd = next(ln for ln in text.splitlines() if "device OOM in update:" in ln)
    assert "recompute" not in upd and "update-batch" in upd, upd
    assert p.command in text
    assert p.ckpt_dir in text and p.log_path in text
    assert "steps=flag" in text and "features=env" in text


def test_secrets_are_redacted_defensively():
    argv = [
        "python3",
        "-m",
        "x",
        "+ray_kwargs.ray_init.runtime_env.env_vars.SWANLAB_API_KEY=abc",
        "HF_TOKEN=t",
        "aws_secret=s",
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=20480",
        "actor_rollout_ref.rollout.max_num_batched_tokens=10240",
    ]
    red = redact.redact_argv(argv)
    assert red[3].endswith("=***") and red[4] == "HF_TOKEN=***" and red[5] == "aws_secret=***"
    assert red[6:] == argv[6:]
    assert redact.redact_env({"SWANLAB_API_KEY": "k", "http_proxy": "p"}) == {
        "SWANLAB_API_KEY": "***",
        "http_proxy": "p",
    }
    p = plan_for(
        settings=st(),
        host=None,
        mode="dapo",
        run_id=RUN_ID,
        swanlab_logger=False,
        extra_overrides=["+ray_kwargs.ray_init.runtime_env.env_vars.WANDB_API_KEY=zzz"],
    )
    assert "zzz" not in plan_mod.render_text(p, width=400)


def test_dapo_fsdp_runbook_defaults_argv(test_report):
    """The argv the 0.9 dapo/fsdp plan produces for the runbook defaults (printed for the record)."""
    p = plan_for(settings=st(framework="fsdp"), host=None, mode="dapo", run_id=RUN_ID, swanlab_logger=False)
    test_report("[plan] runbook defaults, dapo/fsdp: " + p.command)
    for item in (
        "data.train_files=/verl/dapo-math-17k.parquet",
        "actor_rollout_ref.model.path=/verl/Qwen3-8B",
        "trainer.total_training_steps=100",
        "data.max_response_length=8192",
        "trainer.resume_mode=auto",
        "actor_rollout_ref.actor.clip_ratio_high=0.28",
        "reward.reward_manager.name=dapo",
    ):
        assert item in p.argv


def test_dry_run_task_works_with_no_inventory_and_no_hosts(tmp_path):
    """`dapo-ops launch --dry-run --steps 100` on a fresh checkout: no hosts.toml, no config, nothing reachable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DAPO_", "SWANLAB_", "TRAIN_", "USER_FEATURES"))}
    env.update(HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path / "cfg"))
    exe = Path(sys.executable).with_name("dapo-ops")
    proc = subprocess.run(
        [str(exe), "launch", "--dry-run", "--steps", "100"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "trainer.total_training_steps=100" in proc.stdout
    assert "escalation ladder" in proc.stdout and "/train.log" in proc.stdout


def test_proxy_credentials_never_in_spec_or_plan():
    pw = "s3cr3t-pw"
    p = plan_for(
        settings=settings.resolve(
            {}, {"http_proxy": f"http://bob:{pw}@proxy:3128", "https_proxy": "http://proxy:3128"}, {}
        ),
        host=None,
        mode="dapo",
        run_id=RUN_ID,
        swanlab_logger=False,
    )
    assert "http_proxy" not in p.spec["env"] and p.spec["env"]["https_proxy"] == "http://proxy:3128"
    text = plan_mod.render_text(p, width=400)
    assert pw not in text and pw not in str(p.spec)
    assert "bob:***@proxy" in text
    assert redact.redact_env({"x": f"http://bob:{pw}@h:1"}) == {"x": "http://bob:***@h:1"}


def test_dry_run_says_when_a_launch_would_stop_on_swanlab(tmp_path):
    """Cloud mode is SwanLab's default: without a key the plan must say the launch would refuse, not look fine."""
    import io

    from rich.console import Console

    buf = io.StringIO()
    env = {"DAPO_OPS_CONFIG": no_config(tmp_path)}
    plan_mod.dry_run(
        {"steps": 3},
        mode="dapo",
        inventory="",
        env=env,
        file_cfg={},
        console=Console(file=buf, width=400, color_system=None),
    )
    assert "SwanLab: a launch would stop here" in buf.getvalue() and "SWANLAB_API_KEY" in buf.getvalue()
    buf = io.StringIO()
    plan_mod.dry_run(
        {"steps": 3},
        mode="dapo",
        inventory="",
        env={**env, "SWANLAB_MODE": "local"},
        file_cfg={},
        console=Console(file=buf, width=400, color_system=None),
    )
    assert "SwanLab: mode local" in buf.getvalue() and "trainer.logger=[console,swanlab]" in buf.getvalue()


def test_dry_run_rejects_an_extra_override_the_launch_would_reject(tmp_path):
    import subprocess
    import sys

    env = {"PATH": "/usr/bin:/bin", "DAPO_OPS_CONFIG": no_config(tmp_path), "SWANLAB_MODE": "local"}
    inv = [sys.executable, "-m", "invoke", "-r", str(Path(__file__).resolve().parent.parent)]
    bad = subprocess.run(
        inv + ["launch", "--dry-run", "--override", "x"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )
    assert bad.returncode == 2 and "is not key=value" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
    ok = subprocess.run(
        inv + ["launch", "--dry-run", "--override", "trainer.val_before_train=False"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )
    assert ok.returncode == 0 and "trainer.val_before_train=False" in ok.stdout


def test_independent_dry_run_on_several_hosts_says_whose_plan_it_shows(cli, tmp_path):
    inv = tmp_path / "hosts.toml"
    inv.write_text(
        '[defaults]\naccelerator = "npu"\ndevices = 8\n[hosts.a]\naddress = "192.0.2.1"\n'
        '[hosts.b]\naddress = "192.0.2.2"\n[hosts.c]\naddress = "192.0.2.3"\ndevices = 4\n'
    )
    res = cli(
        "inv",
        "launch",
        "--dry-run",
        "--independent",  # every host of the inventory (no -H: a dry run with -H reads the first as the launch does)
        "--inventory",
        inv,
        env={"DAPO_OPS_CONFIG": no_config(tmp_path), "SWANLAB_MODE": "disabled"},
    )
    out = " ".join(res.stdout.split())
    assert res.returncode == 0, res.stderr
    assert "independent runs on a, b, c" in out and "this plan is a's; c differ" in out, out


def test_an_override_that_contradicts_an_explicit_feature_choice_is_refused_naming_both():
    """``--features -offload --override ...fsdp_config.param_offload=True`` was accepted (the features table said
    "your override decides"): two explicit settings that contradict each other; refused in one line naming both.
    An override that agrees, or one of a default feature's key, stays the user's."""
    from dapo_ops.control import settings as settings_mod
    from dapo_ops.control.launch import plan as planning

    key = "actor_rollout_ref.actor.fsdp_config.param_offload"

    def draft(flags, extra):
        st = settings_mod.resolve({"framework": "fsdp", "rollout_tp": 1, **flags}, {}, {})
        return planning.draft_plan(
            planning.PlanInputs(
                settings=st, mode="dapo", run_id="20261207-000000-0004", swanlab_logger=False, extra_overrides=extra
            )
        )

    for flags, value, choice in (
        ({"features": "-offload"}, "True", "-offload"),
        ({"offload": True}, "false", "offload"),
    ):
        with pytest.raises(planning.PlanError) as e:
            draft(flags, [f"{key}={value}"])
        msg = str(e.value)
        assert "\n" not in msg and f"--override {key}={value} contradicts {choice} " in msg and "drop one" in msg, msg
    draft({"features": "-offload"}, [f"{key}=False"])  # agrees
    draft({}, [f"{key}=True"])  # offload left to the ladder: the override decides
