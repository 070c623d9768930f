"""``inv quickstart``: the runbook's interactive flow through a real pseudo-terminal, and the no-TTY path."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import time
from pathlib import Path

import pytest

from inputs_helpers import make_model, make_parquet
from config_helpers import no_config

REPO = Path(__file__).resolve().parent.parent
INV = [str(REPO / ".venv" / "bin" / "inv"), "-r", str(REPO)]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class Pty:
    """A child process on a real pty: ``expect(regex)`` reads until it matches, ``send(line)`` types a line."""

    def __init__(self, argv, env, cwd):
        self.master, slave = pty.openpty()
        self.proc = subprocess.Popen(
            argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd, start_new_session=True, close_fds=True
        )
        os.close(slave)
        self.buf = ""

    def _read(self, timeout):
        r, _, _ = select.select([self.master], [], [], timeout)
        if not r:
            return False
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: the child closed the pty
            return None
        if not data:
            return None
        self.buf += ANSI.sub("", data.decode("utf-8", "replace"))
        return True

    def expect(self, pattern, timeout=120.0):
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while not rx.search(self.buf):
            left = deadline - time.monotonic()
            if left <= 0 or self._read(min(left, 1.0)) is None:
                raise AssertionError(f"did not see {pattern!r}; output so far:\n{self.buf[-3000:]}")
        m = rx.search(self.buf)
        seen, self.buf = self.buf[: m.end()], self.buf[m.end() :]
        return seen

    def send(self, line):
        os.write(self.master, (line + "\n").encode())

    def finish(self, timeout=240.0):
        out = self.buf
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            if self._read(1.0) is None:
                break
        out += self.buf
        rc = self.proc.wait(timeout=max(deadline - time.monotonic(), 5))
        os.close(self.master)
        return rc, out


def _base_env(tmp_path, **extra):
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SWANLAB_", "CONTAINER", "USER_FEATURES"))
        and k.lower() not in ("http_proxy", "https_proxy")
    }
    env.update(DAPO_OPS_CONFIG=no_config(tmp_path, "config.toml"), TERM="dumb", COLUMNS="200", **extra)
    return env


def test_no_tty_and_no_swanlab_key_is_one_line_naming_both_ways(tmp_path):
    inv = tmp_path / "hosts.toml"
    inv.write_text('[hosts.n1]\naddress = "192.0.2.1"\n')
    proc = subprocess.run(
        INV + ["quickstart", "--inventory", str(inv)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=_base_env(tmp_path),
        timeout=60,
    )
    assert proc.returncode != 0
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1, proc.stderr
    assert "SWANLAB_API_KEY" in err[0] and "config.toml" in err[0] and "--swanlab-mode" in err[0]
    assert "Traceback" not in proc.stdout + proc.stderr


def test_unknown_feature_without_tty_is_one_line(tmp_path):
    inv = tmp_path / "hosts.toml"
    inv.write_text('[hosts.n1]\naddress = "192.0.2.1"\n')
    proc = subprocess.run(
        INV + ["quickstart", "--inventory", str(inv), "--features", "flash_attn,warp_drive"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=_base_env(tmp_path, SWANLAB_MODE="disabled"),
        timeout=60,
    )
    assert proc.returncode == 2
    assert "warp_drive" in proc.stderr and "offload" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("var", ["SWANLAB_MODE", "CONTAINER"])
def test_an_empty_swanlab_mode_or_container_is_refused_as_launch_refuses_it(tmp_path, var):
    """A new user's trial: SWANLAB_MODE= (and CONTAINER=) passed where TRAINER_GPUS= was refused; quickstart took the
    empty SWANLAB_MODE for an open question and, without a TTY, for SwanLab's cloud mode."""
    inv = tmp_path / "hosts.toml"
    inv.write_text('[hosts.n1]\naddress = "192.0.2.1"\n')
    proc = subprocess.run(
        INV + ["quickstart", "--inventory", str(inv)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=_base_env(tmp_path, **{var: ""}),
        timeout=60,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()], proc.stderr
    assert proc.stderr.startswith(f"{var} is set but empty; set it ") and f"`unset {var}`" in proc.stderr


@pytest.mark.parametrize("value", ["tf", "FSDP", ""])
def test_a_bad_framework_is_refused_in_launchs_own_line_before_any_question(tmp_path, value):
    """A new user's trial: ``inv quickstart --framework fsdp`` said ``No idea what '--framework' is!``, so quickstart
    always ran the runbook's default (megatron) unless FRAMEWORK was set. ``--framework`` takes what ``inv launch
    --framework`` takes (the settings table's choices, control/settings.py ``framework``) and a bad value is launch's
    one line, exit 2, before a question is asked."""
    inv = tmp_path / "hosts.toml"
    inv.write_text('[hosts.n1]\naddress = "192.0.2.1"\n')
    env = _base_env(tmp_path, SWANLAB_MODE="disabled")
    env.pop("FRAMEWORK", None)
    runs = {
        task: subprocess.run(
            INV + [task, "--inventory", str(inv), "--framework", value, *extra],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        for task, extra in (("quickstart", []), ("launch", ["--dry-run"]))
    }
    qs, launch = runs["quickstart"], runs["launch"]
    assert (qs.returncode, launch.returncode) == (2, 2), qs.stderr + launch.stderr
    assert qs.stderr.strip().splitlines() == [launch.stderr.strip()], qs.stderr
    assert "--framework" in qs.stderr and "megatron" in qs.stderr and "fsdp" in qs.stderr
    assert qs.stdout == "", qs.stdout  # no question, no preflight


def test_the_framework_flag_reaches_the_launch_request_and_the_repeat_line(monkeypatch, tmp_path):
    """``--framework fsdp`` is the launch request's setting (flag source, as ``inv launch --framework``), and the
    "repeat non-interactively" line names the framework the launch ran."""
    from invoke.exceptions import Exit

    from dapo_ops import cli
    from dapo_ops.cli import program, quickstart
    from dapo_ops.control.launch import request

    inv = tmp_path / "hosts.toml"
    inv.write_text('[hosts.n1]\naddress = "192.0.2.1"\n')
    for k, v in _base_env(tmp_path, SWANLAB_MODE="disabled").items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("FRAMEWORK", raising=False)
    seen = []

    def build(args, env, **kw):  # the request quickstart makes; no host is contacted
        seen.append(kw["config"].settings(args.flags, env))
        raise Exit("stopped before the launch", code=9)

    monkeypatch.setattr(request, "build", build)
    with pytest.raises(SystemExit) as ex:
        program.make_program(cli.namespace_for(["quickstart"])).run(
            ["dapo-ops", "quickstart", "--inventory", str(inv), "--framework", "fsdp"]
        )
    assert ex.value.code == 9
    assert (seen[0]["framework"], seen[0].source("framework")) == ("fsdp", "flag")
    line = quickstart._equivalent("dapo", "", "n1", "", "verl", {}, "", 5, "", "disabled", framework="fsdp")
    assert " --framework fsdp " in line and line.startswith("CONTAINER=verl TRAIN_STEPS=5 inv quickstart"), line


@pytest.mark.bench
def test_interactive_flow_on_a_pty_ends_in_a_launched_run(sandbox, tmp_path):
    host = "h1"
    sandbox.reset(host)
    sandbox.set_scenario(host, {"step_time": 0.2})
    runs = sandbox.runs_dir(host)
    make_model(runs / "inputs" / "tiny-model", max_pos=16384)
    make_parquet(runs / "inputs" / "train.parquet")
    make_parquet(runs / "inputs" / "val.parquet")
    env = _base_env(
        tmp_path,
        MODEL_PATH="/verl/dapo_runs/inputs/tiny-model",
        TRAIN_FILE="/verl/dapo_runs/inputs/train.parquet",
        VAL_FILE="/verl/dapo_runs/inputs/val.parquet",
        TRAIN_STEPS="4",
        FRAMEWORK="fsdp",
        MAX_RESPONSE_LENGTH="1024",
    )
    p = Pty(INV + ["quickstart", "-H", host, "--inventory", str(sandbox.inventory)], env=env, cwd=tmp_path)
    try:
        listing = p.expect(r"choose a number or name \[verl\]")
        assert re.search(r"1\) verl\s+running", listing), listing
        p.send("1")
        p.expect(r"http_proxy .*: ")
        p.send("none")
        p.expect(r"https_proxy .*: ")
        p.send("none")
        p.expect(r"custom features\?.*: ")
        p.send("default")
        p.expect(
            r"4\. SwanLab monitoring:\s+mode: cloud \(needs an API key\) \| local \(needs swanboard\) \| offline \| "
            r"disabled \[cloud\]: "
        )
        p.send("offline")  # local mode needs swanboard, which the sandbox image does not carry (preflight fails)
        rc, out = p.finish()
    finally:
        if p.proc.poll() is None:
            p.proc.kill()
    assert rc == 0, out[-3000:]
    m = re.search(r"run (\d{8}-\d{6}-[0-9a-f]{4}) (running|succeeded) on h1", out)
    assert m, out[-3000:]
    assert "inv status -H h1" in out and "inv logs -f -H h1" in out and "inv logs --errors -H h1" in out
    assert "repeat non-interactively:" in out and "CONTAINER=verl" in out
    # the launched run is real: its run.json is on the host, with the default features
    record = json.loads((runs / m.group(1) / "run.json").read_text())
    assert {f["name"] for f in record["features"]} >= {
        "flash_attn",
        "dynamic_batch",
        "remove_padding",
        "gradient_checkpointing",
    }
    assert all(f["source"] == "default" for f in record["features"])
    spec = json.loads((runs / m.group(1) / "spec.json").read_text())
    assert spec["env"]["SWANLAB_MODE"] == "offline"
    for _ in range(240):  # the first run ends before the repeat (one run per container)
        if json.loads((runs / m.group(1) / "run.json").read_text())["status"] in ("succeeded", "failed", "stopped"):
            break
        time.sleep(0.5)

    # the printed line repeats it on a TTY without a single question and with every answer kept
    line = out.split("repeat non-interactively:")[1].strip().splitlines()[0]
    assert "--swanlab-mode offline" in line and "--features default" in line and "--http-proxy none" in line, line
    assert " --framework fsdp " in line, line  # FRAMEWORK=fsdp above: the repeat runs the same backend
    line = line.replace("inv quickstart", " ".join(INV + ["quickstart"]))
    p2 = Pty(["sh", "-c", line], env=env, cwd=tmp_path)
    try:
        rc2, out2 = p2.finish()
    finally:
        if p2.proc.poll() is None:
            p2.proc.kill()
    assert rc2 == 0, out2[-3000:]
    assert not re.search(r"choose a number|http_proxy .*: |custom features\?|mode: cloud", out2), out2[-3000:]
    m2 = re.search(r"run (\d{8}-\d{6}-[0-9a-f]{4}) (running|succeeded) on h1", out2)
    assert m2 and m2.group(1) != m.group(1), out2[-3000:]
    assert json.loads((runs / m2.group(1) / "spec.json").read_text())["env"]["SWANLAB_MODE"] == "offline"
