"""Every repository path, module and function the docs cite exists (issue 30 item 9: design.md named about a dozen
modules and functions that no longer existed, and the old check looked only at ``dapo_ops/...``-prefixed paths).

Read: ``README.md``, ``docs/*.md``, ``gpu/README.md``, ``sandbox/README.md`` and ``bench/*.md``. Checked, in backticked
spans of prose and in the code blocks:

- paths: ``dapo_ops/...``, the tier-relative ``core/...``, ``agent/...``, ``control/...``, ``cli/...`` (under
  ``dapo_ops/``), and ``tests/``, ``docs/``, ``bench/``, ``gpu/``, ``sandbox/`` paths (a ``:line`` suffix is
  dropped; a path with a ``<placeholder>`` or a ``*`` is a pattern and stops there);
- dotted names whose first part is ``dapo_ops``, ``tasks`` (the repository's tasks.py) or the name of a module or
  package of the package (``ladder.decide``, ``bundle.run_op``, ``control.launch.service.LaunchProgress``,
  ``dapo_ops.agent.runprobe``): the module is imported and each further part must be a submodule, an attribute, or an
  attribute or field of a class the module defines (``target.put_text`` is ``Target.put_text``); where a short
  name fits several modules (``preflight``: cli/preflight.py and the package control/preflight/) one of them must have it;
- a ``<name>.py`` file name: some module of the package has that name.

verl's own modules (``verl.trainer.main_ppo``) and files are verl's, not checked here. The few dotted spellings
that are no module reference (a spec key that shares a module's name) are listed in :data:`NOT_CODE` with why.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parent.parent
PKG = REPO / "dapo_ops"
DOCS = sorted(
    {REPO / "README.md", REPO / "gpu" / "README.md", REPO / "sandbox" / "README.md"}
    | set((REPO / "docs").glob("*.md"))
    | set((REPO / "bench").glob("*.md"))
)

#: dotted spellings in the docs that share a module's name but cite no code (why in the value)
NOT_CODE = {
    "learned.used": "spec key `learned` field `used` (docs/design.md run spec)",
    "verdict.detail.phase": "run.json's verdict record: its detail's phase field",
    "status.stale_after_s": "a key of invoke's config file (invoke.yaml), read by cli/status.py",
    "memory.used": "an nvidia-smi --query-gpu field",
    "memory.total": "an nvidia-smi --query-gpu field",
    "memory.free": "an nvidia-smi --query-gpu field",
}
#: file name extensions that make a dotted word a file, not a module attribute
FILE_EXT = {"json", "toml", "log", "txt", "yaml", "yml", "md", "pid", "csv", "sh", "env", "lock", "gz", "b64", "tmp"}

TICK = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
PATH = re.compile(r"(?<![\w/.<>@-])((?:dapo_ops|core|agent|control|cli|tasks|tests|docs|bench|gpu|sandbox)/[\w./-]*\w)")
TIERS = ("core", "agent", "control", "cli")
DOTTED = re.compile(r"(?<![\w.:/\[-])([a-z_][a-z_0-9]*(?:\.[A-Za-z_]\w*)+)(?![\w-]*=)")


def _module_names() -> dict[str, list[str]]:
    """``{last part: [dotted module names]}`` for every module and package of dapo_ops, plus the repo's tasks.py."""
    out: dict[str, list[str]] = {"tasks": ["tasks"], "dapo_ops": ["dapo_ops"]}
    for p in sorted(PKG.rglob("*.py")):
        parts = list(p.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out.setdefault(parts[-1], []).append(".".join(parts))
    return out


MODULES = _module_names()


def spans(text: str) -> list[tuple[int, str]]:
    """``(offset, text)`` of the backticked spans of the prose and of every fenced code block (whole)."""
    prose = FENCE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)  # same offsets, code blocks blanked
    return [(m.start(1), m.group(1)) for m in TICK.finditer(prose)] + [
        (m.start(), m.group(0)) for m in FENCE.finditer(text)
    ]


def cites(doc: Path) -> list[tuple[int, str, str]]:
    """``(line, kind, cited)`` of one document, kind ``path`` | ``name`` | ``file``."""
    text = doc.read_text(encoding="utf-8")
    out = []
    for at, s in spans(text):
        for m in PATH.finditer(s):
            if "verl" in text[max(0, at + m.start() - 16) : at + m.start()]:  # verl's own file (verl's e2e tests/...)
                continue
            line = text.count("\n", 0, at + m.start()) + 1
            out.append((line, "path", re.sub(r":\d+(?:-\d+)?$", "", m.group(1)).rstrip(".")))
        for m in DOTTED.finditer(s):
            name = m.group(1)
            first, *rest, last = name.split(".")
            if first not in MODULES or name in NOT_CODE or first == "verl":
                continue
            if s[m.end() : m.end() + 1] in ("/", "-", "<", "*") or s[m.start() - 1 : m.start()] in ("/", "-", "<"):
                continue  # part of a path or a pattern (the path check sees it)
            if last in FILE_EXT:
                continue
            line = text.count("\n", 0, at + m.start()) + 1
            if last == "py" and not rest:
                out.append((line, "file", first))
            elif last != "py":
                out.append((line, "name", name))
    return out


def _resolve(module: str, attrs: list[str]) -> bool:
    """True when ``module`` imports and ``attrs`` walk from it: submodules, attributes, and last a class's field."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    try:
        obj: object = importlib.import_module(module)
    except ImportError:
        return False
    for i, a in enumerate(attrs):
        if isinstance(obj, ModuleType) and hasattr(obj, "__path__"):
            sub = f"{obj.__name__}.{a}"
            if importlib.util.find_spec(sub) is not None:
                obj = importlib.import_module(sub)
                continue
        if hasattr(obj, a):
            obj = getattr(obj, a)
        elif isinstance(obj, ModuleType) and i == len(attrs) - 1 and _class_has(obj, a):
            return True
        else:
            return False
    return True


def _class_has(mod: object, attr: str) -> bool:
    """True when a class defined in ``mod`` has ``attr`` (an attribute, a method, a dataclass or msgspec field)."""
    for v in vars(mod).values():
        if isinstance(v, type) and v.__module__ == getattr(mod, "__name__", None):
            fields = set(getattr(v, "__dataclass_fields__", {})) | set(getattr(v, "__struct_fields__", ()))
            if hasattr(v, attr) or attr in fields or attr in getattr(v, "__annotations__", {}):
                return True
    return False


def exists(kind: str, cited: str) -> bool:
    if kind == "path":
        p = REPO / cited if cited.split("/")[0] not in TIERS else PKG / cited
        stem, dot, attr = p.name.partition(".")
        if p.exists() or p.with_name(p.name + ".py").exists():  # core/runstate.py, core/runstate, tests/fixtures/
            return True
        mod = p.with_name(stem + ".py")  # core/first_error.earliest: a module's attribute in path form
        return bool(dot) and mod.exists() and _resolve(".".join(mod.relative_to(REPO).with_suffix("").parts), [attr])
    if kind == "file":
        return cited in MODULES
    first, *rest = cited.split(".")
    return any(_resolve(m, rest) for m in MODULES[first])


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_cited_path_module_and_function_exists(doc):
    bad = [f"{doc.relative_to(REPO)}:{line}: {kind} {c}" for line, kind, c in cites(doc) if not exists(kind, c)]
    assert not bad, "cited in the docs but not in the code (rename to the current name):\n" + "\n".join(bad)


def test_the_check_sees_what_the_old_design_doc_got_wrong(tmp_path):
    """Not blind: spellings docs/design.md had before issue 30 item 9 are reported, current ones are not."""
    doc = tmp_path / "old.md"
    doc.write_text(
        "`core/runstate.py` `python3 -m dapo_ops.core.runstate show` `raynodes.ray_sessions` `agent/nosuch.py`\n"
        "```python\ntasks.launch.prepare_spec_env(plan)\ndryrun.dry_run(flags)\n```\n"
        "`runfiles.ray_sessions` `ladder.decide` `target.put_text` `dapo_ops/agent/runprobe.py` `verl.trainer.main_ppo`\n"
        "`core/first_error.earliest` `control/status/probe.NO_SUCH` `[hosts.h1]` `agent.num_workers=1` `nosuch.py`\n"
    )
    bad = {c for _, kind, c in cites(doc) if not exists(kind, c)}
    assert bad == {
        "raynodes.ray_sessions",
        "agent/nosuch.py",
        "tasks.launch.prepare_spec_env",
        "control/status/probe.NO_SUCH",
    }, bad


def _tracked() -> list[str]:
    out = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True)
    if out.returncode != 0:  # an unpacked copy without .git: walk the tree
        return [str(p.relative_to(REPO)) for p in REPO.rglob("*") if p.is_file() and ".venv" not in p.parts]
    return out.stdout.split()


def test_every_path_cited_in_code_and_scripts_exists():
    """Comments and docstrings cite paths too (``tasks/_common.py`` outlived the tasks/ -> cli/ move): every
    repository path in a .py, .sh or .toml file, the Makefile or .ci/run exists, in the forms the docs check uses.
    Left out: a path that continues into a pattern (``case-04-*.log``), verl's own files (``verl's e2e tests/...``)
    and tier pairs in prose (``core/agent``, ``control/cli``)."""
    bad = []
    for f in _tracked():
        if f.startswith(("tests/fixtures/", "tests/cases/")) or f == "tests/test_docs_cites.py":  # its own examples
            continue
        if not f.endswith((".py", ".sh", ".toml")) and f not in ("Makefile", ".ci/run"):
            continue
        for i, line in enumerate((REPO / f).read_text(errors="replace").splitlines(), 1):
            for m in PATH.finditer(line):
                cited = re.sub(r":\d+(?:-\d+)?$", "", m.group(1)).rstrip(".")
                after = line[m.end() : m.end() + 2]
                if (
                    after[:1] in ("<", "*", "{", "$")
                    or after in ("-*", "_*")
                    or "verl" in line[max(0, m.start() - 16) : m.start()]
                ):
                    continue
                if all(part in TIERS for part in cited.split("/")):
                    continue
                if not exists("path", cited):
                    bad.append(f"{f}:{i}: {cited}")
    assert not bad, "paths cited in code and scripts that do not exist (rename to the current path):\n" + "\n".join(bad)


ROLE = re.compile(r":(?:mod|func|class|data|meth|attr|exc|obj):`~?([\w.]+)`")


def test_every_qualified_cross_reference_in_the_package_resolves():
    """A docstring's ``:func:`dapo_ops.core.runstate.read_run``` outlives a move unless something reads it: every
    reST role whose target starts at ``dapo_ops`` or at a module's name resolves as the docs' dotted names do."""
    bad = []
    for p in sorted(PKG.rglob("*.py")):
        text = p.read_text(encoding="utf-8")
        for m in ROLE.finditer(text):
            name = m.group(1)
            if name.split(".")[0] in MODULES and not exists("name", name):
                bad.append(f"{p.relative_to(REPO)}:{text.count(chr(10), 0, m.start()) + 1}: {name}")
    assert not bad, "docstring cross-references to code that is not there (rename to the current name):\n" + "\n".join(
        bad
    )
