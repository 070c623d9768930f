#!/bin/bash
# HERE (CPU, no device time): the device's Megatron install and the probe's checks 0-3 (gpu/megatron_probe.py:
# shadowing, every import a run reaches, verl's provider for the tiny model) as close to the H200 as this machine
# gets. After gpu/megatron-prepare.sh (.carry/m00..) and with the verl wheels in .whl-cache/sel + .whl-cache/ops
# (gpu/prepare.sh) and .whl-cache/te-venv (python 3.12 + torch 2.11.0 + its deps, megatron-prepare.sh's build venv):
#   bash gpu/megatron-check-here.sh            ~2-4 min here (first time: + downloading the image stand-in, ~150 MB)
# Under CHECK_DIR (default /tmp/megacheck):
#   site/        the verl payload, pip --target --no-deps as gpu/install.sh does (/tmp/site on the device)
#   img/         a stand-in for the device image: only the image packages these imports reach (IMG below), each at
#                the image's version (device-pip-freeze.txt: MEGA_FREEZE, default ../shared/real-verl/); what te-venv
#                has at another version than the image (numpy, filelock, fsspec, packaging, networkx, markupsafe) is
#                in IMG too, so that the image's version is the one imported
#   payload-mega/ megaw/ site-mega/   gpu/megatron-install.sh's own paths (MEGA_PAYLOAD, MEGA_W, MEGA_SITE):
#                the pieces are COPIED there (stash would move them out of .carry), then the real install runs:
#                checksums, one pip command, the shadow check, the probe (no GPU: its attention part is skipped)
#   tiny/        gpu/make_tiny.py's model, for the probe's provider check
# What still differs from the device: te-venv's python/torch (the same versions as the image's), the image's other
# ~150 packages are absent (an import that needs one fails HERE: add it to IMG if the image has it, else to
# gpu/wheels-megatron-extra.txt), no CUDA.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd); cd "$REPO"
R=${CHECK_DIR:-/tmp/megacheck}; PY=$REPO/.whl-cache/te-venv/bin/python
FREEZE=${MEGA_FREEZE:-$REPO/../shared/real-verl/device-pip-freeze.txt}
[ -f "$FREEZE" ] || FREEZE=/work/shared/real-verl/device-pip-freeze.txt
[ -f "$FREEZE" ] || { echo "no device-pip-freeze.txt: set MEGA_FREEZE=<shared>/real-verl/device-pip-freeze.txt"; exit 2; }
[ -x "$PY" ] || { echo "no $PY: run gpu/megatron-prepare.sh (it makes .whl-cache/te-venv) or link another checkout's"; exit 2; }
compgen -G ".carry/m[0-9][0-9]/mega.sha256" > /dev/null || { echo "no .carry/mNN/mega.sha256: run gpu/megatron-prepare.sh first"; exit 2; }
pipq() { "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir "$@" 2>&1 | grep -v -i 'warning' || true; }
mkdir -p "$R"

# the verl payload (+ dapo-ops' own wheels), as gpu/install.sh installs it
if [ ! -f "$R/site/.installed" ]; then
  rm -rf "$R/site"; pipq --target "$R/site" .whl-cache/sel/*.whl .whl-cache/ops/*.whl; touch "$R/site/.installed"
fi

# the image stand-in: these names, at the image's versions
IMG=(absl-py accelerate aiohappyeyeballs aiohttp aiosignal attrs certifi click cloudpickle einops filelock frozenlist
  fsspec grpcio h11 httpcore httpx huggingface-hub idna markupsafe ml-dtypes msgpack multidict networkx numpy onnx
  onnx-ir onnxscript packaging pandas peft pillow prometheus-client propcache protobuf psutil pyarrow python-dateutil
  pyyaml regex requests rich safetensors scipy six tensorboard tqdm urllib3 xxhash yarl)
D=.whl-cache/img-standin; mkdir -p "$D"
norm() { tr 'A-Z_.' 'a-z--'; }
pins=(); for n in "${IMG[@]}"; do
  v=$(sed 's/#.*//' "$FREEZE" | awk -F'==' -v n="$n" 'BEGIN {gsub(/[_.]/, "-", n)} {k = tolower($1); gsub(/[_.]/, "-", k)} k == n {print $2}')
  [ -n "$v" ] || { echo "$n is not in $FREEZE (not an image package): remove it from IMG"; exit 2; }
  f=$(echo "$n" | norm); f=${f//-/_}; compgen -G "$D/$f-$v-*.whl" > /dev/null || pins+=("$n==$v")
done
if [ ${#pins[@]} -gt 0 ]; then
  echo "downloading the image stand-in: ${pins[*]}"
  PLAT=""; for k in 5 17 24 27 28; do PLAT="$PLAT --platform manylinux_2_${k}_x86_64"; done
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp $PLAT \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any -d "$D" "${pins[@]}" 2>&1 | grep -v 'is ignored' || true
fi
rm -rf "$R/img"; pipq --target "$R/img" "$D"/*.whl

# the tiny model (gpu/make_tiny.py, as gpu/install.sh builds it)
[ -d "$R/tiny/model" ] || PYTHONPATH=$R/site:$R/img "$PY" gpu/make_tiny.py "$R/tiny" 2>&1 | tail -1

# the device install, unchanged, on the copied pieces
rm -rf "$R/payload-mega" "$R/megaw" "$R/site-mega"; mkdir -p "$R/payload-mega"; cp .carry/m[0-9][0-9]/* "$R/payload-mega/"
MEGA_PAYLOAD=$R/payload-mega MEGA_W=$R/megaw MEGA_SITE=$R/site-mega VERL_SITE=$R/site MEGA_IMAGE_PATH=$R/img \
  MEGA_PYTHON=$PY MEGA_TINY=$R/tiny/model bash gpu/megatron-install.sh
