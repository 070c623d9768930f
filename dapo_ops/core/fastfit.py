"""The fastest configuration that fits: the plan's memory-for-speed choices, from the memory-fit estimate (stdlib only).

Every choice that trades device memory for speed is taken from the estimate (:mod:`dapo_ops.core.memfit`), after the
user's explicit settings (core tier).

Precedence (:mod:`dapo_ops.core.features`): explicit > defaults > learned / estimate > OOM-appended. A value the user
set (a flag / variable / config file, an ``--override`` of the verl key, a ``--features`` name or ``-name``) is never
changed; a used learned memo (:mod:`dapo_ops.core.learned`) caps the knobs of the phases its run ran out in (they stay
at the planned defaults; the memo's own setting changes win over any choice anyway: they are ``setting_changes``).
The rest is the largest value whose estimated phase peak, raised by :data:`FIT_MARGIN`, stays within the device:
``estimate * (1 + FIT_MARGIN) <= device`` (bench/memory_fit.md says how the margin was measured). The OOM ladder
stays the safety net: its rungs start from the chosen values (``update-batch`` halves the chosen budget).

The knobs (run spec ``settings`` names; verl 0.9.1 keys and what each bounds):

- ``token_budgets`` ``actor_rollout_ref.actor.ppo_max_token_len_per_gpu``: tokens of one update micro-batch per
  device under dynamic batch (the engine's ``max_token_len_per_gpu``, ``verl/workers/engine_workers.py:626``; verl's
  default 16384, ``verl/trainer/config/actor/actor.yaml:33``); never below prompt + response
  (``verl/utils/seqlen_balancing.py:384-386``: ``max_token_len must be greater than the sequence length``) and never
  above the tokens one device (a data-parallel rank: Megatron's TP x PP x CP ranks share theirs) gets per
  mini-batch (more buys nothing). Under packed attention (FSDP with
  ``remove_padding`` and sdpa: :func:`packed_attention`) at most :data:`PACKED_TOKENS`, or one sequence rounded
  up to :data:`BUDGET_STEP`: sdpa attends the packed micro-batch whole, so a larger budget is slower, not faster.
- ``token_budgets`` ``actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu`` (and the ref's): the no-grad
  log-prob forward's micro-batch (``infer_max_token_len_per_gpu``, ``engine_workers.py:620-621``; verl's default
  follows the actor's, ``verl/trainer/config/rollout/rollout.yaml:117``); capped at the tokens of the whole batch per
  device; under packed attention at most :data:`PACKED_TOKENS`, or one sequence rounded up, as the update's.
- without dynamic batch: ``ppo_micro_batch_size_per_gpu`` / ``log_prob_micro_batch_size_per_gpu``
  (``engine_workers.py:623-628``), the largest divisor of the per-device mini-batch / batch that fits (verl: the
  mini-batch must divide by the micro-batch, ``verl/workers/config/actor.py:233``); under packed attention only
  those whose tokens stay within :data:`PACKED_TOKENS` (or 1).
- ``gradient_checkpointing`` off (FSDP; it recomputes the forward in the backward, ~1/3 more update compute) when the
  update fits without it at a budget (micro-batch) no smaller than the plan's default, or than the most the plan
  gives it (all of a device's mini-batch, the packed-attention cap): nothing is lost for it.
  ``offload`` / ``recompute`` stay off unless the user, a learned memo or the estimate's start rung needs them.
- ``gpu_memory_utilization``: vLLM's share (its KV cache fills it; ``rollout.yaml:46``): the share the sequences a
  rollout replica runs at once need at the full prompt + response (vLLM's weights + their KV cache + its profile run,
  raised by the margin), at most the largest the rollout-side phases (rollout-init, generation, weight-sync) fit,
  between the ladder's floor and ceiling (:data:`dapo_ops.core.memladder.KV_FLOOR`,
  :data:`dapo_ops.core.ladder.KV_CEILING`). Why not less: a KV cache too short for the running sequences does not
  fail, vLLM preempts the newest running sequence, frees its blocks and recomputes it from its prompt later
  (``vllm/v1/core/sched/scheduler.py`` ``Scheduler.schedule``: ``preempted_req = self.running.pop()``,
  ``num_computed_tokens = 0``): generation gets slower. So the share aims at a KV cache that holds
  ``max_num_seqs`` sequences at full length with the margin; where the rollout-side phases cannot afford that, it
  is the largest share that fits and vLLM may preempt.
- ``rollout_max_num_seqs`` -> ``actor_rollout_ref.rollout.max_num_seqs`` (vLLM's concurrent sequences per engine
  step, passed through at ``verl/workers/rollout/vllm_rollout/vllm_async_server.py:333``; verl's default 256,
  ``rollout.yaml:84``): the responses one replica has in flight, all at once, never cut to the KV cache: one
  batch's in ``sync``, 1 + the warm-up batches' in the async modes (:func:`dapo_ops.core.profiles.prompts_in_flight`:
  the prefetched batch decodes beside the step's own; a cap of one batch would queue it behind).
  Its line reports how many sequences the share's KV cache holds at the full prompt + response with the margin;
  beyond that vLLM preempts the newest running sequence and recomputes it (``vllm/v1/core/sched/scheduler.py``).
  Not cut because responses are mostly shorter than the maximum: vLLM admits a sequence while KV blocks are free,
  so the cache holds more than the full-length count, and a cut would keep waiting sequences that fit. A user's
  ``max_num_seqs`` stays; its line says when vLLM may preempt beyond what the KV cache holds.
- ``rollout_max_num_batched_tokens`` -> ``actor_rollout_ref.rollout.max_num_batched_tokens`` (vLLM's tokens per
  engine step, the chunked-prefill chunk, ``vllm_async_server.py:335``; verl's default 8192, ``rollout.yaml:78``):
  the prompts of the whole batch in one step, as far as the share still holds the batch's KV cache after vLLM's
  profile run of that many tokens; never below verl's 8192, ``max_num_seqs`` or (chunked prefill off) the model
  length (verl raises it itself then, ``vllm_async_server.py:1113-1119``).

vLLM's side of the share (not calibrated: the measured rows of bench/memory_fit.csv see the share whole):
weights ``2P / rollout_tp``, KV ``2 * layers * kv_heads * head_dim * 2`` bytes per token over ``rollout_tp`` (bf16),
the profile run ``tokens * (4h + 6i)`` bytes (one layer's transients, as :data:`memfit.LOGPROB_LOGIT_BYTES`' log-prob
forward) plus fp32 logits of ``max_num_seqs`` rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from dapo_ops.core import defaults
from dapo_ops.core import hydra_override
from dapo_ops.core import memfit
from dapo_ops.core.memladder import current_micro
from dapo_ops.core import profiles
from dapo_ops.core import runspec
from dapo_ops.core.features import FeatureSet

#: Safety margin over the estimate (fraction): the largest underestimate of a measured peak on the holdout rows of
#: bench/memory_fit.csv (measured / estimated - 1; w61-qwen3-0.6b-r1024-offload peak: 46.68 / 43.10 = +8.3 %),
#: rounded up to the next whole percent. tests/test_fastfit.py recomputes it from the CSV.
FIT_MARGIN = 0.09
#: the plan's lines start with it (the launch output prints them after ``fit:``, dapo_ops/cli/launch.py)
LINE_PREFIX = "fit: "
#: budgets are chosen in steps of this many tokens (then raised to prompt + response when that is larger)
BUDGET_STEP = 1024
#: the rollout share is chosen in steps of this fraction (rounded down)
SHARE_STEP = 0.05
#: verl 0.9.1's rollout defaults (``verl/trainer/config/rollout/rollout.yaml:78,84``)
VERL_MAX_NUM_BATCHED_TOKENS = 8192
VERL_MAX_NUM_SEQS = 256
#: ``RolloutConfig.max_num_seqs`` (``verl/workers/config/rollout.py:206``): what vLLM gets when an override
#: ``~actor_rollout_ref.rollout.max_num_seqs`` deletes the yaml's key (verl/workers/rollout/replica.py:104 builds the
#: rollout's RolloutConfig from the yaml's ``_target_``, verl/utils/config.py:42-50; :mod:`dapo_ops.core.hydra_override`)
VERL_MAX_NUM_SEQS_DELETED = 1024
#: tokens per vLLM KV block: vLLM's CUDA default 16 (``vllm/config/cache.py`` ``block_size``), vllm-ascend's 128
#: (``vllm_ascend/platform.py`` ``check_and_update_config``: ``cache_config.block_size = 128`` when unset)
VLLM_BLOCK_TOKENS = {"gpu": 16, "npu": 128}
#: the most prefill tokens per vLLM engine step the plan asks for (4x verl's 8192): prefill of this many tokens
#: already keeps the device busy; an assumption that gpu/o-speed.sh's runs check, not a measured optimum
PREFILL_CAP = 32768
#: the token budget (micro-batch tokens) the plan stops at when attention is PACKED: FSDP with ``remove_padding`` and
#: without ``flash_attn`` (sdpa). verl 0.9.1 then calls the model with ``attention_mask=None`` and the micro-batch's
#: sequences packed into one row with per-sequence ``position_ids`` (``verl/workers/engine/fsdp/transformer_impl.py``
#: ``prepare_model_inputs``), and transformers builds a block-diagonal ``[tokens, tokens]`` mask from them for sdpa
#: (``transformers/masking_utils.py`` ``find_packed_sequence_indices``): torch's sdpa kernels that take a mask compute
#: every pair of the micro-batch's tokens, so the attention work per token grows with the budget, not with one
#: sequence (flash attention's varlen kernel stops at each sequence's end). The largest budget that fits is then the
#: slowest: tests/fixtures/real-verl/tool-runs/o-speed-tool1-h100 (Qwen3-1.7B's shape, prompt 512 + response 2048,
#: H100, sdpa) spent 26 s of an ~80 s step in the log-prob forward at 57 344 tokens and 41 s in the update (forward
#: + backward) at 11 264 (means over its 12 steps): read as ``linear + c * budget`` per token (fitted to those two
#: phases, not measured apart), about 60 us linear and 16 s of the log-prob's 26 in the budget-bound attention. At
#: 4096 tokens that part is ~12 % of the forward; smaller micro-batches buy little more and get launch-bound. Never
#: below prompt + response (verl's ``seqlen_balancing.py:384-386``).
PACKED_TOKENS = 4096

ACTOR_BUDGET = "actor_rollout_ref.actor.ppo_max_token_len_per_gpu"
LOGPROB_BUDGETS = (
    "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu",
    "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu",
)
MAX_NUM_SEQS_KEY = "actor_rollout_ref.rollout.max_num_seqs"
MAX_BATCHED_KEY = "actor_rollout_ref.rollout.max_num_batched_tokens"
UTIL_KEY = "actor_rollout_ref.rollout.gpu_memory_utilization"
PPO_MICRO_KEY = "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"
LOGPROB_MICRO_KEY = "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu"

#: docs/params.md "The plan's fastest fit" (rendered by :mod:`dapo_ops.control.params_doc`), one row per ``fit:``
#: line: ``(name, verl key(s), what verl bounds with it and how the plan chooses it, where verl reads it)``.
KNOBS: tuple[tuple[str, str, str, str], ...] = (
    (
        "ppo_max_token_len_per_gpu",
        ACTOR_BUDGET,
        "tokens of one update micro-batch per device under dynamic batch: the largest (in steps of "
        f"{BUDGET_STEP}) whose update fits; never below prompt + response, never above the tokens of a device's "
        f"mini-batch; packed attention (FSDP, remove_padding, sdpa): at most {PACKED_TOKENS}, or one sequence "
        "rounded up",
        "verl/workers/engine_workers.py:626 (max_token_len_per_gpu); default 16384, "
        "verl/trainer/config/actor/actor.yaml:33; verl/utils/seqlen_balancing.py:384-386 (>= the sequence length)",
    ),
    (
        "log_prob_max_token_len_per_gpu",
        ", ".join(LOGPROB_BUDGETS),
        "tokens of one no-grad log-prob forward micro-batch per device: the largest whose log-prob forward fits, at "
        f"most the tokens of a device's whole batch; packed attention: at most {PACKED_TOKENS}, or one sequence "
        "rounded up",
        "verl/workers/engine_workers.py:620-621 (infer_max_token_len_per_gpu); default the actor's, "
        "verl/trainer/config/rollout/rollout.yaml:117",
    ),
    (
        "ppo_micro_batch_size_per_gpu",
        PPO_MICRO_KEY,
        "without dynamic batch: sequences of one update micro-batch: the largest divisor of a device's mini-batch "
        f"whose update fits (packed attention: whose tokens stay within {PACKED_TOKENS}, or 1)",
        "verl/workers/engine_workers.py:627-628; verl/workers/config/actor.py:233 (the mini-batch divides by it)",
    ),
    (
        "log_prob_micro_batch_size_per_gpu",
        LOGPROB_MICRO_KEY,
        "without dynamic batch: sequences of one log-prob forward: the largest divisor of a device's batch that fits "
        f"(packed attention: whose tokens stay within {PACKED_TOKENS}, or 1)",
        "verl/workers/engine_workers.py:623-624",
    ),
    (
        "gradient_checkpointing",
        "actor_rollout_ref.model.enable_gradient_checkpointing",
        "FSDP: off when the update fits without it at a budget (micro-batch) no smaller than the plan's default, or "
        "than the most the plan gives it (it recomputes the forward in the backward); the user's, recompute's or a "
        "learned memo's stays, and so does the plan's when the update budget is the user's or a start rung's",
        "verl/trainer/config/model/hf_model.yaml:34 (default True); verl/workers/engine/fsdp/transformer_impl.py:335",
    ),
    (
        "gpu_memory_utilization",
        UTIL_KEY,
        "vLLM's share of the device (weights, profile run, the rest KV cache): what the sequences a rollout replica "
        "runs at once need at the full prompt + response (+ the margin), in steps of "
        f"{SHARE_STEP:g}, between the ladder's floor 0.4 and ceiling 0.9, at most the largest the rollout-side phases "
        "(rollout-init, generation, weight-sync) fit. A smaller KV cache does not fail: vLLM preempts the newest "
        "running sequence and recomputes it from its prompt (vllm/v1/core/sched/scheduler.py Scheduler.schedule)",
        "verl/trainer/config/rollout/rollout.yaml:46; verl/workers/rollout/vllm_rollout/vllm_async_server.py:340",
    ),
    (
        "max_num_seqs",
        MAX_NUM_SEQS_KEY,
        "vLLM's sequences at once per engine: the responses a replica has in flight, all at once (one batch; two in the async modes, whose warm-up batch decodes beside the step's); the line "
        "says how many the share's KV cache holds at the full prompt + response with the margin: beyond that vLLM "
        "preempts and recomputes (vllm/v1/core/sched/scheduler.py), shorter responses fit more",
        "verl/workers/rollout/vllm_rollout/vllm_async_server.py:333; default 256, rollout.yaml:84",
    ),
    (
        "max_num_batched_tokens",
        MAX_BATCHED_KEY,
        "vLLM's tokens per engine step (the chunked-prefill chunk): the prompts of max_num_seqs sequences in one step, "
        f"at most {PREFILL_CAP}, as far as the share still holds their KV cache after vLLM's profile run of that "
        "many tokens; never below verl's 8192, max_num_seqs or (chunked prefill off) prompt + response",
        "vllm_async_server.py:335, 1113-1119 (raised to max_model_len without chunked prefill); default 8192, "
        "rollout.yaml:78",
    ),
)
#: knob -> the OOM phases whose peak it moves (a learned memo that ran out in one of them caps it)
PHASES_OF = {
    "ppo_max_token_len_per_gpu": ("update",),
    "ppo_micro_batch_size_per_gpu": ("update",),
    "gradient_checkpointing": ("update",),
    "log_prob_max_token_len_per_gpu": ("log-prob",),
    "log_prob_micro_batch_size_per_gpu": ("log-prob",),
    "gpu_memory_utilization": ("rollout-init", "generation", "weight-sync"),
    "max_num_seqs": ("rollout-init", "generation", "weight-sync"),
    "max_num_batched_tokens": ("rollout-init", "generation", "weight-sync"),
}
#: knob -> (run setting names, verl keys) whose explicit value keeps the knob as the user set it
#: verl's gradient-checkpointing key (``hf_model.yaml:34``); the ``gradient_checkpointing`` feature emits it
GC_KEY = "actor_rollout_ref.model.enable_gradient_checkpointing"
#: what verl 0.9.1 runs when an ``--override ~key`` deletes a knob's key: its config dataclass's default
#: (:mod:`dapo_ops.core.hydra_override`): ``RolloutConfig`` ``gpu_memory_utilization`` / ``max_num_batched_tokens`` /
#: ``max_num_seqs`` (``verl/workers/config/rollout.py:185,196,206``). The token budgets and micro-batches are read
#: straight from the config (``verl/workers/engine_workers.py:616-633``): deleting one fails verl's start, and the
#: launch refuses it (:data:`dapo_ops.core.runspec.NOT_DELETABLE`)
VERL_DELETED_DEFAULT: dict[str, Any] = {
    UTIL_KEY: 0.5,
    MAX_BATCHED_KEY: 8192,
    MAX_NUM_SEQS_KEY: VERL_MAX_NUM_SEQS_DELETED,
}
EXPLICIT_OF = {
    "ppo_max_token_len_per_gpu": ((), (ACTOR_BUDGET,)),
    "log_prob_max_token_len_per_gpu": ((), LOGPROB_BUDGETS),
    "ppo_micro_batch_size_per_gpu": (("micro_batch_size",), (PPO_MICRO_KEY,)),
    "log_prob_micro_batch_size_per_gpu": (("micro_batch_size",), (LOGPROB_MICRO_KEY,)),
    "gpu_memory_utilization": (("gpu_memory_utilization",), (UTIL_KEY,)),
    "max_num_seqs": ((), (MAX_NUM_SEQS_KEY,)),
    "max_num_batched_tokens": ((), (MAX_BATCHED_KEY,)),
    "gradient_checkpointing": ((), (GC_KEY,)),
}


@dataclass(frozen=True)
class Choice:
    """One chosen value: the knob's name (verl key tail), the value and why (one phrase with the numbers)."""

    name: str
    value: Any
    why: str

    def line(self) -> str:
        """``ppo_max_token_len_per_gpu 40960: largest that fits update at 61.2 of 64.0 GiB (margin 9 %)``."""
        return f"{self.name} {self.value}: {self.why}"

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "why": self.why}


@dataclass
class Choices:
    """What :func:`choose` decided: the spec ``settings`` to update, the first attempt's features, and the lines."""

    settings: dict[str, Any]
    features: FeatureSet
    chosen: list[Choice] = field(default_factory=list)
    kept: list[Choice] = field(default_factory=list)  # explicit / learned: left as they are, and why
    margin: float = FIT_MARGIN
    device_gib: float = 0.0

    def lines(self, not_applied: str = "") -> list[str]:
        """The plan's lines: one per knob, ``fit: <name> <value>: <why>``; ``not_applied`` (why the choices are
        only reported: a dry run, ``MEMORY_FIT=warn``) follows each chosen value in parentheses, never a value
        the user set (that one applies either way)."""
        tail = f" ({not_applied})" if not_applied else ""
        return [LINE_PREFIX + c.line() + tail for c in self.chosen] + [LINE_PREFIX + c.line() for c in self.kept]

    def record(self) -> dict[str, Any]:
        """``spec["fit"]``: ``{"margin", "device_gib", "choices": [{name, value, why}], "kept": [...]}``."""
        return {
            "margin": self.margin,
            "device_gib": round(self.device_gib, 2),
            "choices": [c.to_json() for c in self.chosen],
            "kept": [c.to_json() for c in self.kept],
        }


def kv_bytes_per_token(m: memfit.Model, rollout_tp: int = 1) -> float:
    """vLLM's KV cache bytes per token per rollout device (bf16 keys and values of every layer; the KV heads split
    over the rollout's tensor-parallel ranks, at least one head each)."""
    heads = max(1.0, m.kv_heads / max(1, rollout_tp))
    return 2 * m.layers * heads * m.head_dim * 2


def _profile_bytes(m: memfit.Model, tokens: int, seqs: int) -> float:
    inter = m.moe_intermediate * m.top_k if m.experts else m.intermediate
    return tokens * (4 * m.hidden + 6 * inter) + 4 * seqs * m.vocab


def _given(knob: str, given: Iterable[str], overrides: dict[str, Any]) -> str | None:
    """Why the user's choice holds ``knob``: a setting in ``given``, or an ``--override`` of one of its keys
    (``overrides``: :func:`dapo_ops.core.memfit.override_values`, a ``~key`` deletion included: the plan's value
    would be removed by it, or trip its guard); None when the user left it to the plan."""
    names, keys = EXPLICIT_OF.get(knob, ((), ()))
    for n in names:
        if n in given:
            return f"you set {n}"
    for k in keys:
        if k in overrides and overrides[k] is None:
            return f"you removed it with --override ~{k}"
        if k in overrides:
            return f"you set it with --override {k}={overrides[k]}"
    return None


def _gc_as_overridden(fs: FeatureSet, overrides: dict[str, hydra_override.Override], kept: list[Choice]) -> FeatureSet:
    """The features the estimate sees under a user's ``--override`` of :data:`GC_KEY` (appended last to verl's argv,
    so it wins there; ``overrides``: :func:`dapo_ops.core.hydra_override.last_by_key`): a false value
    (:func:`~dapo_ops.core.hydra_override.truth`: ``False``, ``0``, ``null``) takes a default
    ``gradient_checkpointing`` off, a true one (``True``, ``1``, ``yes``) or a deletion (verl's default) puts it on;
    the choice is kept with its line. An explicit feature (``--features``) stays as it is."""
    o = overrides.get(GC_KEY)
    if o is None:
        return fs
    want = hydra_override.truth(o)
    if want is None:  # ~key: verl runs HFModelConfig's default, on (verl/workers/config/model.py:117)
        want = True
    if fs.source_of("gradient_checkpointing") == "explicit" or "gradient_checkpointing" in fs.disabled:
        return fs
    if want and not fs.has("gradient_checkpointing"):
        fs = fs.add("gradient_checkpointing", "explicit")
    elif not want and fs.has("gradient_checkpointing"):
        fs = _no_gc(fs)
    why = (
        f"you set it with --override {o.head}"
        + ("" if o.deletes else f"={o.value}")
        + ": the update is estimated with it"
    )
    kept.append(Choice("gradient_checkpointing", "on" if want else "off", why))
    return fs


def _gc_kept(kept: list[Choice], framework: str | None, fs: FeatureSet, tried: bool, held: str | None) -> None:
    """Add the kept line of gradient checkpointing left on to ``kept`` (every knob has its line; none when it is off
    or already has one): why the fit did not take it off. ``tried``: the fit tried the update without it; ``held``:
    why the update budget is held (:func:`choose`'s ``why_held``), or the phase a learned memo capped."""
    if not fs.has("gradient_checkpointing") or any(c.name == "gradient_checkpointing" for c in kept):
        return
    if fs.source_of("gradient_checkpointing") == "explicit":
        why = "you set it (--features gradient_checkpointing)"
    elif framework != "fsdp":
        why = "Megatron's recompute as planned (megatron_recompute): the fit takes only FSDP's checkpointing off"
    elif fs.has("recompute"):
        why = "recompute is on (the user's, a learned start's or the estimate's rung)"
    elif tried:
        why = "the update does not fit without it at a budget as large as it gets with it: kept on"
    else:
        why = f"the update budget is held ({held}): kept as planned" if held else "kept as planned"
    kept.append(Choice("gradient_checkpointing", "on", why))


def _no_gc(fs: FeatureSet) -> FeatureSet:
    """``fs`` without ``gradient_checkpointing`` (not recorded as ``-name``: the fit or the user's override turned it
    off, not a feature rule)."""
    return FeatureSet(tuple(f for f in fs.enabled if f.name != "gradient_checkpointing"), fs.disabled)


def _live_overrides(rs: defaults.RunSpec) -> dict[str, str | None]:
    """The spec's ``--override`` values (:func:`dapo_ops.core.memfit.override_values`) that reach a worker: without a
    reference model (no KL, :func:`dapo_ops.core.profiles.needs_ref_critic`) verl builds none, so its
    ``actor_rollout_ref.ref.*`` keys are inert and hold no knob (trial)."""
    ov = memfit.override_values(rs)
    if profiles.needs_ref_critic(rs.settings.get("extra_overrides") or [])[0]:
        return ov
    return {k: v for k, v in ov.items() if not k.startswith("actor_rollout_ref.ref.")}


def _rung_sets(knob: str, changes: dict[str, Any]) -> bool:
    """Whether the start rung (the spec's ``setting_changes``: an estimate or learned start) sets ``knob``."""
    if knob in ("ppo_max_token_len_per_gpu", "log_prob_max_token_len_per_gpu"):
        key = ACTOR_BUDGET if knob.startswith("ppo") else LOGPROB_BUDGETS[0]
        return key in (changes.get("token_budgets") or {})
    return knob in changes


def _held(knob: str, value: Any, why: str, overrides: dict[str, Any]) -> Choice:
    """The kept line of a held knob: ``value`` (what the estimate goes on with), or the user's ``--override`` text
    when it reads otherwise (``0``, ``abc``, ``${...}``: shown as written, with the value the estimate used)."""
    keys = EXPLICIT_OF.get(knob, ((), ()))[1]
    text = next((overrides[k] for k in keys if overrides.get(k) is not None), None)
    gone = next((k for k in keys if k in overrides and overrides[k] is None), None)
    if text is None and gone in VERL_DELETED_DEFAULT and VERL_DELETED_DEFAULT[gone] != value:
        runs = VERL_DELETED_DEFAULT[gone]
        return Choice(knob, runs, f"{why}: verl runs its config's default {runs} (the estimate goes on with {value})")
    if text is not None and str(text).strip() != str(value):
        return Choice(knob, text, f"{why} (the estimate goes on with {value})")
    return Choice(knob, value, why)


def _kv_short(kv_seqs: int, seq: int) -> str:
    """The clause of a max_num_seqs line whose sequences the KV cache does not all hold at ``seq`` tokens: vLLM
    preempts beyond ``kv_seqs``, or refuses to start when not one fits ("To serve at least one request with the
    models's max seq len ...", ``vllm/v1/core/kv_cache_utils.py``)."""
    if kv_seqs:
        return (
            f"; the KV cache holds {kv_seqs} at the full {seq} tokens with the margin: beyond that vLLM preempts and "
            f"recomputes (responses shorter than the maximum fit more)"
        )
    return (
        f"; the KV cache holds no sequence at the full {seq} tokens with the margin: vLLM refuses to start when not "
        f"one fits ('To serve at least one request with the models's max seq len ...'): raise gpu_memory_utilization "
        f"or shorten prompt + response"
    )


def _count(text: Any, default: int) -> int:
    """A positive whole number from an override's value text (``"64"``), else ``default``: a value the fit cannot
    read as one (an interpolation ``${data.train_batch_size}``, ``null``, ``1e3``, ``abc``, ``0``) stays the user's,
    the estimate goes on from verl's default (verl or Hydra judge the value at the start)."""
    try:
        v = int(str(text).strip())
    except (TypeError, ValueError):
        return default
    return v if v > 0 else default


def _max_num_seqs(overrides: dict[str, Any]) -> int:
    """vLLM's ``max_num_seqs`` under the user's ``--override`` of it (``overrides``:
    :func:`dapo_ops.core.memfit.override_values`): its value, verl's dataclass default after a ``~key`` deletion
    (:data:`VERL_MAX_NUM_SEQS_DELETED`), else the yaml's :data:`VERL_MAX_NUM_SEQS`."""
    if MAX_NUM_SEQS_KEY in overrides and overrides[MAX_NUM_SEQS_KEY] is None:
        return VERL_MAX_NUM_SEQS_DELETED
    return _count(overrides.get(MAX_NUM_SEQS_KEY), VERL_MAX_NUM_SEQS)


def _capped(knob: str, ran_out: Iterable[str]) -> str | None:
    hit = [p for p in PHASES_OF.get(knob, ()) if p in set(ran_out)]
    return hit[0] if hit else None


def _largest(lo: int, hi: int, ok: Callable[[int], bool]) -> int | None:
    """The largest ``x`` in ``[lo, hi]`` with ``ok(x)`` (``ok`` monotone: true up to a point), None if not ``ok(lo)``."""
    if hi < lo or not ok(lo):
        return None
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def choose(
    m: memfit.Model,
    spec: dict[str, Any],
    features: FeatureSet,
    device_gib: float,
    *,
    given: Iterable[str] = (),
    ran_out: Iterable[str] = (),
    margin: float = FIT_MARGIN,
) -> Choices:
    """The fastest configuration of ``spec`` (docs/design.md "Run spec"; its ``setting_changes``: an estimate or
    learned start, applied over the choice) that fits ``device_gib`` (GiB per device) with ``margin``.

    ``given``: run setting names the user set (``gpu_memory_utilization``, ``micro_batch_size``); the spec's
    ``extra_overrides`` and the features' ``explicit`` sources / ``-name`` are read here. ``ran_out``: the phases a
    used learned memo's run ran out in (their knobs stay as planned). Returns :class:`Choices`; a knob whose smallest
    value does not fit is left as planned (the estimate's start rung, :func:`dapo_ops.core.memfit.fit`, handles
    it). Pure; raises :class:`dapo_ops.core.memfit.EstimateUnavailable` only through ``m``'s construction (not here).
    """
    rs = defaults.RunSpec.read(spec)
    given = frozenset(given)
    ran_out = frozenset(ran_out)
    base = dict(rs.settings)
    changes = dict(rs.setting_changes)
    s = dict(base, **changes)
    ov = _live_overrides(rs)
    one_step_off = rs.mode == "one-step-off"
    world = memfit.trainer_world(s, one_step_off)
    seq = int(s["max_prompt_length"]) + int(s["max_response_length"])
    n = int(s["rollout_n"])
    limit = float(device_gib) / (1.0 + margin)
    pct = f"margin {round(margin * 100):g} %"
    out: dict[str, Any] = {}
    chosen: list[Choice] = []
    kept: list[Choice] = []
    fs = features
    dynamic = "dynamic_batch" in fs.names()

    def est(settings_over: dict[str, Any], feats: FeatureSet) -> memfit.Estimate:
        trial = dict(rs, settings={**base, **out, **settings_over})
        return memfit.estimate(m, memfit.setup_from_spec(trial, feats, device_gib, changes))

    def fits(phase: str, settings_over: dict[str, Any], feats: FeatureSet) -> bool:
        return est(settings_over, feats).phases.get(phase, 0.0) <= limit

    def why_held(knob: str) -> str | None:
        """Why the knob stays as planned: the user's, the start rung's, or capped by a learned memo; None: free."""
        why = _given(knob, given, ov)
        if why is None and _rung_sets(knob, changes):
            why = "the start rung sets it"
        if why is None:
            phase = _capped(knob, ran_out)
            why = f"a learned run ran out in {phase}: kept as planned" if phase else None
        return why

    def hold(knob: str, value: Any) -> bool:
        """True (and a kept line) when the knob is held (:func:`why_held`). A value the user set that the start rung
        changes shows what runs (the rung's change wins in verl's argv, as the OOM ladder's would)."""
        why = why_held(knob)
        if why and why.startswith("you set") and _rung_sets(knob, changes):
            kept.append(
                Choice(knob, value, f"{why}; the estimate's start rung runs {value} instead (memory-fit's line)")
            )
        elif why:
            kept.append(_held(knob, value, why, ov))
        return bool(why)

    # the update: gradient checkpointing off where nothing is lost for it, then the largest micro-batch
    # what one data-parallel rank gets: Megatron's TP x PP x CP ranks share their sequences (verl splits the batch
    # over the data-parallel ranks, verl/workers/engine_workers.py:270); FSDP: every device is one
    dp = runspec.data_parallel_size(rs, world)[0]
    per_dev_mini = max(1, -(-int(s["ppo_mini_batch_size"]) * n // dp))
    # the log-prob forward's per-rank batch: the V1 trainer pads a step to a multiple of lcm(dp, mini-batch x n)
    # (verl/trainer/ppo/v1/trainer_base.py:1589-1621), one-step-off computes it per mini-batch-sized sample
    # (:539,566): a multiple of the per-rank mini-batch either way (review)
    per_dev_batch = per_dev_mini * (
        1 if one_step_off else -(-int(s["train_batch_size"]) // int(s["ppo_mini_batch_size"]))
    )
    ovs = hydra_override.last_by_key(base.get("extra_overrides") or [])
    fs = _gc_as_overridden(fs, ovs, kept)
    gc_on = fs.has("gradient_checkpointing")
    # attention over the whole packed micro-batch (PACKED_TOKENS): the budgets stop at one small micro-batch
    packed = packed_attention(rs.framework, fs, ovs)
    packed_cap = max(seq, PACKED_TOKENS) if packed else None
    if dynamic:
        default_upd = (
            _count((s.get("token_budgets") or {}).get(ACTOR_BUDGET) or ov.get(ACTOR_BUDGET), 0)
            or profiles.token_budgets(int(s["max_prompt_length"]), int(s["max_response_length"]))[ACTOR_BUDGET]
        )
        upd_full = _tok(_steps(max(seq, per_dev_mini * seq)), seq)  # all of a device's mini-batch
        upd_cap = _packed(max(seq, per_dev_mini * seq), packed_cap)

        def upd_ok(feats: FeatureSet) -> Callable[[int], bool]:
            return lambda k: fits(
                "update", {"token_budgets": {**_budgets(base, out), ACTOR_BUDGET: _tok(k, seq)}}, feats
            )

        lo_k, hi_k = _steps(seq), _steps(upd_cap)
    else:
        default_upd = current_micro(s, "ppo_micro_batch_size_per_gpu")
        upd_full = per_dev_mini
        divs = _micro_divisors(per_dev_mini, seq, packed_cap)

        def upd_ok(feats: FeatureSet) -> Callable[[int], bool]:
            return lambda i: fits("update", {"ppo_micro_batch_size_per_gpu": divs[i]}, feats)

        lo_k, hi_k = 0, len(divs) - 1
    upd_knob = "ppo_max_token_len_per_gpu" if dynamic else "ppo_micro_batch_size_per_gpu"
    upd_val = (lambda k: _tok(k, seq)) if dynamic else (lambda i: divs[i])
    gc_free = (
        rs.framework == "fsdp"
        and gc_on
        and fs.source_of("gradient_checkpointing") == "default"
        and not fs.has("recompute")
        and not _capped("gradient_checkpointing", ran_out)
        and why_held(upd_knob) is None  # the user's, the start rung's or a learned cap: its memory decision stands
        and not _given("gradient_checkpointing", given, ov)
    )
    if gc_free:
        no_gc = _no_gc(fs)
        k = _largest(lo_k, hi_k, upd_ok(no_gc))
        # nothing is lost for it: the budget it leaves is the default's, or the most this run would take anyway
        enough = min(default_upd, upd_val(hi_k))
        if k is not None and upd_val(k) >= enough:
            fs = no_gc
            than = (
                f">= the default {default_upd}"
                if enough == default_upd
                else "the packed-attention cap"
                if packed and upd_val(hi_k) < upd_full
                else "all of a device's mini-batch"
            )
            chosen.append(
                Choice(
                    "gradient_checkpointing",
                    "off",
                    f"the update fits without it at {upd_knob} {upd_val(k)} ({than}): no recomputed forward",
                )
            )
    _gc_kept(kept, rs.framework, fs, gc_free, why_held(upd_knob) or _capped("gradient_checkpointing", ran_out))
    if not hold(upd_knob, default_upd):
        k = _largest(lo_k, hi_k, upd_ok(fs))
        if k is not None:
            v = upd_val(k)
            _set_upd(dynamic, base, out, v)
            peak = est({}, fs).phases["update"]
            top = _top(k == hi_k, upd_val(hi_k) < upd_full, "mini-batch", dynamic)
            chosen.append(Choice(upd_knob, v, f"{top}: update at {peak:.1f} of {device_gib:.1f} GiB ({pct})"))
        else:
            kept.append(
                Choice(upd_knob, default_upd, _falls_back("its smallest value does not fit update", device_gib, pct))
            )

    # the log-prob forward
    lp_knob = "log_prob_max_token_len_per_gpu" if dynamic else "log_prob_micro_batch_size_per_gpu"
    if "log-prob" in est({}, fs).phases:
        if dynamic:
            lp_default = (
                _count((s.get("token_budgets") or {}).get(LOGPROB_BUDGETS[0]) or ov.get(LOGPROB_BUDGETS[0]), 0)
                or profiles.token_budgets(int(s["max_prompt_length"]), int(s["max_response_length"]))[
                    LOGPROB_BUDGETS[0]
                ]
            )
            lp_full = _tok(_steps(max(seq, per_dev_batch * seq)), seq)
            lp_cap = _packed(max(seq, per_dev_batch * seq), packed_cap)
            lp_divs: list[int] = []

            def lp_ok(k: int) -> bool:
                b = _tok(k, seq)
                return fits(
                    "log-prob", {"token_budgets": {**_budgets(base, out), **dict.fromkeys(LOGPROB_BUDGETS, b)}}, fs
                )

            lo, hi = _steps(seq), _steps(lp_cap)
        else:
            lp_default = current_micro(s, "log_prob_micro_batch_size_per_gpu")
            lp_full = per_dev_batch
            lp_divs = _micro_divisors(per_dev_batch, seq, packed_cap)

            def lp_ok(k: int) -> bool:
                return fits("log-prob", {"log_prob_micro_batch_size_per_gpu": lp_divs[k]}, fs)

            lo, hi = 0, len(lp_divs) - 1
        if not hold(lp_knob, lp_default):
            k = _largest(lo, hi, lp_ok)
            if k is not None:
                v = _tok(k, seq) if dynamic else lp_divs[k]
                if dynamic:
                    out["token_budgets"] = {**_budgets(base, out), **dict.fromkeys(LOGPROB_BUDGETS, v)}
                else:
                    out["log_prob_micro_batch_size_per_gpu"] = v
                peak = est({}, fs).phases["log-prob"]
                top_v = _tok(hi, seq) if dynamic else lp_divs[hi]
                top = _top(v >= top_v, top_v < lp_full, "batch", dynamic)
                chosen.append(Choice(lp_knob, v, f"{top}: log-prob at {peak:.1f} of {device_gib:.1f} GiB ({pct})"))
            else:
                kept.append(
                    Choice(
                        lp_knob, lp_default, _falls_back("its smallest value does not fit log-prob", device_gib, pct)
                    )
                )

    # the rollout. vLLM runs at most max_num_seqs sequences at once and admits one while KV blocks are free; when a
    # running sequence needs a block and none is free it preempts the newest running sequence, frees its blocks and
    # later recomputes it from its prompt (vllm/v1/core/sched/scheduler.py Scheduler.schedule: ``preempted_req =
    # self.running.pop()``, ``num_computed_tokens = 0``), so a share that is too small makes generation slower, not
    # fail. The share is chosen to hold every response a replica generates per batch at once, at the full prompt +
    # response with the margin; where the rollout-side phases cannot afford that share it is the largest that fits.
    # max_num_seqs stays every response of a replica either way (not cut to the KV cache: responses shorter than the
    # maximum fit more, and vLLM admits while blocks are free); its line says how many full-length sequences the
    # KV cache holds, beyond which vLLM preempts and recomputes.
    rollout_devs = (
        int(s["rollout_gpus"]) * max(1, int(s.get("rollout_nnodes") or s["nnodes"])) if one_step_off else world
    )
    rtp = max(1, int(s["rollout_tp"]))
    replicas = max(1, rollout_devs // rtp)
    # the async modes keep a warm-up batch of prompts in flight beside the step's own (partial rollout): vLLM runs
    # both batches' responses at once (profiles.prompts_in_flight)
    v1 = profiles.v1_mode(profiles.entry(rs.profile, rs.mode, rs.framework), s["trainer_mode"])
    tbs = int(s["train_batch_size"])
    in_flight = profiles.prompts_in_flight(v1, tbs, ov)
    seqs = max(1, -(-in_flight * n // replicas))
    kv_tok = kv_bytes_per_token(m, rtp)
    block = VLLM_BLOCK_TOKENS.get(str(rs.accelerator or defaults.HOST["accelerator"]), VLLM_BLOCK_TOKENS["gpu"])
    seq_kv = -(-seq // block) * block * kv_tok  # one sequence at full length, in whole KV blocks
    weights = 2 * memfit.param_count(m) / rtp
    prompt = int(s["max_prompt_length"])
    nseq_why = why_held("max_num_seqs")
    nseq_given = _max_num_seqs(ov) if nseq_why else None
    at_once = min(seqs, nseq_given) if nseq_given else seqs  # sequences a replica runs at once
    # vLLM's profile run: at least the least max_num_batched_tokens the plan gives (below)
    batched = max(VERL_MAX_NUM_BATCHED_TOKENS, seq if "chunked_prefill" in fs.disabled else 0, at_once)
    need_b = (weights + at_once * seq_kv + _profile_bytes(m, batched, at_once)) * (1.0 + margin)
    need = need_b / (device_gib * memfit.GIB)
    rollout_phases = ("rollout-init", "generation", "weight-sync")

    def share_ok(i: int) -> bool:
        e = est({"gpu_memory_utilization": i / 100}, fs)
        return all(e.phases.get(p, 0.0) <= limit for p in rollout_phases)

    from dapo_ops.core.ladder import KV_CEILING
    from dapo_ops.core.memladder import KV_FLOOR

    step = round(SHARE_STEP * 100)
    cur_u = float(s["gpu_memory_utilization"])
    u_need = max(KV_FLOOR, min(KV_CEILING, -(-need * 100 // step) * step / 100))
    if not hold("gpu_memory_utilization", cur_u):
        i = _largest(round(KV_FLOOR * 100) // step, round(KV_CEILING * 100) // step, lambda j: share_ok(j * step))
        if i is None:
            kept.append(
                Choice(
                    "gpu_memory_utilization",
                    cur_u,
                    _falls_back(f"no share from {KV_FLOOR:g} up fits the rollout-side phases", device_gib, pct),
                )
            )
        else:
            u_fit = i * step / 100
            u = min(u_fit, u_need)
            out["gpu_memory_utilization"] = u
            e = est({}, fs)
            tight = max(rollout_phases, key=lambda p: e.phases.get(p, 0.0))
            what = (
                f"{at_once} sequences at once x {seq} tokens of KV cache per replica + vLLM's weights and profile "
                f"run, + the margin: {need_b / memfit.GIB:.1f} GiB"
            )
            why = (
                f"what the responses in flight need ({what}; a shorter KV cache makes vLLM preempt and recompute); {tight} at "
                f"{e.phases[tight]:.1f} of {device_gib:.1f} GiB ({pct})"
                if u >= u_need
                else f"largest that fits {tight} at {e.phases[tight]:.1f} of {device_gib:.1f} GiB ({pct}); the "
                f"responses in flight need {u_need:g}"
                + (f" (unclamped {need:.2f} of the device)" if need > u_need else "")
                + f" ({what})"
            )
            chosen.append(Choice("gpu_memory_utilization", u, why))
    u = float(out.get("gpu_memory_utilization", cur_u))
    if "gpu_memory_utilization" in changes:
        u = float(changes["gpu_memory_utilization"])
    share_b = u * device_gib * memfit.GIB

    def holds(nseq: int, tokens: int) -> int:
        """How many sequences at full length the KV cache of the share holds with the margin."""
        room = share_b - weights - _profile_bytes(m, tokens, nseq)
        return int(max(0.0, room) // ((1.0 + margin) * seq_kv))

    kv_seqs = holds(at_once, batched)
    short = _kv_short(kv_seqs, seq)
    if nseq_why is None:
        out["rollout_max_num_seqs"] = seqs
        what = (
            f"the {seqs} responses a rollout replica has in flight ({in_flight} prompts: the step's batch of {tbs} "
            + (f"and {v1}'s warm-up prefetch)" if v1 != "sync" else "and DAPO's refills)")
            if in_flight > tbs
            else f"the {seqs} responses a rollout replica generates per batch"
        )
        why = f"{what}, all at once" + (
            f": the KV cache holds {kv_seqs} at the full {seq} tokens with the margin (none preempted)"
            if kv_seqs >= seqs
            else short
        )
        chosen.append(Choice("max_num_seqs", seqs, why))
    else:
        held = _held("max_num_seqs", nseq_given, nseq_why, ov)
        kept.append(Choice(held.name, held.value, held.why + (short if at_once > kv_seqs else "")))
    nseq = int(out.get("rollout_max_num_seqs") or nseq_given or VERL_MAX_NUM_SEQS)
    if not hold("max_num_batched_tokens", VERL_MAX_NUM_BATCHED_TOKENS):
        want = max(VERL_MAX_NUM_BATCHED_TOKENS, min(PREFILL_CAP, -(-nseq * prompt // BUDGET_STEP) * BUDGET_STEP))
        floor = max(VERL_MAX_NUM_BATCHED_TOKENS, nseq, seq if "chunked_prefill" in fs.disabled else 0)

        def batched_ok(k: int) -> bool:
            return holds(min(nseq, seqs), max(floor, k * BUDGET_STEP)) >= min(nseq, seqs)

        k = _largest(_steps(floor), _steps(max(floor, want)), batched_ok)
        v = max(floor, k * BUDGET_STEP) if k is not None else floor
        v = min(v, max(floor, want))
        out["rollout_max_num_batched_tokens"] = v
        why = (
            f"max_num_seqs {nseq}: vLLM needs max_num_batched_tokens >= max_num_seqs"
            if v > want and v == nseq
            else f"the prompts of {nseq} sequences ({prompt} tokens each) in one engine step"
            + (f" (at most {PREFILL_CAP})" if want == PREFILL_CAP else "")
            if v >= want
            else f"largest whose profile run leaves the KV cache of {nseq} x {seq} tokens in the share {u:g}"
            if k is not None
            else f"the least (verl's {VERL_MAX_NUM_BATCHED_TOKENS}, max_num_seqs or the model length): the share "
            f"{u:g} cannot hold {min(nseq, seqs)} x {seq} tokens of KV cache anyway"
        )
        chosen.append(Choice("max_num_batched_tokens", v, why))
    return Choices(out, fs, chosen, kept, margin, float(device_gib))


def packed_cap(spec: dict[str, Any], features: FeatureSet, *, given: Iterable[str] = ()) -> Choices:
    """The packed-attention cap (:data:`PACKED_TOKENS`) alone, for a plan :func:`choose` did not apply to (no model
    shape, no device memory, ``MEMORY_FIT=warn``): the cap is about the speed of sdpa over a packed micro-batch, not
    about memory, so it holds whenever the attention is packed (:func:`packed_attention`). Each budget (dynamic
    batch) or micro-batch above it is lowered to it (``max(prompt + response, PACKED_TOKENS)``; a micro-batch to
    the largest divisor of a device's mini-batch / batch within it, 1 at least); one the user set (``given``, an
    ``--override`` of its keys) or the start rung sets is left as it is. Returns :class:`Choices` (empty when not
    packed); ``device_gib`` 0: no memory was judged. Pure."""
    rs = defaults.RunSpec.read(spec)
    changes = dict(rs.setting_changes)
    s = dict(rs.settings, **changes)
    ov = _live_overrides(rs)
    out: dict[str, Any] = {}
    chosen: list[Choice] = []
    if not packed_attention(rs.framework, features, hydra_override.last_by_key(s.get("extra_overrides") or [])):
        return Choices(out, features, chosen, [], 0.0, 0.0)
    seq = int(s["max_prompt_length"]) + int(s["max_response_length"])
    cap = max(seq, PACKED_TOKENS)
    why = _PACKED_WHY.format(cap=f"{PACKED_TOKENS} tokens, or one sequence") + " (bench/speed.md; not a memory limit)"

    def free(knob: str) -> bool:
        return _given(knob, frozenset(given), ov) is None and not _rung_sets(knob, changes)

    if "dynamic_batch" in features.names():
        budgets = dict(profiles.token_budgets(int(s["max_prompt_length"]), int(s["max_response_length"])))
        budgets.update(s.get("token_budgets") or {})
        for knob, keys in (
            ("ppo_max_token_len_per_gpu", (ACTOR_BUDGET,)),
            ("log_prob_max_token_len_per_gpu", LOGPROB_BUDGETS),
        ):
            if free(knob) and int(budgets[keys[0]]) > cap:
                out["token_budgets"] = {
                    **out.get("token_budgets", s.get("token_budgets") or {}),
                    **dict.fromkeys(keys, cap),
                }
                chosen.append(Choice(knob, cap, why))
        return Choices(out, features, chosen, [], 0.0, 0.0)
    for knob in ("ppo_micro_batch_size_per_gpu", "log_prob_micro_batch_size_per_gpu"):
        mb = current_micro(s, knob)
        if free(knob) and mb * seq > cap:  # a divisor of it divides the mini-batch it divides (actor.py:233)
            out[knob] = max(d for d in range(1, mb + 1) if mb % d == 0 and (d == 1 or d * seq <= cap))
            chosen.append(Choice(knob, out[knob], why))
    return Choices(out, features, chosen, [], 0.0, 0.0)


#: the FSDP keys that decide packed attention, as :func:`dapo_ops.core.memfit.override_values` names them (no ``+``):
#: verl 0.9.1 reads the attention from the model's ``override_config`` (``verl/workers/config/model.py:185``, default
#: ``flash_attention_2``) and copies ``model.use_remove_padding`` to the engine (core/profiles.py)
ATTN_KEY = "actor_rollout_ref.model.override_config.attn_implementation"
RMPAD_KEY = "actor_rollout_ref.model.use_remove_padding"
#: attention implementations that take the packed micro-batch's block-diagonal mask whole (transformers'
#: ``sdpa_mask`` / ``eager_mask``); flash (varlen) and flex (block-sparse) stop at each sequence
MASKED_ATTENTION = ("sdpa", "eager")


def packed_attention(
    framework: str | None, fs: FeatureSet, overrides: dict[str, hydra_override.Override] | None = None
) -> bool:
    """Whether a micro-batch's attention runs over all its packed tokens (:data:`PACKED_TOKENS`): FSDP with
    ``remove_padding`` and an attention that takes the whole mask (:data:`MASKED_ATTENTION`: sdpa when
    ``flash_attn`` is off). ``overrides`` (:func:`dapo_ops.core.hydra_override.last_by_key`): an ``--override`` of
    :data:`ATTN_KEY` or :data:`RMPAD_KEY` is appended last to verl's argv and wins over the features, so it wins
    here too: ``use_remove_padding`` by the value's truthiness (:func:`dapo_ops.core.hydra_override.truth`), a
    deletion of either key by verl's default (``HFModelConfig.use_remove_padding`` True, ``model.py:120``; the
    attention ``flash_attention_2``, ``model.py:185``). Megatron packs for Transformer Engine's fused (cuDNN)
    attention, which stops at each sequence's end (``cu_seqlens``); not packed."""
    if framework == "megatron":
        return False
    ov = overrides or {}
    r, a = ov.get(RMPAD_KEY), ov.get(ATTN_KEY)
    rmpad = fs.has("remove_padding") if r is None else (r.deletes or bool(hydra_override.truth(r)))
    masked = not fs.has("flash_attn") if a is None else _attn_of(a) in MASKED_ATTENTION
    return rmpad and masked


def _attn_of(o: hydra_override.Override) -> str:
    """The attention an override of :data:`ATTN_KEY` runs: a deletion verl's default ``flash_attention_2``
    (``model.py:185``); ``null`` passes None to transformers, which picks sdpa (review)."""
    if o.deletes:
        return "flash_attention_2"
    return "sdpa" if o.null else (o.text or "")


#: the head of the why of a budget (micro-batch) the packed-attention cap cut
_PACKED_WHY = (
    "attention without flash (sdpa / eager) takes the packed micro-batch whole (block-diagonal mask), its work per "
    "token grows with the micro-batch: at most {cap}"
)


def _top(at_top: bool, packed_cut: bool, of: str, dynamic: bool) -> str:
    """The head of a budget's (``dynamic``) or micro-batch's why: the packed-attention cap, all of a device's ``of``
    (mini-batch / batch), or the largest that fits."""
    if at_top and packed_cut:
        cap = (
            f"{PACKED_TOKENS} tokens, or one sequence in {BUDGET_STEP}-token steps"
            if dynamic
            else f"{PACKED_TOKENS} tokens of sequences, or one sequence"
        )
        return _PACKED_WHY.format(cap=cap)
    return f"all of a device's {of}" if at_top else "largest that fits"


def _packed(cap: int, packed_cap: int | None) -> int:
    """A token budget's upper bound ``cap``, cut to ``packed_cap`` under packed attention (None: not packed)."""
    return cap if packed_cap is None else min(cap, packed_cap)


def _micro_divisors(per_dev: int, seq: int, packed_cap: int | None) -> list[int]:
    """The micro-batch sizes verl accepts (divisors of ``per_dev``, ``verl/workers/config/actor.py:233``); under
    packed attention (``packed_cap`` tokens) only those whose ``d * seq`` tokens stay within it (1 always)."""
    divs = [d for d in range(1, per_dev + 1) if per_dev % d == 0]
    return divs if packed_cap is None else [d for d in divs if d == 1 or d * seq <= packed_cap]


def _falls_back(what: str, device_gib: float, pct: str) -> str:
    """The why of a knob left as planned because not even its smallest value fits (``what`` says which phase). The
    estimate's start rung (:func:`dapo_ops.core.memfit.fit`) acts only where the plan does not fit without the
    margin, so the line promises the OOM ladder, not a rung (trial)."""
    return (
        f"falls back: {what} in {device_gib:.1f} GiB ({pct}): kept as planned; the memory-fit line says whether the "
        f"estimate starts on a rung (only when even the margin-less estimate does not fit), the OOM ladder is the net"
    )


def _steps(tokens: int) -> int:
    return max(1, -(-int(tokens) // BUDGET_STEP))


def _tok(k: int, seq: int) -> int:
    return max(int(seq), int(k) * BUDGET_STEP)


def _budgets(base: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    return dict(out.get("token_budgets") or base.get("token_budgets") or {})


def _upd_over(dynamic: bool, base: dict[str, Any], out: dict[str, Any], v: int) -> dict[str, Any]:
    if dynamic:
        return {"token_budgets": {**_budgets(base, out), ACTOR_BUDGET: v}}
    return {"ppo_micro_batch_size_per_gpu": v}


def _set_upd(dynamic: bool, base: dict[str, Any], out: dict[str, Any], v: int) -> None:
    out.update(_upd_over(dynamic, base, out, v))
