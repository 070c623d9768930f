"""The runbook's own path (issue 34): Megatron, Qwen3-8B, Ascend NPU, one-step-off, and the performance features,
checked against verl 0.9.1's own code and config read from the pinned wheel (sandbox/fetch_verl_config.py), never
against a copied constant. Pure tests: plans and argv only, no host."""

import re
import sys
from pathlib import Path

import pytest

from dapo_ops.control import settings
from dapo_ops.control.launch import plan as planning
from dapo_ops.control.inventory.model import Host
from dapo_ops.control.launch.dryrun import render_text
from dapo_ops.core import memfit, overrides, profiles, topology
from dapo_ops.core.classify import hints
from dapo_ops.agent.supervisor import attempt

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sandbox"))
from fetch_verl_config import verl_config_root  # noqa: E402
from test_memfit import QWEN3_8B  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RUN_ID = "20261129-151200-a1b2"
NPU8 = Host(
    name="h1",
    address="198.51.100.11",
    accelerator="npu",
    devices=8,
    workdir="/verl",
    runs_dir="/runs",
    container="verl",
)
NPU_64 = {"model_config": QWEN3_8B, "device_gib": 64.0}  # 910B: npu-smi's HBM total 65536 MB


@pytest.fixture(scope="module")
def verl():
    return verl_config_root() / "verl"


@pytest.fixture(scope="module")
def yaml_root():
    return verl_config_root() / "verl" / "trainer" / "config"


def kv(argv):
    return dict(a.split("=", 1) for a in argv if "=" in a and not a.startswith("--"))


def plan(mode="dapo", flags=None, env=None, memory=NPU_64, host=NPU8):
    st = settings.resolve(flags or {}, env or {}, {})
    return planning.make_plan(
        planning.draft_plan(
            planning.PlanInputs(settings=st, host=host, mode=mode, run_id=RUN_ID, swanlab_logger=False)
        ),
        memory,
    )


def registered_backends(verl: Path) -> dict:
    """``{name: module}`` of every ``@CheckpointEngineRegistry.register("name")`` in verl 0.9.1."""
    out = {}
    for f in sorted((verl / "checkpoint_engine").glob("*.py")):
        for name in re.findall(r'@CheckpointEngineRegistry\.register\("([^"]+)"\)', f.read_text()):
            out.setdefault(name, []).append(f.name)
    return out


# F1 ------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("accel", ["npu", "gpu"])
def test_one_step_off_emits_a_checkpoint_engine_backend_verl_registers(verl, accel):
    host = Host(
        name="h1",
        address="198.51.100.11",
        accelerator=accel,
        devices=8,
        workdir="/verl",
        runs_dir="/runs",
        container="verl",
    )
    backend = kv(plan("one-step-off", memory=None, host=host).argv)[
        "actor_rollout_ref.rollout.checkpoint_engine.backend"
    ]
    reg = registered_backends(verl)
    assert backend in reg and backend != "naive"  # base.py:84-99 raises on an unknown name
    if accel == "npu":  # Ascend's engine is registered under that name
        assert "hccl_checkpoint_engine.py" in reg[backend]


# F2 ------------------------------------------------------------------------------------------------------------
def test_megatron_tp_pp_keys_exist_in_verls_engine_yaml_with_default_one(yaml_root):
    text = (yaml_root / "engine" / "megatron.yaml").read_text()
    for key in ("tensor_model_parallel_size", "pipeline_model_parallel_size"):
        assert re.search(rf"^{key}: 1$", text, re.M)  # verl's 1/1 unless the plan sets them
    assert [k.rsplit(".", 1)[1] for k, _ in overrides.parallel_overrides(2, 2)][:2] == [
        "tensor_model_parallel_size",
        "pipeline_model_parallel_size",
    ]


def test_runbook_default_plan_on_one_host_of_64gib_npus_fits_with_tp2_pp2():
    p = plan()
    d = kv(p.argv)
    assert d["actor_rollout_ref.actor.megatron.tensor_model_parallel_size"] == "2"
    assert d["actor_rollout_ref.actor.megatron.pipeline_model_parallel_size"] == "2"
    assert "setting_changes" not in p.spec  # fits as planned: no start rung
    # issue 45: the fastest-fit lines (core/fastfit.py) come first, then the estimate of the plan they made
    assert next(ln for ln in p.memory if ln.startswith("memory-fit")).startswith(
        "memory-fit estimate with trainer TP 2 PP 2: tightest "
    )
    text = render_text(p)
    assert "Megatron trainer TP 2 PP 2" in text and "of 64.0 GiB per device" in text


def test_runbook_default_plan_on_two_hosts_fits_with_tp_pp_shown():
    from dapo_ops.control.launch import multihost_service

    h2 = Host(
        name="h2",
        address="198.51.100.12",
        accelerator="npu",
        devices=8,
        workdir="/verl",
        runs_dir="/runs",
        container="verl",
    )
    st = settings.resolve({}, {}, {})
    p, topo = multihost_service.cluster_plan(
        st,
        NPU8,
        [NPU8, h2],
        "dapo",
        run_id=RUN_ID,
        swanlab_logger=False,
        inv_proxy={},
        extra_overrides=[],
        memory={"model_config": QWEN3_8B, "device_gib": None},
    )
    d = kv(p.argv)
    assert (d["trainer.nnodes"], d["trainer.n_gpus_per_node"]) == ("2", "8")
    assert d["actor_rollout_ref.actor.megatron.tensor_model_parallel_size"] == "2"
    assert d["actor_rollout_ref.actor.megatron.pipeline_model_parallel_size"] == "2"
    # dry run: device memory unknown, judged against the 910B's 64 GiB
    est = next(ln for ln in p.memory if ln.startswith("memory-fit"))
    assert "assuming 64 GiB per npu device" in est and ": fits: tightest" in est


def test_tp1_pp1_does_not_fit_64gib_and_the_estimate_proposes_tp_pp():
    st_env = {"TRAINER_TP": "1", "TRAINER_PP": "1", "MEMORY_FIT": "warn"}
    p = plan(env=st_env)
    assert "TRAINER_TP=" in "\n".join(p.memory) and "fits without rungs" in "\n".join(p.memory)
    spec = dict(p.spec, setting_changes={})
    est = memfit.estimate(memfit.Model.from_config(QWEN3_8B), memfit.setup_from_spec(spec, p.features, 64.0))
    assert not est.fits


def test_an_override_of_megatron_tp_reaches_the_estimate():
    base = plan(env={"TRAINER_TP": "1", "TRAINER_PP": "1", "MEMORY_FIT": "warn"})
    spec = dict(
        base.spec,
        settings=dict(
            base.spec["settings"], extra_overrides=["actor_rollout_ref.actor.megatron.tensor_model_parallel_size=4"]
        ),
    )
    assert memfit.parallel_sizes(spec) == {"tp": 4, "pp": 1, "cp": 1}
    m = memfit.Model.from_config(QWEN3_8B)
    one = memfit.estimate(m, memfit.setup_from_spec(base.spec, base.features, 64.0))
    four = memfit.estimate(m, memfit.setup_from_spec(spec, base.features, 64.0))
    assert four.phases["update"] < one.phases["update"] - 10


def test_fsdp_refuses_megatron_parallel_sizes_in_one_line():
    with pytest.raises(planning.PlanError) as ei:
        plan(flags={"framework": "fsdp"}, env={"TRAINER_TP": "2"})
    assert "\n" not in str(ei.value) and "FRAMEWORK=fsdp" in str(ei.value)


def test_default_parallel_follows_model_size_and_device_memory():
    assert memfit.params_from_name("/models/Qwen3-8B") == 8.0
    assert memfit.default_parallel(8.2, 64.0, 8) == (2, 2)  # verl's 8B Megatron examples: TP2 PP2
    assert memfit.default_parallel(8.2, 139.8, 8) == (2, 1)  # an H200 holds a stage of it
    assert memfit.default_parallel(0.5, 64.0, 8) == (1, 1)
    assert memfit.default_parallel(8.2, 64.0, 2) == (2, 1)  # tp x pp must divide the trainer devices


# F3 ------------------------------------------------------------------------------------------------------------
def test_every_ray_node_gets_the_drivers_settings_driven_hccl_env(verl):
    # verl adds the port ranges (as auto) only when the driver lacks them (constants_ppo.py:94-97,125-127)
    src = (verl / "trainer" / "constants_ppo.py").read_text()
    assert '"HCCL_HOST_SOCKET_PORT_RANGE": "auto"' in src and "if os.environ.get(key) is not None:" in src
    p = plan(env={"HCCL_EXEC_TIMEOUT": "1234", "HCCL_HOST_SOCKET_PORT_RANGE": "50000-50100"})
    hccl = {k: v for k, v in p.spec["env"].items() if k.startswith("HCCL_")}
    assert hccl["HCCL_EXEC_TIMEOUT"] == "1234" and "HCCL_NPU_SOCKET_PORT_RANGE" in hccl
    a, b = topology.Node("h1", "198.51.100.11", 8), topology.Node("h2", "198.51.100.12", 8)
    for node in (a, b):
        env = topology.ray_process_env("npu", node, [a, b], "eth0", run_env=p.spec["env"])
        assert {k: env[k] for k in hccl} == hccl
        assert env["HCCL_SOCKET_IFNAME"] == env["GLOO_SOCKET_IFNAME"] == "eth0"


# F7 ------------------------------------------------------------------------------------------------------------
def test_prefix_caching_and_chunked_prefill_stay_verls_default_on(yaml_root):
    text = (yaml_root / "rollout" / "rollout.yaml").read_text()
    assert re.search(r"^enable_chunked_prefill: True$", text, re.M)
    assert re.search(r"^enable_prefix_caching: True$", text, re.M)
    d = kv(plan(memory=None).argv)
    assert "actor_rollout_ref.rollout.enable_prefix_caching" not in d
    assert "actor_rollout_ref.rollout.enable_chunked_prefill" not in d
    off = kv(plan(flags={"features": "-prefix_cache,-chunked_prefill"}, memory=None).argv)
    assert off["actor_rollout_ref.rollout.enable_prefix_caching"] == "False"
    assert off["actor_rollout_ref.rollout.enable_chunked_prefill"] == "False"
    assert int(off["actor_rollout_ref.rollout.max_num_batched_tokens"]) >= 2048 + 8192
    text = render_text(plan(memory=None))
    assert re.search(r"prefix_cache\W+verl-default\W+on\W+verl's default", text)


# F8 ------------------------------------------------------------------------------------------------------------
def test_npu_rollout_runs_graph_mode_and_eager_is_a_fallback(yaml_root):
    assert re.search(r"^enforce_eager: False$", (yaml_root / "rollout" / "rollout.yaml").read_text(), re.M)
    assert kv(plan(memory=None).argv)["actor_rollout_ref.rollout.enforce_eager"] == "False"
    assert (
        kv(plan(env={"ROLLOUT_EAGER": "true"}, memory=None).argv)["actor_rollout_ref.rollout.enforce_eager"] == "True"
    )


# F9 ------------------------------------------------------------------------------------------------------------
def test_retries_and_resume_skip_validation_unless_asked(verl):
    src = (verl / "trainer" / "ppo" / "v1" / "trainer_base.py").read_text()
    assert 'if self.config.trainer.get("val_before_train", True):' in src  # verl validates at start by default
    p = plan(memory=None)
    first = kv(overrides.build_command(attempt.attempt_spec(p.spec, 1), p.features))
    second = kv(overrides.build_command(attempt.attempt_spec(p.spec, 2), p.features))
    resumed = kv(overrides.build_command(dict(p.spec, resume_of="20261128-000000-abcd"), p.features))
    assert "trainer.val_before_train" not in first
    assert second["trainer.val_before_train"] == "False" == resumed["trainer.val_before_train"]
    asked = dict(p.spec, settings=dict(p.spec["settings"], extra_overrides=["trainer.val_before_train=True"]))
    argv = overrides.build_command(attempt.attempt_spec(asked, 2), p.features)
    assert argv[-1] == "trainer.val_before_train=True"  # the user's override comes last: Hydra keeps it
    assert any("val_before_train" in n for n in plan(memory=None).notes)


# F11 -----------------------------------------------------------------------------------------------------------
def test_no_hint_or_doc_recommends_a_key_verl_never_reads(verl):
    readers = [
        f for f in verl.rglob("*.py") if "nccl_timeout" in f.read_text() and not f.name.startswith("critic")
    ]  # the legacy critic dataclass defines it for the critic only
    assert readers == []
    ew = (verl / "workers" / "engine_workers.py").read_text()
    assert "initialize_global_process_group_ray(timeout_second=None)" in ew  # torch's default timeout
    assert "actor_rollout_ref.nccl_timeout" not in hints.HINTS["hccl-timeout"].replace(
        "no config key such as actor_rollout_ref.nccl_timeout is read", ""
    )
    doc = (ROOT / "docs" / "troubleshooting.md").read_text()
    assert "/ actor_rollout_ref.nccl_timeout" not in doc and "read by nothing" in doc
    assert "(none for one-step-off)" not in (ROOT / "dapo_ops" / "core" / "profiles.py").read_text()
    assert kv(plan("one-step-off", memory=None).argv)["algorithm.filter_groups.enable"] == "True"


# F12 -----------------------------------------------------------------------------------------------------------
def test_one_step_off_runs_on_verls_one_step_off_terms(verl):
    oso = (
        verl_config_root()
        / "verl"
        / "experimental"
        / "one_step_off_policy"
        / "config"
        / "one_step_off_ppo_trainer.yaml"
    ).read_text()
    assert "calculate_log_probs: True" in oso and "bypass_mode: True" in oso  # verl's own one-step-off config
    sep = (verl / "trainer" / "ppo" / "v1" / "trainer_separate_async.py").read_text()
    assert "save_model_to_cpu" in sep and 'get("bypass_mode", False)' in sep  # the per-mini-batch CPU copies
    p = plan("one-step-off")
    d = kv(p.argv)
    assert d["algorithm.rollout_correction.bypass_mode"] == "True"
    assert d["actor_rollout_ref.rollout.calculate_log_probs"] == "True"
    # a dedicated rollout pool: the default 0.8, raised by the fastest fit (issue 45, core/fastfit.py) to what the
    # batch's KV cache needs within what the pool's devices fit
    assert p.spec["settings"]["gpu_memory_utilization"] >= planning.DEDICATED_ROLLOUT_SHARE == 0.8
    (share,) = [c for c in p.spec["fit"]["choices"] if c["name"] == "gpu_memory_utilization"]
    assert d["actor_rollout_ref.rollout.gpu_memory_utilization"] == str(share["value"])
    assert d["trainer.v1.separate_async.num_warmup_batches"] == "1"
    est = next(ln for ln in p.memory if ln.startswith("memory-fit"))
    assert "log-prob" not in est  # no log-prob forward on the trainer pool under bypass
    given = plan("one-step-off", flags={"gpu_memory_utilization": 0.7})
    assert kv(given.argv)["actor_rollout_ref.rollout.gpu_memory_utilization"] == "0.7"


def test_profiles_bypass_keys_exist_in_verls_config(yaml_root):
    assert "bypass_mode: false" in (yaml_root / "algorithm" / "rollout_correction.yaml").read_text()
    assert [k for k, _ in profiles.SEPARATE_ASYNC_BYPASS] == [
        "actor_rollout_ref.rollout.calculate_log_probs",
        "algorithm.rollout_correction.bypass_mode",
    ]


# docs ----------------------------------------------------------------------------------------------------------
def test_docs_say_what_runs_per_mode_framework_accelerator():
    params = (ROOT / "docs" / "params.md").read_text()
    table = params[params.index("## What runs, per mode x framework x accelerator") : params.index("## Settings")]
    for task in ("`inv launch`", "`inv one-step-off`"):
        for fw in ("megatron", "fsdp"):
            assert re.search(rf"^\| {re.escape(task)} \| {fw} \| (npu|gpu|npu / gpu) \|", table, re.M), (task, fw)
    for fact in (
        "enforce_eager=False",
        "bypass_mode=True",
        "prefix caching",
        "TRAINER_TP",
        "`nccl`",
        "val_before_train=False",
    ):
        assert fact in table, fact
    wf = (ROOT / "docs" / "workflow.md").read_text()
    assert "### What runs per mode x framework x accelerator" in wf and "ROLLOUT_EAGER" in wf
