"""A conversation's stored messages as the Conversations API's items, and items given to it as the messages memory keeps.

Memory keeps a conversation as chat messages, whichever API each turn came through, so a
conversation is the same history to Chat Completions (memoryId), /v1/messages and this API.
Items given are translated as a Responses request's input is (a function call joins the
assistant message before it); a stored message shows as the items a Responses request would
send for it: a message item (its text as input_text, or output_text for the assistant's, whose
refusal is a refusal part; an empty answer is still an item, of empty text), and the assistant's
function calls and the tool outputs as function_call and function_call_output items. A message's
first item has its item id; the others, its id with `_1`, `_2`... after it. Items no chat message
holds (reasoning) are refused, not dropped as a Responses request's translation drops them.
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
# Input items a Responses request may hold that a chat message cannot: the translation skips them.
_NOT_KEPT: Final = ("reasoning", "additional_tools")


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
    for index, item in enumerate(items):
        if isinstance(item, dict) and item.get("type") in _NOT_KEPT:
            # A Responses request may drop these on its way to chat; a stored item would vanish unseen.
            raise InvalidRequestError(
                f"{param}[{index}]: the gateway's memory keeps conversations as chat messages, and cannot keep "
                f"an item of type {item['type']!r} (messages, function calls and their outputs only).",
                param=f"{param}[{index}]",
                code="unsupported_value",
            )
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
        content = [_part(part, output=role == "assistant") for part in content]
    else:
        content = []
    return {"id": item_id, "type": "message", "role": role, "status": "completed", "content": content}


def _part(part: Any, *, output: bool) -> Any:
    """A content part as shown: text (a string or an output_text part) as the API's text part, others as they are."""
    if isinstance(part, str):
        return _text_part(part, output=output)
    if isinstance(part, dict) and part.get("type") == "output_text":
        return _text_part(str(part.get("text")), output=True)
    return part


def _text_part(text: str, *, output: bool) -> Item:
    if output:
        return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
    return {"type": "input_text", "text": text}
