"""The checkpoint the next attempt resumes from, with a repair of a torn save (STDLIB ONLY, shipped).

verl 0.9.1 with ``trainer.resume_mode=auto`` reads ``<ckpt_dir>/latest_checkpointed_iteration.txt``
(``verl/trainer/ppo/ray_trainer.py`` ``_load_checkpoint`` via ``verl/utils/checkpoint/checkpoint_manager.py``
``find_latest_ckpt_path``) and loads ``<ckpt_dir>/global_step_<N>``; a kill during a save can leave the tracker
naming a directory that is missing or empty, which would fail the resumed attempt.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

from dapo_ops.agent.supervisor.journal import log

TRACKER_NAME = "latest_checkpointed_iteration.txt"


def latest_checkpoint(ckpt_dir: Optional[str], repair: bool = True) -> Optional[int]:
    """The step the next attempt resumes from (verl ``resume_mode=auto`` reads
    ``<ckpt_dir>/latest_checkpointed_iteration.txt``, verl/trainer/ppo/ray_trainer.py:1052), or None (fresh start).

    When the tracker names a ``global_step_N`` that is missing or empty (a kill during save), the
    newest non-empty older ``global_step_M`` is used and, with ``repair``, the tracker is rewritten to M
    (a torn save must not fail the resumed attempt).
    """
    if not ckpt_dir:
        return None
    root = Path(ckpt_dir)
    try:
        n = int((root / TRACKER_NAME).read_text().strip())
    except (OSError, ValueError):
        return None

    def ok(step: int) -> bool:
        d = root / ("global_step_%d" % step)
        try:
            return d.is_dir() and any(d.iterdir())
        except OSError:
            return False

    if ok(n):
        return n
    older = []
    for p in root.glob("global_step_*"):
        try:
            s = int(p.name.split("_")[-1])
        except ValueError:
            continue
        if s < n and ok(s):
            older.append(s)
    m = max(older) if older else None
    if repair:
        try:
            tmp = root / (TRACKER_NAME + ".tmp")
            if m is None:
                os.replace(str(root / TRACKER_NAME), str(root / (TRACKER_NAME + ".torn")))
            else:
                tmp.write_text(str(m))
                os.replace(str(tmp), str(root / TRACKER_NAME))
            log("checkpoint global_step_%d is incomplete; resuming from %s" % (n, m if m is not None else "scratch"))
        except OSError as e:
            log("could not repair checkpoint tracker: %s" % e)
    return m
