"""Typed application keys for the long-lived objects handlers reach.

The server's application holds the objects of the configuration it started with; a reload
(gateway.cli.reload) builds an application of the same shape for the new configuration, sharing the
process's long-lived resources (SESSION, MEMORY, LIFECYCLE), and requests reach the new one from
then on. A request reaches every key through its own `request.app`, so it keeps the objects of
the configuration it started under until it ends.
"""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from dataclasses import dataclass

import aiohttp
from aiohttp import web

from gateway.core.settings import Config
from gateway.governance.admission import Admission, Governor
from gateway.governance.stored_keys import StoredKeys
from gateway.memory.turns import Memory
from gateway.observe.metrics import Metrics
from gateway.observe.trace import Observer, Trace
from gateway.upstream.dispatch import Dispatcher


@dataclass(slots=True)
class Lifecycle:
    """The process's: when it started, whether it is draining, how many processes serve the port."""

    started_at: int
    draining: bool = False
    processes: int = 1


class InFlight:
    """How many requests one application (one configuration) is answering now."""

    __slots__ = ("_idle", "count")

    def __init__(self) -> None:
        self.count = 0
        self._idle: asyncio.Event | None = None

    def ended(self) -> None:
        """One of the requests ended."""
        self.count -= 1
        if not self.count and self._idle is not None:
            self._idle.set()

    async def drained(self) -> None:
        """Return once no request is being answered (at once when none is)."""
        while self.count:
            self._idle = asyncio.Event()
            await self._idle.wait()


CONFIG = web.AppKey("config", Config)
DISPATCHER = web.AppKey("dispatcher", Dispatcher)
LIFECYCLE = web.AppKey("lifecycle", Lifecycle)
MEMORY = web.AppKey("memory", Memory)
OBSERVER = web.AppKey("observer", Observer)
METRICS = web.AppKey("metrics", Metrics)  # absent while metrics are off
INFLIGHT = web.AppKey("inflight", InFlight)
GOVERNOR: web.AppKey[Governor] = web.AppKey("governor")  # this configuration's limits (Unlimited when none)
STORED_KEYS = web.AppKey("stored_keys", StoredKeys)  # keys issued through /v1/gateway/keys, as this process knows them
SESSION = web.AppKey("session", aiohttp.ClientSession)  # the upstream session, shared by every configuration
# What the configuration alone owns (breakers, the session for clients' own targets): closed
# once the configuration is replaced and its requests have ended, or when the server stops.
UPSTREAMS = web.AppKey("upstreams", AsyncExitStack)

# Request keys are RequestKeys, not strings: aiohttp's store checks a string key against the
# keys it warned about, per store. The request id and the tenant live on the Trace alone.
TRACE = web.RequestKey("trace", Trace)  # the request's observe.Trace
ADMISSION = web.RequestKey("admission", Admission)  # what the governor let through, settled when the request ends
STREAM_STARTED = web.RequestKey("stream_started", web.StreamResponse)  # the prepared response, once its headers went out


def tenant_of(request: web.Request) -> str:
    """The tenant (the gateway key's name) of a request under /v1/, which the middleware authenticated."""
    tenant = request[TRACE].tenant
    assert tenant is not None  # set for every /v1/ path before its handler runs
    return tenant
