"""Compose generated overrides with hydra-core against a verl config directory.

verl's entry points are ``@hydra.main`` apps; an unknown key, a missing ``+`` or a ``+`` on an
existing key fails at once with Hydra's message and exit 1 (tests/cases/, hydra-core 1.3's override grammar). Composing the same
overrides with Hydra's compose API reproduces those messages without torch, Ray or verl imported
(hydra-core 1.3 compose API): ``initialize_config_dir`` + ``compose`` + ``OmegaConf.resolve``, with the CWD set to
the root that holds ``verl/trainer/config`` (the yaml's ``hydra.searchpath`` is CWD-relative).

Two forms, sharing one implementation (:func:`dapo_ops.agent.compose.compose_errors`):

- :func:`compose_check` in this process (tests, ``inv launch --dry-run`` against a local config);
- preflight: the bundle op ``python3 -m dapo_ops.agent.compose`` run *inside* the container against the
  container's own verl and hydra (a JSON request from :func:`request_for` on stdin; answer read by
  :func:`parse_remote_result`).

Compose does not catch value types, ``trainer.logger`` values or verl's dataclass checks (verl/workers/config/actor.py).
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable, Sequence

from dapo_ops.agent import compose
from dapo_ops.core import profiles
from dapo_ops.core.hydra_override import key_of


def split_argv(argv: list[str]) -> tuple[str | None, str | None, list[str]]:
    """Split a verl argv into ``(module, --config-name value or None, overrides)``.

    Accepts the full ``[python, "-m", module, ...]`` form or a bare override list (module None).
    ``--config-path`` is dropped (the entry's config dir is used).
    """
    argv = list(argv)
    module = None
    if "-m" in argv:
        i = argv.index("-m")
        module = argv[i + 1]
        argv = argv[i + 2 :]
    name = None
    out = []
    it = iter(argv)
    for a in it:
        if a.startswith("--config-name="):
            name = a.split("=", 1)[1]
        elif a in ("--config-name", "-cn"):
            name = next(it, None)
        elif a.startswith("--config-path=") or a.startswith("--"):
            continue
        elif a in ("--config-path", "-cp"):
            next(it, None)
        else:
            out.append(a)
    if name and name.endswith(".yaml"):
        name = name[:-5]
    return module, name, out


def _entry_for_module(module: str, config_name: str | None) -> profiles.Entry | None:
    for ent in profiles._ENTRIES.values():  # noqa: SLF001 - same package
        if ent.module == module and (config_name is None or ent.config_name == config_name):
            return ent
    for ent in profiles._ENTRIES.values():  # noqa: SLF001
        if ent.module == module:
            return ent
    return None


def rewrite_searchpath(overrides: list[str], config_root: str) -> list[str]:
    """Point any ``hydra.searchpath=`` override at ``<config_root>/verl/trainer/config``.

    The generated argv names the container's verl (``/verl/verl/trainer/config``); a local check
    composes against another copy of the same tree.
    """
    root = os.path.abspath(config_root)
    sp = f"hydra.searchpath=[file://{root}/verl/trainer/config]"
    return [sp if key_of(o) == "hydra.searchpath" else o for o in overrides]


def request_for(
    argv_or_overrides: list[str], config_root: str, config_name: str | None = None, config_dir: str | None = None
) -> dict:
    """The JSON request ``{config_root, config_dir, config_name, overrides}`` for an argv.

    ``config_root``: the directory holding ``verl/`` (``/verl`` in the container).
    ``config_dir``/``config_name`` default to the entry named by ``-m <module>`` and
    ``--config-name``; a bare override list needs ``config_name`` (dir defaults to
    ``verl/trainer/config``). Raises ValueError for an unknown module without ``config_dir``.
    """
    module, name, overrides = split_argv(argv_or_overrides)
    name = config_name or name
    if config_dir is None:
        if module is not None:
            ent = _entry_for_module(module, name)
            if ent is None:
                raise ValueError(f"unknown verl entry module {module!r}; pass config_dir explicitly")
            config_dir = ent.config_dir
            name = name or ent.default_config_name
        else:
            config_dir = "verl/trainer/config"
    if not name:
        raise ValueError("config_name is required for a bare override list")
    root = os.path.abspath(config_root)
    cdir = config_dir if os.path.isabs(config_dir) else os.path.join(root, config_dir)
    return {
        "config_root": root,
        "config_dir": cdir,
        "config_name": name,
        "overrides": rewrite_searchpath(overrides, root),
    }


def compose_check(
    argv_or_overrides: list[str], config_root: str, config_name: str | None = None, *, config_dir: str | None = None
) -> list[str]:
    """Compose ``argv_or_overrides`` against the verl config under ``config_root``; return error lines.

    Returns ``[]`` when everything composes. Otherwise the lines are Hydra's / OmegaConf's own
    messages (e.g. ``Could not override 'actor_rollout_ref.actor.megatron.grad_offload'.``,
    ``To append to your config use +…``, ``Key 'grad_offload' is not in struct``), one block per
    failing override, blocks separated by nothing (flattened). The CWD is restored afterwards.
    Needs hydra-core + omegaconf only (no torch / verl import).
    """
    req = request_for(argv_or_overrides, config_root, config_name, config_dir)
    blocks = compose.compose_errors(req["config_root"], req["config_dir"], req["config_name"], req["overrides"])
    return [line for block in blocks for line in block]


def parse_remote_result(stdout: str) -> list[str]:
    """Flatten the checker's JSON output into error lines (``[]`` = composes).

    Raises ValueError with one line when the output is not the checker's JSON.
    """
    for line in reversed((stdout or "").strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            data = json.loads(line)
            return [x for block in data.get("errors") or [] for x in block]
    raise ValueError("the config check printed no result; is python3 with hydra-core available in the container?")


class BatchComposer:
    """Compose many override lists against one entry config quickly (tests, bulk checks).

    Composes the entry's defaults once with Hydra (group overrides such as ``model_engine=megatron``
    included), then for every override list applies the remaining overrides with Hydra's own
    override machinery (``ConfigLoaderImpl._apply_overrides_to_config``, the step ``compose`` runs
    after building the defaults tree, so the messages are Hydra's) to a fresh copy and resolves
    interpolations. ``hydra.*`` overrides are skipped here (they configure Hydra, not the job);
    :func:`compose_check` covers them. About 10x faster than :func:`compose_check` per list.
    Uses a private Hydra 1.3 API: if it moves, :meth:`errors` falls back to :func:`compose_check`.
    """

    def __init__(self, config_root: str, config_dir: str, config_name: str, group_overrides: Sequence[str] = ()):
        import pickle

        self.config_root = os.path.abspath(config_root)
        self.config_dir = config_dir if os.path.isabs(config_dir) else os.path.join(self.config_root, config_dir)
        self.config_name = config_name
        self.groups = list(group_overrides)
        self._parsed: dict = {}
        self._apply: Callable[..., Any] | None
        try:
            from hydra._internal.config_loader_impl import ConfigLoaderImpl
            from hydra.core.override_parser.overrides_parser import OverridesParser

            self._apply = ConfigLoaderImpl._apply_overrides_to_config  # noqa: SLF001
            self._parser = OverridesParser.create()
        except Exception:  # pragma: no cover - other Hydra versions
            self._apply = None
        base_over = self.groups + [f"hydra.searchpath=[file://{self.config_root}/verl/trainer/config]"]
        from hydra import compose, initialize_config_dir
        from hydra.core.global_hydra import GlobalHydra

        old = os.getcwd()
        try:
            os.chdir(self.config_root)
            GlobalHydra.instance().clear()
            with initialize_config_dir(config_dir=self.config_dir, version_base=None):
                base = compose(config_name=config_name, overrides=base_over)
        finally:
            os.chdir(old)
            GlobalHydra.instance().clear()
        self._pickled = pickle.dumps(base)

    def errors(self, overrides: list[str]) -> list[str]:
        """Error lines for one override list (``[]`` = composes); group overrides given at init are skipped."""
        import pickle

        from omegaconf import OmegaConf

        job = [o for o in overrides if o not in self.groups and not (key_of(o) or "").startswith("hydra.")]
        if self._apply is None:  # pragma: no cover
            return compose_check(self.groups + job, self.config_root, self.config_name, config_dir=self.config_dir)
        cfg = pickle.loads(self._pickled)
        try:
            parsed = []
            for o in job:
                if o not in self._parsed:
                    self._parsed[o] = self._parser.parse_overrides([o])[0]
                parsed.append(self._parsed[o])
            self._apply(parsed, cfg)
            OmegaConf.resolve(cfg)
        except Exception as exc:
            return compose.error_lines(exc)
        return []
