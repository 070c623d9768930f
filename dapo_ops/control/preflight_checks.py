"""Preflight checks: what would kill a run before its first step, per host, as ``ok | warn | fail`` + one fix.

Cost model: ONE SSH round trip per host. :func:`collect` sends a host shell command that ``docker inspect``s the
container and, when it runs, ``docker exec``s the :mod:`dapo_ops.agent.preflight_probe` (devices, verl, model, data,
disk, network and optionally the Hydra compose check, all in one process). :func:`evaluate` is pure: facts in,
:class:`Check` list out; the tests feed it both sandbox facts and hand-made ones.

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
``device-mem`` free memory per needed device vs rollout ``gpu_memory_utilization``
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

:func:`quick` is the cheap subset ``inv launch`` runs automatically (no compose, no network probes).
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass
from typing import Any

from dapo_ops.core import devices as devmod
from dapo_ops.agent import preflight_probe
from dapo_ops.control.remote import INSPECT_FORMAT, RemoteError, Target, q

OK, WARN, FAIL = "ok", "warn", "fail"
STATUSES = (OK, WARN, FAIL)

#: names of the checks :func:`quick` may return (the rest are only in :func:`run_all`)
QUICK_CHECKS = ("ssh", "docker", "container", "host", "devices", "visible", "leftover", "device-mem", "python", "verl",
                "entry", "transfer_queue", "megatron.bridge", "cann", "model", "data", "disk", "memory-fit")

#: checkpoint bytes per byte of bf16 weights for one FSDP save: fp32 model shards (2x) + Adam m, v (4x) + the
#: HF copy (1x). verl saves ``model_world_size_*`` / ``optim_world_size_*`` / ``huggingface/`` per step (verl.md §10).
CKPT_FACTOR = 7.0
MIN_PYTHON = (3, 10)
GIB = 1 << 30
INSPECT_MARK = "@@DAPO-INSPECT "
SWANLAB_CLOUD_API = "https://api.swanlab.cn"


@dataclass
class Check:
    """One preflight verdict. ``status``: ``ok`` | ``warn`` | ``fail``; ``message``: one line of what was found;
    ``fix``: one line of what to do (empty when ok)."""

    name: str
    status: str
    message: str
    fix: str = ""

    def __post_init__(self):
        assert self.status in STATUSES, self.status
        self.message = " ".join(str(self.message).split())
        self.fix = " ".join(str(self.fix).split())

    def to_json(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        """One line: ``<name> <status>: <message>; fix: <fix>``."""
        return f"{self.name} {self.status}: {self.message}" + (f"; fix: {self.fix}" if self.fix else "")


# ------------------------------------------------------------------------------------------ plan access

@dataclass
class PlanView:
    """What preflight reads from a plan (``planning.make_plan`` result, a spec dict, or None).

    ``spec``: the run spec (docs/design.md "Run spec"); ``argv``: the verl argv (``[python, -m, module, ...]``).
    """

    spec: dict
    argv: list

    @property
    def settings(self) -> dict:
        return self.spec.get("settings") or {}

    def s(self, key: str, default=None):
        v = self.settings.get(key)
        return default if v is None else v

    @property
    def entry_module(self) -> str | None:
        if "-m" in self.argv:
            i = self.argv.index("-m")
            if i + 1 < len(self.argv):
                return self.argv[i + 1]
        return None

    @property
    def devices_needed(self) -> int | None:
        """Devices this host must offer: trainer + rollout pools on one node for one-step-off, else
        ``n_gpus_per_node`` (verl.md §6: the pools add up)."""
        nnodes = int(self.s("nnodes", 1) or 1)
        if self.spec.get("mode") == "one-step-off":
            t, r = self.s("trainer_gpus"), self.s("rollout_gpus")
            if t is not None and r is not None and self.s("rollout_nnodes"):
                return max(int(t), int(r))  # multi-host (cluster.Topology): each host carries one pool
            if t is not None and r is not None and nnodes <= 1:
                return int(t) + int(r)
        n = self.s("n_gpus_per_node")
        return int(n) if n is not None else None

    @property
    def logger(self) -> list:
        lg = self.spec.get("logger") or []
        return list(lg) if isinstance(lg, (list, tuple)) else [lg]

    @property
    def env(self) -> dict:
        return dict(self.spec.get("env") or {})

    @property
    def data_files(self) -> list[str]:
        out = []
        for k in ("train_file", "val_file"):
            v = self.s(k)
            if isinstance(v, (list, tuple)):
                out += [str(x) for x in v]
            elif v:
                out.append(str(v))
        return list(dict.fromkeys(out))


def plan_view(plan: Any) -> PlanView | None:
    """Accept a plan object (attributes ``spec`` and ``argv``), a dict ``{"spec", "argv"}``, a bare spec dict, or
    None."""
    if plan is None:
        return None
    if isinstance(plan, PlanView):
        return plan
    if isinstance(plan, dict):
        if "spec" in plan:
            return PlanView(dict(plan["spec"]), list(plan.get("argv") or []))
        return PlanView(dict(plan), [])
    spec = getattr(plan, "spec", None)
    argv = getattr(plan, "argv", None) or []
    if spec is None:
        raise TypeError(f"preflight cannot read a plan of type {type(plan).__name__}: it needs .spec and .argv")
    return PlanView(dict(spec), list(argv))


# ------------------------------------------------------------------------------------------ collecting

def probe_request(host, pv: PlanView | None, *, full: bool, ray: dict | None = None,
                  compose_request: dict | None = None) -> dict:
    """The probe request (:mod:`dapo_ops.agent.preflight_probe`) for ``host`` and the plan. Pure."""
    req: dict = {"accelerator": getattr(host, "accelerator", "npu")}
    if req["accelerator"] == "npu":
        from dapo_ops.control.planning import CANN_SET_ENV

        req["cann_files"] = list(CANN_SET_ENV)
    runs = getattr(host, "runs_path", None) or getattr(host, "runs_dir", None)
    if pv is not None:
        req["model"] = pv.s("model_path")
        req["data"] = pv.data_files
        req["entry_module"] = pv.entry_module
        req["disk_path"] = pv.s("ckpt_dir") or pv.spec.get("run_dir") or runs
        req["prompt_key"] = pv.s("prompt_key", "prompt")
        req["modules"] = [m for m, _ in needed_modules(pv)]
    else:
        req["disk_path"] = runs
    if full:
        if pv is not None and "swanlab" in pv.logger:
            mode = pv.env.get("SWANLAB_MODE", "cloud")
            if mode in ("cloud", "online"):
                req["http_urls"] = {"swanlab": pv.env.get("SWANLAB_API_HOST") or SWANLAB_CLOUD_API}
        if ray:
            if ray.get("is_head"):
                req["listen_port"] = int(ray["port"])
            else:
                req["tcp"] = [{"name": "ray-head", "host": ray["head"], "port": int(ray["port"])}]
        if compose_request is not None:
            from dapo_ops.control import validate

            req["compose"] = {"source": validate.remote_check_script(), "request": compose_request}
    return req


def needed_modules(pv: PlanView) -> list[tuple[str, str]]:
    """``(module, why)`` the plan's verl needs besides verl itself: the V1 trainer (0.9 profile) imports
    ``transfer_queue`` (``verl/trainer/main_ppo.py:137``, ``verl/trainer/ppo/v1/trainer_base.py:30``; the wheel lists
    it only under the ``verl-core`` extra); Megatron's engine builds the model through Megatron-Bridge
    (``verl/models/mcore/bridge.py:17`` ``from megatron.bridge import AutoBridge``, used at
    ``verl/workers/engine/megatron/transformer_impl.py:340-348`` unless ``vanilla_mbridge``, default False)."""
    out: list[tuple[str, str]] = []
    if pv.spec.get("profile", "0.9") == "0.9":
        out.append(("transfer_queue", "verl 0.9's V1 trainer imports it (verl/trainer/main_ppo.py:137)"))
        if pv.spec.get("framework") == "megatron":
            out.append(("megatron.bridge", "verl 0.9's Megatron engine builds the model with Megatron-Bridge "
                                           "(verl/models/mcore/bridge.py:17)"))
    return out


_MODULE_FIX = {"transfer_queue": "pip install 'verl[verl-core]' (or pip install TransferQueue) in the container",
               "megatron.bridge": "pip install megatron-bridge in the container (or use verl's Megatron image)"}


def _module_checks(pv: PlanView | None, p: dict) -> list[Check]:
    found = p.get("modules")
    if pv is None or found is None:
        return []
    out = []
    for mod, why in needed_modules(pv):
        if found.get(mod):
            out.append(Check(mod, OK, f"{mod} at {found[mod]}"))
        else:
            out.append(Check(mod, FAIL, f"{mod} is not importable in the container; {why}", _MODULE_FIX[mod]))
    return out


def _cann_checks(p: dict) -> list[Check]:
    """Which CANN environment verl gets (the NPU launcher, ``planning.CANN_LAUNCHER``)."""
    c = p.get("cann")
    if c is None:
        return []
    if c.get("toolkit_home"):
        return [Check("cann", OK, f"ASCEND_TOOLKIT_HOME={c['toolkit_home']} in docker exec (the image sets CANN's env)")]
    if c.get("found"):
        return [Check("cann", OK, "ASCEND_TOOLKIT_HOME unset in docker exec; verl's launcher sources "
                      + ", ".join(c["found"]))]
    return [Check("cann", WARN, "ASCEND_TOOLKIT_HOME unset in docker exec and no CANN set_env.sh found "
                  "(/usr/local/Ascend/ascend-toolkit/set_env.sh)", "install CANN in the image or set ASCEND_TOOLKIT_HOME "
                  "and its library paths in the image's ENV")]


def _host_command(target: Target, req: dict, env: dict) -> str:
    """One host shell line: inspect the container, and when it runs exec the probe in it (a bare host,
    ``runtime = "host"``: no inspect; the mark says ``0 running host`` and the probe runs in the host's shell)."""
    if target.bare:
        exec_line = target.exec_command(preflight_probe.build_command(target.host.python, req), env=env,
                                        workdir=target.host.workdir)
        return f"printf '{INSPECT_MARK}0 running host\\n'; {exec_line}; exit 0"
    c = q(target.container)
    fmt = q(INSPECT_FORMAT + " {{.State.Restarting}} {{.State.Paused}}")
    exec_line = target.exec_command(preflight_probe.build_command(target.host.python, req), env=env,
                                    workdir=target.host.workdir)
    return (f"s=$(docker inspect -f {fmt} {c} 2>&1); rc=$?; "
            f"printf '{INSPECT_MARK}%s %s\\n' \"$rc\" \"$(printf %s \"$s\" | tr '\\n' ' ')\"; "
            f"if [ \"$rc\" = 0 ]; then case \"$s\" in running*) {exec_line} ;; esac; fi; exit 0")


def collect(target: Target, req: dict, *, env: dict | None = None, timeout: float = 120) -> dict:
    """Run the inspect + probe on ``target`` in ONE SSH round trip. Returns facts:
    ``{"ssh": {"ok", "kind", "message"}, "inspect": {"rc", "text"}, "probe": dict | None, "probe_error": str}``.
    Never raises for remote failures (they become facts)."""
    facts: dict = {"ssh": {"ok": True}, "inspect": None, "probe": None, "probe_error": "",
                   "bare": target.bare, "local": target.local}
    try:
        res = target.host_run(_host_command(target, req, env or {}), timeout=timeout, check=False)
    except RemoteError as e:
        facts["ssh"] = {"ok": False, "kind": e.kind, "message": e.message}
        return facts
    out = res.stdout or ""
    for line in out.splitlines():
        if line.startswith(INSPECT_MARK):
            rest = line[len(INSPECT_MARK):]
            rc, _, text = rest.partition(" ")
            facts["inspect"] = {"rc": int(rc) if rc.lstrip("-").isdigit() else -1, "text": text.strip()}
            break
    if facts["inspect"] is None:
        lines = (res.stderr or out).strip().splitlines()
        facts["inspect"] = {"rc": res.exited, "text": lines[-1] if lines else ""}
    if facts["inspect"]["rc"] == 0 and facts["inspect"]["text"].startswith("running"):
        try:
            facts["probe"] = preflight_probe.parse_output(out)
        except ValueError as e:
            err = [ln for ln in (res.stderr or "").splitlines() if ln.strip()]
            facts["probe_error"] = f"{e}" + (f" ({err[-1].strip()})" if err else "")
    return facts


# ------------------------------------------------------------------------------------------ evaluation

def workdir_missing(text: str) -> bool:
    """True when ``text`` (docker exec's stderr) says the exec's working directory does not exist in the container:
    runc's ``OCI runtime exec failed: ... chdir to cwd ("/x") set in config.json failed: no such file or
    directory`` (docker exec -w)."""
    low = (text or "").lower()
    return "chdir to cwd" in low and "no such file or directory" in low


def _split_fix(message: str) -> tuple[str, str]:
    """RemoteError messages are ``<what>; <fix>``: split at the last ``; ``."""
    if "; " in message:
        a, b = message.rsplit("; ", 1)
        return a, b
    return message, ""


def _container_checks(target_name: str, container: str, facts: dict) -> list[Check]:
    out: list[Check] = []
    ssh = facts["ssh"]
    if not ssh.get("ok"):
        msg, fix = _split_fix(ssh.get("message", ""))
        kind = ssh.get("kind")
        if kind == "timeout":
            out.append(Check("ssh", OK, "connected"))
            out.append(Check("probe", FAIL, msg, "the host or its Docker is overloaded or hung: check `docker ps` "
                                                  "on it, or raise --timeout"))
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
        out.append(Check("docker", FAIL, f"docker CLI not found on the host ({text})",
                         "install Docker or fix PATH for the SSH user"))
        return out
    if "cannot connect to the docker daemon" in low or "is the docker daemon running" in low:
        out.append(Check("docker", FAIL, f"Docker daemon not running ({text})", "start it (systemctl start docker)"))
        return out
    if "permission denied" in low:
        out.append(Check("docker", FAIL, f"no permission to use Docker ({text})",
                         "add the SSH user to the docker group or use root"))
        return out
    out.append(Check("docker", OK, "docker usable"))
    if rc != 0:
        if "no such" in low:
            out.append(Check("container", FAIL, f"container '{container}' does not exist on {target_name}",
                             f"create it: inv container.create -H {target_name} --image IMAGE --name {container} "
                             "(or fix container in hosts.toml)"))
        else:
            out.append(Check("container", FAIL, f"docker inspect {container} failed: {text}", "check Docker on the host"))
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
        out.append(Check("container", FAIL, f"container '{container}' is restarting (last exit code {code}"
                         + (", OOMKilled" if oom else "") + ")",
                         f"its PID 1 keeps dying: docker logs {container} on the host, then recreate it"))
    elif status == "paused":
        out.append(Check("container", FAIL, f"container '{container}' is paused", f"docker unpause {container}"))
    else:
        extra = f"exit code {code}" + (", OOMKilled: the kernel OOM killer ended it" if oom else "")
        out.append(Check("container", FAIL, f"container '{container}' is {status} ({extra})",
                         f"start it (docker start {container}) or recreate it (inv container.create --replace)"))
    return out


def _device_checks(host, pv: PlanView | None, p: dict) -> list[Check]:
    out: list[Check] = []
    d = p.get("devices")
    if d is None:
        return out
    acc = getattr(host, "accelerator", "npu")
    tool = d.get("tool", "npu-smi info")
    if d.get("rc") != 0:
        err = (d.get("stderr") or "").strip().splitlines()
        why = err[-1] if err else f"exit {d.get('rc')}"
        fix = ("mount the driver and npu-smi into the container (inv container.create does: /usr/local/Ascend/driver, "
               "/usr/local/dcmi, /usr/local/bin/npu-smi)" if acc == "npu"
               else "run the container with --gpus all (NVIDIA container toolkit)")
        out.append(Check("devices", FAIL, f"`{tool}` failed inside the container: {why}", fix))
        return out
    try:
        rep = devmod.parse(acc, d.get("stdout", ""))
    except devmod.DeviceParseError as e:
        out.append(Check("devices", FAIL, str(e), f"check `{tool}` inside the container by hand"))
        return out
    env = p.get("env") or {}
    var = "ASCEND_RT_VISIBLE_DEVICES" if acc == "npu" else "CUDA_VISIBLE_DEVICES"
    mounted = len(d.get("nodes") or []) if getattr(host, "device_mounts", True) else None
    try:
        visible = devmod.parse_visible(env.get(var))
    except ValueError as e:
        out.append(Check("visible", FAIL, f"{var}={env.get(var)!r}: {e}", f"use device indices, e.g. {var}=0,1,2,3"))
        visible = None
    else:
        limit = rep.count if mounted is None else min(rep.count, mounted) if mounted else rep.count
        if visible is not None:
            bad = [i for i in visible if i >= limit]
            if bad:
                out.append(Check("visible", FAIL, f"{var}={env.get(var)} names device(s) {bad} but only {limit} are "
                                 "mounted in the container (indices are relative to the mounted devices)",
                                 f"use indices 0..{limit - 1} or mount more devices (inv container.create)"))
            else:
                out.append(Check("visible", OK, f"{var}={env.get(var)} ({len(visible)} of {limit})"))
        elif mounted is not None and mounted and mounted < rep.count:
            out.append(Check("visible", WARN, f"{rep.count} devices reported but only {mounted} /dev nodes mounted",
                             "recreate the container with every device (inv container.create --replace)"))
    usable = [dv for dv in rep.devices if visible is None or dv.index in visible]
    need = pv.devices_needed if pv is not None else None
    if need is None:
        need = int(getattr(host, "devices", 0) or 0) or None
    label = "NPU" if acc == "npu" else "GPU"
    if need is not None and len(usable) < need:
        out.append(Check("devices", FAIL, f"{len(usable)} {label}(s) usable inside the container, the plan needs {need}"
                         + (" (trainer + rollout pools)" if pv is not None and pv.spec.get("mode") == "one-step-off" else ""),
                         "lower trainer_gpus/rollout_gpus (or n_gpus_per_node), or give the container more devices"))
    else:
        out.append(Check("devices", OK, f"{len(usable)} {label}(s) usable" + (f", {need} needed" if need else "")))
    needed = usable[:need] if need else usable
    held = [pr for pr in rep.processes if any(pr.device == dv.index for dv in needed)]
    if rep.processes:
        pids = ", ".join(f"{pr.pid} ({pr.name}, {label} {pr.device}, {pr.mem_mb} MB)" for pr in rep.processes)
        out.append(Check("leftover", FAIL if held else WARN, f"processes hold device memory: {pids}",
                         "a leftover run? stop it (inv stop, or `ray stop --force` in its container; the PIDs are "
                         "host PIDs: kill them on the host) and wait ~10 s before launching"))
    else:
        out.append(Check("leftover", OK, "no process holds device memory"))
    util = float(pv.s("gpu_memory_utilization", 0.6)) if pv is not None else 0.6
    low = [dv for dv in needed if dv.mem_total_mb and dv.mem_free_mb / dv.mem_total_mb < util]
    if low:
        desc = ", ".join(f"{label} {dv.index}: {dv.mem_free_mb}/{dv.mem_total_mb} MB free" for dv in low)
        out.append(Check("device-mem", FAIL, f"free memory below rollout gpu_memory_utilization={util:g}: {desc}",
                         "free the devices (see leftover) or lower gpu_memory_utilization"))
    elif needed:
        worst = min(needed, key=lambda dv: dv.mem_free_mb)
        out.append(Check("device-mem", OK, f"lowest free: {label} {worst.index} {worst.mem_free_mb}/{worst.mem_total_mb} MB"))
    return out


def _verl_checks(host, pv: PlanView | None, p: dict) -> list[Check]:
    from dapo_ops.core import profiles

    out: list[Check] = []
    pyv = p.get("python", "?")
    try:
        t = tuple(int(x) for x in pyv.split(".")[:2])
    except ValueError:
        t = (0, 0)
    if t < MIN_PYTHON:
        out.append(Check("python", WARN, f"Python {pyv} in the container; verl 0.9 expects >= 3.10",
                         "use a verl image with Python 3.10-3.11"))
    else:
        out.append(Check("python", OK, f"Python {pyv} ({p.get('executable')})"))
    v = p.get("verl") or {}
    wd = getattr(host, "workdir", "")
    if not v.get("found"):
        out.append(Check("verl", FAIL, f"verl not found by {getattr(host, 'python', 'python3')} in {wd}",
                         "install verl in the image, or set workdir in hosts.toml to the verl checkout"))
    else:
        ver = v.get("version") or "?"
        try:
            prof = profiles.profile_for_version(ver)
        except profiles.OverrideError as e:
            out.append(Check("verl", FAIL, f"verl {ver} at {v.get('path')}: {e}", "use a verl 0.9.x image"))
            prof = None
        if prof is not None:
            want = pv.spec.get("profile") if pv is not None else None
            if want and want != prof:
                out.append(Check("verl", FAIL, f"container has verl {ver} (profile {prof}); the plan uses profile {want}",
                                 f"set VERL_PROFILE={prof} (or use a verl {want} image)"))
            else:
                out.append(Check("verl", OK, f"verl {ver} at {v.get('path')}, profile {prof}"))
    if v.get("entry"):
        if v.get("entry_found"):
            out.append(Check("entry", OK, f"{v['entry']} present"))
        else:
            fix = ("the DAPO recipe is not in the verl wheel: use a verl source checkout and run "
                   f"`git submodule update --init recipe` in {wd}" if v["entry"].startswith("recipe.")
                   else f"use a verl version that ships {v['entry']}, or another mode")
            out.append(Check("entry", FAIL, f"entry module {v['entry']} not found from {wd}", fix))
    comp = p.get("compose")
    if comp is not None:
        from dapo_ops.control import validate

        try:
            errs = validate.parse_remote_result(comp.get("stdout", ""))
        except ValueError as e:
            err = (comp.get("stderr") or "").strip().splitlines()
            out.append(Check("overrides", FAIL, f"{e}" + (f" ({err[-1]})" if err else ""),
                             "install hydra-core in the container's Python"))
        else:
            if errs:
                first = " / ".join(errs[:3])
                out.append(Check("overrides", FAIL, f"overrides do not compose against the container's verl: {first}",
                                 "fix or remove that override (--profile must match the container's verl)"))
            else:
                out.append(Check("overrides", OK, "generated overrides compose against the container's verl config"))
    return out


def _input_checks(host, pv: PlanView | None, p: dict) -> list[Check]:
    out: list[Check] = []
    m = p.get("model")
    if m is not None:
        if m.get("ok"):
            gb = m.get("weights_bytes", 0) / GIB
            msg = f"{m['path']}: {len(m.get('weights', []))} weight file(s), {gb:.2f} GiB, tokenizer {','.join(m['tokenizer'])}"
            ctx = m.get("max_position_embeddings")
            need = (int(pv.s("max_prompt_length", 0)) + int(pv.s("max_response_length", 0))) if pv is not None else 0
            if ctx and need and need > ctx:
                out.append(Check("model", FAIL, f"max_prompt_length + max_response_length = {need} exceeds the model's "
                                 f"max_position_embeddings {ctx} ({m['path']}/config.json)",
                                 f"lower max_response_length to <= {ctx - int(pv.s('max_prompt_length', 0))}, or add "
                                 f"+actor_rollout_ref.model.override_config.max_position_embeddings={need} if the model "
                                 "supports it"))
            else:
                out.append(Check("model", OK, msg + (f", context {ctx}" if ctx else "")))
        else:
            probs = m.get("problems") or ["model dir unusable"]
            more = f" (+{len(probs) - 1} more)" if len(probs) > 1 else ""
            out.append(Check("model", FAIL, probs[0] + more,
                             "run `inv prepare` to fetch the model, or fix model_path"))
    for d in p.get("data") or []:
        name = "data:" + d["path"].rsplit("/", 1)[-1]
        if d.get("ok"):
            out.append(Check(name, OK, f"{d['path']}: {d.get('rows')} rows, verl RL schema"))
        else:
            probs = d.get("problems") or ["unusable"]
            if d.get("missing"):
                fix = (f"add column(s) {', '.join(d['missing'])} (verl.md §15: prompt = chat messages, data_source, "
                       "reward_model = {'ground_truth': ...}) or use verl's data preprocessing scripts")
            elif not d.get("exists"):
                fix = "run `inv prepare` to fetch it, or fix train_file / val_file"
            else:
                fix = "re-create the file (verl's examples/data_preprocess) or `inv prepare` to fetch it again"
            more = f" (+{len(probs) - 1} more)" if len(probs) > 1 else ""
            out.append(Check(name, FAIL, probs[0] + more, fix))
    disk = p.get("disk")
    if disk:
        if disk.get("error"):
            out.append(Check("disk", WARN, f"cannot stat {disk['checked']}: {disk['error']}", "check the checkpoint dir"))
        else:
            free = disk["free"]
            wb = (m or {}).get("weights_bytes") or 0
            if not wb:
                out.append(Check("disk", OK if free > 50 * GIB else WARN,
                                 f"{free / GIB:.1f} GiB free at {disk['checked']} (no model size to estimate from)",
                                 "" if free > 50 * GIB else "free space where checkpoints go"))
            else:
                one = wb * CKPT_FACTOR
                saves = 1
                if pv is not None:
                    steps, freq = int(pv.s("steps", 0) or 0), int(pv.s("save_freq", 0) or 0)
                    if steps and freq > 0:
                        saves = steps // freq + (1 if steps % freq else 0)
                    keep = pv.s("max_actor_ckpt_to_keep")
                    if keep:
                        saves = min(saves, int(keep))
                total = one * saves
                msg = (f"{free / GIB:.1f} GiB free at {disk['checked']}; one checkpoint ~{one / GIB:.1f} GiB, "
                       f"{saves} save(s) ~{total / GIB:.1f} GiB")
                if free < one:
                    out.append(Check("disk", FAIL, msg, "free space, or point runs_dir/ckpt_dir at a bigger disk"))
                elif free < total:
                    out.append(Check("disk", WARN, msg, "raise save_freq, set trainer.max_actor_ckpt_to_keep, or free space"))
                else:
                    out.append(Check("disk", OK, msg))
            if disk.get("writable") is False:
                out.append(Check("disk", FAIL, f"{disk['checked']} is not writable in the container",
                                 "bind-mount a writable runs_dir (inv container.create does)"))
    return out


def memory_facts(host, p: dict | None) -> dict | None:
    """``{"model_config", "device_gib"}`` from the probe's facts (the container's ``config.json`` and the smallest
    device's total memory), for :func:`dapo_ops.control.planning.make_plan`; None when either is unknown."""
    cfg = ((p or {}).get("model") or {}).get("config")
    d = (p or {}).get("devices") or {}
    if not cfg or d.get("rc") != 0:
        return None
    try:
        rep = devmod.parse(getattr(host, "accelerator", "npu"), d.get("stdout", ""))
    except devmod.DeviceParseError:
        return None
    totals = [x.mem_total_mb for x in rep.devices if x.mem_total_mb]
    return {"model_config": cfg, "device_gib": min(totals) / 1024} if totals else None


def _memfit_checks(host, pv: PlanView | None, p: dict) -> list[Check]:
    """The memory-fit estimate (:mod:`dapo_ops.core.memfit`): per-phase peak, tightest phase, start rung or refusal."""
    from dapo_ops.core import features
    from dapo_ops.core import memfit

    mem = memory_facts(host, p)
    if pv is None or mem is None:
        return []
    fs = features.FeatureSet.from_json(pv.spec.get("features") or [], pv.spec.get("disabled_features") or ())
    try:
        f = memfit.fit(mem["model_config"], pv.spec, fs, mem["device_gib"])
    except memfit.EstimateUnavailable as e:
        return [Check("memory-fit", WARN, str(e), "the device-OOM ladder still applies; complete config.json to get the estimate")]
    except memfit.FitError as e:
        msg, fix = _split_fix(str(e))
        if _memory_fit_mode(pv) == "warn":
            return [Check("memory-fit", WARN, msg, "MEMORY_FIT=warn: the first attempt runs as planned; " + fix)]
        return [Check("memory-fit", FAIL, msg, fix)]
    if f.rungs and _memory_fit_mode(pv) == "warn":
        return [Check("memory-fit", WARN, f"first attempt as planned: {f.planned.line()}",
                      f"MEMORY_FIT=warn: launch starts as planned; MEMORY_FIT=start would begin on "
                      f"{', '.join(f.rungs)}: {f.started.line()}")]
    if f.rungs:
        return [Check("memory-fit", WARN, f"first attempt as planned: {f.planned.line()}",
                      f"inv launch starts on {', '.join(f.rungs)} (source: estimate): {f.started.line()}")]
    return [Check("memory-fit", OK, f"estimate: {f.planned.line()}")]


def _memory_fit_mode(pv: PlanView) -> str:
    """The plan's ``memory_fit`` setting (``start`` | ``warn``; dapo_ops/control/settings.py)."""
    return str((pv.spec.get("settings") or {}).get("memory_fit") or "start")


def _display_url(url: str) -> str:
    from dapo_ops.control import proxy

    return proxy.display(url)


def _network_checks(host, pv: PlanView | None, p: dict, inv_proxy: dict | None, ray: dict | None) -> list[Check]:
    out: list[Check] = []
    env = p.get("env") or {}
    set_vars = [k for k in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY") if env.get(k)]
    if set_vars:
        shown = ", ".join(f"{k}={_display_url(env[k])}" for k in set_vars if k.islower()) or \
            ", ".join(f"{k}={_display_url(env[k])}" for k in set_vars)
        out.append(Check("proxy", OK, f"in the container: {shown}" + (f"; no_proxy={env.get('no_proxy') or env.get('NO_PROXY')}"
                                                                      if env.get("no_proxy") or env.get("NO_PROXY") else "")))
    elif inv_proxy and any(inv_proxy.get(k) for k in ("http_proxy", "https_proxy")):
        out.append(Check("proxy", WARN, "hosts.toml [proxy] is set but the container sees no proxy variables",
                         "recreate the container (inv container.create) or pass the proxy in the run env"))
    else:
        out.append(Check("proxy", OK, "no proxy configured (direct connections)"))
    sw = (p.get("http") or {}).get("swanlab")
    if sw is not None:
        if sw.get("reachable"):
            out.append(Check("swanlab", OK, f"{sw['url']} reachable from the container (HTTP {sw.get('status')}, "
                             f"{sw.get('seconds')} s)"))
        else:
            out.append(Check("swanlab", FAIL, f"SwanLab host {sw['url']} not reachable from the container: {sw.get('error')}",
                             "set the proxy ([proxy] in hosts.toml) or SWANLAB_HOST to a reachable server, or use "
                             "--swanlab-mode local/offline"))
    if ray:
        port = ray["port"]
        if ray.get("is_head"):
            ls = p.get("listen") or {}
            if ls.get("free"):
                out.append(Check("ray-port", OK, f"Ray head port {port} free on this head"))
            else:
                out.append(Check("ray-port", FAIL, f"Ray head port {port} is in use on the head ({ls.get('error')})",
                                 "a Ray head from an earlier run? `ray stop --force` in the container, or pick another port"))
        else:
            for t in p.get("tcp") or []:
                if t.get("reachable"):
                    state = "a Ray head listens" if t.get("open") else "route ok, nothing listens yet"
                    out.append(Check("ray-port", OK, f"head {t['host']}:{t['port']} reachable ({state})"))
                else:
                    out.append(Check("ray-port", FAIL, f"head {t['host']}:{t['port']} not reachable from this host: "
                                     f"{t.get('error')}", "open the Ray port between the hosts (firewall) or fix the "
                                                          "head address"))
    return out


def evaluate(host, plan: Any, facts: dict, *, full: bool = True, inv_proxy: dict | None = None,
             ray: dict | None = None) -> list[Check]:
    """Facts from :func:`collect` -> checks. Pure (no I/O). ``full`` adds the network checks."""
    pv = plan_view(plan)
    # the container the run will use: the plan's (--container / CONTAINER) before the inventory's
    container = (pv.spec.get("container") if pv is not None else None) or getattr(host, "container", "verl")
    out = _container_checks(getattr(host, "name", "?"), container, facts)
    if any(c.status == FAIL for c in out):
        return out
    p = facts.get("probe")
    if p is None and workdir_missing(facts.get("probe_error", "")):
        wd = getattr(host, "workdir", "?")
        out.append(Check("workdir", FAIL, f"workdir {wd} does not exist in container '{container}'",
                         "fix workdir in hosts.toml (the verl checkout, e.g. /verl) or create it in the image"))
        return out
    if p is None:
        out.append(Check("python", FAIL, facts.get("probe_error") or "the probe gave no answer",
                         f"check that {getattr(host, 'python', 'python3')} runs in the container"))
        return out
    out += _device_checks(host, pv, p)
    out += _verl_checks(host, pv, p)
    out += _module_checks(pv, p)
    out += _cann_checks(p)
    out += _input_checks(host, pv, p)
    out += _memfit_checks(host, pv, p)
    if full:
        out += _network_checks(host, pv, p, inv_proxy, ray)
    if getattr(host, "runtime", "docker") == "host":
        out = [_on_host(c) for c in out]
    return out


def _on_host(c: Check) -> Check:
    """A check of a bare host (``runtime = "host"``) names the host, not a container, in its message."""
    def sub(t: str) -> str:
        for a, b in (("inside the container", "on the host"), ("in the container's Python", "in the host's Python"),
                     ("FROM THE CONTAINER", "FROM THE HOST"), ("in the container", "on the host"), ("the container's", "the host's"),
                     ("run the container with --gpus all (NVIDIA container toolkit)",
                      "install the NVIDIA driver / nvidia-smi on the host and put it on PATH (inventory env)")):
            t = t.replace(a, b)
        return t

    return Check(c.name, c.status, sub(c.message), sub(c.fix))


# ------------------------------------------------------------------------------------------ operator side

def swanlab_key_check(plan: Any, env: dict | None = None, file_cfg: dict | None = None,
                      isatty: bool | None = None, mode_flag: str = "") -> Check | None:
    """Cloud-mode SwanLab without an API key and without a TTY fails at verl's ``Tracking()`` init, after the
    models loaded (swanlab.md §8): catch it here. Uses :func:`dapo_ops.control.swanlab_cfg.resolve` with the operator's
    env and user config. ``None`` when the plan does not log to SwanLab."""
    import os

    from dapo_ops.control import swanlab_cfg
    from dapo_ops.control import userconfig

    pv = plan_view(plan)
    if pv is not None and "swanlab" not in pv.logger and pv.logger:
        return None
    env = dict(os.environ if env is None else env)
    if pv is not None and pv.env.get("SWANLAB_MODE") and "SWANLAB_MODE" not in env:
        env["SWANLAB_MODE"] = pv.env["SWANLAB_MODE"]
    if file_cfg is None:
        try:
            file_cfg = (userconfig.load() or {}).get("swanlab", {})
        except Exception:  # noqa: BLE001 - an unreadable user config is reported by launch itself
            file_cfg = {}
    tty = sys.stdin.isatty() if isatty is None else isatty
    try:
        s = swanlab_cfg.resolve(env, file_cfg, mode_flag=mode_flag or None, stdin_isatty=False)
    except swanlab_cfg.SwanlabConfigError as e:
        if tty:
            return Check("swanlab-key", WARN, "SwanLab cloud mode has no API key yet; launch will ask for it",
                         "set SWANLAB_API_KEY or [swanlab] api_key in the user config")
        msg, _, fix = str(e).partition(": ")
        return Check("swanlab-key", FAIL, msg, fix)
    if s.mode == "cloud":
        return Check("swanlab-key", OK, f"cloud mode, API key from {s.sources.get('api_key', '?')}")
    return Check("swanlab-key", OK, f"SwanLab mode {s.mode}: no key needed")


# ------------------------------------------------------------------------------------------ entry points

def _compose_request(host, pv: PlanView | None) -> dict | None:
    if pv is None or not pv.argv:
        return None
    from dapo_ops.control import validate

    try:
        return validate.request_for(pv.argv, pv.spec.get("workdir") or getattr(host, "workdir", "/verl"))
    except ValueError:
        return None


def _ray_for(host, pv: PlanView | None, ray: dict | None) -> dict | None:
    r = ray if ray is not None else (pv.spec.get("ray") if pv is not None else None)
    if not r:
        return None
    r = dict(r)
    r.setdefault("port", 6379)
    if "is_head" not in r:
        r["is_head"] = r.get("head") in (getattr(host, "address", None), getattr(host, "name", None))
    return r


def quick_all(target: Target, plan: Any, *, timeout: float = 90, facts_out: dict | None = None) -> list[Check]:
    """The cheap subset ``inv launch`` runs automatically, every verdict: container state, devices (count,
    leftovers, free memory), python/verl/entry module, model and data files, disk. One SSH round trip, no
    compose, no network probes. ``plan``: ``planning.make_plan`` result (``.spec``, ``.argv``), a spec dict, or
    None. Returns checks named in :data:`QUICK_CHECKS`; never raises for remote failures. ``facts_out``: a dict
    that receives the facts (e.g. for :func:`memory_facts`)."""
    pv = plan_view(plan)
    req = probe_request(target.host, pv, full=False)
    facts = collect(target, req, env=pv.env if pv is not None else {}, timeout=timeout)
    if facts_out is not None:
        facts_out.update(facts)
    return evaluate(target.host, pv, facts, full=False)


def quick(target: Target, plan: Any, *, timeout: float = 90, facts_out: dict | None = None) -> list[Check]:
    """What ``inv launch`` calls before starting: the **failing** checks of :func:`quick_all` (empty = go).

    ``str(check)`` is one line with the fix, fit for launch's error message."""
    return [c for c in quick_all(target, plan, timeout=timeout, facts_out=facts_out) if c.status == FAIL]


def run_all(target: Target, plan: Any, *, inv_proxy: dict | None = None, ray: dict | None = None,
            compose: bool = True, extra_env: dict | None = None, timeout: float = 180) -> list[Check]:
    """Every check for one host in one SSH round trip (the compose check runs inside the same ``docker exec``).

    ``inv_proxy``: the inventory ``[proxy]`` table (to warn when the container lacks it). ``ray``:
    ``{"head": address, "port": 6379, "is_head": bool}`` for multi-host runs (default: the plan's ``ray``).
    ``extra_env``: non-secret env the run will get besides the spec's (e.g. ``SwanlabSettings.public_env()``:
    ``SWANLAB_MODE``, ``SWANLAB_API_HOST``); the probe runs with it. The ``swanlab-key`` check is operator-side:
    call :func:`swanlab_key_check` once, not per host.
    """
    pv = plan_view(plan)
    if pv is not None and extra_env:
        pv = PlanView(dict(pv.spec, env={**pv.env, **extra_env}), pv.argv)
    r = _ray_for(target.host, pv, ray)
    creq = _compose_request(target.host, pv) if compose else None
    req = probe_request(target.host, pv, full=True, ray=r, compose_request=creq)
    facts = collect(target, req, env=pv.env if pv is not None else {}, timeout=timeout)
    return evaluate(target.host, pv, facts, full=True, inv_proxy=inv_proxy, ray=r)


def worst(checks: list[Check]) -> str:
    """``fail`` if any fails, else ``warn`` if any warns, else ``ok``."""
    st = {c.status for c in checks}
    return FAIL if FAIL in st else WARN if WARN in st else OK


def to_json(results: dict[str, list[Check]]) -> str:
    """``{"hosts": {name: {"status", "checks": [...]}}, "status"}`` as JSON text."""
    hosts = {h: {"status": worst(cs), "checks": [c.to_json() for c in cs]} for h, cs in results.items()}
    allc = [c for cs in results.values() for c in cs]
    return json.dumps({"status": worst(allc), "hosts": hosts}, indent=1)
