"""Configs the loader would refuse, built by changing the targets of one it accepts.

The runtime must hold on its own whatever the loader checks: these tests hand the gateway a
Config whose targets were changed after loading.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from gateway.core.settings import Config
from gateway.core.tree import Node, Route, Target


def with_targets(config: Config, changes: Mapping[str, Mapping[str, Any]]) -> Config:
    """`config` with each target named in `changes` replaced by a copy with those fields changed."""

    def changed(node: Node) -> Node:
        if isinstance(node, Target):
            return dataclasses.replace(node, **changes[node.name]) if node.name in changes else node
        return dataclasses.replace(node, children=tuple(changed(child) for child in node.children))

    routes = {name: Route(route.name, changed(route.root), route.memory) for name, route in config.routes.items()}
    return dataclasses.replace(config, routes=routes)
