# Sourced by every gpu/<scenario>.sh. The TOOL's own tasks drive real verl on the device (a bare host:
# runtime = "host", transport = "local"); GPU_REHEARSAL=1 runs the same scripts HERE against the verl stand-in
# (sandbox/verl_standin; no GPU, no device time).
#
# Device layout (lives while the machine stays warm): /tmp/site (wheels + dapo_ops, gpu/install.sh),
# /tmp/p/tiny (make_tiny.py), /tmp/p/big (the 1.46 B model, built on first use: ~1-2 min),
# /tmp/dapo/{hosts.toml,work,runs,state} (inventory, the host's workdir, run dirs, scenario run ids).
set -uo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REHEARSAL=${GPU_REHEARSAL:-0}
SCEN=${SCEN:?set SCEN before sourcing gpu/lib.sh}
WATCH_S=${WATCH_S:-540}            # how long one call watches a run (a device call is at most 10 min)

if [ "$REHEARSAL" = 1 ]; then
  ROOT=${GPU_REHEARSAL_ROOT:-$REPO/.gpu-rehearsal}
  OUT=${OUT:-$ROOT/out/$SCEN}
  WORK=$ROOT/host
  PY=$REPO/.venv/bin/python3
  bash "$REPO/sandbox/host_tree.sh" "$WORK" "$REPO/.venv" >/dev/null
  mkdir -p "$WORK/sandbox"
  [ -f "$WORK/sandbox/devices.json" ] || echo '{"accelerator": "gpu", "count": 1, "hbm_total_mb": 143771}' > "$WORK/sandbox/devices.json"
  HOST_PATH="$WORK/bin:$REPO/.venv/bin:/usr/local/bin:/usr/bin:/bin"
  HOST_PYTHONPATH=""
  TINY=$ROOT/tiny; BIG=$ROOT/big
  for d in "$TINY" "$BIG"; do  # the stand-in reads no weights: the sample inputs stand in for both models
    mkdir -p "$d/data"; ln -sfn "$WORK/Qwen3-8B" "$d/model"
    ln -sf "$WORK/dapo-math-17k.parquet" "$d/data/train.parquet"; ln -sf "$WORK/aime-2024.parquet" "$d/data/test.parquet"
  done
  SMI="$WORK/bin/nvidia-smi"
  export DAPO_STANDIN_DEVICES=$WORK/sandbox/devices.json
else
  ROOT=/tmp/dapo
  OUT=${OUT:?the device tool sets OUT}
  WORK=$ROOT/work
  PY=python3
  HOST_PATH="/tmp/site/bin:$PATH"
  HOST_PYTHONPATH=/tmp/site
  if [ "${GPU_FA4:-0}" = 1 ]; then  # the flash-attn-4 route (gpu/fa4-install.sh): its wheels first
    [ -f /tmp/site-fa4/.installed ] || { echo "run gpu/fa4-install.sh first (GPU_FA4=1)"; exit 2; }
    HOST_PYTHONPATH=/tmp/site-fa4:/tmp/site-fa4/nvidia_cutlass_dsl/dsl_packages:/tmp/site  # .pth not run: fa4-install.sh
  fi
  if [ "${GPU_MEGA:-0}" = 1 ]; then  # the Megatron route (gpu/megatron-install.sh): megatron-core, Megatron-Bridge, TE first
    [ -f /tmp/site-mega/.installed ] || { echo "run gpu/megatron-install.sh first (GPU_MEGA=1)"; exit 2; }
    HOST_PYTHONPATH=/tmp/site-mega:$HOST_PYTHONPATH
  fi
  TINY=/tmp/p/tiny; BIG=/tmp/p/big
  SMI=nvidia-smi
  [ -f /tmp/site/.installed ] || { echo "run gpu/install.sh first (after the piece calls)"; exit 2; }
fi
export PATH=$HOST_PATH
[ -n "$HOST_PYTHONPATH" ] && export PYTHONPATH=$HOST_PYTHONPATH
RUNS=$ROOT/runs; STATE=$ROOT/state
mkdir -p "$OUT" "$WORK" "$RUNS" "$STATE"
cp "$REPO/gpu/len_reward.py" "$ROOT/len_reward.py"   # the working tree is replaced per call: runs read ROOT's copy
export DAPO_OPS_INVENTORY=$ROOT/hosts.toml DAPO_OPS_CONFIG=$ROOT/no-user-config.toml SWANLAB_MODE=disabled
[ -e "$ROOT/no-user-config.toml" ] || install -m 600 /dev/null "$ROOT/no-user-config.toml"  # no user config: empty (a named one must exist)

# ---- the inventory: one bare host on this machine. Its env table is the Python environment verl runs in and
# the variables the recipe says this machine forces (gpu/README.md "Settings").
{
  echo '[hosts.gpu]'
  echo 'runtime = "host"'
  echo 'transport = "local"'
  echo "workdir = \"$WORK\""
  echo "runs_dir = \"$RUNS\""
  echo "python = \"$PY\""
  echo 'accelerator = "gpu"'
  echo 'devices = 1'
  echo 'device_mounts = false'
  echo '[hosts.gpu.env]'
  echo "PATH = \"$HOST_PATH\""
  [ -n "$HOST_PYTHONPATH" ] && echo "PYTHONPATH = \"$HOST_PYTHONPATH\""
  for kv in VLLM_USE_FLASHINFER_SAMPLER=0 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \
            HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 \
            RAY_USAGE_STATS_ENABLED=0 WANDB_MODE=disabled; do
    echo "${kv%%=*} = \"${kv#*=}\""
  done
  if [ "$REHEARSAL" = 1 ]; then
    echo "DAPO_STANDIN_DEVICES = \"$WORK/sandbox/devices.json\""
    echo "DAPO_STANDIN_SCENARIO = \"$WORK/sandbox/scenario.json\""
  fi
} > "$ROOT/hosts.toml"

INV=("$PY" -m invoke -r "$REPO")
inv() { "${INV[@]}" "$@"; }

# standin_cue JSON: the stand-in's failure cue for this scenario (rehearsal only; real verl needs none)
# (a nonce makes the cue new each time: the stand-in counts `times` per scenario content)
standin_cue() { [ "$REHEARSAL" = 1 ] && echo "{\"nonce\": \"$(date +%s%N)\", ${1#\{}" > "$WORK/sandbox/scenario.json"; return 0; }

# ---- nvidia-smi memory every 0.5 s into $OUT/gpu-mem.csv (2 s missed the 0.6 s weight sync of j1, 2026-12-02; the stand-in's nvidia-smi has no -lms: a loop)
start_sampler() {
  if [ "$REHEARSAL" = 1 ]; then
    ( while :; do "$SMI" --query-gpu=index,memory.used,memory.total --format=csv,noheader,nounits \
        | sed "s/^/$(date +%s.%N),/"; sleep 2; done ) > "$OUT/gpu-mem.csv" 2>&1 &
  else
    # after memory.used (the readers take it from column 2): utilization.gpu (whether a slow phase keeps the device
    # busy), the SM clock, power and the throttle reasons (two H100s ran one command's update 36.6 and 46.8 s a step,
    # 2026-12-07 fifth / sixth sessions: whether a card was clocked down is only seen here)
    "$SMI" --query-gpu=timestamp,memory.used,memory.total,utilization.gpu,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active \
      --format=csv -lms 500 > "$OUT/gpu-mem.csv" 2>&1 &
  fi
  SAMPLER=$!
}
stop_sampler() { [ -n "${SAMPLER:-}" ] && kill "$SAMPLER" 2>/dev/null; wait "$SAMPLER" 2>/dev/null; return 0; }

# ---- issue 42's counters (the stall rule's device / process evidence): nvidia-smi utilisation + memory every 1 s
# into $OUT/gpu-util.csv, the run's processes' CPU time every 5 s into $OUT/proc-cpu.txt
start_health_samplers() {
  [ "$REHEARSAL" = 1 ] && return 0
  "$SMI" --query-gpu=timestamp,utilization.gpu,memory.used --format=csv -lms 1000 > "$OUT/gpu-util.csv" 2>&1 &
  UTIL=$!
  ( while :; do echo "== $(date +%s.%N)"; ps -eo pid,ppid,stat,etimes,times,pcpu,rss,args --sort=pid \
      | grep -E 'ray::|VLLM|vllm|main_ppo|dapo_ops|python' | grep -v -E 'grep|ps -eo' | cut -c1-220; sleep 5; done ) > "$OUT/proc-cpu.txt" 2>&1 &
  PROCS=$!
}
stop_health_samplers() { kill ${UTIL:-} ${PROCS:-} 2>/dev/null; return 0; }

# ---- the recipe's tiny GRPO/DAPO settings, as the tool's settings in the environment (dapo_ops/control/settings.py names;
# flags > env, so a scenario's own flags win); everything else the recipe sets goes as --override (ovr)
export FRAMEWORK=${GPU_FRAMEWORK:-fsdp} ROLLOUT_TP=1 TRAIN_BATCH_SIZE=8 PPO_MINI_BATCH_SIZE=8 ROLLOUT_N=4 MICRO_BATCH_SIZE=8 \
  MAX_PROMPT_LENGTH=128 MAX_RESPONSE_LENGTH=64 GPU_MEMORY_UTILIZATION=0.3 MAX_OOM_RETRIES=3 HANG_TIMEOUT=900 \
  ROLLOUT_EAGER=true USER_FEATURES=${GPU_USER_FEATURES--flash_attn,-dynamic_batch,-remove_padding,-gradient_checkpointing}
TINY_FLAGS=(--link-wait 0)
# the FSDP engine's own compile key (engine/fsdp.yaml:54); verl 0.9.1's Megatron actor config has no fsdp_config
# (Hydra: "Key 'fsdp_config' is not in struct"). Kept in its place: the override list is part of a learned-start
# key (core/learned.py), and j-learned.sh seed files a memo from a record made with this order
FSDP_COMPILE=(); [ "$FRAMEWORK" = fsdp ] && FSDP_COMPILE=(actor_rollout_ref.actor.fsdp_config.use_torch_compile=False)
RECIPE_OVERRIDES=(data.dataloader_num_workers=0 actor_rollout_ref.actor.optim.lr=1e-6
  actor_rollout_ref.actor.use_torch_compile=False "${FSDP_COMPILE[@]}"
  actor_rollout_ref.rollout.max_num_seqs=64 reward.num_workers=1
  trainer.val_before_train=False trainer.test_freq=-1 +ray_kwargs.ray_init.include_dashboard=False
  actor_rollout_ref.rollout.agent.num_workers=1
  reward.custom_reward_function.path=$ROOT/len_reward.py reward.custom_reward_function.name=len_mod3)
ovr() { local o; for o in "${RECIPE_OVERRIDES[@]}" "$@"; do printf -- '--override\n%s\n' "$o"; done; }
model_flags() { echo --model "$1/model" --train-file "$1/data/train.parquet" --val-file "$1/data/test.parquet"; }

ensure_big() {  # the recipe's 1.46 B Qwen2 (make_tiny.py OUT 2048 24 8192 16 4)
  [ "$REHEARSAL" = 1 ] && return 0
  [ -f "$BIG/model/config.json" ] || { t=$(date +%s); python3 "$REPO/gpu/make_tiny.py" "$BIG" 2048 24 8192 16 4 | tail -1;
                                       echo "built $BIG in $(( $(date +%s) - t )) s"; }
}

# launch NAME ARGS...: inv launch; the run id goes to $STATE/NAME.run_id; prints the launch output
launch() {
  local name=$1; shift
  local t0; t0=$(date +%s.%N)
  inv launch -H gpu "$@" 2>&1 | tee "$OUT/launch.txt"
  local rid; rid=$(grep -o 'run [0-9]\{8\}-[0-9]\{6\}-[0-9a-f]\{4\}' "$OUT/launch.txt" | head -1 | cut -d' ' -f2)
  [ -n "$rid" ] || { echo "launch failed (no run id)"; return 1; }
  echo "$rid" > "$STATE/$name.run_id"; echo "$t0" > "$STATE/$name.launch_t0"
}

# follow NAME: inv watch (bounded by WATCH_S), then collect; rc of the watch (0 succeeded, 124 still running)
follow() {
  local name=$1 rid rc; rid=$(cat "$STATE/$name.run_id")
  timeout "$WATCH_S" "${INV[@]}" watch -H gpu --run "$rid" --interval 2 > "$OUT/watch.txt" 2>&1; rc=$?
  date +%s.%N > "$STATE/$name.watch_t1"
  tail -5 "$OUT/watch.txt"
  collect "$name"
  return $rc
}

# collect NAME: run.json, train.log, supervisor.log, the printed status and error lines -> $OUT/<run_id>/
collect() {
  local name=$1 rid d; rid=$(cat "$STATE/$name.run_id"); d=$OUT/$rid; mkdir -p "$d"
  inv status -H gpu > "$d/status.txt" 2>&1
  inv status -H gpu --json > "$d/status.json" 2>&1
  inv logs -H gpu --run "$rid" --errors > "$d/errors.txt" 2>&1
  for f in run.json spec.json train.log supervisor.log; do cp "$RUNS/$rid/$f" "$d/" 2>/dev/null; done
  ls "$RUNS/$rid/checkpoints" > "$d/checkpoints.txt" 2>&1
  cat "$d/status.txt"
  "$PY" "$REPO/bench/real_runs.py" "$RUNS/$rid/run.json" --state "$STATE/$name" | tee "$d/figures.txt"
}
