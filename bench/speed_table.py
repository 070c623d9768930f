"""Tool vs verl's own command: seconds per step, rollout tokens/s, peak memory, per-phase times and the resolved
configs' differences, from two verl train.logs.

Usage: ``python bench/speed_table.py TOOL_TRAIN_LOG VERL_TRAIN_LOG [--skip 1] [--gpu-mem TOOL.csv VERL.csv]
[--csv bench/speed.csv --spec TOOL_SPEC_JSON --model NAME --device NAME]``.
With ``--csv`` the pair also becomes one row of ``bench/speed.csv`` (:data:`CSV_COLUMNS`; :func:`csv_row`), added
or replacing the row of the same model, device and measured means.
Reads verl's console step lines with the project's one log grammar (``dapo_ops.core.logformat.parse_metrics_line``:
``step:N - key:value - ...``, ``verl/utils/logger/aggregate_logger.py``): ``timing_s/step`` (s),
``perf/total_num_tokens`` (tokens of the step), ``timing_s/<phase>`` (gen, old_log_prob, update_actor,
update_weights, adv), ``actor/perf/max_memory_allocated_gb`` (older: ``perf/...``). The first ``--skip`` steps
(warm-up: CUDA graphs, JIT) are left out of the means. Also reads the config verl prints at start
(``verl/trainer/main_ppo.py``: ``pprint(OmegaConf.to_container(config, resolve=True))``) and lists the keys whose
resolved values differ. Prints markdown tables; ratios are tool/verl, except for times (s/step, phases), where the
ratio is verl/tool: >= 1.0 means the tool is not slower."""

from __future__ import annotations

import argparse
import ast
import csv
import gzip
import json
import re
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from dapo_ops.core import logformat, memfit  # noqa: E402

CSV_COLUMNS = ("model", "params_b", "prompt", "response", "steps", "tool_s_step", "verl_s_step", "device")
PHASES = ("gen", "old_log_prob", "update_actor", "update_weights", "adv")
# resolved-config keys that name files, runs or directories: bookkeeping, not behaviour
_BOOKKEEPING = re.compile(r"(_dir|path|_files|experiment_name|project_name)$")


def read_log(path: str | Path) -> str:
    """A log's text; ``*.gz`` (the fixtures keep long logs gzipped) decompressed."""
    raw = Path(path).read_bytes()
    return (gzip.decompress(raw) if str(path).endswith(".gz") else raw).decode("utf-8", errors="replace")


def steps(path: str | Path) -> dict[int, dict[str, float]]:
    """``{step: {metric: value}}`` of a verl train.log (the last line of a step wins)."""
    text = read_log(path)
    return dict(filter(None, (logformat.parse_metrics_line(ln) for ln in logformat.split_lines(text))))


def figures(path: str | Path, skip: int = 1) -> dict[str, float]:
    """Means over the steps after ``skip``: s/step, tokens/s, peak allocated GB (max), and ``<phase> s`` for
    each of :data:`PHASES`. Raises ``SystemExit`` when the log has no step line."""
    st = steps(path)
    rows = [v for k, v in sorted(st.items()) if k > skip] or list(st.values())
    if not rows:
        raise SystemExit(f"{path}: no 'step:N - ...' lines")

    def mean(key: str) -> float:
        vals = [r[key] for r in rows if key in r]
        return statistics.mean(vals) if vals else float("nan")

    tps = [
        r["perf/total_num_tokens"] / r["timing_s/step"]
        for r in rows
        if r.get("timing_s/step") and "perf/total_num_tokens" in r
    ]
    out = {
        "steps": float(len(rows)),
        "s/step": mean("timing_s/step"),
        "tokens/s (total_num_tokens/step)": statistics.mean(tps) if tps else float("nan"),
        "peak alloc GB": max(
            r.get("actor/perf/max_memory_allocated_gb", r.get("perf/max_memory_allocated_gb", float("nan")))
            for r in rows
        ),
    }
    out.update({f"{p} s": mean(f"timing_s/{p}") for p in PHASES})
    return out


def is_time(key: str) -> bool:
    """A figure where lower is better (``s/step``, ``<phase> s``)."""
    return key == "s/step" or key.endswith(" s")


def ratio(key: str, tool: float, verl: float) -> float:
    """tool/verl for amounts, verl/tool for times (:func:`is_time`): >= 1.0 = the tool is not worse."""
    if is_time(key):
        return verl / tool if tool else float("nan")
    return tool / verl if verl else float("nan")


_WARNING = re.compile(r"\S+\.py:\d+: \w*Warning: ")


def printed_config(path: str | Path) -> dict[str, Any]:
    """The resolved config verl printed at start, flattened to dotted keys (``actor_rollout_ref.actor.strategy``).
    The pprint spans many lines, each behind Ray's ``(TaskRunnerV1 pid=N)`` prefix; the same process's Python
    warnings (``file.py:N: UserWarning: ...`` + the source line) can land between them, even mid-line (stderr is not
    buffered like stdout: verl's console by hand, 2026-12-07), and are left out. Raises ``ValueError`` when the
    log holds none."""
    buf: str | None = None
    skip = False  # the source line Python prints under a warning
    for raw in read_log(path).splitlines():
        line = logformat.strip_prefixes(logformat.strip_ansi(raw))
        if buf is None:
            i = line.find("{'actor_rollout_ref'")
            if i < 0:
                continue
            buf = line[i:]
            continue
        if skip or _WARNING.match(line):  # stderr's warnings land inside the stdout pprint (a line break is harmless)
            skip = not skip
            continue
        buf += "\n" + line
        if buf.count("{") != buf.count("}"):  # not closed yet: parse only when the braces balance (linear)
            continue
        try:
            tree = ast.literal_eval(buf.strip())
        except SyntaxError:
            continue
        return _flat(tree)
    raise ValueError(f"{path}: no printed config")


def _flat(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def config_diff(tool_log: str | Path, verl_log: str | Path) -> dict[str, tuple[Any, Any]]:
    """``{key: (tool value, verl value)}`` for every resolved key that differs (absent = ``'<absent>'``), names,
    paths and directories left out."""
    a, b = printed_config(tool_log), printed_config(verl_log)
    return {
        k: (a.get(k, "<absent>"), b.get(k, "<absent>"))
        for k in sorted(set(a) | set(b))
        if a.get(k, "<absent>") != b.get(k, "<absent>") and not _BOOKKEEPING.search(k)
    }


def smi_peak(path: str | Path) -> float:
    """Peak ``memory.used`` MiB of an nvidia-smi CSV sample file (gpu/lib.sh start_sampler)."""
    peak = 0.0
    with open(path) as f:
        for row in csv.reader(f):
            for cell in row[1:2]:
                m = re.search(r"(\d+)", cell)
                if m:
                    peak = max(peak, float(m.group(1)))
    return peak


def csv_row(
    tool_log: str | Path, verl_log: str | Path, spec: dict[str, Any], model: str, device: str, skip: int
) -> dict[str, str]:
    """One ``bench/speed.csv`` row of a measured pair: ``params_b`` from the model shape the tool's spec recorded
    (``spec.learn.key.model``, :func:`dapo_ops.core.memfit.param_count`, billions), ``prompt`` / ``response`` from
    the config verl printed (``data.max_prompt_length`` / ``data.max_response_length``, tokens; both runs must
    agree), ``steps`` the measured steps (after ``skip``) of the shorter run, s/step the means of
    :func:`figures`. Raises ``ValueError`` when the runs' shapes differ or the spec has no model shape."""
    cfg_t, cfg_v = printed_config(tool_log), printed_config(verl_log)
    shape = [(cfg_t.get(k), cfg_v.get(k)) for k in ("data.max_prompt_length", "data.max_response_length")]
    if any(a != b for a, b in shape):
        raise ValueError(f"the two runs' prompt/response lengths differ: {shape}")
    cfg = ((spec.get("learn") or {}).get("key") or {}).get("model")
    if not cfg:
        raise ValueError("the tool's spec.json records no model shape (spec.learn.key.model)")
    params = memfit.param_count(memfit.Model.from_config(cfg))
    t, v = figures(tool_log, skip), figures(verl_log, skip)
    return {
        "model": model,
        "params_b": f"{params / 1e9:.3f}",
        "prompt": str(shape[0][0]),
        "response": str(shape[1][0]),
        "steps": str(int(min(t["steps"], v["steps"]))),
        "tool_s_step": f"{t['s/step']:.3f}",
        "verl_s_step": f"{v['s/step']:.3f}",
        "device": device,
    }


def write_row(path: str | Path, row: dict[str, str]) -> list[dict[str, str]]:
    """Add ``row`` to the CSV at ``path`` (created with :data:`CSV_COLUMNS`), dropping an equal row first; returns
    the rows written."""
    p = Path(path)
    rows = list(csv.DictReader(p.open())) if p.exists() else []
    rows = [r for r in rows if r != row] + [row]
    with p.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("tool_log")
    ap.add_argument("verl_log")
    ap.add_argument("--skip", type=int, default=1)
    ap.add_argument("--gpu-mem", nargs=2, metavar=("TOOL_CSV", "VERL_CSV"))
    ap.add_argument("--csv", help="add the pair as a row of this CSV (bench/speed.csv)")
    ap.add_argument("--spec", help="the tool run's spec.json (the model shape, for params_b)")
    ap.add_argument("--model", help="the model's name in the row (e.g. qwen3-1.7b)")
    ap.add_argument("--device", help="the device's name in the row (e.g. H200)")
    a = ap.parse_args()
    if a.csv:
        if not (a.spec and a.model and a.device):
            ap.error("--csv needs --spec, --model and --device")
        try:
            row = csv_row(a.tool_log, a.verl_log, json.loads(Path(a.spec).read_text()), a.model, a.device, a.skip)
        except (OSError, ValueError) as e:  # the table below still prints: the row is the part that failed
            print(f"speed_table: no {a.csv} row: {e}", file=sys.stderr)
        else:
            write_row(a.csv, row)
    t, v = figures(a.tool_log, a.skip), figures(a.verl_log, a.skip)
    if a.gpu_mem:
        t["peak nvidia-smi MiB"], v["peak nvidia-smi MiB"] = smi_peak(a.gpu_mem[0]), smi_peak(a.gpu_mem[1])
    print("| figure | tool | verl's command | ratio |")
    print("|---|---|---|---|")
    for k in t:
        print(f"| {k} | {t[k]:.3f} | {v[k]:.3f} | {ratio(k, t[k], v[k]):.3f}{' (verl/tool)' if is_time(k) else ''} |")
    try:
        diff = config_diff(a.tool_log, a.verl_log)
    except ValueError as e:
        print(f"\n(no config diff: {e})")
        return
    print("\n| resolved key that differs | tool | verl's command |")
    print("|---|---|---|")
    for k, (x, y) in diff.items():
        print(f"| `{k}` | {x!r} | {y!r} |")


if __name__ == "__main__":
    main()
