"""Typed application keys for the long-lived objects handlers reach."""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from gateway.config import Config
from gateway.dispatch import Dispatcher
from gateway.memory.turns import Memory
from gateway.observe import Observer, Trace


@dataclass(slots=True)
class Lifecycle:
    started_at: int
    draining: bool = False


CONFIG = web.AppKey("config", Config)
DISPATCHER = web.AppKey("dispatcher", Dispatcher)
LIFECYCLE = web.AppKey("lifecycle", Lifecycle)
MEMORY = web.AppKey("memory", Memory)
OBSERVER = web.AppKey("observer", Observer)

# Request keys are RequestKeys, not strings: aiohttp's store checks a string key against the
# keys it warned about, per store. The request id and the tenant live on the Trace alone.
TRACE = web.RequestKey("trace", Trace)  # the request's observe.Trace
STREAM_STARTED = web.RequestKey("stream_started", web.StreamResponse)  # the prepared response, once its headers went out


def tenant_of(request: web.Request) -> str:
    """The tenant (the gateway key's name) of a request under /v1/, which the middleware authenticated."""
    tenant = request[TRACE].tenant
    assert tenant is not None  # set for every /v1/ path before its handler runs
    return tenant
