"""`${VAR}` in a config document (gateway.config.interpolation): substituted, and every value from the environment remembered."""

from __future__ import annotations

from typing import Any

from gateway.config.interpolation import Interpolated, env_refs, interpolate, longest_first, secret_forms
from gateway.config.problems import Problems

ENV = {"KEY": "sk-123", "EMPTY": "", "HOST": "h.example"}


def substituted(value: Any, env: dict[str, str] = ENV) -> tuple[Any, list[str], dict[str, str]]:
    problems, refs = Problems(), {}
    return interpolate(value, ("routes", "r"), env, problems=problems, refs=refs), problems.messages, refs


def test_references_are_substituted_throughout_the_document_and_remembered() -> None:
    value, problems, refs = substituted({"apiKey": "${KEY}", "urls": ["https://${HOST}/v1", 5], "plain": "text"})
    assert value == {"apiKey": "sk-123", "urls": ["https://h.example/v1", 5], "plain": "text"}
    assert problems == [] and refs == {"sk-123": "${KEY}", "h.example": "${HOST}"}
    assert isinstance(value["apiKey"], Interpolated) and value["apiKey"].refs == {"sk-123": "${KEY}"}
    assert type(value["plain"]) is str  # text without a reference is left as it is


def test_a_default_stands_for_a_variable_unset_or_empty_and_is_no_secret() -> None:
    value, problems, refs = substituted(["${MISSING:-8181}", "${EMPTY:-x}", "${EMPTY}", "${KEY:-unused}"])
    assert value == ["8181", "x", "", "sk-123"]
    assert problems == [] and refs == {"sk-123": "${KEY:-unused}"}  # the reference as written


def test_an_unset_variable_without_a_default_is_a_problem_at_its_path() -> None:
    value, problems, _ = substituted({"apiKey": "${NOT_SET}"})
    assert value == {"apiKey": ""}
    assert problems == ["routes.r.apiKey: environment variable NOT_SET is not set"]


def test_env_refs_finds_every_value_from_the_environment_inside_a_value() -> None:
    value, _, _ = substituted({"a": ["${KEY}", "plain"], "b": {"c": "https://${HOST}"}, "n": 1})
    assert env_refs(value) == {"h.example": "${HOST}", "sk-123": "${KEY}"}
    assert list(substituted({"${HOST}": 1})[0]) == ["${HOST}"]  # keys are names, never substituted
    assert env_refs("sk-123") == {}  # the same text, not from the environment


def test_numbers_and_flags_are_not_secret_forms_and_text_is_also_found_as_repr_quotes_it() -> None:
    forms = secret_forms({"8080": "${PORT}", "true": "${ON}", "1e3": "${N}", "tok\n": "${TOKEN}", "ab": "${AB}"})
    assert dict(forms) == {"tok\\n": "${TOKEN}", "tok\n": "${TOKEN}", "ab": "${AB}"}
    assert list(forms) == ["tok\\n", "tok\n", "ab"]  # longest first


def test_longest_first_orders_a_value_before_any_shorter_one_inside_it() -> None:
    assert list(longest_first({"a": "1", "abc": "3", "ab": "2"})) == ["abc", "ab", "a"]
