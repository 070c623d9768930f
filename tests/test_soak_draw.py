"""The chaos soak's draw (bench/soak.py ``kind_of`` / ``draw``), pure: every fault kind is exercised in a soak long
enough, and ``--seed S --episode N`` replays exactly what the whole soak drew for episode N.

Seed 1202's 33-episode soak (32.6 min) drew kinds with ``rng.choice`` per episode and never drew ``storm``,
``stall`` or ``kill-verl`` (0 injected) although they were in the kinds list; the draw is now a shuffled cycle of
every kind per seed.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from conftest import repo_module


@pytest.fixture(scope="module")
def soak():
    return repo_module("bench/soak.py")


def test_seed_1202s_soak_draws_every_kind(soak):
    kinds = list(soak.FAULTS)
    drawn = Counter(soak.draw(1202, n, kinds, 3).kind for n in range(1, 34))
    assert set(drawn) == set(kinds), sorted(set(kinds) - set(drawn))
    assert {"storm", "stall", "kill-verl"} <= set(drawn)


@pytest.mark.parametrize("seed", [1, 31, 1202, 31031, 987654])
@pytest.mark.parametrize("kinds", [None, ["oom", "kill-supervisor"], ["storm", "stall", "kill-verl", "disk-full"]])
def test_every_kind_once_per_cycle_of_len_kinds_episodes(soak, seed, kinds):
    kinds = kinds or list(soak.FAULTS)
    k = len(kinds)
    for c in range(4):
        got = [soak.draw(seed, c * k + i, kinds, 3).kind for i in range(1, k + 1)]
        assert sorted(got) == sorted(kinds), (seed, c, got)


def test_an_episode_replayed_alone_draws_what_the_whole_soak_drew(soak):
    kinds = list(soak.FAULTS)
    whole = [soak.draw(4242, n, kinds, 3) for n in range(1, 40)]
    for n in (1, 15, 16, 30, 39):  # first, cycle ends and starts, late (15 kinds)
        alone = soak.draw(4242, n, kinds, 3)
        ep = whole[n - 1]
        assert (alone.kind, alone.shape, alone.hosts, alone.params) == (ep.kind, ep.shape, ep.hosts, ep.params)
    # and the draw of one kind does not depend on the other episodes drawn before it in this process
    assert soak.draw(4242, 29, kinds, 3).params == whole[28].params


def test_the_operator_reads_status_again_after_the_stop_before_a_resume(soak):
    """Seed 1207 episode 24 (a 2-host Ray run, its supervisor SIGKILLed): status said "verl still runs: `inv stop`,
    then `inv launch --resume` continues"; while the operator's stop ran, verl finished its last step, so the resume
    was refused ("would train nothing"). After the stop the tool says the run is stopped at its last step and names
    no resume: the harness acts on what status says after the stop, not before."""
    from types import SimpleNamespace

    rid = "20261202-060908-7481"
    before = {"run_id": rid, "hint": f"verl still runs: end it with `inv stop -H h2 --run {rid}`, then "
              f"`inv launch -H h2 --resume {rid}` continues from its last checkpoint"}  # fmt: skip
    after = {"run_id": rid, "ended": "stopped by `inv stop` at step 13/13"}
    calls = []

    class Op:
        looks = 0

        def status(self, hosts):
            Op.looks += 1
            return [before if Op.looks == 1 else after]

        def inv(self, *argv, timeout=0):
            calls.append(argv)
            return SimpleNamespace(returncode=0, stdout="", stderr="")

    s = soak.Soak.__new__(soak.Soak)
    s.bench, s.op = SimpleNamespace(runs_dir=lambda h: Path("/nonexistent")), Op()
    s.rec = lambda run: {"status": "stopped", "step": 13, "total_steps": 13}
    run = soak.Run(head="h2", hosts=["h2", "h3"], rids=[rid])
    ep = soak.Episode(n=24, kind="kill-supervisor", shape="ray", hosts=["h2", "h3"], params={"steps": 13})
    assert s.follow_up(ep, run, "supervisor-gone") is False
    assert [c[0] for c in calls] == ["stop"] and not ep.violations  # no --resume launched after the stop


def test_divergence_is_a_drawn_cued_kind_with_its_cue_and_verdict(soak):
    """Issue 42 item 1: the soak draws ``divergence`` (the stand-in's ``diverge`` cue, sandbox/README.md) and
    judges it by the ``diverged`` verdict."""
    assert "divergence" in soak.FAULTS and "divergence" in soak.CUED
    drawn = [soak.draw(7, n, list(soak.FAULTS), 3) for n in range(1, len(soak.FAULTS) + 1)]
    ep = next(e for e in drawn if e.kind == "divergence")
    assert ep.params["metric"] in ("grad_norm", "lr") and ep.params["then"] in ("continue", "filter-loop")


def _attempt(d: Path, rid: str, n: int, lines: list[str]) -> dict:
    (d / rid).mkdir(parents=True, exist_ok=True)
    (d / rid / f"attempt-{n}.log").write_text("\n".join(lines) + "\n")
    return {"n": n, "log": f"attempt-{n}.log"}


def _step(n: int, grad_norm: str = "0.3") -> str:
    return f"step:{n} - training/global_step:{n} - actor/grad_norm:np.float64({grad_norm}) - actor/lr:1e-06"


def test_the_steps_invariant_never_asks_to_resume_from_a_checkpoint_after_the_bad_step(soak, tmp_path):
    """A diverged attempt saved global_step_4 and printed step 4's line with NaN: the supervisor's retry resumes from
    global_step_3 (the last healthy one) and that is no violation; resuming from the bad global_step_4 is one."""
    import json
    from types import SimpleNamespace

    save = "INFO:x:Saving checkpoint to /c/global_step_%d"
    a1 = [save % 1, _step(1), save % 2, _step(2), save % 3, _step(3), save % 4, _step(4, "nan")]

    def check(resumed_from: int) -> list:
        rid = f"20260101-000000-000{resumed_from}"
        d = tmp_path / str(resumed_from)
        atts = [
            _attempt(d, rid, 1, a1),
            _attempt(
                d,
                rid,
                2,
                [f"INFO:x:Resuming from /c/global_step_{resumed_from}, setting global step to {resumed_from}"]
                + [_step(n) for n in range(resumed_from + 1, 6)],
            ),
        ]
        (d / rid / "run.json").write_text(json.dumps({"attempts": atts}))
        s = soak.Soak.__new__(soak.Soak)
        s.bench = SimpleNamespace(runs_dir=lambda h: d)
        ep = soak.Episode(n=1, kind="divergence", shape="single", hosts=["h1"], params={})
        s.check_steps(ep, soak.Run(head="h1", hosts=["h1"], rids=[rid]))
        return ep.violations

    assert check(3) == []
    assert [v[0] for v in check(4)] == ["steps"]


def test_data_runs_out_is_drawn_with_steps_beyond_what_one_epoch_feeds(soak, monkeypatch):
    """Issue 42: the soak draws ``data-runs-out`` (the sample data's 1024 rows // batch 64 = 16 steps per epoch, one
    epoch, --steps above it, --allow-short-data); its right verdict is ``data-ran-out``, never a success."""
    kinds = list(soak.FAULTS)
    assert "data-runs-out" in kinds and soak.FAULTS["data-runs-out"] == ("single", "independent")
    eps = [soak.draw(s, n, kinds, 3, quick=q) for s in (1, 31, 1202) for n in range(1, 46) for q in (False, True)]
    drawn = [e for e in eps if e.kind == "data-runs-out"]
    assert drawn
    for e in drawn:
        assert e.params["epochs"] == 1 and e.params["fed"] == 16 and e.params["steps"] >= 18, e.params
    s = soak.Soak.__new__(soak.Soak)
    s.bench = None
    run = soak.Run(head="h1", hosts=["h1"], rids=["20261207-000000-abcd"])
    ep = drawn[0]
    failed = {"status": "failed", "attempts": [{"verdict": {"cls": "data-ran-out"}}], "decision": {"ended": "x"}}
    for rec, ok in ((failed, True), ({"status": "succeeded", "attempts": []}, False)):
        monkeypatch.setattr(soak, "read_run", lambda b, h, rid, rec=rec: rec)
        assert s.verdict_ok(ep, run)[0] is ok
