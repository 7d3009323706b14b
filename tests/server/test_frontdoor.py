"""The front door answers plain paths from its table and leaves everything else to the router.

What the router would answer, the door answers too: the same handler behind the same middlewares,
and for a request spelled any other way (a query, escapes, a method the path does not take,
`Expect: 100-continue`) the router itself. With aiohttp's fast paths off the door stays shut and
the router answers everything, the same way.
"""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp import web

from gateway.server import aiohttp_internals
from gateway.server.frontdoor import FRONT_DOOR, FrontDoor, open_front_door
from tests.support.gateway import Gateway, app_of
from tests.support.openai_errors import assert_error
from tests.support.plain_http import AUTH, CONFIG, call

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
needs_door = pytest.mark.skipif(not aiohttp_internals.FAST, reason="aiohttp's fast paths are off: the door stays shut")


@pytest.fixture
def resolved(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths aiohttp's router resolved, in order."""
    paths: list[str] = []
    resolve = web.UrlDispatcher.resolve

    async def counting(self: web.UrlDispatcher, request: web.Request) -> Any:
        paths.append(request.raw_path)
        return await resolve(self, request)

    monkeypatch.setattr(web.UrlDispatcher, "resolve", counting)
    return paths


async def test_a_chat_request_is_served_without_the_router_unless_the_fast_paths_are_off(
    gateway: Gateway, resolved: list[str]
) -> None:
    client = await gateway(CONFIG)
    status, _, body = await call(client, "POST", "/v1/chat/completions", json=CHAT, headers=AUTH)
    assert status == 200, body
    assert body["object"] == "chat.completion"
    status, _, _ = await call(client, "GET", "/v1/models", headers=AUTH)
    assert status == 200
    status, _, _ = await call(client, "GET", "/v1/models/m", headers=AUTH)
    assert status == 200
    if aiohttp_internals.FAST:
        assert resolved == ["/v1/models/m"]  # a path with a placeholder is the router's
    else:  # no door: the router resolves every request
        assert resolved == ["/v1/chat/completions", "/v1/models", "/v1/models/m"]
        assert FRONT_DOOR not in app_of(client)


@needs_door
async def test_the_model_endpoints_are_in_the_table(gateway: Gateway) -> None:
    client = await gateway(CONFIG)
    door = app_of(client)[FRONT_DOOR]
    assert isinstance(door, FrontDoor)
    assert {
        ("POST", "/v1/chat/completions"),
        ("POST", "/v1/embeddings"),
        ("POST", "/v1/responses"),
        ("POST", "/v1/messages"),
        ("GET", "/healthz"),
        ("HEAD", "/healthz"),
    } <= door.paths()
    assert not any("{" in path for _, path in door.paths())  # placeholders are the router's


async def test_a_query_string_goes_through_the_router_and_is_answered(
    gateway: Gateway, resolved: list[str]
) -> None:
    client = await gateway(CONFIG)
    status, _, body = await call(client, "POST", "/v1/chat/completions?trace=1", json=CHAT, headers=AUTH)
    assert status == 200, body
    assert resolved == ["/v1/chat/completions?trace=1"]


async def test_expect_100_continue_is_answered_by_aiohttps_route(
    gateway: Gateway, resolved: list[str]
) -> None:
    client = await gateway(CONFIG)
    status, _, body = await call(
        client, "POST", "/v1/chat/completions", json=CHAT, headers=AUTH, expect100=True
    )
    assert status == 200, body
    assert resolved == ["/v1/chat/completions"]


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/v1/chat/completions", 405),  # a method the path does not take
        ("POST", "/v1/chat%2Fcompletions", 404),  # an escaped slash is not the same path
        ("POST", "/v1/chat/completions/", 404),
        ("POST", "//v1/chat/completions", 404),
    ],
)
async def test_other_spellings_get_the_routers_api_shaped_answer(
    gateway: Gateway, method: str, path: str, status: int
) -> None:
    client = await gateway(CONFIG)
    got, headers, body = await call(client, method, path, json=CHAT, headers=AUTH)
    assert got == status, body
    assert_error(body)
    assert headers["x-request-id"]
    if status == 405:
        assert headers["Allow"] == "POST"


async def test_a_wrong_key_on_the_fast_path_is_a_401(gateway: Gateway) -> None:
    client = await gateway(CONFIG)
    status, _, body = await call(
        client, "POST", "/v1/chat/completions", json=CHAT, headers={"Authorization": "Bearer nope"}
    )
    assert status == 401
    assert_error(body, code="invalid_api_key")


@needs_door
async def test_placeholders_and_any_method_routes_stay_with_the_router() -> None:
    async def handler(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_post("/a", handler)
    app.router.add_route("*", "/any", handler)
    app.router.add_post("/items/{id}", handler)
    door = FrontDoor(app)
    assert door.paths() == {("POST", "/a")}


async def test_an_old_style_middleware_or_a_sub_application_keeps_the_door_shut() -> None:
    async def handler(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def old_style(app: web.Application, handler: Any) -> Any:  # aiohttp's pre-3.0 factory
        return handler

    plain = web.Application()
    plain.router.add_post("/a", handler)
    assert (open_front_door(plain) is not None) is aiohttp_internals.FAST  # with the fast paths off, shut
    for app in (web.Application(middlewares=[old_style]), web.Application()):
        app.router.add_post("/a", handler)
        if not app.middlewares:
            app.add_subapp("/sub/", web.Application())
        own = aiohttp_internals.application_handler(app)
        assert open_front_door(app) is None
        assert aiohttp_internals.application_handler(app) == own  # aiohttp's own way in, untouched


@needs_door
async def test_middlewares_run_in_aiohttps_order(aiohttp_client: Any) -> None:
    order: list[str] = []

    def named(name: str) -> Any:
        @web.middleware
        async def middleware(request: web.Request, handler: Any) -> web.StreamResponse:
            order.append(name)
            return await handler(request)

        return middleware

    async def handler(request: web.Request) -> web.Response:
        order.append("handler")
        assert request.app is app
        return web.Response(text="ok")

    app = web.Application(middlewares=[named("outer"), named("inner")])
    app.router.add_post("/x", handler)
    aiohttp_internals.replace_application_handler(app, FrontDoor(app))
    client = await aiohttp_client(app)
    response = await client.post("/x")
    assert response.status == 200
    through_table = list(order)
    order.clear()
    response = await client.post("/x?q=1")  # the router's way
    assert response.status == 200
    assert through_table == order == ["outer", "inner", "handler"]


async def test_a_stream_through_the_door_ends_cleanly(gateway: Gateway) -> None:
    client = await gateway(CONFIG)
    stream = await client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    chunks = [chunk async for chunk in stream]
    assert chunks and chunks[-1].choices[0].finish_reason == "stop"
