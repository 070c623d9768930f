#!/bin/bash
# Device call (c): the recipe's 1.46 B model at gpu_memory_utilization=0.9 -> real OOM at the first weight sync
# (vLLM wake-up in update_weights) -> the supervisor stops the attempt (process group + its Ray session) ->
# the ladder's fix -> the next attempt succeeds. Watches WATCH_S (540) s; if the run is still going, the next
# call is gpu/watch.sh c.
SCEN=c; . "$(dirname "$0")/lib.sh"
start_sampler; trap stop_sampler EXIT
standin_cue '{"accelerator": "gpu", "step_time": 0.5, "failure": {"kind": "oom-device", "phase": "update_weights", "step": 1, "times": 1}}'
ensure_big
mapfile -t OV < <(ovr)
# MEMORY_FIT=warn: the memory-fit estimate is reported (preflight.txt, launch's quick checks) but does not start
# the run on a rung that fits, so the real OOM this scenario exists to show happens
export MEMORY_FIT=warn
GPU_MEMORY_UTILIZATION=0.9 inv preflight -H gpu $(model_flags "$BIG") --steps 2 --save-freq 1 "${OV[@]}" 2>&1 | tee "$OUT/preflight.txt"
launch c "${TINY_FLAGS[@]}" $(model_flags "$BIG") --steps 2 --save-freq 1 --gpu-memory-utilization 0.9 "${OV[@]}" || exit 1
follow c; rc=$?
echo "scenario c: watch rc=$rc (0 succeeded, 124 still running: call gpu/watch.sh c)"
