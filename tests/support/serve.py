"""A `gateway serve` process seen from outside: its workers, its sockets, its log lines."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

import pytest

from tests.support.processes import listeners


def worker_pids(parent: int) -> set[int]:
    """The gateway workers of the `serve --workers` parent `parent` (not multiprocessing's helper process)."""
    found: set[int] = set()
    for task in Path(f"/proc/{parent}/task").iterdir():
        found |= {int(p) for p in (task / "children").read_text().split()}
    return {child for child in found if "spawn_main" in Path(f"/proc/{child}/cmdline").read_text()}


def ss(*query: str) -> str:
    """`ss` lines (no header) for TCP sockets matching `query`, with owning processes."""
    return subprocess.run(["ss", "-tnpH", *query], capture_output=True, text=True, check=True, timeout=10).stdout


# Locally a missing `ss` skips; under CI (which installs iproute2) the test runs and fails without it.
needs_ss = pytest.mark.skipif(
    shutil.which("ss") is None and os.environ.get("CI") != "true", reason="needs ss (Debian: iproute2) to read sockets"
)


def read_lines_until(stream: IO[bytes], done: Callable[[list[str]], bool]) -> list[str]:
    """Lines from `stream` until `done(lines)`; fails if the stream ends first."""
    lines: list[str] = []
    while not done(lines):
        line = stream.readline()
        assert line, f"output ended before expected: {lines}"
        lines.append(line.decode().rstrip("\r\n"))
    return lines


def listening(lines: list[str]) -> bool:
    """Whether a gateway process said it listens in `lines`."""
    return any(" listening on " in line for line in lines)


def wait_until_not_listening(port: int, seconds: float = 30) -> None:
    """Return once nothing listens on `port` (a stopping gateway closes its sockets before it drains); fail after `seconds`."""
    deadline = time.monotonic() + seconds
    while listeners(port):
        assert time.monotonic() < deadline, f"still listening on {port} after {seconds}s"
        time.sleep(0.05)
