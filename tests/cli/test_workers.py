"""`serve --workers` (gateway.cli.workers): workers share the port, stop with their parent, are replaced when they die, and the parent gives up on workers that cannot start."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import openai

from gateway.cli.workers import describe_exit, restart_delay
from tests.support.fakes import FakeUpstream, Step, chat_completion
from tests.support.processes import free_port, spawn_gateway, wait_ready
from tests.support.serve import (
    listening,
    needs_ss,
    read_lines_until,
    ss,
    wait_until_not_listening,
    worker_pids,
)


async def test_workers_share_the_port_and_stop_on_sigterm(slow_config: Path, processes: list) -> None:
    port = free_port()
    process = spawn_gateway(slow_config, port, "--workers", "2")
    processes.append(process)
    await wait_ready(port, process)
    async with openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0) as client:
        assert [m.id for m in (await client.models.list()).data] == ["slow", "slow-stream"]
    workers = worker_pids(process.pid)
    assert len(workers) == 2
    process.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(process.wait, 20) == 0
    for worker in workers:
        assert not Path(f"/proc/{worker}").exists() or "zombie" in Path(f"/proc/{worker}/status").read_text()


async def test_workers_stop_when_their_parent_is_killed(slow_config: Path, processes: list) -> None:
    """A parent killed outright (kill -9, the OOM killer) must not leave workers serving the port."""
    port = free_port()
    process = spawn_gateway(slow_config, port, "--workers", "2")
    processes.append(process)
    await wait_ready(port, process)
    workers = worker_pids(process.pid)
    assert len(workers) == 2
    process.kill()
    process.wait()

    def gone(pid: int) -> bool:
        try:
            return "zombie" in Path(f"/proc/{pid}/status").read_text()
        except FileNotFoundError:
            return True

    def wait_gone(seconds: float) -> list[int]:
        deadline = time.monotonic() + seconds
        while (left := [pid for pid in workers if not gone(pid)]) and time.monotonic() < deadline:
            time.sleep(0.1)
        return left

    assert await asyncio.to_thread(wait_gone, 20) == []


async def healthz_served_by(port: int) -> int:
    """GET /healthz on a new connection; the pid of the process that answered it."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: gateway\r\n\r\n")
        assert (await reader.readline()).startswith(b"HTTP/1.1 200")
        client_port = writer.get_extra_info("sockname")[1]
        server_side = ss("state", "established", f"( sport = :{port} and dport = :{client_port} )")
        owner = re.search(r"pid=(\d+)", server_side)
        assert owner, server_side
        return int(owner.group(1))
    finally:
        writer.close()


async def wait_for_new_worker(process: subprocess.Popen[bytes], port: int, old: set[int]) -> int:
    """The pid of a worker not in `old` once it listens on `port`."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert process.poll() is None
        listening = ss("-l", f"sport = :{port}")
        for worker in worker_pids(process.pid) - old:
            if f"pid={worker}," in listening:
                return worker
        await asyncio.sleep(0.1)
    raise AssertionError("no new worker took the place of the dead one")


@needs_ss
async def test_workers_replace_a_killed_worker(tmp_path: Path, upstream: FakeUpstream, processes: list) -> None:
    answer = asyncio.Event()
    upstream.then(Step(body=chat_completion(), gate=answer))
    config = tmp_path / "g.yaml"
    config.write_text(f"routes:\n  up: {{provider: openai, baseUrl: '{upstream.url}', apiKey: sk-test}}\n")
    port = free_port()
    process = spawn_gateway(config, port, "--workers", "2")
    processes.append(process)
    await wait_ready(port, process)
    workers = worker_pids(process.pid)
    victim = min(workers)
    os.kill(victim, signal.SIGKILL)
    replacement = await wait_for_new_worker(process, port, workers)
    assert worker_pids(process.pid) == workers - {victim} | {replacement}
    # The port's connections are spread over the workers by a hash, so try until one lands on it.
    for _ in range(64):
        if await healthz_served_by(port) == replacement:
            break
    else:
        raise AssertionError(f"worker {replacement} served none of 64 connections")
    async with openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0) as client:
        pending = asyncio.create_task(client.chat.completions.create(model="up", messages=[{"role": "user", "content": "hi"}]))
        await asyncio.wait_for(upstream.arrived.wait(), 30)  # the request is under way, held upstream
        process.send_signal(signal.SIGTERM)
        await asyncio.to_thread(wait_until_not_listening, port)  # every worker is stopping
        answer.set()
        assert (await pending).choices[0].message.content == "Hello from upstream"
    assert await asyncio.to_thread(process.wait, 20) == 0
    log = process.stdout.read().decode() if process.stdout else ""
    assert f"worker {victim} died (signal SIGKILL) after " in log
    assert "restarting it in 0.5s" in log


async def test_workers_that_keep_failing_to_start_make_serve_exit_1(slow_config: Path, processes: list) -> None:
    with socket.socket() as taken:  # bound without SO_REUSEPORT: no worker can listen beside it
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        process = spawn_gateway(slow_config, port, "--workers", "2")
        processes.append(process)
        out, _ = await asyncio.to_thread(process.communicate, timeout=60)
    assert process.returncode == 1
    log = out.decode()
    assert "died at start-up 4 times in a row (exit code 1); giving up" in log
    assert log.count("restarting it in") >= 3
    assert "address already in use" in log.lower()


def test_restart_delay_doubles_up_to_30_seconds() -> None:
    assert [restart_delay(deaths) for deaths in range(1, 9)] == [0.5, 1, 2, 4, 8, 16, 30, 30]


def test_describe_exit_names_the_signal() -> None:
    assert describe_exit(3) == "exit code 3"
    assert describe_exit(-signal.SIGKILL) == "signal SIGKILL"


def test_a_worker_killed_by_a_signal_never_counts_as_a_failed_start() -> None:
    """A request that crashes workers (OOM, a segfault) must not make the parent give up on healthy ones."""
    from types import SimpleNamespace

    from gateway.cli.workers import MAX_STARTUP_FAILURES, _replace_dead_worker, _Slot

    def died(exitcode: int) -> _Slot:
        return _Slot(SimpleNamespace(pid=1, exitcode=exitcode), started_at=0.0)  # type: ignore[arg-type]

    slot = died(-signal.SIGKILL)
    for _ in range(MAX_STARTUP_FAILURES * 2):
        assert _replace_dead_worker(slot, now=1.0)
        slot.process = SimpleNamespace(pid=2, exitcode=-signal.SIGKILL)  # type: ignore[assignment]
    slot = died(1)
    results = []
    for _ in range(MAX_STARTUP_FAILURES):
        results.append(_replace_dead_worker(slot, now=1.0))
        slot.process = SimpleNamespace(pid=2, exitcode=1)  # type: ignore[assignment]
    assert results == [True] * (MAX_STARTUP_FAILURES - 1) + [False]


async def test_workers_log_in_the_format_and_from_the_level_given(tmp_path: Path, processes: list) -> None:
    config = tmp_path / "open.yaml"
    config.write_text("routes:\n  m: {provider: mock}\n")  # no auth.keys: every worker warns at start
    process = spawn_gateway(config, free_port(), "--workers", "2", "--log-format", "text", "--log-level", "warning")
    processes.append(process)
    assert process.stdout is not None

    def two_warnings(lines: list[str]) -> bool:
        return sum("auth.keys is empty" in line for line in lines) == 2

    lines = await asyncio.wait_for(asyncio.to_thread(read_lines_until, process.stdout, two_warnings), 60)
    warnings = [line for line in lines if "auth.keys is empty" in line]
    assert all(re.fullmatch(r"\S+Z WARNING gateway auth\.keys is empty: .*", line) for line in warnings), warnings
    # Each worker says it is listening (at info) before it builds the app that warns: not shown at warning.
    assert not listening(lines), lines

