#!/usr/bin/env python3
"""Fetch the pinned verl release's Hydra config yaml (sandbox and test equipment).

The verl 0.9.1 wheel is downloaded from PyPI once (``pip download --no-deps``), its
sha256 checked, and only the config trees are extracted into a cache directory:

    <cache>/verl-0.9.1/verl/trainer/config/**.yaml
    <cache>/verl-0.9.1/verl/experimental/one_step_off_policy/config/*.yaml

Usage: ``python sandbox/fetch_verl_config.py [--cache DIR]`` prints the root directory
(the one that contains ``verl/``). Tests call :func:`verl_config_root`.

Tests that check a claim about verl's code (a registry name, a default, a key it reads) call
:func:`verl_source_root`: the same cached wheel's ``verl/**/*.py`` (about 4.8 MB), extracted once into
``<cache>/verl-0.9.1-src/verl/`` (a separate tree, so the config root stays yaml only).

Never imported by ``dapo_ops`` runtime code.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

VERL_VERSION = "0.9.1"
WHEEL = f"verl-{VERL_VERSION}-py3-none-any.whl"
WHEEL_SHA256 = "db6e6f2a8d9d5808d9ec32d357a42319fdc6967df688ff9d9810050f49bfdd14"
CONFIG_PREFIXES = (
    "verl/trainer/config/",
    "verl/experimental/one_step_off_policy/config/",
    "verl/experimental/fully_async_policy/config/",
)


def default_cache() -> Path:
    return Path(os.environ.get("DAPO_OPS_CACHE", Path.home() / ".cache" / "dapo-ops"))


def _wheel(cache: Path) -> Path:
    """The pinned wheel in ``cache`` (downloaded once, sha256 checked); ``RuntimeError`` (one line) otherwise."""
    cache.mkdir(parents=True, exist_ok=True)
    wheel = cache / WHEEL
    if not wheel.exists():
        with tempfile.TemporaryDirectory(dir=cache) as tmp:
            proc = subprocess.run(
                [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", tmp, f"verl=={VERL_VERSION}"],
                capture_output=True, text=True,
            )
            got = Path(tmp) / WHEEL
            if proc.returncode != 0 or not got.exists():
                raise RuntimeError(f"could not download verl=={VERL_VERSION} from PyPI: {proc.stderr.strip()[-300:]}")
            got.replace(wheel)
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    if digest != WHEEL_SHA256:
        wheel.unlink()
        raise RuntimeError(f"{WHEEL}: sha256 {digest} != pinned {WHEEL_SHA256}; delete {cache} and retry")
    return wheel


def _extract(cache: Path, root: Path, keep) -> Path:
    """Extract the wheel members ``keep(name)`` accepts into ``root`` (atomically: a temp dir, then rename)."""
    wheel = _wheel(cache)
    tmp_root = Path(tempfile.mkdtemp(dir=cache, prefix=".extract-"))
    with zipfile.ZipFile(wheel) as zf:
        for name in zf.namelist():
            if keep(name):
                zf.extract(name, tmp_root)
    (tmp_root / ".complete").write_text(WHEEL_SHA256 + "\n")
    if root.exists():
        import shutil

        shutil.rmtree(root)
    tmp_root.rename(root)
    return root


def verl_source_root(cache: Path | None = None) -> Path:
    """Return the directory holding the pinned release's ``verl/**/*.py`` (for tests that read verl's code).

    Extracted once from the cached wheel (:func:`verl_config_root`'s download); ``RuntimeError`` as there.
    """
    cache = Path(cache or default_cache())
    root = cache / f"verl-{VERL_VERSION}-src"
    if (root / ".complete").exists():
        return root
    return _extract(cache, root, lambda n: n.startswith("verl/") and n.endswith(".py"))


def verl_config_root(cache: Path | None = None) -> Path:
    """Return the directory holding ``verl/trainer/config`` of the pinned release.

    Downloads and extracts on first use (about 1.7 MB). Raises ``RuntimeError`` with one
    line if pip cannot download the wheel or the checksum differs.
    """
    cache = Path(cache or default_cache())
    root = cache / f"verl-{VERL_VERSION}"
    marker = root / ".complete"
    if marker.exists():
        return root
    return _extract(cache, root, lambda n: n.startswith(CONFIG_PREFIXES) and n.endswith((".yaml", ".yml")))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", type=Path, default=None)
    ap.add_argument("--source", action="store_true", help="also extract verl/**/*.py (tests of verl's code)")
    args = ap.parse_args()
    try:
        print(verl_config_root(args.cache))
        if args.source:
            print(verl_source_root(args.cache))
    except RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
