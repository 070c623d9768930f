"""Input checks from the probe's facts: the ``model`` dir (weights, tokenizer, context length vs prompt +
response), each ``data:<file>`` parquet (verl RL schema) and the ``disk`` space for checkpoints. Pure.
"""

from __future__ import annotations

from dapo_ops.control.preflight.plan_view import PlanView
from dapo_ops.control.preflight.result import FAIL, OK, WARN, Check
from dapo_ops.control.remote.commands import q
from dapo_ops.core import datafeed, memfit, sanity


#: checkpoint bytes per byte of bf16 weights for one FSDP save: fp32 model shards (2x) + Adam m, v (4x) + the
#: HF copy (1x). verl saves ``model_world_size_*`` / ``optim_world_size_*`` / ``huggingface/`` per step (verl/trainer/ppo/v1/trainer_base.py).
CKPT_FACTOR = 7.0


GIB = 1 << 30


#: what a run with ``save_freq <= 0`` leaves for a retry (the preflight disk check and the dry run say it)
NO_CHECKPOINTS = "a retry after a failure starts over from step 0"


def checkpoint_saves(steps: int, save_freq: int) -> int:
    """Checkpoints verl writes in ``steps`` steps: every ``save_freq`` steps and the last, none when ``save_freq <= 0``
    (``verl/trainer/ppo/v1/trainer_base.py:481-483``); ``steps`` 0 (unknown): 1."""
    if save_freq <= 0:
        return 0
    return steps // save_freq + (1 if steps % save_freq else 0) if steps else 1


def stays_on_disk(saves: int, keep: int) -> int:
    """Full checkpoints on disk at once for ``saves`` saves with ``trainer.max_actor_ckpt_to_keep`` = ``keep``.

    verl's rotation list is in process memory and starts empty at every attempt
    (``verl/utils/checkpoint/checkpoint_manager.py:59,166-194``); the supervisor prunes to ``keep`` before each
    attempt (dapo_ops/agent/supervisor/checkpoints.py ``prune_checkpoints``), so a retried or resumed attempt holds
    up to ``keep`` earlier ones plus ``keep`` of its own: ``min(saves, 2 * keep)`` (``keep`` < 1: every save).
    """
    return saves if keep < 1 else min(saves, 2 * keep)


def train_feed(pv: PlanView, data: list[dict]) -> datafeed.DataFeed | None:
    """What the train files feed (:class:`dapo_ops.core.datafeed.DataFeed`) from the probe's parquet facts
    (``data``: one dict per file, ``path``, ``ok``, ``rows``), or None when a train file is unreadable or uncounted."""
    train = pv.s("train_file")
    names = {str(x) for x in (train if isinstance(train, (list, tuple)) else [train]) if x}
    got = [d.get("rows") for d in data if d.get("path") in names]
    rows = [r for r in got if isinstance(r, int)]
    if not rows or len(rows) != len(got):
        return None
    extra = list(pv.settings["extra_overrides"] or [])
    return datafeed.DataFeed(
        rows=sum(rows),
        train_batch_size=int(pv.settings["train_batch_size"]),
        epochs=datafeed.total_epochs(extra),
        upper_bound=datafeed.filters_overlong(extra),
    )


def _data_feed_check(pv: PlanView | None, data: list[dict]) -> Check | None:
    """Check ``data-feed``: the steps the train data feeds before verl's epoch limit against ``--steps``:
    fail with the numbers and the fix, warn under ``allow_short_data``, ok with the figure."""
    if pv is None:
        return None
    feed = train_feed(pv, data)
    if feed is None:
        return None
    steps = int(pv.settings["steps"])
    short = feed.shortfall(steps)
    if short is None:
        bound = " (data.filter_overlong_prompts may drop rows: an upper bound)" if feed.upper_bound else ""
        return Check("data-feed", OK, "%s >= --steps %d%s" % (feed.figure(), steps, bound))
    if feed.steps_per_epoch and pv.s("allow_short_data"):
        return Check("data-feed", WARN, short.split(" (--allow-short-data", 1)[0], "allowed by allow_short_data")
    return Check("data-feed", FAIL, short.split("; use ", 1)[0], "use " + short.split("; use ", 1)[1])


def sanity_checks(pv: PlanView | None) -> list[Check]:
    """Checks ``sanity:<key>`` (warn, never fail: the run still starts): the plan's verl values far outside what RL
    fine-tuning uses (:data:`dapo_ops.core.sanity.RANGES`), one line each."""
    if pv is None:
        return []
    try:  # the trainer pool's devices (memfit's one rule)
        devices = memfit.trainer_world(pv.settings, pv.spec.mode == "one-step-off")
    except (KeyError, TypeError, ValueError):
        devices = None
    out = []
    for line in sanity.warnings(pv.argv, devices):
        key = line.split("=", 1)[0]
        out.append(
            Check(
                "sanity:" + key,
                WARN,
                line,
                "the run still starts; if it is not deliberate, set it with --override %s=<value>" % key
                if "train_batch_size" not in key
                else "the run still starts; if it is not deliberate, raise --train-batch-size",
            )
        )
    return out


def data_check_name(path: str) -> str:
    """The preflight row of a data file: ``data:<file name>`` for a plain path, else ``data:`` and the whole path
    shell-quoted (a trial's ``--train-file '/x/$(touch /tmp/pwned).parquet'`` showed ``data:pwned).parquet``: the
    last ``/`` inside the ``$(...)`` cut it, and the row named no file the user gave)."""
    return "data:" + (path.rsplit("/", 1)[-1] if q(path) == path else q(path))


def _input_checks(host, pv: PlanView | None, p: dict) -> list[Check]:
    out: list[Check] = []
    m = p.get("model")
    if m is not None:
        if m.get("ok"):
            gb = m.get("weights_bytes", 0) / GIB
            msg = f"{m['path']}: {len(m.get('weights', []))} weight file(s), {gb:.2f} GiB, tokenizer {','.join(m['tokenizer'])}"
            ctx = m.get("max_position_embeddings")
            s = pv.settings if pv is not None else {}
            need = int(s["max_prompt_length"]) + int(s["max_response_length"]) if s else 0
            if ctx and need and need > ctx:
                out.append(
                    Check(
                        "model",
                        FAIL,
                        f"max_prompt_length + max_response_length = {need} exceeds the model's "
                        f"max_position_embeddings {ctx} ({m['path']}/config.json)",
                        f"lower --max-response-length to <= {ctx - int(s['max_prompt_length'])}, or give "
                        f"--max-position-embeddings {need} (MAX_POSITION_EMBEDDINGS) if the model supports it",
                    )
                )
            else:
                out.append(Check("model", OK, msg + (f", context {ctx}" if ctx else "")))
        else:
            probs = m.get("problems") or ["model dir unusable"]
            more = f" (+{len(probs) - 1} more)" if len(probs) > 1 else ""
            out.append(Check("model", FAIL, probs[0] + more, "run `inv prepare` to fetch the model, or fix model_path"))
    for d in p.get("data") or []:
        path = str(d["path"])
        name = data_check_name(path)
        if d.get("ok"):
            out.append(Check(name, OK, f"{q(path)}: {d.get('rows')} rows, verl RL schema"))
        else:
            probs = [x.replace(path, q(path)) for x in d.get("problems") or ["unusable"]]
            if d.get("missing"):
                fix = (
                    f"add column(s) {', '.join(d['missing'])} (verl/utils/dataset/rl_dataset.py: prompt = chat messages, data_source, "
                    "reward_model = {'ground_truth': ...}) or use verl's data preprocessing scripts"
                )
            elif not d.get("exists"):
                fix = "run `inv prepare` to fetch it, or fix train_file / val_file"
            else:
                fix = "re-create the file (verl's examples/data_preprocess) or `inv prepare` to fetch it again"
            more = f" (+{len(probs) - 1} more)" if len(probs) > 1 else ""
            out.append(Check(name, FAIL, probs[0] + more, fix))
    feed = _data_feed_check(pv, p.get("data") or [])
    if feed is not None:
        out.append(feed)
    disk = p.get("disk")
    if disk:
        if disk.get("error"):
            out.append(
                Check("disk", WARN, f"cannot stat {disk['checked']}: {disk['error']}", "check the checkpoint dir")
            )
        else:
            free = disk["free"]
            wb = (m or {}).get("weights_bytes") or 0
            if not wb:
                out.append(
                    Check(
                        "disk",
                        OK if free > 50 * GIB else WARN,
                        f"{free / GIB:.1f} GiB free at {disk['checked']} (no model size to estimate from)",
                        "" if free > 50 * GIB else "free space where checkpoints go",
                    )
                )
            else:
                one = wb * CKPT_FACTOR
                saves = 1
                if pv is not None:
                    saves = checkpoint_saves(int(pv.settings["steps"]), int(pv.settings["save_freq"]))
                    keep = pv.settings["max_actor_ckpt_to_keep"]
                    if keep and saves:  # what stays: see stays_on_disk
                        saves = stays_on_disk(saves, int(keep))
                total = one * saves
                msg = (
                    f"{free / GIB:.1f} GiB free at {disk['checked']}; one checkpoint ~{one / GIB:.1f} GiB, "
                    f"{saves} save(s) on disk at once ~{total / GIB:.1f} GiB"
                )
                if not saves:  # only with a plan (pv): without one a save is assumed
                    freq = pv.settings["save_freq"] if pv is not None else None
                    out.append(
                        Check(
                            "disk",
                            OK,
                            f"{free / GIB:.1f} GiB free at {disk['checked']}; save_freq {freq}: verl saves no checkpoint ({NO_CHECKPOINTS})",
                        )
                    )
                elif free < one:
                    out.append(Check("disk", FAIL, msg, "free space, or point runs_dir/ckpt_dir at a bigger disk"))
                elif free < total:
                    out.append(
                        Check("disk", WARN, msg, "raise save_freq, set trainer.max_actor_ckpt_to_keep, or free space")
                    )
                else:
                    out.append(Check("disk", OK, msg))
            if disk.get("writable") is False:
                out.append(
                    Check(
                        "disk",
                        FAIL,
                        f"{disk['checked']} is not writable in the container",
                        "bind-mount a writable runs_dir (inv container.create does)",
                    )
                )
    return out
