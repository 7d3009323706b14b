"""server.maxConnections: the client connections one process keeps open, and what comes past them.

Each connection holds a file descriptor, and each of its requests one more to its upstream: a
process out of descriptors can neither accept clients nor reach upstreams, and connections idle
between requests, or that never finish one, can alone hold every one of them for their keep-alive
time. So, with `limit` open:

- from NEAR_LIMIT of it on, as new connections arrive, connections with no request in progress are
  closed, least recently active first, until the count is under NEAR_LIMIT again: keep-alive
  connections between requests (a client opens a new one when it has something to ask), and
  connections that have sent no whole request in SILENT_SECONDS (silent, or a header sent slowly:
  they would hold their descriptor for the keep-alive time). A connection in a request, or
  streaming its answer, is never closed. `QuietConnections` finds the next one to close in O(1);
- past it, with none of those left to close, a new connection gets one answer and is closed:
  /healthz and /readyz as always (a busy process must not look dead to its orchestrator),
  anything else a 503 gateway_overloaded with Retry-After; one that sends nothing is closed
  after FIRST_REQUEST_SECONDS;
- past it by OVER_LIMIT_ROOM more, a new connection is closed at once.

`maxConnections: 0` (the default) takes the limit from the process's file-descriptor limit
(`connection_limit`).

It watches each connection through parts of aiohttp's server that only
gateway.server.aiohttp_internals reaches: the Server an application makes for its runner (its
`request_handler`, `connection_made` and `connection_lost` are wrapped), and a connection's own
handler, first-request deadline and request queue. With aiohttp's fast paths off, or without
those parts, the limit is not enforced, and that is logged.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from typing import Final, Generic, TypeVar

import aiohttp
from aiohttp import web

from gateway.core.errors import OverloadedError
from gateway.server.aiohttp_internals import (
    INTERNALS,
    answer_only_with,
    can_guard_connections,
    waits_for_request,
    watch_servers,
)
from gateway.server.middlewares import error_response, new_request_id

log = logging.getLogger("gateway")

RESERVED_FDS: Final = 64  # for the process's own: listening sockets, logs, the store's files and connections, DNS
UNLIMITED_FDS: Final = 1 << 20  # what an unlimited RLIMIT_NOFILE counts as
MIN_CONNECTIONS: Final = 8
NEAR_LIMIT: Final = 0.9  # of the limit: from here on connections with no request in progress are closed
SILENT_SECONDS: Final = 1.0  # a connection without a whole request after this long is silent, not about to ask
PUT_BACK_AT_MOST: Final = 8  # per new connection: those found finishing an answer, or starting a request, and passed over
OVER_LIMIT_ROOM: Final = 16  # connections past the limit that still get an answer
FIRST_REQUEST_SECONDS: Final = 5.0  # how long a connection past the limit may take to send its request
REASON: Final = "max_connections"  # what gateway_overloaded_total counts refused connections by
HEALTH_PATHS: Final = frozenset({"/healthz", "/readyz"})

RequestHandler = Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]
Connection = TypeVar("Connection", bound=Hashable)


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


class QuietConnections(Generic[Connection]):
    """The connections with no request in progress, each since when: the one to close first, in O(1).

    Two queues, least recently active first: `waiting` holds connections that have sent no whole
    request yet, since they were accepted; `kept` holds keep-alive connections between requests,
    since their last request ended. A waiting connection is closable only once it has waited
    `grace` seconds (a client that has just connected is about to ask). Each queue is an
    OrderedDict, whose first entry, removal and move to the end are O(1) (a plain dict's first
    entry costs a walk over the entries removed before it).
    """

    def __init__(self, *, grace: float) -> None:
        """Empty queues; a waiting connection is closable after `grace` seconds."""
        self.grace = grace
        self.waiting: OrderedDict[Connection, float] = OrderedDict()
        self.kept: OrderedDict[Connection, float] = OrderedDict()

    def __len__(self) -> int:
        return len(self.waiting) + len(self.kept)

    def opened(self, connection: Connection, now: float) -> None:
        """`connection` was accepted at `now`: waiting for its first request."""
        self.waiting[connection] = now

    def remove(self, connection: Connection) -> None:
        """`connection` started a request, or closed: not closable."""
        self.waiting.pop(connection, None)
        self.kept.pop(connection, None)

    def served(self, connection: Connection, now: float) -> None:
        """`connection` ended a request at `now` and stays open: the most recently active kept one."""
        self.kept[connection] = now
        self.kept.move_to_end(connection)

    def touch(self, connection: Connection, now: float) -> None:
        """`connection` was active at `now`: the most recently active of its queue."""
        queue = self.waiting if connection in self.waiting else self.kept
        queue[connection] = now
        queue.move_to_end(connection)

    def first(self, now: float) -> Connection | None:
        """The connection to close first at `now`: the less recently active of the first kept one and the first waiting one past its grace."""
        kept = next(iter(self.kept.items()), None)
        waiting = next(iter(self.waiting.items()), None)
        if waiting is not None and (now - waiting[1] < self.grace or (kept is not None and kept[1] <= waiting[1])):
            waiting = None
        chosen = waiting or kept
        return None if chosen is None else chosen[0]


class ConnectionGuard:
    """Counts a Server's connections and holds each new one to the limit (see the module docstring)."""

    def __init__(
        self,
        server: web.Server,
        limit: int,
        *,
        refused: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Watch `server`'s connections from now on; `refused` is told of each connection past the limit."""
        self.limit = limit
        self.near = max(int(limit * NEAR_LIMIT), 1)
        self.open: set[web.RequestHandler] = set()  # not counting the quiet ones closed, which are on their way out
        self.quiet: QuietConnections[web.RequestHandler] = QuietConnections(grace=SILENT_SECONDS)
        self.full = False
        self._refused = refused or (lambda: None)
        self._clock = clock
        self._handle: RequestHandler = server.request_handler
        self._made = server.connection_made
        self._lost = server.connection_lost
        server.request_handler = self.serve
        server.connection_made = self.connection_made  # type: ignore[method-assign]
        server.connection_lost = self.connection_lost  # type: ignore[method-assign]

    def connection_made(self, handler: web.RequestHandler, transport: asyncio.Transport) -> None:
        """A new connection (`handler` is aiohttp's for it): counted, and held to the limit."""
        self._made(handler, transport)
        self.open.add(handler)
        if len(self.open) >= self.near:
            self.close_quiet()
        count = len(self.open)
        if count <= self.limit:
            self.quiet.opened(handler, self._clock())
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
        answer_only_with(handler, self.answer_past_limit, first_request_seconds=FIRST_REQUEST_SECONDS)

    def connection_lost(self, handler: web.RequestHandler, exc: BaseException | None = None) -> None:
        self.open.discard(handler)
        self.quiet.remove(handler)
        self._lost(handler, exc)

    def close_quiet(self) -> int:
        """Close connections with no request in progress, least recently active first, until under `near`; how many.

        One found not waiting for a request (still sending its last answer, or its next request
        just arrived) is passed over to the end of its queue, PUT_BACK_AT_MOST at most: the work
        is the connections closed, each once, plus that constant.
        """
        closed = put_back = 0
        now = self._clock()
        while len(self.open) >= self.near and put_back < PUT_BACK_AT_MOST:
            connection = self.quiet.first(now)
            if connection is None:
                break
            if waits_for_request(connection):
                connection.force_close()  # what aiohttp's keep-alive timer does to an idle connection
                self.open.discard(connection)
                self.quiet.remove(connection)
                closed += 1
            else:
                self.quiet.touch(connection, now)
                put_back += 1
        return closed

    async def serve(self, request: web.BaseRequest) -> web.StreamResponse:
        """The Server's request handler: `request`'s connection is not closable until it ends."""
        connection = request.protocol
        self.quiet.remove(connection)
        try:
            return await self._handle(request)
        finally:
            if connection in self.open:
                self.quiet.served(connection, self._clock())

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
    if not can_guard_connections():
        reason = INTERNALS.reason if not INTERNALS.private else f"aiohttp {aiohttp.__version__} lacks the server parts it needs"
        log.warning("server.maxConnections is not enforced: %s", reason)
        return None
    # Each guard is kept by its server, whose methods it took.
    watch_servers(app, lambda server: ConnectionGuard(server, limit, refused=refused))
    source = "" if configured > 0 else f", from the file-descriptor limit {resource.getrlimit(resource.RLIMIT_NOFILE)[0]}"
    log.info("accepting up to %d client connections (server.maxConnections%s)", limit, source)
    return limit
