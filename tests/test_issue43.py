"""Issue 43 findings 1, 3, 6, 8, 9, 10: the plan, the memory-fit estimate and the overrides against verl 0.9.1. Each
claim about verl is read in the pinned wheel (sandbox/fetch_verl_config.py), then the tool's answer is checked.
Pure tests (plans, argv, status rows), except the F3 dry run, which runs ``inv launch --dry-run`` as a user does."""

import json
import re
import sys
from pathlib import Path

import pytest

from dapo_ops.control import settings
from dapo_ops.control.inventory.model import Host
from dapo_ops.control.launch import plan as planning
from dapo_ops.control.status import rows, table
from dapo_ops.core import defaults, ladder, memfit, memladder, overrides, runspec
from dapo_ops.core.features import resolve

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sandbox"))
from fetch_verl_config import verl_config_root  # noqa: E402
from test_memfit import QWEN3_8B  # noqa: E402
from config_helpers import no_config

RUN_ID = "20261129-151200-a1b2"
GPU1 = Host(name="g1", address="198.51.100.21", accelerator="gpu", devices=1, workdir="/w", runs_dir="/runs")
GPU2 = Host(name="g2", address="198.51.100.22", accelerator="gpu", devices=2, workdir="/w", runs_dir="/runs")
NPU8 = Host(name="h1", address="198.51.100.11", accelerator="npu", devices=8, workdir="/verl", runs_dir="/runs")


@pytest.fixture(scope="module")
def verl():
    return verl_config_root() / "verl"


def kv(argv):
    return dict(a.split("=", 1) for a in argv if "=" in a and not a.startswith("--"))


def plan(host, mode="dapo", flags=None, env=None, memory=None):
    st = settings.resolve(flags or {}, env or {}, {})
    return planning.make_plan(
        planning.draft_plan(
            planning.PlanInputs(settings=st, host=host, mode=mode, run_id=RUN_ID, swanlab_logger=False)
        ),
        memory,
    )


# F1 -------------------------------------------------------------------------------------------------------------
def test_verl_fsdp1_never_reads_offload_policy(verl):
    src = (verl / "workers/engine/fsdp/transformer_impl.py").read_text()
    fsdp1 = src[src.index('if self.engine_config.strategy == "fsdp":') : src.index("elif self.engine_config.strategy")]
    fsdp2 = src[src.index('elif self.engine_config.strategy == "fsdp2":') : src.index("raise NotImplementedError")]
    assert "offload_policy" not in fsdp1 and "CPUOffloadPolicy(pin_memory=True)" in fsdp2


@pytest.mark.parametrize(
    "mode,host,flags", [("dapo", GPU1, {}), ("one-step-off", GPU2, {"trainer_gpus": 1, "rollout_gpus": 1})]
)
def test_one_device_fsdp_that_needs_the_offload_policy_runs_fsdp2(mode, host, flags):
    """Qwen3-8B on one 80 GiB trainer device: the estimate starts on the offload-policy rung; verl's FSDP1 would
    ignore it (main planned ``actor.strategy=fsdp`` and an update of 22 GiB that would OOM)."""
    mem = {"model_config": QWEN3_8B, "device_gib": 80.0}
    p = plan(host, mode, dict({"framework": "fsdp", "rollout_tp": 1, "steps": 20}, **flags), memory=mem)
    rungs = [r["rung"] for r in p.spec["setting_changes"]["memory_rungs"]]
    assert "offload-policy" in rungs, p.memory
    d = kv(p.argv)
    assert d["actor_rollout_ref.actor.fsdp_config.offload_policy"] == "True"
    assert d["actor_rollout_ref.actor.strategy"] == "fsdp2" and p.spec["strategy"] == "fsdp2"
    # every attempt keeps it, even when a host-OOM rollback turns the policy off (the checkpoint is fsdp2)
    back = overrides.verl_argv(p.spec, p.features, dict(p.spec["setting_changes"], fsdp_offload_policy=False))
    assert kv(back)["actor_rollout_ref.actor.strategy"] == "fsdp2"


def test_the_estimate_credits_the_policy_only_where_verl_reads_it():
    m = memfit.Model.from_config(QWEN3_8B)
    base = dict(device_gib=80.0, world=1, rollout_tp=1, offload_policy=True)
    on2 = memfit.estimate(m, memfit.Setup(strategy="fsdp2", **base))
    on1 = memfit.estimate(m, memfit.Setup(strategy="fsdp", **base))
    off = memfit.estimate(m, memfit.Setup(**dict(base, offload_policy=False)))
    assert on1.phases["update"] == off.phases["update"] > on2.phases["update"] + 50


def test_a_retry_on_fsdp1_skips_the_offload_policy_rung():
    """A one-device run that started on FSDP1 (no policy): its checkpoints are FSDP1, which fsdp2 cannot load, and
    FSDP1 ignores the policy: the update ladder skips the rung instead of spending a retry on a no-op."""
    s = dict(defaults.SPEC_SETTINGS, framework="fsdp", mode="dapo", strategy="fsdp", n_gpus_per_node=1)
    d = ladder.decide(resolve(""), "oom-device", {"phase": "update"}, 0, 10, {}, s)
    s2 = dict(s, **d.setting_changes)
    d2 = ladder.decide(d.features, "oom-device", {"phase": "update"}, 1, 10, {}, s2)
    s3 = dict(s2, **d2.setting_changes)
    d3 = ladder.decide(d2.features, "oom-device", {"phase": "update"}, 2, 10, {}, s3)
    applied = [r["rung"] for r in (s3 | d3.setting_changes).get("memory_rungs", [])]
    assert "offload-policy" not in applied and d3.features.has("recompute"), applied
    assert "fsdp_offload_policy" not in d3.setting_changes
    # the supervisor's settings name the strategy its attempts run (an older spec: no strategy key)
    from dapo_ops.agent.supervisor import machine

    sup = machine.Supervisor.__new__(machine.Supervisor)
    sup.spec = defaults.RunSpec.read(
        {"framework": "fsdp", "mode": "dapo", "settings": {"n_gpus_per_node": 1, "nnodes": 1}}
    )
    sup.rec = {"setting_changes": {}}
    sup.run_dir = "/verl/dapo_runs/r1"  # the supervisor's settings also name the runs dir (a full disk's df -h)
    assert sup._settings()["strategy"] == "fsdp"


# F3 -------------------------------------------------------------------------------------------------------------
def test_verl_npu_megatron_scripts_run_full_recompute_and_selective_is_core_attn(verl):
    y = (verl / "trainer/config/engine/megatron.yaml").read_text()
    assert re.search(r'^\s+recompute_modules: \["core_attn"\]$', y, re.M)
    assert re.search(r"^\s+recompute_granularity: null$", y, re.M)


@pytest.mark.parametrize("hosts", ["h1", "h1,h2"])
def test_runbook_default_dry_run_estimates_the_recompute_verl_runs_and_fits(cli, tmp_path, hosts):
    """`inv launch --dry-run` with the runbook's defaults (Megatron, Qwen3-8B, 8 x 64 GiB NPUs; one host, two):
    gradient checkpointing runs full/uniform/1 (verl's NPU scripts), the estimate counts it (update 36.7 GiB, against
    109.8 GiB for the selective core_attn recompute main emitted while estimating full) and the plan fits."""
    model = tmp_path / "Qwen3-8B"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(QWEN3_8B))
    inv = tmp_path / "hosts.toml"
    inv.write_text(  # the inventory's hosts, no -H: a dry run with -H h1 reads the host as the launch does
        '[defaults]\naccelerator = "npu"\ndevices = 8\n[hosts.h1]\naddress = "192.0.2.1"\n'
        + ('[hosts.h2]\naddress = "192.0.2.2"\n' if hosts != "h1" else "")
    )
    res = cli(
        "inv",
        "launch",
        "--dry-run",
        "--model",
        model,
        "--inventory",
        inv,
        env={"DAPO_OPS_CONFIG": no_config(tmp_path), "SWANLAB_MODE": "disabled"},
    )
    out = " ".join(res.stdout.split())
    assert res.returncode == 0, res.stderr
    mtc = "actor_rollout_ref.actor.megatron.override_transformer_config"
    for k, v in (("recompute_granularity", "full"), ("recompute_method", "uniform"), ("recompute_num_layers", "1")):
        assert f"{mtc}.{k}={v}" in out, k
    est = re.search(
        r"memory-fit estimate with trainer TP 2 PP 2 \(device memory unknown.*?\): fits: (tightest .*?\))", out
    )
    # one host: DP 2; two hosts: DP 4 shards the distributed optimizer further
    assert est and f"update {'36.7' if hosts == 'h1' else '31.0'}" in est.group(1), out
    assert "full recompute (recompute_granularity=full" in out


def test_megatron_selective_recompute_is_estimated_as_no_saving():
    m = memfit.Model.from_config(QWEN3_8B)
    base = dict(device_gib=64.0, framework="megatron", world=8, tp=2, pp=2, rollout_tp=2)
    sel = memfit.estimate(m, memfit.Setup(megatron_recompute="selective", **base))
    none = memfit.estimate(m, memfit.Setup(megatron_recompute="selective", **dict(base, gc=False)))
    full = memfit.estimate(m, memfit.Setup(megatron_recompute="full", **base))
    assert sel.phases["update"] == none.phases["update"] == pytest.approx(109.8, abs=0.05)
    assert full.phases["update"] == pytest.approx(36.7, abs=0.05) and full.fits and not sel.fits


# F6 -------------------------------------------------------------------------------------------------------------
def test_verl_frees_the_rollout_kv_cache_before_the_buckets(verl):
    src = (verl / "checkpoint_engine/base.py").read_text()
    assert src.index("await self.release_kv_cache_replicas()") < src.index("rollout.update_weights(")
    assert src.index('rollout.execute_checkpoint_engine(["finalize"]') < src.index(
        "await self.resume_kv_cache_replicas()"
    )
    assert "free_cache_engine: bool = True" in (verl / "workers/config/rollout.py").read_text()
    assert memladder.phase_rungs("weight-sync", "megatron", "one-step-off", "rollout")[0] == "weight-bucket"
    assert memladder.phase_rungs("weight-sync", "megatron", "one-step-off", None)[:2] == (
        "weight-bucket",
        "weight-bucket",
    )


# F8 -------------------------------------------------------------------------------------------------------------
def test_verl_asserts_the_mini_batch_over_the_data_parallel_size_and_pads_the_step(verl):
    src = (verl / "workers/engine_workers.py").read_text()
    assert "assert mini_batch_size % self.engine.get_data_parallel_size() == 0" in src
    tb = (verl / "trainer/ppo/v1/trainer_base.py").read_text()
    assert "batch = upsample_batch_to_divisible_size(batch, batch_multiple" in tb


def test_megatron_tp2_pp2_batch_is_checked_against_dp_2():
    p = plan(NPU8, flags={"ppo_mini_batch_size": 5, "rollout_n": 4}, env={"TRAINER_TP": "2", "TRAINER_PP": "2"})
    assert kv(p.argv)["actor_rollout_ref.actor.ppo_mini_batch_size"] == "5"
    assert runspec.data_parallel_size(p.spec, 8)[0] == 2
    # over dp 2 an odd mini-batch x n still cannot split: one line naming the ranks and the fix
    with pytest.raises(planning.PlanError) as e:
        plan(NPU8, flags={"ppo_mini_batch_size": 5, "rollout_n": 1}, env={"TRAINER_TP": "2", "TRAINER_PP": "2"})
    assert "over 2 data-parallel ranks (8 trainer devices / (TP 2 x PP 2))" in str(e.value)
    assert "\n" not in str(e.value)


# F9 -------------------------------------------------------------------------------------------------------------
def test_verl_validates_only_with_a_positive_test_freq(verl):
    y = (verl / "trainer/config/ppo_trainer.yaml").read_text()
    assert re.search(r"^  test_freq: -1$", y, re.M)
    assert "if self.config.trainer.test_freq > 0 and (" in (verl / "trainer/ppo/v1/trainer_base.py").read_text()


@pytest.mark.parametrize("framework", ["megatron", "fsdp"])
def test_the_plan_validates_every_10_steps_with_the_recipes_sampling(framework):
    d = kv(plan(NPU8, flags={"framework": framework}).argv)
    assert d["trainer.test_freq"] == "10"
    assert d["actor_rollout_ref.rollout.val_kwargs.do_sample"] == "True"
    assert (d["actor_rollout_ref.rollout.val_kwargs.temperature"], d["actor_rollout_ref.rollout.val_kwargs.top_p"]) == (
        "1.0",
        "0.7",
    )
    assert kv(plan(NPU8, env={"TEST_FREQ": "5"}).argv)["trainer.test_freq"] == "5"


def test_an_older_spec_keeps_its_argv():
    """A spec written before these keys (no test_freq, no dapo_recipe) runs what it ran: no new key."""
    p = plan(NPU8)
    old = dict(p.spec, settings={k: v for k, v in p.spec["settings"].items() if k not in ("test_freq", "dapo_recipe")})
    argv = overrides.verl_argv(old, p.features)
    assert not any(
        a.startswith(("trainer.test_freq", "data.truncation", "actor_rollout_ref.actor.optim")) for a in argv
    )


def test_status_shows_the_last_validation_score_and_step():
    val = "val-core/math_dapo/acc/mean@1"  # verl's key: trainer_base.py:1357-1371
    run = {
        "run_id": RUN_ID,
        "status": "running",
        "step": 12,
        "total_steps": 100,
        "validation": {"step": 10, "metrics": {val: 0.133, "val-core/math_dapo/reward/mean@1": -0.5}},
    }
    tail = f"step:12 - critic/score/mean:0.2\nstep:20 - critic/score/mean:0.3 - {val}:0.2\n"
    row = rows.build_row("h1", {"run": run, "tail": "", "now": 1.0})
    assert row.validation == {"step": 10, "key": val, "score": 0.133}
    assert "(val 0.133 @10)" in table.cells(row)["score"]
    fresher = rows.build_row("h1", {"run": run, "tail": tail, "now": 1.0})
    assert fresher.validation == {"step": 20, "key": val, "score": 0.2}


def test_the_supervisor_records_the_validation_step():
    from dapo_ops.agent.supervisor import record

    rec, att = {}, {}
    record.on_step(rec, att, 10, {"critic/score/mean": 0.1, "val-core/x/acc/mean@1": 0.25})
    record.on_step(rec, att, 11, {"critic/score/mean": 0.2})
    assert rec["validation"] == {"step": 10, "metrics": {"val-core/x/acc/mean@1": 0.25}}


# F10 ------------------------------------------------------------------------------------------------------------
def test_recipe_keys_exist_in_both_engines_optim_yaml(verl):
    cfg = verl / "trainer/config"
    for f in ("optim/fsdp.yaml", "optim/megatron.yaml"):
        y = (cfg / f).read_text()
        assert re.search(r"^lr_warmup_steps: -1$", y, re.M) and re.search(r"^weight_decay: 0.01$", y, re.M), f
        assert re.search(r"^clip_grad: 1.0$", y, re.M), f  # verl's own default: the recipe's 1.0, not emitted
    assert re.search(r"^truncation: error$", (cfg / "data/legacy_data.yaml").read_text(), re.M)


@pytest.mark.parametrize("framework", ["megatron", "fsdp"])
@pytest.mark.parametrize("mode", ["dapo", "one-step-off"])
def test_the_plan_emits_dapos_optimizer_settings(framework, mode):
    d = kv(plan(NPU8, mode=mode, flags={"framework": framework}).argv)
    for k, v, src in defaults.DAPO_RECIPE:
        assert d[k] == overrides.hydra_value(v) and "dapo_7b_math_megatron_4_12.sh" in src
    assert d["actor_rollout_ref.actor.optim.lr_warmup_steps"] == "10" and d["data.truncation"] == "left"
    assert "actor_rollout_ref.actor.optim.clip_grad" not in d
    assert "actor_rollout_ref.actor.optim.weight_decay" in Path("docs/params.md").read_text()
