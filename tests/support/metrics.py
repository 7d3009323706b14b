"""Scraping a gateway's /metrics from a test: the samples by name and labels, one series' value."""

from __future__ import annotations

import openai

from tests.support.scrape import Samples, get, root_url, total
from tests.support.scrape import samples as parse

__all__ = ["Samples", "parse", "root_url", "scrape", "scrape_text", "total", "value"]


async def scrape_text(client: openai.AsyncOpenAI, path: str = "/metrics", **headers: str) -> tuple[int, str]:
    """GET `path` (the metrics page) of the gateway: its status and text."""
    return await get(client, path, **headers)


async def scrape(client: openai.AsyncOpenAI) -> Samples:
    """Every sample the gateway's /metrics shows."""
    status, text = await scrape_text(client)
    assert status == 200, text
    return parse(text)


def value(samples: Samples, name: str, **labels: str) -> float:
    """The value of the one series `name` with exactly `labels` (0 when it does not exist)."""
    return samples.get((name, frozenset(labels.items())), 0.0)
