"""The provider names a config may use: ours, and every provider the installed litellm knows."""

from __future__ import annotations

import ast
import functools
import importlib.util
from pathlib import Path

from gateway.core.kinds import KINDS, ProviderKind


@functools.cache
def litellm_provider_names() -> frozenset[str]:
    """The provider names the installed litellm knows, read from its source (not imported)."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or spec.origin is None:
        return frozenset()
    path = Path(spec.origin).parent / "types" / "utils.py"
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return frozenset()
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "LlmProviders":
            return frozenset(
                item.value.value
                for item in node.body
                if isinstance(item, ast.Assign) and isinstance(item.value, ast.Constant) and isinstance(item.value.value, str)
            )
    return frozenset()


def kind_of(name: str) -> ProviderKind | None:
    """The provider called `name`, or None when neither we nor litellm know it."""
    kind = KINDS.get(name)
    if kind is None and name in litellm_provider_names():
        kind = ProviderKind(name)
    return kind
