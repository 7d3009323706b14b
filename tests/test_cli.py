"""The command line: check-config output and exit codes; serve draining on SIGTERM; workers."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from gateway.cli import main


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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
    assert "routes.b.provider: must be one of openai, mock, got 'nope'" in err


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


def start_gateway(config: Path, port: int, *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "gateway", "serve", "--config", str(config), "--host", "127.0.0.1", "--port", str(port), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


async def wait_ready(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stdout.read() if process.stdout else ""
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return
        except OSError:
            await asyncio.sleep(0.1)
    raise AssertionError("gateway did not start")


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


def _children(pid: int) -> set[int]:
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        found |= {int(p) for p in (task / "children").read_text().split()}
    return found


async def test_workers_share_the_port_and_stop_on_sigterm(slow_config: Path, processes: list) -> None:
    port = free_port()
    process = start_gateway(slow_config, port, "--workers", "2")
    processes.append(process)
    await wait_ready(port, process)
    async with openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0) as client:
        assert [m.id for m in (await client.models.list()).data] == ["slow", "slow-stream"]
    workers = {child for child in _children(process.pid) if "spawn_main" in Path(f"/proc/{child}/cmdline").read_text()}
    assert len(workers) == 2
    process.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(process.wait, 20) == 0
    for worker in workers:
        assert not Path(f"/proc/{worker}").exists() or "zombie" in Path(f"/proc/{worker}/status").read_text()


def test_serve_rejects_a_bad_config(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("routes: {}\n")
    result = subprocess.run([sys.executable, "-m", "gateway", "serve", "--config", str(path)], capture_output=True, timeout=60)
    assert result.returncode == 2
    assert b"routes: must be a mapping with at least one route" in result.stderr


def test_python_dash_m_help() -> None:
    result = subprocess.run([sys.executable, "-m", "gateway", "--help"], capture_output=True, timeout=60, env={**os.environ})
    assert result.returncode == 0 and b"check-config" in result.stdout
