"""The endpoint reference (gateway.cli.reference.endpoints): the router's routes, each with the table's description and errors."""

from __future__ import annotations

import pytest

from gateway.cli.reference import endpoints as reference
from gateway.cli.reference.endpoints import described_routes, endpoints_page, served_routes
from gateway.cli.reference.markdown import Undescribed
from gateway.server.endpoints import ENDPOINTS


def test_the_pages_routes_are_the_routers_in_its_order() -> None:
    assert [(e.method, e.path) for e in described_routes()] == served_routes()
    assert ("GET", "/healthz") in served_routes() and ("POST", "/v1/rerank") in served_routes()


def test_a_route_the_table_lacks_fails_the_page(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reference, "ENDPOINTS", tuple(e for e in ENDPOINTS if e.path != "/readyz"))
    with pytest.raises(Undescribed, match="GET /readyz"):
        endpoints_page()


def test_the_page_has_each_endpoint_and_its_errors() -> None:
    page = endpoints_page()
    for endpoint in ENDPOINTS:
        assert f"## `{endpoint.method} {endpoint.path}`" in page
    assert "| 404 | `model_not_found` |" in page
    assert "| 409 | `memory_busy` |" in page
