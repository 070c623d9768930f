"""How a failed verl 0.9.1 run ends in its driver log (sandbox / test equipment only): Hydra 1.3's report of the
exception the ``@hydra.main`` task raised, over the frames REAL verl's driver has, never the stand-in's own.

Real runs (tests/fixtures/real-verl/tool-runs/d-update-oom/train.log:1080-1222, c-weight-sync-oom, k-megatron-*,
holdout/w11-w13; launched without ``HYDRA_FULL_ERROR``, dapo-ops never sets it) print, on stderr:

- ``Error executing job with overrides: [<overrides>]`` (hydra/core/utils.py ``JobReturn.return_value``);
- ``Traceback (most recent call last):`` and the driver's frames below Hydra's ``run_job`` (Hydra strips its own,
  hydra/_internal/utils.py ``run_and_report``): ``main`` (verl/trainer/main_ppo.py:184 ``run_ppo(config,
  task_runner_class=TaskRunnerV1)``; the one-step-off entry verl/experimental/one_step_off_policy/main_ppo.py:124
  ``run_ppo(config, task_runner_class=OneStepTaskRunner)``) -> ``run_ppo`` (verl/trainer/main_ppo.py:93
  ``ray.get(runner.run.remote(config))``) -> Ray's ``auto_init_wrapper`` / ``wrapper`` / ``get`` / ``get_objects``
  (``raise value.as_instanceof_cause()``);
- the exception: ``ray.exceptions.RayTaskError(<Exc>): \x1b[36mray::TaskRunnerV1.run()\x1b[39m (pid=..., ...)`` (Ray's
  colour; texts.task_header, with the carets of the frames Ray strips), the remote frames and the inner exception line (the message Ray's ``RayTaskError`` carries); an exception of the driver itself
  (``validate_config``, verl/trainer/main_ppo.py:177, before Ray) under ``main`` alone;
- a blank line and ``Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.``; exit 1.

With ``HYDRA_FULL_ERROR=1`` Hydra prints the first line and re-raises, so Python's own report follows (Hydra's
frames included, no last line), exit 1 as well: :func:`fail` re-raises and :func:`excepthook` swaps the stand-in's
frames for verl's.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import sysconfig
import time
import traceback

import verl

#: the directory of the ``verl`` package this process runs (the container's ``/verl/verl``)
VERL_DIR = os.path.dirname(os.path.abspath(verl.__file__))
_STANDIN_DIR = os.path.join(VERL_DIR, "_standin")
_ENTRY_FILES = {
    os.path.join(VERL_DIR, "trainer", "main_ppo.py"),
    os.path.join(VERL_DIR, "experimental", "one_step_off_policy", "main_ppo.py"),
}

# A frame: (file, line, function, source line, caret line or ""), as Python 3.11+ prints it (the caret line is
# left out where it would underline the whole line). Line numbers: verl 0.9.1, and Ray's as the real runs show.
ENTRIES = {
    "main_ppo": (
        "trainer/main_ppo.py",
        184,
        "main",
        "run_ppo(config, task_runner_class=TaskRunnerV1)",
        "",
    ),
    "one_step_off": (
        "experimental/one_step_off_policy/main_ppo.py",
        124,
        "main",
        "run_ppo(config, task_runner_class=OneStepTaskRunner)",
        "",
    ),
}
#: ``if __name__ == "__main__": main()`` of each entry (verl/trainer/main_ppo.py:196, one_step_off main_ppo.py:129)
MODULE_MAIN_LINE = {"main_ppo": 196, "one_step_off": 129}
#: verl/trainer/main_ppo.py:177: ``validate_config(`` in ``main``, the driver's own check before Ray
VALIDATE = ("trainer/main_ppo.py", 177, "main", "validate_config(", "")
RUN_PPO = ("trainer/main_ppo.py", 93, "run_ppo", "ray.get(runner.run.remote(config))", "")
#: verl/trainer/main_ppo.py:74: Ray's start (or join of ``$RAY_ADDRESS``'s cluster) in ``run_ppo``
RAY_INIT = ("trainer/main_ppo.py", 74, "run_ppo", "ray.init(**OmegaConf.to_container(ray_init_kwargs))", "")
#: where an exception leaves verl's driver: its own check before Ray, Ray's start, or the TaskRunner (``ray.get``)
PHASES = ("validate", "ray_init", "runner")
RAY_GET = [
    ("_private/auto_init_hook.py", 22, "auto_init_wrapper", "return fn(*args, **kwargs)", "       " + "^" * 19),
    ("_private/client_mode_hook.py", 110, "wrapper", "return func(*args, **kwargs)", "       " + "^" * 21),
    (
        "_private/worker.py",
        2968,
        "get",
        "values, debugger_breakpoint = worker.get_objects(",
        " " * 30 + "^" * 19,
    ),
    ("_private/worker.py", 1050, "get_objects", "raise value.as_instanceof_cause()", ""),
]


def ray_dir() -> str:
    """Where ``ray`` is installed for this Python (without importing it), else where it would be."""
    spec = importlib.util.find_spec("ray")
    if spec is not None and spec.submodule_search_locations:
        return list(spec.submodule_search_locations)[0]
    return os.path.join(sysconfig.get_paths()["purelib"], "ray")


def _fmt(frames: list[tuple[str, int, str, str, str]]) -> list[str]:
    out = []
    for f, ln, fn, code, caret in frames:
        out += [f'  File "{f}", line {ln}, in {fn}', f"    {code}"]
        if caret:
            out.append(f"    {caret}")
    return out


def driver_frames(entry: str, phase: str) -> list[tuple[str, int, str, str, str]]:
    """The frames of verl's driver down to where the exception left it (``phase``, one of :data:`PHASES`):
    ``main``'s ``validate_config`` call, ``run_ppo``'s ``ray.init``, or Ray's ``get`` of the TaskRunner's result."""
    v = lambda fr: (os.path.join(VERL_DIR, fr[0]), *fr[1:])  # noqa: E731
    if phase == "validate":
        return [v(VALIDATE)]
    if phase == "ray_init":
        return [v(ENTRIES[entry]), v(RAY_INIT)]
    r = ray_dir()
    return [v(ENTRIES[entry]), v(RUN_PPO)] + [(os.path.join(r, fr[0]), *fr[1:]) for fr in RAY_GET]


def _own(filename: str) -> bool:
    """A frame of the stand-in itself (its trainer modules and entry files), never shown."""
    return filename.startswith(_STANDIN_DIR + os.sep) or filename in _ENTRY_FILES


def cause_name(exc: BaseException) -> str | None:
    """The name Ray puts in ``RayTaskError(<name>)`` for ``exc`` (ray/exceptions.py ``as_instanceof_cause``): the
    inner name of an exception that already is one, None (a bare ``RayTaskError``) for a plain ``Exception``."""
    n = type(exc).__name__
    if n.startswith("RayTaskError(") and n.endswith(")"):
        return n[len("RayTaskError(") : -1]
    if n in ("RayTaskError", "Exception"):
        return None
    return n


def exception_text(exc: BaseException, phase: str, header: str) -> list[str]:
    """The exception part of the report, after the driver's frames: the frames ``exc`` passed that are not the
    stand-in's, and its line; from the TaskRunner (``phase`` "runner") as Ray's ``RayTaskError`` carries it:
    ``exc`` as it is when the stand-in built it so (:func:`texts.fake_exc`, whose message holds the remote frames),
    otherwise wrapped as Ray wraps it, ``ray.exceptions.RayTaskError(<Exc>): <header>`` over those frames and line."""
    only = traceback.format_exception_only(type(exc), exc)
    lines = "".join(only).rstrip("\n").split("\n")
    frames = [
        ln.rstrip("\n")
        for fs in traceback.extract_tb(exc.__traceback__)
        if not _own(fs.filename)
        for ln in traceback.format_list([fs])[0].rstrip("\n").split("\n")
    ]
    if phase != "runner":
        return frames + lines
    if getattr(type(exc), "standin_ray_text", False):
        return lines
    name = cause_name(exc)
    outer = f"ray.exceptions.RayTaskError({name})" if name else "ray.exceptions.RayTaskError"
    return [f"{outer}: {header}", *frames, *lines]


def report(exc: BaseException, entry: str, overrides: list, phase: str, header: str) -> str:
    """What Hydra 1.3 writes to stderr for ``exc`` without ``HYDRA_FULL_ERROR`` (module docstring)."""
    out = [f"Error executing job with overrides: {overrides}", "Traceback (most recent call last):"]
    out += _fmt(driver_frames(entry, phase))
    out += exception_text(exc, phase, header)
    out += ["", "Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace."]
    return "\n".join(out) + "\n"


def _full_error() -> bool:
    """Hydra's ``_is_env_set("HYDRA_FULL_ERROR")`` (hydra/_internal/utils.py): set and ``"1"``."""
    return os.environ.get("HYDRA_FULL_ERROR") == "1"


def excepthook(entry: str, phase: str, header: str):
    """A ``sys.excepthook`` for ``HYDRA_FULL_ERROR=1``: Python's report with the frames above the stand-in's entry
    as they are (runpy, Hydra's), the entry module's ``main()`` at verl's line, then verl's driver frames and the
    exception (:func:`exception_text`)."""

    def hook(tp, exc, tb):
        outer = []
        for fs in traceback.extract_tb(tb):
            if _own(fs.filename):
                if fs.name != "<module>":
                    break
                fs = traceback.FrameSummary(fs.filename, MODULE_MAIN_LINE[entry], fs.name, line="main()")
            outer.append(fs)
        text = ["Traceback (most recent call last):"]
        text += "".join(traceback.format_list(outer)).rstrip("\n").split("\n") if outer else []
        text += _fmt(driver_frames(entry, phase)) + exception_text(exc, phase, header)
        sys.stderr.write("\n".join(text) + "\n")
        sys.stderr.flush()

    return hook


def fail(exc: BaseException, entry: str, phase: str, header: str) -> None:
    """End the run as verl's driver does on ``exc`` (call it from the ``except`` of the Hydra task): print
    :func:`report` and exit 1; with ``HYDRA_FULL_ERROR=1``, install :func:`excepthook` and re-raise, Hydra prints
    its first line and Python the rest. An ``exc`` with ``standin_hang_s`` keeps the process alive that long after
    the report (the real update OOM's driver did not exit: d-update-oom/train.log:1224-1226)."""
    if _full_error():
        sys.excepthook = excepthook(entry, phase, header)
        raise exc
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    overrides = OmegaConf.to_container(HydraConfig.get().overrides.task)
    sys.stdout.flush()
    sys.stderr.write(report(exc, entry, overrides, phase, header))
    sys.stderr.flush()
    hang = float(getattr(exc, "standin_hang_s", 0.0))
    if hang > 0:  # a cue's driver that does not exit after its report (Ray's teardown stuck: trainer.raise_later)
        time.sleep(hang)
    sys.exit(1)
