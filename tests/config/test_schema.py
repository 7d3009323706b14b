"""The config file's shape (gateway.config.schema): its sections' defaults and the checks of a whole mapping."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from gateway.config.problems import Problems
from gateway.config.schema import Breaker, ConfigFile, Memory, Node, Retry, Server, Strategy
from gateway.config.validation import validated
from gateway.core.memory.settings import MemoryConfig
from gateway.core.settings import ServerConfig
from gateway.core.tree import BreakerPolicy, RetryPolicy


def checked(model: type[BaseModel], document: Any) -> tuple[Any, list[str]]:
    problems = Problems()
    return validated(model, document, problems), problems.messages


@pytest.mark.parametrize(
    ("section", "settings"),
    [(Server, ServerConfig()), (Retry, RetryPolicy()), (Breaker, BreakerPolicy()), (Memory, MemoryConfig())],
)
def test_a_sections_defaults_are_the_settings_defaults(section: type[BaseModel], settings: Any) -> None:
    """One default for each setting: the schema's (printed for editors) is the dataclass's."""
    model, problems = checked(section, {})
    assert problems == []
    for name in section.model_fields:
        value = getattr(model, name)
        if value is None or isinstance(value, BaseModel):  # given or not, merged over defaults at load
            continue
        expected = getattr(settings, name)
        assert (frozenset(value) if name == "on_status_codes" else value) == expected, name


def test_a_file_may_leave_every_section_but_its_routes_out() -> None:
    file, problems = checked(ConfigFile, {"routes": {"m": {"provider": "mock"}}})
    assert problems == [] and file.server == Server() and file.memory.store == "sqlite"
    assert list(file.routes) == ["m"] and file.routes["m"].provider == "mock"


def test_a_blank_strategy_mode_is_single() -> None:
    strategy, problems = checked(Strategy, {"mode": ""})
    assert problems == [] and strategy.mode == "single"


def test_a_node_reads_a_tree_of_nodes_and_leaves_unset_what_it_inherits() -> None:
    node, problems = checked(Node, {"strategy": {"mode": "fallback"}, "targets": [{"api_key": "k"}, {"weight": 2}]})
    assert problems == []
    first, second = node.targets
    assert (first.api_key, first.timeout, first.retry) == ("k", None, None)
    assert second.weight == 2.0 and node.provider is None
