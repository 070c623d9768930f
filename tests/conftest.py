"""Shared pytest fixtures. The ``sandbox`` fixture (session scope) is the bench of real SSH hosts.

Tests that need hosts are marked ``@pytest.mark.bench`` and request ``sandbox``; tests that do not request
it never wait for it. The bench is brought up once per session by ``sandbox/bench.sh up 3`` for
``DAPO_BENCH_ID`` (default 0; reused when already up) and torn down at session end, even on failure,
unless ``DAPO_BENCH_KEEP=1`` (or ``--bench-keep``) asks to keep it for the next session.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import pytest

# A suite started in the background (`.ci/run &`, a non-interactive shell's `cmd &`) inherits SIGINT ignored, and a
# Python child started with SIGINT ignored never raises KeyboardInterrupt: the Ctrl-C tests (test_interrupt,
# test_launch_bench, test_logs_bench) would test the launcher's shell, not dapo-ops. A terminal's Ctrl-C reaches a
# process whose SIGINT is the default; give this process (and so every child it execs) that disposition.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

REPO = Path(__file__).resolve().parent.parent
BENCH_SH = REPO / "sandbox" / "bench.sh"
N_HOSTS = 3


def repo_module(rel: str) -> ModuleType:
    """A repository file outside the package (``tasks.py``, ``bench/*.py``, ``gpu/*.py``) loaded as a fresh module
    and registered in ``sys.modules`` under its path's name behind ``repo_`` (``bench/soak.py`` ->
    ``repo_bench_soak``: dataclasses look their module up there; the prefix keeps ``tasks.py`` from shadowing a
    ``tasks`` module). Raises ``FileNotFoundError`` when ``rel`` is not a file of the repository."""
    name = "repo_" + rel.removesuffix(".py").replace("/", "_")
    spec = importlib.util.spec_from_file_location(name, REPO / rel)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(REPO / rel)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


DEFAULT_SCENARIO: dict = {}
DEFAULT_DEVICES: dict = {"accelerator": "npu", "count": 8, "hbm_total_mb": 65536}


try:  # pytest >= 9.2 keeps an item's id as a NodeId in ``_id``
    from _pytest.nodeid import NodeId
except ImportError:  # older pytest: pytest-xdist's own loadgroup suffix (``item._nodeid``) works there
    NodeId = None  # type: ignore[assignment,misc]


def _suffix_xdist_groups(config, items) -> None:
    """Under ``--dist loadgroup`` give each ``@pytest.mark.xdist_group(NAME)`` test the ``@NAME`` suffix that sends a
    group to one worker. pytest-xdist 3.8 adds it by setting ``item._nodeid`` (xdist/remote.py
    ``pytest_collection_modifyitems``), which pytest 9.2 no longer reads (``Node.nodeid`` is ``str(self._id)``): the
    group's tests then went to three workers, each launching the module's shared two-host run again (three ~60 s
    setups in one CI run instead of one)."""
    if NodeId is None or not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        names = sorted(
            {str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in item.iter_markers("xdist_group")}
        )
        if names and "@" not in item.nodeid and hasattr(item, "_id"):
            item._id = NodeId.parse(f"{item.nodeid}@{'_'.join(names)}")


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (``make test``): the tests on the sandbox hosts first, module by module in turn; the pure
    tests after them, in collection order.

    ``make test`` hands the tests out one at a time in this order (``--dist loadgroup``): a worker that finishes a
    test takes the next one; the tests of one ``@pytest.mark.xdist_group`` (which share a module fixture) go to one
    worker together, first. The sandbox tests are the long ones (up to ~90 s: Ray clusters, retry delays,
    the stall timeout); started first they overlap, and the ~2700 short pure tests fill the workers' ends evenly.
    The sandbox tests go round-robin over their modules (every module's first test, then every module's second ...)
    so that the workers run different kinds at once, not three Ray clusters of test_multihost_bench.py on 2 cores.
    Without xdist the order is pytest's own."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    _suffix_xdist_groups(config, items)
    on_hosts = [item for item in items if "sandbox" in item.fixturenames]
    pure = [item for item in items if "sandbox" not in item.fixturenames]
    nth: dict[str, int] = {}
    turn = []
    for item in on_hosts:
        module = item.nodeid.split("::", 1)[0]
        turn.append(nth.get(module, 0))
        nth[module] = turn[-1] + 1
    order = sorted(range(len(on_hosts)), key=lambda k: turn[k])  # stable: collection order within a turn
    items[:] = [on_hosts[k] for k in order] + pure


def pytest_addoption(parser):
    parser.addoption(
        "--bench-keep",
        action="store_true",
        default=False,
        help="keep the sandbox bench up after the session (same as DAPO_BENCH_KEEP=1)",
    )


def bench_id() -> str:
    """The bench id of this session: ``DAPO_BENCH_ID`` (default "0").

    Under pytest-xdist each worker ``gwK`` gets its own bench, id ``DAPO_BENCH_ID + K``, so workers never
    share hosts (``make test`` runs the files on several workers).
    """
    base = int(os.environ.get("DAPO_BENCH_ID", "0"))
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if worker.startswith("gw") and worker[2:].isdigit():
        return str(base + int(worker[2:]))
    return str(base)


# SSH control masters (dapo_ops/control/remote/sshmux.py) of this session (of this xdist worker) live in a
# directory of their own: sshmux.close_all() here (a test's cleanup) never ends another worker's or another
# session's masters, and tests that count masters count only theirs. The CLIs the tests run inherit it.
os.environ["DAPO_OPS_CONTROL_DIR"] = f"/tmp/dapo-ops-test-{os.getuid()}-b{bench_id()}"


def run_bench(
    *args: str, bench: str | None = None, check: bool = True, timeout: float = 300
) -> subprocess.CompletedProcess:
    """Run ``sandbox/bench.sh <args>`` for bench id ``bench`` (default: this session's); text output."""
    env = dict(os.environ, DAPO_BENCH_ID=bench if bench is not None else bench_id())
    proc = subprocess.run(["bash", str(BENCH_SH), *args], env=env, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise RuntimeError(f"bench.sh {' '.join(args)} failed (rc {proc.returncode}): {proc.stderr.strip()[-800:]}")
    return proc


@dataclass
class Sandbox:
    """Handle on the running bench (docs/design.md "Sandbox").

    Attributes: ``id`` (bench id str), ``state`` (Path of /var/tmp/dapo-bench-<id>), ``inventory`` (Path of the
    generated hosts.toml), ``ssh_config`` (Path), ``known_hosts`` (Path), ``identity_file`` (Path),
    ``hosts`` (["h1", "h2", "h3"]), ``addresses`` ({"h1": "198.51.<100+id>.11", ...}), ``container`` ("verl").
    """

    id: str
    state: Path
    hosts: list[str] = field(default_factory=lambda: [f"h{i}" for i in range(1, N_HOSTS + 1)])
    container: str = "verl"

    @property
    def inventory(self) -> Path:
        return self.state / "hosts.toml"

    @property
    def ssh_config(self) -> Path:
        return self.state / "ssh" / "ssh_config"

    @property
    def known_hosts(self) -> Path:
        return self.state / "ssh" / "known_hosts"

    @property
    def identity_file(self) -> Path:
        return self.state / "ssh" / "clientkey"

    @property
    def addresses(self) -> dict[str, str]:
        return {h: f"198.51.{100 + int(self.id)}.{10 + int(h[1:])}" for h in self.hosts}

    def host_dir(self, host: str) -> Path:
        """Host-side dir of ``host``: ``sandbox/`` (mounted at /sandbox, ro) and ``runs/`` (/verl/dapo_runs)."""
        self._check(host)
        return self.state / "hosts" / host

    def runs_dir(self, host: str) -> Path:
        """Host-side path of the container's /verl/dapo_runs (read-write bind mount)."""
        return self.host_dir(host) / "runs"

    def _check(self, host: str):
        if host not in self.hosts:
            raise ValueError(f"unknown sandbox host {host!r}; have {self.hosts}")

    # --------------------------------------------------------------- commands
    def ssh(
        self, host: str, cmd: str, timeout: float = 120, check: bool = False, input: str | None = None
    ) -> subprocess.CompletedProcess:
        """Run shell text ``cmd`` on ``host`` (not in the container) with the OpenSSH client and the generated
        ssh_config. Returns the CompletedProcess (text; ``returncode`` 255 = SSH failure)."""
        self._check(host)
        proc = subprocess.run(
            ["ssh", "-F", str(self.ssh_config), host, cmd], capture_output=True, text=True, timeout=timeout, input=input
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"ssh {host} {cmd!r} -> rc {proc.returncode}: {proc.stderr.strip()[-800:]}")
        return proc

    def exec(
        self,
        host: str,
        cmd: str,
        timeout: float = 120,
        check: bool = False,
        env: dict | None = None,
        workdir: str | None = None,
    ) -> subprocess.CompletedProcess:
        """Run shell text ``cmd`` inside ``host``'s container (``docker exec verl sh -c cmd`` over SSH)."""
        env_args = " ".join(f"-e {shlex.quote(f'{k}={v}')}" for k, v in (env or {}).items())
        wd = f"-w {shlex.quote(workdir)}" if workdir else ""
        return self.ssh(
            host, f"docker exec {env_args} {wd} {self.container} sh -c {shlex.quote(cmd)}", timeout=timeout, check=check
        )

    def tuned_inventory(self, dest: Path, tunables: dict[str, dict[str, float]]) -> Path:
        """Write a copy of the bench's inventory to ``dest`` in which host ``h`` has the supervisor tunables
        ``tunables[h]`` (``{"h1": {"retry_delay_s": 1.0}}``): the ``[hosts.<name>.supervisor]`` table a user writes in
        hosts.toml (dapo_ops/agent/supervisor/config.py ``HOST_TUNABLES``), which the launch puts into each run's spec.
        Returns ``dest``."""
        text = self.inventory.read_text()
        for host, tun in tunables.items():
            self._check(host)
            if tun:
                text += f"\n[hosts.{host}.supervisor]\n" + "".join(f"{k} = {float(v)}\n" for k, v in tun.items())
        dest.write_text(text)
        return dest

    # --------------------------------------------------------------- cues
    def set_scenario(self, host: str, scenario: dict) -> None:
        """Write ``host``'s /sandbox/scenario.json (stand-in failure cues; schema in sandbox/README.md)."""
        _write_json(self.host_dir(host) / "sandbox" / "scenario.json", scenario)

    def set_devices(self, host: str, devices: dict) -> None:
        """Write ``host``'s /sandbox/devices.json (npu-smi / nvidia-smi output and the device count enforced)."""
        _write_json(self.host_dir(host) / "sandbox" / "devices.json", devices)

    def reset(self, host: str) -> None:
        """Restore ``host``: sshd up, link up, container ``verl`` running (recreated if gone or stopped),
        processes started in it by tests ended (container restarted only when needed), empty
        /verl/dapo_runs, default scenario/devices."""
        self._check(host)
        self.link(host, True)
        self.start_sshd(host)
        self.set_scenario(host, DEFAULT_SCENARIO)
        self.set_devices(host, DEFAULT_DEVICES)
        run_bench("container", host, bench=self.id)
        # end stray processes inside the container (PID 1 is the keeper loop, keep it and its sleep)
        self.exec(
            host,
            'for p in /proc/[0-9]*; do n=${p#/proc/}; [ "$n" = 1 ] && continue; '
            "[ \"$n\" = $$ ] && continue; ppid=$(awk '/^PPid:/{print $2}' $p/status 2>/dev/null); "
            '[ "$ppid" = 1 ] && [ "$(cat $p/comm 2>/dev/null)" = sleep ] && continue; '
            "kill -9 $n 2>/dev/null; done; "
            "rm -rf /tmp/dapo-standin; true",
            timeout=60,
        )
        runs = self.runs_dir(host)
        runs.mkdir(parents=True, exist_ok=True)
        for child in runs.iterdir():
            subprocess.run(["rm", "-rf", "--", str(child)], check=True)

    def profile(self, host: str, name: str) -> None:
        """Recreate ``host``'s container on image profile ``name`` (``default`` | ``ascend``: the Ascend-like image,
        sandbox/ascend_image/README.md; ``bench.sh container hN ascend``). :meth:`reset` puts it back on default."""
        self._check(host)
        run_bench("container", host, name, bench=self.id)

    @contextlib.contextmanager
    def memory_limit(self, host: str, mib: int = 768):
        """``host``'s container under a memory limit of ``mib`` MiB (``docker update --memory``, no swap) while the
        block runs: what the stand-in's oom-host cue fills until the kernel's OOM killer ends it
        (sandbox/verl_standin/verl/_standin/hostmem.py). Docker cannot lift a limit again, so the container is
        removed afterwards and made anew without one (``bench.sh container``, as :meth:`reset` does)."""
        self._check(host)
        self.ssh(host, f"docker update --memory {mib}m --memory-swap {mib}m {self.container}", check=True)
        try:
            yield
        finally:
            self.ssh(host, f"docker rm -f {self.container}", check=True)
            run_bench("container", host, bench=self.id)

    def kill_sshd(self, host: str) -> None:
        """Stop ``host``'s sshd (by its pidfile): new SSH connections get ``Connection refused``."""
        run_bench("sshd", host, "stop", bench=self.id)

    def start_sshd(self, host: str) -> None:
        """Start ``host``'s sshd again (no-op when running)."""
        run_bench("sshd", host, "start", bench=self.id)

    def link(self, host: str, up: bool) -> None:
        """Bring ``host``'s network link up/down (down: SSH times out, ``Connection timed out``)."""
        run_bench("link", host, "up" if up else "down", bench=self.id)


def _write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, path)


def _keep(config) -> bool:
    return bool(config.getoption("--bench-keep")) or os.environ.get("DAPO_BENCH_KEEP", "") not in ("", "0")


@pytest.fixture(scope="session", autouse=True)
def _no_inherited_columns():
    """The tests see what an operator's pipe sees: no ``COLUMNS`` / ``LINES`` unless a test sets them. pytest-xdist's
    workers start with ``COLUMNS=80`` in their environment, which the one width rule (fanout.output_width) obeys:
    under ``make test`` every table and status line was laid out for 80 columns (the fresh-clone CI run of
    2026-12-07 failed 5 tests on it) while a plain ``pytest`` run saw a pipe's default."""
    saved = {k: os.environ.pop(k) for k in ("COLUMNS", "LINES") if k in os.environ}
    yield
    os.environ.update(saved)


@pytest.fixture(scope="session")
def sandbox(request):
    """The session's bench (docs/design.md "Sandbox"): 3 hosts for ``DAPO_BENCH_ID``, reused when up."""
    if os.geteuid() != 0:
        pytest.skip("sandbox bench needs root")
    bid = bench_id()
    try:
        out = run_bench("up", str(N_HOSTS), timeout=600)
    except RuntimeError as e:
        run_bench("down", check=False)
        pytest.fail(str(e), pytrace=False)
    sb = Sandbox(id=bid, state=Path(out.stdout.strip().splitlines()[-1]).parent)
    for h in sb.hosts:
        sb.reset(h)
    try:
        yield sb
    finally:
        if not _keep(request.config):
            proc = run_bench("down", check=False)
            if proc.returncode != 0:
                sys.stderr.write(f"sandbox teardown failed: {proc.stderr}\n")


# ------------------------------------------------------------------------------------------ the real CLI
# Tests drive the CLI as an operator does: a subprocess of ``inv -r <repo> <task> ...`` or ``dapo-ops <task> ...``.

BIN = Path(sys.executable).parent
CLI_PROGS = {"inv": [sys.executable, "-m", "invoke", "-r", str(REPO)], "dapo-ops": [str(BIN / "dapo-ops")]}


@dataclass(frozen=True)
class CliResult:
    """One CLI run: ``rc`` (exit status), ``stdout``, ``stderr`` (text), ``argv`` (what ran)."""

    rc: int
    stdout: str
    stderr: str
    argv: tuple

    @property
    def returncode(self) -> int:
        """``rc`` under :class:`subprocess.CompletedProcess`'s name."""
        return self.rc


def run_cli(
    prog: str,
    *args,
    cwd: str | os.PathLike | None = None,
    env: dict | None = None,
    drop_env: tuple[str, ...] = (),
    stdin: str | None = None,
    timeout: float = 180,
) -> CliResult:
    """Run ``prog`` (``"inv"``: ``python -m invoke -r <repo>``; ``"dapo-ops"``: the installed Fab program) with
    ``args`` (each ``str()``-ed) as a subprocess and wait for it.

    :param cwd: working directory (default: the repo root).
    :param env: variables set on top of this process's environment, after removing every variable whose name
        starts with one of ``drop_env`` (e.g. ``("SWANLAB_",)`` so the operator's own settings do not leak in).
    :param stdin: text fed to stdin; None = ``/dev/null`` (never a TTY, so nothing prompts).
    :param timeout: seconds (``subprocess.TimeoutExpired`` after it).
    """
    if prog not in CLI_PROGS:
        raise ValueError(f"unknown CLI {prog!r}: use one of {', '.join(CLI_PROGS)}")
    argv = [*CLI_PROGS[prog], *(str(a) for a in args)]
    full_env = {k: v for k, v in os.environ.items() if not (drop_env and k.startswith(drop_env))}
    full_env.update(env or {})
    proc = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        cwd=str(cwd or REPO),
        env=full_env,
        timeout=timeout,
        input=stdin,
        stdin=subprocess.DEVNULL if stdin is None else None,
    )
    return CliResult(rc=proc.returncode, stdout=proc.stdout, stderr=proc.stderr, argv=tuple(argv))


@pytest.fixture(scope="session")
def cli():
    """:func:`run_cli`: ``cli("inv", "status", "-H", "h1", env={...}, cwd=tmp_path)`` -> :class:`CliResult`."""
    return run_cli


# ------------------------------------------------------------------------------------------ test report
# Tests that must print a figure in the test output (the classifier corpus per class, the compose combination
# count, the runbook-default argv) call the ``test_report`` fixture. The lines are collected in one file shared
# by all pytest-xdist workers and printed once, by the controller, in the terminal summary.

_REPORT_ENV = "DAPO_TEST_REPORT"


def pytest_sessionstart(session):
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        import tempfile

        fd, path = tempfile.mkstemp(prefix="dapo-test-report-", suffix=".txt")
        os.close(fd)
        os.environ[_REPORT_ENV] = path  # inherited by xdist workers, which start after this


@pytest.fixture
def test_report():
    """``test_report(text)``: print ``text`` in the terminal summary of this run (xdist-safe)."""

    def add(text: str) -> None:
        path = os.environ.get(_REPORT_ENV)
        if path:
            with open(path, "a", encoding="utf-8") as fh:
                fh.write(text.rstrip("\n") + "\n\n")

    return add


#: how many test files the time-by-file table shows
TIME_FILES_SHOWN = 15


def time_by_file_and_worker(reports) -> tuple[list[tuple[str, float, int]], list[tuple[str, float, float, float]]]:
    """``(files, workers)`` of a run's test reports (setup, call and teardown each one report).

    ``files``: ``(path, seconds, tests)`` per test file, most seconds first (seconds: the sum of its reports'
    durations on whichever worker ran them). ``workers``: ``(worker id, busy s, first start, last stop)`` per
    pytest-xdist worker (``"main"`` without xdist), by id; start and stop are epoch seconds (``TestReport.start`` /
    ``.stop``): a worker that stops long before the others waited for nothing at the end of the run."""
    files: dict[str, list] = {}
    workers: dict[str, list[float]] = {}
    for r in reports:
        dur = float(getattr(r, "duration", 0.0) or 0.0)
        f = files.setdefault(r.nodeid.split("::", 1)[0], [0.0, set()])
        f[0] += dur
        f[1].add(r.nodeid)
        node = getattr(r, "node", None)
        wid = node.gateway.id if node is not None and hasattr(node, "gateway") else "main"
        w = workers.setdefault(wid, [0.0, float("inf"), 0.0])
        w[0] += dur
        w[1] = min(w[1], float(getattr(r, "start", 0.0) or float("inf")))
        w[2] = max(w[2], float(getattr(r, "stop", 0.0) or 0.0))
    by_file = sorted(((k, v[0], len(v[1])) for k, v in files.items()), key=lambda x: -x[1])
    return by_file, [(k, v[0], v[1], v[2]) for k, v in sorted(workers.items())]


def _time_summary(terminalreporter) -> None:
    """With ``--durations`` (``.ci/run`` passes it): the test files that took longest and each xdist worker's busy
    time and end, so a CI run shows which files grew and whether a worker idled at the end."""
    reports = [
        r
        for key in ("passed", "failed", "error", "skipped", "xfailed", "xpassed", "")
        for r in terminalreporter.stats.get(key, [])
        if getattr(r, "when", None) in ("setup", "call", "teardown")
    ]
    if not reports:
        return
    files, workers = time_by_file_and_worker(reports)
    terminalreporter.section("test time by file (setup + call + teardown, summed over workers)")
    for path, secs, n in files[:TIME_FILES_SHOWN]:
        terminalreporter.write_line(f"{secs:8.1f} s  {n:5d} tests  {path}")
    terminalreporter.write_line(f"{sum(f[1] for f in files):8.1f} s  in all, {len(files)} files")
    t0 = min(w[2] for w in workers)
    for wid, busy, _start, stop in workers:
        terminalreporter.write_line(f"worker {wid}: busy {busy:.0f} s, last test ended at +{stop - t0:.0f} s")


def pytest_terminal_summary(terminalreporter):
    if terminalreporter.config.getoption("durations", None) is not None:
        _time_summary(terminalreporter)
    path = os.environ.get(_REPORT_ENV)
    if os.environ.get("PYTEST_XDIST_WORKER") or not path or not os.path.exists(path):
        return
    text = Path(path).read_text(encoding="utf-8").strip()
    os.unlink(path)
    if text:
        terminalreporter.section("dapo-ops test report")
        terminalreporter.write_line(text)
