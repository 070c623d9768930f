"""Repository contracts of the redesign (issue 18) that a reader relies on: checked, not hoped.

- every module in ``dapo_ops/`` opens with a docstring naming its one concept;
- exactly one code path puts code into a container: the bundle install (``dapo_ops/control/remote/bundle.py``);
  no ``inspect.getsource``, no source string compiled and exec'd, no ``.replace('if __name__...')`` anywhere;
- every remote operation the control side starts names a module of the shipped bundle (``python -m dapo_ops.agent.<op>``);
- docs/design.md's module map is generated from the modules' docstrings (tests/test_design_map.py), and every path,
  module and function cited in docs and code exists (tests/test_docs_cites.py);
- no import cycle.
The import tiers themselves are import-linter contracts (pyproject.toml ``[tool.importlinter]``, run by ``.ci/run``).
"""

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PKG = REPO / "dapo_ops"
MODULES = sorted(p for p in PKG.rglob("*.py") if "__pycache__" not in p.parts)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(REPO)))
def test_module_names_its_one_concept(path):
    """One concept per module, whatever its size (issue 30 item 8: the anchors, fabric's connection.py or
    SkyPilot's job_lib.py, are large modules of one concept; a line count split concepts apart): every module opens
    with a docstring whose first line names what it holds (docs/design.md's module map reads it)."""
    import ast

    doc = ast.get_docstring(ast.parse(path.read_text()))
    first = (doc or "").strip().splitlines()[0] if (doc or "").strip() else ""
    assert len(first) >= 12, f"{path.relative_to(REPO)}: no docstring naming the module's concept"


def test_one_code_path_into_the_container():
    pat = re.compile(r"getsource\(|(?<![\w.])exec\(|\bcompile\([^)]*['\"]exec['\"]|replace\(\s*['\"]if __name__")
    hits = []
    for path in MODULES:
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if pat.search(line):
                hits.append(f"{path.relative_to(REPO)}:{i}")
    assert not hits, hits
    # ... and the one way in is the bundle's installer: a tar of core/ + agent/ unpacked under <runs_dir>/.dapo_ops
    src = (PKG / "control" / "remote" / "bundle.py").read_text()
    assert "tarfile.open" in src and 'SHIPPED = ("core", "agent")' in src


def test_every_agent_op_the_control_side_starts_is_shipped():
    from dapo_ops.control.remote import bundle as remote_bundle

    shipped = {n[:-3].replace("/", ".").removesuffix(".__init__") for n in remote_bundle.bundle_files()}
    ops = set()
    for path in MODULES:
        ops.update(re.findall(r"-m\s+dapo_ops\.((?:agent|core)(?:\.\w+)+)", path.read_text()))
    assert ops, "no `-m dapo_ops.agent.<op>` invocation found"
    assert {f"{op}" for op in ops} <= shipped, sorted(ops - shipped)


def test_no_import_cycle():
    """No two modules of the package import each other, directly or through others, at any level (function-level
    imports included: grimp, the graph import-linter checks its contracts on)."""
    import grimp

    graph = grimp.build_graph("dapo_ops")
    cycles = []
    for mod in sorted(graph.modules):
        for dep in graph.find_modules_directly_imported_by(mod):
            if graph.chain_exists(importer=dep, imported=mod):
                cycles.append((mod, dep))
    assert not cycles, cycles
