"""``inv launch`` refuses a run whose SwanLab tracker the container cannot reach (sandbox hosts, real SSH + docker).

The check rides on the quick checks' one probe round trip (dapo_ops/control/launch/service.py ``quick_checks``): one GET of
the tracker's API root from inside the container with the run's proxy env and SwanLab host. A plain HTTP server on
the bench bridge address (198.51.<100+id>.1, the one address the test process and the containers share; the same
stand-in tests/test_preflight_bench.py uses) is a self-hosted SwanLab; a port nobody listens on there, a TEST-NET
address (192.0.2.1, RFC 5737: no route in the sandbox) and a proxy that does not answer are the unreachable cases.
"""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from dapo_ops.core import policy
from dapo_ops.control.inventory import hosts_file as inventory
from dapo_ops.control.launch import service as svc
from dapo_ops.control.launch import refusals as launch_errors
from dapo_ops.control import swanlab_settings as swanlab_cfg
from dapo_ops.control.remote.target import Target
import test_launch_bench
from test_launch_bench import IN, launch

host_ready = test_launch_bench.host_ready  # the fixture (inputs present, a clean host, the CLI's env)

pytestmark = pytest.mark.bench

KEY = "sk-trk-test-4f1c9a77e2"  # a SwanLab API key that must never show up anywhere


def _bridge(sandbox) -> str:
    return f"198.51.{100 + int(sandbox.id)}.1"


def _closed_port(addr: str) -> int:
    s = socket.socket()
    s.bind((addr, 0))
    port = s.getsockname()[1]
    s.close()
    return port


class _Swan(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(404)  # any HTTP answer: the server is there (the probe GETs the API root)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *a):
        pass


def _runs(sandbox, host) -> set[str]:
    return {p.name for p in sandbox.runs_dir(host).iterdir() if p.name[:1].isdigit()}


def _cloud(prep, host_url: str) -> None:
    prep.env.update(SWANLAB_MODE="cloud", SWANLAB_API_KEY=KEY, SWANLAB_HOST=host_url)


def _refused(sandbox, prep, host, *args):
    before = _runs(sandbox, host)
    res, _ = launch(prep, host, "--steps", "3", "--framework", "fsdp", "--link-wait", "0", *args)
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert res.returncode != 0, res.stdout + res.stderr
    assert len(lines) == 1, res.stderr
    assert _runs(sandbox, host) == before, "a refused launch left a run dir behind"
    assert KEY not in res.stdout + res.stderr
    return lines[0]


def test_unreachable_tracker_is_refused_before_anything_is_written(sandbox, host_ready):
    host_ready("h1", {"step_time": 0.2})
    url = f"http://{_bridge(sandbox)}:{_closed_port(_bridge(sandbox))}"
    _cloud(host_ready, url)
    line = _refused(sandbox, host_ready, "h1")
    assert f"SwanLab host {url}/api not reachable from the container: connect: " in line, line
    assert "Connection refused" in line and "fix [proxy] in hosts.toml or SWANLAB_HOST" in line, line
    assert line.endswith(policy.SWANLAB_OFFLINE_WORDS + " (--skip-preflight to launch anyway)"), line  # whole, not cut
    # a TEST-NET address: nothing answers (no route / no ARP reply in the sandbox), refused within the probe's bound
    _cloud(host_ready, "http://192.0.2.1:8000")
    line = _refused(sandbox, host_ready, "h1")
    assert "SwanLab host http://192.0.2.1:8000/api not reachable from the container" in line, line
    assert "container: connect: " in line or "container: timeout: " in line, line


def test_a_dead_proxy_is_named_and_its_password_stays_secret(sandbox, host_ready):
    host_ready("h2", {"step_time": 0.2})
    _cloud(host_ready, "http://swanlab.example.internal:8000")
    proxy = f"{_bridge(sandbox)}:{_closed_port(_bridge(sandbox))}"
    # credentials only by env var or [proxy] (never argv: `--http-proxy user:pw@...` is refused, tests/test_proxy.py)
    host_ready.env["http_proxy"] = f"http://alice:pr0xy-s3cret@{proxy}"
    line = _refused(sandbox, host_ready, "h2")
    assert "not reachable from the container: proxy http://alice:***@" in line and proxy in line, line
    assert "pr0xy-s3cret" not in line and "check the proxy (hosts.toml [proxy]" in line, line


def test_local_and_offline_modes_probe_no_tracker(sandbox, host_ready):
    host_ready("h3", {"step_time": 0.2})
    for mode in ("local", "offline"):
        # an unreachable SWANLAB_HOST does not matter when nothing talks to it (local mode's own requirement,
        # swanboard, is preflight's: the sandbox image has none, so this launch skips preflight)
        _cloud(host_ready, "http://192.0.2.1:8000")
        skip = ("--skip-preflight",) if mode == "local" else ()
        res, rid = launch(
            host_ready, "h3", "--steps", "2", "--framework", "fsdp", "--swanlab-mode", mode, "--link-wait", "0", *skip
        )
        assert res.returncode == 0 and rid, res.stderr
        host_ready("h3", {"step_time": 0.2})  # next round on a clean host


def _quick(sandbox, host: str, sw_env: dict, extra_public: dict | None = None):
    """``launch.quick_checks`` in-process, as ``launch_one`` calls it (the CLI's path up to the start)."""
    h = inventory.load(sandbox.inventory).hosts[host]
    sw = swanlab_cfg.resolve(sw_env, {}, stdin_isatty=False)
    st = {
        "model": f"{IN}/model",
        "train_file": f"{IN}/train.parquet",
        "val_file": f"{IN}/val.parquet",
        "framework": "fsdp",
        "steps": 3,
        "max_response_length": 1024,
    }
    req = svc.LaunchRequest(mode="dapo", settings=st, sw=sw, extra_public=dict(extra_public or {}))
    view = svc.draft_for(svc.LaunchFacts(host=h, run_id="20261201-000000-trk0"), req)
    with Target(h) as t:
        return svc.quick_checks(t, view, False, req)


def test_a_reachable_tracker_passes_in_the_same_probe(sandbox, host_ready):
    host_ready("h1", {"step_time": 0.2})
    srv = ThreadingHTTPServer((_bridge(sandbox), 0), _Swan)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    url = f"http://{_bridge(sandbox)}:{srv.server_address[1]}"
    try:
        facts = _quick(sandbox, "h1", {"SWANLAB_MODE": "cloud", "SWANLAB_API_KEY": KEY, "SWANLAB_HOST": url})
        got = facts["probe"]["http"]["swanlab"]
        assert got["reachable"] and got["url"] == url + "/api" and got["status"] == 404, got
        assert "SWANLAB_API_KEY" not in facts["probe"]["secrets_present"]  # the GET needs no key: none was sent
    finally:
        srv.shutdown()
        srv.server_close()
    with pytest.raises(launch_errors.LaunchRefused) as e:
        _quick(sandbox, "h1", {"SWANLAB_MODE": "cloud", "SWANLAB_API_KEY": KEY, "SWANLAB_HOST": url})
    assert e.value.kind == "preflight" and str(e.value).startswith("h1: preflight swanlab failed: ")
    facts = _quick(sandbox, "h1", {"SWANLAB_MODE": "disabled"})
    assert facts["probe"]["http"] == {}
