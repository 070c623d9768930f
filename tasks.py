"""Invoke entry point of the repository: ``inv --list``.

The operator tasks live in the installed package (``dapo_ops/cli/``; ``dapo-ops --list`` shows the same ones);
``inv <task>`` imports only the module of the tasks on its command line (:func:`dapo_ops.cli.namespace_for`).
The repository's dev tasks live here, outside the package (they need a source checkout: ``sandbox/bench.sh``):

- ``inv sandbox.up --hosts 3`` / ``inv sandbox.down`` / ``inv sandbox.status``: the local sandbox bench
  (network-namespace hosts with their own sshd and Docker engine, a verl stand-in in the container; see
  sandbox/README.md). ``DAPO_BENCH_ID`` (env, or ``--bench-id``) selects the instance: state in
  ``/var/tmp/dapo-bench-<id>``, inventory ``/var/tmp/dapo-bench-<id>/hosts.toml``.
- ``inv demo`` (``make demo``, the README's main command): the main job end to end on one sandbox host.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from invoke import Collection
from invoke.exceptions import Exit

from dapo_ops.cli import modules_for, build_namespace, program
from dapo_ops.cli._common import dapo_task

REPO = Path(__file__).resolve().parent
BENCH_SH = REPO / "sandbox" / "bench.sh"
#: exit code of a usage error (dapo_ops/cli/_common.py EXIT_USAGE)
EXIT_USAGE = 2

SANDBOX_HELP = {
    "hosts": "number of sandbox hosts h1..hN to create (default 3); `up` never removes hosts",
    "bench_id": "bench instance id 0..155 (default: $DAPO_BENCH_ID, else 0)",
}


def _bench(args: list[str], bench_id: int) -> subprocess.CompletedProcess:
    """Run bench.sh with ``args``; stdout is captured, stderr passes through. Raises Exit (one line) on error."""
    if not BENCH_SH.exists():
        raise Exit(f"sandbox: {BENCH_SH} not found; the sandbox needs a source checkout of dapo-ops", code=EXIT_USAGE)
    env = dict(os.environ)
    if bench_id >= 0:
        env["DAPO_BENCH_ID"] = str(bench_id)
    proc = subprocess.run(
        ["bash", str(BENCH_SH), *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    if proc.returncode != 0 and args[0] != "status":
        msg = (proc.stderr.strip().splitlines() or [f"bench.sh {args[0]} failed"])[-1]
        raise Exit(f"sandbox: {msg}", code=proc.returncode)
    return proc


@dapo_task(help=SANDBOX_HELP)
def up(c, hosts=3, bench_id=-1):
    """Create (or complete) the sandbox hosts and print where their hosts.toml is."""
    proc = _bench(["up", str(hosts)], bench_id)
    inv = proc.stdout.strip().splitlines()[-1]
    state = Path(inv).parent
    print(f"sandbox: {hosts} host(s) up; inventory {inv}")
    print(
        f"  ssh -F {state}/ssh/ssh_config h1 docker exec verl python3 -m verl.trainer.main_ppo "
        f"trainer.total_training_steps=3 'trainer.logger=[console]'"
    )
    print(f"  export DAPO_OPS_INVENTORY={inv}")


@dapo_task(help={"bench_id": SANDBOX_HELP["bench_id"]})
def down(c, bench_id=-1):
    """Remove the sandbox hosts: processes, mounts, namespaces, bridge and state (nothing else)."""
    proc = _bench(["down"], bench_id)
    print(proc.stdout.strip() or proc.stderr.strip())


@dapo_task(help={"bench_id": SANDBOX_HELP["bench_id"]})
def status(c, bench_id=-1):
    """One line per sandbox host (sshd, dockerd, container); exit 1 when a host is unhealthy, 3 when not up."""
    proc = _bench(["status"], bench_id)
    print(proc.stdout.rstrip())
    if proc.returncode != 0:
        raise Exit(code=proc.returncode)


sandbox = Collection("sandbox", up, down, status)

# --------------------------------------------------------------------------------------------- demo

DEMO_SCENARIO = {
    "step_time": 0.4,
    "failure": {"kind": "oom-device", "step": 8, "avoid_with": "offload", "hang_s": 2, "phase": "none"},
}  # phase-less: the offload rung


def bench_state(bench_id: str) -> Path:
    """The state directory of sandbox bench ``bench_id`` (sandbox/bench.sh: ``/var/tmp/dapo-bench-<id>``)."""
    return Path(f"/var/tmp/dapo-bench-{bench_id}")


def scenario_path(state: Path, host: str = "h1") -> Path:
    """Sandbox host ``host``'s scenario file under bench ``state`` (``/sandbox/scenario.json`` in its container:
    sandbox/README.md "scenario.json")."""
    return state / "hosts" / host / "sandbox" / "scenario.json"


def clear_demo_cue(state: Path) -> None:
    """Give h1 back a healthy stand-in (scenario ``{}``, sandbox/README.md "scenario.json") once the demo's run
    ended: the demo's OOM cue stayed, so the README's next ``inv launch -H h1`` hit the OOM at step 8 again."""
    path = scenario_path(state)
    if path.parent.is_dir():
        path.write_text("{}")
        print(f"sandbox cue cleared: h1 runs a healthy stand-in again ({path})")


def _sh(argv: list[str], *, check: bool = True, env: dict | None = None) -> subprocess.CompletedProcess:
    print("$ " + " ".join(shlex.quote(a) for a in argv), flush=True)
    proc = subprocess.run(argv, env={**os.environ, **(env or {})}, text=True)
    if check and proc.returncode != 0:
        raise Exit(
            f"demo: `{' '.join(argv[:3])} …` failed with exit code {proc.returncode} (see above)",
            code=proc.returncode or 1,
        )
    return proc


@dapo_task(
    help={
        "steps": "training steps of the demo run (default 20)",
        "oom_step": "step at which the stand-in hits a device OOM unless offload is on (0: no OOM)",
        "bench_id": "sandbox instance (DAPO_BENCH_ID; default 0)",
        "keep": "leave the sandbox host up afterwards (inv sandbox.down removes it)",
    }
)
def demo(c, steps=20, oom_step=8, bench_id="", keep=True):
    """The main job on a local sandbox host: sandbox up, preflight, launch with an OOM, escalation, resume, status."""
    if os.geteuid() != 0:
        raise Exit("demo: the sandbox needs root (network namespaces, sshd, dockerd): run it as root", code=EXIT_USAGE)
    bid = bench_id or os.environ.get("DAPO_BENCH_ID", "0")
    env = {"DAPO_BENCH_ID": bid}
    print(
        "dapo-ops demo: the host is a local network namespace with its own sshd and Docker engine, and the "
        "trainer inside its container is the verl STAND-IN (sandbox/verl_standin): real verl 0.9.1 config, "
        "log formats and checkpoints, simulated accelerator. SSH, Docker, the supervisor and the retries are real."
    )
    _sh(["bash", str(BENCH_SH), "up", "1"], env=env)
    state = bench_state(bid)
    inventory = str(state / "hosts.toml")
    scenario = dict(DEMO_SCENARIO) if oom_step > 0 else {"step_time": DEMO_SCENARIO["step_time"]}
    if oom_step > 0:
        scenario["failure"] = {**DEMO_SCENARIO["failure"], "step": int(oom_step)}
        print(
            f"sandbox cue: a device OOM at step {oom_step} unless offload is on "
            f"({scenario_path(state)}; cleared when the demo ends)"
        )
    scenario_path(state).write_text(json.dumps(scenario))
    inv = [sys.executable, "-m", "invoke", "-r", str(REPO)]
    base = ["-H", "h1", "--inventory", inventory]
    demo_env = {
        **env,
        "SWANLAB_MODE": os.environ.get("SWANLAB_MODE", "disabled"),
        "DAPO_OPS_CONFIG": os.environ.get("DAPO_OPS_CONFIG", str(state / "dapo-ops-config.toml")),
    }
    if "DAPO_OPS_CONFIG" not in os.environ:  # the demo's own, empty (a named config file must exist)
        (state / "dapo-ops-config.toml").touch(mode=0o600)
    try:
        _sh(inv + ["preflight", *base], env=demo_env)
        _sh(inv + ["launch", *base, "--steps", str(steps), "--framework", "fsdp", "--save-freq", "2"], env=demo_env)
        rc = _sh(inv + ["watch", *base, "--interval", "1"], check=False, env=demo_env).returncode
        _sh(inv + ["status", *base], check=False, env=demo_env)
    finally:  # the cue is the demo's: the next run on h1 (the README's `inv launch -H h1`) starts healthy
        clear_demo_cue(state)
    if not keep:
        _sh(["bash", str(BENCH_SH), "down"], env=env)
    if rc != 0:
        raise Exit("demo: the run did not succeed (see the status above)", code=rc)
    print(
        "demo done: the run hit a device OOM, the supervisor added offload and resumed from the last "
        "checkpoint. Try `inv logs --errors " + " ".join(base) + "`; remove the sandbox with "
        f"`DAPO_BENCH_ID={bid} inv sandbox.down` (inv is {Path(sys.executable).parent / 'inv'}: "
        "`. .venv/bin/activate` puts it on PATH)."
    )


#: the dev tasks' names as typed: a command line naming only these loads no package task module
DEV_TASKS = frozenset({"demo", "sandbox"})


def namespace(argv: list[str] | None = None) -> Collection:
    """The package's tasks for ``argv`` (default ``sys.argv``; :func:`dapo_ops.cli.modules_for`) plus the dev tasks."""
    argv = sys.argv[1:] if argv is None else argv
    ns = build_namespace(modules_for(argv, local=DEV_TASKS))
    ns.add_collection(sandbox)
    ns.add_task(demo)
    return ns


program.quiet_closed_pipe_for_printouts(sys.argv)  # `inv --help | head -1`: no traceback (invoke prints it)
ns = namespace()
if _twice := program.repeated_flag(sys.argv[1:], ns):  # invoke's parser would say "No idea what 'megatron' is!"
    raise Exit(_twice, code=EXIT_USAGE)
