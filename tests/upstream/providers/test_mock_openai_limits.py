"""The mock refuses what OpenAI's chat completions refuse in a name: a long `user`, a function name OpenAI takes not.

So a translation that would fail at a real upstream (an agent CLI's long user_id sent on as
`user`, a namespaced tool flattened into an illegal name) fails on the mock too.
"""

from __future__ import annotations

from typing import Any

import openai
import pytest

from tests.support.gateway import Gateway

CONFIG = "routes: {m: {provider: mock}}"


def function(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": {}}}}


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(("options", "param", "code"), [
    ({"user": "u" * 65}, "user", "string_above_max_length"),
    ({"tools": [function("ok"), function("f" * 65)]}, "tools[1].function.name", "string_above_max_length"),
    ({"tools": [function("agents.spawn")]}, "tools[0].function.name", "invalid_value"),
])
async def test_what_openai_refuses_is_openais_400(
    gateway: Gateway, options: dict[str, Any], param: str, code: str, stream: bool
) -> None:
    client = await gateway(CONFIG)
    with pytest.raises(openai.BadRequestError) as caught:
        await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], stream=stream, **options)
    error = caught.value.body
    assert isinstance(error, dict)
    assert (error["type"], error["param"], error["code"]) == ("invalid_request_error", param, code)
    assert f"Invalid '{param}': string " in error["message"]


async def test_what_openai_takes_is_answered(gateway: Gateway) -> None:
    client = await gateway(CONFIG)
    answer = await client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}], user="u" * 64,
        tools=[function("f" * 64), function("agents__spawn-2")],  # type: ignore[list-item]
    )
    assert answer.choices[0].message.content == 'Mock reply: received 1 messages; last user message: "hi"'
