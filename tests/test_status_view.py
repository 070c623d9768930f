"""Pure tests of dapo_ops.control.status.rows: log-tail parsing (verl/utils/logger/aggregate_logger.py formats) and status rows. No hosts."""

import json

from dapo_ops.control.status import events as se
from dapo_ops.control.status import table as st
from dapo_ops.control.status import rows as sv
from dapo_ops.core import logformat

NP_LINE = (
    "(TaskRunner pid=417) step:3 - actor/pg_loss:np.float64(-0.0123) - critic/score/mean:np.float64(0.25)"
    " - response_length/mean:812.0 - perf/throughput:np.float64(1234.5) - training/global_step:3"
    " - timing_s/step:123.456 - actor/entropy:nan"
)


def test_metrics_line_numpy2_and_ray_prefix():
    step, m = logformat.parse_metrics_line(logformat.normalise_line("\x1b[36m" + NP_LINE + "\x1b[0m"))
    assert step == 3
    assert m["critic/score/mean"] == 0.25
    assert m["actor/pg_loss"] == -0.0123
    assert m["perf/throughput"] == 1234.5
    assert m["training/global_step"] == 3.0
    assert m["actor/entropy"] != m["actor/entropy"]  # nan kept as nan


def test_global_step_metric_is_not_a_step_line():
    assert logformat.parse_metrics_line("foo training/global_step:5 - x:1") is None


def test_step_after_tqdm_redraw_on_same_line():
    text = "Training Progress:  30%|###   | 3/10 [00:03<00:07,  1.00s/it]step:3 - critic/score/mean:0.5\n"
    info = sv.parse_tail(text)
    assert info.step == 3 and info.metrics["critic/score/mean"] == 0.5
    assert (info.bar_step, info.bar_total, info.bar_remaining_s, info.bar_s_per_step) == (3, 10, 7.0, 1.0)


def test_tqdm_with_carriage_returns_and_hours():
    text = (
        "Training Progress:  35%|###5      | 211/600 [5:40:00<10:25:00, 96.00s/it]\r"
        "Training Progress:  35%|###5      | 212/600 [5:41:22<10:24:51, 96.63s/it]\r"
    )
    info = sv.parse_tail(text)
    assert info.bar_step == 212 and info.bar_total == 600
    assert info.bar_remaining_s == 10 * 3600 + 24 * 60 + 51
    assert abs(info.bar_s_per_step - 96.63) < 1e-9


def test_attempt_delimiter_resets_progress():
    text = (
        "===== dapo-ops attempt 1 start 2026-11-29T15:00:00 features=flash_attn =====\n"
        "step:4 - critic/score/mean:0.1\n"
        "===== dapo-ops attempt 1 end exit=1 class=oom-device =====\n"
        "===== dapo-ops attempt 2 start 2026-11-29T15:01:00 features=flash_attn,offload =====\n"
    )
    info = sv.parse_tail(text)
    assert info.step is None and info.metrics == {}
    assert [(k, w) for k, w, _ in info.attempt_events] == [(1, "start"), (1, "end"), (2, "start")]


def test_swanlab_link_from_banner():
    info = sv.parse_tail("swanlab: \U0001f680 View run dapo-x at https://swanlab.cn/@me/p/runs/abc123\n")
    assert info.swanlab_url == "https://swanlab.cn/@me/p/runs/abc123"


def _run(**kw):
    rec = {
        "run_id": "20261129-150000-abcd",
        "status": "running",
        "attempt": 2,
        "step": 4,
        "total_steps": 10,
        "step_times": [10.0, 12.0, 11.0],
        "last_progress_at": 1000.0,
        "started_at": 900.0,
        "metrics": {"critic/score/mean": 0.2},
        "features": [{"name": "flash_attn", "source": "default"}, {"name": "offload", "source": "oom-retry-1"}],
        "verdict": {
            "cls": "oom-device",
            "action": "retry with offload; resume from global_step_2.",
            "hint": "long paragraph",
        },
        "pids": {"supervisor": 10, "verl_pgid": 11},
        "swanlab_url": None,
    }
    rec.update(kw)
    return rec


def test_row_second_attempt_with_oom_added_feature():
    tail = "step:5 - critic/score/mean:0.3 - response_length/mean:700 - perf/throughput:99.5\n"
    row = sv.build_row(
        "h1",
        {"run": _run(), "tail": tail, "now": 1010.0, "log_mtime": 1005.0, "supervisor_alive": True, "verl_alive": True},
    )
    assert row.state == "running" and row.attempt == 2
    assert (row.step, row.total, row.percent) == (5, 10, 50.0)
    assert row.eta_s == 5 * 11.0  # median of recent step times x remaining steps
    assert row.metrics == {"critic/score/mean": 0.3, "response_length/mean": 700.0, "perf/throughput": 99.5}
    assert [f["name"] for f in row.features if f["oom_added"]] == ["offload"]
    assert row.verdict == "oom-device" and row.hint == "retry with offload; resume from global_step_2."
    assert row.progress_age_s == 5.0 and not row.stale
    c = st.cells(row)
    assert c["features"] == "flash_attn,+offload(oom-retry-1)"
    assert c["step"] == "5/10 (50%)"
    json.dumps(row.to_json())


def test_dead_supervisor_is_not_shown_running():
    row = sv.build_row("h1", {"run": _run(), "tail": "", "now": 1010.0, "supervisor_alive": False, "verl_alive": True})
    assert row.state == "supervisor-dead"
    assert "still runs (pgid 11)" in row.hint
    assert se.is_finished(row)


def test_stale_flag_uses_step_time():
    probe = {"run": _run(step_times=[600.0]), "tail": "", "supervisor_alive": True}
    assert not sv.build_row("h1", dict(probe, now=1000.0 + 1700)).stale  # < 3 x 600 s
    assert sv.build_row("h1", dict(probe, now=1000.0 + 1900)).stale
    stopped = sv.build_row("h1", dict(probe, run=_run(status="stopped"), now=99999.0))
    assert not stopped.stale and stopped.eta_s is None


def test_no_run_and_error_rows():
    assert sv.build_row("h2", {"run": None, "now": 1.0}).state == "no-run"
    r = sv.build_row("h3", {"error": "h3: unreachable"})
    assert r.state == "error" and st.cells(r)["verdict"] == "h3: unreachable"


def test_events_attempt_escalation_and_finish():
    a = sv.build_row(
        "h1",
        {
            "run": _run(attempt=1, features=[{"name": "flash_attn", "source": "default"}], verdict=None),
            "tail": "",
            "now": 1001.0,
            "supervisor_alive": True,
        },
    )
    b = sv.build_row(
        "h1", {"run": _run(status="retrying", attempt=2), "tail": "", "now": 1002.0, "supervisor_alive": True}
    )
    ev = se.events(a, b)
    assert any("attempt 2 started" in e and "OOM escalation: +offload" in e for e in ev)
    c = sv.build_row(
        "h1", {"run": _run(status="succeeded", step=10), "tail": "", "now": 1003.0, "supervisor_alive": False}
    )
    ev = se.events(b, c)
    assert ev == ["h1: finished: succeeded at step 10/10"]
    assert se.events(c, c) == []


def test_sort_newest_first():
    def row(host, **kw):  # what status --all builds per recorded run (control/status/look.collect_rows)
        return sv.build_row(host, {"run": _run(**kw), "tail": "", "now": 0.0, "supervisor_alive": None})

    rows = [
        row("h1", run_id="a", started_at=1.0),
        row("h1", run_id="b", started_at=3.0),
        row("h2", run_id="c", started_at=2.0),
    ]
    assert [r.run_id for r in sv.sort_newest_first(rows)] == ["b", "a", "c"]


def test_step_precedence_between_run_json_and_tail():
    base = {"now": 1010.0, "supervisor_alive": True}
    # same attempt: the larger step is the fresher one
    row = sv.build_row("h1", dict(base, run=_run(attempt=1, step=10), tail="step:1 - x:1\n"))
    assert row.step == 10
    # the tail shows an attempt run.json does not know yet, resumed from a checkpoint below run.json's step
    tail = "===== dapo-ops attempt 2 start t features=a =====\nstep:3 - critic/score/mean:0.7\n"
    row = sv.build_row("h1", dict(base, run=_run(attempt=1, step=4), tail=tail))
    assert row.step == 3 and row.metrics["critic/score/mean"] == 0.7


def test_events_when_attaching_late_replay_attempts_and_end():
    f1 = [{"name": "flash_attn", "source": "default"}]
    f2 = f1 + [{"name": "offload", "source": "oom-retry-1"}]
    f3 = f2 + [{"name": "recompute", "source": "oom-retry-2"}]
    run = _run(
        status="succeeded",
        attempt=3,
        step=10,
        features=f3,
        attempts=[
            {"n": 1, "features": f1, "verdict": {"cls": "oom-device"}, "step_reached": 4},
            {"n": 2, "features": f2, "verdict": {"cls": "oom-device"}, "step_reached": 6},
            {"n": 3, "features": f3, "verdict": {"cls": "success"}, "step_reached": 10},
        ],
    )
    row = sv.build_row("h1", {"run": run, "tail": "", "now": 1.0, "supervisor_alive": False})
    ev = se.events(None, row)
    assert ev[1] == (
        "h1: attempt 2 started (features flash_attn,+offload(oom-retry-1)); OOM escalation: +offload; after oom-device"
    )
    assert ev[2].startswith("h1: attempt 3 started") and "OOM escalation: +recompute;" in ev[2]
    assert ev[-1] == "h1: finished: succeeded at step 10/10"


OOM_ACTION = "retry from the last checkpoint with the next memory rung (offload, then recompute)"
ENDED = "failed: device OOM after 2 OOM retries (MAX_OOM_RETRIES=2) at step 4/20"


def _failed_oom_run(**kw):
    return _run(
        status="failed",
        attempt=3,
        step=4,
        total_steps=20,
        verdict={"cls": "oom-device", "action": OOM_ACTION, "hint": "dapo-ops retries with the next rung"},
        decision={
            "action": "stop",
            "reason": "device OOM after 2 OOM retries (MAX_OOM_RETRIES=2)",
            "suggestions": ["lower the token budget", "shorter responses: --max-response-length 4096"],
            "ended": ENDED,
        },
        **kw,
    )


def test_a_finally_failed_run_says_what_ended_it_and_shows_the_suggestions_never_retry():
    row = sv.build_row("h1", {"run": _failed_oom_run(), "tail": "", "now": 2000.0, "supervisor_alive": False})
    assert row.state == "failed" and row.ended == ENDED and row.hint == ENDED
    assert row.suggestions == ["lower the token budget", "shorter responses: --max-response-length 4096"]
    assert "retry" not in st.cells(row)["verdict"] and ENDED in st.cells(row)["verdict"]
    assert row.to_json()["suggestions"] == row.suggestions and row.to_json()["ended"] == ENDED
    ev = se.events(None, row)[-1].splitlines()
    assert ev[0] == "h1: finished: %s (oom-device)" % ENDED
    assert ev[1:] == ["h1:   try: lower the token budget", "h1:   try: shorter responses: --max-response-length 4096"]
    assert "retry from" not in "\n".join(se.events(None, row))


def test_ending_without_a_recorded_line_and_before_the_first_step():
    # a record written before decision.ended existed, or by `inv stop` for a dead supervisor
    rec = _failed_oom_run()
    del rec["decision"]["ended"]
    row = sv.build_row("h1", {"run": rec, "tail": "", "now": 2000.0})
    assert row.ended == "failed: device OOM after 2 OOM retries (MAX_OOM_RETRIES=2) at step 4/20"
    row = sv.build_row(
        "h1",
        {
            "run": _run(status="stopped", step=None, stop={"by": "dapo-ops stop"}, decision=None),
            "tail": "",
            "now": 2000.0,
        },
    )
    assert row.ended == "stopped by `inv stop` before the first step"
    assert "None" not in se.events(None, row)[-1]


def test_dead_supervisor_names_the_run_to_stop_and_resume_and_has_no_eta():
    row = sv.build_row("h1", {"run": _run(), "tail": "", "now": 1010.0, "supervisor_alive": False, "verl_alive": True})
    assert "inv stop -H h1 --run %s" % row.run_id in row.hint and "--resume %s" % row.run_id in row.hint
    assert row.eta_s is None


def test_a_run_dir_without_run_json_is_incomplete_and_ends_watch():
    row = sv.build_row("h1", {"run": {"run_id": "x", "status": "unknown", "run_dir": "/r/x"}, "tail": "", "now": 1.0})
    assert row.state == "incomplete" and "no run.json" in row.hint and se.is_finished(row)


def test_follow_up_tasks_use_the_container_the_run_was_launched_in():
    import dataclasses

    from dapo_ops.control.inventory import model as inventory_model
    from dapo_ops.cli._common import with_container

    h = inventory_model.Host(**{f.name: None for f in dataclasses.fields(inventory_model.Host)})
    h = dataclasses.replace(h, name="h1", container="verl")
    assert [x.container for x in with_container([h], "", env={})] == ["verl"]
    assert [x.container for x in with_container([h], "", env={"CONTAINER": "other"})] == ["other"]
    assert [x.container for x in with_container([h], "mine", env={"CONTAINER": "other"})] == ["mine"]


# ------------------------------------------------------------------------------------------ the watch loop


def test_every_state_watch_stops_at_has_an_exit_code_and_statuses_come_from_runstate():
    from dapo_ops.control.status import watch as watchloop
    from dapo_ops.core import runstate

    assert set(watchloop.WATCH_CODES) == set(sv.FINISHED_STATES)
    assert sv.RunStatus is runstate.RunStatus
    written = {s for s in runstate.RunStatus if s.written}
    assert written == {s for s in written if s.active} | {s for s in written if s.terminal}


def test_watch_keeps_watching_a_briefly_unreachable_host_and_reports_the_worst_end():
    from types import SimpleNamespace

    from dapo_ops.control.status import watch as watchloop

    hosts = [SimpleNamespace(name="h1"), SimpleNamespace(name="h2")]
    w = watchloop.Watch(hosts)
    run = {"run_id": "r1", "status": "running", "attempt": 1, "step": 2, "total_steps": 4, "pids": {"supervisor": 5}}
    first = w.see(
        [
            sv.build_row("h1", {"run": run, "tail": "", "now": 1.0, "supervisor_alive": True}),
            sv.build_row("h2", {"run": dict(run, run_id="r2"), "tail": "", "now": 1.0, "supervisor_alive": True}),
        ]
    )
    assert first == ["h1: run r1 running, attempt 1, step 2/4", "h2: run r2 running, attempt 1, step 2/4"]
    lost = sv.build_row("h1", {"error": "h1: unreachable: timed out"})
    assert w.see([lost]) == ["h1: unreachable: timed out (still watching)"]
    assert w.see([lost]) == [] and not w.finished and [h.name for h in w.live()] == ["h1", "h2"]
    w.see([sv.build_row("h1", {"run": dict(run, status="succeeded", step=4), "tail": "", "now": 2.0})])
    assert [h.name for h in w.live()] == ["h2"]
    w.see(
        [
            sv.build_row(
                "h2", {"run": dict(run, run_id="r2", status="stopped", stop={"by": "inv stop"}), "tail": "", "now": 2.0}
            )
        ]
    )
    assert w.finished
    code, msg = w.outcome()
    assert code == 5 and msg == "h2: run r2 stopped by `inv stop` at step 2/4"


RID = "20261201-170121-93c1"
SERVES = {"run_id": RID, "head": "h1", "head_address": "10.0.0.1", "port": 6379}


def _cluster_head_run(**kw):
    return dict(
        {
            "run_id": RID,
            "status": "running",
            "attempt": 1,
            "step": 2,
            "total_steps": 6,
            "pids": {"supervisor": 5},
            "cluster": {"nodes": 2, "hosts": ["h1", "h2"], "head": "h1"},
        },
        **kw,
    )


def test_watch_follows_the_head_of_a_multi_host_run_and_its_worker_is_one_line():
    from types import SimpleNamespace

    from dapo_ops.control.status import watch as watchloop

    # mid-run: h2 is a live Ray worker (the probe's serves), h1 the head; the head's run decides the exit code
    w = watchloop.Watch([SimpleNamespace(name="h1"), SimpleNamespace(name="h2")])
    first = w.see(
        [
            sv.build_row("h1", {"run": _cluster_head_run(), "tail": "", "now": 1.0, "supervisor_alive": True}),
            sv.build_row("h2", {"run": None, "now": 1.0, "serves": SERVES}),
        ]
    )
    assert first == ["h1: run %s running, attempt 1, step 2/6" % RID, "h2: Ray worker of run %s (head h1)" % RID]
    assert [h.name for h in w.live()] == ["h1"] and not w.finished
    w.see([sv.build_row("h1", {"run": _cluster_head_run(status="succeeded", step=6), "tail": "", "now": 2.0})])
    assert w.finished and w.outcome() == (0, "")
    # after the run: h2's Ray session is gone (no serves, no run of its own, or only an older one)
    for h2 in (
        sv.build_row("h2", {"run": None, "now": 1.0}),
        sv.build_row("h2", {"run": {"run_id": "20261130-000000-abcd", "status": "failed"}, "now": 1.0}),
    ):
        w = watchloop.Watch([SimpleNamespace(name="h2"), SimpleNamespace(name="h1")])
        lines = w.see(
            [h2, sv.build_row("h1", {"run": _cluster_head_run(status="succeeded", step=6), "tail": "", "now": 2.0})]
        )
        assert "h2: Ray worker of run %s (head h1)" % RID in lines and not any("no run" in x for x in lines), lines
        assert w.finished and w.outcome() == (0, "")
    # the worker alone: not a run of its own, and the command that watches the run
    w = watchloop.Watch([SimpleNamespace(name="h2")])
    w.see([sv.build_row("h2", {"run": None, "now": 1.0, "serves": SERVES})])
    code, msg = w.outcome()
    assert code == 4 and msg.startswith("h2: Ray worker of run %s (head h1)" % RID) and "`inv watch -H h1`" in msg


def test_a_ray_worker_row_never_reads_as_a_run_with_none_fields():
    row = sv.build_row("h2", {"run": None, "now": 1.0, "serves": SERVES})
    assert se.events(None, row) == ["h2: Ray worker of run %s (head h1)" % RID]
    assert se.events(row, row) == []


def test_an_error_row_names_its_host_once(monkeypatch):
    """A stopped container whose run.json cannot be read: the real probe path (``_status_probe`` turning the
    RemoteError into an answer, ``collect_rows`` naming the host) gives one line that names the host once. Only the
    transport is replaced: the probe raises what the remote layer raises, the fan calls ``fn`` in-process."""
    from types import SimpleNamespace

    from dapo_ops.control.status import look as svc
    from dapo_ops.control.remote.errors import RemoteError

    def probe(t, req, timeout=0):
        raise RemoteError("container-stopped", t.host.name, "container 'verl' is stopped (exited (exit code 137))")

    monkeypatch.setattr(svc, "probe", probe)
    monkeypatch.setattr(svc, "stopped_container_run", lambda t: None)
    monkeypatch.setattr(
        svc, "fan", lambda chosen, fn, timeout, ct=None: [(h.name, fn(SimpleNamespace(host=h))) for h in chosen]
    )
    err = svc.collect_rows([SimpleNamespace(name="h2")])[0].error
    assert err == "h2: container 'verl' is stopped (exited (exit code 137))", err


def test_a_long_hint_is_cut_at_a_word_boundary():
    text = "stop with suggestions: " + " ".join(["lower max_response_length"] * 8)
    cut = sv.one_line(text, 60)
    assert cut.endswith("\u2026") and len(cut) <= 60
    assert text.startswith(cut[:-1]) and text[len(cut) - 1] == " ", cut
    assert sv.one_line("x" * 80, 60) == "x" * 59 + "\u2026"


def test_status_shows_a_ray_worker_host_as_part_of_its_chosen_heads_run_live_and_after_it_ended():
    from dapo_ops.control.status import look as svc

    head_live = sv.build_row("h1", {"run": _cluster_head_run(), "tail": "", "now": 1.0, "supervisor_alive": True})
    live = svc.with_cluster_workers([head_live, sv.build_row("h2", {"run": None, "now": 1.0, "serves": SERVES})])
    assert live[0] is head_live
    w = live[1]
    assert (w.host, w.run_id, w.state, w.step, w.total) == ("h2", RID, "running", 2, 6)
    assert w.serves == SERVES and w.hint.startswith("Ray worker of run %s (head h1)" % RID)
    assert "`inv status -H h1`" in w.hint and w.cluster is None and not w.suggestions
    ended = _cluster_head_run(
        status="failed",
        step=4,
        verdict={"cls": "device_oom"},
        decision={"ended": "failed: device OOM at step 4/6", "suggestions": ["lower x"]},
    )
    head_end = sv.build_row("h1", {"run": ended, "tail": "", "now": 2.0})
    # the session ended with the run: h2 has no run, or only an older one of its own
    for h2 in (
        sv.build_row("h2", {"run": None, "now": 2.0}),
        sv.build_row("h2", {"run": {"run_id": "20261130-000000-abcd", "status": "succeeded"}, "now": 2.0}),
    ):
        w = svc.with_cluster_workers([h2, head_end])[0]
        assert (w.run_id, w.state, w.ended, w.serves["head"]) == (
            RID,
            "failed",
            "failed: device OOM at step 4/6",
            "h1",
        ), w
        assert w.verdict is None and w.suggestions == [] and "Ray worker of run %s (head h1)" % RID in w.hint
        assert st.cells(w)["state"] == "failed" and st.cells(w)["run"] == RID
    # not a worker of it: a newer or active run of its own, a probe error, a head that was not chosen
    own = sv.build_row("h2", {"run": {"run_id": "20261202-000000-abcd", "status": "succeeded"}, "now": 2.0})
    active = sv.build_row(
        "h2",
        {
            "run": {"run_id": "20261130-000000-abcd", "status": "running", "pids": {"supervisor": 7}},
            "now": 2.0,
            "supervisor_alive": True,
        },
    )
    err = sv.build_row("h2", {"error": "h2: unreachable: timed out"})
    for r in (own, active, err):
        assert svc.with_cluster_workers([head_end, r])[1] is r
    alone = sv.build_row("h2", {"run": None, "now": 1.0, "serves": SERVES})
    assert svc.with_cluster_workers([alone])[0] is alone and alone.state == "ray-worker"
    # `status --run <id> -H h1,h2`: the worker has no dir of that run (the probe says so, naming the run id)
    missing = sv.build_row(
        "h2", {"error": "h2: no run %s in /verl/dapo_runs; list runs with `inv status --all`" % RID, "run_id": RID}
    )
    w = svc.with_cluster_workers([head_end, missing])[1]
    assert (w.run_id, w.state, w.error) == (RID, "failed", None) and "Ray worker of run %s (head h1)" % RID in w.hint
    # ... but another run's missing dir, or a stopped container holding this run, stays the error it is
    other = sv.build_row(
        "h2", {"error": "h2: no run 20261130-000000-abcd in /verl/dapo_runs", "run_id": "20261130-000000-abcd"}
    )
    stopped = sv.build_row("h2", {"run": _cluster_head_run(), "tail": "", "now": 2.0})
    stopped.state, stopped.error = "error", "h2: container 'verl' is stopped; run stopped with it"
    for r in (other, stopped):
        assert svc.with_cluster_workers([head_end, r])[1] is r


def test_an_attempt_line_names_the_memory_rung_it_starts_with():
    """watch/status event of a retry: the setting rung the ladder applied (run.json attempts[].setting_changes
    .memory_rungs), not only the features (a setting rung adds no feature: the new-user trial saw just 'after
    oom-device')."""
    budget = {"token_budgets": {"actor_rollout_ref.actor.ppo_max_token_len_per_gpu": 10240}}
    r1 = {"rung": "update-batch", "phase": "update", "source": "oom-retry-1", "changes": budget}
    r2 = {
        "rung": "offload-policy",
        "phase": "update",
        "source": "oom-retry-2",
        "changes": {"fsdp_offload_policy": True},
    }
    feats = [{"name": "flash_attn", "source": "default"}]
    run = {
        "run_id": RID,
        "status": "failed",
        "step": 1,
        "total": 6,
        "attempt": 3,
        "features": feats,
        "attempts": [
            {"n": 1, "features": feats, "setting_changes": {}, "verdict": {"cls": "oom-device"}},
            {
                "n": 2,
                "features": feats,
                "setting_changes": {**budget, "memory_rungs": [r1]},
                "verdict": {"cls": "oom-device"},
            },
            {
                "n": 3,
                "features": feats,
                "setting_changes": {**budget, "memory_rungs": [r1, r2]},
                "verdict": {"cls": "oom-device"},
            },
        ],
    }
    lines = se._attempt_lines(sv.build_row("h1", {"run": run, "tail": "", "now": 1.0}), 0)
    assert lines == [
        "h1: attempt 2 started (features flash_attn); memory rung update-batch for phase update "
        "(ppo_max_token_len_per_gpu=10240); after oom-device",
        "h1: attempt 3 started (features flash_attn); memory rung offload-policy for phase update "
        "(fsdp_offload_policy=True); after oom-device",
    ], lines
    # a feature rung is the escalation's to say (once), and a phase-less one names no phase
    off = {"rung": "offload", "phase": "unknown", "source": "oom-retry-1", "changes": {}}
    added = feats + [{"name": "offload", "source": "oom-retry-1"}]
    run["attempts"] = [
        {"n": 1, "features": feats, "setting_changes": {}, "verdict": {"cls": "oom-device"}},
        {"n": 2, "features": added, "setting_changes": {"memory_rungs": [off]}},
    ]
    line = se._attempt_lines(sv.build_row("h1", {"run": run, "tail": "", "now": 1.0}), 0)[0]
    assert line.endswith("OOM escalation: +offload; after oom-device") and "memory rung" not in line, line


def _dead_run_dir(tmp_path, tracker: int, steps_on_disk: dict, step: int):
    """A run whose container was stopped and started: run.json says running at ``step``, its supervisor is gone,
    ``<ckpt_dir>/global_step_N`` for each N of ``steps_on_disk`` (True: complete, False: empty = a torn save)."""
    runs = tmp_path / "runs"
    rid = "20261129-150000-abcd"
    run_dir, ckpt = runs / rid, runs / rid / "checkpoints"
    ckpt.mkdir(parents=True)
    for n, complete in steps_on_disk.items():
        (ckpt / ("global_step_%d" % n)).mkdir()
        if complete:
            (ckpt / ("global_step_%d" % n) / "actor").mkdir()  # verl's layout: global_step_N/actor/<shards>
            (ckpt / ("global_step_%d" % n) / "actor" / "model_world_size_1_rank_0.pt").write_text("x")
    (ckpt / "latest_checkpointed_iteration.txt").write_text(str(tracker))
    (run_dir / "run.json").write_text(
        json.dumps(
            _run(step=step, run_dir=str(run_dir), ckpt_dir=str(ckpt), pids={"supervisor": 2**22 + 7, "verl_pgid": None})
        )
    )
    return runs


def test_a_stopped_runs_redo_line_ends_with_its_resume_command(tmp_path):
    """A new user's trial: `inv stop` then `inv status` read "a resume redoes 3 steps (...)" and no command (a failed
    run's verdict and a dead supervisor's hint name theirs): the stopped run's line ends with its ``--resume``."""
    from dapo_ops.agent import runprobe

    runs = _dead_run_dir(tmp_path, 8, {4: True, 8: True}, 10)
    rj = next(runs.rglob("run.json"))
    rec = json.loads(rj.read_text())
    rec.update(status="stopped", ended_at=1100.0, spec={"run_id": rec["run_id"], "settings": {}})
    rj.write_text(json.dumps(rec))
    row = sv.build_row("h1", runprobe.probe_status(str(runs)))
    assert row.state == "stopped", row.state
    assert row.hint.endswith(
        "a resume redoes 2 steps (steps 9-10: past the last complete checkpoint global_step_8): "
        "`inv launch -H h1 --resume 20261129-150000-abcd`"
    ), row.hint


def test_after_docker_stop_start_status_says_how_many_steps_a_resume_redoes(tmp_path):
    from dapo_ops.agent import runprobe

    ans = runprobe.probe_status(str(_dead_run_dir(tmp_path, 8, {4: True, 8: True}, 10)))
    row = sv.build_row("h1", ans)
    assert row.state == "supervisor-dead" and (row.resume_from, row.resume_redo) == (8, 2)
    assert row.hint.endswith("a resume redoes 2 steps (steps 9-10: past the last complete checkpoint global_step_8)")
    # a save torn by the stop: the tracker names global_step_8 but it is empty; the resume loads global_step_4
    ans = runprobe.probe_status(str(_dead_run_dir(tmp_path / "torn", 8, {4: True, 8: False}, 10)))
    assert sv.build_row("h1", ans).resume_redo == 6
    assert (tmp_path / "torn" / "runs").rglob("latest_checkpointed_iteration.txt")  # read-only: not repaired
    assert next((tmp_path / "torn").rglob("latest_checkpointed_iteration.txt")).read_text() == "8"


def test_supervisor_dead_after_verl_finished_every_step_does_not_offer_a_resume(tmp_path):
    """Chaos soak (bench/soak.py, seed 1 episode 1: kill-supervisor at step 5 of 19): verl went on to its last step
    and saved it; the old hint said ``--resume`` continues, and that launch is refused (`--steps 19 would train
    nothing`). Now: verl finished, nothing to resume, ``inv stop`` records it."""
    from dapo_ops.agent import runprobe

    ans = runprobe.probe_status(str(_dead_run_dir(tmp_path, 10, {8: True, 10: True}, 10)))
    row = sv.build_row("h1", ans)
    assert row.state == "supervisor-dead" and row.resume_from == 10, row
    assert "--resume" not in row.hint and "redoes" not in row.hint, row.hint
    assert "verl finished all 10 steps" in row.hint and "`inv stop -H h1 --run 20261129-150000-abcd`" in row.hint
    # one step short of the total: the resume is still the way on
    row = sv.build_row("h1", runprobe.probe_status(str(_dead_run_dir(tmp_path / "b", 8, {8: True}, 9))))
    assert "--resume 20261129-150000-abcd" in row.hint and "redoes 1 step" in row.hint, row.hint


def test_watch_prints_a_progress_line_at_most_once_a_minute_between_state_changes():
    from types import SimpleNamespace

    from dapo_ops.control.status import watch as watchloop

    def look(step, attempt=2, rid="20261129-150000-abcd"):
        tail = "step:%d - perf/throughput:44620.3\n" % step
        return sv.build_row(
            "h1",
            {
                "run": _run(attempt=attempt, run_id=rid),
                "tail": tail,
                "now": 1010.0,
                "supervisor_alive": True,
                "verl_alive": True,
            },
        )

    w = watchloop.Watch([SimpleNamespace(name="h1")])
    assert w.see([look(5)], now=0.0)  # attaching: the run's line
    assert w.progress(59.0) == []
    assert w.progress(60.0) == ["h1 20261129-150000-abcd: running, step 5/10 (50%), ETA 55s, 44.6k tok/s/device"]
    assert w.see([look(6)], now=90.0) == [] and w.progress(100.0) == []  # a step is no state change
    assert w.progress(120.0)[0].startswith("h1 20261129-150000-abcd: running, step 6/10")
    assert w.see([look(7, attempt=3)], now=150.0)  # a new attempt: its line resets the timer
    assert w.progress(200.0) == [] and len(w.progress(210.0)) == 1


def test_a_feature_the_plan_started_on_for_memory_shows_its_source():
    """A learned start's or the memory fit's start rung reads apart from an asked feature (sandbox trial of
    2026-12-02: ``inv status`` showed a learned ``offload`` like an explicit one)."""
    feats = [
        {"name": "dynamic_batch", "source": "default"},
        {"name": "offload", "source": "learned"},
        {"name": "recompute", "source": "estimate"},
        {"name": "flash_attn", "source": "explicit"},
    ]
    rows = [{"name": f["name"], "source": f["source"], "oom_added": sv.is_oom_added(f["source"])} for f in feats]
    assert st.fmt_features(rows) == "dynamic_batch,offload(learned),recompute(estimate),flash_attn"


def test_row_shows_the_watched_metrics_trend_and_json_carries_it():
    """Issue 42 item 1: run.json ``health`` (the supervisor's core/health.py watch) -> the row's trend line, the
    flag's reason when a metric went bad, and ``status --json``'s ``health``."""
    import io

    from dapo_ops.cli import status as cli_status

    h = {
        "trend": {
            "metric": "actor/grad_norm",
            "first": 0.8,
            "last": 3e12,
            "step": 3,
            "shown": "grad_norm 0.8 -> 3e+12 (step 3)",
        },
        "flag": {"metric": "actor/grad_norm", "step": 3, "reason": "explosion", "shown": "3e+12"},
        "bad_step": 3,
        "healthy_step": 2,
    }
    row = sv.build_row("h1", {"run": _run(status="failed", health=h), "tail": "", "now": 1010.0})
    assert row.health["shown"] == "grad_norm 0.8 -> 3e+12 (step 3) (explosion)"
    j = json.loads(json.dumps(row.to_json()))
    assert j["health"]["trend"]["last"] == 3e12 and j["health"]["healthy_step"] == 2
    buf = io.StringIO()
    cli_status.render_table([row], out=buf, width=200)
    assert "h1 20261129-150000-abcd: grad_norm 0.8 -> 3e+12 (step 3) (explosion)" in buf.getvalue()
    plain = sv.build_row("h1", {"run": _run(), "tail": "", "now": 1010.0})
    assert plain.health is None


def test_watch_of_a_run_id_that_is_not_there_prints_no_run_line():
    """``inv watch --run 99999999-999999-ffff``: the row of a run the host does not have carries the id and nothing
    else; watch printed "run ... None, attempt None, step 0/?" on stdout before the "no run" line (a second trial)."""
    row = sv.StatusRow(host="h1", run_id="99999999-999999-ffff")
    assert row.status is None and se.events(None, row) == []


def test_watch_first_line_is_the_rows_judgement_and_a_resumed_run_starts_from_its_own_state():
    """A new user's trial: after ``kill -9`` of the supervisor ``watch`` printed ``run ... running`` before rc 3;
    after ``docker stop verl`` it printed ``h3: run ... running, attempt 1, step 12/30`` before the container's
    message and rc 4; a resumed run's first line showed a step it had not made. The first line is now the row's
    own state (the same judgement as the exit code), none for a stopped container (its message is the outcome), and
    an attempt that resumed from a checkpoint with no step past it says so."""
    from types import SimpleNamespace

    from dapo_ops.control.status import look
    from dapo_ops.control.status import watch as watchloop

    run = {"run_id": "r1", "status": "running", "attempt": 1, "step": 12, "total_steps": 30, "pids": {"supervisor": 5}}
    run["started_at"] = 1.0
    dead = sv.build_row("h3", {"run": run, "tail": "", "now": 9.0, "supervisor_alive": False, "verl_alive": False})
    w = watchloop.Watch([SimpleNamespace(name="h3")])
    lines = w.see([dead])
    assert lines[0] == "h3: run r1 supervisor-dead, attempt 1, step 12/30", lines
    assert not any(" running," in ln for ln in lines) and w.finished and w.outcome()[0] == 3
    stopped = look._stopped_row("h3", {"error": "h3: container verl is not running", "stopped_run": run})
    w = watchloop.Watch([SimpleNamespace(name="h3")])
    assert w.see([stopped]) == [] and w.finished
    code, msg = w.outcome()
    assert code == 4 and "container verl is not running" in msg and "step 12/30" in msg
    resumed = dict(run, step=None, attempts=[{"n": 1, "features": [], "resumed_from": 10, "step_reached": 10}])
    row = sv.build_row("h3", {"run": resumed, "tail": "", "now": 9.0, "supervisor_alive": True})
    assert se.events(None, row) == [
        "h3: run r1 running, attempt 1, resumes from checkpoint step 10/30, no step of its own yet"
    ]
    moved = dict(resumed, step=11)
    row = sv.build_row("h3", {"run": moved, "tail": "", "now": 9.0, "supervisor_alive": True})
    assert se.events(None, row) == ["h3: run r1 running, attempt 1, step 11/30"]


#: the resumed run's train.log as the sandbox wrote it before its first own step (bench 106, `inv launch --resume`
#: of a run stopped at step 16 with global_step_10 saved): verl's tqdm bar starts at the checkpoint's step
_RESUMED_TAIL = (
    "===== dapo-ops attempt 1 start 2026-12-07T15:48:03Z features=dynamic_batch,flash_attn =====\n"
    "\x1b[36m(TaskRunnerV1 pid=302)\x1b[0m Found checkpoint: %s /verl/dapo_runs/20261207-154723-81ac/checkpoints/"
    "global_step_10\n"
    "\x1b[36m(TaskRunnerV1 pid=302)\x1b[0m INFO:2026-12-07 15:48:10,927:Resuming from /verl/dapo_runs/"
    "20261207-154723-81ac/checkpoints/global_step_10, setting global step to 10\n"
    "\x1b[36m(TaskRunnerV1 pid=302)\x1b[0m Training Progress:  33%|###3      | 10/30 [00:00<?, ?it/s]\n"
)


def test_watch_of_a_just_resumed_run_reads_the_checkpoint_bar_as_no_step_of_its_own():
    """A new user's trial: ``inv launch --resume <id>`` then at once ``inv watch --run <new id>`` showed
    ``step 12/30`` in its first line, a step the new run had not made. Reproduced on the sandbox: the source is
    verl's progress bar, which starts at the checkpoint's step (``10/30`` above) and is the row's step until the
    first ``step:N`` line; the attempt record names the checkpoint (``resumed_from``) from its start. Neither
    ``resolve_run_dir`` (``--run`` names the run; without it the live lock names the new run) nor the old run's
    run.json is read. The run.json and log tail are the sandbox's at that moment."""
    run = {"run_id": "20261207-154759-98e0", "status": "running", "attempt": 1, "step": None, "total_steps": 30}
    run.update(pids={"supervisor": 5}, started_at=1.0, metrics={})
    run["attempts"] = [{"n": 1, "features": [], "resumed_from": 10, "step_reached": 10}]
    row = sv.build_row("h1", {"run": run, "tail": _RESUMED_TAIL, "now": 9.0, "supervisor_alive": True})
    assert row.step == 10  # the bar's position: where training stands (status's 10/30)
    assert se.events(None, row) == [
        "h1: run 20261207-154759-98e0 running, attempt 1, resumes from checkpoint step 10/30, no step of its own yet"
    ]


def test_an_ended_run_whose_supervisor_still_finishes_up_reads_its_checkpoints_as_the_resume_would(tmp_path):
    """A new user's trial: ``inv watch`` on a data-ran-out run (global_step_5, 10, 15 on disk, step 16) said "a resume
    redoes 16 steps (steps 1-16: no checkpoint yet)" (its look came while the supervisor, run.json already failed,
    still finished up: the probe read no checkpoint for a live supervisor); ``inv status`` afterwards said 1 step.
    Now one reading, the resume's (latest_checkpoint), whatever the supervisor's liveness."""
    import subprocess
    import sys

    from dapo_ops.agent import runprobe
    from dapo_ops.core.runstate import SUPERVISOR_MARKER

    runs = _dead_run_dir(tmp_path, 15, {5: True, 10: True, 15: True}, 16)
    run_dir = next(runs.iterdir())
    # a live process with a supervisor's argv for this run dir: the supervisor still finishing up
    sup = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()", SUPERVISOR_MARKER.decode(), str(run_dir)],
        stdin=subprocess.PIPE,
    )
    try:
        rec = json.loads((run_dir / "run.json").read_text())
        rec.update(status="failed", total_steps=20, pids={"supervisor": sup.pid, "verl_pgid": None})
        (run_dir / "run.json").write_text(json.dumps(rec))
        ans = runprobe.probe_status(str(runs))
        assert ans["supervisor_alive"] is True
        row = sv.build_row("h1", ans)
    finally:
        sup.stdin.close()
        sup.wait()
    assert (row.resume_from, row.resume_redo) == (15, 1), row
    assert "a resume redoes 1 step (step 16: past the last complete checkpoint global_step_15)" in row.hint, row.hint
    assert "no checkpoint yet" not in row.hint


def test_a_failed_run_in_another_container_points_at_its_status_with_c():
    """``inv watch -H h1 -c verl2`` of a failed run: the outcome's ``(also `inv status -H h1`)`` looked in the
    inventory's container, which showed an earlier run there (a new user's trial); the container named by
    ``-c`` / ``CONTAINER`` (``Host.container_from``) is in the command, the inventory's own adds nothing."""
    import dataclasses

    from dapo_ops.control.inventory.model import Host
    from dapo_ops.control.status import watch as watchloop

    base = Host(name="h1", address="198.51.100.11", container="verl")
    run = {
        "run_id": "r1",
        "status": "failed",
        "attempt": 1,
        "step": 2,
        "total_steps": 4,
        "ended": "failed: a Ray worker died at step 2/4",
        "decision": {"suggestions": ["then `inv launch -H h1 -c verl2 --resume r1` continues"]},
    }
    for host, want in (
        (dataclasses.replace(base, container="verl2", container_from="--container"), "`inv status -H h1 -c verl2`"),
        (base, "`inv status -H h1`"),
    ):
        w = watchloop.Watch([host])
        w.see([sv.build_row("h1", {"run": run, "tail": "", "now": 1.0})])
        code, msg = w.outcome()
        assert code == 1 and msg.endswith("; suggestions above (also %s)" % want), msg
