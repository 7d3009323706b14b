"""Cross-cutting request work: request id, OpenAI-shaped errors, gateway-key auth."""

from __future__ import annotations

import itertools
import logging
import os
import re
from collections.abc import Callable, Mapping, Sequence
from hashlib import sha256
from typing import Final

import orjson
from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from gateway.core.errors import (
    AuthenticationError,
    GatewayError,
    InvalidRequestError,
    MethodNotAllowedError,
    NotFoundError,
    PayloadTooLargeError,
)
from gateway.core.settings import ApiKey
from gateway.core.translate.messages import error_body as anthropic_error_body
from gateway.governance.admission import Governor
from gateway.governance.stored_keys import KeyStoreUnavailableError, StoredKey, StoredKeys
from gateway.observe import trace as observe
from gateway.observe.trace import Observer, Trace
from gateway.server.admissions import settle_ended
from gateway.server.aiohttp_internals import request_state, status_and_unsent
from gateway.server.keys import STREAM_STARTED, TRACE, InFlight
from gateway.server.limit_headers import add_quota_headers

log = logging.getLogger("gateway")

SHARED_TENANT = "default"
ANTHROPIC_PATH = "/v1/messages"  # errors there take Anthropic's shape
_REQUEST_ID = re.compile(r"[\x21-\x7e]{1,200}")
# The header as SDKs send it: the scheme so spelled, one space, visible ASCII. Such a token needs
# none of the trimming and checks of `_any_token`, which takes every other spelling.
_PLAIN_BEARER: Final = re.compile(r"Bearer ([\x21-\x7e]+)")
_KNOWN_HEADERS: Final = 1024  # Authorization values remembered (each holds a valid key)
# Request ids need to be unique, not secret: a per-process random prefix and a counter are
# unique across workers and restarts, and cost a fraction of uuid4's urandom call.
# A map over a counter, called through its __next__: each id is made in C, with no Python frame.
_request_ids = map(f"req_{os.urandom(6).hex()}%010x".__mod__, itertools.count(1))
new_request_id: Final[Callable[[], str]] = _request_ids.__next__  # a new request id


def error_response(error: GatewayError, request_id: str | None = None, *, anthropic: bool = False) -> web.Response:
    """The error as the client's API shapes it: OpenAI's, or Anthropic's on `/v1/messages`."""
    body = error.to_json()
    if anthropic:
        message = error.message.encode(errors="replace").decode()  # lone surrogates from header bytes
        body = orjson.dumps(anthropic_error_body(error.status, message))
    response = web.Response(body=body, status=error.status, content_type="application/json")
    response.headers.update(error.headers)
    if request_id is not None:
        response.headers["x-request-id"] = request_id
    if response.headers.get("Connection", "").lower() == "close":
        response.force_close()
    return response


async def send_and_close(request: web.Request, response: web.StreamResponse) -> None:
    """Send `response`, then drop the connection at once.

    Left to itself aiohttp keeps reading a body the handler did not read, for up to its
    lingering time (10 s), before it closes: pointless for a client cut off for being slow.
    """
    await response.prepare(request)
    await response.write_eof()
    request.protocol.force_close()


def _from_http_exception(exc: web.HTTPException, request: web.Request) -> GatewayError:
    if isinstance(exc, web.HTTPNotFound):
        return NotFoundError(f"Unknown path: {request.method} {request.path}")
    if isinstance(exc, web.HTTPMethodNotAllowed):
        allowed = ", ".join(sorted(exc.allowed_methods))
        return MethodNotAllowedError(
            f"Method {request.method} is not allowed on {request.path} (allowed: {allowed}).",
            headers={"Allow": allowed},
        )
    if isinstance(exc, web.HTTPRequestEntityTooLarge):
        return PayloadTooLargeError(
            f"The request body is larger than the limit of {request.client_max_size} bytes."
        )
    if exc.status < 500:
        return InvalidRequestError(exc.reason, status=exc.status, code=None)
    return GatewayError(exc.reason, status=exc.status)


class Authenticator:
    """Maps `Authorization: Bearer <gateway key>` to the key's name (the tenant).

    The keys are the configured ones (`keys`), the admin keys (tenants too, which alone manage
    keys) and the keys issued through the API (`stored`, the process's snapshot, which the key
    refresher replaces whole on each change). With none of them every caller shares one tenant.
    Keys are kept as SHA-256 digests and a token is looked up by its digest: what the lookup's
    timing could tell is about digests, which a caller cannot steer toward a key's without knowing
    the key. An `Authorization` value once found to hold a valid key is remembered as it came (so
    valid keys stay in the process's memory as text, as a config's `key:` does) and looked up
    first, by a string hash the caller cannot steer either; a wrong key is never remembered, and
    a stored key only until the snapshot changes, so a revoked key stops working at the refresh.

    A stored key whose name is a configured one (the config gained it after the key was issued) is
    no key: it would take the configured tenant's rights, an admin key's included. It is told once
    per snapshot, by name, and DELETE /v1/gateway/keys/{name} removes it. While the snapshot awaits
    the store's first read, a key found nowhere may be a stored one: a 503, not a 401.
    """

    def __init__(self, keys: Sequence[ApiKey], *, admin_keys: Sequence[ApiKey] = (), stored: StoredKeys | None = None) -> None:
        # a repeated key: the last name, as before; an admin key's name wins over a key's
        self._tenants = {key.sha256: key.name for key in (*keys, *admin_keys)}
        self._admins = frozenset(key.name for key in admin_keys)
        self._configured = frozenset(self._tenants.values())
        self._stored = stored
        # `Authorization` values already found to hold a configured key, with their tenant: a
        # client sends the same header on every request, and a dict lookup spares it the pattern
        # match and the SHA-256. Only headers carrying a valid key get in, so a caller cannot grow
        # it without a key; it is a dict of strings, looked up by a hash the caller cannot steer,
        # like the digests.
        self._known: dict[str, str] = {}
        # The same for stored keys, valid while the snapshot's digests are the map they were found in.
        self._known_stored: dict[str, str] = {}
        self._stored_seen: Mapping[bytes, StoredKey] | None = None
        if stored is not None:
            self._see(stored)

    def is_admin(self, tenant: str) -> bool:
        """Whether `tenant` is an admin key's: it may manage keys and see every key's usage."""
        return tenant in self._admins

    def tenant(self, request: web.Request) -> str:
        if not self._tenants and (self._stored is None or not self._stored.by_digest):
            return SHARED_TENANT
        authorization = request.headers.get("Authorization", "")
        tenant = self._known.get(authorization)
        if tenant is not None:
            return tenant
        stored = self._stored
        if stored is not None:
            if stored.by_digest is not self._stored_seen:  # refreshed: what was found in the old maps may be revoked
                self._see(stored)
            tenant = self._known_stored.get(authorization)
            if tenant is not None:
                return tenant
        plain = _PLAIN_BEARER.fullmatch(authorization)
        token = plain[1] if plain is not None else _any_token(request.headers, authorization)
        digest = sha256(token.encode()).digest()
        tenant = self._tenants.get(digest)
        known = self._known
        if tenant is None and stored is not None:
            issued = stored.by_digest.get(digest)
            if issued is not None and issued.name not in self._configured:
                tenant = issued.name
            elif stored.awaiting_store:
                raise KeyStoreUnavailableError("The gateway has not read its key store yet; try again shortly.")
            known = self._known_stored
        if tenant is None:
            raise AuthenticationError("Incorrect gateway API key provided.")
        if plain is not None and len(known) < _KNOWN_HEADERS:
            known[authorization] = tenant
        return tenant

    def _see(self, stored: StoredKeys) -> None:
        """Take `stored`'s maps as the ones stored keys are found in, and tell its keys that configured names shadow."""
        self._known_stored.clear()
        self._stored_seen = stored.by_digest
        for name in sorted(self._configured.intersection(stored.by_name)):
            log.warning(
                "stored gateway key %r: the config now has a key of that name, so this issued key no longer "
                "authenticates; DELETE /v1/gateway/keys/%s removes it (the configured key stays)",
                name, name,
            )  # fmt: skip


def _any_token(headers: Mapping[str, str], authorization: str) -> str:
    """The token of a bearer header spelled any way, or of `x-api-key`; a 401 when it cannot be a key."""
    scheme, _, token = authorization.partition(" ")
    if not scheme and "x-api-key" in headers:  # how Anthropic's clients send a key
        scheme, token = "bearer", headers["x-api-key"]
    token = token.strip()
    if not token or scheme.lower() != "bearer":
        raise AuthenticationError(
            "Missing gateway API key: send 'Authorization: Bearer <key>' (or 'x-api-key: <key>')."
        )
    # aiohttp keeps undecodable header bytes as lone surrogates, which encode() refuses. Keys
    # are sent as printable ASCII (HTTP clients send headers so), so any other token is simply
    # an incorrect key.
    if not (token.isascii() and token.isprintable()):
        raise AuthenticationError("Incorrect gateway API key provided.")
    return token


async def _failure_response(request: web.Request, exc: Exception, request_id: str) -> web.StreamResponse:
    """The API-shaped answer to a request that failed before its response started."""
    anthropic = request.path == ANTHROPIC_PATH or request.path.startswith(ANTHROPIC_PATH + "/")
    if isinstance(exc, GatewayError):
        response = error_response(exc, request_id, anthropic=anthropic)
        if response.keep_alive is False:  # the error ends the connection: sent here, with a limited key's headers
            add_quota_headers(request_state(request), response.headers)
            await send_and_close(request, response)
        return response
    if isinstance(exc, web.HTTPException):
        if exc.status < 400:
            raise exc
        return error_response(_from_http_exception(exc, request), request_id, anthropic=anthropic)
    log.error("unhandled error in %s %s (request %s)", request.method, request.path, request_id, exc_info=exc)
    error = GatewayError("The gateway failed to handle this request.", code="internal_error")
    return error_response(error, request_id, anthropic=anthropic)


def gateway_middleware(
    auth: Authenticator,
    observer: Observer | None = None,
    model_paths: Mapping[str, str] | None = None,
    *,
    inflight: InFlight | None = None,
    governor: Governor | None = None,
) -> Middleware:
    """Request id, auth on /v1, an OpenAI-shaped body for every failure, and the request's Trace.

    `model_paths` maps the paths of model requests to their endpoint, so that they are counted
    as such even when they fail before a handler runs (a wrong key). `inflight` counts the
    requests being answered, from their start to their end, so that a reload knows when the
    configuration it replaced has no request left. `governor`: the configuration's when it may
    limit requests, whose admissions are then settled here as they end (admissions.settle_ended), and
    whose answers not yet started get the key's x-ratelimit-* headers here (limit_headers.add_quota_headers).

    One middleware layer rather than four: each layer is another coroutine frame resumed on
    every I/O wake-up of the request, and none of these steps needs to await.
    """
    observer = observer or Observer()
    model_paths = model_paths or {}
    inflight = inflight or InFlight()

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        # The raw path, which the front door read already: a model path spelled plainly is its
        # own decoded path, and decoding one (a query, escapes) is work each request would repeat.
        path = request.raw_path
        endpoint = model_paths.get(path)
        if endpoint is None:
            path = request.path
            endpoint = model_paths.get(path)
        request_id = request.headers.get("x-request-id")
        invalid_id = False
        if request_id is None:
            request_id = new_request_id()
        elif not _REQUEST_ID.fullmatch(request_id):
            request_id, invalid_id = new_request_id(), True
        state = request_state(request)
        trace = state[TRACE] = Trace(observer, request_id, method=request.method, path=path)
        trace.endpoint = endpoint
        observe.current.set(trace)  # this task serves only this request: no reset needed
        status, code = observe.CLIENT_CLOSED, None  # unless an answer is settled below
        left, failed = True, False  # until the handler returns or raises an error of its own
        inflight.count += 1
        try:
            try:
                if invalid_id:
                    raise InvalidRequestError(
                        "x-request-id must be 1-200 visible ASCII characters.",
                        param="x-request-id",
                        code="invalid_header",
                    )
                if path.startswith("/v1/"):
                    trace.tenant = auth.tenant(request)
                response = await handler(request)
                left = False
            except ConnectionResetError:
                raise
            except Exception as exc:
                left, failed = False, True
                started: web.StreamResponse | None = request.get(STREAM_STARTED)
                if started is not None:  # a second status line would corrupt the answer already under way
                    log.error("failure after the response to request %s started", request_id, exc_info=exc)
                    trace.failed(500, "internal_error")
                    status = started.status
                    return started
                code = exc.code if isinstance(exc, GatewayError) else None
                response = await _failure_response(request, exc, request_id)
            status, unsent = status_and_unsent(response)
            if unsent is not None:  # not prepared: the headers have not gone out yet
                unsent["x-request-id"] = request_id
                if governor is not None:
                    add_quota_headers(state, unsent)
            return response
        finally:  # a cancelled handler (the client left) ends here too
            if governor is not None:
                settle_ended(governor, state, status=None if left else status, failed=failed)
            inflight.ended()
            trace.end(status, code)

    return middleware
