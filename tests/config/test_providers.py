"""The provider names a config may use (gateway.config.providers): ours, and every one the installed litellm knows."""

from __future__ import annotations

from gateway.config.providers import kind_of, litellm_provider_names
from gateway.core.kinds import KINDS


def test_the_installed_litellms_providers_are_read_from_its_source() -> None:
    names = litellm_provider_names()
    assert {"openai", "anthropic", "bedrock", "deepseek"} <= names
    assert all(isinstance(name, str) and name for name in names)


def test_a_provider_is_ours_one_litellm_knows_or_none() -> None:
    assert kind_of("bedrock") is KINDS["bedrock"]  # ours, with its providerParams
    deepseek = kind_of("deepseek")
    assert deepseek is not None and deepseek.name == "deepseek" and deepseek.params == () and deepseek.via_litellm
    assert kind_of("anthropic-ish") is None
