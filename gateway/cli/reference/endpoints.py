"""The endpoint reference: every route the application serves, with what it does and its errors.

The routes are read from the router of an application built as `gateway serve` builds it
(gateway.server.app.config_app), their descriptions and errors from gateway.server.endpoints.
"""

from __future__ import annotations

from collections.abc import Iterator

from gateway.cli.reference.markdown import GENERATED, Undescribed, cell, code, require_descriptions, table
from gateway.config.loader import parse_config
from gateway.server.app import config_app
from gateway.server.endpoints import ENDPOINTS, EVERY_PATH, Endpoint, Failure
from gateway.server.keys import Lifecycle

# A config with every optional route on (metrics at the default metrics.path, memory's routes).
SAMPLE_CONFIG = "routes:\n  chat: {provider: mock}\n"


def served_routes() -> list[tuple[str, str]]:
    """Every (method, path) the application's router has, in the order it was added (HEAD left out)."""
    app = config_app(parse_config(SAMPLE_CONFIG, env={}), Lifecycle(started_at=0))
    routes = ((route.method, route.resource.canonical) for route in app.router.routes() if route.resource is not None)
    return [(method, path) for method, path in routes if method != "HEAD"]


def described_routes() -> list[Endpoint]:
    """The table's entry of each route served, in the router's order; Undescribed for a route the table lacks."""
    table_of = {(endpoint.method, endpoint.path): endpoint for endpoint in ENDPOINTS}
    served = served_routes()
    missing = [f"{method} {path}" for method, path in served if (method, path) not in table_of]
    if missing:
        raise Undescribed(missing)
    return [table_of[route] for route in served]


def undescribed(endpoints: list[Endpoint]) -> Iterator[tuple[str, str | None]]:
    """Every endpoint with its summary, and each of its errors with when it comes."""
    for endpoint in endpoints:
        yield f"{endpoint.method} {endpoint.path}", endpoint.summary
        for failure in endpoint.failures:
            yield f"{endpoint.method} {endpoint.path} {failure.status}", failure.when


def _failure_rows(failures: tuple[Failure, ...]) -> Iterator[list[str]]:
    for failure in failures:
        yield [str(failure.status), code(failure.code) if failure.code else "", cell(failure.when)]


def endpoints_page() -> str:
    """The Markdown of reference/endpoints.md; Undescribed when a route or an error has no description."""
    endpoints = described_routes()
    require_descriptions(undescribed(endpoints))
    require_descriptions((f"any path {failure.status}", failure.when) for failure in EVERY_PATH)
    overview = ([code(f"{e.method} {e.path}"), cell(e.summary)] for e in endpoints)
    parts = [
        GENERATED,
        "# HTTP endpoints reference",
        "Every route the gateway serves, read from its router. Paths under `/v1/` need a gateway key "
        "(`Authorization: Bearer ...`, or `x-api-key`, on any path) when `auth.keys` is set. "
        "Errors are OpenAI-shaped, `{\"error\": {\"message\", \"type\", \"param\", \"code\"}}` "
        "(Anthropic-shaped under `/v1/messages`, whose errors have a `type` but no `code`), and carry "
        "`x-request-id`.",
        table(("endpoint", "what it does"), overview),
        "## Errors any path may answer",
        table(("status", "code", "when"), _failure_rows(EVERY_PATH)),
    ]
    for endpoint in endpoints:
        parts.append(f"## `{endpoint.method} {endpoint.path}`\n\n{cell(endpoint.summary)}")
        if endpoint.failures:
            parts.append(table(("status", "code", "when"), _failure_rows(endpoint.failures)))
    return "\n\n".join(parts) + "\n"
