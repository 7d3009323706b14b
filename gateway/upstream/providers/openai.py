"""Pass-through to any OpenAI-compatible upstream on the one shared ClientSession."""

from __future__ import annotations

import os
import socket
import ssl
from collections.abc import Awaitable, Coroutine
from typing import Any

import aiohttp
from aiohttp import hdrs
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from gateway.core.errors import OverloadedError
from gateway.core.sse import Event, EventParser, EventTooLarge
from gateway.core.tree import Target
from gateway.observe.trace import STREAM_ERROR
from gateway.upstream.aiohttp_internals import DRAINABLE, arrival, is_closed, take_arrived
from gateway.upstream.providers.apis import RETRIEVE
from gateway.upstream.providers.base import JSON, Call, EventStream, OwnWords, Reply, TransportError, shortage

# Endpoints whose 2xx body is relayed as it arrives (speech audio can be long), not read first.
STREAMED_ANSWERS = frozenset({"audio/speech"})

_RELAYED = frozenset({"retry-after", "retry-after-ms"})
_RATE_LIMITS = ("x-ratelimit-", "anthropic-ratelimit-")
# Header names, spelled as upstreams send them, found not worth relaying (Date, Server, ...): an
# answer that has only these is passed over by one C-level set check. Bounded, so that an upstream
# inventing names costs only the plain loop, never memory.
_PASSED_OVER: set[str] = set()
_MOST_PASSED_OVER = 1024


def relayed_headers(headers: CIMultiDictProxy[str]) -> dict[str, str]:
    """The upstream headers a client should see: rate-limit state (OpenAI's and Anthropic's) and Retry-After."""
    if _PASSED_OVER.issuperset(headers.keys()):  # the usual answer: nothing to relay
        return {}
    relayed = {}
    for key, value in headers.items():
        if key in _PASSED_OVER:
            continue
        lower = key.lower()
        if lower.startswith(_RATE_LIMITS) or lower in _RELAYED:
            relayed[lower] = value
        elif len(_PASSED_OVER) < _MOST_PASSED_OVER:
            _PASSED_OVER.add(str(key))
    return relayed


def transport_error(exc: Exception) -> TransportError | OverloadedError:
    """A failure to build, send or read an upstream call, as the gateway tells it: mapped here and nowhere else.

    Any exception counts: besides aiohttp's and the OS's errors, aiohttp raises ValueError for a
    request it cannot make (a URL with credentials beside an Authorization header, a header
    value with a line break), TypeError, UnicodeError, ...; each is the attempt's failure, which
    the route's retries and fallbacks handle.

    The gateway's own shortage (out of file descriptors, ...) is an OverloadedError, not the
    upstream's failure. Texts come from the error's type and OS error, never from the text of
    aiohttp's errors, which carry the URL (its path may hold a secret) and the request headers;
    the attempt's target names where the call went.
    """
    if isinstance(exc, TransportError | OverloadedError):  # raised by this module inside a read
        return exc
    if (local := shortage(exc)) is not None:
        return local
    match exc:
        case OwnWords():
            return TransportError(str(exc))
        case aiohttp.ConnectionTimeoutError():
            return TransportError("upstream timed out (connecting)", status=504)
        case aiohttp.ServerTimeoutError() | TimeoutError():
            return TransportError("upstream timed out (reading)", status=504)
        case aiohttp.ClientConnectorDNSError():
            return TransportError(f"cannot resolve the upstream's host ({_os_reason(exc.os_error)})")
        case aiohttp.ClientConnectorError():
            return TransportError(f"cannot connect to upstream ({_os_reason(exc.os_error)})")
        case aiohttp.ServerDisconnectedError():
            return TransportError("upstream closed the connection")
        case aiohttp.ClientPayloadError():
            return TransportError("upstream response was cut off", kind=STREAM_ERROR)
        case aiohttp.ClientResponseError():  # an answer that is not HTTP aiohttp can read (a header too long, ...)
            cause = type(exc.__cause__).__name__ if exc.__cause__ is not None else f"status {exc.status}"
            return TransportError(f"upstream's answer could not be read as HTTP ({cause})", kind=STREAM_ERROR)
        case aiohttp.InvalidURL():
            return TransportError("the target's baseUrl is not a URL the gateway can call")
        case OSError():
            return TransportError(f"upstream connection failed ({_os_reason(exc)})")
    return TransportError(f"the call to the upstream could not be made ({type(exc).__name__})")


def _os_reason(error: OSError) -> str:
    """What went wrong with a socket, in the system's words (no address, no URL)."""
    if isinstance(error, OwnWords):
        return str(error.strerror or error)
    if isinstance(error, ssl.SSLCertVerificationError):
        return f"TLS certificate: {error.verify_message or error.reason}"
    if isinstance(error, ssl.SSLError):
        return f"TLS: {error.reason or type(error).__name__}"
    if isinstance(error, socket.gaierror):
        return str(error.strerror)
    if error.errno:
        return os.strerror(error.errno)
    return type(error).__name__


class OpenAIProvider:
    """Sends the body as bytes and relays the answer's bytes unchanged.

    `_url` and `_target_headers` say where a target's calls go and with which headers (built once
    per target and endpoint), `_call_headers` what one call adds: an upstream of another API that
    is passed through the same way (Anthropic's) overrides just those.
    """

    def __init__(self, session: aiohttp.ClientSession, *, max_response_bytes: int = 32 * 1024 * 1024) -> None:
        self._session = session
        self._max_response_bytes = max_response_bytes
        self._destinations: dict[tuple[Target, str], tuple[URL, CIMultiDict[str]]] = {}

    def _url(self, target: Target, endpoint: str) -> URL:
        return URL(f"{target.base_url}/{endpoint}")

    def _target_headers(self, target: Target) -> CIMultiDict[str]:
        # No Content-Type: the body carries its own (`_post`), one header less for aiohttp to copy
        # twice per call; a Content-Type among the target's headers still wins over a JSON body's.
        headers = CIMultiDict({"Accept": JSON})
        if target.api_key:
            headers["Authorization"] = f"Bearer {target.api_key}"
        headers.update(target.headers)
        return headers

    def _call_headers(self, call: Call, headers: CIMultiDict[str]) -> CIMultiDict[str]:
        """The target's headers as this call needs them: a multipart form keeps its own type and boundary."""
        if call.content_type == JSON or hdrs.CONTENT_TYPE not in headers:
            return headers
        headers = headers.copy()
        headers[hdrs.CONTENT_TYPE] = call.content_type
        return headers

    def _destination(self, call: Call) -> tuple[URL, CIMultiDict[str]]:
        """The URL of the call's endpoint and the headers of its target, built at the target's first call."""
        key = (call.target, call.endpoint)
        try:
            found = self._destinations[key] = (self._url(*key), self._target_headers(call.target))
        except Exception as exc:  # a baseUrl yarl refuses (a port out of range, say)
            raise transport_error(exc) from None
        return found

    def complete(self, call: Call) -> Coroutine[Any, Any, Reply]:
        if call.endpoint in STREAMED_ANSWERS:
            return self._open(call)
        # the exchange's own coroutine, handed back: no second frame on every request
        return self._exchange(self._post(call))

    def send(self, method: str, url: URL, call: Call) -> Coroutine[Any, Any, Reply]:
        """`call` sent to `url` by `method` (its body only with POST), the whole answer read."""
        data = call.body if method == "POST" else None
        headers = self._call_headers(call, self._target_headers(call.target))
        headers.setdefault(hdrs.CONTENT_TYPE, call.content_type)
        return self._exchange(self._session.request(method, url, data=data, headers=headers, allow_redirects=False))

    async def _open(self, call: Call) -> Reply:
        """A 2xx answer with its body left unread, for the client to get as it arrives."""
        try:
            response = await self._post(call)
        except Exception as exc:  # see transport_error
            raise transport_error(exc) from None
        if response.status < 300:
            headers = relayed_headers(response.headers)
            return Reply(response.status, b"", content_type=_content_type(response), headers=headers, unread=_UnreadBody(response))
        return await self._exchange(response)

    async def stream(self, call: Call) -> Reply | EventStream:
        try:
            response = await self._post(call)
        except Exception as exc:  # see transport_error
            raise transport_error(exc) from None
        if response.status < 300 and _is_event_stream(response):
            return _UpstreamEvents(response)
        return await self._exchange(response)

    def _post(self, call: Call) -> Awaitable[aiohttp.ClientResponse]:
        # awaited, not entered with `async with`: the context manager's __aenter__ would be one more frame
        url, headers = self._destinations.get((call.target, call.endpoint)) or self._destination(call)
        if call.content_type != JSON or call.client_headers:
            headers = self._call_headers(call, headers)
        raw = call.raw  # the client's bytes, as they usually go; `body` (a property, called from C) otherwise
        body = aiohttp.BytesPayload(raw if raw is not None else call.body, content_type=call.content_type)
        return self._session.request("POST", url, data=body, headers=headers, allow_redirects=False)

    async def _exchange(self, answer: aiohttp.ClientResponse | Awaitable[aiohttp.ClientResponse]) -> Reply:
        """The answer (or the request whose answer is awaited) read whole, up to the limit; then released.

        Past the limit the answer is dropped, never buffered.
        """
        limit = self._max_response_bytes
        try:
            response = answer if isinstance(answer, aiohttp.ClientResponse) else await answer
            content = response.content
            if content.is_eof():
                # The usual small answer came whole with its headers, and aiohttp gave its connection
                # back at its end (closed the response): taken as it is, without readany()'s coroutine.
                body = content.read_nowait()
                if not is_closed(response):  # (an upgraded connection is not given back by itself)
                    response.release()
            else:
                body = await _read_arriving(response, limit)
            if len(body) > limit:
                raise _too_large(response, limit)
        except Exception as exc:  # see transport_error
            raise transport_error(exc) from None
        return Reply(response.status, body, content_type=_content_type(response), headers=relayed_headers(response.headers))


async def _read_arriving(response: aiohttp.ClientResponse, limit: int) -> bytes:
    """A body still arriving, read up to a byte past `limit` (refused at once when its Content-Length is over it); then released."""
    try:
        length = response.content_length  # of the bytes on the wire: a compressed body grows when read
        if length is not None and length > limit:
            raise _too_large(response, limit)
        content = response.content
        body = await content.readany()
        if not content.at_eof():  # more to come
            pieces = bytearray(body)
            while len(pieces) <= limit and (piece := await content.readany()):
                pieces += piece
            body = bytes(pieces)
        return body
    finally:
        if not response.closed:  # read to its end, it gave its connection back itself: see _let_go
            response.release()


def _is_event_stream(response: aiohttp.ClientResponse) -> bool:
    """Whether the answer is an SSE stream: its Content-Type as usually spelled, else as aiohttp parses it."""
    return response.headers.get(hdrs.CONTENT_TYPE) == "text/event-stream" or response.content_type == "text/event-stream"


def _content_type(response: aiohttp.ClientResponse) -> str:
    """The answer's Content-Type as the upstream sent it, parameters (a charset) included."""
    # not aiohttp's parsed `content_type`, which drops the charset and costs a parse per answer
    return response.headers.get(hdrs.CONTENT_TYPE) or "application/octet-stream"


def _let_go(response: aiohttp.ClientResponse) -> None:
    """Done with `response`: its connection goes back to the pool if its body was read to the end, else is dropped."""
    # aiohttp gives the connection back itself when the body ends (the response is then closed):
    # release() would only mark the finished body, once more per answer.
    if is_closed(response):
        return
    if response.content.at_eof():
        response.release()
    else:  # an unfinished body cannot go back to the pool
        response.close()


def _too_large(response: aiohttp.ClientResponse, limit: int) -> TransportError:
    response.close()  # the rest of the body is never read: the connection cannot go back to the pool
    return TransportError(f"upstream response larger than server.maxResponseBytes ({limit} bytes)", kind=STREAM_ERROR)


class _UnreadBody:
    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response

    async def next_piece(self) -> bytes:
        try:
            return await self._response.content.readany()
        except Exception as exc:  # see transport_error
            raise transport_error(exc) from None

    async def close(self) -> None:
        _let_go(self._response)


class _UpstreamEvents(EventStream):
    def __init__(self, response: aiohttp.ClientResponse) -> None:
        super().__init__(response.status, relayed_headers(response.headers))
        self._response = response
        self._parser = EventParser()

    async def _read(self) -> list[Event]:
        """The events of the next network reads, up to one that completes any; none at the end."""
        # The bytes taken here, not in a coroutine of their own: each coroutine is one more frame to
        # create and to pass through on every wake-up, for every read of a stream.
        content = self._response.content
        drainable = type(content) is DRAINABLE  # else readany() (EMPTY_PAYLOAD has no buffer)
        while True:
            try:
                if drainable:  # all the bytes that have arrived at once, waiting for some
                    while (chunk := take_arrived(content)) is None:
                        await arrival(content)
                else:
                    chunk = await content.readany()
            except Exception as exc:  # see transport_error
                raise transport_error(exc) from None
            if not chunk:
                if self._parser.pending.strip():
                    raise TransportError("upstream stream ended inside an event", kind=STREAM_ERROR)
                return []
            try:
                events = self._parser.feed(chunk)
            except EventTooLarge as exc:
                raise TransportError(f"upstream stream: {exc}", kind=STREAM_ERROR) from None
            if events:
                return events

    async def close(self) -> None:
        _let_go(self._response)


class StoredResponses:
    """A stored response read or deleted on an OpenAI upstream: `{baseUrl}/responses/{id}`.

    The call's payload names the `response_id` (checked by the caller to be URL-safe) and the
    client's `query` string, passed on as it is.
    """

    def __init__(self, provider: OpenAIProvider) -> None:
        self._provider = provider

    async def complete(self, call: Call) -> Reply:
        url = URL(f"{call.target.base_url}/responses/{call.payload['response_id']}", encoded=True)
        if query := call.payload.get("query"):
            url = url.with_query(query)
        return await self._provider.send("GET" if call.endpoint == RETRIEVE else "DELETE", url, call)

    async def stream(self, call: Call) -> Reply | EventStream:
        return await self.complete(call)
