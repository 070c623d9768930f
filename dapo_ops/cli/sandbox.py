"""``inv sandbox.up --hosts 3`` / ``inv sandbox.down`` / ``inv sandbox.status``: the local sandbox bench.

Thin wrappers around ``sandbox/bench.sh`` (network-namespace hosts with their own sshd and Docker engine, a
verl stand-in in the container; see sandbox/README.md). ``DAPO_BENCH_ID`` (env, or ``--bench-id``) selects
the instance: state in ``/var/tmp/dapo-bench-<id>``, inventory ``/var/tmp/dapo-bench-<id>/hosts.toml``.
Sandbox / test equipment: available from a source checkout only (bench.sh is not in the wheel).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from invoke import task
from invoke.exceptions import Exit

BENCH_SH = Path(__file__).resolve().parents[2] / "sandbox" / "bench.sh"

HELP = {
    "hosts": "number of sandbox hosts h1..hN to create (default 3); `up` never removes hosts",
    "bench_id": "bench instance id 0..155 (default: $DAPO_BENCH_ID, else 0)",
}


def _bench(args: list[str], bench_id: int) -> subprocess.CompletedProcess:
    """Run bench.sh with ``args``; stdout is captured, stderr passes through. Raises Exit (one line) on error."""
    if not BENCH_SH.exists():
        raise Exit(f"sandbox: {BENCH_SH} not found; the sandbox needs a source checkout of dapo-ops", code=2)
    env = dict(os.environ)
    if bench_id >= 0:
        env["DAPO_BENCH_ID"] = str(bench_id)
    proc = subprocess.run(["bash", str(BENCH_SH), *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)
    if proc.returncode != 0 and args[0] != "status":
        msg = (proc.stderr.strip().splitlines() or [f"bench.sh {args[0]} failed"])[-1]
        raise Exit(f"sandbox: {msg}", code=proc.returncode)
    return proc


@task(auto_shortflags=False, help=HELP)
def up(c, hosts=3, bench_id=-1):
    """Create (or complete) the sandbox hosts and print where their hosts.toml is."""
    proc = _bench(["up", str(hosts)], bench_id)
    inv = proc.stdout.strip().splitlines()[-1]
    state = Path(inv).parent
    print(f"sandbox: {hosts} host(s) up; inventory {inv}")
    print(f"  ssh -F {state}/ssh/ssh_config h1 docker exec verl python3 -m verl.trainer.main_ppo "
          f"trainer.total_training_steps=3 'trainer.logger=[console]'")
    print(f"  export DAPO_OPS_INVENTORY={inv}")


@task(auto_shortflags=False, help={"bench_id": HELP["bench_id"]})
def down(c, bench_id=-1):
    """Remove the sandbox hosts: processes, mounts, namespaces, bridge and state (nothing else)."""
    proc = _bench(["down"], bench_id)
    print(proc.stdout.strip() or proc.stderr.strip())


@task(auto_shortflags=False, help={"bench_id": HELP["bench_id"]})
def status(c, bench_id=-1):
    """One line per sandbox host (sshd, dockerd, container); exit 1 when a host is unhealthy, 3 when not up."""
    proc = _bench(["status"], bench_id)
    print(proc.stdout.rstrip())
    if proc.returncode != 0:
        raise Exit(code=proc.returncode)
