"""The launch request (dapo_ops/control/launch/request.py): the launch tasks' arguments + the operator's environment
-> a dry run, a launch, or ONE usage error, without touching os.environ, a host or a terminal. Pure: no host is
contacted (the host selection is a function the test passes in)."""

from __future__ import annotations

import os

import pytest

from dapo_ops.control.inventory import hosts_file as inventory
from dapo_ops.control.launch import service as svc
from dapo_ops.control.launch import request as lr
from dapo_ops.control.launch.refusals import LaunchUsageError
from config_helpers import no_config

KEY = "sk-swan-0123456789abcdef"
PROXY_PW = "PROXYPW-5551234"


def _env(tmp_path, **extra) -> dict:
    """An operator environment with no config file and SwanLab in cloud mode with a key."""
    return {"DAPO_OPS_CONFIG": no_config(tmp_path), "SWANLAB_MODE": "cloud", "SWANLAB_API_KEY": KEY, **extra}


def _hosts(tmp_path, proxy: str = "", n: int = 1):
    """A host selection over a hosts.toml of ``n`` hosts (``proxy``: its [proxy] http_proxy), recording its calls."""
    text = '[defaults]\nuser = "root"\naccelerator = "gpu"\ndevices = 8\n'
    text += "".join(f'[hosts.h{i}]\naddress = "192.0.2.{i}"\n' for i in range(1, n + 1))
    if proxy:
        text += f'[proxy]\nhttp_proxy = "{proxy}"\n'
    (tmp_path / "hosts.toml").write_text(text)
    calls = []

    def select():
        calls.append(1)
        inv = inventory.load(str(tmp_path / "hosts.toml"))
        return inv, inventory.select(inv, None)

    return select, calls


def _never():
    raise AssertionError("no host may be selected before this refusal")


def test_swanlab_host_flag_reaches_the_swanlab_setup_in_a_copy_of_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv("SWANLAB_HOST", raising=False)
    env = _env(tmp_path)
    select, calls = _hosts(tmp_path)
    args = lr.TaskArgs(mode="dapo", flags={"swanlab_host": "http://192.0.2.10:8000/"})
    got = lr.build(args, env, select_hosts=select, stdin_isatty=False)
    assert isinstance(got, lr.Launch) and calls == [1]
    assert got.request.sw.host == "http://192.0.2.10:8000"  # normalized by the SwanLab setup, from the flag
    assert "SWANLAB_HOST" not in env and "SWANLAB_HOST" not in os.environ  # nothing written
    assert KEY in got.secrets and not got.cluster and got.hosts_given is False
    assert [h.name for h in got.hosts] == ["h1"] and got.request.mode == "dapo"
    assert got.timeout_s == svc.START_WAIT_S + svc.SETTLE_S + 20 + lr.HOST_WORK_S
    dry = lr.build(lr.TaskArgs(mode="dapo", flags=args.flags, dry_run=True), env, select_hosts=_never)
    assert isinstance(dry, lr.DryRun) and dry.env["SWANLAB_HOST"] == "http://192.0.2.10:8000/"


@pytest.mark.parametrize(
    "args,start",
    [
        (lr.TaskArgs(mode="dapo", link_wait=-1), "--link-wait=-1 is negative"),
        (lr.TaskArgs(mode="dapo", resume="last"), "--resume takes a run id like"),
        (
            lr.TaskArgs(mode="dapo", flags={"swanlab_host": "not a url"}),
            "SwanLab host 'not a url' (from --swanlab-host)",
        ),
        (
            lr.TaskArgs(mode="dapo", overrides=("+trainer.api_key=abc",)),
            "--override +trainer.api_key=...: the key looks",
        ),
        (
            lr.TaskArgs(mode="dapo", overrides=(f"+trainer.x={KEY}",)),
            "--override +trainer.x=...: the value holds a secret",
        ),
        (lr.TaskArgs(mode="dapo", flags={"trainer_gpus": 4}), "--trainer-gpus size the pools of one-step-off"),
        (lr.TaskArgs(mode="dapo", flags={"steps": 0}), "--steps=0 is below the minimum 1"),
        (lr.TaskArgs(mode="dapo", flags={"experiment": f"e-{KEY}"}), "--experiment: the value holds a secret"),
        (lr.TaskArgs(mode="dapo", dry_run=True, json=True), "--json prints the started runs and --dry-run"),
    ],
)
def test_a_refusal_that_needs_no_host_comes_before_any_host_is_selected(tmp_path, args, start):
    with pytest.raises(LaunchUsageError) as e:
        lr.build(args, _env(tmp_path), select_hosts=_never, stdin_isatty=False)
    assert str(e.value).startswith(start) and "\n" not in str(e.value) and KEY not in str(e.value)


def test_a_secret_the_inventory_adds_is_looked_for_once_it_is_known(tmp_path):
    """hosts.toml's [proxy] URL with its password is known only once the hosts are selected: an override holding it
    is refused then, before any host is contacted (the request is never made)."""
    url = f"http://bob:{PROXY_PW}@192.0.2.9:3128"
    select, calls = _hosts(tmp_path, proxy=url)
    args = lr.TaskArgs(mode="dapo", overrides=(f"+trainer.note='{url}'",))
    with pytest.raises(LaunchUsageError) as e:
        lr.build(args, _env(tmp_path), select_hosts=select, stdin_isatty=False)
    assert calls == [1] and str(e.value).startswith("--override +trainer.note=...: the value holds a secret")
    ok = lr.build(lr.TaskArgs(mode="dapo"), _env(tmp_path), select_hosts=select, stdin_isatty=False)
    assert url in ok.secrets and PROXY_PW not in repr(ok.request.extra_public)
    assert PROXY_PW in "".join(ok.request.extra_secret.values())  # secret.env only


def test_resume_of_independent_runs_and_a_missing_swanlab_key_are_refused_after_the_hosts(tmp_path):
    select, calls = _hosts(tmp_path, n=2)
    resume = lr.TaskArgs(mode="dapo", resume="20261129-151200-a1b2", independent=True)
    with pytest.raises(LaunchUsageError, match="continues one run: drop --independent"):
        lr.build(resume, _env(tmp_path), select_hosts=select, stdin_isatty=False)
    assert calls == [1]
    cluster = lr.build(lr.TaskArgs(mode="dapo", hosts="h1,h2"), _env(tmp_path), select_hosts=select)
    assert cluster.cluster and cluster.hosts_given and [h.name for h in cluster.hosts] == ["h1", "h2"]
    calls.clear()
    env = {k: v for k, v in _env(tmp_path).items() if k != "SWANLAB_API_KEY"}
    with pytest.raises(LaunchUsageError, match="SWANLAB_API_KEY"):
        lr.build(lr.TaskArgs(mode="dapo"), env, select_hosts=select, stdin_isatty=False)
    assert calls == [1]
    got = lr.build(lr.TaskArgs(mode="dapo", swanlab_mode="disabled"), env, select_hosts=select)
    assert got.request.sw.mode == "disabled" and got.secrets == []


def test_a_dry_run_selects_no_host_and_carries_what_the_plan_needs(tmp_path):
    args = lr.TaskArgs(
        mode="one-step-off",
        flags={"steps": 4},
        swanlab_mode="disabled",
        overrides=("", "trainer.x=1"),
        hosts="h1",
        dry_run=True,
        resume="20261129-151200-a1b2",
    )
    got = lr.build(args, _env(tmp_path), select_hosts=_never)
    assert got == lr.DryRun(
        mode="one-step-off",
        flags={"steps": 4, "swanlab_mode": "disabled"},
        hosts="h1",
        inventory="",
        env=_env(tmp_path),
        file_cfg=got.file_cfg,
        config=got.config,
        overrides=["", "trainer.x=1"],  # an empty one is passed on: the plan's override check refuses it in one line
        independent=False,
        resume="20261129-151200-a1b2",
    )


def test_a_plan_error_is_a_usage_error_before_any_host_is_contacted(tmp_path):
    select, _ = _hosts(tmp_path)
    with pytest.raises(LaunchUsageError, match="= 16 devices, but the host has 8"):
        # one-step-off's pools must fit the host's 8 devices (core/runspec.py check_spec)
        lr.build(
            lr.TaskArgs(mode="one-step-off", flags={"trainer_gpus": 8, "rollout_gpus": 8}),
            _env(tmp_path),
            select_hosts=select,
            stdin_isatty=False,
        )
