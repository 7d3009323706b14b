#!/usr/bin/env bash
# Instructions per request under callgrind: deterministic (+-0.5 % run to run), so two versions
# can be compared on a noisy machine where requests/s swing 2x. Slow (~20 s a scenario).
# Needs valgrind, nginx with the echo module (see run.sh). Env: REQUESTS (1000), CONNS (8).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
run=$(mktemp -d /tmp/gateway-instr.XXXX)
requests=${REQUESTS:-1000}
conns=${CONNS:-8}
floor=${FLOOR:-$here/../../shared/bench/floor_aiohttp.py}
python=$(python -c 'import sys; print(sys.executable)')  # the real binary, not a pyenv shim
port=18094
url="http://127.0.0.1:$port/v1/chat/completions"

cleanup() { [ -f "$run/nginx.pid" ] && kill "$(cat "$run/nginx.pid")" 2>/dev/null || true; }
trap cleanup EXIT
mkdir -p /tmp/gateway-bench-nginx
nginx -p "$run" -c "$here/upstream.nginx.conf" -g "pid $run/nginx.pid; error_log $run/error.log;"

measure() {  # name send-args... -- server command...
  local name=$1; shift
  local send=()
  while [ "$1" != "--" ]; do send+=("$1"); shift; done
  shift
  rm -f "$run"/cg.*
  valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$run/cg.%p" "$@" >"$run/server.log" 2>&1 &
  local pid=$!
  for _ in $(seq 600); do
    curl -s -o /dev/null -X POST "$url" && break
    sleep 0.5
  done
  "$python" "$here/send.py" "$url" 200 "$conns" "${send[@]}"   # warm up
  callgrind_control -i on "$pid" >/dev/null 2>&1
  "$python" "$here/send.py" "$url" "$requests" "$conns" "${send[@]}"
  callgrind_control -d "$pid" >/dev/null 2>&1
  callgrind_control -i off "$pid" >/dev/null 2>&1
  local total
  total=$(awk '/^summary:/{print $2; exit}' "$(ls "$run"/cg.*.1)")
  printf "%-22s %8d instructions per request\n" "$name" $((total / requests))
  [ -n "${KEEP:-}" ] && cp "$(ls "$run"/cg.*.1)" "/tmp/cg-$name.out"
  kill "$pid"; wait "$pid" 2>/dev/null || true
}

if [ -f "$floor" ]; then
  measure floor -- "$python" "$floor" "$port" http://127.0.0.1:18080/v1 --uvloop
fi
measure gateway -- "$python" -m gateway serve --config "$here/gateway.yaml" --host 127.0.0.1 --port "$port"
rm -f /tmp/gateway-bench-memory.db*
measure gateway-memory memory -- "$python" -m gateway serve --config "$here/memory.yaml" --host 127.0.0.1 --port "$port"
