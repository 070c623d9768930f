"""The preflight probe: ONE ``docker exec`` that gathers every fact preflight needs from inside the container.

Stdlib only (it runs in arbitrary training images; Python 3.8+). A bundle op:
``PYTHONPATH=<bundle> python3 -m dapo_ops.agent.preflight_probe '<request json>'``
(:func:`dapo_ops.control.remote.bundle.op_line`); the answer is one JSON line prefixed by :data:`MARK`. The
compose check runs as a child ``python3 -m dapo_ops.agent.compose`` of the same bundle, with the container's own
hydra. Facts, not verdicts: :mod:`dapo_ops.control.preflight` turns them into ok/warn/fail.

Request keys (all optional): ``accelerator`` (npu|gpu), ``model`` (path), ``data`` (paths), ``prompt_key``,
``disk_path`` (where checkpoints go), ``entry_module``, ``http_urls`` ({name: url} to GET, e.g. the SwanLab
host), ``tcp`` ([{name, host, port}] to connect to, e.g. the Ray head), ``listen_port`` (a port that must be
free here, e.g. the Ray head port), ``compose`` ({"request": {...}, "timeout"?, "cache"?, "run"?, "launcher"?}:
the compose child starts under ``launcher`` (the run spec's: CANN's ``set_env.sh`` on NPU, as verl starts), the answer
has ``compose_fp``, the compose's fingerprint (:func:`dapo_ops.agent.composefp.fingerprint`), and unless
``"run": false`` the compose result ``compose``), ``modules``
(module names to locate without importing them, e.g. ``transfer_queue``), ``cann_files`` (CANN ``set_env.sh``
paths whose presence to report, with ``ASCEND_TOOLKIT_HOME``), ``learned_dir`` (``<runs_dir>/.learned``: the
memos of :mod:`dapo_ops.core.learned`, answered as ``learned``: a list of their JSON, newest first, bounded by
``learned.MAX_MEMOS`` files of at most ``learned.MAX_BYTES`` bytes; unreadable or broken ones are skipped),
``occupancy`` ({"runs_dir", "name"}: what holds this container, :func:`dapo_ops.agent.occupancy.occupancy` without
sweeping, answered as ``occupancy``; ``{"error": ...}`` when it could not be read).
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from typing import Any, Iterable

from dapo_ops.agent.composefp import fingerprint
from dapo_ops.agent.input_files import check_model_dir
from dapo_ops.agent.occupancy import occupancy
from dapo_ops.agent.parquet import check_parquet
from dapo_ops.agent.verlinfo import verl_info

MARK = "@@DAPO-PREFLIGHT "
ENV_NAMES = (
    "ASCEND_RT_VISIBLE_DEVICES",
    "ASCEND_VISIBLE_DEVICES",
    "CUDA_VISIBLE_DEVICES",
    "NVIDIA_VISIBLE_DEVICES",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "HF_ENDPOINT",
    "SWANLAB_MODE",
    "SWANLAB_API_HOST",
    "SWANLAB_WEB_HOST",
    "SWANLAB_LOG_DIR",
)
SECRET_NAMES = ("SWANLAB_API_KEY", "HF_TOKEN", "WANDB_API_KEY")


def _modules(names: Iterable[str] | None) -> dict[str, Any]:
    """``{name: path or None}``: where each module would be imported from (``importlib.util.find_spec``; a dotted
    name imports its parent packages only, e.g. ``megatron`` for ``megatron.bridge``)."""
    import importlib.util

    out = {}
    for name in names or []:
        try:
            spec = importlib.util.find_spec(name)
        except Exception:  # a parent package that fails to import counts as missing
            spec = None
        out[name] = None if spec is None else (spec.origin or ",".join(spec.submodule_search_locations or []) or name)
    return out


def _cann(files: Iterable[str] | None) -> dict[str, Any]:
    """``ASCEND_TOOLKIT_HOME`` of this ``docker exec`` and which CANN ``set_env.sh`` files exist."""
    return {
        "toolkit_home": os.environ.get("ASCEND_TOOLKIT_HOME"),
        "found": [f for f in files or [] if os.path.isfile(f)],
    }


def _run(argv: list[str], timeout: float = 30, cwd: str | None = None, stdin: str | None = None) -> dict[str, Any]:
    try:
        p = subprocess.run(
            argv,
            input=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            timeout=timeout,
            cwd=cwd,
            universal_newlines=True,
        )
        return {"rc": p.returncode, "stdout": p.stdout[-200000:], "stderr": p.stderr[-4000:]}
    except FileNotFoundError:
        return {"rc": 127, "stdout": "", "stderr": f"{argv[0]}: command not found"}
    except subprocess.TimeoutExpired:
        return {"rc": 124, "stdout": "", "stderr": f"{argv[0]} did not answer within {timeout} s"}
    except OSError as e:
        return {"rc": 126, "stdout": "", "stderr": f"{argv[0]}: {e.strerror}"}


def _devices(accelerator: str) -> dict[str, Any]:
    tool = ["npu-smi", "info"] if accelerator == "npu" else ["nvidia-smi"]
    nodes = _dev_nodes("davinci" if accelerator == "npu" else "nvidia")
    out = _run(tool, timeout=30)
    out["tool"] = " ".join(tool)
    out["nodes"] = sorted(nodes, key=lambda s: int("".join(c for c in s if c.isdigit()) or 0))
    return out


def _dev_nodes(prefix: str) -> list[str]:
    """``/dev/<prefix><digit>...`` paths (what ``glob("/dev/<prefix>[0-9]*")`` matches; the probe imports neither
    glob nor shutil nor socket at start: ~13 ms of CPU per host on the sandbox)."""
    try:
        names = os.listdir("/dev")
    except OSError:
        return []
    n = len(prefix)
    return ["/dev/" + x for x in names if x.startswith(prefix) and x[n : n + 1].isdigit()]


def _disk(path: str | None) -> dict[str, Any] | None:
    if not path:
        return None
    p = path
    while p and not os.path.exists(p):
        p = os.path.dirname(p.rstrip("/")) or "/"
        if p == "/":
            break
    try:
        st = os.statvfs(p or "/")  # what shutil.disk_usage computes
    except OSError as e:
        return {"path": path, "checked": p, "error": e.strerror}
    writable = os.access(p, os.W_OK)
    return {
        "path": path,
        "checked": p,
        "free": st.f_bavail * st.f_frsize,
        "total": st.f_blocks * st.f_frsize,
        "writable": writable,
    }


#: seconds a host name may take to resolve before a reachability check gives up (a container without a working DNS
#: server otherwise waits resolv.conf's 5 s x attempts per name; urlopen's timeout does not cover getaddrinfo)
DNS_TIMEOUT_S = 2.0


def _resolve_error(host: str, timeout: float | None = None) -> str | None:
    """None when ``host`` resolves within ``timeout`` seconds (default :data:`DNS_TIMEOUT_S`), else a one-line
    reason."""
    import socket
    import threading

    timeout = DNS_TIMEOUT_S if timeout is None else timeout
    box: dict[str, str] = {}

    def go() -> None:
        try:
            socket.getaddrinfo(host, None)
        except OSError as e:
            box["err"] = "cannot resolve %s: %s" % (host, e.strerror or e)

    t = threading.Thread(target=go, daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        return "cannot resolve %s within %g s (no DNS server answers in the container?)" % (host, timeout)
    return box.get("err")


def _http_kind(exc: BaseException, via_proxy: bool) -> str:
    """What failed in one GET, from the exception urllib raised: ``dns`` | ``connect`` | ``timeout`` | ``tls`` |
    ``proxy`` (any failure on the way to a proxy the request went through: ``urllib.request.getproxies``)."""
    import socket
    import ssl

    reason = getattr(exc, "reason", None) or exc
    if isinstance(reason, (ssl.SSLError, ssl.CertificateError)):
        return "tls"
    if via_proxy or "Tunnel connection failed" in str(reason):  # http.client's CONNECT answer (407, 502, ...)
        return "proxy"
    if isinstance(reason, socket.gaierror):
        return "dns"
    if isinstance(reason, (socket.timeout, TimeoutError)) or "timed out" in str(reason):
        return "timeout"
    return "connect"


def _http(url: str, timeout: float) -> dict[str, Any]:
    """One GET of ``url`` within ``timeout`` seconds (+ :data:`DNS_TIMEOUT_S` for the name), through the proxy
    of this environment (``http_proxy`` / ``https_proxy``, as urllib and swanlab's requests read them).
    ``{"url", "reachable", "status"?, "error"?, "kind"?, "seconds"}``; ``kind`` (:func:`_http_kind`) says what
    failed. Any HTTP answer counts as reachable, except a proxy's 407 (Proxy Authentication Required)."""
    import urllib.error
    import urllib.parse
    import urllib.request

    t0 = time.time()
    parts = urllib.parse.urlsplit(url)
    via_proxy = bool(urllib.request.getproxies().get(parts.scheme)) and not urllib.request.proxy_bypass(
        parts.hostname or ""
    )
    if parts.hostname and not via_proxy:  # a proxy resolves names itself
        err = _resolve_error(parts.hostname)
        if err:
            return {"url": url, "reachable": False, "error": err, "kind": "dns", "seconds": round(time.time() - t0, 3)}
    try:
        req = urllib.request.Request(url, headers={"User-Agent": "dapo-ops-preflight"})
        # an opener of its own: ProxyHandler reads the proxy env when built (urlopen's global opener keeps the first)
        with urllib.request.build_opener().open(req, timeout=timeout) as r:
            return {"url": url, "reachable": True, "status": r.status, "seconds": round(time.time() - t0, 3)}
    except urllib.error.HTTPError as e:  # any HTTP answer means the server is reachable
        if e.code == 407:
            return {
                "url": url,
                "reachable": False,
                "status": 407,
                "kind": "proxy",
                "seconds": round(time.time() - t0, 3),
                "error": "HTTP 407 Proxy Authentication Required",
            }
        return {"url": url, "reachable": True, "status": e.code, "seconds": round(time.time() - t0, 3)}
    except Exception as e:
        reason = getattr(e, "reason", None) or e
        return {
            "url": url,
            "reachable": False,
            "error": str(reason),
            "kind": _http_kind(e, via_proxy),
            "seconds": round(time.time() - t0, 3),
        }


def _tcp(host: str, port: int, timeout: float) -> dict[str, Any]:
    import socket

    t0 = time.time()
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return {"host": host, "port": port, "reachable": True, "open": True}
    except ConnectionRefusedError:  # the RST came back: the route works, nothing listens yet
        return {"host": host, "port": port, "reachable": True, "open": False}
    except OSError as e:
        return {
            "host": host,
            "port": port,
            "reachable": False,
            "error": e.strerror or str(e),
            "seconds": round(time.time() - t0, 3),
        }


def _port_free(port: int) -> dict[str, Any]:
    """Whether a Ray head could listen on ``port``: a listener there fails; connections of an earlier
    cluster lingering in TIME_WAIT do not (SO_REUSEADDR, as Ray's GCS server binds)."""
    import socket

    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("0.0.0.0", int(port)))
        return {"port": port, "free": True}
    except OSError as e:
        return {"port": port, "free": False, "error": e.strerror or str(e)}
    finally:
        s.close()


COMPOSE_CACHE = "/tmp/dapo-ops-preflight-cache"


def _compose_key(fp: str | None, launcher: list[str] | None = None) -> str | None:
    """Cache key of a compose check: its fingerprint (:func:`dapo_ops.agent.composefp.fingerprint`: the request,
    the checker, hydra/omegaconf versions, the bytes of every yaml it can load), this Python's path and the
    launcher it runs under. ``None`` (no cache) when there is no fingerprint."""
    import hashlib

    if fp is None:
        return None
    return hashlib.sha256("\0".join([fp, sys.executable, *(launcher or [])]).encode()).hexdigest()[:32]


def installed_config_root(rq: dict[str, Any]) -> dict[str, Any]:
    """The compose request pointed at the verl that this Python imports, when the request's own
    ``config_dir`` (``<workdir>/verl/trainer/config``: a verl source checkout in the workdir, the usual
    container layout) does not exist, e.g. verl installed as a wheel under ``PYTHONPATH=/tmp/site`` on a bare
    host (gpu/README.md). ``config_root``, ``config_dir`` and any ``hydra.searchpath=`` override move to the
    parent of the ``verl`` package found by ``importlib.util.find_spec`` (nothing is imported). Unchanged when
    the dir exists or no verl is found."""
    import importlib.util

    old_root, cdir = rq.get("config_root", ""), rq.get("config_dir", "")
    if not cdir or os.path.isdir(cdir):
        return rq
    try:
        spec = importlib.util.find_spec("verl")
    except (ImportError, ValueError):
        return rq
    locs = list(getattr(spec, "submodule_search_locations", None) or []) if spec else []
    if not locs:
        return rq
    root = os.path.dirname(os.path.abspath(locs[0]))
    rel = (
        os.path.relpath(cdir, old_root)
        if old_root and cdir.startswith(old_root.rstrip("/") + "/")
        else "verl/trainer/config"
    )
    ovs = [
        o.replace(old_root.rstrip("/") + "/verl/", root + "/verl/")
        if old_root and o.startswith("hydra.searchpath=")
        else o
        for o in rq.get("overrides") or []
    ]
    return dict(rq, config_root=root, config_dir=os.path.join(root, rel), overrides=ovs)


def _compose(comp: dict[str, Any], fp: str | None) -> dict[str, Any]:
    """Run the Hydra compose check (``python -m dapo_ops.agent.compose``, this bundle) of ``comp["request"]``
    (already through :func:`installed_config_root`) in a child Python, started under ``comp["launcher"]`` when given
    (the run spec's ``launcher``: on NPU the CANN launcher sources ``set_env.sh`` first, as for verl itself, so the
    start-up check imports verl (torch, torch_npu) the way the training does); results are cached
    in the container by content key (:func:`_compose_key` of the fingerprint ``fp`` and the launcher), so a repeated
    preflight with the same overrides against the same config files costs no compose."""
    launcher = [str(a) for a in comp.get("launcher") or []]
    key = _compose_key(fp, launcher) if comp.get("cache", True) else None
    path = os.path.join(COMPOSE_CACHE, key + ".json") if key else None
    if path and os.path.isfile(path):
        try:
            with open(path, encoding="utf-8") as fh:
                r: dict[str, Any] = json.load(fh)
            r["cached"] = True
            return r
        except (OSError, ValueError):
            pass
    r = _run(
        [*launcher, sys.executable, "-m", "dapo_ops.agent.compose"],
        timeout=float(comp.get("timeout", 120)),
        cwd=comp["request"].get("config_root"),
        stdin=json.dumps(comp["request"]),
    )
    if path and r.get("rc") == 0 and r.get("stdout", "").strip().startswith("{"):
        try:
            os.makedirs(COMPOSE_CACHE, exist_ok=True)
            tmp = path + ".tmp%d" % os.getpid()
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump(r, fh)
            os.replace(tmp, path)
        except OSError:
            pass
    return r


def _learned(path: str) -> list[dict[str, Any]]:
    """The memos under ``path`` (newest first, bounded; :mod:`dapo_ops.core.learned`); [] when there are none."""
    from dapo_ops.core import learned

    try:
        names = [n for n in os.listdir(path) if n.endswith(".json")]
    except OSError:
        return []
    files = []
    for n in names:
        try:
            st = os.stat(os.path.join(path, n))
        except OSError:
            continue
        if st.st_size <= learned.MAX_BYTES:
            files.append((st.st_mtime, n))
    out = []
    for _, n in sorted(files, reverse=True)[: learned.MAX_MEMOS]:
        try:
            with open(os.path.join(path, n), encoding="utf-8") as fh:
                m = json.load(fh)
        except (OSError, ValueError):
            continue
        if isinstance(m, dict):
            out.append(m)
    return out


def probe(req: dict[str, Any]) -> dict[str, Any]:
    """Gather the facts named by ``req`` (module docstring). Never raises: errors are data."""
    t0 = time.time()
    out: dict[str, Any] = {
        "python": platform.python_version(),
        "executable": sys.executable,
        "cwd": os.getcwd(),
        "hostname": os.uname().nodename,
        "tty": sys.stdin.isatty() if sys.stdin else False,
    }
    out["env"] = {k: os.environ[k] for k in ENV_NAMES if k in os.environ}
    out["secrets_present"] = sorted(k for k in SECRET_NAMES if os.environ.get(k))
    out["verl"] = verl_info(req.get("entry_module"))
    acc = req.get("accelerator")
    if acc:
        out["devices"] = _devices(acc)
    if req.get("model"):
        out["model"] = check_model_dir(req["model"])
    out["data"] = [check_parquet(p, req.get("prompt_key") or "prompt") for p in req.get("data") or []]
    out["disk"] = _disk(req.get("disk_path"))
    timeout = float(req.get("net_timeout", 5))
    out["http"] = {name: _http(url, timeout) for name, url in (req.get("http_urls") or {}).items()}
    out["tcp"] = [dict(_tcp(t["host"], t["port"], timeout), name=t.get("name", "")) for t in req.get("tcp") or []]
    if req.get("listen_port"):
        out["listen"] = _port_free(req["listen_port"])
    if req.get("modules"):
        out["modules"] = _modules(req["modules"])
    if req.get("cann_files"):
        out["cann"] = _cann(req["cann_files"])
    if req.get("learned_dir"):
        out["learned"] = _learned(req["learned_dir"])
    occ = req.get("occupancy")
    if occ:  # what holds the container: launch's one rule, read only (no sweep)
        try:
            out["occupancy"] = occupancy(occ["runs_dir"], occ.get("name"))
        except Exception as exc:  # facts, not verdicts: an unreadable runs_dir is said, not raised
            out["occupancy"] = {"error": "%s: %s" % (type(exc).__name__, exc)}
    comp = req.get("compose")
    if comp:
        comp = dict(comp, request=installed_config_root(comp["request"]))
        out["compose_fp"] = fingerprint(comp["request"])
        if comp.get("run", True):
            out["compose"] = _compose(comp, out["compose_fp"])
    out["elapsed_s"] = round(time.time() - t0, 3)
    return out


def main(argv: list[str] | None = None) -> int:
    """The op: ``'<request json>'`` -> the facts as the one marked JSON line; exit 0 (errors are data)."""
    argv = sys.argv[1:] if argv is None else argv
    req = json.loads(argv[0]) if argv else {}
    sys.stdout.write(MARK + json.dumps(probe(req), default=str) + "\n")
    sys.stdout.flush()
    return 0


def emit(obj: Any) -> int:
    """Print ``obj`` as the one marked JSON line (the ``prepare`` op answers this way too)."""
    sys.stdout.write(MARK + json.dumps(obj, default=str) + "\n")
    sys.stdout.flush()
    return 0


def parse_output(stdout: str) -> dict[str, Any]:
    """The probe's JSON answer from stdout; ``ValueError`` (one line) when missing."""
    for line in reversed((stdout or "").splitlines()):
        if line.startswith(MARK):
            answer: dict[str, Any] = json.loads(line[len(MARK) :])
            return answer
    raise ValueError("the preflight probe printed no result (is python3 available in the container?)")


if __name__ == "__main__":
    sys.exit(main())
