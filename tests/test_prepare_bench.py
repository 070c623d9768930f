"""``inv prepare`` on a sandbox host against a hub stand-in (HF_ENDPOINT) serving a tiny model and parquet files.

The hub runs in the test process, bound to the bench bridge address (198.51.<100+id>.1): the only address the
test's namespace and the containers' namespaces share. Downloads happen INSIDE the container."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from inputs_helpers import Hub, make_model, make_parquet

pytestmark = pytest.mark.bench
REPO = Path(__file__).resolve().parent.parent
C = "/verl/dapo_runs/prep"  # container path; host side: sandbox.runs_dir(host) / "prep"


def _prepare(sandbox, host, endpoint, *extra):
    args = [
        "prepare",
        "--inventory",
        str(sandbox.inventory),
        "-H",
        host,
        "--json",
        "--model",
        f"{C}/models/tiny",
        "--model-repo",
        "org/tiny",
        "--train-file",
        f"{C}/data/train.parquet",
        "--train-repo",
        "org/rl",
        "--train-repo-file",
        "data/train.parquet",
        "--val-file",
        f"{C}/data/val.parquet",
        "--val-repo",
        "org/rl",
        "--val-repo-file",
        "data/val.parquet",
        *extra,
    ]
    env = {k: v for k, v in os.environ.items() if k not in ("HF_ENDPOINT", "HF_TOKEN")}
    env["HF_ENDPOINT"] = endpoint
    r = subprocess.run(
        [sys.executable, "-m", "invoke", "-r", str(REPO), *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=300,
        env=env,
    )
    data = json.loads(r.stdout) if r.stdout.strip().startswith("{") else None
    return r, data


def _items(data, host):
    return {it["path"].rsplit("/", 1)[-1]: it for it in data[host]["items"]}


def test_prepare_downloads_once_resumes_and_names_missing_column(sandbox, tmp_path):
    h = "h1"
    sandbox.reset(h)
    src = make_model(tmp_path / "src" / "tiny", n_floats=60000)
    good = make_parquet(tmp_path / "src" / "train.parquet", 16).read_bytes()
    val = make_parquet(tmp_path / "src" / "val.parquet", 4).read_bytes()
    bad = make_parquet(tmp_path / "src" / "bad.parquet", 4, drop_ground_truth=True).read_bytes()
    hostdir = sandbox.runs_dir(h) / "prep"
    with Hub(bind=f"198.51.{100 + int(sandbox.id)}.1") as hub:
        hub.add_model("org/tiny", src)
        hub.add_dataset_file("org/rl", "data/train.parquet", good)
        hub.add_dataset_file("org/rl", "data/val.parquet", val)

        # 1st run: everything downloaded inside the container, verified, sizes reported
        r, data = _prepare(sandbox, h, hub.url)
        assert r.returncode == 0, r.stdout + r.stderr
        it = _items(data, h)
        assert it["tiny"]["status"] == "downloaded" and it["tiny"]["check"]["ok"]
        assert it["tiny"]["check"]["weights_bytes"] == (src / "model.safetensors").stat().st_size
        assert it["train.parquet"]["status"] == "downloaded" and it["train.parquet"]["check"]["rows"] == 16
        assert (hostdir / "models/tiny/model.safetensors").read_bytes() == (src / "model.safetensors").read_bytes()
        assert not (hostdir / "models/tiny/README.md").exists()
        n = len(hub.log)

        # 2nd run: nothing downloaded, no request at all
        r, data = _prepare(sandbox, h, hub.url)
        assert r.returncode == 0, r.stderr
        assert {v["status"] for v in _items(data, h).values()} == {"present"}
        assert len(hub.log) == n

        # an interrupted download is not taken as complete: .part stays, exit 1, the model dir is not "ok"
        (hostdir / "models/tiny/model.safetensors").unlink()
        hub.cut["/org/tiny/resolve/main/model.safetensors"] = 100000
        r, data = _prepare(sandbox, h, hub.url)
        assert r.returncode == 1
        tiny = _items(data, h)["tiny"]
        assert tiny["status"] == "error" and "kept for resume" in tiny["error"]
        assert not (hostdir / "models/tiny/model.safetensors").exists()
        assert (hostdir / "models/tiny/model.safetensors.part").stat().st_size == 100000
        assert "model.safetensors.part" in r.stderr or "interrupted" in r.stderr or "expected" in r.stderr

        # the next run resumes from the .part (Range) and completes
        del hub.cut["/org/tiny/resolve/main/model.safetensors"]
        r, data = _prepare(sandbox, h, hub.url)
        assert r.returncode == 0, r.stderr
        assert ("GET", "/org/tiny/resolve/main/model.safetensors", "bytes=100000-") in hub.log
        assert (hostdir / "models/tiny/model.safetensors").read_bytes() == (src / "model.safetensors").read_bytes()
        assert not (hostdir / "models/tiny/model.safetensors.part").exists()

        # a parquet without reward_model.ground_truth is reported by name
        (hostdir / "data/val.parquet").unlink()
        hub.add_dataset_file("org/rl", "data/val.parquet", bad)
        r, data = _prepare(sandbox, h, hub.url)
        assert r.returncode == 1
        v = _items(data, h)["val.parquet"]
        assert v["check"]["missing"] == ["reward_model.ground_truth"]
        assert r.stderr.strip() == (
            f"{h}: data file {C}/data/val.parquet has no column 'reward_model.ground_truth' "
            "(verl's RL schema needs prompt, data_source, reward_model.ground_truth)"
        )
