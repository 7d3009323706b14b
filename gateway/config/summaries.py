"""The checks of summary windows' settings, which need more than one value: a route's, the defaults' and the route names.

A window with `memoryType: summary_window` (a route's, or `memory.defaults` that routes without
their own inherit) needs `summaryRoute`, naming another route of the file, and `maxTokens`,
given in the window or in `memory.defaults`. A `summaryRoute` given with another memoryType
(which a request's `memoryType` header may switch to summary_window) must name a route too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from gateway.config.problems import Loc, Problems
from gateway.core.memory.settings import MemoryType


class GivenWindow(Protocol):
    """A memory window as the file gives it: None for what it leaves to be inherited."""

    @property
    def memory_type(self) -> str | None: ...

    @property
    def max_tokens(self) -> int | None: ...

    @property
    def summary_route(self) -> str | None: ...


def check_summary_windows(defaults: GivenWindow, routes: Mapping[str, GivenWindow | None], problems: Problems) -> None:
    """Tell `problems` each problem of the file's summary windows (`routes`: each route's own window, if any)."""
    for loc, message in summary_window_problems(defaults, routes):
        problems.add(loc, message)


def summary_window_problems(defaults: GivenWindow, routes: Mapping[str, GivenWindow | None]) -> list[tuple[Loc, str]]:
    """Each problem of the file's summary windows, at its place: (the path's keys, what is wrong)."""
    problems: list[tuple[Loc, str]] = []
    names = list(routes)
    problems += _window_problems(defaults, None, at=("memory", "defaults"), names=names)
    for name, window in routes.items():
        if window is not None:
            problems += _window_problems(window, defaults, at=("routes", name, "memory"), names=names, route=name)
        elif defaults.memory_type == MemoryType.SUMMARY_WINDOW and defaults.summary_route == name:
            problems.append(
                (("routes", name), "inherits memoryType summary_window from memory.defaults, whose summaryRoute is this "
                 "route: give it a memory window of its own (another memoryType, or another summaryRoute)")
            )  # fmt: skip
    return problems


def _window_problems(
    window: GivenWindow, base: GivenWindow | None, *, at: Loc, names: list[str], route: str | None = None
) -> list[tuple[Loc, str]]:
    """The problems of one window (`base`: the defaults it inherits from, None for the defaults themselves)."""
    problems: list[tuple[Loc, str]] = []
    memory_type = window.memory_type or (base.memory_type if base is not None else None)
    summary_route = window.summary_route or (base.summary_route if base is not None else None)
    max_tokens = window.max_tokens or (base.max_tokens if base is not None else None)
    if window.summary_route is not None and window.summary_route not in names:
        problems.append(((*at, "summaryRoute"), f"no route named {window.summary_route!r} (routes: {', '.join(names)})"))
    if memory_type != MemoryType.SUMMARY_WINDOW:
        return problems
    if summary_route is not None and summary_route == route:
        problems.append(((*at, "summaryRoute"), f"names its own route {route!r}: name another route (a cheaper model, say)"))
    # What a route's window inherits whole from the defaults is told once, at memory.defaults
    if base is not None and window.memory_type is None and window.summary_route is None and window.max_tokens is None:
        return problems
    if summary_route is None:
        problems.append(((*at, "summaryRoute"), "is required with memoryType summary_window (the route that writes summaries)"))
    if max_tokens is None:
        problems.append(((*at, "maxTokens"), "is required with memoryType summary_window (the kept window's tokens)"))
    return problems
