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
        "off", "sqlite", "redis", "redis", "sqlite", "off", "off", "sqlite", "redis",
    ]  # fmt: skip


def test_the_table_gives_each_setup_its_mean_range_and_ratio_to_memory_off(
    bench: tuple[ModuleType, ModuleType],
) -> None:
    memory_cpu, _ = bench
    setups = {s.name: s for s in memory_cpu.SETUPS}

    def reading(name: str, gateway_us: int, *, redis_us: int = 0, commands: int = 0) -> object:
        turns = 1000
        history = 22 if setups[name].memory else None
        return memory_cpu.Reading(name, gateway_us * 1000 * turns, redis_us * 1000 * turns, commands * turns,
                                  turns, history, wall_ns=10**9)  # fmt: skip

    readings = [reading("off", 120), reading("redis", 640, redis_us=70, commands=20), reading("off", 130),
                reading("redis", 660, redis_us=60, commands=20)]  # fmt: skip
    table = memory_cpu.render(readings, [setups["off"], setups["sqlite"], setups["redis"]]).splitlines()
    assert (
        table[2]
        == "| memory off (memory.yaml, no memoryId) | 125 µs (120\N{EN DASH}130) | 1.00 | 0 µs | 0.0 |  |"
    )
    assert table[3] == "| Redis, one process | 650 µs (640\N{EN DASH}660) | 5.20 | 65 µs | 20.0 | 22 |"
    assert len(table) == 4  # a setup not run has no row


def test_a_process_tree_is_found_and_its_threads_cpu_read(bench: tuple[ModuleType, ModuleType]) -> None:
    _, proc_cpu = bench
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        assert child.pid in proc_cpu.descendants(os.getpid())
        assert proc_cpu.running(child.pid)
        before = proc_cpu.cpu_ns([os.getpid(), child.pid])
        assert (os.getpid(), os.getpid()) in before and (child.pid, child.pid) in before
        sum(range(200_000))  # some CPU for this thread, however long it takes
        assert proc_cpu.spent(before, proc_cpu.cpu_ns([os.getpid(), child.pid])) > 0
    finally:
        child.communicate(b"")
    assert not proc_cpu.running(child.pid)
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
