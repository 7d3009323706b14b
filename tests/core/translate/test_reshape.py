"""How a chat answer reaches a client of another API (translate.reshape): one object per request."""

from __future__ import annotations

import orjson

from gateway.core.translate.reshape import AnthropicReshape, ResponsesReshape

ANSWER = {"id": "chatcmpl-1", "model": "gpt-4o", "choices": [
    {"index": 0, "message": {"role": "assistant", "content": "Hi"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}
CHUNK = {"choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": None}]}


def events(encoded: list[bytes]) -> list[dict[str, object]]:
    return [orjson.loads(event.split(b"\ndata: ", 1)[1]) for event in encoded]


def test_an_anthropic_answer_and_stream_carry_one_message_id_and_the_model_asked_for() -> None:
    reshape = AnthropicReshape("claude-x", message_id="msg_given")
    message = reshape.answer(ANSWER)
    assert message["id"] == reshape.message_id == "msg_given"
    assert message["model"] == "claude-x" and message["content"] == [{"type": "text", "text": "Hi"}]
    stream = reshape.translator()
    sent = events(stream.feed(CHUNK) + stream.finish({"prompt_tokens": 3, "completion_tokens": 1}))
    assert sent[0]["message"]["id"] == reshape.message_id  # type: ignore[index]
    assert sent[-1] == {"type": "message_stop"}
    assert events([stream.error("gone", "upstream_error", 529)]) == [
        {"type": "error", "error": {"type": "overloaded_error", "message": "gone"}}]


def test_a_responses_answer_and_stream_carry_one_response_id() -> None:
    reshape = ResponsesReshape({"model": "m", "input": "hi"}, response_id="resp_given", created_at=1700000000)
    response = reshape.answer(ANSWER)
    assert response["id"] == reshape.response_id == "resp_given"
    assert response["created_at"] == reshape.created_at == 1700000000
    stream = reshape.translator()
    sent = events(stream.feed(CHUNK) + stream.finish(None))
    assert sent[0]["response"]["id"] == reshape.response_id  # type: ignore[index]
    assert sent[-1]["type"] == "response.completed"
    error = events([stream.error("gone", "upstream_error", 502)])[0]
    assert (error["type"], error["code"], error["sequence_number"]) == ("error", "upstream_error", len(sent))
