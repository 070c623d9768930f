"""Preflight checks: what would kill a run before its first step, per host, as ``ok | warn | fail`` + one fix.

Cost model: ONE SSH round trip per host, and one Hydra compose per group of hosts that would compose identically
(:mod:`~dapo_ops.control.preflight.group`: same overrides, verl config files, hydra and omegaconf; a host that
differs composes in a second round trip of its own, and so does a host whose plan, finished with the facts the
probe read, has another argv than its draft: the checks judge the plan the launch runs). :func:`~dapo_ops.control.preflight.gather.collect` sends a host shell
command that ``docker exec``s the bundle op :mod:`dapo_ops.agent.preflight_probe` (devices, verl, model, data, disk, network and
optionally the Hydra compose check, all in one process) and, only when that fails, ``docker inspect``s the
container. :func:`~dapo_ops.control.preflight.checks.evaluate` is pure: facts in,
:class:`~dapo_ops.control.preflight.result.Check` list out; the tests feed it both sandbox facts and hand-made ones.

Checks (names are stable; ``--json`` uses them):

============== =====================================================================================
``ssh``        SSH reachable, key accepted, host key known (RemoteError kinds unreachable/refused/auth/hostkey)
``docker``     Docker CLI + daemon usable by the SSH user
``container``  exists and running; stopped shows exit code and OOMKilled; restarting / paused
``host``       bare host (inventory ``runtime = "host"``): replaces ``docker`` + ``container``; the rest run in
               the host's own shell with the inventory ``env`` (devices via ``nvidia-smi``/``npu-smi`` on PATH)
``devices``    accelerators visible inside the container (``npu-smi info`` / ``nvidia-smi``) >= the plan's need
``visible``    ``ASCEND_RT_VISIBLE_DEVICES`` / ``CUDA_VISIBLE_DEVICES`` vs the devices mounted
``leftover``   processes already holding device memory (a leftover run), with their PIDs
``active-run`` a run of this runs_dir already holds the container (launch's refusal, agent/occupancy.py's one rule)
``device-mem`` free memory per needed device vs rollout ``gpu_memory_utilization``
``plan``       the launch's plan cannot be made of the host's facts (nothing fits the device memory, ...)
``python``     Python version in the container
``verl``       verl found (from the workdir), version -> profile, matches the plan's profile
``entry``      the plan's entry module exists (the DAPO recipe needs the ``recipe`` submodule)
``overrides``  the generated overrides compose against the container's own verl config (Hydra, no torch)
``model``      model dir: config.json, weights (shards complete), tokenizer; prompt+response fit the context
``data:<f>``   each parquet: readable, verl RL schema (``prompt``, ``data_source``, ``reward_model.ground_truth``)
``disk``       free space where checkpoints go vs an estimate from the model size
``proxy``      proxy variables the run will see inside the container
``swanlab``    SwanLab host reachable FROM THE CONTAINER (when the plan logs to SwanLab in cloud mode)
``swanlab-key`` cloud mode has an API key when there is no TTY to ask for one (operator side)
``ray-port``   multi-host: the head's Ray port is free; workers reach the head on it
============== =====================================================================================

:func:`~dapo_ops.control.preflight.checks.quick` is the cheap subset ``inv launch`` runs automatically (no compose; of the network probes only the
``swanlab`` GET, which launch asks for with ``tracker=True``, in the same round trip).

Modules: ``result`` (Check, statuses, JSON), ``plan_view`` (what is read from a plan), ``gather`` (probe request +
the one round trip), ``host`` (ssh/docker/container/devices), ``verl`` (python/verl/entry/overrides/modules/cann),
``inputs`` (model/data/disk), ``memory`` (memory-fit), ``network`` (proxy/swanlab/ray-port/swanlab-key),
``checks`` (evaluate, quick, run_all), ``group`` (run_fleet: the fleet, one compose per group), ``compose_check``
(the overrides composed with hydra-core, here or by the bundle op). Nothing is
re-exported here: import from the module that defines a name.
"""
