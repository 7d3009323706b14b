"""Real server binaries started by the tests on free loopback ports.

Locally a missing binary skips the test with the reason; under CI (CI=true) it fails.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def require_binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        message = f"{name} is not installed (Debian: apt-get install {name})"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{message}; CI must install it", pytrace=False)
        pytest.skip(message)
    return path


def wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited early with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listening on {port} after {timeout}s")


@contextmanager
def redis_server(workdir: Path) -> Iterator[str]:
    """A throwaway redis-server; yields its URL."""
    binary = require_binary("redis-server")
    port = free_port()
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", str(workdir), "--protected-mode", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, process)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.terminate()
        process.wait(10)


async def flush_redis(url: str) -> None:
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(url)
    await client.flushall()
    await client.aclose()
