"""The ``dapo-ops`` console program: invoke's ``Program`` with Fabric's core SSH flags, over the same task
collection as ``inv``.

``dapo-ops -H h1,h2 <task>`` behaves like ``inv <task> -H h1,h2``: the core ``-H`` value is handed to the task's
``hosts`` argument, and the task fans out in parallel itself (:mod:`dapo_ops.control.remote.fanout`). Fabric's own executor
would instead clone the task once per host and run the clones one after another (``fabric/executor.py:
expand_calls``), with ``c`` a Connection; :class:`Executor` here does not.

The core flags are Fabric's (``fabric/main.py: Fab.core_args``) with the same names and config keys, so the
tasks read them the same way (``cli/_common.py: apply_core_overrides``): ``-H/--hosts``, ``-i/--identity``
(``connect_kwargs.key_filename``), ``-S/--ssh-config`` (``config._runtime_ssh_path``), ``-t/--connect-timeout``
(``connect_kwargs.timeout``: overrides the inventory's connect_timeout). The program does not build on
``fabric.main.Fab``: importing fabric imports paramiko (~0.15 s), which a task such as ``status`` (over a reused
connection, :mod:`dapo_ops.control.remote.sshmux`) never needs; the SSH config file itself is read per host by
:class:`dapo_ops.control.remote.target.Target`.

Config: :class:`Config` uses the prefix ``dapo_ops`` (files ``dapo_ops.yaml`` / ``~/.dapo_ops.yaml``, env
``DAPO_OPS_*`` for declared keys).

What only a program can decide is :class:`DapoOps`' (as Fabric's ``Fab(Program)`` does for ``fab``): every parse
error of the command line (unknown flag, flag without its value, ``--help`` of no task) exits ``EXIT_USAGE`` (2)
like every other usage error; invoke's own Program exits 1 for them (invoke/program.py ``Program.run``), and under
plain ``inv`` they keep that code: nothing of invoke is patched. What a task does under both programs (a bad typed
value, Ctrl-C, a closed pipe) is its Task class's (:class:`dapo_ops.cli._common.FanoutTask`).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

from invoke import Argument, Call, Executor as _InvokeExecutor, Program, Task
from invoke import Config as _InvokeConfig
from invoke.exceptions import Exit, ParseError

from dapo_ops import __version__
from dapo_ops.cli._common import EXIT_USAGE, closed_pipe, takes_hosts


class Config(_InvokeConfig):
    """invoke config with the ``dapo_ops`` prefix (``dapo_ops.yaml``, ``DAPO_OPS_*``) and Fabric's
    ``connect_kwargs`` / runtime ssh_config path as set by the core flags."""

    prefix = "dapo_ops"

    @staticmethod
    def global_defaults():
        defaults = _InvokeConfig.global_defaults()
        defaults["connect_kwargs"] = {}
        return defaults

    def set_runtime_ssh_path(self, path) -> None:
        self._set(_runtime_ssh_path=path)


class Executor(_InvokeExecutor):
    """Passes the core ``-H`` value into each top-level task's ``hosts`` argument instead of cloning the task
    per host (which would run hosts serially). Pre/post tasks run once, without hosts (as under Fabric).
    A task-level ``-H`` wins over the core one.
    """

    def expand_calls(self, calls, apply_hosts=True):
        host_str = ""
        if apply_hosts and self.core is not None:
            host_str = self.core[0].args.hosts.value or ""
            if self.core.remainder:
                raise Exit(
                    "dapo-ops runs tasks, not ad hoc commands after '--'; e.g. dapo-ops -H h1 hosts", code=EXIT_USAGE
                )
        ret = []
        for call in calls:
            if isinstance(call, Task):
                call = Call(task=call)
            ret.extend(self.expand_calls(call.pre, apply_hosts=False))
            if host_str:
                if not takes_hosts(call.task):
                    name = call.called_as or call.task.name
                    raise Exit(
                        f"task '{name}' does not run on hosts; drop -H (tasks that do: see dapo-ops --list)",
                        code=EXIT_USAGE,
                    )
                if not call.kwargs.get("hosts"):
                    call.kwargs["hosts"] = host_str
            ret.append(call)
            ret.extend(self.expand_calls(call.post, apply_hosts=False))
        return ret

    def dedupe(self, calls):
        return calls  # as fabric.Executor: two calls of one task (e.g. for different hosts) both run


@contextlib.contextmanager
def _usage_errors() -> Iterator[None]:
    """A :class:`~invoke.exceptions.ParseError` in the block becomes ``Exit(message, EXIT_USAGE)``: the same one
    line, printed by ``Program.run``, with the exit code of every usage error."""
    try:
        yield
    except ParseError as e:
        raise Exit(str(e), code=EXIT_USAGE) from None


class DapoOps(Program):
    """invoke's Program with Fabric's SSH core flags (``-H``, ``-i``, ``-S``, ``-t``); a parse error of the command
    line exits ``EXIT_USAGE``, a reader that closed the pipe ends it quietly (module docstring)."""

    def run(self, argv=None, exit: bool = True) -> None:
        try:
            super().run(argv, exit)
        except BrokenPipeError:  # printing outside a task (--list, --help); a task's own is FanoutTask's
            code = closed_pipe().code
            if exit:
                sys.exit(code)

    def parse_core_args(self) -> None:
        with _usage_errors():
            super().parse_core_args()

    def parse_tasks(self) -> None:
        twice = repeated_flag(list(self.core.unparsed), self.collection) if self.core is not None else None
        if twice:
            raise Exit(twice, code=EXIT_USAGE)
        with _usage_errors():
            super().parse_tasks()

    def parse_cleanup(self) -> None:
        with _usage_errors():
            super().parse_cleanup()

    def core_args(self):
        return super().core_args() + [
            Argument(
                names=("H", "hosts"),
                help="Comma-separated inventory host names or user@host:port, passed to the task's --hosts "
                "(the task runs them in parallel; default: every host in the inventory).",
            ),
            Argument(
                names=("i", "identity"),
                kind=list,
                help="Path to runtime SSH identity (key) file (overrides the inventory's identity_file).",
            ),
            Argument(names=("S", "ssh-config"), help="Path to runtime SSH config file."),
            Argument(
                names=("t", "connect-timeout"),
                kind=int,
                help="Connection timeout in seconds (overrides the inventory's connect_timeout).",
            ),
        ]

    def no_tasks_given(self):
        if self.core is not None and self.core.remainder:
            raise Exit(
                "dapo-ops runs tasks, not ad hoc commands after '--'; e.g. dapo-ops -H h1 hosts", code=EXIT_USAGE
            )
        super().no_tasks_given()

    def update_config(self):
        super().update_config(merge=False)
        self.config.set_runtime_ssh_path(self.args["ssh-config"].value)
        connect_kwargs = {}
        if self.args["identity"].value:
            connect_kwargs["key_filename"] = self.args["identity"].value
        if self.args["connect-timeout"].value:
            connect_kwargs["timeout"] = self.args["connect-timeout"].value
        self.config._overrides["connect_kwargs"] = connect_kwargs
        self.config.merge()


def repeated_flag(argv: list[str], collection) -> str | None:
    """The one-line refusal of a value flag given twice to one task of ``collection`` in ``argv`` (without the
    program name), e.g. ``--framework was given twice ('fsdp', then 'megatron'); give it once``, else None.
    invoke's parser takes a flag's first value and then reads the second value as a task name
    (invoke/parser/parser.py ``ParseMachine.waiting_for_flag_value``: "you already gave that flag" is a TODO there),
    so ``--framework fsdp --framework megatron`` said ``No idea what 'megatron' is!``. Checked before invoke parses:
    by :class:`DapoOps` and, under plain ``inv``, by the repository's tasks.py."""
    flags: dict[str, str] = {}  # flag token -> the task parameter it sets, for the current task
    given: dict[str, str] = {}
    args = argv[: argv.index("--")] if "--" in argv else argv
    i = 0
    while i < len(args):
        tok = args[i]
        i += 1
        if not tok.startswith("-"):
            try:
                t = collection[tok]
            except (KeyError, ValueError, TypeError):
                continue
            flags, given = {}, {}
            for a in t.get_arguments():
                if a.kind is not bool and a.kind is not list and not a.incrementable:
                    for n in a.names:
                        flags[("--" if len(n) > 1 else "-") + n.replace("_", "-")] = a.name
            continue
        name, eq, val = tok.partition("=")
        if name not in flags:
            continue
        if not eq:
            val = args[i] if i < len(args) else ""
            i += 1
        key = flags[name]
        if key in given:
            flag = "--" + key.replace("_", "-")
            return f"{flag} was given twice ({given[key]!r}, then {val!r}); give it once"
        given[key] = val
    return None


#: the core flags with which invoke's Program prints and exits without running a task (invoke/program.py
#: ``Program.core_args``: ``--help``, ``--list``, ``--version``)
PRINT_ONLY_FLAGS = frozenset({"-h", "--help", "-l", "--list", "-V", "--version"})


def quiet_closed_pipe_for_printouts(argv: list[str]) -> bool:
    """Under plain ``inv`` (invoke's own Program, which :class:`DapoOps` cannot wrap): ``inv --help | head -1`` and
    ``inv launch --help | head -1`` were a ``BrokenPipeError`` traceback from invoke's help printer
    (invoke/program.py ``print_columns``), raised outside any task. A command line that only prints
    (:data:`PRINT_ONLY_FLAGS` before ``--``) opens no socket and runs no task, so SIGPIPE's default action is safe for
    it: the process ends quietly with 141 when the reader goes, as a shell tool does. Any other command line keeps
    Python's ignored SIGPIPE (a dropped SSH socket stays an error, :func:`dapo_ops.cli._common.closed_pipe`).
    Called by the repository's tasks.py with ``sys.argv``; returns True when it applied."""
    import signal

    args = argv[1 : argv.index("--")] if "--" in argv else argv[1:]
    if not PRINT_ONLY_FLAGS.intersection(args) or not hasattr(signal, "SIGPIPE"):
        return False
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    return True


def make_program(namespace) -> Program:
    """A fresh ``dapo-ops`` program over ``namespace`` (an invoke Collection: :func:`dapo_ops.cli.namespace_for`
    builds the one of a command line; tests build their own: ``make_program(ns).run("dapo-ops -H h1 hosts",
    exit=False)``)."""
    return DapoOps(
        name="dapo-ops",
        namespace=namespace,
        executor_class=Executor,
        config_class=Config,
        version=__version__,
    )
