"""The one table of run-setting defaults (stdlib only; the agent bundle and the operator side both read it).

Like invoke's ``Config.global_defaults()``: every layer starts from this table and only says what differs.

- :data:`RUN`: the default of every run setting, by the setting's name (``steps``, ``framework``, ``model``, ...).
  ``dapo_ops/control/settings.py`` keeps each setting's flag, variable, config key, type, range and help and the
  precedence (flag > env > config file > default); its defaults are these (a test keeps the two key sets equal).
- :data:`SPEC` and :data:`SPEC_SETTINGS`: the same defaults as the run spec holds them (docs/design.md "Run spec"):
  the spec's top-level keys that come from settings, and its ``settings`` table, where a few settings have their
  spec names and forms (``model`` -> ``model_path``, ``hang_timeout`` -> ``hang_timeout_s``, 0 -> None where
  None is verl's own "unset", :data:`SPEC_SETTINGS`).
- :data:`HOST`: the default of every ``hosts.toml`` host field (the runbook's Ascend host: 8 NPUs, container ``verl``,
  verl checked out at ``/verl``). The inventory's model, ``dapo_ops.control.inventory.model.Host``, takes every
  field default from it (a test keeps them equal); a reader that has no ``Host`` (the agent reading a run spec, the
  planner without a host) reads this table, never a literal of its own (tests/test_defaults.py walks the source).
- :class:`RunSpec`: a run spec completed ONCE when read (:meth:`RunSpec.read`), frozen, its keys typed attributes;
  every reader that needs the complete spec takes one (a plain dict is read into one where it enters).
- :func:`complete_spec` / :func:`complete_settings`: the one place a spec (or its ``settings``) that lacks keys
  gets them: a ``spec.json`` / ``run.json`` written by an older dapo-ops, a spec a test writes by hand. A key that is
  there keeps its value, ``None`` included (``max_actor_ckpt_to_keep: null`` = keep every save).

``dapo_ops.control.launch.plan.make_plan`` writes every key of :data:`SPEC` and :data:`SPEC_SETTINGS`, so a spec it
made is already complete; no reader falls back to a literal of its own (tests/test_defaults.py walks the source).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Iterator, Mapping, Optional, Tuple

__all__ = [
    "DAPO_RECIPE",
    "DAPO_RECIPE_SOURCE",
    "HOST",
    "NONE_IN_SPEC",
    "RUN",
    "RunSpec",
    "SPEC",
    "SPEC_SETTINGS",
    "complete_settings",
    "complete_spec",
    "run_settings",
    "runs_path",
]

#: The default of every run setting (names: ``dapo_ops.control.settings.PARAMS``; the runbook's defaults:
#: FRAMEWORK=megatron, MODEL_PATH=Qwen3-8B, TRAIN_STEPS=100, ...). An empty string means "not set: decided
#: elsewhere" (the inventory's container, the host's verl version, the run id as experiment, no proxy).
RUN: Mapping[str, Any] = MappingProxyType(
    {
        "steps": 100,
        "framework": "megatron",
        "model": "Qwen3-8B",
        "train_file": "dapo-math-17k.parquet",
        "val_file": "aime-2024.parquet",
        "trainer_gpus": 4,
        "rollout_gpus": 4,
        "max_response_length": 8192,
        "max_prompt_length": 2048,
        "features": "",
        "offload": False,
        "max_oom_retries": 2,
        "container": "",
        "save_freq": 10,
        # validate every 10 steps: the runbook names no cadence; verl's DAPO recipe's (trainer.test_freq=10,
        # verl/experimental/one_step_off_policy/shell/dapo_7b_math_megatron_4_12.sh). verl's own default is -1
        # (verl/trainer/config/ppo_trainer.yaml:205): no validation after the one before step 1.
        "test_freq": 10,
        "rollout_tp": 2,
        "trainer_tp": 0,  # 0: by model size and device memory (dapo_ops/core/memfit.py default_parallel)
        "trainer_pp": 0,
        "rollout_eager": False,  # verl's default: graph mode (actor_rollout_ref.rollout.enforce_eager=False)
        "vanilla_mbridge": False,  # verl's default: Megatron-Bridge (verl/trainer/config/engine/megatron.yaml:99)
        "gpu_memory_utilization": 0.6,
        "train_batch_size": 64,
        "ppo_mini_batch_size": 16,
        "rollout_n": 8,
        "micro_batch_size": 1,
        "max_position_embeddings": 0,  # 0: the model's own context
        "trainer_mode": "async",
        "max_staleness": 2,
        "parameter_sync_step": 0,  # 0: train_batch_size / ppo_mini_batch_size (dapo_ops/core/runspec.py)
        # 3, the runbook-era choice docs/workflow.md and docs/params.md state. verl 0.9.1's own default is null
        # (verl/trainer/config/ppo_trainer.yaml:220), which keeps every save: the V1 trainer passes it on
        # (verl/trainer/ppo/v1/trainer_base.py:964-966) and verl/utils/checkpoint/checkpoint_manager.py:189 rotates
        # only for a positive int. The setting's 0 asks for that: the spec then holds null and no key is emitted.
        "max_actor_ckpt_to_keep": 3,
        "hccl_connect_timeout": 7200,  # seconds; verl's NPU scripts' values
        "hccl_exec_timeout": 60000,
        "hccl_host_socket_port_range": "60000-60050",
        "hccl_npu_socket_port_range": "61000-61050",
        "memory_fit": "start",
        # False: preflight and launch refuse --steps beyond what the train data feeds before verl's epoch limit
        # (dapo_ops/core/datafeed.py); True: warn, and the run ends early with verl (verdict data-ran-out)
        "allow_short_data": False,
        "hang_timeout": 1800,  # seconds without a new step
        "project": "dapo-ops",
        "experiment": "",
        "profile": "",
        "swanlab_mode": "",
        "swanlab_host": "",
        "http_proxy": "",
        "https_proxy": "",
    }
)

#: The default of every host field of ``hosts.toml`` (``[defaults]`` and ``[hosts.<name>]`` tables; ``name`` and
#: ``address`` have none, ``env`` is empty): the inventory's ``Host`` model takes each from here. The runbook's host
#: (/work/shared/reference/runbook-zh.txt: Ascend NPUs, the ``verl`` container, verl at ``/verl``): ``accelerator``
#: npu, 8 ``devices``; the agent and the core read a run spec's ``accelerator`` / ``python`` / ``workdir`` with these
#: as the fallback of a spec that lacks them (it used to be "gpu" in core/overrides.py and "npu" in the supervisor).
#: ``connect_timeout``: seconds. ``runs_dir`` None: ``<workdir>/dapo_runs`` (:func:`runs_path`).
HOST: Mapping[str, Any] = MappingProxyType(
    {
        "port": None,
        "user": None,
        "identity_file": None,
        "known_hosts": None,
        "connect_timeout": 10,
        "container": "verl",
        "workdir": "/verl",
        "python": "python3",
        "accelerator": "npu",
        "devices": 8,
        "runs_dir": None,
        "device_mounts": True,
        "ssh_config": None,
        "proxy_jump": None,
        "model_dir": None,
        "data_dir": None,
        "ckpt_dir": None,
        "runtime": "docker",
        "transport": "ssh",
        "supervisor": None,
    }
)


def runs_path(runs_dir: str | None = None, workdir: str | None = None) -> str:
    """The run directories' parent inside the container: ``runs_dir``, else ``<workdir>/dapo_runs`` (``workdir``
    None: :data:`HOST`'s). The inventory's ``Host.runs_path`` and the agent's probe both answer with it."""
    return runs_dir or f"{(workdir or HOST['workdir']).rstrip('/')}/dapo_runs"


#: Settings whose 0 the spec holds as None, verl's own "unset" (no key emitted: the model's own context; keep every
#: save). A None read back from a spec (``--resume``) is the setting's 0.
NONE_IN_SPEC = frozenset({"max_position_embeddings", "max_actor_ckpt_to_keep"})

#: The run spec's top-level keys that come from settings, with their defaults. ``profile``: the verl profile a spec
#: without one runs (dapo_ops/core/profiles.py; the setting's empty value resolves to it from the host's verl).
SPEC: Mapping[str, Any] = MappingProxyType(
    {
        "framework": RUN["framework"],
        "profile": "0.9",
        "max_oom_retries": RUN["max_oom_retries"],
        "hang_timeout_s": RUN["hang_timeout"],
    }
)

#: The run spec's ``settings`` with their defaults: the settings' defaults in the spec's names and forms, plus the
#: layout keys the planner derives from the hosts (``nnodes``, ``n_gpus_per_node``: no host known = the two pools'
#: devices). ``experiment`` and ``ckpt_dir`` are "" here; :func:`complete_spec` derives them from the spec (the run
#: id, ``<run_dir>/checkpoints``). ``trainer_tp`` / ``trainer_pp``: None = not resolved (FSDP; memfit counts 1).
SPEC_SETTINGS: Mapping[str, Any] = MappingProxyType(
    {
        "model_path": RUN["model"],
        "train_file": RUN["train_file"],
        "val_file": RUN["val_file"],
        "steps": RUN["steps"],
        "trainer_gpus": RUN["trainer_gpus"],
        "rollout_gpus": RUN["rollout_gpus"],
        "nnodes": 1,
        "n_gpus_per_node": RUN["trainer_gpus"] + RUN["rollout_gpus"],
        "max_prompt_length": RUN["max_prompt_length"],
        "max_response_length": RUN["max_response_length"],
        "save_freq": RUN["save_freq"],
        "rollout_tp": RUN["rollout_tp"],
        "gpu_memory_utilization": RUN["gpu_memory_utilization"],
        "train_batch_size": RUN["train_batch_size"],
        "ppo_mini_batch_size": RUN["ppo_mini_batch_size"],
        "rollout_n": RUN["rollout_n"],
        "micro_batch_size": RUN["micro_batch_size"],
        "max_position_embeddings": RUN["max_position_embeddings"] or None,  # NONE_IN_SPEC
        "trainer_mode": RUN["trainer_mode"],
        "max_staleness": RUN["max_staleness"],
        "memory_fit": RUN["memory_fit"],
        "allow_short_data": RUN["allow_short_data"],
        "parameter_sync_step": RUN["parameter_sync_step"],
        "max_actor_ckpt_to_keep": RUN["max_actor_ckpt_to_keep"] or None,  # NONE_IN_SPEC
        "project": RUN["project"],
        "experiment": RUN["experiment"],
        "ckpt_dir": "",
        "extra_overrides": [],
        "rollout_eager": RUN["rollout_eager"],
        "vanilla_mbridge": RUN["vanilla_mbridge"],
        "trainer_tp": None,
        "trainer_pp": None,
        # keys an older dapo-ops' spec lacks, completed to what that run ran: no trainer.test_freq (verl's -1),
        # gradient checkpointing = Megatron selective recompute, none of DAPO_RECIPE; the planner writes
        # RUN["test_freq"], the recompute by device memory (dapo_ops/core/profiles.py MEGATRON_RECOMPUTE) and True
        "test_freq": None,
        "megatron_recompute": "selective",
        "dapo_recipe": False,
    }
)

#: verl's DAPO recipe keys the plan emits where the runbook is silent (``spec["settings"]["dapo_recipe"]``; profile
#: 0.9), as ``(verl key, value, source)``. Each key exists in verl 0.9.1's yaml for both engines
#: (``optim/fsdp.yaml:21,24``, ``optim/megatron.yaml:13,16``, ``data/legacy_data.yaml:92`` ``truncation``,
#: ``rollout/rollout.yaml:151-170`` ``val_kwargs``). ``optim.clip_grad=1.0`` is verl's own default already
#: (``optim/fsdp.yaml:30``, ``optim/megatron.yaml:22``): not emitted. ``trainer.test_freq`` is the setting ``test_freq``.
DAPO_RECIPE_SOURCE = "verl/experimental/one_step_off_policy/shell/dapo_7b_math_megatron_4_12.sh"
DAPO_RECIPE: tuple[tuple[str, Any, str], ...] = (
    ("actor_rollout_ref.actor.optim.lr_warmup_steps", 10, DAPO_RECIPE_SOURCE + " (verl: -1, no warm-up)"),
    ("actor_rollout_ref.actor.optim.weight_decay", 0.1, DAPO_RECIPE_SOURCE + " (verl: 0.01)"),
    ("data.truncation", "left", DAPO_RECIPE_SOURCE + " (verl: error, a long prompt stops the run)"),
    ("actor_rollout_ref.rollout.val_kwargs.do_sample", True, DAPO_RECIPE_SOURCE + " (verl: greedy)"),
    ("actor_rollout_ref.rollout.val_kwargs.temperature", 1.0, DAPO_RECIPE_SOURCE + " (verl: 0)"),
    ("actor_rollout_ref.rollout.val_kwargs.top_p", 0.7, DAPO_RECIPE_SOURCE + " (val_top_p; verl: 1.0)"),
)


def run_settings(given: Mapping[str, Any]) -> dict[str, Any]:
    """Every run setting: :data:`RUN` with ``given`` (setting name -> value; a None value counts as not given).

    For a caller holding a plain dict of some settings instead of ``dapo_ops.control.settings.resolve``'s result
    (which has them all). Unknown names are kept."""
    out = dict(RUN)
    out.update({k: v for k, v in given.items() if v is not None})
    return out


def complete_settings(settings: Mapping[str, Any] | None) -> dict[str, Any]:
    """A copy of a spec's ``settings`` with every key of :data:`SPEC_SETTINGS` (missing ones: the default, copied).

    Keys that are there keep their value, None included; extra keys (the ladder's ``token_budgets``, the
    supervisor's ``framework`` / ``mode``) are kept. ``experiment`` / ``ckpt_dir`` need the spec: :func:`complete_spec`.
    """
    out = dict(settings or {})
    for k, v in SPEC_SETTINGS.items():
        if k not in out:
            out[k] = copy.deepcopy(v)
    return out


def complete_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of run spec ``spec`` with every key of :data:`SPEC` and :data:`SPEC_SETTINGS` (docs/design.md
    "Run spec"): the one place a spec read from disk, made by an older dapo-ops or written by hand, gets its
    missing keys. A missing ``settings.experiment`` is the run id and a missing ``settings.ckpt_dir`` is
    ``<run_dir>/checkpoints`` (what the planner writes; "" without a run id / run dir). Keys that are there keep
    their value (None included). A spec ``make_plan`` wrote comes back equal."""
    out = dict(spec)
    for k, v in SPEC.items():
        if k not in out:
            out[k] = copy.deepcopy(v)
    given = out.get("settings") or {}
    s = complete_settings(given)
    if "experiment" not in given:
        s["experiment"] = str(out.get("run_id") or "")
    if "ckpt_dir" not in given:
        run_dir = str(out.get("run_dir") or "").rstrip("/")
        s["ckpt_dir"] = f"{run_dir}/checkpoints" if run_dir else ""
    out["settings"] = s
    return out


@dataclass(frozen=True, eq=False)
class RunSpec(Mapping[str, Any]):
    """A run spec (docs/design.md "Run spec": ``spec.json``) completed ONCE when read (:meth:`read`:
    :func:`complete_spec`), frozen, with its keys as typed attributes. Also a read-only ``Mapping`` of the completed
    spec (``spec["settings"]``, ``dict(spec)``, ``==`` with a dict), so a reader not yet converted and a test's
    command factory see the same JSON object; ``spec.json`` on disk is the plan's dict, never rewritten from this.

    Attributes are the spec's keys (None / empty where a hand-written spec lacks an optional one): ``run_id``,
    ``run_dir``, ``host``, ``container``, ``runtime`` (the host's: ``docker`` | ``host``), ``mode`` (``dapo`` | ``one-step-off``), ``framework``, ``profile``,
    ``accelerator`` (``npu`` | ``gpu``), ``workdir``, ``python``, ``settings`` (read-only: every key of
    :data:`SPEC_SETTINGS`), ``features`` (``[{"name", "source"}]``), ``disabled_features``, ``max_oom_retries``,
    ``max_oom_retries_from`` (the value in the words of its source: ``--max-oom-retries 1``), ``hang_timeout_s`` (seconds), ``env`` (name -> value; no secrets), ``ray`` (a multi-host run's cluster, or
    None), ``strategy`` (FSDP: ``fsdp`` | ``fsdp2`` pinned by a resume), ``setting_changes`` (the start rung),
    ``supervisor`` (tunables), ``notify``, ``learn``, ``logger``, ``launcher``, ``attempt`` (the supervisor's
    attempt number, 1 unless :meth:`with_attempt`), ``resume_of``. Nested values (``settings``' lists, ``ray``) are
    the spec's own: read them, never change them.
    """

    data: Mapping[str, Any] = field(repr=False)
    run_id: Optional[str] = None
    run_dir: Optional[str] = None
    host: Optional[str] = None
    container: Optional[str] = None
    runtime: Optional[str] = None
    mode: Optional[str] = None
    framework: str = RUN["framework"]
    profile: str = SPEC["profile"]
    accelerator: Optional[str] = None
    workdir: Optional[str] = None
    python: Optional[str] = None
    settings: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    features: Tuple[Any, ...] = ()
    disabled_features: Tuple[str, ...] = ()
    max_oom_retries: int = RUN["max_oom_retries"]
    max_oom_retries_from: Optional[str] = None
    hang_timeout_s: float = RUN["hang_timeout"]
    env: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    ray: Optional[Mapping[str, Any]] = None
    strategy: Optional[str] = None
    setting_changes: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    supervisor: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    notify: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    learn: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    logger: Tuple[str, ...] = ()
    launcher: Tuple[str, ...] = ()
    attempt: int = 1
    resume_of: Optional[str] = None

    @classmethod
    def read(cls, spec: Mapping[str, Any]) -> "RunSpec":
        """``spec`` completed from the table (:func:`complete_spec`) as a RunSpec; a RunSpec comes back as it is
        (completed already: never twice). ``ValueError`` / ``TypeError`` for a value of the wrong kind
        (``max_oom_retries`` not a whole number, ``hang_timeout_s`` not a number)."""
        if isinstance(spec, RunSpec):
            return spec
        return cls._of(complete_spec(spec))

    @classmethod
    def _of(cls, d: dict[str, Any]) -> "RunSpec":
        """The RunSpec of ``d``, a completed spec (:func:`complete_spec`'s result)."""

        def ro(key: str) -> Mapping[str, Any]:
            return MappingProxyType(dict(d.get(key) or {}))

        return cls(
            data=MappingProxyType(d),
            run_id=d.get("run_id"),
            run_dir=d.get("run_dir"),
            host=d.get("host"),
            container=d.get("container"),
            runtime=d.get("runtime"),
            mode=d.get("mode"),
            framework=d["framework"],
            profile=d["profile"],
            accelerator=d.get("accelerator"),
            workdir=d.get("workdir"),
            python=d.get("python"),
            settings=MappingProxyType(d["settings"]),
            features=tuple(d.get("features") or ()),
            disabled_features=tuple(d.get("disabled_features") or ()),
            max_oom_retries=int(d["max_oom_retries"]),
            max_oom_retries_from=d.get("max_oom_retries_from"),
            hang_timeout_s=float(d["hang_timeout_s"]),
            env=ro("env"),
            ray=d.get("ray") or None,
            strategy=d.get("strategy"),
            setting_changes=ro("setting_changes"),
            supervisor=ro("supervisor"),
            notify=ro("notify"),
            learn=ro("learn"),
            logger=tuple(d.get("logger") or ()),
            launcher=tuple(d.get("launcher") or ()),
            attempt=int(d.get("attempt") or 1),
            resume_of=d.get("resume_of"),
        )

    def with_attempt(self, k: int) -> "RunSpec":
        """This spec for attempt ``k`` (``attempt`` set; the spec of attempt 1 is this one): not completed again."""
        if k <= 1:
            return self
        return RunSpec._of(dict(self.data, attempt=k))

    def with_settings(self, setting_changes: Optional[Mapping[str, Any]]) -> "RunSpec":
        """This spec with ``setting_changes`` (the ladder's) laid over its settings: the spec an attempt runs
        (``dapo_ops.core.runspec.effective_settings`` as a spec); not completed again."""
        if not setting_changes:
            return self
        return RunSpec._of(dict(self.data, settings=dict(self.settings, **setting_changes)))

    def with_env(self, env: Mapping[str, Any]) -> "RunSpec":
        """This spec with ``env`` (name -> value; no secrets) as its ``env``: not completed again."""
        return RunSpec._of(dict(self.data, env=dict(env)))

    def to_json(self) -> dict[str, Any]:
        """The completed spec as a plain dict (a deep copy: JSON-serialisable, the caller's to change)."""
        return copy.deepcopy(dict(self.data))

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)
