"""What a training container needs on each accelerator, as data, and the exact ``docker run -d`` argv.

One table (:data:`ACCELERATORS`) lists per accelerator kind the device nodes, the driver/tool bind mounts and
the extra docker flags. Add a kind (or a device node) there and :func:`docker_run_argv` picks it up.

Facts:
- Ascend: ``/dev/davinci<N>`` per NPU plus ``/dev/davinci_manager``, ``/dev/devmm_svm``, ``/dev/hisi_hdc``;
  the driver and ``npu-smi`` come from the host (``/usr/local/Ascend/driver``, ``/usr/local/dcmi``,
  ``/usr/local/bin/npu-smi``) -- the mounts of the Ascend container quick start (verl ``docs/ascend_tutorial``).
  ``ASCEND_RT_VISIBLE_DEVICES`` indices are relative to the devices mounted (verl.md section 7).
- NVIDIA: ``--gpus all`` (NVIDIA container toolkit).
- Both: host network (Ray, HCCL/NCCL sockets), host IPC and a large ``/dev/shm`` (dataloaders, vLLM),
  proxy variables, and bind mounts so model, data and checkpoints live on the host and outlive the container.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from dapo_ops.core.redact import has_credentials
from dapo_ops.core import defaults

__all__ = [
    "AcceleratorSpec",
    "ACCELERATORS",
    "KEEPALIVE",
    "PROXY_VARS",
    "ContainerSpecError",
    "docker_run_argv",
    "bind_mounts",
    "render",
]


@dataclass(frozen=True)
class AcceleratorSpec:
    """Container needs of one accelerator kind.

    ``per_device``: device node template formatted with the device index (``/dev/davinci{n}``).
    ``devices``: device nodes every container gets. ``mounts``: ``(host, container, mode)`` bind mounts.
    ``flags``: extra ``docker run`` flags. ``visible_env``: the visible-device variable of the runtime.
    """

    per_device: str | None = None
    devices: tuple[str, ...] = ()
    mounts: tuple[tuple[str, str, str], ...] = ()
    flags: tuple[str, ...] = ()
    visible_env: str = ""


ACCELERATORS: dict[str, AcceleratorSpec] = {
    "npu": AcceleratorSpec(
        per_device="/dev/davinci{n}",
        devices=("/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"),
        mounts=(
            ("/usr/local/Ascend/driver", "/usr/local/Ascend/driver", "ro"),
            ("/usr/local/dcmi", "/usr/local/dcmi", "ro"),
            ("/usr/local/bin/npu-smi", "/usr/local/bin/npu-smi", "ro"),
        ),
        visible_env="ASCEND_RT_VISIBLE_DEVICES",
    ),
    "gpu": AcceleratorSpec(flags=("--gpus", "all"), visible_env="CUDA_VISIBLE_DEVICES"),
}

#: PID 1 of a created container: sleeps, and exits at once on SIGTERM (``docker stop`` takes no 10 s grace).
KEEPALIVE: tuple[str, ...] = ("sh", "-c", 'trap "exit 0" TERM INT; while :; do sleep 3600 & wait $!; done')

#: Proxy variables passed into the container, both spellings (tools read either).
PROXY_VARS: tuple[str, ...] = ("http_proxy", "https_proxy", "no_proxy")


class ContainerSpecError(ValueError):
    """A setting cannot become a valid ``docker run`` (one line: which setting, and the fix)."""


def bind_mounts(host) -> list[tuple[str, str, str]]:
    """Host directories bind-mounted for a training container: ``(host path, container path, mode)``.

    ``model_dir`` and ``data_dir`` are mounted at the same path (so a model path is the same string on the
    host and in the container); the container's ``runs_dir`` (run dirs, logs, checkpoints) is mounted from the
    host's ``ckpt_dir`` when set, else from the same path on the host, so checkpoints outlive the container.
    ``host`` is an inventory ``Host`` (fields ``model_dir``, ``data_dir``, ``ckpt_dir``, ``runs_dir``).
    """
    out: list[tuple[str, str, str]] = []
    for attr in ("model_dir", "data_dir"):
        p = getattr(host, attr, None)
        if p:
            out.append((str(p), str(p), "rw"))
    runs = getattr(host, "runs_dir", None) or getattr(host, "runs_path", None)
    if runs:
        src = getattr(host, "ckpt_dir", None) or runs
        out.append((str(src), str(runs), "rw"))
    for src, dst, _ in out:
        if not src.startswith("/") or not dst.startswith("/"):
            raise ContainerSpecError(f"bind mount {src}:{dst} is not absolute: use absolute paths in hosts.toml")
    return out


def docker_run_argv(
    host,
    image: str,
    name: str,
    *,
    proxy: dict | None = None,
    shm_size: str = "64g",
    volumes: list[str] | tuple[str, ...] = (),
    device_mounts: bool | None = None,
    accelerator: str | None = None,
    devices: int | None = None,
    command: tuple[str, ...] = KEEPALIVE,
) -> tuple[list[str], dict[str, str]]:
    """The exact ``docker run -d`` argv for a training container on ``host``, and the env it needs.

    ``host``: inventory ``Host`` (``accelerator``, ``devices``, ``device_mounts``, ``runs_dir``, ``model_dir``,
    ``data_dir``, ``ckpt_dir``, ``workdir``); keyword overrides win over its fields. ``proxy``: the inventory
    ``[proxy]`` table; empty values are skipped. A proxy URL with credentials (``user:pass@``) is passed as
    ``-e NAME`` (value taken from the docker client's environment, returned in the second element) so it never
    appears in argv; other values go inline as ``-e NAME=value``. ``volumes``: extra ``HOST:CONTAINER[:MODE]``.
    ``shm_size``: docker size string (``64g``).

    Returns ``(argv, env)``: ``argv`` starts with ``docker``; ``env`` must be exported for the ``docker``
    process. Raises :class:`ContainerSpecError` (unknown accelerator, bad volume, bad name).
    """
    acc = accelerator or getattr(host, "accelerator", defaults.HOST["accelerator"])
    if acc not in ACCELERATORS:
        raise ContainerSpecError(f"accelerator {acc!r} is unknown: use one of {', '.join(sorted(ACCELERATORS))}")
    spec = ACCELERATORS[acc]
    if not name or not all(c.isalnum() or c in "_.-" for c in name) or not name[0].isalnum():
        raise ContainerSpecError(f"container name {name!r} is invalid: use letters, digits, '_', '.', '-'")
    if not image:
        raise ContainerSpecError("no image given: pass --image IMAGE (e.g. the verl Ascend image tag)")
    mounts_on = (
        getattr(host, "device_mounts", defaults.HOST["device_mounts"]) if device_mounts is None else device_mounts
    )
    n = int(getattr(host, "devices", defaults.HOST["devices"]) if devices is None else devices)

    argv = [
        "docker",
        "run",
        "-d",
        "--name",
        name,
        "--network",
        "host",
        "--ipc",
        "host",
        "--shm-size",
        shm_size,
        "--label",
        "dapo-ops.managed=1",
    ]
    if mounts_on:
        if spec.per_device:
            for i in range(n):
                argv += ["--device", spec.per_device.format(n=i)]
        for d in spec.devices:
            argv += ["--device", d]
        for src, dst, mode in spec.mounts:
            argv += ["-v", f"{src}:{dst}:{mode}"]
        argv += list(spec.flags)
    env: dict[str, str] = {}
    for key in PROXY_VARS:
        val = (proxy or {}).get(key) or ""
        if not val:
            continue
        for var in (key, key.upper()):
            if has_credentials(val):
                argv += ["-e", var]
                env[var] = val
            else:
                argv += ["-e", f"{var}={val}"]
    for src, dst, mode in bind_mounts(host):
        argv += ["-v", f"{src}:{dst}" + ("" if mode == "rw" else f":{mode}")]
    for v in volumes:
        parts = v.split(":")
        if len(parts) not in (2, 3) or not parts[0].startswith("/") or not parts[1].startswith("/"):
            raise ContainerSpecError(f"volume {v!r} is invalid: use /host/path:/container/path[:ro]")
        argv += ["-v", v]
    workdir = getattr(host, "workdir", None)
    if workdir:
        argv += ["--workdir", str(workdir)]
    argv.append(image)
    argv += list(command)
    return argv, env


def render(argv: list[str]) -> str:
    """One shell line for ``argv`` (every word ``shlex.quote``d): what ``--dry-run`` prints."""
    return " ".join(shlex.quote(a) for a in argv)
