#!/bin/bash
# Device call (h), issue 33 item 4, < 8 min: the same tiny model, data and step count (STEPS, default 6) twice:
#  1. the tool's default plan through `inv launch` (features on: route of gpu/g-features.sh, GPU_FA4=1 or sdpa)
#  2. verl 0.9.1's own DAPO keys by hand. The 0.9.1 wheel ships no DAPO example (recipe/dapo moved to
#     verl-recipe); the command below is verl e2e DAPO test (verl tests/special_e2e/run_dapo.sh, keys as
#     /work/shared/reference/verl.md:70 records them) on verl.trainer.main_ppo with verl's own defaults for
#     everything else, changed to fit one GPU and this data: n_gpus 1, rollout TP 1, batch 8 x n 4, prompt/response
#     128/64 (gen_batch_size = train_batch_size), filter_groups off and the len_mod3 reward (random model),
#     gpu_memory_utilization = the tool's, the same attn_implementation as (1), save_freq -1, no validation.
#     agent.num_workers: verl's default (8) in both runs (the first comparison passed 1 here only).
#     NOT changed: enforce_eager (verl default: CUDA graphs), compile, prefix caching, chunked prefill.
# $OUT: tool/ (run files), verl.log, gpu-mem-tool.csv, gpu-mem-verl.csv, speed.md (bench/speed_table.py).
# HALF=tool | HALF=verl: only that run (two back-to-back calls when the ~220 s start-up of each does not leave room
# for both in one 10-minute call; the verl half writes speed.md from the tool half's log kept in /tmp/dapo/state).
# sdpa route: USER_FEATURES=-flash_attn (FSDP 0.9 keeps the other three features on: core/features.py implies_off)
if [ "${GPU_FA4:-0}" = 1 ]; then GPU_USER_FEATURES=""; else GPU_USER_FEATURES="-flash_attn"; fi
SCEN=h; . "$(dirname "$0")/lib.sh"
unset ROLLOUT_EAGER  # the recipe's eager rollout (lib.sh) is not verl's default: both runs keep CUDA graphs
STEPS=${STEPS:-6}
if [ "${GPU_FA4:-0}" = 1 ]; then ATTN=flash_attention_4; else ATTN=sdpa; fi
ATTN_OV=(); [ "$ATTN" = sdpa ] || ATTN_OV=("++actor_rollout_ref.model.override_config.attn_implementation=$ATTN")
standin_cue '{"accelerator": "gpu", "step_time": 0.5}'
HALF=${HALF:-both}
if [ "$HALF" != verl ]; then
# (1) the tool, default plan (only the recipe's data/reward/eval-off overrides + the attention route)
OUT_MAIN=$OUT; start_sampler; SAMPLER_TOOL=$SAMPLER
mapfile -t OV < <(printf -- '--override\n%s\n' data.dataloader_num_workers=0 reward.num_workers=1 \
  trainer.val_before_train=False trainer.test_freq=-1 +ray_kwargs.ray_init.include_dashboard=False \
  "reward.custom_reward_function.path=$ROOT/len_reward.py" reward.custom_reward_function.name=len_mod3 \
  "${ATTN_OV[@]}")
t0=$(date +%s.%N)
launch h "${TINY_FLAGS[@]}" $(model_flags "$TINY") --steps "$STEPS" --save-freq -1 "${OV[@]}" || exit 1
WATCH_S=${WATCH_S_TOOL:-270} follow h; rc=$?
kill "$SAMPLER_TOOL" 2>/dev/null; wait "$SAMPLER_TOOL" 2>/dev/null; mv "$OUT/gpu-mem.csv" "$OUT/gpu-mem-tool.csv"
echo "tool: watch rc=$rc, wall $(python3 -c "import time;print(round(time.time()-$t0,1))") s"
cp "$OUT/gpu-mem-tool.csv" "$STATE/h-gpu-mem-tool.csv"
fi
TOOL_LOG=$RUNS/$(cat "$STATE/h.run_id")/train.log
[ "$HALF" = tool ] && { echo "tool half done: call HALF=verl next"; exit 0; }
[ -f "$OUT/gpu-mem-tool.csv" ] || cp "$STATE/h-gpu-mem-tool.csv" "$OUT/gpu-mem-tool.csv"
# (2) verl's own keys by hand, in the host's environment (the same PYTHONPATH/PATH/env table as the tool's host)
start_sampler
if [ "$REHEARSAL" = 1 ]; then VERL=(python3 -m verl.trainer.main_ppo); else VERL=(python3 -m verl.trainer.main_ppo); fi
t0=$(date +%s.%N)
( cd "$WORK" && env $(sed -n '/^\[hosts.gpu.env\]/,$p' "$ROOT/hosts.toml" | grep '=' | sed 's/ = "/=/; s/"$//') \
  timeout "${VERL_S:-270}" "${VERL[@]}" \
  algorithm.adv_estimator=grpo algorithm.use_kl_in_reward=False algorithm.kl_ctrl.kl_coef=0.0 \
  actor_rollout_ref.actor.use_kl_loss=False actor_rollout_ref.actor.kl_loss_coef=0.0 \
  actor_rollout_ref.actor.clip_ratio_low=0.2 actor_rollout_ref.actor.clip_ratio_high=0.28 \
  actor_rollout_ref.actor.loss_agg_mode=token-mean \
  data.train_files="$TINY/data/train.parquet" data.val_files="$TINY/data/test.parquet" \
  data.max_prompt_length=128 data.max_response_length=64 data.train_batch_size=8 data.dataloader_num_workers=0 \
  actor_rollout_ref.model.path="$TINY/model" actor_rollout_ref.model.use_remove_padding=True \
  actor_rollout_ref.model.enable_gradient_checkpointing=True \
  "+actor_rollout_ref.model.override_config.attn_implementation=$ATTN" \
  actor_rollout_ref.actor.ppo_mini_batch_size=8 actor_rollout_ref.actor.use_dynamic_bsz=True \
  actor_rollout_ref.actor.ppo_max_token_len_per_gpu=384 actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=576 \
  actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=True actor_rollout_ref.actor.optim.lr=1e-6 \
  actor_rollout_ref.rollout.name=vllm actor_rollout_ref.rollout.n=4 actor_rollout_ref.rollout.tensor_model_parallel_size=1 \
  actor_rollout_ref.rollout.gpu_memory_utilization="$GPU_MEMORY_UTILIZATION" \
  reward.num_workers=1 "reward.custom_reward_function.path=$ROOT/len_reward.py" reward.custom_reward_function.name=len_mod3 \
  trainer.logger='[console]' trainer.val_before_train=False trainer.test_freq=-1 trainer.save_freq=-1 \
  trainer.resume_mode=disable trainer.n_gpus_per_node=1 trainer.nnodes=1 trainer.total_training_steps="$STEPS" \
  trainer.default_local_dir="$ROOT/verl-ckpt" +ray_kwargs.ray_init.include_dashboard=False ) > "$OUT/verl.log" 2>&1
vrc=$?; stop_sampler; mv "$OUT/gpu-mem.csv" "$OUT/gpu-mem-verl.csv"
echo "verl by hand: rc=$vrc, wall $(python3 -c "import time;print(round(time.time()-$t0,1))") s"
"$PY" "$REPO/bench/speed_table.py" "$TOOL_LOG" "$OUT/verl.log" --gpu-mem "$OUT/gpu-mem-tool.csv" "$OUT/gpu-mem-verl.csv" \
  | tee "$OUT/speed.md"
