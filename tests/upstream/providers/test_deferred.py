"""gateway.upstream.providers.deferred: a load runs once on a thread of its own; a provider made from it says when it is not there yet."""

from __future__ import annotations

import asyncio
import threading

import pytest

from gateway.core.tree import Target
from gateway.upstream.providers.base import Call, EventStream, Reply, TransportError
from gateway.upstream.providers.deferred import Deferred, Load, Loading

CALL = Call(target=Target(name="t", provider="anthropic", base_url="", api_key=""), endpoint="chat/completions", payload={})


class Answering:
    """A provider that answers every call with its own name."""

    def __init__(self, name: str) -> None:
        self.name = name

    async def complete(self, call: Call) -> Reply:
        return Reply(status=200, body=self.name.encode())

    async def stream(self, call: Call) -> Reply | EventStream:
        return Reply(status=200, body=b"stream from " + self.name.encode())


class Work:
    """The work of a Load: blocks until `go` is set, records the thread it ran on, fails when told to."""

    def __init__(self, *, fails: bool = False) -> None:
        self.started = threading.Event()
        self.go = threading.Event()
        self.threads: list[int] = []
        self.fails = fails

    def __call__(self) -> str:
        self.threads.append(threading.get_ident())
        self.started.set()
        assert self.go.wait(30), "the test never let the work finish"
        if self.fails:
            raise ImportError("no such module")
        return f"made {len(self.threads)}"


async def test_a_call_before_the_load_is_done_raises_loading_and_starts_it_once_on_a_thread_of_its_own() -> None:
    work = Work()
    deferred = Deferred(Load(work, name="w"), Answering)
    for call in (deferred.complete, deferred.stream):
        with pytest.raises(Loading) as raised:
            await call(CALL)
    assert await asyncio.to_thread(work.started.wait, 30)
    work.go.set()
    await raised.value.wait()
    assert await deferred.complete(CALL) == Reply(status=200, body=b"made 1")
    assert await deferred.stream(CALL) == Reply(status=200, body=b"stream from made 1")
    assert len(work.threads) == 1 and work.threads[0] != threading.get_ident()


async def test_a_load_started_ahead_is_not_started_again() -> None:
    work = Work()
    load = Load(work, name="w")
    load.start()
    load.start()
    assert await asyncio.to_thread(work.started.wait, 30)
    with pytest.raises(Loading):
        load.result()
    work.go.set()
    await load.wait()
    assert load.result() == "made 1" and len(work.threads) == 1


async def test_a_waiter_that_gives_up_leaves_the_load_to_the_others() -> None:
    work = Work()
    load = Load(work, name="w")
    first, second = asyncio.create_task(load.wait()), asyncio.create_task(load.wait())
    assert await asyncio.to_thread(work.started.wait, 30)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    work.go.set()
    await second
    assert load.result() == "made 1"


async def test_a_failed_load_is_waited_out_and_then_raised_by_every_call_as_a_transport_failure() -> None:
    """A failed attempt the route moves on from (dispatch), not an error of the gateway's own (a 500)."""
    work = Work(fails=True)
    deferred = Deferred(Load(work, name="w"), Answering)
    with pytest.raises(Loading) as raised:
        await deferred.complete(CALL)
    work.go.set()
    await raised.value.wait()  # the failure is the call's to raise, not the wait's
    for _ in range(2):
        with pytest.raises(TransportError, match=r"could not be loaded \(ImportError\)") as failed:
            await deferred.complete(CALL)
        assert isinstance(failed.value.__cause__, ImportError)


async def test_a_kind_s_first_call_waits_for_its_warm_up_and_goes_whether_the_warm_up_failed_or_not() -> None:
    """Each kind warms up once, at its first call after the load: the call raises Loading until then."""
    load = Load(lambda: "made", name="w")
    load.start()
    await load.wait()
    works = {"anthropic": Work(), "gemini": Work(fails=True)}
    warm_ups = {kind: Load(work, name=kind) for kind, work in works.items()}
    asked: list[str] = []

    def warm_up(kind: str) -> Load[object]:
        asked.append(kind)
        return warm_ups[kind]

    deferred = Deferred(load, Answering, warm_up=warm_up)
    gemini = Call(target=Target(name="g", provider="gemini", base_url="", api_key=""), endpoint="chat/completions", payload={})
    for call, kind in ((CALL, "anthropic"), (gemini, "gemini")):
        with pytest.raises(Loading) as raised:
            await deferred.stream(call)
        assert raised.value.load is warm_ups[kind]
        assert await asyncio.to_thread(works[kind].started.wait, 30)
        works[kind].go.set()
        await raised.value.wait()
        assert await deferred.complete(call) == Reply(status=200, body=b"made")  # a failed warm-up too
        assert await deferred.complete(call) == Reply(status=200, body=b"made")
    assert asked == ["anthropic", "anthropic", "gemini", "gemini"]  # no more once a kind's warm-up is done
