"""``run_op`` is the one way into a training container (issue 46 item 1): only ``dapo_ops/control/remote/`` runs a
command through a Target, writes a file into a container or opens a host connection.

``control/remote/bundle.py`` says "The ONE way code reaches a training container"; every other module asks for a
bundle op (:func:`dapo_ops.control.remote.bundle.run_op`, or :func:`~dapo_ops.control.remote.bundle.start_op` for a
stream) and gets its answer. The model is SkyPilot's skylet: ``JobLibCodeGen`` builds the code, ``run_on_head`` is
the one place that runs it (sky/skylet/job_lib.py, sky/backends/cloud_vm_ray_backend.py).

An ast walk over every module of ``dapo_ops`` outside ``control/remote/``: a finding is

- ``<x>.run(...)`` whose receiver is not a module the file imports (``subprocess.run``, ``fanout.run``) and not
  ``super()``: a Target's ``run`` (``target.run``, ``t.run``, ``ht.run``);
- ``<x>.put_text(...)``, ``<x>.connection(...)``, ``<x>._raw(...)``: writing into a container, or a host
  connection used by hand;
- ``op_line(...)`` (``remote_bundle.op_line``): an op line built outside the one runner.

The few that are meant are listed in :data:`ALLOWED`, each with why; an entry that no longer matches fails too.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PKG = REPO / "dapo_ops"
#: the one place that may run things in a container
REMOTE = PKG / "control" / "remote"

#: attribute calls that only control/remote/ makes (a Target's writes and its connection)
ONLY_REMOTE = {"put_text", "connection", "_raw", "op_line"}

#: (module path under dapo_ops, finding) -> why it is meant. A new entry needs a reason a reviewer accepts.
ALLOWED = {
    ("agent/supervisor/machine.py", "Supervisor(...).run()"): "the supervisor's own state machine, not a Target",
    ("cli/__init__.py", "program.make_program(...).run()"): "invoke's Program.run: the command line itself",
    ("cli/program.py", "super().run()"): "DapoOps(Program).run calls invoke's Program.run",
    ("cli/containers.py", "op_line()"): "`inv container.list`: ONE host command serves every container of a host "
    "(docker ps, then each running container gets the bundle from the command's stdin, "
    "bundle.stdin_install_line, and its verlinfo op); it is a host command over many containers, not one Target's",
}


def _modules(tree: ast.AST) -> set[str]:
    """Names a module binds to imported modules (``import subprocess``, ``from x import fanout``): a ``.run`` on
    one of them is a function call, not a Target's method. A ``from`` import counts as a module when its last
    part is lower case and the source names a package (``from dapo_ops.control.remote import fanout``)."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            base = PKG.parent / node.module.replace(".", "/")
            for a in node.names:
                if (base / f"{a.name}.py").exists() or (base / a.name / "__init__.py").exists():
                    out.add(a.asname or a.name)
    return out


def _receiver(node: ast.expr) -> str:
    """A short text of a call's receiver: ``t``, ``super()``, ``program.make_program(...)``, ``Supervisor(...)``."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_receiver(node.value)}.{node.attr}"
    if isinstance(node, ast.Call):
        return f"{_receiver(node.func)}(...)" if node.args or node.keywords else f"{_receiver(node.func)}()"
    return type(node).__name__


def findings(path: Path) -> set[str]:
    """The ways around ``run_op`` that a module's source takes, as short names (``t.run()``, ``put_text()``)."""
    tree = ast.parse(path.read_text(), str(path))
    mods = _modules(tree)
    out: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Name) and f.id in ONLY_REMOTE:
            out.add(f"{f.id}()")
        if not isinstance(f, ast.Attribute):
            continue
        if f.attr in ONLY_REMOTE and not (isinstance(f.value, ast.Name) and f.value.id == "self"):
            out.add(f"{f.attr}()")  # (``self._raw``: a class's own method, e.g. the supervisor's log follower)
        elif f.attr == "run":
            recv = f.value
            if isinstance(recv, ast.Name) and recv.id in mods:
                continue
            out.add(f"{_receiver(recv)}.run()")
    return out


def all_findings() -> dict[tuple[str, str], None]:
    return {
        (p.relative_to(PKG).as_posix(), f): None
        for p in sorted(PKG.rglob("*.py"))
        if "__pycache__" not in p.parts and REMOTE not in p.parents
        for f in sorted(findings(p))
    }


def test_only_control_remote_runs_commands_in_a_container():
    bad = [f"dapo_ops/{m}: {f}" for (m, f) in all_findings() if (m, f) not in ALLOWED]
    assert not bad, (
        "run_op is the one way into a container (control/remote/bundle.py): make this a bundle op and call "
        "remote_bundle.run_op (or list it in tests/test_one_way_in.py ALLOWED with why):\n" + "\n".join(bad)
    )


def test_every_allowed_exception_is_still_needed():
    found = all_findings()
    stale = [k for k in ALLOWED if k not in found]
    assert not stale, f"ALLOWED names a way around run_op the code no longer takes; remove: {stale}"


def test_the_walk_finds_the_ways_around_run_op(tmp_path):
    """The checker is not blind: what launch/service.py, status/look.py and cli/logs.py did before issue 46 is
    what it reports, and a module's own function ``run`` (``fanout.run``, ``subprocess.run``) is not."""
    src = """
import subprocess
from dapo_ops.control.remote import fanout
from dapo_ops.control.remote import bundle as remote_bundle
def start(target, plan):
    target.run(["rm", "-rf", plan.run_dir], workdir="", check=False)
    target.put_text("{}", plan.run_dir + "/spec.json")
def follow(t, cmd):
    t.connect()
    return t.connection().run(cmd, pty=True)
def tails(hosts):
    subprocess.run(["true"])
    return fanout.run(hosts, lambda t: t.run(["tail", "-n", "5", "x"]).stdout, timeout=5)
def line(bdir):
    return remote_bundle.op_line(bdir, "python3", "runprobe")
"""
    p = tmp_path / "old_service.py"
    p.write_text(src)
    got = findings(p)
    assert got == {"target.run()", "put_text()", "connection()", "t.connection().run()", "t.run()", "op_line()"}, got
