"""Namespaced tool names as chat function names and back (responses.names)."""

from __future__ import annotations

from gateway.core.translate.responses.names import ToolName, tool_names
from gateway.core.translate.responses.request import to_chat
from tests.support.responses_translation import (
    body,
)


def test_a_namespaced_name_too_long_for_chat_is_cut_and_still_found() -> None:
    group = {"type": "namespace", "name": "mcp__" + "s" * 40, "tools": [{"type": "function", "name": "t" * 30},
                                                                       {"type": "function", "name": "t" * 29 + "u"}]}
    names = [tool["function"]["name"] for tool in to_chat(body(tools=[group]))["tools"]]
    assert [len(name) for name in names] == [64, 64] and names[0] != names[1]
    assert all(name.startswith("mcp__" + "s" * 40 + "__") for name in names)
    assert tool_names(body(tools=[group]))[names[1]] == ToolName(group["name"], "t" * 29 + "u", custom=False)
