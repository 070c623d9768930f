"""Invoke entry point: ``inv --list``. All tasks live in ``dapo_ops/cli/``.

``inv <task>`` imports only the module of the tasks on its command line (``dapo_ops.cli.namespace_for``).
"""

from dapo_ops.cli import namespace_for

ns = namespace_for()
