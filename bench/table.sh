#!/usr/bin/env bash
# One table (issue 10): the floor, the gateway's non-stream, stream (2 and 32 chunks) and memory paths,
# and the same routes served through litellm (bench/gateway-litellm.yaml), with median latency at 1 connection,
# CPU per request at CONNS connections (wrk, as run.sh takes it), the ratio to the floor, and
# instructions per request (bench/instructions.sh), and time to first token at 1 connection (bench/ttft.py). Prints markdown for bench/README.md.
# Needs nginx with the echo module, wrk, valgrind, and ../shared/bench/floor_aiohttp.py.
# Env: DURATION (8s a wrk run), CONNS (32), REQUESTS (1000, instructions.sh), LITELLM=0 skips litellm.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
conns=${CONNS:-32}
floor=${FLOOR:-$here/../../shared/bench/floor_aiohttp.py}
litellm=${LITELLM:-1}
port=18091
# shellcheck source=bench/lib.sh
. "$here/lib.sh"
[ -f "$floor" ] || { echo "no floor at $floor" >&2; exit 1; }
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(uptime | sed 's/.*load/load/')"
start_upstream

measure() {  # name [env...]: p50 at 1 connection and CPU per request at CONNS, into $run/wrk.txt
  local name=$1; shift
  wrk_duration=2s bench warmup /v1/chat/completions 8 "$@" >/dev/null
  bench "$name-c1" /v1/chat/completions 1 "$@" | tee -a "$run/wrk.txt"
  bench "$name-c$conns" /v1/chat/completions "$conns" "$@" | tee -a "$run/wrk.txt"
}
ttft() {  # name: median time to first token at 1 connection (bench/ttft.py), into $run/ttft.txt
  echo "$1 $(taskset -c 1 python "$here/ttft.py" "$port" mock-stream)" | tee -a "$run/ttft.txt"
}
stream=(MODEL=mock-stream BODY_STREAM=1)
long=(MODEL=mock-stream-long BODY_STREAM=1)  # 32 chunks: with the 2-chunk stream, the cost of a chunk

start_server python "$floor" "$port" http://127.0.0.1:18080/v1 --uvloop
measure floor; stop_server
start_server python "$floor" "$port" http://127.0.0.1:18080/stream/v1 --uvloop
measure floor-stream "${stream[@]}"; ttft floor-stream; stop_server

gateway "$here/gateway.yaml"
measure gateway; measure gateway-stream "${stream[@]}"; ttft gateway-stream; measure gateway-long "${long[@]}"; stop_server

# memory on against off on one server: token_window over ~20 messages, one conversation a connection
rm -f /tmp/gateway-bench-memory.db*
gateway "$here/memory.yaml"
measure gateway-memory MEMORY_IDS="$conns" HDRS="memoryType:token_window;maxTokens:330"
measure gateway-nomemory; stop_server

servers=(floor gateway memory)
if [ "$litellm" != 0 ]; then
  gateway "$here/gateway-litellm.yaml"
  measure litellm; measure litellm-stream "${stream[@]}"; measure litellm-long "${long[@]}"; stop_server
  servers+=(litellm)
fi
stop_server
cleanup  # instructions.sh starts its own upstream

echo "# wrk runs done $(date -u '+%H:%M UTC'), $(uptime | sed 's/.*load/load/')"
RESULTS="$run/instructions.jsonl" bash "$here/instructions.sh" "${servers[@]}"

python - "$run/wrk.txt" "$run/instructions.jsonl" "$conns" "$run/ttft.txt" <<'PY'
import json, re, sys

wrk, instructions, conns, ttft = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
runs = {}
for line in open(wrk):
    name, *fields = line.split()
    runs[name] = dict(field.split("=") for field in fields)
counts = {e["path"]: e["instructions_per_request"] for e in map(json.loads, open(instructions))}

def p50(name): return runs.get(f"{name}-c1", {}).get("p50_ms")
def cpu(name): return float(runs[f"{name}-c{conns}"]["cpu_us_per_req"])

rows = [  # path, label, floor to compare with, instructions of (memory off shares gateway.yaml's)
    ("floor", "aiohttp floor", "floor", "floor"),
    ("floor-stream", "aiohttp floor, stream (2 chunks)", "floor-stream", "floor-stream"),
    ("gateway", "gateway non-stream", "floor", "gateway"),
    ("gateway-stream", "gateway stream (2 chunks)", "floor-stream", "gateway-stream"),
    ("gateway-long", "gateway stream (32 chunks)", None, "gateway-long"),
    ("gateway-nomemory", "gateway memory off (memory.yaml)", "floor", "gateway"),
    ("gateway-memory", "gateway memory on (token_window, SQLite)", "floor", "gateway-memory"),
    ("litellm", "litellm-backed non-stream (hosted_vllm)", "floor", "litellm"),
    ("litellm-stream", "litellm-backed stream (2 chunks)", "floor-stream", "litellm-stream"),
    ("litellm-long", "litellm-backed stream (32 chunks)", None, None),
]
print(f"| path | p50 c=1 | CPU/req c={conns} | floor / this (CPU) | instructions/req | floor / this (instr.) |")
print("|---|---|---|---|---|---|")
for name, label, floor, instr in rows:
    if f"{name}-c{conns}" not in runs:
        continue
    ms = p50(name)
    count = counts.get(instr) if instr else None
    ratio = f"{counts[floor] / count:.2f}" if count and floor in counts else ""
    shown = f"{count:,}" if count else ""
    against = f"{cpu(floor) / cpu(name):.2f}" if floor else ""
    print(f"| {label} | {ms + ' ms' if ms else ''} | {cpu(name):,.0f} µs | {against} | {shown} | {ratio} |")
print()
firsts = {line.split()[0]: float(line.split()[1].split("=")[1]) for line in open(ttft)}
print(f"added at 1 connection: median latency {float(p50('gateway')) - float(p50('floor')):+.3f} ms (non-stream), "
      f"time to first token {firsts['gateway-stream'] - firsts['floor-stream']:+.3f} ms "
      f"(bench/ttft.py: floor {firsts['floor-stream']:.3f} ms, gateway {firsts['gateway-stream']:.3f} ms)")
print(f"memory on / off: CPU {cpu('gateway-nomemory') / cpu('gateway-memory'):.2f}, "
      f"instructions {counts['gateway'] / counts['gateway-memory']:.2f}")
if "litellm-c" + conns in runs:
    for path, base in (("litellm", "gateway"), ("litellm-stream", "gateway-stream")):
        added = float(p50(path)) - float(p50(base))
        print(f"{path} against {base}: p50 c=1 +{added:.2f} ms, CPU/req x{cpu(path) / cpu(base):.1f}"
              f" (+{cpu(path) - cpu(base):.0f} µs), instructions x{counts[path] / counts[base]:.1f}")
for prefix in ("gateway", "litellm"):
    if f"{prefix}-long-c{conns}" in runs:
        chunk = (cpu(f"{prefix}-long") - cpu(f"{prefix}-stream")) / 30
        print(f"{prefix}: CPU per stream chunk {chunk:.0f} µs (32-chunk against 2-chunk stream, c={conns})")
PY
