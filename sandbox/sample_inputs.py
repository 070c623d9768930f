#!/usr/bin/env python3
"""Tiny model and RL data in verl's formats (sandbox and test equipment; no torch, no downloads).

* a HF-style model dir: ``config.json`` (``max_position_embeddings`` big enough for the runbook's
  8192-token responses), tokenizer files and a hand-written ``model.safetensors``;
* RL parquet files in verl's schema (verl/utils/dataset/rl_dataset.py): ``data_source``, ``prompt`` (chat messages),
  ``ability``, ``reward_model.ground_truth``, ``extra_info.index``.

``python sandbox/sample_inputs.py DIR`` writes the runbook's default names into DIR
(``Qwen3-8B/``, ``dapo-math-17k.parquet``, ``aime-2024.parquet``): the sandbox image puts them in
``/verl``, so ``inv launch`` with the runbook's relative defaults finds them, as on a real host
where the runbook runs from the verl checkout. Never imported by ``dapo_ops`` runtime code.
"""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def safetensors_bytes(n_floats: int = 256) -> bytes:
    """A valid one-tensor safetensors file (F32, ``n_floats`` values of 0.5)."""
    header = {
        "__metadata__": {"format": "pt"},
        "model.embed.weight": {"dtype": "F32", "shape": [n_floats], "data_offsets": [0, 4 * n_floats]},
    }
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + struct.pack(f"<{n_floats}f", *([0.5] * n_floats))


def make_model(d: Path, max_pos: int = 512, n_floats: int = 256) -> Path:
    """Write a tiny Qwen2-style model dir to ``d`` (created); returns ``d``."""
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text(
        json.dumps(
            {"model_type": "qwen2", "max_position_embeddings": max_pos, "hidden_size": 16, "torch_dtype": "bfloat16"}
        )
    )
    (d / "tokenizer.json").write_text(json.dumps({"version": "1.0", "model": {"type": "BPE", "vocab": {"a": 0}}}))
    (d / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|im_end|>"}))
    (d / "model.safetensors").write_bytes(safetensors_bytes(n_floats))
    return d


def rl_table(
    n: int = 8, *, drop_ground_truth: bool = False, drop: tuple = (), data_source: str = "math_dapo"
) -> pa.Table:
    """``n`` rows of "What is i plus 2?" in verl's RL schema; ``drop`` removes columns (for negative tests)."""
    rows = []
    for i in range(n):
        rm = {"style": "rule"} if drop_ground_truth else {"style": "rule", "ground_truth": str(i + 2)}
        row = {
            "data_source": data_source,
            "prompt": [{"role": "user", "content": f"What is {i} plus 2?"}],
            "ability": "MATH",
            "reward_model": rm,
            "extra_info": {"index": i},
        }
        for k in drop:
            row.pop(k, None)
        rows.append(row)
    return pa.Table.from_pylist(rows)


def make_parquet(path: Path, n: int = 512, **kw) -> Path:
    """Write :func:`rl_table` to ``path`` (parents created); returns ``path``. ``n`` rows: by default enough for the
    runbook's batch of 64 prompts to feed 240 steps before verl's 30-epoch limit (512 // 64 x 30; preflight's
    data-feed check and the stand-in end a run there, as verl 0.9.1's V1 loop does: trainer_base.py:467)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(rl_table(n, **kw), str(path))
    return path


#: rows of the runbook's train file the sandbox image holds (``dapo-math-17k.parquet``; sandbox/README.md's figure,
#: tests/test_datafeed.py checks it against this)
TRAIN_ROWS = 1024


def write_runbook_defaults(root: Path) -> None:
    """The runbook's default inputs under ``root``: Qwen3-8B/ (tiny), dapo-math-17k.parquet, aime-2024.parquet."""
    make_model(root / "Qwen3-8B", max_pos=40960)
    # 1024 rows: one batch at verl's own default data.train_batch_size (trainer/config/data/legacy_data.yaml:42), so
    # the stand-in's direct runs at verl's defaults (tests/test_sandbox.py) feed 30 steps before the epoch limit, as
    # the real 17k-row file does; the runbook's batch of 64 gets 16 steps per epoch
    make_parquet(root / "dapo-math-17k.parquet", n=TRAIN_ROWS)
    make_parquet(root / "aime-2024.parquet", n=16, data_source="aime-2024")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: sample_inputs.py DIR")
    write_runbook_defaults(Path(sys.argv[1]))
