"""Preflight's compose check finds the config of a verl installed as a package (no verl checkout in the
workdir), as on the bare GPU host of gpu/README.md, where the first real run's preflight failed with
"Primary config directory not found: /tmp/dapo/work/verl/trainer/config"."""

from __future__ import annotations

import sys

from dapo_ops.agent import preflight_probe as preflight_probe


def _fake_verl(tmp_path):
    site = tmp_path / "site"
    cfg = site / "verl" / "trainer" / "config"
    cfg.mkdir(parents=True)
    (site / "verl" / "__init__.py").write_text("raise RuntimeError('find_spec must not import verl')\n")
    (site / "verl" / "trainer" / "__init__.py").write_text("")
    (cfg / "ppo_trainer.yaml").write_text("trainer:\n  total_training_steps: 1\n")
    return site


def test_request_moves_to_the_installed_verl_when_the_workdir_has_none(tmp_path, monkeypatch):
    site = _fake_verl(tmp_path)
    monkeypatch.setattr(sys, "path", [str(site)] + sys.path)
    work = tmp_path / "work"
    work.mkdir()
    rq = {
        "config_root": str(work),
        "config_dir": f"{work}/verl/trainer/config",
        "config_name": "ppo_trainer",
        "overrides": ["trainer.total_training_steps=3", f"hydra.searchpath=[file://{work}/verl/trainer/config]"],
    }
    got = preflight_probe.installed_config_root(rq)
    assert got["config_root"] == str(site) and got["config_dir"] == f"{site}/verl/trainer/config"
    assert got["overrides"] == [
        "trainer.total_training_steps=3",
        f"hydra.searchpath=[file://{site}/verl/trainer/config]",
    ]
    assert "verl" not in sys.modules or not str(getattr(sys.modules["verl"], "__file__", "")).startswith(str(site))


def test_request_is_kept_when_the_workdir_holds_verl(tmp_path, monkeypatch):
    site = _fake_verl(tmp_path)
    monkeypatch.setattr(sys, "path", [str(site)] + sys.path)
    rq = {"config_root": str(site), "config_dir": f"{site}/verl/trainer/config", "overrides": []}
    assert preflight_probe.installed_config_root(rq) is rq
    gone = {"config_root": str(tmp_path / "nowhere"), "config_dir": str(tmp_path / "nowhere/verl/trainer/config")}
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)  # no verl importable at all
    assert preflight_probe.installed_config_root(gone) is gone


def test_one_reader_of_the_verl_version_without_importing_it(tmp_path, monkeypatch):
    """agent/verlinfo.py: verl's own version/version file first (real verl 0.9.1, verl/__init__.py:37-40), else the
    literal __version__ in __init__.py (the sandbox stand-in); an __init__ that would fail to import is never run."""
    import sys

    from dapo_ops.agent import verlinfo

    real = tmp_path / "a" / "verl"
    (real / "version").mkdir(parents=True)
    (real / "__init__.py").write_text("raise SystemExit('imported!')\n")
    (real / "version" / "version").write_text("0.9.1\n")
    assert verlinfo.verl_version(str(real)) == "0.9.1"
    standin = tmp_path / "b" / "verl"
    standin.mkdir(parents=True)
    (standin / "__init__.py").write_text('import torch\n__version__ = "0.9.1.dev0"\n')
    assert verlinfo.verl_version(str(standin)) == "0.9.1.dev0"
    monkeypatch.syspath_prepend(str(real.parent))
    info = verlinfo.verl_info("verl.trainer.main_ppo")
    assert info["found"] and info["version"] == "0.9.1" and info["path"] == str(real)
    assert info["entry_found"] is False
    assert getattr(sys.modules.get("verl"), "__file__", None) != str(real / "__init__.py")  # never imported
