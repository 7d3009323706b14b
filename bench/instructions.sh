#!/usr/bin/env bash
# Instructions per request under callgrind: nearly deterministic (within ~1 % run to run), so two versions
# can be compared on a noisy machine where requests/s swing 2x. Slow (~20 s a scenario).
# Scenarios: a chat request, a stream of 2 chunks (`-stream`), a stream of 32 chunks (`-long`).
# Needs valgrind, nginx with the echo module (see run.sh).
#   bash bench/instructions.sh [SERVER...]   servers: floor gateway nometrics nostreamusage gateway-nolog
#                                            nometrics-nolog memory memory-redis limits limits-redis litellm
#                                            memory-scale
#                                            (default: all but litellm and memory-scale); guard = what
#                                            bench/guard.py checks (gateway, gateway-stream, gateway-limits,
#                                            gateway-limits-redis, gateway-memory, gateway-memory-redis)
# memory-redis: the memory turn of `memory` on a redis-server this script starts on a free port (bench/memory-redis.yaml);
# its instructions are the gateway's alone, not redis-server's.
# memory-scale: a memory turn (message_window of 20) over a prefilled SQLite file (bench/fill_memory.py):
# 20 stored messages a conversation against 1,000, and a store of 10 conversations against 100,000
# (10 messages each); prints the two ratios. ~3 min.
# Env: REQUESTS (1000; litellm's: LITELLM_REQUESTS, 200), CONNS (8), PATHS (only these
# measurements, e.g. "gateway-stream"; a server none of whose measurements is wanted is not
# started), RESULTS (a file: one JSON line per measurement is appended), PYTHON (the interpreter),
# KEEP=1 (keep each profile as /tmp/cg-NAME.out for callgrind_annotate).
set -euo pipefail
exec 9>/tmp/gateway-instructions.lock
if ! flock -n 9; then  # one run at a time: runs share the upstream's and the server's ports
  echo "instructions.sh: waiting for another run to finish" >&2
  flock 9
fi
here=$(cd "$(dirname "$0")" && pwd)
run=$(mktemp -d /tmp/gateway-instr.XXXX)
requests=${REQUESTS:-1000}
warmup=200
conns=${CONNS:-8}
floor=${FLOOR:-$here/../../shared/bench/floor_aiohttp.py}
python=${PYTHON:-$(python -c 'import sys; print(sys.executable)')}  # the real binary, not a pyenv shim
port=18094
url="http://127.0.0.1:$port/v1/chat/completions"
pid=""
dumps=0
redis_pid=""

stop_server() {  # SIGTERM, then SIGKILL past 120 s: the counts are taken, and a stuck drain must not hang CI
  if [ -n "$pid" ]; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 240); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "instructions.sh: the server did not stop within 120 s of SIGTERM; killed" >&2
      kill -9 "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
    pid=""
  fi
}
cleanup() {
  stop_server
  if [ -n "$redis_pid" ]; then kill "$redis_pid" 2>/dev/null || true; wait "$redis_pid" 2>/dev/null || true; fi
  [ -f "$run/nginx.pid" ] && kill "$(cat "$run/nginx.pid")" 2>/dev/null || true
  rm -rf "$run"
}
trap cleanup EXIT
mkdir -p /tmp/gateway-bench-nginx
nginx -p "$run" -c "$here/upstream.nginx.conf" -g "pid $run/nginx.pid; error_log $run/error.log;" 9>&-  # the daemon must not hold the lock

start_server() {  # server command...: under callgrind, instrumentation off until measure()
  rm -f "$run"/cg.*
  dumps=0
  valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$run/cg.%p" "$@" >"$run/server.log" 2>&1 9>&- &
  pid=$!
  for _ in $(seq 600); do
    curl -s -o /dev/null -X POST "$url" && return 0
    sleep 0.5
  done
  echo "server did not start:" >&2; cat "$run/server.log" >&2; exit 1
}

measure() {  # name [send.py flags: memory, stream]: warm up, then count the instructions of REQUESTS
  local name=$1; shift
  "$python" "$here/send.py" "$url" "$warmup" "$conns" "$@"   # warm-up, not counted
  callgrind_control -z "$pid" >/dev/null 2>&1
  callgrind_control -i on "$pid" >/dev/null 2>&1
  "$python" "$here/send.py" "$url" "$requests" "$conns" "$@"
  callgrind_control -d "$pid" >/dev/null 2>&1
  callgrind_control -i off "$pid" >/dev/null 2>&1
  dumps=$((dumps + 1))
  local profile total
  profile=$(ls "$run"/cg.*."$dumps")
  total=$(awk '/^summary:/{print $2; exit}' "$profile")
  measured[$name]=$((total / requests))
  printf "%-30s %9d instructions per request\n" "$name" $((total / requests))
  if [ -n "${RESULTS:-}" ]; then
    printf '{"path": "%s", "instructions_per_request": %d, "requests": %d, "conns": %d}\n' \
      "$name" $((total / requests)) "$requests" "$conns" >>"$RESULTS"
  fi
  if [ -n "${KEEP:-}" ]; then cp "$profile" "/tmp/cg-$name.out"; fi
}

wanted() { [ -z "${PATHS:-}" ] || [[ " $PATHS " == *" $1 "* ]]; }

scenario() {  # "start command" measurement...: one server, its measurements (name or name:send.py flag)
  local start=$1 m todo=()
  shift
  for m in "$@"; do if wanted "${m%%:*}"; then todo+=("$m"); fi; done
  [ ${#todo[@]} -gt 0 ] || return 0
  $start  # a function name and its words
  for m in "${todo[@]}"; do
    if [[ $m == *:* ]]; then measure "${m%%:*}" "${m#*:}"; else measure "$m"; fi
  done
  stop_server
}

gateway() {  # config [serve flags...]
  local config=$1; shift
  start_server "$python" -m gateway serve --config "$here/$config" --host 127.0.0.1 --port "$port" "$@"
}
gateway_memory() { rm -f /tmp/gateway-bench-memory.db*; gateway memory.yaml; }
start_redis() {  # a throwaway redis-server on a free port: BENCH_REDIS_URL, which memory-redis.yaml reads
  local redis_port
  redis_port=$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --dir "$run" --protected-mode no \
    >"$run/redis.log" 2>&1 9>&- &
  redis_pid=$!
  export BENCH_REDIS_URL="redis://127.0.0.1:$redis_port/0"
  for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$redis_port") 2>/dev/null && return 0
    sleep 0.1
  done
  echo "redis-server did not start:" >&2; cat "$run/redis.log" >&2; exit 1
}
gateway_memory_redis() { [ -n "$redis_pid" ] || start_redis; gateway memory-redis.yaml; }
gateway_limits_redis() { [ -n "$redis_pid" ] || start_redis; gateway gateway-limits-redis.yaml; }
gateway_memory_filled() {  # config conversations messages: the gateway on a file filled before it starts
  local db=/tmp/gateway-bench-memory-scale.db
  rm -f "$db"*
  "$python" "$here/fill_memory.py" "$db" --conversations "$2" --messages "$3" >&2
  gateway "$1"
}
ratio() {  # name of the larger, name of the smaller: "larger / smaller = r" when both were measured
  if [ -n "${measured[$1]:-}" ] && [ -n "${measured[$2]:-}" ]; then
    awk -v a="${measured[$1]}" -v b="${measured[$2]}" -v n="$1 / $2" 'BEGIN { printf "%-55s %.3f\n", n, a / b }'
  fi
}
declare -A measured=()
floor_server() { start_server "$python" "$floor" "$port" "http://127.0.0.1:18080$1" --uvloop; }

servers=("$@")
[ ${#servers[@]} -gt 0 ] || servers=(floor gateway nometrics nostreamusage gateway-nolog nometrics-nolog memory memory-redis limits limits-redis)
for server in "${servers[@]}"; do
  case $server in
    floor)  # the floor passes bytes through: one instance per upstream path
      [ -f "$floor" ] || { echo "no floor at $floor" >&2; continue; }
      scenario "floor_server /v1" floor
      scenario "floor_server /stream/v1" floor-stream:stream ;;
    gateway)  # bench/gateway.yaml: auth on, metrics on (the default), access log at INFO
      scenario "gateway gateway.yaml" gateway gateway-stream:stream gateway-long:long ;;
    nometrics)
      scenario "gateway gateway-nometrics.yaml" nometrics nometrics-stream:stream nometrics-long:long ;;
    nostreamusage)  # metrics on, streams not asked for usage
      scenario "gateway gateway-nostreamusage.yaml" nostreamusage-stream:stream nostreamusage-long:long ;;
    gateway-nolog)  # --log-level warning drops the access line
      scenario "gateway gateway.yaml --log-level warning" gateway-nolog gateway-nolog-stream:stream ;;
    nometrics-nolog)
      scenario "gateway gateway-nometrics.yaml --log-level warning" nometrics-nolog nometrics-nolog-stream:stream ;;
    memory)
      scenario gateway_memory gateway-memory:memory ;;
    memory-redis)
      scenario gateway_memory_redis gateway-memory-redis:memory ;;
    memory-scale)  # issue 10: CPU per memory turn follows the window, not what is stored
      scenario "gateway_memory_filled memory-20.yaml 8 20" memory-stored-20:window
      scenario "gateway_memory_filled memory-1000.yaml 8 1000" memory-stored-1000:window
      scenario "gateway_memory_filled memory-20.yaml 10 10" memory-conversations-10:window
      scenario "gateway_memory_filled memory-20.yaml 100000 10" memory-conversations-100000:window
      ratio memory-stored-1000 memory-stored-20
      ratio memory-conversations-100000 memory-conversations-10 ;;
    limits)  # bench/gateway-limits.yaml: the chat request of a key held to every limit, counted in the process
      scenario "gateway gateway-limits.yaml" gateway-limits ;;
    limits-redis)  # the same limits counted on a redis-server this script starts (bench/gateway-limits-redis.yaml)
      scenario gateway_limits_redis gateway-limits-redis ;;
    guard)  # bench/guard.py's paths
      scenario "gateway gateway.yaml" gateway gateway-stream:stream
      scenario "gateway gateway-limits.yaml" gateway-limits
      scenario gateway_limits_redis gateway-limits-redis
      scenario gateway_memory gateway-memory:memory
      scenario gateway_memory_redis gateway-memory-redis:memory ;;
    litellm)  # gateway.yaml's routes served through litellm (provider hosted_vllm): 20-40x the
      # instructions, so fewer requests (for this call only) keep it to minutes
      requests=${LITELLM_REQUESTS:-200} warmup=100 scenario "gateway gateway-litellm.yaml" litellm litellm-stream:stream ;;
    *) echo "unknown server: $server" >&2; exit 2 ;;
  esac
done
