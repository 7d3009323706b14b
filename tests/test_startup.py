"""A gateway on its default config starts light: nothing heavy imported before a request needs it."""

from __future__ import annotations

import subprocess
import sys
import urllib.request
from pathlib import Path

from tests.support.servers import free_port, wait_for_port

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("litellm", "tiktoken", "openai", "redis", "numpy")  # pydantic validates the config at start

# Serves the default config and reports which heavy modules the start-up imported; the test
# then reads the idle process's resident memory.
PROBE = """
import asyncio, sys
from aiohttp import web
from gateway.config.loader import load_config
from gateway.server.app import create_app

async def main(port):
    runner = web.AppRunner(create_app(load_config(sys.argv[1])))
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    started = [m for m in %(heavy)r if m in sys.modules]
    print("started", *started, flush=True)
    await asyncio.Event().wait()

asyncio.run(main(int(sys.argv[2])))
"""


def test_the_default_config_serves_without_importing_litellm_or_tiktoken() -> None:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-c", PROBE % {"heavy": HEAVY}, str(ROOT / "configs" / "gateway.yaml"), str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, process)
        assert process.stdout is not None
        assert process.stdout.readline().split() == [b"started"]  # none of HEAVY
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as answer:
            assert answer.status == 200
        rss_kb = int(Path(f"/proc/{process.pid}/status").read_text().split("VmRSS:")[1].split()[0])
        assert rss_kb < 70 * 1024, f"idle RSS {rss_kb} kB is over 70 MB"
    finally:
        process.terminate()
        process.wait(timeout=10)
