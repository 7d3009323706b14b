"""Every provider a target can name by itself: its `providerParams`, default URLs and native APIs.

`openai` (any OpenAI-compatible upstream, bytes passed through) and `mock` are ours; every other
name litellm knows is served through litellm (`gateway.upstream.providers.registry` makes the
Provider of each). A kind's `native_apis` are the client APIs its upstream serves as they are;
the others are translated to chat completions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from gateway.core.tree import ResponsesMode, Target

_OURS: Final = frozenset({"openai", "mock"})


@dataclass(frozen=True, slots=True)
class Param:
    """One `providerParams` key: its config spelling, the litellm argument it becomes, its type."""

    key: str
    argument: str
    kind: type[str] | type[float] | type[bool] = str
    secret: bool = False  # masked wherever an upstream's text is shown, like apiKey


@dataclass(frozen=True, slots=True)
class ProviderKind:
    """A provider: its name, its `providerParams`, the client APIs its upstream serves as they are.

    `native_apis` names the client APIs (`responses`, `messages`) its upstream serves itself, and
    `native_base_url` where that API is when a target names no baseUrl (a target's unset baseUrl
    stays empty, so litellm keeps its own default for the kind's other calls).
    """

    name: str
    params: tuple[Param, ...] = ()
    default_base_url: str = ""
    native_apis: frozenset[str] = frozenset()
    native_base_url: str = ""

    @property
    def via_litellm(self) -> bool:
        """Whether its chat completions go through litellm."""
        return self.name not in _OURS

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
            "openai", default_base_url="https://api.openai.com/v1", native_apis=frozenset({"responses"})
        ),
        ProviderKind("mock"),
        ProviderKind(
            "anthropic", native_apis=frozenset({"messages"}), native_base_url="https://api.anthropic.com"
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


def serves_natively(target: Target, api: str) -> bool:
    """Whether `target`'s upstream serves the client API `api` (`responses`, `messages`) as it is.

    An openai target serves the Responses API unless its `responsesApi` is `translate`.
    """
    kind = KINDS.get(target.provider)
    if kind is None or api not in kind.native_apis:
        return False
    return api != "responses" or target.responses_api == ResponsesMode.NATIVE
