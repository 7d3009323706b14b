"""How the Provider of each provider kind is made, once per application.

Each kind's Provider is a `Bridge`: the client APIs its upstream serves as they are
(`core.kinds`: `native_apis`) pass through, the others are translated to chat completions.
`openai` and `mock` are ours; every other kind is served by the litellm provider, whose module
(and litellm with it: seconds of import) is imported on a thread of its own (`LITELLM`), never on
the event loop: before a configuration that names such a kind is served (`loads`, which
`guarded_providers` waits for), and for anthropic at its first chat call instead (its Messages
API is passed through without litellm), a wait the dispatcher keeps out of the attempt's time.
Each kind litellm serves is then warmed up on a thread of its own (`warm_up_of`): what litellm
makes at its first call to that kind is made before the configuration is served, or before that
first call goes, so that no call pays for it in its attempt or on the event loop.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import aiohttp

from gateway.core.kinds import KINDS
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

WARM_UP_SECONDS: Final = 30.0  # a warm-up still running then is left to finish on its own
log = logging.getLogger("gateway.providers")


def _warm_up(kind: str) -> None:
    """What litellm makes at its first call to `kind`, made now (run by a kind's Load, on its thread): never raises.

    Bounded by WARM_UP_SECONDS, so that a warm-up that hangs holds up no configuration; a
    failure is logged (once: a kind warms up once per process) and the first call makes what it
    needs itself, as without a warm-up.
    """
    failures: list[BaseException] = []

    def work() -> None:
        try:
            # Lazy for start-up cost: the module imports litellm (seconds), here on a load's thread.
            from gateway.upstream.providers.litellm import warm_up

            warm_up(kind)
        except Exception as exc:
            failures.append(exc)

    thread = threading.Thread(target=work, name=f"gateway-warm-up-{kind}", daemon=True)
    thread.start()
    thread.join(WARM_UP_SECONDS)
    if thread.is_alive():
        log.warning("litellm: warming up provider %s took over %gs; its first call makes the rest", kind, WARM_UP_SECONDS)
    elif failures:
        exc = failures[0]
        log.warning("litellm: warming up provider %s failed (%s: %s); its first call makes what it needs", kind, type(exc).__name__, exc)


_WARM_UPS: Final[dict[str, Load[None]]] = {}  # by kind, once per process like the import


def warm_up_of(kind: str) -> Load[None]:
    """The warm-up of the litellm-served provider `kind` (made at first need, started by whoever waits for it)."""
    load = _WARM_UPS.get(kind)
    if load is None:
        load = _WARM_UPS.setdefault(kind, Load(lambda: _warm_up(kind), name=f"litellm-{kind}"))
    return load


def _litellm_chat(resources: Resources) -> Deferred[Callable[..., Provider]]:
    return Deferred(
        LITELLM, lambda provider: provider(max_response_bytes=resources.max_response_bytes), warm_up=warm_up_of
    )


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


def _via_litellm(kind: str) -> bool:
    known = KINDS.get(kind)
    return known is None or known.via_litellm


def loads(providers: Iterable[str]) -> list[Load[Any]]:
    """What the providers of these kinds need loaded before they serve: litellm, for a kind served by it alone.

    With litellm, the warm-up of every kind it serves (anthropic's chat too): they never fail.
    """
    kinds = sorted(set(providers))
    if all(kind in _FACTORIES for kind in kinds):
        return []
    return [LITELLM, *(warm_up_of(kind) for kind in kinds if _via_litellm(kind))]
