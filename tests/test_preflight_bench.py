"""Preflight on the sandbox hosts: each check in both outcomes (real sshd, dockerd, containers, stand-in
npu-smi). A loopback-style HTTP server on the bench bridge address stands for a self-hosted SwanLab: the
test process lives in the root network namespace, the containers in their hosts' namespaces, and the bridge
address (198.51.<100+id>.1) is the one address both sides share."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from dapo_ops.control.inventory import hosts_file as inventory
from dapo_ops.control.launch import plan as planning
from dapo_ops.control.preflight.checks import quick, run_all
from dapo_ops.control.remote.target import Target
from inputs_helpers import make_model, make_parquet
from config_helpers import no_config

pytestmark = pytest.mark.bench
REPO = Path(__file__).resolve().parent.parent
IN = "/verl/dapo_runs/pf-inputs"  # container path (bind-mounted from the host's runs dir)


def _bridge(sandbox) -> str:
    return f"198.51.{100 + int(sandbox.id)}.1"


def _host(sandbox, name, inv_path=None):
    return inventory.load(inv_path or sandbox.inventory).hosts[name]


def _inputs(sandbox, host, *, max_pos=16384, drop_gt=False):
    base = sandbox.runs_dir(host) / "pf-inputs"
    if base.exists():
        shutil.rmtree(base)
    make_model(base / "model", max_pos=max_pos)
    make_parquet(base / "train.parquet", 256, drop_ground_truth=drop_gt)
    make_parquet(base / "val.parquet", 4)
    return base


def _plan(sandbox, host, *, swanlab=False, extra=(), **settings):
    s = {
        "model": f"{IN}/model",
        "train_file": f"{IN}/train.parquet",
        "val_file": f"{IN}/val.parquet",
        "framework": "fsdp",
        "steps": 4,
        "save_freq": 2,
        "max_prompt_length": 512,
        "max_response_length": 1024,
    }
    s.update(settings)
    return planning.make_plan(
        planning.draft_plan(
            planning.PlanInputs(
                settings=s,
                host=_host(sandbox, host),
                mode="dapo",
                run_id="20261129-000000-pf00",
                swanlab_logger=swanlab,
                extra_overrides=list(extra),
            )
        )
    )


def _by_name(checks):
    out = {}
    for c in checks:
        out.setdefault(c.name, c)
    return out


def _run_all(sandbox, host, plan, **kw):
    return _by_name(run_all(Target(_host(sandbox, host, kw.pop("inv_path", None))), plan, **kw))


@pytest.fixture
def h1(sandbox):
    sandbox.reset("h1")
    yield "h1"
    sandbox.reset("h1")


def test_healthy_host_all_ok(sandbox, h1):
    _inputs(sandbox, h1)
    checks = _run_all(sandbox, h1, _plan(sandbox, h1))
    for name in (
        "ssh",
        "docker",
        "container",
        "devices",
        "leftover",
        "device-mem",
        "python",
        "verl",
        "entry",
        "overrides",
        "model",
        "data:train.parquet",
        "data:val.parquet",
        "disk",
        "proxy",
    ):
        assert checks[name].status == "ok", checks[name]
    assert "256 rows" in checks["data:train.parquet"].message
    assert "verl 0.9.1" in checks["verl"].message
    assert quick(Target(_host(sandbox, h1)), _plan(sandbox, h1)) == []
    # verl's start-up checks ran on the composed config, the stand-in's validate_config included (issue 43 F7: never
    # "ok" beside "skipped")
    st = checks["verl-startup"]
    assert st.status == "ok" and "skipped" not in st.message, st


def test_npu_one_step_off_with_an_unregistered_checkpoint_engine_is_refused(sandbox, h1):
    """verl-startup reads verl 0.9.1's own checkpoint-engine registrations (the image carries the real sources):
    hccl is no registered name (verl registers its Ascend engine as nccl) -> one FAIL line; nccl passes."""
    _inputs(sandbox, h1)
    key = "actor_rollout_ref.rollout.checkpoint_engine.backend"
    for backend, want in (("hccl", "fail"), ("nccl", "ok")):
        s = {
            "model": f"{IN}/model",
            "train_file": f"{IN}/train.parquet",
            "val_file": f"{IN}/val.parquet",
            "framework": "megatron",
            "steps": 4,
            "save_freq": 2,
            "max_prompt_length": 512,
            "max_response_length": 1024,
            "trainer_gpus": 4,
            "rollout_gpus": 4,
        }
        plan = planning.make_plan(
            planning.draft_plan(
                planning.PlanInputs(
                    settings=s,
                    host=_host(sandbox, h1),
                    mode="one-step-off",
                    run_id="20261129-000000-pf01",
                    swanlab_logger=False,
                    extra_overrides=[f"{key}={backend}"],
                )
            )
        )
        st = _run_all(sandbox, h1, plan)["verl-startup"]
        assert st.status == want, st
        if want == "fail":
            assert st.message.startswith(f"{key}=hccl is not a registered checkpoint engine") and "\n" not in st.message


def test_missing_column_and_short_context(sandbox, h1):
    _inputs(sandbox, h1, max_pos=1024, drop_gt=True)
    checks = _run_all(sandbox, h1, _plan(sandbox, h1))
    d = checks["data:train.parquet"]
    assert d.status == "fail" and "has no column 'reward_model.ground_truth'" in d.message
    assert "reward_model" in d.fix
    m = checks["model"]
    assert m.status == "fail" and "exceeds the model's max_position_embeddings 1024" in m.message
    assert {c.name for c in quick(Target(_host(sandbox, h1)), _plan(sandbox, h1))} >= {"model", "data:train.parquet"}


def test_unknown_override_fails_in_verls_words(sandbox, h1):
    _inputs(sandbox, h1)
    checks = _run_all(sandbox, h1, _plan(sandbox, h1, extra=["actor_rollout_ref.actor.not_a_key=1"]))
    o = checks["overrides"]
    assert o.status == "fail"
    assert "Could not override 'actor_rollout_ref.actor.not_a_key'" in o.message
    assert "Key 'not_a_key' is not in struct" in o.message


def test_stopped_and_missing_container(sandbox, h1):
    _inputs(sandbox, h1)
    sandbox.ssh(h1, "docker kill verl", check=True)
    checks = _run_all(sandbox, h1, _plan(sandbox, h1))
    c = checks["container"]
    assert c.status == "fail" and "'verl' is exited (exit code 137" in c.message and "docker start verl" in c.fix
    assert "devices" not in checks  # nothing half-checked in a stopped container
    sandbox.ssh(h1, "docker rm -f verl", check=True)
    c = _run_all(sandbox, h1, _plan(sandbox, h1))["container"]
    assert c.status == "fail" and "does not exist" in c.message and "inv container.create" in c.fix


def test_too_few_devices_and_leftover_process(sandbox, h1):
    _inputs(sandbox, h1)
    sandbox.set_devices(h1, {"accelerator": "npu", "count": 4, "hbm_total_mb": 65536})
    checks = _run_all(sandbox, h1, _plan(sandbox, h1))
    assert (
        checks["devices"].status == "fail"
        and "4 NPU(s) usable inside the container, the plan needs 8" in checks["devices"].message
    )
    sandbox.set_devices(
        h1,
        {
            "accelerator": "npu",
            "count": 8,
            "hbm_total_mb": 65536,
            "processes": [{"device": 3, "pid": 424242, "name": "python3", "mem_mb": 50000}],
        },
    )
    checks = _run_all(sandbox, h1, _plan(sandbox, h1))
    assert checks["devices"].status == "ok"
    assert checks["leftover"].status == "fail" and "424242" in checks["leftover"].message
    assert checks["device-mem"].status == "fail" and "NPU 3" in checks["device-mem"].message


def test_visible_devices_env_beyond_mounted(sandbox, h1):
    _inputs(sandbox, h1)
    sandbox.set_devices(h1, {"accelerator": "npu", "count": 4, "hbm_total_mb": 65536})
    plan = _plan(sandbox, h1)
    checks = _run_all(sandbox, h1, plan, extra_env={"ASCEND_RT_VISIBLE_DEVICES": "2,5"})
    assert checks["visible"].status == "fail" and "[5]" in checks["visible"].message
    checks = _run_all(sandbox, h1, plan, extra_env={"ASCEND_RT_VISIBLE_DEVICES": "0,1"})
    assert checks["visible"].status == "ok"


def test_stale_host_key(sandbox, tmp_path, h1):
    kh = tmp_path / "known_hosts"
    other = subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "k")], check=True)
    del other
    addr = sandbox.addresses[h1]
    kh.write_text(
        f"{addr} {(tmp_path / 'k.pub').read_text().split()[0]} {(tmp_path / 'k.pub').read_text().split()[1]}\n"
    )
    text = sandbox.inventory.read_text()
    text = text.replace(f'known_hosts = "{sandbox.known_hosts}"', f'known_hosts = "{kh}"')
    text = "\n".join(ln for ln in text.splitlines() if not ln.startswith("ssh_config"))
    inv = tmp_path / "hosts.toml"
    inv.write_text(text)
    checks = _run_all(sandbox, h1, None, inv_path=inv)
    assert (
        checks["ssh"].status == "fail" and "CHANGED" in checks["ssh"].message and "ssh-keygen -R" in checks["ssh"].fix
    )
    assert list(checks) == ["ssh"]
    ok = _run_all(sandbox, h1, None)
    assert ok["ssh"].status == "ok"


class _Swan(BaseHTTPRequestHandler):
    def do_GET(self):
        body = b'{"ok": true}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


def test_swanlab_host_reachable_from_the_container(sandbox, h1):
    _inputs(sandbox, h1)
    srv = ThreadingHTTPServer((_bridge(sandbox), 0), _Swan)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        url = f"http://{_bridge(sandbox)}:{srv.server_address[1]}"
        plan = _plan(sandbox, h1, swanlab=True)
        checks = _run_all(sandbox, h1, plan, extra_env={"SWANLAB_MODE": "cloud", "SWANLAB_API_HOST": url + "/api"})
        assert checks["swanlab"].status == "ok" and "HTTP 200" in checks["swanlab"].message
        # a port nobody listens on (the server is closed): unreachable from the container
        srv.shutdown()
        srv.server_close()
        checks = _run_all(sandbox, h1, plan, extra_env={"SWANLAB_MODE": "cloud", "SWANLAB_API_HOST": url + "/api"})
        assert checks["swanlab"].status == "fail" and "not reachable from the container" in checks["swanlab"].message
        assert "Connection refused" in checks["swanlab"].message
        local = _run_all(sandbox, h1, plan, extra_env={"SWANLAB_MODE": "local"})
        assert "swanlab" not in local
    finally:
        srv.server_close()


def _inv_cli(cli, *args, env=None):
    """``inv <args>`` without the operator's SWANLAB* variables (tests/conftest.py's runner)."""
    return cli("inv", *args, env=env, drop_env=("SWANLAB",), timeout=300)


def test_cli_no_key_without_tty_json_and_exit_code(sandbox, tmp_path, h1, cli):
    _inputs(sandbox, h1)
    common = [
        "preflight",
        "--inventory",
        str(sandbox.inventory),
        "-H",
        h1,
        "--model",
        f"{IN}/model",
        "--train-file",
        f"{IN}/train.parquet",
        "--val-file",
        f"{IN}/val.parquet",
        "--framework",
        "fsdp",
        "--max-response-length",
        "1024",
        "--json",
        "--no-compose",
    ]
    home = {"HOME": str(tmp_path), "DAPO_OPS_CONFIG": no_config(tmp_path, "cfg.toml")}
    r = _inv_cli(cli, *common, env={**home, "SWANLAB_MODE": "cloud", "SWANLAB_HOST": f"http://{_bridge(sandbox)}:9"})
    assert r.returncode == 1, r.stderr
    data = json.loads(r.stdout)
    checks = {c["name"]: c for c in data["hosts"][h1]["checks"]}
    assert checks["swanlab-key"]["status"] == "fail"
    assert "stdin is not a terminal" in checks["swanlab-key"]["message"]
    assert "SWANLAB_API_KEY" in checks["swanlab-key"]["fix"]
    assert checks["swanlab"]["status"] == "fail"  # port 9 on the bridge: refused
    assert r.stderr.strip().count("\n") == 0 and r.stderr.startswith(f"{h1}: ")
    r = _inv_cli(cli, *common, env={**home, "SWANLAB_MODE": "offline"})
    assert r.returncode == 0, r.stdout + r.stderr
    data = json.loads(r.stdout)
    assert data["status"] in ("ok", "warn")
    key = {c["name"]: c for c in data["hosts"][h1]["checks"]}["swanlab-key"]
    assert key["status"] == "ok" and "no key needed" in key["message"]
    assert "sk-" not in r.stdout


def test_ray_port_between_hosts(sandbox, h1):
    sandbox.reset("h2")
    head = sandbox.addresses["h1"]
    w = _run_all(sandbox, "h2", None, ray={"head": head, "port": 6379, "is_head": False})
    assert w["ray-port"].status == "ok" and "nothing listens yet" in w["ray-port"].message
    hd = _run_all(sandbox, h1, None, ray={"head": head, "port": 6379, "is_head": True})
    assert hd["ray-port"].status == "ok"
    # something holds the port on the head (a leftover Ray head): the head fails, the worker reaches it
    sandbox.exec(
        h1,
        "nohup python3 -c 'import socket,time; s=socket.socket(); "
        's.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("0.0.0.0", 6379)); '
        "s.listen(); time.sleep(120)' >/dev/null 2>&1 &",
        check=True,
    )
    import time

    for _ in range(50):
        if (
            sandbox.exec(
                h1, "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", 6379), 1)'"
            ).returncode
            == 0
        ):
            break
        time.sleep(0.1)
    hd = _run_all(sandbox, h1, None, ray={"head": head, "port": 6379, "is_head": True})
    assert hd["ray-port"].status == "fail" and "in use" in hd["ray-port"].message
    w = _run_all(sandbox, "h2", None, ray={"head": head, "port": 6379, "is_head": False})
    assert w["ray-port"].status == "ok" and "a Ray head listens" in w["ray-port"].message
    # a head address nobody answers for
    sandbox.link("h3", False)
    try:
        gone = _run_all(sandbox, "h2", None, ray={"head": sandbox.addresses["h3"], "port": 6379, "is_head": False})
        assert gone["ray-port"].status == "fail" and "not reachable" in gone["ray-port"].message
    finally:
        sandbox.link("h3", True)


def test_sshd_down_is_one_failing_check(sandbox, h1):
    sandbox.kill_sshd(h1)
    try:
        checks = _run_all(sandbox, h1, None)
        assert list(checks) == ["ssh"]
        assert checks["ssh"].status == "fail" and "refused" in checks["ssh"].message
        assert checks["ssh"].fix == "start sshd or fix port"
    finally:
        sandbox.start_sshd(h1)
    assert _run_all(sandbox, h1, None)["ssh"].status == "ok"


def test_cli_tables_for_three_hosts_one_failing(sandbox, tmp_path, cli):
    for h in sandbox.hosts:
        sandbox.reset(h)
        _inputs(sandbox, h)
    sandbox.set_devices("h2", {"accelerator": "npu", "count": 4, "hbm_total_mb": 65536})
    try:
        r = _inv_cli(
            cli,
            "preflight",
            "--inventory",
            str(sandbox.inventory),
            "--quick",
            "--model",
            f"{IN}/model",
            "--train-file",
            f"{IN}/train.parquet",
            "--val-file",
            f"{IN}/val.parquet",
            "--framework",
            "fsdp",
            "--max-response-length",
            "1024",
            env={"HOME": str(tmp_path), "DAPO_OPS_CONFIG": no_config(tmp_path, "cfg.toml"), "SWANLAB_MODE": "disabled"},
        )
        assert r.returncode == 1
        # h1/h3 only warn: the sandbox image sources no CANN set_env.sh (cann) and its tiny model's config.json
        # lacks the shape keys the memory-fit estimate needs (memory-fit); neither stops a launch
        assert "h1: warn" in r.stdout and "h2: fail" in r.stdout and "h3: warn" in r.stdout
        assert (
            "preflight: 3 hosts: h1 warn (cann, memory-fit), h2 FAIL (devices), h3 warn (cann, memory-fit)" in r.stdout
        )
        assert r.stderr.strip().startswith("h2: devices fail: 4 NPU(s) usable inside the container, the plan needs 8")
        assert "\n" not in r.stderr.strip()
    finally:
        sandbox.reset("h2")


def test_cli_reports_and_uses_the_credentialed_proxy_launch_uses(sandbox, tmp_path, h1, cli):
    """``http_proxy`` with credentials in the operator's env: launch sends it through the 0600 secret.env; preflight
    must probe with the same proxy (the same secret path) and show it redacted, as it shows a plain one."""
    import socket

    _inputs(sandbox, h1)
    s = socket.socket()
    s.bind((_bridge(sandbox), 0))
    port = s.getsockname()[1]
    s.close()  # nobody listens there: the tracker GET must fail AT the proxy
    pw = "pr0xy-pf-s3cret"
    env = {
        "HOME": str(tmp_path),
        "DAPO_OPS_CONFIG": no_config(tmp_path, "cfg.toml"),
        "SWANLAB_MODE": "cloud",
        "SWANLAB_API_KEY": "sk-pf-test-0123456789",
        "SWANLAB_HOST": "http://swanlab.example.internal:8000",
        "http_proxy": f"http://alice:{pw}@{_bridge(sandbox)}:{port}",
    }
    r = _inv_cli(
        cli,
        "preflight",
        "--inventory",
        str(sandbox.inventory),
        "-H",
        h1,
        "--model",
        f"{IN}/model",
        "--train-file",
        f"{IN}/train.parquet",
        "--val-file",
        f"{IN}/val.parquet",
        "--framework",
        "fsdp",
        "--max-response-length",
        "1024",
        "--json",
        "--no-compose",
        env=env,
    )
    assert pw not in r.stdout + r.stderr and "sk-pf-test" not in r.stdout + r.stderr
    checks = {c["name"]: c for c in json.loads(r.stdout)["hosts"][h1]["checks"]}
    assert checks["proxy"]["status"] == "ok", checks["proxy"]
    assert f"http_proxy=http://alice:***@{_bridge(sandbox)}:{port}" in checks["proxy"]["message"], checks["proxy"]
    assert checks["swanlab"]["status"] == "fail", checks["swanlab"]
    assert f"proxy http://alice:***@{_bridge(sandbox)}:{port}" in checks["swanlab"]["message"], checks["swanlab"]
