"""The run-settings table and its resolution: flag > env > config file > default.

One :class:`Param` per setting of ``inv launch`` / ``inv one-step-off`` / ``inv preflight``: its
flag, environment variable (the runbook's names: ``TRAIN_STEPS``, ``FRAMEWORK``, ``MODEL_PATH``,
``USER_FEATURES``, ``ENABLE_OFFLOAD``, ...), key in the user config file
(``~/.config/dapo-ops/config.toml``, table ``[run]`` unless the key names another table, e.g.
``proxy.http_proxy``), type and help; its default is the one defaults table's, :data:`dapo_ops.core.defaults.RUN`
(read by the agent bundle too), never written here. This table is the one place a setting's help is written:
``docs/params.md`` is generated from it (``python -m dapo_ops.control.params_doc > docs/params.md``; a test keeps
them in sync) and so is every settings flag's ``--help`` (:func:`flag_help`, :func:`task_help`).

Secrets are not settings: the SwanLab API key and webhook URLs are handled by
:mod:`dapo_ops.control.swanlab_settings` / :mod:`dapo_ops.agent.notify` and never enter a run spec or a plan.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from dapo_ops.control.inventory.model import NAME_PATTERN
from dapo_ops.core import defaults
from dapo_ops.core import features
from dapo_ops.core.features import FeatureError, parse_user_features, without_feature
from dapo_ops.core.runspec import MAX_STEPS


class SettingsError(ValueError):
    """One-line problem with a setting: which variable/flag/file key, the bad value, the fix."""


@dataclass(frozen=True)
class Param:
    """One run setting.

    ``name``: key in :class:`Settings` and the run spec's ``settings``. ``flag``: CLI flag.
    ``env``: environment variables, first set one wins. ``key``: config-file key (``steps`` =
    ``[run] steps``; ``proxy.http_proxy`` = ``[proxy] http_proxy``), None when not in the file.
    ``type``: ``int`` | ``float`` | ``bool`` | ``str`` | ``features``. ``choices``: allowed values.
    ``unit`` for the docs (steps, tokens, seconds, devices, fraction). ``minimum`` / ``maximum``: the range of a
    number, ``also``: values allowed outside it (``save_freq`` -1). ``pattern``: ``(regex, what it allows)`` a
    string must match (:func:`re.fullmatch`). ``tracker``: the rule a tracker enforces on the value, checked by
    :func:`check_tracker_names` once the loggers are known. ``empty``: what a value that is SET but empty
    (``TRAIN_STEPS=``, ``--model ''``, ``steps = ""``) means, the one rule of :data:`EMPTY_RULES`.
    """

    name: str
    flag: str | None
    env: tuple[str, ...]
    key: str | None
    default: Any
    type: str
    help: str
    choices: tuple = ()
    unit: str = ""
    minimum: float | None = None
    maximum: float | None = None
    also: tuple = ()
    pattern: tuple[str, str] | None = None
    tracker: "TrackerRule | None" = None
    empty: str = "refuse"


#: What a setting given as an empty value means (``Param.empty``). One rule for every setting: an empty value is
#: refused in one line naming the variable / flag / file key (a forgotten ``MODEL_PATH=`` must not train the default
#: Qwen3-8B for hours), unless empty is itself the setting's meaning: a setting whose default IS empty ("the run id",
#: "no proxy", "no explicit feature") takes an empty value as not given ("unset": the next source, then the default,
#: applies), and a setting whose help documents its own empty meaning (HCCL port ranges: verl's own ``auto``) takes it
#: as that value ("value"). A setting whose empty default stands for a target the tool picks when none is named (the
#: inventory's container, the SwanLab mode the setup decides) refuses an empty value like any other
#: (:data:`EMPTY_DEFAULT_REFUSED`): ``CONTAINER=$NAME`` with NAME unset is a forgotten name, and silently using
#: another container, or SwanLab's cloud mode (the metrics leave the site), is what the rule exists to prevent.
EMPTY_RULES = {
    "refuse": "refused: give a value, or unset the variable / drop the flag or key for the default",
    "unset": "the same as not set (its default is empty)",
    "value": "the empty value itself (see its help)",
}


#: settings whose default is empty yet an empty value is refused (:data:`EMPTY_RULES`): the default picks a target
#: the user did not name (a new user's trial: ``SWANLAB_MODE=`` and ``CONTAINER=`` passed while ``TRAINER_GPUS=``
#: was refused)
EMPTY_DEFAULT_REFUSED = ("container", "swanlab_mode")


@dataclass(frozen=True)
class TrackerRule:
    """A name rule a tracker enforces when ``logger`` is in ``trainer.logger``: 1..``max_len`` characters matching
    ``regex`` (None: any), ``allowed`` says which in words, ``source`` is the file that enforces it. verl passes
    ``trainer.project_name`` / ``experiment_name`` to the tracker's init (verl/utils/tracking.py:144-146)."""

    logger: str
    max_len: int
    regex: str | None
    allowed: str
    source: str


#: SwanLab's project-name rule: pydantic ``ProjectName`` in swanlab 0.10 sdk/internal/pkg/constraints/__init__.py:56
#: (0.7: api/helper/utils.py:93 ``_PROJECT_NAME_RE``, same characters); a bad name kills verl in swanlab.init
SWANLAB_PROJECT = TrackerRule(
    "swanlab",
    100,
    r"[0-9a-zA-Z_\-+.]+",
    "letters, digits and _ - + .",
    "swanlab/sdk/internal/pkg/constraints/__init__.py ProjectName",
)
#: SwanLab's experiment-name rule: ``ExperimentName``, 1-512 characters (same file, :67)
SWANLAB_EXPERIMENT = TrackerRule(
    "swanlab", 512, None, "any characters", "swanlab/sdk/internal/pkg/constraints/__init__.py ExperimentName"
)


def _p(
    name,
    env,
    typ,
    help,
    *,
    key=...,
    flag=...,
    choices=(),
    unit="",
    minimum=None,
    maximum=None,
    also=(),
    pattern=None,
    tracker=None,
    empty=None,
) -> Param:
    if flag is ...:
        flag = "--" + name.replace("_", "-")
    if key is ...:
        key = name
    if isinstance(env, str):
        env = (env,)
    default = defaults.RUN[name]  # the one defaults table (dapo_ops/core/defaults.py)
    if empty is None:  # EMPTY_RULES: a setting whose default is empty takes an empty value as not given
        empty = "unset" if default == "" and name not in EMPTY_DEFAULT_REFUSED else "refuse"
    return Param(
        name,
        flag,
        tuple(env or ()),
        key,
        default,
        typ,
        help,
        tuple(choices),
        unit,
        minimum,
        maximum,
        tuple(also),
        pattern,
        tracker,
        empty,
    )


#: Every run setting; each one's default is :data:`dapo_ops.core.defaults.RUN`'s (the runbook's: FRAMEWORK=megatron,
#: MODEL_PATH=Qwen3-8B, TRAIN_STEPS=100, ...).
PARAMS: tuple[Param, ...] = (
    _p(
        "steps",
        "TRAIN_STEPS",
        "int",
        "training steps (trainer.total_training_steps)",
        unit="steps",
        minimum=1,
        maximum=MAX_STEPS,
    ),
    _p("framework", "FRAMEWORK", "str", "training backend", choices=("megatron", "fsdp")),
    _p(
        "model",
        "MODEL_PATH",
        "str",
        "model directory in the container (relative: under the host's model_dir, else the workdir)",
    ),
    _p(
        "train_file",
        "TRAIN_FILE",
        "str",
        "training parquet (relative: under the host's data_dir, else the workdir)",
    ),
    _p("val_file", "VAL_FILE", "str", "validation parquet (relative like train_file)"),
    _p(
        "trainer_gpus",
        "TRAINER_GPUS",
        "int",
        "trainer pool devices per node (one-step-off)",
        unit="devices",
        minimum=1,
    ),
    _p(
        "rollout_gpus",
        "ROLLOUT_GPUS",
        "int",
        "rollout pool devices per node (one-step-off)",
        unit="devices",
        minimum=1,
    ),
    _p("max_response_length", "MAX_RESPONSE_LENGTH", "int", "data.max_response_length", unit="tokens", minimum=1),
    _p("max_prompt_length", "MAX_PROMPT_LENGTH", "int", "data.max_prompt_length", unit="tokens", minimum=1),
    _p(
        "features",
        "USER_FEATURES",
        "features",
        "explicit features, comma list; -name turns a default off (" + ", ".join(features.ALL) + ")",
    ),
    _p("offload", "ENABLE_OFFLOAD", "bool", "start with offload on (an explicit feature)"),
    # at most 10: each retry restarts verl (model load + checkpoint resume, minutes) one rung up the OOM ladder, which
    # has a handful of rungs (dapo_ops/core/memladder.py RUNGS, the feature rungs of dapo_ops/core/ladder.py); more
    # retries only repeat the top rung against an OOM that does not go away
    _p(
        "max_oom_retries",
        "MAX_OOM_RETRIES",
        "int",
        "device-OOM retries of the escalation ladder",
        minimum=0,
        maximum=10,
    ),
    _p(
        "container",
        "CONTAINER",
        "str",
        "container name (empty: the inventory's)",
        pattern=(NAME_PATTERN, "a Docker container name ([A-Za-z0-9][A-Za-z0-9_.-]*)"),
    ),
    _p(
        "save_freq",
        "SAVE_FREQ",
        "int",
        "checkpoint every N steps (trainer.save_freq; -1 = never)",
        unit="steps",
        minimum=1,
        also=(-1,),
    ),
    _p(
        "test_freq",
        "TEST_FREQ",
        "int",
        "validate every N steps (trainer.test_freq; -1 = never), sampling like verl's DAPO recipe (temperature 1.0, "
        "top_p 0.7); the runbook names no cadence: 10 is the recipe's (verl's own default -1 validates only before "
        "step 1)",
        flag=None,
        unit="steps",
        minimum=1,
        also=(-1,),
    ),
    _p("rollout_tp", "ROLLOUT_TP", "int", "rollout tensor parallel size; must divide the rollout devices", minimum=1),
    _p(
        "trainer_tp",
        "TRAINER_TP",
        "int",
        "Megatron tensor parallel size of the trainer (actor_rollout_ref.actor.megatron.tensor_model_parallel_size); "
        "0: by model size and device memory like verl's examples (8B on 64 GiB NPUs: 2), the plan says which",
        flag=None,
        minimum=0,
    ),
    _p(
        "trainer_pp",
        "TRAINER_PP",
        "int",
        "Megatron pipeline parallel size of the trainer (actor_rollout_ref.actor.megatron.pipeline_model_parallel_size); "
        "0: by model size and device memory like verl's examples (8B on 64 GiB NPUs: 2)",
        flag=None,
        minimum=0,
    ),
    _p(
        "rollout_eager",
        "ROLLOUT_EAGER",
        "bool",
        "vLLM rollout in eager mode (actor_rollout_ref.rollout.enforce_eager=True): no graph capture; the fallback "
        "when graph mode (verl's default, its NPU examples' choice) fails to capture or its memory is short",
        flag=None,
    ),
    _p(
        "vanilla_mbridge",
        "VANILLA_MBRIDGE",
        "bool",
        "Megatron: build the model with the mbridge package (actor_rollout_ref.actor.megatron.vanilla_mbridge=True) "
        "instead of Megatron-Bridge (verl's default); verl's Ascend images install mbridge, not Megatron-Bridge, and "
        "its Ascend CI runs VANILLA_MBRIDGE=True (verl/workers/engine/megatron/transformer_impl.py:326-341)",
    ),
    _p(
        "gpu_memory_utilization",
        "GPU_MEMORY_UTILIZATION",
        "float",
        "rollout (vLLM) share of device memory (one-step-off's dedicated rollout pool: 0.8 unless set, like verl's "
        "DAPO one-step-off example)",
        unit="fraction",
        minimum=0.05,
    ),
    _p("train_batch_size", "TRAIN_BATCH_SIZE", "int", "prompts per step (data.train_batch_size)", minimum=1),
    _p(
        "ppo_mini_batch_size",
        "PPO_MINI_BATCH_SIZE",
        "int",
        "prompts per actor update (ppo_mini_batch_size)",
        minimum=1,
    ),
    _p("rollout_n", "ROLLOUT_N", "int", "responses per prompt (actor_rollout_ref.rollout.n)", minimum=1),
    _p(
        "micro_batch_size",
        "MICRO_BATCH_SIZE",
        "int",
        "*_micro_batch_size_per_gpu when dynamic_batch is off",
        minimum=1,
    ),
    _p(
        "max_position_embeddings",
        "MAX_POSITION_EMBEDDINGS",
        "int",
        "override the model context (0: the model's own)",
        unit="tokens",
        minimum=0,
    ),
    _p(
        "trainer_mode",
        "DAPO_MODE",
        "str",
        "launch's verl V1 trainer mode: async = trainer.v1.trainer_mode=colocate_async (the runbook's single-async "
        "DAPO), sync = synchronous DAPO; one-step-off always runs separate_async",
        flag="--mode",
        choices=("async", "sync"),
    ),
    _p(
        "max_staleness",
        "MAX_STALENESS",
        "int",
        "async modes: trainer.v1.sampler.max_off_policy_threshold, strategy drop (2 = at most one step off-policy; "
        "0 = no bound)",
        flag=None,
        unit="model versions",
        minimum=0,
    ),
    _p(
        "parameter_sync_step",
        "PARAMETER_SYNC_STEP",
        "int",
        "one-step-off: mini-batches between weight syncs, trainer.v1.separate_async.parameter_sync_step; verl needs "
        "train_batch_size = parameter_sync_step x ppo_mini_batch_size (0: train_batch_size / ppo_mini_batch_size)",
        flag=None,
        unit="mini-batches",
        minimum=0,
    ),
    _p(
        "max_actor_ckpt_to_keep",
        "MAX_CKPT_TO_KEEP",
        "int",
        "checkpoints kept, trainer.max_actor_ckpt_to_keep (verl 0.9; 0 = keep every save, verl's own default); "
        "preflight's disk check counts this many",
        flag=None,
        unit="checkpoints",
        minimum=0,
    ),
    _p(
        "hccl_connect_timeout",
        "HCCL_CONNECT_TIMEOUT",
        "int",
        "NPU: HCCL_CONNECT_TIMEOUT in verl's environment (verl's NPU scripts' value)",
        flag=None,
        unit="seconds",
        minimum=1,
    ),
    _p(
        "hccl_exec_timeout",
        "HCCL_EXEC_TIMEOUT",
        "int",
        "NPU: HCCL_EXEC_TIMEOUT in verl's environment (verl's NPU scripts' value)",
        flag=None,
        unit="seconds",
        minimum=1,
    ),
    _p(
        "hccl_host_socket_port_range",
        "HCCL_HOST_SOCKET_PORT_RANGE",
        "str",
        "NPU: HCCL_HOST_SOCKET_PORT_RANGE in verl's environment (empty: verl's own 'auto')",
        flag=None,
        empty="value",
    ),
    _p(
        "hccl_npu_socket_port_range",
        "HCCL_NPU_SOCKET_PORT_RANGE",
        "str",
        "NPU: HCCL_NPU_SOCKET_PORT_RANGE in verl's environment (empty: verl's own 'auto')",
        flag=None,
        empty="value",
    ),
    _p(
        "memory_fit",
        "MEMORY_FIT",
        "str",
        "what the memory-fit estimate (dapo_ops/core/memfit.py) does before launch: start = begin on the first OOM-ladder "
        "rung that fits (source: estimate) and refuse a plan that fits on no rung; warn = only report it (preflight "
        "warns, the first attempt runs as planned and the ladder learns from a real OOM)",
        flag=None,
        choices=("start", "warn"),
    ),
    _p(
        "allow_short_data",
        "ALLOW_SHORT_DATA",
        "bool",
        "run --steps beyond what the train data feeds (rows // train_batch_size x trainer.total_epochs, verl's epoch "
        "limit: verl/trainer/ppo/v1/trainer_base.py:467) with a warning instead of refusing it; verl then ends the "
        "run early (verdict: the training data ran out)",
    ),
    _p("hang_timeout", "HANG_TIMEOUT", "int", "no new step for this long = hang", unit="seconds", minimum=60),
    _p("project", "PROJECT_NAME", "str", "trainer.project_name (SwanLab project)", tracker=SWANLAB_PROJECT),
    _p(
        "experiment",
        "EXPERIMENT_NAME",
        "str",
        "trainer.experiment_name (empty: the run id)",
        tracker=SWANLAB_EXPERIMENT,
    ),
    _p(
        "profile",
        "VERL_PROFILE",
        "str",
        "verl profile (empty: from the host's verl version)",
        choices=("", "0.9", "0.8"),
    ),
    _p(
        "swanlab_mode",
        "SWANLAB_MODE",
        "str",
        "SwanLab mode (cloud/local/offline/disabled; empty: SwanLab setup decides)",
        key="swanlab.mode",
        choices=("", "cloud", "local", "offline", "disabled"),
    ),
    _p(
        "swanlab_host",
        "SWANLAB_HOST",
        "str",
        "self-hosted SwanLab server URL (the API key is never a setting)",
        key="swanlab.host",
    ),
    _p(
        "http_proxy",
        ("http_proxy", "HTTP_PROXY"),
        "str",
        "proxy for the container (model/data downloads, tracker)",
        key="proxy.http_proxy",
    ),
    _p(
        "https_proxy",
        ("https_proxy", "HTTPS_PROXY"),
        "str",
        "HTTPS proxy for the container",
        key="proxy.https_proxy",
    ),
)

BY_NAME: dict[str, Param] = {p.name: p for p in PARAMS}

#: (setting, environment variable) of the HCCL defaults on NPU (verl's NPU scripts, verl/utils/device.py; verl itself only
#: sets the port ranges to ``auto`` when unset: ``verl/trainer/constants_ppo.py:96-97``): the run's env on an NPU
#: (``dapo_ops.control.launch.plan.run_env``), where a ``--resume`` reads them back
HCCL_SETTINGS = (
    ("hccl_connect_timeout", "HCCL_CONNECT_TIMEOUT"),
    ("hccl_exec_timeout", "HCCL_EXEC_TIMEOUT"),
    ("hccl_host_socket_port_range", "HCCL_HOST_SOCKET_PORT_RANGE"),
    ("hccl_npu_socket_port_range", "HCCL_NPU_SOCKET_PORT_RANGE"),
)
SOURCES = ("flag", "env", "file", "default")


def flag_arg(p: Param) -> str | None:
    """The task parameter a setting's flag maps to (``--max-oom-retries`` -> ``max_oom_retries``; ``--mode`` ->
    ``mode`` for ``trainer_mode``), None for an env/file-only setting."""
    return p.flag[2:].replace("-", "_") if p.flag else None


#: task parameter name -> the setting its flag sets, for every setting with a flag (table order)
BY_ARG: dict[str, Param] = {a: p for p in PARAMS if (a := flag_arg(p)) is not None}


def flag_help(p: Param) -> str:
    """A setting's ``--help`` text, made from the table only: its help, the choices, the environment variable(s)
    and the default with its unit, e.g. ``training backend: megatron | fsdp (env FRAMEWORK; default megatron)``."""
    text = p.help
    choices = [c for c in p.choices if c]
    if choices and not all(c in text for c in choices):
        text += ": " + " | ".join(choices)
    where = ["env " + ", ".join(p.env)] if p.env else []
    if p.default not in ("", None) and p.type != "bool":
        where.append(f"default {p.default}" + (f" {p.unit}" if p.unit and p.unit != "fraction" else ""))
    return text + (f" ({'; '.join(where)})" if where else "")


def task_help(*args: str, **overrides: str) -> dict[str, str]:
    """invoke ``help=`` entries for the settings flags a task takes: ``{param: flag_help}`` for ``args`` (task
    parameter names, see :data:`BY_ARG`; none = every setting with a flag), plus ``overrides`` for a task that
    gives a flag another meaning (preflight: ``steps`` only sizes the disk estimate)."""
    names = args or tuple(BY_ARG)
    return {**{a: flag_help(BY_ARG[a]) for a in names}, **overrides}


@dataclass
class Settings:
    """Resolved settings: ``values[name]`` and ``sources[name]`` (flag | env | file | default).

    ``settings["steps"]`` / ``settings.steps`` give the value; :meth:`source` the source.
    """

    values: dict = field(default_factory=dict)
    sources: dict = field(default_factory=dict)
    origins: dict = field(default_factory=dict)  # name -> where it was set, for messages (``--project``, ``[run] ...``)

    def __getitem__(self, name: str):
        return self.values[name]

    def __getattr__(self, name: str):
        try:
            return self.__dict__["values"][name]
        except KeyError:
            raise AttributeError(name) from None

    def get(self, name: str, default=None):
        return self.values.get(name, default)

    def source(self, name: str) -> str:
        return self.sources[name]

    def as_dict(self) -> dict:
        return dict(self.values)

    def rows(self) -> list[tuple[str, Any, str]]:
        """``(name, value, source)`` in table order, for display."""
        return [(p.name, self.values[p.name], self.sources[p.name]) for p in PARAMS]


def given_as(settings: Any, name: str, value: Any = None) -> str:
    """Setting ``name`` as the user gave it, in the words of its source, for a line that quotes the value:
    ``--max-oom-retries 1`` (a flag), ``MAX_OOM_RETRIES=1`` (the environment), ``[run] max_oom_retries = 1 in the
    config file``, ``max_oom_retries=1 of the resumed run`` (``--resume``), ``the default max_oom_retries=2``; a
    plain dict of settings (no sources) counts as the default; ``value``: the value to quote (default: the
    setting's). A trial given ``--max-oom-retries 1`` read
    "MAX_OOM_RETRIES=1" and looked for a variable it never set."""
    p = BY_NAME[name]
    value = settings[name] if value is None else value
    source = (getattr(settings, "sources", None) or {}).get(name, "default")
    if source == "flag":
        return f"{(getattr(settings, 'origins', None) or {}).get(name) or p.flag} {value}"
    if source == "env":
        return f"{(getattr(settings, 'origins', None) or {}).get(name) or p.env[0]}={value}"
    if source == "file":
        tbl, _, k = (p.key or "").rpartition(".")
        return f"[{tbl or 'run'}] {k} = {value} in the config file"
    if source == "resume":
        return f"{name}={value} of the resumed run"
    return f"the default {name}={value}"


def _where(p: Param, source: str, origin: str) -> str:
    if source == "flag":
        return p.flag or p.name
    if source == "env":
        return origin
    if source == "file":
        tbl, _, k = (p.key or "").rpartition(".")
        return f"[{tbl or 'run'}] {k} in the config file"
    return p.name


#: THE number syntax of every setting and every numeric task flag (:func:`parse_int`, :func:`parse_float`): ASCII
#: digits only, nothing around them. Python's ``int()`` / ``float()`` also take other scripts' digits (``int('٣')`` is
#: 3), ``_`` separators (``int('1_000')``) and blanks (``int(' 5')``), which a user never means as a step count: a
#: blank around a number is refused in one line naming the flag / variable / file key and the number without it
#: (:func:`blanks_fix`), from every source alike.
INT_RE = re.compile(r"[+-]?[0-9]+", re.ASCII)
FLOAT_RE = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)
#: the most characters of a refused value a message echoes (:func:`shown`): a 10,000-character value is cut
SHOWN_MAX = 80


def parse_int(text) -> int:
    """``text`` (str) as an integer in ASCII digits and nothing else, e.g. ``"-1"``, ``"100"``.

    :raises ValueError: anything else (``"1_000"``, ``"٣"``, ``"1.5"``, ``""``, ``" 5"``: :func:`blanks_fix`)."""
    t = str(text)
    if not INT_RE.fullmatch(t):
        raise ValueError(f"not an ASCII integer: {shown(text)}")
    return int(t)


def parse_float(text) -> float:
    """``text`` as a decimal number in ASCII digits and nothing else (``0.6``, ``.5``, ``1e-3``); no
    ``nan``/``inf``/``_``/blanks.

    :raises ValueError: anything else."""
    t = str(text)
    if not FLOAT_RE.fullmatch(t):
        raise ValueError(f"not an ASCII number: {shown(text)}")
    return float(t)


def blanks_fix(text, kind: type = int) -> str | None:
    """The number ``text`` would be without the blanks around it (``" 5"`` -> ``"5"``), when blanks are all that
    keeps :func:`parse_int` (``kind`` int) / :func:`parse_float` (float) from taking it; else None. For the one line
    that refuses it: ``--steps: ' 5' has blanks around the number; give --steps 5``."""
    t = str(text).strip() if isinstance(text, str) else ""
    if not t or t == text:
        return None
    return t if (INT_RE if kind is int else FLOAT_RE).fullmatch(t) else None


def shown(value) -> str:
    """THE way a message echoes a value the user gave: its ``repr``, cut to :data:`SHOWN_MAX` characters with the
    length said (``'aaaa…' (10000 characters)``), so a refused 10,000-character value is one readable line."""
    text = repr(value)
    if len(text) <= SHOWN_MAX:
        return text
    n = len(value) if isinstance(value, (str, bytes, list, tuple)) else len(text)
    return f"{text[: SHOWN_MAX - 1]}… ({n} characters)"


_TRUE = {"1", "true", "yes", "on", "y"}
_FALSE = {"0", "false", "no", "off", "n", ""}


_NUMBER_KIND = {"int": int, "float": float}


def _bad_value(where: str, raw, expect: str, example, kind: type | None) -> SettingsError:
    """:func:`convert`'s one line for ``raw`` that is not ``expect``; a number of ``kind`` with blanks around it says
    so and gives the number without them (:func:`blanks_fix`)."""
    fix = blanks_fix(raw, kind) if kind is not None else None
    if fix is not None:
        return SettingsError(f"{where}={shown(raw)} has blanks around the number; set it to {fix}")
    return SettingsError(f"{where}={shown(raw)} is not {expect}; set it to e.g. {example}")


def convert(p: Param, raw, where: str):
    """Convert ``raw`` (str from env/flags, or a TOML value) to ``p.type``; :class:`SettingsError` if impossible."""

    def bad(expect: str, example) -> SettingsError:
        return _bad_value(where, raw, expect, example, _NUMBER_KIND.get(t))

    t = p.type
    val: Any  # bool | int | float | str, as p.type says (compared with the bounds below)
    if t == "bool":
        if isinstance(raw, bool):
            val = raw
        elif isinstance(raw, str) and raw.strip().lower() in _TRUE | _FALSE:
            val = raw.strip().lower() in _TRUE
        else:
            raise bad("a boolean", "True or False")
    elif t == "int":
        if isinstance(raw, bool):
            raise bad("an integer", p.default)
        if isinstance(raw, int):
            val = raw
        else:
            try:
                val = parse_int(raw)
            except ValueError:
                raise bad("an integer", p.default) from None
    elif t == "float":
        if isinstance(raw, bool):
            raise bad("a number", p.default)
        try:
            val = float(raw) if not isinstance(raw, str) else parse_float(raw)
        except ValueError:
            raise bad("a number", p.default) from None
    elif t == "features":
        val = ",".join(raw) if isinstance(raw, (list, tuple)) else str(raw)
        try:
            on, off = parse_user_features(val)
        except FeatureError as e:
            raise SettingsError(f"{where}: {e}") from None
        if val.strip() and not on and not off and not re.search(r"default|默认", val, re.I):
            raise SettingsError(
                f"{where}={shown(raw)} names no feature; give feature names (e.g. "
                f"{features.ALL[0]},-{features.ALL[1]}) or drop it for the defaults"
            )
    else:
        if isinstance(raw, (dict, list)):
            raise bad("a string", repr(p.default))
        val = _text(str(raw), where, quiet=p.name in (*_PROXY_SETTINGS, "swanlab_host"))
    if p.choices and val not in p.choices:
        raise SettingsError(
            f"{where}={shown(raw)} is not one of {', '.join(repr(c) for c in p.choices if c != '')}; use one of them"
        )
    number = isinstance(val, (int, float)) and not isinstance(val, bool) and val not in p.also
    also = "".join(f" or {a}" for a in p.also)
    if p.minimum is not None and number and val < p.minimum:
        lo = _num(p.minimum)
        raise SettingsError(f"{where}={shown(raw)} is below the minimum {lo}; use a value >= {lo}{also}")
    if p.maximum is not None and number and val > p.maximum:
        hi = _num(p.maximum)
        raise SettingsError(f"{where}={shown(raw)} is above the maximum {hi}; use a value <= {hi}{also}")
    if p.pattern and isinstance(val, str) and val and not re.fullmatch(p.pattern[0], val):
        raise SettingsError(f"{where}={shown(raw)} is not {p.pattern[1]}; fix {where}")
    if p.name == "gpu_memory_utilization" and not 0 < val <= 1:
        raise SettingsError(f"{where}={shown(raw)} must be a fraction in (0, 1], e.g. 0.6")
    return val


def _text(val: str, where: str, quiet: bool = False) -> str:
    """A string setting's value ``val`` (given at ``where``), judged: blanks at an end (a path, name, host or choice:
    a typo the user cannot see, ``MODEL_PATH="/verl/Qwen3-8B "``) and ``${`` are refused with
    :class:`SettingsError`, one line. ``quiet``: a value that may hold credentials (a proxy or SwanLab host URL,
    ``http://user:pw@...``) is not echoed."""
    if val != val.strip():
        if quiet:
            raise SettingsError(f"{where} has blanks around its value (they would be part of it); remove them")
        fix = f"set it to {val.strip()!r}" if val.strip() else "give a value or unset it"
        raise SettingsError(f"{where}={shown(val)} has blanks around it (they would be part of it); {fix}")
    if "${" in val:  # not echoed: the text may name a secret's variable (${oc.env:SWANLAB_API_KEY})
        raise SettingsError(
            f"{where} holds '${{', which verl's config (OmegaConf) evaluates as an interpolation (${{oc.env:VAR}} "
            f"reads an environment variable into the config verl prints; verl/trainer/main_ppo.py:144-145 resolves "
            f"it in place, so no escape keeps it literal); remove '${{' from {where}"
        )
    return val


def _num(x) -> str:
    """A bound as written: ``1000000``, ``0.05`` (not ``1e+06``)."""
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _empty(p: Param, source: str, where: str) -> bool:
    """Apply :data:`EMPTY_RULES` to a setting given as ``""`` by ``source`` (flag | env | file) at ``where``: True
    when the empty value is the value ("value"), False when it counts as not given ("unset").

    :raises SettingsError: ("refuse") :func:`empty_error`.
    """
    if p.empty == "value":
        return True
    if p.empty == "unset":
        return False
    raise empty_error(p, source, where)


def empty_error(p: Param, source: str, where: str) -> SettingsError:
    """The refusal of setting ``p`` given empty by ``source`` (flag | env | file) at ``where`` (the flag, variable or
    file key): one line naming it, what to give and the default it would otherwise get (an empty default in the
    words of its help, e.g. ``for the default: the inventory's``). Tasks that read such a variable themselves (the
    container of ``inv status``) refuse with it too."""
    unit = f" {p.unit}" if p.unit and p.unit != "fraction" else ""
    choices = " | ".join(c for c in p.choices if c)
    if p.default == "":
        m = re.search(r"empty: ([^);]*)", p.help)
        default, example, literal = f"the default: {m.group(1) if m else 'not set'}", "<name>", "'<name>'"
    else:
        default, example, literal = f"the default {p.default}{unit}", str(p.default), repr(p.default)
    if source == "flag":
        give = f"give one of {choices}" if choices else f"give a value (e.g. {where} {example})"
        return SettingsError(f"{where} '' is empty; {give}, or drop {where} for {default}")
    if source == "env":
        give = f"set it to one of {choices}" if choices else f"set it (e.g. {where}={example})"
        return SettingsError(f"{where} is set but empty; {give}, or unset it (`unset {where}`) for {default}")
    k = (p.key or p.name).rpartition(".")[2]
    give = f"give one of {choices}" if choices else f"give a value (e.g. {k} = {literal})"
    return SettingsError(f"{where} is empty; {give}, or remove the key for {default}")


def _file_value(file_cfg: Mapping, p: Param):
    """Look ``p.key`` up in a config dict: the whole file (with a ``run`` table) or just the ``[run]`` table."""
    if not p.key or not file_cfg:
        return None
    tbl, _, k = p.key.rpartition(".")
    tbl = tbl or "run"
    if isinstance(file_cfg.get(tbl), Mapping):
        return file_cfg[tbl].get(k)
    if tbl == "run" and not any(isinstance(v, Mapping) for v in file_cfg.values()):
        return file_cfg.get(k)  # a bare [run] table was passed
    return None


def resolve(flags: Mapping | None, env: Mapping | None, file_cfg: Mapping | None) -> Settings:
    """Resolve every :data:`PARAMS` entry: flag > env > config file > default.

    ``flags``: ``{name: value}`` of flags actually given (None counts as not given; ``""`` is a flag given
    empty, e.g. ``--model ''``). ``env``: usually ``os.environ``. ``file_cfg``: the parsed config file
    (``userconfig.load()``: ``{"run": {...}, "proxy": {...}}``) or just its ``[run]`` table. A value given empty
    by any source follows the setting's :data:`EMPTY_RULES` entry (``Param.empty``): refused, not given, or the
    empty value. Unknown flag names raise :class:`SettingsError`.
    Raises :class:`SettingsError` (one line naming the variable, flag or file key) for values of
    the wrong type or out of range, and for offload turned on and off (``offload`` and ``-offload`` in ``features``).
    """
    flags = dict(flags or {})
    env = env or {}
    file_cfg = file_cfg or {}
    unknown = sorted(set(flags) - set(BY_NAME))
    if unknown:
        raise SettingsError(f"unknown setting {unknown[0]!r}; known: {', '.join(BY_NAME)}")
    out = Settings()
    for p in PARAMS:
        raw, source, origin = None, "default", p.name
        fv = flags.get(p.name)
        if fv is not None and (fv != "" or _empty(p, "flag", _where(p, "flag", origin))):
            raw, source = fv, "flag"
        else:
            for var in p.env:
                ev = env.get(var)
                if ev is not None and (ev != "" or _empty(p, "env", var)):
                    raw, source, origin = ev, "env", var
                    break
            if source == "default":
                fv = _file_value(file_cfg, p)
                if fv is not None and (fv != "" or _empty(p, "file", _where(p, "file", origin))):
                    raw, source = fv, "file"
        if source == "default":
            val = p.default
        else:
            val = convert(p, raw, _where(p, source, origin))
            if p.name in _PROXY_SETTINGS:
                _check_proxy(p, val, source, _where(p, source, origin))
        out.values[p.name] = val
        out.sources[p.name] = source
        out.origins[p.name] = _where(p, source, origin)
    _settle_offload(out)
    return out


#: how a source ranks (the precedence: flags > env > config file > defaults)
_RANK = {source: len(SOURCES) - i for i, source in enumerate(SOURCES)}


def _settle_offload(out: "Settings") -> None:
    """The ``offload`` setting (``--[no-]offload`` / ``ENABLE_OFFLOAD``) against ``offload`` / ``-offload`` in the
    features, when they disagree: the higher source wins (``ENABLE_OFFLOAD=True inv launch --features=-offload``
    starts without offload; ``USER_FEATURES=-offload inv launch --offload`` drops that ``-offload``;
    ``USER_FEATURES=offload inv launch --no-offload`` drops that ``offload``); from sources of one rank
    :class:`SettingsError` (one line). An ``offload`` left at its default (False) never disagrees."""
    on, off = parse_user_features(out.values["features"])
    want = bool(out.values["offload"])
    if out.sources["offload"] == "default" or ("offload" not in off if want else "offload" not in on):
        return
    flag_rank, feat_rank = _RANK[out.sources["offload"]], _RANK[out.sources["features"]]
    if flag_rank == feat_rank:
        raise SettingsError(
            f"{out.origins['offload']} turns offload {'on' if want else 'off'} but {out.origins['features']}="
            f"{out.values['features']!r} turns it {'off' if want else 'on'} "
            f"({'-offload' if want else 'offload'!r}); drop one of them"
        )
    if feat_rank > flag_rank:
        out.values["offload"] = not want
    else:
        out.values["features"] = without_feature(out.values["features"], "offload")


def check_tracker_names(st: "Settings | Mapping", loggers) -> None:
    """Refuse a setting the tracker of one of ``loggers`` (``trainer.logger``) would refuse at its init, minutes into
    the run (SwanLab: :data:`SWANLAB_PROJECT`, :data:`SWANLAB_EXPERIMENT`). A setting left at its default is
    checked too (an empty experiment becomes the run id); ``st`` may be a plain dict (then the message names the
    flag). Raises :class:`SettingsError`: one line naming the flag,
    variable or file key."""
    values, origins = (st.values, st.origins) if isinstance(st, Settings) else (st, {})
    for p in PARAMS:
        r = p.tracker
        val = values.get(p.name)
        if r is None or r.logger not in (loggers or ()) or val in (None, "") and p.default == "":
            continue
        val = str(val)
        if len(val) <= r.max_len and (r.regex is None or re.fullmatch(r.regex, val)):
            continue
        where = origins.get(p.name) or p.flag or p.name
        raise SettingsError(
            f"{where}={shown(val)} is refused by {r.logger} ({p.name} names: 1-{r.max_len} {r.allowed}; "
            f"{r.source}): rename it, e.g. {re.sub(r'[^0-9A-Za-z_.+-]+', '_', val)[: r.max_len]!r}, "
            f"or run without {r.logger} (--swanlab-mode disabled)"
        )


_PROXY_SETTINGS = ("http_proxy", "https_proxy")


def _check_proxy(p: Param, val: str, source: str, where: str) -> None:
    """A proxy setting must be a proxy URL (:func:`dapo_ops.control.inventory.proxy.check_url`, the one rule) and, given as a
    flag, carry no credentials (:func:`dapo_ops.control.inventory.proxy.check_flag`). Raises :class:`SettingsError`, one line
    naming the flag / env var / config key; the value itself is kept (``none`` stays a "no proxy" override)."""
    from dapo_ops.control.inventory import proxy

    try:
        check = proxy.check_flag if source == "flag" else proxy.check_url
        check(val, ("env var " if source == "env" else "") + where)
    except proxy.ProxyError as e:
        raise SettingsError(str(e)) from None
