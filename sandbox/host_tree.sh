#!/usr/bin/env bash
# Build a bare-host (runtime = "host") verl STAND-IN root at DEST, the same tree bench.sh puts at /verl in the
# sandbox image: stand-in modules + the real verl 0.9.1 yaml + the runbook's tiny inputs + nvidia-smi/npu-smi
# stand-ins in DEST/bin. Test and rehearsal equipment only (gpu/README.md "rehearsal").
#   bash sandbox/host_tree.sh DEST [VENV]     prints DEST when done
set -euo pipefail
DEST=${1:?usage: host_tree.sh DEST [VENV]}
HERE=$(cd "$(dirname "$0")" && pwd)
VENV=${2:-$HERE/../.venv}
cfgroot=$("$VENV/bin/python" "$HERE/fetch_verl_config.py")
mkdir -p "$DEST/bin" "$DEST/dapo_runs"
(cd "$HERE/verl_standin" && tar --exclude=__pycache__ --exclude='*.pyc' -c .) | tar -C "$DEST" -x
(cd "$cfgroot" && find verl -name '*.yaml' -print0 | tar --null -T - -c) | tar -C "$DEST" -x
(cd "$cfgroot" && find verl/checkpoint_engine -name '*.py' -print0 | tar --null -T - -c) | tar -C "$DEST" -x
install -m 0755 "$HERE/bin/npu-smi" "$HERE/bin/nvidia-smi" "$DEST/bin/"
[ -e "$DEST/dapo-math-17k.parquet" ] || "$VENV/bin/python" "$HERE/sample_inputs.py" "$DEST" >/dev/null
echo "$DEST"
