"""Operator side: the run settings, and one sub-package per concept (inventory, remote, preflight, launch, status).

:mod:`~dapo_ops.control.settings` is the run-settings table (``docs/params.md``: :mod:`~dapo_ops.control.params_doc`)
and :mod:`~dapo_ops.control.userconfig` the operator's own config file; :mod:`dapo_ops.control.inventory`
(``hosts.toml``), :mod:`dapo_ops.control.remote` (commands on hosts and in containers, the bundle, the fan-out
across hosts), :mod:`dapo_ops.control.preflight` (the checks before a run), :mod:`dapo_ops.control.launch` (request,
plan, start) and :mod:`dapo_ops.control.status` (status, watch, logs, stop) hold the rest.

Returns values or raises typed errors and never exits; the few modules that write to a terminal (a plan's and a
fan-out table's rendering, the SwanLab prompt, ``python -m`` programs) are named in docs/design.md "Layout".
"""
