"""CPU per memory turn on SQLite and Redis, one process and `--workers 2`, beside memory off, in one run.

    python bench/memory_cpu.py [--turns 3000] [--conns 8] [--rounds 2] [--only off,redis,...] [--tree DIR]

Each setup is a fresh `gateway serve` (and a fresh store) under the same load: bench/send.py sends
`--turns` requests, `--conns` at a time, one conversation a connection (`bench-0` ..), each a
token_window turn (maxTokens 330: ~20 messages forwarded) or, memory off, the same request
without a memoryId. Before the measured turns each server gets 200 plain requests and 12 turns a
conversation (24 messages stored, checked with GET /v1/memory/bench-0); after them a probe turn
reads how many messages went with it (`x-memory-history`) and GET checks the conversation holds
the store's cap of 40 (memory off: that nothing was stored).

CPU is the on-CPU time (`/proc/PID/task/TID/schedstat`, nanoseconds) of the gateway's process
and every process under it (`--workers`: the parent and its workers), over the measured turns,
divided by them; redis-server's is taken apart, with the commands it served per turn. Setups run
in rounds, forward then backward (ABC CBA), so drift on a shared machine falls on all alike.

The gateway is pinned to the first CPU of this process's affinity and the rest (nginx as the
upstream, send.py, redis-server) to the second, when there are two. Takes the lock
bench/instructions.sh takes (both need nginx on 18080). `--tree DIR` runs the gateway package
found in DIR (`git archive HEAD | tar -x -C DIR` measures a commit without a checkout).
Needs nginx with the echo module and redis-server. ~4 min with the defaults.
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
from proc_cpu import cpu_ns, descendants, listening, running, spent
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
    """One measured run of one setup."""

    setup: str
    gateway_ns: int
    redis_ns: int
    redis_commands: int
    turns: int
    history: int | None
    wall_ns: int  # of send.py's measured run, its own start included


def run_order(names: Sequence[str], rounds: int) -> list[str]:
    """The setups of every round in turn: forward in odd rounds, backward in even ones."""
    order: list[str] = []
    for index in range(rounds):
        order += names if index % 2 == 0 else list(reversed(names))
    return order


def render(readings: Sequence[Reading], setups: Sequence[Setup]) -> str:
    """The markdown table: per setup the mean of its rounds (their range), and the ratio to memory off."""
    by_setup = {s.name: [r for r in readings if r.setup == s.name] for s in setups}

    def per_turn(values: Sequence[Reading], ns: str) -> list[float]:
        return [getattr(r, ns) / r.turns / 1000 for r in values]

    off = by_setup.get("off")
    off_mean = statistics.mean(per_turn(off, "gateway_ns")) if off else None
    lines = [
        "| setup | gateway CPU per turn (rounds) | \N{MULTIPLICATION SIGN} memory off | redis-server CPU per turn "
        "| Redis commands per turn | history forwarded |",
        "|---|---|---|---|---|---|",
    ]
    for setup in setups:
        runs = by_setup[setup.name]
        if not runs:
            continue
        gateway = per_turn(runs, "gateway_ns")
        mean = statistics.mean(gateway)
        spread = "\N{EN DASH}".join(f"{v:,.0f}" for v in (min(gateway), max(gateway)))
        ratio = f"{mean / off_mean:.2f}" if off_mean else ""
        redis_us = statistics.mean(per_turn(runs, "redis_ns"))
        commands = statistics.mean(r.redis_commands / r.turns for r in runs)
        history = sorted({r.history for r in runs if r.history is not None})
        lines.append(
            f"| {setup.label} | {mean:,.0f} µs ({spread}) | {ratio} | {redis_us:,.0f} µs | {commands:.1f} "
            f"| {', '.join(map(str, history))} |"
        )
    return "\n".join(lines)


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


class Bench:
    """The upstream, redis-server and each gateway of one run, with the CPUs they are pinned to."""

    def __init__(self, work: Path, *, tree: Path | None, conns: int, turns: int) -> None:
        self.work = work
        self.tree = tree
        self.conns = conns
        self.turns = turns
        cpus = sorted(os.sched_getaffinity(0))
        self.pinned = len(cpus) >= 2
        self.gateway_cpu, self.rest_cpu = (str(cpus[0]), str(cpus[1])) if self.pinned else ("", "")
        self.port = free_port()
        self.redis_port = free_port()
        self.redis_url = f"redis://127.0.0.1:{self.redis_port}/0"
        self.sqlite = work / "memory.db"
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
            status, _, body = request(
                f"http://127.0.0.1:{UPSTREAM_PORT}/v1/chat/completions", method="POST", body=b"{}"
            )
            check(
                status == 200 and b"chatcmpl-mock" in body, f"port {UPSTREAM_PORT} is taken by something else"
            )
            self.upstream = f"an nginx already on {UPSTREAM_PORT}, not started here, not pinned"
            return
        Path("/tmp/gateway-bench-nginx").mkdir(exist_ok=True)
        conf = HERE / "upstream.nginx.conf"
        directives = f"pid {self.work}/nginx.pid; error_log {self.work}/nginx.log;"
        subprocess.run(
            self.pin(["nginx", "-p", str(self.work), "-c", str(conf), "-g", directives], self.rest_cpu),
            check=True,
        )
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

    def env(self) -> dict[str, str]:
        env = {**os.environ, "BENCH_REDIS_URL": self.redis_url, "BENCH_SQLITE_PATH": str(self.sqlite)}
        if self.tree is not None:
            env["PYTHONPATH"] = str(self.tree)
        return env

    @contextlib.contextmanager
    def gateway(self, setup: Setup) -> Iterator[int]:
        """A fresh store and `gateway serve` for `setup`, listening in every process; yields its pid."""
        for path in self.work.glob("memory.db*"):
            path.unlink()
        with redis.Redis.from_url(self.redis_url) as client:
            client.flushall()
        command = [sys.executable, "-m", "gateway", "serve", "--config", str(HERE / setup.config),
                   "--host", "127.0.0.1", "--port", str(self.port)]  # fmt: skip
        if setup.workers > 1:
            command += ["--workers", str(setup.workers)]
        with open(self.work / f"gateway-{setup.name}.log", "wb") as log:
            server = subprocess.Popen(
                self.pin(command, self.gateway_cpu),
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env(),
                cwd=self.tree,
            )
        try:
            wait_until(lambda: listening(self.port) == setup.workers, 120, f"{setup.name}: the gateway did not listen",
                       alive=server)  # fmt: skip
            yield server.pid
        finally:
            workers = descendants(server.pid)[1:]
            server.terminate()
            server.wait(30)
            # the next setup's CPU must not share the core with a straggler
            wait_until(lambda: not any(map(running, workers)), 30,
                       f"{setup.name}: workers {workers} outlived their parent")  # fmt: skip

    def send(self, count: int, *, memory: bool) -> None:
        url = f"http://127.0.0.1:{self.port}/v1/chat/completions"
        command = [
            sys.executable,
            str(HERE / "send.py"),
            url,
            str(count),
            str(self.conns),
            *(["memory"] if memory else []),
        ]
        subprocess.run(self.pin(command, self.rest_cpu), check=True)

    def stored(self, memory_id: str) -> int | None:
        """Messages stored in a conversation, by GET /v1/memory/{id}; None when there is none."""
        status, _, body = request(f"http://127.0.0.1:{self.port}/v1/memory/{memory_id}")
        if status == 404:
            return None
        if status != 200:
            raise SystemExit(f"memory_cpu: GET /v1/memory/{memory_id}: {status} {body[:300]!r}")
        return len(json.loads(body)["messages"])

    def probe_turn(self) -> int:
        """Messages forwarded with one more turn on bench-0 (the x-memory-history header)."""
        status, headers, answer = request(
            f"http://127.0.0.1:{self.port}/v1/chat/completions", method="POST", body=body("mock-1", stream=False),
            headers={**HEADERS, "memoryId": "bench-0", **WINDOWS["memory"]},
        )  # fmt: skip
        if status != 200 or headers.get("x-memory-history") is None:
            raise SystemExit(f"memory_cpu: probe turn: {status} {answer[:300]!r}")
        return int(headers["x-memory-history"])

    def measure(self, setup: Setup) -> Reading:
        """Warm `setup`'s server up, check its store, count the CPU of the measured turns."""
        with self.gateway(setup) as pid, redis.Redis.from_url(self.redis_url) as client:
            self.send(PLAIN_WARMUP, memory=False)
            if setup.memory:
                self.send(MEMORY_WARMUP * self.conns, memory=True)
                check(self.stored("bench-0") == 2 * MEMORY_WARMUP, f"{setup.name}: warm-up turns not stored")
            tree = descendants(pid)
            if setup.workers > 1:
                check(
                    len(tree) > setup.workers, f"{setup.name}: no {setup.workers} workers under {pid}: {tree}"
                )
            assert self.redis_process is not None, "start_redis first"
            redis_pid = self.redis_process.pid
            commands = int(client.info("stats")["total_commands_processed"])
            gateway_before, redis_before = cpu_ns(tree), cpu_ns(descendants(redis_pid))
            started = time.monotonic_ns()
            self.send(self.turns, memory=setup.memory)
            wall_ns = time.monotonic_ns() - started
            gateway_ns = spent(gateway_before, cpu_ns(tree))
            redis_ns = spent(redis_before, cpu_ns(descendants(redis_pid)))
            commands = int(client.info("stats")["total_commands_processed"]) - commands - 1  # less this INFO
            history = None
            if setup.memory:
                history = self.probe_turn()
                held = [self.stored(f"bench-{index}") for index in range(self.conns)]
                check(
                    held == [CAP] * self.conns, f"{setup.name}: conversations hold {held} messages, not {CAP}"
                )
            else:
                check(self.stored("bench-0") is None, f"{setup.name}: memory off stored a conversation")
        return Reading(setup.name, gateway_ns, redis_ns, commands, self.turns, history, wall_ns)


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
    root = HERE.parent
    commit = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    dirty = subprocess.run(
        ["git", "-C", str(root), "status", "--porcelain", "gateway"], capture_output=True, text=True
    )
    return f"{commit.stdout.strip()}{' with uncommitted changes in gateway/' if dirty.stdout.strip() else ''}"


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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--turns", type=int, default=3000, help="measured requests a setup and round")
    parser.add_argument("--conns", type=int, default=8, help="at a time, one conversation each")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--only", default="", help="comma-separated setups: " + ", ".join(s.name for s in SETUPS)
    )
    parser.add_argument("--tree", type=Path, help="a source tree whose gateway package to run")
    args = parser.parse_args(argv)
    wanted = args.only.split(",") if args.only else [s.name for s in SETUPS]
    if unknown := set(wanted) - {s.name for s in SETUPS}:
        parser.error(f"unknown setups: {', '.join(sorted(unknown))}")
    setups = [s for s in SETUPS if s.name in wanted]
    by_name = {s.name: s for s in setups}
    with bench_lock(), tempfile.TemporaryDirectory(prefix="gateway-memory-cpu.") as tmp:
        bench = Bench(
            Path(tmp), tree=args.tree.resolve() if args.tree else None, conns=args.conns, turns=args.turns
        )
        started = f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, load {os.getloadavg()[0]:.2f}"
        bench.start_upstream()
        bench.start_redis()
        readings = []
        try:
            for name in run_order([s.name for s in setups], args.rounds):
                reading = bench.measure(by_name[name])
                readings.append(reading)
                print(
                    f"{name:<10} gateway {reading.gateway_ns / reading.turns / 1000:7.1f} µs/turn  "
                    f"redis-server {reading.redis_ns / reading.turns / 1000:6.1f} µs/turn  "
                    f"redis commands/turn {reading.redis_commands / reading.turns:4.1f}  history {reading.history}  "
                    f"gateway busy {reading.gateway_ns / reading.wall_ns:4.0%} of {reading.wall_ns / 1e9:.1f} s",
                    flush=True,
                )
        finally:
            bench.stop_redis()
            bench.stop_upstream()
    pinning = (
        f"gateway on CPU {bench.gateway_cpu}, send.py and redis-server on CPU {bench.rest_cpu}, upstream: {bench.upstream}"
        if bench.pinned else "not pinned (one CPU)"
    )  # fmt: skip
    print(f"\n# {started} to {datetime.datetime.now(datetime.UTC):%H:%M} UTC, load {os.getloadavg()[0]:.2f}; "
          f"code: {code_of(bench.tree)}")  # fmt: skip
    print(f"# {os.cpu_count()} CPUs, {pinning}; {args.turns:,} turns at {args.conns} connections a setup, "
          f"{args.rounds} rounds (forward, backward)\n")  # fmt: skip
    print(render(readings, setups))
    return 0


if __name__ == "__main__":
    sys.exit(main())
