"""The complexity ratchet: ruff's C901 (mccabe) over the linted code may fall, never grow.

``.ci/complexity.txt`` lists every function above ``[tool.ruff.lint.mccabe] max-complexity`` (pyproject.toml: 12),
one ``<path>::<qualified name> <score>`` a line. This check runs ``ruff check --select C901`` on the paths
``.ci/run`` lints and fails (exit 1, one line per offence) when a function not in the list is above the limit or a
listed one scores higher than its line. A function that fell (or left the list) passes, with a line asking to
record it: ``python .ci/complexity.py --update`` rewrites the list with the lowered scores and the removals only (it
never records a rise; a rise is mended in the code). ``--init`` writes the list anew from today's scores, rises
included: the ratchet's start, once, when branches written before it merge (review its diff). ``--baseline FILE`` and ``--paths P ...`` point it elsewhere
(tests/test_complexity_ratchet.py). Exit 2: ruff could not run (its own message on stderr).
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BASELINE = REPO / ".ci" / "complexity.txt"
#: what .ci/run's ruff stage lints
PATHS = ("dapo_ops", "tests", "bench", "tasks.py", "gpu", "sandbox")
HEADER = (
    "# functions above ruff's C901 limit (pyproject.toml [tool.ruff.lint.mccabe]): <path>::<qualified name> <score>.\n"
    "# .ci/complexity.py fails when one is added or grows; after lowering one, record it: python .ci/complexity.py "
    "--update\n"
)


def _qualname(tree: ast.AST, row: int, name: str) -> str:
    """The dotted name (``Class.method``, ``outer.inner``) of the function ``name`` defined on line ``row``."""

    def walk(node: ast.AST, prefix: str) -> str | None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                q = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef) and child.lineno == row and child.name == name:
                    return q
                found = walk(child, q + ".")
                if found:
                    return found
            else:
                found = walk(child, prefix)
                if found:
                    return found
        return None

    return walk(tree, "") or name


def measure(root: Path, paths: list[str]) -> dict[str, int]:
    """``{"<path>::<qualname>": score}`` of every function above the limit under ``paths`` (relative to ``root``).
    Raises ``RuntimeError`` with ruff's message when ruff fails."""
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--select", "C901", "--output-format", "json", "--exit-zero", *paths],
        cwd=root,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip() or f"ruff exited {proc.returncode}")
    out: dict[str, int] = {}
    trees: dict[str, ast.AST] = {}
    for d in json.loads(proc.stdout or "[]"):
        path = Path(d["filename"]).resolve().relative_to(root.resolve()).as_posix()
        # "`decide` is too complex (33 > 12)"
        name = d["message"].split("`")[1]
        score = int(d["message"].rsplit("(", 1)[1].split(" ", 1)[0])
        if path not in trees:
            trees[path] = ast.parse((root / path).read_text(encoding="utf-8"))
        key = f"{path}::{_qualname(trees[path], d['location']['row'], name)}"
        while key in out:  # two functions of one qualified name (redefinitions): number the later ones
            key += "'"
        out[key] = score
    return out


def read(baseline: Path) -> dict[str, int]:
    """The recorded scores; raises ``ValueError`` naming the line that is not ``<path>::<name> <score>``."""
    out: dict[str, int] = {}
    for n, line in enumerate(baseline.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        key, _, score = line.rpartition(" ")
        if "::" not in key or not score.isdigit():
            raise ValueError(f"{baseline}:{n}: not '<path>::<name> <score>': {line!r}")
        out[key] = int(score)
    return out


def write(baseline: Path, scores: dict[str, int]) -> None:
    body = "".join(f"{k} {v}\n" for k, v in sorted(scores.items()))
    baseline.write_text(HEADER + body, encoding="utf-8")


def compare(recorded: dict[str, int], now: dict[str, int]) -> tuple[list[str], list[str]]:
    """``(rises, falls)``: one line per function added above the limit or grown, and per function lowered or gone."""
    rises, falls = [], []
    for key, score in sorted(now.items()):
        was = recorded.get(key)
        if was is None:
            rises.append(f"{key}: complexity {score}, above the limit and not in the list: split it up")
        elif score > was:
            rises.append(f"{key}: complexity {score}, was {was}: lower it back to {was} or less")
        elif score < was:
            falls.append(f"{key}: complexity {score}, was {was}")
    falls += [f"{key}: below the limit now, was {recorded[key]}" for key in sorted(set(recorded) - set(now))]
    return rises, falls


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--update", action="store_true", help="record the functions that fell (never a rise)")
    ap.add_argument("--init", action="store_true", help="write the list anew from today's scores (rises included)")
    ap.add_argument("--baseline", type=Path, default=BASELINE)
    ap.add_argument("--root", type=Path, default=REPO)
    ap.add_argument("--paths", nargs="+", default=list(PATHS))
    a = ap.parse_args(argv)
    try:
        now = measure(a.root, a.paths)
        recorded = read(a.baseline) if a.baseline.exists() else {}
    except (RuntimeError, ValueError, OSError) as e:
        print(f"complexity: {e}", file=sys.stderr)
        return 2
    if a.init:
        write(a.baseline, now)
        print(f"complexity: listed {len(now)} functions above the limit (was {len(recorded)})")
        return 0
    rises, falls = compare(recorded, now)
    for line in rises:
        print(f"complexity: {line}", file=sys.stderr)
    if a.update:
        kept = {k: min(v, now[k]) for k, v in recorded.items() if k in now}
        if kept != recorded:
            write(a.baseline, kept)
        print(f"complexity: recorded {len(falls)} lowered or gone; {len(kept)} listed")
    elif falls:
        for line in falls:
            print(f"complexity: {line} (record it: python .ci/complexity.py --update)")
    if not rises and not a.update:
        print(f"complexity: {len(now)} functions above the limit, none above its recorded score")
    return 1 if rises else 0


if __name__ == "__main__":
    sys.exit(main())
