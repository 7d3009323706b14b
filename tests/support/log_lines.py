"""Log lines in tests: the time every line starts with, and a `gateway serve` that logs JSON into a file."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ISO_UTC = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def start_logging_gateway(config: Path, port: int, log_path: Path) -> subprocess.Popen[bytes]:
    """`gateway serve` logging JSON from debug up, its stdout and stderr both into `log_path`."""
    with log_path.open("wb") as log_file:
        return subprocess.Popen(
            [sys.executable, "-m", "gateway", "serve", "--config", str(config), "--host", "127.0.0.1",
             "--port", str(port), "--log-format", "json", "--log-level", "debug"],
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
