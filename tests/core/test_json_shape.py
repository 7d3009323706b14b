"""The path-qualified JSON checker: each check lets the right kind through and names the path of the wrong one."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pytest

from gateway.core.errors import InvalidRequestError
from gateway.core.json_shape import Checker, Kind, Wording, index_path, is_int, key_path, optional


def _error(message: str, path: str | None, code: str) -> InvalidRequestError:
    return InvalidRequestError(message, param=path, code=code)


WORDING = Wording(
    sentence="{path} must be {expected}, got {got}.",
    names={Kind.OBJECT: "an object", Kind.ARRAY: "an array", Kind.STRING: "a string",
           Kind.BOOLEAN: "a boolean", Kind.NUMBER: "a number"},
    show=lambda value: "null" if value is None else type(value).__name__,
    error=_error,
    code="invalid_type",
    missing="'{path}' is required.",
    missing_code="missing_required_parameter",
    show_choice=repr,
    choice_code="invalid_value",
)
CHECK = Checker(WORDING)


def test_paths_are_dotted_keys_and_bracketed_indexes() -> None:
    path = key_path(index_path(key_path(index_path("messages", 2), "content"), 0), "text")
    assert path == "messages[2].content[0].text"
    assert key_path("", "model") == "model"  # the empty path is the whole body


@pytest.mark.parametrize(("check", "value"), [
    (CHECK.object, {"a": 1}), (CHECK.array, [1]), (CHECK.string, ""), (CHECK.boolean, False),
    (CHECK.number, 0), (CHECK.number, 1.5),
])
def test_a_value_of_the_kind_expected_is_let_through_as_it_is(check: Any, value: Any) -> None:
    assert check(value, "at") is value


@pytest.mark.parametrize(("check", "value", "message"), [
    (CHECK.object, [], "messages[2].content must be an object, got list."),
    (CHECK.array, {}, "messages[2].content must be an array, got dict."),
    (CHECK.string, None, "messages[2].content must be a string, got null."),
    (CHECK.boolean, 1, "messages[2].content must be a boolean, got int."),
    (CHECK.number, True, "messages[2].content must be a number, got bool."),
    (CHECK.number, "1", "messages[2].content must be a number, got str."),
])
def test_a_value_of_another_kind_is_an_error_naming_its_path(check: Any, value: Any, message: str) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        check(value, "messages[2].content")
    assert (caught.value.message, caught.value.param, caught.value.code) == (message, "messages[2].content", "invalid_type")


def test_finite_refuses_infinities_and_nan_only_when_asked() -> None:
    assert CHECK.number(math.inf, "t") == math.inf
    for value in (math.inf, -math.inf, math.nan):
        with pytest.raises(InvalidRequestError, match=r"^t must be a number, got float\.$"):
            CHECK.number(value, "t", finite=True)


def test_a_missing_key_is_named_by_its_path() -> None:
    assert CHECK.required({"a": None}, "a", "x") is None
    with pytest.raises(InvalidRequestError) as caught:
        CHECK.required({}, "model", "")
    assert (caught.value.message, caught.value.param, caught.value.code) == (
        "'model' is required.", "model", "missing_required_parameter")


def test_one_of_lists_the_choices_in_the_wordings_way() -> None:
    assert CHECK.one_of("low", "effort", ("low", "high")) == "low"
    with pytest.raises(InvalidRequestError) as caught:
        CHECK.one_of("mid", "effort", ("low", "high"))
    assert (caught.value.message, caught.value.code) == ("effort must be one of low, high, got 'mid'.", "invalid_value")
    quoted = Checker(replace(WORDING, quote_choices=True))
    with pytest.raises(InvalidRequestError, match=r"^effort must be one of 'low', 'high', got 1\.$"):
        quoted.one_of(1, "effort", ("low", "high"))


def test_quote_names_quotes_a_top_level_key_only() -> None:
    quoting = Checker(replace(WORDING, quote_names=True))
    assert quoting.fail("model", "a non-empty string", 1).args[0] == "'model' must be a non-empty string, got int."
    assert quoting.fail("messages[0].role", "a string", 1).args[0] == "messages[0].role must be a string, got int."


def test_strings_checks_each_item_and_takes_null_for_none() -> None:
    assert CHECK.strings(None, "stop") == []
    assert CHECK.strings(["a", "b"], "stop") == ["a", "b"]
    with pytest.raises(InvalidRequestError, match=r"^stop\[1\] must be a string, got int\.$"):
        CHECK.strings(["a", 2], "stop")


def test_optional_reads_a_present_value_at_its_path_and_skips_null() -> None:
    assert optional({"t": None}, "t", CHECK.number) is None
    assert optional({}, "t", CHECK.number) is None
    with pytest.raises(InvalidRequestError, match=r"^text\.format must be an object, got str\.$"):
        optional({"format": "x"}, "format", CHECK.object, path="text.format")


def test_the_wordings_error_factory_makes_any_exception() -> None:
    class Malformed(Exception):
        pass

    answers = Checker(replace(WORDING, sentence="{path} is {got}, not {expected}",
                              error=lambda message, path, code: Malformed(message)))
    with pytest.raises(Malformed, match=r"^a stream chunk is list, not an object$"):
        answers.object([], "a stream chunk")


def test_is_int_is_false_for_booleans_and_floats() -> None:
    assert is_int(3) and is_int(-1)
    assert not is_int(True) and not is_int(3.0) and not is_int("3")

