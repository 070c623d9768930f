"""The stand-in's reward calls and verl 0.9.1's endless retry of a failing one (sandbox / test equipment only).

When ``reward.custom_reward_function.path`` is set, every "sample" of a step (``data.train_batch_size`` x
``actor_rollout_ref.rollout.n``) calls the user's function as verl's DAPO reward manager does
(``compute_score(data_source=, solution_str=, ground_truth=, extra_info=)``,
``verl/experimental/reward_loop/reward_manager/dapo.py:84-91``). When it raises, real verl 0.9.1 logs the session's
error in the agent-loop worker (``verl/trainer/ppo/v1/agent_loop_tq.py:133-141``: ``logger.error(f"Error in
_run_prompt for uid={uid}", exc_info=...)``), tags the prompt group ``failure`` and the replay buffer hands it out
again: the same call fails again, for ever (issue 29: 13,984 tracebacks in 8 minutes on the H200, ~29/s).
:func:`storm` prints that: the real frames of 0.9.1 (line numbers from the wheel) down to the user's own frames,
taken from the exception itself, through Ray's prefix of the ``AgentLoopWorkerTQ`` actor, at ``rate`` per second.
"""

from __future__ import annotations

import importlib.util
import time
import traceback

SITE = "/usr/local/lib/python3.12/dist-packages"
#: verl 0.9.1's frames above the user's function (file, line, function, source line)
FRAMES_AGENT = (
    (
        "verl/experimental/agent_loop/agent_loop.py",
        695,
        "_run_agent_loop",
        'return await self._agent_loop_postprocess(output, trajectory["validate"], **kwargs)',
    ),
    (
        "verl/trainer/ppo/v1/agent_loop_tq.py",
        160,
        "_agent_loop_postprocess",
        "await self._compute_score(outputs, kwargs=kwargs)",
    ),
    (
        "verl/experimental/agent_loop/agent_loop.py",
        1026,
        "_compute_score",
        "result = await selected_reward_loop_worker_handle.compute_score.remote(data)",
    ),
)
FRAMES_REWARD = (
    (
        "verl/experimental/reward_loop/reward_loop.py",
        148,
        "compute_score",
        "return await self.reward_manager.run_single(data)",
    ),
    (
        "verl/experimental/reward_loop/reward_manager/dapo.py",
        84,
        "run_single",
        "result = await self.loop.run_in_executor(",
    ),
)
FRAME_THREAD = (
    "/usr/lib/python3.12/concurrent/futures/thread.py",
    59,
    "run",
    "result = self.fn(*self.args, **self.kwargs)",
)
FRAME_LAMBDA = ("verl/experimental/reward_loop/reward_manager/dapo.py", 86, "<lambda>", "lambda: self.compute_score(")


def load(path: str, name: str):
    """The user's reward function (verl/trainer/ppo/reward.py ``get_custom_reward_fn``: a file path + a name)."""
    spec = importlib.util.spec_from_file_location("custom_module", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return getattr(mod, name)


def _frame(path: str, line: int, func: str, src: str) -> list[str]:
    full = path if path.startswith("/") else "%s/%s" % (SITE, path)
    return ['  File "%s", line %d, in %s' % (full, line, func), "    " + src]


def traceback_lines(exc: BaseException, uid: str, worker_pid: int, reward_pid: int, ip: str) -> list[str]:
    """The lines verl 0.9.1 logs for one failed session (without Ray's prefix)."""
    t = time.time()
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) + ",%03d" % int((t % 1) * 1000)
    out = ["ERROR:%s:Error in _run_prompt for uid=%s" % (stamp, uid), "Traceback (most recent call last):"]
    for f in FRAMES_AGENT:
        out += _frame(*f)
    out.append(
        "ray.exceptions.RayTaskError(%s): ray::RewardLoopWorker.compute_score() (pid=%d, ip=%s)"
        % (type(exc).__name__, reward_pid, ip)
    )
    for f in FRAMES_REWARD + (FRAME_THREAD, FRAME_LAMBDA):
        out += _frame(*f)
    for fs in traceback.extract_tb(exc.__traceback__)[1:]:  # the user's own frames (below our call)
        out += _frame(fs.filename, fs.lineno, fs.name, (fs.line or "").strip())
    msg = str(exc) if not isinstance(exc, KeyError) else repr(exc.args[0]) if exc.args else ""
    out.append("%s: %s" % (type(exc).__name__, msg) if msg else type(exc).__name__)
    return out


def storm(out, fn, kwargs: dict, exc: BaseException, rate: float, ip: str) -> None:
    """verl's endless retry of the failing sample: call ``fn(**kwargs)`` again, print each failure's traceback
    through ``out`` (the stand-in's :class:`Out`, actor ``AgentLoopWorkerTQ``), ``rate`` tries per second. Never
    returns while the function keeps raising."""
    n = 0
    worker_pid = out.pid + 311
    reward_pid = out.pid + 377
    while True:
        n += 1
        uid = "%08x-standin-%d" % (abs(hash(str(kwargs.get("solution_str")))) & 0xFFFFFFFF, n)
        for ln in traceback_lines(exc, uid, worker_pid, reward_pid, ip):
            out.line(ln, "AgentLoopWorkerTQ", err=True)
        time.sleep(1.0 / max(rate, 0.01))
        try:
            fn(**kwargs)
            return
        except Exception as e:  # noqa: BLE001 - the user's error, as verl sees it
            exc = e
