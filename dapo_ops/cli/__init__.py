"""The task collection and the ``dapo-ops`` console program.

``tasks.py`` at the repository root builds its collection from this one (:func:`build_namespace`) and adds the
repository's dev tasks (``sandbox.*``, ``demo``: they need a source checkout), so ``inv --list`` shows the
package's tasks and those, ``dapo-ops --list`` the package's. Each concern lives in its own module under
``dapo_ops/cli/`` and exposes a module-level ``ns`` (a :class:`invoke.Collection`)
or plain ``@task`` functions; this module only assembles them.

Import budget: a program run imports only the task modules named on its command line
(:func:`namespace_for`, through :data:`TASK_INDEX`), and task modules import their heavy
dependencies (fabric/paramiko, rich, hydra) inside the functions that use them, so
``inv status`` loads neither the launch planner nor paramiko (bench/status.py prints the
``-X importtime`` figure). ``--list``, ``--help`` without a task, completion, or a name that
is not in the index load every module, as before.

Importing this package changes nothing of invoke: what a task does under both programs (one-line flag errors,
Ctrl-C, a closed pipe) is its Task class's (:class:`dapo_ops.cli._common.FanoutTask`), what only a program can do
is the ``dapo-ops`` program's (:class:`dapo_ops.cli.program.DapoOps`).
"""

from __future__ import annotations

import importlib
import sys

from invoke import Collection
from invoke.exceptions import Exit

#: exit code of a Ctrl-C (KeyboardInterrupt) while the task modules load: cli/_common.EXIT_INTERRUPTED (not imported
#: here: importing this module loads no task module and nothing of control)
INTERRUPT_EXIT = 130

# One module per concern; every one exists (an import error is a real error and propagates).
TASK_MODULES: tuple[str, ...] = (
    "dapo_ops.cli.hosts",
    "dapo_ops.cli.launch",
    "dapo_ops.cli.status",
    "dapo_ops.cli.logs",
    "dapo_ops.cli.preflight",
    "dapo_ops.cli.prepare",
    "dapo_ops.cli.classify",
    "dapo_ops.cli.quickstart",
)
# Modules mounted as sub-namespaces: ``inv container.list``.
SUB_COLLECTIONS: dict[str, str] = {
    "container": "dapo_ops.cli.containers",
}
#: task name as typed (invoke's dashed form) -> the module that defines it; sub-collection tasks are found by
#: their prefix (``container.list`` -> SUB_COLLECTIONS["container"]). tests/test_cli.py keeps it equal to what the
#: modules define; a name missing here only costs the full import (every module is loaded).
TASK_INDEX: dict[str, str] = {
    "hosts": "dapo_ops.cli.hosts",
    "launch": "dapo_ops.cli.launch",
    "one-step-off": "dapo_ops.cli.launch",
    "status": "dapo_ops.cli.status",
    "logs": "dapo_ops.cli.logs",
    "stop": "dapo_ops.cli.status",
    "watch": "dapo_ops.cli.status",
    "preflight": "dapo_ops.cli.preflight",
    "prepare": "dapo_ops.cli.prepare",
    "classify": "dapo_ops.cli.classify",
    "quickstart": "dapo_ops.cli.quickstart",
}
#: core flags after which the program needs every task (listing, help, completion, printing the collection)
_ALL_TASKS_FLAGS = frozenset({"-l", "--list", "--complete", "--print-completion-script", "-h", "--help"})


#: the line of a Ctrl-C while the task modules are imported (tasks.py or main(): before any task ran)
_LOADING_INTERRUPTED = "interrupted while loading the tasks (Ctrl-C); nothing was run"


def build_namespace(only: frozenset[str] | set[str] | None = None) -> Collection:
    """Assemble the root :class:`invoke.Collection` from the task modules.

    :param only: module names to load (:func:`modules_for`); None = every module.
    Returns a new Collection every call (tests build their own programs).
    """
    try:
        return _build(only)
    except KeyboardInterrupt:  # inside invoke's Program.run (tasks.py import): its Exit handling prints this
        raise Exit(_LOADING_INTERRUPTED, code=INTERRUPT_EXIT) from None


def _build(only) -> Collection:
    ns = Collection()
    for modname in TASK_MODULES:
        if only is not None and modname not in only:
            continue
        sub = Collection.from_module(importlib.import_module(modname))
        for task_name in sub.task_names:
            ns.add_task(sub[task_name])
    for coll_name, modname in SUB_COLLECTIONS.items():
        if only is not None and modname not in only:
            continue
        ns.add_collection(Collection.from_module(importlib.import_module(modname)), coll_name)
    return ns


def modules_for(argv: list[str], local: frozenset[str] = frozenset()) -> frozenset[str] | None:
    """The task modules a program run with ``argv`` (without the program name) needs, or None for all.

    Every token that names a task counts (a flag value that happens to be a task name only loads one module
    more); no task name, a listing/help/completion flag, or ``--`` (an ad hoc command) means all. ``local``: task
    or collection names the caller defines itself (tasks.py's dev tasks): they need no module, so a command line
    naming only those gives the empty set.
    """
    mods: set[str] = set()
    named_local = False
    for tok in argv:
        if tok in _ALL_TASKS_FLAGS or tok == "--":
            if tok in ("-h", "--help") and (mods or named_local):
                continue  # `inv status --help`: that task's help
            return None
        name = tok.replace("_", "-")
        prefix = name.split(".", 1)[0]
        if name in TASK_INDEX:
            mods.add(TASK_INDEX[name])
        elif "." in name and prefix in SUB_COLLECTIONS:
            mods.add(SUB_COLLECTIONS[prefix])
        elif name in local or ("." in name and prefix in local):
            named_local = True
    return frozenset(mods) if mods or named_local else None


def namespace_for(argv: list[str] | None = None) -> Collection:
    """The collection for one program run: only the modules of the tasks in ``argv`` (default ``sys.argv``)."""
    argv = sys.argv[1:] if argv is None else argv
    return build_namespace(modules_for(argv))


_FULL: Collection | None = None


def __getattr__(name: str):
    """``cli.ns``: every task (built on first use, so importing this module alone loads no task module)."""
    global _FULL
    if name == "ns":
        if _FULL is None:
            _FULL = build_namespace()
        return _FULL
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    """Entry point of the ``dapo-ops`` console script (see ``dapo_ops/cli/program.py``): loads only the task
    modules named on the command line."""
    try:
        from dapo_ops.cli import program

        ns = namespace_for(sys.argv[1:])
    except (KeyboardInterrupt, Exit):  # Ctrl-C while loading (build_namespace's Exit): no Program.run around yet
        print(_LOADING_INTERRUPTED, file=sys.stderr)
        sys.exit(INTERRUPT_EXIT)
    program.make_program(ns).run()
