#!/bin/bash
# Device call: keep watching scenario NAME's run (the supervisor is detached: it went on between calls), collect.
#   bash gpu/watch.sh c
NAME=${1:?scenario name: a b c d}
SCEN=$NAME-watch; . "$(dirname "$0")/lib.sh"
start_sampler; trap stop_sampler EXIT
follow "$NAME"; rc=$?
echo "scenario $NAME: watch rc=$rc"
# the device tool brings back at most 8 files: one archive of everything this call wrote
( cd "$OUT" && tar -czf "/tmp/$NAME-watch.tgz" . && rm -rf ./* && mv "/tmp/$NAME-watch.tgz" "$OUT/" )
ls -la "$OUT"
