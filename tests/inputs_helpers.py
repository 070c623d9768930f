"""Test helpers: a tiny HF-style model dir (hand-written safetensors, no torch) and verl RL parquet files,
and a threaded HTTP server with the hub's URL layout (``/api/models/<repo>``, ``/<repo>/resolve/main/<f>``,
``/datasets/<repo>/resolve/main/<f>``) that supports Range requests and can cut a transfer short."""

from __future__ import annotations

import json
import os
import struct
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def safetensors_bytes(n_floats: int = 256) -> bytes:
    header = {"__metadata__": {"format": "pt"},
              "model.embed.weight": {"dtype": "F32", "shape": [n_floats], "data_offsets": [0, 4 * n_floats]}}
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + struct.pack(f"<{n_floats}f", *([0.5] * n_floats))


def make_model(d: Path, max_pos: int = 512, n_floats: int = 256) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text(json.dumps({"model_type": "qwen2", "max_position_embeddings": max_pos,
                                               "hidden_size": 16, "torch_dtype": "bfloat16"}))
    (d / "tokenizer.json").write_text(json.dumps({"version": "1.0", "model": {"type": "BPE", "vocab": {"a": 0}}}))
    (d / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|im_end|>"}))
    (d / "model.safetensors").write_bytes(safetensors_bytes(n_floats))
    return d


def rl_table(n: int = 8, *, drop_ground_truth: bool = False, drop: tuple = ()) -> pa.Table:
    rows = []
    for i in range(n):
        rm = {"style": "rule"} if drop_ground_truth else {"style": "rule", "ground_truth": str(i + 2)}
        row = {"data_source": "math_dapo", "prompt": [{"role": "user", "content": f"What is {i} plus 2?"}],
               "ability": "MATH", "reward_model": rm, "extra_info": {"index": i}}
        for k in drop:
            row.pop(k, None)
        rows.append(row)
    return pa.Table.from_pylist(rows)


def make_parquet(path: Path, n: int = 8, **kw) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(rl_table(n, **kw), str(path))
    return path


class Hub:
    """A tiny hub: ``files`` maps URL paths (``/org/m/resolve/main/config.json``) to bytes; ``api`` maps
    ``/api/models/org/m`` to JSON. ``cut`` = {url path: n}: send only the first n bytes, then close (an
    interrupted transfer). ``log`` records (method, path, range header)."""

    def __init__(self, bind: str = "127.0.0.1"):
        self.files: dict[str, bytes] = {}
        self.api: dict[str, dict] = {}
        self.cut: dict[str, int] = {}
        self.log: list[tuple] = []
        hub = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                rng = self.headers.get("Range")
                hub.log.append(("GET", self.path, rng))
                if self.path in hub.api:
                    body = json.dumps(hub.api[self.path]).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                data = hub.files.get(self.path)
                if data is None:
                    body = b"not found"
                    self.send_response(404)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                start = 0
                if rng and rng.startswith("bytes="):
                    start = int(rng[6:].split("-")[0])
                    if start >= len(data):
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{len(data)}")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                else:
                    self.send_response(200)
                chunk = data[start:]
                self.send_header("Content-Length", str(len(chunk)))
                self.end_headers()
                n = hub.cut.get(self.path)
                if n is not None:
                    self.wfile.write(chunk[:n])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(chunk)

        self.server = ThreadingHTTPServer((bind, 0), H)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def add_model(self, repo: str, model_dir: Path):
        names = sorted(p.name for p in model_dir.iterdir() if p.is_file())
        self.api[f"/api/models/{repo}"] = {"id": repo, "siblings": [{"rfilename": n} for n in names + ["README.md"]]}
        for n in names:
            self.files[f"/{repo}/resolve/main/{n}"] = (model_dir / n).read_bytes()
        self.files[f"/{repo}/resolve/main/README.md"] = b"# readme\n"

    def add_dataset_file(self, repo: str, name: str, data: bytes):
        self.files[f"/datasets/{repo}/resolve/main/{name}"] = data

    def gets(self, needle: str = "") -> list:
        return [e for e in self.log if e[0] == "GET" and needle in e[1]]

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
