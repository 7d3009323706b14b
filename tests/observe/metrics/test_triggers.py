"""gateway.observe.metrics.triggers: which fallback reasons each target gets a series for."""

from __future__ import annotations

from gateway.config.loader import parse_config
from gateway.core.tree import DEFAULT_TRIGGER_CODES
from gateway.observe.metrics.triggers import TRANSPORT_OUTCOMES, leaves_with_triggers


def triggers_by_target(strategy: str) -> dict[str, frozenset[str]]:
    config = parse_config(
        "routes:\n  chat:\n"
        f"    strategy: {strategy}\n"
        "    targets:\n"
        "      - {name: a, provider: mock}\n"
        "      - {name: b, provider: mock}\n"
        "      - {name: c, provider: mock}\n"
    )
    return {target.name: triggers for target, triggers in leaves_with_triggers(config.routes["chat"].root)}


def test_a_fallback_moves_on_from_every_target_but_its_last() -> None:
    found = triggers_by_target("{mode: fallback, onStatusCodes: [429, 503]}")
    moves_on = frozenset({"429", "503", *TRANSPORT_OUTCOMES})
    assert found == {"a": moves_on, "b": moves_on, "c": frozenset()}


def test_a_fallback_without_codes_moves_on_at_the_default_ones() -> None:
    found = triggers_by_target("{mode: fallback}")
    assert found["a"] == frozenset({*map(str, DEFAULT_TRIGGER_CODES), *TRANSPORT_OUTCOMES})


def test_a_loadbalance_moves_on_from_any_target_only_with_codes() -> None:
    moves_on = frozenset({"429", *TRANSPORT_OUTCOMES})
    assert triggers_by_target("{mode: loadbalance, onStatusCodes: [429]}") == dict.fromkeys("abc", moves_on)
    assert triggers_by_target("{mode: loadbalance}") == dict.fromkeys("abc", frozenset())
