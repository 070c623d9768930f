"""Tool vs verl's own command: seconds per step, rollout tokens/s, peak memory from two verl train.logs.

Usage: ``python bench/speed_table.py TOOL_TRAIN_LOG VERL_TRAIN_LOG [--skip 1] [--gpu-mem TOOL.csv VERL.csv]``.
Reads verl's console step lines (``step:N - key:value - ...``; ``verl/utils/tracking.py`` console logger):
``timing_s/step`` (s), ``perf/throughput`` (tokens/s/GPU over the whole step), ``timing_s/gen`` and
``response_length/mean`` x batch for rollout tokens/s, ``actor/perf/max_memory_allocated_gb`` (older: ``perf/...``). The first ``--skip``
steps (warm-up: CUDA graphs, JIT) are left out of the means. Prints a markdown table with ratio tool/verl
(for s/step the ratio verl/tool: >= 1.0 means the tool is not slower)."""

import argparse
import csv
import re
import statistics

_STEP = re.compile(r"step:(\d+) - (.*)")
_KV = re.compile(r"([\w/@.\-]+):(?:np\.\w+\()?([-+0-9.eE]+|nan|inf)")


def steps(path: str) -> dict[int, dict[str, float]]:
    """``{step: {metric: value}}`` from a verl train.log (ANSI codes stripped; last line per step wins)."""
    out: dict[int, dict[str, float]] = {}
    with open(path, errors="replace") as f:
        for line in f:
            m = _STEP.search(re.sub(r"\x1b\[[0-9;]*m", "", line))
            if m:
                out[int(m.group(1))] = {k: float(v) for k, v in _KV.findall(m.group(2))}
    return out


def figures(path: str, skip: int) -> dict[str, float]:
    """Means over the steps after ``skip``: s/step, throughput, rollout tokens/s, peak GB (max)."""
    st = steps(path)
    rows = [v for k, v in sorted(st.items()) if k > skip] or list(st.values())
    if not rows:
        raise SystemExit(f"{path}: no 'step:N - ...' lines")

    def mean(key):
        vals = [r[key] for r in rows if key in r]
        return statistics.mean(vals) if vals else float("nan")

    tps = [
        r["perf/total_num_tokens"] / r["timing_s/step"]
        for r in rows
        if "perf/total_num_tokens" in r and r.get("timing_s/step")
    ]
    return {
        "steps": len(rows),
        "s/step": mean("timing_s/step"),
        "gen s": mean("timing_s/gen"),
        "throughput tok/s/gpu": mean("perf/throughput"),
        "tokens/s (total_num_tokens/step)": statistics.mean(tps) if tps else float("nan"),
        "peak alloc GB": max(
            (
                r.get(
                    "actor/perf/max_memory_allocated_gb",  # verl 0.9.1's key (V1 trainer)
                    r.get("perf/max_memory_allocated_gb", float("nan")),
                )
                for r in rows
            ),
            default=0,
        ),
    }


def smi_peak(path: str) -> float:
    """Peak ``memory.used`` MiB of an nvidia-smi CSV sample file (gpu/lib.sh start_sampler)."""
    peak = 0.0
    with open(path) as f:
        for row in csv.reader(f):
            for cell in row[1:2]:
                m = re.search(r"(\d+)", cell)
                if m:
                    peak = max(peak, float(m.group(1)))
    return peak


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("tool_log")
    ap.add_argument("verl_log")
    ap.add_argument("--skip", type=int, default=1)
    ap.add_argument("--gpu-mem", nargs=2, metavar=("TOOL_CSV", "VERL_CSV"))
    a = ap.parse_args()
    t, v = figures(a.tool_log, a.skip), figures(a.verl_log, a.skip)
    if a.gpu_mem:
        t["peak nvidia-smi MiB"], v["peak nvidia-smi MiB"] = smi_peak(a.gpu_mem[0]), smi_peak(a.gpu_mem[1])
    print("| figure | tool | verl's command | ratio |")
    print("|---|---|---|---|")
    for k in t:
        inv = k in ("s/step", "gen s")  # lower is better: verl/tool
        r = (v[k] / t[k]) if inv and t[k] else (t[k] / v[k] if v[k] else float("nan"))
        print(f"| {k} | {t[k]:.3f} | {v[k]:.3f} | {r:.3f}{' (verl/tool)' if inv else ''} |")


if __name__ == "__main__":
    main()
