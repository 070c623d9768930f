"""SwanLab values checked one at a time: modes, hosts, the run id derived from a dapo-ops run id, and the
``secret.env`` text; :class:`SwanlabConfigError` for every bad one. Stdlib only;
:mod:`dapo_ops.control.swanlab_settings` (the resolution: env > config file > prompt) uses these; callers import
them from here.

Facts (swanlab.md = the project's SwanLab reference): SwanLab 0.10 reads a host without a scheme as ``https://``
and drops any path (appending ``/api`` itself), 0.7 wants ``/api``; modes are ``cloud|local|offline|disabled``
(0.10's ``online`` is an alias); a SwanLab run id is 21 lowercase alphanumerics.
"""

from __future__ import annotations

import hashlib
import re
import string
from typing import Any, Mapping
from urllib.parse import urlsplit

from dapo_ops.core import redact

MODES: tuple[str, ...] = ("cloud", "local", "offline", "disabled")
_MODE_ALIASES = {"online": "cloud"}


class SwanlabConfigError(ValueError):
    """One line: what is missing or wrong in the SwanLab settings, and how to fix it."""


def swanlab_run_id(run_id: str) -> str:
    """Deterministic 21-character ``[a-z0-9]`` SwanLab run id for a dapo-ops run id.

    Same input → same id, so every attempt of one run resumes the same SwanLab run.
    """
    alphabet = string.digits + string.ascii_lowercase
    n = int.from_bytes(hashlib.sha256(run_id.encode()).digest(), "big")
    out = []
    for _ in range(21):
        n, r = divmod(n, 36)
        out.append(alphabet[r])
    return "".join(out)


def is_swanlab_run_id(value: str) -> bool:
    """True for the shape :func:`swanlab_run_id` gives (21 characters ``[a-z0-9]``): a ``SWANLAB_RUN_ID`` read back
    from an earlier run's spec.json is kept only in that shape."""
    return len(value) == 21 and all(ch in string.digits + string.ascii_lowercase for ch in value)


def normalize_mode(value: str, source: str) -> str:
    """``cloud|online|local|offline|disabled`` (any case) → canonical mode; else SwanlabConfigError."""
    v = clean_value(value).lower()
    v = _MODE_ALIASES.get(v, v)
    if v not in MODES:
        raise SwanlabConfigError(
            f"SwanLab mode {value!r} (from {source}) is not valid: use one of cloud, local, offline, disabled"
        )
    return v


def clean_value(value: Any) -> str:
    """Strip whitespace, a trailing ``\\r`` and one pair of surrounding quotes.

    Keys copied through SSH or shell scripts often pick these up, which SwanLab then
    rejects as ``Invalid character in api key`` (failure-classes.md auth-error).
    """
    s = str(value).strip()
    if len(s) >= 2 and s[0] == s[-1] and s[0] in "'\"":
        s = s[1:-1].strip()
    return s


#: ``host[:port]`` of a server: a DNS / container name, an IPv4 address or a bracketed IPv6 address, optional port
_HOSTPORT = re.compile(r"(?:[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?")


def normalize_host(value: str, source: str) -> str:
    """Server root ``scheme://host[:port]`` from what the user gave.

    A trailing ``/api`` (SwanLab 0.7 style) and trailing slashes are removed. Raises
    :class:`SwanlabConfigError` when the scheme is missing (SwanLab 0.10 would silently
    assume https) or another path is present (0.10 strips paths, so it cannot work).
    """
    v = clean_value(value).rstrip("/")
    if redact.has_credentials(v):  # never echo it: the message names the source only
        raise SwanlabConfigError(
            f"the SwanLab host from {source} carries credentials (user:password@ in the URL), which would be stored "
            f"in spec.json and reach verl's environment: give the server root without them (SwanLab logs in with "
            f"SWANLAB_API_KEY)"
        )
    if "://" not in v:
        if not _HOSTPORT.fullmatch(v.split("/", 1)[0]):  # 'not a url': no server name to put a scheme on
            raise SwanlabConfigError(
                f"SwanLab host {v!r} (from {source}) is not a server address: give the self-hosted server's root "
                f"URL, e.g. http://swanlab.example.com:8000 (or unset it for SwanLab's cloud)"
            )
        raise SwanlabConfigError(
            f"SwanLab host {v!r} (from {source}) has no scheme: write http://{v} for a plain-HTTP "
            f"self-hosted server or https://{v} (SwanLab itself would assume https)"
        )
    parts = urlsplit(v)
    if parts.scheme not in ("http", "https") or not _HOSTPORT.fullmatch(parts.netloc):
        raise SwanlabConfigError(
            f"SwanLab host {v!r} (from {source}) must look like http://server:port or https://server"
        )
    path = parts.path.rstrip("/")
    if path.endswith("/api"):
        path = path[: -len("/api")]
    if path:
        raise SwanlabConfigError(
            f"SwanLab host {v!r} (from {source}) has a path {path!r}: give the server root "
            "(SwanLab 0.10 drops any path and appends /api itself)"
        )
    return f"{parts.scheme}://{parts.netloc}"


def env_file_text(secret_env: Mapping[str, str]) -> str:
    """``KEY=VALUE`` lines for ``<run_dir>/secret.env`` (write it 0600 via stdin, e.g. ``Target.put_text``).

    Matches ``supervisor.config.parse_env_file``: a value that itself starts and ends with the same
    quote, or has leading/trailing blanks, is wrapped in one more pair of quotes so it
    survives that parser's whitespace and one-level quote stripping.
    Raises :class:`SwanlabConfigError` for an invalid name or a value with a newline, CR or NUL.
    """
    lines = []
    for k, v in secret_env.items():
        if not (k and (k[0].isalpha() or k[0] == "_") and all(c.isalnum() or c == "_" for c in k)):
            raise SwanlabConfigError(f"secret env name {k!r} is not a valid variable name")
        v = str(v)
        if any(c in v for c in "\n\r\0"):
            raise SwanlabConfigError(f"secret {k} contains a newline, CR or NUL: remove it")
        if (len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"") or v != v.strip():
            v = f"'{v}'"
        lines.append(f"{k}={v}\n")
    return "".join(lines)
