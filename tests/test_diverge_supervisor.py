"""The supervisor against a diverging trainer (issue 42 item 1): the real supervisor process on a fake verl
(tests/fake_verl.py ``diverge_at``) that prints what verl 0.9.1 prints when the metrics go bad (the worker's
``WARN: grad_norm is not finite: nan``, verl/workers/engine/fsdp/transformer_impl.py:824, NaN in the step line; or
``actor/lr:1e+30`` and then endless generation with no step line). Decided by recurrence (Megatron-LM's
RerunStateMachine): one retry from the last checkpoint saved before the bad step; the same metric bad again at that
step is ``diverged``, stopped, with verl's tracker pointing at the last healthy checkpoint.
"""

from __future__ import annotations

import re

from dapo_ops.agent.supervisor.checkpoints import TRACKER_NAME, roll_back
from dapo_ops.core import health
from supervisor_helpers import new_run, run_to_end


def _resumes(run_dir, k):
    text = (run_dir / ("attempt-%d.log" % k)).read_text()
    m = re.search(r"Resuming from \S*global_step_(\d+)", text)
    return int(m.group(1)) if m else None


def test_nan_grad_norm_retries_once_from_the_checkpoint_before_then_stops_diverged(tmp_path):
    wd = tmp_path / "wd"
    wd.mkdir()
    # saves every step; step 5 goes NaN in every attempt: global_step_5 (saved before step 5's line) is bad
    run_dir = new_run(tmp_path, steps=10, workdir=wd, files={"fake.json": {"diverge_at": 5, "save_freq": 1}})
    rec = run_to_end(run_dir)
    assert rec["status"] == "failed", rec
    v = rec["verdict"]
    assert v["cls"] == "diverged" and v["action_kind"] == "stop", v
    d = v["detail"]
    assert (d["metric"], d["bad_step"], d["shown"], d["recurred"]) == ("actor/grad_norm", 5, "nan", True), d
    assert "grad_norm nan at step 5" in v["action"] and "learning rate" in v["hint"]
    # exactly one retry, from the checkpoint before the bad step (4), never global_step_5
    assert len(rec["attempts"]) == 2
    assert [a["verdict"]["cls"] for a in rec["attempts"]] == ["diverged", "diverged"]
    assert rec["attempts"][0]["verdict"]["action_kind"] == "retry-once"
    # the retry's action names where it starts (the real l-diverge run read "from the last checkpoint saved before
    # step 1", which does not exist)
    assert (
        "retry once from the last checkpoint saved before step 5 (global_step_4)"
        in rec["attempts"][0]["verdict"]["action"]
    ), rec["attempts"][0]["verdict"]["action"]
    assert rec["attempts"][1]["resumed_from"] == 4 and _resumes(run_dir, 2) == 4
    # the run's record: first bad step, the healthy checkpoint, the trend status shows
    h = rec["health"]
    assert (h["first_bad"]["step"], h["bad_step"], h["healthy_step"]) == (5, 5, 4), h
    assert health.trend_text(h).startswith("grad_norm 0.31 -> nan (step 5)"), h
    # verl's tracker names the last healthy checkpoint: a --resume starts there
    assert (run_dir / "checkpoints" / TRACKER_NAME).read_text().strip() == "4"
    # the resume as a person pastes it: with -H (without it `inv launch` plans a run on every host)
    want = "then `inv launch -H local --resume %s` continues" % rec["run_id"]
    assert any(want in s and "before step 5" in s for s in rec["decision"]["suggestions"]), rec["decision"]


def test_a_transient_bad_step_is_retried_and_the_run_goes_on(tmp_path):
    wd = tmp_path / "wd"
    wd.mkdir()
    cfg = {"diverge_at": 3, "diverge_attempts": 1, "save_freq": 1}  # only attempt 1 goes bad: not reproducible
    run_dir = new_run(tmp_path, steps=6, workdir=wd, files={"fake.json": cfg})
    rec = run_to_end(run_dir)
    assert rec["status"] == "succeeded", rec
    assert [a["verdict"]["cls"] for a in rec["attempts"]] == ["diverged", "success"]
    assert rec["attempts"][1]["resumed_from"] == 2


def test_absurd_lr_then_endless_generation_is_named_at_step_one_not_after_the_hang_timeout(tmp_path):
    """The H200's "hang after step 1": step 1 prints actor/lr:1e+30, then DAPO's filter_groups regenerate for ever
    (output, no step line). The watch names it at step 1's line; no checkpoint before it: the retry is from
    scratch; it recurs: diverged (hang_timeout_s is 1800 s here, so a hang verdict could not come in time)."""
    wd = tmp_path / "wd"
    wd.mkdir()
    cfg = {"diverge_at": 1, "diverge_metric": "lr", "save_freq": 1}
    run_dir = new_run(tmp_path, steps=10, workdir=wd, files={"fake.json": cfg})
    rec = run_to_end(run_dir)
    v = rec["verdict"]
    assert (v["cls"], v["action_kind"], v["detail"]["metric"], v["detail"]["bad_step"]) == (
        "diverged",
        "stop",
        "actor/lr",
        1,
    ), v
    assert v["detail"]["reason"] == "lr" and "1e+30" in v["action"]
    assert len(rec["attempts"]) == 2 and rec["attempts"][1]["resumed_from"] is None  # from scratch
    assert rec["health"]["healthy_step"] is None


def test_resumed_diverged_run_starts_from_the_healthy_checkpoint_and_a_recurrence_stops_at_once(tmp_path):
    """spec ``diverged_at`` (what ``inv launch --resume`` of a diverged run carries): the first attempt resumes from
    the last checkpoint before that step even when the tracker names a later one, and the same metric bad at the
    same step is persistent at once (no second retry)."""
    wd = tmp_path / "wd"
    wd.mkdir()
    ckpt = tmp_path / "ck"
    for s in (2, 4, 5, 6):
        (ckpt / ("global_step_%d" % s) / "actor").mkdir(parents=True)
        (ckpt / ("global_step_%d" % s) / "actor" / "m.pt").write_text("x")
    (ckpt / TRACKER_NAME).write_text("6")
    run_dir = new_run(
        tmp_path,
        steps=10,
        workdir=wd,
        settings={"ckpt_dir": str(ckpt)},
        diverged_at={"metric": "actor/grad_norm", "step": 5},
        files={"fake.json": {"diverge_at": 5, "save_freq": 1}},
    )
    rec = run_to_end(run_dir)
    assert rec["attempts"][0]["resumed_from"] == 4 and _resumes(run_dir, 1) == 4
    assert len(rec["attempts"]) == 1 and rec["verdict"]["cls"] == "diverged"
    assert rec["verdict"]["detail"]["recurred"] is True and rec["verdict"]["action_kind"] == "stop"


def test_roll_back_never_names_a_checkpoint_at_or_after_the_bad_step(tmp_path):
    for s in (1, 3, 5):
        (tmp_path / ("global_step_%d" % s) / "actor").mkdir(parents=True)
        (tmp_path / ("global_step_%d" % s) / "actor" / "m.pt").write_text("x")
    (tmp_path / "global_step_4").mkdir()  # torn: no actor state
    (tmp_path / TRACKER_NAME).write_text("5")
    assert roll_back(str(tmp_path), 5) == 3
    assert (tmp_path / TRACKER_NAME).read_text() == "3"
    assert roll_back(str(tmp_path), 1) is None  # nothing before step 1: from scratch
    assert not (tmp_path / TRACKER_NAME).exists() and (tmp_path / (TRACKER_NAME + ".diverged")).exists()


def test_a_retry_from_an_earlier_checkpoint_puts_the_runs_step_back_to_it(tmp_path):
    """The run's step is what the current attempt trains from, not the step a lost attempt reached: on the H200
    (tests/fixtures/real-verl/tool-runs/l-diverge) `inv status` showed "1/6, ETA 41s" while a retry from scratch was
    still starting. Attempt 1 goes bad at step 3 (global_step_2 saved); attempt 2 resumes from 2 and fails before
    its step 3: the run stood at step 2."""
    wd = tmp_path / "wd"
    wd.mkdir()
    cfg = {"diverge_at": 3, "diverge_attempts": 1, "save_freq": 1, "exit_at": 3, "exit_from_attempt": 2}
    run_dir = new_run(tmp_path, steps=6, workdir=wd, files={"fake.json": cfg})
    rec = run_to_end(run_dir)
    assert (
        rec["attempts"][0]["verdict"]["cls"] == "diverged" and rec["attempts"][0]["step_reached"] >= 3
    )  # the stop may land after step 4
    assert rec["attempts"][1]["resumed_from"] == 2 and rec["attempts"][1]["step_reached"] != 3
    assert rec["step"] == 2, rec["step"]
    assert "step 2/6" in rec["decision"]["ended"], rec["decision"]


def test_a_retry_from_scratch_is_not_called_a_retry_from_a_checkpoint(tmp_path):
    """A second new user's trial (MAX_CKPT_TO_KEEP=1, --save-freq 1, lr bad at step 4): verl's rotation had deleted
    global_step_3 when it saved the bad step 4, the retry trained from scratch, and the ending line still said
    "again after one retry from a checkpoint before it". Here no save before the bad step (save_freq 10)."""
    wd = tmp_path / "wd"
    wd.mkdir()
    run_dir = new_run(tmp_path, steps=6, workdir=wd, files={"fake.json": {"diverge_at": 3, "save_freq": 10}})
    rec = run_to_end(run_dir)
    assert [a["resumed_from"] for a in rec["attempts"]] == [None, None], rec["attempts"]
    assert rec["verdict"]["cls"] == "diverged" and rec["verdict"]["detail"]["retried_from"] is None
    assert (
        "again after one retry from the start (that retry found no complete checkpoint before step 3)"
        in rec["decision"]["ended"]
    ), rec["decision"]
    assert "from a checkpoint before it" not in rec["decision"]["ended"]


def test_a_retry_with_no_checkpoint_before_the_bad_step_says_it_starts_from_the_start(tmp_path):
    """A bad step before any save (the real l-diverge run: lr bad at step 1): the retry's action said "retry once
    from the last checkpoint saved before step 1"; it trains from the start and says so."""
    wd = tmp_path / "wd"
    wd.mkdir()
    cfg = {"diverge_at": 2, "diverge_attempts": 1, "save_freq": 5}
    run_dir = new_run(tmp_path, steps=4, workdir=wd, files={"fake.json": cfg})
    rec = run_to_end(run_dir)
    a1 = rec["attempts"][0]["verdict"]
    assert a1["cls"] == "diverged" and a1["detail"]["healthy_step"] is None, a1
    assert "before step 2: none is left, so from the start;" in a1["action"], a1["action"]
    assert rec["attempts"][1]["resumed_from"] is None
