"""Typed application keys for the long-lived objects handlers reach."""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from gateway.config import Config
from gateway.dispatch import Dispatcher
from gateway.memory.turns import Memory
from gateway.observe import Observer


@dataclass(slots=True)
class Lifecycle:
    started_at: int
    draining: bool = False


CONFIG = web.AppKey("config", Config)
DISPATCHER = web.AppKey("dispatcher", Dispatcher)
LIFECYCLE = web.AppKey("lifecycle", Lifecycle)
MEMORY = web.AppKey("memory", Memory)
OBSERVER = web.AppKey("observer", Observer)

REQUEST_ID = "gateway.request_id"
TENANT = "gateway.tenant"
TRACE = "gateway.trace"  # the request's observe.Trace
STREAM_STARTED = "gateway.stream_started"  # the prepared response, once its headers went out
