"""Preflight evaluation without hosts: the real probe runs in this process (stand-in npu-smi on PATH, files in
tmp_path), then :func:`dapo_ops.control.preflight.checks.evaluate` judges the facts."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from dapo_ops.core import policy
from dapo_ops.control.preflight.checks import QUICK_CHECKS, evaluate
from dapo_ops.control.preflight.inputs import CKPT_FACTOR
from dapo_ops.control.preflight.network import swanlab_key_check
from dapo_ops.control.preflight.plan_view import plan_view
from dapo_ops.control.preflight.gather import probe_request
from dapo_ops.control.preflight.result import Check, to_json, worst
from dapo_ops.agent import preflight_probe as preflight_probe
from inputs_helpers import make_model, make_parquet
from config_helpers import no_config

REPO = Path(__file__).resolve().parent.parent
GIB = 1 << 30


def _host(**kw):
    base = dict(
        name="h1",
        container="verl",
        workdir="/verl",
        python="python3",
        accelerator="npu",
        devices=8,
        device_mounts=False,
        runs_dir="/verl/dapo_runs",
        address="192.0.2.11",
    )
    base.update(kw)
    return SimpleNamespace(**base)


def _spec(tmp_path, **settings):
    s = {
        "model_path": str(tmp_path / "m"),
        "train_file": str(tmp_path / "t.parquet"),
        "n_gpus_per_node": 8,
        "steps": 100,
        "save_freq": 10,
        "max_prompt_length": 1024,
        "max_response_length": 2048,
        "gpu_memory_utilization": 0.6,
        "ckpt_dir": str(tmp_path / "runs" / "r1" / "checkpoints"),
    }
    s.update(settings)
    return {"mode": "dapo", "profile": "0.9", "workdir": "/verl", "settings": s, "logger": ["console"], "env": {}}


@pytest.fixture
def standin(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{REPO / 'sandbox' / 'bin'}:{os.environ['PATH']}")
    dj = tmp_path / "devices.json"
    monkeypatch.setenv("DAPO_STANDIN_DEVICES", str(dj))
    dj.write_text('{"count": 8}')
    return dj


def _facts(req, inspect="running 0 false false false"):
    return {
        "ssh": {"ok": True},
        "inspect": {"rc": 0, "text": inspect},
        "probe": preflight_probe.probe(req),
        "probe_error": "",
    }


def _by(checks):
    return {c.name: c for c in checks}


def test_container_states_from_inspect():
    h = _host()
    for text, want in (
        ("exited 137 true false false", "exited (exit code 137, OOMKilled"),
        ("restarting 1 false true false", "is restarting (last exit code 1)"),
        ("paused 0 false false true", "is paused"),
    ):
        checks = evaluate(h, None, {"ssh": {"ok": True}, "inspect": {"rc": 0, "text": text}, "probe": None})
        c = _by(checks)["container"]
        assert c.status == "fail" and want in c.message, c
        assert [x.name for x in checks] == ["ssh", "docker", "container"]
    checks = evaluate(h, None, {"ssh": {"ok": True}, "inspect": {"rc": 127, "text": "sh: 1: docker: not found"}})
    assert _by(checks)["docker"].status == "fail"
    checks = evaluate(
        h,
        None,
        {
            "ssh": {
                "ok": False,
                "kind": "refused",
                "message": "connection to root@192.0.2.11:22 refused: sshd is not running "
                "or listens on another port; start sshd or fix port",
            }
        },
    )
    assert [(c.name, c.status, c.fix) for c in checks] == [("ssh", "fail", "start sshd or fix port")]


def test_full_probe_in_process_ok_and_profile_mismatch(tmp_path, standin):
    make_model(tmp_path / "m", max_pos=4096)
    make_parquet(tmp_path / "t.parquet", 10)
    spec = _spec(tmp_path)
    req = probe_request(_host(), plan_view(spec), full=False)
    checks = _by(evaluate(_host(), spec, _facts(req), full=False))
    for n in ("devices", "leftover", "device-mem", "model", "data:t.parquet", "disk"):
        assert checks[n].status == "ok", checks[n]
    assert checks["verl"].status == "fail"  # no verl in this test interpreter's path
    spec8 = dict(spec, profile="0.8")
    v = {
        "found": True,
        "version": "0.9.1",
        "path": "/verl/verl",
        "entry": "recipe.dapo.main_dapo",
        "entry_found": False,
    }
    facts = _facts(req)
    facts["probe"]["verl"] = v
    checks = _by(evaluate(_host(), spec8, facts, full=False))
    assert checks["verl"].status == "fail" and "VERL_PROFILE=0.9" in checks["verl"].fix
    assert checks["entry"].status == "fail" and "git submodule update --init recipe" in checks["entry"].fix


def test_disk_estimate_from_model_size(tmp_path, standin):
    make_model(tmp_path / "m", max_pos=4096)
    make_parquet(tmp_path / "t.parquet", 10)
    spec = _spec(tmp_path, max_actor_ckpt_to_keep=None)  # null: keep every save (verl's own default)
    req = probe_request(_host(), plan_view(spec), full=False)
    facts = _facts(req)
    wb = facts["probe"]["model"]["weights_bytes"]
    one = wb * CKPT_FACTOR
    for free, want in ((one * 100, "ok"), (one * 5, "warn"), (one / 2, "fail")):
        facts["probe"]["disk"]["free"] = int(free)
        d = _by(evaluate(_host(), spec, facts, full=False))["disk"]
        assert d.status == want, (free, d)
    assert "10 save(s)" in d.message
    # a spec without the key keeps the defaults table's 3: up to 2 x 3 on disk across attempts (stays_on_disk)
    d = _by(evaluate(_host(), _spec(tmp_path), facts, full=False))["disk"]
    assert "6 save(s)" in d.message


def test_one_step_off_needs_both_pools(tmp_path, standin):
    standin.write_text('{"count": 6}')
    spec = _spec(tmp_path, trainer_gpus=4, rollout_gpus=4)
    spec["mode"] = "one-step-off"
    req = probe_request(_host(), plan_view(spec), full=False)
    d = _by(evaluate(_host(), spec, _facts(req), full=False))["devices"]
    assert d.status == "fail" and "the plan needs 8 (trainer + rollout pools)" in d.message


def test_swanlab_key_check_tty_and_modes(tmp_path):
    spec = {"logger": ["console", "swanlab"], "env": {}}
    env = {"DAPO_OPS_CONFIG": no_config(tmp_path)}
    c = swanlab_key_check(spec, env=env, file_cfg={}, isatty=False)
    assert c.status == "fail" and "stdin is not a terminal" in c.message and "SWANLAB_API_KEY" in c.fix
    assert swanlab_key_check(spec, env=env, file_cfg={}, isatty=True).status == "warn"
    ok = swanlab_key_check(spec, env={**env, "SWANLAB_API_KEY": "abc123"}, file_cfg={}, isatty=False)
    assert ok.status == "ok" and "abc123" not in str(ok)
    assert swanlab_key_check(spec, env=env, file_cfg={}, isatty=False, mode_flag="local").status == "ok"
    assert swanlab_key_check({"logger": ["console"], "env": {}}, env=env, file_cfg={}) is None


def test_check_str_and_json():
    c = Check("devices", "fail", "2 NPU(s)\nusable", "give more")
    assert str(c) == "devices fail: 2 NPU(s) usable; fix: give more"
    assert worst([c, Check("x", "warn", "w")]) == "fail"
    assert '"status": "fail"' in to_json({"h1": [c]})
    with pytest.raises(ValueError, match="status 'bad' is not one of ok, warn, fail"):  # also under python -O
        Check("x", "bad", "m")


def test_proxy_and_python_checks(tmp_path, standin, monkeypatch):
    spec = _spec(tmp_path)
    req = probe_request(_host(), plan_view(spec), full=False)
    monkeypatch.delenv("http_proxy", raising=False)
    monkeypatch.delenv("https_proxy", raising=False)
    monkeypatch.delenv("HTTP_PROXY", raising=False)
    monkeypatch.delenv("HTTPS_PROXY", raising=False)
    facts = _facts(req)
    inv_proxy = {"http_proxy": "http://10.0.0.1:3128", "https_proxy": "", "no_proxy": ""}
    p = _by(evaluate(_host(), spec, facts, inv_proxy=inv_proxy))["proxy"]
    assert p.status == "warn" and "sees no proxy" in p.message
    monkeypatch.setenv("http_proxy", "http://u:pw@10.0.0.1:3128")
    facts = _facts(req)
    p = _by(evaluate(_host(), spec, facts, inv_proxy=inv_proxy))["proxy"]
    assert p.status == "ok" and "u:***@10.0.0.1" in p.message and "pw" not in p.message
    facts["probe"]["python"] = "3.8.10"
    assert _by(evaluate(_host(), spec, facts))["python"].status == "warn"


def test_plan_view_forms():
    spec = {
        "mode": "one-step-off",
        "settings": {
            "trainer_gpus": 2,
            "rollout_gpus": 6,
            "n_gpus_per_node": 8,
            "train_file": "/a.parquet",
            "val_file": "/a.parquet",
        },
    }
    for plan in (
        spec,
        {"spec": spec, "argv": ["python3", "-m", "x.y"]},
        SimpleNamespace(spec=spec, argv=["python3", "-m", "x.y"]),
    ):
        pv = plan_view(plan)
        assert pv.devices_needed == 8 and pv.data_files == ["/a.parquet"]
    assert plan_view({"spec": spec, "argv": ["python3", "-m", "x.y"]}).entry_module == "x.y"
    assert plan_view(None) is None


def test_remote_error_kinds_map_to_checks():
    h = _host()
    t = evaluate(
        h,
        None,
        {
            "ssh": {
                "ok": False,
                "kind": "timeout",
                "message": "command did not finish within 60 s: s=$(docker inspect ...",
            }
        },
    )
    assert [(c.name, c.status) for c in t] == [("ssh", "ok"), ("probe", "fail")]
    k = evaluate(
        h,
        None,
        {
            "ssh": {
                "ok": False,
                "kind": "hostkey",
                "message": "host key of root@192.0.2.11:22 is not in /k; verify it and add it "
                "(ssh-keyscan 192.0.2.11 >> /k) or pass --accept-new-host-keys",
            }
        },
    )
    assert k[0].name == "ssh" and k[0].status == "fail" and "--accept-new-host-keys" in k[0].fix


def test_v1_modules_transfer_queue_and_megatron_bridge(tmp_path, standin, monkeypatch):
    """The real probe looks the modules up in this interpreter: missing -> fail with a fix; present -> ok."""
    spec = _spec(tmp_path)
    spec["framework"] = "megatron"
    spec["accelerator"] = "gpu"  # a spec without one is the inventory's default, npu (core/defaults.py HOST, issue 46)
    req = probe_request(_host(), plan_view(spec), full=False)
    # on GPU Megatron-Bridge needs Transformer Engine (megatron/bridge/peft/lora_layers.py:20)
    # + mbridge, the other model builder, looked up to name VANILLA_MBRIDGE in the fix when it is there (issue 43 F4)
    assert req["modules"] == ["transfer_queue", "megatron.bridge", "transformer_engine", "mbridge"]
    checks = _by(evaluate(_host(), spec, _facts(req), full=False))
    assert checks["transfer_queue"].status == "fail" and "verl-core" in checks["transfer_queue"].fix
    assert checks["megatron.bridge"].status == "fail" and "megatron-bridge" in checks["megatron.bridge"].fix
    assert (
        checks["transformer_engine"].status == "fail"
        and "transformer-engine[pytorch" in checks["transformer_engine"].fix
    )
    assert {"transfer_queue", "megatron.bridge", "transformer_engine"} <= set(QUICK_CHECKS)  # a launch stops on them
    site = tmp_path / "site"
    for mod in ("transfer_queue", "megatron/bridge", "transformer_engine"):
        (site / mod).mkdir(parents=True)
        (site / mod / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(site))
    checks = _by(evaluate(_host(), spec, _facts(req), full=False))
    assert all(checks[m].status == "ok" for m in ("transfer_queue", "megatron.bridge", "transformer_engine"))
    spec["framework"], spec["profile"] = "fsdp", "0.8"
    assert probe_request(_host(), plan_view(spec), full=False)["modules"] == []


def test_swanlab_local_mode_needs_swanboard_in_the_container(tmp_path, standin, monkeypatch):
    """Issue 32 item 7: local mode without swanboard logs an ImportError in every run; preflight (and launch's
    quick checks) fail on it with the fix; offline and cloud need no swanboard."""
    spec = _spec(tmp_path)
    spec["logger"], spec["env"] = ["console", "swanlab"], {"SWANLAB_MODE": "local"}
    req = probe_request(_host(), plan_view(spec), full=False)
    assert "swanboard" in req["modules"]
    checks = _by(evaluate(_host(), spec, _facts(req), full=False))
    assert (
        checks["swanboard"].status == "fail"
        and "swanboard is not importable in the container" in checks["swanboard"].message
    )
    assert "swanlab[dashboard]" in checks["swanboard"].fix and "--swanlab-mode offline" in checks["swanboard"].fix
    assert "swanboard" in QUICK_CHECKS  # a launch stops on it
    site = tmp_path / "site"
    (site / "swanboard").mkdir(parents=True)
    (site / "swanboard" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(site))
    assert _by(evaluate(_host(), spec, _facts(req), full=False))["swanboard"].status == "ok"
    for mode in ("offline", "cloud", "disabled"):
        spec["env"] = {"SWANLAB_MODE": mode}
        assert "swanboard" not in probe_request(_host(), plan_view(spec), full=False)["modules"]


def test_cann_check_says_which_set_env_it_found(tmp_path, standin, monkeypatch):
    spec = _spec(tmp_path)
    req = probe_request(_host(), plan_view(spec), full=False)
    assert req["cann_files"][0] == "/usr/local/Ascend/ascend-toolkit/set_env.sh"
    f = tmp_path / "set_env.sh"
    f.write_text("")
    req["cann_files"] = [str(f), str(tmp_path / "atb_set_env.sh")]
    monkeypatch.delenv("ASCEND_TOOLKIT_HOME", raising=False)
    c = _by(evaluate(_host(), spec, _facts(req), full=False))["cann"]
    assert c.status == "ok" and str(f) in c.message and "atb_set_env" not in c.message
    monkeypatch.setenv("ASCEND_TOOLKIT_HOME", "/usr/local/Ascend/ascend-toolkit/latest")
    c = _by(evaluate(_host(), spec, _facts(req), full=False))["cann"]
    assert c.status == "ok" and "ASCEND_TOOLKIT_HOME=/usr/local/Ascend" in c.message
    monkeypatch.delenv("ASCEND_TOOLKIT_HOME")
    req["cann_files"] = [str(tmp_path / "none.sh")]
    assert _by(evaluate(_host(), spec, _facts(req), full=False))["cann"].status == "warn"
    assert "cann_files" not in probe_request(_host(accelerator="gpu"), plan_view(spec), full=False)


def test_disk_check_counts_the_bounded_checkpoints(tmp_path, standin):
    make_model(tmp_path / "m", max_pos=4096)
    make_parquet(tmp_path / "t.parquet", 10)
    spec = _spec(tmp_path, max_actor_ckpt_to_keep=3)
    req = probe_request(_host(), plan_view(spec), full=False)
    d = _by(evaluate(_host(), spec, _facts(req), full=False))["disk"]
    # verl's rotation restarts at every attempt (checkpoint_manager.py:59): 3 kept from before a retry + 3 of its own
    assert "6 save(s) on disk at once" in d.message


def test_a_name_that_never_resolves_costs_the_dns_bound_not_resolv_conf_retries(monkeypatch):
    """A DNS server that never answers: the reachability check gives up at its own bound (``DNS_TIMEOUT_S``) and
    says so, while the lookup is still hanging (urlopen's timeout does not cover getaddrinfo). The lookup blocks
    on an event the test sets only afterwards; the check runs in a thread waited on with a generous bound."""
    import socket
    import threading

    from dapo_ops.agent import preflight_probe as preflight_probe

    for k in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(k, raising=False)
    asked, answer = threading.Event(), threading.Event()

    def never_answers(*a, **k):
        asked.set()
        answer.wait()
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    monkeypatch.setattr(socket, "getaddrinfo", never_answers)
    monkeypatch.setattr(preflight_probe, "DNS_TIMEOUT_S", 0.5)
    box: dict = {}
    t = threading.Thread(target=lambda: box.update(res=preflight_probe._http("https://api.swanlab.cn", 5.0)))
    try:
        t.start()
        t.join(60)
        assert not t.is_alive(), "the check still waits on a DNS lookup that never answers"
        assert asked.is_set() and not answer.is_set()  # it gave up while the lookup was still hanging
    finally:
        answer.set()
    res = box["res"]
    assert not res["reachable"] and res["kind"] == "dns", res
    assert "cannot resolve api.swanlab.cn within 0.5 s" in res["error"], res


def test_a_missing_container_is_named_as_the_plan_has_it_not_as_the_inventory_does(tmp_path):
    spec = dict(_spec(tmp_path), container="nosuch")
    checks = evaluate(
        _host(),
        {"spec": spec, "argv": []},
        {"ssh": {"ok": True}, "inspect": {"rc": 1, "text": "Error: No such object: nosuch"}},
    )
    c = _by(checks)["container"]
    assert c.status == "fail" and "container 'nosuch' does not exist on h1" in c.message, c


def test_a_full_runs_dir_is_named_as_space_not_permissions():
    """The bundle could not be installed because the runs disk is full: the fix says space (issue 32 item 4)."""
    err = (
        "cannot install the dapo-ops bundle in container 'verl' on h1 under /verl/dapo_runs/.dapo_ops: tar: "
        "dapo_ops/core/ladder.py: Cannot write: No space left on device"
    )
    checks = evaluate(
        _host(),
        None,
        {
            "ssh": {"ok": True},
            "inspect": {"rc": 0, "text": "running 0 false false false"},
            "probe": None,
            "bundle_error": err,
        },
    )
    c = _by(checks)["bundle"]
    assert c.status == "fail" and c.fix.startswith("free space on the filesystem of runs_dir "), c
    assert "writable" not in c.fix and "df -h" in c.fix
    perm = evaluate(
        _host(),
        None,
        {
            "ssh": {"ok": True},
            "inspect": {"rc": 0, "text": "running 0 false false false"},
            "probe": None,
            "bundle_error": err.replace("No space left on device", "Permission denied"),
        },
    )
    assert "writable" in _by(perm)["bundle"].fix


def test_a_missing_workdir_is_named_not_blamed_on_python():
    err = (
        "the probe printed no result (OCI runtime exec failed: exec failed: unable to start container process: "
        'chdir to cwd ("/nosuch") set in config.json failed: no such file or directory: unknown)'
    )
    checks = evaluate(
        _host(workdir="/nosuch"),
        None,
        {
            "ssh": {"ok": True},
            "inspect": {"rc": 0, "text": "running 0 false false false"},
            "probe": None,
            "probe_error": err,
        },
    )
    c = _by(checks)["workdir"]
    assert c.status == "fail" and c.message == "workdir /nosuch does not exist in container 'verl'", c
    assert "python" not in _by(checks)


def test_tracker_url_only_in_cloud_mode_and_for_launch_without_the_rest_of_the_network_probes():
    spec = {
        "logger": ["console", "swanlab"],
        "env": {"SWANLAB_MODE": "cloud", "SWANLAB_API_HOST": "http://10.0.0.5:8000/api"},
    }
    pv = plan_view(spec)
    assert "http_urls" not in probe_request(_host(), pv, full=False)  # preflight --quick: unchanged
    req = probe_request(_host(), pv, full=False, tracker=True)
    assert req["http_urls"] == {"swanlab": "http://10.0.0.5:8000/api"} and "tcp" not in req and "compose" not in req
    cloud = plan_view({"logger": ["console", "swanlab"], "env": {}})
    assert probe_request(_host(), cloud, full=False, tracker=True)["http_urls"] == {"swanlab": "https://api.swanlab.cn"}
    for mode in ("local", "offline", "disabled"):
        off = plan_view({"logger": ["console", "swanlab"], "env": {"SWANLAB_MODE": mode}})
        assert "http_urls" not in probe_request(_host(), off, full=True, tracker=True), mode
    console = plan_view({"logger": ["console"], "env": {"SWANLAB_MODE": "cloud"}})
    assert "http_urls" not in probe_request(_host(), console, full=False, tracker=True)


def _tracker(kind, error, env=None):
    from dapo_ops.control.preflight.network import tracker_check

    return tracker_check(
        {
            "env": env or {},
            "http": {"swanlab": {"url": "https://api.swanlab.cn", "reachable": False, "kind": kind, "error": error}},
        }
    )


def test_tracker_check_names_what_failed_and_the_fix_for_it():
    from dapo_ops.control.preflight.network import tracker_check

    assert tracker_check({"http": {}}) is None
    ok = tracker_check(
        {"http": {"swanlab": {"url": "http://s:8000/api", "reachable": True, "status": 404, "seconds": 0.01}}}
    )
    assert ok.status == "ok" and "HTTP 404" in ok.message
    c = _tracker("dns", "cannot resolve api.swanlab.cn within 2 s")
    assert c.status == "fail" and c.message == (
        "SwanLab host https://api.swanlab.cn not reachable from the container: "
        "DNS: cannot resolve api.swanlab.cn within 2 s"
    )
    assert policy.SWANLAB_HOST_WORDS in c.fix and policy.SWANLAB_OFFLINE_WORDS in c.fix
    assert "container: timeout: timed out" in _tracker("timeout", "timed out").message
    assert "container: connect: " in _tracker("connect", "[Errno 111] Connection refused").message
    p = _tracker("proxy", "Tunnel connection failed: 407", {"https_proxy": "http://u:secretpw@10.0.0.1:3128"})
    assert "container: proxy http://u:***@10.0.0.1:3128: Tunnel" in p.message and "secretpw" not in p.message
    assert "hosts.toml [proxy]" in p.fix
    t = _tracker("tls", "[SSL: WRONG_VERSION_NUMBER] wrong version number")
    assert "container: TLS: " in t.message and "http:// for a plain-HTTP server" in t.fix


def test_the_probe_get_says_which_step_failed(monkeypatch):
    """dapo_ops/agent/preflight_probe.py ``_http`` in-process against this machine: connect, proxy, TLS, 407."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    import socket

    from dapo_ops.agent import preflight_probe as preflight_probe

    for k in (
        "http_proxy",
        "https_proxy",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "all_proxy",
        "ALL_PROXY",
        "no_proxy",
        "NO_PROXY",
    ):
        monkeypatch.delenv(k, raising=False)

    class H(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(407 if "proxy-auth" in self.path else 200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    port = srv.server_address[1]
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    closed = s.getsockname()[1]
    s.close()
    try:
        assert preflight_probe._http(f"http://127.0.0.1:{port}/api", 3)["reachable"]
        r = preflight_probe._http(f"http://127.0.0.1:{closed}/api", 3)
        assert not r["reachable"] and r["kind"] == "connect" and "refused" in r["error"].lower(), r
        r = preflight_probe._http(f"https://127.0.0.1:{port}/api", 3)  # TLS to a plain-HTTP server
        assert not r["reachable"] and r["kind"] == "tls", r
        monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{closed}")  # a proxy that is not there
        r = preflight_probe._http("http://swanlab.example.internal:8000/api", 3)
        assert not r["reachable"] and r["kind"] == "proxy", r
        monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{port}")  # a proxy that wants credentials
        r = preflight_probe._http("http://swanlab.example.internal:8000/proxy-auth", 3)
        assert not r["reachable"] and r["kind"] == "proxy" and r.get("status") == 407, r
    finally:
        srv.shutdown()
        srv.server_close()


@pytest.mark.parametrize(
    "framework,mode,accel,feats,want",
    [
        ("fsdp", "dapo", "gpu", "", ["flash_attn"]),  # verl/workers/config/model.py:185 flash_attention_2
        ("fsdp", "dapo", "gpu", "-flash_attn", []),  # sdpa: nothing more
        ("fsdp", "one-step-off", "gpu", "-flash_attn", ["cupy"]),  # nccl_checkpoint_engine.py:22 imports cupy
        ("megatron", "dapo", "npu", "", ["mindspeed"]),  # mindspeed/transformer_impl.py:18-21 skips silently
        # Megatron-Bridge imports transformer_engine.pytorch (megatron/bridge/peft/lora_layers.py:20), TE layers only
        ("megatron", "dapo", "gpu", "", ["transformer_engine"]),
        ("megatron", "dapo", "gpu", "-flash_attn", ["transformer_engine"]),
        ("megatron", "one-step-off", "gpu", "", ["transformer_engine", "cupy"]),
        ("megatron", "one-step-off", "npu", "", ["mindspeed"]),
        ("fsdp", "dapo", "npu", "", []),
    ],
)
def test_preflight_looks_for_what_the_mode_needs(tmp_path, standin, framework, mode, accel, feats, want):
    """Issue 34 finding 10: the modules the chosen mode x framework x accelerator imports are looked up in the
    container (missing -> fail with the fix), besides transfer_queue / megatron.bridge."""
    from dapo_ops.core.features import resolve

    spec = _spec(tmp_path)
    spec.update(framework=framework, mode=mode, accelerator=accel, features=resolve(feats).to_json())
    req = probe_request(_host(accelerator=accel), plan_view(spec), full=False)
    base = ["transfer_queue"] + (["megatron.bridge"] if framework == "megatron" else [])
    assert req["modules"] == base + want + (["mbridge"] if framework == "megatron" else [])
    checks = _by(evaluate(_host(accelerator=accel), spec, _facts(req), full=False))
    for mod in want:
        assert checks[mod].status == "fail" and checks[mod].fix and mod in QUICK_CHECKS


def test_a_python_that_cannot_run_is_the_python_check_and_a_bare_host_has_no_container_name():
    h = _host()
    msg = (
        "python 'nopython3' (hosts.toml `python`) cannot run in container 'verl': sh: 1: nopython3: not found; "
        "set python in hosts.toml to the interpreter's path or a name on the container's PATH (e.g. python3)"
    )
    (c,) = [
        c
        for c in evaluate(
            h,
            None,
            {"ssh": {"ok": True}, "inspect": {"rc": 0, "text": "running 0 false false false"}, "python_error": msg},
        )
        if c.status == "fail"
    ]
    assert (c.name, c.fix) == (
        "python",
        "set python in hosts.toml to the interpreter's path or a name on the container's PATH (e.g. python3)",
    )
    assert "make runs_dir writable" not in c.fix
    bare = _host(runtime="host", container="")
    checks = evaluate(
        bare,
        None,
        {
            "ssh": {"ok": True},
            "inspect": {"rc": 0, "text": "running host"},
            "probe_error": 'OCI runtime exec failed: chdir to cwd ("/verl") set in '
            "config.json failed: no such file or directory",
        },
    )
    wd = _by(checks)["workdir"]
    assert wd.message == "workdir /verl does not exist on the host", wd.message


def test_disk_check_with_save_freq_off_counts_no_checkpoint(tmp_path, standin):
    """verl saves only when ``save_freq > 0`` (verl/trainer/ppo/v1/trainer_base.py:481): a run with
    ``--save-freq -1`` writes no checkpoint, so a disk smaller than one checkpoint is no reason to refuse it (the
    H200 run of 2026-12-02 06:58 UTC, a 5.2 B model with 52 GiB free, was refused 'one checkpoint ~68.2 GiB')."""
    make_model(tmp_path / "m", max_pos=4096)
    make_parquet(tmp_path / "t.parquet", 10)
    spec = _spec(tmp_path, save_freq=-1)
    req = probe_request(_host(), plan_view(spec), full=False)
    facts = _facts(req)
    one = facts["probe"]["model"]["weights_bytes"] * CKPT_FACTOR
    facts["probe"]["disk"]["free"] = int(one / 2)
    d = _by(evaluate(_host(), spec, facts, full=False))["disk"]
    assert d.status == "ok" and "verl saves no checkpoint" in d.message, d
    d = _by(evaluate(_host(), _spec(tmp_path, save_freq=5), facts, full=False))["disk"]
    assert d.status == "fail" and "one checkpoint" in d.message, d


def test_device_mem_compares_the_share_attempt_1_runs_with(tmp_path, standin):
    """A finished plan that starts on a rung lowering the share (``setting_changes``, e.g. a learned
    ``rollout-util``): ``device-mem`` compares the free memory with THAT share, the one verl gets
    (core/overrides.py overrides_for reads effective_settings), not the draft's setting."""
    make_model(tmp_path / "m", max_pos=4096)
    make_parquet(tmp_path / "t.parquet", 10)
    standin.write_text('{"count": 8, "hbm_total_mb": 1000, "used_mb": [500, 500, 500, 500, 500, 500, 500, 500]}')
    spec = _spec(tmp_path)  # share 0.6 of 1000 MB: 500 MB free is too little
    req = probe_request(_host(), plan_view(spec), full=False)
    assert _by(evaluate(_host(), spec, _facts(req), full=False))["device-mem"].status == "fail"
    started = dict(spec, setting_changes={"gpu_memory_utilization": 0.4})
    assert _by(evaluate(_host(), started, _facts(req), full=False))["device-mem"].status == "ok"


def test_the_launchs_quick_probe_composes_the_users_overrides_only_and_within_its_timeout(monkeypatch):
    """``inv launch``'s quick checks compose the argv when the user gave ``--override``s (a mistyped key was a run that
    failed at once): the keys only (verl's start-up checks would judge the draft's values, which the plan's second
    stage changes), with a compose timeout inside the probe's; no ``--override``: no compose at all."""
    from dapo_ops.control import settings
    from dapo_ops.control.inventory.model import Host
    from dapo_ops.control.launch import plan as planning
    from dapo_ops.control.preflight import checks

    host = Host(name="h1", address="x", accelerator="gpu", devices=1, runs_dir="/r")
    seen = []

    class Asked(Exception):
        pass

    def collect(target, req, **kw):
        seen.append(req)
        raise Asked

    monkeypatch.setattr(checks, "collect", collect)
    for extra in ((), ("data.max_prompt_lenght=3",)):
        draft = planning.draft_plan(
            planning.PlanInputs(
                settings=settings.resolve({"framework": "fsdp", "rollout_tp": 1}, {}, {}), host=host, mode="dapo",
                run_id="20261207-000000-0c0c", swanlab_logger=False, extra_overrides=extra,
            )
        )  # fmt: skip
        with pytest.raises(Asked):
            checks.quick_all(SimpleNamespace(host=host), draft, timeout=90)
    assert "compose" not in seen[0]
    comp = seen[1]["compose"]
    assert comp["request"]["startup"] is False and comp["timeout"] < 90
    assert any("data.max_prompt_lenght=3" in str(o) for o in comp["request"]["overrides"])


def test_every_tracker_preflight_fix_offers_offline_in_the_shared_words():
    """Preflight's ``swanlab`` check kept its own "--swanlab-mode offline (swanlab sync later)" beside the one
    wording in core/policy.py (SWANLAB_OFFLINE_WORDS, which also says local mode is not the one that syncs), and
    named the server as "SWANLAB_HOST (--swanlab-host)" beside SWANLAB_HOST_WORDS. Each kind's fix now reads them."""
    for kind in ("dns", "connect", "timeout", "proxy", "tls", "other"):
        c = _tracker(kind, "failed")
        assert c.fix.endswith(policy.SWANLAB_OFFLINE_WORDS), (kind, c.fix)
    assert policy.SWANLAB_HOST_WORDS in _tracker("dns", "failed").fix


def test_no_source_spells_the_offline_mode_advice_outside_policy():
    """The kind, not the one string: no module under dapo_ops/ but core/policy.py writes its own "--swanlab-mode
    offline ..." / "sync later" advice for SwanLab; they read policy.SWANLAB_OFFLINE_WORDS."""
    import pathlib

    import dapo_ops

    root = pathlib.Path(dapo_ops.__file__).parent
    own = []
    for f in sorted(root.rglob("*.py")):
        if f == root / "core" / "policy.py":
            continue
        for n, line in enumerate(f.read_text().splitlines(), 1):
            code = line.split("#", 1)[0] if not line.lstrip().startswith(('"', "'")) else line
            if "--swanlab-mode offline" in code or ("swanlab" in code.lower() and "sync later" in code):
                own.append(f"{f.relative_to(root)}:{n}: {line.strip()}")
    assert not own, own
