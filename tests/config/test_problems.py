"""Config errors (gateway.config.problems): dotted paths, values quoted by their kind, a place refused once."""

from __future__ import annotations

import pytest

from gateway.config.problems import ConfigError, Problems, describe, path_of


@pytest.mark.parametrize(
    ("loc", "path"),
    [
        ((), "top level"),
        (("routes",), "routes"),
        (("routes", "smart", "targets", 1, "weight"), "routes.smart.targets[1].weight"),
        (("auth", "keys", 0), "auth.keys[0]"),
        (("routes", "a\nb"), "routes.'a\\nb'"),  # a key that is not printable text, as its repr
    ],
)
def test_a_place_is_its_dotted_path(loc: tuple[str | int, ...], path: str) -> None:
    assert path_of(loc) == path


@pytest.mark.parametrize(
    ("value", "said"),
    [
        (None, "null"),
        (True, "a boolean"),
        (-1, "-1"),
        (0.5, "0.5"),
        ("fast", "'fast'"),
        ("x" * 41, "a string"),  # long text is not quoted: it may be a secret pasted in the wrong place
        ([], "an empty list"),
        ([1], "a list"),
        ({}, "a mapping"),
        (b"raw", "bytes"),
    ],
)
def test_a_value_is_quoted_short_or_named_by_its_kind(value: object, said: str) -> None:
    assert describe(value) == said


def test_nothing_is_told_at_or_under_a_place_refused() -> None:
    problems = Problems()
    problems.add(("a",), "first")
    problems.refuse(("routes", "r"), "must be a mapping")
    problems.add(("routes", "r"), "again")
    problems.add(("routes", "r", "weight"), "under it")
    problems.add(("routes", "rr"), "a sibling")
    assert problems.messages == ["a: first", "routes.r: must be a mapping", "routes.rr: a sibling"]
    assert problems.is_refused(("routes", "r", "targets", 0)) and not problems.is_refused(("routes",))


def test_a_config_error_holds_every_message() -> None:
    error = ConfigError(["a: one", "b: two"])
    assert error.errors == ("a: one", "b: two") and str(error) == "a: one\nb: two"
