"""SwanLab settings: precedence env > file > prompt, no-TTY error, host mapping, redaction."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from dapo_ops.control import swanlab_settings as swanlab_cfg
from dapo_ops.control import swanlab_values
from dapo_ops.control.swanlab_settings import SwanlabSettings, resolve
from dapo_ops.control.swanlab_values import SwanlabConfigError

KEY = "sk-dapo-SECRET-123456789"


def no_prompt(*a, **kw):
    raise AssertionError(f"prompt must not be called: {a}")


class Scripted:
    """A prompt callable answering from a list, recording (question, secret)."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.asked = []

    def __call__(self, question, *, secret=False):
        self.asked.append((question, secret))
        return self.answers.pop(0)


FIELDS = {  # field -> (env name, file key, env value, file value, expected env result, expected file result)
    "host": (
        "SWANLAB_HOST",
        "host",
        "http://10.0.0.1:8000",
        "http://10.0.0.2:8000",
        "http://10.0.0.1:8000",
        "http://10.0.0.2:8000",
    ),
    "api_key": ("SWANLAB_API_KEY", "api_key", "envkey", "filekey", "envkey", "filekey"),
    "mode": ("SWANLAB_MODE", "mode", "offline", "local", "offline", "local"),
    "log_dir": ("SWANLAB_LOG_DIR", "log_dir", "/env/swanlog", "/file/swanlog", "/env/swanlog", "/file/swanlog"),
    "project": ("SWANLAB_PROJECT", "project", "envproj", "fileproj", "envproj", "fileproj"),
    "workspace": ("SWANLAB_WORKSPACE", "workspace", "envws", "filews", "envws", "filews"),
    "web_host": (
        "SWANLAB_WEB_HOST",
        "web_host",
        "https://web.env",
        "https://web.file",
        "https://web.env",
        "https://web.file",
    ),
}


@pytest.mark.parametrize("name", sorted(FIELDS))
def test_env_beats_file_and_file_beats_nothing(name):
    env_name, file_key, env_v, file_v, exp_env, exp_file = FIELDS[name]
    base_env = {"SWANLAB_API_KEY": "k" * 21} if name != "api_key" else {}
    base_file = {}
    s = resolve({**base_env, env_name: env_v}, {**base_file, file_key: file_v}, stdin_isatty=False, prompt=no_prompt)
    assert getattr(s, name) == exp_env and s.sources[name] == f"env:{env_name}"
    s = resolve(base_env, {file_key: file_v}, stdin_isatty=False, prompt=no_prompt)
    assert getattr(s, name) == exp_file and s.sources[name] == "file"


def test_flag_beats_env_for_mode():
    s = resolve({"SWANLAB_MODE": "cloud"}, {"mode": "cloud"}, mode_flag="local", stdin_isatty=False, prompt=no_prompt)
    assert s.mode == "local" and s.sources["mode"] == "flag"


def test_file_key_beats_prompt_on_a_tty():
    s = resolve({}, {"api_key": "filekey1"}, stdin_isatty=True, prompt=no_prompt)
    assert s.api_key == "filekey1" and s.logger_enabled


def test_prompt_is_last_resort_on_a_tty_and_reads_the_key_as_secret(tmp_path):
    saved = []
    p = Scripted("http://192.0.2.10:8000", KEY, "y")
    notes = []
    s = resolve(
        {},
        {},
        stdin_isatty=True,
        prompt=p,
        save=lambda n, v: saved.append((n, v)) or [],
        config_path=str(tmp_path / "c.toml"),
        notes=notes,
    )
    assert s.api_key == KEY and s.host == "http://192.0.2.10:8000"
    assert s.sources["api_key"] == "prompt" and s.sources["host"] == "prompt"
    assert [secret for _, secret in p.asked] == [False, True, False]
    assert "mode 0600" in p.asked[2][0]
    assert saved == [("swanlab", {"host": "http://192.0.2.10:8000", "api_key": KEY})]
    assert any("saved" in n for n in notes)


def test_prompt_declined_save_writes_nothing():
    saved = []
    s = resolve(
        {"SWANLAB_HOST": "http://h:8000"},
        {},
        stdin_isatty=True,
        prompt=Scripted(KEY, ""),
        save=lambda n, v: saved.append(v),
    )
    assert s.api_key == KEY and saved == []


def test_no_tty_no_key_cloud_is_one_line_naming_both_ways_and_the_flag(tmp_path):
    cfg = str(tmp_path / "config.toml")
    with pytest.raises(SwanlabConfigError) as ei:
        resolve({"SWANLAB_HOST": "http://h:8000"}, {}, stdin_isatty=False, prompt=no_prompt, config_path=cfg)
    msg = str(ei.value)
    assert "\n" not in msg
    for needle in ("SWANLAB_API_KEY", "[swanlab]", "api_key", cfg, "--swanlab-mode local|offline|disabled"):
        assert needle in msg


def test_empty_key_at_the_prompt_is_the_same_error():
    with pytest.raises(SwanlabConfigError, match="SWANLAB_API_KEY"):
        resolve({}, {}, stdin_isatty=True, prompt=Scripted("", ""))


@pytest.mark.parametrize("mode", ["local", "offline", "disabled"])
def test_non_cloud_modes_need_no_key_and_never_ship_one(mode):
    s = resolve({"SWANLAB_MODE": mode, "SWANLAB_API_KEY": KEY}, {}, stdin_isatty=False, prompt=no_prompt)
    assert s.secret_env() == {}
    assert s.logger_enabled is (mode != "disabled")
    assert s.loggers() == (["console", "swanlab"] if mode != "disabled" else ["console"])
    assert s.public_env()["SWANLAB_MODE"] == mode


def test_online_is_accepted_as_cloud_and_bad_modes_are_rejected():
    assert resolve({"SWANLAB_MODE": "Online", "SWANLAB_API_KEY": "k" * 21}, {}, stdin_isatty=False).mode == "cloud"
    with pytest.raises(SwanlabConfigError, match="cloud, local, offline, disabled"):
        resolve({"SWANLAB_MODE": "lokal"}, {}, stdin_isatty=False)


def test_host_maps_to_api_and_web_host_for_both_swanlab_lines():
    s = resolve({"SWANLAB_HOST": "http://192.0.2.10:8000/", "SWANLAB_API_KEY": KEY}, {}, stdin_isatty=False)
    env = s.public_env(run_dir="/verl/dapo_runs/r1", run_id="r1")
    assert env["SWANLAB_API_HOST"] == "http://192.0.2.10:8000/api"
    assert env["SWANLAB_WEB_HOST"] == "http://192.0.2.10:8000"
    assert env["SWANLAB_LOG_DIR"] == "/verl/dapo_runs/r1/swanlog"
    assert env["SWANLAB_RESUME"] == "allow" and env["SWANLAB_RUN_ID"] == swanlab_values.swanlab_run_id("r1")
    assert "SWANLAB_HOST" not in env and KEY not in json.dumps(env)
    assert s.secret_env() == {"SWANLAB_API_KEY": KEY}


def test_0_7_style_api_host_in_env_is_accepted():
    s = resolve({"SWANLAB_API_HOST": "http://192.0.2.10:8000/api", "SWANLAB_API_KEY": KEY}, {}, stdin_isatty=False)
    assert s.host == "http://192.0.2.10:8000"


@pytest.mark.parametrize(
    "bad, match", [("192.0.2.10:8000", "no scheme"), ("http://h:8000/swan", "path"), ("ftp://h", "must look like")]
)
def test_bad_hosts_are_one_line_errors(bad, match):
    with pytest.raises(SwanlabConfigError, match=match) as ei:
        resolve({"SWANLAB_HOST": bad, "SWANLAB_API_KEY": KEY}, {}, stdin_isatty=False)
    assert "\n" not in str(ei.value)


def test_quotes_and_cr_from_ssh_copies_are_stripped_but_inner_spaces_rejected():
    s = resolve({"SWANLAB_API_KEY": f"'{KEY}'\r\n"}, {}, stdin_isatty=False)
    assert s.api_key == KEY
    with pytest.raises(SwanlabConfigError, match="whitespace"):
        resolve({"SWANLAB_API_KEY": "abc def"}, {}, stdin_isatty=False)


def test_repr_and_str_redact_the_key():
    s = SwanlabSettings(mode="cloud", api_key=KEY)
    assert KEY not in repr(s) and KEY not in str(s) and KEY not in f"{s}" and "***" in repr(s)


def test_redact_replaces_plain_and_url_quoted_forms():
    secret = "a/b+c=d e"
    text = f"key={secret} url=https://x/?k=a%2Fb%2Bc%3Dd%20e short=ab"
    out = swanlab_cfg.redact(text, [secret, None, "", "ab"])
    assert secret not in out and "a%2Fb" not in out and out.count("***") == 2 and "short=ab" in out


def test_swanlab_run_id_is_stable_21_lowercase_alnum():
    a, b = swanlab_values.swanlab_run_id("20261129-151200-a1b2"), swanlab_values.swanlab_run_id("20261129-151200-a1b3")
    assert a == swanlab_values.swanlab_run_id("20261129-151200-a1b2") and a != b
    assert re.fullmatch(r"[a-z0-9]{21}", a)


def test_file_section_round_trips_through_resolve():
    s = resolve(
        {"SWANLAB_HOST": "http://h:1", "SWANLAB_API_KEY": KEY, "SWANLAB_WORKSPACE": "ws"}, {}, stdin_isatty=False
    )
    again = resolve({}, s.file_section(), stdin_isatty=False)
    assert again == s


def test_installed_swanlab_reads_our_public_env(tmp_path):
    """swanlab 0.10.3 (the venv's) resolves our API/web host mapping and the run id."""
    s = resolve({"SWANLAB_HOST": "http://192.0.2.10:8000", "SWANLAB_API_KEY": KEY}, {}, stdin_isatty=False)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("SWANLAB_")},
        **s.public_env(run_dir=str(tmp_path), run_id="r1"),
    }
    code = (
        "from swanlab.sdk.internal.settings import Settings; s = Settings(); "
        "print(s.mode, s.api_host, s.web_host, s.run.id, s.run.resume)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == [
        "online",
        "http://192.0.2.10:8000",
        "http://192.0.2.10:8000",
        swanlab_values.swanlab_run_id("r1"),
        "allow",
    ]


def test_env_file_text_round_trips_through_the_supervisors_parser():
    from dapo_ops.agent.supervisor.config import parse_env_file

    secrets = {
        "SWANLAB_API_KEY": KEY,
        "DAPO_NOTIFY_URL_0": "https://open.feishu.cn/hook/a?b=1&c='x'",
        "QUOTED": "'already quoted'",
        "DQ": '"x"',
        "EQ": "a=b=c",
        "SPACE": " lead",
    }
    parsed = parse_env_file(swanlab_values.env_file_text(secrets))
    assert parsed == secrets
    with pytest.raises(SwanlabConfigError, match="newline"):
        swanlab_values.env_file_text({"K": "a\nb"})
    with pytest.raises(SwanlabConfigError, match="variable name"):
        swanlab_values.env_file_text({"1K": "a"})


def test_resolve_for_launch_reads_the_user_file_and_refuses_a_loose_mode(tmp_path):
    """Issue 44: an API key in a 0644 file only warned, and ``--skip-preflight`` launched anyway; bench/soak.md says
    the tool refuses such a file: it does now (userconfig.load, so every task that reads the file)."""
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'[swanlab]\nhost = "http://192.0.2.10:8000"\napi_key = "{KEY}"\n')
    os.chmod(cfg, 0o644)
    with pytest.raises(SwanlabConfigError, match=r"mode 0644\) and holds \[swanlab\] api_key: run `chmod 600") as e:
        swanlab_cfg.resolve_for_launch(env={"DAPO_OPS_CONFIG": str(cfg)}, stdin_isatty=False, notes=[])
    assert KEY not in str(e.value)
    os.chmod(cfg, 0o600)
    s = swanlab_cfg.resolve_for_launch(env={"DAPO_OPS_CONFIG": str(cfg)}, stdin_isatty=False, notes=[])
    assert s.api_key == KEY and s.sources["api_key"] == "file" and s.host == "http://192.0.2.10:8000"
    cfg.write_text("[swanlab\n")
    with pytest.raises(SwanlabConfigError, match="invalid TOML"):
        swanlab_cfg.resolve_for_launch(env={"DAPO_OPS_CONFIG": str(cfg)}, stdin_isatty=False)


def test_a_swanlab_host_with_credentials_is_refused_without_echoing_them():
    from dapo_ops.control.swanlab_values import SwanlabConfigError, normalize_host

    with pytest.raises(SwanlabConfigError) as e:
        normalize_host("http://bob:Pa55w0rd-x@10.1.1.1:8000", "--swanlab-host")
    msg = str(e.value)
    assert "Pa55w0rd-x" not in msg and "bob" not in msg and "credentials" in msg and "--swanlab-host" in msg
    assert normalize_host("http://10.1.1.1:8000/api/", "SWANLAB_HOST") == "http://10.1.1.1:8000"
