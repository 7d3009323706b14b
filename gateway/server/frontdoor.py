"""The way in for requests to plain paths: one dict lookup in place of aiohttp's router.

For every request aiohttp's `Application` resolves the path through its router, builds a match
info, stacks the application on it, freezes it, looks up the middleware chain built for that
handler and runs it behind one more middleware of its own that sets `current_app`: a fifth of
the work the gateway adds to a bare aiohttp proxy. A plain path (no `{placeholder}`) always
resolves to the same route, so its match info and its middleware chain can be built once, at
start, and a request for it found by one dict lookup.

Everything the table does not hold goes through the Application as before: paths with
placeholders, paths spelled any other way (a query string, percent-escapes, a double slash),
methods a path does not take, and `Expect: 100-continue`, which aiohttp's route answers.

The door takes over aiohttp's own way in (gateway.server.aiohttp_internals): with aiohttp's fast
paths off it stays shut, the Application routes every request, and a reload is refused.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Final

from aiohttp import hdrs, web
from aiohttp.typedefs import Handler, Middleware

from gateway.server.aiohttp_internals import (
    application_handler,
    bind_match_info,
    can_replace_handler,
    replace_application_handler,
)

_Entry = tuple[Handler, web.UrlMappingMatchInfo]


class FrontDoor:
    """The Application's request handler, with plain paths looked up in a table.

    Build it after the routes and middlewares are final; routes added later go through the
    router. The gateway mounts no sub-applications, so the match info's one application is
    the current one, which is all `_fix_request_current_app` would set.

    `serve` points the door at another application built the same way (a reloaded
    configuration): each request is handed to the application the door serves when it arrives,
    and keeps it as its `request.app` until it ends.
    """

    def __init__(self, app: web.Application) -> None:
        self._fallback: Handler = application_handler(app)  # aiohttp's own way in, kept for the rest
        self._entries = _table(app)

    def serve(self, app: web.Application) -> None:
        """Hand every request that arrives from now on to `app` (frozen, never opened a door of its own)."""
        # Both in one step, with no await: no request can see the table of one and the router of the other.
        self._entries, self._fallback = _table(app), application_handler(app)

    def paths(self) -> set[tuple[str, str]]:
        """The (method, path) pairs answered from the table."""
        return set(self._entries)

    def handle(self, request: web.Request) -> Awaitable[web.StreamResponse]:
        """Start serving `request`: the handler's coroutine (through the middlewares), from the table or the router."""
        # Not a coroutine itself: it hands aiohttp the handler's coroutine, so that the door is
        # not one more frame to pass through on each of the request's wake-ups.
        entry = self._entries.get((request.method, request.raw_path))
        if entry is None or hdrs.EXPECT in request.headers:
            return self._fallback(request)
        handler, match_info = entry
        bind_match_info(request, match_info)
        return handler(request)

    __call__ = handle


FRONT_DOOR: Final = web.AppKey("front_door", FrontDoor)  # the served application's door, when it has one


def _table(app: web.Application) -> dict[tuple[str, str], _Entry]:
    """The handler (behind `app`'s middlewares) and match info of each (method, plain path) of `app`."""
    entries: dict[tuple[str, str], _Entry] = {}
    middlewares = tuple(reversed(app.middlewares))
    for resource in app.router.resources():
        if not isinstance(resource, web.PlainResource) or any(r.method == hdrs.METH_ANY for r in resource):
            continue  # a route for any method would shadow the ones after it
        path = resource.canonical
        for route in resource:
            if (route.method, path) in entries:  # the router takes the first: so do we
                continue
            handler = route.handler
            for middleware in middlewares:  # the last middleware innermost, as aiohttp stacks them
                handler = _wrapped(middleware, handler)
            match_info = web.UrlMappingMatchInfo({}, route)
            match_info.add_app(app)
            match_info.freeze()
            entries[route.method, path] = (handler, match_info)
    return entries


def _wrapped(middleware: Middleware, handler: Handler) -> Handler:
    """`handler` behind `middleware`, as aiohttp's `partial(middleware, handler=handler)` stacks it.

    A closure, not a partial: a partial given a keyword is called through C with a dict of its
    keywords, built anew for each request.
    """

    def call(request: web.Request) -> Awaitable[web.StreamResponse]:
        return middleware(request, handler=handler)

    return call


def can_open(app: web.Application) -> bool:
    """Whether `app` is built as the door assumes and aiohttp's fast paths let it take over its way in.

    The door stacks middlewares as new-style ones (`handler` by keyword) and sets a match info's
    current application to `app`: old-style middlewares or sub-applications leave the door shut.
    """
    return (
        all(getattr(middleware, "__middleware_version__", None) == 1 for middleware in app.middlewares)
        and not any(isinstance(resource, web.PrefixedSubAppResource) for resource in app.router.resources())
        and can_replace_handler(app)
    )


def open_front_door(app: web.Application) -> FrontDoor | None:
    """Serve `app`'s plain paths through a FrontDoor, when `can_open(app)`; returns it, or None."""
    if not can_open(app):
        return None
    door = FrontDoor(app)
    # The bound method, not the door: an instance's __call__ is reached through one more C
    # call on every request.
    replace_application_handler(app, door.handle)
    return door
