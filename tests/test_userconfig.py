"""User config file: path resolution, 0600 atomic writes, TOML round trip."""

from __future__ import annotations

import os
import re
import stat
import tomllib
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from dapo_ops.control import userconfig
from dapo_ops.control.userconfig import UserConfigError


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


def test_a_config_file_the_user_named_must_be_there_readable_and_toml(tmp_path):
    """``DAPO_OPS_CONFIG=/no/such/file`` was read as an empty config in silence (every setting, key and webhook the
    user meant dropped unsaid): a named file that is not there is one line naming the path and the fix, as one that
    cannot be read or is not TOML. The default path may be missing (no config yet)."""
    missing = tmp_path / "no" / "such.toml"
    with pytest.raises(UserConfigError) as e:
        userconfig.RunConfig({"DAPO_OPS_CONFIG": str(missing)}).file()
    line = str(e.value)
    assert "\n" not in line and line.startswith(f"DAPO_OPS_CONFIG={missing}: no such file")
    assert "unset DAPO_OPS_CONFIG" in line
    bad = tmp_path / "bad.toml"
    bad.write_text("[run\n")
    with pytest.raises(UserConfigError, match=rf"^{re.escape(str(bad))}:1: invalid TOML"):
        userconfig.RunConfig({"DAPO_OPS_CONFIG": str(bad)}).file()
    with pytest.raises(UserConfigError, match=rf"^{re.escape(str(tmp_path))}: cannot read"):
        userconfig.RunConfig({"DAPO_OPS_CONFIG": str(tmp_path)}).file()  # a directory
    assert userconfig.RunConfig({"XDG_CONFIG_HOME": str(tmp_path / "xdg")}).file()["run"] == {}


def test_a_named_config_file_that_is_not_there_stops_the_task_before_anything(tmp_path):
    """The task the report named: `DAPO_OPS_CONFIG=/no/such/file inv launch ...` planned (and would have launched)
    without the user's config; now exit 2, one line on stderr, nothing on stdout (no plan, nothing contacted)."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith(("DAPO_OPS_", "SWANLAB_"))}
    env.update(DAPO_OPS_CONFIG=str(tmp_path / "no-such.toml"), SWANLAB_MODE="disabled")
    repo = Path(__file__).resolve().parents[1]
    r = subprocess.run(
        [sys.executable, "-m", "invoke", "-r", str(repo), "launch", "--dry-run", "--steps", "5"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )
    assert r.returncode == 2, r.stdout[-500:] + r.stderr[-500:]
    assert r.stdout == "" and r.stderr.strip().count("\n") == 0, r.stderr
    assert f"DAPO_OPS_CONFIG={tmp_path / 'no-such.toml'}: no such file" in r.stderr


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


def test_refuses_to_write_a_config_file_whose_own_location_is_in_a_git_work_tree(tmp_path, monkeypatch):
    """The config file's own location decides (the nearest ``.git`` at or above it), not the working directory:
    inside this project's tree, or inside any other work tree while the CWD is outside every one, the save is
    refused."""
    repo_file = Path(userconfig.__file__).resolve().parents[1] / "conf" / "config.toml"
    with pytest.raises(UserConfigError, match="git work tree"):
        userconfig.save_section("swanlab", {"api_key": "x" * 21}, repo_file)
    assert not repo_file.exists()
    (tmp_path / "proj" / ".git").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")  # the CWD is in no work tree: the file's location decides
    p = tmp_path / "proj" / "sub" / "config.toml"
    with pytest.raises(UserConfigError, match="git work tree"):
        userconfig.save_section("swanlab", {"api_key": "x" * 21}, p)
    assert not p.exists()


def test_a_file_holding_a_secret_inside_a_git_work_tree_is_refused_on_read(tmp_path, monkeypatch):
    """design.md: the config file is "refused inside a git work tree"; a hand-written 0600 file at
    ``<clone>/.cfg.toml`` holding ``[swanlab] api_key`` was used (only a save refused the path)."""
    (tmp_path / "clone" / ".git").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "clone")
    p = tmp_path / "clone" / ".cfg.toml"
    p.write_text('[swanlab]\napi_key = "' + "k" * 21 + '"\n')
    os.chmod(p, 0o600)
    with pytest.raises(UserConfigError) as ei:
        userconfig.load(p)
    msg = str(ei.value)
    assert "\n" not in msg and str(p) in msg and "[swanlab] api_key" in msg and "git work tree" in msg
    assert "DAPO_OPS_CONFIG" in msg and "k" * 21 not in msg
    p.write_text('[swanlab]\nmode = "local"\n')  # no secret: a project-local file of plain defaults is fine
    assert userconfig.load(p)["swanlab"] == {"mode": "local"}


def test_a_home_kept_in_git_does_not_block_the_default_path(tmp_path, monkeypatch):
    (tmp_path / "home" / ".git").mkdir(parents=True)  # dotfiles repo
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.chdir(tmp_path)
    p = tmp_path / "home" / ".config" / "dapo-ops" / "config.toml"
    assert userconfig.save_section("swanlab", {"mode": "local"}, p) == []
    assert userconfig.load(p)["swanlab"] == {"mode": "local"}


def test_the_config_files_own_place_decides_not_the_current_directory(tmp_path, monkeypatch):
    """A user whose home is kept in git (dotfiles) ran ``inv`` from inside it: the current directory's work tree
    (the home) held the default ~/.config/dapo-ops/config.toml, so a 0600 file holding the SwanLab key was refused
    on read. And a file inside some other clone was used as long as ``inv`` ran from outside that clone. The
    tree that holds the file decides now; the home / config home kept in git is dotfiles, not a project."""
    home = tmp_path / "home"
    (home / ".git").mkdir(parents=True)
    (home / "notes").mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.delenv(userconfig.ENV_VAR, raising=False)
    monkeypatch.chdir(home / "notes")
    default = userconfig.config_path()
    assert default == home / ".config" / "dapo-ops" / "config.toml"
    userconfig.save_section("swanlab", {"mode": "cloud", "api_key": "k" * 21}, default)
    assert userconfig.load(default)["swanlab"]["api_key"] == "k" * 21
    # a config home of its own kept in git ($XDG_CONFIG_HOME, e.g. ~/.config under version control): dotfiles too
    (home / "xdg" / ".git").mkdir(parents=True)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "xdg"))
    assert userconfig.save_section("swanlab", {"api_key": "k" * 21}, userconfig.config_path()) == []
    # a project's clone under the home, the command run from elsewhere: the file's own tree refuses it
    (home / "proj" / ".git").mkdir(parents=True)
    inside = home / "proj" / "cfg" / "config.toml"
    inside.parent.mkdir()
    inside.write_text('[swanlab]\napi_key = "' + "k" * 21 + '"\n')
    os.chmod(inside, 0o600)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserConfigError, match="inside the git work tree " + str(home / "proj")):
        userconfig.load(inside)
    with pytest.raises(UserConfigError, match="git work tree"):
        userconfig.save_section("swanlab", {"api_key": "k" * 21}, home / "proj" / "new.toml")


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
    notify = {
        "on_escalation": True,
        "on_success": False,
        "timeout_s": 2.5,
        "webhooks": [{"kind": "feishu", "url": 'https://open.feishu.cn/hook/x?a=1&b="2"'}],
    }
    userconfig.save_section("notify", {**notify, "unused": None}, p)
    assert userconfig.load(p)["notify"] == notify


def test_a_save_keeps_comments_order_and_other_tables_byte_for_byte(tmp_path):
    p = tmp_path / "config.toml"
    before_proxy = '# my proxies (office)\n[proxy]\nhttp_proxy = "http://p:3128"   # the office one\n\n'
    p.write_text(
        "# written by hand\n"
        + before_proxy
        + '[swanlab]\n# self-hosted\nhost = "http://192.0.2.10:8000"  # lab server\nmode = "cloud"\n'
        'log_dir = "/tmp/old"\n'
    )
    os.chmod(p, 0o600)
    assert (
        userconfig.save_section("swanlab", {"host": "http://192.0.2.10:8000", "mode": "cloud", "api_key": "k" * 21}, p)
        == []
    )
    text = p.read_text()
    assert text.startswith(
        "# written by hand\n" + before_proxy + "[swanlab]\n# self-hosted\n"
        'host = "http://192.0.2.10:8000"  # lab server\nmode = "cloud"\n'
    ), text
    assert "log_dir" not in text and text.count("api_key") == 1
    assert userconfig.load(p)["swanlab"] == {"host": "http://192.0.2.10:8000", "mode": "cloud", "api_key": "k" * 21}
    assert _mode(p) == 0o600


BAD_CONFIG = [
    (
        '[swanlab]\nmode = "local"\napikey = "x"\n',
        r":3: \[swanlab\]: field 'apikey': unknown field \(valid fields: host,",
    ),
    ('[notify]\non_success = "yes"\n', r":2: \[notify\]: field 'on_success': expected true or false, got string"),
    ("[notify]\ntimeout_s = 0\n", r":2: \[notify\]: field 'timeout_s': must be > 0 seconds, got 0"),
    ('[notify]\n[[notify.webhooks]]\nkind = "feishu"\nuri = "https://x"\n', r"\[notify\]: field 'webhooks': "),
    ("[run]\nstep = 5\n", r":2: \[run\]: field 'step': unknown field \(valid fields: steps, framework,"),
    ("[run]\nsteps = true\n", r":2: \[run\]: field 'steps': expected an integer, got boolean True"),
    ('\n[swanlb]\nmode = "local"\n', r":2: unknown table \[swanlb\]: use \[run\], \[swanlab\], \[notify\], \[proxy\]"),
    (  # a new user's trial: a top-level key was "unknown table [SWANLAB_API_KEY]"
        'SWANLAB_API_KEY = "' + "k" * 21 + '"\n',
        r":1: unknown key 'SWANLAB_API_KEY' at the top level: it belongs in a table: write `api_key = \.\.\.` "
        r"under \[swanlab\]$",
    ),
    (
        "\nfoo = 1\n",
        r":2: unknown key 'foo' at the top level: every key goes in one of the tables \[run\], \[swanlab\]",
    ),
    (
        '[proxy]\nhttps_proxy = "gopher://p:70"\n',
        r":2: \[proxy\]: field 'https_proxy': 'gopher://p:70' is not a proxy URL",
    ),
    ("[proxy]\nhttp_proxy = 3128\n", r":2: \[proxy\]: field 'http_proxy': expected a string, got integer 3128"),
]


@pytest.mark.parametrize("text,pattern", BAD_CONFIG)
def test_bad_config_is_one_line_naming_file_line_table_and_key_and_a_save_leaves_it_alone(tmp_path, text, pattern):
    p = tmp_path / "config.toml"
    p.write_text(text)
    with pytest.raises(UserConfigError) as ei:
        userconfig.load(p)
    msg = str(ei.value)
    assert "\n" not in msg and msg.startswith(str(p)) and re.search(pattern, msg), msg
    with pytest.raises(UserConfigError):
        userconfig.save_section("proxy", {"http_proxy": "http://p:1"}, p)
    assert p.read_text() == text


def test_a_value_the_model_refuses_is_not_written(tmp_path):
    p = tmp_path / "config.toml"
    userconfig.save_section("swanlab", {"mode": "local"}, p)
    before = p.read_text()
    with pytest.raises(UserConfigError, match=r"\[swanlab\]: field 'api_key': expected a string, got integer"):
        userconfig.save_section("swanlab", {"mode": "local", "api_key": 12}, p)
    with pytest.raises(UserConfigError, match=r"\[swanlab\]: field 'nope': unknown field"):
        userconfig.save_section("swanlab", {"nope": "x"}, p)
    assert p.read_text() == before


_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)


@settings(max_examples=100, deadline=None)
@given(
    st.fixed_dictionaries({}, optional={k: _text for k in ("host", "api_key", "log_dir", "project")}),
    st.lists(
        st.fixed_dictionaries(
            {
                "kind": st.sampled_from(["feishu", "slack"]),
                # a URL is checked when the file is read (agent/notify.py url_problem): printable, no blank
                "url": st.from_regex(r"https://[a-z]{1,10}\.example/[!-~]{0,20}", fullmatch=True),
            }
        ),
        max_size=3,
    ),
    st.booleans(),
)
def test_saved_strings_round_trip_through_tomllib(tmp_path_factory, swanlab, webhooks, on_success):
    p = tmp_path_factory.mktemp("cfg") / "config.toml"
    userconfig.save_section("swanlab", swanlab, p)
    userconfig.save_section("notify", {"on_success": on_success, "webhooks": webhooks}, p)
    data = userconfig.load(p)
    assert data["swanlab"] == swanlab
    assert data["notify"] == {"on_success": on_success, "webhooks": webhooks}
    assert tomllib.loads(p.read_text()) == {
        "swanlab": swanlab,
        "notify": {"on_success": on_success, "webhooks": webhooks},
    }


def test_preflight_warns_when_the_api_key_sits_in_a_file_others_can_read(tmp_path, monkeypatch):
    """The config file holds the SwanLab key: mode 0644 is a warn with the chmod (launch prints the same line:
    userconfig.mode_warning); 0600 is ok. The key never appears in the check."""
    from dapo_ops.control.preflight.network import swanlab_key_check

    cfg = tmp_path / "cfg.toml"
    cfg.write_text('[swanlab]\napi_key = "sk-abcdefgh12345678"\nmode = "cloud"\n')
    monkeypatch.setenv("DAPO_OPS_CONFIG", str(cfg))
    for k in ("SWANLAB_API_KEY", "SWANLAB_MODE", "SWANLAB_HOST", "SWANLAB_API_HOST"):
        monkeypatch.delenv(k, raising=False)
    file_cfg = {"api_key": "sk-abcdefgh12345678", "mode": "cloud"}
    cfg.chmod(0o644)
    c = swanlab_key_check(None, env={}, file_cfg=file_cfg, isatty=False)
    assert (c.status, c.fix) == ("warn", f"chmod 600 {cfg}"), c
    assert "mode 0644" in c.message and "sk-" not in c.message + c.fix
    cfg.chmod(0o600)
    assert swanlab_key_check(None, env={}, file_cfg=file_cfg, isatty=False).status == "ok"
