"""The supervisor's state machine: one run from its spec to its end, attempt after attempt (STDLIB ONLY, shipped).

States (run.json ``status``, :class:`dapo_ops.core.runstate.RunStatus`): ``starting`` -> ``running`` (an attempt is up) ->
``retrying`` (the ladder chose a retry; the delay / GPU release wait) -> ``running`` ... -> ``succeeded`` |
``failed`` | ``stopped``. The pieces: :mod:`.config` (spec, secret.env, tunables), :mod:`.attempt` (command,
environment, start, teardown), :mod:`.follow` (the attempt log as it grows), :mod:`.escalate` (verdict ->
decision), :mod:`.record` (run.json), :mod:`.accelerator` (nvidia-smi, OOM-kill counter), :mod:`.checkpoints`.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import subprocess
import threading
import time
import traceback
from pathlib import Path
from types import FrameType
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from dapo_ops.agent import notify, procs, runfiles
from dapo_ops.agent.supervisor import (
    accelerator,
    attempt,
    config,
    diskspace,
    escalate,
    follow,
    hostevidence,
    learn,
    record,
    stall,
)
from dapo_ops.agent.supervisor.checkpoints import latest_checkpoint, note_data_order, prune_checkpoints, roll_back
from dapo_ops.agent.supervisor.record import log, now
from dapo_ops.core import classify, defaults, features, health, hydra_override, memfit, profiles, redact, runstate
from dapo_ops.core.classify import storm
from dapo_ops.core.ladder import resume_settings
from dapo_ops.core.logformat import join_swanlab_links, swanlab_run_id

DESCRIPTION = "The detached retry supervisor: runs verl attempts for one run, escalates on OOM, resumes."
OPERATOR = "stopped by the operator"


class _Stop(Exception):
    """Raised inside the attempt loop when the supervisor was asked to stop."""


class Supervisor:
    """One run's supervisor. ``run()`` returns the process exit code (0 succeeded/stopped, 1 failed, 2 no spec).

    ``command_factory(spec, features, setting_changes) -> list[str]`` defaults to
    ``overrides.build_command``; tests and ``bench/reaction.py`` pass a fake verl instead.
    The first attempt starts from the spec's ``setting_changes`` (the memory-fit estimate's rungs,
    recorded in ``memory_rungs`` with source ``estimate``); the ladder's changes are merged on top.
    """

    def __init__(self, run_dir: str, command_factory: Optional[Callable[..., List[str]]] = None):
        self.run_dir = str(run_dir)
        self.paths = runstate.RunPaths(run_dir)
        self.command_factory = command_factory
        self.stop_requested = False
        self.spec = defaults.RunSpec(data={})  # read by _load (runfiles.read_spec)
        self.secret_env: Dict[str, str] = {}
        self.rec: Dict[str, Any] = {}
        self.tun = dict(config.DEFAULT_TUNABLES)
        self.hang_timeout_s = float(defaults.SPEC["hang_timeout_s"])  # until the spec is read
        self.ladder = escalate.Ladder(defaults.SPEC["max_oom_retries"])
        self.disk = diskspace.DiskWatch(self.run_dir)
        self.writer = record.RecordWriter(self.run_dir, on_error=self.disk.note)
        self.links = follow.LinkFinder({})
        self.train_log: Optional[follow.TrainLog] = None
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self.pgid: Optional[int] = None
        self.marker: Optional[bytes] = None
        self.cmd_marker: Optional[bytes] = None  # the current attempt's Ray temp dir (ray_tmpdir)
        self.att_pids: List[int] = []  # the current attempt's processes when its teardown began
        self._notify_threads: List[threading.Thread] = []
        # failed webhook sends the notify threads found, not yet in run.json (:meth:`_write` takes them)
        self._notify_failed: List[Tuple[str, List[Dict[str, str]], float]] = []
        self._notify_lock = threading.Lock()
        self.writer.before = self._take_notify_failures
        self.lock_taken = False
        self.swanlab_id: Optional[str] = None
        self.memos: Optional[learn.Memos] = None  # learned starts (core/learned.py), set once the spec is read
        self.health = health.HealthWatch()  # the run's training metrics, across attempts (core/health.py)
        self.first_bad: Optional[Dict[str, Any]] = None  # the run's first bad step (health.Flag.to_json())
        self.roll_back_before: Optional[int] = None  # the next attempt resumes from a checkpoint before this step

    # -- setup -------------------------------------------------------------

    def _load(self) -> None:
        self.spec = runfiles.read_spec(self.run_dir)
        self.secret_env = config.take_secret_env(self.paths.secret_env)
        self.tun = config.tunables(self.spec)
        self.writer.interval_s = self.tun["write_interval_s"]
        self.hang_timeout_s = self.spec.hang_timeout_s  # read_spec completed it from the defaults table
        self.ladder = escalate.Ladder(self.spec.max_oom_retries)
        self.marker = ("DAPO_OPS_RUN_ID=%s" % self.spec.run_id).encode()
        self.links = follow.LinkFinder(dict(self.spec.env))
        self.memos = learn.Memos(self.spec, self._runs_dir())
        bad = self.spec.get("diverged_at")  # --resume of a diverged run (control/launch/resume.py carry)
        if isinstance(bad, dict) and isinstance(bad.get("step"), int):
            self.first_bad = dict(bad)
            self.roll_back_before = bad["step"]

    def _runs_dir(self) -> str:
        return str(Path(self.run_dir).resolve().parent)

    def _ckpt_dir(self) -> Optional[str]:
        """The run's checkpoint dir (the spec's ``ckpt_dir``), or None."""
        return self._settings().get("ckpt_dir")

    def _settings(self) -> Dict[str, Any]:
        s = dict(self.spec.settings)
        s.update(self.rec.get("setting_changes") or {})
        s.setdefault("framework", self.spec.framework)  # the memory ladder's rungs depend on both
        s.setdefault("mode", self.spec.mode)
        if self.spec.framework == "fsdp":  # the FSDP strategy the attempts run: no offload-policy rung on FSDP1
            full = defaults.complete_settings(s)
            s.setdefault(
                "strategy",
                profiles.fsdp_strategy(
                    memfit.trainer_world(full, s["mode"] == "one-step-off"),
                    self.spec.strategy,
                    bool(full.get("fsdp_offload_policy")),
                ),
            )
        for k, v in resume_settings(self.spec).items():  # the `-H <hosts> --resume <run_id>` of a stop's suggestions
            s.setdefault(k, v)
        s.setdefault("runs_dir", self._runs_dir())
        # where verl runs, for the stop suggestions' commands (core/ladder.py on_host): "" a bare host, else its
        # container (a spec without its runtime is a container host's: docker is the inventory's default)
        s.setdefault("exec_container", "" if self.spec.runtime == "host" else self.spec.container)
        if self.spec.max_oom_retries_from:  # "after 2 OOM retries (--max-oom-retries 2)": where the limit came from
            s.setdefault(
                "max_oom_retries_from", self.spec.max_oom_retries_from
            )  # the real path a full disk's `df -h` / `du -sh` names
        return s

    def _child_env(self, k: int) -> Dict[str, str]:
        return attempt.child_env(self.spec, self.secret_env, k, self.swanlab_id)

    def _redact_argv(self, argv: List[str]) -> List[str]:
        return attempt.redact_argv(argv, self.secret_env)

    # -- run.json, train.log, notifications ----------------------------------

    def _write(self, force: bool = True) -> None:
        self.writer.write(self.rec, force)

    def _take_notify_failures(self, rec: Dict[str, Any]) -> None:
        """The notify threads' failed sends join ``rec`` (run.json ``notify_failures``) on the writing thread, at
        every run.json write (``RecordWriter.before``): the follow loop's as well as :meth:`_write`'s."""
        with self._notify_lock:
            taken, self._notify_failed = self._notify_failed, []
        for event, failures, at in taken:
            record.note_notify_failures(rec, event, failures, at)

    def _set_status(self, status: runstate.RunStatus) -> None:
        self.rec["status"] = status.value
        self._write()

    def _tee(self, data: bytes) -> None:
        if self.train_log is not None:
            self.train_log.write(data)

    def _on_cap(self, info: Dict[str, Any]) -> None:
        """train.log reached its growth bound (:mod:`.logcap`): said once, in supervisor.log and run.json."""
        self.rec["log_capped"] = dict(info, attempt=self.rec.get("attempt"))
        log(
            "train.log capped: verl writes more than %d B/s after %d MiB; train.log keeps step lines, counts of the "
            "lines left out and the last lines; the whole output is in attempt-%s.log"
            % (info["rate_bytes_s"], info["burst_bytes"] / (1 << 20), self.rec.get("attempt"))
        )
        self.writer.dirty = True

    def _on_link(self, url: str) -> None:
        """An attempt found its SwanLab link: the run keeps ONE (the first cloud URL, or one ``swanlab sync`` over
        every attempt's offline directory: :func:`dapo_ops.core.logformat.join_swanlab_links`)."""
        self.rec["swanlab_url"] = join_swanlab_links(self.rec.get("swanlab_url"), url)
        self.swanlab_id = swanlab_run_id(url) or self.swanlab_id
        self._write()

    def _notify(
        self,
        event: str,
        verdict: Optional[Dict[str, Any]] = None,
        reason: str = "",
        suggestions: Optional[List[str]] = None,
    ) -> None:
        """Post ``event`` (escalation|failure|hang|success) via ``notify.send_event`` in a daemon thread
        (payload: :func:`record.notify_payload`); whether it is due is ``notify.should_notify``'s call (spec
        ``notify``). Never fatal: each failed send is a supervisor.log line and, at the next write, an entry of
        run.json ``notify_failures`` (:func:`record.note_notify_failures`; the webhook kind and error, never its
        URL), which ``inv status`` shows."""
        cfg = self.spec.notify
        if not cfg.get("webhooks"):
            return
        payload = record.notify_payload(self.spec, self.rec, event, verdict, reason, suggestions)

        def send() -> None:
            try:
                failures = notify.post_event(dict(cfg), self.secret_env, payload) or []
            except Exception as e:  # noqa: BLE001 - a notifier problem must never crash the run
                err = redact.scrub(str(e).splitlines()[0] if str(e) else type(e).__name__, self.secret_env.values())
                failures = [{"kind": "notifier", "error": err, "line": "notifier error: %s" % err}]
            for f in failures:
                log("notification %s: %s" % (event, f["line"]))
            if failures:
                with self._notify_lock:
                    self._notify_failed.append((event, failures, now()))
                self.writer.dirty = True  # the follow loop writes it; after the run's end, run()'s finally does

        t = threading.Thread(target=send, name="notify-" + event, daemon=True)
        t.start()
        self._notify_threads.append(t)

    # -- one attempt ---------------------------------------------------------

    def _run_attempt(self, k: int, fs: features.FeatureSet, changes: Dict[str, Any]) -> Dict[str, Any]:
        """Start attempt ``k`` and follow it to its end. Returns the outcome dict: ``exit_code`` (shell
        convention, 128+signal), ``killed_by`` (None|"oom"|"hang"|"stop"), ``oom_line``, ``att`` (its run.json
        entry), ``container_state`` (a kernel OOM kill). :raises attempt.BuildError, _Stop:"""
        alog = self.paths.attempt_log(k)
        ckpt_dir = self._ckpt_dir()
        if self.roll_back_before is not None:  # after a diverged verdict: never resume at or after the bad step
            roll_back(ckpt_dir, self.roll_back_before)
            self.roll_back_before = None
        resume_step = latest_checkpoint(ckpt_dir)
        self.health.rewind(resume_step)
        if k > 1 and self.rec.get("step") is not None:
            # the run's progress is what this attempt trains from (verl resumes at the latest checkpoint, or from
            # scratch): not the step an earlier attempt reached and lost (`inv status` showed "1/6, ETA 41s" for a
            # retry starting from scratch on the H200, tests/fixtures/real-verl/tool-runs/l-diverge)
            self.rec["step"] = resume_step or 0
        prune_checkpoints(ckpt_dir, self._settings().get("max_actor_ckpt_to_keep"), resume_step)  # verl's own rotation
        att = record.new_attempt(k, fs, changes, resume_step, alog.name)  # restarts empty at every attempt
        note_data_order(att, ckpt_dir, resume_step)  # a checkpoint without verl's dataloader state: said, not hidden
        argv = attempt.build_argv(self.command_factory, attempt.attempt_spec(self.spec, k), fs, changes)
        counters = self.spec.supervisor.get("oom_counter_files") or accelerator.OOM_COUNTER_FILES
        oom0 = accelerator.oom_kill_count(tuple(counters))
        gpu = self.spec.get("accelerator") == "gpu"
        if gpu and k == 1:
            att["device_mem_before_mib"] = (
                accelerator.device_memory_used_mib()
            )  # the baseline the retry waits return to
        self.rec["attempts"].append(att)
        self.rec["attempt"] = k
        self.rec["features"] = fs.to_json()
        if self.train_log is not None:
            self.train_log.start(k, sorted(fs.names()))
        alog.touch(mode=0o644)  # the log run.json names exists from here on
        if self.stop_requested:
            raise _Stop()
        log("attempt %d: %s" % (k, " ".join(self._redact_argv(argv))))
        env = self._child_env(k)
        rtd = env.get("RAY_TMPDIR") if attempt.ray_tmpdir(self.spec, k, env) else None
        self.cmd_marker = (rtd + "/").encode() if rtd else None  # a path component: never <rtd>0 / <rtd>-x
        att["ray_tmpdir"] = rtd
        try:
            self.proc = attempt.spawn(argv, alog, env, self.spec.workdir)
        except OSError as e:
            self._tee((attempt.start_error(argv, e) + "\n").encode())
            return {"exit_code": 127, "killed_by": None, "oom_line": None, "att": att, "container_state": None}
        self.pgid = self.proc.pid
        att["pid"] = self.proc.pid
        self.rec["pids"]["verl_pgid"] = self.pgid
        self.rec["last_progress_at"] = att["started_at"]
        self._set_status(runstate.RunStatus.RUNNING)

        self.links = follow.LinkFinder(dict(self.spec.env))  # each attempt prints its own banner
        scanner = follow.Scanner(
            self.rec,
            att,
            self.writer,
            self.links,
            self._on_link,
            classify.is_device_oom_line,
            self.tun,
            self.hang_timeout_s,
            learned_timing=self.memos.timing() if self.memos is not None else None,
            settings=self._clock_settings(),
            counters=stall.CounterWatch(
                lambda: accelerator.device_load(str(self.spec.get("accelerator") or defaults.HOST["accelerator"])),
                self._attempt_cpu_s,
                self.tun["counter_window_s"],
                self.tun["counter_sample_s"],
            ),
            watch=self.health,
        )
        follower = follow.Follower(str(alog), self._tee, scanner.scan)
        killed_by = follow.follow(
            self.proc,
            follower,
            scanner,
            self.rec,
            att,
            stop=self._stop_reason,
            oom_grace_s=self.tun["oom_grace_s"],
            oom_report_wait_s=self.tun["oom_report_wait_s"],
            hang_timeout_s=self.hang_timeout_s,
            poll_s=self.tun["poll_interval_s"],
            writer=self.writer,
            tick=self._learn,
        )
        idle_s = scanner.idle_s or now() - max(self.rec.get("last_progress_at") or att["started_at"], att["started_at"])
        stacks = None
        if killed_by in ("stall", "hang"):  # where each process stood, before anything is stopped
            stacks = self._dump_stacks(k, att)
        ev = None
        if killed_by not in ("stop", "disk-full") and (killed_by is not None or self.proc.returncode):
            # multi-host: every live node's Ray worker logs and plog errors, while the cluster is still up
            ev = hostevidence.collect(self.spec, self.run_dir, att["started_at"], self.tun["evidence_s"])
        if killed_by is not None:
            log("stopping attempt %d (%s), process group %d" % (k, killed_by, self.pgid))
        self.att_pids = attempt.teardown(self.proc, self.marker, self.cmd_marker, self.tun["kill_grace_s"], att, gpu)
        follower.finish()
        self._learn()  # the last lines may hold the step that got past the OOM
        if self.memos is not None and self.memos.file_timing(scanner.clock.to_json()):
            log("step timings of attempt %d filed (stall timer of the next run of this configuration)" % k)
        code = attempt.exit_code(self.proc.returncode)
        container_state = attempt.kernel_oom(oom0, code, att) if killed_by is None else None
        return {
            "exit_code": code,
            "killed_by": killed_by,
            "oom_line": scanner.oom_line,
            "att": att,
            "container_state": container_state,
            "storm": scanner.storm,
            "stacks": stacks,
            "idle_s": idle_s,
            "step_s": list(scanner.step_s),
            "stall_after_s": scanner.stall_after_s,
            "stall_by": scanner.stall_by,
            "stall_basis": scanner.stall_basis,
            "counters": list(scanner.counters.evidence) if scanner.counters is not None else [],
            "evidence": ev,
            "bad": scanner.bad,
        }

    def _log_verdict(self, k: int, out: Dict[str, Any]) -> Dict[str, Any]:
        """The classifier's verdict on attempt ``k``'s log (``out``: :meth:`_run_attempt`'s outcome), against the
        planned total (verl's ``Total training steps`` line, else the spec's ``steps``)."""
        planned = self.rec.get("total_steps") or self.spec.settings.get("steps")
        return escalate.attempt_verdict(str(self.paths.attempt_log(k)), out, planned)

    def _clock_settings(self) -> Dict[str, Any]:
        """``save_freq`` / ``test_freq`` the run's verl uses (the settings, else the value the last ``--override`` of
        ``trainer.save_freq`` / ``trainer.test_freq`` gives it; a ``~key`` deletion gives none,
        :func:`dapo_ops.core.hydra_override.value_of`): which steps save or validate (:class:`.stall.StepClock`)."""
        s = self._settings()
        out = {"save_freq": s.get("save_freq"), "test_freq": s.get("test_freq")}
        for name in ("save_freq", "test_freq"):
            val = hydra_override.value_of(s.get("extra_overrides") or [], "trainer." + name)
            try:
                out[name] = int(val) if val is not None else out[name]
            except ValueError:
                pass
        return out

    def _attempt_cpu_s(self) -> Optional[float]:
        """CPU seconds the current attempt's processes have used together (None when none is readable)."""
        vals = [procs.cpu_seconds(p) for p in procs.own_processes(self.pgid, self.marker, self.cmd_marker)]
        got = [v for v in vals if v is not None]
        return sum(got) if got else None

    def _restarts_without_checkpoint(self, ckpt: Optional[int]) -> int:
        """Restarts (attempts after the run's first) in a row, the last attempt included, that started from checkpoint
        ``ckpt`` (the newest now): none of them brought a new checkpoint."""
        n = 0
        for a in reversed(self.rec.get("attempts") or []):
            if a.get("resumed_from") != ckpt:
                break
            n += 1 if int(a.get("n") or 1) > 1 else 0
        return n

    def _on_diverged(self, bad: health.Flag) -> None:
        """A ``diverged`` verdict: the run's first bad step is kept (run.json ``health.first_bad``, the recurrence
        test of the next one); verl's tracker is pointed at the last checkpoint before ``bad.step`` now, whether a
        retry follows or not (a run that ends before its retry - an ``inv stop`` while it waits, a lost node - must
        not leave the bad checkpoint for ``inv launch --resume``): run.json ``health.bad_step`` / ``healthy_step``."""
        if self.first_bad is None:
            self.first_bad = bad.to_json()
        h = self.rec.setdefault("health", {})
        h["first_bad"] = dict(self.first_bad)
        h["bad_step"] = bad.step
        h["healthy_step"] = roll_back(self._ckpt_dir(), bad.step)
        self.writer.dirty = True

    def _dump_stacks(self, k: int, att: Dict[str, Any]) -> List[Dict[str, Any]]:
        """``py-spy dump`` of the driver and the attempt's own processes into ``stacks-attempt-<k>.txt``."""
        path = str(Path(self.run_dir) / ("stacks-attempt-%d.txt" % k))
        pids = procs.own_processes(self.pgid, self.marker, self.cmd_marker)
        stacks = stall.dump_stacks(
            pids,
            self.proc.pid if self.proc else None,
            path,
            self.spec.python,
            user_files=stall.user_files(self._settings().get("extra_overrides") or []),
        )
        att["stacks"] = Path(path).name
        log("stack dumps of %d process(es) of attempt %d: %s" % (len(stacks), k, path))
        return stacks

    def _learn(self) -> None:
        """File the learned-start memo when the attempt on a rung got past the phase that ran out (:mod:`.learn`)."""
        if self.memos is not None and self.memos.check(self.rec):
            self.writer.dirty = True

    def _stop_reason(self) -> Union[str, bool]:
        """Why the follow loop must end the attempt now: ``"disk-full"`` (diskspace), True (``inv stop``), False."""
        return "disk-full" if self.disk.check() else self.stop_requested

    def _wait_to_retry(self, k: int, att: Dict[str, Any]) -> None:
        """The delay before attempt ``k + 1``, then whatever of attempt ``k`` is still alive goes."""
        if self.spec.get("accelerator") == "gpu" and not self.stop_requested:
            # GPU: the delay only waits out device-memory release (HCCL needs the full one on NPU)
            base = (self.rec["attempts"][0] or {}).get("device_mem_before_mib")
            accelerator.wait_before_retry(
                att,
                k,
                self.att_pids,
                base,
                self.tun["retry_delay_s"],
                self.tun["release_wait_max_s"],
                lambda: self.stop_requested,
            )
        else:
            self._sleep(self.tun["retry_delay_s"])
        if procs.own_processes(self.pgid, self.marker, self.cmd_marker):
            procs.stop_process_group(None, self.pgid, self.marker, self.tun["kill_grace_s"], self.cmd_marker)

    # -- the end ---------------------------------------------------------------

    def _final(
        self,
        status: runstate.RunStatus,
        verdict: Optional[Dict[str, Any]],
        decision: Dict[str, Any],
        announce: bool = True,
    ) -> int:
        """End the run: record the end (:func:`record.end_run`), end every process of the run still alive (Ray agents
        outlive verl's driver: pgid + DAPO_OPS_RUN_ID only) and a multi-host run's head session, set ``status``,
        notify (``announce``). Returns the exit code."""
        record.end_run(self.rec, status, verdict, decision)
        if status is runstate.RunStatus.SUCCEEDED:
            # verl's rotation list is per process (checkpoint_manager.py:59): the saves of a retried run's earlier
            # attempts outlive max_actor_ckpt_to_keep; a finished run keeps the newest ones, as one process would
            ckpt_dir = self._ckpt_dir()
            keep = self._settings().get("max_actor_ckpt_to_keep")
            prune_checkpoints(ckpt_dir, keep, latest_checkpoint(ckpt_dir, repair=False), at_end=True)
        left = procs.own_processes(self.pgid, self.marker)
        if left:
            log("ending %d leftover process(es) of the run" % len(left))
            procs.stop_process_group(None, self.pgid, self.marker, self.tun["kill_grace_s"])
        self.rec["pids"]["verl_pgid"] = None
        escalate.teardown_cluster(self.spec, self.tun["kill_grace_s"])
        self.disk.release()  # verl is gone: the reserved space takes the final run.json
        self._set_status(status)
        log("run %s: %s" % (status, decision["summary"]))
        if announce and status is runstate.RunStatus.SUCCEEDED:
            self._notify("success", verdict, decision["summary"])
        elif announce and status is runstate.RunStatus.FAILED:
            self._notify("failure", verdict, decision["ended"], suggestions=decision.get("suggestions"))
        return 0 if status in (runstate.RunStatus.SUCCEEDED, runstate.RunStatus.STOPPED) else 1

    def _stopped(self, verdict: Optional[Dict[str, Any]] = None) -> int:
        return self._final(runstate.RunStatus.STOPPED, verdict, {"action": "stop", "reason": OPERATOR})

    def _failed(self, verdict: Dict[str, Any]) -> int:
        """A final failure the ladder was not asked about (its action is the reason; no suggestions)."""
        return self._final(
            runstate.RunStatus.FAILED, verdict, {"action": "stop", "reason": verdict["action"], "suggestions": []}
        )

    # -- main ------------------------------------------------------------------

    def _on_signal(self, signum: int, _frame: Optional[FrameType]) -> None:
        log("signal %d: stopping" % signum)
        self.stop_requested = True

    def _sleep(self, seconds: float) -> None:
        end = now() + seconds
        while now() < end and not self.stop_requested:
            time.sleep(min(0.1, max(0.0, end - now())))

    def run(self) -> int:
        """Supervise the run to its end. Returns 0 (succeeded / stopped), 1 (failed) or 2 (unreadable spec)."""
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        try:
            self._load()
        except Exception as e:  # noqa: BLE001
            log("cannot read the run spec: %s" % e)
            return 2
        self.rec = runstate.new_record(self.spec, os.getpid())
        if self.spec.ray:  # multi-host run: what `inv status` shows
            self.rec["cluster"] = record.cluster_summary(dict(self.spec.ray))
        try:
            runfiles.acquire_lock(self._runs_dir(), str(self.spec.run_id), os.getpid(), self.run_dir)
            self.lock_taken = True
            self.disk.reserve()
        except runfiles.LockHeld as e:
            self.rec["ended_at"] = now()
            self.rec["verdict"] = escalate.lock_held_verdict(e)
            self.rec["status"] = runstate.RunStatus.FAILED.value
            self._write()
            log(str(e))
            return 1
        self._write()
        try:
            return self._supervise()
        except Exception as e:  # noqa: BLE001 - record, clean up, never leave verl orphaned silently
            log("supervisor error: %s\n%s" % (e, traceback.format_exc()))
            try:
                procs.stop_process_group(self.proc, self.pgid, self.marker, self.tun["kill_grace_s"], self.cmd_marker)
            except Exception:  # noqa: BLE001
                pass
            if self.disk.note(getattr(e, "filename", None), e):  # a write the supervisor did not expect to fail
                return self._failed(self.disk.verdict(self.rec.get("step"), self.rec.get("total_steps")))
            return self._failed(escalate.crash_verdict(e, self.paths.supervisor_log))
        finally:
            self.disk.release()
            if self.train_log is not None:
                self.train_log.close()
            if self.lock_taken:
                runfiles.release_lock(self._runs_dir(), str(self.spec.run_id))
            for t in self._notify_threads:
                t.join(timeout=20)
            if self._notify_failed:  # a send of the run's end (success/failure) failed after the last write
                self._write()

    def _supervise(self) -> int:
        fs = features.FeatureSet.from_json(list(self.spec.features), self.spec.disabled_features)
        changes: Dict[str, Any] = dict(self.spec.setting_changes)  # memfit's start rung (source estimate)
        self.rec["setting_changes"] = dict(changes)
        self.train_log = follow.TrainLog(
            str(self.paths.train_log),
            {"rate_bytes_s": self.tun["log_rate_bytes_s"], "burst_bytes": self.tun["log_burst_bytes"]},
            self._on_cap,
            on_error=self.disk.note,
        )
        follow.link_workdir_log(self.spec.workdir, self.paths.train_log)
        k = 0
        while True:
            k += 1
            try:
                out = self._run_attempt(k, fs, changes)
            except _Stop:
                return self._stopped()
            except attempt.BuildError as e:
                return self._failed(escalate.build_error_verdict(k, e, changes))
            att = out["att"]
            att["exit_code"] = out["exit_code"]
            att["killed_by"] = out["killed_by"]
            att["ended_at"] = now()
            att.pop("_had_step", None)
            if out["killed_by"] == "stop":
                self.train_log.end(k, out["exit_code"], "stopped")
                return self._stopped()
            if out["killed_by"] == "storm":
                verdict = storm.storm_verdict(out["storm"], self.rec.get("step"), self.rec.get("total_steps"))
            elif out["killed_by"] == "diverged":
                verdict = escalate.diverged_verdict(
                    out["bad"], self.first_bad, self.rec.get("step"), self.rec.get("total_steps"), self._ckpt_dir()
                )
            elif out["killed_by"] in ("stall", "hang"):  # both dumped their stacks (_run_attempt)
                hang = out["killed_by"] == "hang"
                verdict = escalate.stall_verdict(
                    out["idle_s"],
                    self.hang_timeout_s if hang else out["stall_after_s"],
                    out["step_s"],
                    self.rec.get("step"),
                    self.rec.get("total_steps"),
                    out["stacks"] or [],
                    str(Path(self.run_dir) / att.get("stacks", "")),
                    "hang" if hang else out.get("stall_by"),
                    out.get("counters") if out.get("stall_by") == "counters" else None,
                    basis=None if hang else out.get("stall_basis"),
                    log_verdict=self._log_verdict(k, out),
                )
                escalate.mark_repeat(
                    verdict,
                    self.rec["attempts"][:-1],
                    self._restarts_without_checkpoint(latest_checkpoint(self._ckpt_dir())),
                )
            elif out["killed_by"] == "disk-full" or (
                out["killed_by"] is None and out["exit_code"] != 0 and self.disk.check(force=True)
            ):  # verl died of it first
                self.disk.release()  # verl is gone: room for the end line and the final run.json
                verdict = self.disk.verdict(self.rec.get("step"), self.rec.get("total_steps"))
            else:  # the classifier's: verl ended, a device-OOM line, a fatal error repeating ("fatal")
                verdict = self._log_verdict(k, out)
            bad = escalate.flag_of(verdict) if out["killed_by"] is None else out["bad"]
            if bad is not None and out["killed_by"] is None:  # verl ended by itself after its metrics went bad
                verdict = escalate.diverged_verdict(
                    bad, self.first_bad, self.rec.get("step"), self.rec.get("total_steps"), self._ckpt_dir()
                )
            hostevidence.apply(verdict, out.get("evidence"))
            att["verdict"] = verdict
            self.rec["verdict"] = verdict
            cls = verdict.get("cls")
            self.train_log.end(k, out["exit_code"], cls)
            if cls == "hang":
                self._notify("hang", verdict, verdict["action"])
            escalate.note_retried_from(verdict, att)
            d = self.ladder.decide(fs, verdict, self._settings())
            dj = escalate.decision_json(d)
            where = ((verdict.get("detail") or {}).get("evidence") or {}).get("line")
            if where:  # multi-host: the host and rank of the earliest error (hostevidence)
                dj["evidence"] = where
            self.rec["decision"] = dj
            log("attempt %d: class=%s exit=%s -> %s (%s)" % (k, cls, out["exit_code"], d.action, d.reason))
            if cls == "diverged" and bad is not None:
                self._on_diverged(bad)
            if d.action == "retry":
                self.ladder.count(d)
                fs = d.features
                changes.update(d.setting_changes or {})
                self.rec["setting_changes"] = dict(changes)
                self.rec["features"] = fs.to_json()
                self._set_status(runstate.RunStatus.RETRYING)
                self._notify("escalation", verdict, "%s; %s" % (d.reason, where) if where else d.reason)
                self._wait_to_retry(k, att)
                if self.stop_requested:
                    return self._stopped(verdict)
                lost = escalate.cluster_lost(self.spec)
                if lost is not None:  # never retry on fewer nodes: the checkpoint is tied to the world size
                    hostevidence.apply(lost, (verdict.get("detail") or {}).get("evidence"))
                    self.rec["verdict"] = lost
                    return self._failed(lost)
                continue
            if d.action == "done" or (d.action == "keep-running" and out["exit_code"] == 0):
                return self._final(runstate.RunStatus.SUCCEEDED, verdict, dj)
            if cls in escalate.LOST_NODE_CLASSES:  # multi-host: a lost node is the likelier cause; say which one
                lost = escalate.cluster_lost(self.spec)
                if lost is not None:
                    lost["detail"]["attempt_verdict"] = {key: verdict.get(key) for key in ("cls", "action", "evidence")}
                    hostevidence.apply(lost, (verdict.get("detail") or {}).get("evidence"))
                    att["verdict"] = self.rec["verdict"] = lost
                    return self._failed(lost)
            if cls == "hang":  # already notified as a hang
                return self._final(runstate.RunStatus.FAILED, verdict, dj, announce=False)
            return self._final(runstate.RunStatus.FAILED, verdict, dj)


def _load_factory(spec: str) -> Callable[..., List[str]]:
    mod, _, attr = spec.partition(":")
    factory: Callable[..., List[str]] = getattr(importlib.import_module(mod), attr or "build_command")
    return factory


def main(argv: Optional[List[str]] = None) -> int:
    """``python3 -m dapo_ops.agent.supervisor RUN_DIR [--command-factory module:function]``.

    ``--command-factory`` replaces ``overrides.build_command`` (same signature); for tests and benches
    with a fake verl only.
    """
    p = argparse.ArgumentParser(prog="python3 -m dapo_ops.agent.supervisor", description=DESCRIPTION)
    p.add_argument("run_dir")
    p.add_argument("--command-factory", default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    try:  # own session: survives the docker exec / SSH session that started it
        os.setsid()
    except OSError:
        pass  # already a session leader
    factory = _load_factory(a.command_factory) if a.command_factory else None
    return Supervisor(a.run_dir, factory).run()
