"""A route as check-config prints it: an indented tree, inherited settings resolved, secrets left out.

Keys are shown as set or not; every value that came from the environment as its `${VAR}`
reference, as written; a URL's userinfo as `***@`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from gateway.core.masks import mask_userinfo, show_references
from gateway.core.tree import Fallback, LoadBalance, Node, Route, Single, Target


def describe_route(route: Route) -> Iterator[str]:
    """The route as an indented tree, inherited settings resolved, secrets left out."""
    memory = route.memory
    yield f"{route.name}  (memory defaults: {memory.memory_type}, maxMessages={memory.max_messages}, maxTokens={memory.max_tokens})"
    yield from _describe_node(route.root, 1)


def _describe_node(node: Node, depth: int) -> Iterator[str]:
    pad = "  " * depth
    match node:
        case Target():
            retry = node.retry
            parts = [
                f"provider={node.provider}",
                f"weight={node.weight:g}",
                f"baseUrl={mask_userinfo(show_references(node.base_url, node.env_refs)) if node.base_url else '-'}",
                f"apiKey={'set' if node.api_key else 'none'}",
                f"timeout={node.timeout:g}s",
                f"streamIdleTimeout={node.stream_idle_timeout:g}s",
                f"retry={retry.attempts}x on {sorted(retry.on_status_codes)}",
            ]
            if node.override_params:
                parts.append(f"overrideParams={_shown(dict(node.override_params), node.env_refs)}")
            if node.headers:
                parts.append(f"headers={sorted(node.headers)}")
            yield f"{pad}- target {node.name}: " + " ".join(parts)
        case Single() | Fallback() | LoadBalance():
            mode = {Single: "single", Fallback: "fallback", LoadBalance: "loadbalance"}[type(node)]
            codes = getattr(node, "on_status_codes", None)
            triggers = f" onStatusCodes={sorted(codes)}" if codes is not None else ""
            yield f"{pad}- {mode} {node.name}: weight={node.weight:g}{triggers}"
            for child in node.children:
                yield from _describe_node(child, depth + 1)


def _shown(value: Any, refs: Mapping[str, str]) -> Any:
    """`value` (text, or lists and mappings of it) with its values from the environment shown as references."""
    if isinstance(value, str):
        return mask_userinfo(show_references(value, refs))
    if isinstance(value, dict):
        return {_shown(key, refs): _shown(item, refs) for key, item in value.items()}
    if isinstance(value, list):
        return [_shown(item, refs) for item in value]
    return value
