#!/bin/bash
# Device call (d): the recipe's run 7: 1.46 B model, 64 x ~1 970-token micro-batches with offload on ->
# real OOM in update_actor (forward) -> ladder fix -> success (the recipe's fix was micro-batch 64 -> 4).
SCEN=d; . "$(dirname "$0")/lib.sh"
start_sampler; trap stop_sampler EXIT
standin_cue '{"accelerator": "gpu", "step_time": 0.5, "failure": {"kind": "oom-device", "phase": "update_actor", "step": 1, "times": 1, "avoid_with": "never"}}'
ensure_big
mapfile -t OV < <(ovr actor_rollout_ref.rollout.ignore_eos=True actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8 \
                      actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=8)
# MEMORY_FIT=warn: the memory-fit estimate is reported (preflight.txt, launch's quick checks) but does not start
# the run on a rung that fits, so the real OOM this scenario exists to show happens
export MEMORY_FIT=warn
ROLLOUT_N=8 GPU_MEMORY_UTILIZATION=0.5 MICRO_BATCH_SIZE=64 ENABLE_OFFLOAD=true inv preflight -H gpu $(model_flags "$BIG") --steps 1 --save-freq -1 --max-response-length 1920 "${OV[@]}" 2>&1 | tee "$OUT/preflight.txt"
launch d "${TINY_FLAGS[@]}" $(model_flags "$BIG") --steps 1 --save-freq -1 --max-response-length 1920 --rollout-n 8 \
  --gpu-memory-utilization 0.5 --micro-batch-size 64 --offload "${OV[@]}" || exit 1
follow d; rc=$?
echo "scenario d: watch rc=$rc (0 succeeded, 124 still running: call gpu/watch.sh d)"
