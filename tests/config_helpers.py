"""The operator's config file in tests: an empty one, so a test reads no config of the machine's user.

``DAPO_OPS_CONFIG`` must name a file that exists (dapo_ops/control/userconfig.py ``named_missing``: a named config
file that is not there is refused, never read as empty), so "no config" is an empty file, mode 0600 as the tool
writes it."""

from __future__ import annotations

from pathlib import Path


def no_config(directory, name: str = "none.toml") -> str:
    """The path of an empty config file ``name`` in ``directory`` (created 0600, kept when it exists)."""
    p = Path(directory) / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.touch(mode=0o600, exist_ok=True)
    return str(p)
