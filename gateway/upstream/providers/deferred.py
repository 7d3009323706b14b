"""Providers whose import costs seconds (litellm): made on a thread, and waited for outside any attempt.

A `Load` runs its work once per process on a thread of its own, never on an event loop. A
`Deferred` provider is made from it: a call that finds it still loading raises `Loading`, which
the dispatcher waits out before it starts the attempt's clock, so the import never counts
against a route's timeout and never reaches its breaker. An anthropic target answers
`/v1/messages` natively and needs litellm only for chat completions: a gateway that never sends
it one never imports litellm.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from gateway.upstream.providers.base import Call, EventStream, Provider, Reply, TransportError

T = TypeVar("T")


class Load(Generic[T]):
    """`work()` run once per process, on a thread of its own, from the first `start()`."""

    def __init__(self, work: Callable[[], T], *, name: str) -> None:
        self.name = name
        self._work = work
        self._lock = threading.Lock()
        self._future: concurrent.futures.Future[T] | None = None

    def start(self) -> None:
        """Begin the work now, on its thread (once: later calls change nothing)."""
        with self._lock:
            if self._future is not None:
                return
            future = self._future = concurrent.futures.Future()
        threading.Thread(target=self._run, args=(future,), name=f"gateway-load-{self.name}", daemon=True).start()

    def _run(self, future: concurrent.futures.Future[T]) -> None:
        future.set_running_or_notify_cancel()
        try:
            future.set_result(self._work())
        except BaseException as exc:  # handed to whoever waits for the work
            future.set_exception(exc)

    def result(self) -> T:
        """What the work made; Loading (the work started if it was not) until it is done; its error if it failed."""
        future = self._future
        if future is None or not future.done():
            self.start()
            raise Loading(self)
        return future.result()

    async def wait(self) -> None:
        """Return once the work is done (started if it was not), whether it succeeded or not."""
        self.start()
        assert self._future is not None
        # Shielded: a caller that gives up must not cancel the others' wait for the one load.
        await asyncio.shield(asyncio.wrap_future(self._future))


class Loading(Exception):
    """A call found its provider still loading: wait (`wait()`) and call again. No attempt was made."""

    def __init__(self, load: Load[Any]) -> None:
        super().__init__(f"{load.name} is still loading")
        self.load = load

    async def wait(self) -> None:
        """Return once the load is done (its failure, if any, is the next call's to raise)."""
        with contextlib.suppress(Exception):
            await self.load.wait()


class Deferred(Generic[T]):
    """The provider `make(load's result)`, made at the first call after `load` is done; before that, calls raise Loading.

    With `warm_up`, a call to a target whose provider kind was not called yet also raises Loading
    until `warm_up(kind)` is done: what the provider's first call would make (litellm's modules
    for that kind) is made on a thread, out of the attempt. A warm-up is a head start, never a
    condition: whether it succeeded or not, the call goes once it is done.
    """

    def __init__(
        self, load: Load[T], make: Callable[[T], Provider], *, warm_up: Callable[[str], Load[Any]] | None = None
    ) -> None:
        self._load = load
        self._make = make
        self._warm_up = warm_up
        self._made: Provider | None = None
        self._warm: set[str] = set()  # the provider kinds whose warm-up is done

    def _provider(self, call: Call) -> Provider:
        """The provider; Loading while its load (or the kind's warm-up) runs, a TransportError when the load failed (a failed attempt, not a 500)."""
        if self._made is None:
            try:
                loaded = self._load.result()
            except Loading:
                raise
            except Exception as exc:  # the import failed: the target cannot be called, the route moves on
                raise TransportError(f"its provider could not be loaded ({type(exc).__name__})") from exc
            self._made = self._make(loaded)
        kind = call.target.provider
        if kind not in self._warm:
            if self._warm_up is not None:
                try:
                    self._warm_up(kind).result()
                except Loading:
                    raise
                except Exception:  # a warm-up that failed said so: the call makes what it needs itself
                    pass
            self._warm.add(kind)
        return self._made

    async def complete(self, call: Call) -> Reply:
        return await self._provider(call).complete(call)

    async def stream(self, call: Call) -> Reply | EventStream:
        return await self._provider(call).stream(call)
