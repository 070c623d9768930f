"""Feature catalog, ``USER_FEATURES`` parsing and precedence (stdlib only).

A *feature* is a named bundle of verl overrides (the keys per framework and verl
version live in :mod:`dapo_ops.core.profiles`). The runbook's rules:

- performance features (``flash_attn``, ``dynamic_batch``, ``remove_padding``,
  ``gradient_checkpointing``) are on by default;
- memory features (``offload``, ``recompute``) are off and appended by the OOM ladder;
- verl-default features (``prefix_cache``, ``chunked_prefill``): verl turns them on itself
  (``verl/trainer/config/rollout/rollout.yaml:87,90``), so the tool emits nothing for them and they are on;
  ``-prefix_cache`` / ``-chunked_prefill`` turn them off (:func:`is_on`);
- precedence: explicit (``USER_FEATURES`` / ``--features``, ``ENABLE_OFFLOAD=True``)
  > defaults > OOM-appended. An explicit feature is never removed; ``-name`` turns a
  default off and the ladder never turns it back on.

Every enabled feature carries its *source* for display and for ``run.json``:
``explicit``, ``default``, ``oom-retry-<N>`` (N = the OOM retry that added it), ``estimate``
(the pre-launch memory-fit estimate, :mod:`dapo_ops.core.memfit`, started on that rung) or ``learned`` (an earlier
run of the same configuration needed that rung: :mod:`dapo_ops.core.learned`). Precedence: explicit > defaults >
learned / estimate (a used memo wins over the estimate: it was measured) > OOM-appended; neither a memo nor the
estimate is ever trusted over an explicit setting.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable

PERFORMANCE = ("flash_attn", "dynamic_batch", "remove_padding", "gradient_checkpointing")
MEMORY = ("offload", "recompute")
VERL_DEFAULT = ("prefix_cache", "chunked_prefill")
ALL = PERFORMANCE + MEMORY + VERL_DEFAULT

#: name -> (kind, one-line help). Kinds: performance (default on), memory (off, OOM-appended), verl-default (on
#: because verl turns it on; ``-name`` turns it off).
CATALOG: dict[str, tuple[str, str]] = {
    "flash_attn": (
        "performance",
        "Flash attention in the trainer (FSDP attn_implementation, Megatron attention_backend)",
    ),
    "dynamic_batch": ("performance", "Dynamic batch size by token budget (use_dynamic_bsz + *_max_token_len_per_gpu)"),
    "remove_padding": ("performance", "Remove padding / packed sequences (use_remove_padding)"),
    "gradient_checkpointing": (
        "performance",
        "Activation checkpointing (FSDP enable_gradient_checkpointing; Megatron full recompute on <= 64 GiB devices, "
        "else verl's selective core_attn recompute)",
    ),
    "offload": ("memory", "Offload parameters and optimizer state of actor/ref to host memory"),
    "recompute": (
        "memory",
        "Stronger recompute (Megatron full recompute; FSDP activation offload + gradient checkpointing unless -gradient_checkpointing)",
    ),
    "prefix_cache": (
        "verl-default",
        "vLLM prefix caching in the rollout (enable_prefix_caching); verl's default: on; -prefix_cache turns it off",
    ),
    "chunked_prefill": (
        "verl-default",
        "vLLM chunked prefill in the rollout (enable_chunked_prefill); verl's default: "
        "on; -chunked_prefill turns it off",
    ),
}

SOURCES = ("explicit", "default", "estimate", "learned")  # estimate: memfit started on this rung; learned: a memo
#                                                           (core/learned.py) did; neither is rolled back
_OOM_SOURCE = re.compile(r"^oom-retry-([1-9][0-9]*)$")


class FeatureError(ValueError):
    """A feature name or spec the catalog does not know; the message is one line listing the valid names."""


def _valid_names() -> str:
    return ", ".join(ALL)


def _check_name(name: str, what: str = "feature") -> None:
    if name not in CATALOG:
        raise FeatureError(
            f"unknown {what} {name!r}; valid features: {_valid_names()} (prefix a default with '-' to turn it off)"
        )


def _check_source(source: str) -> None:
    if source not in SOURCES and not _OOM_SOURCE.match(source):
        raise FeatureError(
            f"unknown feature source {source!r}; expected explicit, default, estimate, learned or oom-retry-<N>"
        )


def is_ladder_source(source: str) -> bool:
    """True for ``oom-retry-<N>`` sources (features the OOM ladder appended)."""
    return bool(_OOM_SOURCE.match(source))


@dataclass(frozen=True)
class Feature:
    """One enabled feature: ``name`` from :data:`CATALOG`, ``source`` explicit | default | oom-retry-<N>."""

    name: str
    source: str

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "source": self.source}


@dataclass(frozen=True)
class FeatureSet:
    """The features of one attempt.

    ``enabled``: ordered tuple of :class:`Feature` (catalog order for explicit/default,
    appended in ladder order after them). ``disabled``: names the user turned off
    explicitly with ``-name``; no rule ever re-enables them.
    """

    enabled: tuple[Feature, ...] = ()
    disabled: frozenset[str] = field(default_factory=frozenset)

    def names(self) -> frozenset[str]:
        """Names of the enabled features."""
        return frozenset(f.name for f in self.enabled)

    def has(self, name: str) -> bool:
        """True if ``name`` is enabled."""
        return any(f.name == name for f in self.enabled)

    def source_of(self, name: str) -> str | None:
        """Source of an enabled feature, or None if it is off."""
        for f in self.enabled:
            if f.name == name:
                return f.source
        return None

    def add(self, name: str, source: str) -> "FeatureSet":
        """Return a set with ``name`` enabled from ``source``.

        Never duplicates (an already-enabled feature keeps its original, higher-precedence
        source) and never re-enables a feature the user disabled with ``-name`` (returns
        ``self`` unchanged). Raises :class:`FeatureError` for unknown names or sources.
        """
        _check_name(name)
        _check_source(source)
        if self.has(name) or name in self.disabled:
            return self
        return FeatureSet(self.enabled + (Feature(name, source),), self.disabled)

    def remove_ladder(self, name: str) -> "FeatureSet":
        """Return a set without ``name`` if (and only if) the OOM ladder added it (``oom-retry-*``).

        Explicit and default features are never removed by this.
        """
        keep = tuple(f for f in self.enabled if not (f.name == name and is_ladder_source(f.source)))
        if len(keep) == len(self.enabled):
            return self
        return FeatureSet(keep, self.disabled)

    def to_json(self) -> list[dict[str, Any]]:
        """``[{"name": ..., "source": ...}, ...]`` as stored in the run spec and ``run.json``."""
        return [f.to_json() for f in self.enabled]

    @classmethod
    def from_json(cls, data: Any, disabled: Iterable[str] = ()) -> "FeatureSet":
        """Build from :meth:`to_json` output.

        ``data`` is either the list form, or a dict ``{"features": [...], "disabled_features": [...]}``
        (the run spec's two fields). ``disabled`` adds names turned off by the user. Raises
        :class:`FeatureError` on unknown names/sources; duplicates keep the first entry.
        """
        if isinstance(data, dict):
            disabled = tuple(disabled) + tuple(data.get("disabled_features") or data.get("disabled") or ())
            data = data.get("features") or data.get("enabled") or []
        off = frozenset(disabled)
        for n in off:
            _check_name(n)
        fs = cls((), off)
        for item in data or []:
            if isinstance(item, str):
                name, source = item, "explicit"
            else:
                name, source = item["name"], item.get("source", "explicit")
            _check_name(name)
            _check_source(source)
            if not fs.has(name):
                fs = FeatureSet(fs.enabled + (Feature(name, source),), off)
        return fs

    def describe(self) -> str:
        """Compact display form: ``flash_attn(default),offload(oom-retry-1)``; disabled as ``-name``."""
        parts = [f"{f.name}({f.source})" for f in self.enabled]
        parts += [f"-{n}" for n in sorted(self.disabled)]
        return ",".join(parts) or "(none)"


def is_on(fs: "FeatureSet", name: str) -> bool:
    """Whether ``name`` is on for the run: enabled in ``fs``, or a :data:`VERL_DEFAULT` feature not turned off."""
    return fs.has(name) or (name in VERL_DEFAULT and name not in fs.disabled)


def _items(user_features: str | None) -> list[str]:
    """The items of a ``USER_FEATURES`` list (``,`` or ``;``), stripped, without empty ones and ``default``."""
    items = [raw.strip() for raw in (user_features or "").replace(";", ",").split(",")]
    return [i for i in items if i and i.lower() not in ("default", "defaults", "默认")]


def _name(item: str) -> str:
    """The catalog spelling of one item's name (``-Flash-Attn`` -> ``flash_attn``); at most one sign before it,
    else :class:`FeatureError` (``--offload`` or ``+-offload`` read as one sign was the opposite of one of them)."""
    bare = item[1:] if item[0] in "+-" else item
    if bare[:1] in ("+", "-"):
        raise FeatureError(
            f"feature {item!r} has more than one sign; write -{bare.lstrip('+-')} (off) or {bare.lstrip('+-')} (on)"
        )
    return bare.strip().lower().replace("-", "_")


def without_feature(user_features: str, name: str) -> str:
    """``user_features`` without its items that name ``name`` (either sign), the rest as written, joined by ``,``
    (the settings' precedence drops a lower source's ``-offload`` under a higher one's offload on)."""
    return ",".join(i for i in _items(user_features) if _name(i) != name)


def parse_user_features(user_features: str | None) -> tuple[list[str], list[str]]:
    """Parse a ``USER_FEATURES`` comma list into ``(on, off)`` name lists.

    Whitespace and empty items are ignored; ``-name`` means off, ``+name`` or ``name`` on.
    The special words ``default``/``defaults`` (the runbook's answer "默认") mean "nothing
    explicit". Raises :class:`FeatureError` on unknown names or on a name both on and off.
    """
    on: list[str] = []
    off: list[str] = []
    for item in _items(user_features):
        neg = item.startswith("-")
        name = _name(item)
        if name not in CATALOG:  # the user's own token, repr-quoted: not the normalized name ('rm _rf /')
            raise FeatureError(
                f"unknown feature {item!r}; valid features: {_valid_names()} (prefix a default with '-' to turn it off)"
            )
        target = off if neg else on
        if name not in target:
            target.append(name)
    both = sorted(set(on) & set(off))
    if both:
        raise FeatureError(
            f"feature {both[0]!r} is both on and off in the features (--features / USER_FEATURES); keep one of {both[0]} / -{both[0]}"
        )
    return on, off


#: ``-flash_attn`` turns ``remove_padding`` off too on an NPU Megatron (profile 0.9): there the attention without
#: flash has no packed (TND) path. Not on a GPU: there ``-flash_attn`` on Megatron is Transformer Engine's cuDNN fused
#: attention (``core/profiles.py``), which takes packed (THD) sequences: the H200 runs k-megatron-a/-b trained 3
#: steps and resumed to 4 with fused + remove_padding + dynamic_batch + selective recompute. TE's unfused backend
#: with padded (BSHD) batches is what this used to imply there, and it dies in the first forward: verl 0.9.1's bshd
#: path hands TE a ``[batch, seq]`` mask (``verl/models/mcore/util.py`` ``preprocess_bshd_engine``) that the unfused
#: backend cannot broadcast (``RuntimeError: The size of tensor a (116) must match the size of tensor b (4)``, TE
#: 2.20.2 ``dot_product_attention/utils.py`` ``get_full_mask``; tests/fixtures/real-verl/tool-runs/
#: k-megatron-unfused-bshd). Not on FSDP with profile 0.9 (``resolve``'s ``implied_off`` is False there): verl
#: 0.9.1 unpads with pure-torch fallbacks when ``flash_attn`` is absent (``verl/utils/attention_utils.py:23-77``),
#: calls the model with ``attention_mask=None`` and packed ``position_ids`` (``verl/workers/engine/fsdp/
#: transformer_impl.py:1256-1260``), and transformers >= 5.5 (verl 0.9.1 pins ``>=5.5.3,<5.11``) builds a
#: per-sequence block-diagonal mask from those position ids for sdpa/eager (``transformers/masking_utils.py:757,
#: 880-888``): no attention across samples. Proven on the H200 (tests/fixtures/real-verl/tool-runs/g-features-a,
#: -b: sdpa + remove_padding + dynamic_batch + gradient checkpointing trained 3 steps and resumed to 4).
IMPLIED_OFF = {"flash_attn": ("remove_padding",)}


def implies_off(profile: str, framework: str, accelerator: str) -> bool:
    """Whether :data:`IMPLIED_OFF` applies (``resolve``'s ``implied_off``): profile ``"0.9"`` on ``"megatron"``
    on an ``"npu"`` only. FSDP on 0.9 and Megatron on a GPU keep ``remove_padding`` (see :data:`IMPLIED_OFF`); the
    0.8 profile never applied it (its behaviour is kept)."""
    return profile == "0.9" and framework == "megatron" and accelerator == "npu"


def resolve(user_features: str | None, enable_offload: bool = False, *, implied_off: bool = False) -> FeatureSet:
    """Resolve the first attempt's features from ``USER_FEATURES`` and ``ENABLE_OFFLOAD``.

    Explicit names come first (catalog order, source ``explicit``), then the performance
    defaults not turned off (source ``default``). ``enable_offload=True`` is an explicit
    ``offload``; combined with ``-offload`` it raises :class:`FeatureError` (contradiction).
    ``-name`` of a non-default feature is recorded in ``disabled`` too (the ladder then
    never adds it). ``implied_off`` (:func:`implies_off`: 0.9 on an NPU Megatron): a ``-name`` of :data:`IMPLIED_OFF` turns its dependents
    off too (recorded in ``disabled``); asking for a dependent explicitly then raises :class:`FeatureError`.
    Raises :class:`FeatureError` (one line, valid names listed).
    """
    on, off = parse_user_features(user_features)
    if implied_off:
        for name, deps in IMPLIED_OFF.items():
            if name not in off:
                continue
            for dep in deps:
                if dep in on:
                    raise FeatureError(
                        f"{dep} needs {name} on an NPU Megatron (its attention without flash has no packed "
                        f"sequences); drop -{name} or {dep} from USER_FEATURES"
                    )
                if dep not in off:
                    off.append(dep)
    if enable_offload:
        if "offload" in off:
            raise FeatureError(
                "offload on (--offload / ENABLE_OFFLOAD) contradicts '-offload' in the features "
                "(--features / USER_FEATURES); drop one of them"
            )
        if "offload" not in on:
            on.append("offload")
    fs = FeatureSet((), frozenset(off))
    for name in ALL:
        if name in on:
            fs = fs.add(name, "explicit")
    for name in PERFORMANCE:
        fs = fs.add(name, "default")
    return fs


def implied_notes(fs: FeatureSet, user_features: str | None) -> list[str]:
    """One line per dependent that :func:`resolve` turned off because of :data:`IMPLIED_OFF` (for the plan)."""
    _, off = parse_user_features(user_features)
    return [
        f"-{name} implies -{dep}: on an NPU Megatron packed sequences (remove_padding) need flash attention"
        for name, deps in IMPLIED_OFF.items()
        if name in off
        for dep in deps
        if dep in fs.disabled and dep not in off
    ]
