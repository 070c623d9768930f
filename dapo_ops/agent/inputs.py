"""Model and data inputs: checks and downloads that run **inside the container** (stdlib; pyarrow if present).

This file is shipped into the container as source (see :func:`dapo_ops.agent.preflight_probe.build_script`), so it
imports only the stdlib at module level; ``pyarrow`` and ``huggingface_hub`` are imported lazily when present.

- :func:`check_model_dir`: ``config.json``, weights (every shard named by ``*.index.json``; safetensors headers
  and sizes checked), tokenizer files, leftover ``.part`` files, ``max_position_embeddings``.
- :func:`check_parquet`: magic bytes, row count and verl's RL schema (verl.md section 15: ``prompt`` = list of
  ``{"role", "content"}`` chat messages, ``data_source`` str, ``reward_model.ground_truth``), read from the parquet
  footer by a small stdlib thrift reader (no pyarrow import: fast, and works in any image).
- :func:`fetch_file` / :func:`fetch_model` / :func:`fetch_dataset_file`: download from a Hugging Face compatible
  hub (``HF_ENDPOINT`` mirrors too) into ``<dest>.part``, resume with ``Range``, verify, then rename. A file under
  its final name is therefore complete; nothing complete is downloaded again (no network call at all).

URL layout (the hub's): model file ``<endpoint>/<repo>/resolve/<rev>/<file>``, dataset file
``<endpoint>/datasets/<repo>/resolve/<rev>/<file>``, file list ``<endpoint>/api/models/<repo>``
(``siblings[].rfilename``). Proxies come from the standard ``http_proxy``/``https_proxy``/``no_proxy`` env.
"""

from __future__ import annotations

import http.client
import json
import os
import struct
import time
import urllib.error
import urllib.request

DEFAULT_ENDPOINT = "https://huggingface.co"
WEIGHT_SUFFIXES = (".safetensors", ".bin")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "tiktoken.model", "qwen.tiktoken")
#: Model repo files worth fetching (the rest -- README, images, .gitattributes, original/ -- is skipped).
MODEL_FILE_SUFFIXES = (".json", ".safetensors", ".model", ".txt", ".tiktoken", ".py", ".jinja")
RL_COLUMNS = ("prompt", "data_source", "reward_model.ground_truth")
CHUNK = 1 << 20


# ------------------------------------------------------------------------------------------ verification

def safetensors_complete(path: str) -> str | None:
    """``None`` when the safetensors file is whole, else a one-line reason.

    Format: 8-byte little-endian header length N, N bytes of JSON header, then the data; the file size must be
    ``8 + N + max(data_offsets end)`` (safetensors spec).
    """
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as fh:
            raw = fh.read(8)
            if len(raw) < 8:
                return "shorter than the 8-byte safetensors header"
            (n,) = struct.unpack("<Q", raw)
            if n > 100 << 20 or 8 + n > size:
                return "safetensors header length is beyond the end of the file (truncated)"
            header = json.loads(fh.read(n).decode("utf-8"))
    except (OSError, ValueError, UnicodeDecodeError) as e:
        return f"unreadable safetensors header ({e.__class__.__name__})"
    end = 0
    for k, v in header.items():
        if k == "__metadata__" or not isinstance(v, dict):
            continue
        offs = v.get("data_offsets") or [0, 0]
        end = max(end, int(offs[1]))
    if size != 8 + n + end:
        return f"size {size} B, header says {8 + n + end} B (truncated or padded)"
    return None


def parquet_complete(path: str) -> str | None:
    """``None`` when the file starts and ends with the parquet magic ``PAR1`` and its footer fits, else why."""
    try:
        size = os.path.getsize(path)
        if size < 12:
            return "too small to be parquet"
        with open(path, "rb") as fh:
            head = fh.read(4)
            fh.seek(size - 8)
            tail = fh.read(8)
    except OSError as e:
        return f"unreadable ({e.strerror})"
    if head != b"PAR1":
        return "does not start with the parquet magic PAR1 (not a parquet file)"
    if tail[4:] != b"PAR1":
        return "does not end with the parquet magic PAR1 (truncated download?)"
    (flen,) = struct.unpack("<I", tail[:4])
    if flen + 12 > size:
        return "parquet footer length exceeds the file (truncated)"
    return None


def file_complete(path: str, kind_from: str | None = None) -> str | None:
    """Content check by type: safetensors, parquet, json; other files pass when non-empty.

    ``kind_from``: the name whose ending picks the rules (a ``.part`` download is judged by its
    final name); default ``path``. Returns None when complete, else a short reason.
    """
    name = kind_from or path
    if name.endswith(".safetensors"):
        return safetensors_complete(path)
    if name.endswith(".parquet"):
        return parquet_complete(path)
    if name.endswith(".json"):
        try:
            with open(path, "rb") as fh:
                json.loads(fh.read().decode("utf-8"))
        except (OSError, ValueError, UnicodeDecodeError) as e:
            return f"not valid JSON ({e.__class__.__name__})"
        return None
    try:
        return None if os.path.getsize(path) > 0 else "empty file"
    except OSError as e:
        return f"unreadable ({e.strerror})"


# ------------------------------------------------------------------------------------------ model dir

def _max_positions(cfg: dict) -> int | None:
    for c in (cfg, cfg.get("text_config") or {}, cfg.get("llm_config") or {}):
        for key in ("max_position_embeddings", "seq_length", "max_sequence_length", "n_positions"):
            v = c.get(key) if isinstance(c, dict) else None
            if isinstance(v, int) and v > 0:
                return v
    return None


def check_model_dir(path: str) -> dict:
    """Check a Hugging Face model directory as verl loads it (``config.json``, weights, tokenizer).

    Returns a JSON-able dict: ``path``, ``exists``, ``ok`` (bool), ``problems`` (one-line strings naming the
    file), ``weights`` (file names), ``weights_bytes`` (int, bytes), ``total_bytes``, ``tokenizer`` (names found),
    ``max_position_embeddings`` (int or None), ``model_type``, ``partial`` (``*.part`` files left), ``config``
    (``config.json``'s scalar keys and ``text_config``, when it parsed; for :mod:`dapo_ops.core.memfit`).
    """
    out: dict = {"path": path, "exists": os.path.isdir(path), "ok": False, "problems": [], "weights": [],
                 "weights_bytes": 0, "total_bytes": 0, "tokenizer": [], "max_position_embeddings": None,
                 "model_type": None, "partial": []}
    probs = out["problems"]
    if not out["exists"]:
        probs.append(f"model dir {path} does not exist" if not os.path.exists(path) else f"{path} is not a directory")
        return out
    try:
        names = sorted(os.listdir(path))
    except OSError as e:
        probs.append(f"cannot list {path}: {e.strerror}")
        return out
    for nm in names:
        fp = os.path.join(path, nm)
        if os.path.isfile(fp):
            out["total_bytes"] += os.path.getsize(fp)
    out["partial"] = [nm for nm in names if nm.endswith(".part")]
    cfg_path = os.path.join(path, "config.json")
    if not os.path.isfile(cfg_path):
        probs.append(f"no config.json in {path}")
    else:
        try:
            with open(cfg_path, encoding="utf-8") as fh:
                cfg = json.load(fh)
            out["max_position_embeddings"] = _max_positions(cfg)
            out["model_type"] = cfg.get("model_type")
            # scalars (+ the text sub-config): dapo_ops.core.memfit.model_facts picks what the memory-fit estimate needs
            out["config"] = {k: v for k, v in cfg.items() if not isinstance(v, (list, dict)) or k in ("text_config", "llm_config")}
        except (OSError, ValueError) as e:
            probs.append(f"{cfg_path} is not valid JSON ({e.__class__.__name__})")
    weights = [nm for nm in names if nm.endswith(WEIGHT_SUFFIXES) and not nm.startswith("training_args")]
    out["weights"] = weights
    out["weights_bytes"] = sum(os.path.getsize(os.path.join(path, nm)) for nm in weights)
    if not weights:
        probs.append(f"no weight files (*.safetensors, *.bin) in {path}")
    for idx_name in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
        ip = os.path.join(path, idx_name)
        if os.path.isfile(ip):
            try:
                with open(ip, encoding="utf-8") as fh:
                    shards = sorted(set((json.load(fh).get("weight_map") or {}).values()))
            except (OSError, ValueError):
                probs.append(f"{idx_name} in {path} is not valid JSON")
                continue
            for sh in shards:
                if not os.path.isfile(os.path.join(path, sh)):
                    probs.append(f"weight shard {sh} named in {idx_name} is missing from {path}")
    for nm in weights:
        if nm.endswith(".safetensors"):
            why = safetensors_complete(os.path.join(path, nm))
            if why:
                probs.append(f"weight file {nm} is incomplete: {why}")
    out["tokenizer"] = [nm for nm in TOKENIZER_FILES if os.path.isfile(os.path.join(path, nm))]
    if not out["tokenizer"]:
        probs.append(f"no tokenizer (tokenizer.json, tokenizer.model or vocab.json) in {path}")
    for nm in out["partial"]:
        probs.append(f"partial download {nm} in {path}: run `inv prepare` to resume it")
    out["ok"] = not probs
    return out


# ------------------------------------------------------------------------------------------ parquet

def _footer(path: str) -> bytes:
    """The thrift-encoded ``FileMetaData`` of a parquet file (the bytes before ``<len:4><PAR1>``)."""
    size = os.path.getsize(path)
    with open(path, "rb") as fh:
        fh.seek(size - 8)
        (flen,) = struct.unpack("<I", fh.read(4))
        fh.seek(size - 8 - flen)
        return fh.read(flen)


class _Compact:
    """Minimal Thrift compact-protocol reader: enough to walk parquet's ``FileMetaData`` (parquet.thrift)."""

    def __init__(self, data: bytes):
        self.b = data
        self.i = 0

    def byte(self) -> int:
        v = self.b[self.i]
        self.i += 1
        return v

    def varint(self) -> int:
        shift = out = 0
        while True:
            x = self.byte()
            out |= (x & 0x7F) << shift
            if not x & 0x80:
                return out
            shift += 7

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def binary(self) -> bytes:
        n = self.varint()
        v = self.b[self.i:self.i + n]
        self.i += n
        return v

    def value(self, t: int, want=None):
        """Read (or skip) one value of compact type ``t``; ``want`` maps struct field ids to readers."""
        if t in (1, 2):
            return t == 1
        if t == 3:
            return self.byte()
        if t in (4, 5, 6):
            return self.zigzag()
        if t == 7:
            self.i += 8
            return None
        if t == 8:
            return self.binary()
        if t in (9, 10):
            h = self.byte()
            n, et = h >> 4, h & 0x0F
            if n == 15:
                n = self.varint()
            return [self.byte() == 1 if et in (1, 2) else self.value(et, want) for _ in range(n)]
        if t == 11:
            n = self.varint()
            if n:
                kv = self.byte()
                for _ in range(n):
                    self.value(kv >> 4)
                    self.value(kv & 0x0F)
            return None
        if t == 12:
            return self.struct(want if want is not None else {})
        raise ValueError(f"unknown thrift compact type {t}")

    def struct(self, want) -> dict:
        """Fields of a struct: ``{field id: value}`` for ids in ``want`` (others skipped); ``want`` is a dict of
        field id -> nested ``want`` (None for scalars), or :data:`_ALL` to keep every field recursively."""
        out: dict = {}
        fid = 0
        while True:
            h = self.byte()
            if h == 0:
                return out
            t = h & 0x0F
            delta = h >> 4
            fid = fid + delta if delta else self.zigzag()
            keep = want is _ALL or fid in want
            v = self.value(t, _ALL if want is _ALL else (want.get(fid) if keep else None))
            if keep:
                out[fid] = v


_ALL = object()


def parquet_schema(path: str) -> tuple[int, list[dict]]:
    """``(num_rows, top-level columns)`` from the parquet footer, stdlib only.

    Each column: ``{"name", "group": bool, "list": bool (LIST-annotated), "children": [...]}`` (the schema tree of
    parquet.thrift ``SchemaElement``: 3 repetition, 4 name, 5 num_children, 6 converted_type (3 = LIST),
    10 logicalType (field 3 = LIST)). Raises ``ValueError`` / ``IndexError`` on a corrupt footer.
    """
    meta = _Compact(_footer(path)).struct({2: _ALL, 3: None})
    elems = meta.get(2) or []
    rows = int(meta.get(3) or 0)
    pos = 0

    def build() -> dict:
        nonlocal pos
        e = elems[pos]
        pos += 1
        node = {"name": (e.get(4) or b"").decode("utf-8", "replace"), "group": bool(e.get(5)),
                "list": e.get(6) == 3 or 3 in (e.get(10) or {}), "children": []}
        for _ in range(int(e.get(5) or 0)):
            node["children"].append(build())
        return node

    root = build()
    return rows, root["children"]


def _leaf_names(node: dict) -> set:
    out = set()
    for ch in node["children"]:
        out.add(ch["name"])
        out |= _leaf_names(ch)
    return out


def _footer_schema_problems(cols: list[dict], prompt_key: str) -> tuple[list[str], list[str]]:
    """(missing column paths, other problems) for the footer schema tree against verl's RL schema."""
    by = {c["name"]: c for c in cols}
    missing: list[str] = []
    probs: list[str] = []
    p = by.get(prompt_key)
    if p is None:
        missing.append(prompt_key)
    elif not (p["group"] and {"role", "content"} <= _leaf_names(p)):
        probs.append(f"column '{prompt_key}' is not a list of chat messages; verl expects "
                     "[{'role': ..., 'content': ...}]")
    if "data_source" not in by:
        missing.append("data_source")
    rm = by.get("reward_model")
    if rm is None:
        missing.append("reward_model.ground_truth")
    elif not rm["group"]:
        probs.append("column 'reward_model' is not a struct; verl expects {'ground_truth': ...}")
    elif any(c["name"] == "key_value" for c in rm["children"]):
        pass  # map<str, str>: the key is per row; verl reads row["reward_model"]["ground_truth"]
    elif "ground_truth" not in {c["name"] for c in rm["children"]}:
        missing.append("reward_model.ground_truth")
    return missing, probs


def _arrow_schema_problems(schema, prompt_key: str) -> tuple[list[str], list[str]]:
    """(missing column paths, other problems) for a pyarrow schema against verl's RL schema."""
    import pyarrow as pa  # noqa: F401  (types module lives on pa)

    missing: list[str] = []
    probs: list[str] = []
    names = schema.names
    if prompt_key not in names:
        missing.append(prompt_key)
    else:
        t = schema.field(prompt_key).type
        ok = False
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            vt = t.value_type
            if pa.types.is_struct(vt):
                fields = {vt.field(i).name for i in range(vt.num_fields)}
                ok = {"role", "content"} <= fields
        if not ok:
            probs.append(f"column '{prompt_key}' is {t}, verl expects a list of chat messages "
                         "[{'role': ..., 'content': ...}]")
    if "data_source" not in names:
        missing.append("data_source")
    if "reward_model" not in names:
        missing.append("reward_model.ground_truth")
    else:
        t = schema.field("reward_model").type
        if pa.types.is_struct(t):
            if "ground_truth" not in {t.field(i).name for i in range(t.num_fields)}:
                missing.append("reward_model.ground_truth")
        elif pa.types.is_map(t):
            pass  # map<str, str>: key presence is per row; verl reads row["reward_model"]["ground_truth"]
        else:
            probs.append(f"column 'reward_model' is {t}, verl expects a struct with 'ground_truth'")
    return missing, probs


def check_parquet(path: str, prompt_key: str = "prompt") -> dict:
    """Check one RL parquet file as verl's ``RLHFDataset`` reads it (verl.md section 15).

    Returns a JSON-able dict: ``path``, ``exists``, ``bytes``, ``ok``, ``rows`` (int or None), ``columns``,
    ``missing`` (column paths, e.g. ``reward_model.ground_truth``), ``problems`` (one-line strings naming the
    file and the column), ``schema_checked`` (``"footer"``: the stdlib thrift reader, ``"pyarrow"`` when the footer needed it, ``""``).
    """
    out: dict = {"path": path, "exists": os.path.isfile(path), "bytes": 0, "ok": False, "rows": None,
                 "columns": [], "missing": [], "problems": [], "schema_checked": ""}
    probs = out["problems"]
    if not out["exists"]:
        probs.append(f"data file {path} does not exist" if not os.path.exists(path) else f"{path} is not a file")
        if os.path.isfile(path + ".part"):
            probs[-1] += f" (a partial download {os.path.basename(path)}.part is there: run `inv prepare`)"
        return out
    out["bytes"] = os.path.getsize(path)
    why = parquet_complete(path)
    if why:
        probs.append(f"data file {path} {why}")
        return out
    try:
        rows, cols = parquet_schema(path)
        out["rows"] = rows
        out["columns"] = [c["name"] for c in cols]
        missing, more = _footer_schema_problems(cols, prompt_key)
        out["schema_checked"] = "footer"
    except (ValueError, IndexError, struct.error, UnicodeDecodeError):
        try:  # a footer this reader does not follow: let pyarrow judge it
            import pyarrow.parquet as pq

            pf = pq.ParquetFile(path)
            out["rows"] = pf.metadata.num_rows
            out["columns"] = list(pf.schema_arrow.names)
            missing, more = _arrow_schema_problems(pf.schema_arrow, prompt_key)
            out["schema_checked"] = "pyarrow"
        except ImportError:
            probs.append(f"data file {path} has a parquet footer this check cannot read (and pyarrow is absent)")
            return out
        except Exception as e:  # pyarrow raises several types for corrupt files
            probs.append(f"data file {path} is not readable parquet: {str(e).splitlines()[0] if str(e) else e}")
            return out
    out["missing"] = missing
    for col in missing:
        probs.append(f"data file {path} has no column '{col}' (verl's RL schema needs {', '.join(RL_COLUMNS)})")
    probs.extend(f"data file {path}: {p}" for p in more)
    if out["rows"] == 0:
        probs.append(f"data file {path} has 0 rows")
    out["ok"] = not probs
    return out


# ------------------------------------------------------------------------------------------ downloads

def hub_url(endpoint: str, repo: str, filename: str, repo_type: str = "model", revision: str = "main") -> str:
    """``<endpoint>/[datasets/]<repo>/resolve/<revision>/<filename>`` (the hub's and its mirrors' layout)."""
    base = endpoint.rstrip("/")
    kind = "" if repo_type == "model" else "datasets/"
    return f"{base}/{kind}{repo}/resolve/{revision}/{urllib.request.quote(filename)}"


def _open(url: str, headers: dict | None = None, timeout: float = 60):
    req = urllib.request.Request(url, headers={"User-Agent": "dapo-ops", **(headers or {})})
    token = os.environ.get("HF_TOKEN")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    return urllib.request.urlopen(req, timeout=timeout)


def fetch_file(url: str, dest: str, timeout: float = 60) -> dict:
    """Download ``url`` to ``dest`` through ``dest + ".part"``; never leaves an incomplete file under ``dest``.

    An existing ``dest`` that passes :func:`file_complete` is kept (``{"status": "present"}``, no request).
    A ``.part`` is resumed with ``Range: bytes=<size>-`` (a server answering 200 restarts it). The body must
    match ``Content-Length`` / ``Content-Range`` and pass :func:`file_complete`, then ``.part`` is renamed.
    On an interrupted transfer the ``.part`` stays (for resume) and the result has ``status: "error"``.

    Returns ``{"path", "status": present|downloaded|resumed|error, "bytes", "downloaded" (bytes this call),
    "error" (one line, on error)}``. Never raises for network errors.
    """
    res = {"path": dest, "status": "error", "bytes": 0, "downloaded": 0, "error": ""}
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
        res.update(status="error", error=f"download of {url} interrupted after {got} B: {reason}; "
                                         f"{os.path.basename(part)} kept for resume (run `inv prepare` again)")
        return res
    got = os.path.getsize(part)
    if expected >= 0 and got != expected:
        res.update(status="error", error=f"download of {url} is {got} B, expected {expected} B; "
                                         f"{os.path.basename(part)} kept for resume (run `inv prepare` again)")
        return res
    why = file_complete(part, kind_from=dest)  # the .part judged by the final name's rules
    if why:
        os.remove(part)
        res.update(status="error", error=f"downloaded {os.path.basename(dest)} failed verification ({why}); "
                                         "the partial file was removed, run `inv prepare` again")
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


def fetch_model(repo: str, dest: str, endpoint: str) -> dict:
    """Make ``dest`` a complete model dir from hub repo ``repo``; nothing is fetched when it already is.

    Uses ``huggingface_hub.snapshot_download`` when the container has it (it honours ``HF_ENDPOINT`` and resumes),
    else :func:`list_model_files` + :func:`fetch_file` per file. Returns ``{"kind": "model", "path", "repo",
    "status": present|downloaded|error, "files": [per-file results], "downloaded" (bytes), "check": check_model_dir,
    "error"}``.
    """
    out: dict = {"kind": "model", "path": dest, "repo": repo, "status": "error", "files": [], "downloaded": 0,
                 "error": "", "via": ""}
    before = check_model_dir(dest)
    if before["ok"]:
        out.update(status="present", check=before)
        return out
    try:
        if _use_hub():
            from huggingface_hub import snapshot_download
            out["via"] = "huggingface_hub"
            snapshot_download(repo_id=repo, local_dir=dest, endpoint=endpoint,
                              allow_patterns=["*" + s for s in MODEL_FILE_SUFFIXES])
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


def fetch_dataset_file(repo: str, filename: str, dest: str, endpoint: str, prompt_key: str = "prompt") -> dict:
    """Make ``dest`` the dataset file ``filename`` of hub dataset ``repo``, then check its RL schema.

    Returns ``{"kind": "data", "path", "repo", "status": present|downloaded|error, "downloaded", "check":
    check_parquet, "error"}``. A present but schema-broken file is kept and reported (it is not re-fetched).
    """
    out: dict = {"kind": "data", "path": dest, "repo": repo, "status": "error", "downloaded": 0, "error": ""}
    r = fetch_file(hub_url(endpoint, repo, filename, repo_type="dataset"), dest)
    out["downloaded"] = r["downloaded"]
    out["status"] = r["status"] if r["status"] in ("present", "error") else "downloaded"
    out["error"] = r["error"]
    out["check"] = check_parquet(dest, prompt_key)
    return out


def prepare(request: dict) -> dict:
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
            items.append({"kind": "model", "path": m["path"], "repo": "", "downloaded": 0, "check": chk,
                          "status": "present" if chk["ok"] else "error",
                          "error": "" if chk["ok"] else chk["problems"][0] + " (no hub repo known: pass --model-repo)"})
    for d in request.get("data") or []:
        if d.get("repo"):
            items.append(fetch_dataset_file(d["repo"], d["file"], d["path"], endpoint, request.get("prompt_key", "prompt")))
        else:
            chk = check_parquet(d["path"], request.get("prompt_key", "prompt"))
            items.append({"kind": "data", "path": d["path"], "repo": "", "downloaded": 0, "check": chk,
                          "status": "present" if chk["exists"] else "error",
                          "error": "" if chk["exists"] else chk["problems"][0] + " (no hub repo known: pass the repo flag)"})
    return {"items": items, "endpoint": endpoint, "elapsed_s": round(time.time() - t0, 3)}
