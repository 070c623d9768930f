"""core/ does no I/O (issue 30 item 6): pure decisions, schema and path rules only; what touches the machine (files,
/proc, signals, flock, subprocesses, sockets, the environment, stdout) lives in agent/ (docs/design.md "Layout").

An ast walk over every module of ``dapo_ops/core``: a call of ``open``/``print``/``input``, an ``os`` function that
touches the file system, processes or the environment, a ``sys`` stream or ``sys.exit``, a file method of a path
(``read_text``, ``mkdir``, ``exists`` ...), an import of a module whose purpose is I/O (``fcntl``, ``subprocess``,
``socket`` ...) or a ``/proc`` / ``/sys`` path literal is a finding. The few that are meant are listed in
:data:`ALLOWED`, each with why; an entry that no longer matches anything fails too, so the list cannot go stale.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CORE = REPO / "dapo_ops" / "core"

#: builtins that read or write outside the process
IO_BUILTINS = {"open", "print", "input"}
#: ``os.<name>`` that touch files, processes or the environment (``os.path.join``/``basename``/``dirname`` are string
#: rules and stay allowed)
OS_IO = {
    "open", "read", "write", "close", "fsync", "replace", "rename", "unlink", "remove", "rmdir", "mkdir", "makedirs",
    "listdir", "scandir", "walk", "stat", "lstat", "fstat", "chmod", "chown", "symlink", "readlink", "link", "kill",
    "killpg", "system", "popen", "fork", "execv", "execvp", "execve", "spawnv", "setsid", "getpid", "getppid",
    "environ", "getenv", "putenv", "statvfs", "truncate", "utime", "access", "getcwd", "chdir",
}  # fmt: skip
OS_PATH_IO = {"exists", "isdir", "isfile", "islink", "getsize", "getmtime", "realpath", "expanduser", "lexists"}
SYS_IO = {"stdout", "stderr", "stdin", "exit", "argv"}
#: methods of pathlib paths (and file objects) that touch the disk
PATH_IO = {
    "read_text", "read_bytes", "write_text", "write_bytes", "mkdir", "iterdir", "glob", "rglob", "unlink", "touch",
    "exists", "is_file", "is_dir", "rmdir", "rename", "symlink_to", "chmod", "resolve", "expanduser", "readlines",
}  # fmt: skip
#: modules whose purpose is I/O or processes
IO_MODULES = {
    "fcntl", "subprocess", "socket", "shutil", "tempfile", "signal", "select", "selectors", "mmap", "glob", "pty",
    "termios", "resource", "ctypes", "multiprocessing", "urllib.request", "http.client", "ssl", "io",
}  # fmt: skip

#: (module path under dapo_ops/core, finding) -> why it is meant. Keep this short: a new entry needs a reason a
#: reviewer accepts, not a silenced finding.
ALLOWED = {
    ("classify/__init__.py", "open()"): "classify_file: the one bounded tail read of a log (seek to the last 4 MiB, "
    "cost independent of the log's size) shared by the supervisor's escalate step, `inv classify` and the case "
    "tests; the bytes go straight into the pure classify()",
    ("classify/__main__.py", "print()"): "`python -m dapo_ops.core.classify LOGFILE | --troubleshooting-md`: the "
    "classifier's command line (docs/troubleshooting.md is regenerated with it); runs only as __main__, never on "
    "import",
    ("classify/__main__.py", "sys.stdout"): "the same command line",
    ("classify/__main__.py", "sys.stderr"): "the same command line",
    ("classify/__main__.py", "sys.exit"): "the same command line",
    ("classify/__main__.py", "sys.argv"): "the same command line",
}


def findings(path: Path) -> set[str]:
    """The I/O a module's source does, as short names (``open()``, ``os.kill``, ``import fcntl``, ``"/proc/..."``)."""
    tree = ast.parse(path.read_text(), str(path))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in IO_BUILTINS:
            out.add(f"{node.func.id}()")
        elif isinstance(node, ast.Attribute):
            base = node.value
            if isinstance(base, ast.Name) and base.id == "os" and node.attr in OS_IO:
                out.add(f"os.{node.attr}")
            elif (
                isinstance(base, ast.Attribute)
                and isinstance(base.value, ast.Name)
                and (base.value.id, base.attr) == ("os", "path")
                and node.attr in OS_PATH_IO
            ):
                out.add(f"os.path.{node.attr}")
            elif isinstance(base, ast.Name) and base.id == "sys" and node.attr in SYS_IO:
                out.add(f"sys.{node.attr}")
            elif node.attr in PATH_IO:
                out.add(f".{node.attr}()")
        elif isinstance(node, ast.Import):
            out.update(f"import {a.name}" for a in node.names if a.name in IO_MODULES)
        elif isinstance(node, ast.ImportFrom) and node.module in IO_MODULES:
            out.add(f"import {node.module}")
        elif isinstance(node, ast.ImportFrom) and node.module in ("os", "sys"):
            out.update(f"{node.module}.{a.name}" for a in node.names if a.name in OS_IO | SYS_IO)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value.startswith(("/proc", "/sys/")):
                out.add(repr(node.value[:12]))
    return out


def all_findings() -> dict[tuple[str, str], None]:
    return {
        (p.relative_to(CORE).as_posix(), f): None
        for p in sorted(CORE.rglob("*.py"))
        if "__pycache__" not in p.parts
        for f in sorted(findings(p))
    }


def test_core_modules_do_no_io():
    bad = [f"dapo_ops/core/{m}: {f}" for (m, f) in all_findings() if (m, f) not in ALLOWED]
    assert not bad, (
        "core/ holds pure decisions, schema and path rules; move what touches the machine to agent/ (or list it in "
        "tests/test_core_pure.py ALLOWED with why):\n" + "\n".join(bad)
    )


def test_every_allowed_exception_is_still_needed():
    found = all_findings()
    stale = [k for k in ALLOWED if k not in found]
    assert not stale, f"ALLOWED names I/O the code no longer does; remove: {stale}"


def test_the_walk_finds_what_the_old_runstate_did(tmp_path):
    """The checker is not blind: the machine-side code that core/runstate.py and core/raynodes.py held before issue
    30 item 6 (flock, /proc liveness, os.kill, file reads, the CLI) is what it reports."""
    src = """
import fcntl, json, os, sys
def pid_alive(pid):
    os.kill(pid, 0)
    with open("/proc/%d/stat" % pid, "rb") as fh:
        return fh.read()
def ray_sessions(root):
    return os.listdir(root)
def _cli(argv):
    sys.stdout.write(json.dumps(argv))
"""
    p = tmp_path / "old_runstate.py"
    p.write_text(src)
    got = findings(p)
    assert {"import fcntl", "os.kill", "open()", "'/proc/%d/sta'", "os.listdir", "sys.stdout"} <= got, got
