"""The preflight verdict type: :class:`Check` (``ok | warn | fail`` + one line found + one line fix), the
worst-of rule and the ``--json`` form. Pure.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

OK, WARN, FAIL = "ok", "warn", "fail"
STATUSES = (OK, WARN, FAIL)


@dataclass
class Check:
    """One preflight verdict. ``status``: ``ok`` | ``warn`` | ``fail`` (anything else raises ``ValueError``: a
    programming error); ``message``: one line of what was found; ``fix``: one line of what to do (empty when ok)."""

    name: str
    status: str
    message: str
    fix: str = ""

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"check {self.name!r}: status {self.status!r} is not one of {', '.join(STATUSES)}")
        self.message = " ".join(str(self.message).split())
        self.fix = " ".join(str(self.fix).split())

    def to_json(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        """One line: ``<name> <status>: <message>; fix: <fix>``."""
        return f"{self.name} {self.status}: {self.message}" + (f"; fix: {self.fix}" if self.fix else "")


def split_fix(message: str) -> tuple[str, str]:
    """RemoteError messages are ``<what>; <fix>``: split at the last ``; ``."""
    if "; " in message:
        a, b = message.rsplit("; ", 1)
        return a, b
    return message, ""


def on_host(c: Check) -> Check:
    """A check of a bare host (``runtime = "host"``) names the host, not a container, in its message."""

    def sub(t: str) -> str:
        for a, b in (
            ("inside the container", "on the host"),
            ("in the container's Python", "in the host's Python"),
            ("FROM THE CONTAINER", "FROM THE HOST"),
            ("in the container", "on the host"),
            ("the container's", "the host's"),
            (
                "run the container with --gpus all (NVIDIA container toolkit)",
                "install the NVIDIA driver / nvidia-smi on the host and put it on PATH (inventory env)",
            ),
        ):
            t = t.replace(a, b)
        return t

    return Check(c.name, c.status, sub(c.message), sub(c.fix))


def worst(checks: list[Check]) -> str:
    """``fail`` if any fails, else ``warn`` if any warns, else ``ok``."""
    st = {c.status for c in checks}
    return FAIL if FAIL in st else WARN if WARN in st else OK


def to_json(results: dict[str, list[Check]]) -> str:
    """``{"hosts": {name: {"status", "checks": [...]}}, "status"}`` as JSON text."""
    hosts = {h: {"status": worst(cs), "checks": [c.to_json() for c in cs]} for h, cs in results.items()}
    allc = [c for cs in results.values() for c in cs]
    return json.dumps({"status": worst(allc), "hosts": hosts}, indent=1)
