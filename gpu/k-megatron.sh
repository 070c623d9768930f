#!/bin/bash
# Device call(s) (k), issue 33 item 2: `inv launch --framework megatron` on the tiny model through the tool, 3 steps
# saving every step (ka), then `--resume` to step 4 (kb): the same collect as a-success.sh / b-resume.sh.
#   bash gpu/k-megatron.sh          ka (watched <= WATCH_S_A, default 330 s), then kb watched for what is left of the
#                                   call (CALL_S, 585 s); kb is not started with < 90 s left
#   bash gpu/k-megatron.sh a | b    one part (b resumes this machine's ka); a part still running: bash gpu/watch.sh ka|kb
# Needs gpu/install.sh (verl payload) and gpu/megatron-install.sh (megatron-core 0.19.2, Megatron-Bridge 0.6.2,
# Transformer Engine 2.20.2: /tmp/site-mega, GPU_MEGA=1 puts it first on PYTHONPATH).
# Features: no flash-attn wheel, so one of these attention routes (MEGA_ATTN; gpu/megatron_probe.py says which work):
#   MEGA_ATTN=fused (default; what ran on 2026-12-02: k-megatron-a/-b): all four features on in the plan and the
#     tool's attention_backend=flash replaced by fused (cuDNN; TE's flash backend needs a flash-attn 2/3/4
#     distribution, transformer_engine/pytorch/attention/dot_product_attention/backends.py:106-230) as the last
#     --override (the plain key wins as the last override, dapo_ops/core/overrides.py PLAN_SETTING_KEYS).
#   MEGA_ATTN=noflash: USER_FEATURES=-flash_attn, the plan's own spelling of the same route on a GPU Megatron
#     (attention_backend=fused, remove_padding kept: dapo_ops/core/profiles.py); features flash_attn off.
#   MEGA_ATTN=unfused: -flash_attn + --override attention_backend=unfused, packed sequences (thd; TP 1). The probe's
#     TE-level check passes (attn unfused thd: OK); never run end-to-end. The old spelling, unfused with
#     remove_padding off (bshd), died in the first forward (k-megatron-unfused-bshd) and preflight refuses it now.
PART=${1:-ab}
T0=$(date +%s); CALL_S=${CALL_S:-585}  # one device call is at most 600 s: the b part watches what is left
MEGA_ATTN=${MEGA_ATTN:-fused}
case "$MEGA_ATTN" in unfused|noflash) GPU_USER_FEATURES="-flash_attn";; fused) GPU_USER_FEATURES="";;
  *) echo "MEGA_ATTN is fused, noflash or unfused"; exit 2;; esac
GPU_FRAMEWORK=megatron GPU_MEGA=${GPU_MEGA:-1}
[ "${GPU_REHEARSAL:-0}" = 1 ] && GPU_MEGA=0  # the stand-in needs no Megatron wheels
SCEN=k; . "$(dirname "$0")/lib.sh"
start_sampler; trap stop_sampler EXIT
standin_cue '{"accelerator": "gpu", "step_time": 0.5}'
# megatron-core's gradient_accumulation_fusion defaults to True in Megatron-Bridge's provider and needs apex's
# fused_weight_gradient_mlp_cuda (not carried): "ColumnParallelLinear was called with gradient_accumulation_fusion
# set to True but ... not found" (H200, 2026-12-02 11:46); verl's Megatron yaml has no such key, hence the "+"
EXTRA=(+actor_rollout_ref.actor.megatron.override_transformer_config.gradient_accumulation_fusion=False)
[ "$MEGA_ATTN" = fused ] && EXTRA+=(actor_rollout_ref.actor.megatron.override_transformer_config.attention_backend=fused)
[ "$MEGA_ATTN" = unfused ] && EXTRA+=(actor_rollout_ref.actor.megatron.override_transformer_config.attention_backend=unfused)
mapfile -t OV < <(ovr "${EXTRA[@]}")
echo "framework $FRAMEWORK; features: USER_FEATURES='$USER_FEATURES'; attention_backend route: $MEGA_ATTN"

evidence() {  # evidence RUN_ID: the Megatron keys of the config verl printed + resume / step / error lines
  local r=$1
  grep -a -o "'strategy': '[a-z0-9]*'\|attention_backend': [^,}]*\|'use_remove_padding': [A-Za-z]*\|'use_dynamic_bsz': [A-Za-z]*\|recompute_granularity': [^,}]*\|'use_mbridge': [A-Za-z]*\|'vanilla_mbridge': [A-Za-z]*" \
    "$RUNS/$r/train.log" 2>/dev/null | sort | uniq -c
  sed 's/\x1b\[[0-9;]*m//g' "$RUNS/$r/train.log" | grep -a -E "Resuming from|Megatron-Bridge|TF config|transformer_engine|Selected backend|Traceback|Error|^.{0,40}step:[0-9]+ - " \
    | grep -a -v "^\s*$" | cut -c1-240 | head -40
}

if [ "$PART" = ab ] || [ "$PART" = a ]; then
  inv preflight -H gpu $(model_flags "$TINY") --steps 3 --save-freq 1 "${OV[@]}" 2>&1 | tee "$OUT/preflight.txt"
  launch ka "${TINY_FLAGS[@]}" $(model_flags "$TINY") --steps 3 --save-freq 1 "${OV[@]}" || exit 1
  WATCH_S=${WATCH_S_A:-330} follow ka; rc=$?
  A=$(cat "$STATE/ka.run_id"); evidence "$A"
  echo "scenario k (a, megatron, $MEGA_ATTN): watch rc=$rc (0 = succeeded; 124 = still running: bash gpu/watch.sh ka)"
  [ "$rc" = 0 ] || exit "$rc"
  mv "$OUT/launch.txt" "$OUT/launch-a.txt"; mv "$OUT/watch.txt" "$OUT/watch-a.txt"
fi
if [ "$PART" = ab ] || [ "$PART" = b ]; then
  A=$(cat "$STATE/ka.run_id" 2>/dev/null) || { echo "no ka run on this machine (bash gpu/k-megatron.sh a first)"; exit 2; }
  left=$(( CALL_S - ($(date +%s) - T0) - 15 ))
  if [ "$left" -lt 90 ]; then echo "kb not started: ${left} s left in this call; next call: bash gpu/k-megatron.sh b"; exit 0; fi
  WATCH_S_B=${WATCH_S_B:-$left}
  launch kb "${TINY_FLAGS[@]}" $(model_flags "$TINY") --steps 4 --save-freq 1 --resume "$A" "${OV[@]}" || exit 1
  WATCH_S=$WATCH_S_B follow kb; rc=$?
  B=$(cat "$STATE/kb.run_id"); evidence "$B"
  echo "scenario k (b, megatron resume, $MEGA_ATTN): watch rc=$rc (124 = still running: bash gpu/watch.sh kb)"
  exit "$rc"
fi
