"""Anthropic's own API for anthropic targets: `/v1/messages` and its count_tokens, passed through.

The client's body goes to `{baseUrl}/v1/{endpoint}` (baseUrl: the host root, by default
https://api.anthropic.com) as its bytes (the target's overrideParams
applied by the dispatcher, the model among them), with the target's key in `x-api-key`, the
client's `anthropic-version` (else 2023-06-01) and its `anthropic-beta` joined to the target's
own; the answer comes back as Anthropic sent it, SSE included, on the shared session. Chat
completions to anthropic targets go through litellm instead (see `registry`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from multidict import CIMultiDict
from yarl import URL

from gateway.core.kinds import KINDS
from gateway.core.tree import Target
from gateway.upstream.providers.base import JSON, Call
from gateway.upstream.providers.openai import OpenAIProvider

DEFAULT_VERSION: Final = "2023-06-01"
VERSION: Final = "anthropic-version"
BETA: Final = "anthropic-beta"



def client_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The client's `anthropic-version` and `anthropic-beta`, passed on to native Anthropic calls."""
    return {name: headers[name] for name in (VERSION, BETA) if name in headers}


def joined_betas(*values: str | None) -> str:
    """Comma-separated beta names, each once, in the order given."""
    names = (name.strip() for value in values if value for name in value.split(","))
    return ",".join(dict.fromkeys(name for name in names if name))


class AnthropicMessages(OpenAIProvider):
    """The Messages API of an anthropic target, bytes in and out like an OpenAI-compatible one."""

    def _url(self, target: Target, endpoint: str) -> URL:
        return URL(f"{target.base_url or KINDS['anthropic'].native_base_url}/v1/{endpoint}")

    def _target_headers(self, target: Target) -> CIMultiDict[str]:
        headers = CIMultiDict({"Accept": JSON})  # the body carries its Content-Type (see OpenAIProvider)
        if target.api_key:
            headers["x-api-key"] = target.api_key
        headers.update(target.headers)
        headers[VERSION] = headers.get(VERSION) or DEFAULT_VERSION
        if betas := joined_betas(headers.get(BETA)):
            headers[BETA] = betas
        return headers

    def _call_headers(self, call: Call, headers: CIMultiDict[str]) -> CIMultiDict[str]:
        """The client's `anthropic-version` wins over the target's; its `anthropic-beta` joins the target's."""
        headers = super()._call_headers(call, headers)
        client = call.client_headers
        if not client:
            return headers
        headers = headers.copy()
        if version := client.get(VERSION):
            headers[VERSION] = version
        if betas := joined_betas(headers.get(BETA), client.get(BETA)):
            headers[BETA] = betas
        return headers
