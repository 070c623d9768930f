#!/bin/bash
# Device call (f): the reward-function error storm of issue 29. The tiny model, 4 steps, with a custom reward
# function (gpu/bad_reward.py) that raises KeyError on its 41st call; verl 0.9.1's agent loop catches it and retries
# the sample for ever. Expected: the supervisor calls `error-storm` within 2 minutes of the first traceback, the
# verdict names bad_reward.py:5, no retry (1 attempt), one failure notice, train.log of bounded size.
# Through the tool's own tasks: inv launch -> inv watch -> inv status / logs --errors (gpu/lib.sh collect).
SCEN=f; . "$(dirname "$0")/lib.sh"
start_sampler; trap stop_sampler EXIT
standin_cue '{"accelerator": "gpu", "step_time": 0.5}'
cp "$REPO/gpu/bad_reward.py" "$ROOT/bad_reward.py"
# the recipe's reward (len_reward.py) replaced by the failing one (one value per Hydra key)
RO=(); for o in "${RECIPE_OVERRIDES[@]}"; do case $o in reward.custom_reward_function.*) ;; *) RO+=("$o");; esac; done
RECIPE_OVERRIDES=("${RO[@]}" reward.custom_reward_function.path=$ROOT/bad_reward.py
                  reward.custom_reward_function.name=compute_score)
mapfile -t OV < <(ovr)
# a notifier that records what it is sent (one failure notice expected): a local webhook sink into $OUT/notices.jsonl
"$PY" - "$OUT/notices.jsonl" "$STATE/f.sink_port" <<'PY' &
import http.server, sys, threading
out, portf = sys.argv[1], sys.argv[2]
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with open(out, "ab") as fh: fh.write(body + b"\n")
        self.send_response(200); self.end_headers()
    def log_message(self, *a): pass
srv = http.server.HTTPServer(("127.0.0.1", 0), H)
open(portf, "w").write(str(srv.server_address[1]))
threading.Timer(900, srv.shutdown).start(); srv.serve_forever()
PY
SINK=$!; trap 'stop_sampler; kill $SINK 2>/dev/null' EXIT
for _ in $(seq 50); do [ -s "$STATE/f.sink_port" ] && break; sleep 0.1; done
CFGD=$(mktemp -d /tmp/dapo-f-config.XXXXXX)   # the user config must live outside a git work tree, mode 0600
printf '[notify]\n[[notify.webhooks]]\nkind = "generic"\nurl = "http://127.0.0.1:%s/hook"\n' \
  "$(cat "$STATE/f.sink_port")" > "$CFGD/config.toml"; chmod 600 "$CFGD/config.toml"
export DAPO_OPS_CONFIG=$CFGD/config.toml
t0=$(date +%s)
launch f "${TINY_FLAGS[@]}" $(model_flags "$TINY") --steps 4 --save-freq 1 "${OV[@]}" || exit 1
rid=$(cat "$STATE/f.run_id")
# status while it storms: `stalled` with the last step time, never an ETA (every 10 s until the run ends)
( for _ in $(seq 30); do inv status -H gpu >> "$OUT/status-during.txt" 2>&1
    grep -q '"status": "\(failed\|succeeded\|stopped\)"' "$RUNS/$rid/run.json" 2>/dev/null && break; sleep 10; done ) &
POLL=$!
follow f; rc=$?
wait $POLL 2>/dev/null
d=$OUT/$rid
cp "$OUT/notices.jsonl" "$d/" 2>/dev/null
cp "$RUNS/$rid"/attempt-*.log "$d/" 2>/dev/null   # the raw storm (the fixture for tests/test_storm.py)
"$PY" - "$RUNS/$rid" "$t0" <<'PY' | tee "$d/storm-figures.txt"
import json, os, re, sys
run_dir, t0 = sys.argv[1], float(sys.argv[2])
rec = json.load(open(os.path.join(run_dir, "run.json")))
v = rec.get("verdict") or {}
att = rec.get("attempts") or [{}]
first = None
log = os.path.join(run_dir, att[0].get("log") or "attempt-1.log")
print("class", v.get("cls"), "| user frame", (v.get("detail") or {}).get("user_frame"), "| attempts", len(att))
print("action", v.get("action"))
print("train.log bytes", os.path.getsize(os.path.join(run_dir, "train.log")), "| attempt log bytes",
      os.path.getsize(log) if os.path.exists(log) else None)
d = v.get("detail") or {}
print("storm: %s tracebacks over %s s before the verdict; verdict at %.1f s after launch" % (
    d.get("count"), d.get("span_s"), (att[0].get("ended_at") or 0) - t0))
print("log_capped", rec.get("log_capped"))
PY
n=$(wc -l < "$OUT/notices.jsonl" 2>/dev/null || echo 0)
echo "scenario f: watch rc=$rc (1 = failed, expected), notices=$n (1 expected)"
