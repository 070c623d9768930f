"""The one redaction rule (stdlib only; shipped into the container with the supervisor).

Every place that must keep secrets out of what it prints, records or puts on a command line asks this module:
which names are secret (:func:`is_secret_name`), whether a URL carries credentials (:func:`has_credentials`), how
a secret is shown (:data:`REDACTED`, :func:`display_url`), and how text, argv and env are scrubbed (:func:`scrub`,
:func:`redact_argv`, :func:`redact_env`). Callers: the dry-run plan (``dapo_ops/control/launch/plan.py``,
``dapo_ops/control/launch/dryrun.py``), proxy settings (``dapo_ops/control/inventory/proxy.py``), ``docker run`` (``-e VAR`` without a
value for a proxy with credentials, ``dapo_ops/control/inventory/container_spec.py``), SwanLab settings and launch output
(``dapo_ops/control/swanlab_settings.py``, ``dapo_ops/cli/launch.py``, ``dapo_ops/cli/multihost.py``), the supervisor's
own log of the verl command (``dapo_ops/agent/supervisor/``) and the webhook notifier's errors
(``dapo_ops/agent/notify.py``).
"""

from __future__ import annotations

import re
from typing import Any, Iterable, List, Mapping
from urllib.parse import quote, unquote, urlsplit

#: what a secret is shown as
REDACTED = "***"
#: secrets shorter than this (characters) are not searched for in text: too short to redact without destroying it
MIN_SECRET_LEN = 4
SECRET_MARKERS = (
    "key",
    "apikey",
    "token",
    "secret",
    "password",
    "passwd",
    "pwd",
    "passphrase",
    "credential",
    "credentials",
    "auth",
    "authorization",
    "cookie",
)
#: a word ending in one of these is a secret word run together (``mypassword``, ``accesstoken``, ``openaiapikey``)
SECRET_SUFFIXES = ("apikey", "secret", "token", "password", "passwd", "passphrase", "credential", "credentials")
#: a marker followed by one of these is a size, not a secret (``ppo_max_token_len_per_gpu``)
NOT_SECRET_NEXT = ("len", "length", "lengths", "budget", "count", "num", "limit")


def is_secret_name(name: str) -> bool:
    """True when a variable/override name looks secret: a ``KEY``/``TOKEN``/``SECRET``/``PASSWORD`` word.

    Words are split on anything but letters and digits and at a camelCase hump (``hfToken`` = ``hf token``); a
    marker followed by a size word (``len``, ``budget``, ...) is not a secret
    (``actor_rollout_ref.actor.ppo_max_token_len_per_gpu``), and neither is ``max_num_batched_tokens``.
    ``SWANLAB_API_KEY``, ``HF_TOKEN``, ``aws_secret``, ``accessToken``, ``mypassword`` are (a word ending in one of
    :data:`SECRET_SUFFIXES`).
    """
    humps = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", str(name))
    words = [w for w in re.split(r"[^a-z0-9]+", humps.lower()) if w]
    for i, w in enumerate(words):
        if w in SECRET_MARKERS or w.endswith(SECRET_SUFFIXES):
            nxt = words[i + 1] if i + 1 < len(words) else ""
            if nxt not in NOT_SECRET_NEXT:
                return True
    return False


def _userinfo(url: str) -> tuple[str, str]:
    """``(userinfo, host[:port])`` of a URL's authority; a URL without ``scheme://`` (``user:pw@proxy:3128``, which
    curl and requests accept as a proxy) is read as an authority too. ``("", "")`` when it does not parse."""
    try:
        netloc = urlsplit(url if "://" in url else "//" + url).netloc
    except ValueError:
        return "", ""
    user, _, hostport = netloc.rpartition("@")
    return user, hostport


#: query parameters that carry a secret although their name is no secret word: a webhook's or an API's token in
#: the URL (WeCom's ``?key=``, DingTalk's ``?access_token=`` are secret words already)
SECRET_QUERY_NAMES = ("key", "sig", "signature", "sign", "auth")


def _secret_query(url: str) -> list[tuple[str, str]]:
    """``[(name, value)]`` of the query parameters of ``url`` whose name is secret (:func:`is_secret_name` or
    :data:`SECRET_QUERY_NAMES`) and whose value is not empty."""
    try:
        query = urlsplit(url).query
    except ValueError:
        return []
    out = []
    for part in query.split("&"):
        name, sep, value = part.partition("=")
        if sep and value and (is_secret_name(name) or name.lower() in SECRET_QUERY_NAMES):
            out.append((name, value))
    return out


def has_credentials(url: str) -> bool:
    """True when a URL carries credentials: a non-empty ``user``, ``user:password`` or ``:password`` before ``@``,
    or a secret query parameter (``?key=...``: WeCom's robot webhook, ``?access_token=...``: DingTalk's).

    A user name alone counts: proxies and webhook gateways take tokens as the user (``http://<token>@proxy``), so
    ``http://user@host`` is a secret. ``http://@host`` (empty userinfo) carries nothing.
    """
    user, _ = _userinfo(str(url or ""))
    return bool(user.replace(":", "")) or bool(_secret_query(str(url or "")))


def url_secrets(url: str) -> list[str]:
    """The secret parts of a URL, to :func:`scrub` wherever they may appear alone: the userinfo's password (or a
    bare user part: a token) and the values of secret query parameters (``?key=<WeCom robot key>``)."""
    url = str(url or "")
    user, _ = _userinfo(url)
    name, sep, password = user.partition(":")
    parts = [password if sep else name] if user else []
    for _, value in _secret_query(url):
        parts += [value, unquote(value)]
    return [p for p in parts if p]


def display_url(url: str) -> str:
    """A URL safe to print: ``http://bob:***@proxy:3128`` (the password hidden, the user kept), ``http://***@proxy``
    (a bare user part may be a token: hidden), ``https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=***`` (a secret
    query parameter); a URL without credentials is returned as it is."""
    if not has_credentials(url):
        return url
    for name, value in _secret_query(url):
        url = url.replace("%s=%s" % (name, value), "%s=%s" % (name, REDACTED))
    user, hostport = _userinfo(url)
    if not user.replace(":", ""):
        return url
    name, sep, _ = user.partition(":")
    shown = "%s:%s" % (name, REDACTED) if sep else REDACTED
    head = url[: url.index("://") + 3] if "://" in url else ""
    rest = url[len(head) + len(user) + 1 + len(hostport) :]  # the authority starts right after the scheme
    return head + shown + "@" + hostport + rest


def scrub(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every occurrence of each secret value, and of its URL-quoted form, replaced by :data:`REDACTED`.

    :param secrets: secret values; empty/None entries and strings shorter than :data:`MIN_SECRET_LEN` are ignored.
    Longer secrets are replaced first (one secret may contain another).
    """
    forms: set[str] = set()
    for s in secrets or ():
        if s and len(s) >= MIN_SECRET_LEN:
            forms.add(s)
            forms.add(quote(s, safe=""))
    for s in sorted(forms, key=len, reverse=True):
        text = text.replace(s, REDACTED)
    return text


def redact_argv(argv: Iterable[str], secrets: Iterable[str] = ()) -> List[str]:
    """``argv`` with the value of every ``name=value`` item whose name is secret (:func:`is_secret_name`) replaced by
    :data:`REDACTED`, and any of ``secrets`` scrubbed (:func:`scrub`) wherever it occurs."""
    secrets = list(secrets or ())
    out = []
    for a in argv:
        name, sep, _ = str(a).partition("=")
        a = name + "=" + REDACTED if sep and is_secret_name(name) else str(a)
        out.append(scrub(a, secrets) if secrets else a)
    return out


def redact_env(env: Mapping[str, Any]) -> dict[str, Any]:
    """Copy of ``env``: values of secret names (:func:`is_secret_name`) are :data:`REDACTED`, URLs with credentials
    are shown by :func:`display_url` (``http://user:***@proxy``); other values as they are."""
    out = {}
    for k, v in (env or {}).items():
        if is_secret_name(k) and v:
            out[k] = REDACTED
        elif isinstance(v, str) and ("@" in v or "?" in v) and has_credentials(v):
            out[k] = display_url(v)
        else:
            out[k] = v
    return out
