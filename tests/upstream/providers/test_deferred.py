"""gateway.upstream.providers.deferred: the provider is made once, on a thread, and a caller giving up cancels no one's wait."""

from __future__ import annotations

import asyncio
import threading

import pytest

from gateway.core.tree import Target
from gateway.upstream.providers.base import Call, EventStream, Reply
from gateway.upstream.providers.deferred import Deferred

CALL = Call(target=Target(name="t", provider="anthropic", base_url="", api_key=""), endpoint="chat/completions", payload={})


class Answering:
    """A provider that answers every call with its own name."""

    def __init__(self, name: str) -> None:
        self.name = name

    async def complete(self, call: Call) -> Reply:
        return Reply(status=200, body=self.name.encode())

    async def stream(self, call: Call) -> Reply | EventStream:
        return Reply(status=200, body=b"stream from " + self.name.encode())


class Maker:
    """`make` for Deferred: blocks until `go` is set, and records the thread it ran on."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.go = threading.Event()
        self.threads: list[int] = []

    def __call__(self) -> Answering:
        self.threads.append(threading.get_ident())
        self.started.set()
        assert self.go.wait(30), "the test never let the provider be made"
        return Answering(f"made {len(self.threads)}")


async def test_every_call_waits_for_the_one_provider_made_off_the_loop() -> None:
    maker = Maker()
    deferred = Deferred(maker)
    first = asyncio.create_task(deferred.complete(CALL))
    assert await asyncio.to_thread(maker.started.wait, 30)
    others = [asyncio.create_task(deferred.complete(CALL)), asyncio.create_task(deferred.stream(CALL))]
    maker.go.set()
    replies = await asyncio.gather(first, *others)
    assert [reply.body for reply in replies if isinstance(reply, Reply)] == [b"made 1", b"made 1", b"stream from made 1"]
    assert await deferred.complete(CALL) == Reply(status=200, body=b"made 1")
    assert len(maker.threads) == 1 and maker.threads[0] != threading.get_ident()


async def test_a_caller_that_gives_up_leaves_the_provider_being_made_for_the_next() -> None:
    maker = Maker()
    deferred = Deferred(maker)
    first = asyncio.create_task(deferred.complete(CALL))
    assert await asyncio.to_thread(maker.started.wait, 30)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    maker.go.set()
    assert (await deferred.complete(CALL)).body == b"made 1"
    assert len(maker.threads) == 1
