"""Webhook notifier against a loopback HTTP server; SwanLab link scanner on real banner output."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import socket
import subprocess
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from dapo_ops.agent import notify

KEY = "sk-dapo-SECRET-123456789"


class Hooks:
    """A loopback webhook receiver: records every POST; the path picks the answer."""

    def __init__(self):
        self.posts = []
        hooks = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                hooks.posts.append({"path": self.path, "headers": dict(self.headers), "body": json.loads(body)})
                if self.path.startswith("/status500"):
                    self.send_response(500)
                    self.end_headers()
                    return
                answer = (
                    b'{"code":19021,"msg":"sign match fail"}' if self.path.startswith("/feishu-bad") else b'{"code":0}'
                )
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hooks():
    h = Hooks()
    yield h
    h.close()


def _cfg(*kinds, **kw):
    return {
        "webhooks": [{"kind": k, "url_env": f"DAPO_NOTIFY_URL_{i}"} for i, k in enumerate(kinds)],
        "timeout_s": 5,
        **kw,
    }


def _secrets(hooks, *paths):
    return {f"DAPO_NOTIFY_URL_{i}": hooks.base + p for i, p in enumerate(paths)}


EVENT = {
    "host": "h1",
    "run_id": "20261129-151200-a1b2",
    "step": 4,
    "total_steps": 6,
    "attempt": 2,
    "log": "/verl/dapo_runs/20261129-151200-a1b2/train.log",
}


def test_escalation_message_when_enabled_in_feishu_shape(hooks):
    ev = {
        **EVENT,
        "kind": "escalation",
        "verdict": {"cls": "oom-device", "hint": "raise offload", "action": "retry with offload"},
    }
    assert notify.send_event(_cfg("feishu", on_escalation=True), _secrets(hooks, "/f"), ev) == []
    assert len(hooks.posts) == 1
    body = hooks.posts[0]["body"]
    assert body["msg_type"] == "text" and set(body) == {"msg_type", "content"}
    text = body["content"]["text"]
    for needle in (
        "OOM escalation",
        "h1",
        "20261129-151200-a1b2",
        "oom-device",
        "step reached: 4/6",
        "hint: raise offload",
        "log: /verl/dapo_runs/20261129-151200-a1b2/train.log",
    ):
        assert needle in text


def test_escalation_is_silent_by_default(hooks):
    assert notify.send_event(_cfg("generic"), _secrets(hooks, "/g"), {**EVENT, "kind": "escalation"}) == []
    assert hooks.posts == []


def test_failure_posts_once_per_webhook_with_the_verdict_in_each_shape(hooks):
    ev = {
        **EVENT,
        "kind": "failure",
        "verdict": "oom-host",
        "hint": "lower micro batch",
        "action": "stop: host memory exhausted",
    }
    errs = notify.send_event(_cfg("generic", "dingtalk", "slack", "lark"), _secrets(hooks, "/g", "/d", "/s", "/l"), ev)
    assert errs == []
    by = {p["path"]: p["body"] for p in hooks.posts}
    assert len(hooks.posts) == 4
    assert by["/g"]["event"] == "failure" and by["/g"]["verdict"] == "oom-host" and by["/g"]["step"] == 4
    assert by["/g"]["host"] == "h1" and by["/g"]["log"].endswith("train.log")
    assert by["/d"] == {"msgtype": "text", "text": {"content": by["/g"]["text"]}}
    assert by["/s"] == {"text": by["/g"]["text"]}
    assert by["/l"]["content"]["text"] == by["/g"]["text"]
    assert "run FAILED" in by["/g"]["text"] and "verdict: oom-host (attempt 2)" in by["/g"]["text"]


def test_hang_always_success_only_when_enabled(hooks):
    s = _secrets(hooks, "/g")
    assert notify.send_event(_cfg("generic"), s, {**EVENT, "kind": "success"}) == []
    assert hooks.posts == []
    assert notify.send_event(_cfg("generic", on_success=True), s, {**EVENT, "kind": "success"}) == []
    assert notify.send_event(_cfg("generic"), s, {**EVENT, "kind": "hang", "verdict": "hang"}) == []
    assert [p["body"]["event"] for p in hooks.posts] == ["success", "hang"]
    assert notify.send_event(_cfg("generic"), s, {**EVENT, "kind": "step"}) == []
    assert len(hooks.posts) == 2


def test_should_notify_table():
    on = {"webhooks": [{}], "on_escalation": True, "on_success": True}
    off = {"webhooks": [{}]}
    assert [notify.should_notify(k, off) for k in notify.EVENT_KINDS] == [False, True, True, False]
    assert [notify.should_notify(k, on) for k in notify.EVENT_KINDS] == [True, True, True, True]
    assert not notify.should_notify("failure", {}) and not notify.should_notify("failure", None)


def _closed_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_unreachable_http_error_and_body_error_are_returned_never_raised(hooks):
    secret_url = f"http://127.0.0.1:{_closed_port()}/hook?token=VERYSECRETTOKEN"
    secrets = {
        "DAPO_NOTIFY_URL_0": secret_url,
        "DAPO_NOTIFY_URL_1": hooks.base + "/status500",
        "DAPO_NOTIFY_URL_2": hooks.base + "/feishu-bad",
    }
    cfg = {
        "webhooks": [
            {"kind": "slack", "url_env": "DAPO_NOTIFY_URL_0"},
            {"kind": "generic", "url_env": "DAPO_NOTIFY_URL_1"},
            {"kind": "feishu", "url_env": "DAPO_NOTIFY_URL_2"},
            {"kind": "generic", "url_env": "DAPO_NOTIFY_URL_9"},
            {"kind": "teams", "url_env": "DAPO_NOTIFY_URL_1"},
        ],
        "timeout_s": 3,
    }
    errs = notify.send_event(cfg, secrets, {**EVENT, "kind": "failure", "verdict": "crash-other"})
    assert len(errs) == 5, errs
    assert "webhook 0 (slack, DAPO_NOTIFY_URL_0): unreachable" in errs[0]
    assert "HTTP 500" in errs[1]
    assert "rejected" in errs[2] and "19021" in errs[2]
    assert "DAPO_NOTIFY_URL_9 is not set" in errs[3]
    assert "unknown kind" in errs[4]
    joined = "\n".join(errs)
    assert "VERYSECRETTOKEN" not in joined and hooks.base not in joined


def test_garbage_config_is_an_error_line_not_an_exception():
    assert notify.send_event({"webhooks": "nonsense"}, None, {"kind": "failure"})
    assert notify.send_event({"webhooks": [{}], "timeout_s": "x"}, {}, {"kind": "failure"})


def test_secrets_never_reach_the_message(hooks):
    ev = {**EVENT, "kind": "failure", "verdict": "auth-error", "hint": f"key {KEY} was rejected"}
    notify.send_event(_cfg("generic"), {**_secrets(hooks, "/g"), "SWANLAB_API_KEY": KEY}, ev)
    assert KEY not in json.dumps(hooks.posts[0]["body"])


def test_dingtalk_and_feishu_signatures_verify(hooks):
    secrets = {**_secrets(hooks, "/d?access_token=abc", "/f"), "SIGN_D": "SECd", "SIGN_F": "SECf"}
    cfg = {
        "webhooks": [
            {"kind": "dingtalk", "url_env": "DAPO_NOTIFY_URL_0", "sign_env": "SIGN_D"},
            {"kind": "feishu", "url_env": "DAPO_NOTIFY_URL_1", "sign_env": "SIGN_F"},
        ]
    }
    assert notify.send_event(cfg, secrets, {**EVENT, "kind": "failure"}) == []
    d, f = hooks.posts
    q = urllib.parse.parse_qs(urllib.parse.urlsplit(d["path"]).query)
    ts = q["timestamp"][0]
    want = base64.b64encode(hmac.new(b"SECd", f"{ts}\nSECd".encode(), hashlib.sha256).digest()).decode()
    assert q["sign"][0] == want and q["access_token"] == ["abc"]
    fts = f["body"]["timestamp"]
    fwant = base64.b64encode(hmac.new(f"{fts}\nSECf".encode(), b"", hashlib.sha256).digest()).decode()
    assert f["body"]["sign"] == fwant


# ---------------------------------------------------------------- link scanner


def _feed(scanner, text):
    found = [x for x in (scanner.feed(ln) for ln in text.splitlines()) if x]
    return found


RUN = "abcdefghijklmnopqrstu"


def test_link_on_one_line_0_10_and_0_7_with_ray_prefix_and_ansi():
    url = f"https://swanlab.cn/@u/p/runs/{RUN}"
    assert _feed(notify.LinkScanner(), f"swanlab: 🚀 View run exp at {url}\n") == [url]
    assert _feed(notify.LinkScanner(), f"(TaskRunner pid=123) swanlab: 🚀 View run at \x1b[34m{url}\x1b[0m\n") == [url]


def _rich_banner(url, name="20261129-151200-a1b2", env=None):
    """Print the banner exactly as swanlab 0.10.3 does (its rich console, no TTY → 80 columns)."""
    code = (
        "import sys\nfrom rich.text import Text\nfrom swanlab.sdk.internal.pkg import console\n"
        "url, name = sys.argv[1], sys.argv[2]\n"
        "console.info('📁 View project at', Text(url.split('/runs/')[0]))\n"
        "console.info('🚀 View run', Text(name, 'yellow'), 'at', Text(url, style=f'link {url}'))\n"
        "print('step:1 - a:1')\n"
    )
    e = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    out = subprocess.run(
        [sys.executable, "-c", code, url, name], capture_output=True, text=True, timeout=120, env={**e, **(env or {})}
    )
    assert out.returncode == 0, out.stderr
    return out.stdout + out.stderr


@pytest.mark.parametrize("project", ["dapo-ops", "dapo-ops-a-rather-long-project-name-that-folds-the-url-twice"])
def test_link_survives_rich_wrapping_and_folding_of_the_real_banner(project):
    url = f"http://192.0.2.10:8000/@team/{project}/runs/{RUN}"
    text = _rich_banner(url)
    assert not [ln for ln in text.splitlines() if "View run" in ln and url in ln], (
        "precondition: swanlab's console wraps the URL onto its own line(s)"
    )
    assert _feed(notify.LinkScanner(run_id=RUN), text) == [url]
    ray = "\n".join(f"(TaskRunner pid=77) {ln}" for ln in text.splitlines())
    assert _feed(notify.LinkScanner(run_id=RUN), ray) == [url]
    # without the expected id, folded pieces are joined by their equal width
    assert _feed(notify.LinkScanner(), text) == [url]


def test_local_mode_banner_from_a_real_swanlab_run(tmp_path):
    log_dir = str(tmp_path / "a-longish-run-directory-name-for-wrapping" / "swanlog")
    code = (
        "import swanlab\nr = swanlab.init(project='p', experiment_name='e', logdir=%r, mode='local')\n"
        "swanlab.log({'x': 1.0}, step=1)\nswanlab.finish()\n" % log_dir
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWANLAB_") and k != "COLUMNS"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env
    )
    assert out.returncode == 0, out.stderr
    text = out.stdout + out.stderr
    assert _feed(notify.LinkScanner(log_dir=log_dir), text) == [f"swanlab watch {log_dir}"]
    assert os.listdir(log_dir), "metrics landed in the local SwanLab log dir"


def test_offline_banner_and_pending_flag():
    sc = notify.LinkScanner()
    assert sc.feed("swanlab: ⚡️ Run `swanlab sync /tmp/s/run-1` to sync this run") == "swanlab sync /tmp/s/run-1"
    sc = notify.LinkScanner(run_id=RUN)
    assert sc.feed("swanlab: 🚀 View run x at ") is None and sc.pending
    assert sc.feed(f"https://swanlab.cn/@u/p/runs/{RUN}") == f"https://swanlab.cn/@u/p/runs/{RUN}"
    assert not sc.pending and sc.feed("swanlab: 🚀 View run y at https://other") is None


def test_offline_banner_folded_inside_the_run_dir_is_joined_without_a_space():
    # swanlab 0.10.3 offline mode in the sandbox (a run's train.log): rich folds the 86-character dir at column 80
    d = "/verl/dapo_runs/20261202-011615-1a9f/swanlog/run-20261202_011618-220bxb9zxxocy4v0erdfo"
    text = f"swanlab: \u26a1\ufe0f Run `swanlab sync \n{d[:80]}\n{d[80:]}` to sync this run\n"
    assert len(d[:80]) == 80
    assert _feed(notify.LinkScanner(), text) == [f"swanlab sync {d}"]
    assert _feed(notify.LinkScanner(run_id=RUN), text) == [f"swanlab sync {d}"]


def test_user_config_notify_table_splits_into_spec_and_secrets():
    spec, secrets = notify.spec_from_user_config(
        {
            "on_escalation": True,
            "timeout_s": 3,
            "webhooks": [
                {"kind": "feishu", "url": "https://open.feishu.cn/x/TOKEN1", "sign_secret": "S1"},
                {"kind": "slack", "url": "https://hooks.slack.com/TOKEN2"},
            ],
        }
    )
    assert spec == {
        "on_escalation": True,
        "on_success": False,
        "timeout_s": 3.0,
        "webhooks": [
            {"kind": "feishu", "url_env": "DAPO_NOTIFY_URL_0", "sign_env": "DAPO_NOTIFY_SIGN_0"},
            {"kind": "slack", "url_env": "DAPO_NOTIFY_URL_1"},
        ],
    }
    assert "TOKEN" not in json.dumps(spec)
    assert secrets == {
        "DAPO_NOTIFY_URL_0": "https://open.feishu.cn/x/TOKEN1",
        "DAPO_NOTIFY_SIGN_0": "S1",
        "DAPO_NOTIFY_URL_1": "https://hooks.slack.com/TOKEN2",
    }
    spec2, secrets2 = notify.spec_from_user_config(
        {"webhooks": [{"kind": "dingtalk", "url_env": "MY_HOOK", "secret": "S2"}]}, {"MY_HOOK": "https://d/TOKEN3"}
    )
    assert spec2["webhooks"] == [{"kind": "dingtalk", "url_env": "DAPO_NOTIFY_URL_0", "sign_env": "DAPO_NOTIFY_SIGN_0"}]
    assert secrets2 == {"DAPO_NOTIFY_URL_0": "https://d/TOKEN3", "DAPO_NOTIFY_SIGN_0": "S2"}
    with pytest.raises(ValueError, match="MY_HOOK is empty"):
        notify.spec_from_user_config({"webhooks": [{"kind": "slack", "url_env": "MY_HOOK"}]}, {})
    with pytest.raises(ValueError, match="teams"):
        notify.spec_from_user_config({"webhooks": [{"kind": "teams", "url": "x"}]})


WECOM_KEY = "693a91f6-7xxx-4bc4-97a0-0ec2sifa5aaa"


def test_wecom_group_robot_shape_and_its_error_code(hooks):
    """WeCom (企业微信) group robot: POST {"msgtype": "text", "text": {"content": ...}}; HTTP 200 with a non-zero
    errcode is a failed post, and the line saying so never holds the key of the URL."""
    ev = {**EVENT, "kind": "failure", "verdict": "oom-host", "action": "stop: host memory exhausted"}
    ok = {"DAPO_NOTIFY_URL_0": hooks.base + "/cgi-bin/webhook/send?key=" + WECOM_KEY}
    assert notify.send_event(_cfg("wecom"), ok, ev) == []
    body = hooks.posts[0]["body"]
    assert body == {"msgtype": "text", "text": {"content": body["text"]["content"]}}
    assert "run FAILED" in body["text"]["content"] and hooks.posts[0]["path"].endswith("key=" + WECOM_KEY)
    bad = {"DAPO_NOTIFY_URL_0": hooks.base + "/status500/send?key=" + WECOM_KEY}
    errs = notify.send_event(_cfg("wecom"), bad, ev)
    assert len(errs) == 1 and "HTTP 500" in errs[0] and WECOM_KEY not in errs[0]


def test_wecom_errcode_in_a_200_answer_is_a_failure():
    assert (
        notify._check_body("wecom", b'{"errcode":93000,"errmsg":"invalid webhook url"}')
        == "errcode=93000 invalid webhook url"
    )
    assert notify._check_body("wecom", b'{"errcode":0,"errmsg":"ok"}') is None
