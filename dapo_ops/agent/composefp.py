"""The fingerprint of a Hydra compose check (:mod:`dapo_ops.agent.compose`): what its result depends on, read
without importing hydra (stdlib, ~5-10 ms). Two Pythons with the same fingerprint compose the same request
identically, so ``inv preflight`` composes once per group of hosts (:mod:`dapo_ops.control.preflight.group`)
and the probe keys its in-container compose cache by it (:mod:`dapo_ops.agent.preflight_probe`).

Where the facts come from: Hydra loads the primary config from ``config_dir`` and the groups of its defaults
list from the search path, ``hydra.searchpath`` (``file://verl/trainer/config`` in
``verl/experimental/one_step_off_policy/config/one_step_off_ppo_trainer.yaml``; relative to the CWD, which the
compose sets to ``config_root``), plus hydra's own ``pkg://hydra.conf`` (covered by hydra's version).
OmegaConf's ``oc.env`` resolver reads the environment while resolving.
"""

from __future__ import annotations

import json
import os
import re
import sys
from typing import Any

from dapo_ops.agent import verlinfo

#: the compose checker whose source is part of every fingerprint
CHECKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "compose.py")
#: ``hydra.searchpath`` entries in yaml text or overrides (``file://verl/trainer/config``: CWD-relative)
_FILE_SP_RE = re.compile(r"file://([^\s,\[\]'\"]+)")
#: interpolations whose value comes from the environment (OmegaConf's ``oc.env``; the pre-2.1 ``env`` resolver)
_ENV_MARKS = ("oc.env", "${env:")


def module_version(name: str) -> str | None:
    """``__version__`` of the package ``name`` this Python would import, read as text from its ``__init__.py``
    or ``version.py`` (omegaconf keeps it there: ``omegaconf/version.py``); nothing is imported (the parent
    search of ``importlib.util.find_spec`` only). ``None`` when the package is not found; ``"?<path>"`` when
    found without a readable version (equal only for the same path)."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    locs = list(spec.submodule_search_locations or [])
    files = [os.path.join(locs[0], f) for f in ("__init__.py", "version.py")] if locs else [spec.origin or ""]
    for f in files:
        v = verlinfo.version_in_file(f)
        if v is not None:
            return v
    return "?" + (locs[0] if locs else spec.origin or name)


def fingerprint(req: dict[str, Any], env: dict[str, str] | None = None) -> str | None:
    """What composing ``req`` (``{config_root, config_dir, config_name, overrides}``) depends on, as a hex digest:
    the request itself, the checker's source (:data:`CHECKER`), the Python minor version, the ``__version__`` of
    the hydra and omegaconf this Python would import (:func:`module_version`), and the path + bytes of every
    ``.yaml``/``.yml`` file the compose can load: ``config_dir`` and every ``file://`` search-path dir named by
    the overrides or by those files (relative ones from ``config_root``, the CWD of the compose), followed
    transitively. When an override or a file uses an environment interpolation (``oc.env``), ``env`` (default
    ``os.environ``) is part of it too. ``None`` (never shared) when a file is unreadable or a ``pkg://``
    search path names a Python package (its files are not followed here)."""
    import hashlib

    root = req.get("config_root") or ""
    ovs = [str(o) for o in req.get("overrides") or []]
    h = hashlib.sha256(json.dumps(req, sort_keys=True).encode())
    try:
        with open(CHECKER, "rb") as fh:
            h.update(fh.read())
    except OSError:
        return None
    h.update(("\0py=%d.%d" % sys.version_info[:2]).encode())
    for mod in ("hydra", "omegaconf"):
        h.update(("\0%s=%s" % (mod, module_version(mod))).encode())
    text = "\n".join(ovs)
    if "pkg://" in text:
        return None
    env_dep = any(m in text for m in _ENV_MARKS)
    todo = [req.get("config_dir") or ""] + _FILE_SP_RE.findall(text)
    seen: set[str] = set()
    while todo:
        d = todo.pop(0)
        d = os.path.normpath(d if os.path.isabs(d) else os.path.join(root, d))
        real = os.path.realpath(d)
        if real in seen:
            continue
        seen.add(real)
        h.update(("\0dir " + d).encode())
        if not os.path.isdir(d):
            h.update(b" missing")
            continue
        for base, dirs, files in os.walk(d, followlinks=True):
            keep = []
            for x in sorted(dirs):
                r = os.path.realpath(os.path.join(base, x))
                if x != "__pycache__" and r not in seen:
                    seen.add(r)
                    keep.append(x)
            dirs[:] = keep
            for f in sorted(files):
                if not f.endswith((".yaml", ".yml")):
                    continue
                path = os.path.join(base, f)
                try:
                    with open(path, "rb") as fh:
                        data = fh.read()
                except OSError:
                    return None
                h.update(("\0%s %d\0" % (path, len(data))).encode())
                h.update(data)
                body = data.decode("utf-8", "replace")
                if "pkg://" in body:
                    return None
                env_dep = env_dep or any(m in body for m in _ENV_MARKS)
                todo += _FILE_SP_RE.findall(body)
    if env_dep:
        h.update(json.dumps(sorted((os.environ if env is None else env).items())).encode())
    return h.hexdigest()[:32]
