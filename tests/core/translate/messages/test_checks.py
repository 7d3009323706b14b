"""Anthropic's wording of the shape checks (messages.checks): how a failed check reads to a client."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.core.translate import TranslationError
from gateway.core.translate.messages.checks import CHECK, as_list, as_number, body_object, describe, required


@pytest.mark.parametrize(("value", "shown"), [
    (None, "null"), (True, "true"), (False, "false"), ({}, "an object"), ([], "a list"), (3, "3"),
    ("x", "'x'"), ("y" * 50, "'" + "y" * 36 + "..."),
])
def test_a_value_found_is_shown_as_its_json_cut_at_40_characters(value: Any, shown: str) -> None:
    assert describe(value) == shown
    assert len(describe(value)) <= 40


def test_a_failed_check_names_the_path_then_what_was_expected() -> None:
    with pytest.raises(TranslationError) as caught:
        as_list("x", "messages[2].content")
    assert (caught.value.message, caught.value.param, caught.value.code) == (
        "messages[2].content: must be a list, got 'x'", "messages[2].content", "invalid_value")


def test_a_missing_key_is_required_at_its_path() -> None:
    with pytest.raises(TranslationError, match=r"^messages\[0\]\.role: required$"):
        required({}, "role", "messages[0]")
    with pytest.raises(TranslationError, match=r"^model: required$"):
        required({}, "model", "")


def test_numbers_must_be_finite_and_choices_are_listed_bare() -> None:
    with pytest.raises(TranslationError, match=r"^top_p: must be a finite number, got inf$"):
        as_number(float("inf"), "top_p", finite=True)
    error = CHECK.choice_error("tool_choice.type", ("auto", "any"), "x")
    assert error.args[0] == "tool_choice.type: must be one of auto, any, got 'x'"


def test_a_body_that_is_not_an_object_names_no_param() -> None:
    with pytest.raises(TranslationError) as caught:
        body_object([])
    assert (caught.value.message, caught.value.param) == ("the body must be a JSON object, got a list", None)
