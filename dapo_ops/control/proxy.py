"""Proxy environment for the training container.

The runbook asks for ``http_proxy`` / ``https_proxy`` (answer "无"/"none" to skip) and
exports them before training. dapo-ops puts them into the verl process environment
(spec.json ``env``) together with a ``no_proxy`` that always lists the loopback names
and every cluster host's address, so Ray (GCS over gRPC, which honours ``http_proxy``
and ``no_proxy``/``no_grpc_proxy``) and collective traffic never go through the proxy.

Precedence for each proxy variable: the inventory's ``[proxy]`` table (it describes the
hosts) > the operator's environment (lower-case name, then upper-case). A proxy URL
carrying credentials (``http://user:pass@proxy:3128``) is a secret: use
:func:`split_secret` to move it out of the public env.
"""

from __future__ import annotations

from typing import Callable, Iterable, Mapping
from urllib.parse import urlsplit

# the one credential rule and how a URL with credentials is shown (core/redact.py)
from dapo_ops.core.redact import display_url as display, has_credentials  # noqa: F401

PROXY_VARS: tuple[str, ...] = ("http_proxy", "https_proxy")
LOOPBACK: tuple[str, ...] = ("localhost", "127.0.0.1", "::1")
NONE_ANSWERS = frozenset({"", "none", "no", "n", "-", "无", "不需要", "skip"})


class ProxyError(ValueError):
    """One line: which proxy value is malformed and the expected form."""


def parse_answer(text: str | None, name: str = "proxy") -> str:
    """Normalise an interactive/config answer to a proxy URL, or ``""`` for none.

    ``"none"``, ``"无"``, ``"no"``, ``"-"`` and blank mean no proxy. A value without a scheme
    gets ``http://`` (what curl/requests assume for proxies). Raises :class:`ProxyError`
    for an unsupported scheme or a missing host.
    """
    v = (text or "").strip().strip("'\"").strip()
    if v.lower() in NONE_ANSWERS:
        return ""
    if "://" not in v:
        v = "http://" + v
    parts = urlsplit(v)
    if parts.scheme not in ("http", "https", "socks5", "socks5h", "socks4"):
        raise ProxyError(f"{name} {text!r}: scheme must be http, https or socks5 (e.g. http://proxy:8080)")
    if not parts.hostname:
        raise ProxyError(f"{name} {text!r}: no host (e.g. http://proxy:8080)")
    return v


def _split_list(value: str | None) -> list[str]:
    return [x.strip() for x in (value or "").replace(";", ",").split(",") if x.strip()]


def container_proxy_env(
    inventory_proxy: Mapping[str, str] | None,
    env: Mapping[str, str],
    cluster_addresses: Iterable[str],
) -> dict[str, str]:
    """Proxy variables for the container, lower- and upper-case twins.

    ``inventory_proxy``: the inventory ``[proxy]`` table (``http_proxy``, ``https_proxy``,
    ``no_proxy``; empty strings = unset). ``env``: the operator's environment.
    ``cluster_addresses``: every host address of the run (IP or name), Ray head included.

    Returns ``{"http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY"}`` for what is set
    (``https_proxy`` does NOT default to ``http_proxy``: set both if both are wanted), and
    always ``no_proxy``/``NO_PROXY``: loopback names + cluster addresses + the
    inventory's and the environment's ``no_proxy`` entries, de-duplicated in that order.
    Raises :class:`ProxyError` for a malformed proxy URL.
    """
    inv = dict(inventory_proxy or {})
    out: dict[str, str] = {}
    for var in PROXY_VARS:
        raw = inv.get(var) or env.get(var) or env.get(var.upper()) or ""
        source = "inventory [proxy]" if inv.get(var) else "environment"
        val = parse_answer(raw, f"{var} (from {source})")
        if val:
            out[var] = val
            out[var.upper()] = val
    entries: list[str] = []
    for item in (*LOOPBACK, *cluster_addresses, *_split_list(inv.get("no_proxy")),
                 *_split_list(env.get("no_proxy") or env.get("NO_PROXY"))):
        item = str(item).strip()
        if item and item not in entries:
            entries.append(item)
    out["no_proxy"] = ",".join(entries)
    out["NO_PROXY"] = out["no_proxy"]
    return out


def run_proxy_env(settings: Mapping | None, file_proxy: Mapping[str, str] | None, inv_proxy: Mapping[str, str] | None,
                  env: Mapping[str, str], cluster_addresses: Iterable[str]) -> tuple[dict[str, str], dict[str, str]]:
    """``(public, secret)``: the proxy env ``inv launch`` gives the run, which ``inv preflight`` probes with too.

    Per variable: the run settings' ``http_proxy`` / ``https_proxy`` (flag > env > config file,
    :mod:`dapo_ops.control.settings`; ``none`` = no proxy) > hosts.toml ``[proxy]`` (non-empty values) > the user
    config's ``[proxy]`` > the operator's ``env`` (:func:`container_proxy_env`, which adds ``no_proxy``); then
    :func:`split_secret` (a URL with credentials goes to ``secret.env``, 0600, never argv or the spec). Raises
    :class:`ProxyError` for a malformed value."""
    merged = {**(file_proxy or {}), **{k: v for k, v in (inv_proxy or {}).items() if v}}
    for k in PROXY_VARS:
        if (settings or {}).get(k):
            merged[k] = settings.get(k)
    return split_secret(container_proxy_env(merged, env, cluster_addresses))


def split_secret(proxy_env: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """Split into (public, secret): proxy URLs with credentials go to the secret side.

    Public goes to spec.json ``env`` and plans; secret goes to ``secret.env`` (0600).
    """
    public: dict[str, str] = {}
    secret: dict[str, str] = {}
    for k, v in proxy_env.items():
        (secret if k.lower() in PROXY_VARS and has_credentials(v) else public)[k] = v
    return public, secret


def ask(prompt: Callable[[str], str], current: Mapping[str, str] | None = None) -> dict[str, str]:
    """The runbook's interactive proxy questions ("如不需要请回复'无'" → answer none).

    ``prompt(question) -> answer``. Returns ``{"http_proxy": ..., "https_proxy": ...}`` with
    ``""`` for none, suitable for ``userconfig.save_section("proxy", ...)``. A blank
    https answer reuses the http answer; a malformed URL is asked again (3 tries), then
    :class:`ProxyError`.
    """
    cur = dict(current or {})
    out: dict[str, str] = {}
    for var in PROXY_VARS:
        default = cur.get(var) or (out.get("http_proxy", "") if var == "https_proxy" else "")
        hint = f" [{display(default)}]" if default else ""
        for attempt in range(3):
            ans = prompt(f"{var} (e.g. http://proxy:8080; 'none' for no proxy){hint}: ")
            if ans.strip() == "" and default:
                out[var] = default
                break
            try:
                out[var] = parse_answer(ans, var)
                break
            except ProxyError:
                if attempt == 2:
                    raise
    return out
