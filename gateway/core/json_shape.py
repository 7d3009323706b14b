"""Checks that a JSON value is of the kind expected where it is, with errors that name its dotted path.

A client's or an upstream's JSON is read key by key. Each read checks the value's kind (object,
array, string, boolean, number) and, when it is not what the reader expected, raises an error
that names where the value is, as `messages[2].content[0].text`, and what was found there.

The checks are the same for every API the gateway speaks; how their errors read is each API's
own, and clients see those sentences: Anthropic's translation says `messages[2].content: must be
a list, got 'x'`, OpenAI's APIs say `input[0].role must be a string, got null.` A `Wording`
holds one API's way of saying it, and a `Checker` checks in that wording.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, TypeGuard, TypeVar

T = TypeVar("T")

ErrorFactory = Callable[[str, str | None, str], Exception]
"""Makes the error for a value out of shape from (message, dotted path or None for the whole body, code)."""


class Kind(Enum):
    """What a check expects a value to be."""

    OBJECT = "object"
    ARRAY = "array"
    STRING = "string"
    BOOLEAN = "boolean"
    NUMBER = "number"


def key_path(path: str, key: str) -> str:
    """The dotted path of `key` in the object at `path` (the empty path is the whole body)."""
    return f"{path}.{key}" if path else key


def index_path(path: str, index: int) -> str:
    """The path of item `index` of the array at `path`."""
    return f"{path}[{index}]"


def is_int(value: Any) -> TypeGuard[int]:
    """Whether `value` is a JSON integer (Python counts a bool as one; JSON does not)."""
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True, slots=True, kw_only=True)
class Wording:
    """How one API words the errors of its checks.

    `sentence` is filled with `path`, `expected` (a name from `names`, or the caller's own words)
    and `got` (the value found, as `show` shows it; `show_choice` where one of some words was
    expected); `missing` with `path`, for a key that must be there and is not.
    """

    sentence: str
    names: Mapping[Kind, str]
    show: Callable[[Any], str]
    error: ErrorFactory
    code: str
    missing: str
    missing_code: str
    show_choice: Callable[[Any], str]
    choice_code: str
    quote_choices: bool = False  # `one of 'a', 'b'` rather than `one of a, b`
    quote_names: bool = False  # a top-level key is shown `'model'`, a deeper path as it is


class Checker:
    """The shape checks, worded by one API's `Wording`; each returns the value it let through.

    A check of a value in place costs one type test; the error's message is built only when it fails.
    """

    __slots__ = ("names", "wording")

    def __init__(self, wording: Wording) -> None:
        self.wording = wording
        self.names = wording.names

    def fail(self, path: str, expected: str, got: Any) -> Exception:
        """The error for `got`, found at `path` where `expected` (words after "must be") was; raise it."""
        wording = self.wording
        return self._error(path, wording.sentence.format(path=self._shown(path), expected=expected,
                                                         got=wording.show(got)), wording.code)

    def missing(self, path: str) -> Exception:
        """The error for a key that must be there, at `path`, and is not; raise it."""
        wording = self.wording
        return self._error(path, wording.missing.format(path=self._shown(path)), wording.missing_code)

    def choice_error(self, path: str, choices: Sequence[str], got: Any) -> Exception:
        """The error for `got`, found at `path` where one of `choices` was expected; raise it."""
        wording = self.wording
        listed = ", ".join(map(repr, choices) if wording.quote_choices else choices)
        message = wording.sentence.format(path=self._shown(path), expected=f"one of {listed}",
                                          got=wording.show_choice(got))
        return self._error(path, message, wording.choice_code)

    def required(self, container: Mapping[str, Any], key: str, path: str) -> Any:
        """`container[key]`, `container` being the object at `path`; the `missing` error when absent."""
        if key not in container:
            raise self.missing(key_path(path, key))
        return container[key]

    def object(self, value: Any, path: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(path, self.names[Kind.OBJECT], value)
        return value

    def array(self, value: Any, path: str) -> list[Any]:
        if not isinstance(value, list):
            raise self.fail(path, self.names[Kind.ARRAY], value)
        return value

    def string(self, value: Any, path: str) -> str:
        if not isinstance(value, str):
            raise self.fail(path, self.names[Kind.STRING], value)
        return value

    def boolean(self, value: Any, path: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(path, self.names[Kind.BOOLEAN], value)
        return value

    def number(self, value: Any, path: str, *, finite: bool = False) -> int | float:
        """An integer or a float (a bool is neither); with `finite`, not an infinity or NaN either."""
        if isinstance(value, bool) or not isinstance(value, int | float) or (
            finite and isinstance(value, float) and not math.isfinite(value)
        ):
            raise self.fail(path, self.names[Kind.NUMBER], value)
        return value

    def strings(self, value: Any, path: str) -> list[str]:
        """An array of strings; null is an empty one."""
        if value is None:
            return []
        return [self.string(item, index_path(path, index)) for index, item in enumerate(self.array(value, path))]

    def one_of(self, value: Any, path: str, choices: Sequence[str]) -> str:
        """`value` when it is one of the words `choices`."""
        if not isinstance(value, str) or value not in choices:
            raise self.choice_error(path, choices, value)
        return value

    def _shown(self, path: str) -> str:
        if self.wording.quote_names and "." not in path and "[" not in path:
            return f"'{path}'"
        return path

    def _error(self, path: str, message: str, code: str) -> Exception:
        return self.wording.error(message, path or None, code)


def optional(
    container: Mapping[str, Any], key: str, read: Callable[[Any, str], T], *, path: str | None = None
) -> T | None:
    """`read(container[key], path)`, or None when the key is absent or null; `path` defaults to `key`."""
    value = container.get(key)
    return None if value is None else read(value, path or key)
