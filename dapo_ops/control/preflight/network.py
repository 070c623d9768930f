"""Network checks: ``proxy`` variables the container sees, ``swanlab`` reachable from the container, the
multi-host ``ray-port``; and the operator-side ``swanlab-key`` check (once per preflight, not per host:
:mod:`dapo_ops.control.swanlab_settings`). Pure except :func:`swanlab_key_check` reading the user config.

The ``swanlab`` check is shared with ``inv launch`` (:func:`tracker_urls` asks the probe for one GET of the
tracker's API root, :func:`tracker_check` reads the answer): both run it in the probe's one round trip.
"""

from __future__ import annotations

import sys
from typing import Any

from dapo_ops.control.preflight.plan_view import PlanView, plan_view
from dapo_ops.control.preflight.result import FAIL, OK, WARN, Check
from dapo_ops.core import policy


def _display_url(url: str) -> str:
    from dapo_ops.core import redact

    return redact.display_url(url)


#: the API root SwanLab's cloud mode talks to when no private server is set (swanlab 0.10
#: sdk/internal/settings: ``api_host`` default; docs/params.md ``SWANLAB_HOST``)
SWANLAB_CLOUD_API = "https://api.swanlab.cn"

#: what failed (the probe's ``kind``, dapo_ops/agent/preflight_probe.py ``_http_kind``) -> the word of the one line
_KIND_WORDS = {"dns": "DNS", "connect": "connect", "timeout": "timeout", "proxy": "proxy", "tls": "TLS"}


def tracker_urls(pv: PlanView | None) -> dict:
    """``{"swanlab": url}`` the probe GETs from the container when the run logs to SwanLab in cloud mode (the API
    host the run's env names, ``SWANLAB_API_HOST`` from :meth:`dapo_ops.control.swanlab_settings.SwanlabSettings.public_env`,
    else :data:`SWANLAB_CLOUD_API`); ``{}`` for ``local`` / ``offline`` / ``disabled`` or no SwanLab logger. Pure."""
    if pv is None or "swanlab" not in pv.logger:
        return {}
    if pv.env.get("SWANLAB_MODE", "cloud") not in ("cloud", "online"):
        return {}
    return {"swanlab": pv.env.get("SWANLAB_API_HOST") or SWANLAB_CLOUD_API}


def tracker_check(p: dict) -> Check | None:
    """The ``swanlab`` check from the probe's answer ``p`` (its ``http["swanlab"]``; None when not asked): ok, or
    fail with one line naming the URL, what failed (``dns`` / ``connect`` / ``timeout`` / ``proxy`` / ``tls``) and
    the fix for that kind."""
    sw = (p.get("http") or {}).get("swanlab")
    if sw is None:
        return None
    if sw.get("reachable"):
        return Check(
            "swanlab", OK, f"{sw['url']} reachable from the container (HTTP {sw.get('status')}, {sw.get('seconds')} s)"
        )
    kind = sw.get("kind") or "connect"
    env = p.get("env") or {}
    scheme = str(sw["url"]).split(":", 1)[0].lower()
    via = env.get(f"{scheme}_proxy") or env.get(f"{scheme.upper()}_PROXY") or ""
    what = _KIND_WORDS.get(kind, kind) + (f" {_display_url(via)}" if kind == "proxy" and via else "")
    if kind == "proxy":
        fix = "check the proxy (hosts.toml [proxy], --http-proxy/--https-proxy), or use " + policy.SWANLAB_OFFLINE_WORDS
    elif kind == "tls":
        fix = (
            "check SWANLAB_HOST's scheme (http:// for a plain-HTTP server) and the container's CA certificates, "
            "or use " + policy.SWANLAB_OFFLINE_WORDS
        )
    else:
        fix = "fix [proxy] in hosts.toml or " + policy.SWANLAB_HOST_WORDS + ", or use " + policy.SWANLAB_OFFLINE_WORDS
    return Check(
        "swanlab", FAIL, f"SwanLab host {sw['url']} not reachable from the container: {what}: {sw.get('error')}", fix
    )


def _network_checks(host, pv: PlanView | None, p: dict, inv_proxy: dict | None, ray: dict | None) -> list[Check]:
    out: list[Check] = []
    env = p.get("env") or {}
    set_vars = [k for k in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY") if env.get(k)]
    if set_vars:
        shown = ", ".join(f"{k}={_display_url(env[k])}" for k in set_vars if k.islower()) or ", ".join(
            f"{k}={_display_url(env[k])}" for k in set_vars
        )
        out.append(
            Check(
                "proxy",
                OK,
                f"in the container: {shown}"
                + (
                    f"; no_proxy={env.get('no_proxy') or env.get('NO_PROXY')}"
                    if env.get("no_proxy") or env.get("NO_PROXY")
                    else ""
                ),
            )
        )
    elif inv_proxy and any(inv_proxy.get(k) for k in ("http_proxy", "https_proxy")):
        out.append(
            Check(
                "proxy",
                WARN,
                "hosts.toml [proxy] is set but the container sees no proxy variables",
                "recreate the container (inv container.create) or pass the proxy in the run env",
            )
        )
    else:
        out.append(Check("proxy", OK, "no proxy configured (direct connections)"))
    tc = tracker_check(p)
    if tc is not None:
        out.append(tc)
    if ray:
        port = ray["port"]
        if ray.get("is_head"):
            ls = p.get("listen") or {}
            if ls.get("free"):
                out.append(Check("ray-port", OK, f"Ray head port {port} free on this head"))
            else:
                out.append(
                    Check(
                        "ray-port",
                        FAIL,
                        f"Ray head port {port} is in use on the head ({ls.get('error')})",
                        "a Ray head from an earlier run? `ray stop --force` in the container, or pick another port",
                    )
                )
        else:
            for t in p.get("tcp") or []:
                if t.get("reachable"):
                    state = "a Ray head listens" if t.get("open") else "route ok, nothing listens yet"
                    out.append(Check("ray-port", OK, f"head {t['host']}:{t['port']} reachable ({state})"))
                else:
                    out.append(
                        Check(
                            "ray-port",
                            FAIL,
                            f"head {t['host']}:{t['port']} not reachable from this host: {t.get('error')}",
                            "open the Ray port between the hosts (firewall) or fix the head address",
                        )
                    )
    return out


def swanlab_key_check(
    plan: Any, env: dict | None = None, file_cfg: dict | None = None, isatty: bool | None = None, mode_flag: str = ""
) -> Check | None:
    """Cloud-mode SwanLab without an API key and without a TTY fails at verl's ``Tracking()`` init, after the
    models loaded (swanlab 0.10.3, observed: tests/test_swanlab_tty.py): catch it here. Uses :func:`dapo_ops.control.swanlab_settings.resolve` with the operator's
    env and user config. ``None`` when the plan does not log to SwanLab."""
    import os

    from dapo_ops.control import swanlab_settings
    from dapo_ops.control import swanlab_values
    from dapo_ops.control import userconfig

    pv = plan_view(plan)
    if pv is not None and "swanlab" not in pv.logger and pv.logger:
        return None
    env = dict(os.environ if env is None else env)
    if pv is not None and pv.env.get("SWANLAB_MODE") and "SWANLAB_MODE" not in env:
        env["SWANLAB_MODE"] = pv.env["SWANLAB_MODE"]
    file_cfg = file_cfg or {}  # the caller's [swanlab] table: the program run read the file once
    tty = sys.stdin.isatty() if isatty is None else isatty
    try:
        s = swanlab_settings.resolve(env, file_cfg, mode_flag=mode_flag or None, stdin_isatty=False)
    except swanlab_values.SwanlabConfigError as e:
        if tty:
            return Check(
                "swanlab-key",
                WARN,
                "SwanLab cloud mode has no API key yet; launch will ask for it",
                "set SWANLAB_API_KEY or [swanlab] api_key in the user config",
            )
        msg, _, fix = str(e).partition(": ")
        return Check("swanlab-key", FAIL, msg, fix)
    if s.mode == "cloud":
        loose = userconfig.mode_warning() if s.sources.get("api_key") == "file" else None
        if loose:  # the key sits in a file others can read (launch prints the same line, cli/launch.py)
            path, _, mode = loose.partition(" has mode ")
            return Check(
                "swanlab-key",
                WARN,
                f"cloud mode, API key from {path}, which has mode {mode.split()[0]}: readable by other users",
                f"chmod 600 {path}",
            )
        return Check("swanlab-key", OK, f"cloud mode, API key from {s.sources.get('api_key', '?')}")
    return Check("swanlab-key", OK, f"SwanLab mode {s.mode}: no key needed")
