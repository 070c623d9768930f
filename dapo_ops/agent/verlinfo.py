"""Where verl is and which version, read WITHOUT importing it (STDLIB ONLY): the one reader of the verl version,
used by ``inv hosts``, ``inv container.list`` and preflight (``import verl`` pulls torch: seconds, and may crash).

``PYTHONPATH=<bundle> python3 -m dapo_ops.agent.verlinfo [<workdir>] [--entry <module>]`` prints one JSON line
``{"python": "3.11.7", "found", "version", "path", "entry", "entry_found"}`` (:func:`verl_info`). ``<workdir>``
(e.g. a verl checkout at ``/verl``) is searched first, as verl's own entry points run from it.

The version comes from where verl 0.9.1 itself reads it: ``verl/version/version`` (``verl/__init__.py:37-40`` opens
that file), else a literal ``__version__ = "..."`` in ``verl/__init__.py`` (older trees, the sandbox stand-in),
else the installed distribution's metadata (``importlib.metadata.version("verl")``).
"""

from __future__ import annotations

import json
import os
import platform
import re
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec


#: a literal ``__version__ = "x"`` (or ``__version__: str = "x"``) at the start of a line
_VERSION_RE = re.compile(r"""^__version__\s*(?::\s*str\s*)?=\s*['"]([^'"]+)['"]""", re.M)


def version_in_file(path: str) -> str | None:
    """A literal ``__version__`` read as text from a package's ``__init__.py`` / ``version.py`` (no import);
    None when the file or the line is absent. The one ``__version__`` reader (verl here, hydra and omegaconf in
    :func:`dapo_ops.agent.composefp.module_version`)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            m = _VERSION_RE.search(fh.read())
    except OSError:
        return None
    return m.group(1) if m else None


def verl_version(root: str) -> str | None:
    """The version of the verl package at ``root`` (its directory), or None when no source names one."""
    try:
        with open(os.path.join(root, "version", "version"), encoding="utf-8") as fh:
            return fh.read().strip() or None
    except OSError:
        pass
    v = version_in_file(os.path.join(root, "__init__.py"))
    if v is not None:
        return v
    try:
        from importlib import metadata

        return metadata.version("verl")
    except Exception:  # no distribution metadata (a source checkout on sys.path)
        return None


def _find(name: str) -> ModuleSpec | None:
    import importlib.util

    try:
        return importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None


def verl_info(entry_module: str | None = None) -> dict[str, Any]:
    """verl location + version as this Python would import it (``importlib.util.find_spec``; nothing imported).

    :returns: ``{"found": bool, "version": str | None, "path": str | None, "entry": entry_module,
        "entry_found": bool | None}``; ``entry_found`` says whether ``entry_module`` (e.g.
        ``verl.trainer.main_ppo``) exists as a file under the package (None when not asked).
    """
    out = {"found": False, "version": None, "path": None, "entry": entry_module, "entry_found": None}
    spec = _find("verl")
    if spec is not None and spec.submodule_search_locations:
        root = list(spec.submodule_search_locations)[0]
        out.update(found=True, path=root, version=verl_version(root))
    if entry_module:
        parts = entry_module.split(".")
        top = _find(parts[0])
        found = False
        if top is not None and top.submodule_search_locations:
            for base in top.submodule_search_locations:
                p = os.path.join(base, *parts[1:])
                if os.path.isfile(p + ".py") or os.path.isfile(os.path.join(p, "__init__.py")):
                    found = True
                    break
        out["entry_found"] = found
    return out


def main(argv: list[str] | None = None) -> int:
    """The op's command line (module docstring); always exit 0 (a missing verl is data)."""
    argv = sys.argv[1:] if argv is None else argv
    entry = None
    if "--entry" in argv:
        i = argv.index("--entry")
        entry = argv[i + 1] if i + 1 < len(argv) else None
        argv = argv[:i] + argv[i + 2 :]
    if argv and argv[0] and os.path.isdir(argv[0]):
        sys.path.insert(0, argv[0])
    out = dict(verl_info(entry), python=platform.python_version())
    sys.stdout.write(json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
