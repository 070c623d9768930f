"""The modules shipped into training images (remote_bundle) import with the stdlib alone.

The bundle is copied to a temp dir exactly as ``remote_bundle`` ships it and every module is imported
with ``python -S -I`` (no site-packages, no user site, no PYTHONPATH from the environment): a
third-party import anywhere in the closure fails here, not inside someone's training container.
"""

import subprocess
import sys

import pytest

from dapo_ops.control import remote_bundle

FILES = remote_bundle.bundle_files()


def test_the_bundle_contains_the_supervisor_and_its_decision_modules():
    for name in ("agent/supervisor/__init__.py", "core/classify/__init__.py", "core/features.py", "core/ladder.py",
                 "core/overrides.py",
                 "core/runstate.py", "agent/notify.py", "core/redact.py"):
        assert name in FILES
    assert {n.split("/")[0] for n in FILES} == {"__init__.py", "core", "agent"}


@pytest.mark.parametrize("module", sorted(f[:-3].replace("/", ".").removesuffix(".__init__") for f in FILES
                                           if f != "__init__.py"))
def test_module_imports_without_site_packages(tmp_path, module):
    pkg = tmp_path / "dapo_ops"
    pkg.mkdir()
    for name, data in FILES.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_bytes(data)
    code = (f"import sys; sys.path.insert(0, {str(tmp_path)!r}); import dapo_ops.{module}; "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
            "{'yaml', 'hydra', 'omegaconf', 'fabric', 'invoke', 'paramiko', 'rich', 'ray', 'swanlab', 'numpy'}); "
            "print(bad)")
    proc = subprocess.run([sys.executable, "-S", "-I", "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
