"""Every provider a target can name: its `providerParams` schema, the factory of its Provider, its APIs.

`openai` (any OpenAI-compatible upstream, bytes passed through) and `mock` are ours; every other
name litellm knows (anthropic, gemini, vertex_ai, bedrock, azure, mistral, cohere, groq, ...) is
served by `gateway.providers.litellm`, which is imported only when a config names one, and for
anthropic only when a call needs it (its Messages API is passed through without litellm). Each
kind's Provider is a `Bridge`: the client APIs its upstream serves as they are (`native_apis`)
pass through, the others are translated to chat completions. Nothing here imports a provider
module at import time, so reading a config stays cheap.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    import aiohttp

    from gateway.config import Target
    from gateway.providers.base import Provider


@dataclass(frozen=True, slots=True)
class Param:
    """One `providerParams` key: its config spelling, the litellm argument it becomes, its type."""

    key: str
    argument: str
    kind: type[str] | type[float] | type[bool] = str
    secret: bool = False  # masked wherever an upstream's text is shown, like apiKey


@dataclass(frozen=True, slots=True)
class Resources:
    """What providers are built from, once per application."""

    session: aiohttp.ClientSession
    max_response_bytes: int


def _openai(resources: Resources) -> Provider:
    from gateway.providers.apis import DELETE, RESPONSES, RETRIEVE
    from gateway.providers.bridge import Bridge
    from gateway.providers.openai import OpenAIProvider, StoredResponses

    provider = OpenAIProvider(resources.session, max_response_bytes=resources.max_response_bytes)
    stored = StoredResponses(provider)
    return Bridge(provider, {RESPONSES: provider, RETRIEVE: stored, DELETE: stored})


def _mock(resources: Resources) -> Provider:
    from gateway.providers.bridge import Bridge
    from gateway.providers.mock import MockProvider

    return Bridge(MockProvider())


def _litellm_provider(resources: Resources) -> Provider:
    from gateway.providers.litellm import LitellmProvider  # imports litellm: seconds, once

    return LitellmProvider(max_response_bytes=resources.max_response_bytes)


def _litellm(resources: Resources) -> Provider:
    from gateway.providers.bridge import Bridge

    return Bridge(_litellm_provider(resources))


def _anthropic(resources: Resources) -> Provider:
    """The Messages API natively; chat completions and the rest through litellm, imported at first need."""
    from gateway.providers.anthropic import AnthropicMessages
    from gateway.providers.apis import COUNT_TOKENS, MESSAGES
    from gateway.providers.bridge import Bridge
    from gateway.providers.deferred import Deferred

    native = AnthropicMessages(resources.session, max_response_bytes=resources.max_response_bytes)
    chat = Deferred(functools.partial(_litellm_provider, resources))
    return Bridge(chat, {MESSAGES: native, COUNT_TOKENS: native})


@dataclass(frozen=True, slots=True)
class ProviderKind:
    """A provider: its name, its `providerParams`, how its Provider is made, the client APIs it serves as they are.

    Every litellm-backed kind shares one factory, so one LitellmProvider serves them all.
    `native_apis` names the client APIs (`responses`, `messages`) its upstream serves itself, and
    `native_base_url` where that API is when a target names no baseUrl (a target's unset baseUrl
    stays empty, so litellm keeps its own default for the kind's other calls).
    """

    name: str
    params: tuple[Param, ...] = ()
    factory: Callable[[Resources], Provider] = _litellm
    default_base_url: str = ""
    native_apis: frozenset[str] = frozenset()
    native_base_url: str = ""

    @property
    def via_litellm(self) -> bool:
        """Whether its chat completions go through litellm."""
        return self.factory in (_litellm, _anthropic)

    def param(self, key: str) -> Param | None:
        return next((p for p in self.params if p.key == key), None)


_AWS: Final = (
    Param("awsRegionName", "aws_region_name"),
    Param("awsAccessKeyId", "aws_access_key_id", secret=True),
    Param("awsSecretAccessKey", "aws_secret_access_key", secret=True),
    Param("awsSessionToken", "aws_session_token", secret=True),
    Param("awsProfileName", "aws_profile_name"),
    Param("awsRoleName", "aws_role_name"),
    Param("awsSessionName", "aws_session_name"),
    Param("awsBedrockRuntimeEndpoint", "aws_bedrock_runtime_endpoint"),
)
_VERTEX: Final = (
    Param("vertexProject", "vertex_project"),
    Param("vertexLocation", "vertex_location"),
    Param("vertexCredentials", "vertex_credentials", secret=True),
)

KINDS: Final[Mapping[str, ProviderKind]] = {
    kind.name: kind
    for kind in (
        ProviderKind(
            "openai", factory=_openai, default_base_url="https://api.openai.com/v1", native_apis=frozenset({"responses"})
        ),
        ProviderKind("mock", factory=_mock),
        ProviderKind(
            "anthropic", factory=_anthropic, native_apis=frozenset({"messages"}), native_base_url="https://api.anthropic.com"
        ),
        ProviderKind("gemini"),
        ProviderKind("vertex_ai", _VERTEX),
        ProviderKind("vertex_ai_beta", _VERTEX),
        ProviderKind("bedrock", _AWS),
        ProviderKind("sagemaker", _AWS),
        ProviderKind(
            "azure", (Param("apiVersion", "api_version"), Param("azureAdToken", "azure_ad_token", secret=True))
        ),
        ProviderKind("azure_ai", (Param("apiVersion", "api_version"),)),
        ProviderKind("watsonx", (Param("projectId", "project_id"), Param("spaceId", "space_id"))),
        ProviderKind("mistral"),
        ProviderKind("cohere"),
        ProviderKind("groq"),
    )
}


@functools.cache
def litellm_provider_names() -> frozenset[str]:
    """The provider names the installed litellm knows, read from its source (not imported)."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or spec.origin is None:
        return frozenset()
    path = Path(spec.origin).parent / "types" / "utils.py"
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return frozenset()
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "LlmProviders":
            return frozenset(
                item.value.value
                for item in node.body
                if isinstance(item, ast.Assign) and isinstance(item.value, ast.Constant) and isinstance(item.value.value, str)
            )
    return frozenset()


def kind_of(name: str) -> ProviderKind | None:
    """The provider called `name`, or None when neither we nor litellm know it."""
    kind = KINDS.get(name)
    if kind is None and name in litellm_provider_names():
        kind = ProviderKind(name)
    return kind


def serves_natively(target: Target, api: str) -> bool:
    """Whether `target`'s upstream serves the client API `api` (`responses`, `messages`) as it is.

    An openai target serves the Responses API unless its `responsesApi` is `translate`.
    """
    kind = KINDS.get(target.provider)
    if kind is None or api not in kind.native_apis:
        return False
    return api != "responses" or target.responses_api == "native"
