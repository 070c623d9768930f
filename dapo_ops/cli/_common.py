"""Shared helpers for the invoke tasks: the ``fanout_task`` decorator, inventory loading, host selection,
one-line failures and exit codes.

A fan-out task looks like::

    from invoke.exceptions import Exit
    from dapo_ops.cli._common import fanout_task, select_hosts, run_fanout

    @fanout_task(help={"timeout": "seconds per host"})
    def preflight(c, hosts="", inventory="", accept_new_host_keys=False, timeout=60):
        \"\"\"Check every host before a launch.\"\"\"
        _, chosen = select_hosts(c, hosts, inventory)
        run_fanout(c, chosen, check_one, columns=["npu", "disk"], title="preflight", timeout=timeout,
                   accept_new_host_keys=accept_new_host_keys)

``hosts`` gets the flags ``-H/--hosts`` (so ``inv preflight -H h1,h2`` works; under the ``dapo-ops`` program the
core ``-H`` value is passed into it), ``inventory`` gets ``--inventory``, ``accept_new_host_keys`` gets
``--accept-new-host-keys``; default help texts are filled in for those three. The decorator never hands out
``-h`` (it would shadow ``--help``).

Every task of dapo-ops (and tasks.py's dev tasks) is a :class:`FanoutTask`, which does under ``inv`` and ``dapo-ops``
alike what a task itself can: its short flags are :data:`SHORT_FLAGS`, a bad typed value (``--steps abc``) is one
line and exit :data:`EXIT_USAGE` (:class:`TaskFlag`), a Ctrl-C is one line and exit :data:`EXIT_INTERRUPTED`, a
reader that closed the pipe ends it quietly (exit 141). What only a program can do (every parse error of the command
line exits :data:`EXIT_USAGE`) is :class:`dapo_ops.cli.program.DapoOps`'. Nothing of invoke is patched.
"""

from __future__ import annotations

import contextlib
import errno
import inspect
import os
import sys
from typing import Any, Callable, Iterator, NoReturn

from invoke import Argument, Task, task
from invoke.exceptions import Exit

from dapo_ops.control.remote import fanout
from dapo_ops.control.inventory import hosts_file
from dapo_ops.control.remote.fanout import HostResult, Row
from dapo_ops.control.inventory.hosts_file import Inventory, InventoryError
from dapo_ops.control.inventory.model import Host
from dapo_ops.core import defaults

#: Default of a numeric settings flag that was not given. invoke types a flag by its default value, so "not
#: given" needs a number nobody types: 0 and -1 are real values that the settings layer must see and judge
#: (``--steps 0`` is an error, not "use the default").
UNSET = -(2**31)
#: the same for a float flag (invoke types it float from this default)
UNSET_FLOAT = float(UNSET)


class _UnsetBool:
    """Type of :data:`UNSET_BOOL` (invoke types a flag by its default's type: :meth:`TaskFlag.of` sees this one)."""

    def __repr__(self) -> str:
        return "UNSET_BOOL"


#: Default of a boolean settings flag (``--offload``, ``--allow-short-data``): a flag that is ``--name`` AND
#: ``--no-name`` and reaches the task as ``None`` when neither is given, so a flag can turn off what an environment
#: variable turned on (``ENABLE_OFFLOAD=True inv launch --no-offload``: flags > env). :meth:`TaskFlag.of` makes it
#: invoke's bool flag with default ``True`` (invoke adds the ``--no-`` form only then,
#: invoke/parser/context.py ``add_arg``) whose value is ``None`` until given.
UNSET_BOOL: Any = _UnsetBool()


def given_flags(**kw) -> dict:
    """The settings flags actually given: drops ``None`` (a :data:`UNSET_BOOL` flag left off), ``""`` and
    :data:`UNSET`; a boolean given either way (``--offload`` True, ``--no-offload`` False) stays."""
    return {k: v for k, v in kw.items() if not (v is None or v is UNSET_BOOL or v == "" or v == UNSET)}


# Exit codes of dapo-ops tasks (others may add theirs here).
EXIT_OK = 0
EXIT_FAILED = 1  # the work failed on at least one host (each host's row says why)
EXIT_USAGE = 2  # bad input: inventory file, -H selection, flag values; nothing was contacted
EXIT_INTERRUPTED = 130  # Ctrl-C (KeyboardInterrupt): 128 + SIGINT, what a shell reports for a tool killed by it
EXIT_CLOSED_PIPE = 141  # the reader closed stdout's pipe (`inv launch | head -2`): 128 + SIGPIPE, as a shell tool

COMMON_HELP = {
    "hosts": "comma-separated inventory host names or user@host:port (default: every host in the inventory)",
    "inventory": "hosts.toml to use (default: $DAPO_OPS_INVENTORY, then ./hosts.toml)",
    "accept_new_host_keys": "accept and record SSH host keys not yet in known_hosts (a changed key is always refused)",
}


#: THE short flags of every task (``inv`` and ``dapo-ops``, tasks.py's dev tasks too): one letter = one concept in
#: every task, the letters users expect from other tools (``-n`` a line count as tail/journalctl, ``-f`` follow,
#: ``-H`` hosts as Fabric); every other flag is long only (invoke's automatic short flags would give one letter a
#: different meaning per task). ``-h`` stays ``--help``; ``-i``/``-S``/``-t`` are the ``dapo-ops`` program's core
#: flags (identity, ssh config, connect timeout), so no task flag takes them. tests/test_cli.py walks every task.
SHORT_FLAGS = {
    "hosts": "H",
    "lines": "n",
    "follow": "f",
    "json": "j",
    "all": "a",
    "run": "r",
    "container": "c",
    "errors": "e",
    "steps": "s",
    "dry_run": "d",
    "quick": "q",
}


class TaskFlag(Argument):
    """A task's flag (invoke's :class:`~invoke.parser.Argument`) whose bad value for a number flag (``--steps abc``,
    ``--steps 1.5``) is ONE line, ``--lines: 'many' is not a whole number (e.g. --lines 100)`` (the example when the
    default is a positive number), and exit :data:`EXIT_USAGE` under both programs instead of a traceback: invoke
    casts the value with the type of the default (``int("abc")``) in ``Argument.set_value`` and lets the
    ``ValueError`` escape (invoke/parser/argument.py).
    An :class:`~invoke.exceptions.Exit` rather than a ``ParseError``: plain ``inv``'s Program exits 1 for a
    ``ParseError`` (invoke/program.py ``Program.run``)."""

    def set_value(self, value: Any, cast: bool = True) -> None:
        from dapo_ops.control.settings import blanks_fix, parse_float, parse_int, shown

        try:
            if cast and isinstance(value, str) and self.kind in (int, float):
                value = (parse_int if self.kind is int else parse_float)(value)  # ASCII digits only (settings.py)
            super().set_value(value, cast)
        except (TypeError, ValueError):
            if self.kind not in (int, float):
                raise
            what = "a whole number" if self.kind is int else "a number"
            flag = "--" + str(self.name).replace("_", "-")
            example = (
                f" (e.g. {flag} {self.default!r})"
                if isinstance(self.default, (int, float)) and self.default > 0
                else ""
            )
            fix = blanks_fix(value, self.kind)
            if fix is not None:  # the settings table's rule (settings.INT_RE): blanks are refused, not trimmed
                raise Exit(f"{flag}: {shown(value)} has blanks around the number; give {flag} {fix}", code=EXIT_USAGE)
            digits = str(value).strip().lstrip("+-")
            if self.kind is int and digits.isascii() and digits.isdigit():  # past Python's int() digit limit (4300)
                raise Exit(
                    f"{flag}: {shown(value)} is too large ({len(digits)} digits); give a smaller whole number{example}",
                    code=EXIT_USAGE,
                ) from None
            raise Exit(f"{flag}: {shown(value)} is not {what} in ASCII digits{example}", code=EXIT_USAGE) from None

    def __repr__(self) -> str:
        # invoke's parser names a flag by its repr in its own errors ("Flag <Argument: lines (n) [int]> needed value
        # and was not given one!"): the same words as for invoke's class
        return super().__repr__().replace(f"<{type(self).__name__}:", "<Argument:", 1)

    #: a :data:`UNSET_BOOL` flag: ``--name`` / ``--no-name``, value ``None`` until one is given
    either_way = False

    @property
    def value(self) -> Any:
        if self.either_way and self._value is None:
            return None
        return super().value

    @value.setter
    def value(self, arg: Any) -> None:
        self.set_value(arg, cast=True)

    @classmethod
    def of(cls, arg: Argument) -> "TaskFlag":
        """The same flag as invoke's ``arg`` (names, kind, default, help, positional/optional/incrementable); an
        ``arg`` defaulting to :data:`UNSET_BOOL` becomes a bool flag with its ``--no-`` form."""
        either_way = arg.default is UNSET_BOOL
        flag = cls(
            names=arg.names,
            kind=bool if either_way else arg.kind,
            default=True if either_way else arg.default,
            help=arg.help,
            positional=arg.positional,
            optional=arg.optional,
            incrementable=arg.incrementable,
            attr_name=arg.attr_name,
        )
        flag.either_way = either_way
        return flag


class FanoutTask(Task):
    """An invoke Task with dapo-ops' rules, under ``inv`` and ``dapo-ops`` alike (module docstring): short flags
    :data:`SHORT_FLAGS` only (``hosts`` is ``-H/--hosts``; never ``-h``), flags that are :class:`TaskFlag`, a Ctrl-C
    that is one line (:func:`interrupted`, unless the task said more itself: :func:`on_interrupt`), a closed pipe
    that ends quietly (:func:`closed_pipe`)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        degrade_to_ascii()
        try:
            try:
                return super().__call__(*args, **kwargs)
            finally:  # the task's last output (a piped stdout is block-buffered: `inv status --json` is one write
                # at exit) is flushed here, under the handlers below, not at interpreter exit, where a closed pipe
                # was "Exception ignored ... BrokenPipeError" and exit 120
                _flush_stdout()
        except KeyboardInterrupt:
            raise interrupted(self.name) from None
        except BrokenPipeError:
            raise closed_pipe() from None
        except OSError as e:
            if e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EIO) and not _stdout_writable(e):
                raise output_failed(e) from None
            raise

    def get_arguments(self, ignore_unknown_help=None):
        # invoke's arg_opts pops entries from self.help, so a second parse in the same process (tests, or
        # `inv` and `dapo-ops` programs built side by side) would lose every flag's help text: keep a copy.
        saved = dict(self.help)
        try:
            return [TaskFlag.of(a) for a in super().get_arguments(ignore_unknown_help)]
        finally:
            self.help = saved

    def arg_opts(self, name, default, taken_names):
        opts = super().arg_opts(name, default, set(taken_names) | {"h", "H"})
        short = SHORT_FLAGS.get(name.rstrip("_"))  # json_ / all_: the flag is --json / --all
        if name == "hosts" and not isinstance(default, str):
            short = None  # a count of hosts (sandbox.up), not a host list: another concept
        opts["names"] = opts["names"][:1] + ([short] if short else [])
        if "help" not in opts and name in COMMON_HELP:
            opts["help"] = COMMON_HELP[name]
        return opts


#: what a character the output's encoding lacks becomes (:func:`degrade_to_ascii`): tqdm's bar blocks
#: (``█▏▎▍▌▋▊▉``, tqdm/std.py ``Bar.UTF``), the ellipsis and dashes of messages, rich's table rules; else ``?``
ASCII_FALLBACK = {
    **{ch: "#" for ch in "█▉▊▋▌▍▎▏"},
    "…": "...",
    "—": "-",
    "–": "-",
    "─": "-",
    "━": "-",
    "│": "|",
    "┃": "|",
    "→": "->",
    "≥": ">=",
    "≤": "<=",
}
_ASCII_ERRORS = "dapo-ops-ascii"


def _ascii_fallback(err: UnicodeError) -> tuple[str, int]:
    if not isinstance(err, UnicodeEncodeError):
        raise err
    return "".join(ASCII_FALLBACK.get(ch, "?") for ch in err.object[err.start : err.end]), err.end


def degrade_to_ascii(*streams) -> None:
    """Make ``streams`` (default stdout and stderr) write what their encoding cannot hold as ASCII
    (:data:`ASCII_FALLBACK`) instead of raising ``UnicodeEncodeError``: ``PYTHONIOENCODING=ascii`` / ``latin-1``, or
    an ``LC_ALL=C`` terminal, printing tqdm's ``█`` of a training log (``inv logs``) was a traceback. A stream that
    can encode them is left alone. Every task calls it first (:class:`FanoutTask`)."""
    import codecs

    try:
        codecs.lookup_error(_ASCII_ERRORS)
    except LookupError:
        codecs.register_error(_ASCII_ERRORS, _ascii_fallback)
    for st in streams or (sys.stdout, sys.stderr):
        enc = getattr(st, "encoding", None)
        if not enc or not hasattr(st, "reconfigure"):
            continue
        try:
            "█…".encode(enc)
        except (UnicodeEncodeError, LookupError):
            try:
                st.reconfigure(errors=_ASCII_ERRORS)
            except (ValueError, OSError, AttributeError):
                pass


def dapo_task(*args, **kwargs):
    """``@task`` with the flag rules of :class:`FanoutTask` (:data:`SHORT_FLAGS`), for a task that does not run on
    hosts (``classify``, tasks.py's dev tasks); use bare or with invoke's ``@task`` keyword arguments."""
    kwargs.setdefault("klass", FanoutTask)
    if len(args) == 1 and callable(args[0]) and not isinstance(args[0], Task):
        return task(args[0], **kwargs)
    return task(*args, **kwargs)


def fanout_task(*args, **kwargs):
    """``@task`` for tasks that run on hosts (use bare or with invoke's ``@task`` keyword arguments).

    The task must take ``hosts=""`` (and usually ``inventory=""``); see the module docstring.
    """
    return dapo_task(*args, **kwargs)


#: the jobs (``--job`` of preflight and quickstart: which launch task); ``--mode`` is verl's V1 trainer mode
#: (async | sync, the settings table's ``trainer_mode``) in every task
JOBS = ("dapo", "one-step-off")


def refuse_job_as_mode(mode: str, task_name: str) -> None:
    """Refuse ``--mode dapo`` / ``--mode one-step-off`` (the older spelling of the job) with ONE line saying where
    the job goes in task ``task_name``.

    :raises Exit: code :data:`EXIT_USAGE` when ``mode`` names a job."""
    if mode not in JOBS:
        return
    if task_name in ("launch", "one-step-off"):
        where = "what `inv launch` runs: drop --mode" if mode == "dapo" else "its own task: `inv one-step-off ...`"
    else:
        where = f"a job: `inv {task_name} --job {mode}`"
    fail(f"--mode is verl's V1 trainer mode (async | sync), as in `inv launch --mode`; {mode} is {where}", EXIT_USAGE)


def takes_hosts(t: Task) -> bool:
    """True when the task's body has a ``hosts`` parameter (the ``dapo-ops -H`` value goes there)."""
    try:
        return "hosts" in inspect.signature(t.body).parameters
    except (TypeError, ValueError):
        return False


def fail(message: str, code: int = EXIT_FAILED) -> NoReturn:
    """Stop the task with ONE line on stderr and exit ``code`` (raises :class:`invoke.exceptions.Exit`)."""
    raise Exit(" ".join(str(message).split()), code=code)


def run_id_flag(run: str | None, flag: str = "--run") -> str:
    """The run id a ``--run`` flag (status, stop, watch, logs) gives, ``""`` when the flag was not given (its task
    default is None; launch's ``--resume`` is judged by the launch request, the same rule). Given but not a run id, an empty one included (``--run "$RUN"`` with RUN
    unset acted on the latest run: ``inv stop`` stopped it): ONE line and exit :data:`EXIT_USAGE`, nothing
    contacted (it was a per-host "no run" row and exit 1, while ``inv launch --resume bogus`` was a usage error)."""
    from dapo_ops.core import runstate

    if run is not None and not runstate.is_run_id(run):
        fail(
            f"{flag} takes a run id like 20261129-151200-a1b2 (got {run!r}); list runs with `inv status --all`"
            + (f" (leave {flag} out for the latest run)" if flag == "--run" else ""),
            EXIT_USAGE,
        )
    return run or ""


def interrupted(task_name: str) -> Exit:
    """The :class:`Exit` (code :data:`EXIT_INTERRUPTED`, one line) a KeyboardInterrupt of task ``task_name``
    becomes when the task gave no line of its own (:func:`on_interrupt`); :class:`FanoutTask` applies it to every
    task, so invoke's silent exit 1 (invoke/program.py ``Program.run``: ``except KeyboardInterrupt: sys.exit(1)``) is
    never reached from inside a task."""
    return Exit(f"interrupted: {task_name} stopped before it finished (Ctrl-C)", code=EXIT_INTERRUPTED)


def closed_pipe() -> Exit:
    """The :class:`Exit` (code :data:`EXIT_CLOSED_PIPE`, no line) a BrokenPipeError on stdout becomes: the reader
    closed the pipe, so the program ends quietly instead of with a traceback. stdout is pointed at /dev/null first,
    so the flushes at exit do not raise again. SIGPIPE itself stays ignored (Python's default), so a dropped SSH
    socket is still an error, not a silent death.

    141 whenever a write met the closed pipe, whatever printed it: ``print``, a :class:`LineWriter`-style
    ``sys.stdout.write``, the last flush (:class:`FanoutTask`), or rich's Console (the one factory,
    :func:`dapo_ops.control.remote.fanout.console`, hands the error on instead of rich's own silent ``SystemExit(1)``,
    rich/console.py ``Console.on_broken_pipe``). As ``git log | head -1``: an output that fitted in the pipe (64 KiB
    on Linux) before the reader left met no closed pipe and exits 0 (``git log -1 | head -1``), one that did not
    exits 141; which of the two a small output gets depends on when the reader closes, for git as for us."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return Exit(code=EXIT_CLOSED_PIPE)


def _flush_stdout() -> None:
    """Flush ``sys.stdout`` (a BrokenPipeError or a full disk propagates to :class:`FanoutTask`'s handlers); a
    stdout that is gone or closed (None, ``ValueError``) has nothing to flush."""
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
    except ValueError:
        pass


def _stdout_writable(e: OSError) -> bool:
    """False when ``e`` was raised writing to stdout (``inv status > /dev/full``: ENOSPC): the innermost frame is a
    write of rich's Console to stdout (rich/console.py ``_write_buffer``), or a flush of stdout itself fails."""
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is not None and getattr(tb.tb_frame.f_locals.get("self"), "file", None) in (sys.stdout, sys.__stdout__):
        return False
    try:
        sys.stdout.flush()
        return True
    except (OSError, ValueError):
        return False


def output_failed(e: OSError) -> Exit:
    """The :class:`Exit` (code 1, one stderr line) an output that cannot be written becomes (a full disk or quota
    under a redirected stdout), instead of rich's write traceback; stdout is pointed at /dev/null as for a closed
    pipe so the flushes at exit do not raise again."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return Exit(
        f"cannot write the output: {e.strerror or e}; free space where stdout goes, or send it elsewhere", code=1
    )


@contextlib.contextmanager
def on_interrupt(line: Callable[[], str]) -> Iterator[None]:
    """Within the block, a KeyboardInterrupt ends the task with ``line()`` (called at that moment, so it can say
    how far the task got and how to check or undo it) as ONE stderr line and exit :data:`EXIT_INTERRUPTED`.

    :raises Exit: on KeyboardInterrupt (``line()`` joined onto one line)."""
    try:
        yield
    except KeyboardInterrupt:
        raise Exit(" ".join(str(line()).split()), code=EXIT_INTERRUPTED) from None


def _config_inventory(c) -> str:
    try:
        cfg = c.config.get("dapo_ops", {}) or {}
        return cfg.get("inventory", "") or ""
    except Exception:  # noqa: BLE001 - plain invoke Context without our config
        return ""


def load_inventory(c, inventory_path: str = "", *, allow_missing: bool = False) -> Inventory:
    """Load the inventory: ``--inventory`` > config ``dapo_ops.inventory`` > ``$DAPO_OPS_INVENTORY`` >
    ``./hosts.toml``.

    :param allow_missing: return an empty inventory when no file was named and ./hosts.toml is absent
        (for ad hoc ``-H user@host:port``).
    :raises Exit: code :data:`EXIT_USAGE` with the one-line :class:`InventoryError`.
    """
    path = inventory_path or _config_inventory(c) or None
    if (
        allow_missing
        and not path
        and os.environ.get(hosts_file.ENV_VAR) is None  # set but empty: refused by inventory.resolve_path
        and not os.path.exists(hosts_file.DEFAULT_FILE)
    ):
        return hosts_file.empty()
    try:
        return hosts_file.load(path)
    except InventoryError as e:
        fail(str(e), EXIT_USAGE)


def _empty_hosts_flag(argv: list[str]) -> bool:
    """True when the command line gave ``-H ''`` / ``--hosts=`` explicitly: invoke hands the task the same ``""``
    as for no ``-H`` at all, which would mean every host."""
    for i, a in enumerate(argv):
        if a in ("-H", "--hosts") and i + 1 < len(argv) and not argv[i + 1].strip(" ,"):
            return True
        if a in ("--hosts=", "-H="):
            return True
    return False


def refuse_empty_hosts(hosts: str) -> None:
    """Exit (code :data:`EXIT_USAGE`, one line) when ``-H`` was given but names no host (``-H ''``, ``-H ,``,
    ``--hosts=``: an unset ``$HOSTS``): only no ``-H`` at all means every host. Every path that reads ``-H`` calls
    it first (:func:`select_hosts`, the launch's dry run, which plans before any host is selected)."""
    items = [s.strip() for s in (hosts or "").split(",") if s.strip()]
    if (hosts and not items) or (not hosts and _empty_hosts_flag(sys.argv)):
        fail("-H names no host (got an empty list): name hosts (-H h1,h2) or leave -H out for every host", EXIT_USAGE)


def select_hosts(c, hosts: str = "", inventory_path: str = "") -> tuple[Inventory, list[Host]]:
    """The inventory and the hosts named by ``-H`` (all hosts when empty).

    Ad hoc ``user@host:port`` items work without an inventory file (they take ``[defaults]`` when there is one).

    :raises Exit: code :data:`EXIT_USAGE`, one line (bad inventory, unknown host name).
    """
    items = [s.strip() for s in (hosts or "").split(",") if s.strip()]
    refuse_empty_hosts(hosts)
    adhoc_only = bool(items) and all(hosts_file.looks_adhoc(s) for s in items)
    inv = load_inventory(c, inventory_path, allow_missing=adhoc_only)
    try:
        chosen = hosts_file.select(inv, hosts or None)
    except InventoryError as e:
        fail(str(e), EXIT_USAGE)
    if not chosen:  # the inventory loader already refuses a file without hosts; kept as the one guarantee
        fail("no hosts selected: add hosts to the inventory or pass -H user@host", EXIT_USAGE)
    return inv, apply_core_overrides(c, chosen)


def run_config(c):
    """The program run's :class:`~dapo_ops.control.userconfig.RunConfig` (the user config file, read once, and the
    run settings resolved from it), kept on the run's invoke ``Config`` (one object for every task of one ``inv`` /
    ``dapo-ops`` command line, as invoke's Executor hands every task the same config; quickstart's calls of preflight
    and launch share it too). Made on the first call; ``c`` without a config (a bare object) gets a fresh one."""
    from dapo_ops.control import userconfig

    config = getattr(c, "config", None)
    held = getattr(config, "__dict__", {}).get("_dapo_run_config")
    if held is None:
        held = userconfig.RunConfig()
        if config is not None and hasattr(config, "_set"):
            config._set(_dapo_run_config=held)  # invoke's DataProxy: a real attribute, not a config key
    return held


def user_config(c) -> dict:
    """The user config file (``~/.config/dapo-ops/config.toml`` or ``$DAPO_OPS_CONFIG``) as a dict, read once per
    program run (:func:`run_config`).

    :raises Exit: code :data:`EXIT_USAGE`, one line naming the file and the problem.
    """
    from dapo_ops.control import userconfig

    try:
        return run_config(c).file()
    except userconfig.UserConfigError as e:
        fail(str(e), EXIT_USAGE)


def run_settings(c, flags: dict):
    """The run settings of ``flags``: ``flags`` > environment > the user config file > defaults, resolved once per
    program run (:meth:`dapo_ops.control.userconfig.RunConfig.settings`).

    :raises Exit: code :data:`EXIT_USAGE`, one line naming the file, or the variable/flag/key, and the fix.
    """
    from dapo_ops.control import settings, userconfig

    try:
        return run_config(c).settings(flags)
    except (settings.SettingsError, userconfig.UserConfigError) as e:
        fail(str(e), EXIT_USAGE)


def apply_core_overrides(c, chosen: list[Host]) -> list[Host]:
    """Apply Fabric's core flags of the ``dapo-ops`` program to the selected hosts: ``-t/--connect-timeout``
    (connect_timeout), ``-i/--identity`` (identity_file, the first one), ``-S/--ssh-config`` (ssh_config).
    Under plain ``inv`` these flags do not exist and the hosts are returned unchanged."""
    import dataclasses

    changes: dict = {}
    t = connect_timeout_override(c)
    if t:
        changes["connect_timeout"] = t
    try:
        keys = (c.config.get("connect_kwargs", {}) or {}).get("key_filename")
    except Exception:  # noqa: BLE001
        keys = None
    if keys:
        changes["identity_file"] = str(keys[0] if isinstance(keys, (list, tuple)) else keys)
    ssh_path = getattr(c.config, "_runtime_ssh_path", None) if hasattr(c, "config") else None
    if ssh_path:
        changes["ssh_config"] = str(ssh_path)
    return [dataclasses.replace(h, **changes) for h in chosen] if changes else chosen


def refuse_empty_env(env, *variables: str) -> None:
    """For a task that reads a run setting's environment variable itself (``CONTAINER`` for the tasks that look at
    runs, the quickstart's questions): a variable of ``variables`` that is set but empty (or blank) follows the
    settings table's rule for its setting (``Param.empty``, :data:`dapo_ops.control.settings.EMPTY_RULES`) as launch
    does: refused in the same one line (exit :data:`EXIT_USAGE`) where the rule is ``refuse``. The table is imported
    only for a blank variable (`inv status` does not load it)."""
    blank = [v for v in variables if env.get(v) is not None and not env[v].strip()]
    if not blank:
        return
    from dapo_ops.control import settings

    for var in blank:
        p = next(p for p in settings.PARAMS if var in p.env)
        if p.empty == "refuse":
            fail(str(settings.empty_error(p, "env", var)), EXIT_USAGE)


def with_container(chosen: list[Host], container: str = "", env=None) -> list[Host]:
    """The hosts with the container the run was launched in: ``--container`` > ``$CONTAINER`` > the inventory's
    (what launch itself resolves, settings.py ``container``), so a run started with ``--container X`` can be
    followed, stopped and listed the same way."""
    import dataclasses

    env = os.environ if env is None else env
    if not container:
        refuse_empty_env(env, "CONTAINER")
    name = (container or env.get("CONTAINER", "")).strip()
    if not name:
        return chosen
    source = "--container" if container else "CONTAINER"  # named by a message that says what to fix
    # a bare-metal host (runtime = "host") has no container to name
    return [
        h
        if getattr(h, "runtime", defaults.HOST["runtime"]) == "host"
        else dataclasses.replace(h, container=name, container_from=source if name != h.container else "")
        for h in chosen
    ]


def connect_timeout_override(c) -> float | None:
    """``dapo-ops -t N`` (Fabric's core connect-timeout flag), else None."""
    try:
        ck = c.config.get("connect_kwargs", {}) or {}
        t = ck.get("timeout")
        return float(t) if t else None
    except Exception:  # noqa: BLE001
        return None


def run_fanout(
    c,
    chosen: list[Host],
    fn: Callable,
    *,
    columns: list[str],
    title: str,
    timeout: float,
    accept_new_host_keys: bool = False,
    out=None,
) -> list[HostResult]:
    """Run ``fn(target) -> Row | dict`` on every host in parallel, print the table and a summary line, and
    stop with exit code :data:`EXIT_FAILED` if any host failed (after every host was reported).

    :param timeout: overall deadline in seconds (see :func:`dapo_ops.control.remote.fanout.run`).
    :returns: the results when every host succeeded.
    :raises Exit: code 1 with ``<n> of <m> hosts failed: h2 (refused)``.
    """
    results = fanout.run(
        chosen,
        fn,
        timeout=timeout,
        accept_new_host_keys=accept_new_host_keys,
        connect_timeout=connect_timeout_override(c),
    )
    fanout.render(results, columns, title=title, file=out or sys.stdout)
    if fanout.exit_code(results):
        fail(fanout.summary(results), EXIT_FAILED)
    return results


__all__ = [
    "EXIT_OK",
    "EXIT_FAILED",
    "EXIT_USAGE",
    "EXIT_INTERRUPTED",
    "EXIT_CLOSED_PIPE",
    "interrupted",
    "closed_pipe",
    "on_interrupt",
    "FanoutTask",
    "TaskFlag",
    "UNSET_BOOL",
    "SHORT_FLAGS",
    "dapo_task",
    "fanout_task",
    "JOBS",
    "refuse_job_as_mode",
    "takes_hosts",
    "fail",
    "run_id_flag",
    "load_inventory",
    "select_hosts",
    "run_config",
    "user_config",
    "run_settings",
    "with_container",
    "apply_core_overrides",
    "run_fanout",
    "connect_timeout_override",
    "Row",
    "HostResult",
]
