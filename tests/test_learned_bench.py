"""Learned starts on the sandbox (real SSH + docker exec + the verl stand-in under the detached supervisor): a run
that ran out in weight-sync is fixed by a rung and files a memo in ``<runs_dir>/.learned``; the next launch of the
same configuration starts on it (source ``learned``, printed) and needs no OOM retry; an explicit contrary setting
wins over the memo (the launch says so)."""

from __future__ import annotations

import json

import pytest

from test_launch_bench import feature_sources, host_ready, launch, wait_end  # noqa: F401  (host_ready: fixture)

pytestmark = pytest.mark.bench


def test_a_rung_is_learned_the_next_launch_starts_there_and_an_explicit_setting_wins(sandbox, host_ready):  # noqa: F811
    # a device OOM at step 3 whose traceback names no phase (the unknown-phase ladder: offload first), unless offload
    host_ready(
        "h1",
        {
            "step_time": 0.1,
            "failure": {"kind": "oom-device", "step": 3, "phase": "none", "avoid_with": ["offload"], "hang_s": 120},
        },
    )
    learned_dir = sandbox.runs_dir("h1") / ".learned"
    args = ("--steps", "4", "--save-freq", "2", "--framework", "fsdp")

    res, rid1 = launch(host_ready, "h1", *args)
    assert res.returncode == 0, res.stderr
    assert "learned" not in res.stdout  # nothing learned yet
    rec1 = wait_end(sandbox, "h1", rid1)
    assert rec1["status"] == "succeeded", [(a.get("verdict") or {}).get("cls") for a in rec1["attempts"]] + [
        (rec1.get("decision") or {}).get("reason"),
        (rec1.get("verdict") or {}).get("detail"),
    ]
    a1, a2 = rec1["attempts"]
    assert a1["verdict"]["cls"] == "oom-device" and a1["verdict"]["detail"]["phase"] == "unknown"
    assert feature_sources(a2["features"])["offload"] == "oom-retry-1"
    memos = list(learned_dir.glob("*.json"))
    assert len(memos) == 1, memos
    memo = json.loads(memos[0].read_text())
    assert memo["run_id"] == rid1 and memo["ran_out"]["phase"] == "unknown"
    assert memo["rung"]["features"] == [{"name": "offload", "source": "oom-retry-1"}]
    assert memo["key"]["host"]["device_name"] and memo["key"]["run"]["framework"] == "fsdp"
    assert rec1["learned_memo"]["path"] == f"/verl/dapo_runs/.learned/{memos[0].name}"

    res, rid2 = launch(host_ready, "h1", *args)
    assert res.returncode == 0, res.stderr
    line = (
        f"starting on the learned rung offload (run {rid1} ran out of device memory (its log named no phase) "
        "without it on "
    )
    assert f"  start:   {line}" in res.stdout, res.stdout
    spec2 = json.loads((sandbox.runs_dir("h1") / rid2 / "spec.json").read_text())
    assert spec2["learned"]["used"] is True and spec2["learned"]["run_id"] == rid1
    assert feature_sources(spec2["features"])["offload"] == "learned"
    assert [r["source"] for r in spec2["setting_changes"]["memory_rungs"]] == ["learned"]
    rec2 = wait_end(sandbox, "h1", rid2)
    assert rec2["status"] == "succeeded" and len(rec2["attempts"]) == 1, rec2.get("attempts")  # no OOM retry
    assert feature_sources(rec2["attempts"][0]["features"])["offload"] == "learned"
    assert "learned_memo" not in rec2

    # an explicit -offload wins: the memo is not used, the launch says why
    res, rid3 = launch(host_ready, "h1", *args, "--features", "-offload")
    assert res.returncode == 0, res.stderr
    assert (
        f"  start:   learned start not used: run {rid1} ran on offload (" in res.stdout
        and "it adds offload, which you turned off (-offload)" in res.stdout
    ), res.stdout
    spec3 = json.loads((sandbox.runs_dir("h1") / rid3 / "spec.json").read_text())
    assert spec3["learned"]["used"] is False and "offload" not in feature_sources(spec3["features"])
    rec3 = wait_end(sandbox, "h1", rid3)
    assert rec3["attempts"][0]["verdict"]["cls"] == "oom-device"  # without the memo's rung it ran out again
