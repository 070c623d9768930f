"""One failure policy: for every class x OOM phase x fatal / non-fatal / unknown, and the causes the supervisor adds
(a stall, an error storm, a full disk, an external kill, a lost Ray node, a one-step-off weight sync by side), the
supervisor's decision (``ladder.decide``), the text shown to the user (``Verdict.action`` / ``hint``) and
docs/troubleshooting.md agree.

The meaning of each action kind is written HERE (:data:`FIRST`, :data:`SAYS`), not read from the code, and the docs
rows are evaluated from the markdown: a table that disagrees with the ladder, a text promising a retry the supervisor
never makes, or a doc row stating another kind, fails. On the code before the one-table change this fails for: a
tracker network warning while training goes on (``network`` / ``keep-running``, but the ladder retried), a
model-load / checkpoint-save device OOM (the text said "retry with the next memory rung", the ladder stopped) and a
hang (``stop`` in the supervisor's verdict, retried once by the ladder).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from dapo_ops.agent.supervisor import escalate
from dapo_ops.agent.supervisor.diskspace import DiskWatch
from dapo_ops.core import classify as C
from dapo_ops.core import ladder, memladder, topology
from dapo_ops.core.classify import storm as stormmod
from dapo_ops.core.classify.decide import mk
from dapo_ops.core.features import resolve

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "troubleshooting.md"
VARIANTS = Path(__file__).parent / "cases" / "variants"

#: what the supervisor must decide the first time a verdict of each kind ends an attempt (fresh features and
#: counters; for rollback-offload the ladder has added offload, so there is something to roll back)
FIRST = {
    "escalate-memory": "retry",
    "adjust-rollout-memory": "retry",
    "rollback-offload": "retry",
    "retry-once": "retry",
    "stop": "stop",
    "keep-running": "keep-running",
    "done": "done",
}
#: what the action line must say for each kind
SAYS = {
    "escalate-memory": r"\bretry\b.*\bnext memory rung\b",
    "adjust-rollout-memory": r"\bgpu_memory_utilization\b.*\bretry\b|\bretry\b.*\bgpu_memory_utilization\b",
    "rollback-offload": r"\bretry once\b",
    "retry-once": r"\bretry once\b",
    "stop": r"\bstop",
    "keep-running": r"^keep running\b",
    "done": r"^done\b",
}
#: a retry promised by a kind that never retries
PROMISES_RETRY = re.compile(r"(?<!not )(?<!never )\bretry(?:ing)?\b(?! unchanged)|dapo-ops retries", re.I)

SETTINGS = {
    "framework": "fsdp",
    "mode": "dapo",
    "max_prompt_length": 1024,
    "max_response_length": 2048,
    "gpu_memory_utilization": 0.6,
    "steps": 10,
}


# ------------------------------------------------------------------ the walk


def _walk():
    """``(id, verdict dict, settings)`` for every case: the verdict built the way production builds it."""
    out = []
    for cls in C.CLASSES:
        for phase in C.PHASES + (None,):
            for fatal in (None, True, False):
                d = {k: v for k, v in (("phase", phase), ("fatal", fatal)) if v is not None}
                out.append((f"{cls}/{phase}/fatal={fatal}", mk(cls, d, []).to_json(), SETTINGS))
    for direction in ("lower", "raise", "cleanup"):
        out.append(
            (f"oom-kv-cache/{direction}", mk("oom-kv-cache", {"kv_direction": direction}, []).to_json(), SETTINGS)
        )
    for side in ("trainer", "rollout", None):  # one-step-off weight sync: one ladder per side
        d = {"phase": "weight-sync", **({"side": side} if side else {})}
        out.append(
            (
                f"oom-device/weight-sync/one-step-off/{side}",
                mk("oom-device", d, []).to_json(),
                dict(SETTINGS, mode="one-step-off"),
            )
        )
    for code, cause in ((137, "sigkill"), (143, "sigterm")):
        out.append((f"crash-other/external-{code}", C.classify("", exit_code=code).to_json(), SETTINGS))
        assert out[-1][1]["detail"].get("external") and out[-1][1]["detail"]["cause"] == cause
    out.append(
        (
            "crash-other/disk-full/classifier",
            C.classify("OSError: [Errno 28] No space left on device: '/runs/r1/checkpoints'", exit_code=1).to_json(),
            SETTINGS,
        )
    )
    out.append(("crash-other/inconclusive", C.classify("", exit_code=None).to_json(), SETTINGS))
    # the classifier on real texts (the non-fatal kinds come from the log, not from a detail written here)
    for name in (
        "v-network-swanlab-api-error-499-while-training",
        "v-auth-swanlab-06-status-401-unauthorized-running",
        "v-oom-device-model-load-from-pretrained",
        "v-oom-device-checkpoint-save-gather",
    ):
        text = (VARIANTS / f"{name}.log").read_text(encoding="utf-8")
        code = 1 if "oom-device" in name else None
        out.append((f"log/{name}", C.classify(text, exit_code=code).to_json(), SETTINGS))
    # the supervisor's own verdicts
    out.append(("hang/timeout", escalate.hang_verdict(1800, 3, 10), SETTINGS))
    out.append(
        (
            "hang/stalled",
            escalate.stall_verdict(
                400.0,
                300.0,
                [60.0, 50.0, 55.0],
                3,
                10,
                [{"role": "driver", "pid": 1, "where": "ray.get"}],
                "/runs/r1/stacks-attempt-1.txt",
            ),
            SETTINGS,
        )
    )
    storm = {
        "exc": "ValueError",
        "message": "bad",
        "count": 20,
        "span_s": 30.0,
        "frame": "reward.py:5",
        "user_frame": "reward.py:5",
        "user_path": "/w/reward.py",
        "user_func": "score",
        "evidence": ["x"],
    }
    out.append(("error-storm/user-frame", stormmod.storm_verdict(storm, 3, 10), SETTINGS))
    out.append(
        ("error-storm/framework", stormmod.storm_verdict(dict(storm, user_frame=None, user_path=None), 3, 10), SETTINGS)
    )
    disk = DiskWatch("/runs/r1", reserve_bytes=0)
    disk.full = {"path": "/runs/r1/train.log", "error": "No space left on device"}
    out.append(("crash-other/disk-full/supervisor", disk.verdict(3, 10), SETTINGS))
    ray_spec = {
        "head": "198.51.100.11",
        "nodes": [{"name": "h1", "address": "198.51.100.11"}, {"name": "h2", "address": "198.51.100.12"}],
    }
    out.append(
        (
            "network/lost-node",
            topology.lost_nodes_verdict(ray_spec, {"nodes": [{"address": "198.51.100.11"}]}),
            SETTINGS,
        )
    )
    return out


WALK = _walk()


def _features(kind: str):
    fs = resolve("")
    return fs.add("offload", "oom-retry-1") if kind == "rollback-offload" else fs


# ------------------------------------------------------------------ docs/troubleshooting.md, read as a person would


def _doc_rules() -> dict:
    """class -> [(when cell, kind, action cell)] of the "Failure policy" table."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split("\n## Failure policy\n", 1)[-1].split("\n## ", 1)[0] if "\n## Failure policy\n" in text else ""
    rules: dict = {}
    for line in section.splitlines():
        m = re.match(r"^\| `([a-z-]+)` \| (.+?) \| `([a-z-]+)` \| (.+) \|$", line)
        if m:
            rules.setdefault(m.group(1), []).append((m.group(2), m.group(3), m.group(4).replace("\\|", "|")))
    return rules


DOC_RULES = _doc_rules()


def _doc_when_holds(when: str, detail: dict) -> bool:
    """A "when" cell of the docs evaluated on a detail: `always` / `otherwise`, `` `k` set ``, ``no `k` ``,
    `` `k` = `v` `` (booleans written true / false), `` `k` in `a`, `b` ``."""
    if when in ("always", "otherwise"):
        return True
    if m := re.fullmatch(r"`(\w+)` set", when):
        return bool(detail.get(m.group(1)))
    if m := re.fullmatch(r"no `(\w+)`", when):
        return m.group(1) not in detail
    if m := re.fullmatch(r"`(\w+)` = `([^`]*)`", when):
        v = detail.get(m.group(1), object())
        return (str(v).lower() if isinstance(v, bool) else str(v)) == m.group(2) and m.group(1) in detail
    if m := re.fullmatch(r"`(\w+)` in (.+)", when):
        return str(detail.get(m.group(1))) in re.findall(r"`([^`]*)`", m.group(2))
    raise AssertionError(f"docs/troubleshooting.md: a condition this test cannot read: {when!r}")


def _doc_rule(cls: str, detail: dict):
    for when, kind, action in DOC_RULES.get(cls, []):
        if _doc_when_holds(when, detail):
            return kind, action
    return None


def _as_pattern(doc_action: str) -> str:
    """The documented action with its ``<field>`` placeholders as wildcards."""
    return ".*".join(re.escape(p) for p in re.split(r"<\w+>", doc_action))


# ------------------------------------------------------------------ the agreement


@pytest.mark.parametrize("case", WALK, ids=[c[0] for c in WALK])
def test_decision_text_and_docs_agree(case):
    name, v, settings = case
    cls, kind, detail = v["cls"], v["action_kind"], v["detail"]
    assert kind in FIRST, f"{name}: unknown action kind {kind!r}"
    # the supervisor's decision (what machine.py acts on) is the one the kind names
    d = ladder.decide(_features(kind), cls, detail, 0, 2, {}, settings)
    assert d.action == FIRST[kind], (
        f"{name}: verdict says {kind!r} ({v['action']!r}) but the supervisor {d.action}s: {d.reason}"
    )
    if kind in ("retry-once", "rollback-offload"):  # once: the second time it stops
        again = ladder.decide(_features(kind), cls, detail, 0, 2, {d.counter: 1}, settings)
        assert again.action == "stop", f"{name}: {kind} retried a second time"
    # the text shown says the same
    assert re.search(SAYS[kind], v["action"]), f"{name}: action line does not say {kind}: {v['action']!r}"
    if FIRST[kind] != "retry":
        for text in (v["action"], v["hint"]):
            assert not PROMISES_RETRY.search(text), f"{name}: {kind} but the text promises a retry: {text!r}"
    # docs/troubleshooting.md states the same kind, and the action line holds the documented action
    doc = _doc_rule(cls, detail)
    assert doc is not None, f"{name}: docs/troubleshooting.md has no policy row for {cls} with {detail}"
    assert doc[0] == kind, f"{name}: docs say {doc[0]!r}, the verdict {kind!r}"
    assert re.search(_as_pattern(doc[1]), v["action"]), (
        f"{name}: the action line is not the documented one: {v['action']!r} vs {doc[1]!r}"
    )


def test_the_walk_covers_every_kind_and_class():
    kinds = {v["action_kind"] for _, v, _ in WALK}
    classes = {v["cls"] for _, v, _ in WALK}
    assert kinds == set(FIRST), set(FIRST) - kinds
    assert classes == set(C.CLASSES) | {"hang", "error-storm"}
    assert set(DOC_RULES) == classes, "docs/troubleshooting.md lists the policy of every class"


@pytest.mark.parametrize(
    "name, want",
    [
        ("log/v-network-swanlab-api-error-499-while-training", ("network", "keep-running", "keep-running")),
        ("log/v-oom-device-model-load-from-pretrained", ("oom-device", "stop", "stop")),
        ("log/v-oom-device-checkpoint-save-gather", ("oom-device", "stop", "stop")),
        ("hang/timeout", ("hang", "retry-once", "retry")),
    ],
)
def test_the_three_old_disagreements(name, want):
    """The cases the review found, named: class, the kind shown, and what the supervisor does."""
    _, v, settings = next(c for c in WALK if c[0] == name)
    d = ladder.decide(resolve(""), v["cls"], v["detail"], 0, 2, {}, settings)
    assert (v["cls"], v["action_kind"], d.action) == want, (v["action"], d.reason)


#: the verl key each rung changes, as the hints name it (core/memladder.py rungs -> core/overrides.py, profiles.py)
RUNG_KEY = {
    "rollout-util": "gpu_memory_utilization",
    "rollout-eager": "enforce_eager",
    "offload": "param_offload",
    "update-batch": "ppo_max_token_len_per_gpu",
    "offload-policy": "offload_policy",
    "recompute": "enable_activation_offload",
    "logprob-batch": "log_prob_max_token_len_per_gpu",
}


@pytest.mark.parametrize("phase", [p for p in C.PHASES if memladder.phase_rungs(p, "fsdp", "dapo")])
def test_the_oom_hint_names_the_phase_ladder_in_its_order(phase):
    """The hint of a device OOM in ``phase`` names the rungs the supervisor climbs for it (FSDP, colocated:
    memladder.phase_rungs), in that order, by the verl key each changes. The old generic text told an update or
    log-prob OOM "offload, then recompute" while the ladder lowers the micro-batch first (and never offloads there)."""
    hint = mk("oom-device", {"phase": phase} if phase != "unknown" else {}, []).to_json()["hint"]
    rungs = list(dict.fromkeys(memladder.phase_rungs(phase, "fsdp", "dapo")))
    at = [hint.find(RUNG_KEY[r]) for r in rungs]
    assert all(i >= 0 for i in at), f"{phase}: the hint does not name {[r for r, i in zip(rungs, at) if i < 0]}: {hint}"
    assert at == sorted(at), f"{phase}: the hint names {rungs} out of the ladder's order: {hint}"


@pytest.mark.parametrize("phase", ["update", "log-prob"])
def test_the_oom_hint_says_by_how_much_the_ladder_shrinks_the_micro_batch(phase):
    """Without dynamic batch the update / log-prob rungs divide the micro-batch by memladder.MICRO_DIVISOR (4;
    docs/troubleshooting.md "Device OOM by phase": "micro-batch / 4"); the hints said "halve" (sandbox trial, round
    8: `inv classify` on tests/cases/handed/case-04-npu-oom-update-actor-raywrapped.log told the user the micro-batch is halved)."""
    hint = mk("oom-device", {"phase": phase}, []).to_json()["hint"]
    assert f"micro_batch_size_per_gpu by {memladder.MICRO_DIVISOR}" in hint, hint
    assert (
        f"micro-batch / {memladder.MICRO_DIVISOR}"
        in Path(__file__).parents[1].joinpath("docs", "troubleshooting.md").read_text()
    )


def test_the_weight_sync_hint_names_the_one_step_off_ladder_by_side():
    """The verdict's detail does not say the mode, so the weight-sync hint gives both ladders: colocated (share, then
    offload) and one-step-off by side (memladder.phase_rungs: trainer = the bucket twice; rollout = the bucket twice,
    then the share: issue 43 finding 6, verl frees the rollout's KV cache before the buckets)."""
    hint = mk("oom-device", {"phase": "weight-sync"}, []).to_json()["hint"]
    assert memladder.phase_rungs("weight-sync", "megatron", "one-step-off", "trainer") == ("weight-bucket",) * 2
    rollout = memladder.phase_rungs("weight-sync", "megatron", "one-step-off", "rollout")
    assert rollout == ("weight-bucket", "weight-bucket", "rollout-util")
    tail = hint[hint.index("one-step-off") :]
    assert tail.index("trainer:") < tail.index("update_weights_bucket_megabytes") < tail.index("rollout:")
    assert tail.index("rollout:") < tail.rindex("bucket") < tail.rindex("gpu_memory_utilization")


# ------------------------------------------------------------------ Kind owns the dispatch (issue 46 item 3)


class _Recorder:
    """A policy.Steps that says which step it was asked for."""

    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return lambda: self.calls.append(name) or name


def test_every_kind_takes_the_step_of_its_own_name():
    """Kind.dispatch calls exactly one method of the Steps, the one named after the kind, and returns its result."""
    from dapo_ops.core.policy import Kind

    for k in Kind:
        rec = _Recorder()
        assert k.dispatch(rec) == k.name.lower() and rec.calls == [k.name.lower()], (k, rec.calls)
    # the ladder's Steps has a step for every kind and nothing else (its fields are decide's arguments)
    fields = {f.name for f in dataclasses.fields(ladder._Steps)}
    assert {k.name.lower() for k in Kind} == {m for m in dir(ladder._Steps) if not m.startswith("_")} - fields


@pytest.mark.parametrize("kind", sorted(FIRST))
def test_the_ladder_decides_through_the_kind(kind, monkeypatch):
    """ladder.decide holds no if-chain on the kind: it hands its Steps to Kind.dispatch, which picks the step. A
    verdict of every kind (from WALK) is dispatched once, as its own kind, and the decision is the one FIRST names."""
    from dapo_ops.core.policy import Kind

    name, v, settings = next(c for c in WALK if c[1]["action_kind"] == kind)
    seen = []
    real = Kind.dispatch

    def spy(self, steps):
        seen.append((self, type(steps).__name__))
        return real(self, steps)

    monkeypatch.setattr(Kind, "dispatch", spy)
    d = ladder.decide(_features(kind), v["cls"], v["detail"], 0, 2, {}, settings)
    assert seen == [(Kind(kind), "_Steps")] and d.action == FIRST[kind], (name, seen, d)


def test_a_verdict_holds_its_kind_as_the_policy_kind_and_run_json_the_string():
    from dapo_ops.core.policy import Kind

    verdict = mk("oom-device", {"phase": "update"}, [])
    assert verdict.action_kind is Kind.ESCALATE_MEMORY
    data = verdict.to_json()
    assert type(data["action_kind"]) is str and data["action_kind"] == "escalate-memory"
    assert C.Verdict(**data).action_kind is Kind.ESCALATE_MEMORY  # read back from run.json: the Kind again
    with pytest.raises(ValueError):
        C.Verdict(cls="x", action_kind="retry-forever", action="", hint="")
