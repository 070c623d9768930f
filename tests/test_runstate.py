"""core/runstate: run ids, the run.json record, the lock record and the supervisor-argv rule. Pure: no file, no
process (the machine side is tests/test_runfiles.py)."""

import ast
import json
from pathlib import Path

from dapo_ops.core import runstate


def test_run_id_shape_and_order():
    a = runstate.new_run_id(1764429000.0)
    b = runstate.new_run_id(1764429001.0)
    assert runstate.is_run_id(a) and runstate.is_run_id(b)
    assert a.startswith("20251129-") and a < b
    assert not runstate.is_run_id("20251129-151200")
    assert not runstate.is_run_id(".lock")


def test_new_record_has_schema_fields_and_no_env_values():
    spec = {
        "run_id": "20261129-151200-a1b2",
        "host": "h1",
        "container": "verl",
        "mode": "dapo",
        "framework": "fsdp",
        "run_dir": "/verl/dapo_runs/20261129-151200-a1b2",
        "settings": {"steps": 6, "ckpt_dir": "/verl/dapo_runs/x/checkpoints"},
        "features": [{"name": "flash_attn", "source": "default"}],
        "env": {"http_proxy": "http://user:pw@proxy:8080"},
    }
    rec = runstate.new_record(spec, 123, now=10.0)
    for key in (
        "version",
        "run_id",
        "host",
        "container",
        "mode",
        "framework",
        "status",
        "attempt",
        "step",
        "total_steps",
        "step_times",
        "last_progress_at",
        "started_at",
        "updated_at",
        "ended_at",
        "metrics",
        "attempts",
        "features",
        "verdict",
        "decision",
        "pids",
        "swanlab_url",
        "log",
        "ckpt_dir",
        "cluster",
    ):
        assert key in rec, key
    assert rec["status"] == "starting" and rec["total_steps"] == 6 and rec["pids"]["supervisor"] == 123
    assert rec["log"] == "/verl/dapo_runs/20261129-151200-a1b2/train.log"
    assert "pw@proxy" not in json.dumps(rec)
    assert rec["spec"]["env_names"] == ["http_proxy"]


def test_strict_json_and_the_lock_record():
    assert runstate.json_safe({1: float("nan"), "l": (1.5, float("-inf"), float("inf"))}) == {
        "1": None,
        "l": [1.5, None, None],
    }
    assert runstate.lock_record("/r/", "20261129-151200-aaaa", "12", None, 5.0) == {
        "run_id": "20261129-151200-aaaa",
        "pid": 12,
        "run_dir": "/r/20261129-151200-aaaa",
        "since": 5.0,
    }


def test_run_ids_newest_first_leave_other_names_out():
    names = ["20261129-100000-aaaa", ".lock", "checkpoints", "20261129-120000-cccc", ".cluster", "20261129-110000-bbbb"]
    assert runstate.run_ids_newest_first(names) == [
        "20261129-120000-cccc",
        "20261129-110000-bbbb",
        "20261129-100000-aaaa",
    ]


def test_a_supervisor_argv_for_its_run_dir_and_not_a_recycled_pid():
    argv = b"python3\0-m\0dapo_ops.agent.supervisor\0/verl/dapo_runs/20261129-151200-aaaa\0"
    assert runstate.is_supervisor_argv(argv)
    assert runstate.is_supervisor_argv(argv, "/verl/dapo_runs/20261129-151200-aaaa/")
    assert runstate.is_supervisor_argv(argv, "/other/mount/20261129-151200-aaaa")  # same run dir, another mount
    assert not runstate.is_supervisor_argv(argv, "/verl/dapo_runs/20261129-151300-bbbb")
    assert not runstate.is_supervisor_argv(b"sleep\x00600\x00")  # a PID recycled after a container restart


# ------------------------------------------------------------------------------------------ RunStatus (issue 46 item 3)

PKG = Path(__file__).resolve().parents[1] / "dapo_ops"


def _status_members(tree: ast.AST, call_names: tuple, status_keys: bool) -> set:
    """The ``RunStatus.<NAME>`` members passed first to a call of one of ``call_names`` (``self._final(...)``) or,
    with ``status_keys``, assigned to ``<x>["status"]`` (``.value`` or not), in ``tree``."""
    out = set()

    def member(node):
        if isinstance(node, ast.Attribute) and node.attr == "value":
            node = node.value
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) and node.value.attr == "RunStatus":
            return runstate.RunStatus[node.attr]
        return None if isinstance(node, ast.Name) else ("not a RunStatus", ast.unparse(node))  # a variable: passed on

    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in call_names and n.args:
            out.add(member(n.args[0]))
        if status_keys and isinstance(n, ast.Assign):
            t = n.targets[0]
            if isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Constant) and t.slice.value == "status":
                out.add(member(n.value))
    return out - {None}


def test_run_status_active_and_terminal_split_what_run_json_can_hold():
    RS = runstate.RunStatus
    assert {s.value for s in RS if s.active} == {"starting", "running", "retrying"}
    assert {s.value for s in RS if s.terminal} == {"succeeded", "failed", "stopped"}
    assert {s for s in RS if s.written} == {s for s in RS if s.active or s.terminal}
    assert not RS.UNKNOWN.active and not RS.UNKNOWN.terminal and not RS.UNKNOWN.written
    # a member is its run.json string: equal, same hash, printed and dumped as it
    assert RS.RUNNING == "running" and "running" in {RS.RUNNING} and RS.RUNNING in {"running"}
    assert f"{RS.FAILED}" == "%s" % RS.FAILED == str(RS.FAILED) == "failed"
    assert json.dumps({"status": RS.STOPPED}) == '{"status": "stopped"}'
    # what a reader gets from a record: None, a missing record or a word no supervisor writes is UNKNOWN
    assert RS.of("retrying") is RS.RETRYING and RS.of(RS.FAILED) is RS.FAILED
    assert RS.of(None) is RS.of("bogus") is RS.of({}) is RS.UNKNOWN
    assert runstate.new_record({"run_id": "r"}, 1, now=0.0)["status"] is RS.STARTING.value


def test_terminal_is_exactly_what_the_supervisor_and_stop_end_a_run_with():
    """RunStatus.terminal is read by every "is the run over?" (runstart.wait, occupancy, stop, status, watch): it
    must be exactly the set of statuses the supervisor's ``_final`` and ``inv stop`` (runstop.py) write, and
    ``.active`` exactly the ones the supervisor writes before (``new_record``'s starting, ``_set_status``)."""
    machine = ast.parse((PKG / "agent/supervisor/machine.py").read_text())
    stop = ast.parse((PKG / "agent/runstop.py").read_text())
    finals = _status_members(machine, ("_final",), False) | _status_members(stop, (), True)
    terminal = {s for s in runstate.RunStatus if s.terminal}
    assert finals == terminal, finals
    along = _status_members(machine, ("_set_status",), False) - finals
    assert along | {runstate.RunStatus.STARTING} == {s for s in runstate.RunStatus if s.active}, along


def test_no_module_spells_a_run_status_as_a_literal():
    """Every comparison of a run.json ``status`` goes through RunStatus: no ``.get("status") in ("starting",
    "running", "retrying")`` (control/launch/resume.py had one), no ``in ("succeeded", "unknown")`` (agent/runprobe.py),
    no ``rec.get("status") == "failed"`` (control/launch/service.py)."""
    words = {"starting", "running", "retrying", "succeeded", "failed", "stopped", "unknown"}
    found = []
    for path in sorted(PKG.rglob("*.py")):
        if path.name == "runstate.py":
            continue
        for n in ast.walk(ast.parse(path.read_text())):
            if not isinstance(n, ast.Compare):
                continue
            for side in [n.left, *n.comparators]:
                elts = side.elts if isinstance(side, (ast.Tuple, ast.Set, ast.List)) else [side]
                lits = [e.value for e in elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
                reads_status = any(
                    (
                        isinstance(x, ast.Call)
                        and getattr(x.func, "attr", "") == "get"
                        and x.args
                        and getattr(x.args[0], "value", None) == "status"
                    )
                    or (isinstance(x, ast.Subscript) and getattr(x.slice, "value", None) == "status")
                    for x in [n.left, *n.comparators]
                )
                if (len(lits) >= 2 and set(lits) <= words) or (reads_status and lits and set(lits) <= words):
                    found.append("%s:%d" % (path.relative_to(PKG), n.lineno))
    assert not found, found
    assert words == {s.value for s in runstate.RunStatus}
