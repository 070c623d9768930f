"""A bare host (``runtime = "host"``) reached over real SSH: the sandbox host h3's own shell (its sshd runs in the
host's network namespace on this machine's filesystem), no container, the verl stand-in run from a host tree
(sandbox/host_tree.sh). Preflight, launch, an OOM cue -> retry -> success, status; the detached supervisor
outlives the SSH session that started it."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest
from supervisor_helpers import stand_in_tree
from config_helpers import no_config

pytestmark = pytest.mark.bench

REPO = Path(__file__).resolve().parents[1]


def test_bare_host_over_ssh(sandbox, tmp_path, cli):
    tree = stand_in_tree(tmp_path)
    (tree / "sandbox" / "scenario.json").write_text(
        json.dumps(
            {
                "accelerator": "gpu",
                "step_time": 0.2,
                "nonce": time.time(),
                "failure": {"kind": "oom-device", "step": 2, "times": 1},
            }
        )
    )
    py = Path(sys.executable)
    inv_path = tmp_path / "hosts.toml"
    inv_path.write_text(f"""
[hosts.h3]
address = "{sandbox.addresses["h3"]}"
user = "root"
identity_file = "{sandbox.identity_file}"
known_hosts = "{sandbox.known_hosts}"
connect_timeout = 5
runtime = "host"
workdir = "{tree}"
runs_dir = "{tree}/dapo_runs"
python = "{py}"
accelerator = "gpu"
devices = 1
device_mounts = false
[hosts.h3.env]
PATH = "{tree}/bin:{py.parent}:/usr/bin:/bin"
DAPO_STANDIN_DEVICES = "{tree}/sandbox/devices.json"
DAPO_STANDIN_SCENARIO = "{tree}/sandbox/scenario.json"
""")
    env = dict(
        DAPO_OPS_INVENTORY=str(inv_path),
        DAPO_OPS_CONFIG=no_config(tmp_path),
        SWANLAB_MODE="disabled",
        ROLLOUT_TP="1",
        FRAMEWORK="fsdp",
    )

    def inv(*args):
        return cli("inv", *args, env=env, drop_env=("DAPO_OPS_", "SWANLAB_"), cwd=tmp_path, timeout=180)

    pf = inv("preflight", "-H", "h3", "--quick", "--json")
    checks = {c["name"]: c["status"] for c in json.loads(pf.stdout)["hosts"]["h3"]["checks"]}
    assert pf.returncode == 0 and checks["ssh"] == "ok" and checks["host"] == "ok" and "container" not in checks, (
        pf.stdout
    )
    r = inv("launch", "-H", "h3", "--steps", "3", "--save-freq", "1", "--link-wait", "0")
    assert r.returncode == 0 and "(bare host)" in r.stdout, r.stdout + r.stderr
    rid = r.stdout.split()[1]
    w = inv("watch", "-H", "h3", "--run", rid, "--interval", "1")
    assert w.returncode == 0, w.stdout + w.stderr
    rec = json.loads((tree / "dapo_runs" / rid / "run.json").read_text())
    assert rec["status"] == "succeeded" and [a["verdict"]["cls"] for a in rec["attempts"]] == ["oom-device", "success"]
    # the supervisor ran in the host's namespace (started over SSH, detached with setsid): its own session
    assert rec["pids"]["supervisor"] != os.getpid()
    st = json.loads(inv("status", "-H", "h3", "--json").stdout)[0]
    assert (st["state"], st["step"], st["total"], st["attempt"]) == ("succeeded", 3, 3, 2)
