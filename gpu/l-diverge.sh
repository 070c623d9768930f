#!/bin/bash
# Device call (l): a diverged run, as issue 42 saw it on the H200 (the tool's own tasks; today's supervisor). The tiny
# model, 6 steps, save_freq 1, actor lr 1e30 (LR=): step 1 prints `actor/lr:1e+30`; what follows (NaN metrics,
# `WARN: grad_norm is not finite`, DAPO filter_groups generating for ever, a hang) is what this call records.
# Expected (issue 42): the health watch flags `actor/lr` 1e+30 at step 1, stops the attempt, retries once from the
# last checkpoint before it, flags it again and ends the run `diverged` (no third attempt). A run still going at the
# call's end is left to the detached supervisor (`STOP_AT_END=1` stops it): `bash gpu/watch.sh l` goes on. Captured: the run files, attempt-1.log, stacks-attempt-1.txt, nvidia-smi
# utilisation + memory every 1 s, the run's processes' CPU time every 5 s -> $OUT/l.tgz (one file: the device tool
# brings back at most 8).
SCEN=l; . "$(dirname "$0")/lib.sh"
start_sampler; start_health_samplers
trap 'stop_sampler; stop_health_samplers' EXIT
RO=(); for o in "${RECIPE_OVERRIDES[@]}"; do case $o in actor_rollout_ref.actor.optim.lr=*) ;; *) RO+=("$o");; esac; done
RECIPE_OVERRIDES=("${RO[@]}" "actor_rollout_ref.actor.optim.lr=${LR:-1e30}")
mapfile -t OV < <(ovr)
export HANG_TIMEOUT=${HANG:-900}  # a cold H200 took > 240 s to reach step 1 (2026-12-07, l-diverge attempt 1)
t0=$(date +%s)
launch l "${TINY_FLAGS[@]}" $(model_flags "$TINY") --steps "${STEPS:-6}" --save-freq 1 "${OV[@]}" || exit 1
rid=$(cat "$STATE/l.run_id"); R=$RUNS/$rid
limit=$(( ${CALL_S:-540} - 40 ))
while [ $(( $(date +%s) - t0 )) -lt $limit ]; do
  st=$("$PY" -c 'import json,sys; r=json.load(open(sys.argv[1])); a=r.get("attempts") or [{}]; print(r.get("status"), len(a), a[0].get("ended_at") is not None)' "$R/run.json" 2>/dev/null)
  echo "$(( $(date +%s) - t0 )) s: $st step $(grep -c '^step:' "$R/train.log" 2>/dev/null)"
  case "$st" in succeeded*|failed*|stopped*) break;; esac
  sleep 10
done
inv status -H gpu > "$OUT/status-before-stop.txt" 2>&1
case "$st" in
  succeeded*|failed*|stopped*) ;;
  *) if [ "${STOP_AT_END:-0}" = 1 ]; then inv stop -H gpu > "$OUT/stop.txt" 2>&1
     else echo "still running at the call's end: the detached supervisor goes on; next call: bash gpu/watch.sh l"; fi;;
esac
collect l
d=$OUT/$rid
cp "$R"/attempt-*.log "$R"/stacks-attempt-*.txt "$d/" 2>/dev/null
stop_sampler; stop_health_samplers
mv "$OUT/gpu-util.csv" "$OUT/proc-cpu.txt" "$OUT/gpu-mem.csv" "$OUT/launch.txt" "$OUT/status-before-stop.txt" "$OUT/stop.txt" "$d/" 2>/dev/null
tar -C "$OUT" -czf "$OUT/l.tgz" "$rid" && rm -rf "$d"
ls -la "$OUT"; echo "scenario l done in $(( $(date +%s) - t0 )) s"
