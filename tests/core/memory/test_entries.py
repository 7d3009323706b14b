"""Stored entries: a message and its counts, written and read back, and where the last turn starts."""

from __future__ import annotations

from gateway.core.memory.entries import Entry, dump_entry, last_turn_start, load_entry


def test_an_entry_is_read_back_as_written() -> None:
    entry = Entry({"role": "user", "content": "hi"}, {"o200k_base": 5})
    assert load_entry(dump_entry(entry)) == entry
    uncounted = Entry({"role": "assistant", "content": "ok"})
    assert load_entry(dump_entry(uncounted)) == Entry({"role": "assistant", "content": "ok"}, {})


def test_an_entry_written_without_counts_reads_as_uncounted() -> None:
    assert load_entry(b'{"m": {"role": "user", "content": "x"}}') == Entry({"role": "user", "content": "x"}, {})


def test_the_last_turn_starts_at_the_last_user_message() -> None:
    said = [Entry({"role": role, "content": "."}) for role in ("user", "assistant", "user", "assistant", "tool")]
    assert last_turn_start(said) == 2
    assert last_turn_start(said[1:2]) == 0  # no user message: the whole history is one turn
    assert last_turn_start([]) == 0
