"""The checkpoint the next attempt resumes from, with a repair of a torn save (STDLIB ONLY, shipped).

verl 0.9.1 with ``trainer.resume_mode=auto`` reads ``<ckpt_dir>/latest_checkpointed_iteration.txt``
(``verl/trainer/ppo/ray_trainer.py`` ``_load_checkpoint`` via ``verl/utils/checkpoint/checkpoint_manager.py``
``find_latest_ckpt_path``) and loads ``<ckpt_dir>/global_step_<N>``; a kill during a save can leave the tracker
naming a directory that is missing or empty, which would fail the resumed attempt.

A checkpoint is **complete** when ``global_step_N/actor/`` holds files: verl's rotation deletes only
``global_step_N/actor`` and leaves ``data.pt`` and ``transfer_queue/`` behind
(``verl/utils/checkpoint/checkpoint_manager.py:166-194``, ``verl/trainer/ppo/v1/trainer_base.py:972-1008``), so a
non-empty ``global_step_N`` is no proof. verl's rotation list lives in process memory and starts empty at every
attempt (``checkpoint_manager.py:59``): :func:`prune_checkpoints` enforces ``trainer.max_actor_ckpt_to_keep`` across
attempts and resumes, before each attempt and at the end of a run that succeeded (a retried run's earlier attempts'
saves are nobody's to rotate otherwise).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Dict, Optional

from dapo_ops.agent.supervisor.record import log
from dapo_ops.core.runstate import TRACKER_NAME


#: verl's dataloader state in ``global_step_N`` (saved after the actor, before the tracker:
#: ``verl/trainer/ppo/v1/trainer_base.py:996-999``)
DATALOADER_STATE = "data.pt"


def saved_steps(root: Path) -> list[int]:
    """The ``N`` of every ``<root>/global_step_N`` directory, ascending (complete or not)."""
    out = []
    try:
        entries = list(root.glob("global_step_*"))
    except OSError:
        return []
    for p in entries:
        try:
            if p.is_dir():
                out.append(int(p.name[len("global_step_") :]))
        except ValueError:
            continue
    return sorted(out)


def complete(root: Path, step: int) -> bool:
    """True when ``<root>/global_step_<step>/actor`` is a directory holding at least one entry (the actor state
    verl loads on resume, ``trainer_base.py:880``; rotation deletes exactly that directory)."""
    d = root / ("global_step_%d" % step) / "actor"
    try:
        return d.is_dir() and any(d.iterdir())
    except OSError:
        return False


def prune_checkpoints(
    ckpt_dir: Optional[str], keep: Optional[int], resume_step: Optional[int], at_end: bool = False
) -> list[int]:
    """Enforce ``trainer.max_actor_ckpt_to_keep`` = ``keep`` across attempts; returns the deleted steps.

    Called before every attempt with the step that attempt resumes from (``resume_step``, from
    :func:`latest_checkpoint`), and when a run succeeds with its last checkpoint (``at_end``: the log line says so). Kept: ``global_step_<resume_step>`` always, and the newest complete checkpoints
    older than it up to ``keep`` in all. Deleted (whole ``global_step_N`` directories): saves newer than
    ``resume_step`` (cut off before verl wrote the tracker: torn, never resumed from), older complete ones beyond
    ``keep``, and rotation leftovers (``data.pt`` / ``transfer_queue/`` without ``actor/``). ``keep`` None or < 1
    (keep every save) or no ``resume_step`` (fresh start: nothing here is known to be the run's): nothing is
    deleted. A directory that cannot be removed is logged and skipped. Never raises.
    """
    if not ckpt_dir or not keep or int(keep) < 1 or resume_step is None:
        return []
    root = Path(ckpt_dir)
    steps = saved_steps(root)
    older = [s for s in steps if s < resume_step and complete(root, s)]
    kept = set(older[-(int(keep) - 1) :] if int(keep) > 1 else []) | {resume_step}
    deleted = []
    for s in steps:
        if s in kept:
            continue
        try:
            shutil.rmtree(str(root / ("global_step_%d" % s)))
            deleted.append(s)
        except OSError as e:
            log("could not delete checkpoint global_step_%d: %s" % (s, e))
    if deleted:
        log(
            "checkpoints: kept %s (max_actor_ckpt_to_keep=%d, %s global_step_%d); deleted %s"
            % (
                ", ".join("global_step_%d" % s for s in sorted(kept)),
                int(keep),
                "the run ended at" if at_end else "resuming from",
                resume_step,
                ", ".join("global_step_%d" % s for s in deleted),
            )
        )
    return deleted


def _tracker_step(root: Path) -> Optional[int]:
    """The step verl's tracker names; None without a tracker (a fresh start); -1 when it is there but holds no number.

    verl writes it in place (``open(..., "w")`` then ``write``, ``verl/trainer/ppo/v1/trainer_base.py:1021-1024``), so
    a kill between the two leaves it empty, and verl's ``int(f.read().decode())``
    (``verl/utils/checkpoint/checkpoint_manager.py:244-245``) then fails every attempt with a ValueError."""
    try:
        text = (root / TRACKER_NAME).read_bytes().decode("utf-8", "replace")
    except OSError:
        return None
    try:
        return int(text)
    except ValueError:
        return -1


def latest_checkpoint(ckpt_dir: Optional[str], repair: bool = True) -> Optional[int]:
    """The step the next attempt resumes from (verl ``resume_mode=auto`` reads
    ``<ckpt_dir>/latest_checkpointed_iteration.txt``, verl/trainer/ppo/ray_trainer.py:1052), or None (fresh start).

    When the tracker names a ``global_step_N`` that is missing or empty (a kill during save), the
    newest non-empty older ``global_step_M`` is used and, with ``repair``, the tracker is rewritten to M
    (a torn save must not fail the resumed attempt). A tracker that holds no number (torn by a kill while verl
    rewrote it, :func:`_tracker_step`) is repaired the same way, to the newest complete checkpoint.
    """
    if not ckpt_dir:
        return None
    root = Path(ckpt_dir)
    n = _tracker_step(root)
    if n is None:
        return None
    if n >= 0 and complete(root, n):
        return n
    older = [s for s in saved_steps(root) if (s < n or n < 0) and complete(root, s)]
    m = max(older) if older else None
    if repair:
        try:
            tmp = root / (TRACKER_NAME + ".tmp")
            if m is None:
                os.replace(str(root / TRACKER_NAME), str(root / (TRACKER_NAME + ".torn")))
            else:
                tmp.write_text(str(m))
                os.replace(str(tmp), str(root / TRACKER_NAME))
            torn = "global_step_%d is incomplete" % n if n >= 0 else "tracker %s is torn" % TRACKER_NAME
            log("checkpoint %s; resuming from %s" % (torn, m if m is not None else "scratch"))
        except OSError as e:
            log("could not repair checkpoint tracker: %s" % e)
    return m


def healthy_before(ckpt_dir: Optional[str], before_step: int) -> Optional[int]:
    """The step of the newest complete checkpoint saved BEFORE ``before_step`` (what :func:`roll_back` points verl
    at), or None: none is left (none saved yet, or verl's ``max_actor_ckpt_to_keep`` rotation deleted it when it
    saved the bad step). Reads only."""
    if not ckpt_dir:
        return None
    root = Path(ckpt_dir)
    healthy = [s for s in saved_steps(root) if s < before_step and complete(root, s)]
    return max(healthy) if healthy else None


def roll_back(ckpt_dir: Optional[str], before_step: int) -> Optional[int]:
    """Point verl's tracker at the newest complete checkpoint saved BEFORE ``before_step`` (the first bad step of a
    diverging run, ``dapo_ops/core/health.py``) and return its step; None when there is none (the tracker is moved
    aside to ``<tracker>.diverged``, so verl's ``resume_mode=auto`` trains from scratch:
    ``verl/trainer/ppo/v1/trainer_base.py:856-863``, ``find_latest_ckpt_path`` returns None without a tracker).

    verl saves step N before it prints step N's metrics line (``trainer_base.py:479-484`` then ``:511``), so
    ``global_step_N`` of a bad step N already holds the bad update: only ``M < N`` is healthy. Checkpoints at or
    after ``before_step`` stay on disk (the next attempt's :func:`prune_checkpoints` removes them as saves newer than
    its resume step when ``max_actor_ckpt_to_keep`` is set). Never raises: a failed write is logged."""
    if not ckpt_dir:
        return None
    root = Path(ckpt_dir)
    m = healthy_before(ckpt_dir, before_step)
    tracker = root / TRACKER_NAME
    try:
        if m is None:
            if tracker.exists():
                os.replace(str(tracker), str(root / (TRACKER_NAME + ".diverged")))
        else:
            tmp = root / (TRACKER_NAME + ".tmp")
            tmp.write_text(str(m))
            os.replace(str(tmp), str(tracker))
        log(
            "checkpoints: the metrics went bad at step %d; resuming from %s"
            % (before_step, "global_step_%d (the last healthy one)" % m if m is not None else "scratch")
        )
    except OSError as e:
        log("could not roll the checkpoint tracker back before step %d: %s" % (before_step, e))
    return m


def note_data_order(att: Dict[str, Any], ckpt_dir: Optional[str], resume_step: Optional[int]) -> bool:
    """True (logged once, and ``att["data_order_restarts"] = True`` in run.json) when attempt ``att`` resumes from a
    checkpoint without :data:`DATALOADER_STATE`: verl then warns ``No dataloader state found ..., will start from
    scratch`` and restores the weights and the step but not the dataloader's position
    (``verl/trainer/ppo/v1/trainer_base.py:892-898``): the resumed run re-reads its data from the start, prompts
    the checkpoint already trained on included. False for a fresh start or a checkpoint with its dataloader state."""
    if not ckpt_dir or resume_step is None:
        return False
    if (Path(ckpt_dir) / ("global_step_%d" % resume_step) / DATALOADER_STATE).exists():
        return False
    att["data_order_restarts"] = True
    log(
        "attempt %s resumes from global_step_%d without %s (verl's dataloader state): weights and step resume, the "
        "data order restarts from the beginning of the dataset" % (att.get("n"), resume_step, DATALOADER_STATE)
    )
    return True
