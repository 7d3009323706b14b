"""Responses tool names as chat function names and back: a namespace's tools are flattened into one list."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_NAMESPACE_JOIN = "__"
ROOT_NAMESPACE = "functions"  # what a model calls `functions.x` is the tool `x`
_MAX_NAME = 64  # the longest function name OpenAI's chat completions take


def qualified(namespace: str | None, name: str) -> str:
    """The chat function name of tool `name` in `namespace` (none, or the root namespace: the name itself).

    One longer than chat allows (64 characters) is cut, with a digest of the whole: still unique.
    """
    if namespace is None or namespace == ROOT_NAMESPACE:
        return name
    joined = f"{namespace}{_NAMESPACE_JOIN}{name}"
    if len(joined) <= _MAX_NAME:
        return joined
    return f"{joined[:_MAX_NAME - 9]}_{hashlib.sha256(joined.encode()).hexdigest()[:8]}"


@dataclass(frozen=True)
class ToolName:
    """What a chat function name stands for: a tool's namespace (None at the root), name, and kind."""

    namespace: str | None
    name: str
    custom: bool


def tool_names(request: Mapping[str, Any]) -> dict[str, ToolName]:
    """The namespaced and custom tools `request` offers, by chat function name (others are named as they are)."""
    found: dict[str, ToolName] = {}

    def add(tool: Any, namespace: str | None) -> None:
        if not isinstance(tool, dict) or not isinstance(name := tool.get("name"), str):
            return
        if tool.get("type") == "namespace":
            members = tool.get("tools")
            for member in members if isinstance(members, list) else ():
                add(member, name)
        elif tool.get("type") == "custom" or (namespace is not None and namespace != ROOT_NAMESPACE):
            root = namespace is None or namespace == ROOT_NAMESPACE
            found[qualified(namespace, name)] = ToolName(None if root else namespace, name, tool.get("type") == "custom")

    for group in offered(request):
        for tool in group:
            add(tool, None)
    return found


def offered(request: Mapping[str, Any]) -> list[list[Any]]:
    """The request's tool lists: its `tools`, and those of its `additional_tools` input items."""
    groups = [request["tools"]] if isinstance(request.get("tools"), list) else []
    items = request.get("input")
    for item in items if isinstance(items, list) else ():
        if isinstance(item, dict) and item.get("type") == "additional_tools" and isinstance(item.get("tools"), list):
            groups.append(item["tools"])
    return groups
