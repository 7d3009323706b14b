"""CPU per memory turn on SQLite and Redis, one process and `--workers 2`, beside memory off, in one run.

    python bench/memory_cpu.py [--turns 3000] [--conns 8] [--rounds 10] [--only off,redis,...] [--tree DIR]

Every setup is a `gateway serve` of its own, all started at once, each with its own store (an
SQLite file, a database of one redis-server). Each gets bench/send.py's load: `--turns`
requests, `--conns` at a time, one conversation a connection (`bench-0` ..), each a token_window
turn (maxTokens 330: 22 messages forwarded) or, memory off, the same request without a memoryId.
The turns are sent in `--rounds` short segments that go through the setups forward, then
backward (ABC CBA ABC ..), so that a neighbour's burst of load or a drift falls on all alike.

Before measuring, each server gets 200 plain requests and 12 turns a conversation (24 messages
stored, checked with GET /v1/memory/bench-0; memory off: a 404); after, a probe turn reads how
many messages went with it (`x-memory-history`) and every conversation must hold the cap of 40.

CPU is the on-CPU time of every thread of the gateway's process tree (`--workers`: the parent
and its workers) over a segment (bench/proc_cpu.py), divided by its turns; the table gives the
median of a setup's segments, and its ratio to memory off as the median over rounds of the
two segments' ratio. redis-server's CPU is taken apart, with the commands it served per turn.
"Neighbours on its CPU" is the share of a segment's time the gateway's CPU ran other processes
(/proc/stat less the gateway's own): other work on the machine, which moves the gateway's CPU
per turn either way (cold caches; requests that queue while it waits are served together).

The gateways are pinned to the first CPU of this process's affinity, the rest (nginx as the
upstream, send.py, redis-server) to the second, when there are two. Takes the lock
bench/instructions.sh takes (both need nginx on 18080). `--tree DIR` runs the gateway package
in DIR (`git archive HEAD gateway | tar -x -C DIR` measures a commit whatever the working tree
holds). Needs nginx with the echo module and redis-server. ~1.5 min with the defaults.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import fcntl
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from email.message import Message
from pathlib import Path

import redis
from proc_cpu import busy_ns, cpu_ns, descendants, listening, running, spent
from send import WINDOWS, body

HERE = Path(__file__).resolve().parent
LOCK = "/tmp/gateway-instructions.lock"
UPSTREAM_PORT = 18080
PLAIN_WARMUP = 200
MEMORY_WARMUP = 12  # turns a conversation before the measured ones: 24 messages, under the cap
CAP = 40  # maxStoredMessages in memory.yaml and memory-redis.yaml
HEADERS = {"Authorization": "Bearer sk-bench", "Content-Type": "application/json"}


@dataclass(frozen=True, slots=True)
class Setup:
    """One server to measure: its config, its processes, and whether requests carry a memoryId."""

    name: str
    label: str
    config: str
    workers: int
    memory: bool


SETUPS = (
    Setup("off", "memory off (memory.yaml, no memoryId)", "memory.yaml", 1, memory=False),
    Setup("sqlite", "SQLite, one process", "memory.yaml", 1, memory=True),
    Setup("sqlite-w2", "SQLite, --workers 2", "memory.yaml", 2, memory=True),
    Setup("redis", "Redis, one process", "memory-redis.yaml", 1, memory=True),
    Setup("redis-w2", "Redis, --workers 2", "memory-redis.yaml", 2, memory=True),
    Setup("off-w2", "memory off, --workers 2", "memory.yaml", 2, memory=False),
)


@dataclass(frozen=True, slots=True)
class Reading:
    """One measured segment of one setup."""

    round: int
    setup: str
    gateway_ns: int
    redis_ns: int
    redis_commands: int
    turns: int
    wall_ns: int  # of send.py's run, its own start included
    neighbours_ns: int = 0  # what else ran on the gateway's CPU meanwhile (only when pinned)


def run_order(names: Sequence[str], rounds: int) -> list[tuple[int, str]]:
    """(round, setup) of every segment in turn: the setups forward in even rounds, backward in odd ones."""
    order: list[tuple[int, str]] = []
    for index in range(rounds):
        order += [(index, name) for name in (names if index % 2 == 0 else reversed(names))]
    return order


def render(readings: Sequence[Reading], setups: Sequence[Setup], history: Mapping[str, int]) -> str:
    """The markdown table: per setup the median of its segments' CPU per turn (their range), and its ratio to memory off.

    Medians, not totals over all segments: a neighbour's burst of load that lands on one segment
    raises that segment's figure alone. The ratio is the median over rounds of the setup's
    segment against memory off's in the same round, seconds apart: a drift cancels out.
    """

    def per_turn(runs: Sequence[Reading], field: str) -> list[float]:
        return [getattr(r, field) / r.turns / 1000 for r in runs]

    by_setup = {s.name: [r for r in readings if r.setup == s.name] for s in setups}
    off = {r.round: r.gateway_ns / r.turns for r in by_setup.get("off", [])}
    lines = [
        "| setup | gateway CPU per turn: median (range) | \N{MULTIPLICATION SIGN} memory off "
        "| neighbours on its CPU | redis-server CPU per turn | Redis commands per turn | history forwarded |",
        "|---|---|---|---|---|---|---|",
    ]
    for setup in setups:
        if not (runs := by_setup[setup.name]):
            continue
        segments = per_turn(runs, "gateway_ns")
        gateway = statistics.median(segments)
        spread = f"{min(segments):,.0f}\N{EN DASH}{max(segments):,.0f}"
        ratios = [r.gateway_ns / r.turns / off[r.round] for r in runs if r.round in off]
        ratio = f"{statistics.median(ratios):.2f}" if ratios else ""
        redis_us = statistics.median(per_turn(runs, "redis_ns"))
        neighbours = statistics.median(max(r.neighbours_ns, 0) / r.wall_ns for r in runs)
        commands = sum(r.redis_commands for r in runs) / sum(r.turns for r in runs)
        lines.append(
            f"| {setup.label} | {gateway:,.0f} µs ({spread}) | {ratio} | {neighbours:.0%} | {redis_us:,.0f} µs | {commands:.1f} "
            f"| {history.get(setup.name, '')} |"
        )
    return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class Gateway:
    """A running `gateway serve` of one setup."""

    setup: Setup
    process: subprocess.Popen[bytes]
    port: int

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"


class Bench:
    """The upstream, redis-server and the gateways of one run, with the CPUs they are pinned to."""

    def __init__(self, work: Path, *, tree: Path | None, conns: int) -> None:
        self.work = work
        self.tree = tree
        self.conns = conns
        cpus = sorted(os.sched_getaffinity(0))
        self.pinned = len(cpus) >= 2
        self.gateway_cpu, self.rest_cpu = (str(cpus[0]), str(cpus[1])) if self.pinned else ("", "")
        self.redis_port = free_port()
        self.redis_process: subprocess.Popen[bytes] | None = None
        self.upstream = "nginx"

    def pin(self, command: Sequence[str], cpu: str) -> list[str]:
        return ["taskset", "-c", cpu, *command] if self.pinned else list(command)

    def start_upstream(self) -> None:
        """nginx with the canned answers on 18080; one already there that answers them is used as it is."""
        with contextlib.suppress(SystemExit):
            wait_until(lambda: listening(UPSTREAM_PORT) == 0, 15, "")
        if listening(UPSTREAM_PORT):
            # a benchmark run killed before its cleanup leaves its nginx behind: usable, not pinned
            url = f"http://127.0.0.1:{UPSTREAM_PORT}/v1/chat/completions"
            status, _, answer = request(url, method="POST", body=b"{}")
            check(
                status == 200 and b"chatcmpl-mock" in answer,
                f"port {UPSTREAM_PORT} is taken by something else",
            )
            self.upstream = f"an nginx already on {UPSTREAM_PORT}, not started here, not pinned"
            return
        Path("/tmp/gateway-bench-nginx").mkdir(exist_ok=True)
        conf = HERE / "upstream.nginx.conf"
        directives = f"pid {self.work}/nginx.pid; error_log {self.work}/nginx.log;"
        command = ["nginx", "-p", str(self.work), "-c", str(conf), "-g", directives]
        subprocess.run(self.pin(command, self.rest_cpu), check=True)
        wait_until(lambda: listening(UPSTREAM_PORT) > 0, 15, "nginx did not listen")

    def stop_upstream(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            os.kill(int((self.work / "nginx.pid").read_text()), signal.SIGTERM)

    def start_redis(self) -> None:
        command = ["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1", "--save", "",
                   "--appendonly", "no", "--dir", str(self.work), "--protected-mode", "no"]  # fmt: skip
        self.redis_process = subprocess.Popen(self.pin(command, self.rest_cpu), stdout=subprocess.DEVNULL)
        wait_until(lambda: listening(self.redis_port) > 0, 15, "redis-server did not listen")

    def stop_redis(self) -> None:
        if self.redis_process is not None:
            self.redis_process.terminate()
            self.redis_process.wait(10)

    def redis_url(self, index: int) -> str:
        return f"redis://127.0.0.1:{self.redis_port}/{index}"

    @contextlib.contextmanager
    def gateway(self, setup: Setup, index: int) -> Iterator[Gateway]:
        """`gateway serve` for `setup` on a store of its own (number `index`), listening in every process."""
        port = free_port()
        env = {**os.environ, "BENCH_REDIS_URL": self.redis_url(index),
               "BENCH_SQLITE_PATH": str(self.work / f"memory-{index}.db")}  # fmt: skip
        if self.tree is not None:
            env["PYTHONPATH"] = str(self.tree)
        command = [sys.executable, "-m", "gateway", "serve", "--config", str(HERE / setup.config),
                   "--host", "127.0.0.1", "--port", str(port)]  # fmt: skip
        if setup.workers > 1:
            command += ["--workers", str(setup.workers)]
        with open(self.work / f"gateway-{setup.name}.log", "wb") as log:
            process = subprocess.Popen(
                self.pin(command, self.gateway_cpu),
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=self.tree,
            )
        try:
            wait_until(lambda: listening(port) == setup.workers, 120,
                       f"{setup.name}: the gateway did not listen (see its log)", alive=process)  # fmt: skip
            yield Gateway(setup, process, port)
        finally:
            workers = descendants(process.pid)[1:]
            process.terminate()
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:  # the readings stand; keep what says why it hung, then end it
                self.keep_hung(setup, [process.pid, *workers])
                for pid in [process.pid, *workers]:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                process.wait()
            wait_until(lambda: not any(map(running, workers)), 30,
                       f"{setup.name}: workers {workers} outlived their parent")  # fmt: skip

    def keep_hung(self, setup: Setup, pids: Sequence[int]) -> None:
        """A gateway that did not stop within 30 s of SIGTERM: its log, and its stacks when py-spy is there, kept in /tmp."""
        kept = Path(tempfile.mkdtemp(prefix=f"memory-cpu-hung-{setup.name}."))
        log = self.work / f"gateway-{setup.name}.log"
        if log.exists():
            (kept / log.name).write_bytes(log.read_bytes())
        for pid in pids:
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                dump = subprocess.run(["py-spy", "dump", "--pid", str(pid)], capture_output=True, timeout=30)
                (kept / f"py-spy-{pid}.txt").write_bytes(dump.stdout + dump.stderr)
        print(f"memory_cpu: {setup.name}: the gateway did not stop within 30 s of SIGTERM; killed (kept: {kept})",
              file=sys.stderr)  # fmt: skip

    def send(self, gateway: Gateway, count: int, *, memory: bool) -> None:
        flags = ["memory"] if memory else []
        command = [sys.executable, str(HERE / "send.py"), gateway.url("/v1/chat/completions"), str(count),
                   str(self.conns), *flags]  # fmt: skip
        subprocess.run(self.pin(command, self.rest_cpu), check=True)

    def stored(self, gateway: Gateway, memory_id: str) -> int | None:
        """Messages stored in a conversation, by GET /v1/memory/{id}; None when there is none."""
        status, _, answer = request(gateway.url(f"/v1/memory/{memory_id}"))
        if status == 404:
            return None
        check(status == 200, f"GET /v1/memory/{memory_id}: {status} {answer[:300]!r}")
        return len(json.loads(answer)["messages"])

    def warm(self, gateway: Gateway) -> None:
        """Plain requests, then (memory on) turns that must be stored; memory off must store nothing."""
        self.send(gateway, PLAIN_WARMUP, memory=False)
        if gateway.setup.memory:
            self.send(gateway, MEMORY_WARMUP * self.conns, memory=True)
        held = self.stored(gateway, "bench-0")
        wanted = 2 * MEMORY_WARMUP if gateway.setup.memory else None
        check(
            held == wanted,
            f"{gateway.setup.name}: bench-0 holds {held} messages after the warm-up, not {wanted}",
        )
        if gateway.setup.workers > 1:
            tree = descendants(gateway.process.pid)
            check(
                len(tree) > gateway.setup.workers,
                f"{gateway.setup.name}: no workers under the gateway: {tree}",
            )

    def segment(self, gateway: Gateway, turns: int, client: redis.Redis, *, round_index: int) -> Reading:
        """Send `turns` and read what they cost the gateway's processes and redis-server."""
        assert self.redis_process is not None, "start_redis first"
        tree, redis_tree = descendants(gateway.process.pid), descendants(self.redis_process.pid)
        commands = int(client.info("stats")["total_commands_processed"])
        gateway_before, redis_before = cpu_ns(tree), cpu_ns(redis_tree)
        cpu_before = busy_ns(int(self.gateway_cpu)) if self.pinned else 0
        started = time.monotonic_ns()
        self.send(gateway, turns, memory=gateway.setup.memory)
        wall_ns = time.monotonic_ns() - started
        gateway_ns, redis_ns = spent(gateway_before, cpu_ns(tree)), spent(redis_before, cpu_ns(redis_tree))
        neighbours_ns = (busy_ns(int(self.gateway_cpu)) - cpu_before - gateway_ns) if self.pinned else 0
        commands = int(client.info("stats")["total_commands_processed"]) - commands - 1  # less this INFO
        return Reading(
            round_index, gateway.setup.name, gateway_ns, redis_ns, commands, turns, wall_ns, neighbours_ns
        )

    def history(self, gateway: Gateway) -> int:
        """Messages forwarded with a probe turn on bench-0 (x-memory-history); every conversation must hold the cap."""
        headers = {**HEADERS, "memoryId": "bench-0", **WINDOWS["memory"]}
        status, answer_headers, answer = request(
            gateway.url("/v1/chat/completions"),
            method="POST",
            body=body("mock-1", stream=False),
            headers=headers,
        )
        forwarded = answer_headers.get("x-memory-history")
        check(status == 200 and forwarded is not None, f"probe turn: {status} {answer[:300]!r}")
        held = [self.stored(gateway, f"bench-{index}") for index in range(self.conns)]
        check(
            held == [CAP] * self.conns, f"{gateway.setup.name}: conversations hold {held} messages, not {CAP}"
        )
        return int(str(forwarded))


def request(
    url: str, *, method: str = "GET", body: bytes | None = None, headers: Mapping[str, str] = HEADERS
) -> tuple[int, Message, bytes]:
    """(status, headers, body) of one HTTP request; an error status is an answer, not an exception."""
    ask = urllib.request.Request(url, data=body, method=method, headers=dict(headers))
    try:
        with urllib.request.urlopen(ask, timeout=30) as answer:
            return answer.status, answer.headers, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()


def check(condition: bool, failure: str) -> None:
    if not condition:
        raise SystemExit(f"memory_cpu: {failure}")


def wait_until(
    ready: Callable[[], bool], seconds: float, failure: str, *, alive: subprocess.Popen[bytes] | None = None
) -> None:
    """Poll `ready` until it holds; SystemExit with `failure` after `seconds` or when `alive` exits."""
    deadline = time.monotonic() + seconds
    while not ready():
        if time.monotonic() > deadline or (alive is not None and alive.poll() is not None):
            raise SystemExit(f"memory_cpu: {failure}")
        time.sleep(0.05)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def code_of(tree: Path | None) -> str:
    """Which code ran: the tree given, or this checkout's commit (and whether gateway/ differs from it)."""
    if tree is not None:
        return f"the gateway package in {tree}"
    git = ["git", "-C", str(HERE.parent)]
    commit = subprocess.run(
        [*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        [*git, "status", "--porcelain", "gateway"], capture_output=True, text=True
    ).stdout.strip()
    return commit + (" with uncommitted changes in gateway/" if dirty else "")


@contextlib.contextmanager
def bench_lock() -> Iterator[None]:
    """bench/instructions.sh's lock: one benchmark at a time on the upstream's port."""
    with open(LOCK, "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print("memory_cpu: waiting for another benchmark to finish", file=sys.stderr)
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def measure(
    bench: Bench, setups: Sequence[Setup], *, turns: int, rounds: int
) -> tuple[list[Reading], dict[str, int]]:
    """Start every setup's gateway, warm each up, run the segments in order; (readings, history forwarded by setup)."""
    readings, history = [], {}
    with contextlib.ExitStack() as stack:
        client = stack.enter_context(redis.Redis.from_url(bench.redis_url(0)))
        client.flushall()
        gateways = {s.name: stack.enter_context(bench.gateway(s, index)) for index, s in enumerate(setups)}
        for gateway in gateways.values():
            bench.warm(gateway)
        for round_index, name in run_order(list(gateways), rounds):
            reading = bench.segment(gateways[name], turns, client, round_index=round_index)
            readings.append(reading)
            print(
                f"{name:<10} gateway {reading.gateway_ns / turns / 1000:7.1f} µs/turn (neighbours "
                f"{reading.neighbours_ns / reading.wall_ns:4.0%} of its CPU), busy "
                f"{reading.gateway_ns / reading.wall_ns:4.0%} of {reading.wall_ns / 1e9:4.1f} s; redis-server "
                f"{reading.redis_ns / turns / 1000:6.1f} µs/turn, {reading.redis_commands / turns:4.1f} commands/turn",
                flush=True,
            )
        for gateway in gateways.values():
            if gateway.setup.memory:
                history[gateway.setup.name] = bench.history(gateway)
    return readings, history


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--turns", type=int, default=3000, help="measured requests a setup, over all rounds")
    parser.add_argument("--conns", type=int, default=8, help="at a time, one conversation each")
    parser.add_argument("--rounds", type=int, default=10, help="segments a setup")
    parser.add_argument(
        "--only", default="", help="comma-separated setups: " + ", ".join(s.name for s in SETUPS)
    )
    parser.add_argument("--tree", type=Path, help="a source tree whose gateway package to run")
    args = parser.parse_args(argv)
    wanted = args.only.split(",") if args.only else [s.name for s in SETUPS]
    if unknown := set(wanted) - {s.name for s in SETUPS}:
        parser.error(f"unknown setups: {', '.join(sorted(unknown))}")
    segment = args.turns // args.rounds // args.conns * args.conns  # send.py sends whole shares a connection
    if segment < args.conns:
        parser.error(f"--turns {args.turns} is less than a turn a connection in each of {args.rounds} rounds")
    setups = [s for s in SETUPS if s.name in wanted]
    with bench_lock(), tempfile.TemporaryDirectory(prefix="gateway-memory-cpu.") as tmp:
        bench = Bench(Path(tmp), tree=args.tree.resolve() if args.tree else None, conns=args.conns)
        started = f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, load {os.getloadavg()[0]:.2f}"
        bench.start_upstream()
        bench.start_redis()
        try:
            readings, history = measure(bench, setups, turns=segment, rounds=args.rounds)
        finally:
            bench.stop_redis()
            bench.stop_upstream()
    pinning = (
        f"gateways on CPU {bench.gateway_cpu}; send.py and redis-server on CPU {bench.rest_cpu}"
        if bench.pinned else "nothing pinned (one CPU)"
    )  # fmt: skip
    ended = f"{datetime.datetime.now(datetime.UTC):%H:%M} UTC, load {os.getloadavg()[0]:.2f}"
    print(f"\n# {started} to {ended}; code: {code_of(bench.tree)}")
    print(f"# {os.cpu_count()} CPUs, {pinning}; upstream: {bench.upstream}")
    print(f"# {segment * args.rounds:,} turns a setup at {args.conns} connections, in {args.rounds} segments "
          f"of {segment:,} (setups forward, then backward)\n")  # fmt: skip
    print(render(readings, setups, history))
    return 0


if __name__ == "__main__":
    sys.exit(main())
