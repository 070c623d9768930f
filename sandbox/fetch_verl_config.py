#!/usr/bin/env python3
"""Fetch the pinned verl release's Hydra config yaml and Python sources (sandbox and test equipment).

The verl 0.9.1 wheel is downloaded from PyPI once (``pip download --no-deps``), its
sha256 checked, and the config trees and verl's ``.py`` sources are extracted into a cache directory:

    <cache>/verl-0.9.1/verl/trainer/config/**.yaml
    <cache>/verl-0.9.1/verl/experimental/one_step_off_policy/config/*.yaml
    <cache>/verl-0.9.1/verl/**/*.py   (read by tests as text / ast: verl itself needs torch to import)

Usage: ``python sandbox/fetch_verl_config.py [--cache DIR]`` prints the root directory
(the one that contains ``verl/``). Tests call :func:`verl_config_root`.

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
#: what the cache holds besides the config yaml: verl's Python sources (tests read verl's own code)
SOURCE_PREFIX = "verl/"
#: bumped when the extracted set changes: an older cache is extracted again
EXTRACT_REV = "2"


def default_cache() -> Path:
    return Path(os.environ.get("DAPO_OPS_CACHE", Path.home() / ".cache" / "dapo-ops"))


def verl_config_root(cache: Path | None = None) -> Path:
    """Return the directory holding ``verl/trainer/config`` of the pinned release.

    Downloads and extracts on first use (about 1.7 MB). Raises ``RuntimeError`` with one
    line if pip cannot download the wheel or the checksum differs.
    """
    cache = Path(cache or default_cache())
    root = cache / f"verl-{VERL_VERSION}"
    marker = root / ".complete"
    try:
        if marker.read_text().split()[1:2] == [EXTRACT_REV]:
            return root
    except (OSError, IndexError):
        pass
    cache.mkdir(parents=True, exist_ok=True)
    wheel = cache / WHEEL
    if not wheel.exists():
        with tempfile.TemporaryDirectory(dir=cache) as tmp:
            proc = subprocess.run(
                [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", tmp, f"verl=={VERL_VERSION}"],
                capture_output=True,
                text=True,
            )
            got = Path(tmp) / WHEEL
            if proc.returncode != 0 or not got.exists():
                raise RuntimeError(f"could not download verl=={VERL_VERSION} from PyPI: {proc.stderr.strip()[-300:]}")
            got.replace(wheel)
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    if digest != WHEEL_SHA256:
        wheel.unlink()
        raise RuntimeError(f"{WHEEL}: sha256 {digest} != pinned {WHEEL_SHA256}; delete {cache} and retry")
    tmp_root = Path(tempfile.mkdtemp(dir=cache, prefix=".extract-"))
    with zipfile.ZipFile(wheel) as zf:
        for name in zf.namelist():
            if (
                name.startswith(CONFIG_PREFIXES)
                and name.endswith((".yaml", ".yml"))
                or name.startswith(SOURCE_PREFIX)
                and name.endswith(".py")
            ):
                zf.extract(name, tmp_root)
    (tmp_root / ".complete").write_text(digest + " " + EXTRACT_REV + "\n")
    if root.exists():
        import shutil

        shutil.rmtree(root)
    tmp_root.rename(root)
    return root


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", type=Path, default=None)
    args = ap.parse_args()
    try:
        print(verl_config_root(args.cache))
    except RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
