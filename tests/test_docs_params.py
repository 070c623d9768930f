"""docs/params.md is generated from the settings table; this keeps them in sync."""

from pathlib import Path

import pytest

from dapo_ops.control import params_doc, settings

DOC = Path(__file__).resolve().parents[1] / "docs" / "params.md"


def test_params_doc_matches_the_table():
    assert DOC.read_text(encoding="utf-8") == params_doc.render_markdown(), (
        "docs/params.md is stale: run `.venv/bin/python -m dapo_ops.control.params_doc > docs/params.md`"
    )


def test_every_setting_documented_once():
    text = DOC.read_text(encoding="utf-8")
    for p in settings.PARAMS:
        assert text.count(f"\n| `{p.name}` |") == 1
        for e in p.env:
            assert f"`{e}`" in text


@pytest.mark.parametrize("task_name", ["launch", "one-step-off"])
def test_the_launch_tasks_help_for_every_setting_is_the_tables(task_name):
    """Flag help is written once: the launch tasks show the settings table's text (settings.flag_help)."""
    from dapo_ops import cli

    helps = {a.name: a.help for a in cli.build_namespace()[task_name].get_arguments()}
    for arg, p in settings.BY_ARG.items():
        assert helps[arg] == settings.flag_help(p), arg
        assert p.help in helps[arg] and (not p.env or p.env[0] in helps[arg])


def test_flag_help_names_choices_env_and_default_with_its_unit():
    assert (
        settings.flag_help(settings.BY_NAME["framework"])
        == "training backend: megatron | fsdp (env FRAMEWORK; default megatron)"
    )
    assert settings.flag_help(settings.BY_NAME["hang_timeout"]).endswith("(env HANG_TIMEOUT; default 1800 seconds)")
    assert settings.BY_ARG["mode"].name == "trainer_mode" and "max_staleness" not in settings.BY_ARG
