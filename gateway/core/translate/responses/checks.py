"""The shape checks of Responses requests and of the chat answers that serve them, in OpenAI's words."""

from __future__ import annotations

from typing import Any

from gateway.core.json_shape import Checker, Kind, Wording, is_int
from gateway.core.translate import MalformedAnswer, TranslationError

_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
_VERBOSITIES = ("low", "medium", "high")


def kind_name(value: Any) -> str:
    """What kind of JSON value `value` is, as an error names it: `null`, `a string`, `an array`..."""
    match value:
        case None:
            return "null"
        case bool():
            return "a boolean"
        case int() | float():
            return "a number"
        case str():
            return "a string" if value else "an empty string"
        case list():
            return "an array"
        case _:
            return "an object"


def _shown_choice(value: Any) -> str:
    return repr(value[:40]) if isinstance(value, str) else kind_name(value)


def _malformed(message: str, path: str | None, code: str) -> MalformedAnswer:
    return MalformedAnswer(message)


_NAMES = {Kind.OBJECT: "an object", Kind.ARRAY: "an array", Kind.STRING: "a string",
          Kind.BOOLEAN: "a boolean", Kind.NUMBER: "a number"}

CHECK = Checker(Wording(
    sentence="{path} must be {expected}, got {got}.",
    names=_NAMES,
    show=kind_name,
    error=TranslationError,
    code="invalid_type",
    missing="'{path}' is required.",
    missing_code="missing_required_parameter",
    show_choice=_shown_choice,
    choice_code="invalid_value",
    quote_choices=True,
))
"""A request's checks: a TranslationError (a 400) naming the dotted param, `input[0].role must be a string, got null.`"""


# The checks by name: read through CHECK, each of the many values a body holds would cost an
# attribute lookup more.
as_object = CHECK.object
as_list = CHECK.array
as_string = CHECK.string
as_bool = CHECK.boolean
as_number = CHECK.number
as_strings = CHECK.strings
required = CHECK.required

ANSWER = Checker(Wording(
    sentence="{path} is {got}, not {expected}",
    names=_NAMES,
    show=kind_name,
    error=_malformed,
    code="",
    missing="{path} is missing",
    missing_code="",
    show_choice=kind_name,
    choice_code="",
))
"""An upstream answer's checks: a MalformedAnswer (the client's 502), `a stream chunk is an array, not an object`."""


def untranslatable(path: str, what: str) -> TranslationError:
    """The error for `what`, at `path`, which chat completions has no way to say."""
    return TranslationError(
        f"{path}: {what} cannot be translated to chat completions; it needs a target whose upstream "
        "serves the Responses API.",
        path,
        code="unsupported_value",
    )


def answer_text(value: Any, path: str) -> str | None:
    """An answer's string at `path`, which may be absent (None)."""
    return None if value is None else ANSWER.string(value, path)


# Readers of request fields, as `json_shape.optional` takes them: (value, path) -> the value checked.


def positive(value: Any, path: str) -> int:
    if not is_int(value) or value < 1:
        raise CHECK.fail(path, "a positive integer", value)
    return value


def metadata(value: Any, path: str) -> dict[str, str]:
    for key, item in as_object(value, path).items():
        as_string(item, f"{path}.{key}")
    return value  # type: ignore[no-any-return]  # every value was just checked


def effort(value: Any, path: str) -> str:
    return CHECK.one_of(value, path, _EFFORTS)


def verbosity(value: Any, path: str) -> str:
    return CHECK.one_of(value, path, _VERBOSITIES)
