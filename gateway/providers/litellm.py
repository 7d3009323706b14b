"""litellm-backed targets (anthropic, gemini, bedrock, ...): the only module that imports litellm."""

from __future__ import annotations

from gateway.providers.base import Call, EventStream, Reply


class LitellmProvider:
    def __init__(self, *, max_response_bytes: int) -> None:
        self._max_response_bytes = max_response_bytes

    async def complete(self, call: Call) -> Reply:
        raise NotImplementedError

    async def stream(self, call: Call) -> Reply | EventStream:
        raise NotImplementedError
