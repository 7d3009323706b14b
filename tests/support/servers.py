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

from tests.support.processes import free_port


def require_binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        message = f"{name} is not installed (Debian: apt-get install {name})"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{message}; CI must install it", pytrace=False)
        pytest.skip(message)
    return path


def wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float = 60) -> None:
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


class PrometheusError(RuntimeError):
    """Prometheus' HTTP API answered with an error (a bad query, say): its type and message."""


class PrometheusProcess:
    """A prometheus server on a free port, scraping `targets` (host:port) every `scrape_interval`.

    Its config and TSDB live in `workdir`; its log goes to `workdir/prometheus.log`.
    """

    def __init__(self, workdir: Path, targets: list[str], *, scrape_interval: str = "1s") -> None:
        self.binary = require_binary("prometheus")
        self.workdir = workdir
        self.targets = targets
        self.scrape_interval = scrape_interval
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = workdir / "prometheus.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        import json

        config = self.workdir / "prometheus.yml"
        # JSON is YAML, and needs no quoting rules of its own.
        config.write_text(json.dumps({
            "global": {"scrape_interval": self.scrape_interval, "scrape_timeout": self.scrape_interval},
            "scrape_configs": [{"job_name": "gateway", "static_configs": [{"targets": self.targets}]}],
        }))
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                [self.binary, f"--config.file={config}", f"--storage.tsdb.path={self.workdir / 'data'}",
                 f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        wait_for_port(self.port, self.process)
        self._wait_ready()

    def _wait_ready(self, timeout: float = 60) -> None:
        import urllib.request

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:  # 503 while the TSDB opens
                pass
            time.sleep(0.05)
        raise RuntimeError(f"prometheus not ready after {timeout}s: {self.log()}")

    def api(self, path: str, params: list[tuple[str, str]]) -> object:
        """GET /api/v1/`path`; returns the decoded `data`, or raises PrometheusError with Prometheus' message."""
        import json
        import urllib.error
        import urllib.parse
        import urllib.request

        url = f"{self.url}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                body = json.load(response)
        except urllib.error.HTTPError as exc:  # a bad query is a 400 with the same JSON shape
            body = json.load(exc)
        if body.get("status") != "success":
            raise PrometheusError(f"{body.get('errorType')}: {body.get('error')}")
        return body["data"]

    def query(self, expr: str) -> list[dict[str, object]]:
        """An instant query at now: one {"metric": labels, "value": [time, "text"]} per series."""
        data = self.api("query", [("query", expr)])
        assert isinstance(data, dict)
        if data["resultType"] == "vector":
            return list(data["result"])
        return [{"metric": {}, "value": data["result"]}]  # a scalar

    def query_range(self, expr: str, *, start: float, end: float, step: float = 1) -> list[dict[str, object]]:
        """A range query, as Grafana runs a panel: one {"metric": labels, "values": [[time, "text"], ...]} per series."""
        params = [("query", expr), ("start", str(start)), ("end", str(end)), ("step", str(step))]
        data = self.api("query_range", params)
        assert isinstance(data, dict)
        return list(data["result"])

    def series(self, selector: str, *, since_seconds: float = 300) -> list[dict[str, str]]:
        """The label sets of the series matching `selector` seen in the last `since_seconds`."""
        now = time.time()
        data = self.api("series", [("match[]", selector), ("start", str(now - since_seconds)), ("end", str(now))])
        assert isinstance(data, list)
        return data

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:] if self.log_path.exists() else ""

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(10)
            self.process = None


@contextmanager
def prometheus_server(workdir: Path, targets: list[str], *, scrape_interval: str = "1s") -> Iterator[PrometheusProcess]:
    """A throwaway prometheus scraping `targets`, stopped on exit."""
    server = PrometheusProcess(workdir, targets, scrape_interval=scrape_interval)
    server.start()
    try:
        yield server
    finally:
        server.stop()
