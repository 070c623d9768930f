"""Container proxy env: precedence, no_proxy composition, 'none' answers, credential split."""

from __future__ import annotations

import pytest

from dapo_ops.control import proxy
from dapo_ops.control.proxy import ProxyError, container_proxy_env


def test_no_proxy_always_has_loopback_and_cluster_addresses_even_without_a_proxy():
    env = container_proxy_env({}, {}, ["198.51.105.11", "198.51.105.12"])
    assert "http_proxy" not in env and "https_proxy" not in env
    entries = env["no_proxy"].split(",")
    assert entries[:5] == ["localhost", "127.0.0.1", "::1", "198.51.105.11", "198.51.105.12"]
    assert env["NO_PROXY"] == env["no_proxy"]


def test_inventory_beats_operator_env_and_upper_case_twins_are_set():
    inv = {"http_proxy": "http://inv-proxy:3128", "https_proxy": "", "no_proxy": ".corp,10.0.0.0/8"}
    env = {"http_proxy": "http://env-proxy:8080", "HTTPS_PROXY": "http://env-secure:8443",
           "NO_PROXY": "registry.local,127.0.0.1"}
    out = container_proxy_env(inv, env, ["h1.example", "198.51.105.11"])
    assert out["http_proxy"] == out["HTTP_PROXY"] == "http://inv-proxy:3128"
    # empty inventory value falls through to the env (upper-case accepted)
    assert out["https_proxy"] == out["HTTPS_PROXY"] == "http://env-secure:8443"
    entries = out["no_proxy"].split(",")
    assert entries == ["localhost", "127.0.0.1", "::1", "h1.example", "198.51.105.11", ".corp", "10.0.0.0/8",
                       "registry.local"]
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
    out = container_proxy_env({"http_proxy": "http://bob:s3cretpw@proxy:3128", "https_proxy": "http://proxy:3129"},
                              {}, ["198.51.105.11"])
    public, secret = proxy.split_secret(out)
    assert secret == {"http_proxy": "http://bob:s3cretpw@proxy:3128", "HTTP_PROXY": "http://bob:s3cretpw@proxy:3128"}
    assert "s3cretpw" not in repr(public) and public["https_proxy"] == "http://proxy:3129"
    assert "no_proxy" in public
    assert proxy.display("http://bob:s3cretpw@proxy:3128") == "http://bob:***@proxy:3128"


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

