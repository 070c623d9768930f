"""The ``dapo-ops`` console program: Fabric's ``Fab`` over the same task collection as ``inv``.

``dapo-ops -H h1,h2 <task>`` behaves like ``inv <task> -H h1,h2``: the core ``-H`` value is handed to the task's
``hosts`` argument, and the task fans out in parallel itself (:mod:`dapo_ops.fanout`). Fabric's own executor
would instead clone the task once per host and run the clones one after another (``fabric/executor.py:
expand_calls``), with ``c`` a Connection; :class:`Executor` here does not.

Config: :class:`Config` uses the prefix ``dapo_ops`` (files ``dapo_ops.yaml`` / ``~/.dapo_ops.yaml``, env
``DAPO_OPS_*`` for declared keys). Fabric's other core flags keep their meaning where it makes sense:
``-t/--connect-timeout`` overrides the inventory's connect_timeout (see ``tasks/_common.py``).
"""

from __future__ import annotations

import fabric
from fabric.main import Fab
from invoke import Call, Task
from invoke.exceptions import Exit

from . import __version__, cli
from .tasks._common import EXIT_USAGE, takes_hosts


class Config(fabric.Config):
    """Fabric config with the ``dapo_ops`` prefix (``dapo_ops.yaml``, ``DAPO_OPS_*``)."""

    prefix = "dapo_ops"


class Executor(fabric.Executor):
    """Passes the core ``-H`` value into each top-level task's ``hosts`` argument instead of cloning the task
    per host (which would run hosts serially). Pre/post tasks run once, without hosts (as under Fabric).
    A task-level ``-H`` wins over the core one.
    """

    def expand_calls(self, calls, apply_hosts=True):
        host_str = ""
        if apply_hosts and self.core is not None:
            host_str = self.core[0].args.hosts.value or ""
            if self.core.remainder:
                raise Exit("dapo-ops runs tasks, not ad hoc commands after '--'; e.g. dapo-ops -H h1 hosts",
                           code=EXIT_USAGE)
        ret = []
        for call in calls:
            if isinstance(call, Task):
                call = Call(task=call)
            ret.extend(self.expand_calls(call.pre, apply_hosts=False))
            if host_str:
                if not takes_hosts(call.task):
                    name = call.called_as or call.task.name
                    raise Exit(f"task '{name}' does not run on hosts; drop -H (tasks that do: see dapo-ops --list)",
                               code=EXIT_USAGE)
                if not call.kwargs.get("hosts"):
                    call.kwargs["hosts"] = host_str
            ret.append(call)
            ret.extend(self.expand_calls(call.post, apply_hosts=False))
        return ret


class DapoOps(Fab):
    """Fab with the ``-H`` help text saying what it means here."""

    def core_args(self):
        args = super().core_args()
        for a in args:
            if "H" in a.names:
                a.help = ("Comma-separated inventory host names or user@host:port, passed to the task's --hosts "
                          "(the task runs them in parallel; default: every host in the inventory).")
        return args


def make_program(namespace=None) -> Fab:
    """A fresh ``dapo-ops`` program (tests build their own: ``make_program().run("dapo-ops -H h1 hosts",
    exit=False)``)."""
    return DapoOps(
        name="dapo-ops",
        namespace=namespace if namespace is not None else cli.build_namespace(),
        executor_class=Executor,
        config_class=Config,
        version=__version__,
    )


program = make_program(cli.ns)
