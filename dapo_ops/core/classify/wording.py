"""The action line and hint paragraph of a verdict (:mod:`dapo_ops.core.classify`): the failure policy's action
text (``dapo_ops/core/policy.py``) and the hint rules and texts of ``dapo_ops/core/classify/hints.py`` applied to a
class and a detail dict.

STDLIB ONLY. The tables are checked at import (:func:`check_texts`, raising
:class:`~dapo_ops.core.classify.verdict.ClassifierTableError`).
"""

from __future__ import annotations

from string import Template
from typing import Any, Callable

from dapo_ops.core import policy
from dapo_ops.core.classify.hints import FRAGMENTS, HINT_RULES, HINTS
from dapo_ops.core.classify.verdict import CLASSES, ClassifierTableError
from dapo_ops.core.policy import ABSENT, SET


def _oom_extra(d: dict[str, Any]) -> str:
    if d.get("phase") == "log-prob":
        return FRAGMENTS["oom-device/log-prob"]
    return FRAGMENTS["oom-device/critic"] if d.get("role") == "critic" else ""


def _host_ckpt(d: dict[str, Any]) -> str:
    if d.get("phase") == "checkpoint-save" and d.get("ckpt_step") is not None:
        return Template(FRAGMENTS["oom-host/checkpoint-save"]).substitute(ckpt_step=f"{d['ckpt_step']}")
    return ""


_KILL_SIGNALS: dict[object, str] = {137: "exit 137: SIGKILL", 143: "exit 143: SIGTERM"}

#: text fragments from the detail (``""`` when the fact is unknown); each is computed only when a text uses it
FIELDS: dict[str, Callable[[dict[str, Any]], str]] = {
    # the step of the last metrics line: the failure came after it, in the step that followed
    "at": lambda d: f" after step {d['step']}" if d.get("step") is not None else "",
    "inph": lambda d: f" in {d['phase']}" if d.get("phase") not in (None, "", "unknown") else "",
    "phase": lambda d: f"{d.get('phase')}",
    # the phase-less ladder is dapo_ops/core/memladder.py's "unknown" row: + offload, then + recompute
    "for_phase": lambda d: (
        f"for phase {d['phase']} (the ladder per phase)"
        if d.get("phase") not in (None, "", "unknown")
        else "(no phase in the log: + offload, then + recompute)"
    ),
    "oom_extra": _oom_extra,
    "on_node": lambda d: f" on node {d['node']}" if d.get("node") else "",
    "paren_node": lambda d: f" (node {d['node']})" if d.get("node") else "",
    "ray_ckpt": lambda d: (
        f" global_step_{d['ckpt_step']}" if d.get("ckpt_step") is not None else " the newest checkpoint"
    ),
    "host_ckpt": _host_ckpt,
    "key_paren": lambda d: " (" + d["key"] + ")" if d.get("key") else "",
    "key_colon": lambda d: ": " + d["key"] if d.get("key") else "",
    "key_repr": lambda d: f"{d.get('key')!r}",
    "path": lambda d: f" ({d['path']})" if d.get("path") else "",
    "have": lambda d: f" ({d['available']:g} available, {d['desired']:g} requested)" if "desired" in d else "",
    "ws": lambda d: f" ({d['world_size']} devices, TP {d['tp']})" if "tp" in d else "",
    "need": lambda d: f" ({d['value']} < {d['need']})" if "need" in d else "",
    "size": lambda d: f" ({d['length']} > {d['limit']} tokens)" if "limit" in d else "",
    "at_addr": lambda d: " at " + d["address"] if d.get("address") else "",
    "addr_or_host": lambda d: f"{d.get('address') or 'the host'}",
    "last_step_seen": lambda d: f" (last step seen: {d['step']})." if d.get("step") is not None else ".",
    "step_sp": lambda d: " " + str(d["step"]) if d.get("step") is not None else "",
    "of_total": lambda d: " of " + str(d["total"]) if d.get("total") else "",
    "teardown": lambda d: FRAGMENTS["success/teardown"] if d.get("teardown_error") else "",
    "alloc_gib": lambda d: f"{d.get('alloc_gib', 0):.0f}",
    "of_total_gib": lambda d: " (" + format(d["total_gib"], ".2f") + " GiB total)" if d.get("total_gib") else "",
    "code": lambda d: f" ({d['code']})" if d.get("code") else "",
    "kill": lambda d: _KILL_SIGNALS.get(d.get("exit_code"), "killed by a signal"),
}


class _Fields(dict[str, Any]):
    """The template mapping: a field is computed from the detail on first use."""

    def __init__(self, detail: dict[str, Any]):
        super().__init__()
        self.detail = detail

    def __missing__(self, name: str) -> str:
        value = self[name] = FIELDS[name](self.detail)
        return value


def _select(rules: dict[str, tuple[tuple[str, object, str], ...]], cls: str, kind: str, d: dict[str, Any]) -> str:
    if cls not in rules:
        cls = "crash-other"
    for field, value, key in rules[cls]:
        have = kind if field == "kind" else d.get(field)
        if value is SET:
            if have:
                return key
        elif value is ABSENT:
            if field not in d:
                return key
        elif have == value:
            return key
    return cls


def action_text(cls: str, d: dict[str, Any]) -> str:
    """The one-line action for a verdict of class ``cls`` with detail ``d``: its policy rule's text
    (:func:`dapo_ops.core.policy.rule`; a class the policy does not know gets ``crash-other``'s)."""
    r = policy.rule(cls, d) or policy.rule("crash-other", d)
    assert r is not None  # crash-other has a catch-all rule (policy.py is checked at import)
    return Template(r.action).substitute(_Fields(d))


def hint_text(cls: str, d: dict[str, Any]) -> str:
    """The hint paragraph for a verdict of class ``cls`` with detail ``d`` (rules may test the policy's kind)."""
    return Template(HINTS[_select(HINT_RULES, cls, policy.kind(cls, d).value, d)]).substitute(_Fields(d))


def check_texts(rules: dict[str, Any], texts: dict[str, str], fields: dict[str, Any] = FIELDS) -> None:
    """Every class has rules and a default text, every rule names a text, every ``$field`` is in :data:`FIELDS`.

    Raises:
        ClassifierTableError: naming the first class, text key or field that does not fit.
    """
    for cls in CLASSES:
        if cls not in rules or cls not in texts:
            raise ClassifierTableError(f"hints: class {cls!r} has no rules or no default text")
    for cls, rows in rules.items():
        for row in rows:
            if len(row) != 3 or row[2] not in texts:
                raise ClassifierTableError(f"hints: rule {row!r} of {cls!r} names no text")
    for key, text in texts.items():
        for m in Template.pattern.finditer(text):
            name = m.group("named") or m.group("braced")
            if m.group("invalid") is not None or (name is not None and name not in fields):
                raise ClassifierTableError(f"hints: text {key!r} uses an unknown field at {text[m.start() :][:20]!r}")


check_texts(HINT_RULES, HINTS)
for _rules in policy.POLICY.values():  # every policy text uses known fields
    for _r in _rules:
        for _m in Template.pattern.finditer(_r.action):
            _name = _m.group("named") or _m.group("braced")
            if _m.group("invalid") is not None or (_name is not None and _name not in FIELDS):
                raise ClassifierTableError(f"policy: text {_r.action[:40]!r} uses an unknown field")
