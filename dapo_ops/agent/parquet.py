"""verl RL parquet files checked **inside the container** (stdlib; ``pyarrow`` only when the footer needs it).

:func:`check_parquet`: magic bytes, row count and verl's RL schema (verl.md section 15: ``prompt`` = list of
``{"role", "content"}`` chat messages, ``data_source`` str, ``reward_model.ground_truth``; read by
``verl/utils/dataset/rl_dataset.py``), from the parquet footer by a small stdlib thrift reader (no pyarrow
import: fast, and works in any image). A footer the reader does not follow goes to ``pyarrow`` when the image has
it (imported inside :func:`check_parquet` only: pyproject.toml's import contract lists that one exception).
Layout facts: parquet-format's ``parquet.thrift`` (``FileMetaData``, ``SchemaElement``) and the file layout
``PAR1 ... <footer> <footer length:4 LE> PAR1``.
"""

from __future__ import annotations

import os
import struct
from typing import Any

RL_COLUMNS = ("prompt", "data_source", "reward_model.ground_truth")


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
        v = self.b[self.i : self.i + n]
        self.i += n
        return v

    def value(self, t: int, want: Any = None) -> Any:
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

    def struct(self, want: Any) -> dict[int, Any]:
        """Fields of a struct: ``{field id: value}`` for ids in ``want`` (others skipped); ``want`` is a dict of
        field id -> nested ``want`` (None for scalars), or :data:`_ALL` to keep every field recursively."""
        out: dict[int, Any] = {}
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


def parquet_schema(path: str) -> tuple[int, list[dict[str, Any]]]:
    """``(num_rows, top-level columns)`` from the parquet footer, stdlib only.

    Each column: ``{"name", "group": bool, "list": bool (LIST-annotated), "children": [...]}`` (the schema tree of
    parquet.thrift ``SchemaElement``: 3 repetition, 4 name, 5 num_children, 6 converted_type (3 = LIST),
    10 logicalType (field 3 = LIST)). Raises ``ValueError`` / ``IndexError`` on a corrupt footer.
    """
    meta = _Compact(_footer(path)).struct({2: _ALL, 3: None})
    elems = meta.get(2) or []
    rows = int(meta.get(3) or 0)
    pos = 0

    def build() -> dict[str, Any]:
        nonlocal pos
        e = elems[pos]
        pos += 1
        node: dict[str, Any] = {
            "name": (e.get(4) or b"").decode("utf-8", "replace"),
            "group": bool(e.get(5)),
            "list": e.get(6) == 3 or 3 in (e.get(10) or {}),
            "children": [],
        }
        for _ in range(int(e.get(5) or 0)):
            node["children"].append(build())
        return node

    root = build()
    return rows, root["children"]


def _leaf_names(node: dict[str, Any]) -> set[str]:
    out = set()
    for ch in node["children"]:
        out.add(ch["name"])
        out |= _leaf_names(ch)
    return out


def _footer_schema_problems(cols: list[dict[str, Any]], prompt_key: str) -> tuple[list[str], list[str]]:
    """(missing column paths, other problems) for the footer schema tree against verl's RL schema."""
    by = {c["name"]: c for c in cols}
    missing: list[str] = []
    probs: list[str] = []
    p = by.get(prompt_key)
    if p is None:
        missing.append(prompt_key)
    elif not (p["group"] and {"role", "content"} <= _leaf_names(p)):
        probs.append(
            f"column '{prompt_key}' is not a list of chat messages; verl expects [{{'role': ..., 'content': ...}}]"
        )
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


def _arrow_schema_problems(schema: Any, prompt_key: str) -> tuple[list[str], list[str]]:
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
            probs.append(
                f"column '{prompt_key}' is {t}, verl expects a list of chat messages [{{'role': ..., 'content': ...}}]"
            )
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


def check_parquet(path: str, prompt_key: str = "prompt") -> dict[str, Any]:
    """Check one RL parquet file as verl's ``RLHFDataset`` reads it (verl.md section 15).

    Returns a JSON-able dict: ``path``, ``exists``, ``bytes``, ``ok``, ``rows`` (int or None), ``columns``,
    ``missing`` (column paths, e.g. ``reward_model.ground_truth``), ``problems`` (one-line strings naming the
    file and the column), ``schema_checked`` (``"footer"``: the stdlib thrift reader, ``"pyarrow"`` when the footer needed it, ``""``).
    """
    out: dict[str, Any] = {
        "path": path,
        "exists": os.path.isfile(path),
        "bytes": 0,
        "ok": False,
        "rows": None,
        "columns": [],
        "missing": [],
        "problems": [],
        "schema_checked": "",
    }
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
