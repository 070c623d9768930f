"""A start-up that keeps logging but never reaches step 1 (new-user trial): alive but not training.

The trial: the sandbox stand-in's ``network`` cue prints Ray's GCS client loop (``Failed to connect to GCS at address
198.51.140.99:6379``, every 5 s, for ever). The supervisor said ``running ... no step yet`` for minutes, then (at
``--hang-timeout``) ``hang: ... no common frame across the processes``, retried, and ``hang again``; the classifier
on the same log said ``network ... address=198.51.140.99:6379 cause=ray-head fatal=True``. Now:

(a) a line of the classifier's fatal root-cause rows that one process repeats with no step (the error-storm counts,
    dapo_ops/core/classify/storm.py) stops the attempt with the classifier's verdict and policy (``killed_by``
    ``fatal``: network, the address; one retry after cleanup, then stop), never one line alone;
(b) "output but no step line for 2 x the limit" applies before step 1 too once a run of this configuration left
    its start-up time (docs/troubleshooting.md "Stalls");
(c) a hang verdict whose log matches a classifier row (fatal or not) says so.

Pure tests on the decision functions with real-looking logs (the stand-in's lines; Ray's real loop from
tests/cases/handed/case-31-ray-gcs-connect-timeout.log), one run of the real supervisor process with a fake verl
that loops like the stand-in, and one on the sandbox (bench) with the stand-in's own cue.
"""

from __future__ import annotations

import glob
from pathlib import Path

import pytest

from dapo_ops.agent.supervisor import escalate, follow, record
from dapo_ops.core.classify import storm
from dapo_ops.core.classify.logtail import fatal_signature
from dapo_ops.core.features import FeatureSet
from dapo_ops.core.logformat import parse_log_time

from supervisor_helpers import new_run, run_to_end

FIX = Path(__file__).resolve().parent / "fixtures"
CASES = Path(__file__).resolve().parent / "cases"
HEALTHY = sorted(glob.glob(str(FIX / "real-verl" / "*.log")) + glob.glob(str(FIX / "real-verl/tool-runs/*/train.log")))
HEAD = "198.51.140.99"
#: the stand-in's lines for the ``network`` cue (sandbox/verl_standin/verl/_standin/texts.py gcs_timeout_lines)
GCS = [
    f"[2026-11-29 12:00:00,000 W 1 1] gcs_rpc_client.h:151: Failed to connect to GCS at address {HEAD}:6379 "
    "within 5 seconds.",
    "[2026-11-29 12:00:05,000 W 1 1] gcs_client.cc:184: Failed to get cluster ID from GCS server: TimedOut: "
    "Timed out while waiting for GCS to become available.",
]
#: what the stand-in prints before it (trainer.py run(): the config check, ray.init's kwargs)
START = [
    "[validate_config] All configuration checks passed successfully!",
    "ray init kwargs: {'num_cpus': None, 'runtime_env': {'env_vars': {'TOKENIZERS_PARALLELISM': 'true', "
    "'NCCL_DEBUG': 'WARN', 'VLLM_LOGGING_LEVEL': 'WARN'}}}",
]
HUB_WARNING = (
    "We couldn't connect to 'https://huggingface.co' to load this file, couldn't find it in the cached files and it "
    "looks like /models/Qwen2.5-7B is not the path to a directory containing a file named generation_config.json. "
    "Using default generation config."
)


class Clock:
    def __init__(self, t=1000.0):
        self.t = t

    def __call__(self):
        return self.t


def _scanner(monkeypatch, clock, learned=None, tun=None):
    monkeypatch.setattr(follow, "now", clock)
    rec = {"attempts": [], "step": None, "metrics": {}, "last_progress_at": clock()}
    att = {"n": 1, "started_at": clock()}
    return follow.Scanner(
        rec,
        att,
        record.RecordWriter("/nonexistent"),
        follow.LinkFinder({}),
        lambda url: None,
        lambda line: False,
        tun or {},
        1800.0,
        learned_timing=learned,
    )


class _Lines:
    """A follower whose log grows by one line of ``lines`` every ``dt`` seconds of ``clock`` (the last one again
    and again once they ran out)."""

    def __init__(self, scanner, clock, lines, dt):
        self.scanner, self.clock, self.lines, self.dt = scanner, clock, list(lines), dt
        self.i = 0

    def pump(self):
        self.clock.t += self.dt
        line = self.lines[min(self.i, len(self.lines) - 1)]
        self.i += 1
        self.scanner.scan([line])
        return True

    def drain(self):
        pass


class _Alive:
    def poll(self):
        return None


def _follow(scanner, clock, lines, dt, hang_timeout_s=1800.0):
    """follow()'s reason to stop and the seconds (on ``clock``) it took from the attempt's start."""
    t0 = clock()
    why = follow.follow(
        _Alive(),
        _Lines(scanner, clock, lines, dt),
        scanner,
        scanner.rec,
        scanner.att,
        stop=lambda: False,
        oom_grace_s=1.0,
        hang_timeout_s=hang_timeout_s,
        poll_s=0.0,
        writer=scanner.writer,
    )
    return why, clock() - t0


# ------------------------------------------------------------------------------------- (a) the line check


def test_the_live_line_check_is_the_classifiers_fatal_rows():
    assert fatal_signature(GCS[0]).name == "gcs-connect" and fatal_signature(GCS[0]).cls == "network"
    assert fatal_signature(GCS[1]).name == "gcs-cluster-id"
    assert fatal_signature("\x1b[36m(WorkerDict pid=210)\x1b[0m " + HUB_WARNING).name == "hub"  # fatal, but see below
    # non-fatal rows (tracker trouble while training goes on), echo lines, device OOMs (their own path) never
    assert (
        fatal_signature(
            "(TaskRunner pid=1) swanlab: network error, swanlab will resume uploads when the network improves"
        )
        is None
    )
    assert fatal_signature("+ python3 -m verl.trainer.main_ppo ray_kwargs.ray_init.address=x gcs at address y") is None
    assert fatal_signature("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB") is None
    assert fatal_signature("step:3 - actor/pg_loss:0.1") is None


@pytest.mark.parametrize("path", HEALTHY, ids=lambda p: Path(p).parent.name + "/" + Path(p).name)
def test_no_line_of_a_real_run_matches_a_fatal_row(path):
    lines = Path(path).read_text(errors="replace").split("\n")
    assert [ln for ln in lines if fatal_signature(ln)] == []


# ------------------------------------------------------------------------------------- (a) the repeat


def test_the_stand_ins_gcs_loop_is_called_a_minute_after_it_began():
    det = storm.StormDetector(fatal_of=fatal_signature)
    t, found = 0.0, None
    for line in START + GCS:
        found = found or det.feed(line, t)
    while found is None and t < 600:
        t += 5.0  # the stand-in's loop: the first line again every 5 s
        found = det.feed(GCS[0], t)
    assert found is not None and found["fatal"] and found["cls"] == "network" and found["source"] == "-"
    assert t == 60.0 and found["count"] == 14 and found["span_s"] == 60.0  # both first lines + 12 repeats
    assert HEAD in found["line"]


def test_rays_real_loop_is_called_on_its_own_clock():
    """Ray's GCS client (case-31, the worker's python3 -m verl...): a connect failure and a cluster-id timeout every
    35 s for ever; both rows are one class of one process, so the rule counts both."""
    real = [
        ln for ln in (CASES / "handed/case-31-ray-gcs-connect-timeout.log").read_text().split("\n") if "1761020" in ln
    ]
    assert len(real) == 5 and parse_log_time(real[0]) is not None
    det = storm.StormDetector(fatal_of=fatal_signature)
    found, n = None, 0
    while found is None and n < 100:
        line = real[n % 2]  # connect, cluster id, connect, ...
        t = parse_log_time(real[0]) + 35.0 * (n // 2) + (30.0 if n % 2 else 0.0)
        found, n = det.feed(line, t), n + 1
    assert found is not None and found["count"] == 10 and found["span_s"] >= 60  # ~2.5 min, not HANG_TIMEOUT


def test_one_warning_per_rank_or_a_step_between_is_never_a_repeat():
    det = storm.StormDetector(fatal_of=fatal_signature)
    for k in range(16):  # each rank loads its generation config once, minutes apart
        assert det.feed("(WorkerDict pid=%d) %s" % (200 + k, HUB_WARNING), 40.0 * k) is None
    det = storm.StormDetector(fatal_of=fatal_signature)
    for k in range(30):
        if k % 8 == 7:
            det.progress()  # a step line: training moves
        assert det.feed(GCS[0], 5.0 * k) is None


def test_the_replay_of_a_finished_log_leaves_the_verdict_to_the_classifier():
    from dapo_ops.core import classify

    v = classify.classify("\n".join(START + GCS + [GCS[0]] * 400))
    assert (v.cls, v.detail.get("cause"), v.detail.get("address")) == ("network", "ray-head", HEAD + ":6379")


def test_follow_stops_the_attempt_on_the_repeat_and_the_verdict_is_the_classifiers(monkeypatch, tmp_path):
    clock = Clock()
    sc = _scanner(monkeypatch, clock)
    why, took = _follow(sc, clock, START + GCS + [GCS[0]], 5.0)
    assert why == "fatal" and took < 120 and sc.storm["cls"] == "network"
    alog = tmp_path / "attempt-1.log"
    alog.write_text("\n".join(START + GCS + [GCS[0]] * 11) + "\n")
    out = {"killed_by": "fatal", "exit_code": 143, "storm": sc.storm, "att": sc.att}
    v = escalate.attempt_verdict(str(alog), out, 12)
    d = v["detail"]
    assert (v["cls"], d["cause"], d["address"], d["fatal"]) == ("network", "ray-head", HEAD + ":6379", True)
    assert d["repeated"]["count"] == sc.storm["count"] and d["repeated"]["signature"] == "gcs-connect"
    assert v["action"].startswith(
        "network (ray-head, %s:6379) repeated %d times in 60 s with no training step" % (HEAD, sc.storm["count"])
    )
    assert "attempt stopped; clean up and retry once after checking connectivity" in v["action"]
    # the policy: one retry after cleanup, then stop with what to check (no blind retry into the same error)
    lad = escalate.Ladder(2)
    first = lad.decide(FeatureSet.from_json([]), v, {})
    assert first.action == "retry"
    lad.count(first)
    again = lad.decide(FeatureSet.from_json([]), v, {})
    assert again.action == "stop" and "network again after one retry" in again.reason
    assert again.suggestions[0].startswith("the Ray head at %s:6379 cannot be reached: check" % HEAD)


# ------------------------------------------------------------------------------------- (b) before step 1


def test_output_without_step_1_is_a_stall_once_the_start_up_time_is_learned(monkeypatch):
    """A learned start-up of 12 s gives a 60 s limit (5 x 12, the floor): output that is not a step for 120 s
    (2 x the limit) is a stall (``no-step``), far below HANG_TIMEOUT. The output here is no fatal row (vLLM's
    start-up chatter), so only the rule of (b) can call it."""
    chatter = ["(WorkerDict pid=7) INFO: waiting for the engine core to start"]
    clock = Clock()
    sc = _scanner(monkeypatch, clock, learned={"first_s": 12.0, "work_s": None, "phases": {}})
    assert sc.stall_after_s == 60.0
    why, took = _follow(sc, clock, chatter, 5.0)
    assert (why, sc.stall_by) == ("stall", "no-step") and 120 < took <= 125
    clock = Clock()
    sc = _scanner(monkeypatch, clock)  # nothing learned: only the cap
    why, took = _follow(sc, clock, chatter, 5.0, hang_timeout_s=300.0)
    assert why == "hang" and took > 300


# ------------------------------------------------------------------------------------- (c) the hang names the log


def _classified(tmp_path, lines):
    alog = tmp_path / "attempt-1.log"
    alog.write_text("\n".join(lines) + "\n")
    return escalate.attempt_verdict(str(alog), {"killed_by": "stall", "exit_code": 143}, 12)


def test_a_hang_verdict_says_what_the_log_shows(tmp_path):
    lv = _classified(tmp_path, START + GCS)
    v = escalate.stall_verdict(
        130.0, 60.0, [], None, 12, [], "/r/stacks-attempt-1.txt", "no-step", None, log_verdict=lv
    )
    assert "no common frame: no process could be dumped" in v["action"]
    assert "the log shows network (ray-head, %s:6379): " % HEAD in v["action"]
    assert v["detail"]["log_verdict"]["cls"] == "network" and v["detail"]["log_verdict"]["detail"]["fatal"] is True
    assert GCS[0] in v["evidence"]
    # a non-fatal match is named too
    lv = _classified(tmp_path, START + ["(TaskRunner pid=1) swanlab: network error, swanlab will resume uploads"])
    v = escalate.stall_verdict(
        130.0, 60.0, [], None, 12, [], "/r/stacks-attempt-1.txt", "no-step", None, log_verdict=lv
    )
    assert "the log shows network (tracker, non-fatal): " in v["action"]
    # silence: nothing to name
    lv = _classified(tmp_path, START)
    v = escalate.stall_verdict(
        130.0, 60.0, [], None, 12, [], "/r/stacks-attempt-1.txt", "no-step", None, log_verdict=lv
    )
    assert "the log shows" not in v["action"] and "log_verdict" not in v["detail"]


# ------------------------------------------------------------------------------------- the real supervisor


def test_the_supervisor_stops_a_gcs_loop_with_the_network_verdict_and_retries_once(tmp_path):
    """The real supervisor process, a fake verl printing the stand-in's GCS loop every 50 ms, the error-storm span
    shortened to 1 s, HANG_TIMEOUT left at 30 min: two attempts, each stopped on the repeat (``fatal``), the network
    verdict naming the address, then stop."""
    run_dir = new_run(
        tmp_path,
        steps=12,
        workdir=tmp_path,
        files={"loop.json": {"lines": START + GCS, "repeat": [GCS[0]], "interval_s": 0.05}},
        supervisor={
            "poll_interval_s": 0.1,
            "oom_grace_s": 0.3,
            "kill_grace_s": 3,
            "retry_delay_s": 0.2,
            "write_interval_s": 0.2,
            "storm_slow_span_s": 1.0,
        },
    )
    rec = run_to_end(run_dir, factory="loop_verl:factory", timeout=120)
    assert rec["status"] == "failed" and [a["killed_by"] for a in rec["attempts"]] == ["fatal", "fatal"]
    v = rec["verdict"]
    assert (v["cls"], v["detail"]["cause"], v["detail"]["address"]) == ("network", "ray-head", HEAD + ":6379")
    assert v["detail"]["repeated"]["cls"] == "network" and "repeated" in v["action"]
    assert rec["decision"]["action"] == "stop" and "network again after one retry" in rec["decision"]["reason"]
    assert "fatal network error repeating in attempt 1" in (run_dir / "supervisor.log").read_text()


def test_a_fatal_stop_whose_tail_reads_no_failure_keeps_the_repeating_lines_verdict(monkeypatch, tmp_path):
    """The attempt was stopped on a repeating fatal line, but the whole log's tail names no failure (a later healthy
    line won, or the loop's line fell out of the tail): the verdict read "... attempt stopped; keep running" and the run
    ended failed with no cause (a review). The repeating line's own verdict stands then."""
    clock = Clock()
    sc = _scanner(monkeypatch, clock)
    why, _ = _follow(sc, clock, START + GCS + [GCS[0]], 5.0)
    assert why == "fatal"
    alog = tmp_path / "attempt-1.log"
    alog.write_text("\n".join(START) + "\n")  # the tail holds no failure at all
    out = {"killed_by": "fatal", "exit_code": 143, "storm": sc.storm, "att": sc.att}
    v = escalate.attempt_verdict(str(alog), out, 12)
    assert (v["cls"], v["detail"]["cause"], v["detail"]["address"]) == ("network", "ray-head", HEAD + ":6379")
    assert "keep running" not in v["action"] and "attempt stopped" in v["action"]


def test_a_tracebacks_raise_line_and_frame_are_not_counted_beside_its_exception_line():
    """A real traceback prints the ``raise`` statement under its frame (``raise UsageError("api_key not configured
    (no-tty) ...")``) and then the exception line with the same text: the per-line live check counted one error as
    two toward an error storm (a helper's read of real wandb tracebacks)."""
    from dapo_ops.core.classify.logtail import fatal_signature

    tb = [
        '(TaskRunnerV1 pid=12)   File "/usr/lib/python3/site-packages/wandb/sdk/wandb_login.py", line 312, in login',
        '(TaskRunnerV1 pid=12)     raise UsageError("api_key not configured (no-tty). call wandb.login(key=[your_api_key])")',
        "(TaskRunnerV1 pid=12) wandb.errors.UsageError: api_key not configured (no-tty). call wandb.login(key=[your_api_key])",
    ]
    assert [fatal_signature(x) is not None for x in tb] == [False, False, True]
