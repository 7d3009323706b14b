"""The endpoint table's errors of the Conversations API, asked of a real gateway: each one listed is answered as listed.

The errors every endpoint may meet (a missing key, a body that is no JSON) are
tests/server/test_endpoints_errors.py's.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from gateway.server.endpoints import ENDPOINTS, Endpoint
from tests.support.conversations import start_conversations_gateway
from tests.support.gateway import GATEWAY_KEY
from tests.support.plain_http import AUTH

CONFIG = f"auth: {{keys: [{{name: team-a, key: {GATEWAY_KEY}}}]}}\nmemory: {{store: memory}}\nroutes: {{m: {{provider: mock}}}}\n"
USER = {"type": "message", "role": "user", "content": "x"}


def endpoint(method: str, path: str) -> Endpoint:
    return next(e for e in ENDPOINTS if (e.method, e.path) == (method, "/v1/conversations" + path))


@pytest.fixture
async def base(aiohttp_server: Any) -> str:
    client, base_url = await start_conversations_gateway(aiohttp_server, CONFIG)
    await client.close()
    return base_url.removesuffix("/v1")


async def ask(base: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    options: dict[str, Any] = {} if body is None else {"json": body}
    async with aiohttp.ClientSession() as session, session.request(method, f"{base}/v1/conversations{path}", headers=AUTH, **options) as response:
        return response.status, await response.json(content_type=None)


async def conversation(base: str) -> str:
    status, body = await ask(base, "POST", "", {"items": [USER]})
    assert status == 200, body
    return str(body["id"])


def check(got: tuple[int, Any], listed_in: Endpoint, status: int, code: str) -> None:
    error = got[1]["error"]
    assert (got[0], error["code"]) == (status, code), got
    assert set(error) == {"message", "type", "param", "code"} and error["type"] == "invalid_request_error"
    assert any((f.status, f.code) == (status, code) for f in listed_in.failures), (listed_in.path, code)


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"metadata": "x"}, "invalid_type"),
        ({"metadata": {f"k{n}": "v" for n in range(17)}}, "invalid_value"),
        ({"metadata": {"k" * 65: "v"}}, "invalid_value"),
        ({"metadata": {"k": "v" * 513}}, "invalid_value"),
        ({"metadata": {"k": 5}}, "invalid_type"),
        ({"items": "x"}, "invalid_type"),
        ({"items": [USER] * 21}, "array_above_max_length"),
        ({"items": [{"type": "no_such_item"}]}, "unsupported_value"),
        ({"items": [{"type": "message", "role": "emperor", "content": "x"}]}, "invalid_value"),
        ({"items": [{"type": "web_search_call", "id": "ws_1", "status": "completed"}]}, "unsupported_value"),
        ({"items": [7]}, "invalid_type"),
    ],
)
async def test_a_create_with_bad_items_or_metadata_is_a_400_as_listed(base: str, body: Any, code: str) -> None:
    check(await ask(base, "POST", "", body), endpoint("POST", ""), 400, code)
    async with aiohttp.ClientSession() as session, session.get(f"{base}/v1/memory", headers=AUTH) as response:
        assert (await response.json())["data"] == []  # nothing was created


@pytest.mark.parametrize(("method", "path"), [("GET", ""), ("POST", ""), ("DELETE", ""), ("GET", "/items"), ("POST", "/items"), ("GET", "/items/msg_1"), ("DELETE", "/items/msg_1")])
async def test_an_unknown_or_impossible_conversation_is_refused_as_listed(base: str, method: str, path: str) -> None:
    listed_in = endpoint(method, "/{conversation_id}" + path.replace("msg_1", "{item_id}"))
    body = {"metadata": {}, "items": [USER]} if method == "POST" else None
    check(await ask(base, method, f"/conv_none{path}", body), listed_in, 404, "conversation_not_found")
    for odd in ("a%20b", "x" * 300, "a%00b", "caf%C3%A9", "a%2Fb"):
        check(await ask(base, method, f"/{odd}{path}", body), listed_in, 400, "invalid_value")


async def test_an_unknown_item_and_missing_fields_are_refused_as_listed(base: str) -> None:
    conv = await conversation(base)
    for odd in ("msg_none", "x" * 2000, "%E2%9C%93", "msg%2F1"):
        check(await ask(base, "GET", f"/{conv}/items/{odd}"), endpoint("GET", "/{conversation_id}/items/{item_id}"), 404, "item_not_found")
        check(await ask(base, "DELETE", f"/{conv}/items/{odd}"), endpoint("DELETE", "/{conversation_id}/items/{item_id}"), 404, "item_not_found")
    check(await ask(base, "POST", f"/{conv}", {}), endpoint("POST", "/{conversation_id}"), 400, "missing_required_parameter")
    check(await ask(base, "POST", f"/{conv}/items", {}), endpoint("POST", "/{conversation_id}/items"), 400, "missing_required_parameter")
    check(await ask(base, "POST", f"/{conv}/items", {"items": [USER] * 21}), endpoint("POST", "/{conversation_id}/items"), 400, "array_above_max_length")
    check(await ask(base, "POST", f"/{conv}", {"metadata": [1]}), endpoint("POST", "/{conversation_id}"), 400, "invalid_type")


@pytest.mark.parametrize(("query", "status", "code"), [("limit=x", 400, "invalid_type"), ("limit=0", 400, "invalid_value"), ("limit=101", 400, "invalid_value"), ("order=up", 400, "invalid_value"), ("after=msg_none", 404, "item_not_found")])
async def test_an_items_page_asked_wrongly_is_refused_as_listed(base: str, query: str, status: int, code: str) -> None:
    conv = await conversation(base)
    check(await ask(base, "GET", f"/{conv}/items?{query}"), endpoint("GET", "/{conversation_id}/items"), status, code)


async def test_a_body_that_is_no_object_is_invalid_json(base: str) -> None:
    conv = await conversation(base)
    for path in ("", f"/{conv}", f"/{conv}/items"):
        headers = {**AUTH, "Content-Type": "application/json"}
        async with aiohttp.ClientSession() as session, session.post(f"{base}/v1/conversations{path}", headers=headers, data=b"[1, 2]") as response:
            got = response.status, await response.json()
        check(got, endpoint("POST", path.replace(conv, "{conversation_id}")), 400, "invalid_json")
