"""The stand-in's host-OOM cue (sandbox / test equipment only): a real kernel OOM kill, not a faked one.

A real trainer that runs out of host RAM in a container with a memory limit is ended by the kernel's
cgroup OOM killer: SIGKILL (exit 137), no traceback, and the cgroup's ``oom_kill`` counter grows. That counter is
what the supervisor reads from inside the container (``dapo_ops/agent/supervisor/accelerator.py`` ``oom_kill_count``,
``attempt.py`` ``kernel_oom``: a SIGKILL plus a grown counter is ``oom-host``; a bare SIGKILL is ``crash-other``).
So the cue takes host memory, page by page, until the kernel kills the process: every part of that signature
is the kernel's own.

It only ever does that inside a memory limit of at most :data:`MAX_LIMIT` bytes (the test sets one on the
container: ``docker update --memory``, tests/conftest.py ``Sandbox.memory_limit``); without one it refuses
(:func:`require_limit`), so a cue never takes the machine's own memory.
"""

from __future__ import annotations


#: where the container's memory limit is read: cgroup v2, then cgroup v1
LIMIT_FILES = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")
#: the largest limit the cue fills (bytes): a bigger one is no test container's
MAX_LIMIT = 4 << 30
#: bytes taken per allocation (each one written, so every page is resident)
CHUNK = 16 << 20


def memory_limit() -> int | None:
    """The container's memory limit in bytes, or None when there is none (``max``, cgroup v1's huge default) or
    no cgroup file is readable."""
    for path in LIMIT_FILES:
        try:
            with open(path) as f:
                raw = f.read().strip()
        except OSError:
            continue
        if raw == "max" or not raw.isdigit() or int(raw) >= 1 << 60:
            return None
        return int(raw)
    return None


def require_limit() -> int:
    """The limit (bytes) the cue will fill; SystemExit with one line when there is none at most :data:`MAX_LIMIT`."""
    limit = memory_limit()
    if limit is None or limit > MAX_LIMIT:
        raise SystemExit(
            "verl stand-in: the oom-host cue needs a container memory limit of at most %d MiB (docker update "
            "--memory 768m --memory-swap 768m <container>; tests: Sandbox.memory_limit), found %s: it would take "
            "the machine's own memory" % (MAX_LIMIT >> 20, "none" if limit is None else "%d MiB" % (limit >> 20))
        )
    return limit


def exhaust() -> None:
    """Take host memory until the kernel's OOM killer ends this process (never returns). The process offers itself
    as the victim (``oom_score_adj`` 1000, which any process may raise) so the kernel does not pick the supervisor
    or a shell of the container instead."""
    limit = require_limit()
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")
    except OSError:
        pass
    held = []
    while True:  # past the limit the kernel kills us; a limit that never bites is a test bug: say so
        held.append(b"\x01" * CHUNK)
        if len(held) * CHUNK > 2 * limit:
            raise SystemExit(
                "verl stand-in: took %d MiB under a %d MiB limit and was not killed"
                % (len(held) * CHUNK >> 20, limit >> 20)
            )
