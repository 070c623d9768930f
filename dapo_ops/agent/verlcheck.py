"""verl's own start-up checks on the composed config, before anything is placed on a device (STDLIB at import).

Run by :mod:`dapo_ops.agent.compose` inside the container, on the config it just composed (request field
``"startup": true``), so preflight refuses what verl 0.9.1 would refuse minutes into a launch. Each problem is one
line naming the key and the fix. The checks, in verl's start-up order:

- ``dataclass``: ``verl/trainer/main_ppo.py:177`` ``validate_config`` (``verl/utils/config.py:88-``: batch
  arithmetic, ``omega_conf_to_dataclass`` of the actor and critic configs with their ``__post_init__``
  validations), then the rollout and checkpoint-engine dataclasses (``trainer_separate_async.py:165``,
  ``verl/workers/rollout/replica.py:104``). Needs verl importable (torch): otherwise ``skipped: verl not
  importable`` with the reason (the sandbox's stand-in image).
- ``checkpoint-engine``: the registry lookup verl does in the actor's ``init_model``
  (``verl/workers/engine_workers.py:681-688``) and the trainer (``trainer_separate_async.py:165-170``;
  ``verl/checkpoint_engine/base.py:84-99`` raises for an unknown name), and ``separate_async``'s assert that the
  backend is not ``naive`` (``trainer_separate_async.py:67``). With verl importable the real registry answers
  (including the engine modules that failed to import, e.g. cupy); else the ``@CheckpointEngineRegistry.register``
  names are read from verl's sources (``<root>/verl/checkpoint_engine/*.py``, ``ast``, no import).
- ``pools``: the trainer / rollout pool arithmetic of the trainer mode (``trainer_separate_async.py:64-66``;
  rollout replica = TP x DP x PP devices, ``verl/workers/rollout/replica.py:107-116``; Megatron TP x PP x CP
  divides the trainer's devices, ``verl/utils/config.py:104-114``).
- ``attention``: the attention implementation against the installed packages (``flash_attention_2`` is the
  default, ``verl/workers/config/model.py:185``; on CUDA it needs ``flash_attn``). Megatron on CUDA: the
  ``attention_backend`` ``flash`` (verl's default, ``engine/megatron.yaml:90``, and the provider's,
  ``verl/workers/engine/megatron/transformer_impl.py:367``) leaves Transformer Engine only its flash backend
  (``megatron/core/models/common/language_module/language_module.py:127-130``), which needs a flash-attn 2/3/4
  distribution (``transformer_engine/pytorch/attention/dot_product_attention/backends.py:107,151,186``); without
  one TE's first attention forward raises ``No dot product attention backend is available``
  (``dot_product_attention.py:2900``, TE 2.20.2), minutes into the launch.
- ``megatron``: what the installed Megatron-Bridge imports on verl's Megatron path but does not declare, each found
  on the H200 (tests/fixtures/real-verl/tool-runs/k-megatron-*): ``megatron.energon`` when verl builds the model
  (``verl/utils/megatron_utils.py:456`` imports ``megatron.bridge.training.config``, whose ``:53`` imports
  ``megatron.bridge.data`` -> ``data/builders/energon.py:25`` -> ``data/energon/base_energon_datamodule.py:19``;
  Megatron-Bridge 0.6.2); on CUDA, apex's
  ``fused_weight_gradient_mlp_cuda`` while ``gradient_accumulation_fusion`` is on (the provider's default whenever
  Transformer Engine imports, ``megatron/bridge/models/gpt_provider.py:205``, ``utils/fusions.py:34-60``; Megatron's
  non-TE output layer then raises at the first forward, ``megatron/core/tensor_parallel/layers.py``); ``modelopt`` when
  checkpoints save the model in HF format (``save_contents`` with ``model`` and ``use_dist_checkpointing`` False,
  verl's defaults: ``verl/utils/checkpoint/megatron_checkpoint_manager.py:245-249,1282``), because
  ``save_hf_weights`` imports it (``megatron/bridge/models/conversion/auto_bridge.py:1127``): the run would train
  ``save_freq`` steps and die at its first save. The installed Megatron-Bridge's own sources say whether it imports
  them (another version may not); without Megatron-Bridge the module check says so instead.

:func:`startup_report` is the entry point: ``{"errors": [line, ...], "skipped": [line, ...]}``.
"""

from __future__ import annotations

import ast
import importlib.util
import os
from typing import Any, Callable

ENGINE_KEY = "actor_rollout_ref.rollout.checkpoint_engine.backend"
ATTN_KEY = "actor_rollout_ref.model.override_config.attn_implementation"
MEG_ATTN_KEY = "actor_rollout_ref.actor.megatron.override_transformer_config.attention_backend"
#: the remove-padding key verl 0.9.1's engine workers read for both FSDP and Megatron (V1 copies it into the engine)
RMPAD_KEY = "actor_rollout_ref.model.use_remove_padding"


def _get(cfg: dict[str, Any], dotted: str, default: Any = None) -> Any:
    cur: Any = cfg
    for part in dotted.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return default
        cur = cur[part]
    return cur


def scanned_backends(verl_root: str) -> set[str] | None:
    """The checkpoint-engine names verl's sources register (``@CheckpointEngineRegistry.register("<name>")`` in
    ``<verl_root>/verl/checkpoint_engine/*.py``), or None when those sources are not there."""
    d = os.path.join(verl_root, "verl", "checkpoint_engine")
    try:
        files = sorted(f for f in os.listdir(d) if f.endswith(".py"))
    except OSError:
        return None
    names: set[str] = set()
    for f in files:
        try:
            with open(os.path.join(d, f), encoding="utf-8") as fh:
                tree = ast.parse(fh.read())
        except (OSError, SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "register"
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "CheckpointEngineRegistry"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                names.add(node.args[0].value)
    return names or None


def _registry_error(backend: str) -> tuple[str | None, bool]:
    """``(error line or None, checked)`` from verl's own registry; ``checked`` False when verl is not importable."""
    try:
        from verl.checkpoint_engine import CheckpointEngineRegistry  # noqa: PLC0415 - verl only in the container
    except Exception:  # noqa: BLE001 - any import failure means: not importable here
        return None, False
    try:
        CheckpointEngineRegistry.get(backend)
    except ValueError as e:
        return str(e).splitlines()[0], True
    return None, True


def checkpoint_engine_errors(
    cfg: dict[str, Any], verl_root: str, use_import: bool = True
) -> tuple[list[str], list[str]]:
    """``(errors, skipped)`` of the checkpoint-engine lookup (module docstring)."""
    backend = _get(cfg, ENGINE_KEY)
    mode = _get(cfg, "trainer.v1.trainer_mode")
    if backend in (None, ""):
        return [], []
    if mode == "separate_async" and backend == "naive":
        return [
            f"{ENGINE_KEY}=naive: separate_async needs a transferring engine (trainer_separate_async.py:67); "
            f"set it to nccl"
        ], []
    msg, checked = _registry_error(str(backend)) if use_import else (None, False)
    if checked:
        return (
            [f"{ENGINE_KEY}={backend}: {msg}; set a registered backend (nccl on GPU and on Ascend NPU)"] if msg else []
        ), []
    names = scanned_backends(verl_root)
    if names is None:
        return [], [
            f"checkpoint-engine: skipped: verl not importable and no verl/checkpoint_engine sources under {verl_root}"
        ]
    if backend not in names:
        hint = (
            " (verl registers its Ascend HCCL engine under the name 'nccl', "
            "verl/checkpoint_engine/hccl_checkpoint_engine.py:103)"
            if backend == "hccl"
            else ""
        )
        return [
            f"{ENGINE_KEY}={backend} is not a registered checkpoint engine (registered: "
            f"{', '.join(sorted(names))}){hint}; set {ENGINE_KEY}=nccl"
        ], []
    return [], []


def _int(v: Any, default: int = 1) -> int:
    try:
        n: int = int(v)
        return n
    except (TypeError, ValueError):
        return default


def pool_errors(cfg: dict[str, Any]) -> list[str]:
    """The trainer / rollout pool arithmetic (module docstring); one line per problem."""
    out: list[str] = []
    mode = _get(cfg, "trainer.v1.trainer_mode")
    trainer = _int(_get(cfg, "trainer.n_gpus_per_node"), 0) * _int(_get(cfg, "trainer.nnodes"), 0)
    ro = "actor_rollout_ref.rollout"
    replica = (
        _int(_get(cfg, f"{ro}.tensor_model_parallel_size"))
        * _int(_get(cfg, f"{ro}.data_parallel_size"))
        * _int(_get(cfg, f"{ro}.pipeline_model_parallel_size"))
    )
    if _get(cfg, "actor_rollout_ref.actor.strategy") == "megatron":
        meg = "actor_rollout_ref.actor.megatron"
        tp, pp, cp = (
            _int(_get(cfg, f"{meg}.{k}"))
            for k in ("tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size")
        )
        if trainer and trainer % (tp * pp * cp):
            out.append(
                f"{meg}.tensor_model_parallel_size={tp} x pipeline_model_parallel_size={pp} x "
                f"context_parallel_size={cp} = {tp * pp * cp} does not divide the trainer's {trainer} devices "
                f"(verl/utils/config.py:109); choose TP x PP x CP that divides {trainer}"
            )
    if mode == "separate_async":
        nn, ng = _int(_get(cfg, f"{ro}.nnodes"), 0), _int(_get(cfg, f"{ro}.n_gpus_per_node"), 0)
        if nn <= 0 or ng <= 0:
            out.append(
                f"{ro}.nnodes={nn} / {ro}.n_gpus_per_node={ng}: separate_async needs a rollout pool "
                f"(trainer_separate_async.py:64-66); set both >= 1"
            )
        elif (nn * ng) % replica:
            out.append(
                f"{ro}.tensor_model_parallel_size x data_parallel_size x pipeline_model_parallel_size = "
                f"{replica} does not divide the rollout pool's {nn * ng} devices "
                f"(verl/workers/rollout/replica.py:107-116); set a rollout TP that divides {nn * ng}"
            )
    elif trainer and trainer % replica:
        out.append(
            f"{ro}.tensor_model_parallel_size x data_parallel_size x pipeline_model_parallel_size = {replica} "
            f"does not divide the {trainer} devices the colocated rollout shares "
            f"(verl/workers/rollout/replica.py:107-116); set a rollout TP that divides {trainer}"
        )
    return out


def attention_errors(cfg: dict[str, Any], find_spec: Callable[[str], object] = importlib.util.find_spec) -> list[str]:
    """On CUDA: FSDP's ``flash_attention_2`` (verl's default, ``verl/workers/config/model.py:185``) without
    ``flash_attn``; Megatron's ``attention_backend=flash`` without any flash-attn 2 / 3 / 4 (module docstring:
    ``flash_attn`` is flash-attn 2's and flash-attn-4's module, ``flash_attn_interface`` flash-attn-3's)."""
    if str(_get(cfg, "trainer.device", "cuda")) != "cuda":
        return []
    strategy = _get(cfg, "actor_rollout_ref.actor.strategy")
    if strategy == "megatron":
        backend = str(_get(cfg, MEG_ATTN_KEY) or "flash")
        if backend == "flash" and find_spec("flash_attn") is None and find_spec("flash_attn_interface") is None:
            return [
                f"{MEG_ATTN_KEY}=flash but no flash-attn (2, 3 or 4) is installed in the container: Megatron then "
                f"allows Transformer Engine only its flash backend and the first forward fails with 'No dot product "
                f"attention backend is available': pip install flash-attn --no-build-isolation, or --features "
                f"-flash_attn (Transformer Engine's cuDNN fused attention, {MEG_ATTN_KEY}=fused; packed sequences "
                f"and the other three features kept)"
            ]
        if backend == "unfused" and _get(cfg, RMPAD_KEY) is False:
            return [
                f"{MEG_ATTN_KEY}=unfused with {RMPAD_KEY}=False: verl 0.9.1 hands Transformer Engine's unfused "
                f"attention a [batch, seq] padding mask it cannot broadcast and the first forward fails ('The size "
                f"of tensor a ... must match the size of tensor b', TE get_full_mask; H200, 2026-12-02): use "
                f"{MEG_ATTN_KEY}=fused (what --features -flash_attn sets), or keep remove_padding on"
            ]
        return []
    if strategy not in ("fsdp", "fsdp2"):
        return []
    attn = _get(cfg, ATTN_KEY) or "flash_attention_2"
    if attn == "flash_attention_2" and find_spec("flash_attn") is None:
        return [
            f"{ATTN_KEY}=flash_attention_2 but flash_attn is not installed in the container: "
            f"pip install flash-attn --no-build-isolation, or --features -flash_attn (sdpa; on FSDP it keeps "
            f"remove_padding, dynamic_batch and gradient_checkpointing on)"
        ]
    return []


MEG_TC_KEY = "actor_rollout_ref.actor.megatron.override_transformer_config"
GRAD_FUSION_KEY = f"{MEG_TC_KEY}.gradient_accumulation_fusion"


def _bridge_source_has(find_spec: Callable[[str], object], rel: str, needle: str) -> bool:
    """True when the installed Megatron-Bridge's file ``rel`` (relative to ``megatron/bridge/``) contains ``needle``.
    False without Megatron-Bridge or that file (the module check reports a missing Megatron-Bridge)."""
    try:
        spec = find_spec("megatron.bridge")
    except (ImportError, ValueError):
        return False
    for d in getattr(spec, "submodule_search_locations", None) or []:
        try:
            with open(os.path.join(d, rel), encoding="utf-8") as fh:
                if needle in fh.read():
                    return True
        except OSError:
            continue
    return False


def _missing(find_spec: Callable[[str], object], name: str) -> bool:
    try:
        return find_spec(name) is None
    except (ImportError, ValueError):  # a parent package that fails to import
        return True


def megatron_errors(cfg: dict[str, Any], find_spec: Callable[[str], object] = importlib.util.find_spec) -> list[str]:
    """The ``megatron`` check of the module docstring: modules verl's Megatron path reaches through Megatron-Bridge
    that the container lacks, each one line with the fix. ``cfg``: the composed config (plain containers)."""
    if _get(cfg, "actor_rollout_ref.actor.strategy") != "megatron":
        return []
    out: list[str] = []
    if _bridge_source_has(find_spec, "data/energon/base_energon_datamodule.py", "from megatron.energon") and _missing(
        find_spec, "megatron.energon"
    ):
        out.append(
            "megatron.energon is not installed in the container, and Megatron-Bridge imports it when verl builds the "
            "model (verl/utils/megatron_utils.py:456 -> megatron/bridge/training/config.py:53 -> "
            "data/builders/energon.py:25 -> data/energon/base_energon_datamodule.py:19): pip install megatron-energon "
            "in the container"
        )
    grad_fusion = _get(cfg, GRAD_FUSION_KEY)
    if (
        str(_get(cfg, "trainer.device", "cuda")) == "cuda"
        and grad_fusion is not False
        and not _missing(find_spec, "transformer_engine")
        and _missing(find_spec, "fused_weight_gradient_mlp_cuda")
    ):
        out.append(
            f"{GRAD_FUSION_KEY} is {'on' if grad_fusion else 'on by default'} (Megatron-Bridge turns it on whenever "
            f"Transformer Engine imports, megatron/bridge/models/gpt_provider.py:205) but apex's "
            f"fused_weight_gradient_mlp_cuda is not installed: Megatron's output layer fails at the first forward. "
            f"--override +{GRAD_FUSION_KEY}=False, or install apex with --cpp_ext --cuda_ext in the container"
        )
    save_freq = _get(cfg, "trainer.save_freq", -1)
    contents = _get(cfg, "actor_rollout_ref.actor.checkpoint.save_contents") or []
    dist = bool(_get(cfg, "actor_rollout_ref.actor.megatron.use_dist_checkpointing", False))
    hf_save = "hf_model" in contents or ("model" in contents and not dist)
    if (
        isinstance(save_freq, int)
        and save_freq > 0
        and hf_save
        and _bridge_source_has(find_spec, "models/conversion/auto_bridge.py", "from modelopt")
        and _missing(find_spec, "modelopt")
    ):
        out.append(
            f"modelopt is not installed in the container, and every checkpoint of this Megatron run saves the model "
            f"in HF format through Megatron-Bridge, whose save_hf_weights imports it "
            f"(verl/utils/checkpoint/megatron_checkpoint_manager.py:245-249,1282; "
            f"megatron/bridge/models/conversion/auto_bridge.py:1127): the run would die at its first save, after step "
            f"{save_freq}. pip install nvidia-modelopt in the container, or --save-freq -1 (no checkpoints, no resume)"
        )
    return out


def dataclass_errors(cfg_obj: Any) -> tuple[list[str], list[str]]:
    """``(errors, skipped)`` of verl's ``validate_config`` + the rollout / checkpoint-engine dataclass conversion on
    the composed OmegaConf config ``cfg_obj`` (module docstring)."""
    try:
        from verl.trainer.ppo.utils import need_critic, need_reference_policy  # noqa: PLC0415
        from verl.utils.config import omega_conf_to_dataclass, validate_config  # noqa: PLC0415
    except Exception as e:  # noqa: BLE001 - torch / verl missing: say so, never pretend it passed
        first = (str(e).splitlines() or [type(e).__name__])[0]
        return [], [f"dataclass: skipped: verl not importable ({first})"]
    out: list[str] = []
    steps: tuple[tuple[str, Callable[[], object]], ...] = (
        (
            "validate_config (verl/trainer/main_ppo.py:177)",
            lambda: validate_config(
                config=cfg_obj, use_reference_policy=need_reference_policy(cfg_obj), use_critic=need_critic(cfg_obj)
            ),
        ),
        ("actor_rollout_ref.rollout", lambda: omega_conf_to_dataclass(cfg_obj.actor_rollout_ref.rollout)),
        (
            "actor_rollout_ref.rollout.checkpoint_engine",
            lambda: omega_conf_to_dataclass(cfg_obj.actor_rollout_ref.rollout.checkpoint_engine),
        ),
    )
    for where, fn in steps:
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - verl raises AssertionError / ValueError / TypeError here
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            out.append(f"{where}: {first}; fix that key (verl refuses it at start-up)")
    return out, []


def startup_report(
    cfg: dict[str, Any],
    verl_root: str,
    cfg_obj: Any = None,
    find_spec: Callable[[str], object] = importlib.util.find_spec,
    use_import: bool = True,
) -> dict[str, Any]:
    """Every check of the module docstring on the composed config.

    ``cfg``: the resolved config as plain containers (``OmegaConf.to_container(cfg, resolve=True)``); ``cfg_obj``:
    the OmegaConf config itself (for verl's own dataclass conversion; None skips it); ``verl_root``: the directory
    holding ``verl/`` (the compose request's ``config_root``); ``use_import``: False never imports verl (tests).
    Returns ``{"errors": [line, ...], "skipped": [line, ...]}``; never raises.
    """
    errors: list[str] = []
    skipped: list[str] = []
    if cfg_obj is not None and use_import:
        e, s = dataclass_errors(cfg_obj)
        errors += e
        skipped += s
    elif cfg_obj is None or not use_import:
        skipped.append("dataclass: skipped: verl not imported")
    e, s = checkpoint_engine_errors(cfg, verl_root, use_import=use_import)
    errors += e
    skipped += s
    errors += pool_errors(cfg)
    errors += attention_errors(cfg, find_spec)
    errors += megatron_errors(cfg, find_spec)
    return {"errors": errors, "skipped": skipped}
