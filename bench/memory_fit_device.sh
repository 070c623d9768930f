#!/bin/bash
# Device side (the lead's GPU budget): two more calibration runs for bench/memory_fit.csv on the H200, with the
# real-verl harness of ../shared/real-verl (prepare.sh pieces installed by device-install.sh; memrun.sh and
# run-verl.sh copied next to this script's checkout, e.g. into .carry/real-verl/). One 10-minute call fits both.
#   bash bench/memory_fit_device.sh HARNESS_DIR TINY_1_46B_DIR
# Prints one CSV line per measured peak (estimate_gib empty): append them to bench/memory_fit.csv, then run
# `.venv/bin/python bench/memory_fit.py --write`. Run 9: gradient checkpointing on (the activation formula with
# checkpointing); run 10: dynamic batch, a 4096-token update budget, no offload (the resident actor next to vLLM).
H=${1:?harness dir with memrun.sh}; T=${2:?tiny 1.46B model dir}
: "${OUT:?set by the device tool}"
row() {  # N CONFIG COLUMNS...: the peaks of run N as CSV lines
  local n=$1 cfg=$2 cols=$3 mib gib
  mib=$(awk -F', ' 'NR>1{gsub(" MiB","",$2); if ($2+0>m) m=$2+0} END{print m+0}' "$OUT/gpu-mem-$n.csv")
  gib=$(sed 's/\x1b\[[0-9;]*m//g' "$OUT"/verl-run-$n-*.log | grep -o 'actor/perf/max_memory_allocated_gb:[0-9.]*' | cut -d: -f2 | sort -n | tail -1)
  echo "$cfg,H200,139.80,tiny-1.46b,fsdp,dapo,1,1,$cols,peak,nvidia-smi,$(awk -v m="$mib" 'BEGIN{printf "%.2f", m/1024}'),,real-verl gpu-mem-$n.csv $mib MiB"
  [ -n "$gib" ] && echo "$cfg,H200,139.80,tiny-1.46b,fsdp,dapo,1,1,$cols,update,torch-max-allocated,$(printf %.2f "$gib"),,real-verl verl-run-$n log actor/perf/max_memory_allocated_gb"
}
COMMON="data.max_response_length=1920 actor_rollout_ref.rollout.n=8 actor_rollout_ref.rollout.ignore_eos=True trainer.save_freq=-1"
bash "$H/memrun.sh" 9 gc-micro16 "$T" /tmp/ck9 $COMMON trainer.total_training_steps=1 \
  actor_rollout_ref.rollout.gpu_memory_utilization=0.5 actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16 \
  actor_rollout_ref.model.enable_gradient_checkpointing=True \
  actor_rollout_ref.actor.fsdp_config.param_offload=True actor_rollout_ref.actor.fsdp_config.optimizer_offload=True >&2
# columns: util,prompt,response,ppo_micro,logprob_micro,dynamic,gc,offload,steps
row 9 run9-1.46b-u0.5-gc-micro16 "0.5,128,1920,16,8,0,1,1,1"
bash "$H/memrun.sh" 10 dyn4096-nooffload "$T" /tmp/ck10 $COMMON trainer.total_training_steps=2 \
  actor_rollout_ref.rollout.gpu_memory_utilization=0.4 actor_rollout_ref.actor.use_dynamic_bsz=True \
  actor_rollout_ref.actor.ppo_max_token_len_per_gpu=4096 actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=True \
  actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=6144 >&2
row 10 run10-1.46b-u0.4-dyn4096 "0.4,128,1920,0,0,1,0,0,2"
