"""The machinery of the benchmarks that compare the gateway's CPU per request across setups in one run.

bench/memory_cpu.py (memory turns on SQLite and Redis) and bench/limits_cpu.py (limits off,
local, on Redis) are each a list of setups and the checks of their own; this runs them. Every
setup is a `gateway serve` of its own, all started at once, each with its own store (an SQLite
file, a database of one redis-server). Each gets bench/send.py's load: `--turns` requests,
`--conns` at a time. The requests are sent in `--rounds` short segments that go through the
setups forward, then backward (ABC CBA ABC ..), so that a neighbour's burst of load or a drift
falls on all alike.

CPU is the on-CPU time of every thread of the gateway's process tree (`--workers`: the parent
and its workers) over a segment (bench/proc_cpu.py), divided by its requests; the table gives
the median of a setup's segments, and its ratio to the setup named `off` as the median over
rounds of the two segments' ratio. redis-server's CPU is taken apart, with the commands it
served per request. "Neighbours on its CPU" is the share of a segment's time the gateway's CPU
ran other processes (/proc/stat less the gateway's own): other work on the machine, which moves
the gateway's CPU per request either way (cold caches; requests that queue while it waits are
served together).

Every gateway of a run has the same PYTHONHASHSEED (drawn for the run, or `--hash-seed`): a process's
string hashes place its dicts' and sets' entries, and a seed each moved one setup's CPU per
request against another's by a few per cent from run to run (limits local against off, one
tree: 1.11, 1.11, 1.11 at one seed, 1.13, 1.13, 1.14 at another, 1.13-1.21 in seven runs with a
seed each); the seed varies from run to run instead, and is printed.

The gateways are pinned to the first CPU of this process's affinity, the rest (nginx as the
upstream, send.py, redis-server) to the second, when there are two. Takes the lock
bench/instructions.sh takes (both need nginx on 18080). `--tree DIR` runs the gateway package
in DIR (`git archive HEAD gateway | tar -x -C DIR` measures a commit whatever the working tree
holds). Needs nginx with the echo module and redis-server.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import fcntl
import os
import random
import signal
import socket
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
from cpu_table import Reading, Setup, Words, render, run_order
from proc_cpu import busy_ns, cpu_ns, descendants, listening, running, spent

HERE = Path(__file__).resolve().parent
LOCK = "/tmp/gateway-instructions.lock"
UPSTREAM_PORT = 18080
PLAIN_WARMUP = 200
HEADERS = {"Authorization": "Bearer sk-bench", "Content-Type": "application/json"}


@dataclass(frozen=True, slots=True)
class Gateway:
    """A running `gateway serve` of one setup, and the Redis database that is its own."""

    setup: Setup
    process: subprocess.Popen[bytes]
    port: int
    redis_url: str = ""

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"


class Bench:
    """The upstream, redis-server and the gateways of one run, with the CPUs they are pinned to.

    A benchmark subclasses it for checks of its own: `warm` (before the measured segments) and
    `note` (after them, the table's last column).
    """

    def __init__(self, work: Path, *, tree: Path | None, conns: int, hash_seed: int) -> None:
        self.work = work
        self.tree = tree
        self.conns = conns
        self.hash_seed = hash_seed  # every gateway's PYTHONHASHSEED in this run
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
        env["PYTHONHASHSEED"] = str(self.hash_seed)
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
            yield Gateway(setup, process, port, self.redis_url(index))
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
        kept = Path(tempfile.mkdtemp(prefix=f"{script()}-hung-{setup.name}."))
        log = self.work / f"gateway-{setup.name}.log"
        if log.exists():
            (kept / log.name).write_bytes(log.read_bytes())
        for pid in pids:
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                dump = subprocess.run(["py-spy", "dump", "--pid", str(pid)], capture_output=True, timeout=30)
                (kept / f"py-spy-{pid}.txt").write_bytes(dump.stdout + dump.stderr)
        print(f"{script()}: {setup.name}: the gateway did not stop within 30 s of SIGTERM; killed (kept: {kept})",
              file=sys.stderr)  # fmt: skip

    def send(self, gateway: Gateway, count: int, *, memory: bool) -> None:
        flags = ["memory"] if memory else []
        command = [sys.executable, str(HERE / "send.py"), gateway.url("/v1/chat/completions"), str(count),
                   str(self.conns), *flags]  # fmt: skip
        subprocess.run(self.pin(command, self.rest_cpu), check=True)

    def warm(self, gateway: Gateway) -> None:
        """Plain requests before the measured ones; a `--workers` gateway must have its workers."""
        self.send(gateway, PLAIN_WARMUP, memory=False)
        if gateway.setup.workers > 1:
            tree = descendants(gateway.process.pid)
            check(
                len(tree) > gateway.setup.workers,
                f"{gateway.setup.name}: no workers under the gateway: {tree}",
            )

    def note(self, gateway: Gateway) -> object:
        """The table's last column for `gateway`, read after the measured segments ("" for none)."""
        return ""

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


def script() -> str:
    """The benchmark's name for its messages: the script that runs."""
    return Path(sys.argv[0]).stem


def check(condition: bool, failure: str) -> None:
    if not condition:
        raise SystemExit(f"{script()}: {failure}")


def wait_until(
    ready: Callable[[], bool], seconds: float, failure: str, *, alive: subprocess.Popen[bytes] | None = None
) -> None:
    """Poll `ready` until it holds; SystemExit with `failure` after `seconds` or when `alive` exits."""
    deadline = time.monotonic() + seconds
    while not ready():
        if time.monotonic() > deadline or (alive is not None and alive.poll() is not None):
            raise SystemExit(f"{script()}: {failure}")
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
            print(f"{script()}: waiting for another benchmark to finish", file=sys.stderr)
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def measure(
    bench: Bench, setups: Sequence[Setup], *, turns: int, rounds: int
) -> tuple[list[Reading], dict[str, object]]:
    """Start every setup's gateway, warm each up, run the segments in order; (readings, the last column by setup)."""
    readings, notes = [], {}
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
                f"{name:<10} gateway {reading.gateway_ns / turns / 1000:7.1f} µs/request (neighbours "
                f"{reading.neighbours_ns / reading.wall_ns:4.0%} of its CPU), busy "
                f"{reading.gateway_ns / reading.wall_ns:4.0%} of {reading.wall_ns / 1e9:4.1f} s; redis-server "
                f"{reading.redis_ns / turns / 1000:6.1f} µs/request, {reading.redis_commands / turns:4.1f} commands/request",
                flush=True,
            )
        for gateway in gateways.values():
            notes[gateway.setup.name] = bench.note(gateway)
    return readings, notes


def run(
    make: Callable[..., Bench], setups: Sequence[Setup], *, doc: str, words: Words, argv: Sequence[str] | None
) -> int:
    """A benchmark's command line: `--turns`, `--conns`, `--rounds`, `--only`, `--tree`, `--hash-seed`; prints the run
    and its table.

    `make(work, tree=, conns=, hash_seed=)` makes the benchmark's Bench.
    """
    parser = argparse.ArgumentParser(description=doc.split("\n", 1)[0])
    parser.add_argument("--turns", type=int, default=3000, help="measured requests a setup, over all rounds")
    parser.add_argument("--conns", type=int, default=8, help="requests at a time")
    parser.add_argument("--rounds", type=int, default=10, help="segments a setup")
    parser.add_argument(
        "--only", default="", help="comma-separated setups: " + ", ".join(s.name for s in setups)
    )
    parser.add_argument("--tree", type=Path, help="a source tree whose gateway package to run")
    parser.add_argument(
        "--hash-seed", type=int, default=None, help="every gateway's PYTHONHASHSEED (default: one drawn for the run)"
    )
    args = parser.parse_args(argv)
    hash_seed = args.hash_seed if args.hash_seed is not None else random.randrange(2**32)
    wanted = args.only.split(",") if args.only else [s.name for s in setups]
    if unknown := set(wanted) - {s.name for s in setups}:
        parser.error(f"unknown setups: {', '.join(sorted(unknown))}")
    segment = args.turns // args.rounds // args.conns * args.conns  # send.py sends whole shares a connection
    if segment < args.conns:
        parser.error(
            f"--turns {args.turns} is less than a request a connection in each of {args.rounds} rounds"
        )
    chosen = [s for s in setups if s.name in wanted]
    with bench_lock(), tempfile.TemporaryDirectory(prefix=f"gateway-{script()}.") as tmp:
        tree = args.tree.resolve() if args.tree else None
        bench = make(Path(tmp), tree=tree, conns=args.conns, hash_seed=hash_seed)
        started = f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, load {os.getloadavg()[0]:.2f}"
        bench.start_upstream()
        bench.start_redis()
        try:
            readings, notes = measure(bench, chosen, turns=segment, rounds=args.rounds)
        finally:
            bench.stop_redis()
            bench.stop_upstream()
    pinning = (
        f"gateways on CPU {bench.gateway_cpu}; send.py and redis-server on CPU {bench.rest_cpu}"
        if bench.pinned else "nothing pinned (one CPU)"
    )  # fmt: skip
    ended = f"{datetime.datetime.now(datetime.UTC):%H:%M} UTC, load {os.getloadavg()[0]:.2f}"
    print(f"\n# {started} to {ended}; code: {code_of(bench.tree)}")
    print(f"# {os.cpu_count()} CPUs, {pinning}; upstream: {bench.upstream}; PYTHONHASHSEED {hash_seed} for every gateway")
    print(f"# {segment * args.rounds:,} {words.request}s a setup at {args.conns} connections, in {args.rounds} segments "
          f"of {segment:,} (setups forward, then backward)\n")  # fmt: skip
    print(render(readings, chosen, notes, words=words))
    return 0
