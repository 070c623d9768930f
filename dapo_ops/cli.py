"""The task collection and the ``dapo-ops`` console program.

``tasks.py`` at the repository root re-exports :data:`ns`, so ``inv --list`` and
``dapo-ops --list`` show the same tasks. Each concern lives in its own module under
``dapo_ops/tasks/`` and exposes a module-level ``ns`` (a :class:`invoke.Collection`)
or plain ``@task`` functions; this module only assembles them.
"""

from __future__ import annotations

import importlib
import importlib.util

from invoke import Collection
from invoke.exceptions import ParseError
from invoke.parser import Argument

# One module per concern. Modules whose file does not exist yet are skipped (the
# collection is assembled as the project grows); an import error inside an
# existing module is a real error and propagates.
TASK_MODULES: tuple[str, ...] = (
    "dapo_ops.tasks.hosts",
    "dapo_ops.tasks.launch",
    "dapo_ops.tasks.status",
    "dapo_ops.tasks.preflight",
    "dapo_ops.tasks.prepare",
    "dapo_ops.tasks.classify",
    "dapo_ops.tasks.quickstart",
)
# Modules mounted as sub-namespaces: ``inv sandbox.up``, ``inv container.list``.
SUB_COLLECTIONS: dict[str, str] = {
    "sandbox": "dapo_ops.tasks.sandbox",
    "container": "dapo_ops.tasks.containers",
}


def _one_line_flag_errors() -> None:
    """Make a bad value for a typed flag (``--steps abc``) a one-line parse error instead of a traceback.

    invoke casts a flag's value with the type of its default (``int("abc")``) inside
    ``Argument.set_value`` and lets the ``ValueError`` escape; re-raised as invoke's own
    :class:`~invoke.exceptions.ParseError`, both ``inv`` and ``dapo-ops`` print one line and exit 1.
    """
    orig = Argument.set_value
    if getattr(orig, "_dapo_ops", False):
        return

    def set_value(self, value, cast=True):
        try:
            return orig(self, value, cast)
        except (TypeError, ValueError):
            if self.kind not in (int, float):
                raise
            what = "a whole number" if self.kind is int else "a number"
            flag = "--" + str(self.name).replace("_", "-")
            example = f" (e.g. {flag} {self.default!r})" if isinstance(self.default, (int, float)) and self.default > 0 else ""
            raise ParseError(f"{flag}: {value!r} is not {what}{example}") from None

    set_value._dapo_ops = True
    Argument.set_value = set_value


_one_line_flag_errors()


def _import_if_present(name: str):
    if importlib.util.find_spec(name) is None:
        return None
    return importlib.import_module(name)


def build_namespace() -> Collection:
    """Assemble the root :class:`invoke.Collection` from the task modules.

    Returns a new Collection every call (tests build their own programs).
    """
    ns = Collection()
    for modname in TASK_MODULES:
        mod = _import_if_present(modname)
        if mod is None:
            continue
        sub = Collection.from_module(mod)
        for task_name in sub.task_names:
            ns.add_task(sub[task_name])
    for coll_name, modname in SUB_COLLECTIONS.items():
        mod = _import_if_present(modname)
        if mod is not None:
            ns.add_collection(Collection.from_module(mod), coll_name)
    return ns


ns = build_namespace()


def main() -> None:
    """Entry point of the ``dapo-ops`` console script (see ``dapo_ops/program.py``)."""
    prog = _import_if_present("dapo_ops.program")
    if prog is None:  # pragma: no cover - only while the program module is missing
        from invoke import Program

        Program(namespace=ns, name="dapo-ops", version=__import__("dapo_ops").__version__).run()
        return
    prog.program.run()
