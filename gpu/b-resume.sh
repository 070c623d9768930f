#!/bin/bash
# Device call (b): continue (a)'s run to 4 steps from its checkpoints: inv launch --resume <a's run id>.
# Proof in the real log: "Resuming from …/global_step_3, setting global step to 3" and no step <= 3 trained again.
SCEN=b; . "$(dirname "$0")/lib.sh"
start_sampler; trap stop_sampler EXIT
standin_cue '{"accelerator": "gpu", "step_time": 0.5}'
A=$(cat "$STATE/a.run_id" 2>/dev/null) || { echo "no run of scenario a on this machine (run gpu/a-success.sh first)"; exit 2; }
mapfile -t OV < <(ovr)
launch b "${TINY_FLAGS[@]}" $(model_flags "$TINY") --steps 4 --save-freq 1 --resume "$A" "${OV[@]}" || exit 1
follow b; rc=$?
B=$(cat "$STATE/b.run_id")
echo "scenario b: watch rc=$rc; resume evidence:"
sed 's/\x1b\[[0-9;]*m//g' "$RUNS/$B/train.log" | grep -a -E "Resuming from|^.{0,40}step:[0-9]+ - training" | cut -c1-160
