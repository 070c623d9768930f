"""Test helpers: a tiny HF-style model dir (hand-written safetensors, no torch) and verl RL parquet files,
and a threaded HTTP server with the hub's URL layout (``/api/models/<repo>``, ``/<repo>/resolve/main/<f>``,
``/datasets/<repo>/resolve/main/<f>``) that supports Range requests and can cut a transfer short."""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "sandbox"))
from sample_inputs import make_model, make_parquet, rl_table, safetensors_bytes  # noqa: E402,F401  (sandbox equipment)


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
