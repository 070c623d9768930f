"""Looking at runs on hosts: ``inv status``, ``watch``, ``logs`` and ``stop`` (operator side, returns values).

Modules: :mod:`~dapo_ops.control.status.look` (the status probe across hosts, status rows, log paths and ``logs
--errors`` excerpts), :mod:`~dapo_ops.control.status.rows` (``run.json`` + a log tail -> one
:class:`~dapo_ops.control.status.rows.StatusRow`), :mod:`~dapo_ops.control.status.table` (a row's cells),
:mod:`~dapo_ops.control.status.events` (what ``watch`` prints between two looks),
:mod:`~dapo_ops.control.status.watch` (the ``watch`` loop's state) and :mod:`~dapo_ops.control.status.stop` (``inv
stop`` across hosts). Nothing is re-exported here: import from the module that defines a name.
"""
