"""Model inputs checked **inside the container** as verl loads them (STDLIB ONLY).

- :func:`check_model_dir`: ``config.json``, weights (every shard named by ``*.index.json``; safetensors headers
  and sizes checked), tokenizer files, leftover ``.part`` files, ``max_position_embeddings``.
- :func:`file_complete`: the content check a download must pass before it gets its final name (safetensors,
  parquet: :mod:`dapo_ops.agent.parquet`, json).

Parquet data files: :mod:`dapo_ops.agent.parquet`; downloads from a hub: :mod:`dapo_ops.agent.download`. These run
through the bundle ops ``dapo_ops.agent.preflight_probe`` and ``dapo_ops.agent.download``.
"""

from __future__ import annotations

import json
import os
import struct
from typing import Any

from dapo_ops.agent.parquet import parquet_complete

WEIGHT_SUFFIXES = (".safetensors", ".bin")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "tiktoken.model", "qwen.tiktoken")


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


def _max_positions(cfg: dict[str, Any]) -> int | None:
    for c in (cfg, cfg.get("text_config") or {}, cfg.get("llm_config") or {}):
        for key in ("max_position_embeddings", "seq_length", "max_sequence_length", "n_positions"):
            v = c.get(key) if isinstance(c, dict) else None
            if isinstance(v, int) and v > 0:
                return v
    return None


def check_model_dir(path: str) -> dict[str, Any]:
    """Check a Hugging Face model directory as verl loads it (``config.json``, weights, tokenizer).

    Returns a JSON-able dict: ``path``, ``exists``, ``ok`` (bool), ``problems`` (one-line strings naming the
    file), ``weights`` (file names), ``weights_bytes`` (int, bytes), ``total_bytes``, ``tokenizer`` (names found),
    ``max_position_embeddings`` (int or None), ``model_type``, ``partial`` (``*.part`` files left), ``config``
    (``config.json``'s scalar keys and ``text_config``, when it parsed; for :mod:`dapo_ops.core.memfit`).
    """
    out: dict[str, Any] = {
        "path": path,
        "exists": os.path.isdir(path),
        "ok": False,
        "problems": [],
        "weights": [],
        "weights_bytes": 0,
        "total_bytes": 0,
        "tokenizer": [],
        "max_position_embeddings": None,
        "model_type": None,
        "partial": [],
    }
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
            out["config"] = {
                k: v for k, v in cfg.items() if not isinstance(v, (list, dict)) or k in ("text_config", "llm_config")
            }
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
