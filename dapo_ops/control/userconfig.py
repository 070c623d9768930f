"""The operator's own config file: ``~/.config/dapo-ops/config.toml`` (mode 0600).

It holds per-user defaults and secrets that must never live in the repository or in a
run record: ``[swanlab]`` (``host``, ``web_host``, ``api_key``, ``mode``, ``log_dir``,
``project``, ``workspace``), ``[notify]`` (``on_escalation``, ``on_success``, ``timeout_s``,
``webhooks = [{kind = "feishu", url = "https://..."}]``), ``[proxy]`` (``http_proxy``,
``https_proxy``, ``no_proxy``) and ``[run]`` (defaults for launch settings: the ``key`` of
each :data:`dapo_ops.control.settings.PARAMS` entry). :data:`TABLES` is the model (msgspec);
an unknown table or key, or a value of the wrong type, is a :class:`UserConfigError` naming
the file, the line, the table and the key. The values themselves are checked where they are
used (:mod:`dapo_ops.control.settings`, :mod:`dapo_ops.control.swanlab_settings`, :mod:`dapo_ops.agent.notify`).

Path: ``$DAPO_OPS_CONFIG`` if set, else ``$XDG_CONFIG_HOME/dapo-ops/config.toml``, else
``~/.config/dapo-ops/config.toml``. Writing refuses a path inside the git work tree of this
project or of the current directory (secrets would be one ``git add`` away from a commit); reading refuses such a
file when it holds a secret (:func:`secrets_held`), as it refuses one others can read.
A save edits the file with tomlkit: only the saved table's changed lines change, the user's
comments and order stay.
"""

from __future__ import annotations

import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Mapping

import msgspec

from dapo_ops.control import settings
from dapo_ops.agent.notify import DEFAULT_TIMEOUT_S
from dapo_ops.control.inventory.hosts_file import TomlLines, explain, toml_error
from dapo_ops.control.inventory.model import ProxyTable
from dapo_ops.control.inventory.model import rule

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - py3.10
    import tomli as tomllib

ENV_VAR = "DAPO_OPS_CONFIG"
FILE_MODE = 0o600
DIR_MODE = 0o700
HEADER = "# dapo-ops user config (mode 0600; holds secrets; written by dapo-ops)"


class UserConfigError(ValueError):
    """One-line problem with the user config file (path, what is wrong, how to fix)."""


#: ``[swanlab]`` (strings; :func:`dapo_ops.control.swanlab_settings.resolve` checks the mode and the hosts) and one
#: ``[notify] webhooks`` entry (:func:`dapo_ops.agent.notify.spec_from_user_config` checks its kind and URL)
SwanlabTable = msgspec.defstruct(
    "SwanlabTable",
    [(k, str, "") for k in ("host", "web_host", "api_key", "mode", "log_dir", "project", "workspace")],
    forbid_unknown_fields=True,
)
if TYPE_CHECKING:  # a defstruct, as the other tables: to mypy it is a Struct class

    class Webhook(msgspec.Struct): ...

else:
    Webhook = msgspec.defstruct(
        "Webhook",
        [(k, str, "") for k in ("kind", "url", "url_env", "sign_secret", "secret")],
        forbid_unknown_fields=True,
    )


class NotifyTable(msgspec.Struct, forbid_unknown_fields=True):
    """``[notify]``: when to notify and where (``timeout_s`` in seconds per webhook call)."""

    on_escalation: bool = False
    on_success: bool = False
    timeout_s: Annotated[float, rule("must be > 0 seconds, got {v}", gt=0)] = DEFAULT_TIMEOUT_S
    webhooks: list[Webhook] = []


_RUN_TYPES = {"int": int, "float": float, "bool": bool, "str": str, "features": str | list[str]}
#: ``[run]``: one key per run setting stored in that table (types from the settings table; ranges there)
RunTable = msgspec.defstruct(
    "RunTable",
    [
        (p.key, _RUN_TYPES[p.type] | msgspec.UnsetType, msgspec.UNSET)
        for p in settings.PARAMS
        if p.key and "." not in p.key
    ],
    forbid_unknown_fields=True,
)


#: the model of the file: table name -> its msgspec Struct (every table and key optional)
TABLES: dict[str, type] = {"run": RunTable, "swanlab": SwanlabTable, "notify": NotifyTable, "proxy": ProxyTable}
SECTIONS: tuple[str, ...] = tuple(TABLES)


def config_path(env: Mapping[str, str] | None = None) -> Path:
    """Return the user config file path (it may not exist).

    ``env`` defaults to ``os.environ``. Order: ``DAPO_OPS_CONFIG`` >
    ``$XDG_CONFIG_HOME/dapo-ops/config.toml`` > ``~/.config/dapo-ops/config.toml``.

    :raises UserConfigError: ``DAPO_OPS_CONFIG`` is set but empty or blank (the settings table's empty-value rule, as
        for ``DAPO_OPS_INVENTORY``: ``DAPO_OPS_CONFIG=$CFG`` with CFG unset is a forgotten path, never the default
        file in silence).
    """
    env = os.environ if env is None else env
    if ENV_VAR in env and not env[ENV_VAR].strip():
        raise UserConfigError(
            f"{ENV_VAR} is set but empty; set it to a config.toml path, or unset it (`unset {ENV_VAR}`) for "
            f"~/.config/dapo-ops/config.toml"
        )
    if env.get(ENV_VAR):
        return Path(env[ENV_VAR]).expanduser()
    return _config_home(env) / "dapo-ops" / "config.toml"


def _config_home(env: Mapping[str, str]) -> Path:
    """The user's config home: ``$XDG_CONFIG_HOME``, else ``~/.config`` (the default file's base)."""
    return Path(env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")).expanduser()


def named_missing(path: Path, env: Mapping[str, str]) -> None:
    """Refuse a config file the user named (``$DAPO_OPS_CONFIG``) that is not there: read as empty in silence, every
    setting, key and webhook in it would be dropped unsaid (a typo in the path). Only the default path may be missing
    (no config file yet). A path that exists but cannot be read, or is not valid TOML, is :func:`load`'s refusal.

    :raises UserConfigError: one line naming the path and the fix."""
    if env.get(ENV_VAR) and not path.exists():
        raise UserConfigError(
            f"{ENV_VAR}={path}: no such file; fix the path, create the file (`touch {path}; chmod 600 {path}`), "
            f"or unset {ENV_VAR} for ~/.config/dapo-ops/config.toml"
        )


def load(path: str | Path | None = None) -> dict[str, dict[str, Any]]:
    """Read the config file into ``{"run": {...}, "swanlab": {...}, "notify": {...}, "proxy": {...}}``.

    A missing file gives empty tables (with ``path`` None, a missing ``$DAPO_OPS_CONFIG`` is refused:
    :func:`named_missing`); the dicts hold the file's own values (no defaults filled in).
    Raises :class:`UserConfigError` (one line with the path and the TOML line) on a parse error,
    an unknown table or key, or a value of the wrong type (validated against :data:`TABLES`); and for a file holding
    a secret that others can read or that lies inside a git work tree.
    """
    if path is None:
        p = config_path()
        named_missing(p, os.environ)
    else:
        p = Path(path)
    try:
        text = p.read_text(encoding="utf-8") if p.exists() else ""
    except (OSError, UnicodeDecodeError) as exc:
        raise UserConfigError(f"{p}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    data = _validate(text, p)
    from dapo_ops.agent import notify

    try:
        notify.check_webhooks(data["notify"].get("webhooks"))
    except ValueError as exc:
        raise UserConfigError(f"{p}: {exc}") from None
    held = secrets_held(data)
    _refuse_secrets_in_worktree(p, held)
    loose = mode_warning(p) if held else None
    if loose:
        raise UserConfigError(
            f"{p} is readable by others (mode {stat.S_IMODE(p.stat().st_mode):04o}) and holds "
            f"{', '.join(held)}: run `chmod 600 {p}`; dapo-ops refuses to use it until then"
        )
    return data


def _refuse_secrets_in_worktree(p: Path, held: list[str]) -> None:
    """Refuse a file holding secrets inside a project's git work tree (:func:`_inside_git_worktree`: where the
    file lies, not the current directory): a secret there is one ``git add`` away from a commit. Raises
    :class:`UserConfigError`."""
    repo = _inside_git_worktree(p) if held else None
    if repo is not None:
        raise UserConfigError(
            f"{p} holds {', '.join(held)} and is inside the git work tree {repo} (one `git add` from a commit): "
            f"move it outside the repository (e.g. `mv {p} ~/.config/dapo-ops/config.toml` and unset {ENV_VAR}, "
            f"or point {ENV_VAR} at a path outside {repo}); dapo-ops refuses to use it until then"
        )


def secrets_held(data: Mapping[str, Any]) -> list[str]:
    """Where the parsed config file holds a secret: ``[swanlab] api_key``, a ``[notify]`` webhook's url or signing
    secret, a ``[proxy]`` URL with a password. Such a file must be mode 0600 (:func:`load` refuses it otherwise)."""
    out = []
    if (data.get("swanlab") or {}).get("api_key"):
        out.append("[swanlab] api_key")
    for i, hook in enumerate((data.get("notify") or {}).get("webhooks") or []):
        if any((hook or {}).get(k) for k in ("url", "sign_secret", "secret")):
            out.append(f"[notify] webhook {i}")
    for k, v in (data.get("proxy") or {}).items():
        if isinstance(v, str) and "@" in v and ":" in v.split("@", 1)[0].split("//")[-1]:
            out.append(f"[proxy] {k} password")
    return out


def _validate(text: str, p: Path) -> dict[str, dict[str, Any]]:
    def at(line: int | None) -> str:
        return f"{p}:{line}" if line else str(p)

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserConfigError(f"{at(toml_error(exc)[1])}: invalid TOML: {exc}; fix or delete the file") from None
    lines = TomlLines(text)
    for name, value in data.items():
        if name not in TABLES:
            raise UserConfigError(_unknown_top_level(name, value, at(lines.find_prefix(name) or lines.key_line(name))))
        if not isinstance(value, dict):
            raise UserConfigError(
                f"{at(lines.key_line(name))}: '{name}' must be a table ([{name}]), got {type(value).__name__}"
            )
        try:
            msgspec.convert(value, TABLES[name])
        except msgspec.ValidationError as exc:
            key, reason = explain(exc, value, TABLES[name])
            raise UserConfigError(
                f"{at(lines.find(f'{name}.{key}') or lines.find(name, key))}: [{name}]: field '{key}': {reason}"
            ) from None
    return {**{name: {} for name in SECTIONS}, **data}


def _home_of(name: str) -> tuple[str, str] | None:
    """Where a key written at the top level belongs, as ``(table, key)``: ``SWANLAB_API_KEY`` / ``api_key`` ->
    ``("swanlab", "api_key")`` (a table's own field, bare or prefixed with the table's name, any case), else None."""
    low = name.lower()
    for table, model in TABLES.items():
        fields = getattr(model, "__struct_fields__", ())
        for key in (low, low.removeprefix(f"{table}_")):
            if key in fields:
                return table, key
    return None


def _unknown_top_level(name: str, value: Any, where: str) -> str:
    """The one-line refusal of a top-level ``name`` that is no table of :data:`TABLES`: a table (``[swanlb]``) is an
    unknown table; a plain value (``SWANLAB_API_KEY = "..."``) is an unknown key, told where it belongs."""
    tables = ", ".join(f"[{s}]" for s in SECTIONS)
    if isinstance(value, dict):
        return f"{where}: unknown table [{name}]: use {tables}"
    home = _home_of(name)
    if home is not None:
        return f"{where}: unknown key '{name}' at the top level: it belongs in a table: write `{home[1]} = ...` under [{home[0]}]"
    return f"{where}: unknown key '{name}' at the top level: every key goes in one of the tables {tables}"


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
    """The git work tree that holds the file ``p`` (the nearest directory at or above it with a ``.git``), else None.

    The file's own location decides, never the current directory: running ``inv`` from inside some clone (or
    from a home kept in git) says nothing about where the secret lies. A tree that is the home directory, the
    config home (``$XDG_CONFIG_HOME`` / ``~/.config``) or above either is a dotfiles tree, not a project's: it
    does not count, so a home kept in git never blocks the default path.
    """
    tree = _worktree_of(p.expanduser().resolve().parent)
    if tree is None:
        return None
    dotfiles = (Path.home().resolve(), _config_home(os.environ).resolve())
    if any(tree == d or tree in d.parents for d in dotfiles):
        return None
    return tree


def save_section(name: str, values: Mapping[str, Any], path: str | Path | None = None) -> list[str]:
    """Replace table ``[name]`` in the config file with ``values`` (None values dropped) and write it atomically.

    The file is edited with tomlkit: keys of ``[name]`` not in ``values`` are removed, changed ones
    rewritten, others (and every other table, comment and blank line) kept as they were. The result
    is validated like :func:`load` before anything is written, then written to a temporary file
    created with mode 0600 (``mkstemp`` under a 077 umask, so it is never readable by others, not
    even briefly), fsynced and renamed over the old file; the directory is created 0700.

    Returns notes for the operator (e.g. that a looser mode was tightened).
    Raises :class:`UserConfigError` for an unknown section, a path inside a git work tree,
    a value the model refuses or TOML cannot express, or an OS error.
    """
    import tomlkit  # only a save needs it (import time: every task reads the file, few write it)

    if name not in SECTIONS:
        raise UserConfigError(f"unknown config section '{name}': use one of {', '.join(SECTIONS)}")
    p = Path(path) if path is not None else config_path()
    repo = _inside_git_worktree(p)
    if repo is not None:
        raise UserConfigError(
            f"refusing to write secrets to {p}: it is inside the git work tree {repo}; "
            f"unset {ENV_VAR} or point it outside the repository"
        )
    old_mode = stat.S_IMODE(p.stat().st_mode) if p.exists() else None
    load(p)  # a broken file is reported, not overwritten
    doc = tomlkit.parse(p.read_text(encoding="utf-8")) if p.exists() else tomlkit.document()
    if not doc.body:
        doc.add(tomlkit.comment(HEADER[2:]))
    if not isinstance(doc.get(name), dict):
        doc[name] = tomlkit.table()
    table = doc[name]
    new = {k: v for k, v in values.items() if v is not None}
    try:
        for k in [k for k in table if k not in new]:
            del table[k]
        for k, v in new.items():
            if k not in table or table[k].unwrap() != v:
                table[k] = v
        text = tomlkit.dumps(doc)
    except (TypeError, ValueError) as exc:  # tomlkit.exceptions.ConvertError is a TypeError
        raise UserConfigError(f"cannot write [{name}] to {p}: {exc}") from None
    _validate(text, p)
    _write_private(p, text)
    if old_mode is not None and old_mode != FILE_MODE:
        return [f"{p} had mode {old_mode:04o}; it is now 0600 (it holds secrets)"]
    return []


def _write_private(p: Path, text: str) -> None:
    """Write ``text`` to ``p`` atomically with mode 0600 (directory 0700). Raises :class:`UserConfigError`."""
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


class RunConfig:
    """What one program run reads once and hands to its tasks (invoke's ``Config``: built once by the Program, handed
    to every task in its context; :func:`dapo_ops.cli._common.run_config`): the user config file and the run settings
    resolved from it, flag > env > file > default (:func:`dapo_ops.control.settings.resolve`).

    ``env``: the operator's environment, read when asked and never written (default ``os.environ``). ``tables``: the
    file's tables when the caller already holds them (a test, a dry run handed its file): the file is then not read.
    The file is read on the first :meth:`file` and kept for the program run; a file that changed since (a save of
    ``[swanlab]`` from the SwanLab question) is read again. :meth:`settings` resolves each set of flags once: the
    same flags, the same values of the settings' variables and the same file give the same :class:`Settings`.
    """

    def __init__(self, env: Mapping[str, str] | None = None, tables: Mapping[str, Any] | None = None) -> None:
        self.env = os.environ if env is None else env
        self._tables = dict(tables) if tables is not None else None
        self._read: tuple[Any, dict[str, dict[str, Any]]] | None = None  # (file stamp, tables)
        self._resolved: dict[Any, settings.Settings] = {}

    @property
    def path(self) -> Path:
        """The config file (:func:`config_path` of :attr:`env`). Raises :class:`UserConfigError`."""
        return config_path(self.env)

    def _stamp(self, path: Path) -> Any:
        try:
            st = path.stat()
        except OSError:
            return (str(path), None)
        return (str(path), st.st_mtime_ns, st.st_size, st.st_ino)

    def file(self) -> dict[str, Any]:
        """The config file's tables (:func:`load`: ``{"run": ..., "swanlab": ..., "notify": ..., "proxy": ...}``),
        read once. Raises :class:`UserConfigError` (one line; not kept: the next call reads the file again), also for a
        ``$DAPO_OPS_CONFIG`` that names no file (:func:`named_missing`)."""
        if self._tables is not None:
            return self._tables
        path = self.path
        named_missing(path, self.env)
        stamp = self._stamp(path)
        if self._read is None or self._read[0] != stamp:
            self._read = (stamp, load(path))
        return self._read[1]

    def settings(
        self, flags: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None
    ) -> settings.Settings:
        """The run settings of ``flags`` (setting name -> value given; :func:`dapo_ops.control.settings.resolve`)
        over ``env`` (default :attr:`env`; launch's copy carries ``--swanlab-host``) and :meth:`file`: THE place a
        program run resolves them. Raises :class:`UserConfigError` or :class:`dapo_ops.control.settings.SettingsError`."""
        env = self.env if env is None else env
        tables = self.file()
        key = (
            repr(sorted((flags or {}).items())),
            tuple(env.get(var) for p in settings.PARAMS for var in p.env),
            None if self._tables is not None else self._read and self._read[0],
        )
        if key not in self._resolved:
            self._resolved[key] = settings.resolve(flags, env, tables)
        return self._resolved[key]
