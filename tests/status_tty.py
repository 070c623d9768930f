"""Test helper (not a test): ``inv status`` through the real program and task code, in whatever terminal runs it,
with each host's probe answer replayed from a recorded file instead of asked over SSH.

    python tests/status_tty.py ANSWERS.json HOSTS.toml [status flags...]

``ANSWERS.json``: ``{host: probe answer}`` as :func:`dapo_ops.control.status.look.fan` returns them
(tests/fixtures/status/probe-answers.json). tests/test_status_layout.py runs it in tmux panes of fixed widths.
"""

import json
import sys

from dapo_ops.cli import namespace_for
from dapo_ops.cli.program import make_program
from dapo_ops.control.status import look as svc


def main(argv: list[str]) -> None:
    answers = json.load(open(argv[0]))
    svc.fan = lambda chosen, fn, timeout, connect_timeout=None: [(h.name, answers[h.name]) for h in chosen]
    make_program(namespace_for(["status"])).run(["dapo-ops", "status", "--inventory", argv[1], *argv[2:]])


if __name__ == "__main__":
    main(sys.argv[1:])
