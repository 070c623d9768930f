"""The detached retry supervisor: runs verl attempts for one run, escalates on OOM, resumes.

STDLIB ONLY (shipped into the training container, see ``dapo_ops/control/remote/bundle.py``)::

    cd <workdir> && PYTHONPATH=<bundle> python3 -m dapo_ops.agent.supervisor <run_dir>

Per run (``<run_dir>/spec.json``, docs/design.md "Run spec"):

1. read ``spec.json`` and ``secret.env`` (then delete it; secrets stay in memory only), take the
   one-run-per-container lock (``runfiles.acquire_lock``), write ``run.json`` (:mod:`.config`, :mod:`.record`);
2. per attempt ``k``: argv = ``overrides.build_command(spec, features, setting_changes)``; start verl in
   its **own session / process group** with stdout+stderr into ``attempt-<k>.log`` (:mod:`.attempt`); follow that
   file incrementally (kept offset, never re-read), copy it into ``train.log`` between delimiter lines, parse
   ``step:N - k:v`` metrics, ``Total training steps: N``, resume lines and SwanLab's ``View run … at <url>``
   (:mod:`.follow`, the grammar of :mod:`dapo_ops.core.logformat`);
3. as soon as ``classify.is_device_oom_line`` fires (not at exit: the other ranks hang in a collective),
   or the process exits, or no progress for ``hang_timeout_s``: stop the attempt's process group (SIGTERM,
   then SIGKILL; own processes only, never by name: :mod:`dapo_ops.agent.procs`), classify the attempt log's
   tail, ask ``ladder.decide`` (:mod:`.escalate`) and either retry (next FeatureSet / setting changes,
   ``trainer.resume_mode=auto`` on the same checkpoint dir (:mod:`.checkpoints`), same experiment, same SwanLab
   run id; on GPU after the device memory is free again, :mod:`.accelerator`) or stop with the suggestions;
4. SIGTERM/SIGINT to the supervisor (``inv stop``) stops the verl group and marks the run ``stopped``.

The state machine is :class:`~dapo_ops.agent.supervisor.machine.Supervisor` (:mod:`.machine`); tunables are listed
in :mod:`.config`. Nothing is re-exported here: import from the module that defines a name (the log
grammar from :mod:`dapo_ops.core.logformat`, process handling from :mod:`dapo_ops.agent.procs`).
"""
