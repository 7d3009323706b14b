"""aiohttp's private server parts the gateway reaches into, each beside the public way to the same result.

This is the one module of the server side that touches an underscore name of an aiohttp object
(the client side has its own, gateway.upstream.aiohttp_internals). Each private part is a fast
path: it does what a public property or method does, without the Python-level call that the
property or method costs on every request. Those parts were verified on aiohttp VERIFIED_FROM to
VERIFIED_TO. On any other version, or with GATEWAY_AIOHTTP_INTERNALS=off in the environment
(read once, at import), every fast path takes aiohttp's public API instead (`PUBLIC_PARTS`), with
the same results; the tests run once that way too. gateway.core.internals makes that choice, as
for the client side's and litellm's private names.

Two features have no public way at all, and are off with the fast paths:
- the front door (gateway.server.frontdoor), which answers plain paths from a table and hands
  requests to a reloaded configuration: without it aiohttp's Application routes every request,
  and a reload is refused (restart to apply a new file);
- the connection guard (gateway.server.connections): without it server.maxConnections is not
  enforced, which is logged;
- the server's own answers in the API's error shape (`answer_errors_in_json`): a request aiohttp
  cannot parse is refused by aiohttp before any gateway code runs, and without this in its
  plain text (same status, 400).
"""

from __future__ import annotations

import asyncio
import inspect
import os
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, Final

import aiohttp
from aiohttp import web
from aiohttp.http_exceptions import (
    BadHttpMethod,
    BadStatusLine,
    ContentEncodingError,
    ContentLengthError,
    HttpProcessingError,
    InvalidHeader,
    InvalidURLError,
    LineTooLong,
    TransferEncodingError,
)
from aiohttp.typedefs import Handler
from multidict import CIMultiDict

from gateway.core.aiohttp_releases import SWITCH, VERIFIED_RANGE, internals_for
from gateway.core.errors import GatewayError, InvalidRequestError
from gateway.core.internals import Mode, announce

INTERNALS: Final = internals_for(aiohttp.__version__, os.environ.get(SWITCH))
MODE: Final = INTERNALS.mode
FAST: Final = MODE is Mode.PRIVATE


def announce_mode() -> None:
    """Log, once per process, that the fast paths are off because of aiohttp's version."""
    announce(INTERNALS, f"the server's fast paths were verified on {VERIFIED_RANGE} only; serving through aiohttp's public API")


Store = MutableMapping[Any, Any]
Unsent = CIMultiDict[str] | None  # a response's headers while they can still change; None once they went out


@dataclass(frozen=True, slots=True)
class Parts:
    """One way to each part: the private one, or the public one with the same result."""

    request_state: Callable[[web.BaseRequest], Store]
    """What `request[KEY]` reads and writes (the private way: its dict, not its Python __getitem__)."""
    app_state: Callable[[web.Application], Store]
    """What `app[KEY]` reads and writes."""
    body_and_limit: Callable[[web.BaseRequest], tuple[aiohttp.StreamReader, int]]
    """`request.content` and `request.client_max_size`."""
    status_and_unsent: Callable[[web.StreamResponse], tuple[int, Unsent]]
    """`response.status`, and `response.headers` unless `response.prepared`."""
    event_stream_response: type[web.StreamResponse]
    """A StreamResponse for an event stream: the private way sends its headers with the first event, in one send."""


def _itself(thing: Any) -> Store:
    """`thing` (a request or an application), whose own item access is the public way to its state."""
    return thing  # type: ignore[no-any-return]


def _status_and_unsent(response: web.StreamResponse) -> tuple[int, Unsent]:
    return response.status, None if response.prepared else response.headers


def _private_status_and_unsent(response: web.StreamResponse) -> tuple[int, Unsent]:
    # `prepared` is `_eof_sent or _payload_writer is not None`
    unsent = response._payload_writer is None and not response._eof_sent
    return response._status, response._headers if unsent else None


class _HeadersWithFirstEvent(web.StreamResponse):
    """A stream response whose headers go out with its first write: one send to the client, not two.

    The relay writes right after prepare() (the first event is in hand), so holding the headers
    back delays nothing; aiohttp's own Response buffers its headers the same way.
    """

    _send_headers_immediately = False


PRIVATE_PARTS: Final = Parts(
    request_state=attrgetter("_state"),
    app_state=attrgetter("_state"),
    body_and_limit=attrgetter("_payload", "_client_max_size"),
    status_and_unsent=_private_status_and_unsent,
    event_stream_response=_HeadersWithFirstEvent,
)
PUBLIC_PARTS: Final = Parts(
    request_state=_itself,
    app_state=_itself,
    body_and_limit=attrgetter("content", "client_max_size"),
    status_and_unsent=_status_and_unsent,
    event_stream_response=web.StreamResponse,
)
PARTS: Final = PRIVATE_PARTS if FAST else PUBLIC_PARTS

# Module names for the chosen parts: the hot paths call them without an attribute lookup.
request_state: Final = PARTS.request_state
app_state: Final = PARTS.app_state
body_and_limit: Final = PARTS.body_and_limit
status_and_unsent: Final = PARTS.status_and_unsent
EventStreamResponse: Final = PARTS.event_stream_response


# The front door: Application._handle, which aiohttp's runners call for each request, and the
# match info it sets on the request.


def can_replace_handler(app: web.Application) -> bool:
    """Whether `app`'s request handler may be replaced by one that sets each request's match info itself."""
    return (
        FAST
        and callable(getattr(app, "_handle", None))
        and all(hasattr(web.UrlMappingMatchInfo, name) for name in ("add_app", "freeze", "current_app"))
        and "_match_info" in getattr(web.Request, "ATTRS", ())
    )


def application_handler(app: web.Application) -> Handler:
    """The handler aiohttp's runners call for each request of `app` (its router and middlewares)."""
    return app._handle


def replace_application_handler(app: web.Application, handle: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> None:
    """Have aiohttp's runners (AppRunner, TestServer) call `handle` for each request of `app`, from now on."""
    app._handle = handle  # type: ignore[method-assign,assignment]


def bind_match_info(request: web.Request, match_info: web.UrlMappingMatchInfo) -> None:
    """Give `request` the match info (route and application) that Application._handle would have set."""
    request._match_info = match_info


# The connection guard: the Server an application makes for its runner, and each connection's
# (RequestHandler's) handler, first-request deadline and queue.

_CONNECTION_PARTS: Final = ("_request_handler", "_keepalive_timeout", "_waiter", "_messages")


def can_guard_connections() -> bool:
    """Whether the parts the connection guard uses are there (see gateway.server.connections)."""
    return (
        FAST
        and callable(getattr(web.Application, "_make_handler", None))
        and all(callable(getattr(web.Server, name, None)) for name in ("connection_made", "connection_lost"))
        and all(name in getattr(web.RequestHandler, "__slots__", ()) for name in _CONNECTION_PARTS)
    )


def watch_servers(app: web.Application, watch: Callable[[web.Server], object]) -> None:
    """Call `watch` with each Server that `app` makes for a runner to serve, before it serves."""
    make_handler = app._make_handler

    def make_watched_handler(**kwargs: Any) -> web.Server:
        server = make_handler(**kwargs)
        watch(server)
        return server

    app._make_handler = make_watched_handler  # type: ignore[method-assign]


def answer_only_with(
    connection: web.RequestHandler,
    handler: Callable[[web.BaseRequest], Awaitable[web.StreamResponse]],
    *,
    first_request_seconds: float,
) -> None:
    """Have `connection`, just made, answer with `handler`, and close unless a request starts within `first_request_seconds`."""
    connection._request_handler = handler
    connection._keepalive_timeout = first_request_seconds


def waits_for_request(connection: web.RequestHandler) -> bool:
    """Whether `connection` waits for a request: none in progress or queued (aiohttp's keep-alive timer asks the same)."""
    waiter: asyncio.Future[None] | None = connection._waiter
    return not connection._messages and waiter is not None and not waiter.done()


# The server's own answers: RequestHandler.handle_error, which aiohttp calls for a request it
# could not parse (400), and for a handler that raised (500) or timed out (504) past the
# middlewares, writes plain text. A Server that makes connections of a subclass has them written
# in the API's error shape; Application._make_handler makes the Server a runner serves.

_SERVER_PARTS: Final = ("_loop", "_kwargs")
_HANDLE_ERROR_PARAMETERS: Final = ("self", "request", "status", "exc", "message")
PARSE_ERROR_CODE: Final = "invalid_http_request"
REASON_CHARS: Final = 100
QUOTES: Final = frozenset("'\"\\")  # a reason with one of these may quote the client's bytes
# What the client is told of a parse error whose reason quotes its bytes: the kind of mistake, most specific first.
_PARSE_ERROR_KINDS: Final = (
    (InvalidHeader, "a malformed header"),
    (BadHttpMethod, "an invalid method"),
    (BadStatusLine, "a malformed request line"),
    (InvalidURLError, "a malformed URL"),
    (TransferEncodingError, "a malformed chunked body"),
    (ContentLengthError, "a body shorter than its Content-Length"),
)


def parse_error_reason(exc: HttpProcessingError) -> str:
    """What a client is told of the request aiohttp could not parse: the kind of mistake, never the bytes it quotes.

    llhttp's messages are its reason ("Invalid header value char", "Duplicate Content-Length"),
    a blank line, then the bytes quoted and a caret: the reason's last line is kept. aiohttp's
    own are one line, kept when it quotes nothing; else the class says what kind of mistake.
    """
    if isinstance(exc, LineTooLong):
        return f"a line longer than {exc.args[1]} bytes (the request line or a header)"  # args: line, limit, size
    head, blank, _ = exc.message.partition("\n\n")
    reason = head.rsplit("\n", 1)[-1].strip().rstrip(":.")
    if reason and reason.isprintable() and len(reason) <= REASON_CHARS and (blank or not QUOTES & set(reason)):
        return reason
    return next((kind for cls, kind in _PARSE_ERROR_KINDS if isinstance(exc, cls)), "not valid HTTP/1.1")


def server_error(status: int, exc: BaseException | None) -> GatewayError:
    """The API's error for aiohttp's own answer with `status` to a request that raised `exc` (None: none)."""
    if isinstance(exc, ContentEncodingError) and status < 500:  # as gateway.server.bodies answers an undecodable body
        return InvalidRequestError(
            "The request body could not be read: its Content-Encoding cannot be decoded.", status=status, code="invalid_body"
        )
    if isinstance(exc, HttpProcessingError) and status < 500:
        return InvalidRequestError(f"Malformed HTTP request: {parse_error_reason(exc)}.", status=status, code=PARSE_ERROR_CODE)
    if status < 500:
        return InvalidRequestError("The request could not be read.", status=status)
    return GatewayError("The gateway failed to handle this request.", status=status, code="internal_error")


class _JsonErrorsConnection(web.RequestHandler):
    """A connection whose own error answers are the API's error, in JSON (see `answer_errors_in_json`)."""

    __slots__ = ()

    def handle_error(
        self, request: web.BaseRequest, status: int = 500, exc: BaseException | None = None, *args: Any, **kwargs: Any
    ) -> web.StreamResponse:
        """aiohttp's answer, logged and closing the connection as aiohttp does, with its status and the API's body.

        aiohttp passes (request, status, exc, message), by position; its message quotes the
        client's bytes, and a traceback in debug mode: neither is sent.
        """
        plain = super().handle_error(request, status, exc, *args, **kwargs)
        error = server_error(plain.status, exc)
        answer = web.Response(body=error.to_json(), status=plain.status, content_type="application/json")
        answer.force_close()
        return answer


class _JsonErrorsServer(web.Server):
    """A Server whose connections give their own error answers in the API's shape."""

    def __call__(self) -> web.RequestHandler:
        return _JsonErrorsConnection(self, loop=self._loop, **self._kwargs)


def can_answer_errors_in_json() -> bool:
    """Whether the parts `answer_errors_in_json` uses are there and as read."""
    handle_error = getattr(web.RequestHandler, "handle_error", None)
    return (
        FAST
        and callable(getattr(web.Application, "_make_handler", None))
        and callable(handle_error)
        and tuple(inspect.signature(handle_error).parameters) == _HANDLE_ERROR_PARAMETERS
    )


def json_errors_server(made: web.Server) -> web.Server:
    """The Server `made` as one whose connections answer errors in JSON; `made` itself when it is not aiohttp's plain Server as read."""
    if type(made) is not web.Server or not all(hasattr(made, name) for name in _SERVER_PARTS):
        return made
    return _JsonErrorsServer(
        made.request_handler,
        request_factory=made.request_factory,
        handler_cancellation=made.handler_cancellation,
        loop=made._loop,
        **made._kwargs,
    )


def answer_errors_in_json(app: web.Application) -> bool:
    """Have the server `app` is served by give its own error answers in the API's shape; whether this aiohttp can.

    Call it before `watch_servers`, whose watchers then see the server that serves. Without it
    aiohttp's answers are its own plain text, with the same status.
    """
    if not can_answer_errors_in_json():
        return False
    make_handler = app._make_handler

    def make_json_errors_server(**kwargs: Any) -> web.Server:
        return json_errors_server(make_handler(**kwargs))

    app._make_handler = make_json_errors_server  # type: ignore[method-assign]
    return True
