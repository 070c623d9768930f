"""Invoke entry point: ``inv --list``. All tasks live in ``dapo_ops/tasks/``."""

from dapo_ops.cli import ns  # noqa: F401
