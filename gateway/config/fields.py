"""The kinds of value in the config's schema: text, flags, bounded numbers, choices, lists, mappings.

Each is a pydantic annotation that checks a value as the config's messages word it (`must be a
number, got 'fast'`), reads what `${VAR}` interpolation gave as YAML where a number or a flag is
expected, and tells the JSON Schema its type and bounds.
"""

from __future__ import annotations

import contextlib
import functools
import math
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Final, TypeVar, get_args

import yaml
from pydantic import AfterValidator, GetCoreSchemaHandler, GetJsonSchemaHandler, ValidatorFunctionWrapHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticUseDefault, ValidationError, core_schema

from gateway.config.interpolation import Interpolated
from gateway.config.problems import describe
from gateway.config.section import again, refusal

# Bounds on every duration and count: no wait needs more than 10 years nor any count more than a
# billion, and past them a clock's or a store's arithmetic overflows (a datetime, a SQLite integer).
MAX_SECONDS: Final = 10 * 365 * 24 * 3600.0
MAX_COUNT: Final = 10**9
T = TypeVar("T")
# A number with an exponent as YAML 1.2, JSON and editors' schema checks read it (1e6, 2.5e-3), which
# PyYAML's YAML 1.1 leaves as text unless it has a dot and a signed exponent (1.0e+6).
EXPONENT_NUMBER: Final = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)[eE][-+]?[0-9]+")
# A list's item the schema pass left out (gateway.config.validation), skipped by ListOf.
LEFT_OUT: Final = object()
# A `${VAR}` reference as the file is written, where a number, a flag or a choice is expected: the
# loader reads it once substituted.
ENV_REFERENCE: Final = {
    "type": "string",
    "pattern": r"\$\{[A-Za-z_][A-Za-z0-9_]*(:-[^}]*)?\}",
    "description": "A ${VAR} or ${VAR:-default} reference, read from the environment when the file is loaded.",
}


def _or_reference(schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
    """The JSON Schema of `schema`, or a `${VAR}` reference in its place."""
    return {"anyOf": [handler(schema), ENV_REFERENCE]}


@dataclass(frozen=True, slots=True)
class AsText:
    """Text as written; a number is taken as its text unless `numbers` is off; blank is the default when `blank_is_default`."""

    numbers: bool = True
    blank_is_default: bool = False

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        # a plain validator: a string from `${VAR}` stays itself, references and all
        return core_schema.no_info_plain_validator_function(
            self.check, json_schema_input_schema=core_schema.str_schema()
        )

    def check(self, value: Any) -> str:
        numeric = self.numbers and isinstance(value, (int, float)) and not isinstance(value, bool)
        if not (isinstance(value, str) or numeric):
            raise refusal(f"must be a string, got {describe(value)}")
        text = value if isinstance(value, str) else str(value)
        if not text and self.blank_is_default:
            raise PydanticUseDefault
        return text


@dataclass(frozen=True, slots=True)
class AsEntry:
    """A list's entry: non-empty text."""

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_plain_validator_function(
            self.check, json_schema_input_schema=core_schema.str_schema(min_length=1)
        )

    def check(self, value: Any) -> str:
        if not isinstance(value, str) or not value:
            raise refusal(f"must be a non-empty string, got {describe(value)}")
        return value


@dataclass(frozen=True, slots=True)
class AsFlag:
    """true or false; `true`/`false` text from `${VAR}` counts too."""

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_before_validator_function(self.check, core_schema.bool_schema(strict=True))

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return _or_reference(schema, handler)

    def check(self, value: Any) -> bool:
        if isinstance(value, Interpolated) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        if not isinstance(value, bool):
            raise refusal(f"must be true or false, got {describe(value)}")
        return value


@dataclass(frozen=True, slots=True)
class Bounds:
    """A number (an integer when annotating `int`) from `minimum`, or above 0 when `positive`, up to `maximum`.

    Messages say `must be >= 1, got 0`; `between` words both bounds at once (`must be between 0 and
    65535`); `over` words the maximum alone (`must be at most 3.1536e+08 seconds (10 years)`).
    """

    minimum: float = 0
    maximum: float | None = None
    positive: bool = False
    between: bool = False
    over: str = ""

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        low = {"gt": 0} if self.positive else {"ge": self.minimum}
        inner: CoreSchema
        if source is int:
            inner = core_schema.int_schema(
                ge=int(self.minimum), le=None if self.maximum is None else int(self.maximum)
            )
        else:
            inner = core_schema.float_schema(allow_inf_nan=False, le=self.maximum, **low)
        return core_schema.no_info_before_validator_function(
            functools.partial(self.check, kind=source), inner
        )

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return _or_reference(schema, handler)

    def check(self, value: Any, *, kind: type[int] | type[float]) -> float:
        number = _number(value, kind)
        if self.between and not self.minimum <= number <= (self.maximum or number):
            raise refusal(f"must be between {self.minimum} and {self.maximum}, got {number}")
        if number < self.minimum or (self.positive and number <= 0):
            lowest = (
                "> 0" if self.positive else f">= {self.minimum}" if kind is int else f">= {self.minimum:g}"
            )
            raise refusal(f"must be {lowest}, got {number if kind is int else format(number, 'g')}")
        if self.maximum is not None and number > self.maximum:
            raise refusal(f"{self.over}, got {number if kind is int else format(number, 'g')}")
        return number


def _number(value: Any, kind: type[int] | type[float]) -> float:
    """`value` as a number of `kind`; text from `${VAR}` is read as YAML reads a value."""
    if isinstance(value, Interpolated):
        with contextlib.suppress(yaml.YAMLError):
            value = yaml.safe_load(value)
    wanted = "an integer" if kind is int else "a number"
    if isinstance(value, str) and EXPONENT_NUMBER.fullmatch(value):
        value = float(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise refusal(f"must be {wanted}, got {describe(value)}")
    if isinstance(value, float) and not (math.isfinite(value) and (kind is float or value.is_integer())):
        raise refusal(f"must be {wanted}, got {value!r}")
    if kind is float and abs(value) > sys.float_info.max:
        raise refusal(f"must be {wanted} within a float's range, got a {len(str(abs(value)))}-digit integer")
    return kind(value)


@dataclass(frozen=True, slots=True)
class Chosen:
    """One of the annotated Literal's values, as text; blank is `blank` when given, the default when `blank_is_default`."""

    blank: str | None = None
    blank_is_default: bool = False

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_before_validator_function(
            functools.partial(self.check, options=get_args(source)), handler(source)
        )

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return _or_reference(schema, handler)

    def check(self, value: Any, *, options: tuple[str, ...]) -> str:
        text = AsText(blank_is_default=self.blank_is_default).check(value)
        if not text and self.blank is not None:
            return self.blank
        if text not in options:
            listed = " or ".join(options) if len(options) == 2 else f"one of {', '.join(options)}"
            raise refusal(f"must be {listed}, got {text!r}")
        return text


@dataclass(frozen=True, slots=True)
class StatusCode:
    """An HTTP status code a response can carry."""

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_before_validator_function(
            self.check, core_schema.int_schema(ge=100, le=599)
        )

    def check(self, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not 100 <= value <= 599:
            raise refusal(f"must be a status code between 100 and 599, got {describe(value)}")
        return value


@dataclass(frozen=True, slots=True)
class ListOf:
    """A list (of `items`, as messages name them); `non_empty` refuses an empty one too.

    Items the schema pass left out (LEFT_OUT) are skipped, and its other items' problems keep
    the places they have in the file.
    """

    items: str = ""
    non_empty: bool = False

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_wrap_validator_function(self.check, handler(source))

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        listed = handler(schema)
        return {**listed, "minItems": 1} if self.non_empty else listed

    def check(self, value: Any, validate: ValidatorFunctionWrapHandler) -> Any:
        if not isinstance(value, list) or (self.non_empty and not value):
            wanted = "a non-empty list" if self.non_empty else "a list"
            raise refusal(
                f"must be {wanted}{f' of {self.items}' if self.items else ''}, got {describe(value)}"
            )
        kept = [index for index, item in enumerate(value) if item is not LEFT_OUT]
        try:
            return validate([value[index] for index in kept])
        except ValidationError as refused:
            placed = [
                again(error, (kept[int(error["loc"][0])], *error["loc"][1:])) for error in refused.errors()
            ]
            raise ValidationError.from_exception_data(refused.title, placed) from None


def key_problem(key: object) -> str | None:
    """Why a mapping's key as YAML read it is not the text it was written as (a route name, a header), or None."""
    if isinstance(key, bool) or key is None:
        return (
            f"a key written as on, off, yes, no, true, false, null or ~ reads as {key} in YAML (1.1): "
            "quote it ('on') where it is a name"
        )
    return None


@dataclass(frozen=True, slots=True)
class MappingOf:
    """A mapping whose keys are taken as text, as written (body params, headers, route names)."""

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_before_validator_function(self.check, handler(source))

    def check(self, value: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise refusal(f"must be a mapping, got {describe(value)}")
        for key in value:
            problem = key_problem(key)
            if problem is not None:
                raise refusal(problem)
        return {str(key): item for key, item in value.items()}


def holds(problem: Callable[[T], str | None]) -> AfterValidator:
    """A check after the value's kind is known: `problem` names what is wrong with a value, or None."""

    def check(value: T) -> T:
        found = problem(value)
        if found is not None:
            raise refusal(found)
        return value

    return AfterValidator(check)


Text = Annotated[str, AsText()]
Setting = Annotated[str, AsText(blank_is_default=True)]  # blank text: the default
HeaderValue = Annotated[str, AsText(numbers=False)]
Flag = Annotated[bool, AsFlag()]
Weight = Annotated[float, Bounds()]
Fraction = Annotated[float, Bounds(positive=True, maximum=1, over="must be a fraction between 0 and 1")]
_TEN_YEARS: Final = f"must be at most {MAX_SECONDS:g} seconds (10 years)"
Seconds = Annotated[float, Bounds(maximum=MAX_SECONDS, over=_TEN_YEARS)]
PositiveSeconds = Annotated[float, Bounds(positive=True, maximum=MAX_SECONDS, over=_TEN_YEARS)]
_BILLION: Final = f"must be at most {MAX_COUNT} (a billion)"
Count = Annotated[int, Bounds(maximum=MAX_COUNT, over=_BILLION)]
PositiveCount = Annotated[int, Bounds(minimum=1, maximum=MAX_COUNT, over=_BILLION)]
Params = Annotated[dict[str, Any], MappingOf()]
Headers = Annotated[dict[str, HeaderValue], MappingOf()]
StatusCodes = Annotated[tuple[Annotated[int, StatusCode()], ...], ListOf("HTTP status codes")]
