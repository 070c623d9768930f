#!/bin/bash
# Device, after the two piece calls (carry [".carry/f00"], then [".carry/f01"], each: bash gpu/fa4-install.sh stash):
#   bash gpu/fa4-install.sh            installs the flash-attn-4 wheels into /tmp/site-fa4 (kept apart from
#                                      /tmp/site: apache-tvm-ffi 0.1.11 shadows vLLM's pinned 0.1.9, which only
#                                      flashinfer, not carried, uses) and runs gpu/fa4_probe.py
# A scenario uses it with GPU_FA4=1 (gpu/lib.sh puts /tmp/site-fa4 first on PYTHONPATH).
set -uo pipefail
if [ "${1:-}" = stash ]; then mkdir -p /tmp/payload-fa4 && mv .carry/f0*/fa4.tar.* /tmp/payload-fa4/ && ls -la /tmp/payload-fa4; exit; fi
t0=$(date +%s)
rm -rf /tmp/fa4w /tmp/site-fa4; mkdir -p /tmp/fa4w /tmp/site-fa4
cat /tmp/payload-fa4/fa4.tar.* | tar -C /tmp/fa4w -xf - || { echo "fa4 pieces missing (run the two stash calls)"; exit 2; }
REPO=$(cd "$(dirname "$0")/.." && pwd)
(cd /tmp/fa4w && sha256sum -c --quiet "$REPO/gpu/fa4-wheels.sha256") || { echo "fa4 wheel checksum mismatch"; exit 2; }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site-fa4 /tmp/fa4w/*.whl || exit 1
echo "installed $(ls /tmp/fa4w/*.whl | wc -l) wheels into /tmp/site-fa4 in $(( $(date +%s) - t0 )) s"
# `cutlass` lives in nvidia_cutlass_dsl/dsl_packages/ and the wheel puts it on sys.path with a .pth file
# (nvidia_cutlass_dsl_packages.pth); a --target dir on PYTHONPATH never runs .pth files, so the 2026-12-02 call failed
# with "No module named 'cutlass'". The dir goes on PYTHONPATH itself (gpu/lib.sh does the same).
PYTHONPATH=/tmp/site-fa4:/tmp/site-fa4/nvidia_cutlass_dsl/dsl_packages:/tmp/site python3 "$REPO/gpu/fa4_probe.py" \
  && touch /tmp/site-fa4/.installed
