"""Names a reader can trust (issue 46 item 5): one module name, one module, and one name for it in every import.

A module's file name is what a reader sees in a traceback, a ``:mod:`` cite and an import line; when two modules of
the package share one (``probe.py`` three times: the in-container status op, the preflight round trip and the
status look), ``probe.collect`` says nothing about which. Every module of ``dapo_ops/`` has its own file name; the
package markers ``__init__.py`` and ``__main__.py`` are the only names that repeat.

Inside the package a module of the package is imported under its own name (``from dapo_ops.control.status import
look``), never renamed (``... import look as svc``: ``svc`` meant three different modules); where a local name would
shadow it, the module is imported fully qualified (``import dapo_ops.control.launch.plan``). No name imported from
the package is renamed either. Third-party and stdlib aliases (``import pyarrow as pa``) are not this test's.
"""

from __future__ import annotations

import ast
import collections
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "dapo_ops"
#: file names that repeat by Python's rules, not by choice
MAY_REPEAT = frozenset({"__init__.py", "__main__.py"})


def repeated_module_names(pkg: Path) -> dict[str, list[str]]:
    """``{file name: [paths relative to pkg]}`` for every ``.py`` file name that more than one module of ``pkg`` bears
    (outside :data:`MAY_REPEAT`)."""
    by_name: dict[str, list[str]] = collections.defaultdict(list)
    for p in sorted(pkg.rglob("*.py")):
        if p.name not in MAY_REPEAT:
            by_name[p.name].append(p.relative_to(pkg).as_posix())
    return {n: ps for n, ps in by_name.items() if len(ps) > 1}


def test_every_module_of_the_package_has_a_file_name_of_its_own():
    twins = repeated_module_names(PKG)
    assert not twins, (
        "modules that share a file name (rename one with `git mv` to the name of what it holds, then regenerate the "
        "module map: .venv/bin/python tests/test_design_map.py): "
        + "; ".join(f"{n}: {', '.join(ps)}" for n, ps in sorted(twins.items()))
    )


def test_the_check_sees_twins(tmp_path):
    """Not blind: two ``probe.py`` in different folders are reported, package markers are not."""
    for rel in ("a/probe.py", "b/probe.py", "a/__init__.py", "b/__init__.py", "b/__main__.py", "c/__main__.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text('"""x."""\n')
    assert repeated_module_names(tmp_path) == {"probe.py": ["a/probe.py", "b/probe.py"]}


def renaming_imports(pkg: Path) -> list[str]:
    """``path:line: statement`` for every import inside ``pkg`` that renames a name of the package (``dapo_ops.*``
    or a relative import) with ``as``."""
    out = []
    for p in sorted(pkg.rglob("*.py")):
        for n in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(n, ast.ImportFrom) and (n.level or (n.module or "").split(".")[0] == "dapo_ops"):
                src = "." * n.level + (n.module or "")
                out += [
                    f"{p.relative_to(pkg).as_posix()}:{n.lineno}: from {src} import {a.name} as {a.asname}"
                    for a in n.names
                    if a.asname and a.asname != a.name
                ]
            elif isinstance(n, ast.Import):
                out += [
                    f"{p.relative_to(pkg).as_posix()}:{n.lineno}: import {a.name} as {a.asname}"
                    for a in n.names
                    if a.asname and a.name.split(".")[0] == "dapo_ops"
                ]
    return out


def test_no_import_inside_the_package_renames_a_module_or_name_of_the_package():
    renamed = renaming_imports(PKG)
    assert not renamed, (
        "imports that rename a dapo_ops module or name (import it under its own name; where a local name shadows "
        "it, `import dapo_ops.<path>` and write the qualified name): " + "; ".join(renamed)
    )


def test_the_alias_check_sees_renames(tmp_path):
    """Not blind: a renamed module, a renamed name, a relative rename and an ``import ... as`` of the package are
    reported; stdlib aliases and plain imports are not."""
    (tmp_path / "m.py").write_text(
        "import json as jsonlib\n"
        "import pyarrow as pa\n"
        "import dapo_ops.core.runstate as rs\n"
        "from dapo_ops.control.status import look\n"
        "from dapo_ops.control.status import look as svc\n"
        "from dapo_ops.core.features import ALL as FEATURE_NAMES\n"
        "from . import sibling as sib\n"
        "def f():\n"
        "    from dapo_ops.core import runstate as _rs\n"
    )
    assert [r.split(": ", 1)[1] for r in renaming_imports(tmp_path)] == [
        "import dapo_ops.core.runstate as rs",
        "from dapo_ops.control.status import look as svc",
        "from dapo_ops.core.features import ALL as FEATURE_NAMES",
        "from . import sibling as sib",
        "from dapo_ops.core import runstate as _rs",
    ]
