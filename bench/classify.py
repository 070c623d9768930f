"""Benchmark: classify_file cost vs log size (it reads a bounded tail, so it should be ~flat).

Builds a 1 MiB and a 1 GiB ``train.log`` under /var/tmp (realistic verl lines: step/metrics lines,
progress bars, Ray-prefixed worker INFO, a pprinted config) ending in a real NPU OOM tail
(tests/cases/handed/case-04-*.log), times :func:`dapo_ops.core.classify.classify_file` on each (median of N runs)
and prints a table with milliseconds and the ratio to the 1 MiB log. The files are removed afterwards.

    .venv/bin/python bench/classify.py [--runs 5] [--sparse] [--dir /var/tmp]

``--sparse`` makes the 1 GiB file sparse (a hole, then the realistic last 64 MiB): same tail work,
no 1 GiB of disk writes.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dapo_ops.core import classify as C  # noqa: E402

MiB = 1 << 20
OOM_TAIL = (ROOT / "tests" / "cases" / "handed" / "case-04-npu-oom-update-actor-raywrapped.log").read_bytes()


def _block(size: int) -> bytes:
    """About ``size`` bytes of healthy-looking verl output (ends with a newline)."""
    lines = []
    step = 1
    while sum(len(x) for x in lines) < size:
        lines.append(
            f"(TaskRunner pid=417) step:{step} - actor/pg_loss:np.float64(0.0042) - actor/grad_norm:"
            f"np.float64(0.377) - critic/score/mean:0.41 - response_length/mean:1874.2 - "
            f"timing_s/gen:236.1 - timing_s/update_actor:98.2 - perf/throughput:1234.5\n".encode()
        )
        lines.append(
            f"(TaskRunner pid=417) Training Progress:  {step % 100:2d}%|##   | {step}/100000 "
            f"[06:12<51:34:40, 372.07s/it]\r".encode()
        )
        lines.append(
            b"(WorkerDict pid=4926, ip=192.0.2.41) INFO 02-07 18:18:41 [block_pool.py:321] "
            b"Successfully reset prefix cache\n"
        )
        lines.append(
            b"(TaskRunner pid=417)  'actor_rollout_ref': {'actor': {'fsdp_config': {'param_offload': "
            b"False, 'optimizer_offload': False}}},\n"
        )
        step += 1
    return b"".join(lines)


def build(path: Path, size: int, sparse: bool) -> None:
    block = _block(MiB)
    body = size - len(OOM_TAIL)
    with open(path, "wb") as fh:
        if sparse and body > 64 * MiB:
            fh.truncate(body - 64 * MiB)
            fh.seek(body - 64 * MiB)
            body = 64 * MiB
        while body > 0:
            chunk = block[:body] if body < len(block) else block
            fh.write(chunk)
            body -= len(chunk)
        fh.write(b"\n" + OOM_TAIL)


def timed(path: Path, runs: int, tail: int) -> tuple[float, str]:
    ms = []
    v = None
    for _ in range(runs):
        t0 = time.perf_counter()
        v = C.classify_file(path, tail_bytes=tail, exit_code=1)
        ms.append((time.perf_counter() - t0) * 1000)
    return statistics.median(ms), v.cls


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--sparse", action="store_true")
    ap.add_argument("--dir", default="/var/tmp")
    ap.add_argument("--tail-mib", type=int, default=4, help="tail_bytes in MiB (the supervisor's default is 4)")
    args = ap.parse_args(argv)
    need = 1100 * MiB if not args.sparse else 80 * MiB
    if shutil.disk_usage(args.dir).free < need:
        print(
            f"bench/classify.py: not enough free space in {args.dir} ({need // MiB} MiB needed); use --sparse",
            file=sys.stderr,
        )
        return 2
    work = Path(tempfile.mkdtemp(prefix="dapo-classify-bench-", dir=args.dir))
    try:
        tail = args.tail_mib * MiB
        sizes = [("1 MiB", MiB), (f"{args.tail_mib} MiB (= tail)", tail), ("1 GiB", 1024 * MiB)]
        if args.tail_mib == 1:
            sizes.pop(1)
        rows = []
        for label, size in sizes:
            p = work / f"train-{size}.log"
            t0 = time.perf_counter()
            build(p, size, args.sparse)
            gen_s = time.perf_counter() - t0
            ms, cls = timed(p, args.runs, tail)
            rows.append((label, os.path.getsize(p), ms, cls, gen_s))
            p.unlink()
        base = rows[0][2]
        at_tail = next(r[2] for r in rows if r[1] >= tail)
        print(
            f"classify_file, median of {args.runs} runs, tail_bytes={args.tail_mib} MiB"
            f"{' (sparse 1 GiB)' if args.sparse else ''}; work is bounded by the tail, so time is flat once the"
            f" log is longer than it"
        )
        print(f"{'log':18} {'bytes':>13} {'ms':>9} {'vs 1 MiB':>9} {'vs tail':>8}  verdict      (build s)")
        for label, size, ms, cls, gen_s in rows:
            print(f"{label:18} {size:13d} {ms:9.1f} {ms / base:9.2f} {ms / at_tail:8.2f}  {cls:12} ({gen_s:.1f})")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
