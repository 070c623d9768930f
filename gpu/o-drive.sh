#!/bin/bash
# Device calls (o), issue 45: the two INTERLEAVED pairs of gpu/o-speed.sh on one warm machine, as back-to-back calls
# that each go on where the last stopped: tool1 -> verl1 -> tool2 -> verl2 (a half starts only when the one before
# it has ended: one run at a time on the device). Each call works until CALL_S (default 560 s) and brings back one
# archive, $OUT/o-<time>.tgz, with every half's files under <stage>/ (the device returns at most 8 files).
#   bash gpu/o-drive.sh      (every call: the first also runs gpu/install.sh, inside the call's clock)
#   O_SEQ="tool1 verl1" bash gpu/o-drive.sh: one pair only.  GPU_REHEARSAL=1: the same against the stand-in, here.
# Stage state: $ROOT/state/o-drive/<stage>.{started,done}; a tool half whose watch says the supervisor died (3) or
# no run / an error (4) stops the drive (its verl may still hold the device: look before going on, STOP file).
set -uo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
T0=${O_T0:-$(date +%s)}; CALL_S=${CALL_S:-560}; DEADLINE=$((T0 + CALL_S))
if [ "${GPU_REHEARSAL:-0}" = 1 ]; then ROOT=${GPU_REHEARSAL_ROOT:-$REPO/.gpu-rehearsal}; FINAL=${OUT:-$ROOT/out/o-drive}
else
  ROOT=/tmp/dapo; FINAL=${OUT:?the device tool sets OUT}
  [ -f /tmp/site/.installed ] || bash "$REPO/gpu/install.sh" || { echo "install failed"; exit 1; }
fi
ST=$ROOT/state/o-drive; SCRATCH=$ROOT/o-drive-out/$(date +%H%M%S); mkdir -p "$ST" "$SCRATCH" "$FINAL"
# pack what this call wrote so far into $FINAL (called after each stage and on the way out: a call cut at the
# device's 600 s still brings back the stages before)
pack() {
  local name=o-$(date +%H%M%S)-$1.tgz
  tar -czf "/tmp/$name" -C "$SCRATCH" . 2>/dev/null && rm -f "$FINAL"/o-*.tgz && mv "/tmp/$name" "$FINAL/"
}
trap 'pack term; exit 143' TERM
[ -f "$ST/STOP" ] && { echo "stopped by an earlier call: $(cat "$ST/STOP") (rm $ST/STOP to go on)"; exit 3; }
for stage in ${O_SEQ:-tool1 verl1 tool2 verl2}; do
  [ -f "$ST/$stage.done" ] && continue
  left=$((DEADLINE - $(date +%s)))
  [ "$left" -lt 45 ] && { echo "$stage: ${left} s left in this call: next call"; break; }
  half=${stage%%[0-9]*}; pair=${stage#"$half"}
  case $half in tool) h=tool; w=watch ;; verl) h=verl; w=verlwatch ;; *) echo "bad stage $stage"; exit 2 ;; esac
  [ -f "$ST/$stage.started" ] && h=$w
  touch "$ST/$stage.started"
  echo "== $stage: HALF=$h PAIR=$pair, $left s left ($(date +%T))"
  # into a file, not through `| tee`: a pipe stays open while anything o-speed.sh started holds it, and the call
  # then hung to the device's 600 s kill (2026-12-07 fifth session, call 12)
  OUT=$SCRATCH/$stage DEADLINE=$((DEADLINE - 15)) HALF=$h PAIR=$pair bash "$REPO/gpu/o-speed.sh" > "$SCRATCH/$stage.txt" 2>&1
  rc=$?; cat "$SCRATCH/$stage.txt"
  if [ "$half" = tool ]; then
    case $rc in
      124) echo "$stage: still running"; pack "$stage"; break ;;
      0|1|5) touch "$ST/$stage.done"; echo "$stage: ended (watch rc $rc)" ;;
      *) echo "$stage: watch rc $rc (3: supervisor dead, 4: no run / error; o-speed 9: launch failed)" | tee "$ST/STOP"
         pack "$stage"; exit 3 ;;
    esac
  else
    # verl by its argv (o-speed.sh verl_alive), not the pid file's setsid pid
    if pgrep -f -- "trainer.default_local_dir=$ROOT/verl-ckpt-o$pair" > /dev/null; then echo "$stage: still running"; break; fi
    touch "$ST/$stage.done"; echo "$stage: ended"
  fi
  pack "$stage"
done
ls "$ST" | tr '\n' ' '; echo
pack end; ls -la "$FINAL"
