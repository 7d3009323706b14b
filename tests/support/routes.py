"""YAML configs that route to scripted upstreams, shared by the end-to-end and client tests."""

from __future__ import annotations

from pathlib import Path

from tests.support.fakes import FakeUpstream
from tests.support.gateway import KEYS


def fallback_route(first: FakeUpstream, second: FakeUpstream, *, responses_api: str = "native") -> str:
    """Route `chat`: target `first`, then `second` when first answers 503."""
    return f"""
routes:
  chat:
    strategy: {{mode: fallback, onStatusCodes: [503]}}
    responsesApi: {responses_api}
    targets:
      - {{name: first, provider: openai, baseUrl: "{first.url}", apiKey: k1}}
      - {{name: second, provider: openai, baseUrl: "{second.url}", apiKey: k2}}
"""


def memory_routes(upstream: FakeUpstream, tmp_path: Path, *, target: str = "") -> str:
    """Keys on, a sqlite memory in `tmp_path`, route `chat` to `upstream` (`target` adds to it) and `mock` to the mock."""
    return f"""
{KEYS}
memory: {{store: sqlite, path: "{tmp_path / 'memory.db'}"}}
routes:
  chat: {{provider: openai, baseUrl: "{upstream.url}", apiKey: upstream-key{target}}}
  mock: {{provider: mock}}
"""
