"""Helpers for the memory store tests: a settable clock, an old SQLite schema, counted entries, window settings."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from gateway.core.memory.entries import Entry
from gateway.core.memory.settings import MemorySettings
from gateway.tokens import count_message, get_encoding

ENCODINGS = {name: get_encoding(name) for name in ("o200k_base", "cl100k_base")}

# The SQLite store's schema before leases named their holder and messages kept their counts.
OLD_SCHEMA = """
CREATE TABLE conversations (
    tenant TEXT NOT NULL, memory_id TEXT NOT NULL, system TEXT NOT NULL, updated_at REAL NOT NULL,
    PRIMARY KEY (tenant, memory_id)
) WITHOUT ROWID;
CREATE INDEX conversations_updated ON conversations (updated_at);
CREATE TABLE locks (
    tenant TEXT NOT NULL, memory_id TEXT NOT NULL, owner TEXT NOT NULL, expires_at REAL NOT NULL,
    PRIMARY KEY (tenant, memory_id)
) WITHOUT ROWID;
CREATE TABLE messages (
    tenant TEXT NOT NULL, memory_id TEXT NOT NULL, seq INTEGER NOT NULL, role TEXT NOT NULL, body BLOB NOT NULL,
    PRIMARY KEY (tenant, memory_id, seq)
) WITHOUT ROWID;
"""


class Clock:
    """A store's clock that stands still until a test moves `now`."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def count(message: dict[str, Any]) -> int:
    """The message's tokens in o200k_base."""
    return count_message(message, ENCODINGS["o200k_base"])


def tool_unit(index: int, answered: int) -> list[dict[str, Any]]:
    """An assistant message calling two tools, and the results of `answered` of them."""
    calls = [{"id": f"c{index}-{n}", "type": "function", "function": {"name": "f", "arguments": "{}"}} for n in range(2)]
    results = [{"role": "tool", "tool_call_id": f"c{index}-{n}", "content": f"r{n}"} for n in range(answered)]
    return [{"role": "assistant", "content": None, "tool_calls": calls}, *results]


def stored(message: dict[str, Any], how: str) -> Entry:
    """An entry counted in the turn's encoding, in another one (a size estimate only), or not at all ("none")."""
    if how == "none":
        return Entry(message, {})
    return Entry(message, {how: count_message(message, ENCODINGS[how])})


window_settings = st.one_of(
    st.builds(MemorySettings, memory_type=st.just("message_window"), max_messages=st.integers(1, 30)),
    st.builds(MemorySettings, memory_type=st.just("token_window"), max_tokens=st.integers(20, 600)),
    st.builds(
        MemorySettings,
        memory_type=st.just("round_window"),
        max_rounds=st.integers(1, 6),
        max_chars=st.integers(20, 2000),
    ),
)
