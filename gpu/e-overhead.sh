#!/bin/bash
# Device call (e), optional (one more verl run, ~3.5 min): the tool's overhead vs the same verl command by hand.
# Runs attempt 1's exact command of scenario (a)'s run by hand (bench/by_hand.py) and compares with (a)'s
# launch -> watch wall time.
SCEN=e; . "$(dirname "$0")/lib.sh"
start_sampler; trap stop_sampler EXIT
A=$(cat "$STATE/a.run_id" 2>/dev/null) || { echo "run gpu/a-success.sh first"; exit 2; }
[ "$REHEARSAL" = 1 ] && standin_cue '{"accelerator": "gpu", "step_time": 0.5}'
"$PY" "$REPO/bench/by_hand.py" "$RUNS/$A" --state "$STATE/a" --inventory "$ROOT/hosts.toml" --log "$OUT/by-hand.log" \
  | tee "$OUT/overhead.txt"
