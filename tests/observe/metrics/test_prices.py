"""gateway.observe.metrics.prices: litellm's list prices, found with or without a provider prefix."""

from __future__ import annotations

import pytest

from gateway.observe.metrics.prices import Price, load_prices, price_of


def test_a_price_is_found_without_its_provider_prefix() -> None:
    prices = {"gpt-4o": Price(1.0, 2.0), "openai/special": Price(3.0, 4.0)}
    assert price_of("gpt-4o", prices) == Price(1.0, 2.0)
    assert price_of("openai/gpt-4o", prices) == Price(1.0, 2.0)
    assert price_of("openai/special", prices) == Price(3.0, 4.0)
    assert price_of("unknown", prices) is None


def test_a_price_costs_prompt_and_completion_tokens_apart() -> None:
    assert Price(0.5, 2.0).of(3, 4) == 3 * 0.5 + 4 * 2.0


def test_litellm_s_table_is_read_from_its_file() -> None:
    price = load_prices()["gpt-4o-mini"]  # $0.15 / 1M prompt tokens, $0.60 / 1M completion tokens
    assert (price.prompt, price.completion) == (pytest.approx(0.15e-6), pytest.approx(0.6e-6))
