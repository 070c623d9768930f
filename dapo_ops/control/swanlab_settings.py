"""SwanLab settings for a run: env > user config file > interactive prompt (TTY only).

Facts used here (swanlab.md = the project's SwanLab reference; verl 0.9.1
``verl/utils/tracking.py:131-151``):

* verl reads ``SWANLAB_API_KEY``, ``SWANLAB_MODE`` (default ``cloud``) and
  ``SWANLAB_LOG_DIR`` (default ``swanlog``, relative to the CWD), calls
  ``swanlab.login(key)`` **without a host** only if the key is set, and
  ``swanlab.init(project=trainer.project_name, experiment_name=..., logdir=, mode=)``
  without ``id``/``resume``.
* SwanLab itself has **no** ``SWANLAB_HOST``: a private server needs ``SWANLAB_API_HOST``
  and ``SWANLAB_WEB_HOST``. SwanLab 0.7 expects the API host **with** ``/api``; 0.10 strips
  any path and appends ``/api`` itself, so ``<root>/api`` works on both (swanlab 0.10 sdk/internal/settings/compat/env.py).
* A host without a scheme is read as ``https://`` by 0.10 (swanlab 0.10 sdk/cmd/login.py). dapo-ops does not
  guess: a scheme-less host is a one-line error asking for ``http://`` (the usual
  self-hosted server) or ``https://``. A plain-HTTP server reached as https fails after
  five retries with a misleading ``AuthenticationError`` (swanlab 0.10.3, observed: tests/test_swanlab_tty.py).
* Modes: 0.7 ``cloud|local|offline|disabled``; 0.10 ``online|...`` with ``cloud`` as an
  alias. dapo-ops writes ``cloud`` (works on both); ``online`` is accepted as input.
* ``SWANLAB_RUN_ID`` + ``SWANLAB_RESUME=allow`` keep one chart across retries (both lines
  read them; swanlab 0.10 sdk/cmd/init.py). The id is 21 lowercase alphanumerics (SwanLab's documented
  run-id shape), derived from the dapo-ops run id.
* The runbook's ``SWANLAB_HOST`` is dapo-ops' own input variable (the server root); it is
  mapped, never passed on.

Secrets: the API key only ever leaves this module through :meth:`SwanlabSettings.secret_env`
(to be written to ``secret.env``, 0600). ``repr``/``str`` redact it.
"""

from __future__ import annotations

import getpass
import sys
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping

from dapo_ops.control import userconfig
from dapo_ops.control.swanlab_values import (
    SwanlabConfigError,
    clean_value,
    is_swanlab_run_id,
    normalize_host,
    normalize_mode,
    swanlab_run_id,
)
from dapo_ops.core.redact import REDACTED, scrub

#: ``redact(text, secrets)``: the one scrubber (core/redact.py) under the name in-flight callers know
redact = scrub

# input names, most specific first
ENV_HOST = "SWANLAB_HOST"  # dapo-ops/runbook name for the server root
ENV_API_HOST = "SWANLAB_API_HOST"  # swanlab's own name (0.7 form with /api accepted)
ENV_WEB_HOST = "SWANLAB_WEB_HOST"
ENV_KEY = "SWANLAB_API_KEY"
ENV_MODE = "SWANLAB_MODE"
ENV_LOG_DIR = "SWANLAB_LOG_DIR"
ENV_PROJECT = ("SWANLAB_PROJECT", "SWANLAB_PROJ_NAME")
ENV_WORKSPACE = "SWANLAB_WORKSPACE"


def _missing_key_message(path: str) -> str:
    return (
        "SwanLab cloud mode needs an API key and stdin is not a terminal: set SWANLAB_API_KEY in the "
        f"environment or `api_key` under [swanlab] in {path} (mode 0600), "
        "or pass --swanlab-mode local|offline|disabled"
    )


@dataclass(frozen=True)
class SwanlabSettings:
    """Resolved SwanLab settings for one launch.

    ``mode`` is one of :data:`MODES`. ``host``/``web_host`` are server roots with scheme
    (``None`` = SwanLab's public cloud). ``sources`` maps each field to where it came
    from: ``flag``, ``env:<NAME>``, ``file``, ``prompt`` or ``default``.
    """

    mode: str = "cloud"
    host: str | None = None
    web_host: str | None = None
    api_key: str | None = field(default=None, repr=False)
    log_dir: str | None = None
    project: str | None = None
    workspace: str | None = None
    sources: dict = field(default_factory=dict, compare=False)

    def __repr__(self) -> str:
        key = REDACTED if self.api_key else None
        return (
            f"SwanlabSettings(mode={self.mode!r}, host={self.host!r}, web_host={self.web_host!r}, "
            f"api_key={key!r}, log_dir={self.log_dir!r}, project={self.project!r}, "
            f"workspace={self.workspace!r})"
        )

    __str__ = __repr__

    @property
    def logger_enabled(self) -> bool:
        """True when ``trainer.logger`` should get ``swanlab`` (next to ``console``, always kept)."""
        return self.mode != "disabled" and (self.mode != "cloud" or bool(self.api_key))

    def loggers(self) -> list[str]:
        """``trainer.logger`` value: ``["console", "swanlab"]`` or ``["console"]``."""
        return ["console", "swanlab"] if self.logger_enabled else ["console"]

    def public_env(
        self, *, run_dir: str | None = None, run_id: str | None = None, swanlab_id: str | None = None
    ) -> dict[str, str]:
        """Non-secret env for the verl process (goes into spec.json ``env``; safe to print).

        * ``SWANLAB_MODE``: always (``disabled`` too, so a stray setting in the image cannot
          turn on cloud mode).
        * ``SWANLAB_LOG_DIR``: the configured dir, else ``<run_dir>/swanlog`` when ``run_dir``
          (in the container) is given: verl's default ``swanlog`` is relative to a CWD that
          may be read-only.
        * ``SWANLAB_API_HOST`` = ``<root>/api`` and ``SWANLAB_WEB_HOST`` = web root, only for
          a private server (works on 0.7 and 0.10, swanlab 0.10 sdk/internal/settings/compat/env.py).
        * ``SWANLAB_WORKSPACE`` when set (verl passes no workspace to ``init``).
        * ``SWANLAB_RUN_ID`` (21 chars, from ``run_id``) + ``SWANLAB_RESUME=allow`` so the
          retries of one run continue the same SwanLab run (swanlab 0.10 sdk/cmd/init.py). ``swanlab_id``: the
          id to keep instead (a ``--resume`` chain's: the earlier run's own ``SWANLAB_RUN_ID``, so every run of
          the chain logs to its first run's SwanLab run), used when it has SwanLab's run-id shape
          (:func:`~dapo_ops.control.swanlab_values.is_swanlab_run_id`).
        * ``SWANLAB_INTERACTIVE=false``: never prompt inside the container (0.10).
        """
        env: dict[str, str] = {"SWANLAB_MODE": self.mode}
        if self.mode == "disabled":
            return env
        log_dir = self.log_dir or (f"{run_dir.rstrip('/')}/swanlog" if run_dir else None)
        if log_dir:
            env["SWANLAB_LOG_DIR"] = log_dir
        if self.host:
            env["SWANLAB_API_HOST"] = self.host + "/api"
            env["SWANLAB_WEB_HOST"] = self.web_host or self.host
        if self.workspace:
            env["SWANLAB_WORKSPACE"] = self.workspace
        if swanlab_id and is_swanlab_run_id(swanlab_id):
            env["SWANLAB_RUN_ID"] = swanlab_id
            env["SWANLAB_RESUME"] = "allow"
        elif run_id:
            env["SWANLAB_RUN_ID"] = swanlab_run_id(run_id)
            env["SWANLAB_RESUME"] = "allow"
        env["SWANLAB_INTERACTIVE"] = "false"
        return env

    def secret_env(self) -> dict[str, str]:
        """``{"SWANLAB_API_KEY": key}`` in cloud mode, else ``{}``.

        In local/offline mode the key is withheld: verl would call ``swanlab.login(key)``,
        which needs the network (verl ``tracking.py``). Goes to ``secret.env`` (0600) only.
        """
        if self.mode == "cloud" and self.api_key:
            return {ENV_KEY: self.api_key}
        return {}

    def secrets(self) -> list[str]:
        """Secret strings to redact from anything printed or recorded."""
        return [self.api_key] if self.api_key else []

    def file_section(self) -> dict[str, Any]:
        """The ``[swanlab]`` table to save to the user config (non-empty fields only)."""
        out = {
            "host": self.host,
            "web_host": self.web_host if self.web_host != self.host else None,
            "api_key": self.api_key,
            "mode": self.mode,
            "log_dir": self.log_dir,
            "project": self.project,
            "workspace": self.workspace,
        }
        return {k: v for k, v in out.items() if v}


# ------------------------------------------------------------------ helpers


def default_prompt(question: str, *, secret: bool = False) -> str:
    """Ask on the terminal; ``secret=True`` reads without echo (``getpass``)."""
    if secret:
        return getpass.getpass(question)
    sys.stderr.write(question)
    sys.stderr.flush()
    line = sys.stdin.readline()
    if not line:
        raise EOFError
    return line.rstrip("\n")


# ------------------------------------------------------------------ resolution

Prompt = Callable[..., str]


def resolve(
    env: Mapping[str, str],
    file_cfg: Mapping[str, Any],
    *,
    mode_flag: str | None = None,
    stdin_isatty: bool,
    prompt: Prompt = default_prompt,
    save: Callable[[str, dict], list[str]] | None = None,
    config_path: str | None = None,
    notes: list[str] | None = None,
    require_key: bool = True,
) -> SwanlabSettings:
    """Resolve SwanLab settings: ``mode_flag`` > env > ``file_cfg`` (``[swanlab]`` table) > prompt.

    ``require_key=False`` (a dry run): every value is checked as for a launch, but cloud mode without a key
    returns the settings without the key instead of asking or raising (the dry run says what the launch would do).

    ``env``: the operator's environment (``SWANLAB_HOST`` or ``SWANLAB_API_HOST``,
    ``SWANLAB_WEB_HOST``, ``SWANLAB_API_KEY``, ``SWANLAB_MODE``, ``SWANLAB_LOG_DIR``,
    ``SWANLAB_PROJECT``/``SWANLAB_PROJ_NAME``, ``SWANLAB_WORKSPACE``). ``file_cfg``: the
    ``[swanlab]`` table of :func:`dapo_ops.control.userconfig.load` (keys ``host``, ``web_host``,
    ``api_key``, ``mode``, ``log_dir``, ``project``, ``workspace``).

    In cloud mode without a key: if ``stdin_isatty``, ask ``prompt(question, secret=bool)``
    for the host (blank = SwanLab cloud) when none is set, the key (``secret=True``: no echo),
    and whether to save them; "y" calls ``save("swanlab", section)`` (default
    :func:`dapo_ops.control.userconfig.save_section`, file mode 0600) and appends its notes to
    ``notes``. Without a TTY, or with an empty answer, raises :class:`SwanlabConfigError`
    (one line naming ``SWANLAB_API_KEY``, ``[swanlab] api_key`` in the config file, and
    ``--swanlab-mode local|offline|disabled``). Bad values raise it too.
    """
    sources: dict[str, str] = {}
    fc = dict(file_cfg or {})
    cfg_path = config_path or str(userconfig.config_path(env))

    def pick(name: str, env_names: tuple[str, ...], file_key: str) -> str | None:
        for en in env_names:
            v = env.get(en)
            if v is not None and clean_value(v) != "":
                sources[name] = f"env:{en}"
                return clean_value(v)
        v = fc.get(file_key)
        if v is not None and clean_value(v) != "":
            sources[name] = "file"
            return clean_value(v)
        return None

    # mode
    if mode_flag:
        mode = normalize_mode(mode_flag, "--swanlab-mode")
        sources["mode"] = "flag"
    else:
        raw = pick("mode", (ENV_MODE,), "mode")
        if raw is None:
            mode = "cloud"
            sources["mode"] = "default"
        else:
            mode = normalize_mode(raw, sources["mode"])

    # host: SWANLAB_HOST (root) or SWANLAB_API_HOST (may carry /api), then file
    host = None
    raw_host = pick("host", (ENV_HOST, ENV_API_HOST), "host")
    if raw_host is not None:
        host = normalize_host(raw_host, sources["host"])
    web_host = None
    raw_web = pick("web_host", (ENV_WEB_HOST,), "web_host")
    if raw_web is not None:
        web_host = normalize_host(raw_web, sources["web_host"])

    api_key = pick("api_key", (ENV_KEY,), "api_key")
    if api_key is not None and any(c.isspace() or ord(c) < 0x20 for c in api_key):
        raise SwanlabConfigError(
            f"SwanLab API key (from {sources['api_key']}) contains whitespace or control characters: "
            "copy it again without quotes or line breaks"
        )
    log_dir = pick("log_dir", (ENV_LOG_DIR,), "log_dir")
    project = pick("project", ENV_PROJECT, "project")
    workspace = pick("workspace", (ENV_WORKSPACE,), "workspace")

    settings = SwanlabSettings(
        mode=mode,
        host=host,
        web_host=web_host,
        api_key=api_key,
        log_dir=log_dir,
        project=project,
        workspace=workspace,
        sources=sources,
    )
    if mode != "cloud" or api_key or not require_key:
        return settings
    if not stdin_isatty:
        raise SwanlabConfigError(_missing_key_message(cfg_path))
    return _interactive(settings, prompt, save, cfg_path, notes)


def _interactive(settings: SwanlabSettings, prompt: Prompt, save, cfg_path: str, notes) -> SwanlabSettings:
    """The runbook's "SwanLab 监控配置: Host / API Key" questions, on a TTY only."""
    sources = dict(settings.sources)
    host = settings.host
    try:
        if host is None:
            for _ in range(3):
                ans = clean_value(
                    prompt("SwanLab host (e.g. http://192.0.2.10:8000; blank = SwanLab cloud swanlab.cn): ")
                )
                if not ans:
                    break
                try:
                    host = normalize_host(ans, "prompt")
                    sources["host"] = "prompt"
                    break
                except SwanlabConfigError as exc:
                    sys.stderr.write(f"{exc}\n")
            else:
                raise SwanlabConfigError("no valid SwanLab host entered: give http://server:port or leave it blank")
        key = clean_value(prompt("SwanLab API key (input hidden): ", secret=True))
        if not key:
            raise SwanlabConfigError(
                _missing_key_message(cfg_path).replace("and stdin is not a terminal", "and none was entered")
            )
        if any(c.isspace() or ord(c) < 0x20 for c in key):
            raise SwanlabConfigError("SwanLab API key contains whitespace or control characters: copy it again")
        sources["api_key"] = "prompt"
        out = replace(settings, host=host, api_key=key, sources=sources)
        ans = clean_value(prompt(f"Save host and key to {cfg_path} (mode 0600)? [y/N]: ")).lower()
    except EOFError:
        raise SwanlabConfigError(_missing_key_message(cfg_path)) from None
    if ans in ("y", "yes"):
        saver = save if save is not None else (lambda name, values: userconfig.save_section(name, values, cfg_path))
        existing = {}
        try:
            existing = userconfig.load(cfg_path).get("swanlab", {})
        except userconfig.UserConfigError:
            existing = {}
        section = {**existing, **{k: v for k, v in (("host", out.host), ("api_key", out.api_key)) if v}}
        try:
            msgs = saver("swanlab", section) or []
        except userconfig.UserConfigError as exc:
            msgs = [f"not saved: {exc}"]
        else:
            msgs = [f"saved SwanLab settings to {cfg_path} (mode 0600)", *msgs]
        if notes is not None:
            notes.extend(msgs)
    return out


def resolve_for_launch(
    *,
    mode_flag: str | None = None,
    env: Mapping[str, str] | None = None,
    stdin_isatty: bool | None = None,
    notes: list[str] | None = None,
    tables: Mapping[str, Any] | None = None,
) -> SwanlabSettings:
    """Convenience for the launch task: read ``os.environ``, the user config and the real TTY.

    ``tables``: the user config file's tables as the program run read them (:class:`dapo_ops.control.userconfig.RunConfig`);
    None: read the file here.

    Raises :class:`SwanlabConfigError` or :class:`dapo_ops.control.userconfig.UserConfigError`.
    """
    import os

    env = os.environ if env is None else env
    path = userconfig.config_path(env)
    try:
        data = userconfig.RunConfig(env, tables).file()
    except userconfig.UserConfigError as exc:
        raise SwanlabConfigError(str(exc)) from None
    warn = userconfig.mode_warning(path)
    if warn and notes is not None:
        notes.append(warn)
    if stdin_isatty is None:
        stdin_isatty = sys.stdin is not None and sys.stdin.isatty()
    return resolve(
        env,
        data.get("swanlab") or {},
        mode_flag=mode_flag,
        stdin_isatty=stdin_isatty,
        config_path=str(path),
        notes=notes,
    )
