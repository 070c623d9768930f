"""Benchmark: the memory-fit estimate (dapo_ops/core/memfit.py) against peaks measured on real verl 0.9.1.

Reads ``bench/memory_fit.csv`` (one row per measured peak; the model shapes are in
``bench/memory_fit_models.json``), recomputes each row's estimate and prints a table with the relative
error, then the max relative error over the measured rows (goal <= 20 %). Rows with ``measure=oom`` are a
real OOM (the measured figure is a lower bound): they count as right when the estimate exceeds the device.

``split``: ``fit`` rows are those memfit's constants were calibrated on (every row before 2026-12-02); ``holdout``
rows were measured afterwards and never used to set a constant (issue 33 item 3). The holdout error is printed per
phase (``phase``/``measure``) and overall, apart from the fit residual.

    .venv/bin/python bench/memory_fit.py [--write]

``--write`` stores the recomputed estimates in the ``estimate_gib`` column. To add a measured run, append ONE
line to the CSV (columns: ``config,device,device_gib,model,framework,mode,world,rollout_tp,util,prompt,
response,ppo_micro,logprob_micro,dynamic,gc,offload,steps,phase,measure,measured_gib,estimate_gib,source,
update_tokens,logprob_tokens``;
``measure``: ``nvidia-smi`` (device peak of ``phase``, MiB/1024; phase ``peak``: the whole run's peak vs the
tightest estimated phase), ``torch-max-allocated`` (verl's
``actor/perf/max_memory_allocated_gb``: the actor process), ``oom``; ``dynamic=1``: verl's dynamic batch with the
budgets dapo-ops sets, 2x / 3x (prompt + response) for update / log-prob, unless ``update_tokens`` /
``logprob_tokens`` give the run's own: the budgets the plan's fastest fit chose, ``dapo_ops/core/fastfit.py``; empty
on the rows before it), and run ``--write``.
``bench/memory_fit_device.sh`` runs two more configurations on the GPU and prints their lines.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dapo_ops.core import memfit  # noqa: E402

CSV = ROOT / "bench" / "memory_fit.csv"
MODELS = ROOT / "bench" / "memory_fit_models.json"


def row_setup(r: dict) -> memfit.Setup:
    """The :class:`memfit.Setup` of one CSV row."""
    seq = int(r["prompt"]) + int(r["response"])
    one = lambda k: r[k].strip() in ("1", "true", "True")  # noqa: E731
    dyn = one("dynamic")
    return memfit.Setup(
        device_gib=float(r["device_gib"]),
        framework=r["framework"],
        colocated=r["mode"] != "one-step-off",
        world=int(r["world"]),
        rollout_tp=int(r["rollout_tp"]),
        util=float(r["util"]),
        seq=seq,
        update_tokens=(int(r.get("update_tokens") or 2 * seq) if dyn else int(r["ppo_micro"]) * seq),
        logprob_tokens=(int(r.get("logprob_tokens") or 3 * seq) if dyn else int(r["logprob_micro"]) * seq),
        gc=one("gc"),
        offload=one("offload"),
        adam_in_forward=int(r["steps"]) > 1,
    )


def evaluate(rows: list[dict], models: dict) -> list[dict]:
    """Each row with ``estimate`` (GiB), ``error`` (relative, None for oom rows) and ``ok``."""
    out = []
    for r in rows:
        est = memfit.estimate(memfit.Model.from_config(models[r["model"]]), row_setup(r))
        val = (
            est.actor_alloc_gib
            if r["measure"] == "torch-max-allocated"
            else est.peak_gib
            if r["phase"] == "peak"
            else est.phases[r["phase"]]
        )
        meas = float(r["measured_gib"])
        if r["measure"] == "oom":
            err, ok = None, val > est.device_gib
        else:
            err = (val - meas) / meas
            ok = abs(err) <= 0.20
        out.append(dict(r, estimate=round(val, 2), error=err, ok=ok))
    return out


def split_report(res: list[dict]) -> list[str]:
    """Lines: the fit residual, then the holdout error per phase (``phase``/``measure``) and overall (relative,
    signed mean and max of the absolute), with the holdout row count; holdout OOM rows as predicted / total."""
    out = []
    for split in ("fit", "holdout"):
        rows = [r for r in res if r.get("split", "fit") == split]
        errs = [r["error"] for r in rows if r["error"] is not None]
        ooms = [r for r in rows if r["error"] is None]
        if not rows:
            continue
        out.append(
            f"{split}: {len(errs)} measured rows, max |error| {max(map(abs, errs)):.1%}, mean error "
            f"{sum(errs) / len(errs):+.1%}; OOM rows predicted {sum(r['ok'] for r in ooms)}/{len(ooms)}"
        )
        if split == "holdout":
            for key in sorted({(r["phase"], r["measure"]) for r in rows if r["error"] is not None}):
                e = [r["error"] for r in rows if (r["phase"], r["measure"]) == key and r["error"] is not None]
                out.append(
                    f"  holdout {key[0]}/{key[1]}: {len(e)} rows, max |error| {max(map(abs, e)):.1%}, "
                    f"mean {sum(e) / len(e):+.1%}"
                )
    return out


def load() -> tuple[list[dict], dict]:
    with open(CSV, newline="") as fh:
        rows = list(csv.DictReader(fh))
    return rows, json.loads(MODELS.read_text())


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--write", action="store_true", help="store the estimates in the estimate_gib column")
    a = p.parse_args(argv)
    rows, models = load()
    res = evaluate(rows, models)
    print(f"{'config':<26} {'phase':<12} {'measure':<20} {'measured':>9} {'estimate':>9} {'error':>8}")
    for r in res:
        err = "OOM ok" if r["error"] is None and r["ok"] else "OOM MISS" if r["error"] is None else f"{r['error']:+.1%}"
        print(
            f"{r['config']:<26} {r['phase']:<12} {r['measure']:<20} {float(r['measured_gib']):>9.2f} "
            f"{r['estimate']:>9.2f} {err:>8}"
        )
    errs = [abs(r["error"]) for r in res if r["error"] is not None]
    ooms = [r for r in res if r["error"] is None]
    print(
        f"\n{len(errs)} measured rows: max relative error {max(errs):.1%} (goal <= 20 %); "
        f"{sum(r['ok'] for r in ooms)}/{len(ooms)} real OOMs predicted as not fitting"
    )
    for line in split_report(res):
        print(line)
    if a.write:
        fields = list(rows[0].keys())
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n")
        w.writeheader()
        for r, e in zip(rows, res):
            w.writerow(dict(r, estimate_gib=f"{e['estimate']:.2f}"))
        CSV.write_text(buf.getvalue())
    return 0 if all(r["ok"] for r in res) else 1


if __name__ == "__main__":
    sys.exit(main())
