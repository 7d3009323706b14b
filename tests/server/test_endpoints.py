"""The endpoint table (gateway.server.endpoints): every route the application serves is described, and nothing else."""

from __future__ import annotations

from gateway.config.loader import parse_config
from gateway.server.app import config_app
from gateway.server.endpoints import ENDPOINTS, EVERY_PATH, METRICS_PATH
from gateway.server.keys import Lifecycle


def routes_of(config_text: str) -> set[tuple[str, str]]:
    app = config_app(parse_config(config_text, env={}), Lifecycle(started_at=0))
    return {(route.method, route.resource.canonical) for route in app.router.routes() if route.resource and route.method != "HEAD"}


def test_the_table_holds_exactly_the_routes_the_application_serves() -> None:
    described = [(endpoint.method, endpoint.path) for endpoint in ENDPOINTS]
    assert len(described) == len(set(described))
    assert set(described) == routes_of("routes:\n  chat: {provider: mock}\n")


def test_the_metrics_entry_is_the_default_metrics_path_served_only_when_enabled() -> None:
    served = routes_of("metrics: {enabled: false}\nroutes:\n  chat: {provider: mock}\n")
    assert ("GET", METRICS_PATH) not in served
    assert {(e.method, e.path) for e in ENDPOINTS} - served == {("GET", METRICS_PATH)}


def test_every_endpoint_and_error_is_described() -> None:
    for endpoint in ENDPOINTS:
        assert endpoint.summary.strip(), endpoint.path
        assert all(failure.when.strip() for failure in endpoint.failures), endpoint.path
    assert all(failure.when.strip() for failure in EVERY_PATH)


def test_routed_endpoints_list_the_errors_of_routing_and_of_keys() -> None:
    for endpoint in ENDPOINTS:
        codes = {failure.code for failure in endpoint.failures}
        if endpoint.path.startswith("/v1/"):
            assert "invalid_api_key" in codes, endpoint.path
        routed = not endpoint.path.startswith(("/v1/conversations", "/v1/gateway/"))
        if endpoint.method == "POST" and "/memory/" not in endpoint.path and routed:
            assert {"model_not_found", "invalid_body", "upstream_timeout"} <= codes, endpoint.path
