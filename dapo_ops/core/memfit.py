"""Memory-fit estimate before launch: per-device peak (GiB) of each OOM phase, the tightest phase, and the
first memory rung that fits (stdlib only; core tier).

Inputs: the model's ``config.json`` (:func:`model_facts` keeps the keys used), the run spec (framework, mode,
devices, token budgets / micro-batches, rollout ``gpu_memory_utilization``, prompt/response lengths), the
first attempt's features and the device memory (GiB, ``torch.cuda.mem_get_info`` total: 139.80 on an H200).
Calibrated on the real verl 0.9.1 runs on the H200 (``bench/memory_fit.csv``, ``bench/memory_fit.py``).

Formulas (bytes; ``P`` parameters, ``W`` trainer devices, ``T`` device memory, ``u`` rollout share):

- ``P`` (:func:`param_count`): embeddings ``V*h`` (+ ``V*h`` lm_head unless tied) + per layer: q ``h*a*d``,
  k/v ``h*kv*d`` each, o ``a*d*h`` (+ q/k/v biases for qwen2 or ``attention_bias``, + q/k norms ``2d`` for
  qwen3), MLP ``3*h*i`` (MoE: ``E*3*h*i_moe`` + router ``h*E``), 2 norms ``2h``; + final norm ``h``.
- FSDP actor state per device: params fp32 ``4P/W`` (``fsdp_config.model_dtype: fp32``,
  ``verl/trainer/config/_generated_ppo_trainer.yaml``), grads ``4P/W``, Adam ``8P/W``; the optimizer step adds
  ``4P/W`` of foreach temporaries (``torch/optim/adam.py`` ``_multi_tensor_adam``: ``_foreach_sqrt``), so the
  step peaks at ``20P/W`` (run 4: 27.19 GiB estimated, 27.28 measured). Adam state exists from the first
  ``step()`` on (lazy init), so a 1-step run has none during its forward/backward.
  Megatron: bf16 params + fp32 grads ``6P/(tp*pp)`` + distributed optimizer (master + Adam) ``12P/(tp*pp*dp)``.
- Activations, per token and layer: ``30h + 6*kv*d + 8i`` bytes (bf16 tensors HF Qwen2/3 layers save:
  two fp32 RMSNorm inputs, q/k/v and rotary q/k, repeat_kv for sdpa, attention out, 4 SwiGLU tensors of
  ``i``); run 8: 23.8 GiB for 8192 tokens x 24 layers. Gradient checkpointing keeps ``2h`` per layer plus one
  layer: FSDP's, and Megatron's where it runs full/uniform/1 (``Setup.megatron_recompute`` ``full``:
  :data:`dapo_ops.core.profiles.MEGATRON_RECOMPUTE`); Megatron's selective ``core_attn`` recompute keeps every
  layer's activations (``engine/megatron.yaml:79``). ``recompute`` = FSDP activation offload (one layer + 2 inputs) /
  Megatron full recompute. FSDP parameter and optimizer state leave the device under ``offload_policy`` only with
  ``Setup.strategy`` fsdp2: verl's FSDP1 never reads it (``verl/workers/engine/fsdp/transformer_impl.py:423-463``). Logits in the update: ``10V`` bytes per token (bf16 logits, fp32 upcast, fp32 log-softmax).
  Logits in the no-grad log-prob forward: ``6V`` (:data:`LOGPROB_LOGIT_BYTES`): verl 0.9.1's FSDP engine keeps the
  model's bf16 logits (``verl/workers/engine/fsdp/transformer_impl.py`` ``prepare_model_outputs``: no copy at
  temperature 1), computes the entropy with ``softmax`` + ``softmax * logits`` (two more bf16 ``V`` tensors,
  ``verl/utils/torch_functional.py:243-244``) and the log-probs row by row (``logprobs_from_logits_v2``, or the
  flash-attn / torch_npu cross-entropy: no full ``V`` tensor); nothing is upcast to fp32. Checked on held-out
  Qwen3-1.7B, 8 704-token rows (bench/memory_fit.csv ``w14``): 10V put the log-prob phase 38 % over the real peak.
  Tokens per micro-batch: ``ppo_max_token_len_per_gpu`` (dynamic batch) else micro x (prompt + response).
- vLLM reserves ``u*T`` while awake (its KV cache fills the share, ``verl/workers/rollout``); asleep it
  keeps :data:`ROLLOUT_ASLEEP_GIB`. The actor process keeps :data:`ACTOR_CTX_GIB` (CUDA context, NCCL).
  Colocated phases add both; ``weight-sync`` resumes the KV cache after the actor offloaded its params
  (``verl/workers/engine_workers.py:810-823``) only when offload is on; the sync bucket is
  :data:`SYNC_BUCKET_GIB` (``update_weights_bucket_megabytes: 2048``).
- One-step-off (V1 ``separate_async``; ``Setup.colocated`` False): the trainer pool's devices hold no rollout; the
  weight sync goes through the NCCL / HCCL checkpoint engine, which allocates a send and a receive buffer of the
  bucket on every rank of BOTH sides (``verl/checkpoint_engine/nccl_checkpoint_engine.py:121-124,165-172``,
  ``hccl_checkpoint_engine.py:139-140``; bucket ``update_weights_bucket_megabytes``,
  ``verl/workers/engine_workers.py:681``), outside vLLM's share. ``weight-sync`` is the larger side: the trainer
  (context + its resident state + 2 buckets) or the rollout pool: verl frees vLLM's KV cache before it allocates the
  buckets and restores it after the engine's ``finalize`` freed them (``verl/checkpoint_engine/base.py:532-556``,
  ``verl/workers/rollout/vllm_rollout/vllm_async_server.py:875-892``), so that side peaks at
  ``max(context + vLLM's weights 2P/rollout_tp + 2 buckets, u*T)``; the ``weight-bucket``
  rung halves the bucket (:mod:`dapo_ops.core.memladder`). ``terms["weight_sync_side"]`` says which.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, TYPE_CHECKING

from dapo_ops.core import defaults, memladder
from dapo_ops.core.hydra_override import Override, key_of, last_by_key, truth
from dapo_ops.core.memladder import current_micro
from dapo_ops.core.profiles import fsdp_strategy

if TYPE_CHECKING:
    from dapo_ops.core.features import FeatureSet

GIB = 1024**3
ACTOR_CTX_GIB = 1.16  # 1187 MiB: actor process with everything offloaded (real-verl gpu-mem-4/5/7/8.csv)
ROLLOUT_ASLEEP_GIB = 0.83  # 848 MiB: the sleeping vLLM worker ("Process 8919 has 848.00 MiB", run 7)
SYNC_BUCKET_GIB = 2.0  # update_weights_bucket_megabytes: 2048 (_generated_ppo_trainer.yaml:371); run 1: 2.08
ACT_BYTES = (30, 6, 8)  # activation bytes per token-layer: 30h + 6*kv*d + 8i
LOGIT_BYTES = 10
LOGPROB_LOGIT_BYTES = 6  # bf16 logits + softmax + softmax*logits (entropy), no fp32 upcast: see the module doc
_KEYS = (
    "model_type",
    "hidden_size",
    "num_hidden_layers",
    "intermediate_size",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "vocab_size",
    "tie_word_embeddings",
    "attention_bias",
    "num_experts",
    "num_local_experts",
    "moe_intermediate_size",
    "num_experts_per_tok",
    "shared_expert_intermediate_size",
    "torch_dtype",
)


class FitError(ValueError):
    """The plan cannot fit the devices on any rung; the message is one line with the numbers."""


class EstimateUnavailable(ValueError):
    """``config.json`` lacks a shape key the estimate needs (one line naming it); nothing is refused for it."""


def model_facts(cfg: dict[str, Any]) -> dict[str, Any]:
    """The ``config.json`` keys the estimate uses (JSON-able; multimodal ``text_config`` merged in)."""
    src = dict(cfg or {})
    for sub in ("text_config", "llm_config"):
        if isinstance(src.get(sub), dict):
            src = {**src[sub], **{k: v for k, v in src.items() if k == "model_type"}}
    return {k: src[k] for k in _KEYS if k in src}


@dataclass(frozen=True)
class Model:
    """Shape of a decoder-only transformer (from :func:`model_facts`)."""

    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool
    bias: bool
    qk_norm: bool
    experts: int = 0
    moe_intermediate: int = 0
    top_k: int = 1

    @classmethod
    def from_config(cls, cfg: dict[str, Any]) -> "Model":
        """Raises :class:`EstimateUnavailable` (one line) when a required key is missing."""
        c = model_facts(cfg)
        try:
            h, a = int(c["hidden_size"]), int(c["num_attention_heads"])
            mt = str(c.get("model_type") or "")
            e = int(c.get("num_experts") or c.get("num_local_experts") or 0)
            return cls(
                layers=int(c["num_hidden_layers"]),
                hidden=h,
                intermediate=int(c.get("intermediate_size") or 0),
                heads=a,
                kv_heads=int(c.get("num_key_value_heads") or a),
                head_dim=int(c.get("head_dim") or h // a),
                vocab=int(c["vocab_size"]),
                tied=bool(c.get("tie_word_embeddings", False)),
                bias=bool(c.get("attention_bias", mt.startswith("qwen2"))),
                qk_norm=mt.startswith("qwen3"),
                experts=e,
                moe_intermediate=int(c.get("moe_intermediate_size") or 0),
                top_k=int(c.get("num_experts_per_tok") or 1),
            )
        except (KeyError, TypeError, ValueError) as ex:
            raise EstimateUnavailable(f"memory-fit estimate unavailable: config.json lacks {ex}") from None


def param_count(m: Model) -> int:
    """Parameters of ``m`` (formula in the module docstring)."""
    h, d = m.hidden, m.head_dim
    attn = h * m.heads * d + 2 * h * m.kv_heads * d + m.heads * d * h
    if m.bias:
        attn += m.heads * d + 2 * m.kv_heads * d
    if m.qk_norm:
        attn += 2 * d
    mlp = m.experts * 3 * h * m.moe_intermediate + h * m.experts if m.experts else 3 * h * m.intermediate
    return m.vocab * h * (1 if m.tied else 2) + m.layers * (attn + mlp + 2 * h) + h


def act_bytes_per_token_layer(m: Model) -> int:
    """Activation bytes one token leaves per layer for the backward (``30h + 6*kv*d + 8i``)."""
    i = m.moe_intermediate * m.top_k if m.experts else m.intermediate
    a, b, c = ACT_BYTES
    return a * m.hidden + b * m.kv_heads * m.head_dim + c * i


@dataclass
class Setup:
    """What the estimate needs of the run (GiB, tokens, counts). Built by :func:`setup_from_spec`."""

    device_gib: float
    framework: str = "fsdp"
    colocated: bool = True
    world: int = 8  # trainer devices (data-parallel shards of the actor)
    rollout_tp: int = 1
    util: float = 0.6
    seq: int = 10240  # prompt + response tokens
    update_tokens: int = 20480  # tokens of one update micro-batch per device
    logprob_tokens: int = 30720
    gc: bool = True
    offload: bool = False
    recompute: bool = False
    offload_policy: bool = False
    adam_in_forward: bool = True  # False for a 1-step run (Adam state is created by the first step())
    tp: int = 1  # Megatron tensor / pipeline / context parallel sizes of the trainer
    pp: int = 1
    cp: int = 1
    logprob: bool = True  # False: old log-probs are the rollout's (bypass_mode), no log-prob forward runs
    bucket_gib: float = SYNC_BUCKET_GIB  # the weight-sync bucket (update_weights_bucket_megabytes / 1024)
    strategy: str = "fsdp2"  # FSDP actor.strategy (profiles.fsdp_strategy): offload_policy is read by fsdp2 only
    megatron_recompute: str | None = (
        "selective"  # what gradient checkpointing runs on Megatron (profiles.MEGATRON_RECOMPUTE)
    )


@dataclass
class Estimate:
    """Per-device peak per phase (GiB), the tightest phase, whether it fits, and the terms of the update."""

    phases: dict[str, float]
    device_gib: float
    actor_alloc_gib: float  # peak torch-allocated in the actor process (verl's perf/max_memory_allocated_gb)
    params: int
    terms: dict[str, Any] = field(default_factory=dict)

    @property
    def tightest(self) -> str:
        return max(self.phases, key=lambda p: self.phases[p])

    @property
    def peak_gib(self) -> float:
        return self.phases[self.tightest]

    @property
    def fits(self) -> bool:
        return self.peak_gib <= self.device_gib

    def line(self) -> str:
        """``tightest update 52.3 of 139.8 GiB (update 52.3, weight-sync 44.1, ...)``."""
        per = ", ".join(f"{p} {v:.1f}" for p, v in sorted(self.phases.items(), key=lambda kv: -kv[1]))
        return f"tightest {self.tightest} {self.peak_gib:.1f} of {self.device_gib:.1f} GiB per device ({per})"


def estimate(m: Model, s: Setup) -> Estimate:
    """Per-device peak (GiB) of each phase the estimate models for model ``m`` and run ``s``: the classifier's OOM
    phases (:data:`dapo_ops.core.classify.verdict.PHASES`) but ``checkpoint-save`` and ``unknown``; ``log-prob`` only when
    the run computes old log-probs."""
    P = param_count(m)

    def g(b: float) -> float:
        return b / GIB

    act_tl = act_bytes_per_token_layer(m)
    if s.framework == "megatron":
        shard = s.tp * s.pp
        dp = max(1, s.world // shard)
        params_b, opt_b, grads_b, step_extra = 2 * P / shard, 12 * P / (shard * dp), 4 * P / shard, 4 * P / (shard * dp)
    else:
        params_b, opt_b, grads_b, step_extra = 4 * P / s.world, 8 * P / s.world, 4 * P / s.world, 4 * P / s.world
    layer_full = act_tl
    layer_in = 2 * m.hidden
    meg = s.framework == "megatron"
    # Megatron: full recompute (the recompute rung, or gradient checkpointing where it runs full/uniform/1); its
    # selective core_attn recompute (engine/megatron.yaml:79) re-runs only the attention core, whose flash-attention
    # output the layer keeps anyway: nothing of the per-layer activations counted here is dropped
    full = s.recompute or (s.gc and s.megatron_recompute == "full") if meg else s.gc
    if s.recompute and not meg:  # activation offload: inputs go to the CPU;
        per_token = (layer_full + 2 * layer_in) if s.gc else 2 * layer_full  # without checkpointing 2 layers stay
    elif full:
        per_token = m.layers * layer_in + layer_full  # checkpointing: inputs kept, one layer recomputed
    else:
        per_token = m.layers * layer_full
    act = s.update_tokens * (per_token + LOGIT_BYTES * m.vocab) / max(1, s.tp * s.cp)
    # FSDP2 CPUOffloadPolicy: sharded state lives on the CPU; verl's FSDP1 branch never reads offload_policy
    # (verl/workers/engine/fsdp/transformer_impl.py:423-449; the policy: :450-463)
    pol = s.offload_policy and not meg and s.strategy == "fsdp2"
    layer_bf16 = 2 * 2 * P / max(1, m.layers)  # current + prefetched layer, unsharded bf16
    if pol:
        params_b = opt_b = 0.0
        update = act + layer_bf16
    else:
        fwd = params_b + (opt_b if s.adam_in_forward else 0) + act
        update = max(fwd, params_b + grads_b + opt_b + step_extra)
    inter = m.moe_intermediate * m.top_k if m.experts else m.intermediate
    logprob = (layer_bf16 if pol else params_b) + s.logprob_tokens * (
        4 * m.hidden + 6 * inter + LOGPROB_LOGIT_BYTES * m.vocab
    ) / max(1, s.tp * s.cp)  # no-grad forward: one layer's transients
    resident = 0.0 if s.offload else params_b + opt_b  # between phases (grads freed by zero_grad)
    rollout_w = 2 * P / max(1, s.rollout_tp)
    buffers = (1 if s.colocated else 2) * s.bucket_gib * GIB  # separate_async: send + receive buffer per rank
    sync_actor = params_b + (0 if s.offload else opt_b) + buffers
    ctx = ACTOR_CTX_GIB
    awake = s.util * s.device_gib if s.colocated else 0.0
    asleep = ROLLOUT_ASLEEP_GIB if s.colocated else 0.0
    side = "trainer"
    if not s.colocated:
        wsync = ctx + g(sync_actor)
        # the rollout pool's devices: verl frees the KV cache before the buckets and restores it after they are freed
        # (verl/checkpoint_engine/base.py:532-556, vllm_async_server.py:875-892): vLLM's weights + the buffers, then
        # the share again
        rollout_side = max(ctx + g(rollout_w + buffers), s.util * s.device_gib)
        if rollout_side > wsync:
            wsync, side = rollout_side, "rollout"
    elif s.offload or pol:
        wsync = ctx + max(g(sync_actor + rollout_w), awake)
    else:
        wsync = ctx + g(sync_actor) + awake
    phases = {
        "model-load": ctx + g(params_b),
        "checkpoint-load": ctx + asleep + g(params_b + opt_b),
        "rollout-init": ctx + g(0 if s.offload else params_b) + awake,
        "weight-sync": wsync,
        "generation": ctx + g(resident) + awake,
        "log-prob": ctx + asleep + g(logprob + (0 if s.offload else opt_b)),
        "update": ctx + asleep + g(update),
    }
    if not s.logprob:
        del phases["log-prob"]
        logprob = 0.0
    alloc = g(max(update, logprob, sync_actor))
    terms = {
        "params": P,
        "state_gib": g(params_b + (0 if pol else grads_b) + opt_b),
        "activations_gib": g(act),
        "rollout_gib": awake,
        "weight_sync_side": side,
    }
    return Estimate({k: round(v, 2) for k, v in phases.items()}, s.device_gib, round(alloc, 2), P, terms)


#: ``--override`` keys of the trainer's Megatron parallel sizes the estimate reads (``engine/megatron.yaml:11,20,26``)
MEGATRON_PARALLEL_KEYS = {
    "tp": "actor_rollout_ref.actor.megatron.tensor_model_parallel_size",
    "pp": "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size",
    "cp": "actor_rollout_ref.actor.megatron.context_parallel_size",
}
BYPASS_KEY = "algorithm.rollout_correction.bypass_mode"
#: the weight-sync bucket's verl key (``memladder.BUCKET_KEY``: its ``weight-bucket`` rung sets ``weight_sync_bucket_mb``)
BUCKET_OVERRIDE_KEY = "actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes"


def user_overrides(spec: Mapping[str, Any]) -> dict[str, Override]:
    """The spec's ``extra_overrides`` parsed: the last override of each key
    (:func:`dapo_ops.core.hydra_override.last_by_key`), every key one the user touched. The one parse the estimate
    reads (:func:`override_values`, :func:`setup_from_spec`)."""
    return last_by_key(((spec or {}).get("settings") or {}).get("extra_overrides") or [])


def override_values(spec: Mapping[str, Any], user: Mapping[str, Override] | None = None) -> dict[str, str | None]:
    """``{key: value text}`` of the spec's ``extra_overrides`` (``user``: :func:`user_overrides` of it, parsed
    already): what the last override of each key gives it (``+``/``++`` prefixes and quotes gone), None for a key that
    override deletes (``~key``: verl then runs its config dataclass's default, :mod:`dapo_ops.core.hydra_override`).
    Every key here is one the user touched."""
    return {k: o.text for k, o in (user_overrides(spec) if user is None else user).items()}


#: the memory features the estimate models (:class:`Setup` ``gc`` / ``offload`` / ``recompute``)
MEMORY_FEATURES = ("gradient_checkpointing", "offload", "recompute")


def _gives(o: Override, value: object) -> bool:
    """Whether override ``o`` gives its key ``value`` (a feature's value in
    :func:`dapo_ops.core.profiles.feature_overrides`) as verl reads it: a bool by truthiness
    (:func:`dapo_ops.core.hydra_override.truth`; a ``~`` deletion is neither), None by ``null`` / a deletion, any
    other value by its text."""
    if isinstance(value, bool):
        return truth(o) is value
    if value is None:
        return o.deletes or o.null
    return o.text == str(value)


def features_run(features: FeatureSet, settings: dict[str, Any], user: Mapping[str, Override]) -> frozenset[str]:
    """The enabled features' names as verl runs them once the user's ``--override`` (``user``, :func:`user_overrides`)
    is applied: it is appended after the features' keys, so the user's value decides
    (:func:`dapo_ops.core.overrides.verl_argv`). A memory feature (:data:`MEMORY_FEATURES`) whose keys
    (:func:`dapo_ops.core.memladder.feature_keys`) the user touched counts on when every one of them reads on (the
    user's value, else the feature's own), else off: ``actor_rollout_ref.actor.fsdp_config.param_offload=True`` and
    ``...optimizer_offload=True`` offload the actor as the ``offload`` feature does; one of them alone is counted as
    no offload (the estimate models the feature whole, so it over-counts rather than under).

    Each feature's keys are worked out against the features as planned, not as counted so far: two features may
    write the same key, and the user's value of it belongs to the one whose key it is there. FSDP's ``recompute``
    turns gradient checkpointing on unless ``-gradient_checkpointing`` (:func:`dapo_ops.core.profiles.feature_overrides`);
    with both on, ``...enable_gradient_checkpointing=False`` is ``gradient_checkpointing``'s key only, and verl runs
    it: the plan writes the features' keys first and the user's ``extra_overrides`` last
    (:func:`dapo_ops.core.overrides.verl_argv`), Hydra applies them in order, and verl reads
    ``enable_gradient_checkpointing`` and ``enable_activation_offload`` apart
    (``verl/workers/engine/fsdp/transformer_impl.py:335,477-479``: activation offload then runs with
    ``enable_ckpt=False``): gradient checkpointing off, ``recompute`` (activation offload) on."""
    names = set(features.names())
    planned = features.names()
    for f in MEMORY_FEATURES:
        changed = memladder.feature_keys(planned, f, features.disabled, settings)
        if any(k in user for k in changed):
            on = all(_gives(user[k], v) if k in user else f in names for k, (_, v) in changed.items())
            names = names | {f} if on else names - {f}
    return frozenset(names)


def _offload_policy(s: Mapping[str, Any], user: Mapping[str, Override]) -> bool:
    """FSDP2's CPU offload policy as verl runs it: the user's ``--override`` of its key (truthiness), else the
    ``fsdp_offload_policy`` setting (:data:`dapo_ops.core.memladder.SETTING_KEYS`)."""
    o = user.get(memladder.SETTING_KEYS["fsdp_offload_policy"][0])
    return bool(truth(o)) if o is not None else bool(s.get("fsdp_offload_policy"))


def parallel_sizes(
    spec: Mapping[str, Any], setting_changes: dict[str, Any] | None = None, user: Mapping[str, Override] | None = None
) -> dict[str, Any]:
    """The trainer's Megatron ``{"tp", "pp", "cp"}`` a spec runs with: the settings ``trainer_tp`` /
    ``trainer_pp`` (resolved by the planner, :func:`default_parallel`), then any ``--override`` of
    :data:`MEGATRON_PARALLEL_KEYS` (appended last to verl's argv, so it wins there too). FSDP: all 1. ``user``: the
    spec's ``extra_overrides`` parsed already (:func:`user_overrides`, or the spec check's one parse), else parsed
    here."""
    spec = defaults.RunSpec.read(spec)
    if spec.framework != "megatron":
        return {"tp": 1, "pp": 1, "cp": 1}
    s = dict(spec.settings, **(setting_changes or {}))
    out = {"tp": int(s["trainer_tp"] or 1), "pp": int(s["trainer_pp"] or 1), "cp": 1}
    ov = override_values(spec, user)
    for name, key in MEGATRON_PARALLEL_KEYS.items():
        v = ov.get(key) or ""
        if v.isdigit() and int(v) > 0:
            out[name] = int(v)
    return out


#: Trainer parallel sizes by model size, after verl's Megatron examples: ``(max parameters in billions,
#: (tp, pp) on devices of <= 64 GiB, (tp, pp) on larger devices)``. verl's 8B one-step-off / NPU DAPO examples run
#: TP2 PP2 (``verl/experimental/one_step_off_policy/shell/dapo_7b_math_megatron_4_12.sh``: ``train_tp=2
#: train_pp=2``; verl's 910B 64 GB DAPO practice, verl's docs/ascend_tutorial .../dapo_multi_model_optimization_practice).
PARALLEL_TABLE = (
    (2.0, (1, 1), (1, 1)),
    (10.0, (2, 2), (2, 1)),
    (20.0, (4, 2), (4, 1)),
    (40.0, (8, 2), (8, 1)),
    (float("inf"), (8, 4), (8, 2)),
)
#: device memory (GiB) assumed per accelerator when it is not known yet (dry run): Ascend 910B 64 GB, A100/H100 80 GB
DEVICE_GIB_BY_ACCELERATOR = {"npu": 64.0, "gpu": 80.0}


def params_from_name(model_path: str) -> float | None:
    """Parameters (billions) a model directory's name states (``Qwen3-8B`` -> 8.0, ``Qwen2.5-0.5B-Instruct`` -> 0.5),
    None when it states none."""
    import re

    base = str(model_path or "").rstrip("/").rsplit("/", 1)[-1]
    m = re.search(r"(?<![A-Za-z0-9.])(\d+(?:\.\d+)?)[bB](?![A-Za-z])", base)
    return float(m.group(1)) if m else None


def default_parallel(params_b: float | None, device_gib: float | None, world: int) -> tuple[int, int]:
    """``(tp, pp)`` for a Megatron trainer of ``params_b`` billion parameters on ``world`` devices of
    ``device_gib`` GiB (:data:`PARALLEL_TABLE`); ``(1, 1)`` when the size is unknown. Lowered (pp first) until
    ``tp * pp`` divides ``world``."""
    if not params_b:
        return 1, 1
    small = (device_gib or 0) <= 64.5
    for limit, low, high in PARALLEL_TABLE:
        if params_b <= limit:
            tp, pp = low if small else high
            break
    while pp > 1 and world % (tp * pp):
        pp //= 2
    while tp > 1 and world % (tp * pp):
        tp //= 2
    return tp, pp


def trainer_world(s: Mapping[str, Any], one_step_off: bool) -> int:
    """Trainer devices of complete settings ``s``: the trainer pool (one-step-off) or the devices per node, x nodes."""
    return int(s["trainer_gpus"] if one_step_off else s["n_gpus_per_node"]) * max(1, int(s["nnodes"]))


def setup_from_spec(
    spec: Mapping[str, Any], features: FeatureSet, device_gib: float, setting_changes: dict[str, Any] | None = None
) -> Setup:
    """The :class:`Setup` of a run spec (docs/design.md "Run spec") + its features + setting changes: the Megatron
    parallel sizes from :func:`parallel_sizes`; no log-prob phase when the old log-probs are the rollout's
    (``algorithm.rollout_correction.bypass_mode``, ``verl/trainer/ppo/v1/trainer_base.py:1641-1648``). A key the
    spec lacks is the defaults table's (:func:`dapo_ops.core.defaults.complete_spec`)."""
    spec = defaults.RunSpec.read(spec)
    s = dict(spec.settings)
    s.update(setting_changes or {})
    user = user_overrides(spec)  # the one parse of the user's --override every value below reads
    names = features_run(features, dict(s, framework=spec.framework, profile=spec.profile), user)
    seq = int(s["max_prompt_length"]) + int(s["max_response_length"])
    budgets = dict(s.get("token_budgets") or {})
    ov = override_values(spec, user)
    for k, v in ov.items():
        if k.endswith("max_token_len_per_gpu") and v and v.isdigit():
            budgets.setdefault(k, int(v))
    par = parallel_sizes(spec, setting_changes, user)
    if (
        BYPASS_KEY in ov
    ):  # deleted (None): RolloutCorrectionConfig's default False (verl/trainer/config/algorithm.py:184)
        bypass = bool(truth(user[BYPASS_KEY]))
    else:  # the generator's one-step-off default (dapo_ops.core.profiles.v1_overrides)
        bypass = spec.mode == "one-step-off" and spec.profile == "0.9"
    bucket_mb = s.get("weight_sync_bucket_mb") or ov.get(BUCKET_OVERRIDE_KEY)
    one_step_off = spec.mode == "one-step-off"
    world = trainer_world(s, one_step_off)
    if "dynamic_batch" in names:
        upd = int(budgets.get("actor_rollout_ref.actor.ppo_max_token_len_per_gpu") or 2 * seq)
        lp = int(budgets.get("actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu") or 3 * seq)
    else:  # what verl runs: the fit's or a rung's setting, else the user's --override (memladder.current_micro)
        upd = current_micro(s, "ppo_micro_batch_size_per_gpu", user) * seq
        lp = current_micro(s, "log_prob_micro_batch_size_per_gpu", user) * seq
    return Setup(
        device_gib=float(device_gib),
        framework=spec.framework,
        colocated=not one_step_off,
        world=world,
        rollout_tp=int(s["rollout_tp"]),
        util=float(s["gpu_memory_utilization"]),
        seq=seq,
        update_tokens=upd,
        logprob_tokens=lp,
        gc="gradient_checkpointing" in names,
        offload="offload" in names,
        recompute="recompute" in names,
        offload_policy=_offload_policy(s, user),
        adam_in_forward=int(s["steps"]) > 1,
        tp=par["tp"],
        pp=par["pp"],
        cp=par["cp"],
        logprob=not bypass,
        bucket_gib=int(str(bucket_mb)) / 1024 if str(bucket_mb or "").isdigit() else SYNC_BUCKET_GIB,
        strategy=fsdp_strategy(world, spec.strategy, bool(s.get("fsdp_offload_policy"))),  # the command's
        megatron_recompute=s["megatron_recompute"],
    )


@dataclass
class Fit:
    """Outcome of :func:`fit`: the features and setting changes the first attempt starts with (rungs
    applied with source ``estimate``), the estimate of the first attempt as planned and as started, and
    the rungs applied."""

    features: FeatureSet
    setting_changes: dict[str, Any]
    planned: Estimate
    started: Estimate
    rungs: list[str]
    parallel: dict[str, Any] = field(default_factory=dict)  # the trainer's Megatron tp/pp/cp the estimate used
    proposal: str = ""  # "TRAINER_TP=4 TRAINER_PP=2" when larger sizes fit without rungs

    def lines(self) -> list[str]:
        par = (
            (
                f" with trainer TP {self.parallel['tp']} PP {self.parallel['pp']}"
                + (f" CP {self.parallel['cp']}" if self.parallel.get("cp", 1) > 1 else "")
            )
            if self.parallel
            else ""
        )
        out = [f"memory-fit estimate{par}: {self.planned.line()}"]
        if self.rungs:
            out.append(
                f"memory-fit: starts on rung(s) {', '.join(self.rungs)} (source: estimate): {self.started.line()}"
            )
        if self.proposal:
            out.append(f"memory-fit: {self.proposal} (the Megatron trainer's parallel sizes)")
        return out


def propose_parallel(
    m: Model, spec: Mapping[str, Any], features: FeatureSet, device_gib: float, changes: dict[str, Any] | None = None
) -> str:
    """Advice for a Megatron plan that does not fit as planned: the smallest trainer ``tp * pp`` (tp, pp in 1, 2, 4,
    8; dividing the trainer devices; larger than today's) whose estimate fits without any rung, as
    ``"TRAINER_TP=4 TRAINER_PP=2 fits without rungs: tightest ..."``; "" when none does or for FSDP."""
    spec = defaults.RunSpec.read(spec)
    if spec.framework != "megatron":
        return ""
    s = dict(spec.settings)
    now = parallel_sizes(spec, changes)
    world = trainer_world(s, spec.mode == "one-step-off")
    tp_pp = (MEGATRON_PARALLEL_KEYS["tp"], MEGATRON_PARALLEL_KEYS["pp"])
    keep = [x for x in s.get("extra_overrides") or [] if key_of(x) not in tp_pp]
    cands = sorted(
        (
            (tp, pp)
            for tp in (1, 2, 4, 8)
            for pp in (1, 2, 4, 8)
            if world % (tp * pp) == 0 and tp * pp > now["tp"] * now["pp"] and tp <= m.kv_heads
        ),
        key=lambda c: (c[0] * c[1], c[1]),
    )
    for tp, pp in cands:
        trial = dict(spec, settings=dict(s, trainer_tp=tp, trainer_pp=pp, extra_overrides=keep))
        est = estimate(m, setup_from_spec(trial, features, device_gib, changes))
        if est.fits:
            return f"TRAINER_TP={tp} TRAINER_PP={pp} fits without rungs: {est.line()}"
    return ""


def _allowed_rung(
    fs: FeatureSet, phase: str, settings: dict[str, Any], off: Mapping[str, str], passed: dict[str, str]
) -> tuple[str | None, FeatureSet, dict[str, Any]]:
    """The estimate's next rung of ``phase`` (:func:`dapo_ops.core.memladder.apply_rung`, source ``estimate``), passing
    over a feature rung of ``off`` (the user turned it off by its own setting, :func:`fit`) as the ladder passes over
    a ``-name`` one; such a rung is added to ``passed`` (name -> how it was turned off). Returns ``(rung or None,
    features, setting changes)``; the features keep ``fs``'s own ``disabled``."""
    from dataclasses import replace

    rung, fs2, ch, _ = memladder.apply_rung(fs, phase, settings, "estimate")
    if rung is None or rung not in off:
        return rung, fs2, ch
    passed[rung] = off[rung]
    rung, fs2, ch, _ = memladder.apply_rung(
        replace(fs, disabled=fs.disabled | frozenset(off)), phase, settings, "estimate"
    )
    return rung, replace(fs2, disabled=fs.disabled), ch


def _cannot_fit(est: Estimate, rungs: list[str], proposal: str, passed: Mapping[str, str]) -> str:
    """:func:`fit`'s refusal, one line: the numbers, the rungs tried, a rung it did not start on because the user
    turned it off (``passed``: name -> how) and what to change."""
    t = est.terms
    head = "the run cannot fit"
    if passed:  # the rung the user's own setting keeps off: named first, with the setting
        how = "; ".join(f"{n}, which you turned off ({w})" for n, w in passed.items())
        head = f"the run does not fit without {how}; the estimate never overrides an explicit setting"
    return (
        f"memory-fit: {head}: {est.line()}; actor state {t['state_gib']:.1f} GiB, "
        f"activations {t['activations_gib']:.1f} GiB, rollout share {t['rollout_gib']:.1f} GiB"
        + (f" after {', '.join(rungs)}" if rungs else "")
        + (f"; set {proposal.split(' fits')[0]} (it fits without rungs)" if proposal else "")
        + "; "
        + (f"drop {' and '.join(passed.values())} (or MEMORY_FIT=warn to launch as planned), " if passed else "")
        + "use more devices, shorter responses (--max-response-length) or a smaller model"
    )


def fit(
    cfg: dict[str, Any],
    spec: Mapping[str, Any],
    features: FeatureSet,
    device_gib: float,
    max_rungs: int = 6,
    off: Mapping[str, str] | None = None,
) -> Fit:
    """Estimate the first attempt; if its tightest phase does not fit, apply that phase's ladder rungs
    (:func:`dapo_ops.core.memladder.apply_rung`, source ``estimate``) until it fits. Raises :class:`FitError`
    (one line with the numbers) when no rung makes it fit, :class:`EstimateUnavailable` when ``cfg`` lacks a key.

    ``off``: the feature rungs the user turned off by their own setting, feature -> how (``{"offload":
    "--no-offload"}``, the plan's ``_said_no_offload``: the rule a learned start follows,
    :func:`dapo_ops.core.learned.conflicts`): the estimate never starts on one (as with ``-offload``) and, when the
    run does not fit without it, the :class:`FitError` names it and the setting."""
    m = Model.from_config(cfg)
    spec = defaults.RunSpec.read(spec)
    changes = dict(spec.setting_changes)  # a plan that already starts on estimate rungs
    planned = estimate(m, setup_from_spec(spec, features, device_gib, changes))
    fs, est = features, planned
    rungs: list[str] = []
    passed: dict[str, str] = {}  # the rungs of ``off`` the estimate would have started on
    # a pinned strategy (a --resume's checkpoint) is the ladder's; unpinned, nothing ran yet: a one-device FSDP run
    # that needs the policy starts on fsdp2 (the planner pins it, profiles.fsdp_strategy)
    settings = dict(spec.settings, framework=spec.framework, mode=spec.mode, strategy=spec.strategy)
    while not est.fits and len(rungs) < max_rungs:
        phase = est.tightest
        rung, fs2, ch = _allowed_rung(fs, phase, dict(settings, **changes), off or {}, passed)
        if rung is None:
            break
        fs, rungs = fs2, rungs + [f"{rung}({phase})"]
        changes.update(ch)
        est = estimate(m, setup_from_spec(spec, fs, device_gib, changes))
    proposal = "" if planned.fits else propose_parallel(m, spec, features, device_gib, dict(spec.setting_changes))
    if not est.fits:
        raise FitError(_cannot_fit(est, rungs, proposal, passed))
    par = parallel_sizes(spec, dict(spec.setting_changes)) if spec.framework == "megatron" else {}
    return Fit(fs, changes, planned, est, rungs, par, proposal)
