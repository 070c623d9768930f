"""Host and container checks from the facts of :func:`dapo_ops.control.preflight.gather.collect`: ``ssh``,
``docker``, ``container`` / ``host`` (bare host), ``workdir``, and the devices inside the container (``devices``,
``visible``, ``leftover``, ``device-mem``; parsed by :mod:`dapo_ops.core.devices`). Pure.
"""

from __future__ import annotations

from dapo_ops.core import defaults
from dapo_ops.core import devices
from dapo_ops.core import runspec
from dapo_ops.control.preflight.plan_view import PlanView
from dapo_ops.control.preflight.result import FAIL, OK, WARN, Check, split_fix


def _container_checks(target_name: str, container: str, facts: dict) -> list[Check]:
    out: list[Check] = []
    ssh = facts["ssh"]
    if not ssh.get("ok"):
        msg, fix = split_fix(ssh.get("message", ""))
        kind = ssh.get("kind")
        if kind == "timeout":
            out.append(Check("ssh", OK, "connected"))
            out.append(
                Check(
                    "probe",
                    FAIL,
                    msg,
                    "the host or its Docker is overloaded or hung: check `docker ps` on it, or raise --timeout",
                )
            )
        elif kind == "docker-missing":
            out.append(Check("ssh", OK, "connected"))
            out.append(Check("docker", FAIL, msg, fix or "install Docker or fix PATH for the SSH user"))
        else:
            out.append(Check("ssh", FAIL, f"{kind}: {msg}", fix or "check the inventory entry and the network"))
        return out
    ins = facts.get("inspect") or {}
    rc, text = ins.get("rc"), ins.get("text", "")
    if facts.get("local"):
        out.append(Check("ssh", OK, "local transport (no SSH)"))
    else:
        out.append(Check("ssh", OK, "connected; host key known"))
    if facts.get("bare") or (rc == 0 and text == "running host"):
        # runtime = "host": no Docker, no container; the probe below checks python/verl/devices on the host
        out.append(Check("host", OK, "runtime host: no container, commands run in the host's own shell"))
        return out
    low = text.lower()
    if rc == 127 or "docker: not found" in low or "command not found" in low:
        out.append(
            Check(
                "docker",
                FAIL,
                f"docker CLI not found on the host ({text})",
                "install Docker or fix PATH for the SSH user",
            )
        )
        return out
    if "cannot connect to the docker daemon" in low or "is the docker daemon running" in low:
        out.append(Check("docker", FAIL, f"Docker daemon not running ({text})", "start it (systemctl start docker)"))
        return out
    if "permission denied" in low:
        out.append(
            Check(
                "docker",
                FAIL,
                f"no permission to use Docker ({text})",
                "add the SSH user to the docker group or use root",
            )
        )
        return out
    out.append(Check("docker", OK, "docker usable"))
    if rc != 0:
        if "no such" in low:
            out.append(
                Check(
                    "container",
                    FAIL,
                    f"container '{container}' does not exist on {target_name}",
                    f"create it: inv container.create -H {target_name} --image IMAGE --name {container} "
                    "(or fix container in hosts.toml)",
                )
            )
        else:
            out.append(
                Check("container", FAIL, f"docker inspect {container} failed: {text}", "check Docker on the host")
            )
        return out
    parts = text.split()
    status = parts[0] if parts else "?"
    code = parts[1] if len(parts) > 1 else "?"
    oom = len(parts) > 2 and parts[2] == "true"
    restarting = len(parts) > 3 and parts[3] == "true"
    if status == "running" and not restarting:
        out.append(Check("container", OK, f"'{container}' running"))
        return out
    if status == "restarting" or restarting:
        out.append(
            Check(
                "container",
                FAIL,
                f"container '{container}' is restarting (last exit code {code}" + (", OOMKilled" if oom else "") + ")",
                f"its PID 1 keeps dying: docker logs {container} on the host, then recreate it",
            )
        )
    elif status == "paused":
        out.append(Check("container", FAIL, f"container '{container}' is paused", f"docker unpause {container}"))
    else:
        extra = f"exit code {code}" + (", OOMKilled: the kernel OOM killer ended it" if oom else "")
        out.append(
            Check(
                "container",
                FAIL,
                f"container '{container}' is {status} ({extra})",
                f"start it (docker start {container}) or recreate it (inv container.create --replace)",
            )
        )
    return out


def _device_checks(host, pv: PlanView | None, p: dict) -> list[Check]:
    out: list[Check] = []
    d = p.get("devices")
    if d is None:
        return out
    acc = getattr(host, "accelerator", defaults.HOST["accelerator"])
    tool = d.get("tool", "npu-smi info")
    if d.get("rc") != 0:
        err = (d.get("stderr") or "").strip().splitlines()
        why = err[-1] if err else f"exit {d.get('rc')}"
        fix = (
            "mount the driver and npu-smi into the container (inv container.create does: /usr/local/Ascend/driver, "
            "/usr/local/dcmi, /usr/local/bin/npu-smi)"
            if acc == "npu"
            else "run the container with --gpus all (NVIDIA container toolkit)"
        )
        out.append(Check("devices", FAIL, f"`{tool}` failed inside the container: {why}", fix))
        return out
    try:
        rep = devices.parse(acc, d.get("stdout", ""))
    except devices.DeviceParseError as e:
        out.append(Check("devices", FAIL, str(e), f"check `{tool}` inside the container by hand"))
        return out
    env = p.get("env") or {}
    var = "ASCEND_RT_VISIBLE_DEVICES" if acc == "npu" else "CUDA_VISIBLE_DEVICES"
    mounted = len(d.get("nodes") or []) if getattr(host, "device_mounts", defaults.HOST["device_mounts"]) else None
    try:
        visible = devices.parse_visible(env.get(var))
    except ValueError as e:
        out.append(Check("visible", FAIL, f"{var}={env.get(var)!r}: {e}", f"use device indices, e.g. {var}=0,1,2,3"))
        visible = None
    else:
        limit = rep.count if mounted is None else min(rep.count, mounted) if mounted else rep.count
        if visible is not None:
            bad = [i for i in visible if i >= limit]
            if bad:
                out.append(
                    Check(
                        "visible",
                        FAIL,
                        f"{var}={env.get(var)} names device(s) {bad} but only {limit} are "
                        "mounted in the container (indices are relative to the mounted devices)",
                        f"use indices 0..{limit - 1} or mount more devices (inv container.create)",
                    )
                )
            else:
                out.append(Check("visible", OK, f"{var}={env.get(var)} ({len(visible)} of {limit})"))
        elif mounted is not None and mounted and mounted < rep.count:
            out.append(
                Check(
                    "visible",
                    WARN,
                    f"{rep.count} devices reported but only {mounted} /dev nodes mounted",
                    "recreate the container with every device (inv container.create --replace)",
                )
            )
    usable = [dv for dv in rep.devices if visible is None or dv.index in visible]
    need = pv.devices_needed if pv is not None else None
    if need is None:
        need = int(getattr(host, "devices", None) or 0) or None  # a host object without a count: no check
    label = "NPU" if acc == "npu" else "GPU"
    if need is not None and len(usable) < need:
        out.append(
            Check(
                "devices",
                FAIL,
                f"{len(usable)} {label}(s) usable inside the container, the plan needs {need}"
                + (" (trainer + rollout pools)" if pv is not None and pv.spec.mode == "one-step-off" else ""),
                "lower trainer_gpus/rollout_gpus (or n_gpus_per_node), or give the container more devices",
            )
        )
    else:
        out.append(Check("devices", OK, f"{len(usable)} {label}(s) usable" + (f", {need} needed" if need else "")))
    needed = usable[:need] if need else usable
    held = [pr for pr in rep.processes if any(pr.device == dv.index for dv in needed)]
    if rep.processes:
        pids = ", ".join(f"{pr.pid} ({pr.name}, {label} {pr.device}, {pr.mem_mb} MB)" for pr in rep.processes)
        out.append(
            Check(
                "leftover",
                FAIL if held else WARN,
                f"processes hold device memory: {pids}",
                "a leftover run? stop it (inv stop, or `ray stop --force` in its container; the PIDs are "
                "host PIDs: kill them on the host) and wait ~10 s before launching",
            )
        )
    else:
        out.append(Check("leftover", OK, "no process holds device memory"))
    # the share attempt 1 runs with: a finished plan's start rungs (learned / estimate ``setting_changes``) win
    util = float(
        runspec.effective_settings(pv.spec, dict(pv.spec.setting_changes))["gpu_memory_utilization"]
        if pv is not None
        else defaults.RUN["gpu_memory_utilization"]
    )
    low = [dv for dv in needed if dv.mem_total_mb and dv.mem_free_mb / dv.mem_total_mb < util]
    if low:
        desc = ", ".join(f"{label} {dv.index}: {dv.mem_free_mb}/{dv.mem_total_mb} MB free" for dv in low)
        out.append(
            Check(
                "device-mem",
                FAIL,
                f"free memory below rollout gpu_memory_utilization={util:g}: {desc}",
                "free the devices (see leftover) or lower gpu_memory_utilization",
            )
        )
    elif needed:
        worst = min(needed, key=lambda dv: dv.mem_free_mb)
        out.append(
            Check("device-mem", OK, f"lowest free: {label} {worst.index} {worst.mem_free_mb}/{worst.mem_total_mb} MB")
        )
    return out
