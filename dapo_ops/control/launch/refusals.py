"""The typed errors of the launch service (:mod:`dapo_ops.control.launch.service`, :mod:`dapo_ops.control.launch.resume`,
:mod:`dapo_ops.control.launch.multihost_service`): each ``str()`` is one line saying what is wrong and how to fix it."""

from __future__ import annotations


class LaunchRefused(Exception):
    """A quick check failed on one host; ``kind`` (``active-run`` | ``preflight`` | ``container-stopped`` |
    ``resume``) and a one-line ``str()`` saying what is wrong and how to fix it. Nothing was started."""

    def __init__(self, kind: str, message: str):
        self.kind = kind
        super().__init__(message)


class LaunchUsageError(ValueError):
    """Bad launch input found before any host is contacted (an ``--override`` holding a secret or not parsable
    by Hydra). ``str()`` is one line with the fix; the CLI exits 2."""
