"""`gateway serve --workers 2`: every scrape shows the sum over both workers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
from prometheus_client.mmap_dict import MmapedDict
from prometheus_client.parser import text_string_to_metric_families

from tests.support.servers import free_port, wait_for_port

CONFIG = "routes: {chat: {provider: mock}}\n"
REQUESTS = 40


def requests_total(text: str) -> float:
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "gateway_requests_total"
    )


def served_by(folder: Path) -> dict[str, float]:
    """Per worker metrics file, how many requests that worker counted."""
    counts = {}
    for path in folder.glob("counter_*.db"):
        counts[path.name] = sum(
            value for key, value, *_ in MmapedDict.read_all_values_from_file(str(path)) if '"gateway_requests_total"' in key
        )
    return counts


def test_two_workers_are_scraped_as_one(tmp_path: Path) -> None:
    config = tmp_path / "gateway.yaml"
    config.write_text(CONFIG)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    port = free_port()
    env = {**os.environ, "TMPDIR": str(scratch)}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    command = [sys.executable, "-m", "gateway", "serve", "--config", str(config), "--port", str(port), "--workers", "2"]
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, process)
        base = f"http://127.0.0.1:{port}"
        body = {"model": "chat", "messages": [{"role": "user", "content": "hi"}]}
        for _ in range(REQUESTS):  # a new connection each: the kernel spreads them over the workers
            with httpx.Client() as client:
                assert client.post(f"{base}/v1/chat/completions", json=body).status_code == 200
        (folder,) = scratch.glob("gateway-metrics-*")  # created fresh by the parent
        per_worker = served_by(folder)
        assert len([n for n in per_worker.values() if n > 0]) == 2, per_worker  # both served some
        for _ in range(10):  # whichever worker answers the scrape, it reports the sum
            with httpx.Client() as client:
                assert requests_total(client.get(f"{base}/metrics").text) == REQUESTS
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
    deadline = time.monotonic() + 5
    while list(scratch.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert list(scratch.iterdir()) == []  # removed at exit
