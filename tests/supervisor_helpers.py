"""Test helpers for the supervisor: a run dir with ``spec.json`` for a stand-in verl, the real supervisor process
on it (``python3 -m dapo_ops.agent.supervisor <run_dir> --command-factory <module>:factory``), and a fake
``nvidia-smi`` on PATH. Used by test_supervisor.py (fake_verl), test_real_verl.py (replay_verl),
test_gpu_release.py and the tests built on the supervisor's harness."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from dapo_ops.core import features
from dapo_ops.core import logformat
from dapo_ops.agent import runfiles
from dapo_ops.core import runstate

REPO = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent


def logged_verl_argv(run_dir: Path, k: int = 1) -> list[str]:
    """Attempt ``k``'s verl overrides (the words after ``-m verl.trainer.main_ppo``) as the supervisor logged them in
    ``run_dir/supervisor.log`` (``attempt k: python3 -m verl.trainer.main_ppo ...``, agent/supervisor/machine.py)."""
    import re

    log = (run_dir / "supervisor.log").read_text()
    return re.search(r"attempt %d: python3 -m verl\.trainer\.main_ppo (.*)" % k, log).group(1).split()


#: tunables (seconds) that keep a supervised run short (dapo_ops/agent/supervisor/config.py)
FAST = {"poll_interval_s": 0.1, "oom_grace_s": 0.3, "kill_grace_s": 3, "retry_delay_s": 0.2, "write_interval_s": 0.2}


def new_run(
    tmp_path: Path,
    *,
    steps: int,
    workdir: Path,
    settings: dict | None = None,
    user_features=None,
    secret: dict | None = None,
    files: dict | None = None,
    run_id: str | None = None,
    **spec,
) -> Path:
    """``<tmp_path>/runs/<run_id>/spec.json`` of a GPU fsdp DAPO run of ``steps`` steps in ``workdir``.

    ``settings`` update the spec's settings, ``spec`` its top-level keys; ``files`` are JSON files written
    into the run dir for the stand-in verl (``fake.json``, ``replay.json``); ``secret`` becomes ``secret.env``
    (0600), as the launch writes it."""
    rid = run_id or runstate.new_run_id()
    run_dir = tmp_path / "runs" / rid
    run_dir.mkdir(parents=True)
    fs = features.resolve(user_features)
    body = {
        "version": 1,
        "run_id": rid,
        "host": "local",
        "container": "verl",  # the usual name: hints carry no -c (core/ladder.py resume_settings)
        "mode": "dapo",
        "framework": "fsdp",
        "profile": "0.9",
        "accelerator": "gpu",
        "workdir": str(workdir),
        "python": sys.executable,
        "run_dir": str(run_dir),
        "settings": {"steps": steps, "ckpt_dir": str(run_dir / "checkpoints"), "experiment": rid, **(settings or {})},
        "features": fs.to_json(),
        "disabled_features": sorted(fs.disabled),
        "max_oom_retries": 2,
        "hang_timeout_s": 1800,
        "env": {},
        "notify": {},
        "supervisor": dict(FAST),
    }
    body.update(spec)
    runfiles.write_json_atomic(run_dir / "spec.json", body)
    for name, data in (files or {}).items():
        (run_dir / name).write_text(json.dumps(data))
    if secret:
        fd = os.open(str(run_dir / "secret.env"), os.O_WRONLY | os.O_CREAT, 0o600)
        os.write(fd, "".join("%s=%s\n" % kv for kv in secret.items()).encode())
        os.close(fd)
    return run_dir


def start(run_dir: Path, factory: str = "fake_verl:factory", path: str | None = None) -> subprocess.Popen:
    """The supervisor on ``run_dir`` in its own session, its output appended to ``supervisor.log``; ``path``
    replaces PATH (e.g. without nvidia-smi)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(TESTS)]))
    if path is not None:
        env["PATH"] = path
    with open(run_dir / "supervisor.log", "ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "dapo_ops.agent.supervisor", str(run_dir), "--command-factory", factory],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )


def run_to_end(run_dir: Path, timeout: float = 90, **kw) -> dict:
    """:func:`start`, wait for the supervisor's exit, return run.json (the supervisor's log in the failure)."""
    p = start(run_dir, **kw)
    try:
        p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        raise AssertionError((run_dir / "supervisor.log").read_text())
    rec = runfiles.read_run(run_dir)
    assert rec is not None, (run_dir / "supervisor.log").read_text()
    return rec


def wait_for(pred, timeout: float = 30, what: str = "condition", every: float = 0.1):
    """``pred()``'s first true value, polled every ``every`` seconds; AssertionError naming ``what`` when none came
    within ``timeout`` seconds (a generous bound on an event, never a measured time)."""
    end = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() >= end:
            raise AssertionError("%s not met within %ss" % (what, timeout))
        time.sleep(every)


def fake_smi(tmp_path: Path, apps: list[str] | None = None, used_mib: list[int] | None = None) -> Path:
    """``<tmp_path>/nvidia-smi``: ``--query-compute-apps`` prints ``apps[i]`` (printf format) on its i-th call, or
    nothing when ``apps`` is None (as inside a container or VM); ``--query-gpu=memory.used`` prints
    ``used_mib[i]`` on its i-th call. The last entry repeats forever. Returns the directory to put on PATH; the
    call counts are in ``<tmp_path>/n`` (compute-apps) and ``<tmp_path>/m`` (memory)."""

    def case(state: Path, outputs: list[str]) -> str:
        state.write_text("0")
        arms = "\n".join(f"    {i}) {out} ;;" for i, out in enumerate(outputs))
        return f"""n=$(cat {state}); echo $((n+1)) > {state}
  case $n in
{arms}
    *) {outputs[-1]} ;;
  esac"""

    apps_body = case(tmp_path / "n", [f"printf '{t}'" for t in apps]) if apps else "exit 0"
    mem_body = case(tmp_path / "m", [f"echo {u}" for u in used_mib]) if used_mib else "exit 1"
    script = tmp_path / "nvidia-smi"
    script.write_text(f"""#!/bin/sh
case "$*" in
  *compute-apps*)
  {apps_body}
  ;;
  *)
  {mem_body}
  ;;
esac
""")
    script.chmod(0o755)
    return tmp_path


def log_facts(lines) -> tuple[list[int], list[int], list[int], list[int]]:
    """``(steps, totals, resumes, saves)`` as the supervisor reads them from ``lines`` (one per line that says so,
    in order), through the grammar it uses (dapo_ops/core/logformat.py; dapo_ops/agent/supervisor/follow.py)."""
    steps, totals, resumes, saves = [], [], [], []
    for ln in lines:
        pm = logformat.parse_metrics_line(ln)
        if pm:
            steps.append(pm[0])
        for out, fn in (
            (totals, logformat.parse_total),
            (resumes, logformat.parse_resume),
            (saves, logformat.parse_save),
        ):
            n = fn(ln)
            if n is not None:
                out.append(n)
    return steps, totals, resumes, saves


def stand_in_tree(root: Path) -> Path:
    """``root/host``: the verl stand-in's host tree (sandbox/host_tree.sh) with one GPU stand-in (it reads
    ``<tree>/sandbox/scenario.json``)."""
    repo = Path(__file__).resolve().parents[1]
    tree = root / "host"
    subprocess.run(
        ["bash", str(repo / "sandbox" / "host_tree.sh"), str(tree), str(repo / ".venv")],
        check=True,
        capture_output=True,
    )
    (tree / "sandbox").mkdir()
    (tree / "sandbox" / "devices.json").write_text(json.dumps({"accelerator": "gpu", "count": 1}))
    return tree


def bare_host(root: Path) -> tuple[Path, Path]:
    """A bare host of THIS machine under ``root`` (``runtime = "host"``, ``transport = "local"``): the verl stand-in's
    tree (:func:`stand_in_tree`), and ``root/hosts.toml`` naming it ``dev``. Returns ``(tree, hosts.toml)``."""
    tree = stand_in_tree(root)
    py = Path(sys.executable)
    inv_path = root / "hosts.toml"
    inv_path.write_text(f"""
[hosts.dev]
runtime = "host"
transport = "local"
workdir = "{tree}"
runs_dir = "{tree}/dapo_runs"
python = "{py}"
accelerator = "gpu"
devices = 1
device_mounts = false
[hosts.dev.env]
PATH = "{tree}/bin:{py.parent}:/usr/bin:/bin"
DAPO_STANDIN_DEVICES = "{tree}/sandbox/devices.json"
DAPO_STANDIN_SCENARIO = "{tree}/sandbox/scenario.json"
""")
    return tree, inv_path
