"""The one spelling of a command run on a training host, as its shell gets it (stdlib only, pure, shipped): in the
host's training container ``docker exec [options] <container> sh -c <cmd>`` (or ``<container> argv...``), on a bare
host (``runtime = "host"``) the command itself; every value ``shlex.quote``-d.

The operator side's Target builds its host lines with it (``dapo_ops/control/remote/commands.py`` exec_command); the
supervisor's stop suggestions print it for the user to paste on the host (``dapo_ops/core/ladder.py`` on_host), so
the command a suggestion gives is the one dapo-ops itself would run there."""

from __future__ import annotations

import shlex
from typing import Optional, Sequence, Union


def in_container(cmd: Union[str, Sequence[str]], container: Optional[str], options: str = "") -> str:
    """``cmd`` as the host's shell runs it: ``docker exec <options> <container> sh -c <cmd>`` (``cmd`` a list:
    ``<container> argv...``, each element one argv word), or with ``container`` None / "" (a bare host) ``cmd``
    itself (a list: its words quoted). ``options``: docker exec's own, already quoted (``-i -w /verl``).
    :raises ValueError: an empty argv."""
    if not isinstance(cmd, str) and not cmd:
        raise ValueError("empty argv")
    body = cmd if isinstance(cmd, str) else " ".join(shlex.quote(str(a)) for a in cmd)
    if not container:
        return body
    line = "docker exec" + (" " + options if options else "") + " " + shlex.quote(container)
    return line + (" sh -c " + shlex.quote(cmd) if isinstance(cmd, str) else " " + body)
