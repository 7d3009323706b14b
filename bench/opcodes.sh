#!/usr/bin/env bash
# Python opcodes per request, by function (bench/opcodes.py): deterministic, ~10 s a scenario.
#   bash bench/opcodes.sh SCENARIO [OUT.json]      then: python bench/opcodes.py show OUT.json [BASE.json]
# Scenarios: floor, floor-stream, gateway, gateway-stream, gateway-long, memory (bench/*.yaml, as
# instructions.sh). Env: REQUESTS (400, after 200 not counted), CONNS (8), CONFIG (another config).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
scenario=$1
out=${2:-/tmp/opcodes-$scenario.json}
requests=${REQUESTS:-400}
conns=${CONNS:-8}
run=$(mktemp -d /tmp/gateway-opcodes.XXXX)
port=$(python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
url="http://127.0.0.1:$port/v1/chat/completions"
pid=""
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  [ -f "$run/nginx.pid" ] && kill "$(cat "$run/nginx.pid")" 2>/dev/null || true
  rm -rf "$run"
}
trap cleanup EXIT
mkdir -p /tmp/gateway-bench-nginx
nginx -p "$run" -c "$here/upstream.nginx.conf" -g "pid $run/nginx.pid; error_log $run/error.log;"  # reuseport: runs coexist

flags=()
case $scenario in
  floor) server=(floor "$here/../../shared/bench/floor_aiohttp.py" "$port" http://127.0.0.1:18080/v1 --uvloop) ;;
  floor-stream) server=(floor "$here/../../shared/bench/floor_aiohttp.py" "$port" http://127.0.0.1:18080/stream/v1 --uvloop); flags=(stream) ;;
  gateway|gateway-stream|gateway-long)
    server=(gateway serve --config "${CONFIG:-$here/gateway.yaml}" --host 127.0.0.1 --port "$port")
    case $scenario in gateway-stream) flags=(stream) ;; gateway-long) flags=(long) ;; esac ;;
  memory)
    db=$run/memory.db
    sed "s#/tmp/gateway-bench-memory.db#$db#" "${CONFIG:-$here/memory.yaml}" >"$run/memory.yaml"
    server=(gateway serve --config "$run/memory.yaml" --host 127.0.0.1 --port "$port"); flags=(memory) ;;
  *) echo "unknown scenario: $scenario" >&2; exit 2 ;;
esac
python "$here/opcodes.py" serve "$out" "${server[@]}" >"$run/server.log" 2>&1 &
pid=$!
for _ in $(seq 300); do
  curl -s -o /dev/null -X POST "$url" && break
  sleep 0.1
done
python "$here/send.py" "$url" 200 "$conns" "${flags[@]}"
echo "$requests" >"$out.requests"
kill -USR1 "$pid"; sleep 0.2
python "$here/send.py" "$url" "$requests" "$conns" "${flags[@]}"
sleep 0.2; kill -USR2 "$pid"
for _ in $(seq 100); do [ -s "$out" ] && break; sleep 0.1; done
rm -f "$out.requests"
python "$here/opcodes.py" show "$out" --top "${TOP:-25}"
