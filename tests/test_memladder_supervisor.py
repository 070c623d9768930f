"""The supervisor applies and records a setting-change rung of the phase ladder (fake verl, no hosts): an
update-phase OOM that only a smaller update token budget avoids (offload would not, as on real verl 0.9.1)."""

from test_supervisor import make_run, run_to_end, steps_per_attempt  # the supervisor's own harness (fake verl)

UPDATE_FRAME = '  File "/verl/verl/workers/actor/dp_actor.py", line 523, in update_policy'
ACTOR = "actor_rollout_ref.actor.ppo_max_token_len_per_gpu"


def test_update_oom_is_fixed_by_the_token_budget_rung_recorded_with_its_source(tmp_path):
    run_dir = make_run(
        tmp_path,
        {
            "step_time": 0.03,
            "oom_at": 3,
            "oom_unless": [],
            "save_freq": 2,
            "oom_unless_changes": ["token_budgets"],
            "oom_frame": UPDATE_FRAME,
        },
    )
    rec = run_to_end(run_dir)
    assert rec["status"] == "succeeded", rec
    a1, a2 = rec["attempts"]
    assert a1["verdict"]["cls"] == "oom-device" and a1["verdict"]["detail"]["phase"] == "update"
    ch = a2["setting_changes"]
    assert ch["token_budgets"] == {ACTOR: 2048 + 8192}  # 2 x (prompt + response) -> prompt + response
    assert ch["memory_rungs"] == [
        {
            "rung": "update-batch",
            "phase": "update",
            "source": "oom-retry-1",
            "changes": {"token_budgets": {ACTOR: 10240}},
        }
    ]
    assert not any(f["name"] == "offload" for f in a2["features"])  # offload is not an update-phase rung
    assert rec["setting_changes"] == ch and a2["resumed_from"] == 2
    assert steps_per_attempt((run_dir / "train.log").read_text())[2] == [3, 4, 5, 6]
    assert '"token_budgets"' in (run_dir / "attempt-2.log").read_text()  # the fake verl got it in its argv


def test_first_attempt_starts_from_the_estimates_setting_changes(tmp_path):
    start = {
        "gpu_memory_utilization": 0.5,
        "memory_rungs": [
            {
                "rung": "rollout-util",
                "phase": "weight-sync",
                "source": "estimate",
                "changes": {"gpu_memory_utilization": 0.5},
            }
        ],
    }
    run_dir = make_run(tmp_path, {"step_time": 0.03, "oom_at": None}, extra={"setting_changes": start})
    rec = run_to_end(run_dir)
    assert rec["status"] == "succeeded", rec
    assert rec["attempts"][0]["setting_changes"] == start and rec["setting_changes"] == start
    assert '"gpu_memory_utilization": 0.5' in (run_dir / "attempt-1.log").read_text()


def test_a_rung_that_gets_past_the_oom_is_filed_as_a_learned_start_and_the_next_run_starts_there(tmp_path):
    """The supervisor files the memo (core/learned.py) once the attempt on the rung logs the step that ran out; a
    run started from it (learned.apply, as the plan does) needs no OOM retry and files nothing new."""
    import json

    from dapo_ops.core import features, learned

    learn = {"fingerprint": "0123456789abcdef", "key": {"version": 1, "host": {"device_gib": 140}}}
    fake = {
        "step_time": 0.03,
        "oom_at": 3,
        "oom_unless": [],
        "save_freq": 2,
        "oom_unless_changes": ["token_budgets"],
        "oom_frame": UPDATE_FRAME,
    }
    run_dir = make_run(tmp_path, fake, extra={"learn": learn})
    rec = run_to_end(run_dir)
    assert rec["status"] == "succeeded" and len(rec["attempts"]) == 2, rec
    path = tmp_path / "runs" / ".learned" / "0123456789abcdef.json"
    memo = json.loads(path.read_text())
    assert memo["key"] == learn["key"] and memo["run_id"] == rec["run_id"]
    assert memo["ran_out"] == {"phase": "update", "phases": ["update"], "attempt": 1, "step": 3}
    assert memo["passed_step"] >= 3 and learned.rung_names(memo) == ["update-batch(update)"]
    assert memo["rung"]["setting_changes"]["token_budgets"] == {ACTOR: 10240}
    assert rec["learned_memo"]["path"] == str(path) and rec["learned_memo"]["rungs"] == ["update-batch(update)"]
    assert "learned start filed" in (run_dir / "supervisor.log").read_text()

    fs, changes = learned.apply(memo, features.resolve(None))
    run2 = make_run(tmp_path, fake, extra={"learn": learn, "setting_changes": changes, "features": fs.to_json()})
    rec2 = run_to_end(run2)
    assert rec2["status"] == "succeeded" and len(rec2["attempts"]) == 1, rec2  # no OOM retry
    assert [r["source"] for r in rec2["setting_changes"]["memory_rungs"]] == ["learned"]
    assert json.loads(path.read_text())["run_id"] == rec["run_id"] and "learned_memo" not in rec2
