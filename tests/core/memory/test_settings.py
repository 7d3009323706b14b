"""Memory settings as the operator configures them (gateway.core.memory.settings)."""

from __future__ import annotations

from gateway.core.memory.settings import MEMORY_TYPES, MemoryConfig, MemorySettings


def test_the_default_window_is_within_the_default_limits() -> None:
    config = MemoryConfig()
    window, limits = config.defaults, config.limits
    assert window.memory_type in MEMORY_TYPES
    for name in ("max_messages", "max_tokens", "max_rounds", "max_chars"):
        assert getattr(window, name) <= getattr(limits, name), name


def test_the_memory_url_is_never_shown_in_a_repr() -> None:
    shown = repr(MemoryConfig(store="redis", url="redis://:hunter2@h:6379/0"))
    assert "hunter2" not in shown and "store='redis'" in shown


def test_settings_compare_by_value() -> None:
    assert MemorySettings(max_rounds=4) == MemorySettings(max_rounds=4) != MemorySettings()
