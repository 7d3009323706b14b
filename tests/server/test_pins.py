"""gateway.server.pins: which target produced a Responses answer, recorded in the memory store and found again by its tenant.

The stores are the gateway's own (open_store on a loaded config); requests continuing, reading
or deleting a response end to end are in test_responses_api_native_e2e.py.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest

from gateway.config.loader import parse_config
from gateway.core.settings import Config
from gateway.core.tree import Target, iter_targets
from gateway.memory.store import MemoryStore, StoreUnavailable
from gateway.server import pins
from gateway.server.app import open_store
from tests.support.servers import free_port

ROUTES = """
routes:
  r:
    strategy: {mode: fallback}
    targets:
      - {name: first, provider: mock}
      - {name: second, provider: mock}
"""


@pytest.fixture
def config() -> Config:
    return parse_config("memory: {store: memory}\n" + ROUTES, env={})


@pytest.fixture
async def store(config: Config) -> AsyncIterator[MemoryStore]:
    opened = open_store(config.memory)
    yield opened
    await opened.close()


def second(config: Config) -> Target:
    return next(target for target in iter_targets(config.routes["r"].root) if target.name == "second")


async def test_a_recorded_response_is_found_at_its_route_and_target_and_pinned_there(config: Config, store: MemoryStore) -> None:
    route = config.routes["r"]
    await pins.record(store, "team-a", "resp_1", route=route, target=second(config))
    found = await pins.find(store, config, tenant="team-a", response_id="resp_1")
    assert found == (route, second(config))
    pinned = pins.pinned(*found)
    assert pinned.root == second(config) and pinned.name == "r" and route.root != pinned.root


async def test_another_tenants_response_is_not_theirs(config: Config, store: MemoryStore) -> None:
    await pins.record(store, "team-a", "resp_1", route=config.routes["r"], target=second(config))
    with pytest.raises(pins.NotYours):
        await pins.find(store, config, tenant="team-b", response_id="resp_1")


@pytest.mark.parametrize("response_id", [None, "", 7, ["resp_1"]])
async def test_an_answer_without_a_string_id_records_nothing(config: Config, store: MemoryStore, response_id: object) -> None:
    await pins.record(store, "team-a", response_id, route=config.routes["r"], target=second(config))
    assert await store.get_value("response:") is None and await store.get_value("response:resp_1") is None


async def test_unknown_forgotten_or_unreadable_ids_are_not_found(config: Config, store: MemoryStore) -> None:
    assert await pins.find(store, config, tenant="team-a", response_id="resp_unknown") is None
    await pins.record(store, "team-a", "resp_1", route=config.routes["r"], target=second(config))
    await pins.forget(store, "resp_1")
    assert await pins.find(store, config, tenant="team-a", response_id="resp_1") is None
    for value in ["not json", '["team-a", "r"]', "{}"]:
        await store.put_value("response:resp_2", value)
        assert await pins.find(store, config, tenant="team-a", response_id="resp_2") is None, value


@pytest.mark.parametrize("routes", [
    "routes: {s: {provider: mock}}",
    "routes: {r: {strategy: {mode: fallback}, targets: [{name: first, provider: mock}]}}",
], ids=["route-gone", "target-gone"])  # fmt: skip
async def test_a_route_or_target_gone_from_a_reloaded_config_is_not_found(config: Config, store: MemoryStore, routes: str) -> None:
    await pins.record(store, "team-a", "resp_1", route=config.routes["r"], target=second(config))
    reloaded = parse_config("memory: {store: memory}\n" + routes, env={})
    assert await pins.find(store, reloaded, tenant="team-a", response_id="resp_1") is None


async def test_a_failing_store_costs_the_record_only_and_says_so(config: Config, caplog: pytest.LogCaptureFixture) -> None:
    down = parse_config(f'memory: {{store: redis, url: "redis://127.0.0.1:{free_port()}/0"}}\n' + ROUTES, env={})
    store = open_store(down.memory)
    try:
        with caplog.at_level(logging.WARNING, logger="gateway"):
            await pins.record(store, "team-a", "resp_1", route=down.routes["r"], target=second(down))
            await pins.forget(store, "resp_1")
        assert [r.getMessage().split(" (")[0] for r in caplog.records if r.name == "gateway"] == [
            "record response:resp_1: could not be written",
            "memory store: records are skipped for 5s",
            "response resp_1: its record could not be dropped",
        ]  # fmt: skip
        with pytest.raises(StoreUnavailable):
            await pins.find(store, down, tenant="team-a", response_id="resp_1")
    finally:
        await store.close()
