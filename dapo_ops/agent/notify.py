"""Webhook notifier run by the supervisor (STDLIB ONLY: shipped into the training image).

"Notify only on errors" (runbook 训练监控策略: 仅在错误时通知用户): the supervisor calls
:func:`send_event` on a terminal failure, a hang, optionally on each OOM escalation
(``on_escalation``) and optionally on success (``on_success``). SwanLab's own notification
plugins run inside the training process and die with a SIGKILLed run
(failure-classes.md), hence this one.

Payload shapes (one text message each):

* ``generic``: ``{"source": "dapo-ops", "event": kind, "host", "run_id", "verdict", "step",
  "total_steps", "hint", "action", "suggestions", "log", "swanlab_url", "text"}``
* ``feishu`` / ``lark``: ``{"msg_type": "text", "content": {"text": ...}}`` (+ ``timestamp``,
  ``sign`` when a signing secret is configured)
* ``dingtalk``: ``{"msgtype": "text", "text": {"content": ...}}`` (+ ``timestamp``/``sign``
  query parameters when signed)
* ``slack``: ``{"text": ...}``
* ``wecom`` (WeCom / 企业微信 group robot, ``https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=<key>``):
  ``{"msgtype": "text", "text": {"content": ...}}``; it answers HTTP 200 with ``{"errcode": 0, "errmsg": "ok"}``
  (an error code in the body is a failed post). The ``key`` query parameter is the robot's secret
  (:func:`dapo_ops.core.redact.url_secrets`).

Webhook URLs carry tokens, so they are secrets: the spec names an env var (``url_env``,
e.g. ``DAPO_NOTIFY_URL_0``) whose value the supervisor read from ``secret.env``. Errors
returned never contain a URL or a secret.

:class:`LinkScanner` (SwanLab's run-link banner, recorded by the supervisor and reported here) is
:class:`dapo_ops.core.logformat.LinkScanner`, re-exported.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

# the banner parser is part of the log grammar; the supervisor reaches it as notify.LinkScanner
from dapo_ops.core.logformat import LinkScanner  # noqa: F401
from dapo_ops.core.redact import scrub, url_secrets

EVENT_KINDS = ("escalation", "failure", "hang", "success")
KINDS = ("generic", "feishu", "lark", "dingtalk", "slack", "wecom")
DEFAULT_TIMEOUT_S = 5.0
MAX_TEXT = 3500  # characters; DingTalk/Feishu text messages are limited to a few KB

_TITLES = {
    "escalation": "OOM escalation (run continues)",
    "failure": "run FAILED",
    "hang": "run HUNG (no progress)",
    "success": "run succeeded",
}


def should_notify(event_kind: str, notify_cfg: dict[str, Any] | None) -> bool:
    """Whether ``event_kind`` is sent under ``notify_cfg`` (spec.json ``notify``).

    ``failure`` and ``hang``: always (if webhooks are configured). ``escalation``: only with
    ``on_escalation: true``. ``success``: only with ``on_success: true``. Anything else: never.
    """
    cfg = notify_cfg or {}
    if not cfg.get("webhooks"):
        return False
    if event_kind in ("failure", "hang"):
        return True
    if event_kind == "escalation":
        return bool(cfg.get("on_escalation", False))
    if event_kind == "success":
        return bool(cfg.get("on_success", False))
    return False


def url_problem(url: str) -> str:
    """What is wrong with a webhook URL, in words that never show it (it is a secret), else ``""``: an http(s) URL
    with a host and no blank or control character (a URL with a space reached ``urllib`` only at the first send,
    recorded in supervisor.log alone)."""
    from urllib.parse import urlsplit

    if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in url):
        return "holds a blank or control character"
    try:
        parts = urlsplit(url)
    except ValueError:
        return "is not a URL"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "is not an http(s) URL with a host"
    return ""


def check_webhooks(hooks: "list[Any] | None") -> None:
    """The ``[notify] webhooks`` entries as the config file gives them: a known ``kind`` and, for a literal
    ``url``, :func:`url_problem`. Called when the config file is read (:func:`dapo_ops.control.userconfig.load`),
    so a dry run, a preflight and a launch refuse the same file. Raises ``ValueError`` (one line, no URL shown)."""
    for i, hook in enumerate(hooks or []):
        hook = dict(hook or {})
        kind = str(hook.get("kind", "generic")).lower()
        if kind not in KINDS:
            raise ValueError(f"[notify] webhook {i}: kind {kind!r} is not one of {', '.join(KINDS)}")
        bad = url_problem(str(hook["url"])) if hook.get("url") else ""
        if bad:
            raise ValueError(f"[notify] webhook {i} ({kind}): its url {bad}; give the webhook's https://... URL")


def spec_from_user_config(
    user_notify: dict[str, Any] | None, env: dict[str, Any] | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split the user config's ``[notify]`` table into (spec.json ``notify``, secret env).

    ``user_notify``: ``{"on_escalation": bool, "on_success": bool, "timeout_s": float,
    "webhooks": [{"kind": "feishu", "url": "https://..." | "url_env": "MY_HOOK_VAR",
    "sign_secret" | "secret": optional signing secret}]}``; ``url_env`` is looked up in ``env``
    (the operator's environment). Each URL (and signing secret) becomes ``DAPO_NOTIFY_URL_<i>``
    (``DAPO_NOTIFY_SIGN_<i>``) in the secret env, and the spec only names the variables.
    Raises ``ValueError`` (one line) for an unknown kind or a webhook without a URL.
    """
    cfg = dict(user_notify or {})
    env = env or {}
    spec: dict[str, Any] = {
        "on_escalation": bool(cfg.get("on_escalation", False)),
        "on_success": bool(cfg.get("on_success", False)),
        "webhooks": [],
    }
    if cfg.get("timeout_s") is not None:
        spec["timeout_s"] = float(cfg["timeout_s"])
    secrets: dict[str, Any] = {}
    check_webhooks(cfg.get("webhooks"))
    for i, hook in enumerate(cfg.get("webhooks") or []):
        hook = dict(hook or {})
        kind = str(hook.get("kind", "generic")).lower()
        url = hook.get("url") or (env.get(hook["url_env"]) if hook.get("url_env") else None)
        if not url:
            where = f"${hook['url_env']} is empty" if hook.get("url_env") else "no url"
            raise ValueError(f'[notify] webhook {i} ({kind}): {where}; set url = "https://..." or url_env')
        bad = url_problem(str(url))
        if bad:
            where = f"${hook['url_env']}" if not hook.get("url") else "its url"
            raise ValueError(f"[notify] webhook {i} ({kind}): {where} {bad}; give the webhook's https://... URL")
        entry = {"kind": kind, "url_env": f"DAPO_NOTIFY_URL_{i}"}
        secrets[entry["url_env"]] = str(url)
        sign = hook.get("sign_secret") or hook.get("secret")
        if sign:
            entry["sign_env"] = f"DAPO_NOTIFY_SIGN_{i}"
            secrets[entry["sign_env"]] = str(sign)
        spec["webhooks"].append(entry)
    return spec, secrets


def _verdict_parts(event: dict[str, Any]) -> tuple[str, str, str]:
    v = event.get("verdict")
    hint = event.get("hint") or ""
    action = event.get("action") or ""
    if isinstance(v, dict):
        hint = hint or v.get("hint") or ""
        action = action or v.get("action") or ""
        v = v.get("cls") or v.get("class") or ""
    return str(v or ""), str(hint), str(action)


def format_message(event: dict[str, Any]) -> str:
    """The human text: title, host, run id, verdict, step reached, action, hint, log path.

    ``event``: ``{"kind", "host", "run_id", "verdict" (class name or Verdict.to_json()),
    "step", "total_steps", "attempt", "hint", "action", "suggestions", "log", "swanlab_url"}``; missing
    keys are left out. For a final failure ``action`` is the run's ending line (run.json ``decision.ended``) and
    ``suggestions`` the ladder's next parameters to change, one ``- `` line each.
    """
    kind = event.get("kind", "failure")
    verdict, hint, action = _verdict_parts(event)
    lines = [f"[dapo-ops] {_TITLES.get(kind, kind)}: run {event.get('run_id', '?')} on {event.get('host', '?')}"]
    if verdict:
        att = f" (attempt {event['attempt']})" if event.get("attempt") is not None else ""
        lines.append(f"verdict: {verdict}{att}")
    if event.get("step") is not None:
        total = event.get("total_steps")
        lines.append(f"step reached: {event['step']}" + (f"/{total}" if total else ""))
    if action:
        lines.append(f"action: {action}")
    if hint:
        lines.append(f"hint: {hint}")
    sugg = [str(x) for x in event.get("suggestions") or []]
    if sugg:
        lines.append("suggestions:")
        lines += [f"- {x}" for x in sugg]
    if event.get("log"):
        lines.append(f"log: {event['log']}")
    if event.get("swanlab_url"):
        lines.append(f"swanlab: {event['swanlab_url']}")
    text = "\n".join(lines)
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 3] + "..."


def build_payload(kind: str, text: str, event: dict[str, Any]) -> dict[str, Any]:
    """JSON body for a webhook ``kind`` (see module docstring for the shapes)."""
    if kind in ("feishu", "lark"):
        return {"msg_type": "text", "content": {"text": text}}
    if kind in ("dingtalk", "wecom"):
        return {"msgtype": "text", "text": {"content": text}}
    if kind == "slack":
        return {"text": text}
    verdict, hint, _ = _verdict_parts(event)
    return {
        "source": "dapo-ops",
        "event": event.get("kind"),
        "host": event.get("host"),
        "run_id": event.get("run_id"),
        "verdict": verdict or None,
        "step": event.get("step"),
        "total_steps": event.get("total_steps"),
        "hint": hint or None,
        "action": event.get("action") or None,
        "suggestions": list(event.get("suggestions") or []),
        "log": event.get("log"),
        "swanlab_url": event.get("swanlab_url"),
        "text": text,
    }


def _sign(kind: str, secret: str, url: str, payload: dict[str, Any]) -> str:
    """Add Feishu/Lark or DingTalk signature (their "signature verification" bot setting)."""
    if kind in ("feishu", "lark"):
        ts = str(int(time.time()))
        digest = hmac.new(f"{ts}\n{secret}".encode(), b"", hashlib.sha256).digest()
        payload["timestamp"] = ts
        payload["sign"] = base64.b64encode(digest).decode()
        return url
    if kind == "dingtalk":
        ts = str(int(time.time() * 1000))
        digest = hmac.new(secret.encode(), f"{ts}\n{secret}".encode(), hashlib.sha256).digest()
        sign = urllib.parse.quote_plus(base64.b64encode(digest).decode())
        return f"{url}{'&' if '?' in url else '?'}timestamp={ts}&sign={sign}"
    return url


def _check_body(kind: str, body: bytes) -> str | None:
    """Feishu, DingTalk and WeCom answer HTTP 200 with an error code in the JSON body."""
    if kind not in ("feishu", "lark", "dingtalk", "wecom"):
        return None
    try:
        data = json.loads(body.decode("utf-8", "replace") or "{}")
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    for code_key, msg_key in (("code", "msg"), ("StatusCode", "StatusMessage"), ("errcode", "errmsg")):
        if code_key in data and data[code_key] not in (0, "0", None):
            return f"{code_key}={data[code_key]} {data.get(msg_key, '')}".strip()
    return None


def _scrub_obj(obj: Any, secrets: list[str]) -> Any:
    if isinstance(obj, str):
        return scrub(obj, secrets)
    if isinstance(obj, dict):
        return {k: _scrub_obj(v, secrets) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_scrub_obj(v, secrets) for v in obj]
    return obj


def send_event(
    notify_cfg: dict[str, Any] | None, secret_env: dict[str, Any] | None, event: dict[str, Any]
) -> list[str]:
    """Post ``event`` to every configured webhook; return error lines, never raise: the ``line`` of each of
    :func:`post_event`'s failures (the caller logs them to ``supervisor.log``)."""
    return [f["line"] for f in post_event(notify_cfg, secret_env, event)]


def post_event(
    notify_cfg: dict[str, Any] | None, secret_env: dict[str, Any] | None, event: dict[str, Any]
) -> list[dict[str, str]]:
    """Post ``event`` to every configured webhook; return one dict per failed webhook, never raise.

    ``notify_cfg`` (spec.json ``notify``): ``{"on_escalation": bool, "on_success": bool,
    "timeout_s": float (seconds, default 5), "webhooks": [{"kind": "generic|feishu|lark|dingtalk|slack|wecom",
    "url_env": "DAPO_NOTIFY_URL_0", "sign_env": optional name of a signing secret}]}``.
    ``secret_env``: the supervisor's in-memory copy of ``secret.env``. ``event``: see
    :func:`format_message` (``kind`` one of :data:`EVENT_KINDS`).

    Returns ``[]`` when nothing is due (:func:`should_notify` is false) or all posts
    succeeded; otherwise one ``{"kind": webhook kind, "error": what went wrong, "line": the whole line}`` per failed
    webhook, the line naming its index, kind and ``url_env`` (never the URL, nor a secret: scrubbed). The supervisor
    logs each line to ``supervisor.log`` and records kind and error in run.json ``notify_failures``
    (:func:`dapo_ops.agent.supervisor.record.note_notify_failures`).
    """
    errors: list[dict[str, str]] = []

    def failed(kind: str, label: str, err: str, hidden: "list[Any]") -> None:
        err = scrub(err, hidden)
        errors.append({"kind": kind, "error": err, "line": f"{label}: {err}"})

    try:
        cfg = notify_cfg or {}
        secrets = dict(secret_env or {})
        if not should_notify(str(event.get("kind")), cfg):
            return []
        timeout = float(cfg.get("timeout_s", DEFAULT_TIMEOUT_S))
        event = _scrub_obj(dict(event), list(secrets.values()))
        text = format_message(event)
        for i, hook in enumerate(cfg.get("webhooks") or []):
            kind = str((hook or {}).get("kind", "generic")).lower()
            url_env = (hook or {}).get("url_env", "")
            label = f"webhook {i} ({kind}, {url_env or 'no url_env'})"
            url = secrets.get(url_env) if url_env else None
            if kind not in KINDS:
                failed(kind, label, f"unknown kind; use one of {', '.join(KINDS)}", [])
                continue
            if not url:
                failed(kind, label, f"{url_env or 'url_env'} is not set in secret.env; nothing sent", [])
                continue
            err = _post(kind, url, hook, secrets, text, event, timeout)
            if err:
                failed(kind, label, err, [url, *url_secrets(url), *secrets.values()])
    except Exception as exc:  # the notifier must never take the supervisor down
        err = f"{type(exc).__name__}: {scrub(str(exc), (secret_env or {}).values())}"
        errors.append({"kind": "notifier", "error": err, "line": f"notifier error: {err}"})
    return errors


def _post(
    kind: str, url: str, hook: dict[str, Any], secrets: dict[str, Any], text: str, event: dict[str, Any], timeout: float
) -> str | None:
    payload = build_payload(kind, text, event)
    sign_env = hook.get("sign_env")
    if sign_env:
        if not secrets.get(sign_env):
            return f"{sign_env} (signing secret) is not set in secret.env; nothing sent"
        url = _sign(kind, secrets[sign_env], url, payload)
    data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
    req = urllib.request.Request(
        url,
        data=data,
        method="POST",
        headers={"Content-Type": "application/json; charset=utf-8", "User-Agent": "dapo-ops-notify"},
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            body = resp.read(65536)
            status = resp.status
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code} {exc.reason}"
    except urllib.error.URLError as exc:
        return f"unreachable: {exc.reason}"
    except (OSError, ValueError) as exc:  # timeouts, bad URL
        return f"{type(exc).__name__}: {exc}"
    if not 200 <= status < 300:
        return f"HTTP {status}"
    bad = _check_body(kind, body)
    return f"rejected by the webhook: {bad}" if bad else None
