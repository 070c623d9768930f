"""The CLI surface: `inv` and `dapo-ops` list the same tasks, -H reaches the task's `hosts` argument in one call
(not one serial clone per host), flags are typed and documented. Pure: no host is contacted."""

from __future__ import annotations

import itertools
import shlex
import io
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import repo_module
from invoke import Collection, Program, task

from dapo_ops import cli
from dapo_ops.cli import program
from dapo_ops.cli._common import EXIT_USAGE, FanoutTask, fanout_task
from config_helpers import no_config

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def repo_tasks():
    """The repository's tasks.py as a module (the dev tasks live there, outside the package)."""
    return repo_module("tasks.py")


def make_recording_ns(calls):
    @fanout_task(help={"steps": "training steps"})
    def rec(c, hosts="", inventory="", steps=0, ratio=0.5, dry=False):
        """Record the arguments it was called with."""
        calls.append({"hosts": hosts, "steps": steps, "ratio": ratio, "dry": dry, "ctx": type(c).__name__})

    @task
    def local(c):
        """A task that does not run on hosts."""
        calls.append({"local": True})

    return Collection(rec, local)


class TestHostsFlag:
    def test_dapo_ops_core_H_is_passed_into_the_task_once(self):
        calls = []
        program.make_program(make_recording_ns(calls)).run("dapo-ops -H h1,h2 rec", exit=False)
        assert len(calls) == 1, "Fabric's executor would clone the call once per host and run them serially"
        assert calls[0]["hosts"] == "h1,h2"
        assert calls[0]["ctx"] != "Connection"

    def test_inv_task_level_H_works_the_same(self):
        calls = []
        Program(namespace=make_recording_ns(calls), name="inv").run("inv rec -H h1,h2", exit=False)
        assert calls == [{"hosts": "h1,h2", "steps": 0, "ratio": 0.5, "dry": False, "ctx": "Context"}]

    def test_long_flag_and_task_level_H_under_dapo_ops(self):
        calls = []
        program.make_program(make_recording_ns(calls)).run("dapo-ops rec --hosts h3", exit=False)
        assert calls[0]["hosts"] == "h3"

    def test_task_level_H_wins_over_core_H(self):
        calls = []
        program.make_program(make_recording_ns(calls)).run("dapo-ops -H h1 rec -H h2", exit=False)
        assert [c["hosts"] for c in calls] == ["h2"]

    def test_no_H_means_empty_hosts_which_the_task_reads_as_all(self):
        calls = []
        program.make_program(make_recording_ns(calls)).run("dapo-ops rec", exit=False)
        assert calls[0]["hosts"] == ""

    def test_H_on_a_task_without_hosts_is_a_one_line_usage_error(self, capsys):
        calls = []
        with pytest.raises(SystemExit) as ei:
            program.make_program(make_recording_ns(calls)).run("dapo-ops -H h1 local")
        assert ei.value.code == EXIT_USAGE
        assert calls == []
        err = capsys.readouterr().err.strip()
        assert err == "task 'local' does not run on hosts; drop -H (tasks that do: see dapo-ops --list)"

    def test_H_short_flag_never_takes_h_for_help(self):
        @fanout_task
        def t(c, hosts="", hang_timeout=0):
            """doc"""

        names = {a.name: a.names for a in t.get_arguments()}
        assert names["hosts"] == ("hosts", "H")
        assert "h" not in names["hang_timeout"]


class TestTypedFlags:
    def test_int_float_bool_defaults_type_the_flags(self):
        calls = []
        program.make_program(make_recording_ns(calls)).run("dapo-ops rec --steps 100 --ratio 0.25 --dry", exit=False)
        assert calls[0]["steps"] == 100 and isinstance(calls[0]["steps"], int)
        assert calls[0]["ratio"] == 0.25 and calls[0]["dry"] is True

    def test_help_survives_a_second_parse_in_the_same_process(self):
        ns = make_recording_ns([])
        first = {a.name: a.help for a in ns["rec"].get_arguments()}
        second = {a.name: a.help for a in ns["rec"].get_arguments()}
        assert first == second and first["steps"] == "training steps"


def every_task(coll: Collection, prefix=""):
    for name in coll.task_names:
        yield prefix + name, coll[name]


class TestRealCollection:
    @pytest.mark.parametrize("which", ["package", "repo"])
    def test_every_task_has_a_one_line_doc_and_every_flag_has_help(self, which):
        if which == "package":
            ns = cli.build_namespace()
            assert "hosts" in ns.task_names
        else:  # the dev tasks of tasks.py (only those: a command line naming them loads no package module)
            ns = repo_tasks().namespace(["demo", "sandbox.up"])
            assert set(ns.task_names) == {"demo", "sandbox.up", "sandbox.down", "sandbox.status"}
        for name, t in every_task(ns):
            doc = (t.__doc__ or t.body.__doc__ or "").strip()
            assert doc, f"task {name} has no docstring"
            for arg in t.get_arguments():
                assert arg.help, f"task {name}: flag --{arg.name} has no help"

    def test_tasks_taking_hosts_are_fanout_tasks_with_H_and_inventory(self):
        ns = cli.build_namespace()
        for name, t in every_task(ns):
            args = {a.name: a for a in t.get_arguments()}
            if "hosts" in args and args["hosts"].kind is str:  # a -H host list (sandbox.up's hosts is a count)
                # every task that runs on inventory hosts is a fanout_task with -H and --inventory
                assert isinstance(t, FanoutTask), name
                assert args["hosts"].names == ("hosts", "H"), name
                assert "inventory" in args, name


@pytest.mark.parametrize(
    "argv", [[str(BIN / "inv"), "-r", str(REPO), "--list"], [str(BIN / "dapo-ops"), "--list"]], ids=["inv", "dapo-ops"]
)
def test_list_shows_hosts_with_one_line_help(argv, tmp_path):
    out = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert out.returncode == 0, out.stderr
    line = next(ln for ln in out.stdout.splitlines() if ln.strip().startswith("hosts "))
    assert "SSH reachable" in line


def test_bad_inventory_exits_2_with_one_line_and_contacts_nothing(tmp_path):
    inv = tmp_path / "hosts.toml"
    inv.write_text('[hosts.h1]\naddress = "192.0.2.1"\ndevices = -2\n')
    out = subprocess.run(
        [str(BIN / "dapo-ops"), "hosts", "--inventory", str(inv)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == EXIT_USAGE
    assert (
        out.stderr.strip()
        == f"{inv}:3: host 'h1': field 'devices': must be 1..64 (accelerators on the host; verl's trainer.n_gpus_per_node), got -2"
    )
    assert out.stdout == ""


def test_fab_core_flags_reach_the_selected_hosts(tmp_path):
    inv = tmp_path / "hosts.toml"
    inv.write_text(
        '[defaults]\nconnect_timeout = 10\nidentity_file = "/k/default"\n[hosts.h1]\naddress = "192.0.2.1"\n'
    )
    sshcfg = tmp_path / "ssh_config"
    sshcfg.write_text("Host h1\n  User root\n")
    seen = []

    @fanout_task
    def show(c, hosts="", inventory=""):
        """Record the selected hosts."""
        from dapo_ops.cli._common import select_hosts

        seen.extend(select_hosts(c, hosts, inventory)[1])

    program.make_program(Collection(show)).run(
        f"dapo-ops -t 3 -i /k/other -S {sshcfg} -H h1 show --inventory {inv}", exit=False
    )
    (h,) = seen
    assert (h.connect_timeout, h.identity_file, h.ssh_config) == (3.0, "/k/other", str(sshcfg))
    seen.clear()
    Program(namespace=Collection(show), name="inv").run(f"inv show -H h1 --inventory {inv}", exit=False)
    assert (seen[0].connect_timeout, seen[0].identity_file, seen[0].ssh_config) == (10, "/k/default", None)


@pytest.mark.parametrize(
    "argv,flag",
    [
        (["launch", "--dry-run", "--steps", "abc"], "--steps"),
        (["launch", "--dry-run", "--steps", "1.5"], "--steps"),
        (["logs", "--lines", "many"], "--lines"),
        (["watch", "--interval", "soon"], "--interval"),
    ],
)
@pytest.mark.parametrize("prog", ["inv", "dapo-ops"])
def test_a_bad_typed_flag_value_is_one_line_not_a_traceback(prog, argv, flag, tmp_path):
    cmd = [str(BIN / "inv"), "-r", str(REPO)] if prog == "inv" else [str(BIN / "dapo-ops")]
    out = subprocess.run(cmd + argv, capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert out.returncode == EXIT_USAGE  # one code for every usage error
    assert "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(flag + ":"), out.stderr


def test_classify_help_is_help_not_a_missing_file(tmp_path):
    out = subprocess.run(
        [str(BIN / "inv"), "-r", str(REPO), "classify", "--help"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert out.returncode == 0 and "LOGFILE" in out.stdout and "--exit-code" in out.stdout


class TestLaunchTasks:
    """``launch`` and ``one-step-off`` are built from ONE parameter list (dapo_ops/cli/launch.py ``SIGNATURE``: the
    settings table's flags, then how to launch) and differ only in the job each fixes; a test that kept two copies
    of a 41-parameter signature in sync is no longer needed."""

    def test_both_tasks_take_the_one_parameter_list_and_so_the_same_flags(self):
        import inspect

        from dapo_ops.cli import launch as cl
        from dapo_ops.control import settings

        ns = cli.build_namespace()
        a, b = ns["launch"], ns["one-step-off"]
        assert inspect.signature(a.body) is cl.SIGNATURE and inspect.signature(b.body) is cl.SIGNATURE
        flags = [[(x.names, x.kind, x.default, x.help) for x in t.get_arguments()] for t in (a, b)]
        assert flags[0] == flags[1]
        # made from the settings table: every setting with a flag, then the launch options, nothing else
        assert list(cl.SIGNATURE.parameters) == ["c", *settings.BY_ARG, *cl.OPTIONS]

    def test_each_task_fixes_its_job_and_no_flag_changes_it(self, monkeypatch):
        from invoke import Context

        from dapo_ops.cli import launch as cl
        from dapo_ops.control.launch import request as launch_request

        seen = []

        class Stop(Exception):
            pass

        def build(args, env, **kw):
            seen.append(args)
            raise Stop

        monkeypatch.setattr(launch_request, "build", build)
        for t in (cl.launch, cl.one_step_off):
            with pytest.raises(Stop):
                t(Context(), dry_run=True, steps=4)  # a direct call (quickstart's) gets the other defaults
        assert [(x.mode, x.flags, x.dry_run, x.link_wait) for x in seen] == [
            ("dapo", {"steps": 4}, True, 20),
            ("one-step-off", {"steps": 4}, True, 20),
        ]
        assert not {"job", "job_", "task"} & set(cl.SIGNATURE.parameters)  # --mode is verl's trainer mode

    def test_a_bool_setting_flag_has_a_no_form_that_beats_the_env(self, monkeypatch):
        """``ENABLE_OFFLOAD=True inv launch --no-offload`` was invoke's "No idea what '--no-offload' is!" (a bool flag
        defaulting to False has no inverse): every bool setting flag is ``--name`` / ``--no-name`` now, and left off
        it is not given (None), so the env or file decides."""
        from invoke import Collection, Program

        from dapo_ops.cli import launch as cl
        from dapo_ops.control.launch import request as launch_request

        seen = []

        class Stop(Exception):
            pass

        def build(args, env, **kw):
            seen.append(args.flags)
            raise Stop

        monkeypatch.setattr(launch_request, "build", build)
        for argv in ("--no-offload", "--offload", "", "--no-allow-short-data --vanilla-mbridge"):
            with pytest.raises(Stop):
                Program(namespace=Collection(cl.launch), name="inv").run(f"inv launch --dry-run {argv}", exit=False)
        assert seen == [{"offload": False}, {"offload": True}, {}, {"allow_short_data": False, "vanilla_mbridge": True}]
        out = io.StringIO()
        monkeypatch.setattr(sys, "stdout", out)
        Program(namespace=Collection(cl.launch), name="inv").run("inv launch --help", exit=False)
        assert "--[no-]offload" in out.getvalue() and "--[no-]allow-short-data" in out.getvalue()

    def test_a_launch_writes_nothing_into_the_environment(self, monkeypatch, tmp_path):
        """--swanlab-host reached the SwanLab setup by ``os.environ["SWANLAB_HOST"] = ...``, which stayed set for
        the rest of the process (quickstart's preflight and launch, tests); it is passed in a copy now."""
        import os

        from invoke import Context

        from dapo_ops.cli import launch as cl

        for k in [k for k in os.environ if k.startswith(("SWANLAB_", "DAPO_OPS_"))]:
            monkeypatch.delenv(k)
        monkeypatch.setenv("DAPO_OPS_CONFIG", no_config(tmp_path))
        monkeypatch.chdir(tmp_path)
        before = dict(os.environ)
        cl.launch(Context(), dry_run=True, swanlab_host="http://192.0.2.10:8000", swanlab_mode="disabled")
        assert dict(os.environ) == before


class TestImportBudget:
    """A run loads only the task modules on its command line, and the status path loads no heavy library
    (bench/status.py measures the seconds; these check which modules, which is what the budget is made of)."""

    def test_task_index_names_every_task_and_its_module(self):
        import importlib

        found = {}
        for modname in cli.TASK_MODULES:
            for name in Collection.from_module(importlib.import_module(modname)).task_names:
                found[name] = modname
        assert cli.TASK_INDEX == found

    @pytest.mark.parametrize(
        "argv,mods",
        [
            (["status", "--json"], {"dapo_ops.cli.status"}),
            (["-H", "h1", "watch", "--interval", "5"], {"dapo_ops.cli.status"}),
            (["status", "--help"], {"dapo_ops.cli.status"}),
            (["one_step_off", "--dry-run"], {"dapo_ops.cli.launch"}),
            (["container.list"], {"dapo_ops.cli.containers"}),
            (["hosts", "preflight"], {"dapo_ops.cli.hosts", "dapo_ops.cli.preflight"}),
            (["--list"], None),
            (["--help"], None),
            ([], None),
            (["stauts"], None),
            (["status", "--list"], None),
            (["-H", "h1", "--", "uname"], None),
        ],
    )
    def test_modules_for_the_command_line(self, argv, mods):
        assert cli.modules_for(argv) == (frozenset(mods) if mods is not None else None)

    def test_a_dev_task_of_the_repo_needs_no_task_module(self):
        dev = repo_tasks().DEV_TASKS
        assert cli.modules_for(["sandbox.up", "--hosts", "3"], local=dev) == frozenset()
        assert cli.modules_for(["demo", "--help"], local=dev) == frozenset()
        assert cli.modules_for(["demo", "status"], local=dev) == {"dapo_ops.cli.status"}
        assert cli.modules_for(["sandbox.up"]) is None  # the package alone does not know it: everything

    def test_the_status_path_loads_no_ssh_table_or_config_library(self):
        code = (
            "import sys; from dapo_ops import cli; from dapo_ops.cli import program; "
            "program.make_program(cli.namespace_for(['status', '--json'])); "
            "from dapo_ops.cli import status; from dapo_ops.control.status.look import probe; "
            "print(' '.join(sorted(m for m in sys.modules)))"
        )
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO)
        assert out.returncode == 0, out.stderr
        loaded = set(out.stdout.split())
        heavy = {
            m
            for m in loaded
            if m.split(".")[0] in ("paramiko", "fabric", "rich", "hydra", "omegaconf", "cryptography", "nacl")
        }
        assert not heavy, sorted(heavy)
        other_tasks = {
            m
            for m in loaded
            if m.startswith("dapo_ops.cli.")
            and m not in ("dapo_ops.cli.status", "dapo_ops.cli._common", "dapo_ops.cli.program")
        }
        assert (
            not other_tasks and "dapo_ops.control.launch.plan" not in loaded and "dapo_ops.core.classify" not in loaded
        )

    def test_inv_runs_a_task_with_only_its_module_loaded(self, tmp_path):
        out = subprocess.run(
            [str(BIN / "inv"), "-r", str(REPO), "status", "--help"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=60,
        )
        assert out.returncode == 0 and "--json" in out.stdout, out.stderr
        out = subprocess.run(
            [str(BIN / "dapo-ops"), "-H", "h1", "--", "uname"], capture_output=True, text=True, cwd=tmp_path, timeout=60
        )
        assert out.returncode == EXIT_USAGE
        assert out.stderr.strip() == "dapo-ops runs tasks, not ad hoc commands after '--'; e.g. dapo-ops -H h1 hosts"


@pytest.mark.parametrize("prog", ["inv", "dapo-ops"])
def test_an_unknown_task_flag_is_one_line_and_exits_like_every_usage_error_under_dapo_ops(prog, tmp_path):
    """The same one line under both programs; ``dapo-ops`` (DapoOps.parse_tasks) exits 2 as every usage error, plain
    ``inv`` keeps invoke's 1 for its own parser's errors (invoke/program.py ``Program.run``): only a Program can change
    that, and nothing of invoke is patched (test_importing_the_cli_changes_nothing_of_invoke)."""
    cmd = [str(BIN / "inv"), "-r", str(REPO)] if prog == "inv" else [str(BIN / "dapo-ops")]
    out = subprocess.run(cmd + ["status", "--nosuch"], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert out.stderr.strip() == "No idea what '--nosuch' is!", out.stderr
    assert out.returncode == (EXIT_USAGE if prog == "dapo-ops" else 1)
    if prog == "dapo-ops":  # a flag without its value, --help of no task: the same code
        for argv, line in (
            (["logs", "--lines"], "Flag <Argument: lines (n) [int]> needed value and was not given one!"),
            (["--help", "nosuch"], "No idea what 'nosuch' is!"),
        ):
            out = subprocess.run(cmd + argv, capture_output=True, text=True, cwd=tmp_path, timeout=60)
            assert (out.returncode, out.stderr.strip()) == (EXIT_USAGE, line), out.stderr


#: a program over one task that prints more than a pipe holds (argv[1]: inv | dapo-ops)
FLOOD = """
import sys
from invoke import Collection, Program
from dapo_ops.cli import program
from dapo_ops.cli._common import dapo_task

@dapo_task
def flood(c):
    \"\"\"Print many lines.\"\"\"
    for _ in range(200000):
        print("x" * 80)

ns = Collection(flood)
prog = program.make_program(ns) if sys.argv[1] == "dapo-ops" else Program(namespace=ns, name="inv")
prog.run([sys.argv[1], "flood"])
"""


@pytest.mark.parametrize("prog", ["inv", "dapo-ops"])
def test_a_closed_pipe_ends_a_task_quietly_not_with_a_traceback(prog):
    code = f"set -o pipefail; {shlex.quote(sys.executable)} -c {shlex.quote(FLOOD)} {prog} | head -1"
    out = subprocess.run(["bash", "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout == "x" * 80 + "\n" and out.stderr == "", out.stderr
    assert out.returncode == 141  # 128 + SIGPIPE, as a shell tool killed by it


def test_a_closed_pipe_ends_the_dapo_ops_programs_own_output_quietly():
    import os

    r, w = os.pipe()
    os.close(r)  # the reader is gone before the program writes its first byte
    try:
        out = subprocess.run([str(BIN / "dapo-ops"), "--help", "launch"], stdout=w, stderr=subprocess.PIPE, timeout=60)
    finally:
        os.close(w)
    assert (out.returncode, out.stderr) == (141, b"")


def test_importing_the_cli_changes_nothing_of_invoke():
    """cli/__init__.py used to replace invoke's ``Argument.set_value``, ``Parser.parse_argv``, ``Task.__call__`` and
    ``sys.excepthook`` when imported; the task class and the dapo-ops program do that work now."""
    code = (
        "import sys, importlib.util\n"
        "from invoke import Argument, Executor, Program, Task\n"
        "from invoke.parser import Parser, ParseMachine\n"
        "what = lambda: (Argument.set_value, Argument.__init__, Parser.parse_argv, ParseMachine.handle, Task.__call__,"
        " Task.get_arguments, Program.run, Program.parse_tasks, Executor.execute, sys.excepthook, sys.displayhook)\n"
        "before = what()\n"
        "import dapo_ops.cli\n"
        "from dapo_ops.cli import program\n"
        "program.make_program(dapo_ops.cli.build_namespace())\n"
        f"spec = importlib.util.spec_from_file_location('repo_tasks', {str(REPO / 'tasks.py')!r})\n"
        "spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
        "print([i for i, (a, b) in enumerate(zip(before, what())) if a is not b])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_list_shows_whole_first_sentences():
    out = subprocess.run([str(BIN / "inv"), "-r", str(REPO), "--list"], capture_output=True, text=True, timeout=60)
    lines = out.stdout[out.stdout.index("  stop ") :].splitlines()
    entry = [lines[0]] + [ln for ln in itertools.takewhile(lambda ln: ln.startswith(" " * 8), lines[1:])]
    assert " ".join(entry).rstrip().endswith("idempotent."), entry


@pytest.mark.parametrize(
    "argv",
    [
        ["status", "-H", ""],
        ["status", "-H", ","],
        ["status", "--hosts="],
        # the launch's dry run plans before any host is selected: -H '' (an unset $HOSTS) planned every host
        ["launch", "--dry-run", "--steps", "4", "-H", ""],
        ["launch", "--dry-run", "--steps", "4", "--hosts="],
    ],
)
def test_an_empty_host_list_is_refused_not_every_host(argv, tmp_path):
    inv = tmp_path / "hosts.toml"
    inv.write_text('[hosts.h1]\naddress = "192.0.2.1"\n')
    out = subprocess.run(
        [str(BIN / "inv"), "-r", str(REPO), *argv, "--inventory", str(inv)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert out.returncode == EXIT_USAGE and out.stderr.strip().startswith("-H names no host"), out.stderr


def test_dev_tasks_are_in_the_repo_list_not_in_the_installed_program(tmp_path):
    repo = subprocess.run(
        [str(BIN / "inv"), "-r", str(REPO), "--list"], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    prog = subprocess.run([str(BIN / "dapo-ops"), "--list"], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert repo.returncode == 0 and prog.returncode == 0, repo.stderr + prog.stderr
    names = {
        which: {ln.split()[0] for ln in out.stdout.splitlines() if ln.startswith("  ") and ln.split()}
        for which, out in (("repo", repo), ("prog", prog))
    }
    dev = {"demo", "sandbox.up", "sandbox.down", "sandbox.status"}
    assert dev <= names["repo"] and not dev & names["prog"]
    assert names["prog"] <= names["repo"] and "launch" in names["prog"]
    assert not any(m.startswith("sandbox") for m in cli.SUB_COLLECTIONS) and "demo" not in cli.TASK_INDEX


def test_launch_and_multihost_do_not_import_each_other():
    import ast

    def imports(mod):
        tree = ast.parse((REPO / "dapo_ops" / "cli" / f"{mod}.py").read_text())
        return (
            {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
            | {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
            | {f"{n.module}.{a.name}" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
        )

    assert not {m for m in imports("multihost") if m.startswith("dapo_ops.cli.launch")}
    assert "dapo_ops.cli.multihost" in imports("launch")  # one direction only


class TestModeFlags:
    """``--mode`` names the job for preflight (dapo | one-step-off) and verl's V1 trainer mode for launch
    (async | sync): each task takes the other's spelling where it means one thing, and says where to go where it
    does not (dapo_ops/cli/preflight.py, dapo_ops/cli/launch.py)."""

    @pytest.mark.parametrize(
        "mode,trainer_mode",
        [
            ("sync", "sync"),
            ("async", "colocate_async"),
        ],
    )
    def test_preflight_checks_what_launch_mode_runs(self, monkeypatch, mode, trainer_mode):
        from invoke import Context

        from dapo_ops.cli import preflight as cp
        from dapo_ops.control.preflight import group as preflight_group

        seen = {}

        class Stop(Exception):
            pass

        def fake_run_fleet(chosen, jobs, **kw):
            seen.update({h: j.plan for h, j in jobs.items()})
            raise Stop

        monkeypatch.setattr(preflight_group, "run_fleet", fake_run_fleet)  # cli/preflight.py looks it up there
        monkeypatch.delenv("DAPO_MODE", raising=False)
        with pytest.raises(Stop):
            cp.preflight(
                Context(), mode=mode, hosts="npu1", inventory=str(REPO / "hosts.toml"), swanlab_mode="disabled"
            )
        assert f"trainer.v1.trainer_mode={trainer_mode}" in seen["npu1"].argv  # what the compose check composes

    @pytest.mark.parametrize("mode,hint", [("one-step-off", "`inv one-step-off ...`"), ("dapo", "drop --mode")])
    def test_launch_mode_names_the_task_for_a_job_name(self, mode, hint):
        r = subprocess.run(
            [str(BIN / "inv"), "-r", str(REPO), "launch", "--mode", mode, "--dry-run"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == EXIT_USAGE and r.stdout == ""
        assert r.stderr.count("\n") == 1 and "async | sync" in r.stderr and hint in r.stderr


class TestShortFlags:
    """One short flag = one concept in every task (issue 32 item 9): ``-a`` was ``--all``, ``--attempt``,
    ``--max-response-length`` and ``--swanlab-mode``; ``-n`` (tail's and journalctl's line count) was unknown."""

    @staticmethod
    def _all_tasks():
        yield from every_task(cli.build_namespace())
        dev = repo_tasks().namespace(["demo", "sandbox.up"])
        yield from every_task(dev)
        for coll in dev.collections.values():
            yield from every_task(coll)
        for coll in cli.build_namespace().collections.values():
            yield from every_task(coll)

    def test_each_short_flag_means_one_concept_in_every_task(self):
        from dapo_ops.cli._common import SHORT_FLAGS

        meaning: dict[str, set] = {}  # short letter -> {(long name, kind)}
        shorts: dict[tuple, set] = {}  # (long name, kind) -> {short letter or None}
        for name, t in self._all_tasks():
            for a in t.get_arguments():
                long_name, letters = a.names[0], [n for n in a.names[1:] if len(n) == 1]
                assert len(letters) <= 1, (name, a.names)
                concept = (long_name, a.kind)
                shorts.setdefault(concept, set()).add(letters[0] if letters else None)
                for x in letters:
                    meaning.setdefault(x, set()).add(concept)
                    assert SHORT_FLAGS.get(long_name.replace("-", "_")) == x, (name, a.names)
        assert {x: m for x, m in meaning.items() if len(m) > 1} == {}
        assert {c: s for c, s in shorts.items() if len(s) > 1 and c[0] in SHORT_FLAGS} == {}
        # the letters users expect from other tools; -h is --help, -i/-S/-t are dapo-ops' core SSH flags
        assert meaning["n"] == {("lines", int)} and meaning["f"] == {("follow", bool)}
        assert meaning["H"] == {("hosts", str)}
        assert not {"h", "i", "S", "t"} & set(meaning)

    @pytest.mark.parametrize(
        "argv,key,value",
        [
            (["logs", "-n", "5"], "lines", 5),
            (["logs", "-f"], "follow", True),
            (["status", "-a"], "all", True),
            (["logs", "-r", "RID"], "run", "RID"),
            (["preflight", "-c", "box"], "container", "box"),
            (["launch", "-s", "7"], "steps", 7),
        ],
    )
    def test_the_short_flags_parse(self, argv, key, value):
        from invoke.parser import Parser, ParserContext

        t = cli.build_namespace()[argv[0]]
        ctx = ParserContext(name=argv[0], args=t.get_arguments())
        parsed = Parser(contexts=[ctx]).parse_argv(argv)
        assert parsed[0].args[key].value == value

    def test_inv_logs_n_5_reaches_the_task(self, tmp_path):
        r = subprocess.run(
            [str(BIN / "inv"), "-r", str(REPO), "logs", "-n", "5", "--inventory", str(tmp_path / "none.toml")],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert "No idea what '-n' is" not in r.stderr and "none.toml" in r.stderr, r.stderr


class TestJobAndMode:
    """``--mode`` is verl's V1 trainer mode (async | sync) in every task; the job (dapo | one-step-off) of preflight
    and quickstart is ``--job``; the old spelling ``--mode one-step-off`` is refused in one line that says where
    it goes (issue 32 item 9)."""

    @pytest.mark.parametrize(
        "task_name,mode,hint",
        [
            ("preflight", "one-step-off", "`inv preflight --job one-step-off`"),
            ("quickstart", "one-step-off", "`inv quickstart --job one-step-off`"),
            ("quickstart", "dapo", "`inv quickstart --job dapo`"),
            ("launch", "one-step-off", "its own task: `inv one-step-off ...`"),
        ],
    )
    def test_a_job_given_as_mode_is_refused_with_where_it_goes(self, tmp_path, task_name, mode, hint):
        r = subprocess.run(
            [str(BIN / "inv"), "-r", str(REPO), task_name, "--mode", mode, "--inventory", str(tmp_path / "none.toml")],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        assert r.returncode == EXIT_USAGE and r.stdout == "", (r.stdout, r.stderr)
        assert r.stderr.count("\n") == 1 and "async | sync" in r.stderr and hint in r.stderr, r.stderr

    def test_every_mode_flag_is_the_trainer_mode(self):
        from dapo_ops.control import settings

        for name, t in every_task(cli.build_namespace()):
            helps = {a.name: a.help for a in t.get_arguments()}
            if "mode" in helps:
                assert helps["mode"].startswith(settings.BY_NAME["trainer_mode"].help), name


def test_hosts_check_json(tmp_path):
    """``inv hosts --check --json``: the validated selection as JSON (issue 32 minors: hosts gets --json)."""
    import json

    inv = tmp_path / "hosts.toml"
    inv.write_text('[hosts.h1]\naddress = "192.0.2.1"\n')
    r = subprocess.run(
        [str(BIN / "inv"), "-r", str(REPO), "hosts", "--check", "-j", "--inventory", str(inv)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["inventory"] == str(inv) and out["hosts"]["h1"]["ok"] is True
    assert out["hosts"]["h1"]["message"].startswith("h1: ")


@pytest.mark.parametrize("given", ["bogus", "", " "])
@pytest.mark.parametrize("task", ["status", "stop", "watch", "logs", "launch"])
def test_a_run_flag_that_is_no_run_id_is_a_usage_error_before_any_host(task, given, tmp_path):
    """``inv status -r bogus`` printed a table and exited 1 (``inv stop --run bogus`` 1 too) while ``inv launch
    --resume bogus`` was a usage error (a new-user trial); ``--run "$RUN"`` / ``--resume "$RUN"`` with RUN unset
    acted on the latest run (``inv stop`` stopped it) or started a new run (a second trial): every --run and
    --resume is judged the same, before the inventory."""
    from invoke import Context
    from invoke.exceptions import Exit

    from dapo_ops.cli import launch as cli_launch, logs as cli_logs, status as cli_status

    fn = {"logs": cli_logs.logs, "launch": cli_launch.launch}.get(task) or getattr(cli_status, task)
    flag = {"launch": "resume"}.get(task, "run")
    with pytest.raises(Exit) as e:
        fn(Context(), **{flag: given}, inventory=str(tmp_path / "none.toml"))
    assert e.value.code == 2 and str(e.value.message).startswith(f"--{flag} takes a run id like 20261129-151200-a1b2")
    assert f"(got {given!r})" in e.value.message and "\n" not in e.value.message
