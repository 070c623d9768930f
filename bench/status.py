"""Cost of a status look vs the runbook's grep, on one sandbox host, for a 1 MiB and a 1 GiB ``train.log``.

    DAPO_BENCH_ID=<n> .venv/bin/python bench/status.py [--host h1] [--repeat 7] [--keep]

Brings the sandbox bench up if needed (``sandbox/bench.sh up 1``), writes two runs into the host's
``/verl/dapo_runs`` (run.json via dapo_ops.runstate + a verl-like train.log of metrics lines, tqdm redraws with
``\\r`` and Ray worker chatter: 1 MiB and 1 GiB), then times, in one run:

- ``status``: ``dapo-ops -H <host> status --json --run <id>`` (the whole CLI: Python start, SSH, one docker exec
  of the probe reading run.json + a 64 KiB tail);
- ``look``: the same status look in-process (``tasks.status.probe`` + ``statusview.build_row``: SSH connect +
  one probe exec), what ``watch`` repeats every interval, without the CLI's Python start-up;
- ``grep``: the runbook's ``docker exec verl grep "Training Progress" <log> | tail -1`` over SSH (OpenSSH client).

Prints a table of median wall times (seconds) and the two ratios the issue targets:
status(1 GiB)/status(1 MiB) <= 1.3 and grep(1 GiB)/status(1 GiB) >= 20. Warm rows: the page cache is left as it is (the
1 GiB file is cached after the first read: the best case for grep); the ``1 GiB cold`` rows evict that one file
from the page cache first (``posix_fadvise(DONTNEED)``), as for a log nobody read lately. Removes the runs unless
``--keep``; does not tear the bench down (``sandbox/bench.sh down`` does).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from dapo_ops import runstate  # noqa: E402

BENCH_ID = os.environ.get("DAPO_BENCH_ID", "0")
STATE = Path("/var/tmp/dapo-bench-%s" % BENCH_ID)
DAPO_OPS = str(REPO / ".venv" / "bin" / "dapo-ops")


def step_block(step: int, total: int) -> bytes:
    """One training step's worth of verl console output (~8 KiB): worker chatter, tqdm redraws, metrics."""
    chatter = "".join("(WorkerDict pid=%d, ip=192.0.2.41) [rank-%d] rollout batch %d: generated 512 sequences, "
                      "mean len 812.4, kv cache usage 61.3%%\n" % (4926 + r, r, step) for r in range(8)) * 6
    bar = "".join("\rTraining Progress:  %d%%|%-10s| %d/%d [01:%02d<10:24:51, 96.63s/it]"
                  % (100 * step // total, "#" * (10 * step // total), step, total, s) for s in range(3))
    metrics = ("(TaskRunner pid=417) step:%d - actor/pg_loss:np.float64(-0.0123) - actor/entropy:np.float64(0.61)"
               " - critic/score/mean:np.float64(0.%02d) - response_length/mean:np.float64(812.4)"
               " - perf/throughput:np.float64(1234.5) - timing_s/step:np.float64(96.63)\n" % (step, step % 100))
    return (chatter + "(TaskRunner pid=417)" + bar + "\n" + metrics).encode()


def make_run(host: str, size: int, started_at: float) -> tuple[str, Path]:
    rid = runstate.new_run_id(started_at)
    host_rd = STATE / "hosts" / host / "runs" / rid
    host_rd.mkdir(parents=True)
    crd = runstate.run_dir_for("/verl/dapo_runs", rid)
    spec = {"run_id": rid, "run_dir": crd, "host": host, "container": "verl", "settings": {"steps": 100000},
            "features": [{"name": "flash_attn", "source": "default"}]}
    rec = runstate.new_record(spec, 0, now=started_at)
    rec.update(status="succeeded", attempt=1)
    runstate.write_run(host_rd, rec)
    written, step = 0, 1
    with open(host_rd / "train.log", "wb") as fh:
        fh.write(b"===== dapo-ops attempt 1 start 2026-11-29T15:00:00 features=flash_attn =====\n")
        buf = []
        while written < size:
            b = step_block(step, 100000)
            buf.append(b)
            written += len(b)
            step += 1
            if len(buf) >= 512:
                fh.write(b"".join(buf))
                buf = []
        fh.write(b"".join(buf))
    return rid, host_rd


def evict(path: Path) -> None:
    """Drop ``path``'s pages from the page cache (fdatasync + POSIX_FADV_DONTNEED on that one file only: the
    next read comes from disk, as for a log nobody has read lately). Other files' cache is untouched."""
    fd = os.open(str(path), os.O_RDONLY)
    try:
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def timed(cmd: list[str], env: dict | None = None) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    dt = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit("%s failed (rc %d): %s" % (" ".join(cmd[:4]), proc.returncode, proc.stderr.strip()[-300:]))
    return dt


def timed_look(host_name: str, rid: str) -> float:
    """One status look in-process (what ``watch`` repeats): new SSH connection + one probe docker exec + row."""
    from dapo_ops import inventory, statusview
    from dapo_ops.remote import Target
    from dapo_ops.tasks import status as st

    inv = inventory.load(str(STATE / "hosts.toml"))
    target = Target(inv.hosts[host_name])
    t0 = time.perf_counter()
    try:
        ans = st.probe(target, {"op": "status", "run_id": rid})
    finally:
        target.close()
    row = statusview.build_row(host_name, ans)
    dt = time.perf_counter() - t0
    if row.run_id != rid:
        raise SystemExit("status look failed: %s" % (row.error,))
    READ_BYTES[rid] = ans.get("probe_read_bytes")
    return dt


READ_BYTES: dict = {}


# (name, numerator, denominator); ratios are taken per round (same load) and the median is reported
RATIOS = [
    ("status(1 GiB) / status(1 MiB)", ("status", "1 GiB"), ("status", "1 MiB")),
    ("grep(1 GiB) / status(1 GiB)", ("grep", "1 GiB"), ("status", "1 GiB")),
    ("grep(1 GiB cold) / status(1 GiB cold)", ("grep", "1 GiB cold"), ("status", "1 GiB cold")),
    ("look(1 GiB) / look(1 MiB)", ("look", "1 GiB"), ("look", "1 MiB")),
    ("grep(1 GiB) / look(1 GiB)", ("grep", "1 GiB"), ("look", "1 GiB")),
]
TARGETS = {
    "status(1 GiB) / status(1 MiB)": (1.3, lambda r, t: r <= t, "<= 1.3"),
    "grep(1 GiB) / status(1 GiB)": (20.0, lambda r, t: r >= t, ">= 20"),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="h1")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--keep", action="store_true", help="keep the two runs on the host")
    args = ap.parse_args()
    if not (STATE / "hosts.toml").exists():
        subprocess.run(["bash", str(REPO / "sandbox" / "bench.sh"), "up", "1"], check=True,
                       env=dict(os.environ, DAPO_BENCH_ID=BENCH_ID))
    env = dict(os.environ, DAPO_OPS_INVENTORY=str(STATE / "hosts.toml"))
    ssh = ["ssh", "-F", str(STATE / "ssh" / "ssh_config"), args.host]
    now = time.time()
    runs = {}
    try:
        for label, size in (("1 MiB", 1 << 20), ("1 GiB", 1 << 30)):
            t0 = time.perf_counter()
            runs[label] = make_run(args.host, size, now)
            now += 1
            print("wrote %s train.log in %.1f s" % (label, time.perf_counter() - t0), file=sys.stderr)
        os.sync()                      # the 1 GiB just written must not be flushed while we time
        for _, rd in runs.values():
            evict(rd / "train.log")
        results: dict[tuple[str, str], list[float]] = {}
        pair_ratios: dict[str, list[float]] = {}
        (rid_s, _), (rid_b, rd_b) = runs["1 MiB"], runs["1 GiB"]
        cmd = {rid: ([DAPO_OPS, "-H", args.host, "status", "--json", "--run", rid],
                     ssh + ["docker exec verl grep 'Training Progress' /verl/dapo_runs/%s/train.log | tail -1" % rid])
               for rid in (rid_s, rid_b)}
        for i in range(args.repeat + 1):   # round 0 warms up and is not counted
            order = [("1 MiB", rid_s), ("1 GiB", rid_b)]
            if i % 2:
                order.reverse()            # back to back, alternating, so load drift hits both sizes equally
            sample: dict[tuple[str, str], float] = {}
            for label, rid in order:
                sample[("status", label)] = timed(cmd[rid][0], env)
            for label, rid in order:
                sample[("look", label)] = timed_look(args.host, rid)
            for label, rid in order:
                sample[("grep", label)] = timed(cmd[rid][1])
            evict(rd_b / "train.log")      # cold page cache for that one file: a log nobody read lately
            sample[("status", "1 GiB cold")] = timed(cmd[rid_b][0], env)
            evict(rd_b / "train.log")
            sample[("grep", "1 GiB cold")] = timed(cmd[rid_b][1])
            if not i:
                continue
            for k, v in sample.items():
                results.setdefault(k, []).append(v)
            for name, num, den in RATIOS:
                pair_ratios.setdefault(name, []).append(sample[num] / sample[den])
        med = {k: statistics.median(v) for k, v in results.items()}
        print("%-8s %-11s %10s %10s %10s" % ("command", "log", "median s", "min s", "max s"))
        for (c, label), v in sorted(results.items()):
            print("%-8s %-11s %10.3f %10.3f %10.3f" % (c, label, med[(c, label)], min(v), max(v)))
        print()
        print("%-38s %14s %12s %8s %s" % ("ratio", "median/round", "of medians", "target", "met"))
        for name, num, den in RATIOS:
            r = statistics.median(pair_ratios[name])
            target = TARGETS.get(name)
            met = "-" if target is None else ("yes" if target[1](r, target[0]) else "NO")
            print("%-38s %14.2f %12.2f %8s %s" % (name, r, med[num] / med[den],
                                                  "-" if target is None else target[2], met))
        for label, (rid, _) in runs.items():
            print("%-38s %8s" % ("bytes read by the probe, %s log" % label, READ_BYTES.get(rid)))
        print("\nstatus = the dapo-ops CLI end to end (Python start + imports, SSH, one docker exec);"
              "\nlook = one status look in-process (SSH connect + one probe docker exec + row), what watch repeats;"
              "\ngrep = ssh <host> docker exec verl grep 'Training Progress' <log> | tail -1 (OpenSSH client).")
    finally:
        if not args.keep:
            for _, rd in runs.values():
                shutil.rmtree(rd, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
