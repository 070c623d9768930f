"""Pure parts of the container and prepare tasks (no hosts)."""

from types import SimpleNamespace

from dapo_ops.cli import containers
from dapo_ops.cli import prepare


def test_parse_list_output():
    out = ("verl\tquay.io/ascend/verl:8.3\trunning\tUp 3 hours\t0ca5a9e4c531\n"
           "old\tverlai/verl:0.8\texited\tExited (137) 2 days ago\t1b2c3d4e5f60\n"
           "@@V verl 0.9.1\n")
    rows = containers.parse_list(out)
    assert rows == [
        {"name": "verl", "image": "quay.io/ascend/verl:8.3", "state": "running", "status": "Up 3 hours",
         "id": "0ca5a9e4c531", "verl": "0.9.1"},
        {"name": "old", "image": "verlai/verl:0.8", "state": "exited", "status": "Exited (137) 2 days ago",
         "id": "1b2c3d4e5f60", "verl": ""}]
    assert "docker ps -a" in containers.list_command("python3", "/verl")


def test_prepare_request_defaults_from_the_runbook():
    plan = SimpleNamespace(spec={"settings": {"model_path": "/data/models/Qwen3-8B",
                                              "train_file": "/data/dapo-math-17k.parquet",
                                              "val_file": "/data/aime-2024.parquet"}})
    req = prepare.build_request(plan)
    assert req["model"] == {"path": "/data/models/Qwen3-8B", "repo": "Qwen/Qwen3-8B"}
    assert req["data"] == [
        {"path": "/data/dapo-math-17k.parquet", "repo": "BytedTsinghua-SIA/DAPO-Math-17k",
         "file": "data/dapo-math-17k.parquet"},
        {"path": "/data/aime-2024.parquet", "repo": "BytedTsinghua-SIA/AIME-2024", "file": "data/aime-2024.parquet"}]
    assert "endpoint" not in req
    req = prepare.build_request(plan, model_repo="me/m", train_repo="me/d", train_repo_file="x.parquet",
                                endpoint="https://hf-mirror.com")
    assert req["model"]["repo"] == "me/m" and req["data"][0] == {"path": "/data/dapo-math-17k.parquet",
                                                                 "repo": "me/d", "file": "x.parquet"}
    assert req["endpoint"] == "https://hf-mirror.com"
    plan.spec["settings"]["model_path"] = "/data/models/my-llama"
    assert prepare.build_request(plan)["model"]["repo"] == ""
