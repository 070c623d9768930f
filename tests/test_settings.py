"""Settings table: precedence flag > env > file > default, typing, one-line errors."""

import pytest

from dapo_ops.control import settings as S
from dapo_ops.control.settings import SettingsError, resolve


def test_runbook_defaults():
    st = resolve({}, {}, {})
    assert st["steps"] == 100 and st["framework"] == "megatron" and st["model"] == "Qwen3-8B"
    assert st["train_file"] == "dapo-math-17k.parquet" and st["val_file"] == "aime-2024.parquet"
    assert st["trainer_gpus"] == 4 and st["rollout_gpus"] == 4 and st["max_response_length"] == 8192
    assert st["features"] == "" and st["offload"] is False and st["max_oom_retries"] == 2
    assert set(st.sources.values()) == {"default"}


def test_every_runbook_variable_is_in_the_table():
    envs = {e for p in S.PARAMS for e in p.env}
    for var in ("TRAIN_STEPS", "FRAMEWORK", "MODEL_PATH", "TRAIN_FILE", "VAL_FILE", "TRAINER_GPUS", "ROLLOUT_GPUS",
                "MAX_RESPONSE_LENGTH", "USER_FEATURES", "ENABLE_OFFLOAD", "MAX_OOM_RETRIES", "CONTAINER",
                "SWANLAB_MODE", "SWANLAB_HOST", "http_proxy", "https_proxy"):
        assert var in envs, var
    assert not any("KEY" in e for e in envs), "secrets are not settings"


@pytest.mark.parametrize("p", S.PARAMS, ids=lambda p: p.name)
def test_precedence_flag_env_file_default_for_every_setting(p):
    samples = {"int": (7, "8", 9), "float": (0.7, "0.8", 0.9), "bool": (True, "False", True),
               "str": ("from-flag", "from-env", "from-file"), "features": ("offload", "prefix_cache", "-flash_attn")}
    fl, ev, fv = samples[p.type]
    if p.choices:
        fl, ev, fv = [c for c in p.choices if c][0], [c for c in p.choices if c][-1], [c for c in p.choices if c][0]
    if p.minimum is not None and p.type == "int":
        fl, ev, fv = max(fl, int(p.minimum)), str(max(int(ev), int(p.minimum) + 1)), max(fv, int(p.minimum) + 2)
    tbl, _, key = (p.key or "").rpartition(".")
    file_cfg = {tbl or "run": {key: fv}} if p.key else {}
    env = {p.env[0]: ev} if p.env else {}
    st = resolve({p.name: fl}, env, file_cfg)
    assert (st[p.name], st.source(p.name)) == (fl, "flag")
    if p.env:
        st = resolve({}, env, file_cfg)
        assert st.source(p.name) == "env"
        assert st[p.name] == S.convert(p, ev, "x")
    if p.key:
        st = resolve({}, {}, file_cfg)
        assert (st[p.name], st.source(p.name)) == (fv, "file")
    assert resolve({}, {}, {}).source(p.name) == "default"


def test_empty_and_none_count_as_not_given():
    st = resolve({"steps": None, "framework": ""}, {"TRAIN_STEPS": "", "FRAMEWORK": "fsdp"}, {"run": {"steps": 5}})
    assert (st["steps"], st.source("steps")) == (5, "file")
    assert (st["framework"], st.source("framework")) == ("fsdp", "env")


def test_bare_run_table_is_accepted():
    st = resolve({}, {}, {"steps": 12, "framework": "fsdp"})
    assert st["steps"] == 12 and st.source("framework") == "file"


@pytest.mark.parametrize("flags,env,file_cfg,needle", [
    ({}, {"TRAIN_STEPS": "abc"}, {}, "TRAIN_STEPS='abc' is not an integer"),
    ({"steps": "x"}, {}, {}, "--steps='x' is not an integer"),
    ({}, {}, {"run": {"steps": "ten"}}, "[run] steps in the config file='ten' is not an integer"),
    ({}, {"ENABLE_OFFLOAD": "maybe"}, {}, "ENABLE_OFFLOAD='maybe' is not a boolean"),
    ({}, {"FRAMEWORK": "jax"}, {}, "FRAMEWORK='jax' is not one of"),
    ({}, {"USER_FEATURES": "warp"}, {}, "USER_FEATURES: unknown feature 'warp'"),
    ({}, {"TRAIN_STEPS": "0"}, {}, "below the minimum"),
    ({}, {"GPU_MEMORY_UTILIZATION": "1.5"}, {}, "fraction"),
    ({"nope": 1}, {}, {}, "unknown setting 'nope'"),
])
def test_bad_values_give_one_line_naming_the_variable(flags, env, file_cfg, needle):
    with pytest.raises(SettingsError) as ei:
        resolve(flags, env, file_cfg)
    assert needle in str(ei.value)
    assert "\n" not in str(ei.value)


def test_enable_offload_true_spellings():
    for v in ("True", "true", "1", "yes"):
        assert resolve({}, {"ENABLE_OFFLOAD": v}, {})["offload"] is True
    assert resolve({}, {"ENABLE_OFFLOAD": "False"}, {})["offload"] is False


def test_proxy_env_both_cases_and_file_table():
    assert resolve({}, {"HTTPS_PROXY": "http://p:1"}, {})["https_proxy"] == "http://p:1"
    st = resolve({}, {}, {"proxy": {"http_proxy": "http://f:2"}, "run": {}})
    assert (st["http_proxy"], st.source("http_proxy")) == ("http://f:2", "file")


def test_proxy_settings_are_validated_naming_flag_env_var_or_config_key():
    with pytest.raises(SettingsError, match=r"^env var http_proxy: 'not a url' is not a proxy URL"):
        resolve({}, {"http_proxy": "not a url"}, {})
    with pytest.raises(SettingsError, match=r"^env var HTTPS_PROXY: 'ftp://p:21' is not a proxy URL \(scheme"):
        resolve({}, {"HTTPS_PROXY": "ftp://p:21"}, {})
    with pytest.raises(SettingsError, match=r"^--https-proxy: 'http://p:99999' is not a proxy URL \(bad port"):
        resolve({"https_proxy": "http://p:99999"}, {}, {})
    with pytest.raises(SettingsError, match=r"^\[proxy\] http_proxy in the config file: 'p q'"):
        resolve({}, {}, {"proxy": {"http_proxy": "p q"}})
    assert resolve({"http_proxy": "none"}, {}, {})["http_proxy"] == "none"  # 'none' overrides a configured proxy


def test_proxy_credentials_are_refused_in_the_flag_but_allowed_in_env_and_file():
    with pytest.raises(SettingsError) as ei:
        resolve({"http_proxy": "http://u:pw-in-argv@198.51.174.1:3128"}, {}, {})
    msg = str(ei.value)
    assert msg.startswith("--http-proxy carries credentials") and "pw-in-argv" not in msg, msg
    assert "env var http_proxy or hosts.toml [proxy] http_proxy" in msg, msg
    url = "http://u:pw@198.51.174.1:3128"
    assert resolve({}, {"http_proxy": url}, {})["http_proxy"] == url
    assert resolve({}, {}, {"proxy": {"https_proxy": url}})["https_proxy"] == url
