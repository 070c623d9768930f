"""One Hydra compose per group of identical hosts (dapo_ops/control/preflight/group.py): the grouping decisions,
the compose fingerprint (dapo_ops/agent/compose.py) on real config trees copied to tmp, and the ``overrides``
check of a shared answer. Pure: no hosts (tests/test_preflight_group_bench.py runs the fleet on sandbox hosts)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from dapo_ops.agent import composefp as compose
from dapo_ops.control.preflight import group
from dapo_ops.control.preflight.verl import _overrides_check


def _answer(ok=True, errors=()):
    return {"rc": 0, "stdout": json.dumps({"ok": ok, "errors": [list(e) for e in errors]}) + "\n", "stderr": ""}


REQ_A = {
    "config_root": "/verl",
    "config_dir": "/verl/verl/trainer/config",
    "config_name": "ppo_trainer",
    "overrides": ["data.max_prompt_length=512"],
}
REQ_B = dict(REQ_A, overrides=["data.max_prompt_length=1024"])


def test_composers_first_host_per_distinct_request():
    creqs = {"h1": REQ_A, "h2": dict(REQ_A), "h3": REQ_B, "h4": None, "h5": REQ_B}
    assert group.composers(creqs) == {"h1", "h3"}
    assert group.composers({"h1": REQ_A}) == {"h1"}
    assert group.composers({"h1": None, "h2": None}) == set()
    # key order inside a request does not split a group
    assert group.composers({"h1": REQ_A, "h2": dict(reversed(list(REQ_A.items())))}) == {"h1"}


def test_definite_answers_only():
    assert group.definite(_answer())
    assert group.definite(_answer(ok=False, errors=[["Could not override 'x'."]]))
    assert not group.definite(None)
    assert not group.definite({"rc": 124, "stdout": "", "stderr": "did not answer within 120 s"})
    assert not group.definite({"rc": 0, "stdout": "Traceback ...\n", "stderr": ""})
    assert not group.definite(dict(_answer(), error="ssh timed out"))


def test_assign_reuses_only_an_exact_fingerprint_match():
    fps = {"h1": "fa", "h2": "fa", "h3": "fb", "h4": None, "h5": "fa"}
    reuse, own = group.assign(fps, {"h1": _answer()})
    assert reuse == {"h2": "h1", "h5": "h1"}
    assert own == ["h3", "h4"]
    # a failing compose is a result too: shared with the hosts of its group
    reuse, own = group.assign(fps, {"h1": _answer(ok=False, errors=[["bad"]])})
    assert reuse == {"h2": "h1", "h5": "h1"} and own == ["h3", "h4"]


def test_assign_never_shares_an_indefinite_or_fingerprintless_compose():
    fps = {"h1": "fa", "h2": "fa", "h3": "fa"}
    reuse, own = group.assign(fps, {"h1": {"rc": 124, "stdout": "", "stderr": "timeout"}})
    assert reuse == {} and own == ["h2", "h3"]
    reuse, own = group.assign({"h1": None, "h2": None}, {"h1": _answer()})
    assert reuse == {} and own == ["h2"]
    # two composers (two requests): each host goes to the composer of ITS fingerprint
    reuse, own = group.assign({"h1": "fa", "h2": "fb", "h3": "fb", "h4": "fa"}, {"h1": _answer(), "h2": _answer()})
    assert reuse == {"h3": "h2", "h4": "h1"} and own == []
    # a host whose composer is down (no fingerprint reported by it) composes on its own
    reuse, own = group.assign({"h2": "fa"}, {})
    assert reuse == {} and own == ["h2"]


def test_overrides_check_names_the_composer():
    c = _overrides_check(dict(_answer(), **{"from": "h1"}))
    assert c.status == "ok" and "composed on h1 (same verl config and hydra)" in c.message
    bad = _answer(ok=False, errors=[["Could not override 'actor_rollout_ref.actor.not_a_key'."]])
    c = _overrides_check(dict(bad, **{"from": "h1"}))
    assert c.status == "fail" and "not_a_key" in c.message and "composed on h1" in c.message and c.fix
    assert "composed on" not in _overrides_check(_answer()).message
    c = _overrides_check({"rc": -1, "stdout": "", "stderr": "", "error": "unreachable: timed out"})
    assert c.status == "fail" and "timed out" in c.message and c.fix and "\n" not in str(c)


# ------------------------------------------------------------------ the fingerprint (agent/compose.py)
def _verl_tree(tmp_path) -> Path:
    """A copy of the pinned verl 0.9.1 config tree (~/.cache/dapo-ops, sandbox/fetch_verl_config.py) as
    ``<root>/verl/...``; a test that edits it edits its own copy."""
    src = Path(os.path.expanduser("~/.cache/dapo-ops/verl-0.9.1/verl"))
    if not (src / "trainer" / "config" / "ppo_trainer.yaml").is_file():
        pytest.skip("no pinned verl config cache (python sandbox/fetch_verl_config.py)")
    root = tmp_path / "root"
    shutil.copytree(src, root / "verl", ignore=lambda d, fs: [f for f in fs if f.endswith(".py") or f == "__pycache__"])
    return root


def _req(root: Path, cdir="verl/trainer/config", overrides=("data.max_prompt_length=512",)):
    return {
        "config_root": str(root),
        "config_dir": str(root / cdir),
        "config_name": "ppo_trainer",
        "overrides": list(overrides),
    }


def test_fingerprint_is_content_not_mtime(tmp_path):
    root = _verl_tree(tmp_path)
    fp = compose.fingerprint(_req(root))
    assert fp and fp == compose.fingerprint(_req(root))
    y = root / "verl/trainer/config/rollout/rollout.yaml"
    os.utime(y, (1, 1))
    assert compose.fingerprint(_req(root)) == fp  # touched only
    y.write_text(y.read_text().replace("enforce_eager:", "enforce_eager_x:"))
    assert compose.fingerprint(_req(root)) != fp  # one key renamed in one group file
    assert compose.fingerprint(_req(root, overrides=["data.max_prompt_length=1024"])) != compose.fingerprint(_req(root))


def test_fingerprint_follows_the_search_path(tmp_path):
    root = _verl_tree(tmp_path)
    cdir = "verl/experimental/one_step_off_policy/config"
    assert "file://verl/trainer/config" in (root / cdir / "one_step_off_ppo_trainer.yaml").read_text()
    fp = compose.fingerprint(_req(root, cdir))
    y = root / "verl/trainer/config/actor/actor.yaml"  # outside config_dir, loaded through hydra.searchpath
    y.write_text(y.read_text() + "\n# edited\n")
    assert compose.fingerprint(_req(root, cdir)) != fp
    other = tmp_path / "extra"
    other.mkdir()
    (other / "x.yaml").write_text("a: 1\n")
    sp = [f"hydra.searchpath=[file://{other}]"]
    fp2 = compose.fingerprint(_req(root, overrides=sp))
    (other / "x.yaml").write_text("a: 2\n")
    assert compose.fingerprint(_req(root, overrides=sp)) != fp2
    assert compose.fingerprint(_req(root, overrides=["hydra.searchpath=[pkg://some.pkg]"])) is None


def test_fingerprint_takes_env_only_when_an_interpolation_reads_it(tmp_path):
    root = _verl_tree(tmp_path)
    plain = _req(root)
    assert compose.fingerprint(plain, env={"A": "1"}) == compose.fingerprint(plain, env={"A": "2"})
    envd = _req(root, overrides=["trainer.project_name=${oc.env:PROJ}"])
    assert compose.fingerprint(envd, env={"PROJ": "a"}) != compose.fingerprint(envd, env={"PROJ": "b"})


def test_fingerprint_reads_hydra_and_omegaconf_versions_as_text(tmp_path, monkeypatch):
    import hydra
    import omegaconf

    assert compose.module_version("hydra") == hydra.__version__
    assert compose.module_version("omegaconf") == omegaconf.__version__
    assert compose.module_version("no_such_module_dapo") is None
    root = _verl_tree(tmp_path)
    fp = compose.fingerprint(_req(root))
    fake = tmp_path / "site" / "omegaconf"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("from .version import __version__\n")
    (fake / "version.py").write_text('__version__ = "2.0.0"\n')
    monkeypatch.setattr(sys, "path", [str(tmp_path / "site")] + sys.path)
    monkeypatch.delitem(sys.modules, "omegaconf")
    import importlib

    importlib.invalidate_caches()
    assert compose.module_version("omegaconf") == "2.0.0"
    assert compose.fingerprint(_req(root)) != fp
