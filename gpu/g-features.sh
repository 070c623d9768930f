#!/bin/bash
# Device call (g): scenarios (a)+(b) with the performance features ON, tiny model, 3 steps then resume to 4, one call.
# Attention route (gpu/README.md "Performance features"):
#   GPU_FA4=1 (after gpu/fa4-install.sh): all four defaults on (USER_FEATURES empty) and
#     attn_implementation=flash_attention_4 (flash-attn-4, CuTe DSL, varlen) replacing the tool's flash_attention_2
#   otherwise (no flash-attn wheel): USER_FEATURES=-flash_attn, the honest spelling: the tool emits
#     attn_implementation=sdpa and, on FSDP with profile 0.9, keeps dynamic_batch, remove_padding and
#     gradient_checkpointing on (core/features.py IMPLIED_OFF / implies_off). sdpa + use_remove_padding=True works
#     through verl's pure-torch unpad/pad fallbacks
#     (verl/utils/attention_utils.py:23-77) + transformers' packed-sequence mask from position_ids
#     (transformers/masking_utils.py:880-888, verl passes attention_mask=None, use_cache=False:
#     verl/workers/engine/fsdp/transformer_impl.py:1256-1260, :1566-1569).
# FA4 only: the tool emits +...attn_implementation=flash_attention_2 for flash_attn on (core/profiles.py); '++'
# replaces it (Hydra applies overrides in order, extra overrides come last: core/overrides.py build_command).
# The 2026-12-02 H200 runs (tests/fixtures/real-verl/tool-runs/g-features-a and g-features-b) still used the older spelling
# (features all on + '++...=sdpa'); the same keys reach verl either way.
if [ "${GPU_FA4:-0}" = 1 ]; then GPU_USER_FEATURES=""; else GPU_USER_FEATURES="-flash_attn"; fi
SCEN=g; . "$(dirname "$0")/lib.sh"
start_sampler; trap stop_sampler EXIT
standin_cue '{"accelerator": "gpu", "step_time": 0.5}'
if [ "${GPU_FA4:-0}" = 1 ]; then
  ATTN=flash_attention_4; mapfile -t OV < <(ovr "++actor_rollout_ref.model.override_config.attn_implementation=$ATTN")
else
  ATTN=sdpa; mapfile -t OV < <(ovr)
fi
echo "features: USER_FEATURES='$USER_FEATURES'; attention route: $ATTN"
inv preflight -H gpu $(model_flags "$TINY") --steps 3 --save-freq 1 "${OV[@]}" 2>&1 | tee "$OUT/preflight.txt"
launch ga "${TINY_FLAGS[@]}" $(model_flags "$TINY") --steps 3 --save-freq 1 "${OV[@]}" || exit 1
follow ga; rc=$?
echo "scenario g (a, features on, $ATTN): watch rc=$rc (0 = succeeded)"
[ $rc = 0 ] || exit $rc
A=$(cat "$STATE/ga.run_id"); mv "$OUT/launch.txt" "$OUT/launch-a.txt"; mv "$OUT/watch.txt" "$OUT/watch-a.txt"
launch gb "${TINY_FLAGS[@]}" $(model_flags "$TINY") --steps 4 --save-freq 1 --resume "$A" "${OV[@]}" || exit 1
follow gb; rc=$?
B=$(cat "$STATE/gb.run_id")
echo "scenario g (b, resume, $ATTN): watch rc=$rc; evidence:"
for r in "$A" "$B"; do
  sed 's/\x1b\[[0-9;]*m//g' "$RUNS/$r/train.log" | grep -a -E "Resuming from|attn_implementation|use_remove_padding|use_dynamic_bsz|enable_gradient_checkpointing|Monkey patch|flash_attention_4|sdpa|^.{0,40}step:[0-9]+ - " \
    | grep -a -v "^\s*$" | cut -c1-220 | head -40
done
grep -a -o "attn_implementation=[a-z_0-9]*\|use_remove_padding=[A-Za-z]*\|use_dynamic_bsz=[A-Za-z]*\|enable_gradient_checkpointing=[A-Za-z]*" "$RUNS/$A/spec.json" "$RUNS/$A/run.json" 2>/dev/null | sort | uniq -c
