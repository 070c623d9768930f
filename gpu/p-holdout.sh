#!/bin/bash
# Device calls (p), issue 45 item 3: memory-fit HOLDOUT rows at real shapes AT THE PLAN'S OWN CHOICES (never used to
# set a constant, never refitted on: a row the estimate undershoots by more than FIT_MARGIN raises the margin,
# tests/test_fastfit.py).
#   bash gpu/p-holdout.sh CALL     CALL = 1 | 2 | 3 | 4: one device call each (<= 10 min; CALL_S, default 585 s)
#   bash gpu/p-holdout.sh rows     no run: the rows of every run this machine has collected so far
# Re-running a CALL skips its configurations already done and first watches a run an earlier call left going (its
# supervisor is detached). Each configuration runs ALONE on the device (runs started at once cannot be measured:
# each vLLM profiles the whole device's used memory, gpu/README.md 2026-12-02 second session, call 11), through
# the tool (`inv launch`) on its own inventory host / runs dir, for ONE step: step 1 already holds every phase's
# peak (rollout start, generation, log-prob, update; the optimizer state is allocated in step 1's update).
# What the plan gets: nothing memory-related set (GPU_MEMORY_UTILIZATION and MICRO_BATCH_SIZE unset, no max_num_seqs
# override), so the launch's fastest fit (dapo_ops/core/fastfit.py) chooses the token budgets, gradient
# checkpointing, the rollout share, max_num_seqs and max_num_batched_tokens on the real device memory, and
# MAX_OOM_RETRIES=0 makes a real OOM the row. The FSDP rows run sdpa (no flash-attn wheel): since 2026-12-07 fourth
# session the fit caps their budgets at 4096 tokens or one sequence (fastfit.PACKED_TOKENS), so their update sits well
# under the device; p11 and o1-tool1 (before the cap: update at 72.2 / 71.5 of 79.6 GiB) tested the margin where it
# is thinnest, the Megatron rows (largest that fits) still do. p32 runs with MEMORY_FIT=warn at the planned defaults instead: the estimate says
# it does not fit (Qwen2.5-7B, weight-sync 172 of 139.8 GiB), and it must really run out.
# Models: gpu/make_tiny.py with the real config.json shapes (151 936 / 152 064-id vocabularies), random weights,
# prompts padded to 512 tokens (--prompt-tokens 512: MAX_PROMPT_LENGTH 512 is filled). Batch: 4 prompts x n 4
# (mini-batch 4), prompt 512, responses >= 2048 (a random model rarely samples EOS: they run to the maximum).
# Kept from gpu/i-holdout.sh so the rows compare: ROLLOUT_EAGER=true (lib.sh; no CUDA graphs), sdpa attention.
# Per-run device memory: gpu/proc_mem.py (0.5 s); actor peak: verl's actor/perf/max_memory_allocated_gb.
# Rows: bench/holdout_rows.py (columns of bench/memory_fit.csv incl. update_tokens / logprob_tokens, the fit's
# budgets); append them, then `.venv/bin/python bench/memory_fit.py --write`.
#
# Device seconds per configuration, ESTIMATED from gpu/README.md's runs (w41 0.5B r1024 ~270 s alone, w14 1.7B
# r8192, k-megatron start-up ~110 s to the model build, j1 4B-48l's OOM 290 s into attempt 1) + the model build:
#   id  shape          framework response  est. s  call
#   p11 qwen2.5-0.5b   fsdp      2048      260     1     (call 1 ~560 s)
#   p12 qwen3-0.6b     fsdp      4096      300     1
#   p21 qwen3-1.7b     fsdp      2048      290     2     (call 2 ~610 s: p22 may spill, re-run 2 to collect it)
#   p22 qwen2.5-1.5b   fsdp      4096      320     2
#   p31 qwen3-4b       fsdp      2048      330     3     (call 3 ~570 s)
#   p32 qwen2.5-7b     fsdp      2048      240     3     MEMORY_FIT=warn: predicted "does not fit", must OOM
#   p41 qwen3-0.6b     megatron  2048      300     4     (call 4 ~620 s; GPU_MEGA=1: gpu/megatron-install.sh first)
#   p42 qwen3-1.7b     megatron  2048      320     4
# ~2 360 s of runs + setup (verl pieces + install ~2-4 min, the Megatron payload ~3 min): more than one session's
# 30 device minutes. Order if short: 1, 3 (the OOM row), 4 (Megatron), 2.
CALL=${1:?usage: gpu/p-holdout.sh CALL (1..4) | rows}
T0=$(date +%s); CALL_S=${CALL_S:-585}
# id shape framework response memory_fit est_s
CONFIGS="p11 qwen2.5-0.5b fsdp 2048 start 260
p12 qwen3-0.6b fsdp 4096 start 300
p21 qwen3-1.7b fsdp 2048 start 290
p22 qwen2.5-1.5b fsdp 4096 start 320
p31 qwen3-4b fsdp 2048 start 330
p32 qwen2.5-7b fsdp 2048 warn 240
p41 qwen3-0.6b megatron 2048 start 300
p42 qwen3-1.7b megatron 2048 start 320"
case $CALL in
  1|2|3|rows) ;;
  4) GPU_FRAMEWORK=megatron; GPU_MEGA=${GPU_MEGA:-1}; [ "${GPU_REHEARSAL:-0}" = 1 ] && GPU_MEGA=0 ;;
  *) echo "usage: gpu/p-holdout.sh CALL (1..4) | rows"; exit 2 ;;
esac
SCEN=p; . "$(dirname "$0")/lib.sh"
unset GPU_MEMORY_UTILIZATION MICRO_BATCH_SIZE   # lib.sh's recipe values would be explicit settings: the fit keeps them
# name arch H L FF NH KV tied head_dim vocab (the config.json shapes of bench/memory_fit_models.json)
SHAPES="qwen2.5-0.5b qwen2 896 24 4864 14 2 1 0 151936
qwen2.5-1.5b qwen2 1536 28 8960 12 2 1 0 151936
qwen2.5-7b qwen2 3584 28 18944 28 4 0 0 152064
qwen3-0.6b qwen3 1024 28 3072 16 8 1 128 151936
qwen3-1.7b qwen3 2048 28 6144 16 8 1 128 151936
qwen3-4b qwen3 2560 36 9728 32 8 1 128 151936"
DONE=$STATE/p-runs; mkdir -p "$DONE"   # collected run dirs of every call (rows come from here)

build() {  # build SHAPE: /tmp/p/SHAPE-p512 (once per machine)
  local n=$1 d=/tmp/p/$1-p512 line; line=$(grep "^$n " <<<"$SHAPES")
  [ "$REHEARSAL" = 1 ] && d=$ROOT/p/$n-p512
  [ -f "$d/model/config.json" ] && { echo "$d"; return 0; }
  if [ "$REHEARSAL" = 1 ]; then  # the stand-in reads no weights: the sample inputs + the shape's config.json
    mkdir -p "$d/model" "$d/data"; cp -rL "$TINY/model/." "$d/model/"; cp -L "$TINY"/data/*.parquet "$d/data/"
    "$PY" -c 'import json,sys; m=json.load(open(sys.argv[1]))[sys.argv[2]]; c=json.load(open(sys.argv[3])) if __import__("os").path.exists(sys.argv[3]) else {}; c.update(m); json.dump(c, open(sys.argv[3], "w"))' \
      "$REPO/bench/memory_fit_models.json" "$n" "$d/model/config.json"
    echo "$d"; return 0
  fi
  set -- $line
  local t=$(date +%s)
  python3 "$REPO/gpu/make_tiny.py" "$d" "$3" "$4" "$5" "$6" "$7" "${10}" "$2" "$8" "$9" --prompt-tokens 512 \
    > "$OUT/build-$n.txt" 2>&1 || { echo "build $n failed: $(tail -3 "$OUT/build-$n.txt")" >&2; return 1; }
  echo "built $n in $(( $(date +%s) - t )) s: $(grep -h 'params\|prompt tokens' "$OUT/build-$n.txt" | cut -c1-80 | tr '\n' ' ')" >&2
  echo "$d"
}

add_host() {  # add_host HOST: a copy of lib.sh's [hosts.gpu] with its own runs dir (the one-training rule is per runs dir)
  local h=$1
  sed -n '/^\[hosts.gpu\]/,$p' "$ROOT/hosts.toml" | sed "s/^\[hosts.gpu\]/[hosts.$h]/; s/^\[hosts.gpu.env\]/[hosts.$h.env]/; s#^runs_dir = .*#runs_dir = \"$ROOT/runs-$h\"#" \
    > "$ROOT/host-$h.toml"
  mkdir -p "$ROOT/runs-$h"
}
while read -r h _; do add_host "$h"; done <<<"$CONFIGS"
cat "$ROOT"/host-p*.toml >> "$ROOT/hosts.toml"

OVR=(data.dataloader_num_workers=0 reward.num_workers=1 trainer.val_before_train=False trainer.test_freq=-1
  +ray_kwargs.ray_init.include_dashboard=False actor_rollout_ref.rollout.agent.num_workers=1
  "reward.custom_reward_function.path=$ROOT/len_reward.py" reward.custom_reward_function.name=len_mod3)
# the Megatron route of gpu/k-megatron.sh (MEGA_ATTN=fused): no apex here, TE's fused attention (cuDNN)
MEGA_OVR=(+actor_rollout_ref.actor.megatron.override_transformer_config.gradient_accumulation_fusion=False
  actor_rollout_ref.actor.megatron.override_transformer_config.attention_backend=fused)

launch_one() {  # launch_one ID SHAPE FRAMEWORK RESPONSE MEMORY_FIT
  local h=$1 n=$2 fw=$3 resp=$4 mf=$5 d feats=-flash_attn ov=("${OVR[@]}")
  d=$(build "$n") || return 1
  [ "$fw" = megatron ] && { feats=""; ov+=("${MEGA_OVR[@]}"); }
  if [ "$mf" = warn ]; then  # rehearsal: the stand-in runs out where the estimate says (real verl needs no cue)
    standin_cue '{"accelerator": "gpu", "step_time": 0.5, "failure": {"kind": "oom-device", "phase": "update_weights", "step": 1, "times": 1}}'
  else standin_cue '{"accelerator": "gpu", "step_time": 0.5}'; fi
  mapfile -t OV < <(printf -- '--override\n%s\n' "${ov[@]}")
  ( export FRAMEWORK=$fw MAX_PROMPT_LENGTH=512 MAX_RESPONSE_LENGTH=$resp TRAIN_BATCH_SIZE=4 PPO_MINI_BATCH_SIZE=4 \
      ROLLOUT_N=4 MEMORY_FIT=$mf MAX_OOM_RETRIES=0 USER_FEATURES=$feats
    inv launch -H "$h" --link-wait 0 $(model_flags "$d") --steps 1 --save-freq -1 "${OV[@]}" ) > "$OUT/launch-$h.txt" 2>&1
  local rid; rid=$(grep -o 'run [0-9]\{8\}-[0-9]\{6\}-[0-9a-f]\{4\}' "$OUT/launch-$h.txt" | head -1 | cut -d' ' -f2)
  [ -n "$rid" ] || { echo "$h launch failed:"; tail -5 "$OUT/launch-$h.txt"; return 1; }
  echo "$rid" > "$STATE/$h.run_id"
  echo "$h $n $fw r$resp MEMORY_FIT=$mf -> run $rid"; grep -E '^  (fit|start):' "$OUT/launch-$h.txt"; return 0
}

wait_one() {  # wait_one ID BUDGET_S: inv watch until the run ends (bounded), then collect into $DONE/ID when it ended
  local h=$1 budget=$2 rid rc; rid=$(cat "$STATE/$h.run_id")
  timeout "$budget" "${INV[@]}" watch -H "$h" --run "$rid" --interval 5 > "$OUT/watch-$h.txt" 2>&1; rc=$?
  echo "$h: $(tail -1 "$OUT/watch-$h.txt") (watch rc $rc)"
  [ "$rc" = 124 ] && { echo "$h still running: re-run this call (or the next one) to collect it"; return 0; }
  mkdir -p "$DONE/$h"
  inv status -H "$h" > "$DONE/$h/status.txt" 2>&1
  for f in run.json spec.json train.log supervisor.log; do cp "$ROOT/runs-$h/$rid/$f" "$DONE/$h/" 2>/dev/null; done
  cp "$OUT/launch-$h.txt" "$DONE/$h/launch.txt"; touch "$STATE/$h.done"
}

left() { echo $(( CALL_S - ($(date +%s) - T0) - 15 )); }

if [ "$CALL" != rows ]; then
  [ "$REHEARSAL" = 1 ] || { python3 "$REPO/gpu/proc_mem.py" "$OUT/proc-mem.csv" 0.5 & PM=$!; }
  # a run an earlier call left going comes first: it holds the device
  while read -r h _; do
    [ -f "$STATE/$h.run_id" ] && [ ! -f "$STATE/$h.done" ] && wait_one "$h" "$(left)"
  done <<<"$CONFIGS"
  n_started=0
  while read -r h n fw resp mf est; do
    [ "${h:1:1}" = "$CALL" ] || continue
    # P_ONLY="p12 p22": only these ids of the call (a fresh machine has no .done marks of an earlier machine's runs)
    [ -n "${P_ONLY:-}" ] && [[ " $P_ONLY " != *" $h "* ]] && continue
    [ -f "$STATE/$h.done" ] && { echo "$h: done in an earlier call"; continue; }
    [ -f "$STATE/$h.run_id" ] && continue   # still running after the watch above: its next call collects it
    if [ "$n_started" -gt 0 ] && [ "$(left)" -lt "$est" ]; then
      echo "$h not started: $(left) s left of this call, ~$est s needed: bash gpu/p-holdout.sh $CALL again"; continue
    fi
    n_started=$((n_started + 1))
    launch_one "$h" "$n" "$fw" "$resp" "$mf" && wait_one "$h" "$(left)"
  done <<<"$CONFIGS"
  [ -n "${PM:-}" ] && { kill "$PM"; wait "$PM" 2>/dev/null; cat "$OUT/proc-mem.csv" >> "$STATE/p-proc-mem.csv"; }
  echo "call $CALL: $(( $(date +%s) - T0 )) s"
fi
# the rows of every configuration collected so far (the device's own name and memory.total)
IFS=, read -r _ _ MIB DEV < <("$SMI" --query-gpu=index,memory.used,memory.total,name --format=csv,noheader,nounits | head -1)
DEV=$(awk '{print ($1 == "NVIDIA" ? $2 : $1)}' <<<"$DEV"); MIB=${MIB// /}
"$PY" "$REPO/bench/holdout_rows.py" "$DONE" --proc-mem "$STATE/p-proc-mem.csv" --device "${DEV:-H200}" \
  --device-gib "$(awk -v m="${MIB:-143771}" 'BEGIN{printf "%.2f", m/1024}')" --script gpu/p-holdout.sh | tee "$OUT/rows.csv"
tar -C "$STATE" -czf "$OUT/p-runs.tgz" p-runs $( [ -f "$STATE/p-proc-mem.csv" ] && echo p-proc-mem.csv ) 2>/dev/null
rm -f "$OUT/proc-mem.csv"
