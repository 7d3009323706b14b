"""A deterministic built-in model: offline, fast, scriptable (latency, reply, statuses, chunking).

Its reply says how many messages it received and quotes the last user message, so a caller can
see exactly what reached the model (memory, overrides) without a real upstream.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import AsyncGenerator, Mapping
from typing import Any

import orjson

from gateway.config import Target
from gateway.providers.base import Call, EventStream, Reply
from gateway.sse import DONE_EVENT, Event, encode, parse_event


def text_of(content: Any) -> str:
    """The text of a message's content, whether a string or a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part.get("text", "") for part in content if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return ""


def mock_reply(payload: dict[str, Any]) -> str:
    messages = payload.get("messages")
    if not isinstance(messages, list):
        return f"Mock completion of: {payload.get('prompt')!s}"
    last_user = next(
        (text_of(m.get("content")) for m in reversed(messages) if isinstance(m, dict) and m.get("role") == "user"),
        "",
    )
    return f'Mock reply: received {len(messages)} messages; last user message: "{last_user}"'


def _words(text: str) -> int:
    return len(text.split())


class MockProvider:
    """Answers every endpoint locally; each target plays its `statuses` script once, in order."""

    def __init__(self) -> None:
        self._calls: dict[Target, int] = {}

    def _next_status(self, target: Target) -> int:
        count = self._calls.get(target, 0)
        self._calls[target] = count + 1
        statuses = target.mock.statuses
        return statuses[count] if count < len(statuses) else 200

    async def _begin(self, call: Call) -> Reply | None:
        """Apply the script: wait the latency, then return an error Reply or None to go on."""
        status = self._next_status(call.target)
        if call.target.mock.latency:
            await asyncio.sleep(call.target.mock.latency)
        if status < 300:
            return None
        error = {"message": f"mock failure {status}", "type": "mock_error", "param": None, "code": f"mock_{status}"}
        return Reply(status, orjson.dumps({"error": error}))

    async def complete(self, call: Call) -> Reply:
        failed = await self._begin(call)
        if failed is not None:
            return failed
        return Reply(200, orjson.dumps(self._answer(call)))

    def _answer(self, call: Call) -> dict[str, Any]:
        payload, model = call.payload, str(call.payload.get("model", "mock"))
        created = int(time.time())
        if call.endpoint == "embeddings":
            return _embeddings(payload, model)
        text = call.target.mock.reply or mock_reply(payload)
        prompt_tokens = _words(orjson.dumps(payload.get("messages") or payload.get("prompt") or "").decode())
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": _words(text)}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        if call.endpoint == "completions":
            choice: dict[str, Any] = {"index": 0, "text": text, "logprobs": None, "finish_reason": "stop"}
            return {"id": "cmpl-mock", "object": "text_completion", "created": created, "model": model,
                    "choices": [choice], "usage": usage}
        message = {"role": "assistant", "content": text}
        return {"id": "chatcmpl-mock", "object": "chat.completion", "created": created, "model": model,
                "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": "stop"}],
                "usage": usage}

    async def stream(self, call: Call) -> Reply | EventStream:
        failed = await self._begin(call)
        if failed is not None:
            return failed
        return _MockEvents(self._events(call))

    async def _events(self, call: Call) -> AsyncGenerator[bytes, None]:
        answer = self._answer(call)
        options = call.target.mock
        include_usage = bool((call.payload.get("stream_options") or {}).get("include_usage"))
        base = {"id": answer["id"], "object": "chat.completion.chunk", "created": answer["created"],
                "model": answer["model"]}
        if include_usage:
            base["usage"] = None
        text = answer["choices"][0]["message"]["content"]

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            return encode({**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]})

        yield chunk({"role": "assistant", "content": ""})
        for start in range(0, len(text), options.chunk_size):
            if options.chunk_delay:
                await asyncio.sleep(options.chunk_delay)
            yield chunk({"content": text[start : start + options.chunk_size]})
        yield chunk({}, "stop")
        if include_usage:
            yield encode({**base, "choices": [], "usage": answer["usage"]})
        yield DONE_EVENT


def _embeddings(payload: dict[str, Any], model: str) -> dict[str, Any]:
    inputs = payload.get("input")
    items = inputs if isinstance(inputs, list) else [inputs]
    dimensions = payload.get("dimensions")
    size = dimensions if isinstance(dimensions, int) and 0 < dimensions <= 4096 else 16
    data = []
    for index, item in enumerate(items):
        digest = hashlib.sha256(orjson.dumps(item)).digest()
        vector = [round(digest[i % len(digest)] / 255 * 2 - 1, 6) for i in range(size)]
        data.append({"object": "embedding", "index": index, "embedding": vector})
    tokens = sum(_words(str(item)) for item in items)
    return {"object": "list", "data": data, "model": model, "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}


class _MockEvents:
    def __init__(self, chunks: AsyncGenerator[bytes, None]) -> None:
        self._chunks = chunks
        self.status = 200
        self.headers: Mapping[str, str] = {}

    async def next_event(self) -> Event | None:
        try:
            raw = await anext(self._chunks)
        except StopAsyncIteration:
            return None
        return parse_event(raw[:-2])

    async def close(self) -> None:
        await self._chunks.aclose()
