"""CORS for browser clients: preflights answered before auth, allowed origins on every response.

Wired in only when `cors.allowOrigins` is set, so with CORS off nothing here is on the hot path.
The allowed origin is always echoed rather than `*`, so a config listing origins behaves the same
whether or not a page sends credentials.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware
from yarl import URL

from gateway.core.errors import GatewayError
from gateway.core.settings import CorsConfig
from gateway.server.limit_headers import RATE_LIMIT_PREFIX, UPSTREAM_RATE_LIMIT_PREFIX
from gateway.server.middlewares import error_response, new_request_id

ALLOWED_METHODS = "GET, POST, DELETE, OPTIONS"
RATE_LIMIT_PREFIXES = (RATE_LIMIT_PREFIX, UPSTREAM_RATE_LIMIT_PREFIX)
# What a script may read from an answer. Expose-Headers takes no prefixes and its `*` is void on
# credentialed requests, so the x-ratelimit-* names are listed, and the upstream's as relayed beside
# a limited key's own (x-upstream-ratelimit-*); others of either prefix are added per response.
EXPOSED_HEADERS = (
    "x-request-id",
    "x-gateway-route",
    "x-gateway-target",
    "x-gateway-attempts",
    "x-should-retry",
    "x-memory-id",
    "x-memory-history",
    "x-memory-evicted",
    "x-memory-summary",
    "x-ratelimit-limit-requests",
    "x-ratelimit-limit-tokens",
    "x-ratelimit-remaining-requests",
    "x-ratelimit-remaining-tokens",
    "x-ratelimit-reset-requests",
    "x-ratelimit-reset-tokens",
    "x-upstream-ratelimit-limit-requests",
    "x-upstream-ratelimit-limit-tokens",
    "x-upstream-ratelimit-remaining-requests",
    "x-upstream-ratelimit-remaining-tokens",
    "x-upstream-ratelimit-reset-requests",
    "x-upstream-ratelimit-reset-tokens",
    "retry-after",
    "retry-after-ms",
)

ResponseHook = Callable[[web.Request, web.StreamResponse], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class CorsPolicy:
    """The CORS headers for one configuration, computed without I/O.

    `origins` None allows any origin; `allow_headers` None allows whatever a preflight asks for.
    """

    origins: frozenset[str] | None
    allow_headers: str | None
    max_age: str

    @classmethod
    def from_config(cls, config: CorsConfig) -> CorsPolicy:
        origins = None if "*" in config.allow_origins else frozenset(map(canonical_origin, config.allow_origins))
        # `*` in Allow-Headers never covers Authorization (Fetch spec), so it means "echo" here too.
        echo = not config.allow_headers or "*" in config.allow_headers
        return cls(origins, None if echo else ", ".join(config.allow_headers), str(config.max_age_seconds))

    def allows(self, origin: str) -> bool:
        return self.origins is None or origin in self.origins

    def preflight_headers(self, origin: str, requested_headers: str | None) -> dict[str, str]:
        """The answer to an allowed origin's preflight."""
        headers = {
            "Access-Control-Allow-Origin": origin,
            "Access-Control-Allow-Methods": ALLOWED_METHODS,
            "Access-Control-Max-Age": self.max_age,
        }
        allow_headers = requested_headers if self.allow_headers is None else self.allow_headers
        if allow_headers:
            headers["Access-Control-Allow-Headers"] = allow_headers
        return headers

    def response_headers(self, origin: str, present: Iterable[str]) -> dict[str, str]:
        """The headers for an allowed origin's actual answer, whose header names are `present`."""
        extra = [name for name in map(str.lower, present) if name.startswith(RATE_LIMIT_PREFIXES)]
        exposed = [*EXPOSED_HEADERS, *(name for name in extra if name not in EXPOSED_HEADERS)]
        return {"Access-Control-Allow-Origin": origin, "Access-Control-Expose-Headers": ", ".join(exposed)}


def canonical_origin(origin: str) -> str:
    """An origin as browsers send it: lower-case, no default port, no trailing slash."""
    return str(URL(origin).origin())


def vary_on_origin(vary: str | None) -> str:
    """A Vary value that includes Origin, keeping whatever it listed."""
    if not vary:
        return "Origin"
    if "origin" in (part.strip().lower() for part in vary.split(",")):
        return vary
    return f"{vary}, Origin"


def is_preflight(request: web.Request) -> bool:
    return (
        request.method == "OPTIONS"
        and "Origin" in request.headers
        and "Access-Control-Request-Method" in request.headers
    )


def cors_middlewares(config: CorsConfig) -> list[Middleware]:
    """The preflight middleware, to run before `gateway_middleware`; none while CORS is off.

    A preflight never carries credentials, so it is answered here, before auth, on any path.
    """
    if not config.enabled:
        return []
    policy = CorsPolicy.from_config(config)

    @web.middleware
    async def preflight(request: web.Request, handler: Handler) -> web.StreamResponse:
        if not is_preflight(request):
            return await handler(request)
        origin = request.headers["Origin"]
        request_id = new_request_id()
        if not policy.allows(origin):
            error = GatewayError(
                f"Origin {origin[:200]!r} is not allowed by this gateway's cors.allowOrigins.",
                status=403,
                type="invalid_request_error",
                code="origin_not_allowed",
            )
            return error_response(error, request_id)
        headers = policy.preflight_headers(origin, request.headers.get("Access-Control-Request-Headers"))
        return web.Response(status=204, headers={**headers, "x-request-id": request_id})

    return [preflight]


def cors_response_hook(config: CorsConfig) -> ResponseHook:
    """An `on_response_prepare` hook that adds CORS headers to every answer to an allowed origin.

    A signal rather than the middleware: streams are prepared inside handlers, and errors are
    rendered by `gateway_middleware`; the signal sees them all just before headers are sent.
    """
    policy = CorsPolicy.from_config(config)

    async def add_cors_headers(request: web.Request, response: web.StreamResponse) -> None:
        headers = response.headers
        headers["Vary"] = vary_on_origin(headers.get("Vary"))
        origin = request.headers.get("Origin")
        if origin is None or "Access-Control-Allow-Origin" in headers or not policy.allows(origin):
            return
        headers.update(policy.response_headers(origin, headers.keys()))

    return add_cors_headers
