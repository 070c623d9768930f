"""The operator's own config file: ``~/.config/dapo-ops/config.toml`` (mode 0600).

It holds per-user defaults and secrets that must never live in the repository or in a
run record: ``[swanlab]`` (``host``, ``web_host``, ``api_key``, ``mode``, ``log_dir``,
``project``, ``workspace``), ``[notify]`` (``on_escalation``, ``on_success``,
``webhooks = [{kind = "feishu", url = "https://..."}]``), ``[proxy]`` (``http_proxy``,
``https_proxy``, ``no_proxy``) and ``[run]`` (defaults for launch settings).

Path: ``$DAPO_OPS_CONFIG`` if set, else ``$XDG_CONFIG_HOME/dapo-ops/config.toml``, else
``~/.config/dapo-ops/config.toml``. Writing refuses a path inside the git work tree of this
project or of the current directory (secrets would be one ``git add`` away from a commit).

The writer is a minimal TOML emitter (stdlib has none): top-level tables of scalars
(str, int, float, bool), lists, and inline tables. Comments in an existing file are not
preserved when a section is saved.
"""

from __future__ import annotations

import math
import os
import re
import stat
import tempfile
from pathlib import Path
from typing import Any, Mapping

try:  # Python >= 3.11
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - py3.10
    import tomli as tomllib  # type: ignore[no-redef]

SECTIONS: tuple[str, ...] = ("run", "swanlab", "notify", "proxy")
ENV_VAR = "DAPO_OPS_CONFIG"
FILE_MODE = 0o600
DIR_MODE = 0o700


class UserConfigError(ValueError):
    """One-line problem with the user config file (path, what is wrong, how to fix)."""


def config_path(env: Mapping[str, str] | None = None) -> Path:
    """Return the user config file path (it may not exist).

    ``env`` defaults to ``os.environ``. Order: ``DAPO_OPS_CONFIG`` >
    ``$XDG_CONFIG_HOME/dapo-ops/config.toml`` > ``~/.config/dapo-ops/config.toml``.
    """
    env = os.environ if env is None else env
    if env.get(ENV_VAR):
        return Path(env[ENV_VAR]).expanduser()
    base = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base).expanduser() / "dapo-ops" / "config.toml"


def load(path: str | Path | None = None) -> dict[str, dict[str, Any]]:
    """Read the config file into ``{"run": {...}, "swanlab": {...}, "notify": {...}, "proxy": {...}}``.

    A missing file gives empty tables. Unknown top-level tables are kept as they are.
    Raises :class:`UserConfigError` (one line with path and TOML line) on a parse error
    or when a known section is not a table.
    """
    p = Path(path) if path is not None else config_path()
    data: dict[str, Any] = {}
    if p.exists():
        try:
            with open(p, "rb") as f:
                data = tomllib.load(f)
        except tomllib.TOMLDecodeError as exc:
            raise UserConfigError(f"{p}: invalid TOML: {exc}; fix or delete the file") from None
        except OSError as exc:
            raise UserConfigError(f"{p}: cannot read: {exc.strerror}") from None
    for name in SECTIONS:
        val = data.setdefault(name, {})
        if not isinstance(val, dict):
            raise UserConfigError(f"{p}: '{name}' must be a table ([{name}]), got {type(val).__name__}")
    return data


def mode_warning(path: str | Path | None = None) -> str | None:
    """Return a one-line warning if the config file is readable by group/others, else None."""
    p = Path(path) if path is not None else config_path()
    try:
        m = stat.S_IMODE(p.stat().st_mode)
    except FileNotFoundError:
        return None
    if m & 0o077:
        return f"{p} has mode {m:04o} (holds secrets): run `chmod 600 {p}` or re-save it with dapo-ops"
    return None


def _worktree_of(path: Path) -> Path | None:
    for parent in (path, *path.parents):
        if (parent / ".git").exists():
            return parent
    return None


def _inside_git_worktree(p: Path) -> Path | None:
    """The git work tree of this project or of the current directory that would contain ``p``, else None.

    Only those two trees count: a home directory kept in git (dotfiles) must not block the default path.
    """
    target = p.expanduser().resolve()
    for anchor in (Path(__file__).resolve().parent, Path.cwd().resolve()):
        tree = _worktree_of(anchor)
        if tree is not None and (target == tree or tree in target.parents):
            return tree
    return None


def save_section(name: str, values: Mapping[str, Any], path: str | Path | None = None) -> list[str]:
    """Replace table ``[name]`` in the config file with ``values`` and write it atomically.

    The file is written to a temporary file created with mode 0600 (``os.open`` with
    0600 and a 077 umask, so it is never readable by others, not even briefly), fsynced,
    then renamed over the old file; the directory is created 0700. Other tables are kept.

    Returns notes for the operator (e.g. that a looser mode was tightened).
    Raises :class:`UserConfigError` for an unknown section, a path inside a git work tree,
    a value the writer cannot express, or an OS error.
    """
    if name not in SECTIONS:
        raise UserConfigError(f"unknown config section '{name}': use one of {', '.join(SECTIONS)}")
    p = Path(path) if path is not None else config_path()
    repo = _inside_git_worktree(p)
    if repo is not None:
        raise UserConfigError(
            f"refusing to write secrets to {p}: it is inside the git work tree {repo}; "
            f"unset {ENV_VAR} or point it outside the repository"
        )
    notes: list[str] = []
    old_mode = None
    if p.exists():
        old_mode = stat.S_IMODE(p.stat().st_mode)
    data = load(p)
    data[name] = dict(values)
    text = dumps(data)
    old_umask = os.umask(0o077)
    try:
        p.parent.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
        fd, tmp = tempfile.mkstemp(prefix=".config.", suffix=".tmp", dir=p.parent)  # mkstemp: 0600
        try:
            os.fchmod(fd, FILE_MODE)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, p)
        except BaseException:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            raise
    except OSError as exc:
        raise UserConfigError(f"cannot write {p}: {exc.strerror or exc}") from None
    finally:
        os.umask(old_umask)
    if old_mode is not None and old_mode != FILE_MODE:
        notes.append(f"{p} had mode {old_mode:04o}; it is now 0600 (it holds secrets)")
    return notes


# ---------------------------------------------------------------- minimal TOML writer

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(k: Any) -> str:
    if not isinstance(k, str):
        raise UserConfigError(f"config key {k!r} is not a string")
    return k if _BARE_KEY.fullmatch(k) else _string(k)


def _string(s: str) -> str:
    out = ['"']
    for ch in s:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return _string(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, Mapping):
        return "{" + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items()) + "}"
    if v is None:
        raise UserConfigError("TOML has no null: drop the key instead of setting it to None")
    raise UserConfigError(f"cannot write a {type(v).__name__} to the config file")


def dumps(data: Mapping[str, Any]) -> str:
    """Serialise ``{table: {key: value}}`` (plus top-level scalars) to TOML text.

    Keys whose value is None are skipped (TOML has no null). Nested mappings are written
    as inline tables. ``tomllib.loads(dumps(d)) == d`` for the supported types.
    """
    lines = ["# dapo-ops user config (mode 0600; holds secrets; written by dapo-ops)"]
    tables = [(k, v) for k, v in data.items() if isinstance(v, Mapping)]
    for k, v in data.items():
        if not isinstance(v, Mapping) and v is not None:
            lines.append(f"{_key(k)} = {_value(v)}")
    for tname, table in tables:
        lines.append("")
        lines.append(f"[{_key(tname)}]")
        for k, v in table.items():
            if v is None:
                continue
            lines.append(f"{_key(k)} = {_value(v)}")
    return "\n".join(lines) + "\n"
