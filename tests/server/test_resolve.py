"""gateway.server.resolve: the route a request takes, by its model or the default route; x-gateway-config's own
choice is in test_inline_config_e2e.py."""

from __future__ import annotations

import openai
import pytest

from tests.support.fakes import FakeUpstream
from tests.support.gateway import Gateway

MESSAGES: list[dict[str, str]] = [{"role": "user", "content": "hello"}]


async def test_default_route_takes_unknown_models(gateway: Gateway, upstream: FakeUpstream) -> None:
    client = await gateway(f'defaultRoute: chat\nroutes: {{chat: {{provider: openai, baseUrl: "{upstream.url}", apiKey: k}}}}')
    raw = await client.chat.completions.with_raw_response.create(model="gpt-whatever", messages=MESSAGES)  # type: ignore[arg-type]
    assert raw.headers["x-gateway-route"] == "chat"
    assert upstream.requests[0].body["model"] == "gpt-whatever"


async def test_a_model_that_names_a_route_takes_it_over_the_default(gateway: Gateway) -> None:
    client = await gateway("defaultRoute: a\nroutes: {a: {provider: mock}, b: {provider: mock}}")
    raw = await client.chat.completions.with_raw_response.create(model="b", messages=MESSAGES)  # type: ignore[arg-type]
    assert raw.headers["x-gateway-route"] == "b"


@pytest.mark.parametrize("path", ["chat", "embeddings", "responses"])
async def test_an_unknown_model_without_a_default_is_a_404_listing_the_routes(gateway: Gateway, path: str) -> None:
    client = await gateway("routes: {a: {provider: mock}, b: {provider: mock}}")
    with pytest.raises(openai.NotFoundError) as caught:
        if path == "chat":
            await client.chat.completions.create(model="gpt-x", messages=MESSAGES)  # type: ignore[arg-type]
        elif path == "embeddings":
            await client.embeddings.create(model="gpt-x", input="hi")
        else:
            await client.responses.create(model="gpt-x", input="hi")
    error = caught.value.body
    assert isinstance(error, dict) and (error["code"], error["param"]) == ("model_not_found", "model")
    assert error["message"] == "The model 'gpt-x' does not exist on this gateway (routes: a, b)."
