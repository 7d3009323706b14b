"""Cross-cutting request work: request id, OpenAI-shaped errors, gateway-key auth."""

from __future__ import annotations

import hashlib
import hmac
import itertools
import logging
import os
import re
from collections.abc import Sequence

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from gateway.config import ApiKey
from gateway.errors import (
    AuthenticationError,
    GatewayError,
    InvalidRequestError,
    MethodNotAllowedError,
    NotFoundError,
    PayloadTooLargeError,
)
from gateway.server.keys import REQUEST_ID, TENANT

log = logging.getLogger("gateway")

SHARED_TENANT = "default"
_REQUEST_ID = re.compile(r"[\x21-\x7e]{1,200}")
# Request ids need to be unique, not secret: a per-process random prefix and a counter are
# unique across workers and restarts, and cost a fraction of uuid4's urandom call.
_ID_PREFIX = os.urandom(6).hex()
_id_counter = itertools.count(1)


def new_request_id() -> str:
    return f"req_{_ID_PREFIX}{next(_id_counter):010x}"


def error_response(error: GatewayError, request_id: str | None = None) -> web.Response:
    response = web.Response(body=error.to_json(), status=error.status, content_type="application/json")
    response.headers.update(error.headers)
    if request_id is not None:
        response.headers["x-request-id"] = request_id
    return response


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
            f"The request body is larger than the limit of {request.app._client_max_size} bytes."
        )
    if exc.status < 500:
        return InvalidRequestError(exc.reason, status=exc.status, code=None)
    return GatewayError(exc.reason, status=exc.status)


@web.middleware
async def errors_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Give every response an x-request-id, and every failure an OpenAI-shaped body."""
    request_id = request.headers.get("x-request-id")
    invalid_id = request_id is not None and not _REQUEST_ID.fullmatch(request_id)
    if request_id is None or invalid_id:
        request_id = new_request_id()
    request[REQUEST_ID] = request_id
    try:
        if invalid_id:
            raise InvalidRequestError(
                "x-request-id must be 1-200 visible ASCII characters.", param="x-request-id", code="invalid_header"
            )
        response = await handler(request)
    except GatewayError as exc:
        return error_response(exc, request_id)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return error_response(_from_http_exception(exc, request), request_id)
    except ConnectionResetError:
        raise
    except Exception:
        log.exception("unhandled error in %s %s (request %s)", request.method, request.path, request_id)
        error = GatewayError("The gateway failed to handle this request.", code="internal_error")
        return error_response(error, request_id)
    if not response.prepared:
        response.headers["x-request-id"] = request_id
    return response


def auth_middleware(keys: Sequence[ApiKey]) -> Middleware:
    """Require `Authorization: Bearer <gateway key>` on /v1; the key's name becomes the tenant."""

    @web.middleware
    async def authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
        if not request.path.startswith("/v1/"):
            return await handler(request)
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise AuthenticationError("Missing gateway API key: send 'Authorization: Bearer <key>'.")
        digest = hashlib.sha256(token.encode()).digest()
        tenant = None
        for key in keys:  # every key is compared, so timing says nothing about which matched
            if hmac.compare_digest(key.sha256, digest):
                tenant = key.name
        if tenant is None:
            raise AuthenticationError("Incorrect gateway API key provided.")
        request[TENANT] = tenant
        return await handler(request)

    return authenticate


@web.middleware
async def open_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Auth is off: every caller shares one tenant."""
    request[TENANT] = SHARED_TENANT
    return await handler(request)
