#!/bin/bash
# HERE (no device time): the flash-attn-4 route's wheels (route (b) of gpu/README.md "Performance features"),
# downloaded for cp312 manylinux x86-64 and split into carry pieces .carry/f00, .carry/f01 (<= 50 MiB each).
# flash-attn-4 is pure Python (CuTe DSL, JIT-compiled on the GPU at first use); transformers 5.9 selects it with
# attn_implementation=flash_attention_4 (transformers/modeling_flash_attention_utils.py:102-109, Hopper and newer).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd); C=$REPO/.whl-cache/fa4; mkdir -p "$C"
WHEELS=(flash-attn-4==4.0.0b36 nvidia-cutlass-dsl==4.8.1 nvidia-cutlass-dsl-libs-base==4.8.1 nvidia-cutlass-dsl-libs-core==4.8.1
        nvidia-cutlass-dsl-libs-cu13==4.8.1 quack-kernels==0.6.5 apache-tvm-ffi==0.1.11)
pip download -q --pre --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d "$C" "${WHEELS[@]}"
rm -rf "$REPO/.carry/f00" "$REPO/.carry/f01"; mkdir -p "$REPO/.carry/f00" "$REPO/.carry/f01"
tar -C "$C" -cf - . | split -b 50M -d -a 2 - "$REPO/.carry/fa4.tar."
mv "$REPO/.carry/fa4.tar.00" "$REPO/.carry/f00/"; mv "$REPO/.carry/fa4.tar.01" "$REPO/.carry/f01/"
[ ! -e "$REPO/.carry/fa4.tar.02" ] || { echo "fa4 wheels need a third piece"; exit 1; }
(cd "$C" && sha256sum ./*.whl) > "$REPO/gpu/fa4-wheels.sha256"
du -sh "$REPO/.carry/f00" "$REPO/.carry/f01"
