"""One defaults table (dapo_ops/core/defaults.py): no module reads a run setting or a host field with a literal
fallback of its own, the settings table and the inventory's Host model take their defaults from it, make_plan writes a
complete spec, an older spec is completed from the table in one place, and no module but control/settings.py reads
a run setting's environment variable."""

import ast
import json
from pathlib import Path

import pytest

from dapo_ops.control import settings
from dapo_ops.control.inventory import model as inventory_model
from dapo_ops.control.launch import resume
from dapo_ops.agent import runfiles
from dapo_ops.core import defaults, features, overrides
from plan_helpers import plan_for

REPO = Path(__file__).resolve().parents[1]
PKG = REPO / "dapo_ops"
#: a spec the tool wrote for a real H200 run (tests/fixtures/real-verl: recorded with the real verl 0.9.1)
REAL_SPEC = REPO / "tests/fixtures/real-verl/tool-runs/a2-success/spec.json"
RUN_ID = "20261129-151200-a1b2"

#: every name the table gives a default: the settings, the spec's top-level keys and its ``settings``
KEYS = frozenset(defaults.RUN) | frozenset(defaults.SPEC) | frozenset(defaults.SPEC_SETTINGS)
#: calls that read a key with a default: ``x.get(k, d)``, ``getattr(x, k, d)``, ``x.setdefault(k, d)``,
#: ``x.pop(k, d)``; ``_get(x, k, d)`` (planning's old helper) and ``pv.s(k, d)`` (preflight's PlanView) are readers
#: of the same shape
READERS = frozenset({"get", "getattr", "setdefault", "pop", "_get", "s"})


def _literal(n: ast.AST) -> bool:
    """A value written in the source: a constant (None excepted: ``.get(k, None)`` is ``.get(k)``), a negative
    number, a list / tuple / set / dict of constants."""
    if isinstance(n, ast.Constant):
        return n.value is not None
    if isinstance(n, ast.UnaryOp):
        return isinstance(n.operand, ast.Constant)
    if isinstance(n, (ast.List, ast.Tuple, ast.Set)):
        return all(isinstance(e, ast.Constant) for e in n.elts)
    if isinstance(n, ast.Dict):
        return all(isinstance(e, ast.Constant) for e in [*n.keys, *n.values] if e is not None)
    return False


def _read(n: ast.AST, keys: frozenset = KEYS) -> tuple[str, ast.AST | None] | None:
    """``(key, default or None)`` when ``n`` reads a table key through a reader, else None."""
    if not isinstance(n, ast.Call):
        return None
    f = n.func
    fname = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
    if fname not in READERS:
        return None
    at = 0 if isinstance(f, ast.Attribute) else 1  # x.get(k, d) / getattr(x, k, d)
    if len(n.args) <= at:
        return None
    k = n.args[at]
    if not (isinstance(k, ast.Constant) and isinstance(k.value, str) and k.value in keys):
        return None
    if len(n.args) > at + 1:
        return k.value, n.args[at + 1]
    kw = {x.arg: x.value for x in n.keywords}
    return k.value, kw.get("default")


def literal_fallbacks(source: str, keys: frozenset = KEYS) -> list[tuple[int, str]]:
    """``(line, code)`` of every read of a table key with a literal fallback in ``source``: the reader's default
    (``x.get("steps", 100)``, ``getattr(spec, "steps", 100)``, ``_get(s, "steps", 100)``) or an ``or`` after a read
    without one (``x.get("steps") or 100``; an empty list / dict / tuple after ``or`` only says "none"). ``keys``: the
    table's names (default :data:`KEYS`, the run settings'; :data:`HOST_KEYS` for the host fields)."""
    out = []
    for n in ast.walk(ast.parse(source)):
        r = _read(n, keys)
        if r is not None and r[1] is not None and _literal(r[1]):
            out.append((n.lineno, ast.unparse(n)))
        if isinstance(n, ast.BoolOp) and isinstance(n.op, ast.Or):
            for i, v in enumerate(n.values[:-1]):
                r = _read(v, keys)
                rest = n.values[i + 1 :]
                if r is not None and r[1] is None and any(_literal(w) and not _empty(w) for w in rest):
                    out.append((n.lineno, ast.unparse(n)))
    return out


def _empty(n: ast.AST) -> bool:
    return isinstance(n, (ast.List, ast.Tuple, ast.Dict, ast.Set)) and not (
        getattr(n, "elts", None) or getattr(n, "keys", None)
    )


def scan(find, exempt_table: dict, skip: tuple[str, ...] = ()) -> tuple[list[str], set]:
    """Run ``find(source) -> [(line, code)]`` over every package module but ``skip``: ``(found, exempt)``, the hits
    not in ``exempt_table`` as ``file:line: code`` and the ``(file, code)`` entries of the table that were hit."""
    found, exempt = [], set()
    for path in sorted(PKG.rglob("*.py")):
        rel = str(path.relative_to(PKG.parent))
        if rel in skip:
            continue
        for line, code in find(path.read_text(encoding="utf-8")):
            if (rel, code) in exempt_table:
                exempt.add((rel, code))
            else:
                found.append(f"{rel}:{line}: {code}")
    return found, exempt


def test_the_scanner_finds_every_form_of_a_literal_fallback():
    src = """
x.get("steps", 100)
getattr(spec, "max_oom_retries", 2)
_get(settings, "model", "")
pv.s("save_freq", 0)
s.setdefault("rollout_tp", 2)
int(s.get("trainer_tp") or 1)
spec.get("profile", default="0.9")
x.get("gpu_memory_utilization", -0.5)
"""
    assert sorted(ln for ln, _ in literal_fallbacks(src)) == list(range(2, 10))
    fine = """
x["steps"]
x.get("steps")
x.get("steps", defaults.RUN["steps"])
x.get("extra_overrides") or []
x.get("not_a_setting", 3)
as_int(s, "steps", "TRAIN_STEPS / --steps")
x.get("max_position_embeddings", None)
"""
    assert literal_fallbacks(fine) == []


#: reads the scanner flags that are not of a run setting, each with why: (file, code) -> reason
NOT_A_SETTING = {
    ("dapo_ops/cli/quickstart.py", "env.get('http_proxy', '')"): "os.environ's http_proxy variable (unset: '')",
    ("dapo_ops/cli/quickstart.py", "env.get('https_proxy', '')"): "os.environ's https_proxy variable (unset: '')",
    ("dapo_ops/control/status/look.py", "run.get('container') or '<container>'"): "a placeholder in the message "
    "`docker start <container>` for a run.json without its container, not a value a run uses",
}


def test_no_module_reads_a_run_setting_with_a_literal_fallback():
    """The defaults live in dapo_ops/core/defaults.py only: a reader that falls back to a literal of its own is a
    second copy of a default, which drifts (``max_actor_ckpt_to_keep`` was 3 in the planner, None in runspec)."""
    found, exempt = scan(literal_fallbacks, NOT_A_SETTING)
    assert exempt == set(NOT_A_SETTING), f"stale NOT_A_SETTING entries: {set(NOT_A_SETTING) - exempt}"
    assert not found, f"{len(found)} read(s) of a run setting with a literal fallback:\n" + "\n".join(found)


def test_the_settings_table_takes_every_default_from_the_one_table():
    assert {p.name: p.default for p in settings.PARAMS} == dict(defaults.RUN)
    assert settings.resolve({}, {}, {}).values == dict(defaults.RUN)


@pytest.mark.parametrize(
    "mode,framework,profile",
    [
        ("dapo", "fsdp", "0.9"),
        ("dapo", "megatron", "0.9"),
        ("one-step-off", "megatron", "0.9"),
        ("dapo", "fsdp", "0.8"),
    ],
)
def test_make_plan_writes_every_key_of_the_table(mode, framework, profile):
    """No reader of a spec make_plan wrote needs a default: every key is there, and completing it changes nothing."""
    st = settings.resolve({"framework": framework, "profile": profile}, {}, {})
    spec = plan_for(settings=st, host=None, mode=mode, run_id=RUN_ID, swanlab_logger=False).spec
    assert set(defaults.SPEC) <= set(spec) and set(defaults.SPEC_SETTINGS) <= set(spec["settings"])
    assert defaults.complete_spec(spec) == spec


def _old_spec(tmp_path, drop_settings, drop_top):
    """The real run's spec.json as an older dapo-ops would have written it: without ``drop_*`` keys."""
    spec = json.loads(REAL_SPEC.read_text(encoding="utf-8"))
    for k in drop_settings:
        del spec["settings"][k]
    for k in drop_top:
        del spec[k]
    run_dir = tmp_path / spec["run_id"]
    run_dir.mkdir()
    (run_dir / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
    return run_dir


def test_an_older_spec_is_completed_from_the_table_and_runs_the_same_argv(tmp_path):
    """A spec.json without the keys added since (read by the supervisor, runfiles.read_spec) gets the table's
    defaults, and the derived ones the planner writes: the experiment is the run id, the checkpoints live in
    ``<run_dir>/checkpoints``. ``max_actor_ckpt_to_keep`` is the table's 3 (the old runspec default None emitted no
    key: verl then keeps every save)."""
    real = json.loads(REAL_SPEC.read_text(encoding="utf-8"))
    gone = ("max_actor_ckpt_to_keep", "trainer_mode", "max_staleness", "memory_fit", "experiment", "ckpt_dir")
    spec = runfiles.read_spec(_old_spec(tmp_path, gone, ("max_oom_retries", "hang_timeout_s")))
    s = spec["settings"]
    assert (s["max_actor_ckpt_to_keep"], s["trainer_mode"], s["max_staleness"], s["memory_fit"]) == (
        3,
        "async",
        2,
        "start",
    )
    assert s["experiment"] == real["run_id"] and s["ckpt_dir"] == real["run_dir"] + "/checkpoints"
    assert (spec["max_oom_retries"], spec["hang_timeout_s"]) == (2, 1800)
    assert s["rollout_eager"] is False and s["trainer_tp"] is None  # added since the real run
    fs = features.FeatureSet.from_json(real["features"], real["disabled_features"])
    argv = overrides.build_command(spec, fs)
    assert "trainer.max_actor_ckpt_to_keep=3" in argv
    assert argv == overrides.build_command(real, fs)  # the removed values were the defaults


def test_a_none_in_a_spec_stays_none_and_a_resume_keeps_every_save(tmp_path):
    """``max_actor_ckpt_to_keep: null`` (MAX_CKPT_TO_KEEP=0: keep every save, verl's own default) is a value: the
    completion keeps it, no key reaches verl, and ``--resume`` of that run keeps every save too (its setting is 0,
    source resume), not the table's 3."""
    spec = json.loads(REAL_SPEC.read_text(encoding="utf-8"))
    spec["settings"]["max_actor_ckpt_to_keep"] = None
    assert defaults.complete_spec(spec)["settings"]["max_actor_ckpt_to_keep"] is None
    fs = features.FeatureSet.from_json(spec["features"], spec["disabled_features"])
    assert not any(a.startswith("trainer.max_actor_ckpt_to_keep") for a in overrides.build_command(spec, fs))
    st = resume.resumed_settings(settings.resolve({}, {}, {}), spec)
    assert (st["max_actor_ckpt_to_keep"], st.source("max_actor_ckpt_to_keep")) == (0, "resume")
    # on the real run's one GPU: the resume keeps its -dynamic_batch (and its other turned-off features), so its
    # micro-batch 8 must divide what one data-parallel rank gets, as it did there
    one_gpu = inventory_model.Host(name="g", address="x", accelerator="gpu", devices=1)
    plan = plan_for(settings=st, host=one_gpu, mode="dapo", run_id=RUN_ID, swanlab_logger=False)
    assert "dynamic_batch" in plan.spec["disabled_features"]
    assert plan.spec["settings"]["max_actor_ckpt_to_keep"] is None
    assert not any(a.startswith("trainer.max_actor_ckpt_to_keep") for a in plan.argv)


#: the host fields the one table gives a value (not None): a read of one with a literal fallback is a second copy of
#: the default (``spec.get("accelerator", "gpu")`` in core/overrides.py vs ``"npu"`` in the supervisor, issue 46)
HOST_KEYS = frozenset(k for k, v in defaults.HOST.items() if v is not None) | {"runs_dir"}

#: reads the host scan flags that are not of a host field's default, each with why: (file, code) -> reason
NOT_A_HOST_DEFAULT = {
    ("dapo_ops/agent/supervisor/record.py", "n.get('devices') or 0"): "a Ray node spec's device count, summed: "
    "a node without one adds none",
    ("dapo_ops/cli/hosts.py", "info.get('python') or '?'"): "the verl probe's answer (the python it ran), '?' when "
    "it gave none",
    ("dapo_ops/control/preflight/verl.py", "p.get('python', '?')"): "the probe's answer: the container's Python "
    "version, '?' when it gave none",
    ("dapo_ops/control/preflight/checks.py", "getattr(host, 'workdir', '?')"): "a message placeholder for a host "
    "object without a workdir",
    ("dapo_ops/control/remote/errors.py", "getattr(getattr(target, 'host', None), 'workdir', '?')"): "a message "
    "placeholder when Docker's error names no cwd and the target has no host",
    ("dapo_ops/control/status/look.py", "run.get('container') or '<container>'"): "a placeholder in the message "
    "`docker start <container>` for a run.json without its container, not a value a run uses",
}


def test_the_host_model_takes_every_default_from_the_one_table():
    """The inventory's Host model and defaults.HOST say the same for every hosts.toml field but address/env (the
    model's ``NOT_IN_TABLE`` fields are no inventory keys); a host without a table of its own runs the runbook's
    Ascend host (8 NPUs, container verl, workdir /verl)."""
    import dataclasses

    skip = ("address", "env", *inventory_model.NOT_IN_TABLE)
    fields = {f.name: f.default for f in dataclasses.fields(inventory_model.Host) if f.name not in skip}
    assert fields == dict(defaults.HOST)
    h = inventory_model.Host(name="h1", address="10.0.0.1")
    assert (h.accelerator, h.devices, h.container, h.workdir, h.runs_path) == (
        "npu",
        8,
        "verl",
        "/verl",
        "/verl/dapo_runs",
    )
    assert defaults.runs_path() == h.runs_path


def test_no_module_reads_a_host_field_with_a_literal_fallback():
    """One table of host defaults: ``getattr(host, "accelerator", "npu")`` / ``spec.get("accelerator", "gpu")`` /
    ``spec.get("python") or "python3"`` are refused anywhere in the package (read ``defaults.HOST[...]``)."""
    found, exempt = scan(lambda src: literal_fallbacks(src, HOST_KEYS), NOT_A_HOST_DEFAULT)
    assert exempt == set(NOT_A_HOST_DEFAULT), f"stale NOT_A_HOST_DEFAULT entries: {set(NOT_A_HOST_DEFAULT) - exempt}"
    assert not found, f"{len(found)} read(s) of a host field with a literal fallback:\n" + "\n".join(found)


def test_the_host_scan_sees_the_forms_that_disagreed():
    src = """
spec.get("accelerator", "gpu")
getattr(host, "runtime", "docker")
spec.get("python") or "python3"
x.get("devices", 0)
"""
    assert [ln for ln, _ in literal_fallbacks(src, HOST_KEYS)] == [2, 3, 4, 5]
    fine = """
spec.get("accelerator", defaults.HOST["accelerator"])
getattr(host, "runtime", None)
x.get("name", "local")
"""
    assert literal_fallbacks(fine, HOST_KEYS) == []


#: every environment variable of a run setting (``TRAIN_STEPS``, ``FRAMEWORK``, ``MODEL_PATH``, ...)
SETTING_VARS = frozenset(v for p in settings.PARAMS for v in p.env)
#: what a read of the operator's environment looks like: ``os.environ``, a mapping named ``env`` / ``environ``
ENV_NAMES = frozenset({"env", "environ"})


def _is_env(n: ast.AST) -> bool:
    if isinstance(n, ast.Attribute):
        return n.attr == "environ"
    return isinstance(n, ast.Name) and n.id in ENV_NAMES


def env_reads(source: str) -> list[tuple[int, str]]:
    """``(line, code)`` of every read of a run setting's variable from the environment: ``os.environ.get("X", ...)``,
    ``env.get("X")``, ``os.environ["X"]`` (read, not written), ``os.getenv("X")``."""
    out = []
    for n in ast.walk(ast.parse(source)):
        key = None
        if isinstance(n, ast.Call) and n.args:
            f = n.func
            if isinstance(f, ast.Attribute) and f.attr == "get" and _is_env(f.value):
                key = n.args[0]
            elif isinstance(f, ast.Attribute) and f.attr == "getenv":
                key = n.args[0]
        elif isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load) and _is_env(n.value):
            key = n.slice
        if isinstance(key, ast.Constant) and key.value in SETTING_VARS:
            out.append((n.lineno, ast.unparse(n)))
    return out


#: reads of a setting's variable outside control/settings.py, each with why: (file, code) -> reason
NOT_A_SETTINGS_READ = {
    ("dapo_ops/cli/_common.py", "env.get('CONTAINER', '')"): "status / logs / stop find the container a run was "
    "launched in (--container > $CONTAINER > the inventory's) without loading the settings table",
    ("dapo_ops/cli/quickstart.py", "env.get('CONTAINER', '')"): "quickstart asks only what no flag or variable "
    "gave (issue 46 item 2 hands launch one request)",
    ("dapo_ops/cli/quickstart.py", "env.get('USER_FEATURES', '')"): "quickstart's question, as above",
    ("dapo_ops/cli/quickstart.py", "env.get('SWANLAB_MODE', '')"): "quickstart's question, as above",
    ("dapo_ops/cli/quickstart.py", "env.get('http_proxy', '')"): "quickstart's question, as above",
    ("dapo_ops/cli/quickstart.py", "env.get('https_proxy', '')"): "quickstart's question, as above",
}


def test_the_env_scan_sees_every_form_of_a_read():
    src = """
os.environ.get("TRAIN_STEPS", 100)
env.get("MODEL_PATH")
os.environ["FRAMEWORK"]
os.getenv("SAVE_FREQ")
"""
    assert [ln for ln, _ in env_reads(src)] == [2, 3, 4, 5]
    fine = """
env["SWANLAB_MODE"] = "offline"
os.environ.get("HOME")
plan.env.get("SWANLAB_MODE")
settings.resolve(flags, os.environ, file_cfg)
"""
    assert env_reads(fine) == []


def test_only_the_settings_table_reads_a_run_settings_variable():
    """``TRAIN_STEPS`` is the settings table's (flag > env > file > default): quickstart's
    ``os.environ.get('TRAIN_STEPS', 100)`` printed 100 where the config file said otherwise (issue 46)."""
    found, exempt = scan(env_reads, NOT_A_SETTINGS_READ, skip=("dapo_ops/control/settings.py",))
    assert exempt == set(NOT_A_SETTINGS_READ), f"stale entries: {set(NOT_A_SETTINGS_READ) - exempt}"
    assert not found, f"{len(found)} read(s) of a run setting's variable outside the settings table:\n" + "\n".join(
        found
    )


# ------------------------------------------------------------------ RunSpec: completed once when read (issue 46 item 3)


def _counting(monkeypatch) -> list:
    calls: list = []
    real = defaults.complete_spec

    def counted(spec):
        calls.append(1)
        return real(spec)

    monkeypatch.setattr(defaults, "complete_spec", counted)
    return calls


def test_one_argv_completes_the_spec_once(monkeypatch):
    """overrides.build_command completed the same spec 7 times for one argv on main (build_command, check_spec,
    two effective_settings, verl_argv, overrides_for, memfit.parallel_sizes): now the spec is read into a RunSpec
    once where it enters, and every reader below takes the RunSpec as it is."""
    spec = json.loads(REAL_SPEC.read_text(encoding="utf-8"))
    fs = features.FeatureSet.from_json(spec["features"], spec["disabled_features"])
    calls = _counting(monkeypatch)
    argv = overrides.build_command(spec, fs, {"gpu_memory_utilization": 0.5})
    assert len(calls) == 1 and "actor_rollout_ref.rollout.gpu_memory_utilization=0.5" in argv
    calls.clear()
    rs = defaults.RunSpec.read(spec)
    assert overrides.build_command(rs, fs) == overrides.build_command(spec, fs) and len(calls) == 2


def test_the_supervisor_reads_its_spec_once_and_each_attempt_builds_on_it(monkeypatch, tmp_path):
    """runfiles.read_spec completes spec.json once; attempt 2's spec (attempt_spec) and its argv complete nothing
    again. spec.json on disk is left as the plan wrote it, and the RunSpec is frozen."""
    from dapo_ops.agent.supervisor import attempt

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    text = REAL_SPEC.read_text(encoding="utf-8")
    (run_dir / "spec.json").write_text(text, encoding="utf-8")
    calls = _counting(monkeypatch)
    spec = runfiles.read_spec(run_dir)
    assert len(calls) == 1 and isinstance(spec, defaults.RunSpec)
    fs = features.FeatureSet.from_json(list(spec.features), spec.disabled_features)
    second = attempt.attempt_spec(spec, 2)
    argv = attempt.build_argv(None, second, fs, {"gpu_memory_utilization": 0.5})
    assert len(calls) == 1 and second.attempt == 2 and spec.attempt == 1 and argv
    # the typed keys and the Mapping are the same completed spec; the file is untouched
    assert spec.to_json() == defaults.complete_spec(json.loads(text)) == dict(spec)
    assert (spec.run_id, spec.framework, spec.settings["steps"]) == (spec["run_id"], spec["framework"], 3)
    assert (run_dir / "spec.json").read_text(encoding="utf-8") == text
    with pytest.raises(AttributeError):
        spec.run_id = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        spec.settings["steps"] = 9  # type: ignore[index]
