"""Start time and idle memory of `gateway serve` (issue 10: start <= 1 s, idle RSS <= 60 MB).

    python bench/startup.py [CONFIG ...]        default: configs/gateway.yaml bench/memory.yaml

For each config, a first start that is not counted, then ROUNDS (5): the seconds from the
process's launch until its port accepts a connection, the CPU seconds it had spent by then (the
steadier figure on a shared host), and its resident memory (VmRSS) one second after, idle; the
medians are printed. (tests/test_startup.py checks that nothing heavy is imported at start.)
Wall-clock time on a shared host: compare runs taken together, on a quiet machine.

Modules start from their compiled bytecode, as in an installed package or the image (pip
compiles at install): PYTHONDONTWRITEBYTECODE is dropped and the bytecode goes to a cache under
/tmp (PYTHONPYCACHEPREFIX), which the uncounted first start fills. Compiling the sources on
every start, as an editable install under PYTHONDONTWRITEBYTECODE=1 does, adds ~0.2 s here.
"""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parent.parent
DEFAULT_CONFIGS: Final = (ROOT / "configs" / "gateway.yaml", ROOT / "bench" / "memory.yaml")
ROUNDS: Final = int(os.environ.get("ROUNDS", "5"))
ENVIRONMENT: Final = {
    **{name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"},
    "PYTHONPYCACHEPREFIX": os.environ.get("PYTHONPYCACHEPREFIX", "/tmp/gateway-bench-pycache"),
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def one_start(config: Path) -> tuple[float, float, int]:
    """(seconds until the port accepts, CPU seconds spent by then, idle VmRSS in kB) of one `gateway serve`."""
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "gateway",
        "serve",
        "--config",
        str(config),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    with tempfile.TemporaryDirectory() as scratch:  # a memory store's file, if the config keeps one here
        began = time.monotonic()
        process = subprocess.Popen(
            command, cwd=scratch, env=ENVIRONMENT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            while True:
                if process.poll() is not None:
                    raise SystemExit(f"{config}: gateway exited with {process.returncode}")
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                    break
                except OSError:
                    time.sleep(0.002)
            started = time.monotonic() - began
            fields = Path(f"/proc/{process.pid}/stat").read_text().rpartition(")")[2].split()
            cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime
            time.sleep(1)
            status = Path(f"/proc/{process.pid}/status").read_text()
            rss_kb = int(status.split("VmRSS:")[1].split()[0])
        finally:
            process.terminate()
            process.wait(timeout=10)
    return started, cpu, rss_kb


def main(configs: list[Path]) -> None:
    print(f"| config | start, wall (s, median of {ROUNDS}) | start, CPU (s) | idle RSS (MB) |")
    print("|---|---|---|---|")
    for config in configs:
        one_start(config)  # fills the bytecode cache
        runs = [one_start(config) for _ in range(ROUNDS)]
        wall, cpu, rss = (statistics.median(run[i] for run in runs) for i in range(3))
        name = config.relative_to(ROOT) if config.is_relative_to(ROOT) else config
        print(f"| {name} | {wall:.3f} | {cpu:.3f} | {rss / 1024:.1f} |")


if __name__ == "__main__":
    main([Path(arg).resolve() for arg in sys.argv[1:]] or list(DEFAULT_CONFIGS))
