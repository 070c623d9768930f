"""What the pure tests' fake containers need to answer bundle ops (``control/remote/bundle.py`` ``run_op``, the one
way in): the op an op line runs, and the ``runfiles`` op answered by its own code over an in-memory container.

Not a test module (no ``test_`` prefix): imported by the fakes of tests/test_launch_once.py, tests/test_launch.py,
tests/test_resume_rungs.py and tests/test_multihost.py.
"""

from __future__ import annotations

import json
import posixpath
import shlex
from types import SimpleNamespace

from dapo_ops.agent import runfiles


def op_of(cmd) -> list[str] | None:
    """``[op, *args]`` of the bundle op an op line runs (``... exec python3 [-S] -m dapo_ops.agent.<op> <args>``,
    :func:`dapo_ops.control.remote.bundle.op_line`); None for any other command."""
    text = cmd if isinstance(cmd, str) else shlex.join(cmd)
    if " exec " not in text or "dapo_ops.agent." not in text:
        return None
    argv = shlex.split(text.split(" exec ", 1)[1])
    i = argv.index("-m")
    return [argv[i + 1].rsplit(".", 1)[-1], *argv[i + 2 :]]


def list_dir(files: dict[str, str], path: str) -> list[str]:
    """The names directly in ``path`` of a container whose files are ``files`` (path -> text)."""
    top = path.rstrip("/") + "/"
    return sorted({p[len(top) :].split("/", 1)[0] for p in files if p.startswith(top)})


def runfiles_answer(args: list[str], files: dict[str, str]) -> SimpleNamespace:
    """The result of ``python3 -m dapo_ops.agent.runfiles <args>`` in a container whose files are ``files``
    (path -> text): ``resume-facts`` is :func:`dapo_ops.agent.runfiles.resume_facts` reading and listing ``files``;
    ``show`` / ``show-spec`` print the file as JSON (exit 1 when missing); ``remove`` answers nothing."""
    sub, run_dir = args
    if sub == "resume-facts":
        out = json.dumps(runfiles.resume_facts(run_dir, read_text=files.get, list_dir=lambda d: list_dir(files, d)))
        return SimpleNamespace(exited=0, stdout=out + "\n", stderr="")
    if sub in ("show", "show-spec"):
        name = "run.json" if sub == "show" else "spec.json"
        text = files.get(posixpath.join(run_dir, name))
        if text is None:
            return SimpleNamespace(exited=1, stdout="", stderr=f"no {name} in {run_dir}\n")
        return SimpleNamespace(exited=0, stdout=json.dumps(json.loads(text)) + "\n", stderr="")
    return SimpleNamespace(exited=0, stdout="", stderr="")
