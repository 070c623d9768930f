"""Launching runs: the launch request checked, ONE plan built from the settings and the host's facts, and executed.

Modules: :mod:`~dapo_ops.control.launch.request` (what ``inv launch`` was given -> a launch request, or one usage
error), :mod:`~dapo_ops.control.launch.plan` (settings + host + facts -> the frozen
:class:`~dapo_ops.control.launch.plan.Plan`), :mod:`~dapo_ops.control.launch.dryrun` (the plan rendered for
``--dry-run``, secrets redacted), :mod:`~dapo_ops.control.launch.service` (one run on one host: facts, plan,
start), :mod:`~dapo_ops.control.launch.refusals` (the typed refusals), :mod:`~dapo_ops.control.launch.resume`
(``--resume``), :mod:`~dapo_ops.control.launch.multihost_service` (one run across hosts on a Ray cluster),
:mod:`~dapo_ops.control.launch.raycluster` (that cluster's bring-up and teardown). The run's SwanLab settings are
:mod:`dapo_ops.control.swanlab_settings` and :mod:`dapo_ops.control.swanlab_values` (preflight reads them too). Nothing is re-exported here: import from the module that defines a name.
"""
