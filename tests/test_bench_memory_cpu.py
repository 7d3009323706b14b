"""bench/memory_cpu.py's pieces: the order of its runs, its table, and the /proc probes (bench/proc_cpu.py)."""

from __future__ import annotations

import importlib
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


@pytest.fixture(scope="module")
def bench() -> Iterator[tuple[ModuleType, ModuleType]]:
    """(memory_cpu, proc_cpu), imported as the script imports them: from bench/ on sys.path."""
    sys.path.insert(0, str(BENCH))
    try:
        yield importlib.import_module("memory_cpu"), importlib.import_module("proc_cpu")
    finally:
        sys.path.remove(str(BENCH))


def test_setups_run_forward_then_backward_so_drift_falls_on_all_alike(
    bench: tuple[ModuleType, ModuleType],
) -> None:
    memory_cpu, _ = bench
    assert memory_cpu.run_order(["off", "sqlite", "redis"], 3) == [
        (0, "off"), (0, "sqlite"), (0, "redis"), (1, "redis"), (1, "sqlite"), (1, "off"),
        (2, "off"), (2, "sqlite"), (2, "redis"),
    ]  # fmt: skip


def test_the_table_gives_each_setup_its_median_range_and_ratio_to_memory_off_in_the_same_round(
    bench: tuple[ModuleType, ModuleType],
) -> None:
    memory_cpu, _ = bench
    setups = {s.name: s for s in memory_cpu.SETUPS}

    def segment(
        index: int, name: str, us: int, *, redis_us: int = 0, commands: int = 0, turns: int = 1000
    ) -> object:
        return memory_cpu.Reading(index, name, us * 1000 * turns, redis_us * 1000 * turns, commands * turns,
                                  turns, wall_ns=10**9, neighbours_ns=us * 1000 * 1000)  # fmt: skip

    # round 1 runs slower throughout (a drift): its ratio is still 5
    readings = [segment(0, "off", 100, turns=3000), segment(0, "redis", 500, redis_us=70, commands=20),
                segment(1, "redis", 700, redis_us=60, commands=21), segment(1, "off", 140),
                segment(2, "off", 300), segment(2, "redis", 520, redis_us=65, commands=20)]  # fmt: skip
    table = memory_cpu.render(readings, [setups["off"], setups["sqlite"], setups["redis"]], {"redis": 22})
    rows = table.splitlines()
    # the median segment: round 2's, which a neighbour's burst raised to 300 µs, does not move it
    assert (
        rows[2]
        == "| memory off (memory.yaml, no memoryId) | 140 µs (100\N{EN DASH}300) | 1.00 | 14% | 0 µs | 0.0 |  |"
    )
    assert rows[3] == "| Redis, one process | 520 µs (500\N{EN DASH}700) | 5.00 | 52% | 65 µs | 20.3 | 22 |"
    assert len(rows) == 4  # a setup not run has no row


def test_a_process_tree_is_found_and_its_threads_cpu_read(bench: tuple[ModuleType, ModuleType]) -> None:
    _, proc_cpu = bench
    # a child that spends some CPU for each line it reads, then answers and waits for the next:
    # a thread's time is read as of when it last left the CPU, so it is read while the child waits
    work = "import sys\nfor line in sys.stdin:\n    sum(range(300_000))\n    print(line, end='', flush=True)"
    child = subprocess.Popen(
        [sys.executable, "-c", work], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdin is not None and child.stdout is not None
    try:
        assert child.pid in proc_cpu.descendants(os.getpid())
        assert proc_cpu.running(child.pid)
        before = proc_cpu.cpu_ns([os.getpid(), child.pid])
        assert (os.getpid(), os.getpid()) in before and (child.pid, child.pid) in before
        child.stdin.write("work\n")
        child.stdin.flush()
        assert child.stdout.readline() == "work\n"
        assert proc_cpu.spent(before, proc_cpu.cpu_ns([os.getpid(), child.pid])) > 0
    finally:
        child.communicate("")
    assert not proc_cpu.running(child.pid)
    assert proc_cpu.busy_ns(min(os.sched_getaffinity(0))) > 0
    with pytest.raises(SystemExit, match="ended between two readings"):
        proc_cpu.spent(before, proc_cpu.cpu_ns([os.getpid()]))


def test_every_socket_listening_on_a_port_is_counted(bench: tuple[ModuleType, ModuleType]) -> None:
    _, proc_cpu = bench
    sockets = [socket.socket() for _ in range(2)]
    try:
        for sock in sockets:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sockets[0].bind(("127.0.0.1", 0))
        port = sockets[0].getsockname()[1]
        assert proc_cpu.listening(port) == 0
        sockets[0].listen()
        sockets[1].bind(("127.0.0.1", port))
        sockets[1].listen()
        assert proc_cpu.listening(port) == 2  # as a `--workers 2` gateway listens
    finally:
        for sock in sockets:
            sock.close()
