"""`gateway serve --workers 2`: every scrape shows what both workers counted, a dead one's counts included.

A worker publishes its values every half second and before it answers a scrape, so a scrape may
show another worker's as they were up to then: these tests poll until a scrape shows them.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
import orjson
import pytest

from gateway.observe.metrics.published import DEAD
from gateway.observe.metrics.snapshot import Snapshot
from tests.support.answered_by import get_answered_by, post_held_by
from tests.support.fakes import FakeUpstream, Step, error_body
from tests.support.processes import running_gateway
from tests.support.scrape import Samples, samples, total
from tests.support.serve import needs_ss, worker_pids
from tests.support.waiting import eventually

pytestmark = needs_ss

REQUESTS = 40
CHAT = orjson.dumps({"model": "chat", "messages": [{"role": "user", "content": "hi"}]})


def counted_by_each(folder: Path) -> dict[int, float]:
    """What each live worker's published file says it answered."""
    counts = {}
    for path in folder.iterdir():
        snapshot = Snapshot.decode(path.read_bytes()) if path.suffix == ".metrics" else None
        if snapshot is not None and not path.name.startswith(DEAD):
            counts[int(path.stem)] = sum(snapshot.numbers["gateway_requests"].values())
    return counts


async def send_requests(port: int, count: int) -> None:
    for _ in range(count):  # a new connection each: the kernel spreads them over the workers
        async with httpx.AsyncClient() as client:
            response = await client.post(f"http://127.0.0.1:{port}/v1/chat/completions", content=CHAT)
            assert response.status_code == 200, response.text


def scraped_by_each(port: int, workers: set[int], holds: Callable[[Samples], bool]) -> Callable[[], Awaitable[bool]]:
    """A condition: each of `workers` answered a scrape of which `holds` (scrapes land where the kernel sends them)."""
    seen: set[int] = set()

    async def condition() -> bool:
        pid, text = await get_answered_by(port, "/metrics")
        if holds(samples(text)):
            seen.add(pid)
        return seen >= workers

    return condition


async def scrape_holds(port: int, holds: Callable[[Samples], bool]) -> bool:
    """Whether a scrape, of whichever worker the kernel picks, shows what `holds`; False when a killed worker dropped it."""
    try:
        _, text = await get_answered_by(port, "/metrics")
    except (ConnectionError, asyncio.IncompleteReadError):
        return False
    return holds(samples(text))


async def test_a_scrape_of_either_worker_reports_the_sum_over_both(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "gateway.yaml"
    config.write_text("routes: {chat: {provider: mock}}\n")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))  # where the parent makes the workers' directory
    async with running_gateway(config, "--workers", "2") as gateway:
        await gateway.logs.wait_for("listening on", count=2)
        workers = worker_pids(gateway.process.pid)
        await send_requests(gateway.port, REQUESTS)
        (folder,) = scratch.glob("gateway-metrics-*")  # created fresh by the parent
        await eventually(lambda: sum(counted_by_each(folder).values()) == REQUESTS, seconds=30, what="both workers published")
        per_worker = counted_by_each(folder)
        assert set(per_worker) == workers and all(per_worker.values()), per_worker  # each its own file; both served some
        summed = scraped_by_each(gateway.port, workers, lambda found: total(found, "gateway_requests_total") == REQUESTS)
        await eventually(summed, seconds=30, what="a scrape of each worker showing every request")
        gateway.process.send_signal(signal.SIGTERM)
        await asyncio.to_thread(gateway.process.wait, 30)
    await eventually(lambda: not list(scratch.iterdir()), seconds=5, what="the workers' directory removed at exit")


async def test_a_dead_workers_counts_stay_and_its_requests_in_flight_leave(
    tmp_path: Path, make_upstream: Callable[..., Awaitable[FakeUpstream]]
) -> None:
    upstream = await make_upstream()
    config = tmp_path / "gateway.yaml"
    config.write_text(f'routes: {{chat: {{provider: openai, baseUrl: "{upstream.url}", apiKey: k}}}}\n')
    async with running_gateway(config, "--workers", "2") as gateway:
        await gateway.logs.wait_for("listening on", count=2)
        await send_requests(gateway.port, REQUESTS)
        upstream.then(Step(gate=asyncio.Event()))  # the next request is never answered
        victim, held = await post_held_by(gateway.port, "/v1/chat/completions", CHAT)
        try:

            def published(found: Samples) -> bool:
                return total(found, "gateway_requests_total") == REQUESTS and total(found, "gateway_inflight_requests") == 1

            await eventually(lambda: scrape_holds(gateway.port, published), seconds=30, what="the request in flight published")
            os.kill(victim, signal.SIGKILL)
            totals: list[float] = []

            def dropped(found: Samples) -> bool:
                totals.append(total(found, "gateway_requests_total"))
                return total(found, "gateway_inflight_requests") == 0

            await eventually(lambda: scrape_holds(gateway.port, dropped), seconds=30, what="the dead worker's request gone")
            assert set(totals) == {REQUESTS}  # never less: the dead worker's counts stay in every scrape
        finally:
            held.close()


async def test_the_breaker_state_shown_is_the_one_a_live_worker_set_last(
    tmp_path: Path, make_upstream: Callable[..., Awaitable[FakeUpstream]]
) -> None:
    upstream = await make_upstream(Step(status=503, body=error_body(503)))
    config = tmp_path / "gateway.yaml"
    config.write_text(
        f'routes: {{chat: {{name: up, provider: openai, baseUrl: "{upstream.url}", apiKey: k,'
        " retry: {attempts: 0}, breaker: {failures: 1, cooldownSeconds: 60}}}\n"
    )
    async with running_gateway(config, "--workers", "2") as gateway:
        await gateway.logs.wait_for("listening on", count=2)
        workers = worker_pids(gateway.process.pid)
        # Each sets its breaker's state (closed) as it starts: only once both serve is the open one set last.
        await eventually(scraped_by_each(gateway.port, workers, lambda found: True), seconds=30, what="both workers serving")
        opened, held = await post_held_by(gateway.port, "/v1/chat/completions", CHAT)  # its breaker opens; the other's stays closed
        held.close()
        state = {"route": "chat", "target": "up"}
        shown_open = scraped_by_each(gateway.port, workers, lambda found: total(found, "gateway_breaker_state", **state) == 2)
        await eventually(shown_open, seconds=30, what="each worker's scrape showing the open breaker")
        os.kill(opened, signal.SIGKILL)

        def closed(found: Samples) -> bool:
            return total(found, "gateway_breaker_state", **state) == 0

        await eventually(lambda: scrape_holds(gateway.port, closed), seconds=30, what="the dead worker's state gone")
