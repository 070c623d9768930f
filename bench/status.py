"""Cost of a status look vs the runbook's grep, on one sandbox host, for a 1 MiB and a 1 GiB ``train.log``.

    DAPO_BENCH_ID=<n> .venv/bin/python bench/status.py [--host h1] [--repeat 7] [--keep]

Brings the sandbox bench up if needed (``sandbox/bench.sh up 1``), writes two runs into the host's
``/verl/dapo_runs`` (run.json via dapo_ops.runstate + a verl-like train.log of metrics lines, tqdm redraws with
``\\r`` and Ray worker chatter: 1 MiB and 1 GiB), then times, in one run:

- ``status``: ``dapo-ops -H <host> status --json --run <id>`` (the whole CLI: Python start, SSH, one docker exec
  of the probe reading run.json + a 64 KiB tail);
- ``look``: the same status look in-process (``tasks.status.probe`` + ``statusview.build_row``: SSH connect +
  one probe exec), what
  ``watch`` repeats every interval, without the CLI's Python start-up;
- ``grep``: the runbook's ``docker exec verl grep "Training Progress" <log> | tail -1`` over SSH (OpenSSH client).

Prints a table of median wall times (seconds) and the two ratios the issue targets:
status(1 GiB)/status(1 MiB) <= 1.3 and grep(1 GiB)/status(1 GiB) >= 20. The page cache is left as it is (the
1 GiB file was just written, so grep reads it from memory: the best case for grep). Removes the two runs unless
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
        results: dict[tuple[str, str], list[float]] = {}
        for i in range(args.repeat):   # interleaved, order alternating, so load drift hits both sizes equally
            for label, (rid, _) in (list(runs.items()) if i % 2 == 0 else list(runs.items())[::-1]):
                log = "/verl/dapo_runs/%s/train.log" % rid
                results.setdefault(("status", label), []).append(
                    timed([DAPO_OPS, "-H", args.host, "status", "--json", "--run", rid], env))
                results.setdefault(("look", label), []).append(timed_look(args.host, rid))
                results.setdefault(("grep", label), []).append(
                    timed(ssh + ["docker exec verl grep 'Training Progress' %s | tail -1" % log]))
        med = {k: statistics.median(v) for k, v in results.items()}
        print("%-8s %-6s %10s %10s %10s" % ("command", "log", "median s", "min s", "max s"))
        for (cmd, label), v in sorted(results.items()):
            print("%-8s %-6s %10.3f %10.3f %10.3f" % (cmd, label, med[(cmd, label)], min(v), max(v)))
        r1 = med[("status", "1 GiB")] / med[("status", "1 MiB")]
        r2 = med[("grep", "1 GiB")] / med[("status", "1 GiB")]
        print()
        print("%-34s %8s %8s %s" % ("ratio", "value", "target", "met"))
        print("%-34s %8.2f %8s %s" % ("status(1 GiB) / status(1 MiB)", r1, "<= 1.3", "yes" if r1 <= 1.3 else "NO"))
        print("%-34s %8.2f %8s %s" % ("grep(1 GiB) / status(1 GiB)", r2, ">= 20", "yes" if r2 >= 20 else "NO"))
        r3 = med[("look", "1 GiB")] / med[("look", "1 MiB")]
        r4 = med[("grep", "1 GiB")] / med[("look", "1 GiB")]
        print("%-34s %8.2f %8s %s" % ("look(1 GiB) / look(1 MiB)", r3, "<= 1.3", "yes" if r3 <= 1.3 else "NO"))
        print("%-34s %8.2f %8s %s" % ("grep(1 GiB) / look(1 GiB)", r4, ">= 20", "yes" if r4 >= 20 else "NO"))
        for label, (rid, _) in runs.items():
            print("%-34s %8s" % ("bytes read by the probe, %s log" % label, READ_BYTES.get(rid)))
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
