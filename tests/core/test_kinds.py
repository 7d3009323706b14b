"""The providers a target can name (gateway.core.kinds): their providerParams and the client APIs they serve natively."""

from __future__ import annotations

import pytest

from gateway.core.kinds import KINDS
from gateway.core.kinds import serves_natively as native
from gateway.core.tree import Target


def target(provider: str, responses_api: str = "native") -> Target:
    return Target(name="t", provider=provider, base_url="", api_key="", responses_api=responses_api)


@pytest.mark.parametrize(
    ("provider", "responses_api", "api", "expected"),
    [
        ("openai", "native", "responses", True),
        ("openai", "translate", "responses", False),
        ("openai", "native", "messages", False),
        ("anthropic", "native", "messages", True),
        ("anthropic", "translate", "messages", True),  # responsesApi is about the Responses API only
        ("anthropic", "native", "responses", False),
        ("mock", "native", "responses", False),
        ("deepseek", "native", "responses", False),  # a provider only litellm knows
    ],
)
def test_which_targets_serve_a_client_api_as_it_is(provider: str, responses_api: str, api: str, expected: bool) -> None:
    assert native(target(provider, responses_api), api) is expected


def test_only_our_own_providers_are_served_without_litellm() -> None:
    assert [name for name, kind in KINDS.items() if not kind.via_litellm] == ["openai", "mock"]


def test_a_providers_params_are_found_by_their_config_spelling() -> None:
    bedrock = KINDS["bedrock"]
    region = bedrock.param("awsRegionName")
    assert region is not None and region.argument == "aws_region_name" and not region.secret
    secret = bedrock.param("awsSecretAccessKey")
    assert secret is not None and secret.secret
    assert bedrock.param("aws_region_name") is None  # the loader spells keys in camelCase first
    assert KINDS["openai"].param("awsRegionName") is None
