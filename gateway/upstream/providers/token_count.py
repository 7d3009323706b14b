"""Anthropic's `count_tokens` answered by the gateway, for targets that cannot count themselves.

An estimate: the request's system prompt, messages and tools, translated to chat messages and
counted with tiktoken as memory counts them (o200k_base; Claude's own tokenizer differs). The
count runs on a thread: a prompt may be large, and the encoding's first load takes a while.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from gateway.core.translate import messages as anthropic_api
from gateway.tokens import count_messages, count_text, encoding_name, get_encoding


def count_input_tokens(body: dict[str, Any]) -> int:
    """The estimated input tokens of a count_tokens request; TranslationError (a 400) when malformed."""
    chat = anthropic_api.to_chat({**body, "max_tokens": 1, "stream": False})  # count_tokens has no max_tokens
    encoding = get_encoding(encoding_name(None))
    tokens = count_messages(chat["messages"], encoding)
    if tools := chat.get("tools"):
        tokens += count_text(encoding, orjson.dumps(tools).decode())
    return tokens


async def estimate(body: dict[str, Any]) -> dict[str, int]:
    """count_tokens' answer, `{"input_tokens": N}`, counted off the event loop."""
    return {"input_tokens": await asyncio.to_thread(count_input_tokens, body)}
