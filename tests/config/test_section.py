"""The base of every mapping in the config's schema (gateway.config.section): spellings, nulls, unknown keys."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import pytest
from pydantic import ValidationError

from gateway.config.fields import Count, Text
from gateway.config.problems import Problems
from gateway.config.section import Section, camel
from gateway.config.validation import validated


class Sample(Section):
    """A mapping with two keys, for these tests."""

    api_key: Text = "none"
    max_stored_messages: Count = 10


def problems_of(document: Any) -> tuple[Sample | None, list[str]]:
    problems = Problems()
    return validated(Sample, document, problems), problems.messages


@pytest.mark.parametrize(
    ("key", "spelled"),
    [("api_key", "apiKey"), ("max_stored_messages", "maxStoredMessages"), ("apiKey", "apiKey"), ("port", "port")],
)
def test_snake_case_is_spelled_in_camel_case(key: str, spelled: str) -> None:
    assert camel(key) == spelled


def test_keys_are_read_in_either_spelling_and_null_is_as_absent() -> None:
    sample, problems = problems_of({"api_key": "sk-1", "maxStoredMessages": None})
    assert problems == [] and sample == Sample(apiKey="sk-1", maxStoredMessages=10)


def test_an_unknown_key_is_refused_with_the_keys_expected_and_the_rest_still_checked() -> None:
    _, problems = problems_of({"apiKye": "sk-1", "maxStoredMessages": -1})
    assert problems == [
        "apiKye: unknown key (expected one of: apiKey, maxStoredMessages)",
        "maxStoredMessages: must be >= 0, got -1",
    ]


def test_a_key_given_in_both_spellings_is_refused_and_the_later_read() -> None:
    with pytest.raises(ValidationError) as caught:
        Sample.model_validate({"api_key": "first", "apiKey": [5]})
    told = [(error["loc"], error["msg"]) for error in caught.value.errors()]
    assert told == [
        (("apiKey",), "given twice (snake_case and camelCase spellings of one key)"),
        (("apiKey",), "must be a string, got a list"),  # the later spelling's value is the one checked
    ]


def test_a_value_that_is_not_a_mapping_is_told_what_was_expected() -> None:
    assert problems_of(["a"]) == (None, ["top level: must be a mapping, got a list"])


class Guarded(Section):
    """A mapping that tells a key easily put in it where that key belongs."""

    misplaced: ClassVar[Mapping[str, str]] = {"apiKey": "belongs to a target, not here"}

    max_stored_messages: Count = 10


def test_a_misplaced_key_is_told_where_it_belongs_instead_of_unknown() -> None:
    problems = Problems()
    assert validated(Guarded, {"api_key": "k", "apiKye": 1}, problems) == Guarded()
    assert problems.messages == [
        "apiKey: belongs to a target, not here",
        "apiKye: unknown key (expected one of: maxStoredMessages)",
    ]
