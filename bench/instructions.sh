#!/usr/bin/env bash
# Instructions per request under callgrind: nearly deterministic (within ~1 % run to run), so two versions
# can be compared on a noisy machine where requests/s swing 2x. Slow (~20 s a scenario).
# Scenarios: a chat request, a stream of 2 chunks (`-stream`), a stream of 32 chunks (`-long`).
# Needs valgrind, nginx with the echo module (see run.sh). Env: REQUESTS (1000), CONNS (8),
# KEEP=1 (keep each profile as /tmp/cg-NAME.out for callgrind_annotate).
#   bash bench/instructions.sh [SERVER...]   servers: floor gateway nometrics nostreamusage
#                                            gateway-nolog nometrics-nolog memory (default: all)
set -euo pipefail
exec 9>/tmp/gateway-instructions.lock
flock 9  # one run at a time: runs share the upstream's and the server's ports
here=$(cd "$(dirname "$0")" && pwd)
run=$(mktemp -d /tmp/gateway-instr.XXXX)
requests=${REQUESTS:-1000}
conns=${CONNS:-8}
floor=${FLOOR:-$here/../../shared/bench/floor_aiohttp.py}
python=$(python -c 'import sys; print(sys.executable)')  # the real binary, not a pyenv shim
port=18094
url="http://127.0.0.1:$port/v1/chat/completions"
pid=""
dumps=0

stop_server() { if [ -n "$pid" ]; then kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""; fi; }
cleanup() {
  stop_server
  [ -f "$run/nginx.pid" ] && kill "$(cat "$run/nginx.pid")" 2>/dev/null || true
}
trap cleanup EXIT
mkdir -p /tmp/gateway-bench-nginx
nginx -p "$run" -c "$here/upstream.nginx.conf" -g "pid $run/nginx.pid; error_log $run/error.log;"

start_server() {  # server command...: under callgrind, instrumentation off until measure()
  rm -f "$run"/cg.*
  dumps=0
  valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$run/cg.%p" "$@" >"$run/server.log" 2>&1 &
  pid=$!
  for _ in $(seq 600); do
    curl -s -o /dev/null -X POST "$url" && return 0
    sleep 0.5
  done
  echo "server did not start:" >&2; cat "$run/server.log" >&2; exit 1
}

measure() {  # name [send.py flags: memory, stream]: warm up, then count the instructions of REQUESTS
  local name=$1; shift
  "$python" "$here/send.py" "$url" 200 "$conns" "$@"   # warm-up, not counted
  callgrind_control -z "$pid" >/dev/null 2>&1
  callgrind_control -i on "$pid" >/dev/null 2>&1
  "$python" "$here/send.py" "$url" "$requests" "$conns" "$@"
  callgrind_control -d "$pid" >/dev/null 2>&1
  callgrind_control -i off "$pid" >/dev/null 2>&1
  dumps=$((dumps + 1))
  local profile total
  profile=$(ls "$run"/cg.*."$dumps")
  total=$(awk '/^summary:/{print $2; exit}' "$profile")
  printf "%-30s %9d instructions per request\n" "$name" $((total / requests))
  if [ -n "${KEEP:-}" ]; then cp "$profile" "/tmp/cg-$name.out"; fi
}

gateway() {  # config [serve flags...]
  local config=$1; shift
  start_server "$python" -m gateway serve --config "$here/$config" --host 127.0.0.1 --port "$port" "$@"
}

servers=("$@")
[ ${#servers[@]} -gt 0 ] || servers=(floor gateway nometrics nostreamusage gateway-nolog nometrics-nolog memory)
for server in "${servers[@]}"; do
  case $server in
    floor)  # the floor passes bytes through: one instance per upstream path
      [ -f "$floor" ] || { echo "no floor at $floor" >&2; continue; }
      start_server "$python" "$floor" "$port" http://127.0.0.1:18080/v1 --uvloop
      measure floor; stop_server
      start_server "$python" "$floor" "$port" http://127.0.0.1:18080/stream/v1 --uvloop
      measure floor-stream stream; stop_server ;;
    gateway)  # bench/gateway.yaml: auth on, metrics on (the default), access log at INFO
      gateway gateway.yaml
      measure gateway; measure gateway-stream stream; measure gateway-long long; stop_server ;;
    nometrics)
      gateway gateway-nometrics.yaml
      measure nometrics; measure nometrics-stream stream; measure nometrics-long long; stop_server ;;
    nostreamusage)  # metrics on, streams not asked for usage
      gateway gateway-nostreamusage.yaml
      measure nostreamusage-stream stream; measure nostreamusage-long long; stop_server ;;
    gateway-nolog)  # --log-level warning drops the access line
      gateway gateway.yaml --log-level warning
      measure gateway-nolog; measure gateway-nolog-stream stream; stop_server ;;
    nometrics-nolog)
      gateway gateway-nometrics.yaml --log-level warning
      measure nometrics-nolog; measure nometrics-nolog-stream stream; stop_server ;;
    memory)
      rm -f /tmp/gateway-bench-memory.db*
      gateway memory.yaml; measure gateway-memory memory; stop_server ;;
    *) echo "unknown server: $server" >&2; exit 2 ;;
  esac
done
