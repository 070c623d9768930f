"""Secrets on the sandbox: a recognisable fake key, webhook token and proxy password never show up where they must
not (host ``ps`` during the run, train.log, run.json, spec.json, the dry-run plan, the tool's output), and a
SwanLab offline-mode run of the stand-in lands its metrics in the run's swanlog dir with the link in run.json.

Exercises ``dapo_ops/cli/launch.py`` (issue 6) wired as in docs/design.md "SwanLab and secrets".
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from dapo_ops.control import userconfig

sys.path.insert(0, str(Path(__file__).resolve().parent))
from inputs_helpers import make_model, make_parquet  # noqa: E402  (tiny model + parquet, as test_launch_bench)
from test_launch_bench import RETRY_DELAY_S  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
DAPO_OPS = str(Path(sys.executable).parent / "dapo-ops")
KEY = "sk-dapo-SECRET-123456789"
HOOK_TOKEN = "HOOKTOKEN-SECRET-987654321"
PROXY_PW = "PROXYPW-SECRET-5551234"
SECRETS = (KEY, HOOK_TOKEN)

pytestmark = pytest.mark.bench


def _operator_env(tmp_path: Path, mode: str = "offline", proxy_pw: bool = False) -> dict:
    """The operator's environment: fake key + offline mode (local mode needs swanboard, which the sandbox image
    does not carry: preflight refuses it), a webhook token in the user config (+ a proxy password)."""
    cfg = tmp_path / "dapo-ops-config.toml"
    userconfig.save_section(
        "notify",
        {
            "on_success": True,
            "timeout_s": 2,
            "webhooks": [{"kind": "generic", "url": f"http://127.0.0.1:9/hook/{HOOK_TOKEN}"}],
        },
        cfg,
    )
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SWANLAB_", "DAPO_OPS_")) and k.lower() not in ("http_proxy", "https_proxy")
    }
    env.update({"SWANLAB_API_KEY": KEY, "SWANLAB_MODE": mode, "DAPO_OPS_CONFIG": str(cfg), "HOME": str(tmp_path)})
    if proxy_pw:
        env["http_proxy"] = f"http://bob:{PROXY_PW}@192.0.2.1:3128"
    return env


IN = "/verl/dapo_runs/inputs"
INPUT_FLAGS = ["--model", f"{IN}/model", "--train-file", f"{IN}/train.parquet", "--val-file", f"{IN}/val.parquet"]


def _dapo_ops(sandbox, env, *args, timeout=300, inventory: Path | None = None) -> subprocess.CompletedProcess:
    """``dapo-ops -H h1 <task> <inputs> <args> --inventory <inventory, default the bench's>``."""
    task, rest = args[0], list(args[1:])
    return subprocess.run(
        [DAPO_OPS, "-H", "h1", task, *INPUT_FLAGS, *rest, "--inventory", str(inventory or sandbox.inventory)],
        capture_output=True,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=timeout,
    )


def _assert_clean(where: str, text: str, secrets=SECRETS):
    for s in secrets:
        assert s not in text, f"secret {s[:12]}... found in {where}"


def _host_ps(sandbox) -> str:
    return sandbox.ssh("h1", "ps -eww -o pid,args", timeout=30).stdout


def _wait_run(sandbox, timeout=240) -> Path:
    runs = sandbox.runs_dir("h1")
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        done = [
            p
            for p in runs.glob("*/run.json")
            if json.loads(p.read_text() or "{}").get("status") in ("succeeded", "failed", "stopped")
        ]
        if done:
            return done[0].parent
        time.sleep(1)
    raise AssertionError(f"no finished run under {runs}: {sorted(str(p) for p in runs.rglob('*'))[:20]}")


@pytest.fixture
def h1(sandbox):
    sandbox.reset("h1")
    inputs = sandbox.runs_dir("h1") / "inputs"
    make_model(inputs / "model", max_pos=32768)
    make_parquet(inputs / "train.parquet")
    make_parquet(inputs / "val.parquet")
    yield sandbox
    sandbox.reset("h1")


@contextlib.contextmanager
def _ps_samples(sandbox):
    """Sample the host's full ``ps`` output every 0.5 s while the block runs; yields the list of samples."""
    samples: list[str] = []
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            try:
                samples.append(_host_ps(sandbox))
            except Exception as exc:  # noqa: BLE001 - a failed sample is reported, not fatal
                samples.append(f"ps failed: {exc}")
            stop.wait(0.5)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    try:
        yield samples
    finally:
        stop.set()
        t.join(timeout=30)


def test_dry_run_plan_has_no_secret(h1, tmp_path):
    out = _dapo_ops(h1, _operator_env(tmp_path), "launch", "--steps", "4", "--dry-run")
    assert out.returncode == 0, out.stderr[-2000:]
    _assert_clean("the dry-run plan (stdout)", out.stdout)
    _assert_clean("the dry-run stderr", out.stderr)
    assert "swanlab" in out.stdout.lower()
    assert not list(h1.runs_dir("h1").glob("*/spec.json")), "a dry run must not start anything"


def test_launch_keeps_secrets_out_of_ps_logs_records_and_output(h1, tmp_path):
    env = _operator_env(tmp_path)
    h1.set_scenario("h1", {"step_time": 1.0})
    with _ps_samples(h1) as samples:
        out = _dapo_ops(h1, env, "launch", "--steps", "6")
        assert out.returncode == 0, out.stderr[-2000:]
        run_dir = _wait_run(h1)
    assert any("dapo_ops.agent.supervisor" in s for s in samples), "ps never saw the run (sampling too late?)"
    _assert_clean("host ps output during the run", "\n".join(samples))
    _assert_clean("the tool's stdout", out.stdout)
    _assert_clean("the tool's stderr", out.stderr)
    for name in ("train.log", "run.json", "spec.json", "supervisor.log"):
        p = run_dir / name
        if p.exists():
            _assert_clean(name, p.read_text(errors="replace"))
    assert not (run_dir / "secret.env").exists(), "secret.env must be deleted by the supervisor"
    spec = json.loads((run_dir / "spec.json").read_text())
    assert spec["env"]["SWANLAB_MODE"] == "offline"
    assert "SWANLAB_API_KEY" not in spec["env"]
    assert spec["notify"]["webhooks"] == [{"kind": "generic", "url_env": "DAPO_NOTIFY_URL_0"}]
    # the failed webhook post was logged without its URL: the post runs in a thread after run.json turned terminal
    # (agent/supervisor/machine.py _notify; joined before the supervisor exits), so its line may come a moment later
    deadline = time.time() + 30
    sup = ""
    while time.time() < deadline and "DAPO_NOTIFY_URL_0" not in sup:
        sup = (run_dir / "supervisor.log").read_text(errors="replace")
        time.sleep(0.2)
    assert "DAPO_NOTIFY_URL_0" in sup
    _assert_clean("supervisor.log", sup)


def test_offline_mode_metrics_land_in_swanlog_and_link_is_captured(h1, tmp_path):
    out = _dapo_ops(h1, _operator_env(tmp_path), "launch", "--steps", "4")
    assert out.returncode == 0, out.stderr[-2000:]
    run_dir = _wait_run(h1)
    rec = json.loads((run_dir / "run.json").read_text())
    assert rec["status"] == "succeeded", rec.get("verdict")
    spec = json.loads((run_dir / "spec.json").read_text())
    assert spec["logger"] == ["console", "swanlab"]
    log_dir_in_container = spec["env"]["SWANLAB_LOG_DIR"]
    host_log_dir = h1.runs_dir("h1") / Path(log_dir_in_container).relative_to("/verl/dapo_runs")
    runs = sorted(host_log_dir.glob("run-*"))
    assert runs, f"no SwanLab run dir under {host_log_dir}"
    records = list(runs[0].glob("*.swanlab"))
    assert records, "no SwanLab run record in the run dir"
    # swanlab 0.10.3 offline mode: one record file; a metric's key as its column, then with every logged step
    assert records[0].read_bytes().count(b"critic/score/mean") >= 1 + 4
    assert rec["swanlab_url"] == f"swanlab sync {log_dir_in_container}/{runs[0].name}", rec["swanlab_url"]


def test_proxy_password_not_in_dry_run_plan(h1, tmp_path):
    plan = _dapo_ops(h1, _operator_env(tmp_path, proxy_pw=True), "launch", "--steps", "2", "--dry-run")
    assert plan.returncode == 0, plan.stderr[-2000:]
    _assert_clean("the dry-run plan", plan.stdout + plan.stderr, (PROXY_PW,))


def test_proxy_password_stays_secret_and_no_proxy_covers_the_cluster(h1, tmp_path):
    env = _operator_env(tmp_path, proxy_pw=True)
    out = _dapo_ops(h1, env, "launch", "--steps", "2")
    assert out.returncode == 0, out.stderr[-2000:]
    _assert_clean("the tool's output", out.stdout + out.stderr, (PROXY_PW,))
    run_dir = _wait_run(h1)
    for name in ("spec.json", "run.json", "train.log", "supervisor.log"):
        _assert_clean(name, (run_dir / name).read_text(errors="replace"), (PROXY_PW,))
    spec_env = json.loads((run_dir / "spec.json").read_text())["env"]
    assert "http_proxy" not in spec_env, "a proxy URL with a password belongs in secret.env, not spec.json"
    no_proxy = spec_env["no_proxy"].split(",")
    for addr in ("localhost", "127.0.0.1", "::1", h1.addresses["h1"]):
        assert addr in no_proxy


def test_cloud_mode_key_reaches_verl_only_through_its_environment(h1, tmp_path):
    """Cloud mode against a closed port: verl's swanlab.login(key) runs (it only does when SWANLAB_API_KEY is in its
    environment, verl tracking.py) and fails; the key is nowhere on disk, in ps, or in the output. swanlab 0.10
    retries the login itself (~15 s: 5 retries, backoff 0.5 s, fixed in its client session, no setting); the
    supervisor's one network retry waits the retry delay of test_launch_bench.py's tests (``RETRY_DELAY_S``), not the
    NPU's 10 s: nothing here depends on it."""
    env = _operator_env(tmp_path, mode="cloud")
    env["SWANLAB_HOST"] = "http://127.0.0.1:9"
    tuned = h1.tuned_inventory(tmp_path / "hosts-tuned.toml", {"h1": {"retry_delay_s": RETRY_DELAY_S}})
    with _ps_samples(h1) as samples:
        # --skip-preflight: launch's quick checks refuse an unreachable tracker (tests/test_launch_tracker_bench.py);
        # this test is about the key's way into verl once a run starts anyway
        out = _dapo_ops(h1, env, "launch", "--steps", "2", "--link-wait", "1", "--skip-preflight", inventory=tuned)
        run_dir = _wait_run(h1, timeout=300)
    _assert_clean("host ps output during the run", "\n".join(samples))
    _assert_clean("the tool's output", out.stdout + out.stderr)
    for name in ("train.log", "run.json", "spec.json", "supervisor.log"):
        p = run_dir / name
        if p.exists():
            _assert_clean(name, p.read_text(errors="replace"))
    spec = json.loads((run_dir / "spec.json").read_text())
    assert spec["env"]["SWANLAB_API_HOST"] == "http://127.0.0.1:9/api"
    assert spec["env"]["SWANLAB_MODE"] == "cloud" and "SWANLAB_API_KEY" not in spec["env"]
    log = (run_dir / "train.log").read_text(errors="replace")
    assert "/api/login/api_key" in log, "verl never tried to log in: the key did not reach its environment"
    rec = json.loads((run_dir / "run.json").read_text())
    assert rec["status"] == "failed"


def test_an_interpolation_canary_launch_leaves_no_hit_anywhere(h1, tmp_path):
    """issue 32 item 1: ``--experiment 'exp-${oc.env:SWANLAB_API_KEY}'`` (cloud mode: the key is in verl's
    environment) wrote the key into train.log's printed config. Every way a user string reaches a verl override is
    tried (flag, env var, --model, --project, --override); afterwards no run file and no printout holds the key, and
    each launch was refused in one line before anything started."""
    env = _operator_env(tmp_path, mode="cloud")
    env["SWANLAB_HOST"] = "http://127.0.0.1:9"
    ref = "${oc.env:SWANLAB_API_KEY}"
    vectors = [
        (["--experiment", f"exp-{ref}"], {}),
        ([], {"EXPERIMENT_NAME": f"e-{ref}"}),
        (["--project", f"p{ref}"], {}),
        (["--model", f"/verl/m{ref}"], {}),
        (["--override", f"+trainer.note={ref}"], {}),
        (["--override", f"+trainer.note='\\{ref}'"], {}),
    ]
    printouts, codes = [], []
    for args, extra in vectors:
        out = _dapo_ops(h1, {**env, **extra}, "launch", "--steps", "2", "--link-wait", "1", "--skip-preflight", *args)
        printouts.append(out.stdout + out.stderr)
        codes.append((out.returncode, len(out.stderr.strip().splitlines())))
        if out.returncode == 0:  # it started: let it end, then its files are searched too
            _wait_run(h1, timeout=300)
        for i, text in enumerate(printouts):
            _assert_clean(f"the printout of launch {vectors[i]}", text, (KEY,))
    files = [p for p in h1.runs_dir("h1").rglob("*") if p.is_file()]
    for p in files:
        _assert_clean(str(p), p.read_text(errors="replace"), (KEY,))
    assert codes == [(2, 1)] * len(vectors), list(zip(vectors, codes, printouts))
    assert not list(h1.runs_dir("h1").glob("*/spec.json")), "a refused launch must not leave a run"
