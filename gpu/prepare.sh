#!/bin/bash
# Run HERE (CPU machine, no device time): the payload the device calls carry, as 52 MiB pieces under the
# ignored .carry/pNN/ of this checkout (one piece per device call: gpu/stash-piece.sh NN).
#   bash gpu/prepare.sh            (from the checkout the device tool sends, e.g. /work/main)
# 1. verl 0.9.1 + vLLM 0.24.0 wheels (gpu/wheels-verl.txt, 119 files): REUSED when .carry/p00.. already hold a
#    payload whose sha256 checks (made by the recipe's prepare.sh); else built exactly like it from
#    .whl-cache/sel (only wheels missing there are downloaded).
# 2. dapo-ops' own dependencies (gpu/wheels-ops.txt) into .whl-cache/ops -> one extra piece (ops.tar).
set -euo pipefail
REPO=${REPO:-$(git -C "$(dirname "$0")" rev-parse --show-toplevel)}
cd "$REPO"
EXCL=$(git rev-parse --git-path info/exclude)
for p in /.whl-cache/ /.carry/; do grep -qxF "$p" "$EXCL" 2>/dev/null || echo "$p" >> "$EXCL"; done
PLAT=""; for n in 17 24 27 28 31 34 35 39; do PLAT="$PLAT --platform manylinux_2_${n}_x86_64"; done
dl() {  # dl DEST REQFILE: download (py3.12, x86_64 wheels only) what DEST lacks
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --abi cp312 --abi abi3 --abi none $PLAT --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
    --platform any -d "$1" -r "$2"
}
missing() {  # missing DIR REQFILE -> requirement lines with no wheel of that name-version in DIR
  python3 - "$1" "$2" <<'PY'
import os, re, sys
d, req = sys.argv[1], sys.argv[2]
have = {re.sub(r"[-_.]+", "_", f.split("-")[0]).lower() + "==" + f.split("-")[1] for f in os.listdir(d) if f.endswith(".whl")}
for line in open(req):
    r = line.split("#")[0].strip()
    if not r:
        continue
    n, v = r.split("==")
    if re.sub(r"[-_.]+", "_", n).lower() + "==" + v not in have:
        print(r)
PY
}
verl_ok() {  # the pieces in .carry reassemble to the payload.sha256 they carry
  local sums; sums=$(ls .carry/p[0-9][0-9]/payload.sha256 2>/dev/null | tail -1)
  [ -n "$sums" ] || return 1
  [ "$(cat .carry/p[0-9][0-9]/part[0-9][0-9] | sha256sum | cut -d' ' -f1)" = "$(cut -d' ' -f1 "$sums")" ]
}
# a device call carries the working tree + one piece, 64 MiB in all: a piece leaves PIECE_ROOM for the tree
PIECE=50331648      # 48 MiB
if verl_ok && [ -n "$(find .carry/p[0-9][0-9] -name 'part[0-9][0-9]' -size +${PIECE}c)" ]; then
  echo "verl payload: re-splitting the pieces to $((PIECE >> 20)) MiB (the tree grew)"
  S=$(mktemp -d); cat .carry/p[0-9][0-9]/part[0-9][0-9] > "$S/payload.tar"; sums=$(ls .carry/p*/payload.sha256 | tail -1)
  cp "$sums" "$S/payload.sha256"; rm -rf .carry/p[0-9][0-9]; mkdir -p .carry
  (cd "$S" && split -b $PIECE -d -a 2 payload.tar part && rm payload.tar)
  for f in "$S"/part*; do k=${f##*/part}; mkdir -p ".carry/p$k"; mv "$f" ".carry/p$k/"; done
  last=$(ls -d .carry/p[0-9][0-9] | tail -1); cp "$S/payload.sha256" "$last/"; rm -rf "$S"
fi
if verl_ok; then
  echo "verl payload: reusing the $(ls .carry/p[0-9][0-9]/part[0-9][0-9] | wc -l) pieces in .carry (sha256 ok)"
else
  W=.whl-cache/sel; mkdir -p "$W"
  M=$(mktemp); missing "$W" gpu/wheels-verl.txt | grep -v '^antlr4-python3-runtime' > "$M" || true
  if [ -s "$M" ]; then echo "downloading $(wc -l < "$M") verl wheels"; dl "$W" "$M"; fi; rm -f "$M"
  ls "$W"/antlr4_python3_runtime-4.9.3-*.whl >/dev/null 2>&1 || python3 -m pip wheel -q --no-deps 'antlr4-python3-runtime==4.9.3' -w "$W"
  n=$(ls "$W"/*.whl | wc -l); [ "$n" = 119 ] || echo "WARNING: expected 119 verl wheels, have $n"
  S=$(mktemp -d); mkdir "$S/whl"; cp "$W"/*.whl "$S/whl/"; (cd "$S/whl" && sha256sum *.whl > ../SHA256SUMS-whl)
  (cd "$S" && tar -cf payload.tar whl SHA256SUMS-whl)
  rm -rf .carry/p[0-9][0-9]; mkdir -p .carry
  (cd "$S" && split -b $PIECE -d -a 2 payload.tar part && sha256sum payload.tar > payload.sha256)
  for f in "$S"/part*; do k=${f##*/part}; mkdir -p ".carry/p$k"; mv "$f" ".carry/p$k/"; done
  last=$(ls -d .carry/p[0-9][0-9] | tail -1); cp "$S/payload.sha256" "$last/"; rm -rf "$S"
fi
# dapo-ops' own wheels (~2 MB): into the last verl piece when it has room, else one more piece
O=.whl-cache/ops; mkdir -p "$O"
M=$(mktemp); missing "$O" gpu/wheels-ops.txt > "$M" || true
if [ -s "$M" ]; then echo "downloading $(wc -l < "$M") dapo-ops wheels"; dl "$O" "$M"; fi; rm -f "$M"
nv=$(ls .carry/p[0-9][0-9]/part[0-9][0-9] | wc -l)   # the verl pieces are p00..p<nv-1>
for d in .carry/p[0-9][0-9]; do
  rm -f "$d/ops.tar" "$d/ops.sha256"; ls "$d"/part[0-9][0-9] >/dev/null 2>&1 || rm -rf "$d"
done
S=$(mktemp -d); mkdir "$S/ops"; cp "$O"/*.whl "$S/ops/"; (cd "$S/ops" && sha256sum *.whl > ../SHA256SUMS-ops)
(cd "$S" && tar -cf ops.tar ops SHA256SUMS-ops)
last=$(dirname "$(ls .carry/p[0-9][0-9]/payload.sha256 | tail -1)")
if [ $(( $(du -cb "$last"/* | tail -1 | cut -f1) + $(stat -c %s "$S/ops.tar") )) -gt $PIECE ]; then
  last=.carry/p$(printf '%02d' "$nv"); mkdir -p "$last"
fi
mv "$S/ops.tar" "$last/"; (cd "$last" && sha256sum ops.tar > ops.sha256); rm -rf "$S"
k=$(basename "$(ls -d .carry/p[0-9][0-9] | tail -1)" | cut -c2-)
for d in .carry/p[0-9][0-9]; do
  sz=$(du -cb "$d"/* | tail -1 | cut -f1); [ "$sz" -le $PIECE ] || { echo "piece $d is $sz bytes > $((PIECE >> 20)) MiB" >&2; exit 1; }
done
ls -l .carry/p*/ | grep -v '^total'
echo "pieces: $(ls -d .carry/p[0-9][0-9] | wc -l) (p00..p$k)  -> one run call each: bash gpu/stash-piece.sh NN, carry [\".carry/pNN\"]"
