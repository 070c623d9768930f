"""The tool's own tasks against REAL verl 0.9.1 + vLLM on an H200 (gpu/README.md, scenarios a..d, 2026-12-01):
the records they left (tests/fixtures/real-verl/tool-runs/<scenario>/: run.json, spec.json, train.log,
supervisor.log, status.txt, gpu-mem.csv; see its README.md) replayed through the project's own code: the
supervisor's log parsing (``logformat``), ``runstate``, ``classify``, ``ladder.decide``, the supervisor's command
builder (``attempt.build_argv``) and ``statusview``. Each test runs project code on a record and compares its answer
with what the real run did; the recorded facts alone are only checked where a test's answer depends on them.

The ladder tests replay the decision the supervisor made after the real OOM (``supervisor._supervise`` calls
``ladder.decide(fs, cls, detail, oom_used, max_oom_retries, other_used, settings)``) and require exactly the
rung that was applied and that then made the real run succeed: a ladder change that would not have fixed the
real run fails here.
"""

from __future__ import annotations

import csv
import gzip
import json
import re
from pathlib import Path

import pytest

from conftest import repo_module

from dapo_ops.agent.supervisor import attempt
from dapo_ops.core import classify
from dapo_ops.core import features
from dapo_ops.core import ladder
from dapo_ops.core import logformat
from dapo_ops.agent import runfiles
from dapo_ops.control.status import rows as statusview
from supervisor_helpers import log_facts, logged_verl_argv

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "tests" / "fixtures" / "real-verl" / "tool-runs"

# scenario -> (run id, final step == total, resumed_from of the last attempt, steps printed in train.log, attempts)
WANT = {
    "a-success": ("20261201-103327-4649", 3, None, [1, 2, 3], 1),
    "b-resume": ("20261201-103751-2688", 4, 3, [4], 1),
    "c-weight-sync-oom": ("20261201-104328-0ea0", 2, 1, [2], 2),  # attempt 1 saved step 1, OOM'd before its step line
    "d-update-oom": ("20261201-105114-ff3e", 1, None, [1], 2),  # save_freq -1: attempt 2 starts from scratch
    # a and b again after the redesign (core/agent/control/cli, every remote step a bundle op), 2026-12-01 14:02 UTC
    "a2-success": ("20261201-140200-91ad", 3, None, [1, 2, 3], 1),
    "b2-resume": ("20261201-140643-9a7a", 4, 3, [4], 1),
    "d-update-oom-release": ("20261201-122813-4def", 1, None, [1], 2),
    # a and b again after status looks entered with nsenter and runstate's import trims, 2026-12-01 15:51 UTC
    "a3-success": ("20261201-155147-ce59", 3, None, [1, 2, 3], 1),
    "b3-resume": ("20261201-155641-7c25", 4, 3, [4], 1),
    # a again after preflight's one-compose-per-group (the fingerprint read on the real host), 16:43 UTC
    "a4-success": ("20261201-164320-2cf4", 3, None, [1, 2, 3], 1),
    # a and b again at the start of the next session, main at d29b8fc (2026-12-01 18:30 UTC)
    "a5-success": ("20261201-183047-eb6b", 3, None, [1, 2, 3], 1),
    "b5-resume": ("20261201-183434-f411", 4, 3, [4], 1),
    # c again on main with the round-2 classifier (19:07 UTC): attempt 1 died by signal (exit 139) at the weight sync
    "c2-weight-sync-oom": ("20261201-190748-8464", 2, 1, [2], 2),
    # 2026-12-02 (issue 33): the four performance features ON (sdpa attention: no flash-attn wheel), a and its resume
    "g-features-a": ("20261202-010914-8d54", 3, None, [1, 2, 3], 1),
    "g-features-b": ("20261202-011404-5c35", 4, 3, [4], 1),
    # the tool's default plan of the speed comparison (gpu/h-speed.sh, bench/speed.md), 6 steps, features on
    "h-speed": ("20261202-011844-ac7d", 6, None, [1, 2, 3, 4, 5, 6], 1),
    # 2026-12-02 session 6: the speed comparison again after the plan's fsdp fix (bench/speed.md): pair a (the tool's
    # run; verl's keys by hand in a later call on a fresh machine) and pair b (both runs in one call, one machine)
    "h-speed-fsdp-a": ("20261202-201010-19f5", 6, None, [1, 2, 3, 4, 5, 6], 1),
    "h-speed-fsdp-b": ("20261202-223031-7084", 4, None, [1, 2, 3, 4], 1),
    # 2026-12-02 session 3 (issue 33 item 5, gpu/j-learned.sh 1): Qwen3-4B's shape with 48 layers (5.23 B) at the
    # DEFAULT rollout share 0.6: attempt 1 ran out in the weight sync before its step-1 line; no checkpoints
    # (save_freq -1), so attempt 2 on the rung trained steps 1 and 2 from scratch
    "j-learned": ("20261202-065903-4ae6", 2, None, [1, 2], 2),
    # 2026-12-02 session 4 (gpu/j-learned.sh seed): the same configuration launched on the learned rung (0.5): one
    # attempt, no OOM (tests/test_learned_real.py replays the plan)
    "j-learned-start": ("20261202-113015-85e1", 2, None, [1, 2], 1),
    # 2026-12-02 session 5 (gpu/k-megatron.sh, MEGA_ATTN=fused): `inv launch --framework megatron`, the four
    # features on (TE fused attention), a saved every step, b resumed a's global_step_3 and trained step 4
    "k-megatron-a": ("20261202-144823-bd89", 3, None, [1, 2, 3], 1),
    "k-megatron-b": ("20261202-145927-91cd", 4, 3, [4], 1),
}
# scenario -> (exit code of attempt 1, phase, rung, the one setting it changes, new value, old value, the spec
# setting that held the old value: MICRO_BATCH_SIZE -> settings.micro_batch_size, dapo_ops/control/settings.py)
OOMS = {
    "c-weight-sync-oom": (
        134,
        "weight-sync",
        "rollout-util",
        "gpu_memory_utilization",
        0.8,
        0.9,
        "gpu_memory_utilization",
    ),
    "d-update-oom": (143, "update", "update-batch", "ppo_micro_batch_size_per_gpu", 16, 64, "micro_batch_size"),
    "j-learned": (134, "weight-sync", "rollout-util", "gpu_memory_utilization", 0.5, 0.6, "gpu_memory_utilization"),
    "c2-weight-sync-oom": (
        139,
        "weight-sync",
        "rollout-util",
        "gpu_memory_utilization",
        0.8,
        0.9,
        "gpu_memory_utilization",
    ),
}
# the verl key each rung's setting reaches (verl/trainer/config/actor/actor.yaml, rollout/rollout.yaml)
VERL_KEY = {
    "gpu_memory_utilization": "actor_rollout_ref.rollout.gpu_memory_utilization",
    "ppo_micro_batch_size_per_gpu": "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
}


def done_row(rec):
    """The status row of a recorded run as ``inv status --all`` builds it (control/status/look.collect_rows): run.json
    alone, no log tail, 6 s after it ended."""
    return statusview.build_row("gpu", {"run": rec, "tail": "", "now": rec["ended_at"] + 6, "supervisor_alive": None})


def run_of(name: str) -> dict:
    rec = runfiles.read_run(RUNS / name)
    assert rec is not None, name
    return rec


def log_text(name: str) -> str:
    return (RUNS / name / "train.log").read_text(encoding="utf-8", errors="replace")


def attempt_text(name: str, k: int) -> str:
    """Attempt ``k``'s part of train.log, between the supervisor's ``===== dapo-ops attempt k start`` and
    ``... end`` delimiters (the supervisor writes them; ``classify`` judges the last attempt of a text)."""
    body = log_text(name)
    start = body.index("===== dapo-ops attempt %d start" % k)
    end = body.index("\n", body.index("===== dapo-ops attempt %d end" % k, start))
    return body[start : end + 1]


def parsed(text: str):
    steps, totals, resumes, _ = log_facts(re.split(r"[\r\n]", text))
    return steps, totals, resumes


# ---- repository hygiene of the committed records (not behaviour: they fail when a fixture is added that is too big,
# synthetic or holds a secret)


def test_fixtures_are_real_and_small():
    for name in WANT:
        for f in ("run.json", "spec.json", "train.log", "supervisor.log", "status.txt"):
            p = RUNS / name / f
            assert p.stat().st_size < 1 << 20, p
        assert "\x1b[36m(TaskRunnerV1 pid=" in log_text(name)  # Ray's cyan actor prefix: real verl output
    for p in RUNS.rglob("*.gz"):  # f-storm: the whole attempt log, gzipped, nothing trimmed
        assert p.stat().st_size < 64 << 10, p


def test_no_secret_in_fixtures():
    pat = re.compile(
        r"hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9]{20,}|ghp_[A-Za-z0-9]{20,}|AKIA[A-Z0-9]{16}|"
        r"(?i:(api[_-]?key|password|secret)\s*[=:]\s*\S{6,})"
    )
    for p in RUNS.rglob("*"):
        if p.is_file():
            hit = pat.search(
                gzip.decompress(p.read_bytes()).decode("utf-8", "replace")
                if p.suffix == ".gz"
                else p.read_text(encoding="utf-8", errors="replace")
            )
            assert hit is None, (p, hit and hit.group(0))


# ---- the records replayed through the project's readers


@pytest.mark.parametrize("name", sorted(WANT))
def test_supervisor_parsing_of_the_whole_train_log(name):
    _, total, resumed, want_steps, n_att = WANT[name]
    steps, totals, resumes = parsed(log_text(name))
    assert steps == want_steps
    assert totals == [total] * n_att  # verl prints "Total training steps" once per attempt
    assert resumes == ([resumed] if resumed is not None else [])


@pytest.mark.parametrize(
    "name,earlier",
    [
        ("b-resume", "a-success"),
        ("b2-resume", "a2-success"),
        ("b3-resume", "a3-success"),
        ("b5-resume", "a5-success"),
        ("g-features-b", "g-features-a"),
        ("k-megatron-b", "k-megatron-a"),
    ],
)
def test_resume_redoes_no_earlier_step(name, earlier):
    """b resumed a's global_step_3: the supervisor's grammar (logformat) reads the resume from step 3, training steps
    after it only, and a progress bar that starts at 3/4."""
    body = log_text(name)
    steps, totals, resumes = parsed(body)
    assert resumes == [3] and totals == [4]
    assert steps and all(s > 3 for s in steps)
    bars = [b for b in map(logformat.parse_progress_bar, logformat.split_lines(body)) if b]
    assert (bars[0].step, bars[0].total) == (3, 4) and (bars[-1].step, bars[-1].total) == (4, 4), bars
    assert runfiles.read_spec(RUNS / name)["resume_of"] == WANT[earlier][0]


@pytest.mark.parametrize("name", sorted(WANT))
def test_classifier_reads_the_final_attempt_as_success(name):
    total = WANT[name][1]
    n = WANT[name][4]
    v = classify.classify(attempt_text(name, n), exit_code=0, planned_total=total)
    assert v.cls == "success" and v.action_kind == "done"


@pytest.mark.parametrize("name", sorted(OOMS))
def test_classifier_real_oom_phase(name):
    exit_code, phase = OOMS[name][:2]
    rec = run_of(name)
    att1 = rec["attempts"][0]
    assert att1["exit_code"] == exit_code and att1["killed_by"] == "oom"
    v = classify.classify(attempt_text(name, 1), exit_code=exit_code)
    assert v.cls == "oom-device" and v.action_kind == "escalate-memory"
    assert v.detail.get("phase") == phase
    assert att1["verdict"]["cls"] == "oom-device" and att1["verdict"]["detail"]["phase"] == phase
    assert any(classify.is_device_oom_line(ln) for ln in re.split(r"[\r\n]", attempt_text(name, 1)))
    assert not any(classify.is_device_oom_line(ln) for ln in re.split(r"[\r\n]", attempt_text(name, 2)))


@pytest.mark.parametrize("name", ["c-weight-sync-oom", "c2-weight-sync-oom", "j-learned"])
def test_weight_sync_oom_is_vllm_wake_up(name):
    v = classify.classify(attempt_text(name, 1), exit_code=OOMS[name][0])
    assert any("cumem_allocator.cpp:163" in e for e in v.evidence)
    assert any("actor_rollout_update_weights" in e for e in v.evidence)


@pytest.mark.parametrize("name", sorted(OOMS))
def _decided(name: str):
    """``(spec, ladder decision)``: the supervisor's own call after attempt 1 (supervisor._supervise), fed the
    recorded spec and the verdict classified from the real attempt-1 log."""
    spec = runfiles.read_spec(RUNS / name)
    fs = features.FeatureSet.from_json(spec.get("features") or [], spec.get("disabled_features") or ())
    settings = dict(spec["settings"])
    settings.update(spec.get("setting_changes") or {})
    settings.setdefault("framework", spec.get("framework"))
    settings.setdefault("mode", spec.get("mode"))
    v = classify.classify(attempt_text(name, 1), exit_code=OOMS[name][0])
    return spec, ladder.decide(fs, v.cls, v.detail, 0, spec["max_oom_retries"], {}, settings)


def _verl_value(argv: list[str], key: str) -> str:
    """The value verl ends with for ``key`` in a main_ppo argv (Hydra applies overrides in order)."""
    return _last_override([a for a in argv if "=" in a], key)


def _logged_argv(name: str, k: int) -> list[str]:
    """Attempt ``k``'s verl command as the supervisor logged it on the real run (supervisor.log)."""
    return logged_verl_argv(RUNS / name, k)


@pytest.mark.parametrize("name", sorted(OOMS))
def test_ladder_chooses_the_rung_that_fixed_the_real_run(name):
    """The ladder must pick exactly the rung applied in attempt 2, the attempt that succeeded: written out here
    (phase, rung, the one setting, its value) and as recorded by the real run."""
    _, phase, rung, key, new, old, spec_key = OOMS[name]
    rec = run_of(name)
    spec, d = _decided(name)
    assert spec["settings"][spec_key] == old  # what attempt 1 ran with
    assert d.action == "retry" and d.counter == "oom"
    assert d.setting_changes == {
        key: new,
        "memory_rungs": [{"rung": rung, "phase": phase, "source": "oom-retry-1", "changes": {key: new}}],
    }
    assert d.setting_changes == rec["attempts"][1]["setting_changes"] == rec["setting_changes"]
    assert d.features.to_json() == rec["attempts"][1]["features"] == rec["attempts"][0]["features"]  # no feature
    assert rec["attempts"][1]["exit_code"] == 0


@pytest.mark.parametrize("name", sorted(OOMS))
def test_the_rung_reaches_verl(name):
    """The supervisor's command builder (attempt.build_argv) on the recorded spec: attempt 1 carries the spec's
    value of the rung's verl key, attempt 2 (the ladder's change) the rung's; the real run's logged commands say
    the same."""
    _, _, _, key, new, old, _ = OOMS[name]
    spec, d = _decided(name)
    fs = features.FeatureSet.from_json(spec.get("features") or [], spec.get("disabled_features") or ())
    a1 = attempt.build_argv(None, attempt.attempt_spec(spec, 1), fs, {})
    a2 = attempt.build_argv(None, attempt.attempt_spec(spec, 2), d.features, d.setting_changes)
    built = {1: _verl_value(a1, VERL_KEY[key]), 2: _verl_value(a2, VERL_KEY[key])}
    assert built == {1: str(old), 2: str(new)}
    assert built == {k: _verl_value(_logged_argv(name, k), VERL_KEY[key]) for k in (1, 2)}


@pytest.mark.parametrize("name", sorted(WANT))
def test_status_view_renders_the_record(name):
    _, total, _, _, n_att = WANT[name]
    rec = run_of(name)
    row = done_row(rec)
    assert row.state == "succeeded" and row.status == "succeeded"
    assert (row.step, row.total) == (total, total)
    assert row.attempt == n_att and len(row.attempts) == n_att
    assert row.verdict == "success"
    assert [a["cls"] for a in row.attempts] == ["oom-device"] * (n_att - 1) + ["success"]
    assert statusview.ending_line(rec) == "succeeded at step %d/%d" % (total, total)
    assert row.run_id == WANT[name][0] and rec["attempts"][-1]["resumed_from"] == WANT[name][2]


@pytest.mark.parametrize("name", sorted(WANT))
def test_status_view_with_the_real_tail(name):
    """What ``inv status`` reads: run.json + the last 64 KiB of train.log (dapo_ops/agent/runprobe.py)."""
    _, total, _, _, _ = WANT[name]
    rec = run_of(name)
    tail = log_text(name)[-(64 << 10) :]
    t = statusview.parse_tail(tail)
    assert t.step == total and (t.bar_step, t.bar_total) == (total, total)
    row = statusview.build_row(
        "gpu", {"run": rec, "tail": tail, "now": rec["ended_at"] + 6, "supervisor_alive": False, "verl_alive": False}
    )
    assert row.state == "succeeded" and (row.step, row.total) == (total, total)


# ---- 2026-12-02 (issue 33, issue 29): performance features on, the speed run, the real error storm -------------
FEATURE_RUNS = ("g-features-a", "g-features-b", "h-speed", "h-speed-fsdp-a", "h-speed-fsdp-b")
PERF = ["flash_attn", "dynamic_batch", "remove_padding", "gradient_checkpointing"]


def _last_override(overrides: list[str], key: str) -> str:
    """The value Hydra ends with for ``key`` (overrides apply in order; ``+``/``++`` prefixes name the same key)."""
    vals = [o.split("=", 1)[1] for o in overrides if o.lstrip("+").split("=", 1)[0] == key]
    return vals[-1]


@pytest.mark.parametrize("name", FEATURE_RUNS)
def test_features_on_are_recorded_and_reached_verl(name):
    """spec.json read by FeatureSet: the performance features on (source default; only flash_attn may be disabled,
    by USER_FEATURES, on the sdpa route), every attempt ran them; the supervisor's command builder
    (attempt.build_argv) on that spec turns each on in verl's argv, as the real run's logged command did. The
    attention verl got is sdpa (no flash-attn wheel on the device: the plan's spelling of ``-flash_attn``, or the
    scripts' ``++...attn_implementation=sdpa`` last, gpu/README.md), as verl's printed config says."""
    spec = runfiles.read_spec(RUNS / name)
    fs = features.FeatureSet.from_json(spec["features"], spec.get("disabled_features") or ())
    # the h-speed-fsdp runs took the sdpa route through the plan (USER_FEATURES=-flash_attn: FSDP spells it sdpa),
    # the earlier ones through a last ``++...attn_implementation=sdpa`` override
    on = [n for n in PERF if n not in fs.disabled]
    assert sorted(fs.names()) == sorted(on) and set(fs.disabled) <= {"flash_attn"} and len(on) >= 3
    assert all(fs.source_of(n) == "default" for n in on)
    rec = run_of(name)
    assert all(a["features"] == spec["features"] for a in rec["attempts"])
    built, logged = attempt.build_argv(None, attempt.attempt_spec(spec, 1), fs, {}), _logged_argv(name, 1)
    for key in (
        "actor_rollout_ref.actor.use_dynamic_bsz",
        "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz",
        "actor_rollout_ref.model.use_remove_padding",
        "actor_rollout_ref.model.enable_gradient_checkpointing",
    ):
        assert _verl_value(built, key) == _verl_value(logged, key) == "True", key
    assert _verl_value(logged, "actor_rollout_ref.model.override_config.attn_implementation") == "sdpa"
    body = logformat.strip_ansi(log_text(name))
    assert "'attn_implementation': 'sdpa'" in body and "'use_remove_padding': True" in body


@pytest.mark.parametrize("name", FEATURE_RUNS)
def test_features_runs_train_with_dynamic_batches(name):
    """Every step line of a features run, parsed by the supervisor's grammar (logformat.parse_metrics_line): the
    dynamic-batch token counts and the actor's peak memory are there (bench/memory_fit.csv holdout rows)."""
    from dapo_ops.core.logformat import parse_metrics_line, split_lines

    rows = dict(filter(None, (parse_metrics_line(ln) for ln in split_lines(log_text(name)))))
    assert sorted(rows) == WANT[name][3]
    for m in rows.values():
        assert m["perf/total_num_tokens"] > 0 and m["global_seqlen/mean"] == m["perf/total_num_tokens"]
        assert 1.5 < m["actor/perf/max_memory_allocated_gb"] < 3.0  # the tiny model: ~2 GB on the H200


def test_features_resume_status_row():
    """b resumed a's global_step_3 with the features on: the row says 4/4, one attempt, the same features."""
    rec = run_of("g-features-b")
    row = done_row(rec)
    assert (row.state, row.step, row.total, row.attempt) == ("succeeded", 4, 4, 1)
    assert rec["attempts"][0]["resumed_from"] == 3


STORM = RUNS / "f-storm"


def test_storm_record_and_status():
    """The run record the supervisor left after the real storm: failed at 1/4, one attempt killed by the storm,
    the verdict names bad_reward.py:5, one failure notice; the status row and ending line say so."""
    rec = runfiles.read_run(STORM)
    assert rec["run_id"] == "20261202-012824-df98" and rec["status"] == "failed"
    assert (rec["step"], rec["total_steps"], len(rec["attempts"])) == (1, 4, 1)
    v = rec["verdict"]
    assert v["cls"] == "error-storm" and v["detail"]["user_frame"] == "bad_reward.py:5"
    notices = [json.loads(ln) for ln in (STORM / "notices.jsonl").read_text().splitlines() if ln.strip()]
    assert len(notices) == 1 and notices[0]["verdict"] == "error-storm" and notices[0]["event"] == "failure"
    row = done_row(rec)
    assert row.state == "failed" and row.verdict == "error-storm" and (row.step, row.total) == (1, 4)
    assert "bad_reward.py:5" in statusview.ending_line(rec)
    # the log alone, after the fact: the live rules replayed on the log's own clock (issue 42 item 6; before it, the
    # classifier read only the SIGABRT of the kill: crash-other) give the supervisor's verdict, never a success
    v2 = classify.classify(gzip.decompress((STORM / "train.log.gz").read_bytes()).decode("utf-8", "replace"))
    assert (v2.cls, v2.detail["user_frame"], v2.action_kind) == ("error-storm", "bad_reward.py:5", "stop"), v2


# ---- 2026-12-02 session 5 (issue 33 item 2): Megatron through the tool, trained and resumed ------------------
MEGATRON_RUNS = ("k-megatron-a", "k-megatron-b")
_MTC = "actor_rollout_ref.actor.megatron.override_transformer_config"


@pytest.mark.parametrize("name", MEGATRON_RUNS)
def test_megatron_run_command_is_the_supervisors_and_verl_took_megatron(name):
    """spec.json of the real Megatron run rebuilt by the supervisor's command builder (attempt.build_argv) gives the
    exact verl command the supervisor logged on the H200: ``model_engine=megatron``, the four features on in their
    Megatron spelling (remove padding, dynamic batch, selective recompute; attention_backend flash from the plan,
    replaced by the run's last override ``fused``: no flash-attn wheel), the apex fusion off. verl's printed config
    says it ran the Megatron engine with those keys."""
    spec = runfiles.read_spec(RUNS / name)
    assert (spec["framework"], spec["accelerator"]) == ("megatron", "gpu")
    fs = features.FeatureSet.from_json(spec["features"], spec.get("disabled_features") or ())
    assert sorted(fs.names()) == sorted(PERF) and not fs.disabled
    built, logged = attempt.build_argv(None, attempt.attempt_spec(spec, 1), fs, {}), _logged_argv(name, 1)
    assert built[built.index("verl.trainer.main_ppo") + 1 :] == logged
    assert logged[0] == "model_engine=megatron"
    assert _last_override(logged, f"{_MTC}.attention_backend") == "fused"
    assert _last_override(logged, f"{_MTC}.recompute_granularity") == "selective"
    assert _last_override(logged, f"{_MTC}.gradient_accumulation_fusion") == "False"
    for key in ("actor_rollout_ref.model.use_remove_padding", "actor_rollout_ref.actor.use_dynamic_bsz"):
        assert _last_override(logged, key) == "True", key
    body = logformat.strip_ansi(log_text(name))
    for printed in ("'strategy': 'megatron'", "'attention_backend': 'fused'", "'use_mbridge': True"):
        assert printed in body, printed


def test_megatron_resume_trained_only_the_next_step_and_memory_held():
    """b resumed a's global_step_3 (verl's own 'Resuming from' line, read by the supervisor's grammar) and trained
    step 4 only; every step line of both runs carries the actor's peak memory, ~2.1 GB for the tiny model on the
    Megatron engine (bench/memory_fit.csv holdout rows k-megatron-*)."""
    from dapo_ops.core.logformat import parse_metrics_line, split_lines

    assert run_of("k-megatron-b")["attempts"][0]["resumed_from"] == 3
    assert runfiles.read_spec(RUNS / "k-megatron-b")["resume_of"] == WANT["k-megatron-a"][0]
    for name in MEGATRON_RUNS:
        rows = dict(filter(None, (parse_metrics_line(ln) for ln in split_lines(log_text(name)))))
        assert sorted(rows) == WANT[name][3]
        for m in rows.values():
            assert 1.5 < m["actor/perf/max_memory_allocated_gb"] < 3.0
            assert m["perf/total_num_tokens"] > 0


# ---- 2026-12-02 session 6 (issue 33 item 4): the speed comparison after the plan's fsdp fix ---------------------
SPEED_PAIRS = ("h-speed-fsdp-a", "h-speed-fsdp-b")


def _speed_table():
    """bench/speed_table.py, the script gpu/h-speed.sh runs on the device (bench/speed.md's tables)."""
    return repo_module("bench/speed_table.py")


@pytest.mark.parametrize("name", SPEED_PAIRS)
def test_tool_not_slower_than_verls_keys_after_the_fsdp_fix(name):
    """bench/speed_table.py on the pair's two real logs (the tool's train.log, verl's keys by hand in verl.log; the
    same model, data and step count; warm-up step 1 left out): the tool's mean s/step is no worse than verl's and
    its tokens/s no lower, at the same actor peak memory. The same code on the first comparison (h-speed: the tool
    on fsdp2) gives the 0.886 bench/speed.md recorded, so the figure is read, not assumed."""
    st = _speed_table()
    t = st.figures(RUNS / name / "train.log")
    v = st.figures(RUNS / name / "verl.log")
    assert t["steps"] == v["steps"] >= 3
    assert st.ratio("s/step", t["s/step"], v["s/step"]) >= 1.0
    assert (
        st.ratio(
            "tokens/s (total_num_tokens/step)",
            t["tokens/s (total_num_tokens/step)"],
            v["tokens/s (total_num_tokens/step)"],
        )
        >= 1.0
    )
    assert abs(t["peak alloc GB"] - v["peak alloc GB"]) < 0.02
    old = RUNS / "h-speed"
    before = st.ratio("s/step", st.figures(old / "train.log")["s/step"], st.figures(old / "verl.log")["s/step"])
    assert round(before, 3) == 0.886


@pytest.mark.parametrize("name", SPEED_PAIRS)
def test_the_named_key_reached_verl_and_no_actor_key_differs(name):
    """The key bench/speed.md named (``actor.strategy`` fsdp2 on a one-device training pool) is verl's ``fsdp`` in
    the supervisor's command rebuilt from spec.json (attempt.build_argv), in the command it logged, and in verl's
    printed config; torch then says it runs NO_SHARD (as in verl's own run). The resolved configs of the tool and
    verl's keys now differ only in DAPO's and the single-async mode's keys: nothing of the actor, ref or model. On the
    first comparison (h-speed) the same diff held the strategy."""
    st = _speed_table()
    spec = runfiles.read_spec(RUNS / name)
    fs = features.FeatureSet.from_json(spec["features"], spec.get("disabled_features") or ())
    built, logged = attempt.build_argv(None, attempt.attempt_spec(spec, 1), fs, {}), _logged_argv(name, 1)
    assert (
        _verl_value(built, "actor_rollout_ref.actor.strategy")
        == _verl_value(logged, "actor_rollout_ref.actor.strategy")
        == "fsdp"
    )
    tool, verl = RUNS / name / "train.log", RUNS / name / "verl.log"
    assert st.printed_config(tool)["actor_rollout_ref.actor.strategy"] == "fsdp"
    assert "NO_SHARD" in log_text(name) and "NO_SHARD" not in log_text("h-speed")
    diff = st.config_diff(tool, verl)
    assert set(diff) == {
        "actor_rollout_ref.actor.clip_ratio_c",  # DAPO's dual-clip bound (the runbook's 10.0)
        "actor_rollout_ref.rollout.max_model_len",  # the plan's prompt + response
        "algorithm.filter_groups.enable",  # DAPO dynamic sampling
        "algorithm.filter_groups.metric",
        "reward.reward_kwargs.max_resp_len",  # DAPO's overlong-buffer reward
        "reward.reward_kwargs.overlong_buffer_cfg.enable",
        "reward.reward_kwargs.overlong_buffer_cfg.len",
        "reward.reward_kwargs.overlong_buffer_cfg.log",
        "reward.reward_kwargs.overlong_buffer_cfg.penalty_factor",
        "reward.reward_manager.name",
        "trainer.max_actor_ckpt_to_keep",
        "trainer.resume_mode",
        "trainer.v1.sampler.max_off_policy_threshold",  # the single-async mode (V1 colocate_async)
        "trainer.v1.trainer_mode",
    }, diff
    assert diff["trainer.v1.trainer_mode"] == ("colocate_async", "sync")
    old = st.config_diff(RUNS / "h-speed" / "train.log", RUNS / "h-speed" / "verl.log")
    assert old["actor_rollout_ref.actor.strategy"] == ("fsdp2", "fsdp")


def test_a_measured_pair_becomes_one_speed_csv_row(tmp_path):
    """bench/speed_table.py's ``csv_row`` / ``write_row`` (issue 45's bench/speed.csv) on pair b's real logs and
    spec: params from the spec's recorded model shape (the tiny Qwen2: ~1.3 M), prompt/response from the config verl
    printed (128/64), the measured steps and the two means of ``figures``; writing it twice keeps one row. A pair of
    different shapes is refused."""
    st = _speed_table()
    d = RUNS / "h-speed-fsdp-b"
    spec = runfiles.read_spec(d)
    row = st.csv_row(d / "train.log", d / "verl.log", spec, "tiny", "H200", 1)
    t, v = st.figures(d / "train.log"), st.figures(d / "verl.log")
    assert row == {
        "model": "tiny",
        "params_b": "0.001",
        "prompt": "128",
        "response": "64",
        "steps": "3",
        "tool_s_step": f"{t['s/step']:.3f}",
        "verl_s_step": f"{v['s/step']:.3f}",
        "device": "H200",
    }
    assert float(row["verl_s_step"]) / float(row["tool_s_step"]) > 1.2
    out = tmp_path / "speed.csv"
    st.write_row(out, row)
    assert st.write_row(out, row) == [row]
    assert out.read_text().splitlines()[0] == ",".join(st.CSV_COLUMNS)
    longer = tmp_path / "verl.log"  # verl's run at another response length
    longer.write_text((d / "verl.log").read_text().replace("'max_response_length': 64", "'max_response_length': 2048"))
    with pytest.raises(ValueError, match="differ"):
        st.csv_row(d / "train.log", longer, spec, "tiny", "H200", 1)


#: every measured pair of bench/speed.csv: its fixture (tool train.log + spec.json, verl's keys in verl.log), model
#: name and device; the CSV is what bench/speed_table.py --csv writes from them, row for row
# (tool log, verl log, tool spec dir, model, device, warm-up steps left out): one per bench/speed.csv row
SPEED_CSV_PAIRS = (
    ("h-speed-fsdp-a/train.log", "h-speed-fsdp-a/verl.log", "h-speed-fsdp-a", "tiny-qwen2", "H200", 1),
    ("h-speed-fsdp-b/train.log", "h-speed-fsdp-b/verl.log", "h-speed-fsdp-b", "tiny-qwen2", "H200", 1),
    # the real shape's first pair: the tool half of the plan before the packed cap (fourth session) and verl's
    # whole half (sixth session), two H100 machines (bench/speed.md says what that costs the ratio)
    (
        "o-speed-tool1-h100/train.log.gz",
        "o-speed-verl1-h100/verl.log.gz",
        "o-speed-tool1-h100",
        "qwen3-1.7b",
        "H100",
        2,
    ),
)


def test_bench_speed_csv_is_the_measured_pairs_rows():
    """bench/speed.csv (issue 45) holds one row per measured pair, each equal to what ``csv_row`` computes from the
    pair's real logs now (warm-up step 1 left out, as bench/speed.md's tables): no row typed by hand."""
    st = _speed_table()
    rows = list(csv.DictReader((ROOT / "bench" / "speed.csv").open()))
    want = [
        st.csv_row(RUNS / tool, RUNS / verl, runfiles.read_spec(RUNS / spec), model, dev, skip)
        for tool, verl, spec, model, dev, skip in SPEED_CSV_PAIRS
    ]
    assert rows == want


def test_speed_table_prints_the_table_when_the_csv_row_cannot_be_made(tmp_path):
    """A spec without the model shape costs the bench/speed.csv row only: the table still prints (gpu/o-speed.sh
    keeps it as speed.md) and the reason goes to stderr."""
    import subprocess
    import sys

    d = RUNS / "h-speed-fsdp-b"
    (tmp_path / "spec.json").write_text("{}")
    res = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "speed_table.py"), str(d / "train.log"), str(d / "verl.log")]
        + ["--csv", str(tmp_path / "s.csv"), "--spec", str(tmp_path / "spec.json"), "--model", "m", "--device", "H200"],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr
    assert "| s/step | 2.896 | 3.687 | 1.273 (verl/tool) |" in res.stdout
    assert "records no model shape" in res.stderr and not (tmp_path / "s.csv").exists()


def test_the_real_shape_tool_half_figures_are_bench_speed_mds():
    """bench/speed.md's table of o-speed-tool1-h100 (steps 3-12 of the tool's half at Qwen3-1.7B's shape) is
    bench/speed_table.py's reading of the gzipped fixture: s/step, each phase and tokens/s, to the printed digits."""
    f = _speed_table().figures(RUNS / "o-speed-tool1-h100" / "train.log.gz", skip=2)
    md = (RUNS.parents[3] / "bench" / "speed.md").read_text()
    table = md[md.index("The tool's half, steps 3-12") :].split("\n\n")[1]
    rows = {r.split("|")[1].strip(): r.split("|")[2].strip() for r in table.splitlines()[2:]}
    assert f["steps"] == 10
    assert rows["s/step"] == f"{f['s/step']:.2f}"
    assert rows["old_log_prob s (log-prob budget 57 344)"] == f"{f['old_log_prob s']:.2f}"
    assert rows["update_actor s (update budget 11 264, no gradient checkpointing)"] == f"{f['update_actor s']:.2f}"
    assert rows["gen s (colocate_async: the prefetched batch's rest)"] == f"{f['gen s']:.2f}"
    assert rows[
        "tokens/s/device (verl's `perf/throughput`)"
    ] == f"{f['tokens/s (total_num_tokens/step)']:,.0f}".replace(",", " ")


def test_verls_cut_half_figures_are_bench_speed_mds():
    """bench/speed.md's table of verl's half cut at step 4 (o-speed-verl1-h100-cut: steps 3-4 of verl's keys by
    hand) is bench/speed_table.py's reading of the gzipped console log, and the tool column is o-speed-tool1-h100's."""
    st = _speed_table()
    verl = st.figures(RUNS / "o-speed-verl1-h100-cut" / "verl.log.gz", skip=2)
    tool = st.figures(RUNS / "o-speed-tool1-h100" / "train.log.gz", skip=2)
    md = (RUNS.parents[3] / "bench" / "speed.md").read_text()
    table = md[md.index("| figure (steps 3-4) |") :].split("\n\n")[0]
    rows = {r.split("|")[1].strip(): [c.strip() for c in r.split("|")[2:4]] for r in table.splitlines()[2:]}
    assert verl["steps"] == 2 and tool["steps"] == 10
    for label, key in (("s/step", "s/step"), ("gen s", "gen s"), ("actor peak allocated GB", "peak alloc GB")):
        assert rows[label] == [f"{verl[key]:.2f}", f"{tool[key]:.2f}"], label
    for label in ("old_log_prob s", "update_actor s"):
        assert [c.split(" (")[0] for c in rows[label]] == [f"{verl[label]:.2f}", f"{tool[label]:.2f}"], label
    # verl's budgets as its argv printed them (its printed config), beside the column's words
    flat = st.printed_config(RUNS / "o-speed-verl1-h100-cut" / "verl.log.gz")  # its Python warnings interleave
    assert flat.get("actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu") == 7680
    assert flat.get("actor_rollout_ref.actor.ppo_max_token_len_per_gpu") == 5120


def test_the_first_real_shape_pair_is_bench_speed_mds():
    """bench/speed.md's table of the real shape's first pair (the tool's half o-speed-tool1-h100, the plan before the
    packed cap; verl's whole half o-speed-verl1-h100, 12/12 steps) is bench/speed_table.py's reading of the two
    gzipped logs, steps 3-12, ratio verl / tool, and verl's budgets are those its printed config ran."""
    st = _speed_table()
    tool = st.figures(RUNS / "o-speed-tool1-h100" / "train.log.gz", skip=2)
    verl = st.figures(RUNS / "o-speed-verl1-h100" / "verl.log.gz", skip=2)
    md = (RUNS.parents[3] / "bench" / "speed.md").read_text()
    table = md[md.index("| figure (steps 3-12) |") :].split("\n\n")[0]
    rows = {r.split("|")[1].strip(): [c.strip() for c in r.split("|")[2:5]] for r in table.splitlines()[2:]}
    assert tool["steps"] == verl["steps"] == 10
    labels = {"s/step": "s/step", "gen s": "gen s", "old_log_prob s": "old_log_prob s"}
    labels |= {"update_actor s": "update_actor s", "actor peak allocated GB": "peak alloc GB"}
    for label, key in labels.items():
        got = [c.split(" (")[0] for c in rows[label][:2]]
        assert got == [f"{tool[key]:.2f}", f"{verl[key]:.2f}"], label
        assert rows[label][2] == f"{verl[key] / tool[key]:.3f}", label
    tput = [f"{f['tokens/s (total_num_tokens/step)']:,.0f}".replace(",", " ") for f in (tool, verl)]
    assert rows["tokens/s/device"][:2] == tput
    k = "tokens/s (total_num_tokens/step)"
    assert rows["tokens/s/device"][2] == f"{verl[k] / tool[k]:.3f}"
    flat = st.printed_config(RUNS / "o-speed-verl1-h100" / "verl.log.gz")
    assert flat.get("actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu") == 7680
    assert flat.get("actor_rollout_ref.actor.ppo_max_token_len_per_gpu") == 5120
    assert flat.get("actor_rollout_ref.model.enable_gradient_checkpointing") is True
    assert flat.get("actor_rollout_ref.rollout.gpu_memory_utilization") == 0.6


def test_an_npu_oom_whose_worker_printed_the_pta_code_first_keeps_the_allocation_and_the_trainer_side():
    """torch_npu's worker prints ``ERR00006 PTA memory error`` (CANN's log, on the worker's stream) before the driver's
    report, whose RayTaskError carries the worker's frames and the ``NPU out of memory. Tried to allocate`` line:
    d-update-oom's real V1 attempt in NPU words. The verdict was made on the bare code line, so it lost the
    allocation size and the side (the weight-sync ladder's pick, memladder.phase_rungs) that the worded line names."""
    text = attempt_text("d-update-oom", 1)
    real_oom = next(ln for ln in text.splitlines() if ln.startswith("torch.OutOfMemoryError: CUDA out of memory."))
    npu_oom = (
        "RuntimeError: NPU out of memory. Tried to allocate 494.00 MiB (NPU 0; 60.96 GiB total capacity; 52.18 GiB "
        "already allocated; 52.18 GiB current active; 0.39 GiB free; 56.84 GiB reserved in total by PyTorch)"
    )
    pta = "\x1b[36m(WorkerDict pid=17682)\x1b[0m [ERROR] 2026-12-01-10:55:08 (PID:17682, Device:0, RankID:0) ERR00006 PTA memory error"
    text = text.replace(real_oom, npu_oom).replace("RayTaskError(OutOfMemoryError)", "RayTaskError(RuntimeError)")
    text = text.replace("Error executing job with overrides:", pta + "\nError executing job with overrides:", 1)
    v = classify.classify(text, exit_code=1)
    assert v.cls == "oom-device" and v.detail["phase"] == "update", v.to_json()
    assert v.detail.get("side") == "trainer" and v.detail.get("alloc_gib") == 0.48, v.detail
    assert any(e.startswith("RuntimeError: NPU out of memory. Tried to allocate 494.00 MiB") for e in v.evidence), (
        v.evidence
    )
