#!/bin/bash
# HERE (CPU machine, no device time): the Megatron route's payload (issue 33 item 2), as carry pieces .carry/mNN
# (<= 52 MiB each: a call carries the tree + one piece, 64 MiB in all). gpu/README.md "Megatron on the H200".
#   MEGA_FROM=/work/wt/megaprep bash gpu/megatron-prepare.sh   # reuse another checkout's caches (no rebuild)
#   bash gpu/megatron-prepare.sh                               # download what is missing; build TE-torch if missing
# Caches (ignored): .whl-cache/mega (binary wheels), .whl-cache/mega-extra (gpu/wheels-megatron-extra.txt: energon,
# modelopt and the import-time dependencies neither /tmp/site nor the image has), .whl-cache/mega-src (the
# transformer-engine-torch sdist), .whl-cache/mega-build (transformer-engine-torch built HERE against torch
# 2.11.0+cu130's headers, no GPU needed: it is a CppExtension, 33 C++ units, no .cu), .whl-cache/te-venv (the
# build's python 3.12 + torch, ~5 GB).
# Writes gpu/megatron-wheels.sha256 (every carried file; commit it) and .carry/m00.. (mega.tar.NN; the last piece
# also holds mega.sha256, the whole tar's checksum). ONE payload: gpu/megatron-install.sh installs all of it in one
# pip command (megatron-core, Megatron-Bridge and megatron-energon share the megatron/ namespace dir, the TE wheels
# transformer_engine/: one pip --target run merges them; a second run would skip an existing dir).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd); cd "$REPO"
EXCL=$(git rev-parse --git-path info/exclude)
for p in /.whl-cache/ /.carry/; do grep -qxF "$p" "$EXCL" 2>/dev/null || echo "$p" >> "$EXCL"; done
C=.whl-cache/mega; CX=.whl-cache/mega-extra; SRC=.whl-cache/mega-src; BLD=.whl-cache/mega-build
mkdir -p "$C" "$CX" "$SRC" "$BLD"
if [ -n "${MEGA_FROM:-}" ]; then  # copy another checkout's caches (files only; nothing overwritten)
  for d in mega mega-extra mega-src mega-build; do [ -d "$MEGA_FROM/.whl-cache/$d" ] && cp -n "$MEGA_FROM/.whl-cache/$d"/* ".whl-cache/$d/" 2>/dev/null || true; done
fi
TE=2.20.2
WHEELS=(megatron-core==0.19.2 megatron-bridge==0.6.2 mbridge==0.15.1 "transformer-engine==$TE" "transformer-engine-cu13==$TE")
PLAT=""; for n in 17 24 27 28 31 34 35; do PLAT="$PLAT --platform manylinux_2_${n}_x86_64"; done
have() { local d=$1 n=${2%%==*} v=${2##*==}; n=${n//-/_}; ls "$d/${n}-${v}-"*.whl >/dev/null 2>&1; }  # have DIR NAME==VERSION
miss=(); for w in "${WHEELS[@]}"; do have "$C" "$w" || miss+=("$w"); done
if [ ${#miss[@]} -gt 0 ]; then
  echo "downloading ${miss[*]}"
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp $PLAT \
    --platform manylinux2014_x86_64 --platform any -d "$C" "${miss[@]}"
fi
# the extras: pinned in gpu/wheels-megatron-extra.txt; none may be a package /tmp/site already has (site-mega comes
# first on PYTHONPATH and would shadow it: Ray's dashboard agent broke on a newer opentelemetry-api that way)
norm() { tr 'A-Z_.' 'a-z--'; }
mapfile -t EXTRA < <(sed 's/#.*//' gpu/wheels-megatron-extra.txt | awk 'NF {print $1}')
have_site=$(sed 's/#.*//' gpu/wheels-verl.txt gpu/wheels-ops.txt | awk -F'==' 'NF {print $1}' | norm | sort -u)
for w in "${EXTRA[@]}"; do
  n=$(echo "${w%%==*}" | norm)
  if echo "$have_site" | grep -qxF "$n"; then
    echo "gpu/wheels-megatron-extra.txt: $n is in /tmp/site already (gpu/wheels-verl.txt or wheels-ops.txt): remove it from the extra list"; exit 1
  fi
done
missx=(); for w in "${EXTRA[@]}"; do have "$CX" "$w" || missx+=("$w"); done
if [ ${#missx[@]} -gt 0 ]; then
  echo "downloading ${missx[*]}"
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp $PLAT \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any -d "$CX" "${missx[@]}"
fi
XW=(); for w in "${EXTRA[@]}"; do n=${w%%==*}; n=${n//-/_}; XW+=("$(ls "$CX/${n}-${w##*==}-"*.whl | head -1)"); done

# transformer-engine-torch: PyPI has only the sdist. Built HERE (torch.utils.cpp_extension.CppExtension: the host
# C++ compiler against torch 2.11.0+cu130's headers and the CUDA/cuDNN/NCCL headers of the nvidia-* wheels;
# NVTE_BUILD_USE_NVIDIA_WHEELS=1; nvidia-cuda-crt + nvidia-cuda-cccl add crt/host_config.h and nv/target that
# torch's own wheels lack). NVTE_PYTORCH_FORCE_BUILD=TRUE skips setup.py's download of a prebuilt wheel from GitHub.
if ! ls "$SRC"/transformer_engine_torch-$TE.tar.gz >/dev/null 2>&1 || ! ls "$BLD"/transformer_engine_torch-$TE-*.whl >/dev/null 2>&1; then
  V=.whl-cache/te-venv
  if [ ! -x "$V/bin/python" ]; then
    PY312=""  # the first python3.12 that runs (a pyenv shim exists but may refuse: "python3.12: command not found")
    for c in "$(command -v python3.12 || true)" /root/.pyenv/versions/3.12*/bin/python3.12; do
      [ -n "$c" ] && [ -x "$c" ] && "$c" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null && { PY312=$c; break; }
    done
    [ -n "$PY312" ] || { echo "need a python3.12 to build transformer-engine-torch (or MEGA_FROM=<checkout with the caches>)"; exit 2; }
    "$PY312" -m venv "$V"
    "$V/bin/pip" install -q torch==2.11.0 wheel "setuptools<82" pybind11 ninja numpy "nvidia-cuda-crt==13.0.*" "nvidia-cuda-cccl==13.0.*"
  fi
  ls "$SRC"/transformer_engine_torch-$TE.tar.gz >/dev/null 2>&1 || \
    "$V/bin/pip" download -q --no-deps --no-binary=:all: --no-build-isolation -d "$SRC" "transformer-engine-torch==$TE"
  T=$(mktemp -d); tar -xzf "$SRC/transformer_engine_torch-$TE.tar.gz" -C "$T"
  echo "building transformer-engine-torch $TE here (2 jobs: ~12 min on this 2-core machine)"
  (cd "$T/transformer_engine_torch-$TE" && NVTE_PYTORCH_FORCE_BUILD=TRUE NVTE_BUILD_USE_NVIDIA_WHEELS=1 MAX_JOBS=2 \
    nice -n 19 "$REPO/$V/bin/pip" wheel -q --no-build-isolation --no-deps -w "$REPO/$BLD" .)
  rm -rf "$T"
fi

# never a .pth (pip install --target + PYTHONPATH never runs them: the FA4 lesson, gpu/README.md)
for w in "$C"/*.whl "${XW[@]}" "$BLD"/*.whl; do
  if unzip -Z1 "$w" | grep -q '\.pth$'; then echo "$w carries a .pth file: handle it in megatron-install.sh"; exit 1; fi
done
S=$(mktemp -d); mkdir "$S/mega"
cp "$C"/*.whl "${XW[@]}" "$BLD"/transformer_engine_torch-$TE-*.whl "$SRC"/transformer_engine_torch-$TE.tar.gz "$S/mega/"
(cd "$S/mega" && sha256sum ./* | sed 's|  \./|  |') > gpu/megatron-wheels.sha256
(cd "$S" && tar -cf mega.tar mega && sha256sum mega.tar > mega.sha256)
rm -rf .carry/m[0-9][0-9]; mkdir -p .carry
PIECE=54525952      # 52 MiB
(cd "$S" && split -b $PIECE -d -a 2 mega.tar mega.tar.)
for f in "$S"/mega.tar.[0-9][0-9]; do k=${f##*.}; mkdir -p ".carry/m$k"; mv "$f" ".carry/m$k/"; done
last=$(ls -d .carry/m[0-9][0-9] | tail -1); cp "$S/mega.sha256" "$last/"
rm -rf "$S"
awk '{print $2}' gpu/megatron-wheels.sha256 | while read -r f; do
  printf '%-78s %7.2f MB\n' "$f" "$(echo "$(stat -c %s "$C/$f" 2>/dev/null || stat -c %s "$CX/$f" 2>/dev/null || stat -c %s "$BLD/$f" 2>/dev/null || stat -c %s "$SRC/$f") / 1000000" | bc -l)"
done
du -b .carry/m[0-9][0-9] | sed 's|^|piece bytes: |'
n=$(ls -d .carry/m[0-9][0-9] | wc -l); lastk=$(printf '%02d' $((n - 1)))
# a call carries the tracked tree + its pieces, 64 MiB in all: may the last piece ride with the verl payload's p08?
tree=$(git ls-files -z | xargs -0 stat -c %s 2>/dev/null | awk '{t += $1} END {print t}')
p08=$(du -sbL .carry/p08 2>/dev/null | cut -f1); lastb=$(du -sbL ".carry/m$lastk" | cut -f1)
echo "pieces: $n (m00..m$lastk; total $(du -cb .carry/m[0-9][0-9] | tail -1 | cut -f1) bytes; tree $tree bytes)"
if [ -n "$p08" ] && [ $((tree + p08 + lastb)) -le 67108864 ]; then
  echo "the last piece m$lastk rides with p08: bash gpu/stash-piece.sh 08 && bash gpu/megatron-install.sh stash, carry [\".carry/p08\", \".carry/m$lastk\"]"
else
  echo "the last piece m$lastk ($lastb bytes) does not fit beside p08 (${p08:-?} bytes): it rides with the install call:"
  echo "  bash gpu/megatron-install.sh stash && bash gpu/install.sh && bash gpu/megatron-install.sh, carry [\".carry/m$lastk\"]"
fi
echo "the others: one call each, bash gpu/megatron-install.sh stash, carry [\".carry/mNN\"]"
