"""The classifier against the case corpus: the handed cases (tests/cases/handed, copied from the
sanitized public bug reports) and our own variants of every class (tests/cases/variants).

Each ``<name>.log`` has a ``<name>.expect``::

    class: <class>                 # asserted
    action: <free text>            # the human action (handed cases: the reference answer)
    phase: <phase>                 # asserted: Verdict.detail["phase"] (OOM phase, classify.PHASES), where one can tell
    kind: <action kind>            # asserted: the free-text action mapped to docs/design.md "Action kinds"
    detail.<key>: <value>          # asserted: Verdict.detail[key] (compared as text)
    input.<name>: <json>           # passed to classify_file: exit_code, container_state, planned_total
"""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest

from dapo_ops.core import classify as C
from dapo_ops.core import policy

CASES = Path(__file__).parent / "cases"


def _load(expect: Path) -> dict:
    spec = {"detail": {}, "input": {}}
    for line in expect.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        key, _, val = line.partition(":")
        val = val.strip()
        if key == "phase":
            spec["detail"]["phase"] = val
        elif key.startswith("detail."):
            spec["detail"][key[len("detail.") :]] = val
        elif key.startswith("input."):
            spec["input"][key[len("input.") :]] = json.loads(val)
        else:
            spec[key] = val
    return spec


def _corpus() -> list[tuple[str, Path, dict]]:
    out = []
    for sub in ("handed", "variants"):
        for log in sorted((CASES / sub).glob("*.log")):
            out.append((f"{sub}/{log.stem}", log, _load(log.with_suffix(".expect"))))
    return out


CORPUS = _corpus()


@pytest.mark.parametrize("name,log,spec", CORPUS, ids=[c[0] for c in CORPUS])
def test_case(name, log, spec):
    v = C.classify_file(log, **spec["input"])
    got = (v.cls, v.action_kind)
    assert got == (spec["class"], spec["kind"]), f"{name}: {got}\nevidence: {v.evidence}\ndetail: {v.detail}"
    for key, want in spec["detail"].items():
        assert str(v.detail.get(key)) == want, f"{name}: detail[{key!r}] = {v.detail.get(key)!r}, want {want}"
    assert v.action and "\n" not in v.action
    assert v.hint and "\n" not in v.hint
    for line in v.evidence:
        assert "\x1b" not in line and not line.startswith("(WorkerDict") and not line.startswith("(raylet")
    json.dumps(v.to_json())


def test_every_handed_case_is_copied_with_its_verdict():
    handed = sorted(p.stem for p in (CASES / "handed").glob("*.log"))
    assert len(handed) == 35
    for stem in handed:
        spec = _load(CASES / "handed" / f"{stem}.expect")
        assert spec["class"] in C.CLASSES and spec["kind"] in {k.value for k in policy.Kind} and spec["action"]
        assert spec["detail"].get("phase", "unknown") in C.PHASES, stem


def test_no_memory_escalation_outside_oom_device_and_no_device_oom_missed():
    """Over the whole corpus (handed, variants, the real verl logs): ``escalate-memory`` only for ``oom-device``;
    every expected device OOM is classified ``oom-device`` with a phase, and the supervisor's per-line trigger
    (:func:`is_device_oom_line`) fires on at least one of its lines."""
    wrong = []
    for name, log, spec in CORPUS + REAL:
        v = C.classify_file(log, **spec["input"])
        if v.action_kind == "escalate-memory" and v.cls != "oom-device":
            wrong.append(f"{name}: escalates memory for {v.cls}")
        if spec["class"] != "oom-device" and v.action_kind == "escalate-memory":
            wrong.append(f"{name}: escalates memory, expected {spec['class']}")
        if spec["class"] == "oom-device":
            if v.cls != "oom-device" or v.detail.get("phase") not in C.PHASES:
                wrong.append(f"{name}: device OOM missed ({v.cls}, phase {v.detail.get('phase')})")
            lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
            if not any(C.is_device_oom_line(ln) for ln in lines):
                wrong.append(f"{name}: no line triggers is_device_oom_line")
    assert not wrong, "\n".join(wrong)


# ------------------------------------------------------------------ the real verl 0.9.1 logs (H200, see SOURCE.md)
REAL_DIR = Path(__file__).parent / "fixtures" / "real-verl"
REAL_EXPECT = {  # file -> (class, action kind, phase or None)
    "verl-run-1-grpo-3steps.log": ("success", "done", None),
    "verl-run-2-resume.log": ("success", "done", None),
    "verl-run-3-oom.log": ("oom-device", "escalate-memory", "weight-sync"),
    "verl-run-4-offload.log": ("success", "done", None),
    "verl-run-5-dapo-async-3steps.log": ("success", "done", None),
    "verl-run-6-dapo-async-resume.log": ("success", "done", None),
    "verl-run-7-big-update-oom-offload.log": ("oom-device", "escalate-memory", "update"),
    "verl-run-8-big-fix-micro4-offload.log": ("success", "done", None),
}
REAL = [
    (f"real/{n}", REAL_DIR / n, {"class": c, "kind": k, "detail": {"phase": p} if p else {}, "input": {}})
    for n, (c, k, p) in REAL_EXPECT.items()
]


@pytest.mark.parametrize("name", sorted(REAL_EXPECT))
def test_real_verl_logs(name):
    cls, kind, phase = REAL_EXPECT[name]
    v = C.classify_file(REAL_DIR / name)
    assert (v.cls, v.action_kind, v.detail.get("phase")) == (cls, kind, phase), (v.evidence, v.detail)


def test_corpus_covers_every_class_with_variants(test_report):
    handed = collections.Counter(s["class"] for n, _, s in CORPUS if n.startswith("handed/"))
    ours = collections.Counter(s["class"] for n, _, s in CORPUS if n.startswith("variants/"))
    rows = [f"{'class':18} {'handed':>6} {'variants':>8} {'total':>5}"]
    for cls in C.CLASSES:
        rows.append(f"{cls:18} {handed[cls]:6d} {ours[cls]:8d} {handed[cls] + ours[cls]:5d}")
    rows.append(f"{'all':18} {sum(handed.values()):6d} {sum(ours.values()):8d} {len(CORPUS):5d}")
    test_report("classifier corpus per class:\n" + "\n".join(rows))
    missing = [cls for cls in C.CLASSES if ours[cls] < 2]
    assert not missing, f"classes with fewer than two own variants: {missing}"
    kinds = collections.Counter(s["kind"] for _, _, s in CORPUS)
    all_kinds = {k.value for k in policy.Kind}
    assert set(kinds) == all_kinds, f"action kinds not covered: {all_kinds - set(kinds)}"
    dirs = collections.Counter(s["detail"].get("kv_direction") for _, _, s in CORPUS if s["class"] == "oom-kv-cache")
    assert {"lower", "raise", "cleanup"} <= set(dirs)


# ------------------------------------------------------------------ metamorphic variants of the whole corpus
# The same log with presentation noise must get the same class and action kind: Ray-wrapped vs bare lines,
# colour codes, CRLF / tqdm carriage returns, Ray's dedup suffix, other capitalisation of the error text.

import re  # noqa: E402

_PREFIX = re.compile(r"^\((?:(?:[^()\s=]+ )?pid=\d+|raylet)(?:, ip=[0-9.]+)?\) ?")


def _strip_prefixes(text):
    return "\n".join(_PREFIX.sub("", ln) for ln in text.split("\n"))


def _add_prefixes(text):
    out = []
    for ln in text.split("\n"):
        if ln and not _PREFIX.match(ln) and not ln.startswith("====="):
            ln = "(TaskRunner pid=4242) " + ln
        out.append(ln)
    return "\n".join(out)


def _colour(text):
    return "\n".join(
        _PREFIX.sub(lambda m: "\x1b[36m" + m.group(0).rstrip() + "\x1b[0m ", ln) + ("\x1b[0m" if ln else "")
        for ln in text.split("\n")
    )


def _crlf_and_bars(text):
    bar = "(TaskRunner pid=1) Training Progress:   1%|          | 1/900 [00:01<15:00, 1.00s/it]\r"
    return bar + text.replace("\n", "\r\n")


def _dedup_suffix(text):
    return "\n".join(
        ln + " [repeated 2x across cluster]" if _PREFIX.match(ln) and i % 3 == 0 else ln
        for i, ln in enumerate(text.split("\n"))
    )


def _recase(text):
    def fix(ln):
        low = ln.lower()
        if "out of memory" in low or "error:" in low:
            m = _PREFIX.match(ln)
            head = m.group(0) if m else ""
            return head + ln[len(head) :].lower()
        return ln

    return "\n".join(fix(ln) for ln in text.split("\n"))


def _nameless_pids(text):
    """Ray's prefix without an actor name, ``(pid=N)`` (a plain task's output; dapo_ops/core/logformat.py
    RAY_PREFIX_RE), on every line that had a worker prefix or none; raylet lines keep theirs."""
    out = []
    for ln in text.split("\n"):
        m = _PREFIX.match(ln)
        if m and not m.group(0).startswith("(raylet"):
            ln = "(pid=%d) " % (4000 + len(out)) + ln[m.end() :]
        elif ln and not m and not ln.startswith("====="):
            ln = "(pid=77, ip=192.0.2.9) " + ln
        out.append(ln)
    return "\n".join(out)


TRANSFORMS = {
    "nameless-pids": _nameless_pids,
    "strip-prefixes": _strip_prefixes,
    "add-prefixes": _add_prefixes,
    "colour": _colour,
    "crlf-bars": _crlf_and_bars,
    "dedup-suffix": _dedup_suffix,
    "recase": _recase,
}


@pytest.mark.parametrize("transform", sorted(TRANSFORMS))
def test_corpus_is_stable_under_presentation_noise(transform):
    fn = TRANSFORMS[transform]
    wrong = []
    for name, log, spec in CORPUS:
        text = fn(log.read_text(encoding="utf-8"))
        v = C.classify(text, **spec["input"])
        if (v.cls, v.action_kind) != (spec["class"], spec["kind"]):
            wrong.append(f"{name}: {v.cls}/{v.action_kind}, want {spec['class']}/{spec['kind']}")
        if spec["class"] == "oom-kv-cache" and v.detail.get("kv_direction") != spec["detail"].get("kv_direction"):
            wrong.append(f"{name}: kv_direction {v.detail.get('kv_direction')}")
    assert not wrong, "\n".join(wrong)
