"""A reward function that breaks on its 41st call (issue 29): the first 40 calls score like len_reward.py, the 41st
and every later one raise KeyError; verl 0.9.1's agent loop retries the sample for ever (the supervisor names line 5)."""

calls = []


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    return (len(solution_str) % 3) / 2.0 if calls.append(1) or len(calls) <= 40 else {}["answer"]
