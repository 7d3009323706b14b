#!/usr/bin/env bash
# Throughput, added latency and CPU per request of the gateway, against calling the upstream
# directly (and against ../shared/bench/floor_aiohttp.py, the least an aiohttp proxy can do,
# when it is there). Needs nginx with the echo module and wrk:
#   apt-get install -y nginx-light libnginx-mod-http-echo wrk
# The proxy under test gets CPU 0; nginx and wrk share CPU 1. Env: DURATION (8s), CONNS (32),
# CONFIG (the main gateway config), ROUNDS (2: rounds of the metrics/access-log comparison, 0 skips it).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
conns=${CONNS:-32}
rounds=${ROUNDS:-2}
floor=${FLOOR:-$here/../../shared/bench/floor_aiohttp.py}
port=18090
# shellcheck source=bench/lib.sh
. "$here/lib.sh"
start_upstream

echo "# direct to the upstream (nginx)"
for c in 1 "$conns"; do
  taskset -c 1 wrk -t1 -c"$c" -d"$duration" -s "$here/chat.lua" http://127.0.0.1:18080/v1/chat/completions |
    awk -v n="direct-c$c" '/^RESULT/{sub(/^RESULT /, ""); printf "%-28s %s\n", n, $0}'
done

if [ -f "$floor" ]; then
  echo "# the Python floor: $floor"
  start_server python "$floor" "$port" http://127.0.0.1:18080/v1 --uvloop
  bench warmup /v1/chat/completions 8 >/dev/null
  bench floor-c1 /v1/chat/completions 1
  bench "floor-c$conns" /v1/chat/completions "$conns"
  stop_server
fi

echo "# the gateway: ${CONFIG:-$here/gateway.yaml}"
gateway "${CONFIG:-$here/gateway.yaml}"
bench warmup /v1/chat/completions 8 >/dev/null
bench gateway-c1 /v1/chat/completions 1
bench "gateway-c$conns" /v1/chat/completions "$conns"
bench "gateway-stream-c$conns" /v1/chat/completions "$conns" MODEL=mock-stream BODY_STREAM=1
stop_server

# Metrics on (gateway.yaml) against off (gateway-nometrics.yaml), each with the access log on
# (INFO, the default) and off (--log-level warning). Rounds alternate the four servers, so a
# neighbour's load falls on all of them alike; compare within a round.
for round in $(seq "$rounds"); do
  echo "# metrics and access log, round $round"
  for variant in on off on-nolog off-nolog; do
    case $variant in
      on) gateway "$here/gateway.yaml" ;;
      off) gateway "$here/gateway-nometrics.yaml" ;;
      on-nolog) gateway "$here/gateway.yaml" --log-level warning ;;
      off-nolog) gateway "$here/gateway-nometrics.yaml" --log-level warning ;;
    esac
    wrk_duration=2s bench warmup /v1/chat/completions 8 >/dev/null
    bench "metrics-$variant-c$conns" /v1/chat/completions "$conns"
    bench "metrics-$variant-stream-c$conns" /v1/chat/completions "$conns" MODEL=mock-stream BODY_STREAM=1
    stop_server
  done
done

# Memory: token_window over a ~20-message history on the embedded SQLite store, one
# conversation per connection (requests on one memoryId are serialized by design).
echo "# the gateway with memory: $here/memory.yaml"
rm -f /tmp/gateway-bench-memory.db*
gateway "$here/memory.yaml"
memory_env=(MEMORY_IDS="$conns" HDRS="memoryType:token_window;maxTokens:${MEMORY_MAX_TOKENS:-330}")
bench warmup /v1/chat/completions "$conns" "${memory_env[@]}" >/dev/null
curl -s -o /dev/null -D "$run/memory-headers" -H "Authorization: Bearer sk-bench" -H "memoryId: bench-1" \
  -H "memoryType: token_window" -H "maxTokens: ${MEMORY_MAX_TOKENS:-330}" -H "Content-Type: application/json" \
  -d '{"model":"mock-1","messages":[{"role":"user","content":"Say hello in one short sentence."}]}' \
  "http://127.0.0.1:$port/v1/chat/completions"
echo "history forwarded per request: $(awk -F': ' 'tolower($1)=="x-memory-history"{print $2}' "$run/memory-headers" | tr -d '\r')"
bench "gateway-memory-c$conns" /v1/chat/completions "$conns" "${memory_env[@]}"
bench "gateway-nomemory-c$conns" /v1/chat/completions "$conns"
