#!/bin/bash
# Device, one call after the piece calls: reassemble + check the payload, install the verl wheels and dapo-ops'
# own wheels under /tmp/site, pip-install THIS checkout's dapo_ops there too (offline, no build isolation: the
# image's setuptools 81), build the tiny model (gpu/make_tiny.py -> /tmp/p/tiny). Idempotent (~15-25 s).
# Then every script uses PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH (gpu/lib.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
if [ ! -f /tmp/site/.installed ]; then
  cat /tmp/payload/part[0-9][0-9] > /tmp/payload.tar
  (cd /tmp && sha256sum -c /tmp/payload/payload.sha256)
  (cd /tmp/payload && sha256sum -c ops.sha256)
  mkdir -p /tmp/p && tar -xf /tmp/payload.tar -C /tmp/p && tar -xf /tmp/payload/ops.tar -C /tmp/p && rm -f /tmp/payload.tar
  (cd /tmp/p/whl && sha256sum -c --quiet ../SHA256SUMS-whl)
  (cd /tmp/p/ops && sha256sum -c --quiet ../SHA256SUMS-ops)
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
    /tmp/p/whl/*.whl /tmp/p/ops/*.whl 2>&1 | grep -v -i 'warning' || true
  touch /tmp/site/.installed
  echo "installed $(ls /tmp/p/whl /tmp/p/ops | grep -c whl) wheels into /tmp/site in $(( $(date +%s) - t0 )) s"
fi
# this checkout's dapo_ops (the merged branch): reinstalled on every call of this script
B=$(mktemp -d)
rm -rf /tmp/site/dapo_ops /tmp/site/dapo_ops-*.dist-info
if python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir --target "$B" . ; then
  cp -r "$B"/dapo_ops "$B"/dapo_ops-*.dist-info /tmp/site/
  mkdir -p /tmp/site/bin && cp "$B"/bin/dapo-ops /tmp/site/bin/ 2>/dev/null || true
  echo "pip-installed this checkout's dapo_ops into /tmp/site"
else  # no usable setuptools: the package is pure Python, copy it (tasks.py imports the checkout's anyway)
  cp -r dapo_ops /tmp/site/ && find /tmp/site/dapo_ops -name __pycache__ -prune -exec rm -rf {} +
  echo "pip install of dapo_ops failed; copied dapo_ops/ into /tmp/site instead"
fi
rm -rf "$B"
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH
python3 -c 'import dapo_ops, fabric, invoke, paramiko, verl, vllm, ray; print("imports ok: dapo_ops", dapo_ops.__version__, "verl", verl.__version__, "vllm", vllm.__version__, "ray", ray.__version__)'
[ -d /tmp/p/tiny/model ] || python3 gpu/make_tiny.py /tmp/p/tiny | tail -2
echo "install done in $(( $(date +%s) - t0 )) s"
