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


class RedisProcess:
    """A redis-server a test can kill and start again on the same port.

    With `durable`, every write is fsynced to an append-only file, so a restart keeps the data
    (lock keys and their expiry included): a blip. Without it, a restart comes back empty.
    """

    def __init__(self, workdir: Path, *, durable: bool = False) -> None:
        self.binary = require_binary("redis-server")
        self.workdir = workdir
        self.durable = durable
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        persistence = ["--appendonly", "yes", "--appendfsync", "always"] if self.durable else ["--appendonly", "no"]
        self.process = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", *persistence,
             "--dir", str(self.workdir), "--protected-mode", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for_port(self.port, self.process)

    def kill(self) -> None:
        """SIGKILL: no goodbye to clients, no save beyond what was already fsynced."""
        if self.process is not None:
            self.process.kill()
            self.process.wait(10)
            self.process = None

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(10)
            self.process = None


@contextmanager
def redis_server(workdir: Path, *, durable: bool = False) -> Iterator[RedisProcess]:
    """A throwaway redis-server on a free port, stopped on exit."""
    server = RedisProcess(workdir, durable=durable)
    server.start()
    try:
        yield server
    finally:
        server.stop()


async def flush_redis(url: str) -> None:
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(url)
    await client.flushall()
    await client.aclose()
