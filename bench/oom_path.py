#!/usr/bin/env python3
"""Which dapo-ops modules one device OOM passes through, from the log line to the next attempt's argv (issue 30).

Runs the REAL supervisor (``python -m dapo_ops.agent.supervisor``) on a run of the test stand-in (tests/fake_verl.py:
an update-phase CUDA OOM at step 3, avoided by the offload rung) under a profiler that records every call into a
``dapo_ops`` function, in order. The attempt's argv comes from the real ``overrides.build_command`` (this module's
:func:`factory` builds it, then runs the stand-in). Two windows are reported:

* **OOM path**: from the supervisor's log-following call whose lines hold the OOM (``CUDA out of memory``) to the
  return of the second ``build_command`` (attempt 2's argv): every module with a function called in between (the
  OOM's classification, the kill and teardown, the verdict, the ladder's rung, the record, the next argv);
* **attempt**: everything between attempt 1's argv and attempt 2's (also following steps, records, teardown).

Usage: ``.venv/bin/python bench/oom_path.py [--keep DIR]``. Prints the modules (never a pass/fail).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"

TRACER = r"""
import json, os, runpy, sys, threading
calls = []
def prof(frame, event, arg):
    if event == "call":
        m = frame.f_globals.get("__name__", "")
        if m.startswith("dapo_ops") or m == "oom_path_factory":
            calls.append((m, frame.f_code.co_name))
            if m == "dapo_ops.agent.supervisor.follow" and not any(c[0] == "<oom-line>" for c in calls[-50:]):
                arg = frame.f_locals.get("lines") or frame.f_locals.get("line") or ""
                if "out of memory" in (arg if isinstance(arg, str) else "\n".join(map(str, arg))):
                    calls.append(("<oom-line>", frame.f_code.co_name))
    elif event == "return" and frame.f_code.co_name == "build_command" and frame.f_globals.get("__name__") == "dapo_ops.core.overrides":
        calls.append(("<return>", "build_command"))
sys.setprofile(prof); threading.setprofile(prof)
out = os.environ["OOM_PATH_TRACE"]
try:
    sys.argv = ["dapo_ops.agent.supervisor"] + sys.argv[1:]
    runpy.run_module("dapo_ops.agent.supervisor", run_name="__main__", alter_sys=True)
except SystemExit:
    pass
finally:
    sys.setprofile(None)
    with open(out, "w") as fh:
        json.dump(calls, fh)
"""


def factory(spec, features, setting_changes=None):
    """The attempt's argv as the supervisor builds it (the real ``build_command``), then the stand-in's argv."""
    sys.path.insert(0, str(TESTS))
    from dapo_ops.core import overrides
    import fake_verl

    overrides.build_command(spec, features, setting_changes)
    return fake_verl.factory(spec, features, setting_changes)


def windows(calls: list) -> tuple[list[str], list[str]]:
    """(OOM path modules, attempt-window modules), each in first-call order."""
    ends = [i for i, c in enumerate(calls) if c == ["<return>", "build_command"]]
    first, second = ends[0], ends[1]
    oom_from = next(i for i in range(first, second) if calls[i][0] == "<oom-line>")

    def mods(lo: int, hi: int) -> list[str]:
        seen: list[str] = []
        for m, _ in calls[lo:hi]:
            if m.startswith("dapo_ops") and m not in seen:
                seen.append(m)
        return seen

    return mods(oom_from, second + 1), mods(first + 1, second + 1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep", default="")
    a = ap.parse_args()
    sys.path[:0] = [str(ROOT), str(TESTS)]
    import supervisor_helpers as sh

    tmp = Path(a.keep or tempfile.mkdtemp(prefix="oom-path-"))
    run_dir = sh.new_run(tmp, steps=5, workdir=tmp)
    (run_dir / "fake.json").write_text(json.dumps({"step_time": 0.05, "oom_at": 3, "oom_unless": ["offload"]}))
    trace = tmp / "trace.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(TESTS), str(ROOT / "bench")]),
               OOM_PATH_TRACE=str(trace))  # fmt: skip
    with open(run_dir / "supervisor.log", "ab") as log:
        subprocess.run(
            [sys.executable, "-c", TRACER, str(run_dir), "--command-factory", "oom_path:factory"],
            stdout=log, stderr=subprocess.STDOUT, env=env, timeout=120, check=False,
        )  # fmt: skip
    rec = json.loads((run_dir / "run.json").read_text())
    calls = json.loads(trace.read_text())
    path, attempt = windows(calls)
    print(
        f"run {rec['status']}, attempts {[x['verdict']['cls'] if x.get('verdict') else 'ok' for x in rec['attempts']]}"
    )
    print(f"OOM path (the OOM line's classification -> attempt 2's argv): {len(path)} modules")
    for m in path:
        print("  " + m)
    print(f"attempt window (attempt 1's argv -> attempt 2's): {len(attempt)} modules")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
