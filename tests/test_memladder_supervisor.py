"""The supervisor applies and records a setting-change rung of the phase ladder (fake verl, no hosts): an
update-phase OOM that only a smaller update token budget avoids (offload would not, as on real verl 0.9.1)."""

from test_supervisor import make_run, run_to_end, steps_per_attempt  # the supervisor's own harness (fake verl)

UPDATE_FRAME = '  File "/verl/verl/workers/actor/dp_actor.py", line 523, in update_policy'
ACTOR = "actor_rollout_ref.actor.ppo_max_token_len_per_gpu"


def test_update_oom_is_fixed_by_the_token_budget_rung_recorded_with_its_source(tmp_path):
    run_dir = make_run(tmp_path, {"step_time": 0.03, "oom_at": 3, "oom_unless": [], "save_freq": 2,
                                  "oom_unless_changes": ["token_budgets"], "oom_frame": UPDATE_FRAME})
    rec = run_to_end(run_dir)
    assert rec["status"] == "succeeded", rec
    a1, a2 = rec["attempts"]
    assert a1["verdict"]["cls"] == "oom-device" and a1["verdict"]["detail"]["phase"] == "update"
    ch = a2["setting_changes"]
    assert ch["token_budgets"] == {ACTOR: 2048 + 8192}  # 2 x (prompt + response) -> prompt + response
    assert ch["memory_rungs"] == [{"rung": "update-batch", "phase": "update", "source": "oom-retry-1",
                                   "changes": {"token_budgets": {ACTOR: 10240}}}]
    assert not any(f["name"] == "offload" for f in a2["features"])  # offload is not an update-phase rung
    assert rec["setting_changes"] == ch and a2["resumed_from"] == 2
    assert steps_per_attempt((run_dir / "train.log").read_text())[2] == [3, 4, 5, 6]
    assert '"token_budgets"' in (run_dir / "attempt-2.log").read_text()  # the fake verl got it in its argv


def test_first_attempt_starts_from_the_estimates_setting_changes(tmp_path):
    start = {"gpu_memory_utilization": 0.5,
             "memory_rungs": [{"rung": "rollout-util", "phase": "weight-sync", "source": "estimate",
                               "changes": {"gpu_memory_utilization": 0.5}}]}
    run_dir = make_run(tmp_path, {"step_time": 0.03, "oom_at": None}, extra={"setting_changes": start})
    rec = run_to_end(run_dir)
    assert rec["status"] == "succeeded", rec
    assert rec["attempts"][0]["setting_changes"] == start and rec["setting_changes"] == start
    assert '"gpu_memory_utilization": 0.5' in (run_dir / "attempt-1.log").read_text()
