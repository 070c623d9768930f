"""A fake verl that never reaches step 1 (tests/test_live_fatal.py): it prints ``lines``, then ``repeat`` every
``interval_s`` seconds for ever (``<run_dir>/loop.json``), as verl does while Ray's GCS client retries an unreachable
head (the sandbox stand-in's ``network`` cue, sandbox/verl_standin/verl/_standin/trainer.py). ``factory`` has
``overrides.build_command``'s signature."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

HERE = os.path.abspath(__file__)


def factory(spec, features, setting_changes=None):
    return [sys.executable, HERE, spec["run_dir"]]


def main() -> int:
    cfg = json.loads(Path(sys.argv[1], "loop.json").read_text())
    for line in cfg.get("lines") or []:
        print(line, flush=True)
    while True:
        time.sleep(float(cfg.get("interval_s", 0.05)))
        for line in cfg.get("repeat") or []:
            print(line, flush=True)


if __name__ == "__main__":
    sys.exit(main())
