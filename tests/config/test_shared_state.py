"""The config's shared-state sections (gateway.config.shared_state): Sentinel's required keys and node addresses."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.config.problems import Problems
from gateway.config.shared_state import Breakers, Sentinel
from gateway.config.validation import validated


def told(model: type[Any], document: Any) -> list[str]:
    problems = Problems()
    validated(model, document, problems)
    return [message.removeprefix("top level: ") for message in problems.messages]


def test_a_sentinel_section_names_its_primary_and_sentinels() -> None:
    assert told(Sentinel, {"masterName": "m", "nodes": ["s:26379", "[::1]:26380"]}) == []
    assert told(Sentinel, {}) == ["masterName: is required", "nodes: is required"]


@pytest.mark.parametrize(
    ("node", "problem"),
    [
        ("s", "must be host:port, got 's'"),
        (":26379", "must be host:port, got ':26379'"),
        ("s:0", "the port must be between 1 and 65535, got 's:0'"),
        ("s:x", "the port must be between 1 and 65535, got 's:x'"),
        ("::1:26379", "must be host:port (an IPv6 host in brackets: [::1]:26379), got '::1:26379'"),
        ("[::1:26379", "must be host:port (an IPv6 host in brackets: [::1]:26379), got '[::1:26379'"),
    ],
)
def test_a_sentinel_node_is_host_and_port(node: str, problem: str) -> None:
    assert told(Sentinel, {"masterName": "m", "nodes": [node]}) == [f"nodes[0]: {problem}"]


def test_breakers_take_a_cluster_flag_and_a_sentinel() -> None:
    assert told(Breakers, {"store": "redis", "cluster": "yes"}) == ["cluster: must be true or false, got 'yes'"]
    assert told(Breakers, {"sentinel": {"masterName": "m", "nodes": []}}) == [
        "sentinel.nodes: must be a non-empty list of host:port strings, got an empty list"
    ]
