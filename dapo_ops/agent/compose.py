"""The Hydra compose check of generated overrides, run with the container's OWN hydra-core against its own verl
config (stdlib at import; ``hydra`` / ``omegaconf`` are imported inside :func:`compose_errors` only, from the
Python that runs verl: verl's entry points are ``@hydra.main`` apps, so that Python has them).

``PYTHONPATH=<bundle> python3 -m dapo_ops.agent.compose < request.json`` (preflight runs it as a child of
:mod:`dapo_ops.agent.preflight_probe`; :mod:`dapo_ops.control.preflight.compose_check` calls :func:`compose_errors` in-process) reads
``{"config_root", "config_dir", "config_name", "overrides"[, "startup": true]}`` on stdin and prints one JSON line
``{"ok": bool, "errors": [[line, ...], ...][, "startup": {"errors": [...], "skipped": [...]}]}``; a missing hydra
is the single error. ``startup``: verl's own start-up checks on the composed config (:mod:`dapo_ops.agent.verlcheck`).

``compose_errors`` returns every override error it can find: after an error that names one override it drops that
override and composes again (at most ``max_rounds`` times), so one run lists all unknown keys. The messages are
Hydra's own (``Could not override '...'``: ``hydra/_internal/config_loader_impl.py``); the CWD is the root holding
``verl/trainer/config`` while composing (the yaml's ``hydra.searchpath`` is CWD-relative).

What a compose result depends on, read without importing hydra, is :func:`dapo_ops.agent.composefp.fingerprint`.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import sys
import warnings
from typing import Any, Callable, Iterable, Optional, Sequence

from dapo_ops.core.hydra_override import key_of


def error_lines(exc: Optional[BaseException]) -> list[str]:
    """The distinct non-empty lines of ``exc`` and its causes / contexts, outermost first."""
    out = []
    seen = set()
    e = exc
    visited: set[int] = set()
    while e is not None and id(e) not in visited:
        visited.add(id(e))
        for line in str(e).splitlines():
            line = line.rstrip()
            if line.strip() and line not in seen:
                seen.add(line)
                out.append(line)
        e = e.__cause__ or e.__context__
    return out


_KEY_RES = (
    re.compile(r"Could not override '([^']+)'"),
    re.compile(r"Could not append to config\. An item is already at '([^']+)'"),
    re.compile(r"Could not delete from config\. '([^']+)'"),
    re.compile(r"Error parsing override '([^']+)'"),
)


def _culprit(lines: Iterable[str], overrides: Sequence[str]) -> Optional[int]:
    for line in lines:
        for rx in _KEY_RES:
            m = rx.search(line)
            if not m:
                continue
            key = m.group(1)
            for i, ov in enumerate(overrides):
                if ov == key or key_of(ov) == key:
                    return i
    return None


#: Hydra's line for an override of a key the config lacks (hydra/_internal/config_loader_impl.py, OmegaConf's
#: ``ConfigKeyError``: ``Key 'x' is not in struct``)
_UNKNOWN_RE = re.compile(r"Key '[^']+' is not in struct")
#: the line :func:`compose_errors` adds to an unknown key's block (read by dapo_ops/control/preflight/verl.py)
NEAREST_PREFIX = "nearest known key: "


def config_keys(cfg: Any) -> list[str]:
    """Every dotted leaf key of a composed OmegaConf config (``trainer.total_training_steps``), dicts walked, lists
    and values are leaves."""
    from omegaconf import OmegaConf

    out: list[str] = []

    def walk(node: Any, prefix: str) -> None:
        for k in node.keys():
            child = node._get_node(k)  # noqa: SLF001 - no interpolation resolved while walking
            full = f"{prefix}.{k}" if prefix else str(k)
            if OmegaConf.is_dict(child):
                walk(child, full)
            else:
                out.append(full)

    walk(cfg, "")
    return out


def nearest_key(key: str, keys: Sequence[str]) -> Optional[str]:
    """The known key nearest to an unknown ``key`` (difflib): first among the keys of the same section
    (``trainer.total_training_step`` -> ``trainer.total_training_steps``), then among all; None when none is close.
    ``key`` is Hydra's ``key_or_group`` as its error names it (no ``+``/``~`` prefix)."""
    parent = key.rpartition(".")[0]
    same = [k for k in keys if k.rpartition(".")[0] == parent]
    for pool in (same, list(keys)):
        hit = difflib.get_close_matches(key, pool, n=1, cutoff=0.75)
        if hit:
            return hit[0]
    return None


def _add_nearest(errors: list[list[str]], cfg: Any) -> None:
    """Append ``nearest known key: <key>`` to each unknown-key block of ``errors`` that has a close known key."""
    keys = config_keys(cfg)
    for block in errors:
        if not any(_UNKNOWN_RE.search(line) for line in block):
            continue
        m = next((_KEY_RES[0].search(line) for line in block if _KEY_RES[0].search(line)), None)
        near = nearest_key(m.group(1), keys) if m else None
        if near:
            block.append(NEAREST_PREFIX + near)


def _compose_resolved(config_dir: str, config_name: str, overrides: list[str]) -> Any:
    """Compose + resolve as verl's ``@hydra.main`` + ``main_ppo.py:144`` see it (CWD and GlobalHydra set by the
    caller); returns the DictConfig, raises Hydra's / OmegaConf's exception."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with initialize_config_dir(config_dir=config_dir, version_base=None):
            cfg = compose(config_name=config_name, overrides=overrides)
            OmegaConf.resolve(cfg)
    return cfg


def composed(config_root: str, config_dir: str, config_name: str, overrides: Iterable[str]) -> Any:
    """The resolved config the compose check sees for ``overrides`` (tests read values through the check's own path,
    e.g. that a quoted value arrives literally). :raises: Hydra's / OmegaConf's exception when it does not compose."""
    from hydra.core.global_hydra import GlobalHydra

    old = os.getcwd()
    try:
        os.chdir(config_root)
        GlobalHydra.instance().clear()
        return _compose_resolved(config_dir, config_name, list(overrides))
    finally:
        os.chdir(old)
        GlobalHydra.instance().clear()


def compose_errors(
    config_root: str,
    config_dir: str,
    config_name: str,
    overrides: Iterable[str],
    max_rounds: int = 30,
    on_composed: Optional[Callable[[Any], object]] = None,
) -> list[list[str]]:
    """Error blocks (each a list of lines, Hydra's words) of composing ``overrides``; [] when it composes.

    ``on_composed``: called with the composed, resolved OmegaConf config when the full override list composes
    (before Hydra is cleared; :mod:`dapo_ops.agent.verlcheck` runs verl's start-up checks on it).

    An unknown key's block (``Key 'x' is not in struct``) ends with ``nearest known key: <key>`` when the config,
    composed without the failing overrides, has a close key (:func:`nearest_key`).

    :raises ImportError: hydra-core / omegaconf not importable in this Python.
    """
    from hydra.core.global_hydra import GlobalHydra

    overrides = list(overrides)
    errors: list[list[str]] = []
    old = os.getcwd()
    try:
        os.chdir(config_root)
        for _ in range(max_rounds):
            if GlobalHydra.instance().is_initialized():
                GlobalHydra.instance().clear()
            try:
                cfg = _compose_resolved(config_dir, config_name, overrides)
                if on_composed is not None and not errors:
                    on_composed(cfg)
                _add_nearest(errors, cfg)
                return errors
            except Exception as exc:  # Hydra raises several exception types; the text is what matters
                lines = error_lines(exc)
                errors.append(lines)
                i = _culprit(lines, overrides)
                if i is None:
                    return errors
                del overrides[i]
        return errors
    finally:
        os.chdir(old)
        try:
            if GlobalHydra.instance().is_initialized():
                GlobalHydra.instance().clear()
        except Exception:
            pass


def main() -> int:
    """The op: request JSON on stdin, answer JSON on stdout (module docstring); exit 0."""
    req = json.load(sys.stdin)
    startup = {}

    def check(cfg: Any) -> None:  # verl's own start-up checks on the composed config (request "startup": true)
        from omegaconf import OmegaConf

        from dapo_ops.agent import verlcheck

        container = OmegaConf.to_container(cfg, resolve=True)  # a composed DictConfig: a dict with str keys
        resolved = {str(k): v for k, v in container.items()} if isinstance(container, dict) else {}
        startup.update(verlcheck.startup_report(resolved, req["config_root"], cfg_obj=cfg))

    try:
        errs = compose_errors(
            req["config_root"],
            req["config_dir"],
            req["config_name"],
            req.get("overrides") or [],
            on_composed=check if req.get("startup") else None,
        )
        out = {"ok": not errs, "errors": errs}
        if startup:
            out["startup"] = startup
    except ImportError as exc:
        out = {"ok": False, "errors": [["hydra-core is not importable in this Python: %s" % exc]]}
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
