"""A summary window's summary: what it covers, how it is kept, and the messages that make and forward it. Pure.

A summary window trims the history as a token window does, and keeps the gist of what leaves
it: the evicted messages, folded a few at a time into one summary by a call to the window's
`summaryRoute`. A Summary says how many messages it covers (`covers`, its version: a summary
that covers more is newer) and which message it covers last (`through`), so that the next one
folds only the messages evicted after that one into it.

It is forwarded as one system message right after the request's (or stored) system messages,
before the kept history: `Summary of the earlier conversation: <text>`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

import orjson

from gateway.core.memory.entries import Entry, Message

NOTE_PREFIX: Final = "Summary of the earlier conversation: "
INSTRUCTIONS: Final = (
    "Progressively summarize the conversation below: add the new lines to the current summary and answer with "
    "the new summary only. Keep names, numbers, decisions, preferences and open questions; drop small talk."
)


class Outcome(StrEnum):
    """What a summary job that called the summary route came to (gateway_memory_summaries_total's `outcome`)."""

    OK = "ok"  # stored
    FAILED = "failed"  # the call, or the store, failed: the next turn that evicts tries again
    STALE = "stale"  # made, but a summary covering as much was stored meanwhile: dropped


OUTCOMES: Final = tuple(Outcome)


@dataclass(frozen=True, slots=True)
class Mark:
    """A stored message, told apart from others: its fingerprint and when it was stored (None: not known)."""

    fingerprint: str
    created_at: float | None


@dataclass(frozen=True, slots=True)
class Summary:
    """The gist of a conversation's first `covers` evicted messages; `through` marks the last of them."""

    covers: int
    text: str
    through: Mark


def fingerprint(message: Message) -> str:
    """A short digest of `message` as stored (its keys in order)."""
    return hashlib.sha256(orjson.dumps(message, option=orjson.OPT_SORT_KEYS)).hexdigest()[:32]


def mark(entry: Entry) -> Mark:
    return Mark(fingerprint(entry.message), entry.created_at)


def summary_key(tenant: str, memory_id: str) -> str:
    """The store's value key of a conversation's summary: the tenant's length keeps any two apart."""
    return f"summary:{len(tenant)}:{tenant}:{memory_id}"


def dump_summary(summary: Summary) -> str:
    through = summary.through
    return orjson.dumps({"covers": summary.covers, "text": summary.text, "through": [through.fingerprint, through.created_at]}).decode()


def load_summary(raw: str | None) -> Summary | None:
    """The summary `dump_summary` wrote; None for none, or for a value that is not one (it is then made again)."""
    if raw is None:
        return None
    try:
        data: Any = orjson.loads(raw)
        covers, text, (print_, created_at) = data["covers"], data["text"], data["through"]
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None
    if type(covers) is not int or covers < 0 or not isinstance(text, str) or not isinstance(print_, str):
        return None
    if created_at is not None and not isinstance(created_at, (int, float)):
        return None
    return Summary(covers, text, through=Mark(print_, created_at))


def with_note(forwarded: list[Message], system_count: int, summary: Summary) -> list[Message]:
    """`forwarded` with the summary's note after its first `system_count` (system) messages."""
    note = {"role": "system", "content": NOTE_PREFIX + summary.text}
    return [*forwarded[:system_count], note, *forwarded[system_count:]]


def boundary(entries: Sequence[Entry], *, after: int, first: Message) -> int | None:
    """Where the kept window began when a turn was stored: `after` messages from the end, at `first`.

    None when `first` is not there: the conversation changed since (a later turn, an undo), and
    that later turn's own summary is the one to make.
    """
    index = len(entries) - after
    if index < 0 or index >= len(entries) or entries[index].message != first:
        return None
    return index


def newly_evicted(evicted: Sequence[Entry], since: Summary | None) -> Sequence[Entry]:
    """The evicted messages that `since` does not cover yet (all of them without a summary).

    The newest message marked as `since.through` ends what it covers. When no message is (the
    store's cap dropped it, or an undo), those stored after it are new: a message whose store
    time is not known is taken as new.
    """
    if since is None:
        return evicted
    through = since.through
    for index in range(len(evicted) - 1, -1, -1):
        entry = evicted[index]
        if entry.created_at == through.created_at and fingerprint(entry.message) == through.fingerprint:
            return evicted[index + 1 :]
    if through.created_at is None:
        return evicted
    return [entry for entry in evicted if entry.created_at is None or entry.created_at > through.created_at]


def summary_prompt(previous: Summary | None, messages: Sequence[Message]) -> list[Message]:
    """The request to the summary route: the current summary and the new lines of conversation to fold into it."""
    current = previous.text if previous is not None else "(none yet)"
    lines = "\n".join(map(transcript_line, messages))
    return [
        {"role": "system", "content": INSTRUCTIONS},
        {"role": "user", "content": f"Current summary:\n{current}\n\nNew lines of conversation:\n{lines}\n\nNew summary:"},
    ]


def transcript_line(message: Message) -> str:
    """One message as a line of the transcript a summary is made from: `role: text`, tool calls by name and arguments."""
    role = str(message.get("role", "unknown"))
    content = message.get("content")
    if isinstance(content, list):
        text = " ".join(part["text"] for part in content if isinstance(part, dict) and isinstance(part.get("text"), str))
    else:
        text = content if isinstance(content, str) else ""
    calls = message.get("tool_calls")
    if isinstance(calls, list):
        for call in calls:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict):
                text += f" [calls {function.get('name')}({function.get('arguments')})]"
    return f"{role}: {text.strip()}"


def summary_text(answer: Any) -> str | None:
    """The summary in a chat completion's answer (choice 0's text), or None when it holds none."""
    try:
        content = answer["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        return None
    return content.strip() or None if isinstance(content, str) else None
