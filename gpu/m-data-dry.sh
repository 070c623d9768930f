#!/bin/bash
# Device call (m): data that runs dry (issue 42 item 4). The tiny model on a 16-row copy of its train.parquet, batch 8,
# trainer.total_epochs=3: verl 0.9.1's V1 loop (trainer/ppo/v1/trainer_base.py:467) ends after 3 epochs (at most
# 6 steps, fewer under DAPO's filter_groups) and exits 0, though `--steps 10` asked for 10. Expected: preflight/plan
# say the data feeds fewer steps (the launch goes on only because $ALLOW asks for it) and the final verdict says
# "ended at step N of 10: the training data ran out", never "succeeded". Captured into $OUT/m.tgz.
SCEN=m; . "$(dirname "$0")/lib.sh"
start_sampler; trap stop_sampler EXIT
DRY=$ROOT/dry; mkdir -p "$DRY/data"; ln -sfn "$TINY/model" "$DRY/model"
cp "$TINY/data/test.parquet" "$DRY/data/test.parquet" 2>/dev/null || cp "$TINY/data/train.parquet" "$DRY/data/test.parquet"
"$PY" - "$TINY/data/train.parquet" "$DRY/data/train.parquet" "${ROWS:-16}" <<'PY'
import sys
import pyarrow.parquet as pq
t = pq.read_table(sys.argv[1]); n = int(sys.argv[3])
pq.write_table(t.slice(0, n), sys.argv[2]); print("train.parquet:", n, "of", t.num_rows, "rows")
PY
mapfile -t OV < <(ovr "trainer.total_epochs=${EPOCHS:-3}")
t0=$(date +%s)
[ "${PREFLIGHT:-1}" = 1 ] && inv preflight -H gpu $(model_flags "$DRY") --steps "${STEPS:-10}" "${OV[@]}" > "$OUT/preflight.txt" 2>&1; echo "preflight rc=$?"
tail -25 "$OUT/preflight.txt"
# shellcheck disable=SC2086
launch m "${TINY_FLAGS[@]}" $(model_flags "$DRY") --steps "${STEPS:-10}" --save-freq 2 ${ALLOW:-} "${OV[@]}" || exit 1
rid=$(cat "$STATE/m.run_id"); R=$RUNS/$rid
WATCH_S=$(( ${CALL_S:-560} - ($(date +%s) - t0) - 30 )) follow m; rc=$?
d=$OUT/$rid
stop_sampler
mv "$OUT"/gpu-mem.csv "$OUT"/launch.txt "$OUT"/watch.txt "$OUT"/preflight.txt "$d/" 2>/dev/null
tar -C "$OUT" -czf "$OUT/m.tgz" "$rid" && rm -rf "$d"
echo "scenario m: watch rc=$rc in $(( $(date +%s) - t0 )) s"
