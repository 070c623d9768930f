#!/bin/bash
# Device call (a): the tiny model, 3 steps (save every step), through the tool's own tasks:
# inv preflight -> inv launch --steps 3 -> inv watch -> inv status / logs --errors (gpu/lib.sh collect).
SCEN=a; . "$(dirname "$0")/lib.sh"
start_sampler; trap stop_sampler EXIT
standin_cue '{"accelerator": "gpu", "step_time": 0.5}'
mapfile -t OV < <(ovr)
# the settings come from the environment gpu/lib.sh exports (the same values launch gets)
inv preflight -H gpu $(model_flags "$TINY") --steps 3 --save-freq 1 "${OV[@]}" 2>&1 | tee "$OUT/preflight.txt"
launch a "${TINY_FLAGS[@]}" $(model_flags "$TINY") --steps 3 --save-freq 1 "${OV[@]}" || exit 1
follow a; rc=$?
echo "scenario a: watch rc=$rc (0 = succeeded)"
