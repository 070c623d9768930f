"""Settings table: precedence flag > env > file > default, typing, one-line errors."""

import pytest

from dapo_ops.control import settings as S
from dapo_ops.control.settings import EMPTY_DEFAULT_REFUSED, EMPTY_RULES, PARAMS, SettingsError, resolve


def test_runbook_defaults():
    st = resolve({}, {}, {})
    assert st["steps"] == 100 and st["framework"] == "megatron" and st["model"] == "Qwen3-8B"
    assert st["train_file"] == "dapo-math-17k.parquet" and st["val_file"] == "aime-2024.parquet"
    assert st["trainer_gpus"] == 4 and st["rollout_gpus"] == 4 and st["max_response_length"] == 8192
    assert st["features"] == "" and st["offload"] is False and st["max_oom_retries"] == 2
    assert set(st.sources.values()) == {"default"}


def test_every_runbook_variable_is_in_the_table():
    envs = {e for p in S.PARAMS for e in p.env}
    for var in (
        "TRAIN_STEPS",
        "FRAMEWORK",
        "MODEL_PATH",
        "TRAIN_FILE",
        "VAL_FILE",
        "TRAINER_GPUS",
        "ROLLOUT_GPUS",
        "MAX_RESPONSE_LENGTH",
        "USER_FEATURES",
        "ENABLE_OFFLOAD",
        "MAX_OOM_RETRIES",
        "CONTAINER",
        "SWANLAB_MODE",
        "SWANLAB_HOST",
        "http_proxy",
        "https_proxy",
    ):
        assert var in envs, var
    assert not any("KEY" in e for e in envs), "secrets are not settings"


# (flag value, env text, the env text's value written out, file value) per setting type; the expected values are
# literals, never the implementation's own convert
SAMPLES = {
    "int": (7, "8", 8, 9),
    "float": (0.7, "0.8", 0.8, 0.9),
    "bool": (True, "False", False, True),
    "str": ("from-flag", "from-env", "from-env", "from-file"),
    "features": ("offload", "prefix_cache", "prefix_cache", "-flash_attn"),
}
# settings whose choices or minimum the type's samples miss
SAMPLES_OF = {
    "framework": ("megatron", "fsdp", "fsdp", "megatron"),
    "trainer_mode": ("async", "sync", "sync", "async"),
    "memory_fit": ("start", "warn", "warn", "start"),
    "profile": ("0.9", "0.8", "0.8", "0.9"),
    "swanlab_mode": ("cloud", "disabled", "disabled", "cloud"),
    "hang_timeout": (60, "61", 61, 62),
}


def test_the_samples_cover_every_choice_and_minimum():
    for p in S.PARAMS:
        if p.choices or (p.minimum is not None and p.minimum > 7):
            assert p.name in SAMPLES_OF, p.name


@pytest.mark.parametrize("p", S.PARAMS, ids=lambda p: p.name)
def test_precedence_flag_env_file_default_for_every_setting(p):
    fl, ev, typed, fv = SAMPLES_OF.get(p.name) or SAMPLES[p.type]
    tbl, _, key = (p.key or "").rpartition(".")
    file_cfg = {tbl or "run": {key: fv}} if p.key else {}
    env = {p.env[0]: ev} if p.env else {}
    st = resolve({p.name: fl}, env, file_cfg)
    assert (st[p.name], st.source(p.name)) == (fl, "flag")
    if p.env:
        st = resolve({}, env, file_cfg)
        assert (st[p.name], st.source(p.name)) == (typed, "env") and type(st[p.name]) is type(typed)
    if p.key:
        st = resolve({}, {}, file_cfg)
        assert (st[p.name], st.source(p.name)) == (fv, "file")
    assert resolve({}, {}, {}).source(p.name) == "default"


def test_none_counts_as_not_given():
    st = resolve({"steps": None}, {"FRAMEWORK": "fsdp"}, {"run": {"steps": 5}})
    assert (st["steps"], st.source("steps")) == (5, "file")
    assert (st["framework"], st.source("framework")) == ("fsdp", "env")


# issue 32 item 3: a variable / flag / file key SET but empty launched the default (TRAIN_STEPS= -> 100 steps,
# MODEL_PATH= -> Qwen3-8B). One rule (settings.EMPTY_RULES): refused in one line naming it, unless empty is the
# setting's own meaning.
@pytest.mark.parametrize(
    "flags,env,file_cfg,needle",
    [
        ({}, {"TRAIN_STEPS": ""}, {}, "TRAIN_STEPS is set but empty; set it (e.g. TRAIN_STEPS=100), or unset it"),
        ({}, {"MODEL_PATH": ""}, {}, "MODEL_PATH is set but empty; set it (e.g. MODEL_PATH=Qwen3-8B)"),
        ({}, {"FRAMEWORK": ""}, {}, "FRAMEWORK is set but empty; set it to one of megatron | fsdp"),
        ({}, {"ENABLE_OFFLOAD": ""}, {}, "ENABLE_OFFLOAD is set but empty"),
        ({"framework": ""}, {}, {}, "--framework '' is empty; give one of megatron | fsdp, or drop --framework"),
        ({"model": ""}, {}, {}, "--model '' is empty; give a value (e.g. --model Qwen3-8B), or drop --model"),
        ({"project": ""}, {}, {}, "--project '' is empty"),
        ({"steps": ""}, {"TRAIN_STEPS": "7"}, {}, "--steps '' is empty"),  # not silently the env's value either
        ({}, {}, {"run": {"steps": ""}}, "[run] steps in the config file is empty; give a value (e.g. steps = 100)"),
        ({}, {}, {"run": {"model": ""}}, "[run] model in the config file is empty"),
    ],
)
def test_a_value_set_empty_is_refused_naming_it(flags, env, file_cfg, needle):
    with pytest.raises(SettingsError) as e:
        resolve(flags, env, file_cfg)
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_empty_is_not_given_where_the_default_is_empty_and_a_value_where_help_says_so():
    st = resolve(
        {"experiment": "", "features": ""},
        {
            "EXPERIMENT_NAME": "",
            "PROJECT_NAME": "p1",
            "HCCL_HOST_SOCKET_PORT_RANGE": "",
            "HCCL_NPU_SOCKET_PORT_RANGE": "61000-61001",
        },
        {"run": {"features": "offload"}},
    )
    assert (st["experiment"], st.source("experiment")) == ("", "default")
    assert (st["features"], st.source("features")) == ("offload", "file")  # empty flag: the next source applies
    # help: "(empty: verl's own 'auto')": the empty value itself (was the default 60000-60050 before)
    assert (st["hccl_host_socket_port_range"], st.source("hccl_host_socket_port_range")) == ("", "env")
    assert all(p.empty in EMPTY_RULES for p in PARAMS)
    assert {p.name for p in PARAMS if p.empty == "unset"} == {p.name for p in PARAMS if p.default == ""} - set(
        EMPTY_DEFAULT_REFUSED
    )


# A new user's trial: SWANLAB_MODE= and CONTAINER= passed (as the SwanLab setup's choice, the inventory's container)
# while TRAINER_GPUS= was refused. Their empty default picks what the user did not name: refused the same way.
@pytest.mark.parametrize(
    "flags,env,file_cfg,line",
    [
        (
            {},
            {"CONTAINER": ""},
            {},
            "CONTAINER is set but empty; set it (e.g. CONTAINER=<name>), or unset it (`unset CONTAINER`) for the "
            "default: the inventory's",
        ),
        (
            {},
            {"SWANLAB_MODE": ""},
            {},
            "SWANLAB_MODE is set but empty; set it to one of cloud | local | offline | disabled, or unset it "
            "(`unset SWANLAB_MODE`) for the default: SwanLab setup decides",
        ),
        (
            {"container": ""},
            {"CONTAINER": "c1"},
            {},
            "--container '' is empty; give a value (e.g. --container <name>), or drop --container for the default: "
            "the inventory's",
        ),
        (
            {},
            {},
            {"swanlab": {"mode": ""}},
            "[swanlab] mode in the config file is empty; give one of cloud | local | offline | disabled, or remove "
            "the key for the default: SwanLab setup decides",
        ),
        (
            {},
            {"TRAINER_GPUS": ""},
            {},
            "TRAINER_GPUS is set but empty; set it (e.g. TRAINER_GPUS=4), or unset it (`unset TRAINER_GPUS`) for "
            "the default 4 devices",
        ),
    ],
)
def test_an_empty_container_or_swanlab_mode_is_refused_like_an_empty_trainer_gpus(flags, env, file_cfg, line):
    with pytest.raises(SettingsError) as e:
        resolve(flags, env, file_cfg)
    assert str(e.value) == line


def test_the_tasks_that_look_at_runs_refuse_an_empty_container_variable_in_the_same_line(capsys):
    from invoke.exceptions import Exit

    from dapo_ops.cli._common import with_container
    from dapo_ops.control.inventory.model import Host

    hosts = [Host(name="h1", address="192.0.2.1")]
    with pytest.raises(Exit) as e:
        with_container(hosts, "", env={"CONTAINER": " "})
    assert e.value.code == 2
    with pytest.raises(SettingsError) as want:
        resolve({}, {"CONTAINER": ""}, {})
    assert str(want.value) in capsys.readouterr().err + str(e.value.message or "")
    assert with_container(hosts, "", env={})[0].container == hosts[0].container
    assert with_container(hosts, "c2", env={"CONTAINER": ""})[0].container == "c2"  # the flag wins over the env
    assert with_container(hosts, "", env={"CONTAINER": "c3"})[0].container == "c3"


@pytest.mark.parametrize("raw", [",,,", " , ", ";;"])
def test_features_naming_nothing_are_refused(raw):
    with pytest.raises(SettingsError, match=r"--features=.* names no feature; give feature names"):
        resolve({"features": raw}, {}, {})
    assert resolve({"features": "default"}, {}, {})["features"] == "default"


def test_steps_bound_names_the_flag_that_set_it():
    """issue 32 minor: --steps 99999999999999999999 was reported as TRAIN_STEPS (runspec.check_spec's words)."""
    with pytest.raises(SettingsError) as e:
        resolve({"steps": "99999999999999999999"}, {"TRAIN_STEPS": "5"}, {})
    assert str(e.value).startswith("--steps=") and "TRAIN_STEPS" not in str(e.value)
    assert "maximum 1000000" in str(e.value)
    with pytest.raises(SettingsError, match=r"^TRAIN_STEPS="):
        resolve({}, {"TRAIN_STEPS": "99999999999999999999"}, {})


@pytest.mark.parametrize(
    "name,flags,env,where",
    [
        ("experiment", {"experiment": "exp-${oc.env:SWANLAB_API_KEY}"}, {}, "--experiment"),
        ("experiment", {}, {"EXPERIMENT_NAME": "${x}"}, "EXPERIMENT_NAME"),
        ("model", {"model": "/verl/m${IFS}x"}, {}, "--model"),
        ("train_file", {}, {"TRAIN_FILE": "/d/${oc.decode:'1'}.parquet"}, "TRAIN_FILE"),
        ("val_file", {"val_file": "a\\${b}"}, {}, "--val-file"),
        ("project", {}, {"PROJECT_NAME": "p${"}, "PROJECT_NAME"),
    ],
)
def test_a_string_setting_holding_an_interpolation_is_refused_without_echoing_it(name, flags, env, where):
    """issue 32 item 1: verl's OmegaConf evaluates '${' in every value (an escape does not survive main_ppo.py:145's
    in-place resolve, tests/test_overrides.py); the refusal names the flag / variable and does not echo the text."""
    with pytest.raises(SettingsError) as e:
        resolve(flags, env, {})
    msg = str(e.value)
    assert msg.startswith(where + " holds '${'") and "oc.env:SWANLAB" not in msg and "IFS" not in msg


def test_a_lone_dollar_is_a_literal_and_passes():
    st = resolve({"model": "/verl/m$x", "experiment": "cost-$5 {a}"}, {}, {})
    assert st["model"] == "/verl/m$x" and st["experiment"] == "cost-$5 {a}"


def test_bare_run_table_is_accepted():
    st = resolve({}, {}, {"steps": 12, "framework": "fsdp"})
    assert st["steps"] == 12 and st.source("framework") == "file"


@pytest.mark.parametrize(
    "flags,env,file_cfg,needle",
    [
        ({}, {"TRAIN_STEPS": "abc"}, {}, "TRAIN_STEPS='abc' is not an integer"),
        ({"steps": "x"}, {}, {}, "--steps='x' is not an integer"),
        ({}, {}, {"run": {"steps": "ten"}}, "[run] steps in the config file='ten' is not an integer"),
        ({}, {"ENABLE_OFFLOAD": "maybe"}, {}, "ENABLE_OFFLOAD='maybe' is not a boolean"),
        ({}, {"FRAMEWORK": "jax"}, {}, "FRAMEWORK='jax' is not one of"),
        ({}, {"USER_FEATURES": "warp"}, {}, "USER_FEATURES: unknown feature 'warp'"),
        ({}, {"TRAIN_STEPS": "0"}, {}, "below the minimum"),
        ({}, {"GPU_MEMORY_UTILIZATION": "1.5"}, {}, "fraction"),
        ({"nope": 1}, {}, {}, "unknown setting 'nope'"),
    ],
)
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


def test_offload_against_minus_offload_goes_to_the_higher_source():
    """flags > env > file: ``ENABLE_OFFLOAD=True inv launch --features=-offload`` was refused as a contradiction (a
    new-user trial): the flag's ``-offload`` wins; ``USER_FEATURES=-offload inv launch --offload`` drops the env's
    ``-offload``; one source saying both is still refused."""
    st = resolve({"features": "-offload"}, {"ENABLE_OFFLOAD": "True"}, {})
    assert st["offload"] is False and st["features"] == "-offload"
    st = resolve({"offload": True}, {"USER_FEATURES": "-offload, prefix_cache"}, {})
    assert st["offload"] is True and st["features"] == "prefix_cache"
    st = resolve({}, {"ENABLE_OFFLOAD": "1"}, {"run": {"features": "-offload"}})
    assert st["offload"] is True and st["features"] == ""
    with pytest.raises(SettingsError, match=r"^ENABLE_OFFLOAD turns offload on but USER_FEATURES='-offload'"):
        resolve({}, {"ENABLE_OFFLOAD": "1", "USER_FEATURES": "-offload"}, {})
    with pytest.raises(SettingsError, match="drop one of them"):
        resolve({"offload": True, "features": "-offload"}, {}, {})
    # and the other way round: offload off given (--no-offload / ENABLE_OFFLOAD=false) against 'offload' (second trial)
    st = resolve({"offload": False}, {"USER_FEATURES": "offload,prefix_cache"}, {})
    assert st["offload"] is False and st["features"] == "prefix_cache"
    st = resolve({"features": "offload"}, {"ENABLE_OFFLOAD": "false"}, {})
    assert st["offload"] is True and st["features"] == "offload"
    with pytest.raises(
        SettingsError, match=r"^ENABLE_OFFLOAD turns offload off but USER_FEATURES='offload' turns it on"
    ):
        resolve({}, {"ENABLE_OFFLOAD": "false", "USER_FEATURES": "offload"}, {})
    assert resolve({}, {"USER_FEATURES": "offload"}, {})["features"] == "offload"  # offload at its default: no say


@pytest.mark.parametrize(
    "flags, env, file_cfg, line",
    [
        ({}, {"MODEL_PATH": "/verl/Qwen3-8B "}, {}, "MODEL_PATH='/verl/Qwen3-8B ' has blanks around it (they would be "
         "part of it); set it to '/verl/Qwen3-8B'"),
        ({}, {"MODEL_PATH": " "}, {}, "MODEL_PATH=' ' has blanks around it (they would be part of it); give a value or "
         "unset it"),
        ({"framework": " fsdp"}, {}, {}, "--framework=' fsdp' has blanks around it (they would be part of it); set it to "
         "'fsdp'"),
        ({}, {}, {"run": {"train_file": "/data/t.parquet\t"}}, "has blanks around it (they would be part of it); set "
         "it to '/data/t.parquet'"),
    ],
)  # fmt: skip
def test_a_string_setting_with_blanks_at_an_end_is_refused_naming_the_fix(flags, env, file_cfg, line):
    """``MODEL_PATH=" "`` became the model dir ``/verl/ `` and ``"/verl/Qwen3-8B "`` failed as "does not exist"
    with the space unseen (a new-user trial), while a number with blanks was refused: strings are judged the same."""
    with pytest.raises(SettingsError) as e:
        resolve(flags, env, file_cfg)
    assert line in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("var", ["HTTP_PROXY", "https_proxy", "SWANLAB_HOST"])
def test_blanks_around_a_url_that_may_hold_credentials_are_refused_without_echoing_it(var):
    """The blanks refusal echoed the value twice: a proxy URL's password with it (a review)."""
    with pytest.raises(SettingsError) as e:
        resolve({}, {var: "http://bob:s3cretpw@proxy.corp:3128 "}, {})
    assert "s3cretpw" not in str(e.value) and "has blanks around its value" in str(e.value) and var in str(e.value)
