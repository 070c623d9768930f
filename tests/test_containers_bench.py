"""container.list / container.create on the sandbox hosts (real sshd + dockerd per host).

The bench has no accelerator device nodes, so its hosts.toml sets ``device_mounts = false`` (the full Ascend
``docker run`` line is asserted in tests/test_container_spec.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.bench
REPO = Path(__file__).resolve().parent.parent
IMAGE = "dapo-sandbox/verl:0.9.1"


def _inv(*args, timeout=300):
    return subprocess.run(
        [sys.executable, "-m", "invoke", "-r", str(REPO), *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=timeout,
        env=dict(os.environ),
    )


def _usr_volumes() -> list[str]:
    """The sandbox image is a near-empty rootfs: give the new container the machine's /usr (sh, sleep)."""
    out = []
    for d in ("bin", "sbin", "lib", "lib64", "lib32", "libexec"):
        p = Path("/usr") / d
        if p.is_dir() and not p.is_symlink():
            out += ["--volume", f"{p}:{p}:ro"]
    return out


def test_list_on_three_hosts(sandbox):
    for h in sandbox.hosts:
        sandbox.reset(h)
    r = _inv("container.list", "--inventory", str(sandbox.inventory), "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert sorted(data) == ["h1", "h2", "h3"]
    for h in sandbox.hosts:
        verl = [c for c in data[h] if c["name"] == "verl"]
        assert verl and verl[0]["image"] == IMAGE and verl[0]["state"] == "running"
        assert verl[0]["status"].startswith("Up") and verl[0]["verl"] == "0.9.1"
    table = _inv("container.list", "--inventory", str(sandbox.inventory))
    assert table.returncode == 0 and table.stdout.count("verl *") == 3


def test_create_refuse_replace_and_checkpoints_outlive_the_container(sandbox, tmp_path):
    h = "h2"
    sandbox.reset(h)
    ckpt = tmp_path / "ckpt-host"
    inv = tmp_path / "hosts.toml"
    inv.write_text(sandbox.inventory.read_text().replace("[hosts.h2]", f'[hosts.h2]\nckpt_dir = "{ckpt}"'))
    name = "verl-new"
    sandbox.ssh(h, f"docker rm -f {name} >/dev/null 2>&1; true")
    try:
        dry = _inv("container.create", "--inventory", str(inv), "-H", h, "--image", IMAGE, "--name", name, "--dry-run")
        assert dry.returncode == 0, dry.stderr
        assert f"-v {ckpt}:/verl/dapo_runs" in dry.stdout and "--network host --ipc host" in dry.stdout
        assert "davinci" not in dry.stdout  # device_mounts = false on the bench

        r = _inv(
            "container.create", "--inventory", str(inv), "-H", h, "--image", IMAGE, "--name", name, *_usr_volumes()
        )
        assert r.returncode == 0, r.stdout + r.stderr
        state = sandbox.ssh(
            h,
            f"docker inspect -f '{{{{.State.Status}}}} {{{{.Id}}}} {{{{.HostConfig.NetworkMode}}}} "
            f"{{{{.HostConfig.IpcMode}}}} {{{{.HostConfig.ShmSize}}}}' {name}",
            check=True,
        ).stdout.split()
        assert state[0] == "running" and state[2] == "host" and state[3] == "host"
        assert int(state[4]) == 64 << 30
        first_id = state[1]

        # refuses to replace a running container: one line, exit 1, the container untouched
        again = _inv(
            "container.create", "--inventory", str(inv), "-H", h, "--image", IMAGE, "--name", name, *_usr_volumes()
        )
        assert again.returncode == 1
        assert again.stderr.strip() == (
            f"container '{name}' is running on {h}: pass --replace to remove and "
            "recreate it (whatever runs in it ends), or choose another --name"
        )
        assert sandbox.ssh(h, f"docker inspect -f '{{{{.Id}}}}' {name}").stdout.strip() == first_id

        # a run writes a checkpoint into runs_dir; the container goes away; the checkpoint stays on the host
        sandbox.ssh(
            h,
            f"docker exec {name} sh -c 'mkdir -p /verl/dapo_runs/r1/checkpoints/global_step_2/actor && "
            "echo 2 > /verl/dapo_runs/r1/checkpoints/latest_checkpointed_iteration.txt && "
            "echo weights > /verl/dapo_runs/r1/checkpoints/global_step_2/actor/model_world_size_1_rank_0.pt'",
            check=True,
        )
        sandbox.ssh(h, f"docker rm -f {name}", check=True)
        assert (ckpt / "r1/checkpoints/latest_checkpointed_iteration.txt").read_text() == "2\n"
        assert (ckpt / "r1/checkpoints/global_step_2/actor/model_world_size_1_rank_0.pt").exists()

        # --replace on a fresh container: new id; the new container sees the old checkpoints
        r = _inv(
            "container.create", "--inventory", str(inv), "-H", h, "--image", IMAGE, "--name", name, *_usr_volumes()
        )
        assert r.returncode == 0, r.stderr
        rep = _inv(
            "container.create",
            "--inventory",
            str(inv),
            "-H",
            h,
            "--image",
            IMAGE,
            "--name",
            name,
            "--replace",
            *_usr_volumes(),
        )
        assert rep.returncode == 0, rep.stderr
        seen = sandbox.ssh(
            h, f"docker exec {name} cat /verl/dapo_runs/r1/checkpoints/latest_checkpointed_iteration.txt"
        )
        assert seen.stdout == "2\n"
    finally:
        sandbox.ssh(h, f"docker rm -f {name} >/dev/null 2>&1; true")


def test_create_names_the_missing_image(sandbox):
    r = _inv(
        "container.create",
        "--inventory",
        str(sandbox.inventory),
        "-H",
        "h3",
        "--image",
        "nosuch/verl:0.0",
        "--name",
        "x1",
    )
    assert r.returncode == 1
    assert r.stderr.strip().startswith("image 'nosuch/verl:0.0' not found on h3: docker pull nosuch/verl:0.0")


def test_create_names_dockers_own_reason(sandbox):
    """docker run's first line is the reason; the usage note after it is not (the new-user trial got only
    "Run 'docker run --help' for more information" for a bad --shm-size)."""
    r = _inv(
        "container.create",
        "--inventory",
        str(sandbox.inventory),
        "-H",
        "h3",
        "--image",
        IMAGE,
        "--name",
        "x2",
        "--shm-size",
        "abc",
    )
    assert r.returncode == 1, r.stdout + r.stderr
    assert 'invalid argument "abc" for "--shm-size" flag' in r.stderr and "--help" not in r.stderr, r.stderr


def test_create_passes_proxy_without_putting_credentials_on_a_command_line(sandbox, tmp_path):
    h = "h3"
    inv = tmp_path / "hosts.toml"
    inv.write_text(
        sandbox.inventory.read_text().replace('http_proxy = ""', 'http_proxy = "http://u:s3cret@10.9.9.9:3128"')
    )
    name = "verl-proxy"
    sandbox.ssh(h, f"docker rm -f {name} >/dev/null 2>&1; true")
    try:
        dry = _inv("container.create", "--inventory", str(inv), "-H", h, "--image", IMAGE, "--name", name, "--dry-run")
        assert dry.returncode == 0 and "s3cret" not in dry.stdout
        assert "-e http_proxy -e HTTP_PROXY" in dry.stdout and sandbox.addresses["h1"] in dry.stdout  # no_proxy
        r = _inv(
            "container.create", "--inventory", str(inv), "-H", h, "--image", IMAGE, "--name", name, *_usr_volumes()
        )
        assert r.returncode == 0, r.stdout + r.stderr
        assert "s3cret" not in r.stdout + r.stderr
        env = sandbox.ssh(h, f"docker exec {name} env", check=True).stdout.splitlines()
        assert "http_proxy=http://u:s3cret@10.9.9.9:3128" in env and "HTTP_PROXY=http://u:s3cret@10.9.9.9:3128" in env
        assert any(ln.startswith("no_proxy=") and sandbox.addresses["h2"] in ln for ln in env)
    finally:
        sandbox.ssh(h, f"docker rm -f {name} >/dev/null 2>&1; true")
