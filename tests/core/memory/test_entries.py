"""Stored entries: a message and its counts, written and read back, and where the last turn starts."""

from __future__ import annotations

from gateway.core.memory.entries import Entry, dump_entry, fallback_item_id, last_turn_start, load_entry


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


def test_an_entry_keeps_its_item_id_through_its_json_and_one_without_gets_one_from_its_bytes() -> None:
    entry = Entry({"role": "user", "content": "hi"}, {"o200k_base": 5}, item_id="msg_1")
    assert load_entry(dump_entry(entry)).item_id == "msg_1"
    assert load_entry(dump_entry(entry, item_id="msg_2")).item_id == "msg_2"
    old = b'{"m": {"role": "user", "content": "x"}, "c": 1.5}'
    assert load_entry(old).item_id == load_entry(old).item_id == fallback_item_id(old)
    assert load_entry(b'{"m": {"role": "user", "content": "x"}, "c": 2.5}').item_id != fallback_item_id(old)
    assert b'"i"' not in dump_entry(Entry({"role": "user", "content": "x"}))  # none given: none written
