"""verl's own start-up checks on the composed config (dapo_ops/agent/verlcheck.py, run by the compose op), against
the pinned verl 0.9.1 wheel's config AND sources (sandbox/fetch_verl_config.py): the checkpoint-engine registry is
read from verl's own ``@CheckpointEngineRegistry.register`` decorators, never from a copied list.

verl itself does not import in the test venv (``verl/__init__.py`` imports ``verl.protocol`` -> torch, ray), so the
dataclass step answers ``skipped`` here; the registry, pool and attention steps run on the composed dict."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dapo_ops.agent import verlcheck
from dapo_ops.agent.compose import compose_errors
from dapo_ops.control.preflight import compose_check as validate
from dapo_ops.control.preflight.verl import _startup_check
from dapo_ops.core import overrides
from dapo_ops.core.features import resolve

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sandbox"))
from fetch_verl_config import verl_config_root  # noqa: E402
from supervisor_helpers import logged_verl_argv  # noqa: E402

KEY = verlcheck.ENGINE_KEY


@pytest.fixture(scope="module")
def root():
    return str(verl_config_root())


def _spec(mode="one-step-off", framework="megatron", accelerator="npu", extra=()):
    s = {
        "steps": 10,
        "model_path": "/models/Qwen3-8B",
        "train_file": "/data/t.parquet",
        "val_file": "/data/v.parquet",
        "extra_overrides": list(extra),
    }
    if mode == "one-step-off":
        s.update(trainer_gpus=4, rollout_gpus=4, train_batch_size=32, ppo_mini_batch_size=32)
    return {
        "version": 1,
        "run_id": "r1",
        "mode": mode,
        "framework": framework,
        "profile": "0.9",
        "accelerator": accelerator,
        "workdir": "/verl",
        "python": "python3",
        "run_dir": "/verl/dapo_runs/r1",
        "settings": s,
    }


def _composed(root, spec, features=""):
    argv = overrides.build_command(spec, resolve(features))
    return _composed_argv(root, argv), argv


def _composed_argv(root, argv):
    """verl 0.9.1's config composed by the project's own compose path (validate.request_for + compose_errors)."""
    req = validate.request_for(argv, root)
    got = {}
    errs = compose_errors(
        req["config_root"],
        req["config_dir"],
        req["config_name"],
        req["overrides"],
        on_composed=lambda cfg: got.update(cfg=cfg),
    )
    assert not errs, errs
    from omegaconf import OmegaConf

    return OmegaConf.to_container(got["cfg"], resolve=True)


def test_verl_registers_its_ascend_engine_as_nccl_and_no_hccl(root):
    names = verlcheck.scanned_backends(root)
    assert "nccl" in names and "naive" in names and "hccl" not in names


def test_todays_npu_one_step_off_plan_is_refused_with_one_line_and_the_nccl_plan_passes(root):
    cfg, argv = _composed(root, _spec())
    backend = cfg["actor_rollout_ref"]["rollout"]["checkpoint_engine"]["backend"]
    rep = verlcheck.startup_report(cfg, root, use_import=False)
    if backend == "hccl":  # today's emission on this branch (finding 1; fixed on another branch)
        assert len(rep["errors"]) == 1, rep
        line = rep["errors"][0]
        assert line.startswith(f"{KEY}=hccl is not a registered checkpoint engine") and "\n" not in line
        assert f"set {KEY}=nccl" in line
    fixed, _ = _composed(root, _spec(extra=[f"{KEY}=nccl"]))
    assert verlcheck.startup_report(fixed, root, use_import=False)["errors"] == []


def test_separate_async_refuses_the_naive_engine(root):
    cfg, _ = _composed(root, _spec(accelerator="gpu", extra=[f"{KEY}=naive"]))
    errs = verlcheck.startup_report(cfg, root, use_import=False, find_spec=lambda n: object())["errors"]
    assert errs and errs[0].startswith(f"{KEY}=naive") and "trainer_separate_async.py:67" in errs[0]


def test_the_compose_op_answers_startup_and_preflight_makes_one_check_of_it(root):
    """The op as preflight runs it (a child Python, request on stdin): hccl -> one FAIL line; nccl -> a WARN saying
    verl does not import here (no torch), never "ok" beside "skipped" (issue 43 finding 7)."""
    for extra, want in (([], "fail"), ([f"{KEY}=nccl"], "warn")):
        argv = overrides.build_command(_spec(extra=extra), resolve(""))
        req = dict(validate.request_for(argv, root), startup=True)
        p = subprocess.run(
            [sys.executable, "-m", "dapo_ops.agent.compose"],
            input=json.dumps(req),
            capture_output=True,
            text=True,
            cwd=root,
            timeout=300,
        )
        assert p.returncode == 0, p.stderr
        if not extra and f"{KEY}=hccl" not in " ".join(argv):
            continue  # the emission was fixed (finding 1): nothing to refuse any more
        c = _startup_check({"stdout": p.stdout})
        assert c.status == want, c
        if want == "fail":
            assert f"{KEY}=hccl" in c.message and "\n" not in c.message
        else:
            assert c.message.startswith("verl does not import in the container (") and "did not run" in c.message
            assert "set_env.sh" in c.fix


def test_without_verl_sources_or_import_the_step_says_skipped(tmp_path):
    cfg = {
        "trainer": {"v1": {"trainer_mode": "separate_async"}, "n_gpus_per_node": 4, "nnodes": 1},
        "actor_rollout_ref": {
            "rollout": {
                "checkpoint_engine": {"backend": "hccl"},
                "nnodes": 1,
                "n_gpus_per_node": 4,
                "tensor_model_parallel_size": 2,
            }
        },
    }
    rep = verlcheck.startup_report(cfg, str(tmp_path), use_import=False)
    assert rep["errors"] == []
    assert any(s.startswith("checkpoint-engine: skipped: verl not importable") for s in rep["skipped"])


def test_pool_arithmetic_names_the_key(root):
    cfg, _ = _composed(
        root,
        _spec(
            extra=[
                "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=3",
                "actor_rollout_ref.rollout.tensor_model_parallel_size=3",
                f"{KEY}=nccl",
            ]
        ),
    )
    errs = verlcheck.pool_errors(cfg)
    assert any(e.startswith("actor_rollout_ref.actor.megatron.tensor_model_parallel_size=3") for e in errs), errs
    assert any("does not divide the rollout pool's 4 devices" in e for e in errs), errs


def test_megatron_flash_backend_without_any_flash_attn_on_cuda(root):
    """Megatron on GPU with flash_attn on: attention_backend=flash leaves TE only its flash backend, which needs a
    flash-attn 2/3/4 distribution; without one verl dies at the first forward ('No dot product attention backend is
    available', TE 2.20.2 dot_product_attention.py:2900). -flash_attn (cuDNN fused, packed sequences kept) passes;
    so does fused by override. unfused with padded (bshd) batches is refused: the H200 run k-megatron-unfused-bshd
    died in its first forward that way; unfused with packed sequences passes."""
    spec = _spec(mode="dapo", framework="megatron", accelerator="gpu")
    cfg, _ = _composed(root, spec)
    assert verlcheck._get(cfg, verlcheck.MEG_ATTN_KEY) == "flash"
    missing = verlcheck.attention_errors(cfg, find_spec=lambda n: None)
    assert len(missing) == 1 and missing[0].startswith(f"{verlcheck.MEG_ATTN_KEY}=flash but no flash-attn")
    assert "--features -flash_attn" in missing[0] and f"{verlcheck.MEG_ATTN_KEY}=fused" in missing[0]
    for present in ("flash_attn", "flash_attn_interface"):  # flash-attn 2 or 4 / flash-attn-3
        assert verlcheck.attention_errors(cfg, find_spec=lambda n, p=present: object() if n == p else None) == []
    noflash, _ = _composed(root, spec, "-flash_attn")  # the fix the message names
    assert verlcheck._get(noflash, verlcheck.MEG_ATTN_KEY) == "fused"
    assert verlcheck._get(noflash, verlcheck.RMPAD_KEY) is True
    assert verlcheck.attention_errors(noflash, find_spec=lambda n: None) == []
    fused, _ = _composed(
        root, _spec(mode="dapo", framework="megatron", accelerator="gpu", extra=[f"{verlcheck.MEG_ATTN_KEY}=fused"])
    )
    assert verlcheck._get(fused, verlcheck.MEG_ATTN_KEY) == "fused"
    assert verlcheck.attention_errors(fused, find_spec=lambda n: None) == []
    unfused = _spec(mode="dapo", framework="megatron", accelerator="gpu", extra=[f"{verlcheck.MEG_ATTN_KEY}=unfused"])
    packed, _ = _composed(root, unfused)
    assert verlcheck.attention_errors(packed, find_spec=lambda n: None) == []
    bshd, _ = _composed(root, unfused, "-remove_padding")
    assert verlcheck._get(bshd, verlcheck.RMPAD_KEY) is False
    refused = verlcheck.attention_errors(bshd, find_spec=lambda n: None)
    assert len(refused) == 1 and refused[0].startswith(
        f"{verlcheck.MEG_ATTN_KEY}=unfused with {verlcheck.RMPAD_KEY}=False"
    )
    assert f"use {verlcheck.MEG_ATTN_KEY}=fused" in refused[0]
    npu, _ = _composed(root, _spec(mode="dapo", framework="megatron", accelerator="npu"))
    assert verlcheck.attention_errors(npu, find_spec=lambda n: None) == []  # MindSpeed's attention, not TE's
    npu_off, _ = _composed(root, _spec(mode="dapo", framework="megatron", accelerator="npu"), "-flash_attn")
    assert verlcheck.attention_errors(npu_off, find_spec=lambda n: None) == []  # the check is CUDA's only


def test_flash_attention_without_flash_attn_on_cuda(root):
    cfg, _ = _composed(root, _spec(mode="dapo", framework="fsdp", accelerator="gpu"))
    missing = verlcheck.attention_errors(cfg, find_spec=lambda n: None)
    assert len(missing) == 1 and "flash_attention_2" in missing[0] and "-flash_attn" in missing[0]
    assert verlcheck.attention_errors(cfg, find_spec=lambda n: object()) == []
    sdpa, _ = _composed(root, _spec(mode="dapo", framework="fsdp", accelerator="gpu"), "-flash_attn")
    assert verlcheck.attention_errors(sdpa, find_spec=lambda n: None) == []
    # the fix the message names is honest: -flash_attn on FSDP keeps the other three features on (g-features-a/-b)
    assert "keeps remove_padding, dynamic_batch and gradient_checkpointing on" in missing[0]
    assert verlcheck._get(sdpa, "actor_rollout_ref.model.use_remove_padding") is True
    assert verlcheck._get(sdpa, "actor_rollout_ref.actor.use_dynamic_bsz") is True
    assert verlcheck._get(sdpa, "actor_rollout_ref.model.enable_gradient_checkpointing") is True


def _bridge(tmp_path, energon=True, modelopt=True):
    """A Megatron-Bridge package dir holding the import lines of 0.6.2's own sources (megatron_bridge-0.6.2 wheel:
    data/energon/base_energon_datamodule.py:19, models/conversion/auto_bridge.py:1127); ``False`` leaves a line out
    (another Megatron-Bridge version that does not import the module)."""
    d = tmp_path / "megatron" / "bridge"
    (d / "data" / "energon").mkdir(parents=True)
    (d / "models" / "conversion").mkdir(parents=True)
    (d / "data" / "energon" / "base_energon_datamodule.py").write_text(
        "from megatron.core.process_groups_config import ProcessGroupCollection\n"
        + ("from megatron.energon import WorkerConfig, get_savable_loader, get_train_dataset\n" if energon else "")
    )
    (d / "models" / "conversion" / "auto_bridge.py").write_text(
        "        model_instance = self._get_model_instance(model)\n"
        + ("        from modelopt.torch.quantization.utils import is_quantized\n" if modelopt else "")
    )
    spec = type("Spec", (), {"submodule_search_locations": [str(d)], "origin": None})()
    return spec


def _finder(bridge, present):
    """find_spec of a container with Megatron-Bridge ``bridge`` and the modules ``present``."""
    return lambda n: bridge if n == "megatron.bridge" else (object() if n in present else None)


def test_megatron_modules_the_h200_runs_died_on_are_refused_before_launch(root, tmp_path):
    """The three start-up deaths of the real Megatron runs on the H200 (tests/fixtures/real-verl/tool-runs/
    k-megatron-energon, -apex, -modelopt), in the order they happened, each refused by the startup check with its fix;
    a container with the modules (or the override / no checkpoints) passes; FSDP and NPU are not concerned."""
    spec = _spec(mode="dapo", framework="megatron", accelerator="gpu")
    spec["settings"]["save_freq"] = 1
    cfg, _ = _composed(root, spec)
    bridge = _bridge(tmp_path)
    everything = {"megatron.energon", "transformer_engine", "fused_weight_gradient_mlp_cuda", "modelopt"}
    assert verlcheck.megatron_errors(cfg, _finder(bridge, everything)) == []

    errs = verlcheck.megatron_errors(cfg, _finder(bridge, {"transformer_engine"}))
    assert len(errs) == 3, errs
    assert errs[0].startswith("megatron.energon is not installed") and "pip install megatron-energon" in errs[0]
    assert errs[1].startswith(f"{verlcheck.GRAD_FUSION_KEY} is on by default")
    assert f"--override +{verlcheck.GRAD_FUSION_KEY}=False" in errs[1]
    assert errs[2].startswith("modelopt is not installed") and "after step 1" in errs[2]
    assert "pip install nvidia-modelopt" in errs[2] and "--save-freq -1" in errs[2]
    # each refusal is one line, and reaches the preflight check through startup_report
    assert all("\n" not in e for e in errs)
    rep = verlcheck.startup_report(cfg, root, use_import=False, find_spec=_finder(bridge, {"transformer_engine"}))
    assert [e for e in rep["errors"] if e in errs] == errs

    # the fixes named in the lines make the check pass
    off, _ = _composed(
        root,
        dict(spec, settings=dict(spec["settings"], extra_overrides=[f"+{verlcheck.GRAD_FUSION_KEY}=False"])),
    )
    assert verlcheck._get(off, verlcheck.GRAD_FUSION_KEY) is False
    have = {"megatron.energon", "transformer_engine", "modelopt"}
    assert verlcheck.megatron_errors(off, _finder(bridge, have)) == []
    no_ckpt, _ = _composed(root, dict(spec, settings=dict(spec["settings"], save_freq=-1)))
    assert not any("modelopt" in e for e in verlcheck.megatron_errors(no_ckpt, _finder(bridge, set())))
    # a Megatron-Bridge whose sources do not import energon / modelopt asks for neither
    other = _bridge(tmp_path / "other", energon=False, modelopt=False)
    assert (
        verlcheck.megatron_errors(cfg, _finder(other, {"transformer_engine", "fused_weight_gradient_mlp_cuda"})) == []
    )
    # without Transformer Engine the provider leaves the fusion off (megatron/bridge/utils/fusions.py:34-60)
    assert not any("fusion" in e for e in verlcheck.megatron_errors(cfg, _finder(bridge, {"megatron.energon"})))
    # FSDP and Megatron on NPU (MindSpeed) are not concerned by these three
    fsdp, _ = _composed(root, _spec(mode="dapo", framework="fsdp", accelerator="gpu"))
    assert verlcheck.megatron_errors(fsdp, _finder(bridge, set())) == []
    npu_spec = _spec(mode="dapo", framework="megatron", accelerator="npu")
    npu, _ = _composed(root, npu_spec)
    assert not any("fusion" in e for e in verlcheck.megatron_errors(npu, _finder(bridge, {"transformer_engine"})))


_TOOL_RUNS = Path(__file__).parent / "fixtures" / "real-verl" / "tool-runs"


def _logged_argv(name: str) -> list[str]:
    """Attempt 1's verl command as the supervisor logged it on the real H200 run (supervisor.log)."""
    return ["python3", "-m", "verl.trainer.main_ppo", *logged_verl_argv(_TOOL_RUNS / name, 1)]


def test_the_real_megatron_runs_against_the_attention_check(root):
    """The H200's three Megatron runs of 2026-12-02 (tool-runs/k-megatron-*), their logged verl commands composed
    against verl 0.9.1's config: the run that died in its first forward (unfused + padded batches: TE get_full_mask
    could not broadcast verl's [batch, seq] mask) is refused before launch; the two that trained and resumed
    (fused, packed) pass. Today's plan for the failed run's own spec and USER_FEATURES (-flash_attn on a GPU host)
    sets the route that trained: fused with packed sequences, remove_padding no longer implied off."""
    from dapo_ops.core.features import implies_off

    died = _composed_argv(root, _logged_argv("k-megatron-unfused-bshd"))
    assert (verlcheck._get(died, verlcheck.MEG_ATTN_KEY), verlcheck._get(died, verlcheck.RMPAD_KEY)) == (
        "unfused",
        False,
    )
    assert "The size of tensor a (116) must match" in (_TOOL_RUNS / "k-megatron-unfused-bshd" / "train.log").read_text()
    refused = verlcheck.attention_errors(died, find_spec=lambda n: None)
    assert len(refused) == 1 and "unfused" in refused[0] and "--features -flash_attn" in refused[0]
    for name in ("k-megatron-a", "k-megatron-b"):
        ran = _composed_argv(root, _logged_argv(name))
        assert (verlcheck._get(ran, verlcheck.MEG_ATTN_KEY), verlcheck._get(ran, verlcheck.RMPAD_KEY)) == (
            "fused",
            True,
        )
        assert verlcheck.attention_errors(ran, find_spec=lambda n: None) == []
    spec = json.loads((_TOOL_RUNS / "k-megatron-unfused-bshd" / "spec.json").read_text())
    assert spec["disabled_features"] == ["flash_attn", "remove_padding"]  # what the old plan made of -flash_attn
    fs = resolve("-flash_attn", implied_off=implies_off(spec["profile"], spec["framework"], spec["accelerator"]))
    assert fs.has("remove_padding") and fs.disabled == frozenset({"flash_attn"})
    today = _composed_argv(root, overrides.build_command(spec, fs))
    assert (verlcheck._get(today, verlcheck.MEG_ATTN_KEY), verlcheck._get(today, verlcheck.RMPAD_KEY)) == (
        "fused",
        True,
    )
    assert verlcheck.attention_errors(today, find_spec=lambda n: None) == []
