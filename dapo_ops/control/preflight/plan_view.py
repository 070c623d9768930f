"""What preflight reads from a launch plan: :class:`PlanView` over ``launch.plan.make_plan``'s ``spec`` and verl
``argv`` (docs/design.md "Run spec"), the extra modules the plan's verl imports, the memory-fit mode and the
multi-host Ray facts. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from dapo_ops.core import defaults


@dataclass
class PlanView:
    """What preflight reads from a plan (``launch.plan.make_plan`` result, a spec dict, or None).

    ``spec``: the run spec (docs/design.md "Run spec") as a :class:`dapo_ops.core.defaults.RunSpec`, completed once
    from the one defaults table when read (a spec dict given here is read so; a RunSpec is kept as it is);
    ``argv``: the verl argv (``[python, -m, module, ...]``).
    """

    spec: defaults.RunSpec
    argv: list

    def __post_init__(self) -> None:
        self.spec = defaults.RunSpec.read(self.spec)

    @property
    def settings(self) -> Mapping[str, Any]:
        return self.spec.settings

    def s(self, key: str, default=None):
        v = self.settings.get(key)
        return default if v is None else v

    @property
    def entry_module(self) -> str | None:
        if "-m" in self.argv:
            i = self.argv.index("-m")
            if i + 1 < len(self.argv):
                return self.argv[i + 1]
        return None

    @property
    def devices_needed(self) -> int | None:
        """Devices this host must offer: trainer + rollout pools on one node for one-step-off, else
        ``n_gpus_per_node`` (verl/trainer/ppo/v1/trainer_separate_async.py: the pools add up)."""
        nnodes = int(self.settings["nnodes"])
        if self.spec.mode == "one-step-off":
            t, r = self.s("trainer_gpus"), self.s("rollout_gpus")
            if t is not None and r is not None and self.s("rollout_nnodes"):
                return max(int(t), int(r))  # multi-host (cluster.Topology): each host carries one pool
            if t is not None and r is not None and nnodes <= 1:
                return int(t) + int(r)
        n = self.s("n_gpus_per_node")
        return int(n) if n is not None else None

    @property
    def feature_names(self) -> frozenset:
        """Names of the plan's enabled features (spec ``features``: ``[{"name", "source"}]``)."""
        return frozenset(str(f.get("name") if isinstance(f, dict) else f) for f in self.spec.features)

    @property
    def logger(self) -> list:
        return list(self.spec.logger)

    @property
    def env(self) -> dict:
        return dict(self.spec.env)

    @property
    def data_files(self) -> list[str]:
        out = []
        for k in ("train_file", "val_file"):
            v = self.s(k)
            if isinstance(v, (list, tuple)):
                out += [str(x) for x in v]
            elif v:
                out.append(str(v))
        return list(dict.fromkeys(out))


def plan_view(plan: Any) -> PlanView | None:
    """Accept a plan object (attributes ``spec`` and ``argv``), a dict ``{"spec", "argv"}``, a bare spec dict, or
    None."""
    if plan is None:
        return None
    if isinstance(plan, PlanView):
        return plan
    if isinstance(plan, dict):
        if "spec" in plan:
            return PlanView(defaults.RunSpec.read(plan["spec"]), list(plan.get("argv") or []))
        return PlanView(defaults.RunSpec.read(plan), [])
    spec = getattr(plan, "spec", None)
    argv = getattr(plan, "argv", None) or []
    if spec is None:
        raise TypeError(f"preflight cannot read a plan of type {type(plan).__name__}: it needs .spec and .argv")
    read = getattr(plan, "run_spec", None)  # a launch Plan's spec, read once for the launch and preflight alike
    return PlanView(read if isinstance(read, defaults.RunSpec) else defaults.RunSpec.read(spec), list(argv))


def with_env(pv: PlanView | None, extra_env: dict | None) -> PlanView | None:
    """``pv`` with ``extra_env`` (non-secret env the run will get besides the spec's, e.g. SwanLab's public env)
    over its spec's ``env``: the environment the probe runs with. ``pv`` itself when there is nothing to add."""
    if pv is None or not extra_env:
        return pv
    return PlanView(pv.spec.with_env({**pv.env, **extra_env}), pv.argv)


def needed_modules(pv: PlanView) -> list[tuple[str, str]]:
    """``(module, why)`` the plan's verl needs besides verl itself: the V1 trainer (0.9 profile) imports
    ``transfer_queue`` (``verl/trainer/main_ppo.py:137``, ``verl/trainer/ppo/v1/trainer_base.py:30``; the wheel lists
    it only under the ``verl-core`` extra); Megatron's engine builds the model through Megatron-Bridge
    (``verl/models/mcore/bridge.py:17`` ``from megatron.bridge import AutoBridge``, used at
    ``verl/workers/engine/megatron/transformer_impl.py:340-348``) unless the setting ``vanilla_mbridge``
    (``actor_rollout_ref.actor.megatron.vanilla_mbridge``, verl's default False) picks mbridge instead
    (``transformer_impl.py:326-329`` -> ``verl/models/mcore/mbridge.py:21`` ``from mbridge import AutoBridge``; no
    ``megatron.bridge`` import on that path, ``verl/utils/megatron_utils.py:372-375``); on GPU
    that import needs Transformer Engine (``megatron/bridge/peft/lora_layers.py:20`` imports
    ``transformer_engine.pytorch`` unconditionally, Megatron-Bridge 0.6.2) and so does every layer it builds
    (``megatron/bridge/models/gpt_provider.py:120-125``: the TE layer spec, no local fallback): ``transformer_engine``.
    By mode x framework x accelerator: FSDP on GPU with ``flash_attn`` loads the model with
    ``attn_implementation=flash_attention_2`` (``verl/workers/config/model.py:185``) and remove-padding patches
    transformers' flash-attention forward (``verl/models/transformers/monkey_patch.py:544-552``): ``flash_attn``;
    one-step-off on GPU syncs weights through the ``nccl`` checkpoint engine, whose module imports ``cupy``
    (``verl/checkpoint_engine/nccl_checkpoint_engine.py:22-23``; without it "Checkpoint engine nccl not
    registered"); Megatron on NPU needs MindSpeed, which verl otherwise skips silently
    (``verl/workers/engine/mindspeed/transformer_impl.py:18-21,41``);
    SwanLab's local mode needs ``swanboard`` (swanlab 0.10 ``swanlab/deprecated/local.py:350``, started by
    ``verl/utils/tracking.py:134``: without it every run logs ``Please install swanboard to use 'local' mode`` and
    ``swanlab watch`` has no dashboard to show)."""
    out: list[tuple[str, str]] = []
    fw, accel, mode = (
        pv.spec.framework,
        pv.spec.accelerator or defaults.HOST["accelerator"],
        pv.spec.mode,
    )
    if pv.spec.profile == "0.9":
        out.append(("transfer_queue", "verl 0.9's V1 trainer imports it (verl/trainer/main_ppo.py:137)"))
        if fw == "megatron" and pv.s("vanilla_mbridge"):
            out.append(
                (
                    "mbridge",
                    "with actor_rollout_ref.actor.megatron.vanilla_mbridge=True (VANILLA_MBRIDGE) verl 0.9's Megatron "
                    "engine builds the model with mbridge (verl/workers/engine/megatron/transformer_impl.py:326-329, "
                    "verl/models/mcore/mbridge.py:21)",
                )
            )
        elif fw == "megatron":
            out.append(
                (
                    "megatron.bridge",
                    "verl 0.9's Megatron engine builds the model with Megatron-Bridge (verl/models/mcore/bridge.py:17; "
                    "unless actor_rollout_ref.actor.megatron.vanilla_mbridge, "
                    "verl/workers/engine/megatron/transformer_impl.py:326-341)",
                )
            )
    if accel == "gpu" and fw == "megatron" and pv.spec.profile == "0.9":
        out.append(
            (
                "transformer_engine",
                "verl 0.9's Megatron engine imports Megatron-Bridge, which imports transformer_engine.pytorch "
                "(megatron/bridge/peft/lora_layers.py:20) and builds only Transformer Engine layers "
                "(megatron/bridge/models/gpt_provider.py:120-125)",
            )
        )
    if accel == "gpu" and fw == "fsdp" and "flash_attn" in pv.feature_names:
        out.append(
            (
                "flash_attn",
                "the flash_attn feature loads the model with attn_implementation=flash_attention_2 "
                "(verl/workers/config/model.py:185)",
            )
        )
    if accel == "gpu" and mode == "one-step-off":
        out.append(
            (
                "cupy",
                "one-step-off syncs weights with the nccl checkpoint engine, which imports cupy "
                "(verl/checkpoint_engine/nccl_checkpoint_engine.py:22)",
            )
        )
    if accel == "npu" and fw == "megatron":
        out.append(
            (
                "mindspeed",
                "verl's Megatron engine on NPU needs MindSpeed's patches and skips them silently "
                "without it (verl/workers/engine/mindspeed/transformer_impl.py:18-21)",
            )
        )
    if "swanlab" in pv.logger and str(pv.env.get("SWANLAB_MODE") or "cloud") == "local":
        out.append(("swanboard", "SwanLab local mode needs it (swanlab/deprecated/local.py:350)"))
    return out


def memory_fit_mode(pv: PlanView) -> str:
    """The plan's ``memory_fit`` setting (``start`` | ``warn``; dapo_ops/control/settings.py)."""
    return str(pv.settings["memory_fit"])


def ray_for(host, pv: PlanView | None, ray: dict | None) -> dict | None:
    r = ray if ray is not None else (pv.spec.ray if pv is not None else None)
    if not r:
        return None
    r = dict(r)
    r.setdefault("port", 6379)
    if "is_head" not in r:
        r["is_head"] = r.get("head") in (getattr(host, "address", None), getattr(host, "name", None))
    return r
