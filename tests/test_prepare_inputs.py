"""agent/input_files.py, agent/parquet.py, agent/download.py in-process: model/parquet checks and the resumable, verified
hub download (loopback hub)."""

import os


from dapo_ops.agent import input_files
from dapo_ops.agent import parquet
from dapo_ops.agent import download
from inputs_helpers import Hub, make_model, make_parquet, safetensors_bytes


def test_model_dir_checks(tmp_path):
    m = make_model(tmp_path / "m", max_pos=4096)
    r = input_files.check_model_dir(str(m))
    assert r["ok"], r["problems"]
    assert r["max_position_embeddings"] == 4096 and r["weights"] == ["model.safetensors"]
    (m / "tokenizer.json").unlink()
    os.truncate(m / "model.safetensors", 100)
    r = input_files.check_model_dir(str(m))
    assert not r["ok"]
    assert any("model.safetensors is incomplete" in p for p in r["problems"])
    assert any("no tokenizer" in p for p in r["problems"])
    (m / "config.json").unlink()
    assert "no config.json" in input_files.check_model_dir(str(m))["problems"][0]
    assert input_files.check_model_dir(str(tmp_path / "nope"))["problems"] == [
        f"model dir {tmp_path}/nope does not exist"
    ]


def test_sharded_model_missing_shard(tmp_path):
    m = make_model(tmp_path / "m")
    (m / "model.safetensors").rename(m / "model-00001-of-00002.safetensors")
    (m / "model.safetensors.index.json").write_text(
        '{"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}'
    )
    r = input_files.check_model_dir(str(m))
    assert (
        "weight shard model-00002-of-00002.safetensors named in model.safetensors.index.json is missing"
        in r["problems"][0]
    )


def test_parquet_schema_names_the_missing_column(tmp_path):
    good = parquet.check_parquet(str(make_parquet(tmp_path / "good.parquet", 5)))
    assert good["ok"] and good["rows"] == 5 and good["schema_checked"] == "footer"
    assert good["columns"] == ["data_source", "prompt", "ability", "reward_model", "extra_info"]
    bad = parquet.check_parquet(str(make_parquet(tmp_path / "bad.parquet", 5, drop_ground_truth=True)))
    assert not bad["ok"] and bad["missing"] == ["reward_model.ground_truth"]
    assert "has no column 'reward_model.ground_truth'" in bad["problems"][0]
    nods = parquet.check_parquet(str(make_parquet(tmp_path / "nods.parquet", 3, drop=("data_source",))))
    assert nods["missing"] == ["data_source"]


def test_parquet_footer_reader_against_pyarrow_layouts(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from inputs_helpers import rl_table

    for i, kw in enumerate(
        (
            {"row_group_size": 100, "compression": "zstd"},
            {"version": "1.0", "use_dictionary": False},
            {"compression": "gzip", "data_page_size": 256},
        )
    ):
        p = tmp_path / f"v{i}.parquet"
        pq.write_table(rl_table(1000), str(p), **kw)
        r = parquet.check_parquet(str(p))
        assert r["ok"] and r["rows"] == 1000 and r["schema_checked"] == "footer", (kw, r)
    p = tmp_path / "text_prompt.parquet"
    pq.write_table(
        pa.Table.from_pylist([{"prompt": "plain", "data_source": "x", "reward_model": {"ground_truth": "1"}}]), str(p)
    )
    assert "is not a list of chat messages" in parquet.check_parquet(str(p))["problems"][0]
    p = tmp_path / "str_rm.parquet"
    pq.write_table(
        pa.Table.from_pylist([{"prompt": [{"role": "user", "content": "a"}], "data_source": "x", "reward_model": "1"}]),
        str(p),
    )
    assert "'reward_model' is not a struct" in parquet.check_parquet(str(p))["problems"][0]
    p = tmp_path / "map_rm.parquet"
    t = pa.table(
        {
            "prompt": pa.array([[{"role": "user", "content": "a"}]]),
            "data_source": ["x"],
            "reward_model": pa.array([[("ground_truth", "1")]], type=pa.map_(pa.string(), pa.string())),
        }
    )
    pq.write_table(t, str(p))
    assert parquet.check_parquet(str(p))["ok"]


def test_parquet_check_needs_no_pyarrow(tmp_path, monkeypatch):
    bad = make_parquet(tmp_path / "bad.parquet", 5, drop_ground_truth=True)
    good = make_parquet(tmp_path / "good.parquet", 5)
    import builtins

    real = builtins.__import__

    def no_pyarrow(name, *a, **kw):
        if name.startswith("pyarrow"):
            raise ImportError("no pyarrow here")
        return real(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", no_pyarrow)
    rb = parquet.check_parquet(str(bad))
    rg = parquet.check_parquet(str(good))
    assert rb["schema_checked"] == "footer" and rb["missing"] == ["reward_model.ground_truth"]
    assert rg["ok"] and rg["rows"] == 5


def test_truncated_parquet_is_not_complete(tmp_path):
    p = make_parquet(tmp_path / "t.parquet", 50)
    os.truncate(p, p.stat().st_size // 2)
    r = parquet.check_parquet(str(p))
    assert not r["ok"] and "does not end with the parquet magic" in r["problems"][0]


def test_fetch_model_then_nothing_then_resume(tmp_path):
    src = make_model(tmp_path / "src", n_floats=50000)
    with Hub() as hub:
        hub.add_model("org/tiny", src)
        dest = tmp_path / "dst" / "tiny"
        first = download.fetch_model("org/tiny", str(dest), hub.url)
        assert first["status"] == "downloaded", first
        assert first["check"]["ok"] and not (dest / "README.md").exists()
        n = len(hub.log)
        second = download.fetch_model("org/tiny", str(dest), hub.url)
        assert second["status"] == "present" and len(hub.log) == n  # no request at all

        # an interrupted transfer: not taken as complete, .part kept, then resumed with Range
        (dest / "model.safetensors").unlink()
        hub.cut["/org/tiny/resolve/main/model.safetensors"] = 70000
        third = download.fetch_model("org/tiny", str(dest), hub.url)
        assert third["status"] == "error" and ("interrupted" in third["error"] or "expected" in third["error"])
        assert not (dest / "model.safetensors").exists()
        assert (dest / "model.safetensors.part").stat().st_size == 70000
        assert not input_files.check_model_dir(str(dest))["ok"]
        del hub.cut["/org/tiny/resolve/main/model.safetensors"]
        fourth = download.fetch_model("org/tiny", str(dest), hub.url)
        assert fourth["status"] == "downloaded", fourth
        assert ("GET", "/org/tiny/resolve/main/model.safetensors", "bytes=70000-") in hub.log
        assert (dest / "model.safetensors").read_bytes() == (src / "model.safetensors").read_bytes()
        assert not (dest / "model.safetensors.part").exists()


def test_corrupt_download_is_removed_not_renamed(tmp_path):
    with Hub() as hub:
        bad = safetensors_bytes(100)[:-16]  # server sends a short file with a correct Content-Length
        hub.add_dataset_file("org/d", "x.safetensors", bad)
        r = download.fetch_file(hub.url + "/datasets/org/d/resolve/main/x.safetensors", str(tmp_path / "x.safetensors"))
        assert r["status"] == "error" and "failed verification" in r["error"]
        assert not (tmp_path / "x.safetensors").exists() and not (tmp_path / "x.safetensors.part").exists()


def test_fetch_dataset_reports_missing_column(tmp_path):
    p = make_parquet(tmp_path / "src" / "train.parquet", 4, drop_ground_truth=True)
    with Hub() as hub:
        hub.add_dataset_file("org/ds", "data/train.parquet", p.read_bytes())
        r = download.fetch_dataset_file("org/ds", "data/train.parquet", str(tmp_path / "d" / "train.parquet"), hub.url)
        assert r["status"] == "downloaded"
        assert r["check"]["missing"] == ["reward_model.ground_truth"]
