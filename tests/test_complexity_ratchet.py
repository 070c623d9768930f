"""The complexity ratchet (.ci/complexity.py, a stage of .ci/run): ruff's C901 scores may fall, never grow."""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / ".ci" / "complexity.py"


def ratchet(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--root", str(root), "--baseline", str(root / "baseline.txt"), *args],
        capture_output=True,
        text=True,
    )


def branches(n: int) -> str:
    """A function body of complexity ``n + 1`` (one per ``if``)."""
    return "".join(f"    if x == {k}:\n        return {k}\n" for k in range(n)) + "    return -1\n"


@pytest.fixture
def tree(tmp_path):
    """A project with ruff's limit at 3: ``pkg/m.py`` holds ``big`` (5), ``Box.method`` (4) and ``small`` (2)."""
    (tmp_path / "pyproject.toml").write_text("[tool.ruff.lint.mccabe]\nmax-complexity = 3\n")
    (tmp_path / "pkg").mkdir()
    write(tmp_path, big=4, method=3)
    (tmp_path / "baseline.txt").write_text("# header\npkg/m.py::Box.method 4\npkg/m.py::big 5\n")
    return tmp_path


def write(root: Path, big: int, method: int, extra: str = "") -> None:
    body = f"def big(x):\n{branches(big)}\n\nclass Box:\n    def method(self, x):\n"
    body += textwrap.indent(branches(method), "    ") + f"\n\ndef small(x):\n{branches(1)}\n{extra}"
    (root / "pkg" / "m.py").write_text(body)


def test_at_the_recorded_scores_it_passes(tree):
    p = ratchet(tree, "--paths", "pkg")
    assert p.returncode == 0, p.stderr
    assert "2 functions above the limit, none above its recorded score" in p.stdout


def test_a_function_that_grows_fails_naming_it_and_its_recorded_score(tree):
    write(tree, big=6, method=3)
    p = ratchet(tree, "--paths", "pkg")
    assert p.returncode == 1
    assert p.stderr.splitlines() == ["complexity: pkg/m.py::big: complexity 7, was 5: lower it back to 5 or less"]


def test_a_new_function_above_the_limit_fails(tree):
    write(tree, big=4, method=3, extra=f"\ndef helper(x):\n{branches(3)}")
    p = ratchet(tree, "--paths", "pkg")
    assert p.returncode == 1
    assert "pkg/m.py::helper: complexity 4, above the limit and not in the list: split it up" in p.stderr


def test_a_lowered_function_passes_and_update_records_it_but_never_a_rise(tree):
    write(tree, big=3, method=1)  # big 5 -> 4; Box.method 4 -> 2, below the limit
    p = ratchet(tree, "--paths", "pkg")
    assert p.returncode == 0, p.stderr
    assert "pkg/m.py::big: complexity 4, was 5 (record it: python .ci/complexity.py --update)" in p.stdout
    assert "pkg/m.py::Box.method: below the limit now, was 4" in p.stdout
    assert ratchet(tree, "--paths", "pkg", "--update").returncode == 0
    assert [ln for ln in (tree / "baseline.txt").read_text().splitlines() if not ln.startswith("#")] == [
        "pkg/m.py::big 4"
    ]
    write(tree, big=6, method=1)  # a rise: --update fails and keeps the recorded 4
    p = ratchet(tree, "--paths", "pkg", "--update")
    assert p.returncode == 1 and "pkg/m.py::big: complexity 7, was 4" in p.stderr
    assert "pkg/m.py::big 4" in (tree / "baseline.txt").read_text()


def test_the_repositorys_functions_are_at_or_below_their_recorded_scores():
    """What .ci/run's stage runs: every function above 12 is in .ci/complexity.txt at no more than its score."""
    p = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, cwd=REPO)
    assert p.returncode == 0, p.stderr


def test_init_records_todays_scores_rises_included(tree):
    """The ratchet's start when branches written before it merge: --init writes the list anew."""
    write(tree, big=6, method=3, extra=f"\ndef helper(x):\n{branches(3)}")
    p = ratchet(tree, "--paths", "pkg", "--init")
    assert p.returncode == 0 and "listed 3 functions above the limit (was 2)" in p.stdout
    body = [ln for ln in (tree / "baseline.txt").read_text().splitlines() if not ln.startswith("#")]
    assert body == ["pkg/m.py::Box.method 4", "pkg/m.py::big 7", "pkg/m.py::helper 4"]
    assert ratchet(tree, "--paths", "pkg").returncode == 0
