"""The request fields a response repeats, as the translation read them (responses.echo)."""

from __future__ import annotations

from openai.types.responses import Response

from gateway.core.translate.responses.answer import from_chat
from tests.support.responses_translation import (
    CREATED,
    RESPONSE_ID,
    body,
    completion,
)


def test_the_echo_repeats_what_was_translated() -> None:
    schema = {"type": "json_schema", "name": "city", "schema": {"type": "object"}, "strict": True}
    request = body(tools=[{"type": "function", "name": "now", "parameters": None, "strict": None, "extra": 1}],
                   tool_choice="required", parallel_tool_calls=False, text={"format": schema, "verbosity": "low"},
                   reasoning={"effort": "low", "summary": "auto"})
    response = from_chat(completion('{"city":"Paris"}'), request=request, response_id=RESPONSE_ID,
                         created_at=CREATED)
    Response.model_validate(response)
    assert response["tools"] == [{"type": "function", "name": "now"}]
    assert (response["tool_choice"], response["parallel_tool_calls"]) == ("required", False)
    assert response["text"] == {"format": schema, "verbosity": "low"}
    assert response["reasoning"] == {"effort": "low"}
    assert from_chat(completion(), request=body(), response_id="r", created_at=0)["text"] == {
        "format": {"type": "text"}, "verbosity": None}


def test_from_chat_never_refuses_the_request_it_echoes() -> None:
    # Only MalformedAnswer comes out of from_chat; what to_chat would refuse is echoed as its default.
    request = {"model": 5, "metadata": {"n": 1}, "tools": [{"type": "web_search"}], "tool_choice": "sometimes",
               "temperature": "hot", "text": {"format": {"type": "yaml"}}, "parallel_tool_calls": "yes"}
    response = from_chat(completion(), request=request, response_id=RESPONSE_ID, created_at=CREATED)
    parsed = Response.model_validate(response)
    assert (parsed.model, parsed.metadata, parsed.tools, parsed.tool_choice, parsed.temperature,
            parsed.parallel_tool_calls) == ("up-model", None, [], "auto", None, True)
    assert response["text"]["format"] == {"type": "text"}
