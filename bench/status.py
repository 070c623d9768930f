"""Cost of a status look vs the runbook's grep: 1 host with a 1 MiB and a 1 GiB ``train.log``, the import budget,
and a fleet row (the grep looped over N hosts vs one ``inv status`` over the same hosts, 1 GiB logs each).

    DAPO_BENCH_ID=<n> .venv/bin/python bench/status.py [--host h1] [--repeat 7] [--fleet 8] [--keep] [--only-fleet]

Brings the sandbox bench up to the hosts it needs (``sandbox/bench.sh up <max(1, fleet)>``), compiles the
package's bytecode (as an install has it; this machine sets PYTHONDONTWRITEBYTECODE), writes two runs into the
host's ``/verl/dapo_runs`` (run.json via dapo_ops.agent.runfiles + a verl-like train.log of metrics lines, tqdm redraws
with ``\\r`` and Ray worker chatter: 1 MiB and 1 GiB), then times, in one run, alternating:

- ``status``: ``inv status --json --run <id> -H <host>`` (the whole CLI: Python start, imports, one probe over the
  host's reused SSH connection, :mod:`dapo_ops.control.remote.sshmux`; the warm-up round starts the control master);
- ``status new-conn``: the same after closing the control masters (a first look: the master starts and connects);
- ``dapo-ops``: ``dapo-ops -H <host> status --json --run <id>`` (same, through the console script);
- ``look``: one status look in-process over a new direct SSH connection (SSH handshake + one probe exec);
- ``look reused``: the same through the control master (what ``watch`` repeats every interval);
- ``grep``: the runbook's ``docker exec verl grep "Training Progress" <log> | tail -1`` over SSH (OpenSSH client).

Warm rows leave the page cache as it is (the 1 GiB file is cached after the first read: the best case for
grep); ``1 GiB cold`` rows evict that one file first (``posix_fadvise(DONTNEED)``). Each row shows the median
1-minute load average while it was measured (the machine is shared); ratios are taken per round (same load).

Import row: ``python -X importtime`` of a real ``inv status --json`` run (every module it loads, lazy ones
included), minus the interpreter's own start-up (``site``, ``encodings``); target < 0.15 s; shown with the
parts of invoke (its own import, before any task loads) and of dapo_ops (with the libraries it imports first),
and a row for ``python -c "import invoke"`` alone in a fresh interpreter: the floor of any ``inv`` task.

Fleet row (``--fleet N``, default 8; 0 skips): the same 1 GiB log hard-linked into run dirs on h1..hN (one page
cache for all: grep's best case), then ``for h in h1..hN; do ssh $h docker exec verl grep ... | tail -1; done``
vs one ``inv status -H h1,..,hN --json --run <id>``; target serial grep / status >= 20.
Removes the runs unless ``--keep``; does not tear the bench down (``sandbox/bench.sh down`` does).
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

from dapo_ops.agent import runfiles  # noqa: E402
from dapo_ops.core import runstate  # noqa: E402

BENCH_ID = os.environ.get("DAPO_BENCH_ID", "0")
STATE = Path("/var/tmp/dapo-bench-%s" % BENCH_ID)
DAPO_OPS = str(REPO / ".venv" / "bin" / "dapo-ops")
INV = [str(REPO / ".venv" / "bin" / "inv"), "-r", str(REPO)]


def step_block(step: int, total: int) -> bytes:
    """One training step's worth of verl console output (~8 KiB): worker chatter, tqdm redraws, metrics."""
    chatter = (
        "".join(
            "(WorkerDict pid=%d, ip=192.0.2.41) [rank-%d] rollout batch %d: generated 512 sequences, "
            "mean len 812.4, kv cache usage 61.3%%\n" % (4926 + r, r, step)
            for r in range(8)
        )
        * 6
    )
    bar = "".join(
        "\rTraining Progress:  %d%%|%-10s| %d/%d [01:%02d<10:24:51, 96.63s/it]"
        % (100 * step // total, "#" * (10 * step // total), step, total, s)
        for s in range(3)
    )
    metrics = (
        "(TaskRunner pid=417) step:%d - actor/pg_loss:np.float64(-0.0123) - actor/entropy:np.float64(0.61)"
        " - critic/score/mean:np.float64(0.%02d) - response_length/mean:np.float64(812.4)"
        " - perf/throughput:np.float64(1234.5) - timing_s/step:np.float64(96.63)\n" % (step, step % 100)
    )
    return (chatter + "(TaskRunner pid=417)" + bar + "\n" + metrics).encode()


def make_run(host: str, size: int, started_at: float) -> tuple[str, Path]:
    rid = runstate.new_run_id(started_at)
    host_rd = STATE / "hosts" / host / "runs" / rid
    host_rd.mkdir(parents=True)
    crd = runstate.run_dir_for("/verl/dapo_runs", rid)
    spec = {
        "run_id": rid,
        "run_dir": crd,
        "host": host,
        "container": "verl",
        "settings": {"steps": 100000},
        "features": [{"name": "flash_attn", "source": "default"}],
    }
    rec = runstate.new_record(spec, 0, now=started_at)
    rec.update(status="succeeded", attempt=1)
    runfiles.write_run(host_rd, rec)
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


def load() -> float:
    return os.getloadavg()[0]


def timed(cmd: list[str], env: dict | None = None) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    dt = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit("%s failed (rc %d): %s" % (" ".join(cmd[:4]), proc.returncode, proc.stderr.strip()[-300:]))
    return dt


def timed_look(host_name: str, rid: str, reuse: bool) -> float:
    """One status look in-process: a new Target (direct SSH connection, or the control master) + one probe."""
    from dapo_ops.control.inventory import hosts_file as inventory
    from dapo_ops.control.status import rows as statusview
    from dapo_ops.control.remote.target import Target
    from dapo_ops.control.status.look import probe

    inv = inventory.load(str(STATE / "hosts.toml"))
    target = Target(inv.hosts[host_name], reuse=reuse)
    t0 = time.perf_counter()
    try:
        ans = probe(target, {"op": "status", "run_id": rid})
    finally:
        target.close()
    row = statusview.build_row(host_name, ans)
    dt = time.perf_counter() - t0
    if row.run_id != rid:
        raise SystemExit("status look failed: %s" % (row.error,))
    READ_BYTES[rid] = ans.get("probe_read_bytes")
    return dt


READ_BYTES: dict = {}


def import_seconds(argv: list[str], env: dict) -> tuple[float, float, float]:
    """(imports of one CLI run minus interpreter start-up, of which invoke, of which dapo_ops with what it
    imports first) in seconds, from ``-X importtime`` (top-level imports' cumulative times)."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", *argv], capture_output=True, text=True, env=env, timeout=300
    )
    total = inv = own = 0.0
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cum, name = line.split("|", 2)
        if not cum.strip().isdigit() or name[:2] != " " + name.strip()[:1]:
            continue  # header line, or a nested import (counted in its parent's cumulative time)
        mod = name.strip()
        if mod == "site" or mod.split(".")[0] in ("encodings", "_frozen_importlib_external"):
            continue
        total += int(cum) / 1e6
        if mod.split(".")[0] == "invoke":
            inv += int(cum) / 1e6
        elif mod.split(".")[0] in ("dapo_ops", "tasks"):
            own += int(cum) / 1e6
    if proc.returncode != 0:
        raise SystemExit("import measurement failed: %s" % proc.stderr.strip()[-300:])
    return total, inv, own


def hosts_in_bench() -> int:
    from dapo_ops.control.inventory import hosts_file as inventory

    try:
        return len(inventory.load(str(STATE / "hosts.toml")).hosts)
    except Exception:  # noqa: BLE001 - no bench yet
        return 0


def ensure_bench(n: int) -> None:
    if hosts_in_bench() < n:
        subprocess.run(
            ["bash", str(REPO / "sandbox" / "bench.sh"), "up", str(n)],
            check=True,
            env=dict(os.environ, DAPO_BENCH_ID=BENCH_ID),
            stdout=subprocess.DEVNULL,
        )


def close_masters() -> None:
    from dapo_ops.control.remote import sshmux

    sshmux.close_all()
    time.sleep(0.3)


# (name, numerator, denominator); ratios are taken per round (same load) and the median is reported
RATIOS = [
    ("grep(1 MiB) / status(1 MiB)", ("grep", "1 MiB"), ("status", "1 MiB")),
    ("status(1 GiB) / status(1 MiB)", ("status", "1 GiB"), ("status", "1 MiB")),
    ("grep(1 GiB) / status(1 GiB)", ("grep", "1 GiB"), ("status", "1 GiB")),
    ("grep(1 GiB cold) / status(1 GiB cold)", ("grep", "1 GiB cold"), ("status", "1 GiB cold")),
    ("grep(1 MiB) / status new-conn(1 MiB)", ("grep", "1 MiB"), ("status new-conn", "1 MiB")),
    ("grep(1 MiB) / dapo-ops(1 MiB)", ("grep", "1 MiB"), ("dapo-ops", "1 MiB")),
    ("look(1 MiB) / look reused(1 MiB)", ("look", "1 MiB"), ("look reused", "1 MiB")),
    ("look reused(1 GiB) / look reused(1 MiB)", ("look reused", "1 GiB"), ("look reused", "1 MiB")),
]
TARGETS = {
    "grep(1 MiB) / status(1 MiB)": (1.0, lambda r, t: r >= t, ">= 1.0"),
    "status(1 GiB) / status(1 MiB)": (1.3, lambda r, t: r <= t, "<= 1.3"),
    "serial grep x N / inv status N hosts": (20.0, lambda r, t: r >= t, ">= 20"),
    "imports of inv status (s)": (0.15, lambda r, t: r < t, "< 0.15"),
}


def one_host(args, env, ssh, now):
    runs = {}
    try:
        for label, size in (("1 MiB", 1 << 20), ("1 GiB", 1 << 30)):
            t0 = time.perf_counter()
            runs[label] = make_run(args.host, size, now)
            now += 1
            print("wrote %s train.log in %.1f s" % (label, time.perf_counter() - t0), file=sys.stderr)
        os.sync()  # the 1 GiB just written must not be flushed while we time
        for _, rd in runs.values():
            evict(rd / "train.log")
        results: dict[tuple[str, str], list[float]] = {}
        loads: dict[tuple[str, str], list[float]] = {}
        pair_ratios: dict[str, list[float]] = {}
        (rid_s, _), (rid_b, rd_b) = runs["1 MiB"], runs["1 GiB"]
        status = {rid: INV + ["status", "--json", "--run", rid, "-H", args.host] for rid in (rid_s, rid_b)}
        dapo = {rid: [DAPO_OPS, "-H", args.host, "status", "--json", "--run", rid] for rid in (rid_s, rid_b)}
        grep = {
            rid: ssh + ["docker exec verl grep 'Training Progress' /verl/dapo_runs/%s/train.log | tail -1" % rid]
            for rid in (rid_s, rid_b)
        }
        for i in range(args.repeat + 1):  # round 0 warms up (and starts the control master) and is not counted
            order = [("1 MiB", rid_s), ("1 GiB", rid_b)]
            if i % 2:
                order.reverse()  # back to back, alternating, so load drift hits both sizes equally
            sample: dict[tuple[str, str], float] = {}
            lsample: dict[tuple[str, str], float] = {}

            def take(key, fn):
                lsample[key] = load()
                sample[key] = fn()

            for label, rid in order:
                take(("grep", label), lambda: timed(grep[rid]))
                take(("status", label), lambda: timed(status[rid], env))
            for label, rid in order:
                take(("dapo-ops", label), lambda: timed(dapo[rid], env))
                take(("look reused", label), lambda: timed_look(args.host, rid, True))
                take(("look", label), lambda: timed_look(args.host, rid, False))
            close_masters()
            take(("status new-conn", "1 MiB"), lambda: timed(status[rid_s], env))
            evict(rd_b / "train.log")  # cold page cache for that one file: a log nobody read lately
            take(("status", "1 GiB cold"), lambda: timed(status[rid_b], env))
            evict(rd_b / "train.log")
            take(("grep", "1 GiB cold"), lambda: timed(grep[rid_b]))
            if not i:
                continue
            for k, v in sample.items():
                results.setdefault(k, []).append(v)
                loads.setdefault(k, []).append(lsample[k])
            for name, num, den in RATIOS:
                pair_ratios.setdefault(name, []).append(sample[num] / sample[den])
        return results, loads, pair_ratios, runs
    except BaseException:
        for _, rd in runs.values():
            shutil.rmtree(rd, ignore_errors=True)
        raise


def fleet(args, env, now) -> tuple[dict, list[Path]]:
    """Serial grep over h1..hN vs one inv status over them; the same 1 GiB log hard-linked on every host."""
    names = ["h%d" % i for i in range(1, args.fleet + 1)]
    rid, rd0 = make_run(names[0], 1 << 30, now)
    made = [rd0]
    for h in names[1:]:
        rd = STATE / "hosts" / h / "runs" / rid
        rd.mkdir(parents=True)
        made.append(rd)
        for f in rd0.iterdir():
            if f.name == "train.log":
                os.link(f, rd / f.name)
            else:
                shutil.copy2(f, rd / f.name)
    os.sync()
    cfg = str(STATE / "ssh" / "ssh_config")
    loop = (
        "for h in %s; do ssh -F %s $h \"docker exec verl grep 'Training Progress' /verl/dapo_runs/%s/train.log"
        ' | tail -1"; done' % (" ".join(names), cfg, rid)
    )
    status = INV + ["status", "--json", "--run", rid, "-H", ",".join(names)]
    out: dict = {"grep": [], "status": [], "ratio": [], "load": []}
    for i in range(args.fleet_repeat + 1):  # round 0 warms up (masters started, page cache filled)
        l0 = load()
        g = timed(["bash", "-c", loop])
        st = timed(status, env)
        if i:
            out["grep"].append(g)
            out["status"].append(st)
            out["ratio"].append(g / st)
            out["load"].append((l0 + load()) / 2)
    return out, made


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="h1")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--fleet", type=int, default=8, help="hosts of the fleet row (0: skip it)")
    ap.add_argument("--fleet-repeat", type=int, default=3)
    ap.add_argument("--keep", action="store_true", help="keep the runs on the hosts")
    ap.add_argument("--only-fleet", action="store_true", help="the fleet row alone (no 1-host rows, no imports)")
    args = ap.parse_args()
    ensure_bench(max(1, args.fleet))
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(REPO / "dapo_ops"), str(REPO / "tasks.py")],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    env = dict(os.environ, DAPO_OPS_INVENTORY=str(STATE / "hosts.toml"))
    ssh = ["ssh", "-F", str(STATE / "ssh" / "ssh_config"), args.host]
    now = time.time()
    load0 = load()
    results, loads, pair_ratios, runs = ({}, {}, {}, {}) if args.only_fleet else one_host(args, env, ssh, now)
    made = [rd for _, rd in runs.values()]
    try:
        imports, imp_loads, bare = [], [], []
        for _ in range(0 if args.only_fleet else 5):
            imp_loads.append(load())
            imports.append(
                import_seconds([INV[0], *INV[1:], "status", "--json", "--run", runs["1 MiB"][0], "-H", args.host], env)
            )
            bare.append(import_seconds(["-c", "import invoke"], env)[0])
        fleet_res = None
        if args.fleet:
            fleet_res, more = fleet(args, env, now + 10)
            made += more
        med = {k: statistics.median(v) for k, v in results.items()}
        print("%-16s %-11s %10s %10s %10s %6s" % ("command", "log", "median s", "min s", "max s", "load"))
        for (c, label), v in sorted(results.items()):
            print(
                "%-16s %-11s %10.3f %10.3f %10.3f %6.1f"
                % (c, label, med[(c, label)], min(v), max(v), statistics.median(loads[(c, label)]))
            )
        print()
        print("%-42s %14s %12s %8s %s" % ("ratio", "median/round", "of medians", "target", "met"))

        def verdict(name, r):
            target = TARGETS.get(name)
            return ("-", "-") if target is None else (target[2], "yes" if target[1](r, target[0]) else "NO")

        for name, num, den in RATIOS if pair_ratios else ():
            r = statistics.median(pair_ratios[name])
            print("%-42s %14.2f %12.2f %8s %s" % (name, r, med[num] / med[den], *verdict(name, r)))
        imp = statistics.median(t for t, _, _ in imports) if imports else None
        if imp is not None:
            print(
                "%-42s %14.3f %12s %8s %s   (invoke's own: %.3f s, dapo_ops's: %.3f s; load %.1f)"
                % (
                    "imports of inv status (s)",
                    imp,
                    "-",
                    *verdict("imports of inv status (s)", imp),
                    statistics.median(i for _, i, _ in imports),
                    statistics.median(o for _, _, o in imports),
                    statistics.median(imp_loads),
                )
            )
            print(
                "%-42s %14.3f %12s %8s %s   (the floor of every inv task: invoke imports all of itself, unittest.mock"
                " and asyncio included, before it parses argv)"
                % ("imports of `import invoke` alone (s)", statistics.median(bare), "-", "-", "-")
            )
        if fleet_res:
            r = statistics.median(fleet_res["ratio"])
            print(
                "%-42s %14.2f %12.2f %8s %s   (grep loop %.2f s, inv status %.2f s; load %.1f)"
                % (
                    "serial grep x %d / inv status %d hosts" % (args.fleet, args.fleet),
                    r,
                    statistics.median(fleet_res["grep"]) / statistics.median(fleet_res["status"]),
                    *verdict("serial grep x N / inv status N hosts", r),
                    statistics.median(fleet_res["grep"]),
                    statistics.median(fleet_res["status"]),
                    statistics.median(fleet_res["load"]),
                )
            )
        for label, (rid, _) in runs.items():
            print("%-42s %8s" % ("bytes read by the probe, %s log" % label, READ_BYTES.get(rid)))
        print(
            "\nstatus = inv status end to end (Python start + imports, one probe over the reused SSH connection);"
            "\nstatus new-conn = the same right after closing the control masters (starts one: a first look);"
            "\nlook = one look in-process over a new direct SSH connection; look reused = through the master;"
            "\ngrep = ssh <host> docker exec verl grep 'Training Progress' <log> | tail -1 (OpenSSH client)."
            "\nmachine: %d CPUs shared with the sandbox hosts and other users; load average %.1f -> %.1f"
            % (os.cpu_count(), load0, load())
        )
    finally:
        if not args.keep:
            for rd in made:
                shutil.rmtree(rd, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
