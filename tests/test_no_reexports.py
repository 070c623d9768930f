"""No re-export shims (docs/design.md, "one place per concept"): a package ``__init__.py`` under ``dapo_ops/`` does not
import names from its own sub-modules to hand them out again; users import each name from the module that defines it.

An AST walk over every ``__init__.py``: an ``ImportFrom`` (absolute, or relative resolved against the package) whose
module is the package itself or one of its sub-modules is a re-export unless every name it imports is a sub-module of
the package (``from dapo_ops.cli import program``: a module, no name handed out). :data:`ALLOWED` lists the packages
that keep theirs, each with its reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PKG = REPO / "dapo_ops"

#: package -> why its ``__init__`` may still import names from its own sub-modules
ALLOWED = {
    "dapo_ops.core.classify": (
        "the __init__ defines classify() / classify_file() itself (imports decide/docs for them) and is the contract "
        "of docs/design.md 'Verdict' (CLASSES, PHASES, CLASS_TABLE, is_device_oom_line), used through the package by "
        "the supervisor, cli/classify.py and ~60 test lines; moving that contract is its own change"
    ),
}


def _is_submodule(pkg_dir: Path, name: str) -> bool:
    return (pkg_dir / f"{name}.py").is_file() or (pkg_dir / name / "__init__.py").is_file()


def reexports(root: Path) -> dict[str, list[str]]:
    """``{package: ["<line>: from <module> import <names>", ...]}`` for every ``__init__.py`` under ``root`` (a
    ``dapo_ops`` directory) that imports non-module names from its own package or its sub-modules (at any depth of
    the file: a lazy import inside a function counts too)."""
    found: dict[str, list[str]] = {}
    for init in sorted(root.rglob("__init__.py")):
        pkg_dir = init.parent
        pkg = ".".join((root.name, *pkg_dir.relative_to(root).parts))
        for node in ast.walk(ast.parse(init.read_text(), str(init))):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:  # relative: level 1 is this package
                base = pkg.split(".")[: len(pkg.split(".")) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module != pkg and not module.startswith(pkg + "."):
                continue
            names = [a.name for a in node.names]
            if module == pkg and all(_is_submodule(pkg_dir, n) for n in names):
                continue
            found.setdefault(pkg, []).append(f"{node.lineno}: from {module} import {', '.join(names)}")
    return found


def test_no_package_init_reexports_its_own_modules():
    got = reexports(PKG)
    bad = {pkg: lines for pkg, lines in got.items() if pkg not in ALLOWED}
    assert not bad, "package __init__ re-exports (import from the defining module instead): %s" % bad


def test_the_allow_list_names_only_packages_that_still_need_it():
    got = reexports(PKG)
    assert set(ALLOWED) <= set(got), "drop from ALLOWED (no re-export left): %s" % sorted(set(ALLOWED) - set(got))


def test_the_walk_sees_absolute_relative_and_lazy_reexports(tmp_path):
    """The check itself can fail: a shim in each form is reported, a sub-module import is not."""
    root = tmp_path / "dapo_ops"
    (root / "a" / "b").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "a" / "__init__.py").write_text(
        "from dapo_ops.a.m import f\nfrom .m import g\nfrom dapo_ops.a import b, m\n"
        "def lazy():\n    from dapo_ops.a.b.x import h\n"
    )
    (root / "a" / "m.py").write_text("def f(): ...\ndef g(): ...\n")
    (root / "a" / "b" / "__init__.py").write_text("from dapo_ops.a.b import x\nfrom dapo_ops.core import y\n")
    (root / "a" / "b" / "x.py").write_text("def h(): ...\n")
    assert reexports(root) == {
        "dapo_ops.a": [
            "1: from dapo_ops.a.m import f",
            "2: from dapo_ops.a.m import g",
            "5: from dapo_ops.a.b.x import h",
        ]
    }


if __name__ == "__main__":
    for pkg, lines in reexports(PKG).items():
        print(pkg, *lines, sep="\n  ")
