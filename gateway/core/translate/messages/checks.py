"""The shape checks of Anthropic request and answer bodies, in the words of the Messages API's errors."""

from __future__ import annotations

from typing import Any

from gateway.core.json_shape import Checker, Kind, Wording
from gateway.core.translate import TranslationError

JSON = dict[str, Any]


def describe(value: Any) -> str:
    """A value found where another was expected, as an error shows it: its JSON, cut at 40 characters."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    shown = repr(value)
    return shown if len(shown) <= 40 else shown[:37] + "..."


CHECK = Checker(Wording(
    sentence="{path}: must be {expected}, got {got}",
    names={Kind.OBJECT: "an object", Kind.ARRAY: "a list", Kind.STRING: "a string",
           Kind.BOOLEAN: "a boolean", Kind.NUMBER: "a finite number"},
    show=describe,
    error=TranslationError,
    code="invalid_value",
    missing="{path}: required",
    missing_code="invalid_value",
    show_choice=describe,
    choice_code="invalid_value",
))
"""Every failed check is a TranslationError naming the dotted path: `messages[0].content: must be a list, got 1`."""


# The checks by name: read through CHECK, each of the many values a body holds would cost an
# attribute lookup more.
as_object = CHECK.object
as_list = CHECK.array
as_string = CHECK.string
as_bool = CHECK.boolean
as_number = CHECK.number
as_strings = CHECK.strings
required = CHECK.required


def body_object(value: Any) -> JSON:
    """`value`, the whole body, when it is an object."""
    if not isinstance(value, dict):
        raise TranslationError(f"the body must be a JSON object, got {describe(value)}")
    return value


def listed(value: Any) -> list[Any]:
    """`value` when it is a list, else an empty one: for looking through a body not yet checked."""
    return value if isinstance(value, list) else []
