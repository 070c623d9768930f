"""docs/params.md is generated from the settings table; this keeps them in sync."""

from pathlib import Path

from dapo_ops.control import settings

DOC = Path(__file__).resolve().parents[1] / "docs" / "params.md"


def test_params_doc_matches_the_table():
    assert DOC.read_text(encoding="utf-8") == settings.render_markdown(), (
        "docs/params.md is stale: run `.venv/bin/python -m dapo_ops.control.settings > docs/params.md`")


def test_every_setting_documented_once():
    text = DOC.read_text(encoding="utf-8")
    for p in settings.PARAMS:
        assert text.count(f"\n| `{p.name}` |") == 1
        for e in p.env:
            assert f"`{e}`" in text
