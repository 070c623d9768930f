"""The Hydra compose check of generated overrides, run with the container's OWN hydra-core against its own verl
config (stdlib at import; ``hydra`` / ``omegaconf`` are imported inside :func:`compose_errors` only, from the
Python that runs verl: verl's entry points are ``@hydra.main`` apps, so that Python has them).

``PYTHONPATH=<bundle> python3 -m dapo_ops.agent.compose < request.json`` (preflight runs it as a child of
:mod:`dapo_ops.agent.preflight`; :mod:`dapo_ops.control.validate` calls :func:`compose_errors` in-process) reads
``{"config_root", "config_dir", "config_name", "overrides"}`` on stdin and prints one JSON line
``{"ok": bool, "errors": [[line, ...], ...]}``; a missing hydra is the single error.

``compose_errors`` returns every override error it can find: after an error that names one override it drops that
override and composes again (at most ``max_rounds`` times), so one run lists all unknown keys. The messages are
Hydra's own (``Could not override '...'``: ``hydra/_internal/config_loader_impl.py``); the CWD is the root holding
``verl/trainer/config`` while composing (the yaml's ``hydra.searchpath`` is CWD-relative).

:func:`fingerprint` is what a compose result depends on, read without importing hydra (stdlib, a few ms): two
Pythons with the same fingerprint compose the same request identically, so preflight composes once per group
of hosts (:mod:`dapo_ops.control.preflight.group`).
"""

from __future__ import annotations

import json
import os
import re
import sys
import warnings


def error_lines(exc) -> list[str]:
    """The distinct non-empty lines of ``exc`` and its causes / contexts, outermost first."""
    out = []
    seen = set()
    e = exc
    visited = set()
    while e is not None and id(e) not in visited:
        visited.add(id(e))
        for line in str(e).splitlines():
            line = line.rstrip()
            if line.strip() and line not in seen:
                seen.add(line)
                out.append(line)
        e = e.__cause__ or e.__context__
    return out


_KEY_RES = (
    re.compile(r"Could not override '([^']+)'"),
    re.compile(r"Could not append to config\. An item is already at '([^']+)'"),
    re.compile(r"Could not delete from config\. '([^']+)'"),
    re.compile(r"Error parsing override '([^']+)'"),
)


def _culprit(lines, overrides):
    for line in lines:
        for rx in _KEY_RES:
            m = rx.search(line)
            if not m:
                continue
            key = m.group(1)
            for i, ov in enumerate(overrides):
                k = ov.split("=", 1)[0].lstrip("+~")
                if ov == key or k == key:
                    return i
    return None


def compose_errors(config_root, config_dir, config_name, overrides, max_rounds=30) -> list[list[str]]:
    """Error blocks (each a list of lines, Hydra's words) of composing ``overrides``; [] when it composes.

    :raises ImportError: hydra-core / omegaconf not importable in this Python.
    """
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    overrides = list(overrides)
    errors = []
    old = os.getcwd()
    try:
        os.chdir(config_root)
        for _ in range(max_rounds):
            if GlobalHydra.instance().is_initialized():
                GlobalHydra.instance().clear()
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    with initialize_config_dir(config_dir=config_dir, version_base=None):
                        cfg = compose(config_name=config_name, overrides=overrides)
                        OmegaConf.resolve(cfg)
                return errors
            except Exception as exc:  # Hydra raises several exception types; the text is what matters
                lines = error_lines(exc)
                errors.append(lines)
                i = _culprit(lines, overrides)
                if i is None:
                    return errors
                del overrides[i]
        return errors
    finally:
        os.chdir(old)
        try:
            if GlobalHydra.instance().is_initialized():
                GlobalHydra.instance().clear()
        except Exception:
            pass


_VERSION_RE = re.compile(r"""^__version__\s*(?::\s*str\s*)?=\s*['"]([^'"]+)['"]""", re.M)
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
        try:
            with open(f, encoding="utf-8", errors="replace") as fh:
                m = _VERSION_RE.search(fh.read())
        except OSError:
            continue
        if m:
            return m.group(1)
    return "?" + (locs[0] if locs else spec.origin or name)


def fingerprint(req: dict, env=None) -> str | None:
    """What composing ``req`` (``{config_root, config_dir, config_name, overrides}``) depends on, as a hex digest:
    the request itself, this checker's source (compose.py), the Python minor version, the ``__version__`` of
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
        with open(os.path.abspath(__file__), "rb") as fh:
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
    seen: set = set()
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


def main() -> int:
    """The op: request JSON on stdin, answer JSON on stdout (module docstring); exit 0."""
    req = json.load(sys.stdin)
    try:
        errs = compose_errors(req["config_root"], req["config_dir"], req["config_name"], req.get("overrides") or [])
        out = {"ok": not errs, "errors": errs}
    except ImportError as exc:
        out = {"ok": False, "errors": [["hydra-core is not importable in this Python: %s" % exc]]}
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
