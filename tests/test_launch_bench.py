"""``inv launch`` on the sandbox: real SSH + docker exec + the verl stand-in under the detached supervisor.

Each test launches through the real CLI (``python -m invoke launch ...``), then reads the run's ``run.json`` and
logs from the host-side bind mount of ``/verl/dapo_runs`` (what ``status`` reads over SSH). Failure cues go into
``/sandbox/scenario.json`` (sandbox/README.md: ``step_time``, ``failure.kind/step/avoid_with/hang_s``).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dapo_ops.core.logformat import parse_metrics_line

pytestmark = pytest.mark.bench

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from inputs_helpers import make_model, make_parquet  # noqa: E402
from supervisor_helpers import wait_for  # noqa: E402
from config_helpers import no_config  # noqa: E402

IN = "/verl/dapo_runs/inputs"
INPUT_FLAGS = ["--model", f"{IN}/model", "--train-file", f"{IN}/train.parquet", "--val-file", f"{IN}/val.parquet"]


#: the sandbox hosts' retry delay in these tests (seconds): the host tunable ``retry_delay_s`` a user sets in
#: hosts.toml (``[hosts.<name>.supervisor]``) instead of the NPU default of 10 s, which waits out HCCL's EJ0001 on real
#: devices; the stand-in has no HCCL to wait for. Every OOM / stall / divergence retry of a test is 9 s shorter.
RETRY_DELAY_S = 1.0


@pytest.fixture
def host_ready(sandbox, tmp_path):
    """Return ``prepare(host)``: inputs present (tiny model + parquet on the host-side runs mount), no run active,
    default scenario. Also yields the env for the CLI, whose inventory is the bench's with every host at the
    supervisor tunables ``prepare.tune(host, **tunables)`` set (from the start: ``retry_delay_s`` =
    :data:`RETRY_DELAY_S`)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DAPO_OPS_", "SWANLAB_"))}
    env.update(DAPO_OPS_CONFIG=no_config(tmp_path), SWANLAB_MODE="disabled")
    tunables: dict[str, dict[str, float]] = {h: {"retry_delay_s": RETRY_DELAY_S} for h in sandbox.hosts}

    def tune(host: str, **tun: float) -> None:
        tunables[host].update(tun)
        env["DAPO_OPS_INVENTORY"] = str(sandbox.tuned_inventory(tmp_path / "hosts-tuned.toml", tunables))

    tune(sandbox.hosts[0])

    def prepare(host: str, scenario: dict) -> None:
        # a clean host: an earlier test on this worker's bench may have left a run (or a fabricated run.json whose
        # supervisor is long gone) behind; each xdist worker has its own bench, so nobody else's run is killed
        sandbox.reset(host)
        inputs = sandbox.runs_dir(host) / "inputs"
        make_model(inputs / "model", max_pos=32768)
        make_parquet(inputs / "train.parquet")
        make_parquet(inputs / "val.parquet")
        sandbox.set_scenario(host, scenario)

    prepare.env = env
    prepare.cwd = tmp_path
    prepare.tune = tune
    return prepare


def inv(prep, *args, timeout=240) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "invoke", "-r", str(REPO), *args],
        capture_output=True,
        text=True,
        cwd=prep.cwd,
        env=prep.env,
        timeout=timeout,
    )


RUN_ID = re.compile(r"\d{8}-\d{6}-[0-9a-f]{4}")


def launch(prep, host, *args) -> tuple[subprocess.CompletedProcess, str | None]:
    res = inv(prep, "launch", "-H", host, *INPUT_FLAGS, *args)
    m = re.search(r"\b(\d{8}-\d{6}-[0-9a-f]{4})\b", res.stdout + res.stderr)
    return res, m.group(1) if m else None


def read_run(sandbox, host, run_id) -> dict:
    try:
        return json.loads((sandbox.runs_dir(host) / run_id / "run.json").read_text())
    except (FileNotFoundError, ValueError):
        return {}


def wait_end(sandbox, host, run_id, timeout=240) -> dict:
    end = time.time() + timeout
    while time.time() < end:
        rec = read_run(sandbox, host, run_id)
        if rec.get("status") in ("succeeded", "failed", "stopped"):
            return rec
        time.sleep(0.5)
    raise AssertionError(f"run {run_id} on {host} did not end in {timeout}s: {read_run(sandbox, host, run_id)}")


def training_steps(sandbox, host, run_id) -> dict[int, list[int]]:
    """{attempt: [training step numbers]} from train.log (validation-only step lines are not training steps)."""
    out: dict[int, list[int]] = {}
    cur = None
    text = (sandbox.runs_dir(host) / run_id / "train.log").read_text(errors="replace")
    for line in re.split(r"[\r\n]", text):
        m = re.match(r"===== dapo-ops attempt (\d+) start ", line)
        if m:
            cur = int(m.group(1))
            out[cur] = []
            continue
        p = parse_metrics_line(line)
        if p and cur is not None and "training/global_step" in p[1]:
            out[cur].append(p[0])
    return out


def feature_sources(features: list[dict]) -> dict[str, str]:
    return {f["name"]: f["source"] for f in features}


# ------------------------------------------------------------------------------------------------ tests


def test_launch_success_defaults(sandbox, host_ready):
    host_ready("h1", {"step_time": 0.2})
    res, rid = launch(host_ready, "h1", "--steps", "6")
    assert res.returncode == 0, res.stderr
    assert rid and "on h1 (container verl)" in res.stdout
    assert (
        f"/verl/dapo_runs/{rid}/train.log" in res.stdout and "inv status" in res.stdout and "inv logs -f" in res.stdout
    )
    rec = wait_end(sandbox, "h1", rid)
    assert rec["status"] == "succeeded", rec.get("verdict")
    assert rec["step"] == 6 and rec["total_steps"] == 6 and len(rec["attempts"]) == 1
    assert set(feature_sources(rec["features"]).values()) == {"default"}
    assert sorted(feature_sources(rec["features"])) == sorted(
        ["flash_attn", "dynamic_batch", "remove_padding", "gradient_checkpointing"]
    )
    assert rec["metrics"]["critic/score/mean"] > 0 and rec["step_times"]
    assert training_steps(sandbox, "h1", rid) == {1: [1, 2, 3, 4, 5, 6]}
    # the runbook's /verl/train.log keeps working
    out = sandbox.exec("h1", "readlink /verl/train.log").stdout.strip()
    assert out == f"/verl/dapo_runs/{rid}/train.log"


def test_two_launches_at_once_start_one_run_and_the_other_names_it(sandbox, host_ready):
    """Two `inv launch` on one host at the same moment: one run starts; the other exits 1 with ONE line naming the
    run that holds the container and how to follow / stop it, whichever way it lost (the quick checks saw the
    other run, or both passed them and the supervisor's lock decided: control/launch/service.py start_run), and leaves no
    run dir (the new-user trial got 'failed at once: config-error', a new run id and no -H)."""
    host_ready("h1", {"step_time": 1.0})
    argv = [sys.executable, "-m", "invoke", "-r", str(REPO), "launch", "-H", "h1", *INPUT_FLAGS, "--steps", "4"]
    procs = [
        subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=host_ready.cwd, env=host_ready.env
        )
        for _ in range(2)
    ]
    outs = [(p.wait(timeout=240), *p.communicate()) for p in procs]
    ok = [o for o in outs if o[0] == 0]
    lost = [o for o in outs if o[0] != 0]
    assert len(ok) == 1 and len(lost) == 1, outs
    winner = re.search(r"\b(\d{8}-\d{6}-[0-9a-f]{4})\b", ok[0][1]).group(1)
    rc, out, err = lost[0]
    assert rc == 1 and out.strip() == "", (out, err)
    assert err.strip().count("\n") == 0 and f"run {winner}" in err and f"inv stop -H h1 --run {winner}" in err, err
    assert "config-error" not in err and "failed at once" not in err, err
    runs = [d.name for d in sandbox.runs_dir("h1").iterdir() if re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{4}", d.name)]
    assert runs == [winner], runs
    assert wait_end(sandbox, "h1", winner)["status"] == "succeeded"


def test_device_oom_adds_offload_and_resumes_from_checkpoint(sandbox, host_ready):
    host_ready(
        "h1",
        {
            "step_time": 0.3,
            "failure": {"kind": "oom-device", "step": 4, "avoid_with": ["offload"], "hang_s": 120, "phase": "none"},
        },
    )
    res, rid = launch(host_ready, "h1", "--steps", "6", "--save-freq", "2", "--framework", "fsdp")
    assert res.returncode == 0, res.stderr
    rec = wait_end(sandbox, "h1", rid)
    assert rec["status"] == "succeeded", rec.get("decision")
    a1, a2 = rec["attempts"]
    assert a1["verdict"]["cls"] == "oom-device"
    assert a1["killed_by"] == "oom"  # reacted to the OOM line; the stand-in's peers would have hung 120 s
    assert feature_sources(a2["features"])["offload"] == "oom-retry-1"
    assert "offload" not in feature_sources(a1["features"])
    assert a2["resumed_from"] == 2
    steps = training_steps(sandbox, "h1", rid)
    assert steps[1] == [1, 2, 3]
    assert steps[2] == [3, 4, 5, 6]  # no step at or before the checkpoint (2) is redone
    runs = sandbox.runs_dir("h1") / rid
    assert (runs / "attempt-1.log").stat().st_size > 0 and (runs / "attempt-2.log").stat().st_size > 0


def test_oom_with_offload_escalates_to_recompute(sandbox, host_ready):
    host_ready(
        "h1",
        {
            "step_time": 0.2,
            "failure": {
                "kind": "oom-device",
                "step": 3,
                "avoid_with": ["offload", "recompute"],
                "hang_s": 120,
                "phase": "none",
            },
        },
    )
    res, rid = launch(host_ready, "h1", "--steps", "5", "--save-freq", "1", "--framework", "fsdp")
    assert res.returncode == 0, res.stderr
    rec = wait_end(sandbox, "h1", rid)
    assert rec["status"] == "succeeded", rec.get("decision")
    assert len(rec["attempts"]) == 3
    src = feature_sources(rec["features"])
    assert src["offload"] == "oom-retry-1" and src["recompute"] == "oom-retry-2"
    assert [a["verdict"]["cls"] for a in rec["attempts"]] == ["oom-device", "oom-device", "success"]
    # verl's rotation (max_actor_ckpt_to_keep 3) lives in each attempt's process: attempts 1-3 saved 1, 2 and 3-5,
    # five whole checkpoints; the finished run keeps the newest three, as one process of verl would have
    ckpts = sandbox.runs_dir("h1") / rid / "checkpoints"
    kept = sorted(int(d.name.split("_")[-1]) for d in ckpts.glob("global_step_*"))
    assert kept == [3, 4, 5] and all(any((ckpts / f"global_step_{s}" / "actor").iterdir()) for s in kept), kept


def test_oom_always_stops_after_max_retries_with_suggestions(sandbox, host_ready):
    host_ready(
        "h1", {"step_time": 0.2, "failure": {"kind": "oom-device", "step": 3, "avoid_with": "never", "hang_s": 120}}
    )
    res, rid = launch(
        host_ready, "h1", "--steps", "5", "--save-freq", "2", "--framework", "fsdp", "--max-oom-retries", "2"
    )
    assert res.returncode == 0, res.stderr
    rec = wait_end(sandbox, "h1", rid)
    assert rec["status"] == "failed"
    assert len(rec["attempts"]) == 3
    d = rec["decision"]
    assert d["action"] == "stop" and d["suggestions"], d
    assert [t["class"] for t in d["tried"]] == ["oom-device"] * 3
    assert all(t["step_reached"] == 2 for t in d["tried"])
    runs = sandbox.runs_dir("h1") / rid
    for k in (1, 2, 3):
        assert (runs / f"attempt-{k}.log").stat().st_size > 0
    assert (runs / "checkpoints" / "global_step_2").is_dir()


@pytest.mark.parametrize("kind", ["oom-host", "oom-ray"])
def test_host_and_ray_oom_never_add_offload(sandbox, host_ready, kind):
    host_ready("h1", {"step_time": 0.2, "failure": {"kind": kind, "step": 3}})
    # oom-host: the stand-in takes host memory until the kernel's OOM killer ends it inside the container's memory
    # limit (sandbox/verl_standin/verl/_standin/hostmem.py): SIGKILL plus a grown cgroup oom_kill counter, what the
    # supervisor sees of a real host OOM
    with sandbox.memory_limit("h1") if kind == "oom-host" else contextlib.nullcontext():
        res, rid = launch(host_ready, "h1", "--steps", "5", "--save-freq", "2", "--framework", "fsdp")
        assert rid, res.stderr  # launch itself may already report the failure (it comes within seconds)
        rec = wait_end(sandbox, "h1", rid)
    assert rec["status"] == "failed"
    a1 = rec["attempts"][0]
    assert a1["verdict"]["cls"] == kind, a1["verdict"]
    if kind == "oom-host":
        assert a1["exit_code"] == 137 and a1["oom_kills"] >= 1, a1
        assert a1["oom_counter"]["after"] > a1["oom_counter"]["before"], a1
    if res.returncode != 0:
        lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and rid in lines[0]
    for a in rec["attempts"]:
        assert "offload" not in feature_sources(a["features"])


def test_a_ray_worker_the_oom_killer_takes_is_a_host_oom_though_verl_exits_1(sandbox, host_ready):
    """Ray loses a worker mid-step to the kernel's OOM killer (the stand-in's child really fills the container's
    memory limit): verl's driver survives and ends with RayTaskError(ActorDiedError), exit 1. The supervisor read
    the container's oom_kill counter only for exit 137, so the verdict was an unknown crash; now it is oom-host."""
    host_ready("h1", {"step_time": 0.2, "failure": {"kind": "actor-died", "step": 3, "variant": "oom"}})
    with sandbox.memory_limit("h1"):
        res, rid = launch(host_ready, "h1", "--steps", "5", "--save-freq", "2", "--framework", "fsdp")
        assert rid, res.stderr
        rec = wait_end(sandbox, "h1", rid)
    a1 = rec["attempts"][0]
    assert a1["exit_code"] == 1 and a1["oom_kills"] >= 1, a1
    assert a1["verdict"]["cls"] == "oom-host", a1["verdict"]
    log = (sandbox.runs_dir("h1") / rid / "train.log").read_text(errors="replace")
    assert "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task." in log
    for a in rec["attempts"]:
        assert "offload" not in feature_sources(a["features"])


def test_kv_cache_shortage_changes_rollout_memory_not_offload(sandbox, host_ready):
    host_ready(
        "h1",
        {
            "step_time": 0.2,
            "failure": {"kind": "oom-kv-cache", "variant": "no-cache-blocks", "min_gpu_memory_utilization": 0.65},
        },
    )
    res, rid = launch(host_ready, "h1", "--steps", "3", "--framework", "fsdp")
    rec = wait_end(sandbox, "h1", rid)
    a1 = rec["attempts"][0]
    assert a1["verdict"]["cls"] == "oom-kv-cache"
    assert rec["status"] == "succeeded", rec.get("decision")
    a2 = rec["attempts"][1]
    util = a2["setting_changes"]["gpu_memory_utilization"]
    assert util >= 0.65  # "Try increasing gpu_memory_utilization": raised, from the default 0.6
    assert "offload" not in feature_sources(a2["features"])
    assert f"gpu_memory_utilization={util}" in (sandbox.runs_dir("h1") / rid / "supervisor.log").read_text()


@pytest.mark.parametrize(
    "override, says",
    [
        ("data.max_prompt_lenght=3", "data.max_prompt_lenght"),
        ("~trainer.no_such_key", "trainer.no_such_key"),
        ("+actor_rollout_ref.rollout.max_num_batched_tokens=16384", "max_num_batched_tokens"),
    ],
)
def test_an_override_that_does_not_compose_is_refused_before_anything_starts(sandbox, host_ready, override, says):
    """A mistyped ``--override`` (an unknown key, ``~`` of an absent key, ``+`` of a key verl has) made a run that
    failed at once, while `inv preflight` refused it (a new-user trial): the launch's quick checks compose the
    user's overrides against the container's verl config now: exit 1, one line naming the key, no run dir."""
    host_ready("h1", {"step_time": 0.2})
    runs = lambda: sorted(d.name for d in sandbox.runs_dir("h1").iterdir() if RUN_ID.fullmatch(d.name))  # noqa: E731
    before = runs()
    res, rid = launch(host_ready, "h1", "--steps", "3", "--override", override)
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert res.returncode == 1 and rid is None and res.stdout.strip() == "", (res.stdout, res.stderr)
    assert len(lines) == 1 and "overrides do not compose" in lines[0] and says in lines[0], res.stderr
    assert runs() == before, res.stderr


def test_config_error_is_not_retried_and_says_why_in_one_line(sandbox, host_ready):
    """Past the quick checks (--skip-preflight: the compose would refuse it), verl's own refusal is a config-error
    the supervisor does not retry."""
    host_ready("h1", {"step_time": 0.2})
    res, rid = launch(
        host_ready, "h1", "--steps", "3", "--skip-preflight", "--override", "actor_rollout_ref.actor.no_such_knob=1"
    )
    assert rid
    rec = wait_end(sandbox, "h1", rid)
    assert rec["status"] == "failed" and len(rec["attempts"]) == 1
    assert rec["verdict"]["cls"] == "config-error"
    assert "\n" not in rec["verdict"]["action"]
    if res.returncode != 0:  # caught within launch's settle window: one line naming the cause
        lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and "config-error" in lines[0], res.stderr


@pytest.mark.parametrize("variant,cause", [("disk-full", "disk-full"), ("permission", "write-permission")])
def test_a_failed_checkpoint_save_stops_with_its_fix_and_resume_skips_the_torn_save(
    sandbox, host_ready, variant, cause
):
    """A save that fails in verl's workers (a full disk, a directory the container may not write: the stand-in ends
    as verl 0.9.1 does, RayTaskError in the driver, no data.pt, tracker left on the previous save) is stopped, not
    retried into the same failure, with a verdict that names the cause; the resume starts from the last complete
    save, never the torn global_step_4."""
    host_ready("h1", {"step_time": 0.2, "failure": {"kind": "save-error", "step": 4, "variant": variant, "times": 1}})
    res, rid = launch(host_ready, "h1", "--steps", "6", "--save-freq", "2", "--framework", "fsdp")
    assert rid, res.stderr
    rec = wait_end(sandbox, "h1", rid)
    assert rec["status"] == "failed" and len(rec["attempts"]) == 1, rec.get("decision")
    v = rec["attempts"][0]["verdict"]
    assert (v["cls"], v["detail"].get("cause"), v["action_kind"]) == ("crash-other", cause, "stop"), v
    # the fix's commands run on the host as they are: into the run's container (core/hostcmd.py), the run's own id
    said = "\n".join(rec["decision"]["suggestions"])
    assert "on h1: `docker exec " in said and "in the run's container" not in said, said
    assert "--resume %s`" % rid in said and "<run_id>" not in said, said
    ckpt = sandbox.runs_dir("h1") / rid / "checkpoints"
    if variant == "permission":
        assert v["detail"]["path"] == f"/verl/dapo_runs/{rid}/checkpoints/global_step_4"
        assert "permission denied" in v["action"] and "writable" in v["hint"]
    else:
        assert (ckpt / "global_step_4" / "actor").is_dir()  # torn: rank 0's shard cut short, nothing else
    assert training_steps(sandbox, "h1", rid)[1] == [1, 2, 3]
    _resume_and_check(sandbox, host_ready, "h1", rid, stopped_by_operator=None)


def test_a_missing_data_file_past_skip_preflight_dies_like_real_verl(sandbox, host_ready):
    """--skip-preflight lets the refused data check through; the trainer then dies the way real verl 0.9.1 does
    (its dataset's ``datasets.load_dataset`` raises ``FileNotFoundError: Unable to find '<path>'`` inside the
    TaskRunner, before 'Total training steps'): config-error, one attempt, the path in the verdict's evidence.
    The stand-in used to train on without reading the file."""
    host_ready("h1", {"step_time": 0.2})
    missing = f"{IN}/no-such-train.parquet"
    flags = ["--model", f"{IN}/model", "--train-file", missing, "--val-file", f"{IN}/val.parquet"]
    res = inv(host_ready, "launch", "-H", "h1", *flags, "--steps", "2", "--skip-preflight")
    m = re.search(r"\b(\d{8}-\d{6}-[0-9a-f]{4})\b", res.stdout + res.stderr)
    assert m, res.stdout + res.stderr
    rec = wait_end(sandbox, "h1", m.group(1))
    assert rec["status"] == "failed" and len(rec["attempts"]) == 1
    assert rec["verdict"]["cls"] == "config-error"
    assert any(f"Unable to find '{missing}'" in e for e in rec["verdict"]["evidence"]), rec["verdict"]
    assert "Total training steps" not in (sandbox.runs_dir("h1") / m.group(1) / "train.log").read_text()


def test_training_survives_ssh_link_cut(sandbox, host_ready):
    host_ready("h2", {"step_time": 0.5})
    res, rid = launch(host_ready, "h2", "--steps", "40", "--framework", "fsdp")
    assert res.returncode == 0, res.stderr
    before = wait_for(lambda: read_run(sandbox, "h2", rid).get("step"), 120, f"the first step of run {rid}", 0.2)
    sandbox.link("h2", False)
    try:
        # the host is unreachable for the operator ...
        assert sandbox.ssh("h2", "true", timeout=30).returncode != 0
        # ... while training goes on (run.json on the host-side bind mount: read without SSH)
        wait_for(lambda: (read_run(sandbox, "h2", rid).get("step") or 0) > before, 120, "a step with the link down")
    finally:
        sandbox.link("h2", True)
    # ... and after reconnecting, the status read (run.json over SSH) shows the progress made meanwhile
    out = sandbox.exec("h2", f"cat /verl/dapo_runs/{rid}/run.json", timeout=60)
    assert out.returncode == 0, out.stderr
    mid = json.loads(out.stdout)
    assert mid["status"] in ("running", "succeeded") and mid["step"] > before
    rec = wait_end(sandbox, "h2", rid)
    assert rec["status"] == "succeeded" and len(rec["attempts"]) == 1 and rec["step"] == 40


def test_second_launch_on_same_container_is_refused(sandbox, host_ready):
    host_ready("h3", {"step_time": 0.5})
    res, rid = launch(host_ready, "h3", "--steps", "40", "--framework", "fsdp")
    assert res.returncode == 0, res.stderr
    try:
        res2, _ = launch(host_ready, "h3", "--steps", "2", "--framework", "fsdp")
        assert res2.returncode != 0
        lines = [ln for ln in res2.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and rid in lines[0] and "already active" in lines[0], res2.stderr
        assert len([p for p in sandbox.runs_dir("h3").iterdir() if re.match(r"\d{8}-", p.name)]) == 1
    finally:
        sup = read_run(sandbox, "h3", rid)["pids"]["supervisor"]
        sandbox.exec("h3", f"kill -TERM {sup}")
    rec = wait_end(sandbox, "h3", rid, timeout=60)
    assert rec["status"] == "stopped"


def test_one_step_off_success(sandbox, host_ready):
    host_ready("h3", {"step_time": 0.2})
    res = inv(
        host_ready,
        "one-step-off",
        "-H",
        "h3",
        *INPUT_FLAGS,
        "--steps",
        "3",
        "--framework",
        "fsdp",
        "--trainer-gpus",
        "4",
        "--rollout-gpus",
        "4",
    )
    assert res.returncode == 0, res.stderr
    rid = re.search(r"\b(\d{8}-\d{6}-[0-9a-f]{4})\b", res.stdout).group(1)
    rec = wait_end(sandbox, "h3", rid)
    assert rec["status"] == "succeeded", rec.get("verdict")
    assert rec["mode"] == "one-step-off" and rec["step"] == 3


def test_swanlab_offline_link_is_printed_and_recorded(sandbox, host_ready):
    host_ready("h1", {"step_time": 0.2})
    host_ready.env.pop("SWANLAB_MODE", None)
    res, rid = launch(
        host_ready, "h1", "--steps", "3", "--framework", "fsdp", "--swanlab-mode", "offline", "--link-wait", "30"
    )
    assert res.returncode == 0, res.stderr
    m = re.search(rf"swanlab: (swanlab sync /verl/dapo_runs/{rid}/swanlog/run-\S+)$", res.stdout, re.M)
    assert m, res.stdout
    assert wait_end(sandbox, "h1", rid)["swanlab_url"] == m.group(1)


def test_swanlab_local_mode_without_swanboard_is_refused_before_anything_starts(sandbox, host_ready):
    """Issue 32 item 7: local mode needs swanboard in the container (the sandbox image has none): the launch's
    quick checks refuse it in one line with the fix, instead of a run that logs an ImportError."""
    host_ready("h1", {"step_time": 0.2})
    host_ready.env.pop("SWANLAB_MODE", None)
    before = set(sandbox.runs_dir("h1").glob("*/spec.json"))
    res, _ = launch(host_ready, "h1", "--steps", "3", "--framework", "fsdp", "--swanlab-mode", "local")
    assert res.returncode != 0
    assert "swanboard is not importable in the container" in res.stderr and "--swanlab-mode offline" in res.stderr
    assert set(sandbox.runs_dir("h1").glob("*/spec.json")) == before


def test_dead_supervisor_does_not_hold_the_container(sandbox, host_ready):
    host_ready("h2", {"step_time": 0.5})
    res, rid = launch(host_ready, "h2", "--steps", "40", "--framework", "fsdp")
    assert res.returncode == 0, res.stderr
    rec = read_run(sandbox, "h2", rid)
    sup, pgid = rec["pids"]["supervisor"], rec["pids"]["verl_pgid"]
    sandbox.exec("h2", f"kill -9 {sup} -{pgid}", check=True)  # the supervisor dies with its run
    res2, rid2 = launch(host_ready, "h2", "--steps", "2", "--framework", "fsdp")
    assert res2.returncode == 0, res2.stderr
    assert rid2 != rid
    assert wait_end(sandbox, "h2", rid2)["status"] == "succeeded"


def test_update_phase_oom_is_fixed_by_the_token_budget_rung_not_offload(sandbox, host_ready):
    """Real verl 0.9.1 run 7/8: offload does not lower update_actor's peak; a smaller update batch does. The
    stand-in OOMs in update_actor unless the composed ppo_max_token_len_per_gpu is at most prompt + response."""
    key = "actor_rollout_ref.actor.ppo_max_token_len_per_gpu"
    host_ready(
        "h1",
        {
            "step_time": 0.2,
            "failure": {
                "kind": "oom-device",
                "step": 3,
                "phase": "update_actor",
                "avoid_with": f"{key}<=10240",
                "hang_s": 120,
            },
        },
    )
    res, rid = launch(host_ready, "h1", "--steps", "5", "--save-freq", "2", "--framework", "fsdp")
    assert res.returncode == 0, res.stderr
    rec = wait_end(sandbox, "h1", rid)
    assert rec["status"] == "succeeded", rec.get("decision")
    a1, a2 = rec["attempts"]
    assert a1["verdict"]["cls"] == "oom-device"
    assert a2["setting_changes"]["token_budgets"] == {key: 10240}
    assert a2["setting_changes"]["memory_rungs"][0] == {
        "rung": "update-batch",
        "phase": "update",
        "source": "oom-retry-1",
        "changes": {"token_budgets": {key: 10240}},
    }
    assert "offload" not in feature_sources(a2["features"])
    assert a2["resumed_from"] == 2 and training_steps(sandbox, "h1", rid)[2] == [3, 4, 5]
    log2 = (sandbox.runs_dir("h1") / rid / "attempt-2.log").read_text(errors="replace")
    assert f"{key}=10240" in log2 or "'ppo_max_token_len_per_gpu': 10240" in log2


def _wait_step(sandbox, host, rid, step, timeout=180) -> dict:
    end = time.time() + timeout
    while time.time() < end:
        rec = read_run(sandbox, host, rid)
        if (rec.get("step") or 0) >= step and (rec.get("pids") or {}).get("verl_pgid"):
            return rec
        time.sleep(0.5)
    raise AssertionError(f"run {rid} on {host} did not reach step {step}: {read_run(sandbox, host, rid)}")


def _resume_and_check(sandbox, host_ready, host, rid, stopped_by_operator: bool | None = False):
    """``launch -H host --steps N --resume rid`` as the tool's own hints write it (no model, data or framework
    flags): a new run on rid's checkpoints with rid's settings that goes on after its last checkpoint. The old run
    ends ``stopped`` when the operator ran ``inv stop`` first, else the resume closes it as failed."""
    old = sandbox.runs_dir(host) / rid
    last = int((old / "checkpoints" / "latest_checkpointed_iteration.txt").read_text())
    steps = last + 3
    res = inv(host_ready, "launch", "-H", host, "--steps", str(steps), "--resume", rid)
    rid2 = next((r for r in re.findall(r"\b(\d{8}-\d{6}-[0-9a-f]{4})\b", res.stdout) if r != rid), None)
    assert res.returncode == 0, res.stderr
    assert (
        rid2 != rid
        and f"resume:  run {rid}'s checkpoints in /verl/dapo_runs/{rid}/checkpoints, from global_step_{last}"
        in res.stdout
    ), res.stdout
    rec = wait_end(sandbox, host, rid2)
    assert rec["status"] == "succeeded", rec.get("verdict")
    spec = json.loads((sandbox.runs_dir(host) / rid2 / "spec.json").read_text())
    assert spec["settings"]["ckpt_dir"] == f"/verl/dapo_runs/{rid}/checkpoints" and spec["resume_of"] == rid
    old_spec = json.loads((old / "spec.json").read_text())
    assert spec["settings"]["experiment"] == old_spec["settings"]["experiment"]
    # what the earlier run was given and this launch was not comes from it, not from the defaults
    for k in ("model_path", "train_file", "val_file", "save_freq", "max_response_length"):
        assert spec["settings"][k] == old_spec["settings"][k], k
    assert spec["framework"] == old_spec["framework"] == "fsdp" and spec["settings"]["model_path"] == f"{IN}/model"
    assert training_steps(sandbox, host, rid2)[1] == list(range(last + 1, steps + 1))  # continues, not anew
    old_rec = read_run(sandbox, host, rid)
    if stopped_by_operator is None:  # it had ended on its own (failed): the resume leaves its record alone
        assert old_rec["status"] == "failed" and "closed by" not in old_rec["decision"].get("ended", "")
    elif stopped_by_operator:
        assert old_rec["status"] == "stopped"
    else:  # closed by the resume as failed (its supervisor died), never as if `inv stop` had run (issue 32 item 4)
        assert old_rec["status"] == "failed"
        assert f"closed by `inv launch -H {host} --resume" in old_rec["decision"]["ended"], old_rec["decision"]


def test_sigkilled_supervisor_refuses_a_launch_until_stopped_then_resume_continues(sandbox, host_ready):
    host_ready("h2", {"step_time": 0.5})
    res, rid = launch(
        host_ready, "h2", "--steps", "40", "--save-freq", "2", "--framework", "fsdp", "--max-response-length", "4096"
    )
    assert res.returncode == 0, res.stderr
    rec = _wait_step(sandbox, "h2", rid, 3)
    sandbox.exec("h2", f"kill -9 {rec['pids']['supervisor']}", check=True)  # verl lives on
    res2, _ = launch(host_ready, "h2", "--steps", "2", "--framework", "fsdp")
    lines = [ln for ln in res2.stderr.splitlines() if ln.strip()]
    assert res2.returncode != 0 and len(lines) == 1, res2.stderr
    assert (
        lines[0].startswith(f"h2: verl of run {rid} still runs (")
        and f"inv stop -H h2 --run {rid}" in lines[0]
        and f"--resume {rid}" in lines[0]
    ), lines
    assert [p.name for p in sandbox.runs_dir("h2").iterdir() if re.match(r"\d{8}-", p.name)] == [rid]
    stop = inv(host_ready, "stop", "-H", "h2", "--run", rid)
    assert stop.returncode == 0, stop.stderr
    _resume_and_check(sandbox, host_ready, "h2", rid, stopped_by_operator=True)


def test_after_docker_stop_and_start_resume_continues_the_run(sandbox, host_ready):
    host_ready("h3", {"step_time": 0.5})
    res, rid = launch(host_ready, "h3", "--steps", "40", "--save-freq", "2", "--framework", "fsdp")
    assert res.returncode == 0, res.stderr
    _wait_step(sandbox, "h3", rid, 3)
    sandbox.ssh("h3", "docker stop -t 2 verl", check=True)
    down = json.loads(inv(host_ready, "status", "-H", "h3", "--json").stdout)[0]  # the run it held, its step
    assert down["state"] == "error" and down["run_id"] == rid and down["step"] >= 3, down
    assert f"--resume {rid}" in down["error"] and "docker start verl" in down["error"]
    sandbox.ssh("h3", "docker start verl", check=True)
    st = inv(host_ready, "status", "-H", "h3", "--json")
    row = json.loads(st.stdout)[0]
    assert row["state"] == "supervisor-dead" and f"--resume {rid}" in row["hint"] and row["eta_s"] is None, row
    _resume_and_check(sandbox, host_ready, "h3", rid)


def test_a_resume_and_its_dry_run_keep_the_overrides_features_and_limits_of_the_run(sandbox, host_ready):
    """A new user's trial: a resume dropped the earlier run's --override (lr 3e-6 trained as 1e-6), its
    --features=-flash_attn (sdpa came back as flash_attention_2), --hang-timeout and --max-oom-retries, and its
    --dry-run printed a plan of the defaults (model_engine=megatron, a new checkpoint dir)."""
    lr, attn = "actor_rollout_ref.actor.optim.lr", "+actor_rollout_ref.model.override_config.attn_implementation"
    host_ready("h2", {"step_time": 0.2})
    first = ["--steps", "4", "--save-freq", "2", "--framework", "fsdp", "--features=-flash_attn"]
    limits = ["--hang-timeout", "300", "--max-oom-retries", "1", "--override", f"{lr}=3e-6"]
    res, rid = launch(host_ready, "h2", *first, *limits)
    assert res.returncode == 0, res.stderr
    assert wait_end(sandbox, "h2", rid)["status"] == "succeeded"
    dry = inv(host_ready, "launch", "-H", "h2", "--resume", rid, "--steps", "6", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    for want in (f"{lr}=3e-6", f"{attn}=sdpa", f"trainer.default_local_dir=/verl/dapo_runs/{rid}/checkpoints"):
        assert want in dry.stdout, (want, dry.stdout)
    assert "model_engine=megatron" not in dry.stdout and f"resume:        run {rid}'s checkpoints" in dry.stdout
    res2 = inv(host_ready, "launch", "-H", "h2", "--resume", rid, "--steps", "6")
    assert res2.returncode == 0, res2.stderr
    rid2 = next(r for r in re.findall(r"\b(\d{8}-\d{6}-[0-9a-f]{4})\b", res2.stdout) if r != rid)
    assert wait_end(sandbox, "h2", rid2)["status"] == "succeeded"
    spec = json.loads((sandbox.runs_dir("h2") / rid2 / "spec.json").read_text())
    assert spec["settings"]["extra_overrides"] == [f"{lr}=3e-6"] and "flash_attn" in spec["disabled_features"]
    assert (spec["hang_timeout_s"], spec["max_oom_retries"], spec["framework"]) == (300, 1, "fsdp")
    sup = (sandbox.runs_dir("h2") / rid2 / "supervisor.log").read_text().splitlines()
    argv = next(ln for ln in sup if "attempt 1: " in ln and "main_ppo" in ln)
    assert f"{lr}=3e-6" in argv and f"{attn}=sdpa" in argv, argv  # the verl argv the resumed run ran
    assert training_steps(sandbox, "h2", rid2)[1] == [5, 6]


def test_ctrl_c_while_launch_waits_names_the_run_that_goes_on(sandbox, host_ready):
    # a terminal's Ctrl-C: SIGINT to the whole foreground group (inv and its ssh children) while launch waits for
    # the started run to settle (control/launch/service.py start_run); the line names the run, status and stop find it
    host_ready("h1", {"step_time": 0.5})
    before = {p.name for p in sandbox.runs_dir("h1").iterdir()}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "invoke",
            "-r",
            str(REPO),
            "launch",
            "-H",
            "h1",
            *INPUT_FLAGS,
            "--steps",
            "40",
            "--framework",
            "fsdp",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=host_ready.cwd,
        env=host_ready.env,
        start_new_session=True,
    )
    rid, end = None, time.time() + 120
    while rid is None and time.time() < end and proc.poll() is None:
        for p in sandbox.runs_dir("h1").iterdir():
            if (
                p.name not in before
                and re.match(r"\d{8}-\d{6}-[0-9a-f]{4}$", p.name)
                and read_run(sandbox, "h1", p.name).get("status") == "running"
            ):
                rid = p.name
        time.sleep(0.1)
    assert rid, proc.communicate(timeout=60)
    os.killpg(proc.pid, 2)  # SIGINT
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (out, err)
    assert err.strip().splitlines() == [
        f"interrupted: run {rid} may have started on h1 (its supervisor is "
        f"detached): `inv status -H h1`, `inv stop -H h1`"
    ], err
    try:
        st = inv(host_ready, "status", "-H", "h1")
        assert st.returncode == 0 and rid in st.stdout, st.stdout + st.stderr
        assert read_run(sandbox, "h1", rid)["status"] == "running"  # the detached supervisor went on
        sp = inv(host_ready, "stop", "-H", "h1")
        assert sp.returncode == 0, sp.stderr
    finally:
        rec = read_run(sandbox, "h1", rid)
        if rec.get("status") not in ("succeeded", "failed", "stopped"):
            sandbox.exec("h1", f"kill -TERM {rec['pids']['supervisor']}")
    assert wait_end(sandbox, "h1", rid, timeout=60)["status"] == "stopped"
