"""Remote execution: a :class:`Target` (an inventory host + its container) over one Fabric connection.

Everything that reaches a shell is ``shlex.quote``-d here, so callers pass plain strings:

- ``Target.run(cmd)`` -> on the host: ``docker exec ... <container> sh -c <cmd>`` (the lines are built in
  :mod:`dapo_ops.control.remote.commands`).
- non-secret ``env`` goes as ``docker exec -e K=<value>`` (quoted; visible in the host's ``ps``: not for secrets).
- ``secret_env`` goes through an env-file created on the host with ``umask 077`` (mode 0600), filled from the
  SSH channel's stdin (never on any command line), passed with ``--env-file`` and removed when ``docker exec``
  returns (also on SIGHUP/SIGTERM of the host shell).
- ``Target.host_run(cmd)`` runs on the host itself; ``Target.put_text`` writes a file inside the container from
  stdin (``docker exec -i <c> sh -c 'cat > path'``).

Host keys are verified against ``known_hosts`` (inventory field, else the ssh_config's UserKnownHostsFile, else
``~/.ssh/known_hosts``) with paramiko's ``RejectPolicy``; ``accept_new_host_keys=True`` accepts (and appends) keys
of hosts not yet listed, like OpenSSH ``StrictHostKeyChecking=accept-new``; a *changed* key is always refused.

Every failure is a :class:`~dapo_ops.control.remote.errors.RemoteError` with a ``kind`` (see
:data:`~dapo_ops.control.remote.errors.KINDS`; the classification of SSH and Docker failures lives in
:mod:`dapo_ops.control.remote.errors`) and a one-line message that says what to do.

Bare-metal hosts (inventory ``runtime = "host"``): no container. ``Target.run(cmd)`` runs
``( cd <workdir> && export <host env> <env> && [set -a && . "$f" && set +a &&] sh -c <cmd> )`` in the host's
own shell instead of ``docker exec``; the inventory's per-host ``env`` table (non-secret; e.g. ``PYTHONPATH``,
``PATH``) is exported first, a call's ``env`` after it (``PYTHONPATH`` of both is joined, the call's first).
Secrets go through the same 0600 file fed by stdin, written as shell-quoted ``K='v'`` lines and sourced with
``set -a`` (so no value is ever evaluated), and removed after. Docker's error kinds never apply there.

Local transport (inventory ``transport = "local"``): the host is this machine; the same code path runs each
host command with :class:`invoke.Context` (``/bin/bash`` subprocess, same Result, timeout and stdin
handling as Fabric's SSH runner) instead of SSH; connect/close are no-ops.

A Target is not thread-safe: use one per thread (:mod:`dapo_ops.control.remote.fanout` does).

Connection reuse: ``Target(..., reuse=True)`` runs plain (no pty) commands through a per-user control master
that keeps the host's SSH connection open between calls and processes (:mod:`dapo_ops.control.remote.sshmux`, like OpenSSH's
``ControlMaster``/``ControlPersist``); the master connects with this same code, so host-key verification and the
error kinds are the same. fabric and paramiko are imported only when a direct connection is made.

Modules: :mod:`~dapo_ops.control.remote.target` (:class:`Target`), :mod:`~dapo_ops.control.remote.commands` (the
quoted host command lines), :mod:`~dapo_ops.control.remote.errors` (:data:`KINDS`, :class:`RemoteError`, the
classification of SSH and Docker failures), :mod:`~dapo_ops.control.remote.hostkeys` (accept-new),
:mod:`~dapo_ops.control.remote.sshmux` (the control master's caller side),
:mod:`~dapo_ops.control.remote.master` (the master process), :mod:`~dapo_ops.control.remote.bundle` (the ONE way code
reaches a container: the bundle and the one-line calls into it) and :mod:`~dapo_ops.control.remote.fanout` (one
function per host in parallel, one row per host).
"""
