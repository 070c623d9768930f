"""Which phase of a run an error happened in, and which engine it came from (:mod:`dapo_ops.core.classify`): the
traceback frames and ``ray::Worker.<method>()`` lines of the whole call chain around an error line, else the nearest
progress line. The phase names are :data:`dapo_ops.core.classify.verdict.PHASES` (the memory ladder is per phase:
dapo_ops/core/memladder.py).

STDLIB ONLY. The rules are data (:data:`PHASE_FRAME_RULES`, :data:`PHASE_CONTEXT_RULES`), checked against
:data:`PHASES` at import (:class:`~dapo_ops.core.classify.verdict.ClassifierTableError`).
"""

from __future__ import annotations

import re

from dapo_ops.core.classify.logtail import KILLED_RX, MEM_TABLE_ROW_RX, STEP_RX, Log
from dapo_ops.core.classify.verdict import PHASES, ClassifierTableError

TRACEBACK_START = "traceback (most recent call last)"

# frame words that put a device OOM into the rollout engine (-> oom-kv-cache) or training.
_ROLLOUT_FRAME_RX = re.compile(
    r"kv_cache|initialize_cache|init_device|_build_rollout|determine_available_memory"
    r"|determine_num_available_blocks|profile_run|/vllm/|/vllm_ascend/|vllm_rollout|enginecore|llmrayactor"
    r"|/sglang/|wake_up"
)
_TRAIN_FRAME_RX = re.compile(
    r"update_actor|update_policy|backward|update_critic|optimizer\.step|compute_log_prob|compute_ref_log_prob"
    r"|entropy_from_logits|dp_actor\.py|dp_critic\.py|megatron_actor|_forward_micro_batch|torch/optim/"
    r"|torch/autograd/|fsdp_workers\.py|megatron_workers\.py"
)
# (vLLM's Ray executor workers: RayWorkerWrapper, vllm-ascend's NPURayWorkerWrapper)
_ROLLOUT_PREFIX_RX = re.compile(
    r"^(?:Worker_TP\d*|EngineCore(?:_DP\d+)?|LLMRayActor|VllmWorker|vLLM|SGLang|Sglang"
    r"|AsyncSglang|RolloutServer|(?:NPU)?RayWorkerWrapper)",
    re.I,
)
# rollout engines' own allocators (SGLang torch_memory_saver, vLLM sleep-mode cumem / vllm-ascend camem)
# (and the engines' own start-up OOM wordings: vLLM vllm/v1/worker/gpu_model_runner.py _dummy_sampler_run: "CUDA out of memory
# occurred when warming up sampler with <n> dummy requests. Please try lowering `max_num_seqs` or
# `gpu_memory_utilization` when initializing the engine.")
_ROLLOUT_ALLOC_RX = re.compile(
    r"torch_memory_saver|cumem_allocator|camem_allocator|/sglang/|/vllm/|/vllm_ascend/"
    r"|out of memory occurred when warming up sampler"
    # SGLang cuda_graph_runner.py: raise Exception("Capture cuda graph failed: " + ...)
    r"|capture cuda graph failed"
)
# Phase words in traceback frames (``File "...", line N, in <func>``) and ``ray::Worker.<method>()`` lines, in
# PRIORITY order: when one call chain names several, the first phase here wins (a wake-up inside
# generate_sequences is weight-sync; KV-cache allocation inside init_model is rollout-init; load_state_dict
# inside load_checkpoint is checkpoint-load). Function names are verl 0.9.1's: verl/trainer/ppo/v1/
# trainer_base.py (_update_actor, _load_checkpoint), verl/workers/engine_workers.py (update_actor :714,
# compute_log_prob, update_weights :823), verl/workers/rollout/vllm_rollout/vllm_rollout.py (resume :202),
# verl/checkpoint_engine/base.py (update_weights :519), verl/utils/checkpoint/fsdp_checkpoint_manager.py
# (load_checkpoint / save_checkpoint); legacy verl/workers/fsdp_workers.py (init_model, _build_rollout,
# generate_sequences, sharding_manager); vLLM (determine_available_memory, initialize_kv_cache,
# gpu_worker.wake_up), SGLang (resume_memory_occupation, init_memory_pool).
PHASE_FRAME_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "rollout-init",
        re.compile(
            r"kv_cache|initialize_cache|init_device|_build_rollout|determine_available_memory|determine_num_available_blocks"
            r"|profile_run|init_memory_pool|_initialize_kv_caches|init_engine|launch_server|run_scheduler_process"
            r"|init_cache_engine|_init_rollout|_dummy_sampler_run|when warming up sampler"
            # vLLM V0 builds the engine in from_engine_args (vllm/engine/multiprocessing/engine.py run_mp_engine)
            r"|from_engine_args"
        ),
    ),
    (
        "weight-sync",
        re.compile(
            r"update_weights|wake_up|resume_memory_occupation|release_memory_occupation|sync_weights|sharding_manager"
            r"|checkpoint_engine|_sync_model|, in resume\b|rollout_mode|load_weights_from"
        ),
    ),
    ("checkpoint-load", re.compile(r"load_checkpoint|restore_checkpoint|load_from_checkpoint|_load_ckpt")),
    (
        "checkpoint-save",
        re.compile(
            r"save_checkpoint|_save_ckpt|save_model|saving (?:model|optim|checkpoint)"
            r"|saved model to|local_global_step_folder"
        ),
    ),
    (
        "model-load",
        re.compile(
            r"init_model|_build_model|from_pretrained|load_state_dict|build_model_optimizer"
            r"|_init_engine_model|model_init|load_hf_model"
        ),
    ),
    ("log-prob", re.compile(r"compute_log_prob|compute_ref_log_prob|ref_log_prob|old_log_prob|compute_values")),
    (
        "update",
        re.compile(
            r"update_actor|update_policy|update_critic|train_mini_batch|train_batch|forward_backward"
            r"|optimizer\.step|, in backward\b|torch/autograd/|dp_actor\.py.*update|megatron_actor.*update"
        ),
    ),
    (
        "generation",
        re.compile(
            r"generate_sequences|, in generate\b|execute_model|sample_tokens|_run_engine"
            r"|agent_loop|async_generate"
        ),
    ),
)
PHASE_ORDER = {name: k for k, (name, _rx) in enumerate(PHASE_FRAME_RULES)}
# Phase words in ordinary log lines near the error (the run's own progress lines), used when no frame names one.
PHASE_CONTEXT_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "checkpoint-load",
        re.compile(
            r"resuming from|load from checkpoint|loading (?:from|checkpoint).{0,200}global_step_"
            r"|setting global step to"
        ),
    ),
    (
        "checkpoint-save",
        re.compile(
            r"saving (?:checkpoint|model|optim|extra_state|hf_model)|saved (?:model|checkpoint)"
            r"|local_global_step_folder"
        ),
    ),
    (
        "weight-sync",
        re.compile(
            r"resume_memory_occupation|release_memory_occupation|wake[ _]up|update_weights"
            r"|sleep mode|weight sync"
        ),
    ),
    ("rollout-init", re.compile(r"init engine|kv cache|memory profiling|cache blocks|capturing cuda ?graph")),
    ("model-load", re.compile(r"loading (?:checkpoint shards|weights)|model config after")),
)


#: verl's training progress bar: created in ``fit`` (verl/trainer/ppo/v1/trainer_base.py:451), after the checkpoint
#: load (``_load_checkpoint``, :392) and the validation before training: a context line above it (``Resuming from``)
#: names a phase that had ended before the error
TRAINING_BAR_RX = re.compile(r"training progress:")


def _check_rules() -> None:
    """Raises ClassifierTableError when a rule names a phase outside PHASES (or ``unknown``, which is no rule)."""
    for table, rules in (("PHASE_FRAME_RULES", PHASE_FRAME_RULES), ("PHASE_CONTEXT_RULES", PHASE_CONTEXT_RULES)):
        for name, _rx in rules:
            if name not in PHASES or name == "unknown":
                raise ClassifierTableError(f"{table}: {name!r} is not a phase (one of {', '.join(PHASES[:-1])})")


_check_rules()


#: the driver's call into a worker group, as a traceback's source line prints it (verl/trainer/ppo/ray_trainer.py
#: ``self.actor_rollout_wg.generate_sequences(gen_batch)``, ``self.critic_wg.update_critic(batch)``): the same
#: fact as a ``ray::WorkerDict.<method>()`` line, and the only one naming the worker's method when Ray raises the
#: error in the driver without one (Ray 2.1's ``ray.exceptions.OutOfMemoryError`` re-raised by ``ray.get``)
_WG_CALL_RX = re.compile(r"\b[a-z_]*_wg\.[a-z_]+\(")


def is_frame(ll: str) -> bool:
    """A traceback frame (``File "...", line N, in f``), a Ray call line (``ray::WorkerDict.update_actor()``) or a
    worker-group call source line (:data:`_WG_CALL_RX`)."""
    return 'file "' in ll or "ray::" in ll or _WG_CALL_RX.search(ll) is not None


def frame_phase(ll: str) -> str | None:
    """The highest-priority phase named by one lower-cased frame / call line (``None``: none)."""
    for name, rx in PHASE_FRAME_RULES:
        if rx.search(ll):
            return name
    return None


def context_phase(ll: str) -> str | None:
    """The first phase of :data:`PHASE_CONTEXT_RULES` named by one lower-cased progress line (``None``: none)."""
    for name, rx in PHASE_CONTEXT_RULES:
        if rx.search(ll):
            return name
    return None


def _best(phases: set[str]) -> str | None:
    return min(phases, key=PHASE_ORDER.__getitem__) if phases else None


def phase_of(log: Log, i: int, back: int = 150, fwd: int = 200, frames_only: bool = True) -> str | None:
    """The phase (one of :data:`PHASES` but ``unknown``) of the error at line ``i``, or ``None``.

    ``frames_only`` (tracebacks): every frame / ``ray::`` call line of the call chain around ``i`` counts: the
    frames above it (its own traceback; stop at a ``step:`` line) and the re-raised tracebacks after it (the
    driver's ``RayTaskError`` chain names verl's method: ``update_weights``, ``load_checkpoint``); the
    highest-priority phase of :data:`PHASE_FRAME_RULES` wins. Without a frame, the nearest progress line
    before ``i`` (``Resuming from``, ``Saving checkpoint``, ``resume_memory_occupation``), then just after it.
    ``frames_only=False`` (no traceback: a shell ``Killed`` line): the nearest line within ``back`` that names a
    phase in any way.
    """
    n = len(log.lines)
    if not frames_only:
        for j in range(i, max(-1, i - back), -1):
            ll = log.low_line(j)
            if j != i and STEP_RX.search(ll):
                break
            if log.is_echo(j) and not KILLED_RX.match(log.lines[j].lstrip()):
                continue
            ph = frame_phase(ll) or context_phase(ll)
            if ph:
                return ph
        return None
    found: set[str] = set()
    for j in range(i, max(-1, i - back), -1):
        ll = log.low_line(j)
        if j != i and STEP_RX.search(ll):
            break
        if j == i or is_frame(ll):
            ph = frame_phase(ll)
            if ph:
                found.add(ph)
    for j in range(i + 1, min(n, i + fwd)):
        ll = log.low_line(j)
        if STEP_RX.search(ll) or ll.startswith("===== dapo-ops attempt"):
            break
        if is_frame(ll):
            ph = frame_phase(ll)
            if ph:
                found.add(ph)
    if found:
        return _best(found)
    for rng in (range(i, max(-1, i - 30), -1), range(i + 1, min(n, i + 8))):
        for j in rng:
            ll = log.low_line(j)
            if j != i and (STEP_RX.search(ll) or (j < i and TRAINING_BAR_RX.search(ll))):
                break
            if log.is_echo(j):
                continue
            ph = context_phase(ll)
            if ph:
                return ph
    return None


def role_of(log: Log, i: int) -> str | None:
    """``critic`` / ``ref`` when the frames above line ``i`` name that worker (changes the hint)."""
    for j in range(i, max(-1, i - 150), -1):
        ll = log.low_line(j)
        if j != i and STEP_RX.search(ll):
            break
        if is_frame(ll) or j == i:
            if "update_critic" in ll or "dp_critic" in ll or "compute_values" in ll:
                return "critic"
            if "compute_ref_log_prob" in ll or "ref_log_prob" in ll:
                return "ref"
    return None


# the two ends of a checkpoint-engine weight sync (one-step-off): verl/checkpoint_engine/base.py
# CheckpointEngineWorker.update_weights -> receive_weights (rollout devices); verl/workers/engine_workers.py:755-766
# update_weights -> get_per_tensor_param + checkpoint_engine.send_weights (trainer devices)
_ROLLOUT_SYNC_RX = re.compile(r"receive_weights|checkpointengineworker|server_adapter")
_TRAINER_SYNC_RX = re.compile(r"send_weights|get_per_tensor_param|engine_workers\.py")


def side_of(log: Log, i: int) -> str | None:
    """``trainer`` | ``rollout`` for a device-OOM line: the innermost frame above line ``i`` (up to 150 lines, not
    past a ``step:`` line) that names one side's code, else the line's Ray actor name; None when nothing does.
    Picks a one-step-off weight sync's ladder (dapo_ops/core/memladder.py phase_rungs)."""
    if _ROLLOUT_PREFIX_RX.match(log.names.get(i, "")) or _ROLLOUT_ALLOC_RX.search(log.low_line(i)):
        return "rollout"
    for j in range(i - 1, max(-1, i - 150), -1):
        ll = log.low_line(j)
        if STEP_RX.search(ll):
            break
        if not is_frame(ll):
            continue
        if _ROLLOUT_SYNC_RX.search(ll) or _ROLLOUT_FRAME_RX.search(ll):
            return "rollout"
        if _TRAINER_SYNC_RX.search(ll) or _TRAIN_FRAME_RX.search(ll):
            return "trainer"
    return None


#: the line that ends a traceback: the exception (``RuntimeError: ...``, ``torch.OutOfMemoryError: ...``)
_EXC_LINE_RX = re.compile(r"[a-z_](?:error|exception): ")


def _traceback_after(log: Log, i: int) -> range:
    """The lines of the traceback that starts within 3 lines after the error line ``i`` (empty: none). vLLM's
    ``logger.exception`` prints the message first, then ``Traceback (most recent call last):`` and the frames
    (vllm/engine/multiprocessing/engine.py run_mp_engine); the traceback ends at its exception line, a ``step:``
    line or 150 lines on."""
    n = len(log.lines)
    start = next((j for j in range(i + 1, min(n, i + 4)) if TRACEBACK_START in log.low_line(j)), None)
    if start is None:
        return range(0)
    for j in range(start + 1, min(n, start + 150)):
        ll = log.low_line(j)
        if STEP_RX.search(ll) or (not is_frame(ll) and _EXC_LINE_RX.search(ll)):
            return range(start + 1, j)
    return range(start + 1, min(n, start + 150))


def _frame_side(ll: str) -> str | None:
    """``rollout`` | ``training`` named by the lower-cased line ``ll`` when it is a frame, else None."""
    if not is_frame(ll):
        return None
    if _ROLLOUT_FRAME_RX.search(ll):
        return "rollout"
    if _TRAIN_FRAME_RX.search(ll):
        return "training"
    return None


def _side_after(log: Log, i: int) -> str | None:
    """``rollout`` | ``training`` named by the innermost frame (the last that names one) of the traceback printed
    after line ``i``."""
    side = None
    for j in _traceback_after(log, i):
        side = _frame_side(log.low_line(j)) or side
    return side


def oom_context(log: Log, i: int) -> str:
    """``"rollout"`` or ``"training"`` for a device-OOM line, from its innermost frames (those above it, or those
    of a traceback printed right after it: :func:`_traceback_after`)."""
    if _ROLLOUT_PREFIX_RX.match(log.names.get(i, "")) or _ROLLOUT_ALLOC_RX.search(log.low_line(i)):
        return "rollout"
    after = _side_after(log, i)
    if after:
        return after
    for j in range(i + 1, min(len(log.lines), i + 10)):
        ll = log.low_line(j)
        if "enginecore failed to start" in ll or "engine core initialization failed" in ll:
            return "rollout"
        # vLLM's worker_base.execute_method logs the error first, then "Error executing method '<m>'" and the
        # traceback (vllm/worker/worker_base.py): the frames of this error come after it
        if j <= i + 3 and "error executing method '" in ll:
            return "rollout"
    for j in range(i - 1, max(-1, i - 80), -1):
        ll = log.low_line(j)
        if STEP_RX.search(ll):
            break
        side = _frame_side(ll)
        if side:
            return side
        if is_frame(ll) and TRACEBACK_START in ll:
            break
    return "training"


def ray_call_line(log: Log, i: int) -> list[int]:
    """The nearest ``ray::WorkerDict.<method>()`` line above ``i``, else the first worker-method one of the
    driver's re-raised traceback after it (names the phase for humans)."""
    for j in range(i - 1, max(-1, i - 80), -1):
        if "ray::" in log.low_line(j) and "()" in log.lines[j]:
            return [j]
    for j in range(i + 1, min(len(log.lines), i + 200)):
        ll = log.low_line(j)
        if STEP_RX.search(ll):
            break
        if "ray::workerdict." in ll and "()" in ll:
            return [j]
    return []


def ray_oom_phase(log: Log, i: int) -> str | None:
    """The phase named by the ``ray::`` task of the killed worker in Ray's memory-users table after line ``i``."""
    for j in range(i, min(len(log.lines), i + 20)):
        ll = log.low_line(j)
        if "ray::" in ll and MEM_TABLE_ROW_RX.match(log.lines[j].lstrip()):
            ph = frame_phase(ll)
            if ph:
                return ph
    return None
