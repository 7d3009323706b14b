"""The command line: check-config output and exit codes; serve draining on SIGTERM; workers; settle-memory."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import openai
import pytest

from gateway.cli.main import build_parser, main
from gateway.cli.workers import describe_exit, restart_delay
from gateway.core.memory.entries import Entry
from gateway.memory.sqlite import SQLiteStore
from gateway.observe.logs import default_log_format
from tests.support.processes import free_port, start_gateway, wait_ready


def test_check_config_prints_resolved_tree(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "g.yaml"
    path.write_text(
        """
routes:
  smart:
    strategy: {mode: fallback, onStatusCodes: [429]}
    overrideParams: {temperature: 0.3}
    timeout: 12
    targets:
      - {name: primary, provider: openai, apiKey: sk-hidden, overrideParams: {model: gpt-4o}}
      - strategy: {mode: loadbalance}
        targets: [{provider: mock, weight: 3}, {provider: mock, weight: 1}]
"""
    )
    assert main(["check-config", str(path)]) == 0
    out = capsys.readouterr().out
    assert "sk-hidden" not in out
    lines = out.splitlines()
    assert lines[2] == "  - fallback smart: weight=1 onStatusCodes=[429]"
    assert lines[3].startswith("    - target primary: provider=openai weight=1 baseUrl=https://api.openai.com/v1 apiKey=set timeout=12s")
    assert "overrideParams={'temperature': 0.3, 'model': 'gpt-4o'}" in lines[3]
    assert lines[4] == "    - loadbalance smart.targets[1]: weight=1"
    assert lines[5].startswith("      - target smart.targets[1].targets[0]: provider=mock weight=3")
    assert "overrideParams={'temperature': 0.3}" in lines[5] and "timeout=12s" in lines[5]


def test_check_config_exits_2_with_every_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("routes:\n  a: {provider: mock, weight: -1}\n  b: {provider: nope}\n")
    with pytest.raises(SystemExit) as caught:
        main(["check-config", str(path)])
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert "routes.a.weight: must be >= 0, got -1" in err
    assert "routes.b.provider: unknown provider 'nope'" in err


def test_check_config_uses_env_default(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("GATEWAY_CONFIG", "configs/gateway.yaml")
    assert main(["check-config"]) == 0
    assert "configs/gateway.yaml: ok" in capsys.readouterr().out


@pytest.fixture
def slow_config(tmp_path: Path) -> Path:
    path = tmp_path / "slow.yaml"
    path.write_text(
        "routes:\n"
        "  slow: {provider: mock, mock: {latency: 2.0}}\n"
        "  slow-stream: {provider: mock, mock: {chunkSize: 4, chunkDelay: 0.05}}\n"
    )
    return path


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait()


async def test_sigterm_drains_in_flight_requests_and_streams(slow_config: Path, processes: list) -> None:
    port = free_port()
    process = start_gateway(slow_config, port)
    processes.append(process)
    await wait_ready(port, process)
    async with openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0) as client:
        messages = [{"role": "user", "content": "drain me"}]
        pending = asyncio.create_task(client.chat.completions.create(model="slow", messages=messages))
        stream = await client.chat.completions.create(model="slow-stream", messages=messages, stream=True)
        await asyncio.sleep(0.6)  # both requests are in flight by now
        process.send_signal(signal.SIGTERM)
        text = "".join([part.choices[0].delta.content or "" async for part in stream if part.choices])
        completion = await pending
    assert completion.choices[0].message.content.endswith('"drain me"')
    assert text.endswith('"drain me"')
    assert await asyncio.to_thread(process.wait, 20) == 0


def _workers(pid: int) -> set[int]:
    """The gateway worker processes the `serve --workers` parent `pid` has running now."""
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        found |= {int(p) for p in (task / "children").read_text().split()}
    return {child for child in found if "spawn_main" in Path(f"/proc/{child}/cmdline").read_text()}


async def test_workers_share_the_port_and_stop_on_sigterm(slow_config: Path, processes: list) -> None:
    port = free_port()
    process = start_gateway(slow_config, port, "--workers", "2")
    processes.append(process)
    await wait_ready(port, process)
    async with openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0) as client:
        assert [m.id for m in (await client.models.list()).data] == ["slow", "slow-stream"]
    workers = _workers(process.pid)
    assert len(workers) == 2
    process.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(process.wait, 20) == 0
    for worker in workers:
        assert not Path(f"/proc/{worker}").exists() or "zombie" in Path(f"/proc/{worker}/status").read_text()


async def test_workers_stop_when_their_parent_is_killed(slow_config: Path, processes: list) -> None:
    """A parent killed outright (kill -9, the OOM killer) must not leave workers serving the port."""
    port = free_port()
    process = start_gateway(slow_config, port, "--workers", "2")
    processes.append(process)
    await wait_ready(port, process)
    workers = _workers(process.pid)
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


def ss(*query: str) -> str:
    """`ss` lines (no header) for TCP sockets matching `query`, with owning processes."""
    return subprocess.run(["ss", "-tnpH", *query], capture_output=True, text=True, check=True, timeout=10).stdout


# Locally a missing `ss` skips; under CI (which installs iproute2) the test runs and fails without it.
needs_ss = pytest.mark.skipif(
    shutil.which("ss") is None and os.environ.get("CI") != "true", reason="needs ss (Debian: iproute2) to read sockets"
)


@needs_ss
async def test_serve_listens_with_the_configured_backlog(tmp_path: Path, processes: list) -> None:
    config = tmp_path / "g.yaml"
    config.write_text("server: {backlog: 77}\nroutes:\n  m: {provider: mock}\n")
    port = free_port()
    process = start_gateway(config, port)
    processes.append(process)
    await wait_ready(port, process)
    # For a listening socket Send-Q is the backlog the kernel was given (aiohttp's own default is 128).
    [line] = ss("-l", f"sport = :{port}").splitlines()
    assert line.split()[2] == "77"


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
        for worker in _workers(process.pid) - old:
            if f"pid={worker}," in listening:
                return worker
        await asyncio.sleep(0.1)
    raise AssertionError("no new worker took the place of the dead one")


@needs_ss
async def test_workers_replace_a_killed_worker(slow_config: Path, processes: list) -> None:
    port = free_port()
    process = start_gateway(slow_config, port, "--workers", "2")
    processes.append(process)
    await wait_ready(port, process)
    workers = _workers(process.pid)
    victim = min(workers)
    os.kill(victim, signal.SIGKILL)
    replacement = await wait_for_new_worker(process, port, workers)
    assert _workers(process.pid) == workers - {victim} | {replacement}
    # The port's connections are spread over the workers by a hash, so try until one lands on it.
    for _ in range(64):
        if await healthz_served_by(port) == replacement:
            break
    else:
        raise AssertionError(f"worker {replacement} served none of 64 connections")
    async with openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0) as client:
        pending = asyncio.create_task(client.chat.completions.create(model="slow", messages=[{"role": "user", "content": "hi"}]))
        await asyncio.sleep(0.5)  # the request is in flight by now
        process.send_signal(signal.SIGTERM)
        assert (await pending).choices[0].message.content
    assert await asyncio.to_thread(process.wait, 20) == 0
    log = process.stdout.read().decode() if process.stdout else ""
    assert f"worker {victim} died (signal SIGKILL) after " in log
    assert "restarting it in 0.5s" in log


async def test_workers_that_keep_failing_to_start_make_serve_exit_1(slow_config: Path, processes: list) -> None:
    with socket.socket() as taken:  # bound without SO_REUSEPORT: no worker can listen beside it
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        process = start_gateway(slow_config, port, "--workers", "2")
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


def test_serve_rejects_a_bad_config(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("routes: {}\n")
    result = subprocess.run([sys.executable, "-m", "gateway", "serve", "--config", str(path)], capture_output=True, timeout=60)
    assert result.returncode == 2
    assert b"routes: must be a mapping with at least one route" in result.stderr


def test_python_dash_m_help() -> None:
    result = subprocess.run([sys.executable, "-m", "gateway", "--help"], capture_output=True, timeout=60, env={**os.environ})
    assert result.returncode == 0 and b"check-config" in result.stdout


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


def test_serve_log_flags_accept_the_formats_and_levels() -> None:
    args = build_parser().parse_args(["serve", "--log-format", "text", "--log-level", "DEBUG"])
    assert (args.log_format, args.log_level) == ("text", "debug")
    args = build_parser().parse_args(["serve"])
    assert (args.log_format, args.log_level) == (None, "info")  # None: chosen by whether stderr is a terminal


@pytest.mark.parametrize(("flag", "value"), [("--log-format", "xml"), ("--log-level", "trace"), ("--log-level", "")])
def test_serve_log_flags_refuse_other_values(flag: str, value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        build_parser().parse_args(["serve", flag, value])
    assert caught.value.code == 2
    assert f"argument {flag}: invalid choice" in capsys.readouterr().err


def test_default_log_format_is_text_on_a_terminal_and_json_otherwise(tmp_path: Path) -> None:
    leader, follower = os.openpty()
    with os.fdopen(follower, "w") as terminal, (tmp_path / "log").open("w") as file:
        assert default_log_format(terminal) == "text"
        assert default_log_format(file) == "json"
    os.close(leader)


def read_lines_until(stream: IO[bytes], done: Callable[[list[str]], bool]) -> list[str]:
    """Lines from `stream` until `done(lines)`; fails if the stream ends first."""
    lines: list[str] = []
    while not done(lines):
        line = stream.readline()
        assert line, f"output ended before expected: {lines}"
        lines.append(line.decode().rstrip("\r\n"))
    return lines


def listening(lines: list[str]) -> bool:
    return any(" listening on " in line for line in lines)


async def test_serve_logs_json_by_default_when_stderr_is_not_a_terminal(slow_config: Path, processes: list) -> None:
    process = start_gateway(slow_config, free_port())
    processes.append(process)
    assert process.stdout is not None
    lines = await asyncio.wait_for(asyncio.to_thread(read_lines_until, process.stdout, listening), 30)
    first = json.loads(lines[0])
    assert first["level"] == "info" and first["logger"] == "gateway" and " listening on " in first["message"]


async def test_serve_logs_text_by_default_on_a_terminal(slow_config: Path, processes: list) -> None:
    leader, follower = os.openpty()
    process = start_gateway(slow_config, free_port(), output=follower)
    processes.append(process)
    os.close(follower)
    with os.fdopen(leader, "rb", buffering=0) as terminal:
        lines = await asyncio.wait_for(asyncio.to_thread(read_lines_until, terminal, listening), 30)
    assert re.fullmatch(r"\S+Z INFO gateway gateway \d+ listening on 127\.0\.0\.1:\d+ with 2 routes from \S+/slow\.yaml", lines[0])


async def test_workers_log_in_the_format_and_from_the_level_given(tmp_path: Path, processes: list) -> None:
    config = tmp_path / "open.yaml"
    config.write_text("routes:\n  m: {provider: mock}\n")  # no auth.keys: every worker warns at start
    process = start_gateway(config, free_port(), "--workers", "2", "--log-format", "text", "--log-level", "warning")
    processes.append(process)
    assert process.stdout is not None

    def two_warnings(lines: list[str]) -> bool:
        return sum("auth.keys is empty" in line for line in lines) == 2

    lines = await asyncio.wait_for(asyncio.to_thread(read_lines_until, process.stdout, two_warnings), 60)
    warnings = [line for line in lines if "auth.keys is empty" in line]
    assert all(re.fullmatch(r"\S+Z WARNING gateway auth\.keys is empty: .*", line) for line in warnings), warnings
    # Each worker says it is listening (at info) before it builds the app that warns: not shown at warning.
    assert not listening(lines), lines


async def test_settle_memory_writes_each_conversation_row_as_its_messages_say(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A turn no longer moves its conversation's row; `settle-memory` writes the rows older gateways read alone."""
    path = tmp_path / "memory.db"
    store = SQLiteStore(str(path), ttl_seconds=3600, max_messages=40, lock_timeout=1)
    for step in range(3):
        turn = [Entry({"role": "user", "content": f"q{step}"}), Entry({"role": "assistant", "content": f"a{step}"})]
        await store.append(("t", "conv"), turn, system=None)
    await store.close()

    def row() -> tuple[int, int]:
        with sqlite3.connect(path) as db:
            first, last = db.execute("SELECT first_seq, last_seq FROM conversations").fetchone()
        return int(first), int(last)

    assert row() == (1, 2)  # as the first turn left it: the later ones were one insert each
    assert main(["settle-memory", str(path)]) == 0
    assert row() == (1, 6)
    assert "1 conversation rows settled" in capsys.readouterr().out
    assert main(["settle-memory", str(path)]) == 0
    assert "0 conversation rows settled" in capsys.readouterr().out


def test_settle_memory_refuses_a_missing_or_foreign_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.db"
    assert main(["settle-memory", str(missing)]) == 2
    assert not missing.exists()  # no empty store made where the operator meant an existing one
    foreign = tmp_path / "notes.txt"
    foreign.write_text("not a database " * 100)
    assert main(["settle-memory", str(foreign)]) == 1
    assert "cannot settle" in capsys.readouterr().err
    other = tmp_path / "other.db"  # a SQLite file of something else: left as it was
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE notes (body TEXT)")
    assert main(["settle-memory", str(other)]) == 1
    assert "not a gateway memory file" in capsys.readouterr().err
    with sqlite3.connect(other) as db:
        assert [name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")] == ["notes"]
