"""The one redaction rule (dapo_ops/core/redact.py) and the callers that now share it: proxy settings, the
``docker run`` line, the dry-run plan, SwanLab/launch output, the supervisor's argv log (pure, no hosts)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from dapo_ops.control.inventory import container_spec
from dapo_ops.control.inventory import proxy
from dapo_ops.control import swanlab_settings as swanlab_cfg
from dapo_ops.core import redact

# (proxy URL, carries credentials): a bare user part counts (proxies take tokens as the user name)
CREDENTIAL_CASES = [
    ("http://bob:s3cretpw@proxy:3128", True),
    ("http://user@host:3128", True),
    ("http://:onlypass@host:3128", True),
    ("user:pw@proxy:3128", True),  # scheme-less, as curl and requests accept it
    ("http://@host:3128", False),  # empty userinfo: nothing to hide
    ("http://10.0.0.1:3128", False),
    ("http://proxy/p@th", False),  # '@' in the path is not a user part
]


def _host():
    return SimpleNamespace(
        name="h1",
        accelerator="gpu",
        devices=1,
        device_mounts=False,
        runs_dir="/verl/dapo_runs",
        workdir="/verl",
        model_dir="/m",
        data_dir="/d",
        ckpt_dir="/c",
    )


@pytest.mark.parametrize("url, creds", CREDENTIAL_CASES)
def test_every_credential_rule_is_the_same_rule(url, creds):
    """proxy.split_secret (secret.env or spec), docker run (-e VAR without value or inline) and the plan's notes
    used to disagree (username-only vs any '@' in the netloc); now all three follow redact.has_credentials."""
    assert redact.has_credentials(url) is creds
    public, secret = proxy.split_secret({"http_proxy": url})
    assert ("http_proxy" in secret) is creds and ("http_proxy" in public) is not creds
    argv, env = container_spec.docker_run_argv(_host(), "img", "verl", proxy={"http_proxy": url})
    assert ("http_proxy" in env) is creds  # credentials travel in the docker client's env only
    assert ("-e" in argv and f"http_proxy={url}" in argv) is not creds
    if creds:
        assert url not in " ".join(argv)


@pytest.mark.parametrize(
    "url, shown",
    [
        ("http://bob:s3cretpw@proxy:3128", "http://bob:***@proxy:3128"),
        ("http://tok3nvalue@proxy:3128/x", "http://***@proxy:3128/x"),
        ("http://:pw@h:1", "http://:***@h:1"),
        ("bob:pw@proxy:3128", "bob:***@proxy:3128"),
        ("http://h:pw@h:1/p", "http://h:***@h:1/p"),  # a user named like the host
        ("http://10.0.0.1:3128", "http://10.0.0.1:3128"),
    ],
)
def test_display_hides_the_secret_part_only(url, shown):
    assert redact.display_url(url) == shown
    assert redact.display_url(url) == shown


def test_env_argv_and_text_scrubbing():
    env = {"SWANLAB_API_KEY": "k", "HF_TOKEN": "", "http_proxy": "http://tok3nvalue@p:1", "PATH": "/bin"}
    assert redact.redact_env(env) == {
        "SWANLAB_API_KEY": "***",
        "HF_TOKEN": "",
        "http_proxy": "http://***@p:1",
        "PATH": "/bin",
    }
    argv = ["a.api_key=abc", "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=20480", "x=has-s3cret-inside", "ab"]
    assert redact.redact_argv(argv, ["s3cret", "ab"]) == [
        "a.api_key=***",
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=20480",
        "x=has-***-inside",
        "ab",
    ]  # 2-char secret: not searched
    text = "url https://x/?k=a%2Fb%3Dc and a/b=c"
    assert redact.scrub(text, ["a/b=c"]) == "url https://x/?k=*** and ***"  # the URL-quoted form too
    assert swanlab_cfg.redact is redact.scrub


def test_a_webhook_key_in_the_query_is_a_secret():
    """WeCom's robot webhook carries its secret as ``?key=``: the one redaction rule hides it everywhere."""
    from dapo_ops.core import redact as r

    key = "693a91f6-7xxx-4bc4-97a0-0ec2sifa5aaa"
    url = "https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=" + key
    assert r.has_credentials(url)
    assert r.display_url(url) == "https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=***"
    assert key in r.url_secrets(url)
    assert r.redact_env({"HOOK": url}) == {"HOOK": "https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=***"}
    assert key not in r.scrub("post failed: key=%s rejected" % key, r.url_secrets(url))
    ding = "https://oapi.dingtalk.com/robot/send?access_token=abcdef123456"
    assert r.display_url(ding).endswith("access_token=***")
    assert not r.has_credentials("https://swanlab.cn/@me/p/runs/abc?tab=chart")


@pytest.mark.parametrize("name", ["+x.auth", "+x.Authorization", "+x.pwd", "WEBHOOK_AUTH", "my.passphrase", "x.cookie"])
def test_auth_and_short_password_words_are_secret(name):
    """A new user's trial: ``--override '+x.auth=abc'`` (and Authorization, pwd) reached verl's argv while
    ``+x.passwd`` was refused; the one secret-name rule covers them now."""
    assert redact.is_secret_name(name)
    assert redact.redact_argv([f"{name}=abc"]) == [f"{name}=***"]
