"""The schema pass: a document validated against a model of gateway.config.schema, every problem kept.

pydantic tells every value it refuses, but runs no mapping's own check (a model validator) while
one of its values is refused, and returns nothing when anything failed. To tell every problem
at once, and to give the checks that follow a model of everything valid, each refused value is
reported, then left out of the document (a mapping's key removed, a list's item emptied to `{}`
or marked LEFT_OUT, so that the items after it keep their index) and the document validated again. A problem at or
under a place already refused only repeats it: unreported, it leaves that place out for good (a
list's item) or that place's mapping (a key); so is a mapping whose own check fails once a value
was left out of it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from gateway.config.fields import LEFT_OUT
from gateway.config.problems import Loc, Problems
from gateway.config.section import camel

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


def validated(model: type[M], document: Any, problems: Problems) -> M | None:
    """`document` as a `model`, or None when no part of it is left to validate; every problem goes to `problems`."""
    document = _copied(document)
    strays: set[Loc] = set()
    while True:
        try:
            return model.model_validate(document)
        except ValidationError as refused:
            errors = refused.errors()
        # all of a pass's problems are told before any place is left out: a missing key's mapping
        # is left out, and the problems of its other keys are not repeats
        settled = tuple(place for place in problems.refused if place not in strays)
        left_out = [_told(error, problems, settled) for error in errors]
        strays.update(
            tuple(error["loc"]) for error in errors if error["type"] == "config" and error["ctx"]["stray"]
        )
        if () in left_out:
            return None
        problems.refused.extend(left_out)
        changed = [_leave_out(document, loc) or _leave_out_mapping(document, loc, problems) for loc in left_out]
        if not any(changed):
            return None


def placed(items: Sequence[T], at: Loc, problems: Problems) -> Iterator[tuple[int, T]]:
    """Each item of a validated list at `at` with its index in the file, where the items left out still count.

    For lists whose items are mappings an empty one of which is refused (a gateway key): an item
    refused whole is then left out, never kept emptied.
    """
    index = 0
    for item in items:
        while problems.is_refused((*at, index)):
            index += 1
        yield index, item
        index += 1


def _told(error: ErrorDetails, problems: Problems, settled: tuple[Loc, ...]) -> Loc:
    """Tell `error` unless it only repeats a problem of an earlier pass (`settled`); the place to leave out."""
    loc = tuple(error["loc"])
    above = min((refused for refused in settled if loc[: len(refused)] == refused), key=len, default=None)
    if above is not None:  # a list's item is then left out, a mapping's key with its mapping
        return above if above and isinstance(above[-1], int) else above[:-1]
    if any(len(refused) > len(loc) and refused[: len(loc)] == loc for refused in settled):
        return loc  # a check of the whole mapping, which misses the value left out of it
    if error["type"] == "missing":
        problems.refuse(loc, "is required")
        return loc[:-1]
    problems.refuse(loc, error["ctx"]["message"] if error["type"] == "config" else error["msg"])
    return loc


def _copied(value: Any) -> Any:
    """`value` with every mapping and list copied (the rest shared: a string keeps its references)."""
    if isinstance(value, dict):
        return {key: _copied(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copied(item) for item in value]
    return value


def _leave_out(document: Any, loc: Loc) -> bool:
    """Remove the value at `loc` from `document` (a list's item is emptied to `{}`); whether anything changed."""
    parent = document
    for part in loc[:-1]:
        parent = _child(parent, part)
        if parent is None:
            return False
    last = loc[-1]
    if isinstance(parent, list) and isinstance(last, int) and last < len(parent):
        if parent[last] is LEFT_OUT:
            return False
        # emptied, it still holds its place (a strategy node's targets are named by it); refused
        # again, it is left out, and the list skips it
        parent[last] = LEFT_OUT if parent[last] == {} else {}
        return True
    if isinstance(parent, dict) and isinstance(last, str):
        key = _key(parent, last)
        if key is not None:
            del parent[key]
            return True
    return False


def _leave_out_mapping(document: Any, loc: Loc, problems: Problems) -> bool:
    """Leave out the mapping of an absent key its own check asks for (`name: is required`); whether anything changed.

    Else the document would not change, and no problem elsewhere in it would be told.
    """
    mapping = document
    for part in loc[:-1]:
        mapping = _child(mapping, part)
    if len(loc) < 2 or not isinstance(mapping, dict) or not isinstance(loc[-1], str) or _key(mapping, loc[-1]) is not None:
        return False
    problems.refused.append(loc[:-1])
    return _leave_out(document, loc[:-1])


def _child(container: Any, part: str | int) -> Any:
    if isinstance(container, list) and isinstance(part, int) and part < len(container):
        return container[part]
    if isinstance(container, dict) and isinstance(part, str):
        key = _key(container, part)
        return None if key is None else container[key]
    return None


def _key(mapping: dict[Any, Any], key: str) -> Any:
    """The key of `mapping` that a location's `key` names: itself, or a spelling that reads as it (`api_key`)."""
    if key in mapping:
        return key
    return next((raw for raw in mapping if camel(str(raw)) == key), None)
