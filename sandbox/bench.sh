#!/bin/bash
# dapo-ops sandbox bench: N SSH "hosts" h1..hN on one machine, each a Linux network namespace on an
# isolated bridge with its own hostname, its own sshd (key-only, pinned host key) and its own Docker
# engine running the container `verl` (image dapo-sandbox/verl:0.9.1, imported offline, verl stand-in
# at /verl). SANDBOX / TEST EQUIPMENT ONLY. See sandbox/README.md.
#
#   bench.sh up [N]            create or complete N hosts (default 3); idempotent; prints the hosts.toml path
#   bench.sh down              remove exactly what `up` made (processes, mounts, namespaces, bridge, state)
#   bench.sh status            one line per host; exit 0 when every host is healthy, 3 when the bench is not up
#   bench.sh container hN [P]  (re)create the container if it is missing, stopped or of another profile P (default |
#                              ascend: the Ascend-like image, sandbox/ascend_image/README.md; used by the test fixture)
#   bench.sh sshd hN start|stop    start / stop that host's sshd (fault injection)
#   bench.sh link hN up|down       bring that host's network link up / down (fault injection)
#
# Isolation: DAPO_BENCH_ID (default 0, integer 0..155) selects state /var/tmp/dapo-bench-<id>, sockets
# /run/dapo-bench-<id>, bridge dapobr<id>, subnet 198.51.<100+id>.0/24, namespaces dapo<id>-h<N>.
# Needs root and the packages openssh-server iproute2 docker.io util-linux (it does not install them:
# `make deps` or .ci/run do). Processes are stopped by recorded PID / namespace membership only.
set -euo pipefail

ID=${DAPO_BENCH_ID:-0}
PROG=bench.sh
die() { echo "$PROG: $*" >&2; exit "${2:-1}"; }
fail() { local code=$1; shift; echo "$PROG: $*" >&2; exit "$code"; }

[[ "$ID" =~ ^[0-9]+$ ]] && [ "$ID" -le 155 ] || fail 2 "DAPO_BENCH_ID='$ID' is invalid: use an integer 0..155"
[ "$(id -u)" = 0 ] || fail 2 "needs root (network namespaces, sshd, dockerd): run it as root, e.g. sudo -E bash $0 $*"

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
VENV=${DAPO_BENCH_VENV:-$REPO/.venv}
STATE=/var/tmp/dapo-bench-$ID
RUN=/run/dapo-bench-$ID
BR=dapobr$ID
NET=198.51.$((100 + ID))
NSP=dapo$ID-h                      # namespace prefix: dapo<id>-h<N>
IMAGE=dapo-sandbox/verl:0.9.1
IMAGE_ASCEND=dapo-sandbox/verl:0.9.1-ascend   # the Ascend-like profile (sandbox/ascend_image/README.md)
CONTAINER=verl

ns_of() { echo "$NSP${1#h}"; }            # h2 -> dapo0-h2
addr_of() { echo "$NET.$((10 + ${1#h}))"; }
veth_of() { echo "vd$ID-${1}"; }         # root-side veth name (<= 15 chars)
sock_of() { echo "unix://$RUN/$1/docker.sock"; }
# a live process: kill -0 answers and it is not a zombie. A daemon that exited (sshd, dockerd: their parent is PID 1)
# stays a zombie until PID 1 reaps it, ~1.7 s on the CI machine (whose init reaps on a timer); it has closed its
# sockets already, and waiting for the reap made every `bench.sh down` and `sshd hN stop` ~2 s per host slower.
alive() {
  local s
  [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null || return 1
  { read -r s < "/proc/$1/stat"; } 2>/dev/null || return 1
  s=${s##*) }   # the fields after "(comm) ": the state first
  [ "${s%% *}" != Z ]
}
DAEMON_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin   # the only env sshd/dockerd get
pidfile_pid() { [ -f "$1" ] && cat "$1" 2>/dev/null || true; }

take_lock() {   # serialise up / down / container of one bench id (the lock file stays, like any /run/lock file)
  mkdir -p /run/lock
  exec 9>"/run/lock/dapo-bench-$ID.lock"
  flock -w 300 9 || fail 1 "another bench.sh of bench $ID holds /run/lock/dapo-bench-$ID.lock for 300 s"
}

check_packages() {
  local need="" b
  for b in /usr/sbin/sshd:openssh-server /usr/bin/ssh-keygen:openssh-client /usr/sbin/ip:iproute2 \
           /usr/sbin/dockerd:docker.io /usr/bin/nsenter:util-linux /usr/bin/unshare:util-linux; do
    [ -x "${b%%:*}" ] || need="$need ${b##*:}"
  done
  command -v docker >/dev/null 2>&1 || need="$need docker.io"
  [ -x "$VENV/bin/python" ] || fail 2 "no project venv at $VENV: run 'make deps' first (or set DAPO_BENCH_VENV)"
  [ -z "$need" ] || fail 2 "missing packages:$need; install them with: apt-get install -y --no-install-recommends$need (or run 'make deps')"
}

# ---------------------------------------------------------------- image (hostpy rootfs + verl stand-in)
build_rootfs() {
  # Prints the content hash of the image rootfs; (re)builds $STATE/image/rootfs when it changed.
  local cfgroot R sha
  # the config root found by `up` (a Python start per fixture reset `container hN` is ~0.4 s on a loaded machine)
  cfgroot=$(cat "$STATE/image/cfgroot" 2>/dev/null || true)
  if [ -z "$cfgroot" ] || [ ! -d "$cfgroot/verl" ]; then
    cfgroot=$("$VENV/bin/python" "$HERE/fetch_verl_config.py") || fail 2 "could not fetch the verl 0.9.1 config yaml (sandbox/fetch_verl_config.py)"
    mkdir -p "$STATE/image"; echo "$cfgroot" > "$STATE/image/cfgroot"
  fi
  sha=$( (cd "$HERE" && find verl_standin bin sample_inputs.py -type f ! -name '*.pyc' ! -path '*__pycache__*' -print0 | sort -z | xargs -0 sha256sum;
          cd "$cfgroot" && find verl -type f \( -name '*.yaml' -o -path 'verl/checkpoint_engine/*.py' \) -print0 | sort -z | xargs -0 sha256sum) | sha256sum | cut -c1-16)
  R=$STATE/image/rootfs
  if [ "$(cat "$STATE/image/sha" 2>/dev/null || true)" != "$sha" ]; then
    rm -rf "$R"; mkdir -p "$R"/{proc,sys,dev,tmp,etc,root,usr/local/bin,opt,sandbox,verl}
    chmod 1777 "$R/tmp"
    for d in bin lib lib64 sbin; do ln -sfn "usr/$d" "$R/$d"; done
    cp /etc/passwd /etc/group "$R/etc/"
    echo "sandbox" > "$R/etc/hostname"
    (cd "$HERE/verl_standin" && tar --exclude=__pycache__ --exclude='*.pyc' -c .) | tar -C "$R/verl" -x
    (cd "$cfgroot" && find verl -name '*.yaml' -print0 | tar --null -T - -c) | tar -C "$R/verl" -x
    # verl's real checkpoint-engine sources (they do not import here: no torch): preflight's verl-startup check reads
    # their @CheckpointEngineRegistry.register names (dapo_ops/agent/verlcheck.py)
    (cd "$cfgroot" && find verl/checkpoint_engine -name '*.py' -print0 | tar --null -T - -c) | tar -C "$R/verl" -x
    install -m 0755 "$HERE/bin/npu-smi" "$HERE/bin/nvidia-smi" "$R/usr/local/bin/"
    mkdir -p "$R/verl/dapo_runs"
    # the runbook's default inputs (tiny), where the runbook finds them: relative to the verl checkout
    "$VENV/bin/python" "$HERE/sample_inputs.py" "$R/verl" || fail 2 "could not write the sample inputs (sandbox/sample_inputs.py)"
    echo "$sha" > "$STATE/image/sha"
  fi
  echo "$sha"
}

build_ascend_rootfs() {   # build_ascend_rootfs SHA: the Ascend-like rootfs over the base one; prints its hash
  local base=$1 sha R=$STATE/image/rootfs-ascend
  sha=$( (echo "$base"; cd "$HERE" && find ascend_image -type f ! -name '*.pyc' ! -path '*__pycache__*' -print0 | sort -z | xargs -0 sha256sum) | sha256sum | cut -c1-16)
  if [ "$(cat "$STATE/image/sha-ascend" 2>/dev/null || true)" != "$sha" ]; then
    rm -rf "$R"; cp -a "$STATE/image/rootfs" "$R"
    rm -rf "$R/verl/megatron/bridge"                       # mbridge installed, Megatron-Bridge absent
    (cd "$HERE/ascend_image" && tar --exclude=__pycache__ --exclude='*.pyc' --exclude=README.md -c .) | tar -C "$R" -x
    mkdir -p "$R/root/ascend/log/debug/plog"               # CANN's slog directory
    echo "$sha" > "$STATE/image/sha-ascend"
  fi
  echo "$sha"
}

container_run_args() {   # container_run_args hN [profile] -> docker run argv (one per line)
  local h=$1 profile=${2:-default} pyprefix d
  pyprefix=$("$VENV/bin/python" -c 'import sys; print(sys.base_prefix)')
  local venv_real; venv_real=$(cd "$VENV" && pwd -P)
  printf '%s\n' run -d --name "$CONTAINER" --network host --add-host "$h:127.0.0.1" --shm-size=1g \
    --label dapo.bench="$ID" --workdir /verl \
    -e "PATH=$venv_real/bin:/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin" \
    -e "VIRTUAL_ENV=$venv_real" -e HOME=/root
  # the Ascend-like image's packages (torch, torch_npu, mbridge stand-ins) are on its PYTHONPATH, like verl's Ascend
  # Dockerfile's ENV PYTHONPATH=/Megatron-LM; CANN's variables are NOT in the env (only in set_env.sh)
  [ "$profile" = ascend ] && printf '%s\n' -e PYTHONPATH=/opt/site
  for d in bin sbin lib lib32 lib64 libexec share include; do
    [ -d "/usr/$d" ] && [ ! -L "/usr/$d" ] && printf '%s\n' -v "/usr/$d:/usr/$d:ro"
  done
  for d in /etc/alternatives /etc/ssl; do [ -d "$d" ] && printf '%s\n' -v "$d:$d:ro"; done
  case "$pyprefix" in /usr|/usr/*) ;; *) printf '%s\n' -v "$pyprefix:$pyprefix:ro" ;; esac
  printf '%s\n' -v "$venv_real:$venv_real:ro" \
    -v "$STATE/hosts/$h/sandbox:/sandbox:ro" -v "$STATE/hosts/$h/runs:/verl/dapo_runs" \
    "$([ "$profile" = ascend ] && echo "$IMAGE_ASCEND" || echo "$IMAGE")" \
    sh -c 'trap "exit 0" TERM INT; while :; do sleep 3600 & wait $!; done'
}

ensure_image_and_container() {   # ensure_image_and_container hN SHA [profile]
  local h=$1 sha=$2 profile=${3:-default} cur state image=$IMAGE rootfs=$STATE/image/rootfs
  if [ "$profile" = ascend ]; then
    image=$IMAGE_ASCEND; rootfs=$STATE/image/rootfs-ascend; sha=$(build_ascend_rootfs "$sha")
  fi
  export DOCKER_HOST; DOCKER_HOST=$(sock_of "$h")
  cur=$(docker image inspect -f '{{index .Config.Labels "dapo.sha"}}' "$image" 2>/dev/null || true)
  if [ "$cur" != "$sha" ]; then
    tar -C "$rootfs" -c . | docker import -c "LABEL dapo.sha=$sha" -c "WORKDIR /verl" - "$image" >/dev/null
    docker rm -f "$CONTAINER" >/dev/null 2>&1 || true       # recreate on the new image
  fi
  local -a args; mapfile -t args < <(container_run_args "$h" "$profile")
  local cfg; cfg=$(printf '%s\n' "${args[@]}" | sha256sum | cut -c1-16)
  state=$(docker inspect -f '{{.State.Status}} {{index .Config.Labels "dapo.cfg"}}' "$CONTAINER" 2>/dev/null || true)
  if [ "$state" != "running $cfg" ]; then       # missing, stopped, or made with other run arguments
    [ -z "$state" ] || docker rm -f "$CONTAINER" >/dev/null
    docker "${args[0]}" --label "dapo.cfg=$cfg" "${args[@]:1}" >/dev/null
  fi
  unset DOCKER_HOST
}

wait_docker() {   # wait_docker hN
  local h=$1 t
  for t in $(seq 1 300); do
    DOCKER_HOST=$(sock_of "$h") docker version >/dev/null 2>&1 && return 0
    alive "$(pidfile_pid "$STATE/hosts/$h/docker/dockerd.pid")" || [ "$t" -lt 25 ] || break
    sleep 0.1
  done
  fail 1 "dockerd of $h did not come up; see $STATE/hosts/$h/docker/dockerd.log"
}

write_default_cues() {   # default scenario.json / devices.json (the fixture's reset() writes the same)
  local d=$STATE/hosts/$1/sandbox
  mkdir -p "$d"
  [ -f "$d/scenario.json" ] || echo '{}' > "$d/scenario.json"
  [ -f "$d/devices.json" ] || echo '{"accelerator": "npu", "count": 8, "hbm_total_mb": 65536}' > "$d/devices.json"
}

start_sshd() {   # start_sshd hN
  local h=$1 ns; ns=$(ns_of "$h")
  alive "$(pidfile_pid "$STATE/ssh/sshd_$h.pid")" && return 0
  mkdir -p /run/sshd
  # its own shell start-up files: a fleet host has its own ~/.bashrc and ~/.profile, not this machine's (whose
  # rc, e.g. `pyenv init`, would otherwise run on every SSH command of every sandbox host: ~0.18 s of CPU each,
  # paid 8x on the shared cores); the rest of /root (the venv's base Python under ~/.pyenv) stays visible
  local home=$STATE/hosts/$h/home binds="" f
  mkdir -p "$home"
  for f in .bashrc .profile; do
    [ -e "$home/$f" ] || cp "/etc/skel/$f" "$home/$f" 2>/dev/null || : > "$home/$f"
    if [ -f "/root/$f" ]; then binds="$binds mount --bind '$home/$f' '/root/$f' &&"; fi
  done
  # a clean environment: the operator's (SWANLAB_API_KEY, tokens ...) must not live on in long-running daemons
  env -i PATH="$DAEMON_PATH" ip netns exec "$ns" unshare --uts --mount --propagation slave sh -c \
    "$binds hostname $h && exec /usr/sbin/sshd -f '$STATE/ssh/sshd_$h.conf' -E '$STATE/ssh/sshd_$h.log'" 9>&-
  local t; for t in $(seq 1 50); do alive "$(pidfile_pid "$STATE/ssh/sshd_$h.pid")" && return 0; sleep 0.05; done
  fail 1 "sshd of $h did not start; see $STATE/ssh/sshd_$h.log"
}

stop_sshd() {
  local f=$STATE/ssh/sshd_$1.pid p t; p=$(pidfile_pid "$f")
  if alive "$p"; then
    kill "$p"
    # wait until the listener is really gone (a fault-injection caller connects right after)
    for t in $(seq 1 100); do alive "$p" || break; sleep 0.05; done
  fi
  rm -f "$f"
}

up_host() {   # up_host hN: namespace, veth, sshd, dockerd (idempotent)
  local h=$1 ns a veth B
  ns=$(ns_of "$h"); a=$(addr_of "$h"); veth=$(veth_of "$h"); B=$STATE/hosts/$h/docker
  mkdir -p "$B" "$RUN/$h" "$STATE/hosts/$h/runs"
  write_default_cues "$h"
  if [ ! -e "/run/netns/$ns" ]; then
    ip netns add "$ns"
  fi
  if ! ip link show "$veth" >/dev/null 2>&1; then
    ip link add "$veth" type veth peer name eth0 netns "$ns"
  fi
  ip link set "$veth" master "$BR" up
  ip -n "$ns" addr replace "$a/24" dev eth0
  ip -n "$ns" link set eth0 up; ip -n "$ns" link set lo up
  # on-link default route without a gateway: programs that pick "the primary address" (Ray, torch) find
  # 198.51.x.y like on a real host, while off-subnet traffic still goes nowhere (no router on the bridge)
  ip -n "$ns" route replace default dev eth0
  [ -f "$STATE/ssh/hostkey_$h" ] || ssh-keygen -q -t ed25519 -N '' -C "$h" -f "$STATE/ssh/hostkey_$h"
  cat > "$STATE/ssh/sshd_$h.conf" <<EOC
Port 22
ListenAddress $a
HostKey $STATE/ssh/hostkey_$h
PidFile $STATE/ssh/sshd_$h.pid
AuthorizedKeysFile $STATE/ssh/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
UsePAM no
StrictModes no
AcceptEnv *
MaxStartups 64:30:128
MaxSessions 64
SetEnv DOCKER_HOST=$(sock_of "$h")
Subsystem sftp internal-sftp
EOC
  mkdir -p /run/sshd; /usr/sbin/sshd -t -f "$STATE/ssh/sshd_$h.conf"
  start_sshd "$h"
  if ! alive "$(pidfile_pid "$B/dockerd.pid")"; then
    rm -f "$B/dockerd.pid"
    # nsenter, not 'ip netns exec': the latter remounts /sys and hides the cgroup v1 mounts dockerd needs
    env -i PATH="$DAEMON_PATH" nsenter --net="/run/netns/$ns" unshare --uts sh -c "hostname $h && exec /usr/sbin/dockerd \
        --data-root '$B/root' --exec-root '$B/exec' --pidfile '$B/dockerd.pid' -H '$(sock_of "$h")' \
        --bridge=none --iptables=false --ip6tables=false --ip-masq=false" > "$B/dockerd.log" 2>&1 < /dev/null 9>&- &
    disown || true
  fi
}

write_client_files() {   # write_client_files N
  local n=$1 i h a
  : > "$STATE/ssh/known_hosts.tmp"; : > "$STATE/ssh/ssh_config.tmp"
  for i in $(seq 1 "$n"); do
    h=h$i; a=$(addr_of "$h")
    echo "$a,$h $(cut -d' ' -f1,2 "$STATE/ssh/hostkey_$h.pub")" >> "$STATE/ssh/known_hosts.tmp"
    printf 'Host %s\n  HostName %s\n  User root\n  Port 22\n  IdentityFile %s/ssh/clientkey\n  IdentitiesOnly yes\n  UserKnownHostsFile %s/ssh/known_hosts\n  StrictHostKeyChecking yes\n  BatchMode yes\n  ConnectTimeout 5\n\n' \
      "$h" "$a" "$STATE" "$STATE" >> "$STATE/ssh/ssh_config.tmp"
  done
  mv "$STATE/ssh/known_hosts.tmp" "$STATE/ssh/known_hosts"; mv "$STATE/ssh/ssh_config.tmp" "$STATE/ssh/ssh_config"
  {
    echo "# generated by sandbox/bench.sh (DAPO_BENCH_ID=$ID); sandbox hosts on bridge $BR ($NET.0/24)"
    echo "[defaults]"
    echo 'user = "root"'
    echo 'port = 22'
    echo "identity_file = \"$STATE/ssh/clientkey\""
    echo "known_hosts = \"$STATE/ssh/known_hosts\""
    echo "ssh_config = \"$STATE/ssh/ssh_config\""
    echo 'connect_timeout = 5'
    echo "container = \"$CONTAINER\""
    echo 'workdir = "/verl"'
    echo 'python = "python3"'
    echo 'accelerator = "npu"'
    echo 'devices = 8'
    echo 'runs_dir = "/verl/dapo_runs"'
    echo 'device_mounts = false'
    echo
    echo '[proxy]'
    echo 'http_proxy = ""'
    echo 'https_proxy = ""'
    echo 'no_proxy = ""'
    for i in $(seq 1 "$n"); do
      echo; echo "[hosts.h$i]"; echo "address = \"$(addr_of "h$i")\""
    done
  } > "$STATE/hosts.toml.tmp"
  mv "$STATE/hosts.toml.tmp" "$STATE/hosts.toml"
  echo "$n" > "$STATE/nhosts"
}

cmd_up() {
  local n=${1:-3} i sha
  [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 50 ] || fail 2 "host count '$n' is invalid: use 1..50"
  check_packages
  local old; old=$(cat "$STATE/nhosts" 2>/dev/null || echo 0)
  [ "$old" -gt "$n" ] && n=$old          # up never shrinks a running bench
  mkdir -p "$STATE/ssh" "$STATE/image" "$RUN"
  take_lock
  cd "$STATE/ssh"
  [ -f clientkey ] || ssh-keygen -q -t ed25519 -N '' -C "dapo-bench-$ID" -f clientkey
  cp clientkey.pub authorized_keys; chmod 600 authorized_keys clientkey
  ip link show "$BR" >/dev/null 2>&1 || ip link add "$BR" type bridge
  ip addr replace "$NET.1/24" dev "$BR"; ip link set "$BR" up
  for i in $(seq 1 "$n"); do up_host "h$i"; done
  write_client_files "$n"
  sha=$(build_rootfs)
  for i in $(seq 1 "$n"); do wait_docker "h$i"; done
  for i in $(seq 1 "$n"); do ensure_image_and_container "h$i" "$sha" & done
  local rc=0; for i in $(seq 1 "$n"); do wait -n || rc=1; done
  [ "$rc" = 0 ] || fail 1 "could not start the containers; see $STATE/hosts/h*/docker/dockerd.log"
  echo "$STATE/hosts.toml"
}

down_host_docker() {   # stop one engine: containers first (their shims outlive dockerd), then dockerd
  local h=$1 B=$STATE/hosts/$1/docker p t
  p=$(pidfile_pid "$B/dockerd.pid")
  if alive "$p"; then
    DOCKER_HOST=$(sock_of "$h") timeout 20 docker rm -f $(DOCKER_HOST=$(sock_of "$h") timeout 10 docker ps -aq 2>/dev/null) >/dev/null 2>&1 || true
    kill "$p" 2>/dev/null || true
    for t in $(seq 1 200); do alive "$p" || break; sleep 0.1; done
    alive "$p" && kill -9 "$p" 2>/dev/null || true
  fi
  rm -f "$B/dockerd.pid"
}

cmd_down() {
  take_lock
  [ -d "$STATE" ] || ip link show "$BR" >/dev/null 2>&1 || ls /run/netns/"$NSP"* >/dev/null 2>&1 || { echo "$PROG: bench $ID is not up"; return 0; }
  local h ns p
  # the control masters of these hosts (dapo_ops/control/remote/sshmux.py) end with them: a master kept for the
  # next bench of this id would hold a connection to the old host (and its host key)
  if [ -x "$VENV/bin/python" ] && [ -d "$STATE" ]; then
    PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}" timeout 30 "$VENV/bin/python" -m dapo_ops.control.remote.sshmux \
      close --under "$STATE" >/dev/null 2>&1 || true
  fi
  for f in "$STATE"/ssh/sshd_h*.pid; do [ -f "$f" ] || continue; h=${f##*/sshd_}; stop_sshd "${h%.pid}"; done
  for d in "$STATE"/hosts/h*; do [ -d "$d" ] && down_host_docker "${d##*/}" & done
  wait
  # every process still inside one of our namespaces (ssh sessions, shims) is ours: end it
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^$NSP[0-9]+$" || true); do
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
  done
  # dockerd leaves nsfs / overlay mounts under its roots that keep the namespace (and its veth) alive
  for m in $(awk '{print $2}' /proc/mounts | grep -E "^($STATE|$RUN)/" | sort -r || true); do umount -l "$m" 2>/dev/null || true; done
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^$NSP[0-9]+$" || true); do ip netns del "$ns" 2>/dev/null || true; done
  ip link del "$BR" 2>/dev/null || true
  for v in $(ip -o link show | awk -F': ' '{print $2}' | cut -d@ -f1 | grep -E "^vd$ID-h[0-9]+$" || true); do ip link del "$v" 2>/dev/null || true; done
  rm -rf "$RUN" "$STATE"
  echo "$PROG: bench $ID is down"
}

cmd_status() {
  [ -f "$STATE/nhosts" ] || { echo "bench $ID: not up"; return 3; }
  local n i h ok=0 s d c
  n=$(cat "$STATE/nhosts")
  echo "bench $ID: $n host(s), inventory $STATE/hosts.toml"
  for i in $(seq 1 "$n"); do
    h=h$i
    alive "$(pidfile_pid "$STATE/ssh/sshd_$h.pid")" && s=up || { s=down; ok=1; }
    alive "$(pidfile_pid "$STATE/hosts/$h/docker/dockerd.pid")" && d=up || { d=down; ok=1; }
    c=$(DOCKER_HOST=$(sock_of "$h") timeout 10 docker inspect -f '{{.State.Status}}' "$CONTAINER" 2>/dev/null || echo missing)
    [ "$c" = running ] || ok=1
    printf '%-4s %-15s sshd=%-4s dockerd=%-4s container=%s\n' "$h" "$(addr_of "$h")" "$s" "$d" "$c"
  done
  return $ok
}

need_host() {
  [ -f "$STATE/nhosts" ] || fail 3 "bench $ID is not up: run 'bash sandbox/bench.sh up' first"
  [[ "${1:-}" =~ ^h[0-9]+$ ]] && [ "${1#h}" -ge 1 ] && [ "${1#h}" -le "$(cat "$STATE/nhosts")" ] || fail 2 "unknown host '${1:-}': use h1..h$(cat "$STATE/nhosts")"
}

case "${1:-}" in
  up) cmd_up "${2:-3}" ;;
  down) cmd_down ;;
  status) cmd_status ;;
  container) need_host "${2:-}"; check_packages
             case "${3:-default}" in default|ascend) ;; *) fail 2 "unknown profile '${3}': use default or ascend" ;; esac
             take_lock; wait_docker "$2"; ensure_image_and_container "$2" "$(build_rootfs)" "${3:-default}" ;;
  sshd) need_host "${2:-}"
        case "${3:-}" in start) start_sshd "$2" ;; stop) stop_sshd "$2" ;; *) fail 2 "usage: $PROG sshd hN start|stop" ;; esac ;;
  link) need_host "${2:-}"
        case "${3:-}" in up|down) ip -n "$(ns_of "$2")" link set eth0 "$3" ;; *) fail 2 "usage: $PROG link hN up|down" ;; esac ;;
  *) fail 2 "usage: $PROG up [N] | down | status | container hN [default|ascend] | sshd hN start|stop | link hN up|down" ;;
esac
