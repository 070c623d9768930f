"""File a learned-start memo from a REAL run's record, with the key a real launch of the same configuration computed.

    python3 gpu/seed_memo.py RECORD_DIR SPEC_JSON RUNS_DIR

``RECORD_DIR``: the run whose attempt on a ladder rung got past the phase that ran out (its ``run.json``; here
tests/fixtures/real-verl/tool-runs/j-learned, the H200 run 20261202-065903-4ae6, whose own supervisor filed no memo:
its launch had skipped the probe, fixed since). ``SPEC_JSON``: the spec.json of a launch of the same configuration
made now on this host by ``inv launch`` (its ``learn`` key: this host's device class, the model's config.json, the
settings), stopped right after it started. The memo is what the supervisor itself would have filed
(:func:`dapo_ops.core.learned.memo` on :func:`dapo_ops.core.learned.passed` of the record, the supervisor's
:class:`dapo_ops.agent.supervisor.learn.Memos` path), written atomically to ``RUNS_DIR/.learned/<fingerprint>.json``.
Refuses (exit 2, one line) when the record's settings are not the spec's (another configuration) or the record's
memo is not due. Used by ``gpu/j-learned.sh seed`` (gpu/README.md says what it shows and what it does not).
"""

import json
import os
import sys

from dapo_ops.agent import runfiles
from dapo_ops.core import learned


def main(argv: list[str]) -> int:
    rec_dir, spec_path, runs = argv
    rec = runfiles.read_run(rec_dir)
    with open(os.path.join(rec_dir, "spec.json")) as fh:
        rec_spec = json.load(fh)
    with open(spec_path) as fh:
        spec = json.load(fh)
    if not spec.get("learn"):
        print(f"{spec_path} has no learned-start key (the launch read no device facts): nothing to file")
        return 2
    mine, theirs = spec["settings"], rec_spec["settings"]
    diff = [k for k in learned.RUN_SETTINGS + ("extra_overrides",) if mine.get(k) != theirs.get(k)]
    if diff or spec.get("features") != rec_spec.get("features"):
        print(f"the record is another configuration (differs in {diff or 'features'}): nothing to file")
        return 2
    ran = learned.passed(rec)
    if ran is None:
        print(f"the record's run {rec.get('run_id')} did not get past an OOM on a ladder rung: nothing to file")
        return 2
    memo = learned.memo(dict(spec, run_id=rec["run_id"]), rec, ran)
    path = learned.memo_path(runs, spec["learn"]["fingerprint"])
    os.makedirs(os.path.dirname(path), exist_ok=True)
    runfiles.write_json_atomic(path, memo)
    print(f"memo filed: {path} ({', '.join(learned.rung_names(memo))} from run {rec['run_id']})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
