#!/bin/bash
# Device calls (j), issue 33 item 5: a learned start on the real GPU, through the tool's own tasks.
#   bash gpu/j-learned.sh 1   first launch of the configuration: the rollout's DEFAULT share (0.6) does not fit
#                             next to the actor at the weight sync -> real OOM -> ladder rung rollout-util
#                             (0.6 -> 0.5) -> the attempt on the rung logs its step -> the supervisor files the memo
#                             (<runs>/.learned/<fingerprint>.json)
#   bash gpu/j-learned.sh 2   the same configuration launched again: the plan starts on the learned rung
#                             (source learned: the launch's `start:` line, run.json's memory_rungs), and succeeds
#   bash gpu/j-learned.sh seed  instead of part 1 (~60 s instead of ~10.5 min): file the memo from the REAL record
#                             of part 1's run of 2026-12-02 (tests/fixtures/real-verl/tool-runs/j-learned, whose
#                             supervisor filed none: its launch skipped the probe, fixed since) with the key a launch
#                             made now computes (launched, stopped at once: gpu/seed_memo.py), then part 2
#                             (SEED_FROM=<run dir> takes another record, e.g. the rehearsal's own part 1)
# The model: Qwen3-4B's config.json shape with 48 layers instead of 36 (5.23 B params, random weights, the real
# 151 936-id vocabulary; gpu/make_tiny.py), so that the default rollout share puts the weight sync where the recipe's
# scenario (c) put it with an explicit 0.9 (memfit: weight-sync 145.5 GiB at 0.6, 131.6 at 0.5, device 139.8).
# The OOM has to come from a DEFAULT: a memo never overrides a setting the user set (core/learned.py conflicts), so
# GPU_MEMORY_UTILIZATION is unset here. Part 1 runs with MEMORY_FIT=warn (the estimate reports, the real OOM
# happens); part 2 with the default MEMORY_FIT (start): the memo wins over the estimate.
# No checkpoints (save_freq -1: a 5 B actor's optimizer state is ~63 GB of /tmp): the attempt on the rung starts over.
PART=${1:?usage: gpu/j-learned.sh 1|2}
GPU_USER_FEATURES=-flash_attn   # the default path: dynamic batch, remove padding, gradient checkpointing on (sdpa)
SCEN=j$PART; . "$(dirname "$0")/lib.sh"
unset GPU_MEMORY_UTILIZATION
export MAX_PROMPT_LENGTH=512 MAX_RESPONSE_LENGTH=256 TRAIN_BATCH_SIZE=4 PPO_MINI_BATCH_SIZE=4 ROLLOUT_N=4 \
  MICRO_BATCH_SIZE=4 MAX_OOM_RETRIES=3
M=/tmp/p/qwen3-5b-48l; [ "$REHEARSAL" = 1 ] && M=$BIG
if [ "$REHEARSAL" != 1 ] && [ ! -f "$M/model/config.json" ]; then
  t=$(date +%s)
  python3 "$REPO/gpu/make_tiny.py" "$M" 2560 48 9728 32 8 151936 qwen3 1 128 > "$OUT/build.txt" 2>&1 \
    || { echo "build failed"; tail -3 "$OUT/build.txt"; exit 1; }
  echo "built $M in $(( $(date +%s) - t )) s: $(grep params "$OUT/build.txt")"
fi
mapfile -t OV < <(ovr)
ARGS=("${TINY_FLAGS[@]}" $(model_flags "$M") --steps 2 --save-freq -1 "${OV[@]}")
start_sampler; trap stop_sampler EXIT
if [ "$PART" = 1 ]; then
  standin_cue '{"accelerator": "gpu", "step_time": 0.5, "failure": {"kind": "oom-device", "phase": "update_weights", "step": 1, "times": 1}}'
  MEMORY_FIT=warn launch j "${ARGS[@]}" || exit 1
else
  standin_cue '{"accelerator": "gpu", "step_time": 0.5}'
  if [ "$PART" = seed ]; then
    launch jkey "${ARGS[@]}" > "$OUT/launch-key.txt" 2>&1 || { tail -3 "$OUT/launch-key.txt"; exit 1; }
    rid=$(cat "$STATE/jkey.run_id"); inv stop -H gpu --run "$rid" | tail -1
    for _ in $(seq 60); do  # the next launch's leftover check wants the device free again
      [ -z "$("$SMI" --query-compute-apps=pid --format=csv,noheader 2>/dev/null)" ] && break; sleep 1; done
    SEED_FROM=${SEED_FROM:-$REPO/tests/fixtures/real-verl/tool-runs/j-learned}
    "$PY" "$REPO/gpu/seed_memo.py" "$SEED_FROM" "$RUNS/$rid/spec.json" "$RUNS" || exit 1
  fi
  launch j "${ARGS[@]}" || exit 1
fi
WATCH_S=${WATCH_S:-480} follow j; rc=$?
mkdir -p "$OUT/learned"; cp "$RUNS"/.learned/*.json "$OUT/learned/" 2>/dev/null
echo "learned memos: $(ls "$OUT/learned" | tr '\n' ' ')"
echo "scenario j$PART: watch rc=$rc (0 succeeded, 124 still running: call gpu/watch.sh j)"
