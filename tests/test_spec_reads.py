"""The run spec is read by its typed keys (issue 46 item 3): ``dapo_ops.core.defaults.RunSpec`` is completed once when
read, and readers take its attributes (``spec.mode``, ``spec.settings``) instead of ``spec["mode"]`` /
``spec.get("mode")``. Two ratchets over the package's source (AST, no import):

- the string reads of a spec per module may not grow (:data:`BASELINE`; lower it when a module reads fewer);
- :func:`dapo_ops.core.defaults.complete_spec` is called only inside ``RunSpec.read``: every other reader gets a
  RunSpec, completed once where the spec enters (spec.json, a plan's spec, preflight's PlanView, ``--resume``'s
  ResumeFacts), never again.
"""

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PKG = REPO / "dapo_ops"

#: module -> its string reads of a spec today (:func:`spec_reads`): 195 in 32 modules when the RunSpec landed on the
#: agent and core, 127 in 22 once preflight, resume, service, dryrun and multihost_service read a RunSpec (a launch
#: Plan's ``run_spec``). What stays: the planner's spec under construction (control/launch/plan.py ``_draft``
#: builds a dict by design; resume.py ``line`` reads it), keys RunSpec does not type (``diverged_at``, ``fit``,
#: ``learned``), cli/ and the agent not converted yet, and control/remote's ``spec``, which is the SSH master's
#: (host, socket), not a run spec. A module not listed may read none.
BASELINE = {
    "dapo_ops/agent/notify.py": 2,
    "dapo_ops/agent/raysession.py": 3,
    "dapo_ops/agent/supervisor/config.py": 2,
    "dapo_ops/agent/supervisor/escalate.py": 5,
    "dapo_ops/agent/supervisor/follow.py": 1,
    "dapo_ops/agent/supervisor/hostevidence.py": 5,
    "dapo_ops/agent/supervisor/learn.py": 2,
    "dapo_ops/agent/supervisor/machine.py": 6,
    "dapo_ops/agent/supervisor/record.py": 7,
    "dapo_ops/cli/multihost.py": 3,
    "dapo_ops/cli/preflight.py": 1,
    "dapo_ops/cli/prepare.py": 2,
    "dapo_ops/control/launch/dryrun.py": 1,
    "dapo_ops/control/launch/plan.py": 52,
    "dapo_ops/control/launch/resume.py": 3,
    "dapo_ops/control/remote/master.py": 6,
    "dapo_ops/control/remote/sshmux.py": 3,
    "dapo_ops/core/defaults.py": 1,
    "dapo_ops/core/learned.py": 8,
    "dapo_ops/core/overrides.py": 5,
    "dapo_ops/core/runstate.py": 6,
    "dapo_ops/core/topology.py": 3,
}


def _receiver(e: ast.AST) -> str:
    """The name a read is made on: ``spec`` for ``spec``, ``plan.spec``, ``self.spec``; "" for anything else."""
    if isinstance(e, ast.Name):
        return e.id
    if isinstance(e, ast.Attribute):
        return e.attr
    return ""


def spec_reads(source: str) -> list[tuple[int, str]]:
    """``(line, code)`` of every string read of a spec in ``source``: ``X["key"]`` or ``X.get("key"[, d])`` where
    ``X`` is a name or attribute whose name holds ``spec`` (``spec``, ``old_spec``, ``pv.spec``). A nested read
    (``spec["settings"]["steps"]``) counts once: the key read of the spec."""
    out = []
    for n in ast.walk(ast.parse(source)):
        if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant) and isinstance(n.slice.value, str):
            recv = n.value
        elif (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr == "get"
            and n.args
            and isinstance(n.args[0], ast.Constant)
            and isinstance(n.args[0].value, str)
        ):
            recv = n.func.value
        else:
            continue
        if "spec" in _receiver(recv).lower():
            out.append((n.lineno, ast.unparse(n)))
    return sorted(out)


def complete_spec_calls(source: str) -> list[tuple[int, str]]:
    """``(line, qualified function)`` of every call of ``complete_spec`` (bare or ``defaults.complete_spec``) in
    ``source``: the enclosing class and function names joined with dots, ``<module>`` at the top level."""
    out: list[tuple[int, str]] = []

    def walk(node: ast.AST, where: tuple[str, ...]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                walk(child, (*where, child.name))
                continue
            if isinstance(child, ast.Call):
                f = child.func
                name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
                if name == "complete_spec":
                    out.append((child.lineno, ".".join(where) or "<module>"))
            walk(child, where)

    walk(ast.parse(source), ())
    return out


def _modules():
    for path in sorted(PKG.rglob("*.py")):
        yield str(path.relative_to(REPO)), path.read_text(encoding="utf-8")


def test_the_scanner_finds_every_form_of_a_spec_read():
    src = """
spec["mode"]
spec.get("accelerator", "npu")
old_spec.get("settings")
self.spec["profile"]
pv.spec.get("env")
spec["settings"]["steps"]
defaults.complete_spec(spec)
def f():
    class K:
        def g(self):
            return complete_spec(x)
"""
    assert [ln for ln, _ in spec_reads(src)] == [2, 3, 4, 5, 6, 7]
    assert complete_spec_calls(src) == [(8, "<module>"), (12, "f.K.g")]
    fine = """
spec.mode
spec.settings["steps"]
settings.get("steps")
spec[key]
spec.get(name)
specs
"""
    assert spec_reads(fine) == []


def test_spec_string_reads_do_not_grow():
    """Each module reads a spec by string at most :data:`BASELINE` times (a module not listed: never). Read a
    completed spec through ``RunSpec.read`` and take its attributes instead; a module that now reads fewer: lower
    its entry."""
    grown = []
    for rel, src in _modules():
        reads = spec_reads(src)
        if len(reads) > BASELINE.get(rel, 0):
            grown.append(f"{rel}: {len(reads)} > {BASELINE.get(rel, 0)}: " + "; ".join(c for _, c in reads))
    assert not grown, "spec read by string more than before (use RunSpec's attributes):\n" + "\n".join(grown)


def test_complete_spec_is_called_only_in_runspec_read():
    """Every reader of a spec gets it completed once, by ``RunSpec.read`` (dapo_ops/core/defaults.py); a second
    ``complete_spec`` anywhere else completes the same spec again (issue 46: 13 sites, 4 times for one argv)."""
    calls = [f"{rel}:{ln} in {where}" for rel, src in _modules() for ln, where in complete_spec_calls(src)]
    assert calls and all(
        c.startswith("dapo_ops/core/defaults.py:") and c.endswith(" in RunSpec.read") for c in calls
    ), "complete_spec called outside RunSpec.read (read the spec with defaults.RunSpec.read):\n" + "\n".join(calls)


def test_a_plan_spec_is_read_once_for_the_launch_preflight_and_the_dry_run(monkeypatch):
    """The finished plan's spec is read into a RunSpec once (``Plan.run_spec``): the dry run's render, preflight's
    PlanView (``plan_view``) and the launch's typed reads share it; none completes the spec again. On main preflight
    completed it in PlanView and multihost_service / service read it by string."""
    import io

    from rich.console import Console

    from dapo_ops.control import settings
    from dapo_ops.control.launch import dryrun
    from dapo_ops.control.launch import plan as planning
    from dapo_ops.control.preflight.plan_view import plan_view
    from dapo_ops.core import defaults

    plan = planning.make_plan(
        planning.draft_plan(
            planning.PlanInputs(
                settings=settings.resolve({}, {}, {}),
                host=None,
                mode="dapo",
                run_id="20261129-151200-a1b2",
                swanlab_logger=False,
            )
        )
    )
    calls: list = []
    real = defaults.complete_spec
    monkeypatch.setattr(defaults, "complete_spec", lambda spec: calls.append(1) or real(spec))
    rs = plan.run_spec
    assert isinstance(rs, defaults.RunSpec) and dict(rs) == dict(plan.spec) and len(calls) == 1
    assert plan_view(plan).spec is rs and plan.run_spec is rs
    out = io.StringIO()
    dryrun.render(plan, Console(file=out, width=200))
    assert f"run id:        {rs.run_id}" in out.getvalue() and len(calls) == 1
