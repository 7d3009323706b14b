"""A deterministic built-in model: offline, fast, scriptable (latency, reply, statuses, chunking).

Its reply says how many messages it received and quotes the last user message (a text
completion quotes its prompt), so a caller can see exactly what reached the model (memory,
overrides) without a real upstream. Parameters OpenAI would reject get OpenAI's 400, as a Reply:
a text completion's prompt, embeddings' input and encoding, a chat's `user` and function names.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import re
import struct
import time
from collections.abc import AsyncGenerator, Mapping
from typing import Any

import orjson

from gateway.core.sse import DONE_EVENT, Event, encode, parse_event
from gateway.core.tree import Target
from gateway.upstream.providers.base import Call, EventStream, Reply

Prompt = str | list[int]  # a text, or token ids
_SHOWN_TOKEN_IDS = 8
_ENCODINGS = ("float", "base64")


class _Invalid(Exception):
    """A parameter OpenAI would reject; the caller gets a 400 naming it."""

    def __init__(self, message: str, param: str, code: str = "invalid_value") -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code


def _error_reply(status: int, message: str, *, type: str, param: str | None, code: str) -> Reply:
    error = {"message": message, "type": type, "param": param, "code": code}
    return Reply(status, orjson.dumps({"error": error}))


def _invalid_reply(exc: _Invalid) -> Reply:
    return _error_reply(400, exc.message, type="invalid_request_error", param=exc.param, code=exc.code)


def text_of(content: Any) -> str:
    """The text of a message's content, whether a string or a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part.get("text", "") for part in content if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return ""


def mock_reply(messages: list[Any]) -> str:
    """The chat reply: how many messages arrived, and the last user message quoted."""
    last_user = next(
        (text_of(m.get("content")) for m in reversed(messages) if isinstance(m, dict) and m.get("role") == "user"),
        "",
    )
    return f'Mock reply: received {len(messages)} messages; last user message: "{last_user}"'


def _is_token_id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def split_prompts(value: Any, param: str) -> list[Prompt]:
    """The separate prompts (or embedding inputs) in `value`, read as OpenAI reads them.

    A string is one prompt, a list of strings one each; a list of token ids is one prompt, a
    list of token-id lists one each. Anything else raises _Invalid naming `param`.
    """
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and value:
        if all(isinstance(item, str) for item in value):
            return list(value)
        if all(_is_token_id(item) for item in value):
            return [list(value)]
        if all(isinstance(item, list) and all(_is_token_id(t) for t in item) for item in value):
            return list(value)
    raise _Invalid(
        f"'{param}' must be a string, an array of strings, an array of token ids or an array of token-id arrays.",
        param,
    )


def describe_prompt(prompt: Prompt) -> str:
    """The text completion of one prompt: the prompt quoted, or its token ids listed."""
    if isinstance(prompt, str):
        return f'Mock completion of: "{prompt}"'
    shown = ", ".join(str(token) for token in prompt[:_SHOWN_TOKEN_IDS])
    more = ", …" if len(prompt) > _SHOWN_TOKEN_IDS else ""
    return f"Mock completion of {len(prompt)} token ids" + (f": {shown}{more}" if prompt else "")


def _size(prompt: Prompt) -> int:
    """Tokens in a prompt, roughly: its words, or its token ids."""
    return _words(prompt) if isinstance(prompt, str) else len(prompt)


def _words(text: str) -> int:
    """The words of `text` split at single and double spaces, counted without building them.

    str.split() of a 10 MiB body's two million words held the event loop for ~165 ms.
    """
    stripped = text.strip(" ")
    return stripped.count(" ") - stripped.count("  ") + 1 if stripped else 0


def _replies(call: Call) -> tuple[list[str], int]:
    """The text of each choice, and the size of the prompt in tokens."""
    fixed = call.target.mock.reply
    if call.endpoint == "completions":
        prompt = call.payload.get("prompt")
        prompts = [""] if prompt is None else split_prompts(prompt, "prompt")
        return [fixed or describe_prompt(p) for p in prompts], sum(map(_size, prompts))
    check_chat(call.payload)
    messages = call.payload.get("messages")
    messages = messages if isinstance(messages, list) else []
    return [fixed or mock_reply(messages)], _size(orjson.dumps(messages).decode())


_MAX_NAME = 64  # OpenAI's limit for a function's name and for `user`
_FUNCTION_NAME = re.compile(r"[a-zA-Z0-9_-]+")


def check_chat(payload: Mapping[str, Any]) -> None:
    """Raise _Invalid, as OpenAI answers, for a `user` or a function name OpenAI refuses.

    What a translation makes of another API's request (an agent CLI's) meets these limits
    here first, not only at a real upstream.
    """
    user = payload.get("user")
    if isinstance(user, str) and len(user) > _MAX_NAME:
        raise _too_long("user", len(user))
    tools = payload.get("tools")
    for index, tool in enumerate(tools if isinstance(tools, list) else ()):
        function = tool.get("function") if isinstance(tool, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(name, str):
            continue
        param = f"tools[{index}].function.name"
        if len(name) > _MAX_NAME:
            raise _too_long(param, len(name))
        if not _FUNCTION_NAME.fullmatch(name):
            raise _Invalid(f"Invalid '{param}': string does not match pattern. Expected a string that matches the "
                           "pattern '^[a-zA-Z0-9_-]+$'.", param, "invalid_value")


def _too_long(param: str, length: int) -> _Invalid:
    return _Invalid(f"Invalid '{param}': string too long. Expected a string with maximum length {_MAX_NAME}, "
                    f"but got a string with length {length} instead.", param, "string_above_max_length")


def _answer(call: Call, texts: list[str], prompt_tokens: int) -> dict[str, Any]:
    """The non-stream JSON answer with one choice per text."""
    model, created = str(call.payload.get("model", "mock")), int(time.time())
    completion_tokens = sum(map(_size, texts))
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
             "total_tokens": prompt_tokens + completion_tokens}
    chat = call.endpoint != "completions"
    choices = [_choice(chat, index, text) for index, text in enumerate(texts)]
    return {"id": "chatcmpl-mock" if chat else "cmpl-mock", "object": "chat.completion" if chat else "text_completion",
            "created": created, "model": model, "choices": choices, "usage": usage}


def _choice(chat: bool, index: int, text: str) -> dict[str, Any]:
    said: dict[str, Any] = {"message": {"role": "assistant", "content": text}} if chat else {"text": text}
    return {"index": index, **said, "logprobs": None, "finish_reason": "stop"}


class MockProvider:
    """Answers chat, completions and embeddings locally (Responses and Messages through them).

    Images, audio, moderations and rerank are refused before it is called (server/surface.py).
    Each target plays its `statuses` script once, in order.
    """

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
        return _error_reply(status, f"mock failure {status}", type="mock_error", param=None, code=f"mock_{status}")

    async def complete(self, call: Call) -> Reply:
        failed = await self._begin(call)
        if failed is not None:
            return failed
        try:
            answer = _embeddings(call.payload) if call.endpoint == "embeddings" else _answer(call, *_replies(call))
        except _Invalid as exc:
            return _invalid_reply(exc)
        return Reply(200, orjson.dumps(answer))

    async def stream(self, call: Call) -> Reply | EventStream:
        failed = await self._begin(call)
        if failed is not None:
            return failed
        try:
            texts, prompt_tokens = _replies(call)
        except _Invalid as exc:
            return _invalid_reply(exc)
        return _MockEvents(_events(call, _answer(call, texts, prompt_tokens), texts))


async def _events(call: Call, answer: dict[str, Any], texts: list[str]) -> AsyncGenerator[bytes, None]:
    """The answer as OpenAI streams it: chat deltas, or text pieces for a text completion."""
    options = call.target.mock
    chat = call.endpoint != "completions"
    stream_options = call.payload.get("stream_options")  # an override may set it to anything (the loader refuses it)
    include_usage = isinstance(stream_options, dict) and bool(stream_options.get("include_usage"))
    base = {"id": answer["id"], "object": "chat.completion.chunk" if chat else "text_completion",
            "created": answer["created"], "model": answer["model"]}
    if include_usage:
        base["usage"] = None

    def chunk(choice: dict[str, Any], finish: str | None = None) -> bytes:
        return encode({**base, "choices": [{**choice, "logprobs": None, "finish_reason": finish}]})

    def piece(index: int, text: str) -> dict[str, Any]:
        return {"index": index, "delta": {"content": text}} if chat else {"index": index, "text": text}

    for index, text in enumerate(texts):
        if chat:
            yield chunk({"index": index, "delta": {"role": "assistant", "content": ""}})
        for start in range(0, len(text), options.chunk_size):
            if options.chunk_delay:
                await asyncio.sleep(options.chunk_delay)
            yield chunk(piece(index, text[start : start + options.chunk_size]))
        yield chunk({"index": index, "delta": {}} if chat else piece(index, ""), "stop")
    if include_usage:
        yield encode({**base, "choices": [], "usage": answer["usage"]})
    yield DONE_EVENT


def _embeddings(payload: dict[str, Any]) -> dict[str, Any]:
    """One vector per input, as floats or (`encoding_format: base64`) as OpenAI's base64."""
    encoding = payload.get("encoding_format")
    if encoding is not None and encoding not in _ENCODINGS:
        raise _Invalid(
            f"Invalid value for 'encoding_format': expected 'float' or 'base64', got {orjson.dumps(encoding).decode()}.",
            "encoding_format",
        )
    items = split_prompts(payload.get("input"), "input")
    dimensions = payload.get("dimensions")
    size = dimensions if isinstance(dimensions, int) and 0 < dimensions <= 4096 else 16
    data = []
    for index, item in enumerate(items):
        vector = embed(item, size)
        embedding: list[float] | str = encode_base64(vector) if encoding == "base64" else vector
        data.append({"object": "embedding", "index": index, "embedding": embedding})
    tokens = sum(map(_size, items))
    model = str(payload.get("model", "mock"))
    return {"object": "list", "data": data, "model": model, "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}


def embed(item: Prompt, size: int) -> list[float]:
    """A deterministic vector in [-1, 1); multiples of 1/128, so float32 holds each value exactly."""
    digest = hashlib.sha256(orjson.dumps(item)).digest()
    return [digest[i % len(digest)] / 128 - 1 for i in range(size)]


def encode_base64(vector: list[float]) -> str:
    """A vector as OpenAI's base64 encoding sends it: little-endian float32 values."""
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")


class _MockEvents(EventStream):
    """The answer's chunks, an event a read."""

    def __init__(self, chunks: AsyncGenerator[bytes, None]) -> None:
        super().__init__(200, {})
        self._chunks = chunks

    async def _read(self) -> list[Event]:
        try:
            raw = await anext(self._chunks)
        except StopAsyncIteration:
            return []
        return [parse_event(raw[:-2])]

    async def close(self) -> None:
        await self._chunks.aclose()
