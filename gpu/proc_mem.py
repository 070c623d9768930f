"""Per-run device memory on a GPU shared by concurrent runs (gpu/i-holdout.sh): every INTERVAL seconds, the used
memory of every compute process (``nvidia-smi --query-compute-apps=pid,used_gpu_memory``) and the whole device's,
each process assigned to its run by the ``DAPO_OPS_RUN_ID`` in its environment (the supervisor gives it to every
verl process: docs/design.md). Lines ``t,run_id,mib`` (run_id ``device`` for the whole device) until SIGTERM.

Usage: python3 gpu/proc_mem.py OUT.csv [INTERVAL_S]
"""

import signal
import subprocess
import sys
import time

out, interval = sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
stop = False


def _stop(*_):
    global stop
    stop = True


signal.signal(signal.SIGTERM, _stop)


def run_of(pid: str) -> str:
    try:
        env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
    except OSError:
        return "gone"
    for kv in env:
        if kv.startswith(b"DAPO_OPS_RUN_ID="):
            return kv.split(b"=", 1)[1].decode()
    return "other"


def smi(*q: str) -> list[list[str]]:
    r = subprocess.run(["nvidia-smi", *q, "--format=csv,noheader,nounits"], capture_output=True, text=True)
    return [[c.strip() for c in line.split(",")] for line in r.stdout.splitlines() if line.strip()]


with open(out, "a", buffering=1) as fh:
    while not stop:
        t = time.time()
        per: dict[str, int] = {}
        for row in smi("--query-compute-apps=pid,used_gpu_memory"):
            if len(row) == 2 and row[1].isdigit():
                per[run_of(row[0])] = per.get(run_of(row[0]), 0) + int(row[1])
        for row in smi("--query-gpu=memory.used"):
            if row and row[0].isdigit():
                per["device"] = int(row[0])
        for rid, mib in per.items():
            fh.write(f"{t:.1f},{rid},{mib}\n")
        time.sleep(max(0.0, interval - (time.time() - t)))
