"""The modules shipped into training images (remote_bundle) import with the stdlib alone, and the bundle is the one
way code reaches a container (every op the control side runs is a module of it).

The bundle is copied to a temp dir exactly as ``remote_bundle`` ships it and every module is imported
with ``python -S -I`` (no site-packages, no user site, no PYTHONPATH from the environment): a
third-party import anywhere in the closure fails here, not inside someone's training container.
"""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from dapo_ops.control.remote import bundle as remote_bundle

FILES = remote_bundle.bundle_files()


def test_the_bundle_contains_the_supervisor_and_its_decision_modules():
    for name in (
        "agent/supervisor/__init__.py",
        "core/classify/__init__.py",
        "core/features.py",
        "core/ladder.py",
        "core/overrides.py",
        "core/runstate.py",
        "agent/runfiles.py",
        "agent/procs.py",
        "agent/notify.py",
        "core/redact.py",
    ):
        assert name in FILES
    assert {n.split("/")[0] for n in FILES} == {"__init__.py", "core", "agent"}


@pytest.mark.parametrize(
    "module", sorted(f[:-3].replace("/", ".").removesuffix(".__init__") for f in FILES if f != "__init__.py")
)
def test_module_imports_without_site_packages(tmp_path, module):
    pkg = tmp_path / "dapo_ops"
    pkg.mkdir()
    for name, data in FILES.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_bytes(data)
    code = (
        f"import sys; sys.path.insert(0, {str(tmp_path)!r}); import dapo_ops.{module}; "
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'yaml', 'hydra', 'omegaconf', 'fabric', 'invoke', 'paramiko', 'rich', 'ray', 'swanlab', 'numpy'}); "
        "print(bad)"
    )
    proc = subprocess.run([sys.executable, "-S", "-I", "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


# ------------------------------------------------------------------------------------------ one way in

PKG = Path(remote_bundle.__file__).resolve().parents[2]


def _sources(*tiers):
    for tier in tiers:
        for f in sorted((PKG / tier).rglob("*.py")):
            yield f, f.read_text()


def _op_file(op):
    """The bundle file ``python -m dapo_ops.agent.<op>`` runs: ``agent/<op>.py`` or ``agent/<op>/__main__.py``."""
    return next((n for n in (f"agent/{op}.py", f"agent/{op}/__main__.py") if n in FILES), None)


def test_every_op_is_a_module_of_the_bundle_with_a_main():
    for op in remote_bundle.OPS:
        name = _op_file(op)
        assert name, f"op {op} has no module agent/{op}.py (or agent/{op}/__main__.py) in the bundle"
        src = FILES[name].decode()
        assert '\nif __name__ == "__main__":' in src or name.endswith("__main__.py"), name
        assert "main(" in src, name


def test_every_op_the_control_side_emits_names_a_module_of_the_bundle():
    """Every ``-m dapo_ops.agent.<op>`` literal and every op named to ``run_op`` / ``op_line`` / ``op_argv`` in
    control/ and cli/ is one of remote_bundle.OPS (each of which is a bundle module: the test above)."""
    emitted = set()
    for f, src in _sources("control", "cli"):
        emitted |= {(f.name, m) for m in re.findall(r"-m[\"',\s]+dapo_ops\.agent\.(\w+)", src)}
        if f.name != "bundle.py":  # where they are defined
            emitted |= {
                (f.name, m.group(1))
                for m in re.finditer(r"\b(?:run_op|op_line|op_argv)\(.{0,200}?[\"'](\w+)[\"']", src, re.S)
            }
    from dapo_ops.control.status import look as status  # the probe's request ops -> the op modules that answer them

    emitted |= {("status.py", m) for m in status.PROBE_OPS.values()}
    ops = {m for _, m in emitted}
    assert {"runprobe", "preflight_probe", "download", "verlinfo", "raysession", "occupancy", "runstart"} <= ops, (
        emitted
    )
    assert ops <= set(remote_bundle.OPS), sorted(e for e in emitted if e[1] not in remote_bundle.OPS)
    for op in ops:
        assert _op_file(op), op
    with pytest.raises(ValueError):
        remote_bundle.op_line("/b", "python3", "nosuch")


def test_no_source_reaches_a_container_but_the_bundle():
    """No module ships source another way: no getsource, no exec of a source string, no ``replace('if __name__``,
    no ``python -c <script>`` built from a module-level script (the bundle's own installer is the one ``-c``)."""
    bad = []
    for f, src in _sources("core", "agent", "control", "cli"):
        rel = f.relative_to(PKG).as_posix()
        for pat in (r"getsource", r"exec\(compile", r"replace\(.if __name__"):
            if re.search(pat, src):
                bad.append((rel, pat))
        if rel != "control/remote/bundle.py" and re.search(r"python[^\n]*-c \{|[\"']-c[\"'],\s*\w+\.[A-Z_]+", src):
            bad.append((rel, "python -c <script>"))
    assert bad == []
