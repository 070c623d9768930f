"""Compose check against the pinned verl 0.9.1 yaml: Hydra's own messages, CWD restored, the in-container op."""

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dapo_ops.agent import compose
from dapo_ops.control.remote import bundle as remote_bundle
from dapo_ops.control.preflight import compose_check as validate
from dapo_ops.core import features
from dapo_ops.core import overrides

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sandbox"))
from fetch_verl_config import verl_config_root  # noqa: E402


@pytest.fixture(scope="module")
def root():
    return str(verl_config_root())


def _spec(mode="dapo", framework="megatron", profile="0.9"):
    return {
        "run_id": "r1",
        "mode": mode,
        "framework": framework,
        "profile": profile,
        "accelerator": "npu",
        "workdir": "/verl",
        "run_dir": "/verl/dapo_runs/r1",
        "settings": {"steps": 10, "model_path": "/m", "train_file": "/a.parquet", "val_file": "/b.parquet"},
        "logger": ["console"],
    }


def test_stale_grad_offload_on_091_gets_hydras_message(root):
    argv = overrides.build_command(_spec("one-step-off", "megatron", profile="0.8"), features.resolve("offload"))
    assert "actor_rollout_ref.actor.megatron.grad_offload=True" in argv
    errs = validate.compose_check(argv, root)
    assert "Could not override 'actor_rollout_ref.actor.megatron.grad_offload'." in errs
    assert "Key 'grad_offload' is not in struct" in errs
    # every failing key is reported in one pass, not only the first
    assert "Could not override 'critic.megatron.grad_offload'." in errs


def test_missing_plus_gets_hydras_message(root):
    argv = overrides.build_command(_spec("dapo", "fsdp"), features.resolve(""))
    bad = [
        a.lstrip("+") if a.startswith("+actor_rollout_ref.model.override_config.attn_implementation") else a
        for a in argv
    ]
    errs = validate.compose_check(bad, root)
    assert "Could not override 'actor_rollout_ref.model.override_config.attn_implementation'." in errs
    assert any(
        e.startswith("To append to your config use +actor_rollout_ref.model.override_config.attn_implementation=")
        for e in errs
    )


def test_plus_on_an_existing_key_gets_hydras_message(root):
    errs = validate.compose_check(["+trainer.total_epochs=3"], root, "ppo_trainer")
    assert "Could not append to config. An item is already at 'trainer.total_epochs'." in errs


def test_generated_argv_composes_and_cwd_is_restored(root, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = overrides.build_command(_spec("one-step-off", "fsdp"), features.resolve(""))
    assert validate.compose_check(argv, root) == []
    assert os.getcwd() == str(tmp_path)
    validate.compose_check(["nope=1"], root, "ppo_trainer")
    assert os.getcwd() == str(tmp_path)


def test_wrong_searchpath_reproduces_the_cwd_failure(root, tmp_path):
    errs = validate.compose_check(
        ["hydra.searchpath=[file://verl/trainer/config]"],
        root,
        "one_step_off_ppo_trainer",
        config_dir="verl/experimental/one_step_off_policy/config",
    )
    assert errs == []  # rewritten to the local root: the generator's absolute searchpath is what matters
    # without any searchpath from a foreign CWD, Hydra reports what verl users see
    blocks = compose.compose_errors(
        str(tmp_path), f"{root}/verl/experimental/one_step_off_policy/config", "one_step_off_ppo_trainer", []
    )
    assert any("Could not load 'ppo_trainer'" in line for b in blocks for line in b)


def test_remote_op_runs_from_the_bundle_with_json_on_stdin(root, tmp_path):
    """The preflight form: the bundle op ``python3 -m dapo_ops.agent.compose`` (stdlib + hydra only, no dapo_ops
    module but verlcheck and the one override parser, both stdlib; no torch), JSON in, JSON out."""
    tree = ast.parse(Path(compose.__file__).read_text())
    imported = {
        (n.module if isinstance(n, ast.ImportFrom) else a.name).split(".")[0]
        for n in ast.walk(tree)
        if isinstance(n, (ast.Import, ast.ImportFrom))
        for a in n.names
    }
    assert imported <= {
        "__future__",
        "difflib",  # the nearest known key of an unknown one
        "json",
        "os",
        "re",
        "sys",
        "typing",
        "warnings",
        "hydra",
        "omegaconf",
        "dapo_ops",
    }, imported
    own = {
        n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("dapo_ops")
    }
    # verlcheck (stdlib; verl's start-up checks), imported when asked; the one override parser (a stdlib leaf of core,
    # shipped in the same bundle): which override an error names
    assert own <= {"dapo_ops.agent", "dapo_ops.core.hydra_override"}
    bdir = remote_bundle.local_install(tmp_path / "runs")
    line = remote_bundle.op_line(bdir, sys.executable, "compose")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    argv = overrides.build_command(_spec("one-step-off", "megatron", profile="0.8"), features.resolve("offload"))
    req = validate.request_for(argv, root)
    proc = subprocess.run(
        ["sh", "-c", line], input=json.dumps(req), capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    errs = validate.parse_remote_result(proc.stdout)
    assert "Could not override 'actor_rollout_ref.actor.megatron.grad_offload'." in errs
    good = validate.request_for(overrides.build_command(_spec(), features.resolve("")), root)
    proc = subprocess.run(
        ["sh", "-c", line], input=json.dumps(good), capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120
    )
    assert json.loads(proc.stdout) == {"ok": True, "errors": []}


def test_request_for_container_root_keeps_container_paths():
    sp = _spec("one-step-off", "megatron")
    sp["profile"] = "0.8"  # the legacy one-step-off entry (0.9 runs main_ppo separate_async)
    argv = overrides.build_command(sp, features.resolve(""))
    req = validate.request_for(argv, "/verl")
    assert req["config_dir"] == "/verl/verl/experimental/one_step_off_policy/config"
    assert req["config_name"] == "one_step_off_ppo_megatron_trainer"
    assert "hydra.searchpath=[file:///verl/verl/trainer/config]" in req["overrides"]


def test_missing_entry_config_is_reported(root):
    """A 0.8 DAPO argv (recipe.dapo.main_dapo) against a tree without the recipe: Hydra says so."""
    argv = overrides.build_command(_spec("dapo", "megatron", profile="0.8"), features.resolve(""))
    errs = validate.compose_check(argv, root)
    assert "Primary config directory not found." in errs


def test_parse_remote_result_rejects_garbage():
    with pytest.raises(ValueError):
        validate.parse_remote_result("Traceback ...")
