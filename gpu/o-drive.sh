#!/bin/bash
# Device calls (o), issue 45: the two INTERLEAVED pairs of gpu/o-speed.sh on one warm machine, as back-to-back calls
# that each go on where the last stopped: tool1 -> verl1 -> tool2 -> verl2 (a half starts only when the one before
# it has ended: one run at a time on the device). Each call works until CALL_S (default 570 s) and brings back one
# archive, $OUT/o-<time>.tgz, with every half's files under <stage>/ (the device returns at most 8 files).
#   bash gpu/install.sh && bash gpu/o-drive.sh      (first call)      bash gpu/o-drive.sh      (the next ones)
#   O_SEQ="tool1 verl1" bash gpu/o-drive.sh: one pair only.  GPU_REHEARSAL=1: the same against the stand-in, here.
# Stage state: $ROOT/state/o-drive/<stage>.{started,done}.
set -uo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
T0=$(date +%s); CALL_S=${CALL_S:-570}; DEADLINE=$((T0 + CALL_S))
if [ "${GPU_REHEARSAL:-0}" = 1 ]; then ROOT=${GPU_REHEARSAL_ROOT:-$REPO/.gpu-rehearsal}; FINAL=${OUT:-$ROOT/out/o-drive}
else ROOT=/tmp/dapo; FINAL=${OUT:?the device tool sets OUT}; fi
ST=$ROOT/state/o-drive; SCRATCH=$ROOT/o-drive-out/$(date +%H%M%S); mkdir -p "$ST" "$SCRATCH" "$FINAL"
for stage in ${O_SEQ:-tool1 verl1 tool2 verl2}; do
  [ -f "$ST/$stage.done" ] && continue
  left=$((DEADLINE - $(date +%s)))
  [ "$left" -lt 45 ] && { echo "$stage: ${left} s left in this call: next call"; break; }
  half=${stage%%[0-9]*}; pair=${stage#"$half"}
  case $half in tool) h=tool; w=watch ;; verl) h=verl; w=verlwatch ;; *) echo "bad stage $stage"; exit 2 ;; esac
  [ -f "$ST/$stage.started" ] && h=$w
  touch "$ST/$stage.started"
  echo "== $stage: HALF=$h PAIR=$pair, $left s left ($(date +%T))"
  OUT=$SCRATCH/$stage DEADLINE=$((DEADLINE - 15)) HALF=$h PAIR=$pair bash "$REPO/gpu/o-speed.sh" 2>&1 | tee "$SCRATCH/$stage.txt"
  rc=${PIPESTATUS[0]}
  if [ "$half" = tool ]; then
    [ "$rc" = 124 ] && { echo "$stage: still running"; break; }
    touch "$ST/$stage.done"; echo "$stage: ended (watch rc $rc)"
  else
    pid=$(cat "$ROOT/state/o$pair-verl.pid" 2>/dev/null)
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then echo "$stage: still running"; break; fi
    touch "$ST/$stage.done"; echo "$stage: ended"
  fi
done
ls "$ST" | tr '\n' ' '; echo
name=o-$(date +%H%M%S).tgz
tar -czf "/tmp/$name" -C "$SCRATCH" . && mv "/tmp/$name" "$FINAL/" && ls -la "$FINAL"
