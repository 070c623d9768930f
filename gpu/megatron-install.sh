#!/bin/bash
# Device, the Megatron route (issue 33 item 2; gpu/README.md "Megatron on the H200"). After the verl payload
# (gpu/stash-piece.sh NN, gpu/install.sh: /tmp/site) and gpu/megatron-prepare.sh HERE:
#   bash gpu/megatron-install.sh stash        one call per piece, carry [".carry/mNN"]: moves it to /tmp/payload-mega
#   bash gpu/megatron-install.sh              checks + installs every carried wheel into /tmp/site-mega (kept apart
#                                             from /tmp/site; scenarios put it first on PYTHONPATH with GPU_MEGA=1),
#                                             then runs gpu/megatron_probe.py on the tiny model (~20-40 s)
#   bash gpu/megatron-install.sh build        only if the probe's TE import failed on the prebuilt
#                                             transformer-engine-torch (built HERE): builds it from the carried sdist
#                                             on the device in the background (nohup setsid; log /tmp/te-build.log),
#                                             waits up to BUILD_WAIT_S (default 540) s, reinstalls, probes again
#   bash gpu/megatron-install.sh build-wait   a later call: waits for that build again, then reinstalls + probes
#   bash gpu/megatron-install.sh probe        the probe alone
# No .pth file is carried (gpu/megatron-prepare.sh refuses one): PYTHONPATH alone is enough.
# The payload is ONE set (gpu/megatron-prepare.sh): megatron-core, Megatron-Bridge, TE, megatron-energon,
# nvidia-modelopt and the import-time dependencies of gpu/wheels-megatron-extra.txt; none of it may shadow
# /tmp/site or the image (checked after every install: gpu/megatron_probe.py shadow).
# MEGA_PAYLOAD, MEGA_SITE, MEGA_W, VERL_SITE, MEGA_PYTHON, MEGA_TINY, MEGA_IMAGE_PATH move the paths / python for
# a rehearsal HERE
# (gpu/megatron-check-here.sh); the device uses the defaults.
set -uo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
P=${MEGA_PAYLOAD:-/tmp/payload-mega}; SITE=${MEGA_SITE:-/tmp/site-mega}; W=${MEGA_W:-/tmp/megaw}
VSITE_T=${VERL_SITE:-/tmp/site}; PY=${MEGA_PYTHON:-python3}
export MEGA_SITE=$SITE
mode=${1:-install}
t0=$(date +%s)
if [ "$mode" = stash ]; then
  if compgen -G "$REPO/.carry/m[0-9][0-9]/*" > /dev/null; then mkdir -p "$P" && mv "$REPO"/.carry/m[0-9][0-9]/* "$P"/; fi
  ls "$P" 2>/dev/null | tr '\n' ' '; du -sh "$P" 2>/dev/null; exit
fi
[ -f "$VSITE_T/.installed" ] || { echo "run gpu/install.sh first (the verl payload: $VSITE_T)"; exit 2; }
export PYTHONPATH=$SITE:$VSITE_T${MEGA_IMAGE_PATH:+:$MEGA_IMAGE_PATH} PATH=$VSITE_T/bin:$PATH  # MEGA_IMAGE_PATH: HERE only

install_wheels() {  # install_wheels [REBUILT_TE_TORCH_WHEEL]: ONE pip command for every wheel
  # pip --target installs all wheels into one temporary tree, then moves each top-level entry into $SITE, skipping
  # an entry that is already there: in one command the TE wheels merge in transformer_engine/ and megatron-core,
  # Megatron-Bridge and megatron-energon in the megatron/ namespace dir (no __init__.py); two commands would not.
  local te_torch=${1:-}
  local wheels; wheels=$(ls "$W"/*.whl | grep -v '^$')
  [ -n "$te_torch" ] && wheels=$(echo "$wheels" | grep -v '/transformer_engine_torch-'; echo "$te_torch")
  rm -rf "$SITE"; mkdir -p "$SITE"
  # shellcheck disable=SC2086
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" $wheels 2>&1 \
    | grep -v -i 'warning' || true
  [ -f "$SITE/transformer_engine/wheel_lib/libtransformer_engine.so" ] || { echo "install incomplete: no libtransformer_engine.so"; return 1; }
  local d; for d in megatron/core megatron/bridge megatron/energon modelopt; do
    [ -d "$SITE/$d" ] || { echo "install incomplete: no $SITE/$d (stash every piece; gpu/megatron-wheels.sha256 current?)"; return 1; }
  done
  "$PY" "$REPO/gpu/megatron_probe.py" shadow || return 1
  touch "$SITE/.installed"
  echo "installed $(echo "$wheels" | wc -l) wheels into $SITE in $(( $(date +%s) - t0 )) s"
}

probe() {
  local tiny=${MEGA_TINY:-/tmp/p/tiny/model}
  [ -d "$tiny" ] || tiny=""
  PYTHONUNBUFFERED=1 timeout 240 "$PY" "$REPO/gpu/megatron_probe.py" $tiny 2>&1 \
    | grep -v -E 'SyntaxWarning|Evict LRU|torch_dtype|^\s*"""|UserWarning|warnings.warn'
  return "${PIPESTATUS[0]}"
}

build_wait() {  # wait for the background build, then reinstall with its wheel
  local limit=${BUILD_WAIT_S:-540} waited=0
  while [ ! -f /tmp/te-build.rc ] && [ "$waited" -lt "$limit" ]; do
    sleep 10; waited=$((waited + 10))
    [ $((waited % 60)) = 0 ] && echo "build: ${waited} s, $(grep -c '\[[0-9]*/[0-9]*\]' /tmp/te-build.log 2>/dev/null || echo 0) of ~33 compile steps logged"
  done
  if [ ! -f /tmp/te-build.rc ]; then
    echo "build still running after ${waited} s (tail of /tmp/te-build.log below): call 'bash gpu/megatron-install.sh build-wait' again"
    tail -3 /tmp/te-build.log; return 124
  fi
  local rc; rc=$(cat /tmp/te-build.rc)
  if [ "$rc" != 0 ]; then
    echo "build FAILED rc=$rc:"; grep -a -m5 -B2 -A6 'error' /tmp/te-build.log | cut -c1-240; tail -5 /tmp/te-build.log; return 1
  fi
  local whl; whl=$(ls /tmp/te-build/out/transformer_engine_torch-*.whl)
  echo "build done in $(cat /tmp/te-build.secs) s: $whl"
  install_wheels "$whl" && probe
}

case "$mode" in
  install)
    if [ ! -f "$SITE/.installed" ]; then
      S=$(ls "$P"/mega.sha256 2>/dev/null) || { echo "no mega.sha256 in $P: stash every piece first (m00..; the last piece carries it)"; exit 2; }
      WD=$(dirname "$W")  # mega.sha256 names mega.tar, which holds mega/
      cat "$P"/mega.tar.[0-9][0-9] > "$WD/mega.tar"
      (cd "$WD" && sha256sum -c "$S") || { echo "payload checksum mismatch: a piece is missing or torn ($(ls "$P" | tr '\n' ' '))"; exit 2; }
      rm -rf "$W" "$WD/mega" && tar -xf "$WD/mega.tar" -C "$WD" && mv "$WD/mega" "$W" && rm -f "$WD/mega.tar"
      (cd "$W" && sha256sum -c --quiet "$REPO/gpu/megatron-wheels.sha256") || { echo "wheel checksum mismatch against gpu/megatron-wheels.sha256"; exit 2; }
      install_wheels || exit 1
    fi
    [ "${MEGA_PROBE:-1}" = 0 ] && { echo "megatron-install: installed, probe skipped (MEGA_PROBE=0), $(( $(date +%s) - t0 )) s"; exit 0; }
    probe; rc=$?
    echo "megatron-install: probe rc=$rc, $(( $(date +%s) - t0 )) s"
    exit $rc ;;
  probe) probe; exit $? ;;
  build)
    # transformer-engine-torch from the sdist with the device's nvcc toolkit and torch (CppExtension: 33 C++ units,
    # ~2-3 min with 16 jobs). cuDNN and NCCL headers come from the torch venv's nvidia-* wheels (cudnn.h: csrc/common.h;
    # nccl.h: csrc/extensions/ep.cpp with NVTE_WITH_NCCL_EP, on by default for sm90).
    [ -d "$W" ] || { echo "run bash gpu/megatron-install.sh (the install) first"; exit 2; }
    VSITE=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    NVCC=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
    PATH="$(dirname "$(python3 -c 'import sys; print(sys.executable)')"):$PATH"  # the venv's ninja (pip package)
    echo "nvcc: ${NVCC:-none} $($NVCC --version 2>/dev/null | grep -o 'release [0-9.]*')  venv: $VSITE  ninja: $(command -v ninja || echo 'NONE: torch falls back to a serial build (~10x slower)')"
    inc=""; for d in "$VSITE"/nvidia/cudnn/include "$VSITE"/nvidia/nccl/include; do [ -d "$d" ] && inc="$inc:$d"; done
    rm -rf /tmp/te-build /tmp/te-build.rc /tmp/te-build.secs; mkdir -p /tmp/te-build/out
    tar -xzf "$W"/transformer_engine_torch-*.tar.gz -C /tmp/te-build
    src=$(ls -d /tmp/te-build/transformer_engine_torch-*/)
    # PYTHONPATH off: the build sees the torch venv only (its torch, pybind11, ninja, setuptools, wheel)
    ( cd "$src" && env -u PYTHONPATH NVTE_PYTORCH_FORCE_BUILD=TRUE MAX_JOBS="$(nproc)" CPLUS_INCLUDE_PATH="${inc#:}" \
        ${NVCC:+CUDA_HOME=$(dirname "$(dirname "$NVCC")")} \
        nohup setsid bash -c 's=$(date +%s); python3 -m pip wheel -v --no-build-isolation --no-deps --no-index \
          -w /tmp/te-build/out . > /tmp/te-build.log 2>&1; echo $? > /tmp/te-build.rc.tmp; \
          echo $(( $(date +%s) - s )) > /tmp/te-build.secs; mv /tmp/te-build.rc.tmp /tmp/te-build.rc' \
        > /dev/null 2>&1 & )
    echo "build started in the background ($(nproc) jobs), log /tmp/te-build.log"
    build_wait; exit $? ;;
  build-wait) build_wait; exit $? ;;
  *) echo "usage: bash gpu/megatron-install.sh [stash|install|build|build-wait|probe]"; exit 2 ;;
esac
