"""docs/troubleshooting.md is generated from dapo_ops.core.classify.CLASS_TABLE: fail when they drift.

Regenerate with ``.venv/bin/python -m dapo_ops.core.classify --troubleshooting-md > docs/troubleshooting.md``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from dapo_ops.core import classify as C
from dapo_ops.core import policy

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "troubleshooting.md"
REGEN = ".venv/bin/python -m dapo_ops.core.classify --troubleshooting-md > docs/troubleshooting.md"


def test_doc_matches_class_table():
    assert DOC.read_text(encoding="utf-8") == C.troubleshooting_md(), f"docs/troubleshooting.md is stale: run `{REGEN}`"


def test_doc_has_a_section_per_class_with_the_four_parts():
    text = DOC.read_text(encoding="utf-8")
    for cls in C.CLASSES:
        section = text.split(f"\n## {cls}\n", 1)[1].split("\n## ", 1)[0]
        for part in ("**Symptoms**", "**Cause.**", "**What dapo-ops does**", "**What you do.**"):
            assert part in section, (cls, part)
        for rule in policy.POLICY[cls]:
            assert f"`{rule.kind.value}`" in section


def test_cli_prints_the_same_doc():
    out = subprocess.run(
        [sys.executable, "-m", "dapo_ops.core.classify", "--troubleshooting-md"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert out.returncode == 0 and out.stdout == C.troubleshooting_md()


def test_symptom_examples_classify_to_their_class():
    """The first symptom line of each class (where it is a literal log line) is recognised by the classifier."""
    literal = {
        "oom-device",
        "oom-kv-cache",
        "oom-ray",
        "config-error",
        "data-error",
        "network",
        "hccl-timeout",
        "container-missing",
        "auth-error",
    }
    for cls in literal:
        line = C.CLASS_TABLE[cls]["symptoms"][0]
        assert C.classify(line, exit_code=1).cls == cls, (cls, line)
