"""server.maxConnections: the client connections one process keeps open, and what comes past them.

Each connection holds a file descriptor, and each of its requests one more to its upstream: a
process out of descriptors can neither accept clients nor reach upstreams, and idle keep-alive
connections alone can hold every one of them for their keep-alive time. So, with `limit` open:

- from NEAR_LIMIT of it on, keep-alive connections idle between requests are closed as new
  connections arrive (a client opens a new one when it has something to ask);
- past it a new connection gets one answer and is closed: /healthz and /readyz as always (a
  busy process must not look dead to its orchestrator), anything else a 503 gateway_overloaded
  with Retry-After; one that sends nothing is closed after FIRST_REQUEST_SECONDS;
- past it by OVER_LIMIT_ROOM more, a new connection is closed at once.

`maxConnections: 0` (the default) takes the limit from the process's file-descriptor limit
(`connection_limit`).

This is the one module that reaches into aiohttp's server, as aiohttp 3.14 has it. `supported()`
checks that the parts are there; without them the limit is not enforced, and that is logged:
- `Application._make_handler`, which makes the Server a runner serves, is wrapped to watch it;
- `Server.connection_made` / `connection_lost`, which each connection calls, count them;
- a connection's (RequestHandler's) `_request_handler` is read per request, so a connection past
  the limit is given `ConnectionGuard.answer_past_limit`; its `_keepalive_timeout`, read once the
  connection is made, is the deadline of its first request; `_waiter`, `_messages` and
  `_request_count` tell a connection idle between requests, as aiohttp's keep-alive timer does.
"""

from __future__ import annotations

import asyncio
import logging
import resource
from collections.abc import Awaitable, Callable
from typing import Any, Final

import aiohttp
from aiohttp import web

from gateway.errors import OverloadedError
from gateway.server.middlewares import error_response, new_request_id

log = logging.getLogger("gateway")

RESERVED_FDS: Final = 64  # for the process's own: listening sockets, logs, the store's files and connections, DNS
UNLIMITED_FDS: Final = 1 << 20  # what an unlimited RLIMIT_NOFILE counts as
MIN_CONNECTIONS: Final = 8
NEAR_LIMIT: Final = 0.9  # of the limit: from here on idle keep-alive connections are closed
OVER_LIMIT_ROOM: Final = 16  # connections past the limit that still get an answer
FIRST_REQUEST_SECONDS: Final = 5.0  # how long a connection past the limit may take to send its request
REASON: Final = "max_connections"  # what gateway_overloaded_total counts refused connections by
HEALTH_PATHS: Final = frozenset({"/healthz", "/readyz"})

RequestHandler = Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]
_CONNECTION_PARTS: Final = ("_request_handler", "_keepalive_timeout", "_waiter", "_messages", "_request_count")


def supported() -> bool:
    """Whether this aiohttp has the server parts ConnectionGuard uses (see the module docstring)."""
    return (
        callable(getattr(web.Application, "_make_handler", None))
        and all(callable(getattr(web.Server, name, None)) for name in ("connection_made", "connection_lost"))
        and all(name in getattr(web.RequestHandler, "__slots__", ()) for name in _CONNECTION_PARTS)
    )


def connection_limit(configured: int, *, nofile: int | None = None) -> int:
    """The client connections one process keeps open: `configured`, or (0) what its descriptor limit leaves.

    Of the `nofile` descriptors the process may open (its soft RLIMIT_NOFILE by default),
    RESERVED_FDS stay for its own files and the store; half of the rest is for client
    connections, the other half for the upstream connections their requests make.
    """
    if configured > 0:
        return configured
    if nofile is None:
        nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if nofile == resource.RLIM_INFINITY:
        nofile = UNLIMITED_FDS
    return max((nofile - RESERVED_FDS) // 2, MIN_CONNECTIONS)


def overloaded(limit: int) -> OverloadedError:
    """The answer to a request on a connection past the limit."""
    return OverloadedError(
        REASON,
        f"The gateway has {limit} client connections open, its limit (server.maxConnections); retry shortly.",
        headers={"Connection": "close"},
    )


def _idle(connection: web.RequestHandler) -> bool:
    """Whether `connection` served a request and now waits for the next (aiohttp's keep-alive timer asks the same)."""
    waiter = connection._waiter
    return connection._request_count > 0 and not connection._messages and waiter is not None and not waiter.done()


class ConnectionGuard:
    """Counts a Server's connections and holds each new one to the limit (see the module docstring)."""

    def __init__(self, server: web.Server, limit: int, *, refused: Callable[[], None] | None = None) -> None:
        """Watch `server`'s connections from now on; `refused` is told of each connection past the limit."""
        self.limit = limit
        self.near = max(int(limit * NEAR_LIMIT), 1)
        self.open: set[web.RequestHandler] = set()  # not counting the idle ones closed, which are on their way out
        self.full = False
        self._refused = refused or (lambda: None)
        self._handle: RequestHandler = server.request_handler
        self._made = server.connection_made
        self._lost = server.connection_lost
        server.connection_made = self.connection_made  # type: ignore[method-assign]
        server.connection_lost = self.connection_lost  # type: ignore[method-assign]

    def connection_made(self, handler: web.RequestHandler, transport: asyncio.Transport) -> None:
        """A new connection (`handler` is aiohttp's for it): counted, and held to the limit."""
        self._made(handler, transport)
        self.open.add(handler)
        if len(self.open) >= self.near:
            self.close_idle()
        count = len(self.open)
        if count <= self.limit:
            if self.full and count < self.near:
                self.full = False
                log.info("%d client connections open: under server.maxConnections (%d) again", count, self.limit)
            return
        self._refused()
        if not self.full:
            self.full = True
            log.warning(
                "%d client connections open, past server.maxConnections (%d): new connections are answered 503 "
                "(health checks as usual) until some close",
                count, self.limit,
            )  # fmt: skip
        if count > self.limit + OVER_LIMIT_ROOM:
            transport.close()
            return
        handler._request_handler = self.answer_past_limit
        handler._keepalive_timeout = FIRST_REQUEST_SECONDS

    def connection_lost(self, handler: web.RequestHandler, exc: BaseException | None = None) -> None:
        self.open.discard(handler)
        self._lost(handler, exc)

    def close_idle(self) -> int:
        """Close every keep-alive connection idle between requests; how many."""
        idle = [connection for connection in self.open if _idle(connection)]
        for connection in idle:
            connection.force_close()  # what aiohttp's keep-alive timer does to an idle connection
            self.open.discard(connection)
        return len(idle)

    async def answer_past_limit(self, request: web.BaseRequest) -> web.StreamResponse:
        """The one answer of a connection past the limit: a health check's, else a 503; then the connection closes."""
        if request.path in HEALTH_PATHS:
            response = await self._handle(request)
        else:
            response = error_response(overloaded(self.limit), new_request_id())
        response.force_close()
        return response


def limit_connections(
    app: web.Application, configured: int, *, refused: Callable[[], None] | None = None
) -> int | None:
    """Hold the server `app` is served by to `connection_limit(configured)`; that limit, or None when this aiohttp cannot.

    `refused` is told of each connection past the limit.
    """
    limit = connection_limit(configured)
    if not supported():
        log.warning("server.maxConnections is not enforced: aiohttp %s lacks the server parts it needs", aiohttp.__version__)
        return None
    make_handler = app._make_handler

    def make_guarded_handler(**kwargs: Any) -> web.Server:
        server = make_handler(**kwargs)
        ConnectionGuard(server, limit, refused=refused)  # kept by the server, whose methods it took
        return server

    app._make_handler = make_guarded_handler  # type: ignore[method-assign]
    source = "" if configured > 0 else f", from the file-descriptor limit {resource.getrlimit(resource.RLIMIT_NOFILE)[0]}"
    log.info("accepting up to %d client connections (server.maxConnections%s)", limit, source)
    return limit
