"""One config object per program run (issue 46 item 4): the user config file is read once and the run settings are
resolved once per ``inv`` / ``dapo-ops`` command line, whichever tasks it runs (quickstart calls preflight and
launch), as invoke's Executor hands every task the same ``Config`` (invoke/executor.py ``Executor.execute``)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from invoke import Context, Program

from dapo_ops.cli import namespace_for
from dapo_ops.cli._common import run_config
from dapo_ops.cli.program import make_program
from dapo_ops.control import settings, userconfig
from dapo_ops.control.launch import request as launch_request

PKG = Path(__file__).resolve().parents[1] / "dapo_ops"


@pytest.fixture
def counted(monkeypatch, tmp_path):
    """The user config file (``[run] steps = 7``, SwanLab off), an inventory of one host, and the count of every
    file read (:func:`userconfig.load`) and settings resolution (:func:`settings.resolve`) from here on. A launch
    stops after its request is built: :func:`launch_request.start` starts nothing (no host is contacted)."""
    cfg = tmp_path / "config.toml"
    cfg.write_text('[run]\nsteps = 7\n\n[swanlab]\nmode = "disabled"\n')
    cfg.chmod(0o600)
    inv = tmp_path / "hosts.toml"
    inv.write_text('[hosts.h1]\naddress = "192.0.2.11"\naccelerator = "gpu"\ndevices = 8\n')
    monkeypatch.setenv("DAPO_OPS_CONFIG", str(cfg))
    monkeypatch.setenv("DAPO_OPS_INVENTORY", str(inv))
    for var in ("SWANLAB_MODE", "SWANLAB_API_KEY", "TRAIN_STEPS", "CONTAINER", "USER_FEATURES"):
        monkeypatch.delenv(var, raising=False)
    reads: list = []
    resolved: list = []
    load, resolve = userconfig.load, settings.resolve
    monkeypatch.setattr(userconfig, "load", lambda path=None: reads.append(path) or load(path))
    monkeypatch.setattr(settings, "resolve", lambda *a: resolved.append(a[0]) or resolve(*a))
    started: list = []
    monkeypatch.setattr(launch_request, "start", lambda got, **kw: started.append(got) or [])
    return {"reads": reads, "resolved": resolved, "started": started, "inventory": str(inv)}


@pytest.mark.parametrize("program", ["inv", "dapo-ops"])
def test_one_launch_reads_the_user_config_once_and_resolves_its_settings_once(counted, program):
    """``inv launch`` read the file twice (the request, then the SwanLab setup) before issue 46."""
    argv = [program, "launch", "-H", "h1", "--framework", "fsdp"]
    ns = namespace_for(argv[1:])
    prog = Program(namespace=ns, name="inv") if program == "inv" else make_program(ns)
    prog.run(argv, exit=False)
    (got,) = counted["started"]
    assert got.request.settings["steps"] == 7  # the file's [run] steps reached the launch
    assert len(counted["reads"]) == 1, counted["reads"]
    assert len(counted["resolved"]) == 1, counted["resolved"]


def test_one_dry_run_resolves_its_settings_once(counted, capsys):
    """``inv launch --dry-run`` resolved the settings in the request and again in the plan before issue 46."""
    Program(namespace=namespace_for(["launch"]), name="inv").run(
        ["inv", "launch", "--dry-run", "--framework", "fsdp"], exit=False
    )
    assert "trainer.total_training_steps=7" in capsys.readouterr().out
    assert (len(counted["reads"]), len(counted["resolved"])) == (1, 1)


def test_one_quickstart_reads_the_user_config_once(counted):
    """quickstart (no TTY: nothing is asked) reads the file, then launch's request and SwanLab setup do: four reads
    before issue 46, one now. Preflight is skipped here: it contacts the host."""
    Program(namespace=namespace_for(["quickstart"]), name="inv").run(
        ["inv", "quickstart", "-H", "h1", "--skip-preflight", "--features", "default", "--http-proxy", "none"],
        exit=False,
    )
    assert len(counted["started"]) == 1
    assert len(counted["reads"]) == 1, counted["reads"]


def test_the_run_config_reads_a_changed_file_again_and_resolves_each_input_once(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text("[run]\nsteps = 7\n")
    env = {"DAPO_OPS_CONFIG": str(cfg)}
    rc = userconfig.RunConfig(env)
    first = rc.file()
    assert rc.file() is first and rc.settings({})["steps"] == 7
    assert rc.settings({}) is rc.settings({})  # the same input: resolved once
    assert rc.settings({"steps": 3})["steps"] == 3
    assert rc.settings({}, {**env, "TRAIN_STEPS": "5"})["steps"] == 5  # another environment: another resolution
    cfg.write_text("[run]\nsteps = 9\n")  # a save (the SwanLab question) changes the file: read again
    assert rc.file()["run"] == {"steps": 9} and rc.settings({})["steps"] == 9
    cfg.write_text("[run]\nsteps = 'x'\n")
    with pytest.raises(userconfig.UserConfigError):
        rc.file()
    assert userconfig.RunConfig(env, {"run": {"steps": 4}}).settings({})["steps"] == 4  # tables handed in: no read


def test_every_task_of_one_program_run_shares_one_run_config():
    """quickstart hands its context to preflight and launch: the one object rides on the run's invoke Config."""
    c = Context()
    assert run_config(c) is run_config(c)
    assert run_config(Context()) is not run_config(c)


def _calls(name: str) -> list[str]:
    out = []
    for path in sorted(PKG.rglob("*.py")):
        for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == name:
                base = n.func.value
                if isinstance(base, ast.Name) and base.id in ("settings", "settings_mod", "userconfig"):
                    out.append(f"{path.relative_to(PKG.parent)}:{n.lineno}")
    return out


def test_settings_are_resolved_in_one_place_and_the_file_is_read_by_the_run_config():
    """Before issue 46 the run settings were resolved in 5 places (cli/_common.py, request.py, dryrun.py,
    multihost.py) and the user config file read in 8. Now RunConfig resolves them; the file is read by RunConfig and
    by a save of ``[swanlab]`` (the section it merges into, control/swanlab_settings.py)."""
    assert [c.split(":")[0] for c in _calls("resolve")] == ["dapo_ops/control/userconfig.py"]
    assert [c.split(":")[0] for c in _calls("load")] == ["dapo_ops/control/swanlab_settings.py"]
