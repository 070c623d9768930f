#!/bin/bash
# Device call (n): a stall right after step 1 with fast steps (issue 42 item 2): the tiny model, 6 steps, save_freq 1,
# a reward function (gpu/hang_reward.py) that never returns from its 41st call. Expected: the supervisor calls the
# stall within 5 minutes of step 1 (not at HANG_TIMEOUT=900), its verdict names where the ranks wait (the reward
# worker in hang_reward.py), and it does not retry blindly into the same hang. Captured into $OUT/n.tgz (the run
# files, attempt logs, stacks-attempt-*.txt, nvidia-smi utilisation + memory, the processes' CPU time).
SCEN=n; . "$(dirname "$0")/lib.sh"
start_sampler; start_health_samplers
trap 'stop_sampler; stop_health_samplers' EXIT
cp "$REPO/gpu/hang_reward.py" "$ROOT/hang_reward.py"
RO=(); for o in "${RECIPE_OVERRIDES[@]}"; do case $o in reward.custom_reward_function.*) ;; *) RO+=("$o");; esac; done
RECIPE_OVERRIDES=("${RO[@]}" "reward.custom_reward_function.path=$ROOT/hang_reward.py"
                  reward.custom_reward_function.name=compute_score)
mapfile -t OV < <(ovr)
export HANG_TIMEOUT=${HANG:-900}
t0=$(date +%s)
launch n "${TINY_FLAGS[@]}" $(model_flags "$TINY") --steps "${STEPS:-6}" --save-freq 1 "${OV[@]}" || exit 1
rid=$(cat "$STATE/n.run_id"); R=$RUNS/$rid
if [ "${STOP_AFTER_1:-0}" = 1 ]; then  # today's supervisor retries a hang from scratch: keep attempt 1 (its stacks), stop
  limit=$(( ${CALL_S:-560} - 40 )); rc=124
  while [ $(( $(date +%s) - t0 )) -lt $limit ]; do
    st=$("$PY" -c 'import json,sys; r=json.load(open(sys.argv[1])); a=r.get("attempts") or [{}]; print(r.get("status"), len(a), a[0].get("ended_at") is not None)' "$R/run.json" 2>/dev/null)
    echo "$(( $(date +%s) - t0 )) s: $st"
    case "$st" in succeeded*|failed*|stopped*) rc=0; break;; esac
    [ -f "$R/stacks-attempt-1.txt" ] && case "$st" in *" True") sleep 5; break;; esac
    sleep 10
  done
  inv status -H gpu > "$OUT/status-before-stop.txt" 2>&1; inv stop -H gpu > "$OUT/stop.txt" 2>&1; collect n
else
  WATCH_S=$(( ${CALL_S:-560} - ($(date +%s) - t0) - 30 )) follow n; rc=$?
  [ "$rc" = 124 ] && { inv status -H gpu > "$OUT/status-before-stop.txt" 2>&1; inv stop -H gpu > "$OUT/stop.txt" 2>&1; collect n; }
fi
d=$OUT/$rid
cp "$R"/attempt-*.log "$R"/stacks-attempt-*.txt "$d/" 2>/dev/null
stop_sampler; stop_health_samplers
mv "$OUT"/gpu-util.csv "$OUT"/proc-cpu.txt "$OUT"/gpu-mem.csv "$OUT"/launch.txt "$OUT"/watch.txt "$OUT"/status-before-stop.txt "$OUT"/stop.txt "$d/" 2>/dev/null
tar -C "$OUT" -czf "$OUT/n.tgz" "$rid" && rm -rf "$d"
echo "scenario n: watch rc=$rc (1 = failed: expected, the workload stall verdict) in $(( $(date +%s) - t0 )) s"
