#!/bin/bash
# Device call: keep watching scenario NAME's run (the supervisor is detached: it went on between calls), collect.
#   bash gpu/watch.sh c
NAME=${1:?scenario name: a b c d}
SCEN=$NAME-watch; . "$(dirname "$0")/lib.sh"
start_sampler; trap stop_sampler EXIT
follow "$NAME"; rc=$?
echo "scenario $NAME: watch rc=$rc"
