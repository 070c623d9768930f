#!/bin/bash
# Device call (i), issue 33 item 3: memory-fit HOLDOUT rows (never used to set a constant) on real Qwen shapes.
#   bash gpu/i-holdout.sh WAVE        WAVE = 1 | 2 | 3 (one device call each, <= 9 min)
# Each wave launches its configurations AT ONCE through the tool (`inv launch`, default plan: the performance
# features on with sdpa attention, dynamic batch with the tool's token budgets, gradient checkpointing, remove
# padding; MEMORY_FIT=warn so the plan runs as set; MAX_OOM_RETRIES=0 so a real OOM is the row), each on its own
# inventory host (a bare host on this machine with its own runs dir: the one-training rule is per runs dir) and its
# own Ray cluster. Models: random weights with the real config.json shape and a 151 936-id tokenizer
# (gpu/make_tiny.py). Per-run device memory: gpu/proc_mem.py (each process's nvidia-smi memory, assigned to its
# run by DAPO_OPS_RUN_ID); actor peak: verl's actor/perf/max_memory_allocated_gb. Rows: bench/holdout_rows.py.
# Waves sized so the sum of the runs' estimated peaks stays under the device (a concurrent OOM would be a false row):
#   1: qwen2.5-0.5b r1k | qwen3-0.6b r4k offload | qwen2.5-1.5b r2k | qwen3-1.7b r8k offload   (est. sum 124 GiB)
#   2: qwen2.5-3b r1k 2 steps | qwen3-1.7b r8k no offload                                      (est. sum 119 GiB)
#   3: qwen3-4b r2k offload, then qwen2.5-7b r1k offload alone (estimate: does not fit -> a real-OOM row)
SCEN=i; . "$(dirname "$0")/lib.sh"
WAVE=${1:?usage: gpu/i-holdout.sh WAVE}
# name  arch H L FF NH KV tied head_dim vocab | response offload util steps
SHAPES="qwen2.5-0.5b qwen2 896 24 4864 14 2 1 0 151936
qwen2.5-1.5b qwen2 1536 28 8960 12 2 1 0 151936
qwen2.5-3b qwen2 2048 36 11008 16 2 1 0 151936
qwen2.5-7b qwen2 3584 28 18944 28 4 0 0 152064
qwen3-0.6b qwen3 1024 28 3072 16 8 1 128 151936
qwen3-1.7b qwen3 2048 28 6144 16 8 1 128 151936
qwen3-4b qwen3 2560 36 9728 32 8 1 128 151936"
case $WAVE in
  1) RUNS_CFG="qwen2.5-0.5b 1024 0 0.08 2
qwen3-0.6b 4096 1 0.08 1
qwen2.5-1.5b 2048 0 0.1 1
qwen3-1.7b 8192 1 0.15 1";;
  2) RUNS_CFG="qwen2.5-3b 1024 0 0.12 2
qwen3-1.7b 8192 0 0.15 1";;
  3) RUNS_CFG="qwen3-4b 2048 1 0.12 1
qwen2.5-7b 1024 1 0.2 1";;
  4) RUNS_CFG="qwen2.5-0.5b 1024 0 0.3 1
qwen2.5-1.5b 2048 0 0.3 1";;
  5) RUNS_CFG="qwen3-4b 2048 1 0.3 1";;
  6) RUNS_CFG="qwen3-0.6b 1024 1 0.3 1";;
  *) echo "WAVE 1..6"; exit 2;;
esac
SERIAL=0; [ "$WAVE" -ge 3 ] && SERIAL=1   # wave 3 runs one at a time (each alone on the device)

build() {  # build NAME: the random-weight model of that shape (once per machine)
  local n=$1 line; line=$(grep "^$n " <<<"$SHAPES")
  [ -f "/tmp/p/$n/model/config.json" ] && return 0
  [ "$REHEARSAL" = 1 ] && { mkdir -p "/tmp/p/$n"; cp -r "$TINY/." "/tmp/p/$n/"; return 0; }
  set -- $line
  local t=$(date +%s)
  python3 "$REPO/gpu/make_tiny.py" "/tmp/p/$n" "$3" "$4" "$5" "$6" "$7" "${10}" "$2" "$8" "$9" > "$OUT/build-$n.txt" 2>&1 \
    || { echo "build $n failed"; tail -3 "$OUT/build-$n.txt"; return 1; }
  echo "built $n in $(( $(date +%s) - t )) s: $(grep params "$OUT/build-$n.txt")"
}

# one inventory host per configuration: a copy of lib.sh's [hosts.gpu] with its own runs dir
add_host() {  # add_host HOST
  local h=$1
  sed -n '/^\[hosts.gpu\]/,$p' "$ROOT/hosts.toml" | sed "s/^\[hosts.gpu\]/[hosts.$h]/; s/^\[hosts.gpu.env\]/[hosts.$h.env]/; s#^runs_dir = .*#runs_dir = \"$ROOT/runs-$h\"#" \
    > "$ROOT/host-$h.toml"
  mkdir -p "$ROOT/runs-$h"
}

OVR=(data.dataloader_num_workers=0 reward.num_workers=1 trainer.val_before_train=False trainer.test_freq=-1
  +ray_kwargs.ray_init.include_dashboard=False actor_rollout_ref.rollout.agent.num_workers=1
  "reward.custom_reward_function.path=$ROOT/len_reward.py" reward.custom_reward_function.name=len_mod3)
mapfile -t OV < <(printf -- '--override\n%s\n' "${OVR[@]}")

launch_one() {  # launch_one HOST NAME RESPONSE OFFLOAD UTIL STEPS
  local h=$1 n=$2 resp=$3 off=$4 util=$5 steps=$6 feats=-flash_attn
  [ "$off" = 1 ] && feats=-flash_attn,offload
  ( export MAX_PROMPT_LENGTH=512 MAX_RESPONSE_LENGTH=$resp GPU_MEMORY_UTILIZATION=$util TRAIN_BATCH_SIZE=4 \
      PPO_MINI_BATCH_SIZE=4 ROLLOUT_N=4 MICRO_BATCH_SIZE=4 MEMORY_FIT=warn MAX_OOM_RETRIES=0 USER_FEATURES=$feats
    inv launch -H "$h" --link-wait 0 $(model_flags "/tmp/p/$n") --steps "$steps" --save-freq -1 "${OV[@]}" ) \
    > "$OUT/launch-$h.txt" 2>&1
  local rid; rid=$(grep -o 'run [0-9]\{8\}-[0-9]\{6\}-[0-9a-f]\{4\}' "$OUT/launch-$h.txt" | head -1 | cut -d' ' -f2)
  [ -n "$rid" ] || { echo "$h launch failed:"; tail -5 "$OUT/launch-$h.txt"; return 1; }
  echo "$rid" > "$STATE/$h.run_id"; echo "$h $n r$resp off$off u$util s$steps -> run $rid"
}

wait_one() {  # wait_one HOST: inv watch until the run ends (bounded), then collect its files
  local h=$1 rid d; rid=$(cat "$STATE/$h.run_id" 2>/dev/null) || return 1; d=$OUT/runs/$h
  timeout "${WATCH_S:-500}" "${INV[@]}" watch -H "$h" --run "$rid" --interval 5 > "$OUT/watch-$h.txt" 2>&1
  mkdir -p "$d"
  inv status -H "$h" > "$d/status.txt" 2>&1
  for f in run.json spec.json train.log supervisor.log; do cp "$ROOT/runs-$h/$rid/$f" "$d/" 2>/dev/null; done
  echo "$h: $(tail -1 "$OUT/watch-$h.txt")"
}

# the inventory: lib.sh's host + one host per configuration of this wave
i=0; HOSTS=()
while read -r n resp off util steps; do
  i=$((i+1)); h=w$WAVE$i; add_host "$h"; HOSTS+=("$h:$n:$resp:$off:$util:$steps")
done <<<"$RUNS_CFG"
cat "$ROOT"/host-w"$WAVE"*.toml >> "$ROOT/hosts.toml"

t0=$(date +%s)
for hc in "${HOSTS[@]}"; do IFS=: read -r h n _ <<<"$hc"; build "$n" || exit 1; done
echo "models ready in $(( $(date +%s) - t0 )) s"
[ "$REHEARSAL" = 1 ] || { python3 "$REPO/gpu/proc_mem.py" "$OUT/proc-mem.csv" 1 & PM=$!; }
if [ "$SERIAL" = 1 ]; then
  for hc in "${HOSTS[@]}"; do IFS=: read -r h n resp off util steps <<<"$hc"
    launch_one "$h" "$n" "$resp" "$off" "$util" "$steps" && wait_one "$h"; done
else
  for hc in "${HOSTS[@]}"; do IFS=: read -r h n resp off util steps <<<"$hc"
    launch_one "$h" "$n" "$resp" "$off" "$util" "$steps" & done; wait
  for hc in "${HOSTS[@]}"; do IFS=: read -r h _ <<<"$hc"; wait_one "$h" & done; wait
fi
[ -n "${PM:-}" ] && { kill "$PM"; wait "$PM" 2>/dev/null; }
for h in ${KEEP_HOSTS:-}; do  # runs of an earlier call still on the device (the supervisor is detached)
  rid=$(ls "$ROOT/runs-$h" | grep '^2026' | tail -1); mkdir -p "$OUT/runs/$h"
  for f in run.json spec.json train.log supervisor.log; do cp "$ROOT/runs-$h/$rid/$f" "$OUT/runs/$h/" 2>/dev/null; done
done
echo "wave $WAVE: $(( $(date +%s) - t0 )) s"
"$PY" "$REPO/bench/holdout_rows.py" "$OUT/runs" --proc-mem "$OUT/proc-mem.csv" | tee "$OUT/rows.csv"
tar -C "$OUT" -czf "$OUT/wave$WAVE.tgz" runs $(cd "$OUT" && ls proc-mem.csv build-*.txt launch-*.txt watch-*.txt 2>/dev/null) \
  && (cd "$OUT" && rm -rf runs build-*.txt launch-*.txt watch-*.txt proc-mem.csv)
