"""The state a Responses request names (`conversation`, `previous_response_id`): read, checked, taken out."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.core.translate import TranslationError
from gateway.core.translate.responses import from_chat
from gateway.core.translate.responses.state import conversation_id, one_state, previous_response_id, stateless


@pytest.mark.parametrize(
    ("body", "expected"),
    [({}, None), ({"conversation": None}, None), ({"conversation": "conv_1"}, "conv_1"),
     ({"conversation": {"id": "user-42:support"}}, "user-42:support")],
)  # fmt: skip
def test_a_conversation_is_a_string_or_an_object_with_an_id(body: dict[str, Any], expected: str | None) -> None:
    assert conversation_id(body) == expected


@pytest.mark.parametrize(
    ("value", "param"),
    [("", "conversation"), ("has space", "conversation"), ("x" * 257, "conversation"), (3, "conversation"),
     ({"id": None}, "conversation.id"), ({"id": "a/b"}, "conversation.id"), ({}, "conversation.id")],
)  # fmt: skip
def test_a_bad_conversation_is_refused_naming_its_path(value: Any, param: str) -> None:
    with pytest.raises(TranslationError) as caught:
        conversation_id({"conversation": value})
    assert caught.value.param == param and caught.value.status == 400


def test_previous_response_id_is_a_string_and_empty_means_none() -> None:
    assert previous_response_id({"previous_response_id": "resp_1"}) == "resp_1"
    assert previous_response_id({"previous_response_id": ""}) is None
    assert previous_response_id({}) is None
    with pytest.raises(TranslationError) as caught:
        previous_response_id({"previous_response_id": 5})
    assert caught.value.param == "previous_response_id"


@pytest.mark.parametrize(
    ("conversation", "previous", "memory_id", "param"),
    [("c", "resp_1", None, "previous_response_id"), (None, "resp_1", "m", "previous_response_id"),
     ("c", None, "m", "conversation")],
)  # fmt: skip
def test_two_histories_are_refused(conversation: str | None, previous: str | None, memory_id: str | None, param: str) -> None:
    with pytest.raises(TranslationError) as caught:
        one_state(conversation, previous, memory_id=memory_id)
    assert caught.value.param == param


def test_one_history_passes() -> None:
    one_state("c", None, memory_id="c")
    one_state(None, "resp_1", memory_id=None)
    one_state(None, None, memory_id="m")


def test_stateless_drops_only_the_state() -> None:
    body = {"model": "m", "input": "hi", "conversation": "c", "previous_response_id": "r", "store": True}
    assert stateless(body) == {"model": "m", "input": "hi", "store": True}


def test_the_answer_repeats_the_conversation_and_the_previous_response() -> None:
    answer = {"choices": [{"message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}]}
    request = {"model": "m", "input": "q", "conversation": {"id": "c"}, "previous_response_id": None}
    shown = from_chat(answer, request=request, response_id="resp_2", created_at=1)
    assert (shown["conversation"], shown["previous_response_id"]) == ({"id": "c"}, None)
    shown = from_chat(answer, request={"model": "m", "input": "q", "previous_response_id": "resp_1"}, response_id="r", created_at=1)
    assert (shown["conversation"], shown["previous_response_id"]) == (None, "resp_1")
