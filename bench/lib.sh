# Sourced by run.sh and table.sh: the canned upstream, a server under test pinned to CPU 0, one wrk run.
# The sourcing script sets `here` (bench/) and `port`; DURATION (8s) is each wrk run's length.
run=$(mktemp -d /tmp/gateway-bench.XXXX)
duration=${DURATION:-8s}
server=""

stop_server() { if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; server=""; fi; }
cleanup() {
  stop_server
  [ -f "$run/nginx.pid" ] && kill "$(cat "$run/nginx.pid")" 2>/dev/null || true
}
trap cleanup EXIT

start_upstream() {  # nginx + echo module on 127.0.0.1:18080, on CPU 1 with wrk
  mkdir -p /tmp/gateway-bench-nginx
  taskset -c 1 nginx -p "$run" -c "$here/upstream.nginx.conf" -g "pid $run/nginx.pid; error_log $run/error.log;"
}

start_server() {  # command...
  taskset -c 0 "$@" >"$run/server.log" 2>&1 &
  server=$!
  for _ in $(seq 600); do  # a litellm-backed config takes seconds to import litellm
    curl -s -o /dev/null -X POST "http://127.0.0.1:$port/v1/chat/completions" && return 0
    sleep 0.1
  done
  echo "server did not start:" >&2; cat "$run/server.log" >&2; exit 1
}

gateway() {  # config [serve flags...]
  local config=$1; shift
  start_server python -m gateway serve --config "$config" --host 127.0.0.1 --port "$port" "$@"
}

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

bench() {  # name path connections [env...]: one wrk run; prints rps, p50, and server CPU per request
  local name=$1 path=$2 c=$3; shift 3
  local before after out
  before=$(cpu_ticks "$server")
  out=$(env "$@" taskset -c 1 wrk -t1 -c"$c" -d"${wrk_duration:-$duration}" -s "$here/chat.lua" "http://127.0.0.1:$port$path")
  after=$(cpu_ticks "$server")
  echo "$out" | awk -v n="$name" -v t=$((after - before)) -v hz="$(getconf CLK_TCK)" '
    /requests in/ {reqs = $1}
    /^RESULT/ {line = $0}
    END {sub(/^RESULT /, "", line); printf "%-28s %s cpu_us_per_req=%.0f\n", n, line, t / hz / reqs * 1e6}'
}
