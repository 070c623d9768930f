"""User config file: path resolution, 0600 atomic writes, TOML round trip."""

from __future__ import annotations

import os
import stat
import tomllib
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from dapo_ops import userconfig
from dapo_ops.userconfig import UserConfigError


def _mode(p):
    return stat.S_IMODE(os.stat(p).st_mode)


def test_path_env_override_then_xdg_then_home(tmp_path, monkeypatch):
    assert userconfig.config_path({"DAPO_OPS_CONFIG": str(tmp_path / "c.toml")}) == tmp_path / "c.toml"
    assert userconfig.config_path({"XDG_CONFIG_HOME": str(tmp_path)}) == tmp_path / "dapo-ops" / "config.toml"
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert userconfig.config_path({}) == tmp_path / "home" / ".config" / "dapo-ops" / "config.toml"


def test_missing_file_gives_empty_tables(tmp_path):
    data = userconfig.load(tmp_path / "nope.toml")
    assert {k: data[k] for k in userconfig.SECTIONS} == {"run": {}, "swanlab": {}, "notify": {}, "proxy": {}}


def test_save_section_creates_0600_file_and_0700_dir_even_with_umask_0(tmp_path):
    p = tmp_path / "cfg" / "dapo-ops" / "config.toml"
    old = os.umask(0)
    try:
        notes = userconfig.save_section("swanlab", {"host": "http://192.0.2.10:8000", "api_key": "k" * 21}, p)
    finally:
        restored = os.umask(old)
    assert restored == 0, "save_section must restore the caller's umask"
    assert notes == []
    assert _mode(p) == 0o600
    assert _mode(p.parent) == 0o700
    assert userconfig.load(p)["swanlab"] == {"host": "http://192.0.2.10:8000", "api_key": "k" * 21}
    assert not [f for f in os.listdir(p.parent) if f.endswith(".tmp")]


def test_save_section_keeps_other_tables_and_replaces_its_own(tmp_path):
    p = tmp_path / "config.toml"
    userconfig.save_section("proxy", {"http_proxy": "http://proxy:8080"}, p)
    userconfig.save_section("swanlab", {"mode": "local", "log_dir": "/tmp/x"}, p)
    userconfig.save_section("swanlab", {"mode": "offline"}, p)
    data = userconfig.load(p)
    assert data["proxy"] == {"http_proxy": "http://proxy:8080"}
    assert data["swanlab"] == {"mode": "offline"}


def test_looser_existing_mode_is_fixed_and_reported(tmp_path):
    p = tmp_path / "config.toml"
    p.write_text('[swanlab]\nmode = "local"\n')
    os.chmod(p, 0o644)
    assert "0644" in userconfig.mode_warning(p)
    notes = userconfig.save_section("swanlab", {"mode": "cloud", "api_key": "abc123"}, p)
    assert _mode(p) == 0o600
    assert len(notes) == 1 and "0644" in notes[0] and "0600" in notes[0]
    assert userconfig.mode_warning(p) is None


def test_refuses_to_write_inside_the_projects_or_cwds_git_work_tree(tmp_path, monkeypatch):
    repo_file = Path(userconfig.__file__).resolve().parents[1] / "conf" / "config.toml"
    with pytest.raises(UserConfigError, match="git work tree"):
        userconfig.save_section("swanlab", {"api_key": "x" * 21}, repo_file)
    assert not repo_file.exists()
    (tmp_path / "proj" / ".git").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "proj")
    p = tmp_path / "proj" / "sub" / "config.toml"
    with pytest.raises(UserConfigError, match="git work tree"):
        userconfig.save_section("swanlab", {"api_key": "x" * 21}, p)
    assert not p.exists()


def test_a_home_kept_in_git_does_not_block_the_default_path(tmp_path, monkeypatch):
    (tmp_path / "home" / ".git").mkdir(parents=True)  # dotfiles repo
    monkeypatch.chdir(tmp_path)
    p = tmp_path / "home" / ".config" / "dapo-ops" / "config.toml"
    assert userconfig.save_section("swanlab", {"mode": "local"}, p) == []
    assert userconfig.load(p)["swanlab"] == {"mode": "local"}


def test_unknown_section_and_bad_toml_are_one_line_errors(tmp_path):
    p = tmp_path / "config.toml"
    with pytest.raises(UserConfigError, match="unknown config section"):
        userconfig.save_section("secrets", {}, p)
    p.write_text("[swanlab\napi_key = 1\n")
    with pytest.raises(UserConfigError) as ei:
        userconfig.load(p)
    msg = str(ei.value)
    assert "\n" not in msg and str(p) in msg and "line 1" in msg
    p.write_text('swanlab = "x"\n')
    with pytest.raises(UserConfigError, match=r"\[swanlab\]"):
        userconfig.load(p)


def test_none_values_are_dropped_and_webhook_lists_of_tables_round_trip(tmp_path):
    p = tmp_path / "config.toml"
    notify = {"on_escalation": True, "on_success": False, "timeout_s": 2.5,
              "webhooks": [{"kind": "feishu", "url": "https://open.feishu.cn/hook/x?a=1&b=\"2\""}]}
    userconfig.save_section("notify", {**notify, "unused": None}, p)
    assert userconfig.load(p)["notify"] == notify


_scalars = st.one_of(
    st.booleans(), st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False), st.text(st.characters(blacklist_categories=("Cs",)), max_size=30),
)
_values = st.recursive(_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(min_size=1, max_size=8), inner, max_size=4)),
    max_leaves=10)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.sampled_from(userconfig.SECTIONS),
                       st.dictionaries(st.text(min_size=1, max_size=12), _values, max_size=5)))
def test_dumps_round_trips_through_tomllib(data):
    assert tomllib.loads(userconfig.dumps(data)) == data
