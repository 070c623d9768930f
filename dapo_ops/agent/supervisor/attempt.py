"""One verl attempt: its command, its environment, its start and its teardown (STDLIB ONLY, shipped).

argv = ``overrides.build_command(spec, features, setting_changes)`` (:mod:`dapo_ops.core.overrides`), or a
``command_factory`` with the same signature (tests, ``bench/reaction.py``: a fake verl). verl starts in its
**own session / process group** (pgid == its pid) with stdout+stderr into ``attempt-<k>.log``; it carries
``DAPO_OPS_RUN_ID=<run_id>`` and, single-host, its own Ray temp dir, so its processes can be found and
stopped (:mod:`dapo_ops.agent.procs`: own processes only, never by name).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Tuple

from dapo_ops.agent import procs
from dapo_ops.agent.supervisor import accelerator
from dapo_ops.agent.supervisor.config import NOTIFY_SECRET_PREFIX
from dapo_ops.agent.supervisor.record import log, now
from dapo_ops.core import defaults, overrides, redact

if TYPE_CHECKING:
    from dapo_ops.core.features import FeatureSet

#: root of the per-attempt Ray temp dirs (RAY_TMPDIR, read by ray/_common/utils.py get_default_system_temp_dir).
#: Short on purpose: Ray's socket paths <RAY_TMPDIR>/ray/session_<date>_<pid>/sockets/plasma_store must stay
#: under the 107-byte AF_UNIX limit.
RAY_TMP_ROOT = "/tmp/dray"
#: the directory that holds the ``dapo_ops`` package (<bundle>/dapo_ops/agent/supervisor/attempt.py): what
#: the bundle op line (``bundle.op_line``, run by ``dapo_ops.agent.runstart``) puts on the supervisor's
#: PYTHONPATH; verl does not get it
BUNDLE_ROOT = str(Path(__file__).resolve().parents[3])


class BuildError(Exception):
    """The verl command for the next attempt cannot be built (one-line reason)."""


def build_argv(
    factory: Optional[Callable[..., List[str]]], spec: defaults.RunSpec, fs: FeatureSet, changes: Dict[str, Any]
) -> List[str]:
    """argv of the attempt with features ``fs`` and ``changes`` (``factory`` or ``overrides.build_command``).

    :raises BuildError: the command cannot be built (e.g. ``overrides.OverrideError`` for a ladder setting change).
    """
    try:
        return list((factory or overrides.build_command)(spec, fs, dict(changes)))
    except Exception as e:  # noqa: BLE001 - any builder failure is the attempt's config error
        raise BuildError(str(e).splitlines()[0] if str(e) else type(e).__name__) from None


def attempt_spec(spec: Mapping[str, Any], k: int) -> defaults.RunSpec:
    """The spec attempt ``k`` is built from: ``spec`` itself for the first, a copy with ``attempt`` = k after it
    (:func:`dapo_ops.core.overrides.skips_validation`: a retry does not validate again). ``spec``: a
    :class:`~dapo_ops.core.defaults.RunSpec`, or a plan's spec mapping (completed here, once)."""
    return defaults.RunSpec.read(spec).with_attempt(k)


def ray_tmpdir(spec: defaults.RunSpec, k: int, env: Optional[Dict[str, str]] = None) -> Optional[str]:
    """``/tmp/dray/<run_id>.<k>``: attempt ``k``'s own Ray temp dir (verl's ``ray.init()`` starts a local
    cluster there), so its Ray daemons can be found by command line and stopped with the attempt, and never
    another run's. None for a multi-host run (spec ``ray`` / ``RAY_ADDRESS``: the cluster is
    ``raycluster``'s) or when the run's env sets ``RAY_TMPDIR`` itself."""
    env = dict(os.environ) if env is None else env
    if spec.ray or env.get("RAY_ADDRESS") or spec.env.get("RAY_TMPDIR"):
        return None
    return "%s/%s.%d" % (RAY_TMP_ROOT, spec.run_id, k)


def child_env(spec: defaults.RunSpec, secret_env: Dict[str, str], k: int, swanlab_id: Optional[str]) -> Dict[str, str]:
    """verl's environment for attempt ``k``: the supervisor's own minus the bundle on PYTHONPATH, the spec's
    ``env``, the secrets except the notifier's, ``RAY_TMPDIR`` (:func:`ray_tmpdir`), the run/attempt markers and
    the SwanLab run id of an earlier attempt (same SwanLab run across attempts: ``SWANLAB_RUN_ID`` +
    ``SWANLAB_RESUME=allow``, read in swanlab's ``swanlab/sdk/internal/settings/compat/experiment.py``)."""
    env = dict(os.environ)
    pp = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and os.path.abspath(p) != BUNDLE_ROOT]
    if pp:
        env["PYTHONPATH"] = os.pathsep.join(pp)
    else:
        env.pop("PYTHONPATH", None)
    for key, val in spec.env.items():
        env[str(key)] = str(val)
    # the webhook URLs / signing secrets are the notifier's, not verl's: keep them out of its environment
    env.update({n: v for n, v in secret_env.items() if not n.startswith(NOTIFY_SECRET_PREFIX)})
    env["PYTHONUNBUFFERED"] = "1"
    rtd = ray_tmpdir(spec, k, env)
    if rtd:
        env["RAY_TMPDIR"] = rtd
    env["DAPO_OPS_RUN_ID"] = str(spec.run_id)
    env["DAPO_OPS_ATTEMPT"] = str(k)
    if swanlab_id and "SWANLAB_RUN_ID" not in env:
        env["SWANLAB_RUN_ID"] = swanlab_id
        env.setdefault("SWANLAB_RESUME", "allow")
    return env


def redact_argv(argv: List[str], secret_env: Dict[str, str]) -> List[str]:
    """argv for supervisor.log: ``name=value`` items whose name looks secret (:func:`dapo_ops.core.redact.is_secret_name`:
    KEY/TOKEN/SECRET/PASSWORD words, but not sizes such as ``ppo_max_token_len_per_gpu``) and
    any value from secret.env are replaced by ``***`` (secrets never belong in argv; this is a safety net)."""
    return redact.redact_argv(argv, secret_env.values())


def spawn(argv: List[str], alog: Path, env: Dict[str, str], cwd: Optional[str]) -> "subprocess.Popen[bytes]":
    """Start verl in its own session with stdout+stderr appended to ``alog`` (created 0644).

    :raises OSError: verl cannot be started (missing executable, bad cwd); the reason is appended to ``alog``.
    """
    wfd = os.open(str(alog), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=wfd,
            stderr=subprocess.STDOUT,
            cwd=cwd or None,
            env=env,
            start_new_session=True,
            close_fds=True,
        )
    except OSError as e:
        os.write(wfd, ("%s\n" % start_error(argv, e)).encode())
        raise
    finally:
        os.close(wfd)


def start_error(argv: List[str], e: OSError) -> str:
    """The one line that says verl did not start."""
    return "cannot start verl (%s): %s" % (argv[0] if argv else "?", e)


def teardown(
    proc: "subprocess.Popen[bytes]",
    marker: Optional[bytes],
    cmd_marker: Optional[bytes],
    grace_s: float,
    att: Dict[str, Any],
    gpu: bool,
) -> List[int]:
    """Stop the attempt's processes (group ``proc.pid``, ``marker``, ``cmd_marker``; SIGTERM, ``grace_s`` s,
    SIGKILL) and record ``teardown_s`` and, on GPU, ``device_mem_after_mib`` in ``att``. Returns the PIDs the
    attempt had when its teardown began (the GPU release wait looks for them in nvidia-smi)."""
    t_stop = now()
    pids = procs.own_processes(proc.pid, marker, cmd_marker)
    killed = procs.stop_process_group(proc, proc.pid, marker, grace_s, cmd_marker)
    att["teardown_s"] = round(now() - t_stop, 3)
    if killed:
        log("SIGKILLed leftover own processes: %s" % killed)
    mem = accelerator.device_memory_used_mib() if gpu else None
    if mem is not None:
        att["device_mem_after_mib"] = mem
        log("attempt %d torn down in %.1f s; device memory used now (MiB): %s" % (att["n"], att["teardown_s"], mem))
    return pids


def exit_code(rc: Optional[int]) -> Optional[int]:
    """``Popen.returncode`` in the shell convention (128 + signal for a signalled process)."""
    return (128 - rc) if rc is not None and rc < 0 else rc


def kernel_oom(oom0: Optional[Tuple[str, int]], code: Optional[int], att: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The container state of an attempt that verl did not survive: ``{"OOMKilled": True, "source": file}`` when
    it failed (any ``code`` but 0) and the OOM-kill counter read before it started (``oom0``,
    :func:`accelerator.oom_kill_count`) has grown since (recorded as ``att["oom_kills"]``), else None. The failed
    exit records the counter either way (``att["oom_counter"]``: file, before, after), the evidence of an external
    kill (:func:`accelerator.kill_evidence`). Not only a SIGKILL of verl itself (137): the kernel's OOM killer
    picks the largest process, most often one of verl's Ray workers, and the driver then ends with
    ``RayTaskError(ActorDiedError)`` and exit 1 (verl/single_controller/ray/base.py:56 raises it out of the
    TaskRunner, verl/trainer/main_ppo.py:93 out of the driver)."""
    if code in (None, 0) or oom0 is None:
        return None
    oom1 = accelerator.oom_kill_count((oom0[0],))
    att["oom_counter"] = {"file": oom0[0], "before": oom0[1], "after": None if oom1 is None else oom1[1]}
    if oom1 is None or oom1[1] <= oom0[1]:
        return None
    att["oom_kills"] = oom1[1] - oom0[1]
    log("kernel OOM killer fired during attempt %d (%s oom_kill +%d)" % (att["n"], oom0[0], oom1[1] - oom0[1]))
    return {"OOMKilled": True, "source": oom0[0]}
