"""Config errors: each names its dotted path and what was expected, and a file's are told all at once."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeAlias

from gateway.core.json_shape import index_path, key_path

Loc: TypeAlias = tuple[str | int, ...]  # a place in the document: keys and list indexes


class ConfigError(Exception):
    """The configuration is invalid; `errors` holds every path-qualified problem."""

    def __init__(self, errors: Sequence[str]) -> None:
        self.errors = tuple(errors)
        super().__init__("\n".join(self.errors))


def path_of(loc: Loc) -> str:
    """`routes.smart.targets[1].weight` for that place; a key that is not printable text is shown as its repr.

    Spelt as the request checks spell theirs (core.json_shape): one path syntax in every error.
    """
    path = ""
    for part in loc:
        if isinstance(part, int):
            path = index_path(path, part)
        else:
            path = key_path(path, part if part.isprintable() else repr(part))
    return path or "top level"


def describe(value: Any) -> str:
    """A value as messages quote it: short text and numbers as written, anything else by its kind."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return f"{value!r}"
    if isinstance(value, str):
        return f"{value!r}" if len(value) <= 40 else "a string"
    if isinstance(value, list):
        return "a list" if value else "an empty list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


class Problems:
    """The problems of one document, in the order found.

    A value the schema refused is not checked again: no problem is added at or under a place in
    `refused`, which would only repeat what the first one said.
    """

    def __init__(self) -> None:
        self.messages: list[str] = []
        self.refused: list[Loc] = []

    def add(self, loc: Loc, message: str) -> None:
        if not self.is_refused(loc):
            self.messages.append(f"{path_of(loc)}: {message}")

    def refuse(self, loc: Loc, message: str) -> None:
        """Tell a problem with the value at `loc`, which is then left out of every later check."""
        self.messages.append(f"{path_of(loc)}: {message}")
        self.refused.append(loc)

    def is_refused(self, loc: Loc) -> bool:
        return any(loc[: len(refused)] == refused for refused in self.refused)
