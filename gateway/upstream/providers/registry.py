"""How the Provider of each provider kind is made, once per application.

Each kind's Provider is a `Bridge`: the client APIs its upstream serves as they are
(`core.kinds`: `native_apis`) pass through, the others are translated to chat completions.
`openai` and `mock` are ours; every other kind is served by the litellm provider, whose module
(and litellm with it) is imported only when a config names such a kind, and for anthropic only
when a call needs it (its Messages API is passed through without litellm).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

import aiohttp

from gateway.upstream.providers.anthropic import AnthropicMessages
from gateway.upstream.providers.apis import COUNT_TOKENS, DELETE, MESSAGES, RESPONSES, RETRIEVE
from gateway.upstream.providers.base import Provider
from gateway.upstream.providers.bridge import Bridge
from gateway.upstream.providers.deferred import Deferred
from gateway.upstream.providers.mock import MockProvider
from gateway.upstream.providers.openai import OpenAIProvider, StoredResponses


@dataclass(frozen=True, slots=True)
class Resources:
    """What providers are built from, once per application."""

    session: aiohttp.ClientSession
    max_response_bytes: int


def _openai(resources: Resources) -> Provider:
    provider = OpenAIProvider(resources.session, max_response_bytes=resources.max_response_bytes)
    stored = StoredResponses(provider)
    return Bridge(provider, {RESPONSES: provider, RETRIEVE: stored, DELETE: stored})


def _mock(resources: Resources) -> Provider:
    return Bridge(MockProvider())


def _litellm_provider(resources: Resources) -> Provider:
    # Lazy for start-up cost: the module imports litellm, which takes seconds.
    from gateway.upstream.providers.litellm import LitellmProvider

    return LitellmProvider(max_response_bytes=resources.max_response_bytes)


def _litellm(resources: Resources) -> Provider:
    return Bridge(_litellm_provider(resources))


def _anthropic(resources: Resources) -> Provider:
    """The Messages API natively; chat completions and the rest through litellm, imported at first need."""
    native = AnthropicMessages(resources.session, max_response_bytes=resources.max_response_bytes)
    chat = Deferred(functools.partial(_litellm_provider, resources))
    return Bridge(chat, {MESSAGES: native, COUNT_TOKENS: native})


_FACTORIES: Final[Mapping[str, Callable[[Resources], Provider]]] = {
    "openai": _openai,
    "mock": _mock,
    "anthropic": _anthropic,
}


def factory_of(provider: str) -> Callable[[Resources], Provider]:
    """How the Provider of a kind is made; every litellm-backed kind shares one factory (one LitellmProvider)."""
    return _FACTORIES.get(provider, _litellm)
