"""Pure parts of the container and prepare tasks (no hosts)."""

import json
from types import SimpleNamespace

from dapo_ops.cli import containers
from dapo_ops.cli import prepare


def test_parse_list_output():
    out = (
        "verl\tquay.io/ascend/verl:8.3\trunning\tUp 3 hours\t0ca5a9e4c531\n"
        "old\tverlai/verl:0.8\texited\tExited (137) 2 days ago\t1b2c3d4e5f60\n"
        "@@V verl " + json.dumps({"found": True, "version": "0.9.1", "path": "/verl/verl", "python": "3.11.7"}) + "\n"
    )
    rows = containers.parse_list(out)
    assert rows == [
        {
            "name": "verl",
            "image": "quay.io/ascend/verl:8.3",
            "state": "running",
            "status": "Up 3 hours",
            "id": "0ca5a9e4c531",
            "verl": "0.9.1",
        },
        {
            "name": "old",
            "image": "verlai/verl:0.8",
            "state": "exited",
            "status": "Exited (137) 2 days ago",
            "id": "1b2c3d4e5f60",
            "verl": "",
        },
    ]
    assert "docker ps -a" in containers.list_command("python3", "/verl")
    # verl not found, found without a readable version, no answer at all (the exec failed: printf's "-")
    for raw, cell in (
        (json.dumps({"found": False, "version": None}), "-"),
        (json.dumps({"found": True}), "?"),
        ("-", "-"),
    ):
        assert containers.parse_list("c\timg\trunning\tUp\tid\n@@V c " + raw + "\n")[0]["verl"] == cell


def test_prepare_request_defaults_from_the_runbook():
    plan = SimpleNamespace(
        spec={
            "settings": {
                "model_path": "/data/models/Qwen3-8B",
                "train_file": "/data/dapo-math-17k.parquet",
                "val_file": "/data/aime-2024.parquet",
            }
        }
    )
    req = prepare.build_request(plan)
    assert req["model"] == {"path": "/data/models/Qwen3-8B", "repo": "Qwen/Qwen3-8B"}
    assert req["data"] == [
        {
            "path": "/data/dapo-math-17k.parquet",
            "repo": "BytedTsinghua-SIA/DAPO-Math-17k",
            "file": "data/dapo-math-17k.parquet",
        },
        {"path": "/data/aime-2024.parquet", "repo": "BytedTsinghua-SIA/AIME-2024", "file": "data/aime-2024.parquet"},
    ]
    assert "endpoint" not in req
    req = prepare.build_request(
        plan, model_repo="me/m", train_repo="me/d", train_repo_file="x.parquet", endpoint="https://hf-mirror.com"
    )
    assert req["model"]["repo"] == "me/m" and req["data"][0] == {
        "path": "/data/dapo-math-17k.parquet",
        "repo": "me/d",
        "file": "x.parquet",
    }
    assert req["endpoint"] == "https://hf-mirror.com"
    plan.spec["settings"]["model_path"] = "/data/models/my-llama"
    assert prepare.build_request(plan)["model"]["repo"] == ""


def test_list_command_reads_the_version_through_the_bundle_op(tmp_path):
    """The per-container part of ``list_command``, run against a local "container" (this machine): the bundle comes
    on stdin, is installed once under LIST_ROOT, and the verlinfo op answers; the second run finds it installed."""
    import os
    import subprocess
    import sys

    from dapo_ops.control.remote import bundle as remote_bundle

    wd = tmp_path / "wd"
    (wd / "verl" / "version").mkdir(parents=True)
    (wd / "verl" / "__init__.py").write_text("")
    (wd / "verl" / "version" / "version").write_text("0.9.1\n")
    bdir = remote_bundle.bundle_dir(str(tmp_path / "root"))
    inner = (
        f"{{ {remote_bundle.stdin_install_line(bdir, sys.executable)}; }} >/dev/null 2>&1; "
        + remote_bundle.op_line(bdir, sys.executable, "verlinfo", [str(wd)])
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    for _ in range(2):
        out = subprocess.run(
            ["sh", "-c", inner], input=remote_bundle.bundle_b64(), capture_output=True, env=env, cwd="/", timeout=60
        )
        assert out.returncode == 0, out.stderr
        info = json.loads(out.stdout.decode().strip().splitlines()[-1])
        assert info["found"] and info["version"] == "0.9.1" and info["path"] == str(wd / "verl")
        assert os.path.isfile(os.path.join(bdir, "dapo_ops", remote_bundle.COMPLETE_MARK))
    assert not os.path.exists(bdir + ".tar.gz.b64")  # the installer removes its input
    assert containers.LIST_ROOT == "/tmp" and f"{remote_bundle.bundle_dir('/tmp')}" in containers.list_command(
        "python3", "/verl"
    )
