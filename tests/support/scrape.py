"""Reading a gateway's own pages from a test: /metrics samples and /v1/gateway/health."""

from __future__ import annotations

from typing import Any

import aiohttp
import openai
import orjson
from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def root_url(client: openai.AsyncOpenAI) -> str:
    """The gateway's address, without /v1."""
    return str(client.base_url).removesuffix("/").removesuffix("/v1")


async def get(client: openai.AsyncOpenAI, path: str, **headers: str) -> tuple[int, str]:
    """GET `path` of the gateway: its status and text."""
    async with aiohttp.ClientSession() as session, session.get(root_url(client) + path, headers=headers) as response:
        return response.status, await response.text()


async def metrics_text(client: openai.AsyncOpenAI) -> str:
    status, text = await get(client, "/metrics")
    assert status == 200, text
    return text


def samples(text: str) -> Samples:
    """Every sample of an exposition, by name and labels."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def total(found: Samples, name: str, **labels: str) -> float:
    """The sum over every series of `name` whose labels include `labels`."""
    wanted = set(labels.items())
    return sum(v for (n, lbls), v in found.items() if n == name and wanted <= lbls)


async def health(client: openai.AsyncOpenAI) -> dict[str, Any]:
    """GET /v1/gateway/health with the client's key, parsed."""
    status, text = await get(client, "/v1/gateway/health", Authorization=f"Bearer {client.api_key}")
    assert status in (200, 503), text
    found: dict[str, Any] = orjson.loads(text)
    return found
