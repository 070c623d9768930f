#!/bin/bash
# Device calls (o), issue 45 must-show: the tool's DEFAULT plan (which now picks the fastest configuration that fits,
# dapo_ops/core/fastfit.py) against verl 0.9.1's own DAPO keys by hand, at a real shape, >= 10 steps after warm-up.
#   HALF=tool PAIR=1 bash gpu/o-speed.sh   then   HALF=verl PAIR=1 bash gpu/o-speed.sh   (then PAIR=2: interleaved)
#   HALF=watch PAIR=N bash gpu/o-speed.sh: keep watching the tool half (its supervisor is detached) and collect
# Model: Qwen3-1.7B's config.json shape, random weights (gpu/make_tiny.py '2048 28 6144 16 8 151936 qwen3 1 128
# --prompt-tokens 512').
# Shape: MAX_PROMPT_LENGTH 512, MAX_RESPONSE_LENGTH 2048 (a random model rarely samples EOS: responses run to 2048);
# every prompt padded to 512 tokens (make_tiny.py --prompt-tokens 512: the bare problems are ~200 tokens), shared
# with gpu/p-holdout.sh's build of the same shape (/tmp/p/qwen3-1.7b-p512).
# Batch: the runbook's 64 prompts x n 8 over 8 devices (mini-batch 16) scaled to ONE device with the same work per
# device: TRAIN_BATCH_SIZE 8, ROLLOUT_N 8 (64 responses), PPO_MINI_BATCH_SIZE 2. STEPS 12 = 2 warm-up + 10 measured.
# (a) the tool: `inv launch` with nothing memory-related set (no GPU_MEMORY_UTILIZATION / MICRO_BATCH_SIZE /
#     max_num_seqs, unlike lib.sh's recipe): the plan's fit: lines say what it chose and why (launch.txt, spec.json
#     "fit"); only the recipe's data / reward / eval-off overrides and the attention route (sdpa: no flash-attn wheel).
# (b) verl's keys by hand: verl tests/special_e2e/run_dapo.sh's keys (/work/shared/reference/verl.md:70) on
#     verl.trainer.main_ppo, verl's defaults elsewhere. Changes, every one: 8 GPUs -> 1 (n_gpus_per_node 1, rollout TP
#     2 -> 1); batch 256 x n 4 (gen 1024) -> 8 x n 8 (gen_batch_size = train_batch_size), mini 128 -> 2;
#     prompt/response 1024/2048 -> 512/2048; filter_groups off and the len_mod3 reward (a random model scores 0 on
#     gsm8k: filter_groups would regenerate forever); ref.fsdp_config.param_offload dropped (no KL: no ref);
#     use_fused_kernels dropped (not in the 0.9.1 FSDP engine path used here); attn sdpa as (a); save_freq -1, no
#     validation; dynamic batch with verl's script budgets (P+R)x2 / x3 (run_dapo.sh sets micro 2 without dynamic
#     batch; the DAPO recipe scripts use the budgets: dapo_7b_math_*_4_12.sh); gpu_memory_utilization 0.8 (0.6 on an
#     80 GB card: 0.8 runs out in the weight sync there, estimate 86.1 of 79.6 GiB) and
#     max_num_batched_tokens P+R as those scripts; gradient checkpointing on (verl's default).
# Device time, MEASURED (gpu/README.md 2026-12-07 fourth session, H100): start-up ~255 s, a step ~80 s with the
# plan of then (sdpa, budgets 11264 / 57344; the packed-attention cap should bring it to ~55 s), 12 steps: one half
# ~15-20 min, a pair ~35 min: MORE THAN ONE SESSION'S 30 DEVICE MINUTES. The tool half launches detached (HALF=watch
# goes on), the verl half runs under setsid + nohup (its own session: the device ends a call by killing the call's
# process group, which took a plain nohup'd verl down at step 4 in 2026-12-07 fifth session) and is collected by
# the next call (HALF=verlwatch); o-drive.sh chains
# the calls. One half per session (O_SEQ=verl1, then O_SEQ=tool1), both on nvidia-h100-x1.
# $OUT: tool/ (run files), verl.log, gpu-mem-*.csv, speed.md (bench/speed_table.py, once both halves are in).
SCEN=o; . "$(dirname "$0")/lib.sh"
# which card this half ran on (two cards of one kind differ: gpu/README.md 2026-12-07 sixth session)
"$SMI" --query-gpu=name,uuid,serial,clocks.max.sm,power.limit,driver_version --format=csv > "$OUT/device.csv" 2>&1 || true
unset GPU_MEMORY_UTILIZATION MICRO_BATCH_SIZE ROLLOUT_EAGER   # lib.sh's recipe values would be explicit settings
export TRAIN_BATCH_SIZE=8 PPO_MINI_BATCH_SIZE=2 ROLLOUT_N=8 MAX_PROMPT_LENGTH=512 MAX_RESPONSE_LENGTH=2048
export USER_FEATURES=-flash_attn MAX_OOM_RETRIES=3
STEPS=${STEPS:-12}; PAIR=${PAIR:-1}; HALF=${HALF:-tool}
M=/tmp/p/qwen3-1.7b-p512
standin_cue '{"accelerator": "gpu", "step_time": 0.5}'
if [ "$REHEARSAL" = 1 ]; then
  mkdir -p "$M"; cp -rL "$TINY/." "$M/" 2>/dev/null
  # the stand-in image's tiny sample model has no head counts: give the estimate Qwen3-1.7B's config.json shape
  rm -rf "$M/model"; mkdir -p "$M/model"; cp -rL "$TINY/model/." "$M/model/"
  "$PY" - "$M/model/config.json" <<'PYEOF'
import json, sys
p = sys.argv[1]
try:
    c = json.load(open(p))
except (OSError, ValueError):
    c = {}
c.update(model_type="qwen3", hidden_size=2048, num_hidden_layers=28, intermediate_size=6144, num_attention_heads=16,
         num_key_value_heads=8, head_dim=128, vocab_size=151936, tie_word_embeddings=True, max_position_embeddings=40960)
json.dump(c, open(p, "w"))
PYEOF
elif [ ! -f "$M/model/config.json" ]; then
  t=$(date +%s); python3 "$REPO/gpu/make_tiny.py" "$M" 2048 28 6144 16 8 151936 qwen3 1 128 \
    --prompt-tokens "$MAX_PROMPT_LENGTH" > "$OUT/build.txt" 2>&1 \
    || { echo "build failed"; tail -3 "$OUT/build.txt"; exit 1; }
  echo "built $M in $(( $(date +%s) - t )) s"
fi
NAME=o$PAIR
# until_deadline DEFAULT_S: seconds left before $DEADLINE (epoch s, set by gpu/o-drive.sh), else DEFAULT_S
until_deadline() { if [ -n "${DEADLINE:-}" ]; then echo $(( DEADLINE - $(date +%s) > 5 ? DEADLINE - $(date +%s) : 5 )); else echo "$1"; fi; }
case $HALF in
tool)
  start_sampler; echo "$SAMPLER" > "$STATE/$NAME.sampler"
  mapfile -t OV < <(printf -- '--override\n%s\n' data.dataloader_num_workers=0 reward.num_workers=1 \
    trainer.val_before_train=False trainer.test_freq=-1 +ray_kwargs.ray_init.include_dashboard=False \
    "reward.custom_reward_function.path=$ROOT/len_reward.py" reward.custom_reward_function.name=len_mod3)
  launch "$NAME" $(model_flags "$M") --steps "$STEPS" --save-freq -1 "${OV[@]}" || { stop_sampler; exit 9; }
  "$PY" -c 'import json,sys; f=json.load(open(sys.argv[1])).get("fit") or {}; [print("fit:", c["name"], c["value"], "-", c["why"]) for c in f.get("choices", []) + f.get("kept", [])]' \
    "$RUNS/$(cat "$STATE/$NAME.run_id")/spec.json" | tee "$OUT/fit-lines.txt"   # the plan's choices (spec "fit")
  WATCH_S=$(until_deadline "${WATCH_S_TOOL:-480}") follow "$NAME"; rc=$?
  echo "tool: watch rc=$rc (124: still running: HALF=watch PAIR=$PAIR next)"
  stop_sampler; mv "$OUT/gpu-mem.csv" "$OUT/gpu-mem-tool.csv"; cp "$OUT/gpu-mem-tool.csv" "$STATE/$NAME-gpu-mem-tool.csv"
  exit $rc
  ;;
watch)
  start_sampler
  WATCH_S=$(until_deadline "${WATCH_S_TOOL:-540}") follow "$NAME"; rc=$?; echo "tool: watch rc=$rc"
  stop_sampler; cat "$OUT/gpu-mem.csv" >> "$STATE/$NAME-gpu-mem-tool.csv"; rm -f "$OUT/gpu-mem.csv"
  exit $rc ;;
verl|verlwatch)
  if [ "$HALF" = verl ]; then
    SEQ=$((MAX_PROMPT_LENGTH + MAX_RESPONSE_LENGTH))
    # run_dapo.sh's 0.8 on an 80 GB card runs out in the weight sync at this shape (the estimate: 86.1 of 79.6 GiB,
    # colocated, no actor offload; gpu/README.md 2026-12-07 fourth session): by hand one lowers it to 0.6 (70.2)
    TOTAL_MIB=$("$SMI" --query-gpu=memory.total --format=csv,noheader,nounits 2>/dev/null | head -1 | tr -dc 0-9)
    VERL_UTIL=${VERL_UTIL:-$([ "${TOTAL_MIB:-0}" -ge 100000 ] && echo 0.8 || echo 0.6)}
    echo "verl by hand: gpu_memory_utilization $VERL_UTIL (device memory ${TOTAL_MIB:-?} MiB)"
    ( cd "$WORK" && env $(sed -n '/^\[hosts.gpu.env\]/,$p' "$ROOT/hosts.toml" | grep '=' | sed 's/ = "/=/; s/"$//') \
      setsid nohup timeout "${VERL_S:-1500}" python3 -m verl.trainer.main_ppo \
      algorithm.adv_estimator=grpo algorithm.use_kl_in_reward=False algorithm.kl_ctrl.kl_coef=0.0 \
      actor_rollout_ref.actor.use_kl_loss=False actor_rollout_ref.actor.kl_loss_coef=0.0 \
      actor_rollout_ref.actor.clip_ratio_low=0.2 actor_rollout_ref.actor.clip_ratio_high=0.28 \
      actor_rollout_ref.actor.loss_agg_mode=token-mean \
      data.train_files="$M/data/train.parquet" data.val_files="$M/data/test.parquet" \
      data.max_prompt_length=$MAX_PROMPT_LENGTH data.max_response_length=$MAX_RESPONSE_LENGTH \
      data.train_batch_size=$TRAIN_BATCH_SIZE data.dataloader_num_workers=0 \
      actor_rollout_ref.model.path="$M/model" actor_rollout_ref.model.use_remove_padding=True \
      actor_rollout_ref.model.enable_gradient_checkpointing=True \
      "+actor_rollout_ref.model.override_config.attn_implementation=sdpa" \
      actor_rollout_ref.actor.ppo_mini_batch_size=$PPO_MINI_BATCH_SIZE actor_rollout_ref.actor.use_dynamic_bsz=True \
      actor_rollout_ref.actor.ppo_max_token_len_per_gpu=$((2 * SEQ)) \
      actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=$((3 * SEQ)) \
      actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=True actor_rollout_ref.actor.optim.lr=1e-6 \
      actor_rollout_ref.rollout.name=vllm actor_rollout_ref.rollout.n=$ROLLOUT_N \
      actor_rollout_ref.rollout.tensor_model_parallel_size=1 actor_rollout_ref.rollout.gpu_memory_utilization="$VERL_UTIL" \
      actor_rollout_ref.rollout.max_num_batched_tokens=$SEQ \
      reward.num_workers=1 "reward.custom_reward_function.path=$ROOT/len_reward.py" \
      reward.custom_reward_function.name=len_mod3 \
      trainer.logger='[console]' trainer.val_before_train=False trainer.test_freq=-1 trainer.save_freq=-1 \
      trainer.resume_mode=disable trainer.n_gpus_per_node=1 trainer.nnodes=1 trainer.total_training_steps="$STEPS" \
      trainer.default_local_dir="$ROOT/verl-ckpt-$NAME" +ray_kwargs.ray_init.include_dashboard=False \
      > "$STATE/$NAME-verl.log" 2>&1 & echo $! > "$STATE/$NAME-verl.pid" )
  fi
  start_sampler
  # alive = a process with this half's checkpoint dir in its argv (timeout, python): NOT the pid file's pid, which is
  # setsid's, and setsid started from a process-group leader forks and exits at once (2026-12-07 sixth session: the
  # watch called a verl at step 2 "done")
  verl_alive() { pgrep -f -- "trainer.default_local_dir=$ROOT/verl-ckpt-$NAME" > /dev/null; }
  waited=0
  wait_s=$(until_deadline "${VERL_WAIT_S:-540}")
  while verl_alive && [ "$waited" -lt "$wait_s" ]; do sleep 5; waited=$((waited + 5)); done
  stop_sampler; cat "$OUT/gpu-mem.csv" >> "$STATE/$NAME-gpu-mem-verl.csv"; rm -f "$OUT/gpu-mem.csv"
  cp "$STATE/$NAME-verl.log" "$OUT/verl.log"; cp "$STATE/$NAME-gpu-mem-verl.csv" "$OUT/gpu-mem-verl.csv"
  if verl_alive; then echo "verl by hand still running: HALF=verlwatch PAIR=$PAIR next"; exit 0; fi
  echo "verl by hand: done ($(grep -c 'step:' "$OUT/verl.log") step lines)"
  # the tool half of this pair on this machine, if any (one half per session: the table is made here later)
  [ -f "$STATE/$NAME.run_id" ] || { echo "no tool half of pair $PAIR on this machine: speed.md from the fixtures"; exit 0; }
  TOOL_LOG=$RUNS/$(cat "$STATE/$NAME.run_id")/train.log
  cp "$STATE/$NAME-gpu-mem-tool.csv" "$OUT/gpu-mem-tool.csv" 2>/dev/null
  DEV=$("$SMI" --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | sed 's/NVIDIA //; s/ .*//')
  "$PY" "$REPO/bench/speed_table.py" "$TOOL_LOG" "$OUT/verl.log" --skip 2 \
    --gpu-mem "$OUT/gpu-mem-tool.csv" "$OUT/gpu-mem-verl.csv" \
    --csv "$OUT/speed.csv" --spec "$(dirname "$TOOL_LOG")/spec.json" --model qwen3-1.7b --device "${DEV:-gpu}" \
    | tee "$OUT/speed.md"
  ;;
*) echo "HALF=tool|watch|verl|verlwatch"; exit 2 ;;
esac
