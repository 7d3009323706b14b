"""The base of every mapping in the config's schema: how its keys may be spelled, null, unknown keys."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ModelWrapValidatorHandler, ValidationError, model_validator
from pydantic_core import ErrorDetails, InitErrorDetails, PydanticCustomError

from gateway.config.problems import Loc, describe


def camel(key: str) -> str:
    """The camelCase spelling of `key`: Portkey writes `api_key` where this config writes `apiKey`."""
    head, *rest = key.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def refusal(message: str, *, stray: bool = False) -> PydanticCustomError:
    """The error a value check raises: `message` is what the config's problem list says after the path.

    A `stray` key (unknown, or spelled twice) is no value of its mapping: its mapping's own check
    does not miss it.
    """
    return PydanticCustomError("config", "{message}", {"message": message, "stray": stray})


class Section(BaseModel):
    """A mapping of the config file.

    Its keys are camelCase, or Portkey's snake_case spelling of them (`api_key` reads as
    `apiKey`); a key given null is as absent; any other key is refused, with the keys expected.
    """

    # A validator is built when first used, for start-up cost: ConfigFile's at load (holding the
    # sections'), Node's for the first x-gateway-config tree; the sections' own are never needed.
    model_config = ConfigDict(extra="forbid", alias_generator=camel, frozen=True, defer_build=True)
    # what a value that is not a mapping is told
    expected: ClassVar[str] = "must be a mapping"
    # keys of other sections that are easily put here: what each is told instead of "unknown key"
    misplaced: ClassVar[Mapping[str, str]] = {}

    @model_validator(mode="wrap")
    @classmethod
    def _spelled(cls, data: Any, validate: ModelWrapValidatorHandler[Section]) -> Section:
        """Validate `data` with its keys in camelCase and its nulls left out; its stray keys are told with its other problems."""
        if not isinstance(data, dict):
            raise refusal(f"{cls.expected}, got {describe(data)}")
        keys = _keys(cls)
        spelled: dict[str, Any] = {}
        seen: set[str] = set()
        strays: list[InitErrorDetails] = []
        for raw_key, value in data.items():
            key = camel(str(raw_key))
            if key in seen:
                message = "given twice (snake_case and camelCase spellings of one key)"
            elif key not in keys:
                message = cls.misplaced.get(key) or f"unknown key (expected one of: {', '.join(sorted(keys))})"
            else:
                message = ""
            if key in keys:
                spelled[key] = value  # of two spellings, the later is read
            if message:
                strays.append({"type": refusal(message, stray=True), "loc": (key,), "input": value})
            seen.add(key)
        given = {key: value for key, value in spelled.items() if value is not None}
        if not strays:
            return validate(given)
        try:
            validate(given)
        except ValidationError as invalid:
            strays.extend(map(again, invalid.errors()))
        raise ValidationError.from_exception_data(cls.__name__, strays)


def again(error: ErrorDetails, loc: Loc | None = None) -> InitErrorDetails:
    """`error` to raise again (at `loc`, if given) with others."""
    detail: InitErrorDetails = {
        "type": PydanticCustomError("config", "{message}", error["ctx"])
        if error["type"] == "config"
        else error["type"],
        "loc": tuple(error["loc"]) if loc is None else loc,
        "input": error["input"],
    }
    if error["type"] != "config" and "ctx" in error:
        detail["ctx"] = error["ctx"]
    return detail


@functools.cache
def _keys(section: type[Section]) -> frozenset[str]:
    return frozenset(field.alias or name for name, field in section.model_fields.items())
