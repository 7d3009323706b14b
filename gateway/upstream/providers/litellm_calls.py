"""What a litellm call is given, and what of its answer is relayed: no litellm import needed to read them.

A call passes on only an allow-list of the client's OpenAI fields (a body must never choose
`api_base`, keys or callbacks); the target supplies the rest.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from gateway.upstream.providers.base import Call
from gateway.upstream.providers.litellm_internals import keep_from_mcp_bridge

# The client's fields a call passes on, per endpoint: OpenAI parameters (and Anthropic's top_k and
# thinking). Everything else in a body is dropped: litellm also reads api_base, api_key, aws_*,
# vertex_*, mock_response, metadata and callbacks from its keyword arguments.
_SAMPLING: Final = frozenset(
    {"temperature", "top_p", "n", "stop", "max_tokens", "presence_penalty", "frequency_penalty"}
    | {"logit_bias", "user", "seed", "logprobs", "stream_options"}
)
ALLOWED_FIELDS: Final[Mapping[str, frozenset[str]]] = {
    "chat/completions": _SAMPLING
    | {"messages", "max_completion_tokens", "response_format", "tools", "tool_choice", "parallel_tool_calls"}
    | {"top_logprobs", "reasoning_effort", "modalities", "prediction", "service_tier", "top_k", "thinking"},
    "completions": _SAMPLING | {"prompt", "suffix", "echo", "best_of"},
    "embeddings": frozenset({"input", "encoding_format", "dimensions", "user"}),
}


def litellm_model(provider: str, model: str) -> str:
    """litellm's `provider/model` name for a target's model (already prefixed ones kept)."""
    return model if model.startswith(f"{provider}/") else f"{provider}/{model}"


def litellm_arguments(call: Call, *, stream: bool) -> dict[str, Any]:
    """The keyword arguments of one litellm call: the client's allowed fields, then the target's settings.

    Fields the target's overrideParams set are the operator's and pass as they are.
    """
    target, payload = call.target, call.payload
    allowed = ALLOWED_FIELDS[call.endpoint]
    arguments = {k: v for k, v in payload.items() if k in allowed or k in target.override_params}
    arguments.pop("stream", None)
    if not stream:
        arguments.pop("stream_options", None)
    arguments.update(
        model=litellm_model(target.provider, str(payload.get("model") or "")),
        api_key=target.api_key or None,
        api_base=target.base_url or None,
        timeout=target.timeout,
        num_retries=0,  # the dispatcher retries, by the target's policy
        max_retries=0,
        **target.provider_params,
    )
    if target.headers:
        arguments["extra_headers"] = dict(target.headers)
    if call.endpoint == "chat/completions":
        keep_from_mcp_bridge(arguments)
    if stream:
        arguments["stream"] = True
    return arguments


_RELAYED: Final = ("retry-after", "retry-after-ms")
_RAW_PREFIX: Final = "llm_provider-"  # how litellm passes on a provider's own response headers


def relayed_headers(headers: Mapping[str, str] | None) -> dict[str, str]:
    """The upstream headers a client should see: rate-limit state and Retry-After."""
    relayed: dict[str, str] = {}
    for key, value in (headers or {}).items():
        lower = key.lower().removeprefix(_RAW_PREFIX)
        if lower.startswith("x-ratelimit-") or lower in _RELAYED:
            relayed[lower] = str(value)
    return relayed
