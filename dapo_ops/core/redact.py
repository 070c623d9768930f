"""Which names hold secrets (stdlib only; shipped into the container with the supervisor).

One rule for every place that must keep secrets out of what it prints or records: the dry-run plan
(:mod:`dapo_ops.control.planning`) and the supervisor's own log of the verl command (:mod:`dapo_ops.agent.supervisor`).
"""

from __future__ import annotations

import re

REDACTED = "***"
SECRET_MARKERS = ("key", "apikey", "token", "secret", "password", "passwd", "credential", "credentials")
#: a marker followed by one of these is a size, not a secret (``ppo_max_token_len_per_gpu``)
NOT_SECRET_NEXT = ("len", "length", "lengths", "budget", "count", "num", "limit")


def is_secret_name(name: str) -> bool:
    """True when a variable/override name looks secret: a ``KEY``/``TOKEN``/``SECRET``/``PASSWORD`` word.

    Words are split on ``.``, ``_``, ``-`` and ``+``; a marker followed by a size word (``len``,
    ``budget``, ...) is not a secret (``actor_rollout_ref.actor.ppo_max_token_len_per_gpu``), and
    neither is ``max_num_batched_tokens``. ``SWANLAB_API_KEY``, ``HF_TOKEN``, ``aws_secret`` are.
    """
    words = [w for w in re.split(r"[._+\-]+", str(name).lower()) if w]
    for i, w in enumerate(words):
        if w in SECRET_MARKERS or w.endswith("apikey") or w.endswith("secret"):
            nxt = words[i + 1] if i + 1 < len(words) else ""
            if nxt not in NOT_SECRET_NEXT:
                return True
    return False
