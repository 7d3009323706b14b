"""What a model's tokens cost: litellm's list prices, read from the table it ships."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass

import orjson

from gateway.tokens import bundled_tokenizer_dir


@dataclass(frozen=True, slots=True)
class Price:
    """USD per token, from litellm's price table."""

    prompt: float
    completion: float

    def of(self, prompt: int, completion: int) -> float:
        """The cost of `prompt` and `completion` tokens."""
        return prompt * self.prompt + completion * self.completion


@functools.cache
def load_prices() -> Mapping[str, Price]:
    """litellm's bundled price table, read as a file (litellm is never imported); empty if absent."""
    folder = bundled_tokenizer_dir()
    if folder is None:
        return {}
    path = folder.parent.parent / "model_prices_and_context_window_backup.json"
    try:
        table = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    prices: dict[str, Price] = {}
    for model, entry in table.items():
        if not isinstance(entry, dict):
            continue
        prompt, completion = entry.get("input_cost_per_token"), entry.get("output_cost_per_token")
        if isinstance(prompt, int | float) and isinstance(completion, int | float):
            prices[model] = Price(float(prompt), float(completion))
    return prices


def price_of(model: str, prices: Mapping[str, Price]) -> Price | None:
    """The price of `model`, also found without a provider prefix (`openai/gpt-4o` → `gpt-4o`)."""
    return prices.get(model) or prices.get(model.rpartition("/")[2])
