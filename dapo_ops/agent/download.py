"""``inv prepare`` inside the container: downloads from a Hugging Face compatible hub (STDLIB ONLY;
``huggingface_hub`` when the image has it).

``PYTHONPATH=<bundle> python3 -m dapo_ops.agent.download '<request json>'`` prints the answer of :func:`prepare` as
one line prefixed by :data:`dapo_ops.agent.preflight_probe.MARK`.

:func:`fetch_file` / :func:`fetch_model` / :func:`fetch_dataset_file` download into ``<dest>.part``, resume with
``Range``, verify (:func:`dapo_ops.agent.input_files.file_complete`), then rename. A file under its final name is
therefore complete; nothing complete is downloaded again (no network call at all).

URL layout (the hub's): model file ``<endpoint>/<repo>/resolve/<rev>/<file>``, dataset file
``<endpoint>/datasets/<repo>/resolve/<rev>/<file>``, file list ``<endpoint>/api/models/<repo>``
(``siblings[].rfilename``). Proxies come from the standard ``http_proxy``/``https_proxy``/``no_proxy`` env;
``HF_TOKEN`` (a secret env of the exec, never argv) is sent as a bearer token.
"""

from __future__ import annotations

import http.client
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from dapo_ops.agent.input_files import check_model_dir, file_complete
from dapo_ops.agent.parquet import check_parquet
from dapo_ops.agent.preflight_probe import emit

DEFAULT_ENDPOINT = "https://huggingface.co"
#: Model repo files worth fetching (the rest -- README, images, .gitattributes, original/ -- is skipped).
MODEL_FILE_SUFFIXES = (".json", ".safetensors", ".model", ".txt", ".tiktoken", ".py", ".jinja")
CHUNK = 1 << 20


def hub_url(endpoint: str, repo: str, filename: str, repo_type: str = "model", revision: str = "main") -> str:
    """``<endpoint>/[datasets/]<repo>/resolve/<revision>/<filename>`` (the hub's and its mirrors' layout)."""
    base = endpoint.rstrip("/")
    kind = "" if repo_type == "model" else "datasets/"
    return f"{base}/{kind}{repo}/resolve/{revision}/{urllib.parse.quote(filename)}"


def _open(url: str, headers: dict[str, Any] | None = None, timeout: float = 60) -> Any:
    req = urllib.request.Request(url, headers={"User-Agent": "dapo-ops", **(headers or {})})
    token = os.environ.get("HF_TOKEN")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    return urllib.request.urlopen(req, timeout=timeout)


def fetch_file(url: str, dest: str, timeout: float = 60) -> dict[str, Any]:
    """Download ``url`` to ``dest`` through ``dest + ".part"``; never leaves an incomplete file under ``dest``.

    An existing ``dest`` that passes :func:`file_complete` is kept (``{"status": "present"}``, no request).
    A ``.part`` is resumed with ``Range: bytes=<size>-`` (a server answering 200 restarts it). The body must
    match ``Content-Length`` / ``Content-Range`` and pass :func:`file_complete`, then ``.part`` is renamed.
    On an interrupted transfer the ``.part`` stays (for resume) and the result has ``status: "error"``.

    Returns ``{"path", "status": present|downloaded|resumed|error, "bytes", "downloaded" (bytes this call),
    "error" (one line, on error)}``. Never raises for network errors.
    """
    res: dict[str, Any] = {"path": dest, "status": "error", "bytes": 0, "downloaded": 0, "error": ""}
    if os.path.isfile(dest) and file_complete(dest) is None:
        res.update(status="present", bytes=os.path.getsize(dest))
        return res
    os.makedirs(os.path.dirname(dest) or ".", exist_ok=True)
    part = dest + ".part"
    have = os.path.getsize(part) if os.path.isfile(part) else 0
    headers = {"Range": f"bytes={have}-"} if have else {}
    try:
        try:
            resp = _open(url, headers, timeout)
        except urllib.error.HTTPError as e:
            if e.code == 416 and have:  # range beyond the end: the .part may already be whole
                resp = None
            else:
                raise
        if resp is None:
            expected = have
            mode = "ab"
        else:
            with resp:
                status = resp.status
                if status == 206:
                    cr = resp.headers.get("Content-Range", "")  # bytes a-b/total
                    expected = int(cr.rsplit("/", 1)[1]) if "/" in cr and not cr.endswith("*") else -1
                    mode = "ab"
                else:
                    have = 0
                    cl = resp.headers.get("Content-Length")
                    expected = int(cl) if cl else -1
                    mode = "wb"
                with open(part, mode) as fh:
                    while True:
                        buf = resp.read(CHUNK)
                        if not buf:
                            break
                        fh.write(buf)
                        res["downloaded"] += len(buf)
                res["status"] = "resumed" if mode == "ab" else "downloaded"
    except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as e:
        reason = getattr(e, "reason", None) or str(e) or e.__class__.__name__
        got = os.path.getsize(part) if os.path.isfile(part) else 0
        res.update(
            status="error",
            error=f"download of {url} interrupted after {got} B: {reason}; "
            f"{os.path.basename(part)} kept for resume (run `inv prepare` again)",
        )
        return res
    got = os.path.getsize(part)
    if expected >= 0 and got != expected:
        res.update(
            status="error",
            error=f"download of {url} is {got} B, expected {expected} B; "
            f"{os.path.basename(part)} kept for resume (run `inv prepare` again)",
        )
        return res
    why = file_complete(part, kind_from=dest)  # the .part judged by the final name's rules
    if why:
        os.remove(part)
        res.update(
            status="error",
            error=f"downloaded {os.path.basename(dest)} failed verification ({why}); "
            "the partial file was removed, run `inv prepare` again",
        )
        return res
    os.replace(part, dest)
    res["bytes"] = os.path.getsize(dest)
    return res


def list_model_files(endpoint: str, repo: str, timeout: float = 30) -> list[str]:
    """File names of a model repo (``<endpoint>/api/models/<repo>`` ``siblings``), filtered to what verl loads.

    Prefers ``*.safetensors`` over ``*.bin`` when both exist. Raises ``urllib.error.URLError`` / ``ValueError``.
    """
    with _open(f"{endpoint.rstrip('/')}/api/models/{repo}", timeout=timeout) as resp:
        info = json.loads(resp.read().decode("utf-8"))
    names = [s.get("rfilename", "") for s in info.get("siblings") or []]
    names = [n for n in names if n and "/" not in n]
    keep = [n for n in names if n.endswith(MODEL_FILE_SUFFIXES)]
    if not any(n.endswith(".safetensors") for n in keep):
        keep += [n for n in names if n.endswith(".bin")]
    return sorted(set(keep))


def _use_hub() -> bool:
    if os.environ.get("DAPO_OPS_NO_HF_HUB"):
        return False
    try:
        import huggingface_hub  # noqa: F401
    except ImportError:
        return False
    return True


def fetch_model(repo: str, dest: str, endpoint: str) -> dict[str, Any]:
    """Make ``dest`` a complete model dir from hub repo ``repo``; nothing is fetched when it already is.

    Uses ``huggingface_hub.snapshot_download`` when the container has it (it honours ``HF_ENDPOINT`` and resumes),
    else :func:`list_model_files` + :func:`fetch_file` per file. Returns ``{"kind": "model", "path", "repo",
    "status": present|downloaded|error, "files": [per-file results], "downloaded" (bytes), "check": check_model_dir,
    "error"}``.
    """
    out: dict[str, Any] = {
        "kind": "model",
        "path": dest,
        "repo": repo,
        "status": "error",
        "files": [],
        "downloaded": 0,
        "error": "",
        "via": "",
    }
    before = check_model_dir(dest)
    if before["ok"]:
        out.update(status="present", check=before)
        return out
    try:
        if _use_hub():
            from huggingface_hub import snapshot_download

            out["via"] = "huggingface_hub"
            snapshot_download(
                repo_id=repo, local_dir=dest, endpoint=endpoint, allow_patterns=["*" + s for s in MODEL_FILE_SUFFIXES]
            )
        else:
            out["via"] = "urllib"
            for nm in list_model_files(endpoint, repo):
                r = fetch_file(hub_url(endpoint, repo, nm), os.path.join(dest, nm))
                out["files"].append(r)
                out["downloaded"] += r["downloaded"]
                if r["status"] == "error":
                    out["error"] = r["error"]
                    break
    except Exception as e:  # network / hub errors become data
        out["error"] = f"fetching model {repo} from {endpoint} failed: {str(e).splitlines()[0] if str(e) else e}"
    after = check_model_dir(dest)
    out["check"] = after
    if not out["error"]:
        if after["ok"]:
            out["status"] = "downloaded"
        else:
            out["error"] = after["problems"][0]
    return out


def fetch_dataset_file(
    repo: str, filename: str, dest: str, endpoint: str, prompt_key: str = "prompt"
) -> dict[str, Any]:
    """Make ``dest`` the dataset file ``filename`` of hub dataset ``repo``, then check its RL schema.

    Returns ``{"kind": "data", "path", "repo", "status": present|downloaded|error, "downloaded", "check":
    check_parquet, "error"}``. A present but schema-broken file is kept and reported (it is not re-fetched).
    """
    out: dict[str, Any] = {"kind": "data", "path": dest, "repo": repo, "status": "error", "downloaded": 0, "error": ""}
    r = fetch_file(hub_url(endpoint, repo, filename, repo_type="dataset"), dest)
    out["downloaded"] = r["downloaded"]
    out["status"] = r["status"] if r["status"] in ("present", "error") else "downloaded"
    out["error"] = r["error"]
    out["check"] = check_parquet(dest, prompt_key)
    return out


def prepare(request: dict[str, Any]) -> dict[str, Any]:
    """In-container entry for ``inv prepare``: ``request`` = ``{"endpoint", "model": {"path", "repo"} | None,
    "data": [{"path", "repo", "file"}], "prompt_key"}``. Returns ``{"items": [...], "elapsed_s"}``."""
    t0 = time.time()
    endpoint = request.get("endpoint") or os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT
    items = []
    m = request.get("model")
    if m:
        if m.get("repo"):
            items.append(fetch_model(m["repo"], m["path"], endpoint))
        else:
            chk = check_model_dir(m["path"])
            items.append(
                {
                    "kind": "model",
                    "path": m["path"],
                    "repo": "",
                    "downloaded": 0,
                    "check": chk,
                    "status": "present" if chk["ok"] else "error",
                    "error": "" if chk["ok"] else chk["problems"][0] + " (no hub repo known: pass --model-repo)",
                }
            )
    for d in request.get("data") or []:
        if d.get("repo"):
            items.append(
                fetch_dataset_file(d["repo"], d["file"], d["path"], endpoint, request.get("prompt_key", "prompt"))
            )
        else:
            chk = check_parquet(d["path"], request.get("prompt_key", "prompt"))
            items.append(
                {
                    "kind": "data",
                    "path": d["path"],
                    "repo": "",
                    "downloaded": 0,
                    "check": chk,
                    "status": "present" if chk["exists"] else "error",
                    "error": "" if chk["exists"] else chk["problems"][0] + " (no hub repo known: pass the repo flag)",
                }
            )
    return {"items": items, "endpoint": endpoint, "elapsed_s": round(time.time() - t0, 3)}


def main(argv: list[str] | None = None) -> int:
    """The op: ``'<request json>'`` -> :func:`prepare`'s answer as the one marked JSON line; exit 0."""
    argv = sys.argv[1:] if argv is None else argv
    return emit(prepare(json.loads(argv[0]) if argv else {}))


if __name__ == "__main__":
    sys.exit(main())
