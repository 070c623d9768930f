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

import ipaddress
import re
from typing import Callable, Iterable, Mapping
from urllib.parse import urlsplit

# the one credential rule and how a URL with credentials is shown (core/redact.py)
from dapo_ops.core.redact import REDACTED, display_url, has_credentials

PROXY_VARS: tuple[str, ...] = ("http_proxy", "https_proxy")
LOOPBACK: tuple[str, ...] = ("localhost", "127.0.0.1", "::1")
NONE_ANSWERS = frozenset({"", "none", "no", "n", "-", "无", "不需要", "skip"})
#: proxy schemes curl, requests (``requests[socks]``) and pip understand in ``http(s)_proxy``
SCHEMES: tuple[str, ...] = ("http", "https", "socks5", "socks5h")
#: a host name label run (letters, digits, ``_``, ``-``, dots between); IP addresses are checked by ipaddress
_NAME = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?")
#: the fix every malformed-proxy line ends with
FORM = "scheme://host[:port] with scheme http, https, socks5 or socks5h (e.g. http://proxy:3128), or 'none'"


class ProxyError(ValueError):
    """One line: which proxy value is malformed (its source: flag, env var or file key) and the expected form."""


def shown(value: str) -> str:
    """``value`` safe for a message: :func:`dapo_ops.core.redact.display_url`, and for a URL too broken to parse
    everything between ``scheme://`` and the last ``@`` hidden (a password is never echoed)."""
    v = str(value)
    d = display_url(v)
    if d == v and "@" in v:
        head = v[: v.index("://") + 3] if "://" in v.split("@", 1)[0] else ""
        d = head + REDACTED + "@" + v.rpartition("@")[2]
    return d


def _host_ok(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return bool(_NAME.fullmatch(host)) and ".." not in host


def problem(value: str) -> str:
    """Why ``value`` is not a proxy URL (``""`` when it is one), checked with :func:`urllib.parse.urlsplit`: a
    scheme of :data:`SCHEMES` (none given = ``http``, as curl assumes), a host (name, IPv4 or ``[IPv6]``), an
    optional port 1..65535, no spaces, no path beyond ``/``, no query or fragment. The one rule for every place a
    proxy enters (settings, hosts.toml / config ``[proxy]``, quickstart's answer)."""
    v = str(value)
    if any(ch.isspace() for ch in v):
        return "contains a space"
    if "://" not in v:
        v = "http://" + v
    try:
        parts = urlsplit(v)
        port = parts.port
    except ValueError as e:  # urllib: "Port out of range 0-65535", "Port could not be cast...", bad IPv6
        return "bad port (1..65535)" if "ort" in str(e) else f"does not parse ({e})"
    if parts.scheme not in SCHEMES:
        return f"scheme {parts.scheme!r} is not a proxy scheme"
    if not parts.hostname or not _host_ok(parts.hostname):
        return "no valid host"
    if port is not None and not 1 <= port <= 65535:
        return "bad port (1..65535)"
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        return "has a path, query or fragment (a proxy is scheme://host[:port])"
    return ""


def check_url(value: str | None, where: str) -> str:
    """Normalise one proxy value from ``where`` (``--http-proxy``, ``http_proxy``, ``[proxy] http_proxy in
    hosts.toml``): ``""`` for none (:data:`NONE_ANSWERS`), else the URL with ``http://`` added when it has no
    scheme. Raises :class:`ProxyError`, one line naming ``where`` and the fix, the password never shown."""
    v = (value or "").strip().strip("'\"").strip()
    if v.lower() in NONE_ANSWERS:
        return ""
    why = problem(v)
    if why:
        raise ProxyError(f"{where}: {shown(v)!r} is not a proxy URL ({why}); set it to {FORM}")
    return v if "://" in v else "http://" + v


def no_proxy_problem(value: str) -> str:
    """Why ``value`` is not a ``no_proxy`` list (``""`` when it is): comma-separated entries, each ``*``, a host
    name or IP (a leading ``.`` or ``*.`` for a domain, an optional ``:port``) or a CIDR (``10.0.0.0/8``)."""
    for item in _split_list(value):
        if any(ch.isspace() for ch in item):
            return f"entry {item!r} contains a space (separate entries with commas)"
        if item == "*":
            continue
        if "/" in item:
            try:
                ipaddress.ip_network(item, strict=False)
                continue
            except ValueError:
                return f"entry {item!r} is not a CIDR (e.g. 10.0.0.0/8)"
        host = item[2:] if item.startswith("*.") else item.lstrip(".")
        if host.startswith("["):
            host, _, port = host[1:].partition("]")
            port = port[1:] if port.startswith(":") else port
        elif host.count(":") == 1:
            host, _, port = host.partition(":")
        else:
            port = ""
        if not _host_ok(host) or (port and not (port.isdigit() and 1 <= int(port) <= 65535)):
            return f"entry {item!r} is not a host name, IP or CIDR"
    return ""


def check_no_proxy(value: str | None, where: str) -> str:
    """``value`` when it is a valid ``no_proxy`` list (:func:`no_proxy_problem`); else :class:`ProxyError`."""
    why = no_proxy_problem(value or "")
    if why:
        raise ProxyError(
            f"{where}: {value!r} is not a no_proxy list ({why}); set it to comma-separated host names, "
            f"IPs or CIDRs (e.g. localhost,.corp,10.0.0.0/8)"
        )
    return value or ""


def check_flag(value: str | None, flag: str) -> str:
    """A proxy given on the command line (``--http-proxy``): :func:`check_url`, and refused when it carries
    credentials (they would show in ``ps`` and the shell history), as ``--swanlab-host`` is
    (:func:`dapo_ops.control.swanlab_values.normalize_host`). The message never echoes the password."""
    if value and has_credentials(str(value)):
        var = flag.lstrip("-").replace("-", "_")
        raise ProxyError(
            f"{flag} carries credentials (user:password@), which would show in ps and the shell history: "
            f"set the env var {var} or hosts.toml [proxy] {var} instead (they reach the container "
            f"through the 0600 secret.env, never a command line)"
        )
    return check_url(value, flag)


def parse_answer(text: str | None, name: str = "proxy") -> str:
    """Normalise an interactive/config answer to a proxy URL, or ``""`` for none (:func:`check_url`).

    ``"none"``, ``"无"``, ``"no"``, ``"-"`` and blank mean no proxy. A value without a scheme
    gets ``http://`` (what curl/requests assume for proxies). Raises :class:`ProxyError`
    for a malformed value (:func:`problem`), naming ``name``.
    """
    return check_url(text, name)


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
        if inv.get(var):
            where = f"[proxy] {var} (inventory)"
        else:
            where = f"env var {var if env.get(var) else var.upper()}"
        val = check_url(raw, where)
        if val:
            out[var] = val
            out[var.upper()] = val
    check_no_proxy(inv.get("no_proxy"), "[proxy] no_proxy (inventory)")
    env_np = "no_proxy" if env.get("no_proxy") else "NO_PROXY"
    check_no_proxy(env.get(env_np), f"env var {env_np}")
    entries: list[str] = []
    for item in (
        *LOOPBACK,
        *cluster_addresses,
        *_split_list(inv.get("no_proxy")),
        *_split_list(env.get("no_proxy") or env.get("NO_PROXY")),
    ):
        item = str(item).strip()
        if item and item not in entries:
            entries.append(item)
    out["no_proxy"] = ",".join(entries)
    out["NO_PROXY"] = out["no_proxy"]
    return out


def run_proxy_env(
    settings: Mapping | None,
    file_proxy: Mapping[str, str] | None,
    inv_proxy: Mapping[str, str] | None,
    env: Mapping[str, str],
    cluster_addresses: Iterable[str],
) -> tuple[dict[str, str], dict[str, str]]:
    """``(public, secret)``: the proxy env ``inv launch`` gives the run, which ``inv preflight`` probes with too.

    Per variable: the run settings' ``http_proxy`` / ``https_proxy`` (flag > env > config file,
    :mod:`dapo_ops.control.settings`; ``none`` = no proxy) > hosts.toml ``[proxy]`` (non-empty values) > the user
    config's ``[proxy]`` > the operator's ``env`` (:func:`container_proxy_env`, which adds ``no_proxy``); then
    :func:`split_secret` (a URL with credentials goes to ``secret.env``, 0600, never argv or the spec). Raises
    :class:`ProxyError` for a malformed value."""
    merged = {**(file_proxy or {}), **{k: v for k, v in (inv_proxy or {}).items() if v}}
    for k in PROXY_VARS:
        v = (settings or {}).get(k)
        if v:
            merged[k] = v
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
    https answer reuses the http answer; a malformed URL is asked again, the question then starting with what
    was wrong (:func:`problem`'s line), 3 tries, then :class:`ProxyError`.
    """
    cur = dict(current or {})
    out: dict[str, str] = {}
    for var in PROXY_VARS:
        default = cur.get(var) or (out["http_proxy"] if var == "https_proxy" else "")  # http is asked first
        hint = f" [{display_url(default)}]" if default else ""
        why = ""
        for attempt in range(3):
            ans = prompt(f"{why}{var} (e.g. http://proxy:8080; 'none' for no proxy){hint}: ")
            if ans.strip() == "" and default:
                out[var] = default
                break
            try:
                out[var] = parse_answer(ans, var)
                break
            except ProxyError as e:
                if attempt == 2:
                    raise
                why = f"{e}; again: "
    return out
