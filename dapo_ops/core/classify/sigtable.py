"""The row format of the failure classifier's signature table (:mod:`dapo_ops.core.classify`): the precedence
tiers, :class:`Sig` (one compiled row), the row options and :func:`build_signatures`, which compiles and checks rows.
The rows themselves (the error texts, as data) are in ``dapo_ops/core/classify/signatures.py``, which re-exports
these names.

STDLIB ONLY. A bad row raises :class:`~dapo_ops.core.classify.verdict.ClassifierTableError`.
"""

from __future__ import annotations

import re
from typing import Iterable
from dataclasses import dataclass

from dapo_ops.core.classify.verdict import CLASSES, ClassifierTableError

ROOT, COLLECTIVE, WEAK, GENERIC = 1, 2, 3, 4
TIERS = (ROOT, COLLECTIVE, WEAK, GENERIC)


@dataclass(frozen=True)
class Sig:
    """One compiled signature (a row of :data:`SIGNATURE_ROWS`)."""

    name: str
    cls: str
    tier: int
    needles: tuple[str, ...]  # lower-case literals; every match contains at least one (found with str.find)
    rx: re.Pattern[str]  # applied to one lower-cased line
    fatal: bool = True
    finder: re.Pattern[str] | None = None  # also candidates: lines where this literal-prefixed regex matches


# Candidate finder for error CODES (EZ9999, EI0009, ERR02200 ...): literal-prefixed, so re scans fast
CODE_FINDER = re.compile(r"e[ehijlz1-9ab]\d{4}\b|err0[0-4]\d{3}")
#: row options
NONFATAL = {"fatal": False}
CODES = {"finder": CODE_FINDER}


def build_signatures(rows: Iterable[object], classes: Iterable[str] = CLASSES) -> tuple[Sig, ...]:
    """Compile and check signature rows (see the module docstring for the row format).

    Raises:
        ClassifierTableError: a row of the wrong shape, a duplicate name, an unknown class or tier, an empty or
            upper-case needle (never found: the scan reads lower-cased text), an unknown option, a bad regex.
    """
    out: list[Sig] = []
    seen: set[str] = set()
    for row in rows:
        if not isinstance(row, tuple) or len(row) not in (5, 6):
            raise ClassifierTableError(
                f"signature row must be (name, class, tier, needles, pattern[, options]): {row!r}"
            )
        name, cls, tier, needles, pattern = row[:5]
        opts = row[5] if len(row) == 6 else {}
        if name in seen:
            raise ClassifierTableError(f"signature {name!r}: duplicate name")
        seen.add(name)
        if cls not in classes:
            raise ClassifierTableError(f"signature {name!r}: unknown class {cls!r} (one of {', '.join(classes)})")
        if tier not in TIERS:
            raise ClassifierTableError(f"signature {name!r}: unknown tier {tier!r}")
        if isinstance(needles, str):
            needles = (needles,)
        if not needles or not all(isinstance(n, str) and n and n == n.lower() for n in needles):
            raise ClassifierTableError(f"signature {name!r}: needles must be non-empty lower-case strings: {needles!r}")
        if set(opts) - {"fatal", "finder"}:
            raise ClassifierTableError(f"signature {name!r}: unknown options {sorted(set(opts) - {'fatal', 'finder'})}")
        try:
            rx = re.compile(pattern)
        except re.error as exc:
            raise ClassifierTableError(f"signature {name!r}: bad pattern: {exc}") from exc
        out.append(Sig(name, cls, tier, tuple(needles), rx, opts.get("fatal", True), opts.get("finder")))
    return tuple(out)
