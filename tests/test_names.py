"""Names a reader can trust (issue 46 item 5): one module name, one module.

A module's file name is what a reader sees in a traceback, a ``:mod:`` cite and an import line; when two modules of
the package share one (``probe.py`` three times: the in-container status op, the preflight round trip and the
status look), ``probe.collect`` says nothing about which. Every module of ``dapo_ops/`` has its own file name; the
package markers ``__init__.py`` and ``__main__.py`` are the only names that repeat.
"""

from __future__ import annotations

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
