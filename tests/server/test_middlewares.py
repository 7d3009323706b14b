"""gateway.server.middlewares on a real gateway: gateway-key auth, request ids, and an API-shaped body for every failure.

How the key check remembers headers is in test_middlewares_auth.py.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

import openai
import pytest
from aiohttp import web

from gateway.server import handlers, messages_api
from tests.support.gateway import GATEWAY_KEY, Gateway
from tests.support.openai_errors import assert_error
from tests.support.plain_http import AUTH, CONFIG, call

MESSAGES: Any = [{"role": "user", "content": "hi"}]


async def test_unknown_path_and_wrong_method(gateway: Gateway) -> None:
    client = await gateway(CONFIG)
    status, _, payload = await call(client, "GET", "/v1/nothing-here", headers=AUTH)
    assert status == 404
    assert_error(payload, code="not_found")
    status, headers, payload = await call(client, "GET", "/v1/chat/completions", headers=AUTH)
    assert status == 405 and headers["Allow"] == "POST"
    assert_error(payload, code="method_not_allowed")


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer wrong"}, {"Authorization": GATEWAY_KEY}, {"Authorization": "Basic abc"}],
    ids=["missing", "wrong-key", "no-scheme", "basic"],
)
async def test_auth_rejections(gateway: Gateway, headers: dict[str, str]) -> None:
    client = await gateway(CONFIG)
    status, _, payload = await call(client, "POST", "/v1/chat/completions", json={"model": "m"}, headers=headers)
    assert status == 401
    assert_error(payload, code="invalid_api_key")


async def test_sdk_with_wrong_key_gets_authentication_error(gateway: Gateway) -> None:
    client = await gateway(CONFIG, default_headers={"Authorization": "Bearer nope"})
    with pytest.raises(openai.AuthenticationError):
        await client.models.list()


async def test_key_given_as_sha256(gateway: Gateway) -> None:
    digest = hashlib.sha256(GATEWAY_KEY.encode()).hexdigest()
    client = await gateway(f"auth: {{keys: [{{name: t, keySha256: {digest}}}]}}\nroutes: {{m: {{provider: mock}}}}")
    assert [m.id for m in (await client.models.list()).data] == ["m"]


async def test_bad_request_id_header(gateway: Gateway) -> None:
    client = await gateway(CONFIG)
    status, headers, payload = await call(client, "GET", "/v1/models", headers={**AUTH, "x-request-id": "a" * 300})
    assert status == 400
    assert_error(payload, param="x-request-id")
    assert headers["x-request-id"] != "a" * 300


async def test_request_id_is_generated_when_absent(gateway: Gateway) -> None:
    client = await gateway("routes: {m: {provider: mock}}")
    raw = await client.chat.completions.with_raw_response.create(model="m", messages=MESSAGES)
    assert len(raw.headers["x-request-id"]) >= 16


async def test_a_clients_request_id_is_answered_back_on_errors_too(gateway: Gateway) -> None:
    client = await gateway(CONFIG)
    status, headers, _ = await call(client, "GET", "/v1/nothing-here", headers={**AUTH, "x-request-id": "req-404"})
    assert status == 404 and headers["x-request-id"] == "req-404"


async def _fails(request: web.Request) -> web.StreamResponse:
    raise RuntimeError("a bug of the gateway's own")


async def test_a_handlers_own_failure_is_an_openai_shaped_500_logged_with_its_traceback(
    gateway: Gateway, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(handlers, "list_models", _fails)  # before the app takes its routes
    client = await gateway(CONFIG)
    with caplog.at_level(logging.ERROR, logger="gateway"):
        status, headers, payload = await call(client, "GET", "/v1/models", headers={**AUTH, "x-request-id": "req-bug"})
    assert status == 500 and headers["x-request-id"] == "req-bug"
    assert_error(payload, code="internal_error")
    assert "a bug of the gateway's own" not in str(payload)
    [record] = [r for r in caplog.records if "req-bug" in r.getMessage()]
    assert record.exc_info is not None and "a bug of the gateway's own" in str(record.exc_info[1])


async def test_a_failure_on_the_messages_api_takes_anthropics_error_shape(
    gateway: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(messages_api, "count_tokens", _fails)
    client = await gateway(CONFIG)
    status, _, payload = await call(client, "POST", "/v1/messages/count_tokens", json={}, headers=AUTH)
    assert status == 500
    assert payload["type"] == "error" and payload["error"]["type"] == "api_error"
    status, _, payload = await call(client, "POST", "/v1/messages", json={}, headers={})
    assert status == 401
    assert payload["type"] == "error" and payload["error"]["type"] == "authentication_error"
