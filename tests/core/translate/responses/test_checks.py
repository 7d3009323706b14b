"""OpenAI's wording of the shape checks (responses.checks): requests' 400s and answers' MalformedAnswer."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.core.translate import MalformedAnswer, TranslationError
from gateway.core.translate.responses.checks import (
    ANSWER,
    CHECK,
    answer_text,
    as_string,
    effort,
    kind_name,
    metadata,
    positive,
    untranslatable,
)


@pytest.mark.parametrize(("value", "name"), [
    (None, "null"), (True, "a boolean"), (1, "a number"), (1.5, "a number"), ("", "an empty string"),
    ("x", "a string"), ([], "an array"), ({}, "an object"),
])
def test_a_value_found_is_named_by_its_kind(value: Any, name: str) -> None:
    assert kind_name(value) == name


def test_a_request_check_is_an_invalid_type_400_naming_the_param() -> None:
    with pytest.raises(TranslationError) as caught:
        as_string(None, "input[0].role")
    assert (caught.value.message, caught.value.param, caught.value.code, caught.value.status) == (
        "input[0].role must be a string, got null.", "input[0].role", "invalid_type", 400)


def test_a_word_not_among_the_choices_is_an_invalid_value_quoting_them() -> None:
    with pytest.raises(TranslationError) as caught:
        effort("extreme", "reasoning.effort")
    assert caught.value.code == "invalid_value"
    assert caught.value.message == (
        "reasoning.effort must be one of 'none', 'minimal', 'low', 'medium', 'high', 'xhigh', 'max', got 'extreme'.")


def test_the_missing_input_is_a_missing_required_parameter() -> None:
    error = CHECK.missing("input")
    assert isinstance(error, TranslationError)
    assert (error.message, error.param, error.code) == ("'input' is required.", "input", "missing_required_parameter")


@pytest.mark.parametrize(("read", "value", "message"), [
    (positive, 0, "max_output_tokens must be a positive integer, got a number."),
    (positive, True, "max_output_tokens must be a positive integer, got a boolean."),
    (metadata, {"a": 1}, "max_output_tokens.a must be a string, got a number."),
])
def test_readers_check_beyond_the_kind(read: Any, value: Any, message: str) -> None:
    with pytest.raises(TranslationError) as caught:
        read(value, "max_output_tokens")
    assert caught.value.message == message


def test_an_answer_check_is_a_malformed_answer_saying_what_it_found() -> None:
    assert answer_text(None, "choices[0].message.content") is None
    with pytest.raises(MalformedAnswer, match=r"^choices\[0\]\.message\.content is an array, not a string$"):
        answer_text([], "choices[0].message.content")
    with pytest.raises(MalformedAnswer, match=r"^a stream chunk is a number, not an object$"):
        ANSWER.object(1, "a stream chunk")


def test_what_chat_cannot_say_needs_a_responses_upstream() -> None:
    error = untranslatable("tools[0].type", "the built-in tool 'file_search'")
    assert error.code == "unsupported_value"
    assert error.message.startswith("tools[0].type: the built-in tool 'file_search' cannot be translated")
