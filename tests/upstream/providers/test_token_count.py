"""gateway.upstream.providers.token_count: count_tokens estimated by the gateway, system prompt and tools included."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.core.translate import TranslationError
from gateway.upstream.providers.token_count import count_input_tokens, estimate

HELLO = [{"role": "user", "content": "hello"}]
WEATHER = {"name": "get_weather", "description": "The weather in a city.",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}  # fmt: skip


def counted(**fields: Any) -> int:
    """The estimate for a count_tokens body (which has no max_tokens) of a model and these fields."""
    return count_input_tokens({"model": "claude", "messages": HELLO, **fields})


def test_a_request_without_max_tokens_is_counted_by_its_text() -> None:
    short = counted()
    long = counted(messages=[{"role": "user", "content": "hello " * 200}])
    assert 0 < short < long and long >= 200


def test_the_system_prompt_and_the_tools_count_too() -> None:
    assert counted(system="You answer in French, in one sentence, and never apologise.") > counted()
    assert counted(tools=[WEATHER]) > counted() + 10


def test_a_malformed_request_is_a_translation_error_naming_the_field() -> None:
    with pytest.raises(TranslationError) as caught:
        count_input_tokens({"model": "claude", "messages": "hello"})
    assert caught.value.param == "messages"


async def test_the_answer_is_anthropics_shape() -> None:
    body = {"model": "claude", "messages": HELLO, "tools": [WEATHER]}
    assert await estimate(body) == {"input_tokens": count_input_tokens(body)}
