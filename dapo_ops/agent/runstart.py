"""Start one run's supervisor and answer once verl has started (STDLIB ONLY: shipped in the bundle).

CLI in the container (bare host: its shell), what ``inv launch`` runs to start a run (``dapo_ops/control/launch/service.py``
``start_run``, through ``bundle.run_op``: the one way in; ONE remote call)::

    python3 -m dapo_ops.agent.runstart <run_dir> --workdir W --start-wait S --settle S --link-wait S [--stdin]

0. with ``--stdin``: reads ONE JSON object from stdin, ``{"spec": <spec.json text>, "secret_env": <secret.env text,
   optional>}``, and writes those files into ``<run_dir>`` (:func:`write_files`: created with umask 077, the run dir
   too, then given their mode: ``spec.json`` 0644, ``secret.env`` 0600; each through ``<name>.dapo-tmp`` and a
   rename). Secrets come through the SSH channel's stdin, never a command line, a log or a plan. A missing or
   malformed spec, or a write that fails (a full disk): one stderr line, exit :data:`SPAWN_FAILED`, nothing runs;
   without ``--stdin`` the files must be there already;
1. starts ``python3 -m dapo_ops.agent.supervisor <run_dir>`` (this interpreter, this ``PYTHONPATH``: the bundle's)
   in ``W``, in its own session, stdin from ``/dev/null``, stdout + stderr into ``<run_dir>/supervisor.log``, no other
   descriptor inherited: it outlives this op, the ``docker exec`` and the SSH session (the supervisor calls
   ``setsid`` itself too);
2. waits here, reading run.json every :data:`POLL_S` seconds (a local file read), until the supervisor moved the run
   past ``starting`` (it writes ``running`` once verl's process is started,
   ``dapo_ops/agent/supervisor/machine.py``), or it exited, or ``--start-wait`` seconds passed;
3. then watches ``--settle`` seconds more for an immediate failure (a bad override ends verl at once) and up to
   ``--link-wait`` seconds for the SwanLab link (run.json ``swanlab_url``), stopping early at a terminal status;
4. prints ONE JSON line and exits 0: ``{"started": bool, "record": run.json | null, "supervisor_exit": int | null}``
   (``started`` false: the run never left ``starting``; ``supervisor_exit``: the supervisor's exit status when it
   ended before that). Exit :data:`SPAWN_FAILED` (a line on stderr) when the supervisor could not be started at all
   (workdir or run dir missing): nothing runs.

So a launch costs one remote call for the start and its wait instead of a poll per half second (each a full SSH
round trip, ``docker exec`` and Python start). Once this op exits the supervisor's parent is the container's init
(as for every orphan in it), which reaps it when the run is over; an init that reaps nothing (``sleep infinity``)
keeps an ended supervisor as a zombie until the container restarts: it holds no resources and counts as dead
everywhere (:func:`dapo_ops.agent.procs.pid_alive`, :mod:`dapo_ops.agent.procs`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List, Optional

from dapo_ops.agent import runfiles
from dapo_ops.core import runstate

#: seconds between two reads of run.json while waiting (local reads: cheap)
POLL_S = 0.1
#: exit status when the supervisor could not be started (nothing runs)
SPAWN_FAILED = 3


#: the files ``--stdin`` writes: (key of the stdin JSON, file name in the run dir, mode)
STDIN_FILES = (("spec", runstate.SPEC_NAME, 0o644), ("secret_env", runstate.SECRET_ENV_NAME, 0o600))


class StartInputError(Exception):
    """The ``--stdin`` input cannot be used (no JSON object, no spec, a spec that is not a JSON object) or a file
    cannot be written. ``str()`` is one line."""


def read_input(data: str) -> Dict[str, str]:
    """``{"spec": text, "secret_env": text?}`` from the stdin text ``data`` (step 0 of the module docstring).

    :raises StartInputError: not a JSON object, ``spec`` missing or not the text of a JSON object, a value not a
        string."""
    try:
        obj = json.loads(data) if data.strip() else None
    except ValueError as e:
        raise StartInputError('the start\'s stdin is not JSON (%s): expected {"spec": <spec.json text>}' % e)
    if not isinstance(obj, dict) or not isinstance(obj.get("spec"), str):
        raise StartInputError('the start\'s stdin has no spec: expected {"spec": <spec.json text>}')
    try:
        spec = json.loads(obj["spec"])
    except ValueError as e:
        raise StartInputError("the run's spec is not JSON: %s" % e)
    if not isinstance(spec, dict):
        raise StartInputError("the run's spec is not a JSON object")
    if not isinstance(obj.get("secret_env", ""), str):
        raise StartInputError("the start's secret_env is not text")
    return {k: obj[k] for k, _, _ in STDIN_FILES if obj.get(k)}


def write_files(run_dir: str, files: Dict[str, str]) -> None:
    """Write ``files`` (from :func:`read_input`) into ``run_dir`` as :data:`STDIN_FILES` says: under umask 077 (the
    run dir and its parents too, as ``Target.put_text``'s ``umask 077 && mkdir -p`` made them), each through
    ``<name>.dapo-tmp`` (:func:`dapo_ops.agent.runfiles.write_bytes_atomic`: a full disk leaves no torn file), then
    ``chmod`` to its mode: never readable by others before it has its final mode. The umask is restored after (the
    supervisor started next keeps the container's own).

    :raises StartInputError: a write failed (one line naming the file: a full disk, a read-only runs dir)."""
    old = os.umask(0o077)
    path = run_dir
    try:
        os.makedirs(run_dir, exist_ok=True)
        for key, name, mode in STDIN_FILES:
            if key not in files:
                continue
            path = os.path.join(run_dir, name)
            runfiles.write_bytes_atomic(path, files[key].encode("utf-8"), mode, tmp_suffix=".dapo-tmp")
            os.chmod(path, mode)
    except OSError as e:
        raise StartInputError("cannot write %s: %s" % (path, e.strerror or e))
    finally:
        os.umask(old)


def spawn(run_dir: str, workdir: str) -> "subprocess.Popen[bytes]":
    """Start the supervisor of ``run_dir`` detached (step 1 of the module docstring).

    :raises OSError: ``workdir`` or ``run_dir`` missing, the log not writable.
    """
    with open(os.path.join(run_dir, "supervisor.log"), "wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "dapo_ops.agent.supervisor", run_dir],
            cwd=workdir or None,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )


def _pending(rec: Optional[Dict[str, Any]]) -> bool:
    return not rec or rec.get("status") in (None, runstate.RunStatus.STARTING)


def wait(
    run_dir: str,
    exited: Callable[[], Optional[int]],
    *,
    start_wait: float,
    settle: float,
    link_wait: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Dict[str, Any]:
    """Steps 2 and 3 of the module docstring: the answer (``started``, ``record``, ``supervisor_exit``).

    ``exited()``: the supervisor's exit status, None while it runs (``Popen.poll``). Seconds throughout."""
    deadline = clock() + start_wait
    rec = runfiles.read_run(run_dir)
    while _pending(rec):
        code = exited()
        if code is not None:  # it ended before the run started: read once more (it may have written, then exited)
            rec = runfiles.read_run(run_dir)
            if _pending(rec):
                return {"started": False, "record": rec, "supervisor_exit": code}
            break
        if clock() >= deadline:
            return {"started": False, "record": rec, "supervisor_exit": None}
        sleep(POLL_S)
        rec = runfiles.read_run(run_dir)
    assert rec is not None
    settle_end = clock() + settle
    link_end = clock() + link_wait
    while not runstate.RunStatus.of(rec.get("status")).terminal:
        now = clock()
        if now >= settle_end and (rec.get("swanlab_url") or now >= link_end):
            break
        sleep(POLL_S)
        rec = runfiles.read_run(run_dir) or rec
    return {"started": True, "record": rec, "supervisor_exit": None}


def main(argv: Optional[List[str]] = None) -> int:
    """``python3 -m dapo_ops.agent.runstart <run_dir> --workdir W --start-wait S --settle S --link-wait S
    [--stdin]``."""
    p = argparse.ArgumentParser(prog="python3 -m dapo_ops.agent.runstart")
    p.add_argument("run_dir")
    p.add_argument("--workdir", default="")
    p.add_argument("--start-wait", type=float, required=True)
    p.add_argument("--settle", type=float, required=True)
    p.add_argument("--link-wait", type=float, required=True)
    p.add_argument("--stdin", action="store_true", help="spec.json (+ secret.env) as one JSON object on stdin")
    a = p.parse_args(argv)
    if a.stdin:
        try:
            write_files(a.run_dir, read_input(sys.stdin.read()))
        except StartInputError as e:
            sys.stderr.write("could not start run %s: %s\n" % (os.path.basename(a.run_dir.rstrip("/")), e))
            return SPAWN_FAILED
    try:
        proc = spawn(a.run_dir, a.workdir)
    except OSError as e:
        sys.stderr.write("could not start the supervisor of %s: %s\n" % (a.run_dir, e))
        return SPAWN_FAILED
    answer = wait(a.run_dir, proc.poll, start_wait=a.start_wait, settle=a.settle, link_wait=a.link_wait)
    sys.stdout.write(json.dumps(answer) + "\n")
    return 0


if __name__ == "__main__":  # pragma: no cover - run in the container by control/launch/service.py start_run
    sys.exit(main())
