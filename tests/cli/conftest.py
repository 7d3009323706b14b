"""Fixtures of the command line's tests: a config whose routes answer slowly, processes killed at the end."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.processes import stopped_at_exit


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
    """A list to add `gateway serve` processes to; those still running at the end are killed."""
    with stopped_at_exit() as started:
        yield started
