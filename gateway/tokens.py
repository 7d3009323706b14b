"""Token counting with tiktoken, offline: the only module that imports tiktoken.

tiktoken downloads its encodings on first use, which fails in air-gapped deployments. The
litellm wheel ships `cl100k_base` and `o200k_base` in its tokenizers folder, so unless the user
set TIKTOKEN_CACHE_DIR we point it there (found with find_spec, without importing litellm).
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

log = logging.getLogger("gateway.memory")

TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMING = 3
EXACT_CHARS = 65_536
PIECE_CHARS = 16_384
_O200K_PREFIXES = ("gpt-4o", "chatgpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4")
_CL100K_PREFIXES = ("gpt-4", "gpt-3.5", "gpt-35", "text-embedding-3", "text-embedding-ada")


class Encoding(Protocol):
    def encode(self, text: str, *, disallowed_special: Any = ...) -> list[int]: ...

    def __hash__(self) -> int: ...


def bundled_tokenizer_dir() -> Path | None:
    """litellm's folder of tiktoken encodings, if litellm is installed (it is not imported)."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or spec.origin is None:
        return None
    folder = Path(spec.origin).parent / "litellm_core_utils" / "tokenizers"
    return folder if folder.is_dir() else None


def use_offline_encodings() -> None:
    """Point tiktoken at the bundled encodings unless the user chose a cache directory."""
    if os.environ.get("TIKTOKEN_CACHE_DIR"):
        return
    folder = bundled_tokenizer_dir()
    if folder is not None:
        os.environ["TIKTOKEN_CACHE_DIR"] = str(folder)


@functools.lru_cache(maxsize=1024)  # asked per memory turn, of a few model names
def encoding_name(model: str | None) -> str:
    """The tiktoken encoding of a model: o200k_base unless it is a gpt-4 / gpt-3.5 era model."""
    name = (model or "").lower().rpartition("/")[2]  # "openai/gpt-4" and "azure/gpt-4" count as gpt-4
    if name.startswith(_O200K_PREFIXES):
        return "o200k_base"
    if name.startswith(_CL100K_PREFIXES):
        return "cl100k_base"
    return "o200k_base"


class _Approximate:
    """Four characters a token: used only when no encoding could be loaded (logged once)."""

    def encode(self, text: str, *, disallowed_special: Any = ()) -> list[int]:
        return [0] * ((len(text) + 3) // 4)


@functools.cache
def get_encoding(name: str) -> Encoding:
    use_offline_encodings()
    try:
        import tiktoken  # on first use, for start-up cost: a gateway that counts no tokens never loads it

        encoding: Encoding = tiktoken.get_encoding(name)
        return encoding
    except Exception as exc:  # no network and no bundled file: degrade, don't fail requests
        log.warning("tiktoken encoding %s unavailable (%s); counting ~4 characters a token", name, exc)
        return _Approximate()


def count_text(encoding: Encoding, text: str, cap: int | None = None) -> int:
    """Tokens of `text`; once past `cap` the count stops there (a lower bound: it fits no window).

    Texts over EXACT_CHARS are counted in PIECE_CHARS pieces: linear however the text is made
    (BPE on one giant "word" is not), and within a token per piece of the exact count.
    """
    if not text:
        return 0
    if len(text) <= 4096:  # roles, names, system prompts and common turns repeat: count them once
        return _count_cached(encoding, text)
    if len(text) <= EXACT_CHARS:
        return len(encoding.encode(text, disallowed_special=()))
    tokens = 0
    for start in range(0, len(text), PIECE_CHARS):
        tokens += len(encoding.encode(text[start : start + PIECE_CHARS], disallowed_special=()))
        if cap is not None and tokens > cap:
            break
    return tokens


@functools.lru_cache(maxsize=4096)
def _count_cached(encoding: Encoding, text: str) -> int:
    return len(encoding.encode(text, disallowed_special=()))


def _texts(message: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(key, text) for every text of a message that counts: string values, text parts, tool calls."""
    for key, value in message.items():
        if isinstance(value, str):
            yield key, value
        elif key == "content" and isinstance(value, list):
            for part in value:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    yield "text", part["text"]
        elif key == "tool_calls" and isinstance(value, list):
            for call in value:
                function = call.get("function") if isinstance(call, dict) else None
                if isinstance(function, dict):
                    yield "function", str(function.get("name") or "")
                    yield "arguments", str(function.get("arguments") or "")


def count_message(message: Mapping[str, Any], encoding: Encoding, cap: int | None = None) -> int:
    """One message's tokens by the OpenAI cookbook: 3 + every value's tokens (+1 for a name).

    Content given as parts counts its text parts; tool calls count their function names and
    arguments. With a `cap`, a count above it is a lower bound: the message fits no window.
    """
    if len(message) == 2:  # the common {"role", "content"} message, without the generator
        role, content = message.get("role"), message.get("content")
        if isinstance(role, str) and isinstance(content, str) and len(role) <= 4096 and len(content) <= 4096:
            tokens = TOKENS_PER_MESSAGE + count_text(encoding, role) + count_text(encoding, content)
            if cap is None or tokens <= cap:
                return tokens
    tokens = TOKENS_PER_MESSAGE
    for key, text in _texts(message):
        tokens += count_text(encoding, text, None if cap is None else cap - tokens)
        if key == "name":
            tokens += TOKENS_PER_NAME
        if cap is not None and tokens > cap:
            break
    return tokens


def text_size(message: Mapping[str, Any]) -> int:
    """Characters a count of `message` would encode: cheap, to decide where the count runs."""
    if len(message) == 2:  # the common {"role", "content"} message, without the generator
        role, content = message.get("role"), message.get("content")
        if isinstance(role, str) and isinstance(content, str):
            return len(role) + len(content)
    return sum(len(text) for _, text in _texts(message))


def count_messages(messages: list[dict[str, Any]], encoding: Encoding) -> int:
    """A whole prompt's tokens: every message plus the reply priming."""
    return sum(count_message(m, encoding) for m in messages) + REPLY_PRIMING
