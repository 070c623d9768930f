#!/usr/bin/env python3
"""Chaos soak (issue 31): random faults against real sandbox hosts, and invariants checked after every one.

It brings up a 3-host sandbox (``sandbox/bench.sh up 3``; h1's runs dir is a small tmpfs so the disk can be
filled), then runs *episodes* until the time is up. An episode's fault kind comes from a shuffled cycle of every
kind (one ``random.Random("<seed>/cycle/<c>")`` shuffle per ``len(kinds)`` episodes: each kind once per cycle); it
draws, from its own ``random.Random("<seed>/<n>")``, a run shape (one host; ``--independent`` over two or three
hosts; one 2-host Ray run, head h2, worker h3) and the fault's moment and parameters; it launches through the real CLI (``python -m invoke launch``
as an operator types it), injects the fault, waits for quiescence (every run of the episode terminal or in a state
where the tool tells the operator to act; run.json / ``inv status --json`` polled with a bound, never a fixed
sleep), takes the operator's follow-ups the tool names (``inv stop -H h --run RID``, then ``inv launch -H ...
--resume RID``), and checks the invariants:

``one-training``   never two trainings (stand-in ``main_ppo`` processes) on one host (sampled every 0.5 s from the
                   machine's ``/proc``, mapped to hosts by network namespace: works while SSH or the link is down);
``steps``          no step lost beyond the last complete checkpoint: every attempt of the run chain (retries and
                   ``--resume`` runs) starts at or after the newest checkpoint completed before it;
``verdict``        every run ends ``succeeded`` or with the verdict that names the injected fault;
``rungs``          a ``--resume`` run starts on the memory rungs (OOM-ladder features and setting rungs) the run it
                   resumes had reached: its ladder goes on, it does not climb again from the bottom;
``status-truth``   ``inv status`` agrees with what the host really runs (its state is running/retrying exactly
                   when a training of that run is alive there);
``secrets``        the canary key / webhook token is in no file of the runs dirs, no container ``/tmp`` file and no
                   printout of the CLI;
``devices``        no process of a dead attempt holds the stand-in's device files
                   (``/tmp/dapo-standin/devices/*``, held open by the stand-in while it trains) once the episode's
                   runs have ended;
``run-json``       every ``run.json`` is parseable whenever it is read (sampled every 0.5 s).

Output: per fault kind, injected / invariants held / violations / median time to the right verdict, the seed, and
per violation a replay command (``--seed S --episode N`` re-draws exactly that episode).

Usage::

    .venv/bin/python bench/soak.py --minutes 30 [--seed S] [--bench-id 130] [--out bench/soak.md]
    .venv/bin/python bench/soak.py --seed S --episode N          # replay one episode
    .venv/bin/python bench/soak.py --episodes 2 --kinds oom,kill-supervisor --hosts 1 --seed 31   # the CI smoke

Root only (the sandbox). Exit status 0 when no invariant was violated, 1 otherwise, 2 on a usage/setup error.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shlex
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from dapo_ops.core import health  # noqa: E402
from dapo_ops.core.runstate import RunStatus  # noqa: E402
from dapo_ops.core.logformat import parse_metrics_line, parse_resume, parse_save, split_lines  # noqa: E402

BENCH_SH = REPO / "sandbox" / "bench.sh"
RUN_ID_RE = re.compile(r"\b(\d{8}-\d{6}-[0-9a-f]{4})\b")
DEVICE_DIR = "/tmp/dapo-standin/devices"  # sandbox/verl_standin/verl/_standin/trainer.py DEVICE_DIR
CANARY_KEY = "sk-soak-CANARY-31313131"
CANARY_HOOK = "HOOK-soak-CANARY-4242"
TERMINAL = tuple(s.value for s in RunStatus if s.terminal)
TMPFS_HOST = "h1"
TMPFS_MB = 48
#: every fault kind and the run shapes it is drawn with
FAULTS = {
    "oom": ("single", "independent"),
    "storm": ("single",),
    "stall": ("single",),
    "stall-after-step-1": ("single",),
    "kill-supervisor": ("single", "independent", "ray"),
    "kill-verl": ("single", "independent", "ray"),
    "kill-ray-worker": ("ray",),
    "docker-stop-start": ("single", "independent", "ray"),
    "docker-restart": ("single", "independent", "ray"),
    "sshd-stop": ("single", "independent", "ray"),
    "link-down": ("single", "independent", "ray"),
    "disk-full": ("single",),
    "second-launch": ("single", "independent", "ray"),
    "resume-while-running": ("single", "ray"),
    "stop-mid-retry": ("single",),
    "divergence": ("single",),
    "data-runs-out": ("single", "independent"),
}
INVARIANTS = ("one-training", "steps", "verdict", "rungs", "status-truth", "secrets", "devices", "run-json")


def now() -> float:
    return time.monotonic()


# ------------------------------------------------------------------------------------------------ the bench
class Bench:
    """The sandbox of bench id ``bid``: hosts h1..hN (network namespaces ``dapo<id>-hN``) and helpers."""

    def __init__(self, bid: int, n_hosts: int):
        self.id = bid
        self.hosts = [f"h{i}" for i in range(1, n_hosts + 1)]
        self.state = Path(f"/var/tmp/dapo-bench-{bid}")
        self.env = dict(os.environ, DAPO_BENCH_ID=str(bid))

    def sh(self, *args: str, timeout: float = 300, check: bool = True) -> subprocess.CompletedProcess:
        p = subprocess.run(
            ["bash", str(BENCH_SH), *args], env=self.env, capture_output=True, text=True, timeout=timeout
        )
        if check and p.returncode != 0:
            raise RuntimeError(f"bench.sh {' '.join(args)}: rc {p.returncode}: {p.stderr.strip()[-600:]}")
        return p

    @property
    def inventory(self) -> Path:
        return self.state / "hosts.toml"

    def runs_dir(self, h: str) -> Path:
        return self.state / "hosts" / h / "runs"

    def ssh(self, h: str, cmd: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["ssh", "-F", str(self.state / "ssh" / "ssh_config"), h, cmd],
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def exec(self, h: str, cmd: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return self.ssh(h, f"docker exec verl sh -c {shlex.quote(cmd)}", timeout=timeout)

    def docker(self, h: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        env = dict(os.environ, DOCKER_HOST=f"unix:///run/dapo-bench-{self.id}/{h}/docker.sock")
        return subprocess.run(["docker", *args], env=env, capture_output=True, text=True, timeout=timeout)

    def gate(self, h: str) -> Path:
        """The host-side file the stand-in's scenario ``gate`` waits for (``/sandbox/gate-open`` in the container)."""
        return self.state / "hosts" / h / "sandbox" / "gate-open"

    def set_scenario(self, h: str, scn: dict) -> None:
        p = self.state / "hosts" / h / "sandbox" / "scenario.json"
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_suffix(".tmp")
        tmp.write_text(json.dumps(scn))
        os.replace(tmp, p)

    def netns_inodes(self) -> dict[int, str]:
        out = {}
        for h in self.hosts:
            try:
                out[os.stat(f"/run/netns/dapo{self.id}-{h}").st_ino] = h
            except OSError:
                pass
        return out

    def up(self, tmpfs: bool) -> None:
        """Bring the bench up; with ``tmpfs`` h1's runs dir becomes a small tmpfs (the disk-full fault)."""
        self.sh("up", str(len(self.hosts)), timeout=900)
        runs = self.runs_dir(TMPFS_HOST)
        if tmpfs and subprocess.run(["mountpoint", "-q", str(runs)]).returncode != 0:
            runs.mkdir(parents=True, exist_ok=True)
            for c in runs.iterdir():
                subprocess.run(["rm", "-rf", "--", str(c)], check=True)
            subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_MB}m", "tmpfs", str(runs)], check=True)
            self.docker(TMPFS_HOST, "rm", "-f", "verl")  # recreated on the tmpfs
        for h in self.hosts:
            self.reset(h)

    def reset(self, h: str) -> None:
        """sshd + link up, container running, its other processes ended, runs dir emptied, healthy cue."""
        self.sh("link", h, "up")
        self.sh("sshd", h, "start")
        self.set_scenario(h, {})
        self.gate(h).unlink(missing_ok=True)
        self.sh("container", h)
        self.exec(
            h,
            'for p in /proc/[0-9]*; do n=${p#/proc/}; [ "$n" = 1 ] && continue; '
            "[ \"$n\" = $$ ] && continue; ppid=$(awk '/^PPid:/{print $2}' $p/status 2>/dev/null); "
            '[ "$ppid" = 1 ] && [ "$(cat $p/comm 2>/dev/null)" = sleep ] && continue; '
            "kill -9 $n 2>/dev/null; done; rm -rf /tmp/dapo-standin; true",
        )
        runs = self.runs_dir(h)
        for c in list(runs.iterdir()) if runs.exists() else []:
            subprocess.run(["rm", "-rf", "--", str(c)], check=False)

    def down(self) -> None:
        self.sh("down", check=False)


# ------------------------------------------------------------------------------------------------ /proc truth
def proc_truth(ns_hosts: dict[int, str]) -> dict[str, dict]:
    """What each host really runs, from this machine's /proc: ``{host: {"trainings": [(pid, run_id, pgid)],
    "holders": [(pid, run_id, pgid, cmd)], "supervisors": [(pid, run_id)]}}``. A training = a live stand-in ``main_ppo`` process."""
    out = {h: {"trainings": [], "holders": [], "supervisors": []} for h in ns_hosts.values()}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            ino = os.stat(f"/proc/{d}/ns/net").st_ino
        except OSError:
            continue
        h = ns_hosts.get(ino)
        if h is None:
            continue
        try:
            stat = open(f"/proc/{d}/stat").read()
            fields = stat[stat.rindex(")") + 2 :].split()
            if fields[0] in ("Z", "X"):
                continue
            pgid = int(fields[2])
            cmd = open(f"/proc/{d}/cmdline", "rb").read().replace(b"\0", b" ").decode("utf-8", "replace")
        except (OSError, ValueError):
            continue
        if "dapo_ops.agent.supervisor" in cmd:
            m = RUN_ID_RE.search(cmd)
            if m:
                out[h]["supervisors"].append((int(d), m.group(1)))
        rid = None
        held = False
        is_training = "verl.trainer.main_ppo" in cmd and "dapo_ops" not in cmd
        try:
            fds = os.listdir(f"/proc/{d}/fd")
        except OSError:
            fds = []
        for fd in fds:
            try:
                if os.readlink(f"/proc/{d}/fd/{fd}").startswith(DEVICE_DIR):
                    held = True
                    break
            except OSError:
                continue
        if is_training or held:
            try:
                for item in open(f"/proc/{d}/environ", "rb").read().split(b"\0"):
                    if item.startswith(b"DAPO_OPS_RUN_ID="):
                        rid = item.split(b"=", 1)[1].decode()
            except OSError:
                pass
        if is_training:
            out[h]["trainings"].append((int(d), rid, pgid))
        if held:
            out[h]["holders"].append((int(d), rid, pgid, cmd[:80]))
    return out


class Sampler(threading.Thread):
    """Every 0.5 s: two trainings on one host? an unparseable run.json? (violations with the time seen)."""

    def __init__(self, bench: Bench):
        super().__init__(daemon=True)
        self.bench = bench
        self.ns = bench.netns_inodes()
        self.stop_ev = threading.Event()
        self.lock = threading.Lock()
        self.events: list[tuple[str, str]] = []  # (invariant, detail), drained per episode
        self.last: dict[str, dict] = {}

    def run(self):
        while not self.stop_ev.wait(0.5):
            self.sample()

    def sample(self):
        truth = proc_truth(self.ns)
        evs = []
        for h, t in truth.items():
            if len(t["trainings"]) > 1:
                evs.append(("one-training", f"{h}: {len(t['trainings'])} trainings at once: {t['trainings']}"))
        for h in self.bench.hosts:
            runs = self.bench.runs_dir(h)
            try:
                dirs = [p for p in runs.iterdir() if RUN_ID_RE.fullmatch(p.name)]
            except OSError:
                continue
            for d in dirs:
                p = d / "run.json"
                try:
                    text = p.read_text()
                except FileNotFoundError:
                    continue
                except OSError as e:
                    evs.append(("run-json", f"{h}:{d.name}/run.json unreadable: {e}"))
                    continue
                try:
                    json.loads(text)
                except ValueError as e:
                    evs.append(("run-json", f"{h}:{d.name}/run.json not JSON ({e}): {text[:120]!r}"))
        with self.lock:
            self.last = truth
            for e in evs:
                if e not in self.events:
                    self.events.append(e)

    def drain(self) -> list[tuple[str, str]]:
        with self.lock:
            evs, self.events = self.events, []
        return evs


# ------------------------------------------------------------------------------------------------ the operator
class Operator:
    """Runs the real CLI as an operator does (``python -m invoke -r <repo> <task> ...``) with the canary secrets in
    the environment; keeps every printout for the secret scan."""

    def __init__(self, bench: Bench, home: Path, swanlab_mode: str, inventory: Path | None = None):
        self.bench = bench
        home.mkdir(parents=True, exist_ok=True)
        cfg = home / "dapo-ops-config.toml"
        cfg.write_text(
            '[notify]\non_success = false\ntimeout_s = 2\n\n[[notify.webhooks]]\nkind = "generic"\n'
            f'url = "http://127.0.0.1:9/hook/{CANARY_HOOK}"\n'
        )
        cfg.chmod(0o600)  # it holds a secret: the tool refuses a group/world-readable one
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("SWANLAB_", "DAPO_OPS_")) and k.lower() not in ("http_proxy", "https_proxy")
        }
        env.update(
            DAPO_OPS_INVENTORY=str(inventory or bench.inventory),
            DAPO_OPS_CONFIG=str(cfg),
            HOME=str(home),
            SWANLAB_API_KEY=CANARY_KEY,
            SWANLAB_MODE=swanlab_mode,
        )
        self.env = env
        self.cwd = home
        self.printouts: list[str] = []
        self.log: list[str] = []

    def inv(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        argv = [sys.executable, "-m", "invoke", "-r", str(REPO), *args]
        try:
            p = subprocess.run(
                argv,
                capture_output=True,
                text=True,
                cwd=self.cwd,
                env=self.env,
                timeout=timeout,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as e:
            p = subprocess.CompletedProcess(
                argv,
                124,
                (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or ""),
                f"timed out after {timeout}s",
            )
        self.printouts.append(p.stdout + p.stderr)
        self.log.append(f"$ inv {' '.join(args)}  -> rc {p.returncode}")
        return p

    def status(self, hosts: list[str]) -> list[dict]:
        p = self.inv("status", "-H", ",".join(hosts), "--json", timeout=120)
        try:
            return json.loads(p.stdout)
        except ValueError:
            return []


# ------------------------------------------------------------------------------------------------ runs
def read_run(bench: Bench, h: str, rid: str) -> dict:
    try:
        return json.loads((bench.runs_dir(h) / rid / "run.json").read_text())
    except (OSError, ValueError):
        return {}


@dataclass
class Run:
    """One run chain on ``head`` (``rids``: the run, then each ``--resume`` run of it)."""

    head: str
    hosts: list[str]
    rids: list[str] = field(default_factory=list)
    resumes: int = 0

    @property
    def rid(self) -> str:
        return self.rids[-1]


@dataclass
class Episode:
    n: int
    kind: str
    shape: str
    hosts: list[str]
    params: dict
    runs: list[Run] = field(default_factory=list)
    violations: list[tuple[str, str]] = field(default_factory=list)
    verdict_s: float | None = None
    notes: list[str] = field(default_factory=list)
    skipped: str | None = None


def kind_of(seed: int, n: int, kinds: list[str]) -> str:
    """The fault kind of episode ``n`` (from 1) of ``seed``: the kinds in a shuffled cycle, one shuffle per cycle of
    ``len(kinds)`` episodes (``Random(f"{seed}/cycle/{c}")``), so every kind is drawn once in each cycle (a soak of
    ``len(kinds)`` episodes exercises every kind) and the kind of episode ``n`` depends on nothing but ``seed``,
    ``n`` and ``kinds``: a replay of one episode draws what the whole soak drew."""
    c, i = divmod(n - 1, len(kinds))
    order = list(kinds)
    random.Random(f"{seed}/cycle/{c}").shuffle(order)
    return order[i]


def draw(seed: int, n: int, kinds: list[str], max_hosts: int, quick: bool = False) -> Episode:
    """Episode ``n`` of ``seed``: its kind from :func:`kind_of`, everything else random about it from
    ``Random(f"{seed}/{n}")``. ``quick``: shorter runs (8-10 steps of 0.2-0.3 s: the CI smoke)."""
    rng = random.Random(f"{seed}/{n}")
    kind = kind_of(seed, n, kinds)
    shapes = [
        s for s in FAULTS[kind] if not (s == "ray" and max_hosts < 3) and not (s == "independent" and max_hosts < 2)
    ]
    shape = rng.choice(shapes or ["single"])
    if kind == "disk-full":
        hosts = [TMPFS_HOST]
    elif shape == "single":
        hosts = [rng.choice([f"h{i}" for i in range(1, max_hosts + 1)])]
    elif shape == "independent":
        hosts = [f"h{i}" for i in range(1, max_hosts + 1)][: rng.choice([2, max_hosts])]
    else:
        hosts = ["h2", "h3"]
    steps = rng.randint(8, 10) if quick else rng.randint(12, 20)
    p = {
        "steps": steps,
        "step_time": round(rng.uniform(0.2, 0.3) if quick else rng.uniform(0.3, 0.6), 2),
        "save_freq": rng.choice([2, 3]),
        "at_step": rng.randint(2, max(3, steps // 2)),
        "target": rng.choice(hosts),
    }
    if kind in ("oom", "stop-mid-retry"):
        p["phase"] = rng.choice(["update_actor", "compute_log_prob", "none"])
        p["avoid_with"] = rng.choice(["offload", "offload+recompute", "never"]) if kind == "oom" else "offload"
        p["hang_s"] = round(rng.uniform(1, 6), 1)
    if kind in ("second-launch", "resume-while-running"):
        p["step_time"] = round(rng.uniform(1.0, 1.5), 2)  # still running when the second launch gets there
    if kind in ("sshd-stop", "link-down"):
        p["down_s"] = rng.randint(5, 60)
    if kind == "kill-verl":
        p["sig"] = "KILL"
    if kind == "divergence":  # the stand-in's diverge cue (sandbox/README.md): which metric, then what
        p["metric"] = rng.choice(["grad_norm", "lr"])
        p["then"] = rng.choice(["continue", "filter-loop"])
    if kind == "data-runs-out":  # one epoch of the sample data (1024 rows // batch 64 = 16 steps) below --steps
        p["epochs"] = 1
        p["fed"] = 16 * p["epochs"]
        p["steps"] = max(p["steps"], p["fed"] + rng.randint(2, 4))
        p["step_time"] = round(rng.uniform(0.5, 0.75), 2)  # 16 steps outlast the launch's settle: no "failed at once"
    return Episode(n=n, kind=kind, shape=shape, hosts=hosts, params=p)


#: fault kinds the stand-in fires itself from its scenario cue (no harness action at the step)
CUED = ("oom", "storm", "stall", "stall-after-step-1", "divergence")


class Soak:
    def __init__(self, args):
        self.args = args
        self.bench = Bench(args.bench_id, 3 if args.hosts >= 3 else args.hosts)
        self.op: Operator | None = None
        self.sampler: Sampler | None = None
        self.episodes: list[Episode] = []

    # ---------------------------------------------------------------- waiting on events
    def wait(self, cond, bound_s: float, every: float = 0.5):
        """Poll ``cond()`` until it returns a truthy value or ``bound_s`` passes; returns the last value."""
        end = now() + bound_s
        v = cond()
        while not v and now() < end:
            time.sleep(every)
            v = cond()
        return v

    def launch(self, ep: Episode, extra: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
        p = ep.params
        args = [
            "launch",
            "-H",
            ",".join(ep.hosts),
            "--steps",
            str(p["steps"]),
            "--save-freq",
            str(p["save_freq"]),
            "--framework",
            "fsdp",
            "--hang-timeout",
            "60",
            *extra,
        ]
        if ep.shape == "independent":
            args.append("--independent")
        return self.op.inv(*args, timeout=400)

    def rec(self, run: Run) -> dict:
        return read_run(self.bench, run.head, run.rid)

    def all_terminal(self, ep: Episode) -> bool:
        return all(self.rec(r).get("status") in TERMINAL for r in ep.runs)

    # ---------------------------------------------------------------- one episode
    def episode(self, ep: Episode) -> None:
        b = self.bench
        p = ep.params
        involved = sorted(set(ep.hosts) | ({"h2", "h3"} if ep.shape == "ray" else set()))
        for h in involved:
            b.reset(h)
        self.sampler.drain()
        scn = {"step_time": p["step_time"]}
        if ep.kind in ("oom", "stop-mid-retry"):
            scn["failure"] = {
                "kind": "oom-device",
                "step": p["at_step"],
                "phase": p["phase"],
                "avoid_with": p["avoid_with"],
                "hang_s": p["hang_s"],
            }
            if ep.kind == "stop-mid-retry":
                scn["failure"]["hang_s"] = 30.0  # the retry window the stop lands in (the attempt hangs after OOM)
        elif ep.kind == "stall":
            scn["failure"] = {"kind": "stall", "step": p["at_step"], "times": 1}
        elif ep.kind == "stall-after-step-1":  # issue 42: fast steps, then silence right after step 1's line
            scn["failure"] = {"kind": "stall", "step": 2, "times": 1}
        elif ep.kind == "divergence":  # the attempt and its one retry diverge; a --resume after it trains cleanly
            scn["failure"] = {
                "kind": "diverge",
                "step": p["at_step"],
                "times": 2,
                "metric": p["metric"],
                "then": p["then"],
            }
        if self.args.quick and ep.shape == "single" and ep.kind not in (*CUED, "stop-mid-retry", "data-runs-out"):
            # the CI smoke's short runs (8-10 steps of 0.2-0.3 s) can end before the harness sees at_step under
            # load: the stand-in holds after that step's line until inject() opens the gate (an event, not a race)
            scn["gate"] = {"after_step": p["at_step"], "file": "/sandbox/gate-open"}
        for h in involved:
            b.set_scenario(h, scn if (h == p["target"] or ep.kind == "oom") else {"step_time": p["step_time"]})
        extra: tuple[str, ...] = ()
        if ep.kind == "data-runs-out":  # verl's epoch limit ends the run at step fed (trainer_base.py:467)
            extra = ("--override", f"trainer.total_epochs={p['epochs']}", "--allow-short-data")
        if ep.kind == "storm":
            (b.runs_dir(p["target"]) / "bad_reward.py").write_text((REPO / "gpu" / "bad_reward.py").read_text())
            extra = (
                "--override",
                "reward.custom_reward_function.path=/verl/dapo_runs/bad_reward.py",
                "--override",
                "reward.custom_reward_function.name=compute_score",
            )
        res = self.launch(ep, extra)
        rids = list(dict.fromkeys(RUN_ID_RE.findall(res.stdout + res.stderr)))
        if res.returncode != 0 or not rids:
            ep.violations.append(
                ("verdict", f"launch failed (rc {res.returncode}): {(res.stderr or res.stdout)[-400:]}")
            )
            return
        if ep.shape == "independent":
            for h in ep.hosts:
                rid = next((r for r in rids if (b.runs_dir(h) / r).exists()), None)
                if rid:
                    ep.runs.append(Run(head=h, hosts=[h], rids=[rid]))
        else:
            ep.runs.append(Run(head=ep.hosts[0], hosts=list(ep.hosts), rids=[rids[0]]))
        target_run = next((r for r in ep.runs if p["target"] in r.hosts), ep.runs[0])
        t0 = self.inject(ep, target_run)
        if t0 is None:
            return
        self.quiesce_and_follow_up(ep, t0)
        self.check(ep)

    def reach_step(self, run: Run, step: int, bound: float = 240) -> bool:
        return bool(
            self.wait(
                lambda: (self.rec(run).get("step") or 0) >= step or self.rec(run).get("status") in TERMINAL, bound
            )
        )

    def inject(self, ep: Episode, run: Run) -> float | None:
        """Inject the episode's fault; returns its time (monotonic), None when it could not be injected."""
        b, h = self.bench, ep.params["target"]
        try:
            return self._inject(ep, run)
        finally:
            b.gate(h).touch()  # the held stand-in (quick mode) goes on once the fault is in, or was skipped

    def _inject(self, ep: Episode, run: Run) -> float | None:
        b, p, k = self.bench, ep.params, ep.kind
        h = p["target"]
        if k == "data-runs-out":  # the first sign: the last step the data feeds; the verdict follows verl's exit
            self.wait(
                lambda: (self.rec(run).get("step") or 0) >= p["fed"] or self.rec(run).get("status") in TERMINAL,
                240,
                every=0.3,
            )
            return now()
        if k in CUED:  # cued: the stand-in fires it itself, at (storm: in) at_step
            before = 0 if k == "storm" else p["at_step"] - 1
            self.wait(
                lambda: (
                    (self.rec(run).get("step") or 0) >= before
                    or self.rec(run).get("status") in TERMINAL
                    or self.rec(run).get("attempt", 1) > 1
                ),
                240,
                every=0.3,
            )
            return now()
        if k == "stop-mid-retry":
            got = self.wait(
                lambda: (
                    self.rec(run).get("status") in ("retrying",) + TERMINAL
                    or (self.rec(run).get("attempt") or 1) > 1
                    or any(
                        a.get("killed_by") == "oom" or (a.get("verdict") or {}).get("cls") == "oom-device"
                        for a in self.rec(run).get("attempts") or []
                    )
                ),
                240,
                every=0.3,
            )
            if not got or self.rec(run).get("status") in TERMINAL:
                ep.skipped = "the run ended before a retry began"
                return None
            t0 = now()
            r = self.op.inv("stop", "-H", run.head, "--run", run.rid, timeout=200)
            ep.notes.append(f"stop mid-retry rc {r.returncode}")
            return t0
        if not self.reach_step(run, p["at_step"]):
            ep.violations.append(
                ("verdict", f"run {run.rid} never reached step {p['at_step']}: {self.rec(run).get('status')}")
            )
            return None
        if self.rec(run).get("status") in TERMINAL:
            ep.skipped = "the run ended before the fault"
            return None
        t0 = now()
        if k == "kill-supervisor":
            pid = (self.rec(run).get("pids") or {}).get("supervisor")
            b.exec(run.head, f"kill -9 {pid}")
        elif k == "kill-verl":
            pg = (self.rec(run).get("pids") or {}).get("verl_pgid")
            truth = self.sampler.last.get(run.head, {}).get("trainings") or []
            pid = next((t[0] for t in truth if t[1] == run.rid), None)
            if pid is None:
                ep.skipped = f"no training process of {run.rid} on {run.head} (pgid {pg})"
                return None
            os.kill(pid, 9)
        elif k == "kill-ray-worker":
            worker = run.hosts[-1]
            r = b.exec(
                worker,
                "for p in /proc/[0-9]*; do grep -qa DAPO_OPS_RAY_RUN= $p/environ 2>/dev/null && "
                "grep -qa raylet $p/cmdline && { kill -9 ${p#/proc/}; echo ${p#/proc/}; }; done; true",
            )
            ep.notes.append(f"killed raylet on {worker}: {r.stdout.split()}")
        elif k == "docker-stop-start":
            b.docker(h, "stop", "-t", "2", "verl")
            st = self.op.status([h])
            ep.notes.append(f"status while stopped: {[(r.get('host'), r.get('state')) for r in st]}")
            b.docker(h, "start", "verl")
        elif k == "docker-restart":
            b.docker(h, "restart", "-t", "2", "verl")
        elif k in ("sshd-stop", "link-down"):
            if k == "sshd-stop":
                b.sh("sshd", h, "stop")
            else:
                b.sh("link", h, "down")
            # an SSH connection the tool keeps open (its mux master) outlives a stopped sshd: status may still see
            # the host; whatever it says must be true
            self.check_status_truth(ep, [r for r in ep.runs if h in r.hosts] or ep.runs)
            time.sleep(max(0.0, p["down_s"] - (now() - t0)))  # the outage itself, not a wait for an event
            b.sh("sshd", h, "start") if k == "sshd-stop" else b.sh("link", h, "up")
        elif k == "disk-full":
            runs = b.runs_dir(h)
            subprocess.run(
                ["dd", "if=/dev/zero", f"of={runs}/.soak-fill", "bs=1M", f"count={TMPFS_MB}"], capture_output=True
            )
        elif k == "second-launch":
            r = self.launch(ep)
            self.check_refused(ep, r, "second launch")
        elif k == "resume-while-running":
            r = self.op.inv(
                "launch", "-H", ",".join(run.hosts), "--steps", str(p["steps"] + 4), "--resume", run.rid, timeout=300
            )
            self.check_refused(ep, r, "--resume of a running run")
        return t0

    def check_refused(self, ep: Episode, r: subprocess.CompletedProcess, what: str) -> None:
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        new = [x for x in RUN_ID_RE.findall(r.stdout) if all(x not in run.rids for run in ep.runs)]
        if new and r.returncode == 0:
            # legitimate when the run had ended before the new one started (the launch takes seconds)
            old = self.rec(ep.runs[0])
            head = ep.runs[0].head
            started = read_run(self.bench, head, new[0]).get("started_at") or 0
            if old.get("status") in TERMINAL and (old.get("ended_at") or 1e18) <= started:
                ep.notes.append(f"{what}: the run had ended, {new[0]} started after it")
                self.op.inv("stop", "-H", head, "--run", new[0], timeout=200)
                return
            ep.violations.append(("one-training", f"{what} was not refused (rc {r.returncode}): {r.stdout[-300:]}"))
        elif len(lines) != 1 and not any("still" in ln or "active" in ln or "running" in ln for ln in lines):
            ep.notes.append(f"{what} refused in {len(lines)} lines: {lines[:3]}")

    # ---------------------------------------------------------------- quiescence, follow-ups
    def needs_operator(self, run: Run) -> dict | None:
        """The status row of ``run``'s head when the tool tells the operator to act (supervisor dead, or the
        container/host unreachable with a hint), else None."""
        rows = self.op.status([run.head])
        row = rows[0] if rows else {}
        if row.get("run_id") == run.rid and row.get("state") in ("supervisor-dead", "error", "incomplete"):
            return row
        return None

    def quiesce_and_follow_up(self, ep: Episode, t0: float) -> None:
        bound = 420.0
        for run in ep.runs:
            for _ in range(3):  # at most three operator rounds (stop, resume) per run

                def settled():
                    rec = self.rec(run)
                    if rec.get("status") in TERMINAL:
                        return "terminal"
                    if not rec:
                        return None
                    if (rec.get("pids") or {}).get("supervisor") and not self.sup_alive(run):
                        return "supervisor-gone"
                    return None

                state = self.wait(settled, bound, every=1.0)
                if ep.verdict_s is None and self.right_verdict(ep, run):
                    ep.verdict_s = now() - t0
                if state is None:
                    ep.violations.append(
                        (
                            "verdict",
                            f"run {run.rid} on {run.head} not quiescent after {bound:.0f}s: "
                            f"{self.rec(run).get('status')}",
                        )
                    )
                    return
                self.check_status_truth(ep, [run])
                act = self.follow_up(ep, run, state)
                if not act:
                    break
            if ep.verdict_s is None and self.right_verdict(ep, run):
                ep.verdict_s = now() - t0

    def sup_alive(self, run: Run) -> bool:
        """The run's supervisor process is alive on its head (this machine's /proc: no SSH needed)."""
        self.sampler.sample()
        if self.rec(run).get("status") in TERMINAL:
            return True  # it wrote the end and exited: settled() sees the terminal status next
        return any(r == run.rid for _, r in self.sampler.last.get(run.head, {}).get("supervisors", []))

    def follow_up(self, ep: Episode, run: Run, state: str) -> bool:
        """Do what the tool tells the operator; True when a new run (a resume) was started."""
        b = self.bench

        def says() -> str:  # what `inv status` tells the operator about this run now
            rows = self.op.status([run.head])
            row = next((r for r in rows if r.get("run_id") == run.rid), rows[0] if rows else {})
            return " ".join(
                str(x)
                for x in (row.get("hint"), row.get("error"), row.get("ended"), " ".join(row.get("suggestions") or []))
                if x
            )

        text = says()
        rec = self.rec(run)
        if state == "supervisor-gone" or f"inv stop -H {run.head} --run {run.rid}" in text:
            r = self.op.inv("stop", "-H", run.head, "--run", run.rid, timeout=200)
            ep.notes.append(f"follow-up: inv stop {run.rid} rc {r.returncode}")
            rec = self.rec(run)
            # the operator reads status again before the next step: verl may have finished every step while the
            # stop ran (a "then --resume" said while verl still ran is stale then; seed 1207 episode 24)
            text = says()
        if ep.kind == "disk-full":
            (b.runs_dir(run.head) / ".soak-fill").unlink(missing_ok=True)
        stopped_retry = ep.kind == "stop-mid-retry" and rec.get("status") == "stopped" and not run.resumes
        if f"--resume {run.rid}" not in text and not stopped_retry:  # (the operator goes on after their stop)
            return False
        if rec.get("status") == "succeeded" or run.resumes >= 2:
            return False
        if ep.kind in ("storm", "data-runs-out"):  # the fix is code / more data, not a resume
            return False
        total = rec.get("total_steps") or ep.params["steps"]
        r = self.op.inv("launch", "-H", ",".join(run.hosts), "--steps", str(total), "--resume", run.rid, timeout=400)
        new = [x for x in RUN_ID_RE.findall(r.stdout) if x not in run.rids]
        ep.notes.append(f"follow-up: --resume {run.rid} rc {r.returncode} -> {new[:1]}")
        if r.returncode != 0 or not new:
            ep.violations.append(
                (
                    "verdict",
                    f"the --resume the tool named failed (rc {r.returncode}): {(r.stderr or r.stdout).strip()[-300:]}",
                )
            )
            return False
        run.rids.append(new[0])
        run.resumes += 1
        return True

    # ---------------------------------------------------------------- invariants
    def right_verdict(self, ep: Episode, run: Run) -> bool:
        ok, _ = self.verdict_ok(ep, run)
        return ok

    def verdict_ok(self, ep: Episode, run: Run) -> tuple[bool, str]:
        """Each run of the chain ended succeeded or with a verdict naming the fault; the chain's last one ran out."""
        k = ep.kind
        recs = [read_run(self.bench, run.head, rid) for rid in run.rids]
        last = recs[-1]
        classes = [
            ((a.get("verdict") or {}).get("cls"), a.get("killed_by")) for rc in recs for a in rc.get("attempts") or []
        ]
        verdicts = {c for c, _ in classes if c} | {kb for _, kb in classes if kb}
        verdicts |= {"supervisor-dead" for rc in recs if (rc.get("stop") or {}).get("supervisor") == "dead"}
        if last.get("status") not in TERMINAL:
            return False, f"{run.rid} not ended: {last.get('status')}"
        if last.get("status") == "succeeded":
            if k in ("storm", "data-runs-out"):
                return False, f"a {k} run succeeded"
            return True, ""
        names = {
            "oom": {"oom-device"},
            "storm": {"error-storm"},
            "stall": {"hang", "stall"},
            "stall-after-step-1": {"hang"},
            "kill-supervisor": {"supervisor-dead"},
            "kill-verl": {"crash-other"},
            "kill-ray-worker": {"crash-other", "network"},
            "link-down": {"network"},
            "docker-stop-start": {"supervisor-dead", "crash-other", "network"},
            "docker-restart": {"supervisor-dead", "crash-other", "network"},
            "disk-full": {"disk-full"},
            "stop-mid-retry": {"stop", "oom-device"},
            "divergence": {"diverged"},
            "data-runs-out": {"data-ran-out"},
        }.get(k, set())
        if k == "stop-mid-retry" and recs[0].get("status") == "stopped":
            # the resumed run meets the same OOM cue: it succeeds once a rung avoids it, or it ends with the OOM's
            # verdict when the ladder (continued from the stopped run's rungs: check_rungs) has none left that does
            # -- the cue's ``avoid_with`` "offload" is no rung of the update / log-prob ladders (core/ladder.py:
            # offload does not lower the update's peak on verl 0.9.1), so there "failed: oom-device" is right
            last_cls = ((last.get("verdict") or {}).get("cls")) if last.get("status") == "failed" else None
            return (
                last.get("status") in ("succeeded", "stopped") or last_cls == "oom-device",
                f"after stop + resume: {last.get('status')} {(last.get('decision') or {}).get('ended')}",
            )
        if verdicts & names:
            return True, ""
        return False, (
            f"{run.rid}: {last.get('status')} with {sorted(verdicts)} "
            f"({(last.get('decision') or {}).get('ended')}), the fault was {k}"
        )

    def check_status_truth(self, ep: Episode, runs: list[Run]) -> None:
        hosts = sorted({h for r in runs for h in r.hosts})
        self.sampler.sample()
        before = self.sampler.last
        rows = self.op.status(hosts)
        self.sampler.sample()
        after = self.sampler.last
        for row in rows:
            h = row.get("host")
            rid = row.get("run_id")

            def alive(truth):
                return [t for t in truth.get(h, {}).get("trainings", []) if t[1] == rid]

            # what the host ran while status looked: live in both snapshots / in neither (a change in between is
            # no evidence either way)
            live = alive(before) and alive(after)
            dead = not alive(before) and not alive(after)
            st = row.get("state")
            run = next((r for r in runs if r.head == h), None)
            if run is None:
                continue  # a Ray worker's row mirrors its head's run (the training runs on the head)
            between = self.rec(run).get("status") in ("retrying", "starting")
            if st in ("running", "retrying") and dead and not between:
                ep.violations.append(("status-truth", f"{h}: inv status says {st} for {rid}, no training of it runs"))
            if live and st in ("succeeded", "failed", "stopped", "no-run"):
                ep.violations.append(
                    (
                        "status-truth",
                        f"{h}: inv status says {st} for {rid}, its training runs (pids {[t[0] for t in live]})",
                    )
                )

    def check_steps(self, ep: Episode, run: Run) -> None:
        """Every attempt of the chain starts at or after the newest HEALTHY checkpoint completed before it: one of a
        step at or after the first bad training step (dapo_ops/core/health.py, the supervisor's own rule) holds the
        bad update and is never resumed from."""
        complete: set[int] = set()
        bad_from: int | None = None
        for rid in run.rids:
            d = self.bench.runs_dir(run.head) / rid
            rec = read_run(self.bench, run.head, rid)
            for a in rec.get("attempts") or []:
                try:
                    text = (d / (a.get("log") or f"attempt-{a.get('n')}.log")).read_text(errors="replace")
                except OSError:
                    continue
                start, saving, steps, flagged = 0, None, [], False
                watch = health.HealthWatch()
                for line in split_lines(text):
                    r = parse_resume(line)
                    if r is not None:
                        start = r
                        watch.rewind(r)
                    flag = watch.feed_line(line)
                    s = parse_save(line)
                    if s is not None:
                        saving = s
                    m = parse_metrics_line(line)
                    if m and "training/global_step" in m[1]:
                        flag = watch.feed(m[0], m[1]) or flag
                        steps.append(m[0])
                        if saving == m[0]:
                            complete.add(m[0])
                            saving = None
                    if flag is not None:
                        flagged = True
                        bad_from = flag.step if bad_from is None else min(bad_from, flag.step)
                if bad_from is not None and start >= bad_from and not flagged:
                    ep.violations.append(
                        (
                            "steps",
                            f"{rid} attempt {a.get('n')} resumed from global_step_{start}, at or after the bad "
                            f"step {bad_from}",
                        )
                    )
                healthy = {c for c in complete if bad_from is None or c < bad_from}
                before = max((c for c in healthy if not steps or c < steps[0]), default=0)
                if steps and steps[0] - 1 < before:
                    ep.violations.append(
                        (
                            "steps",
                            f"{rid} attempt {a.get('n')} started at step {steps[0]} although "
                            f"global_step_{before} was complete",
                        )
                    )
                if bad_from is not None and not flagged and steps and max(steps) >= bad_from:
                    bad_from = None  # this attempt trained past it cleanly: later checkpoints are healthy again
                if steps and start and steps[0] != start + 1:
                    ep.violations.append(
                        ("steps", f"{rid} attempt {a.get('n')}: resumed from {start}, first step {steps[0]}")
                    )

    def check_rungs(self, ep: Episode, run: Run) -> None:
        """Every ``--resume`` run of the chain starts on the memory rungs the run it resumes had reached: the OOM
        ladder's features (source ``oom-retry-*``) and setting rungs (run.json ``setting_changes.memory_rungs``) of
        the earlier run are in the new run's spec.json (its first attempt), in order: the ladder goes on, it does
        not climb again from the bottom (seed 1202, episode 21)."""
        for prev_id, rid in zip(run.rids, run.rids[1:]):
            prev = read_run(self.bench, run.head, prev_id)
            try:
                spec = json.loads((self.bench.runs_dir(run.head) / rid / "spec.json").read_text())
            except (OSError, ValueError) as e:
                ep.violations.append(("rungs", f"{rid}: spec.json unreadable: {e}"))
                continue

            def rungs(ch):
                return [(r.get("rung"), r.get("phase")) for r in (ch or {}).get("memory_rungs") or []]

            had, got = rungs(prev.get("setting_changes")), rungs(spec.get("setting_changes"))
            feats = {f.get("name") for f in spec.get("features") or []}
            lost = [
                f.get("name")
                for f in prev.get("features") or []
                if str(f.get("source", "")).startswith("oom-retry") and f.get("name") not in feats
            ]
            if got[: len(had)] != had or lost:
                ep.violations.append(
                    (
                        "rungs",
                        f"{rid} (--resume {prev_id}) starts on rungs {got} and features without {lost}; "
                        f"{prev_id} had reached {had}",
                    )
                )

    def check(self, ep: Episode) -> None:
        b = self.bench
        for run in ep.runs:
            ok, why = self.verdict_ok(ep, run)
            if not ok:
                ep.violations.append(("verdict", why))
            self.check_steps(ep, run)
            self.check_rungs(ep, run)
        # after the episode's runs have ended: no training, no device holder left on its hosts
        hosts = sorted({h for r in ep.runs for h in r.hosts})

        def clean():
            self.sampler.sample()
            t = self.sampler.last
            return all(not t.get(h, {}).get("trainings") and not t.get(h, {}).get("holders") for h in hosts)

        if not self.wait(clean, 30, every=1.0):
            t = self.sampler.last
            for h in hosts:
                for pid, rid, pgid, cmd in t.get(h, {}).get("holders", []):
                    ep.violations.append(
                        ("devices", f"{h}: pid {pid} (run {rid}, pgid {pgid}: {cmd}) holds devices after its run ended")
                    )
        self.check_status_truth(ep, ep.runs)
        ep.violations.extend(self.sampler.drain())
        # secrets: runs dirs, container /tmp, printouts
        hits = []
        for h in hosts:
            r = subprocess.run(
                ["grep", "-rlaF", "-e", CANARY_KEY, "-e", CANARY_HOOK, str(b.runs_dir(h))],
                capture_output=True,
                text=True,
            )
            hits += [f"{h}:{x}" for x in r.stdout.split()]
            r = b.exec(h, f"grep -rlaF -e {CANARY_KEY} -e {CANARY_HOOK} /tmp /verl/train.log 2>/dev/null; true")
            hits += [f"{h}(container):{x}" for x in r.stdout.split()]
        for i, text in enumerate(self.op.printouts):
            if CANARY_KEY in text or CANARY_HOOK in text:
                hits.append(f"printout {i}: {self.op.log[i] if i < len(self.op.log) else ''}")
        self.op.printouts.clear()
        self.op.log.clear()
        for x in hits:
            ep.violations.append(("secrets", f"canary in {x}"))

    # ---------------------------------------------------------------- main loop and report
    def replay_cmd(self, ep: Episode) -> str:
        kinds = "" if self.args.kinds == ",".join(FAULTS) else f" --kinds {self.args.kinds}"
        quick = " --quick" if self.args.quick else ""
        inventory = f" --inventory {self.args.inventory}" if self.args.inventory else ""
        return (
            f"DAPO_BENCH_ID={self.args.bench_id} .venv/bin/python bench/soak.py --seed {self.args.seed} "
            f"--episode {ep.n} --hosts {self.args.hosts}{kinds}{quick}{inventory}"
        )

    def run(self) -> int:
        a = self.args
        kinds = a.kinds.split(",")
        print(f"soak: seed {a.seed}, bench {a.bench_id}, {a.hosts} host(s), kinds {','.join(kinds)}", flush=True)
        self.bench.up(tmpfs="disk-full" in kinds)
        self.op = Operator(
            self.bench, self.bench.state / "soak-home", a.swanlab_mode, Path(a.inventory) if a.inventory else None
        )
        self.sampler = Sampler(self.bench)
        self.sampler.start()
        t_end = now() + a.minutes * 60
        numbers = [a.episode] if a.episode is not None else None
        n = 0
        t_start = now()
        try:
            while True:
                if numbers is not None:
                    if not numbers:
                        break
                    n = numbers.pop(0)
                else:
                    n += 1
                    if (a.episodes and n > a.episodes) or (not a.episodes and now() >= t_end):
                        break
                ep = draw(a.seed, n, kinds, a.hosts, a.quick)
                t = now()
                print(f"[{n}] {ep.kind} on {ep.shape} {','.join(ep.hosts)} {ep.params}", flush=True)
                try:
                    self.episode(ep)
                except Exception as e:  # noqa: BLE001 - a harness error is reported, the soak goes on
                    ep.violations.append(("harness", f"{type(e).__name__}: {e}"))
                self.episodes.append(ep)
                if not (self.bench.state / "hosts").is_dir():  # torn down under us (another bench.sh down)
                    print(f"[{n}] bench {a.bench_id} is gone ({self.bench.state}): soak aborted", flush=True)
                    ep.violations.append(("harness", f"bench {a.bench_id} was torn down during the soak"))
                    break
                vs = "; ".join(f"{i}: {d}" for i, d in ep.violations) or "ok"
                print(
                    f"[{n}] {'skipped: ' + ep.skipped if ep.skipped else ''} {now() - t:.0f}s, verdict "
                    f"{'-' if ep.verdict_s is None else f'{ep.verdict_s:.0f}s'}, {vs}  {'; '.join(ep.notes)}",
                    flush=True,
                )
        finally:
            self.sampler.stop_ev.set()
            for h in self.bench.hosts:
                if subprocess.run(["mountpoint", "-q", str(self.bench.runs_dir(h))]).returncode == 0:
                    self.bench.docker(h, "rm", "-f", "verl")
                    subprocess.run(["umount", "-l", str(self.bench.runs_dir(h))], capture_output=True)
            if not a.keep:
                self.bench.down()
        report = self.report(now() - t_start)
        print(report)
        if a.out:
            Path(a.out).write_text(report)
        return 1 if any(ep.violations for ep in self.episodes) else 0

    def report(self, wall_s: float) -> str:
        a = self.args
        lines = [
            f"seed {a.seed}; {len(self.episodes)} episodes in {wall_s / 60:.1f} min on bench {a.bench_id} "
            f"({a.hosts} host(s)); kinds: {a.kinds}",
            "",
            "| fault | injected | skipped | invariants held | violations | time to right verdict (median / max) |",
            "|---|---|---|---|---|---|",
        ]
        for k in FAULTS:
            eps = [e for e in self.episodes if e.kind == k]
            if not eps:
                continue
            inj = [e for e in eps if not e.skipped]
            nviol = sum(len(e.violations) for e in eps)
            held = sum(1 for e in inj if not e.violations)
            ts = [e.verdict_s for e in inj if e.verdict_s is not None]
            tv = f"{statistics.median(ts):.0f} s / {max(ts):.0f} s" if ts else "-"
            lines.append(f"| {k} | {len(inj)} | {len(eps) - len(inj)} | {held}/{len(inj)} | {nviol} | {tv} |")
        lines += ["", "| invariant | violations |", "|---|---|"]
        for inv in INVARIANTS + ("harness",):
            c = sum(1 for e in self.episodes for i, _ in e.violations if i == inv)
            lines.append(f"| {inv} | {c} |")
        bad = [e for e in self.episodes if e.violations]
        if bad:
            lines += ["", "Violations (replay each with its command):"]
            for e in bad:
                lines.append(
                    f"- episode {e.n} ({e.kind}, {e.shape} {','.join(e.hosts)}): "
                    + "; ".join(f"[{i}] {d}" for i, d in e.violations)
                )
                lines.append(f"  replay: `{self.replay_cmd(e)}`")
        return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=float(os.environ.get("SOAK_MINUTES", 30)))
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--bench-id", type=int, default=int(os.environ.get("DAPO_BENCH_ID", 0)))
    ap.add_argument("--hosts", type=int, default=3, choices=(1, 2, 3))
    ap.add_argument("--episodes", type=int, default=0, help="stop after this many episodes (0: run --minutes)")
    ap.add_argument("--episode", type=int, default=None, help="replay only this episode of --seed")
    ap.add_argument("--kinds", default=",".join(FAULTS), help="comma list of fault kinds to draw from")
    ap.add_argument("--quick", action="store_true", help="short runs (8-10 steps of 0.2-0.3 s; the CI smoke)")
    ap.add_argument("--swanlab-mode", default="disabled")
    ap.add_argument("--out", default="", help="also write the report (markdown) here")
    ap.add_argument("--keep", action="store_true", help="leave the bench up afterwards")
    ap.add_argument(
        "--inventory",
        default="",
        help="the inventory the CLI uses (default: the bench's hosts.toml); e.g. a copy of it whose "
        "[hosts.<name>.supervisor] tables shorten retry_delay_s (the CI smoke)",
    )
    a = ap.parse_args(argv)
    if a.seed is None:
        a.seed = random.SystemRandom().randrange(1, 10**6)
    bad = [k for k in a.kinds.split(",") if k not in FAULTS]
    if bad:
        print(f"soak.py: unknown fault kind(s) {bad}: use {','.join(FAULTS)}", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("soak.py: needs root (the sandbox bench)", file=sys.stderr)
        return 2
    return Soak(a).run()


if __name__ == "__main__":
    sys.exit(main())
