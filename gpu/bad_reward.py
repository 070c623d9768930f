"""Issue 29's reward: scores like len_reward.py for 40 calls, then raises KeyError (the supervisor names line 5)."""


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    return (len(solution_str) % 3) / 2.0 if _calls.append(1) or len(_calls) <= 40 else {}["answer"]


_calls: list = []  # the calls so far (this process)
