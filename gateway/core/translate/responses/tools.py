"""A Responses request's tools, tool choice and text format as chat completions takes them."""

from __future__ import annotations

from typing import Any

from gateway.core.json_shape import optional
from gateway.core.translate.responses.checks import (
    CHECK,
    as_bool,
    as_list,
    as_object,
    as_string,
    untranslatable,
)
from gateway.core.translate.responses.names import qualified

# Built-in tools a request may offer and the model do without: dropped, unless tool_choice forces one.
OFFERED_ONLY = frozenset({"web_search", "web_search_preview", "web_search_2025_08_26",
                          "web_search_preview_2025_03_11"})
_CHOICE_MODES = ("none", "auto", "required")
_ALLOWED_MODES = ("auto", "required")
_MEMBER_TYPES = ("function", "custom")
_FORMAT_TYPES = ("text", "json_object", "json_schema")


def tools_to_chat(value: Any, path: str) -> list[dict[str, Any]]:
    """Chat function tools for the Responses tools (a namespace's flattened); web search is dropped, other built-ins refused."""
    tools = []
    for index, tool in enumerate(as_list(value, path)):
        where = f"{path}[{index}]"
        kind = as_object(tool, where).get("type")
        match kind:
            case "function":
                tools.append(_function(tool, where, None))
            case "custom":
                tools.append(_custom(tool, where, None))
            case "namespace":
                namespace = as_string(tool.get("name"), f"{where}.name")
                for number, member in enumerate(as_list(tool.get("tools"), f"{where}.tools")):
                    inner = f"{where}.tools[{number}]"
                    match as_object(member, inner).get("type"):
                        case "function":
                            tools.append(_function(member, inner, namespace))
                        case "custom":
                            tools.append(_custom(member, inner, namespace))
                        case other:
                            raise CHECK.choice_error(f"{inner}.type", _MEMBER_TYPES, other)
            case str() if kind in OFFERED_ONLY:
                pass  # an offer the model can do without: it answers from what it knows
            case str():
                raise untranslatable(f"{where}.type", f"the built-in tool {kind[:40]!r}")
            case _:
                raise CHECK.fail(f"{where}.type", "a string", kind)
    return tools


def added_tools(items: Any) -> list[dict[str, Any]]:
    """The chat tools of the `additional_tools` input items, in their order."""
    tools: list[dict[str, Any]] = []
    for index, item in enumerate(items if isinstance(items, list) else ()):
        if isinstance(item, dict) and item.get("type") == "additional_tools":
            tools += tools_to_chat(item.get("tools"), f"input[{index}].tools")
    return tools


def _custom(tool: dict[str, Any], path: str, namespace: str | None) -> dict[str, Any]:
    """A custom tool as a chat function of one string, `input`, which its grammar (if any) describes."""
    function: dict[str, Any] = {"name": qualified(namespace, as_string(tool.get("name"), f"{path}.name"))}
    if (description := optional(tool, "description", as_string, path=f"{path}.description")) is not None:
        function["description"] = description
    text = "The tool's input, as free-form text."
    kind = optional(tool, "format", as_object, path=f"{path}.format")
    if kind is not None and kind.get("type") == "grammar":
        syntax = as_string(kind.get("syntax"), f"{path}.format.syntax")
        definition = as_string(kind.get("definition"), f"{path}.format.definition")
        text = f"The tool's input, as text this {syntax} grammar accepts:\n{definition}"
    function["parameters"] = {"type": "object", "properties": {"input": {"type": "string", "description": text}},
                              "required": ["input"], "additionalProperties": False}
    return {"type": "function", "function": function}


def _function(tool: dict[str, Any], path: str, namespace: str | None) -> dict[str, Any]:
    function: dict[str, Any] = {"name": qualified(namespace, as_string(tool.get("name"), f"{path}.name"))}
    if (description := optional(tool, "description", as_string, path=f"{path}.description")) is not None:
        function["description"] = description
    if (parameters := optional(tool, "parameters", as_object, path=f"{path}.parameters")) is not None:
        function["parameters"] = parameters
    if (strict := optional(tool, "strict", as_bool, path=f"{path}.strict")) is not None:
        function["strict"] = strict
    return {"type": "function", "function": function}


def tool_choice_to_chat(value: Any, path: str) -> str | dict[str, Any]:
    """Chat's tool_choice for a Responses one (a namespaced function by its flattened name)."""
    if isinstance(value, str):
        return CHECK.one_of(value, path, _CHOICE_MODES)
    kind = as_object(value, path).get("type")
    if kind == "function" or kind == "custom":
        namespace = optional(value, "namespace", as_string, path=f"{path}.namespace")
        name = qualified(namespace, as_string(value.get("name"), f"{path}.name"))
        return {"type": "function", "function": {"name": name}}
    if kind == "allowed_tools":
        mode = CHECK.one_of(value.get("mode"), f"{path}.mode", _ALLOWED_MODES)
        allowed = []
        for index, tool in enumerate(as_list(value.get("tools"), f"{path}.tools")):
            where = f"{path}.tools[{index}]"
            if as_object(tool, where).get("type") != "function":
                raise untranslatable(f"{where}.type", "a tool other than a function")
            allowed.append(tool_choice_to_chat(tool, where))
        return {"type": "allowed_tools", "allowed_tools": {"mode": mode, "tools": allowed}}
    if isinstance(kind, str):
        raise untranslatable(f"{path}.type", f"a tool_choice of type {kind[:40]!r}")
    raise CHECK.fail(f"{path}.type", "a string", kind)


def response_format(value: Any, path: str) -> dict[str, Any] | None:
    """Chat's `response_format` for `text.format`; None for plain text, chat's default."""
    kind = as_object(value, path).get("type")
    match kind:
        case "text":
            return None
        case "json_object":
            return {"type": "json_object"}
        case "json_schema":
            schema: dict[str, Any] = {
                "name": as_string(value.get("name"), f"{path}.name"),
                "schema": as_object(value.get("schema"), f"{path}.schema"),
            }
            if (description := optional(value, "description", as_string, path=f"{path}.description")) is not None:
                schema["description"] = description
            if (strict := optional(value, "strict", as_bool, path=f"{path}.strict")) is not None:
                schema["strict"] = strict
            return {"type": "json_schema", "json_schema": schema}
        case _:
            raise CHECK.choice_error(f"{path}.type", _FORMAT_TYPES, kind)
