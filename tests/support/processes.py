"""Real `gateway serve` processes for tests: start one, wait until it listens, read its log lines."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The start of a probe a test runs with `python -c`: every host the process looks up or connects
# to from then on, in `hosts`.
HOSTS_AUDIT = """
import sys


hosts = set()


def audit(event, args):
    if event == "socket.getaddrinfo":
        hosts.add(str(args[0]))
    elif event == "socket.connect" and isinstance(args[1], tuple):
        hosts.add(str(args[1][0]))


sys.addaudithook(audit)
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def spawn_gateway(
    config: Path,
    port: int | None,
    *extra: str,
    output: int | None = None,
    preexec_fn: Callable[[], None] | None = None,
) -> subprocess.Popen[bytes]:
    """`gateway serve` with stdout and stderr into one pipe, or into the file descriptor `output`.

    On 127.0.0.1:`port`; with `port` None, where the config says (no --host, no --port).
    """
    address = [] if port is None else ["--host", "127.0.0.1", "--port", str(port)]
    return subprocess.Popen(
        [sys.executable, "-m", "gateway", "serve", "--config", str(config), *address, *extra],
        stdout=subprocess.PIPE if output is None else output,
        stderr=subprocess.STDOUT,
        preexec_fn=preexec_fn,
    )


async def wait_ready(port: int, process: subprocess.Popen[bytes]) -> None:
    """Return once `port` takes connections; fail if the process ends first or takes 60 s (a loaded machine's start)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stdout.read() if process.stdout else ""
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return
        except OSError:
            await asyncio.sleep(0.1)
    raise AssertionError("gateway did not start")


def listeners(port: int) -> int:
    """How many sockets listen on `port` on IPv4 (Linux): one per worker, which bind it with SO_REUSEPORT."""
    with open("/proc/net/tcp") as table:
        rows = [line.split() for line in table.readlines()[1:]]
    return sum(1 for row in rows if row[3] == "0A" and int(row[1].rpartition(":")[2], 16) == port)  # 0A: LISTEN


def wait_for_listeners(port: int, count: int, process: subprocess.Popen[bytes], timeout: float = 60) -> None:
    """Return once `count` sockets listen on `port`; fail if the process ends first or `timeout` seconds pass."""
    deadline = time.monotonic() + timeout
    while listeners(port) < count:
        assert process.poll() is None, f"the gateway exited with {process.returncode}"
        assert time.monotonic() < deadline, f"not {count} listening on {port} within {timeout}s"
        time.sleep(0.05)


@contextmanager
def stopped_at_exit() -> Iterator[list[subprocess.Popen[bytes]]]:
    """A list to add processes to; those still running at the end are killed."""
    started: list[subprocess.Popen[bytes]] = []
    try:
        yield started
    finally:
        for process in started:
            if process.poll() is None:
                process.kill()
                process.wait()


class LogLines:
    """Every line a gateway process writes to its stdout pipe, read on a thread as it comes.

    JSON lines are kept parsed (`records`), the rest as text (`text`). `wait_for` polls until a
    record matches, with a deadline.
    """

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stdout is not None
        self.text: list[str] = []
        self.records: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._read, args=(process.stdout,), daemon=True)
        self._thread.start()

    def _read(self, stream: Any) -> None:
        for raw in stream:
            line = raw.decode(errors="replace").rstrip("\n")
            try:
                record = json.loads(line)
            except ValueError:
                record = None
            with self._lock:
                self.text.append(line)
                if isinstance(record, dict):
                    self.records.append(record)

    def matching(self, message: str | re.Pattern[str] = "", **fields: Any) -> list[dict[str, Any]]:
        """The records whose message contains (or matches) `message` and whose fields equal `fields`."""
        with self._lock:
            records = list(self.records)
        found = []
        for record in records:
            text = str(record.get("message", ""))
            if (message.search(text) if isinstance(message, re.Pattern) else message in text) and all(
                record.get(key) == value for key, value in fields.items()
            ):
                found.append(record)
        return found

    async def wait_for(self, message: str | re.Pattern[str] = "", *, count: int = 1, seconds: float = 30, **fields: Any) -> list[dict[str, Any]]:
        """The records `matching`, once there are `count` of them; fails after `seconds`."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            found = self.matching(message, **fields)
            if len(found) >= count:
                return found
            await asyncio.sleep(0.05)
        with self._lock:
            tail = "\n".join(self.text[-40:])
        raise AssertionError(f"no {count} log lines with {message!r} {fields} within {seconds}s; last lines:\n{tail}")


@dataclass
class Gateway:
    """A running `gateway serve`: its process, port and log lines."""

    process: subprocess.Popen[bytes]
    port: int
    logs: LogLines


@asynccontextmanager
async def running_gateway(
    config: Path, *extra: str, preexec_fn: Callable[[], None] | None = None
) -> AsyncIterator[Gateway]:
    """`gateway serve` of `config` on a free port, once it takes connections; killed at the end if still running."""
    port = free_port()
    with stopped_at_exit() as processes:
        process = spawn_gateway(config, port, *extra, preexec_fn=preexec_fn)
        processes.append(process)
        logs = LogLines(process)
        await wait_ready(port, process)
        yield Gateway(process, port, logs)
