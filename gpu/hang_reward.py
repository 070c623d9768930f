"""Issue 42's stall after step 1: scores like len_reward.py for 40 calls (step 1), then never returns (user code that
hangs: the reward worker parks in time.sleep, the trainer waits for it, the device idles)."""

import time


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    _calls.append(1)
    while len(_calls) > 40:
        time.sleep(3600)
    return (len(solution_str) % 3) / 2.0


_calls: list = []  # the calls so far (this process)
