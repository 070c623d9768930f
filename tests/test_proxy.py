"""Container proxy env: precedence, no_proxy composition, 'none' answers, credential split."""

from __future__ import annotations

import pytest

from dapo_ops.control.inventory import proxy
from dapo_ops.core import redact
from dapo_ops.control.inventory.proxy import ProxyError, container_proxy_env
from config_helpers import no_config


def test_no_proxy_always_has_loopback_and_cluster_addresses_even_without_a_proxy():
    env = container_proxy_env({}, {}, ["198.51.105.11", "198.51.105.12"])
    assert "http_proxy" not in env and "https_proxy" not in env
    entries = env["no_proxy"].split(",")
    assert entries[:5] == ["localhost", "127.0.0.1", "::1", "198.51.105.11", "198.51.105.12"]
    assert env["NO_PROXY"] == env["no_proxy"]


def test_inventory_beats_operator_env_and_upper_case_twins_are_set():
    inv = {"http_proxy": "http://inv-proxy:3128", "https_proxy": "", "no_proxy": ".corp,10.0.0.0/8"}
    env = {
        "http_proxy": "http://env-proxy:8080",
        "HTTPS_PROXY": "http://env-secure:8443",
        "NO_PROXY": "registry.local,127.0.0.1",
    }
    out = container_proxy_env(inv, env, ["h1.example", "198.51.105.11"])
    assert out["http_proxy"] == out["HTTP_PROXY"] == "http://inv-proxy:3128"
    # empty inventory value falls through to the env (upper-case accepted)
    assert out["https_proxy"] == out["HTTPS_PROXY"] == "http://env-secure:8443"
    entries = out["no_proxy"].split(",")
    assert entries == [
        "localhost",
        "127.0.0.1",
        "::1",
        "h1.example",
        "198.51.105.11",
        ".corp",
        "10.0.0.0/8",
        "registry.local",
    ]
    assert len(entries) == len(set(entries))


def test_https_proxy_does_not_silently_copy_http_proxy():
    out = container_proxy_env({"http_proxy": "http://p:1"}, {}, [])
    assert out["http_proxy"] == "http://p:1" and "https_proxy" not in out


@pytest.mark.parametrize("answer", ["none", "None", "无", "", "  ", "-", "no", "'none'"])
def test_none_answers_mean_no_proxy(answer):
    assert proxy.parse_answer(answer) == ""


def test_answers_get_a_scheme_and_bad_ones_are_one_line_errors():
    assert proxy.parse_answer("proxy.corp:8080") == "http://proxy.corp:8080"
    assert proxy.parse_answer("socks5://127.0.0.1:1080") == "socks5://127.0.0.1:1080"
    with pytest.raises(ProxyError, match="scheme"):
        proxy.parse_answer("ftp://proxy:21", "http_proxy")
    with pytest.raises(ProxyError, match="inventory"):
        container_proxy_env({"http_proxy": "gopher://x"}, {}, [])


def test_interactive_flow_none_and_reuse_of_http_answer():
    answers = iter(["http://proxy:8080", ""])
    asked = []

    def prompt(q):
        asked.append(q)
        return next(answers)

    assert proxy.ask(prompt) == {"http_proxy": "http://proxy:8080", "https_proxy": "http://proxy:8080"}
    assert "'none'" in asked[0] and "[http://proxy:8080]" in asked[1]
    it = iter(["无", "none"])
    assert proxy.ask(lambda q: next(it)) == {"http_proxy": "", "https_proxy": ""}


def test_interactive_flow_reasks_a_malformed_answer():
    it = iter(["ftp://x", "http://p:1", "none"])
    assert proxy.ask(lambda q: next(it)) == {"http_proxy": "http://p:1", "https_proxy": ""}


def test_proxy_credentials_are_split_to_the_secret_side_and_masked_for_display():
    out = container_proxy_env(
        {"http_proxy": "http://bob:s3cretpw@proxy:3128", "https_proxy": "http://proxy:3129"}, {}, ["198.51.105.11"]
    )
    public, secret = proxy.split_secret(out)
    assert secret == {"http_proxy": "http://bob:s3cretpw@proxy:3128", "HTTP_PROXY": "http://bob:s3cretpw@proxy:3128"}
    assert "s3cretpw" not in repr(public) and public["https_proxy"] == "http://proxy:3129"
    assert "no_proxy" in public
    assert redact.display_url("http://bob:s3cretpw@proxy:3128") == "http://bob:***@proxy:3128"


# -- fix 1: the proxy launch uses is the one preflight probes with (one function for both) ----------------------


def test_run_proxy_env_is_launchs_precedence_and_moves_credentials_to_the_secret_side():
    env = {"http_proxy": "http://u:pw-s3cret@198.51.174.1:3128", "no_proxy": ".corp"}
    # the run setting (here from the env var, as settings.resolve reads it) carries credentials
    public, secret = proxy.run_proxy_env({"http_proxy": env["http_proxy"]}, {}, {}, env, ["198.51.105.11"])
    assert secret == {"http_proxy": env["http_proxy"], "HTTP_PROXY": env["http_proxy"]}
    assert "pw-s3cret" not in repr(public) and public["no_proxy"].split(",")[3:] == ["198.51.105.11", ".corp"]
    # settings > hosts.toml [proxy] (non-empty) > the user config's [proxy] > the operator's env
    inv = {"http_proxy": "http://inv:1", "https_proxy": "", "no_proxy": ""}
    file_proxy = {"http_proxy": "http://file:2", "https_proxy": "http://file:3"}
    public, _ = proxy.run_proxy_env({"http_proxy": "", "https_proxy": ""}, file_proxy, inv, {}, [])
    assert (public["http_proxy"], public["https_proxy"]) == ("http://inv:1", "http://file:3")
    public, _ = proxy.run_proxy_env({"http_proxy": "http://flag:4", "https_proxy": "none"}, file_proxy, inv, {}, [])
    assert public["http_proxy"] == "http://flag:4" and "https_proxy" not in public  # 'none' = no proxy


# -- fix 2: one validator (urllib.parse) for every proxy value ------------------------------------------------


@pytest.mark.parametrize(
    "value,why",
    [
        ("not a url", "contains a space"),
        ("http://not a url", "contains a space"),
        ("http://p:3128 ", None),
        ("ftp://proxy:21", "scheme 'ftp'"),
        ("socks4://p:1080", "scheme 'socks4'"),
        ("http://", "no valid host"),
        ("http://:3128", "no valid host"),
        ("http://p:0", "bad port"),
        ("http://p:65536", "bad port"),
        ("http://p:port", "bad port"),
        ("http://p:3128/some/path", "path"),
        ("http://p:3128?x=1", "query"),
        ("http://bad_host!:1", "no valid host"),
        ("http://[fe80::1:3128", "does not parse"),
    ],
)
def test_malformed_proxy_urls_are_refused_naming_the_source(value, why):
    if why is None:  # surrounding blanks are trimmed (an answer typed with a trailing space)
        assert proxy.check_url(value, "env var http_proxy") == "http://p:3128"
        return
    with pytest.raises(ProxyError) as ei:
        proxy.check_url(value, "env var http_proxy")
    msg = str(ei.value)
    assert msg.startswith("env var http_proxy: ") and why in msg and "\n" not in msg, msg
    assert "scheme://host[:port]" in msg and "'none'" in msg, msg


@pytest.mark.parametrize(
    "value,out",
    [
        ("proxy.corp:8080", "http://proxy.corp:8080"),
        ("http://198.51.174.1:3128", "http://198.51.174.1:3128"),
        ("https://p", "https://p"),
        ("socks5h://p:1080", "socks5h://p:1080"),
        ("http://[::1]:3128/", "http://[::1]:3128/"),
        ("http://u:pw@p:3128", "http://u:pw@p:3128"),
        ("none", ""),
        ("", ""),
    ],
)
def test_well_formed_proxy_urls_pass(value, out):
    assert proxy.check_url(value, "x") == out


def test_a_malformed_proxy_with_credentials_never_echoes_the_password():
    for v in ("http://bob:hunter2-pw@p:99999", "http://bob:hunter2-pw@[broken", "bob:hunter2-pw@ p:1"):
        with pytest.raises(ProxyError) as ei:
            proxy.check_url(v, "http_proxy")
        assert "hunter2-pw" not in str(ei.value) and "***" in str(ei.value), str(ei.value)


@pytest.mark.parametrize(
    "value,ok",
    [
        ("localhost,127.0.0.1,::1,.corp,*.example.com,10.0.0.0/8,fd00::/8,registry:5000,[::1]:80,*", True),
        (" a , b ,", True),
        ("10.0.0.0/33", False),
        ("a b,c", False),
        ("user@host", False),
        ("http://x", False),
    ],
)
def test_no_proxy_is_a_comma_list_of_names_and_cidrs(value, ok):
    assert (proxy.no_proxy_problem(value) == "") is ok
    if not ok:
        with pytest.raises(ProxyError, match=r"^env var no_proxy: .* is not a no_proxy list"):
            container_proxy_env({}, {"no_proxy": value}, [])


def test_container_proxy_env_names_env_var_and_inventory_sources():
    with pytest.raises(ProxyError, match=r"^env var HTTPS_PROXY: 'not a url' is not a proxy URL"):
        container_proxy_env({}, {"HTTPS_PROXY": "not a url"}, [])
    with pytest.raises(ProxyError, match=r"^\[proxy\] no_proxy \(inventory\): "):
        container_proxy_env({"no_proxy": "a b"}, {}, [])


def test_quickstart_answer_not_a_url_is_asked_again_then_refused():
    it = iter(["not a url", "http://p:3128", "none"])
    assert proxy.ask(lambda q: next(it)) == {"http_proxy": "http://p:3128", "https_proxy": ""}
    it = iter(["not a url"] * 3)
    with pytest.raises(ProxyError, match="http_proxy: 'not a url' is not a proxy URL"):
        proxy.ask(lambda q: next(it))


# -- fix 3: no credentials in the proxy flags (argv: ps, shell history) ----------------------------------------


def test_credentials_in_a_proxy_flag_are_refused_without_echoing_them():
    for flag, var in (("--http-proxy", "http_proxy"), ("--https-proxy", "https_proxy")):
        for v in ("http://alice:pw-fl4g@p:3128", "http://tok3n-only@p:3128", "alice:pw-fl4g@p:3128"):
            with pytest.raises(ProxyError) as ei:
                proxy.check_flag(v, flag)
            msg = str(ei.value)
            assert msg.startswith(f"{flag} carries credentials") and "\n" not in msg, msg
            assert f"env var {var}" in msg and f"hosts.toml [proxy] {var}" in msg, msg
            assert "pw-fl4g" not in msg and "tok3n-only" not in msg and "alice" not in msg, msg
    assert proxy.check_flag("http://p:3128", "--http-proxy") == "http://p:3128"
    with pytest.raises(ProxyError, match="^--http-proxy: 'not a url' is not a proxy URL"):
        proxy.check_flag("not a url", "--http-proxy")


# -- the CLI: one line, exit 2, nothing contacted or launched (the inventory's host is TEST-NET: no route) -------


def _cli_env(tmp_path, **extra):
    inv = tmp_path / "hosts.toml"
    inv.write_text('[hosts.h1]\naddress = "192.0.2.1"\nconnect_timeout = 1\n')
    return inv, {
        "HOME": str(tmp_path),
        "DAPO_OPS_CONFIG": no_config(tmp_path, "cfg.toml"),
        "SWANLAB_MODE": "disabled",
        **extra,
    }


@pytest.mark.parametrize(
    "task,args,env,expect",
    [
        ("preflight", [], {"http_proxy": "not a url"}, "env var http_proxy: 'not a url' is not a proxy URL"),
        ("launch", [], {"HTTPS_PROXY": "http://p:0"}, "env var HTTPS_PROXY: 'http://p:0' is not a proxy URL (bad port"),
        ("launch", ["--http-proxy", "http://alice:cli-s3cret@p:3128"], {}, "--http-proxy carries credentials"),
        ("one-step-off", ["--https-proxy", "http://alice:cli-s3cret@p:3128"], {}, "--https-proxy carries credentials"),
        ("quickstart", ["--http-proxy", "not a url"], {}, "--http-proxy: 'not a url' is not a proxy URL"),
        ("quickstart", ["--http-proxy", "http://alice:cli-s3cret@p:3128"], {}, "--http-proxy carries credentials"),
    ],
)
def test_cli_refuses_a_bad_proxy_in_one_line_with_exit_2(tmp_path, cli, task, args, env, expect):
    inv, full_env = _cli_env(tmp_path, **env)
    r = cli(
        "inv",
        task,
        "--inventory",
        str(inv),
        "-H",
        "h1",
        *args,
        env=full_env,
        cwd=tmp_path,
        drop_env=("SWANLAB", "http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "no_proxy", "NO_PROXY"),
        timeout=120,
    )
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.rc == 2, r.stdout + r.stderr
    assert len(lines) == 1 and expect in lines[0], r.stderr
    assert "cli-s3cret" not in r.stdout + r.stderr
    assert not r.stdout.strip() or task == "quickstart", r.stdout


def test_quickstarts_repeat_line_keeps_proxy_credentials_off_the_command_line():
    from dapo_ops.cli.quickstart import _equivalent

    line = _equivalent(
        "dapo",
        "",
        "h1",
        "",
        "verl",
        {"http_proxy": "http://bob:qs-s3cret@p:3128", "https_proxy": "http://p:3129"},
        "",
        5,
        "",
        "local",
    )
    assert "qs-s3cret" not in line and "--http-proxy" not in line, line
    assert line.startswith("http_proxy=http://bob:***@p:3128 ") or "http_proxy='http://bob:***@p:3128'" in line, line
    assert "--https-proxy http://p:3129" in line, line


def test_a_bad_proxy_answer_is_asked_again_with_the_reason():
    """quickstart's proxy question (issue 32 item 9): the second asking says what was wrong with the first answer."""
    questions, answers = [], iter(["not a url", "http://p:3128", ""])

    def prompt(q):
        questions.append(q)
        return next(answers)

    assert proxy.ask(prompt) == {"http_proxy": "http://p:3128", "https_proxy": "http://p:3128"}
    assert "not a url" not in questions[0]
    assert questions[1].startswith("http_proxy: 'not a url' is not a proxy URL") and "again" in questions[1]
