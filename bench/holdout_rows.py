#!/usr/bin/env python3
"""Memory-fit holdout rows (issue 33 item 3) from the run dirs of gpu/i-holdout.sh: one CSV line per measured peak,
in bench/memory_fit.csv's columns with ``split=holdout`` and ``estimate_gib`` empty (``bench/memory_fit.py --write``
fills it; these rows never set a constant).

Per run dir (``spec.json``, ``run.json``, ``train.log`` as the tool wrote them):

* ``update`` / ``torch-max-allocated``: the largest ``actor/perf/max_memory_allocated_gb`` of train.log (verl
  0.9.1 ``verl/workers/engine_workers.py:219``: the actor process's ``torch.cuda.max_memory_allocated``, GiB);
* ``peak`` / ``nvidia-smi``: the run's largest sum of its processes' device memory in ``--proc-mem``
  (gpu/proc_mem.py: processes assigned by ``DAPO_OPS_RUN_ID``; MiB / 1024);
* ``<phase>`` / ``oom``: a run whose attempt ended ``oom-device`` (a real OOM; the measured figure is a lower bound:
  the run's device memory at the failure).

The run's own token budgets (``spec.json`` ``settings.token_budgets``: what the plan's fastest fit chose,
``dapo_ops/core/fastfit.py``) go to ``update_tokens`` / ``logprob_tokens`` (empty: the run had none, so verl got the
tool's 2x / 3x (prompt + response) budgets); ``util`` and ``gc`` are the share and gradient checkpointing the run
got (the fit's, when it chose them). A model dir named ``<shape>-p<N>`` (gpu/p-holdout.sh: prompts padded to N
tokens) is the shape ``<shape>`` of bench/memory_fit_models.json.

Usage: ``python3 bench/holdout_rows.py RUNS_DIR [--proc-mem CSV] [--device-gib 139.80] [--device H200]
[--script gpu/i-holdout.sh]`` (RUNS_DIR holds one dir per inventory host). Prints the lines; a run without a figure
prints a ``#`` comment saying why.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import re
import sys
from pathlib import Path

ANSI = re.compile(r"\x1b\[[0-9;]*m")
PEAK = re.compile(r"actor/perf/max_memory_allocated_gb:([0-9.]+)")


def proc_mem_peaks(path: Path | None) -> dict[str, float]:
    """Run id -> the largest MiB the run's processes held together at one sample."""
    if path is None:
        return {}
    per_t: dict[tuple[str, str], int] = {}
    for line in _text(path).splitlines():
        t, rid, mib = line.split(",")
        per_t[(t, rid)] = per_t.get((t, rid), 0) + int(mib)
    out: dict[str, float] = {}
    for (_, rid), mib in per_t.items():
        out[rid] = max(out.get(rid, 0), mib)
    return out


def _text(path: Path) -> str:
    """``path``'s text, or its gzipped copy ``path.gz``'s (the fixtures keep logs gzipped); "" when neither is."""
    if path.exists():
        return path.read_text(errors="replace")
    gz = path.with_name(path.name + ".gz")
    return gzip.decompress(gz.read_bytes()).decode(errors="replace") if gz.exists() else ""


def _line(fields: list[str]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="").writerow(fields)
    return buf.getvalue()


UPDATE_BUDGET = "actor_rollout_ref.actor.ppo_max_token_len_per_gpu"
LOGPROB_BUDGET = "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu"


def rows_of(
    run_dir: Path, peaks: dict[str, float], device_gib: float, device: str = "H200", script: str = "gpu/i-holdout.sh"
) -> list[str]:
    spec = json.loads((run_dir / "spec.json").read_text())
    rec = json.loads((run_dir / "run.json").read_text())
    s = spec["settings"]
    feats = {f["name"] for f in rec.get("features") or spec.get("features") or []}
    model = re.sub(r"-p[0-9]+$", "", Path(s["model_path"]).parent.name)
    rid = spec["run_id"]
    budgets = s.get("token_budgets") or {}
    tail = [str(budgets.get(UPDATE_BUDGET) or ""), str(budgets.get(LOGPROB_BUDGET) or "")]
    name = f"{run_dir.name}-{model}-r{s['max_response_length']}" + (
        "-megatron" if spec["framework"] == "megatron" else ""
    )
    cols = [
        name + ("-offload" if "offload" in feats else ""),
        "holdout", device, f"{device_gib:.2f}", model, spec["framework"], "dapo", "1", str(s["rollout_tp"]),
        str(s["gpu_memory_utilization"]), str(s["max_prompt_length"]), str(s["max_response_length"]),
        str(s["micro_batch_size"]), str(s["micro_batch_size"]), "1" if "dynamic_batch" in feats else "0",
        "1" if "gradient_checkpointing" in feats else "0", "1" if "offload" in feats else "0", str(s["steps"]),
    ]  # fmt: skip
    src = f"real-verl {script} run {rid} ({rec['status']}, step {rec.get('step') or 0}/{s['steps']})"
    out = []
    vals = [float(v) for v in PEAK.findall(ANSI.sub("", _text(run_dir / "train.log")))]
    if vals:
        out.append(_line(cols + ["update", "torch-max-allocated", f"{max(vals):.2f}", "", src + " train.log"] + tail))
    mib = peaks.get(rid)
    verdict = (rec.get("verdict") or {}) if rec["status"] != "succeeded" else {}
    if verdict.get("cls") == "oom-device":
        phase = (verdict.get("detail") or {}).get("phase") or "update"
        low = f"{mib / 1024:.2f}" if mib else f"{device_gib - 1:.2f}"
        out.append(_line(cols + [phase, "oom", low, "", f"{src}: real OOM in {phase}, a lower bound"] + tail))
    elif mib and rec["status"] == "succeeded":
        out.append(_line(cols + ["peak", "nvidia-smi", f"{mib / 1024:.2f}", "", src + f" proc-mem {mib} MiB"] + tail))
    if not out:
        out.append(f"# {run_dir.name}: no figure ({rec['status']}, verdict {verdict.get('cls')})")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs")
    p.add_argument("--proc-mem", type=Path, default=None)
    p.add_argument("--device-gib", type=float, default=139.80)
    p.add_argument("--device", default="H200", help="the device column (nvidia-smi's name, short)")
    p.add_argument("--script", default="gpu/i-holdout.sh", help="the script named in the source column")
    a = p.parse_args(argv)
    peaks = proc_mem_peaks(a.proc_mem)
    for d in sorted(Path(a.runs).iterdir()):
        if (d / "spec.json").exists() and (d / "run.json").exists():
            print("\n".join(rows_of(d, peaks, a.device_gib, a.device, a.script)))
        else:
            print(f"# {d.name}: no run files", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
