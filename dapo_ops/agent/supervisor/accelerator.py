"""The accelerator as the supervisor sees it from inside the container (STDLIB ONLY, shipped).

* NVIDIA: ``nvidia-smi --query-compute-apps=pid`` (who holds device memory) and ``--query-gpu=memory.used``
  (MiB per GPU); :func:`wait_gpu_release` is the GPU retry delay (it ends once the stopped attempt's memory is
  free again). Every query answers None when nvidia-smi is missing, fails or hangs (callers fall back).
* How busy the devices are (:func:`device_load`: busy % and used MiB per device, nvidia-smi or npu-smi): the
  counter stall watch (:class:`.stall.CounterWatch`) reads it.
* The kernel / cgroup OOM-kill counter (:func:`oom_kill_count`): a SIGKILLed verl plus a grown counter is a
  host OOM (class ``oom-host``, docs/design.md "Failure classes"), which ``docker inspect`` cannot tell from inside the container.

Units: MiB for device memory, seconds for waits.
"""

from __future__ import annotations

import subprocess
import time
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from dapo_ops.agent.supervisor.record import log, now
from dapo_ops.core import devices


def _smi(*query: str, timeout_s: float = 10.0) -> Optional[List[str]]:
    """The whitespace-separated fields ``nvidia-smi <query...>`` prints, or None when nvidia-smi is missing,
    fails or hangs past ``timeout_s`` s."""
    try:
        r = subprocess.run(
            ["nvidia-smi", *query],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            timeout=timeout_s,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout.decode().split() if r.returncode == 0 else None


def gpu_compute_pids(timeout_s: float = 10.0) -> Optional[List[int]]:
    """PIDs holding GPU memory (``nvidia-smi --query-compute-apps=pid --format=csv,noheader``), or None when
    nvidia-smi is missing or fails."""
    out = _smi("--query-compute-apps=pid", "--format=csv,noheader", timeout_s=timeout_s)
    return None if out is None else [int(x) for x in out if x.strip().isdigit()]


def wait_gpu_release(
    pids: List[int],
    max_s: float,
    every_s: float = 0.2,
    stop: Callable[[], bool] = lambda: False,
    baseline_mib: Optional[List[int]] = None,
    slack_mib: int = 1024,
    mem_max_s: float = 60.0,
) -> float:
    """Wait until the stopped attempt's device memory is free again. Returns the seconds waited.

    Two conditions, both read from nvidia-smi: no PID of ``pids`` (the attempt's processes) is listed by
    ``--query-compute-apps`` (at most ``max_s`` s), and, when ``baseline_mib`` (per-GPU MiB used before the run's
    first attempt) is given, every GPU's ``memory.used`` is back within ``slack_mib`` MiB of it (at most
    ``mem_max_s`` s in all). The second condition exists because of a real run (tests/fixtures/real-verl/tool-runs,
    scenario d): the PID wait ended after 0.97 s while 136201 MiB were still in use; the driver frees a dead
    process's memory a while after the process leaves the list. Without nvidia-smi the full ``max_s`` (the old
    fixed delay). Ends early when ``stop()`` is true (a SIGTERM to the supervisor)."""
    t0 = now()
    own = set(pids)
    smi = True
    pids_gone = False
    while not stop():
        waited = now() - t0
        if smi and not pids_gone:
            apps = gpu_compute_pids()
            if apps is None:
                smi = False  # no nvidia-smi: the fixed delay
            elif not own.intersection(apps) or waited >= max_s:
                pids_gone = True  # (still listed after max_s: judge by the memory alone)
        if not smi:
            if waited >= max_s:
                break
        elif pids_gone:
            if not baseline_mib:
                break
            used = device_memory_used_mib()
            if used is None or (
                len(used) == len(baseline_mib) and all(u <= b + slack_mib for u, b in zip(used, baseline_mib))
            ):
                break
            if waited >= mem_max_s:
                break
        time.sleep(every_s)
    return now() - t0


def wait_before_retry(
    att: Dict[str, Any],
    k: int,
    pids: List[int],
    baseline_mib: Optional[List[int]],
    delay_s: float,
    max_s: float,
    stop: Callable[[], bool],
) -> None:
    """The GPU retry delay after attempt ``k`` (entry ``att``): :func:`wait_gpu_release` for ``pids`` (the attempt's
    processes when its teardown began), at most ``delay_s`` s for the PIDs and ``max_s`` s in all for the memory to
    come back to ``baseline_mib`` (attempt 1's); records ``release_wait_s`` and ``device_mem_at_retry_mib``."""
    att["release_wait_s"] = round(
        wait_gpu_release(pids, delay_s, stop=stop, baseline_mib=baseline_mib, mem_max_s=max_s), 3
    )
    after = device_memory_used_mib()
    if after is not None:
        att["device_mem_at_retry_mib"] = after
        log("device memory used before attempt %d (MiB): %s (before attempt 1: %s)" % (k + 1, after, baseline_mib))


def device_memory_used_mib(timeout_s: float = 10.0) -> Optional[List[int]]:
    """Per-GPU used memory (MiB) from ``nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits``, or
    None when nvidia-smi is missing or fails (recorded after an attempt's teardown: what the next one finds)."""
    out = _smi("--query-gpu=memory.used", "--format=csv,noheader,nounits", timeout_s=timeout_s)
    try:
        return None if out is None else [int(float(x)) for x in out if x.strip()]
    except ValueError:
        return None


def device_load(accelerator: str = "gpu", timeout_s: float = 10.0) -> Optional[List[Tuple[int, int]]]:
    """``[(busy %, used MiB)]`` per device, or None when the tool is missing, fails or prints no busy figure.
    NVIDIA: ``nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader,nounits``; Ascend:
    ``npu-smi info``'s ``AICore(%)`` and HBM usage (:func:`dapo_ops.core.devices.parse_npu_smi`)."""
    if accelerator == "npu":
        try:
            r = subprocess.run(
                ["npu-smi", "info"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                timeout=timeout_s,
                check=False,
            )
            rep = devices.parse_npu_smi(r.stdout.decode("utf-8", "replace")) if r.returncode == 0 else None
        except (OSError, subprocess.TimeoutExpired, devices.DeviceParseError):
            return None
        if rep is None or not rep.devices or any(d.util_pct is None for d in rep.devices):
            return None
        return [(int(d.util_pct or 0), int(d.mem_used_mb)) for d in rep.devices]
    out = _smi("--query-gpu=utilization.gpu,memory.used", "--format=csv,noheader,nounits", timeout_s=timeout_s)
    if not out:
        return None
    vals = [x.strip(",") for x in out if x.strip(",")]
    try:
        nums = [int(float(x)) for x in vals]
    except ValueError:  # "[N/A]" on a device that reports no utilisation
        return None
    return [(nums[i], nums[i + 1]) for i in range(0, len(nums) - 1, 2)]


# Where the OOM-kill counter of this container is visible from inside it: cgroup v2, cgroup v1, then the
# kernel's global counter (``/proc/vmstat`` ``oom_kill``, Linux >= 4.13; not namespaced).
OOM_COUNTER_FILES = ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control", "/proc/vmstat")


def oom_kill_count(files: Iterable[str] = OOM_COUNTER_FILES) -> Optional[Tuple[str, int]]:
    """``(file, count)`` of the first readable ``oom_kill <N>`` counter in ``files``, or None.

    The supervisor compares it before and after an attempt: a SIGKILLed verl (exit 137) plus a grown
    counter is the kernel / cgroup OOM killer (``oom-host``), which ``docker inspect`` cannot tell from
    inside the container; a bare 137 is not (docs/design.md "Failure classes").
    """
    for path in files:
        try:
            with open(path, "r") as fh:
                for line in fh:
                    parts = line.split()
                    if len(parts) == 2 and parts[0] == "oom_kill":
                        return path, int(parts[1])
        except (OSError, ValueError):
            continue
    return None


#: the cgroup v2 memory events of this container (``oom``, ``oom_kill``, ``max``: counts since it started)
MEMORY_EVENTS = "/sys/fs/cgroup/memory.events"
_DMESG_RX = ("killed process", "out of memory", "oom-kill", "oom_reaper")


def kill_evidence(
    att: Dict[str, Any], dmesg: Tuple[str, ...] = ("dmesg",), events_file: str = MEMORY_EVENTS, timeout_s: float = 5.0
) -> List[str]:
    """What the host says about who killed attempt ``att`` (verl ended by a signal the supervisor did not send),
    one line each: the OOM-kill counter before/after (``att["oom_counter"]``, :func:`oom_kill_count`), the
    cgroup's ``memory.events``, and the kernel log's OOM-killer lines naming the attempt's pid (``dmesg``; most
    containers may not read it: then the line says to run it on the host). Never raises."""
    out: List[str] = []
    c = att.get("oom_counter")
    if c and c.get("after") is not None:
        grew = int(c["after"]) - int(c["before"])
        out.append(
            "%s oom_kill %s -> %s during the attempt: %s"
            % (c["file"], c["before"], c["after"], "the OOM killer fired" if grew > 0 else "not the kernel OOM killer")
        )
    else:
        out.append("no OOM-kill counter readable in the container (%s)" % ", ".join(OOM_COUNTER_FILES))
    try:
        with open(events_file, "r") as fh:
            out.append("%s: %s" % (events_file, " ".join(ln.strip() for ln in fh if ln.strip())))
    except OSError:
        pass
    try:
        r = subprocess.run(
            list(dmesg),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            timeout=timeout_s,
            check=False,
        )
        ok, text = r.returncode == 0, r.stdout.decode("utf-8", "replace")
        err = (r.stderr.decode("utf-8", "replace").strip().splitlines() or ["exit %d" % r.returncode])[-1]
    except (OSError, subprocess.TimeoutExpired) as e:
        ok, text, err = False, "", str(e)
    if ok:
        pid = att.get("pid")
        hits = [ln.strip() for ln in text.splitlines() if any(w in ln.lower() for w in _DMESG_RX)]
        mine = [ln for ln in hits if pid and ("process %s " % pid) in ln.lower()]
        out.extend(("dmesg: " + ln)[:300] for ln in (mine or hits)[-3:])
        if not hits:
            out.append("dmesg: no OOM-killer line")
    else:
        out.append(
            "dmesg not readable in the container (%s): run `dmesg -T | grep -i 'killed process'` on the "
            "host" % err[:120]
        )
    return out
