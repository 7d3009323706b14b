"""The application factory: routes, middlewares, and the resources `cleanup_ctx` owns."""

from __future__ import annotations

import asyncio
import logging
import os
import random
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass

import aiohttp
from aiohttp import web
from aiohttp.typedefs import Handler

from gateway.config.providers import kind_of
from gateway.core.memory.settings import MemoryConfig, StoreKind
from gateway.core.routing import Random
from gateway.core.settings import Config
from gateway.core.tree import iter_targets
from gateway.governance.admission import Governor
from gateway.governance.build import open_governor
from gateway.governance.key_refresh import KeyRefresher
from gateway.governance.key_store import open_key_store
from gateway.governance.stored_keys import StoredKeys
from gateway.memory.sqlite import SQLiteStore
from gateway.memory.store import InProcessStore, MemoryStore
from gateway.memory.turns import Memory
from gateway.observe.logs import RequestLog
from gateway.observe.metrics import CONTENT_TYPE, Metrics
from gateway.observe.trace import combine
from gateway.server import (
    conversations_api,
    governance_api,
    handlers,
    health,
    memory_api,
    messages_api,
    responses_api,
    surface,
)
from gateway.server.admissions import is_governed
from gateway.server.aiohttp_internals import announce_mode, answer_errors_in_json
from gateway.server.connections import REASON as CONNECTIONS_REFUSED
from gateway.server.connections import limit_connections
from gateway.server.cors import cors_middlewares, cors_response_hook
from gateway.server.frontdoor import FRONT_DOOR, open_front_door
from gateway.server.governance_api import KEY_STORE
from gateway.server.inline import INLINE_CONFIGS, InlineConfigs
from gateway.server.keys import (
    CONFIG,
    DISPATCHER,
    GOVERNOR,
    INFLIGHT,
    LIFECYCLE,
    MEMORY,
    METRICS,
    OBSERVER,
    SESSION,
    STORED_KEYS,
    UPSTREAMS,
    InFlight,
    Lifecycle,
)
from gateway.server.malformed_http import quiet_malformed_requests
from gateway.server.middlewares import Authenticator, gateway_middleware
from gateway.tokens import use_offline_encodings
from gateway.upstream.breakers import open_breakers
from gateway.upstream.dispatch import Dispatcher
from gateway.upstream.guarded import guarded_providers
from gateway.upstream.providers.base import Provider
from gateway.upstream.providers.registry import Resources, factory_of

log = logging.getLogger("gateway")


def open_store(config: MemoryConfig, *, processes: int = 1) -> MemoryStore:
    """The configured memory store (SQLite opens its file on first use).

    Worker processes sharing one SQLite file lock conversations by kernel locks on the lock file
    beside it (`<db>-locks`); each keeps its cache, served while the conversation's version slot
    there says no other worker wrote it.
    """
    ttl, cap, wait = config.ttl_seconds, config.max_stored_messages, config.lock_timeout_seconds
    if config.store == StoreKind.REDIS:
        # imported here for start-up cost: redis-py loads only for a Redis store
        from gateway.memory.redis import RedisStore

        return RedisStore(
            config.redis,
            ttl_seconds=ttl,
            max_messages=cap,
            lock_timeout=wait,
            wait_replicas=config.wait_replicas,
            wait_timeout=config.wait_timeout_seconds,
        )
    if config.store == StoreKind.MEMORY:
        return InProcessStore(ttl_seconds=ttl, max_messages=cap, lock_timeout=wait)
    return SQLiteStore(
        config.path, ttl_seconds=ttl, max_messages=cap, lock_timeout=wait, shared=processes > 1, shown_path=config.shown_path
    )


def metrics_handler(metrics: Metrics, auth: Authenticator | None) -> Handler:
    """`GET /metrics` in Prometheus' text format; behind the gateway keys when `auth` is given."""

    async def scrape(request: web.Request) -> web.Response:
        if auth is not None:
            auth.tenant(request)
        body = await asyncio.get_running_loop().run_in_executor(None, metrics.exposition)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})

    return scrape


def build_providers(config: Config, resources: Resources) -> dict[str, Provider]:
    """One Provider per provider the config names; litellm-backed ones share one instance."""
    providers: dict[str, Provider] = {}
    made: dict[object, Provider] = {}  # by factory
    for route in config.routes.values():
        for target in iter_targets(route.root):
            kind = kind_of(target.provider)
            if kind is None or target.provider in providers:
                continue
            factory = factory_of(target.provider)
            if factory not in made:
                made[factory] = factory(resources)
            providers[target.provider] = made[factory]
    return providers


@dataclass(slots=True)
class Handover:
    """The governor of the configuration served last, shared by every configuration of the process.

    A reload's governor takes over its counts (the local limiter's buckets), so a reload never
    hands a key a fresh minute.
    """

    governor: Governor | None = None


HANDOVER = web.AppKey("handover", Handover)


def create_app(config: Config, *, rng: Random | None = None, processes: int = 1) -> web.Application:
    """Build the gateway for `config`; `rng` drives load balancing and jitter (seed it in tests).

    `processes` is how many gateway processes serve this config (`--workers`).
    """
    rng = rng or random.Random()
    app = config_app(config, Lifecycle(started_at=int(time.time()), processes=processes))
    app[HANDOVER].governor = app[GOVERNOR]
    announce_mode()
    quiet_malformed_requests()
    answer_errors_in_json(app)  # before limit_connections: its guard watches the server this makes
    warn_open(config)
    if processes > 1 and config.memory.store == StoreKind.MEMORY:  # a setting only a restart changes: said once
        log.warning(
            "memory.store memory with %d processes: each process keeps its own conversations; "
            "use sqlite or redis to share them",
            processes,
        )

    async def upstream_session(app: web.Application) -> AsyncIterator[None]:
        connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=60, ttl_dns_cache=300)
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=30)
        # No cookie jar: an upstream's Set-Cookie must never be replayed on other clients' requests.
        jar = aiohttp.DummyCookieJar()
        async with aiohttp.ClientSession(connector=connector, timeout=timeout, auto_decompress=True, cookie_jar=jar) as session:
            app[SESSION] = session
            async with AsyncExitStack() as upstreams:
                await upstreams.enter_async_context(governance(app))
                await upstreams.enter_async_context(open_upstreams(app, config, session, rng=rng))
                app[UPSTREAMS] = upstreams
                yield

    async def begin_draining(app: web.Application) -> None:
        app[LIFECYCLE].draining = True
        log.info("gateway %d stopping: requests under way may take up to %gs", os.getpid(), config.server.drain_seconds)

    async def memory_store(app: web.Application) -> AsyncIterator[None]:
        use_offline_encodings()
        store = open_store(config.memory, processes=processes)
        app[MEMORY] = Memory(
            store, token_cap=config.memory.limits.max_tokens, max_reply_bytes=config.server.max_response_bytes
        )
        yield
        await app[MEMORY].close()

    app.cleanup_ctx.append(upstream_session)
    app.cleanup_ctx.append(memory_store)
    app.on_shutdown.append(begin_draining)
    door = open_front_door(app)  # last: it takes the routes and middlewares as they are now
    if door is not None:
        app[FRONT_DOOR] = door
    metrics = app.get(METRICS)
    refused = metrics.overloaded_requests.labels(CONNECTIONS_REFUSED).inc if metrics is not None else None
    limit_connections(app, config.server.max_connections, refused=refused)
    return app


def config_app(
    config: Config, lifecycle: Lifecycle, *, metrics: Metrics | None = None, handover: Handover | None = None
) -> web.Application:
    """The application for `config`: routes, middlewares and what handlers reach, but no resources.

    The upstream session, the memory and the dispatcher are added by whoever runs it:
    `create_app`'s cleanup contexts for the server's first configuration, `reloaded_app` for
    those that replace it, which also start its key refresher and close its governor and key
    store (`governance`), both made here but opened by their first call. `metrics`: the
    process's, which a reload keeps (else made here, when enabled). `handover`: the process's,
    whose governor this configuration's takes over from.
    """
    stored = StoredKeys()  # filled and kept current by the key refresher (governance), read by auth and the governor
    auth = Authenticator(config.api_keys, admin_keys=config.admin_keys, stored=stored)
    if metrics is None and config.metrics.enabled:
        metrics = Metrics(config)
    observer = combine([*([metrics] if metrics is not None else []), RequestLog(quiet_paths=("/healthz", "/readyz", config.metrics.path))])
    inflight = InFlight()
    model_paths = {**handlers.MODEL_PATHS, **surface.SURFACE_PATHS}
    handover = handover or Handover()
    governor = open_governor(config, stored=stored, listener=metrics, previous=handover.governor)
    governed = is_governed(governor)  # admissions are settled and their headers added; nothing of it otherwise
    app = web.Application(
        middlewares=[*cors_middlewares(config.cors), gateway_middleware(auth, observer, model_paths, inflight=inflight, governor=governor if governed else None)],
        client_max_size=config.server.max_body_bytes,
    )
    app[CONFIG] = config
    app[HANDOVER] = handover
    app[STORED_KEYS] = stored
    app[GOVERNOR] = governor
    key_store = open_key_store(config)  # nothing opened yet: its first call does that
    if key_store is not None:
        app[KEY_STORE] = key_store
    app[INLINE_CONFIGS] = InlineConfigs(config.request_config)
    app[OBSERVER] = observer
    app[LIFECYCLE] = lifecycle
    app[INFLIGHT] = inflight
    if metrics is not None:
        app[METRICS] = metrics
    if config.cors.enabled:
        app.on_response_prepare.append(cors_response_hook(config.cors))
    app.router.add_post("/v1/chat/completions", handlers.chat_completions)
    app.router.add_post("/v1/completions", handlers.completions)
    app.router.add_post("/v1/embeddings", handlers.embeddings)
    app.router.add_post("/v1/messages", messages_api.messages)
    app.router.add_post("/v1/messages/count_tokens", messages_api.count_tokens)
    app.router.add_post("/v1/responses", responses_api.responses)
    app.router.add_get("/v1/responses/{response_id}", responses_api.get_response)
    app.router.add_delete("/v1/responses/{response_id}", responses_api.delete_response)
    for path, handler in surface.HANDLERS.items():
        app.router.add_post(path, handler)
    app.router.add_get("/v1/models", handlers.list_models)
    app.router.add_get("/v1/models/{model:.+}", handlers.get_model)
    app.router.add_get("/v1/memory", memory_api.list_memory)
    app.router.add_get("/v1/memory/{memory_id}", memory_api.get_memory)
    app.router.add_delete("/v1/memory/{memory_id}", memory_api.delete_memory)
    app.router.add_post("/v1/memory/{memory_id}/undo", memory_api.undo_memory)
    app.router.add_post("/v1/memory/{memory_id}/redo", memory_api.redo_memory)
    conversations_api.add_routes(app.router)
    governance_api.add_routes(app.router)
    app.router.add_get("/v1/gateway/health", health.gateway_health)
    app.router.add_get("/healthz", health.healthz)
    app.router.add_get("/readyz", health.readyz)
    if metrics is not None:
        app.router.add_get(config.metrics.path, metrics_handler(metrics, auth if config.metrics.require_auth else None))
    return app


def is_open(config: Config) -> bool:
    """Whether `config` lets anyone in: auth is on with any key, admin keys included (issued keys need one)."""
    return not config.api_keys and not config.admin_keys


def warn_open(config: Config) -> None:
    """Log that anyone may call the gateway, when `config` has no keys."""
    if is_open(config):
        log.warning("auth.keys is empty: the gateway is open to anyone who can reach it")


@asynccontextmanager
async def governance(app: web.Application) -> AsyncIterator[None]:
    """`app`'s governor, and with admin keys its key store and the refresher of its snapshot, while it lasts."""
    async with AsyncExitStack() as stack:
        stack.push_async_callback(app[GOVERNOR].close)
        store = app.get(KEY_STORE)
        if store is not None:
            stack.push_async_callback(store.close)
            refresher = KeyRefresher(store, app[STORED_KEYS])
            await refresher.start()  # the keys issued so far are known before the first request
            stack.push_async_callback(refresher.close)
        yield


@asynccontextmanager
async def open_upstreams(
    app: web.Application, config: Config, session: aiohttp.ClientSession, *, rng: Random
) -> AsyncIterator[None]:
    """`config`'s circuit breakers, providers and dispatcher (as app[DISPATCHER]), over `session`, while it lasts."""
    breakers = open_breakers(config, listener=app.get(METRICS))
    try:
        resources = Resources(session, max_response_bytes=config.server.max_response_bytes)
        providers = build_providers(config, resources)
        async with guarded_providers(config, providers, client_timeout=session.timeout) as guarded:
            app[DISPATCHER] = Dispatcher(guarded, rng=rng, breakers=breakers)
            yield
    finally:
        await breakers.close()


async def reloaded_app(served: web.Application, config: Config, *, rng: Random) -> web.Application:
    """An application for `config` that shares `served`'s process-wide resources, frozen, ready for FrontDoor.serve.

    Its own resources (app[UPSTREAMS]) are the caller's to close, once it is replaced and drained.
    Nothing that outlives it changes until the caller, serving it, calls `commit_reload`.
    """
    metrics = served.get(METRICS)
    app = config_app(config, served[LIFECYCLE], metrics=metrics, handover=served[HANDOVER])
    app[SESSION] = session = served[SESSION]
    app[MEMORY] = served[MEMORY]
    upstreams = app[UPSTREAMS] = AsyncExitStack()
    try:
        await upstreams.enter_async_context(governance(app))
        await upstreams.enter_async_context(open_upstreams(app, config, session, rng=rng))
    except BaseException:
        await upstreams.aclose()
        raise
    app.freeze()
    return app


def commit_reload(app: web.Application, replaced: web.Application) -> None:
    """Make what `app` (from reloaded_app) changes beyond itself take effect, now that it serves instead of `replaced`.

    The process's metrics count its routes and targets too (a reload that fails adds no series),
    the next reload's governor takes over from `app`'s, and a gateway the reload left open is
    logged, once: when `replaced` had keys.
    """
    config = app[CONFIG]
    app[HANDOVER].governor = app[GOVERNOR]
    metrics = app.get(METRICS)
    if metrics is not None:  # one set of series for the process's life: a reload adds to it
        metrics.adopt(config)
    if not is_open(replaced[CONFIG]):
        warn_open(config)
