"""A reader that closes stdout's pipe early ends every task that prints (status's table and ``--json``, ``logs``,
``hosts``, ``preflight``) quietly with exit 141 (dapo_ops/cli/_common.py ``closed_pipe``), through real pipes.

A new-user trial found ``inv status | head -1`` exiting 1 with no line: rich's Console catches the BrokenPipeError
itself and raises ``SystemExit(1)`` (rich/console.py ``Console.on_broken_pipe``); and ``inv status --json | head -1``
ending 0 or 141 by chance: the JSON, block-buffered, reached the pipe only at interpreter exit, where Python says
"Exception ignored ... BrokenPipeError" and exits 120. Each task here runs in a subprocess whose stdout is a pipe
whose reader is already closed (the deterministic case of ``| head -1``: the reader left before the first write),
with only its remote look replaced (no host is contacted); on main's code the table tasks exit 1 and ``--json`` 120.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

import pytest

from config_helpers import no_config

SCRIPT = r"""
import sys
from invoke import Program
from dapo_ops import cli
from dapo_ops.cli import program
from dapo_ops.control.remote import fanout
from dapo_ops.control.remote.fanout import HostResult, Row
from dapo_ops.control.status import look, rows
from dapo_ops.control.preflight.result import Check
from dapo_ops.control.launch import request
import dapo_ops.cli.status as st
import dapo_ops.cli.preflight as pf

RUN = {"run_id": "20261207-000000-abcd", "status": "running", "attempt": 1, "step": 3, "total_steps": 20,
       "attempts": [{"n": 1, "started_at": 1.0}], "features": [], "started_at": 1.0}
st.collect_rows = lambda c, chosen, **kw: [rows.build_row(h.name, {"run": RUN, "tail": "", "now": 2.0}) for h in chosen]
look.fan = lambda chosen, fn, timeout, ct=None: [(h.name, {"blocks": 1, "text": "===== r attempt 1: oom-device =====\n"}) for h in chosen]
fanout.run = lambda chosen, fn, **kw: [HostResult(h, Row(cells={"ssh": "ok"}), 0.1) for h in chosen]
request.preflight_request = lambda *a, **k: (None, "")
pf.check_request = lambda c, req, chosen, **kw: {h.name: [Check("container", "ok", "running")] for h in chosen}
argv = sys.argv[2:]
prog = program.make_program(cli.namespace_for(argv)) if sys.argv[1] == "dapo-ops" else Program(namespace=cli.build_namespace(), name="inv")
prog.run([sys.argv[1]] + argv)
"""

TASKS = [
    ["status"],
    ["status", "--json"],
    ["logs", "--errors"],
    ["hosts"],
    ["hosts", "--check"],
    ["preflight", "--no-compose"],
]


def _env(tmp_path) -> dict:
    """The user's environment: a block-buffered stdout into a pipe (no ``PYTHONUNBUFFERED``, which CI shells may
    set), no inventory, no user config."""
    env = dict(os.environ, DAPO_OPS_CONFIG=no_config(tmp_path), HOME=str(tmp_path))
    for var in ("PYTHONUNBUFFERED", "DAPO_OPS_INVENTORY"):
        env.pop(var, None)
    return env


def _closed_reader(prog: str, argv: list[str], tmp_path) -> subprocess.CompletedProcess:
    r, w = os.pipe()
    os.close(r)  # the reader is gone before the task writes its first byte
    env = _env(tmp_path)
    try:
        return subprocess.run(
            [sys.executable, "-c", SCRIPT, prog, *argv, "-H", "root@192.0.2.1:22"],
            stdout=w,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            env=env,
            cwd=tmp_path,
        )
    finally:
        os.close(w)


@pytest.mark.parametrize("argv", TASKS, ids=" ".join)
def test_a_closed_pipe_ends_every_printing_task_quietly_with_141(argv, tmp_path):
    out = _closed_reader("dapo-ops", argv, tmp_path)
    assert (out.returncode, out.stderr) == (141, ""), out.stderr


@pytest.mark.parametrize("argv", [["status"], ["status", "--json"]], ids=" ".join)
def test_under_plain_inv_too(argv, tmp_path):
    out = _closed_reader("inv", argv, tmp_path)
    assert (out.returncode, out.stderr) == (141, ""), out.stderr


def test_status_into_head_prints_its_first_line_and_ends_quietly(tmp_path):
    """``inv status | head -1`` as typed (bash, pipefail): one line, nothing on stderr, and 141 or 0 only (0 when
    the whole table was in the pipe before head left, as ``git log -1 | head -1``), never rich's silent 1."""
    env = _env(tmp_path)
    cmd = " ".join(
        shlex.quote(a) for a in [sys.executable, "-c", SCRIPT, "dapo-ops", "status", "-H", "root@192.0.2.1:22"]
    )
    out = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {cmd} | head -1"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )
    assert out.stderr == "" and len(out.stdout.splitlines()) == 1, out.stderr
    assert out.returncode in (0, 141)
