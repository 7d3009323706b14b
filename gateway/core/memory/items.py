"""A conversation's stored messages as the Conversations API's items, and items given to it as the messages memory keeps.

Memory keeps a conversation as chat messages, whichever API each turn came through, so a
conversation is the same history to Chat Completions (memoryId), /v1/messages and this API.
Items given are translated as a Responses request's input is (a function call joins the
assistant message before it); a stored message shows as the items a Responses request would
send for it: a message item (its text as input_text, or output_text for the assistant's), and
the assistant's function calls and the tool outputs as function_call and function_call_output
items. A message's first item has its item id; the others, its id with `_1`, `_2`... after it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Final

from gateway.core.errors import InvalidRequestError
from gateway.core.memory.entries import Entry, Message
from gateway.core.translate import TranslationError
from gateway.core.translate.responses.history import items_of
from gateway.core.translate.responses.items import messages_to_chat

MOST_ITEMS_ADDED: Final = 20  # items a create or an add takes at once, as OpenAI's API allows
Item = dict[str, Any]


def messages_of_items(items: Any, param: str = "items") -> list[Message]:
    """The chat messages `items` (a request's `items`: a list of up to 20 input items) stand for; a 400 names a bad one."""
    if not isinstance(items, list):
        raise InvalidRequestError(f"'{param}' must be an array of items.", param=param, code="invalid_type")
    if len(items) > MOST_ITEMS_ADDED:
        raise InvalidRequestError(
            f"'{param}' may hold at most {MOST_ITEMS_ADDED} items, got {len(items)}.", param=param, code="array_above_max_length"
        )
    if not items:
        return []
    try:
        return messages_to_chat({"input": items})
    except TranslationError as exc:
        culprit = exc.param or ""
        where = param + culprit.removeprefix("input")
        message = exc.message.replace("input[", f"{param}[").replace("input must", f"{param} must")
        if exc.code == "unsupported_value":  # the translation's message speaks of routes, which have no part here
            message = f"{where}: the gateway's memory keeps conversations as chat messages, and cannot keep this (messages, function calls and their outputs only)."
        raise TranslationError(message, where, exc.code or "invalid_value") from None


def items_of_entries(entries: Sequence[Entry]) -> Iterator[Item]:
    """The items of stored messages, oldest first, each with its id and status."""
    for entry in entries:
        for index, item in enumerate(items_of([entry.message], {})):
            item_id = entry.item_id or ""
            yield _shown(item, item_id if index == 0 else f"{item_id}_{index}")


def entry_of_item(entries: Sequence[Entry], item_id: str) -> tuple[Entry, Item] | None:
    """The stored message an item comes from, and the item; None when no message has it."""
    for entry in entries:
        if entry.item_id and item_id.startswith(entry.item_id):
            for item in items_of_entries([entry]):
                if item["id"] == item_id:
                    return entry, item
    return None


def _shown(item: Item, item_id: str) -> Item:
    """An item as the API shows it: a message's text as content parts; every item with its id and completed."""
    role = item.get("role")
    if role is None:
        return {"id": item_id, **item, "status": "completed"}
    content = item.get("content")
    if isinstance(content, str):
        content = [_text_part(content, output=role == "assistant")]
    elif isinstance(content, list):
        content = [_text_part(part, output=role == "assistant") if isinstance(part, str) else part for part in content]
    else:
        content = []
    return {"id": item_id, "type": "message", "role": role, "status": "completed", "content": content}


def _text_part(text: str, *, output: bool) -> Item:
    if output:
        return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
    return {"type": "input_text", "text": text}
