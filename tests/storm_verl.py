"""A fake verl that storms (tests/test_storm.py): one step line, then verl 0.9.1's reward-function traceback of
tests/fixtures/storm/standin-reward-keyerror.log, one session error every ``interval_s`` (``<run_dir>/storm.json``),
for ever. ``factory`` has ``overrides.build_command``'s signature."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

HERE = os.path.abspath(__file__)
FIXTURE = Path(HERE).parent / "fixtures" / "storm" / "standin-reward-keyerror.log"


def factory(spec, features, setting_changes=None):
    return [sys.executable, HERE, spec["run_dir"]]


def main() -> int:
    cfg = json.loads(Path(sys.argv[1], "storm.json").read_text())
    text = FIXTURE.read_text()
    head, _, rest = text.partition("\x1b[36m(AgentLoopWorkerTQ")
    first = "\x1b[36m(AgentLoopWorkerTQ" + rest
    block = first[: first.index("\x1b[36m(AgentLoopWorkerTQ", first.index("KeyError: 'answer'"))]
    sys.stdout.write(head)
    sys.stdout.flush()
    while True:
        sys.stdout.write(block)
        sys.stdout.flush()
        time.sleep(float(cfg.get("interval_s", 0.02)))


if __name__ == "__main__":
    sys.exit(main())
