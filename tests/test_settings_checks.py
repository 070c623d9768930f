"""Range, name and tracker-rule checks of the run settings (dapo_ops/control/settings.py) and of the launch
flags: each refused at settings time in one line naming its source, exit 2 from the CLI, nothing launched."""

import subprocess
import sys
from pathlib import Path

import pytest

from dapo_ops.control import settings as S
from dapo_ops.control.launch.plan import PlanError, PlanInputs, draft_plan, make_plan
from dapo_ops.control.settings import SettingsError, check_tracker_names, resolve
from config_helpers import no_config

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


@pytest.mark.parametrize(
    "flags,env,file_cfg,needle",
    [
        ({"save_freq": -2}, {}, {}, "--save-freq=-2 is below the minimum 1; use a value >= 1 or -1"),
        ({"save_freq": 0}, {}, {}, "--save-freq=0 is below the minimum 1"),
        ({}, {"SAVE_FREQ": "-5"}, {}, "SAVE_FREQ='-5' is below"),
        ({}, {"MAX_OOM_RETRIES": "1000"}, {}, "MAX_OOM_RETRIES='1000' is above the maximum 10"),
        ({}, {}, {"run": {"max_oom_retries": 11}}, "[run] max_oom_retries in the config file=11 is above"),
        ({"container": "verl;x"}, {}, {}, "--container='verl;x' is not a Docker container name"),
        ({}, {"CONTAINER": "-verl"}, {}, "CONTAINER='-verl' is not a Docker container name"),
    ],
)
def test_out_of_range_values_are_refused_naming_their_source(flags, env, file_cfg, needle):
    with pytest.raises(SettingsError) as ei:
        resolve(flags, env, file_cfg)
    assert needle in str(ei.value)
    assert "\n" not in str(ei.value)
    assert "inventory" not in str(ei.value)  # the flag/variable is the source, not hosts.toml


@pytest.mark.parametrize(
    "flags",
    [{"save_freq": -1}, {"save_freq": 1}, {"max_oom_retries": 10}, {"max_oom_retries": 0}, {"container": "verl_2.a-b"}],
)
def test_values_in_range_pass(flags):
    st = resolve(flags, {}, {})
    ((name, val),) = flags.items()
    assert st[name] == val


@pytest.mark.parametrize(
    "flags,env,file_cfg,needle",
    [
        ({"project": "my project"}, {}, {}, "--project='my project' is refused by swanlab"),
        ({}, {"PROJECT_NAME": "a/b"}, {}, "PROJECT_NAME='a/b' is refused by swanlab"),
        ({}, {}, {"run": {"project": "x" * 101}}, "[run] project in the config file="),
        ({"experiment": "e" * 513}, {}, {}, "--experiment="),
    ],
)
def test_names_swanlab_refuses_are_refused_when_swanlab_logs(flags, env, file_cfg, needle):
    st = resolve(flags, env, file_cfg)
    with pytest.raises(SettingsError) as ei:
        check_tracker_names(st, ["console", "swanlab"])
    msg = str(ei.value)
    assert needle in msg and "\n" not in msg and "--swanlab-mode disabled" in msg
    check_tracker_names(st, ["console"])  # only the logger that enforces the rule refuses it


def test_swanlab_rule_is_swanlabs_own():
    """The table's rule agrees with the installed swanlab's pydantic types (the oracle)."""
    const = pytest.importorskip("swanlab.sdk.internal.pkg.constraints")
    for name in ("dapo-ops", "a.b+c_d-1", "my project", "a/b", "", "x" * 100, "x" * 101, "名字"):
        try:
            const.ta_project.validate_python(name)
            ok = True
        except Exception:
            ok = False
        st = resolve({"project": name} if name else {}, {}, {})
        try:
            check_tracker_names(st, ["swanlab"])
            ours = True
        except SettingsError:
            ours = False
        assert ours == ok or name == "", name  # "" = not given: the default 'dapo-ops'
    for name in ("my experiment / 1", "e" * 512):
        const.ta_experiment.validate_python(name)
        check_tracker_names(resolve({"experiment": name}, {}, {}), ["swanlab"])


def test_make_plan_refuses_the_name_with_the_swanlab_logger_only():
    st = resolve({"project": "my project"}, {}, {})
    with pytest.raises(PlanError, match="--project='my project' is refused by swanlab"):
        make_plan(draft_plan(PlanInputs(settings=st, mode="dapo", run_id="20261201-120000-abcd", swanlab_logger=True)))
    plan = make_plan(
        draft_plan(PlanInputs(settings=st, mode="dapo", run_id="20261201-120000-abcd", swanlab_logger=False))
    )
    assert "trainer.project_name='my project'" in plan.argv  # hydra-quoted (core/overrides.py)


def _dapo_ops(*argv, tmp_path):
    env = {"PATH": str(BIN), "HOME": str(tmp_path), "DAPO_OPS_CONFIG": no_config(tmp_path)}
    return subprocess.run(
        [str(BIN / "dapo-ops"), *argv], capture_output=True, text=True, cwd=tmp_path, timeout=60, env=env
    )


@pytest.mark.parametrize(
    "argv,start",
    [
        (["--project", "my project", "--swanlab-mode", "local"], "--project='my project' is refused by swanlab"),
        (["--save-freq", "-2"], "--save-freq=-2 is below the minimum 1"),
        (["--container", "verl;x"], "--container='verl;x' is not a Docker container name"),
        (["--link-wait", "-1"], "--link-wait=-1 is negative"),
    ],
)
def test_launch_refuses_with_one_line_and_exit_2(argv, start, tmp_path):
    out = _dapo_ops("launch", "--dry-run", *argv, tmp_path=tmp_path)
    assert out.returncode == 2, out.stdout + out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(start), out.stderr
    assert "Traceback" not in out.stderr


def test_launch_dry_run_accepts_the_name_without_swanlab(tmp_path):
    out = _dapo_ops("launch", "--dry-run", "--project", "my project", "--swanlab-mode", "disabled", tmp_path=tmp_path)
    assert out.returncode == 0, out.stderr


def test_max_oom_retries_bound_is_documented_in_the_table():
    assert S.BY_NAME["max_oom_retries"].maximum == 10


@pytest.mark.parametrize(
    "flags,env,file_cfg,where",
    [
        ({}, {}, {"run": {"experiment": "exp-SECRETKEY123"}}, "[run] experiment in the config file: "),
        ({}, {"EXPERIMENT_NAME": "exp-SECRETKEY123"}, {}, "EXPERIMENT_NAME: "),
        ({"experiment": "exp-SECRETKEY123"}, {}, {}, "--experiment: "),
    ],
)
def test_a_secret_in_a_setting_is_reported_where_it_was_set(flags, env, file_cfg, where):
    from dapo_ops.control.launch.service import refuse_secret_settings
    from dapo_ops.control.launch.refusals import LaunchUsageError

    st = resolve(flags, env, file_cfg)
    with pytest.raises(LaunchUsageError) as ei:
        refuse_secret_settings(st, ["SECRETKEY123"])
    assert str(ei.value).startswith(where) and "SECRETKEY123" not in str(ei.value)


@pytest.mark.parametrize(
    "flags,env,file_cfg,start",
    [
        ({"offload": True, "features": "-offload"}, {}, {}, "--offload turns offload on but --features='-offload'"),
        (
            {},
            {"ENABLE_OFFLOAD": "1", "USER_FEATURES": "-offload"},
            {},
            "ENABLE_OFFLOAD turns offload on but USER_FEATURES=",
        ),
        (
            {},
            {},
            {"run": {"offload": True, "features": ["-offload"]}},
            "[run] offload in the config file turns offload on but [run] features in the config file='-offload'",
        ),
    ],
)
def test_offload_on_and_off_names_both_sources(flags, env, file_cfg, start):
    """From sources of one rank (from different ones the higher wins: tests/test_settings.py)."""
    with pytest.raises(SettingsError) as ei:
        resolve(flags, env, file_cfg)
    assert str(ei.value).startswith(start) and "ENABLE_OFFLOAD=True" not in str(ei.value)


def test_unknown_feature_echoes_the_raw_token():
    with pytest.raises(SettingsError) as ei:
        resolve({}, {"USER_FEATURES": "flash_attn;rm -rf /"}, {})
    assert str(ei.value).startswith("USER_FEATURES: unknown feature 'rm -rf /'; valid features: ")
