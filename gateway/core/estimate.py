"""How many tokens a request asks for before it is sent: its prompt, estimated, plus the most it lets the answer take.

The estimate is OpenAI's rule of thumb: a token is about four characters. It reads the text of
every API shape the gateway serves (Chat's and the Messages API's messages and system, the
Responses API's input and instructions, embeddings' input, completions' prompt) and never fails
on an odd shape: what it cannot read counts as nothing. Token arrays (embeddings, completions)
count a token each. Tools (Chat's, the Responses API's and the Messages API's, and Chat's older
`functions`) count as the characters of their JSON: names, descriptions and parameter schemas
are all in the prompt the model reads. The payload is a body as the server parsed it: nested no
deeper than gateway.core.nesting.MAX_JSON_DEPTH, so its tools may be written as JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from operator import itemgetter
from typing import Any, Final

import orjson

TEXT_FIELDS: Final = frozenset({"messages", "input", "prompt", "system", "instructions"})
TOOL_FIELDS: Final = frozenset({"tools", "functions"})
PROMPT_FIELDS: Final = TEXT_FIELDS | TOOL_FIELDS
ANSWER_LIMITS: Final = frozenset({"max_tokens", "max_completion_tokens", "max_output_tokens"})
# Where text sits inside a message, a content part or an item of every API shape.
NESTED_TEXT: Final = ("content", "text", "input", "output", "arguments", "refusal")
CHARACTERS_PER_TOKEN: Final = 4
CONTENT_OF: Final = itemgetter("content")
DEEPEST: Final = 32  # nothing real nests deeper; a hostile body must not cost more than its size


def requested_tokens(payload: Mapping[str, Any]) -> int:
    """The prompt's estimated tokens (its text's characters / 4, rounded up) plus the answer's limit asked for."""
    return prompt_tokens(payload) + answer_limit(payload)


def prompt_tokens(payload: Mapping[str, Any]) -> int:
    """The prompt's estimated tokens: its text's characters / 4, rounded up."""
    characters = 0
    # The fields present, found in C by looking the payload's few keys up in the fields
    # (`payload.keys() & fields` would look every field up in the payload).
    for name in PROMPT_FIELDS.intersection(payload):
        value = payload[name]
        characters += json_characters(value) if name in TOOL_FIELDS else text_characters(value)
    return -(-characters // CHARACTERS_PER_TOKEN)


def answer_limit(payload: Mapping[str, Any]) -> int:
    """The largest of max_tokens, max_completion_tokens and max_output_tokens given as an int; 0 when none is."""
    most = 0
    for name in payload.keys() & ANSWER_LIMITS:
        value = payload[name]
        if type(value) is int and value > most:
            most = value
    return most


def text_characters(value: Any) -> int:
    """Characters of the text in `value`: strings, lists of them, message and part dicts; a token id counts 4.

    A list of messages whose content is a string (most chat requests) is read without the walk.
    """
    if type(value) is str:
        return len(value)
    if type(value) is not list:
        return walked_characters(value)
    try:
        return string_contents_characters(value)
    except (TypeError, KeyError):  # an item that is not a dict, without content, or whose content is not a string
        pass
    characters = 0
    for item in value:
        content = item.get("content") if type(item) is dict else None
        if type(content) is str:
            characters += len(content)
        else:
            characters += walked_characters(item)
    return characters


def string_contents_characters(messages: list[Any]) -> int:
    """Characters of the contents of `messages`, dicts whose content is a string; TypeError or KeyError for any other.

    The common chat request's shape, read in C rather than message by message (the gain is in
    the commit that made it). The error (a message that is not a dict or has no content, a
    content that is not a string) sends the caller to the per-message reading.
    """
    return len("".join(map(CONTENT_OF, messages)))


def json_characters(value: Any) -> int:
    """Characters of `value` written as JSON; of its text alone (`walked_characters`) when orjson cannot write it.

    `value` is part of a body as the server parsed it, which nests no deeper than MAX_JSON_DEPTH
    (gateway.server.parsing refuses deeper ones; see gateway.core.nesting), so orjson may write it.
    """
    try:
        return len(orjson.dumps(value))
    except orjson.JSONEncodeError:  # not JSON's values (a parsed body's always are, but a caller may pass any)
        return walked_characters(value)


def walked_characters(value: Any) -> int:
    """Characters of the text anywhere in `value` (text fields of dicts, lists), without recursion, to DEEPEST levels."""
    characters = 0
    pending: list[tuple[Any, int]] = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, str):
            characters += len(item)
        elif type(item) is int:
            characters += CHARACTERS_PER_TOKEN
        elif depth >= DEEPEST:
            continue
        elif isinstance(item, list):
            pending.extend((element, depth + 1) for element in item)
        elif isinstance(item, Mapping):
            pending.extend((item.get(name), depth + 1) for name in NESTED_TEXT if name in item)
    return characters
