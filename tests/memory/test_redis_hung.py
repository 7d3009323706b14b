"""gateway.memory.redis on a Redis that hangs (SIGSTOP): each call fails after one wait for its reply, not one per retry.

A reply that does not come is not retried (a lost connection is): the 503 a client gets comes
after the store's one 10 s wait, not after 40 s of retries. The scripts go through the lean client
or, with GATEWAY_REDIS_LEAN=off, through redis-py, as the other calls do; both hold to it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.core.memory.listing import Listing
from gateway.memory.store import StoreUnavailable, Unconfirmed
from gateway.stores.redis import LEAN_SWITCH
from tests.support.redis_hangs import hung
from tests.support.redis_stores import entry, redis_store
from tests.support.servers import RedisProcess, redis_server

ONE_WAIT_NOT_FOUR = 30.0  # past the store's one 10 s wait for a reply, before four of them


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisProcess]:
    with redis_server(tmp_path) as started:
        yield started


async def fails(call: object) -> BaseException:
    """What the awaitable `call` raised (it must raise)."""
    try:
        await call  # type: ignore[misc]
    except Exception as exc:
        return exc
    raise AssertionError("the call went through a stopped Redis")


@pytest.mark.parametrize("lean", ["on", "off"])
async def test_every_call_on_a_hung_redis_is_unavailable_after_one_wait(
    server: RedisProcess, lean: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LEAN_SWITCH, lean)
    store = redis_store(server.url)
    key = ("t", "hung")
    try:
        await store.append(key, [entry("user", "q")], system=None)  # connected (both clients) before the stop
        with hung(server):
            async with asyncio.timeout(ONE_WAIT_NOT_FOUR):
                failures = await asyncio.gather(
                    fails(store.load(key)),  # the memory API's read
                    fails(store.get_value("response:resp_1")),  # a pin's
                    fails(store.list_conversations("t", Listing())),
                    fails(store.append(key, [entry("assistant", "a")], system=None)),  # a turn's script
                )
        assert all(isinstance(failure, StoreUnavailable) for failure in failures), failures
        assert all("imeout" in str(failure) or "no reply" in str(failure) for failure in failures), failures
        # the turn's script was sent and never answered: it may run when Redis resumes, and says so
        assert isinstance(failures[3], Unconfirmed) and not isinstance(failures[0], Unconfirmed), failures
    finally:
        await store.close()
