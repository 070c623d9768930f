"""``docs/params.md``: the run settings table of :mod:`dapo_ops.control.settings` rendered as Markdown, with the
table of which verl V1 trainer mode each task runs. ``python -m dapo_ops.control.params_doc > docs/params.md``
regenerates it; tests/test_docs_params.py keeps the file equal to :func:`render_markdown`.
"""

from __future__ import annotations

import sys

from dapo_ops.control import settings


#: docs/params.md's mode x framework x accelerator table (docs/workflow.md shows the same rows): which verl trainer
#: and engine run, which performance features are on, and why (every fact cited from verl 0.9.1).
MATRIX = (
    "## What runs, per mode x framework x accelerator (verl 0.9 profile)",
    "",
    "| task | framework | accel | verl trainer + engine | on by default | why |",
    "|---|---|---|---|---|---|",
    "| `inv launch` | megatron | npu | V1 `colocate_async`, Megatron engine (`model_engine=megatron`, MindSpeed "
    "patches), vLLM-Ascend rollout colocated | TP/PP `TRAINER_TP`/`TRAINER_PP` (8B on 64 GiB: 2/2), flash attention "
    "(`use_flash_attn`), remove padding, dynamic batch, gradient checkpointing as full recompute (below), vLLM graph "
    "mode (`enforce_eager=False`), "
    "prefix caching, chunked prefill | the runbook's default; verl's 1/1 (`engine/megatron.yaml:11,20`) needs 75 GiB "
    "per device for Qwen3-8B, TP2/PP2 fits 64 GiB like verl's 8B Megatron examples; graph mode is what verl's NPU "
    "examples run (eager: `ROLLOUT_EAGER=true`); prefix caching and chunked prefill are verl's defaults "
    "(`rollout.yaml:87,90`) and `rollout.n=8` shares each prompt |",
    "| `inv launch` | megatron | gpu | same, vLLM rollout | same (TP/PP by model size: 8B on 80 GiB: 2/1; gradient "
    "checkpointing: full recompute on <= 64 GiB devices, else verl's selective `core_attn`) | "
    "as above; no `enforce_eager` key (verl's default graph mode) |",
    "| `inv launch` | fsdp | npu | V1 `colocate_async`, FSDP2 engine, vLLM-Ascend | flash attention "
    "(`attn_implementation`), remove padding, dynamic batch, gradient checkpointing, graph mode, prefix caching, "
    "chunked prefill; `fsdp_config.use_torch_compile=False` | FSDP shards over all devices (no TP/PP); torch.compile "
    "is off on NPU (`workers/engine/fsdp/transformer_impl.py:183-187`) |",
    "| `inv launch` | fsdp | gpu | same, vLLM | same, torch.compile on | the path proven on the H200 (gpu/README.md) |",
    "| `inv launch --mode sync` | any | any | V1 `sync` | as its `launch` row | plain synchronous DAPO |",
    "| `inv one-step-off` | megatron | npu | V1 `separate_async`, trainer pool Megatron, rollout pool vLLM-Ascend, "
    "weight sync by checkpoint engine `nccl` (Ascend's HCCL engine registers under that name, "
    "`checkpoint_engine/hccl_checkpoint_engine.py:103`) | as `launch` + rollout share 0.8 on the dedicated pool, "
    "old log-probs from the rollout (`algorithm.rollout_correction.bypass_mode=True`, "
    "`rollout.calculate_log_probs=True`), 1 warm-up batch | verl's one-step-off config forces bypass "
    "(`experimental/one_step_off_policy/config/one_step_off_ppo_trainer.yaml`); without it the trainer recomputes "
    "log-probs every step and copies the actor to host memory for each mini-batch after the first "
    "(`trainer_separate_async.py:187-211`); the rollout pool holds only vLLM, so it takes 0.8 like verl's DAPO "
    "one-step-off example (`GPU_MEMORY_UTILIZATION` wins when set); bucket stays verl's 2048 MB |",
    "| `inv one-step-off` | megatron | gpu | same, checkpoint engine `nccl` (needs cupy) | same | same |",
    "| `inv one-step-off` | fsdp | npu / gpu | V1 `separate_async`, FSDP2 trainer pool, vLLM rollout pool, `nccl` "
    "engine | as the fsdp `launch` rows + bypass, share 0.8, 1 warm-up batch | same |",
    "",
    "Every row: retries and `--resume` skip verl's validation before training (`trainer.val_before_train=False`; verl "
    "validates at start by default, `trainer_base.py:439-442`): the first attempt has validated this model already "
    "(`--override trainer.val_before_train=True` keeps it). On NPU every Ray node gets the run's HCCL timeouts and port "
    "ranges (`HCCL_*` settings), as verl's Ascend multi-node guide sets them on all nodes.",
    "",
    "Megatron gradient checkpointing (spec setting `megatron_recompute`, `dapo_ops/core/profiles.py` "
    "`MEGATRON_RECOMPUTE`): on devices of <= 64 GiB it runs full recompute, `recompute_granularity=full`, "
    "`recompute_method=uniform`, `recompute_num_layers=1` (every layer keeps only its input; what verl's NPU Megatron "
    "scripts run: the DAPO nightly `run_dapo_moonlight-16b_megatron_npu.sh:144-146` of verl's Ascend CI); on larger "
    'devices verl\'s own `selective` recompute of `recompute_modules: ["core_attn"]` (`engine/megatron.yaml:75-87`), '
    "which with flash attention keeps every layer's activations. The memory-fit estimate counts what runs: the "
    "runbook's default (Megatron, Qwen3-8B, 8 x 64 GiB NPUs, TP 2 PP 2, one host or two) has update 36.7 GiB per "
    "device with full recompute (activations 19.5 GiB for the 20 480-token budget) and fits; selective would be "
    "109.8 GiB. The `recompute` rung is then skipped on Megatron (it would set the same keys).",
    "",
    "Validation: every `test_freq` steps (`trainer.test_freq`; verl validates only when it is > 0, "
    "`trainer_base.py:491-492`), besides the first attempt's validation before step 1; `inv status` shows the last "
    "score (`val-core/<data source>/acc/mean@N`, `trainer_base.py:1357-1371`) and its step.",
)


def _empty_rule() -> list[str]:
    """The paragraph on values given empty, from ``Param.empty`` (:data:`dapo_ops.control.settings.EMPTY_RULES`)."""

    def names(rule: str) -> str:
        return ", ".join(f"`{p.name}`" for p in settings.PARAMS if p.empty == rule)

    return [
        "A value given empty (`TRAIN_STEPS=`, `--model ''`, `steps = \"\"` in the file) is "
        + settings.EMPTY_RULES["refuse"]
        + " (one line naming the variable, flag or key; nothing is launched),",
        "except where empty has a meaning of its own: for " + names("unset") + " the default is empty, so an empty",
        "value is "
        + settings.EMPTY_RULES["unset"].split(" (")[0]
        + "; for "
        + names("value")
        + " it is "
        + settings.EMPTY_RULES["value"]
        + ".",
        "For "
        + ", ".join(f"`{n}`" for n in settings.EMPTY_DEFAULT_REFUSED)
        + " the default is empty too, yet an empty value is refused: that default picks what you did not name (the",
        "inventory's container; the mode SwanLab setup decides, cloud unless the config file says otherwise, where the "
        "metrics",
        "leave the site), so an empty value is taken for a forgotten one (`CONTAINER=$NAME` with NAME unset); "
        "`inv status`, `logs`, `stop`,",
        "`watch`, `hosts` and `quickstart` refuse an empty `CONTAINER` (and quickstart an empty `SWANLAB_MODE`) the same way.",
        "A string setting holding `${` is refused: verl's config (OmegaConf) would evaluate it "
        "(`verl/trainer/main_ppo.py:144-145`).",
    ]


def render_markdown() -> str:
    """``docs/params.md``: the settings table as Markdown (generated; do not edit the file by hand)."""
    lines = [
        "# Run settings",
        "",
        "<!-- generated by `python -m dapo_ops.control.params_doc > docs/params.md`; edit dapo_ops/control/settings.py "
        "(defaults: dapo_ops/core/defaults.py) -->",
        "",
        "Precedence: flag > environment variable > config file (`~/.config/dapo-ops/config.toml`,",
        "`DAPO_OPS_CONFIG` overrides the path; keys in `[run]` unless shown with their table) > default.",
        "Every default is written once, in `dapo_ops/core/defaults.py` (`RUN`; the spec's forms: `SPEC_SETTINGS`), which",
        "the planner, the supervisor and preflight read; a spec.json of an older dapo-ops gets its missing keys from it.",
        "Secrets (SwanLab API key, webhook URLs) are not settings: see the SwanLab setup and notifier docs.",
        "A flag's `--help` (`inv launch --help`, `inv one-step-off --help`, `inv preflight --help`) is made from the",
        "same row: help, choices, env var, default (`flag_help` in dapo_ops/control/settings.py).",
        "",
        *_empty_rule(),
        "",
        "## Which verl trainer each task runs (verl 0.9 profile)",
        "",
        "Both tasks run verl's V1 trainer, `python3 -m verl.trainer.main_ppo` (Megatron: `model_engine=megatron`), in",
        "the V1 mode `trainer.v1.trainer_mode` (`verl/trainer/config/ppo_trainer.yaml:238`); the dry-run plan says which.",
        "",
        "| task | `trainer.v1.trainer_mode` | why |",
        "|---|---|---|",
        "| `inv launch` (default, `--mode async`) | `colocate_async` | the runbook's run_dapo.sh is single-async DAPO: rollout "
        "colocated with training, one warm-up batch prefetched, partial rollout (`verl/trainer/ppo/v1/"
        "trainer_colocate_async.py`); staleness bounded by `max_staleness` (strategy `drop`) |",
        "| `inv launch --mode sync` | `sync` | plain synchronous DAPO (`trainer_sync.py`) |",
        "| `inv one-step-off` | `separate_async` | trainer and rollout pools on separate devices "
        "(`actor_rollout_ref.hybrid_engine=False`, `actor_rollout_ref.rollout.nnodes/n_gpus_per_node`; "
        "`trainer_separate_async.py`); verl's CI replaced the legacy `verl.experimental.one_step_off_policy` entry "
        "with it, and that entry's trainer never reads `algorithm.filter_groups` (no DAPO dynamic sampling) |",
        "",
        "Every mode does DAPO dynamic sampling (`algorithm.filter_groups.*`, `verl/trainer/ppo/v1/trainer_base.py:187-212`;",
        "V1 ignores `max_num_gen_batches`). The 0.8 profile keeps its 0.8-era entries (`recipe.dapo.main_dapo`, the",
        "legacy one-step-off entry) and ignores `trainer_mode`, `max_staleness`, `parameter_sync_step` and",
        "`max_actor_ckpt_to_keep`.",
        "",
        *MATRIX,
        "",
        "## Settings",
        "",
        "| setting | flag | env var | config key | default | type | help |",
        "|---|---|---|---|---|---|---|",
    ]

    def cell(x) -> str:
        return str(x).replace("|", "\\|")

    for p in settings.PARAMS:
        tbl, _, k = (p.key or "").rpartition(".")
        key = f"`[{tbl}] {k}`" if tbl else (f"`{k}`" if k else "")
        default = "(empty)" if p.default == "" else p.default
        typ = p.type + (f" ({p.unit})" if p.unit else "")
        if p.choices:
            typ += ": " + "/".join(c for c in p.choices if c)
        env = ", ".join(f"`{e}`" for e in p.env)
        # a bool flag is --name / --no-name (dapo_ops/cli/_common.py UNSET_BOOL): invoke's --help writes --[no-]name
        flag = (f"`--[no-]{p.flag[2:]}`" if p.type == "bool" else f"`{p.flag}`") if p.flag else "(env / file only)"
        lines.append(f"| `{p.name}` | {flag} | {env} | {key} | `{cell(default)}` | {cell(typ)} | {cell(p.help)} |")
    lines += ["", *_recipe_keys(cell), "", *_fit_keys(cell), "", *_plan_keys(cell)]
    return "\n".join(lines)


def _recipe_keys(cell) -> list[str]:
    """The DAPO recipe section: the verl keys the plan takes from verl's DAPO scripts where the runbook is silent
    (:data:`dapo_ops.core.defaults.DAPO_RECIPE`), each with its source."""
    from dapo_ops.core.defaults import DAPO_RECIPE
    from dapo_ops.core.overrides import hydra_value

    out = [
        "## DAPO recipe keys (where the runbook is silent)",
        "",
        "The runbook names no optimizer schedule, prompt truncation or validation sampling: the plan takes verl's DAPO",
        "recipe's (0.9 profile; every key composes on both engines: `optim/fsdp.yaml`, `optim/megatron.yaml`).",
        "`optim.clip_grad=1.0` is verl's own default already (`optim/fsdp.yaml:30`, `optim/megatron.yaml:22`) and is",
        "not emitted. `--override KEY=VALUE` changes any of them; a spec written before these keys keeps none of them.",
        "",
        "| verl key | value | source |",
        "|---|---|---|",
    ]
    out += [f"| `{k}` | `{cell(hydra_value(v))}` | {cell(src)} |" for k, v, src in DAPO_RECIPE]
    return out


def _fit_keys(cell) -> list[str]:
    """The fastest-fit section: the memory-for-speed keys the plan chooses from the memory-fit estimate
    (:data:`dapo_ops.core.fastfit.KNOBS`), what verl bounds with each and where verl reads it, and the margin."""
    from dapo_ops.core import fastfit

    out = [
        "## The plan's fastest fit (`fit:` lines)",
        "",
        "`inv launch` takes every key that trades device memory for speed at the largest value whose estimated phase",
        "peak (`dapo_ops/core/memfit.py`) fits the device with a margin: `estimate x (1 + "
        f"{fastfit.FIT_MARGIN:g}) <= device memory`",
        "(`dapo_ops/core/fastfit.py` `FIT_MARGIN`). The margin is the largest underestimate of a measured peak on the",
        "holdout rows of `bench/memory_fit.csv` (measured / estimated - 1), rounded up to the whole percent",
        "(`bench/memory_fit.md` names the row; `tests/test_fastfit.py` recomputes it from the CSV). The launch",
        "prints one `fit:` line per key, its value and why; `--dry-run` shows them against the accelerator's usual",
        "memory, not applied. A value you set (its setting's flag / env / config key, e.g. `--gpu-memory-utilization`;"
        " `--override` of a key no setting owns, e.g. `max_num_seqs`: launch refuses an `--override` of a key a setting"
        " sets; `--features`) stays, and so do the",
        "keys of the phases a used learned memo ran out in; a key whose smallest value does not fit says `falls back`",
        "(the estimate's start rung and the OOM ladder take over; `update-batch` halves the chosen budget).",
        "`MEMORY_FIT=warn` reports the choices without applying them. The run's spec.json records them (`fit`).",
        "",
        "| fit | verl key | what verl bounds with it; how the plan chooses it | verl source |",
        "|---|---|---|---|",
    ]
    out += [f"| `fit: {n}` | `{cell(k)}` | {cell(what)} | {cell(src)} |" for n, k, what, src in fastfit.KNOBS]
    return out


def _plan_keys(cell) -> list[str]:
    """The ``--override`` section: the verl keys the plan sets (:data:`dapo_ops.core.overrides.PLAN_SETTING_KEYS`,
    :data:`dapo_ops.core.overrides.PLAN_FIXED_KEYS`), which ``inv launch`` refuses as overrides."""
    from dapo_ops.core.overrides import PLAN_FIXED_KEYS, PLAN_SETTING_KEYS

    out = [
        "## `--override` and the keys the plan sets",
        "",
        "`--override KEY=VALUE` (repeatable) is appended last to verl's command line, so it would win silently against",
        "the plan. An override of a key the plan sets is refused in one line (nothing is launched): a key a setting",
        "sets names the setting to use (`--override trainer.total_training_steps=5: use --steps (TRAIN_STEPS)`), a key",
        "dapo-ops sets for the run to work says why. `+key`, `++key` and `~key` count as the key. Every other key is",
        "open: the keys of the OOM ladder's setting rungs (micro-batch sizes, token budgets, the FSDP offload policy,",
        "the weight-sync bucket: the ladder's own change replaces such an override, and a learned start respects it)",
        "and the keys of a feature (`--features` switches the feature as a whole) among them.",
        "",
        "| verl key | set by |",
        "|---|---|",
    ]
    for key, name in PLAN_SETTING_KEYS.items():
        p = settings.BY_NAME[name]
        by = f"`{p.flag}` (`{p.env[0]}`)" if p.flag else f"`{p.env[0]}` (`[run] {p.key}`)"
        out.append(f"| `{key}` | {by} |")
    out += [f"| `{key}` | dapo-ops: {cell(why)} |" for key, why in PLAN_FIXED_KEYS.items()]
    return out + [""]


if __name__ == "__main__":  # pragma: no cover - doc generator
    sys.stdout.write(render_markdown())
