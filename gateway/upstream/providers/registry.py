"""How the Provider of each provider kind is made, once per application.

Each kind's Provider is a `Bridge`: the client APIs its upstream serves as they are
(`core.kinds`: `native_apis`) pass through, the others are translated to chat completions.
`openai` and `mock` are ours; every other kind is served by the litellm provider, whose module
(and litellm with it: seconds of import) is imported on a thread of its own (`LITELLM`), never on
the event loop: before a configuration that names such a kind is served (`loads`, which
`guarded_providers` waits for), and for anthropic at its first chat call instead (its Messages
API is passed through without litellm), a wait the dispatcher keeps out of the attempt's time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import aiohttp

from gateway.upstream.providers.anthropic import AnthropicMessages
from gateway.upstream.providers.apis import COUNT_TOKENS, DELETE, MESSAGES, RESPONSES, RETRIEVE
from gateway.upstream.providers.base import Provider
from gateway.upstream.providers.bridge import Bridge
from gateway.upstream.providers.deferred import Deferred, Load
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


def _import_litellm() -> Callable[..., Provider]:
    """The litellm provider's class (run by LITELLM, on its thread)."""
    # Lazy for start-up cost: the module imports litellm, which takes seconds.
    from gateway.upstream.providers.litellm import LitellmProvider

    return LitellmProvider


LITELLM: Final = Load(_import_litellm, name="litellm")  # once per process: the import is the process's


def _litellm_chat(resources: Resources) -> Deferred[Callable[..., Provider]]:
    return Deferred(LITELLM, lambda provider: provider(max_response_bytes=resources.max_response_bytes))


def _litellm(resources: Resources) -> Provider:
    """Every endpoint through litellm (a configuration naming such a kind waits for its import: see `loads`)."""
    return Bridge(_litellm_chat(resources))


def _anthropic(resources: Resources) -> Provider:
    """The Messages API natively; chat completions and the rest through litellm, imported at first need."""
    native = AnthropicMessages(resources.session, max_response_bytes=resources.max_response_bytes)
    return Bridge(_litellm_chat(resources), {MESSAGES: native, COUNT_TOKENS: native})


_FACTORIES: Final[Mapping[str, Callable[[Resources], Provider]]] = {
    "openai": _openai,
    "mock": _mock,
    "anthropic": _anthropic,
}


def factory_of(provider: str) -> Callable[[Resources], Provider]:
    """How the Provider of a kind is made; every litellm-backed kind shares one factory (one LitellmProvider)."""
    return _FACTORIES.get(provider, _litellm)


def loads(providers: Iterable[str]) -> list[Load[Any]]:
    """What the providers of these kinds need loaded before they serve: litellm, for a kind served by it alone."""
    return [LITELLM] if any(provider not in _FACTORIES for provider in providers) else []
