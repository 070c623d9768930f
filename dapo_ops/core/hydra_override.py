"""One Hydra command-line override (``--override``, a spec's ``extra_overrides``, a word of verl's argv) read the way
Hydra reads it: ``(op, key, value)`` (stdlib only, pure; the one parser every module uses).

Hydra 1.3's override grammar (``hydra/grammar/OverrideParser.g4`` rule ``override``; the op is set in
``hydra/core/override_parser/overrides_visitor.py`` ``visitOverride``, ``OverrideType`` in
``hydra/core/override_parser/types.py``) has four ops, each applied in order by
``hydra/_internal/config_loader_impl.py`` ``_apply_overrides_to_config``:

- ``key=value`` (CHANGE, :data:`CHANGE`): sets an existing key (``key=`` sets the empty string);
- ``+key=value`` (ADD, :data:`ADD`): adds a key the config lacks (refused when it is there);
- ``++key=value`` (FORCE_ADD, :data:`FORCE_ADD`): sets or adds;
- ``~key`` / ``~key=value`` (DEL, :data:`DELETE`): removes the key; with a value, only when the config holds that
  value ("Could not delete from config. The value of 'k' is 5 and not 6" otherwise). The value is a guard, never a
  value of the key: after ``~key`` the key is not in the composed config, and verl reads its config dataclass's
  default instead (``verl/utils/config.py:42-64`` ``omega_conf_to_dataclass`` instantiates the ``_target_``
  dataclass or merges the config over it; the rollout's, ``verl/workers/rollout/replica.py:104``:
  ``~actor_rollout_ref.rollout.max_num_seqs`` runs vLLM with
  ``RolloutConfig.max_num_seqs = 1024``, ``verl/workers/config/rollout.py:206``, not the yaml's 256) or fails where
  it reads the key straight from the DictConfig (``trainer.test_freq``: ``verl/trainer/ppo/v1/trainer_base.py:491``).

So a deletion TOUCHES its key (a plan, a ladder rung or a learned start that sets the key would be undone by it, or
trip its guard) but GIVES it no value (:attr:`Override.text` is None). Only one op prefix is allowed (``+~k``,
``~+k`` and ``~~k`` are not overrides); the key ends at the first ``=`` (``key=a=b`` is Hydra's error, read here as
the value ``a=b``). Blanks around the key are tolerated here, though Hydra's lexer refuses them: the launch refuses
such an override with Hydra's own parser first (``dapo_ops/control/launch/service.py`` ``refuse_bad_overrides``).
A later override of a key wins (:func:`last_by_key`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, Iterable, Optional

#: Hydra's ``OverrideType`` names, lower case: ``key=v``, ``+key=v``, ``++key=v``, ``~key[=v]``
CHANGE, ADD, FORCE_ADD, DELETE = "change", "add", "force_add", "delete"
#: op -> its prefix as written
PREFIX = {CHANGE: "", ADD: "+", FORCE_ADD: "++", DELETE: "~"}


@dataclass(frozen=True)
class Override:
    """One override: ``op`` (:data:`CHANGE` | :data:`ADD` | :data:`FORCE_ADD` | :data:`DELETE`), ``key`` (the dotted
    key or config group, without the op prefix: ``actor_rollout_ref.rollout.n``, ``model_engine``) and ``value`` (the
    text after the first ``=`` as written, ``""`` for ``key=``; None for a bare ``~key``)."""

    op: str
    key: str
    value: Optional[str]

    @property
    def deletes(self) -> bool:
        """True for ``~key`` / ``~key=value`` (Hydra's DEL)."""
        return self.op == DELETE

    @property
    def head(self) -> str:
        """The key with its op prefix, as written: ``~actor_rollout_ref.rollout.max_num_seqs``, ``+trainer.x``."""
        return PREFIX[self.op] + self.key

    @property
    def quoted(self) -> bool:
        """True when the value (blanks around it dropped) is one quoted string (``'a b'``, ``"null"``): Hydra gives
        the key a string then, whatever it reads."""
        v = (self.value or "").strip()
        return len(v) >= 2 and v[0] == v[-1] and v[0] in "'\""

    @property
    def null(self) -> bool:
        """True for an unquoted ``null`` (any case): Hydra gives the key None (a quoted ``'null'`` is a string)."""
        return not self.deletes and (self.value or "").strip().lower() == "null"

    @property
    def text(self) -> Optional[str]:
        """The value the override gives its key, as text: :attr:`value` without surrounding blanks (Hydra drops
        them, ``OverrideLexer.g4`` ``EQUAL: '=' WS?``) and one pair of matching outer quotes (``'a b'`` -> ``a b``;
        Hydra's escapes inside are not undone). None for a deletion: ``~key=5`` removes the key, it does not set 5."""
        if self.deletes or self.value is None:
            return None
        v = self.value.strip()
        return v[1:-1] if self.quoted else v


def parse_override(item: object) -> Optional[Override]:
    """``item`` (``str()`` of it, blanks around it ignored) as one :class:`Override`, or None when it is not one:
    no key, no ``=`` without ``~`` (``trainer.x``), or more than one op prefix (``+~trainer.x=1``). Raises nothing.

    ``"~actor_rollout_ref.rollout.max_num_seqs"`` -> ``Override("delete", "actor_rollout_ref.rollout.max_num_seqs",
    None)``; ``"++trainer.x= 5"`` -> ``Override("force_add", "trainer.x", " 5")`` (:attr:`Override.text` ``"5"``)."""
    s = str(item).strip()
    if s.startswith("++"):
        op, rest = FORCE_ADD, s[2:]
    elif s.startswith("+"):
        op, rest = ADD, s[1:]
    elif s.startswith("~"):
        op, rest = DELETE, s[1:]
    else:
        op, rest = CHANGE, s
    key, sep, value = rest.partition("=")
    key = key.strip()
    if not key or key[0] in "+~" or (not sep and op != DELETE):
        return None
    return Override(op, key, value if sep else None)


def key_of(item: object) -> Optional[str]:
    """The key ``item`` overrides, whatever the op (a deletion touches its key too), or None when it is not an
    override (:func:`parse_override`)."""
    o = parse_override(item)
    return o.key if o is not None else None


def last_by_key(items: Iterable[object]) -> Dict[str, Override]:
    """``{key: the last override of that key}`` over ``items`` in order (Hydra applies them in order, so the last one
    decides the key: ``config_loader_impl.py`` ``_apply_overrides_to_config``); words that are not overrides are
    skipped. A deletion stays in the map (the key was touched, :attr:`Override.text` is None). An item already
    parsed (an :class:`Override`) is taken as it is, not parsed again."""
    out: Dict[str, Override] = {}
    for x in items or ():
        o = x if isinstance(x, Override) else parse_override(x)
        if o is not None:
            out[o.key] = o
    return out


def value_of(items: Iterable[object], key: str) -> Optional[str]:
    """The text the last override of ``key`` in ``items`` gives it (:attr:`Override.text`: quotes stripped), or None
    when none sets it or the last one deletes it."""
    o = last_by_key(items).get(key)
    return o.text if o is not None else None


#: Hydra 1.3's int literal (``OverrideLexer.g4`` ``INT``: ``0`` or a digit 1-9 then digits, single ``_`` between them,
#: an optional sign; ``0_0`` and ``007`` are strings)
_INT = re.compile(r"[+-]?(0|[1-9](_?[0-9])*)")
_D = r"[0-9](_?[0-9])*"
_POINT = rf"(({_D})?\.{_D}|{_D}\.)"
#: Hydra 1.3's float literal (``FLOAT``: a point or exponent float, ``inf``, ``nan``, an optional sign)
_FLOAT = re.compile(rf"[+-]?((({_POINT})|{_D})[eE][+-]?{_D}|{_POINT}|[iI][nN][fF]|[nN][aA][nN])")


def truth(o: Override) -> Optional[bool]:
    """Python truthiness of the value Hydra gives ``o``'s key, or None for a deletion (the config dataclass's default
    then runs). verl 0.9.1 builds its model config from the composed DictConfig through ``_target_`` without type
    coercion (``verl/utils/config.py:42-64``) and tests the flags by truthiness (``enable_gradient_checkpointing``,
    ``verl/workers/engine/fsdp/transformer_impl.py:335``), so the value's Python type decides: Hydra's ``true`` /
    ``false`` (any case) are bools, ``null`` is None, ``0`` / ``1`` ints, ``1e3`` / ``nan`` floats, a quoted value a
    string even when it reads ``'false'``, anything else an unquoted string (``no`` is the non-empty string "no":
    true). ``key=`` is the empty string: false. Raises nothing."""
    if o.deletes or o.value is None:
        return None
    v = o.value.strip()
    if o.quoted:
        return len(v) > 2
    if re.fullmatch(r"\[\s*\]|\{\s*\}", v):  # Hydra's empty list / dict
        return False
    low = v.lower()
    if low in ("true", "false", "null"):
        return low == "true"
    if _INT.fullmatch(v):
        return int(v.replace("_", "")) != 0
    if _FLOAT.fullmatch(v):
        return float(v.replace("_", "")) != 0.0
    return bool(v)
