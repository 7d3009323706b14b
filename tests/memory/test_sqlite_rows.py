"""The SQLite store's message rows: a turn's row of [message, counts, item id], and the shapes older versions wrote."""

from __future__ import annotations

import orjson
import pytest

from gateway.core.memory.entries import Entry
from gateway.memory.sqlite_rows import MOST_IN_A_ROW, MalformedRow, message_rows, read_row


def test_a_turn_is_one_row_with_each_messages_counts_and_id() -> None:
    entries = [Entry({"role": "user", "content": "q"}, {"o200k_base": 2}, item_id="msg_q"), Entry({"role": "assistant", "content": "a"})]
    count, params = message_rows(entries)
    assert count == 1 and params[0] == "user" and params[2:] == ["", 2]
    stored = orjson.loads(params[1])
    assert stored[0] == [{"role": "user", "content": "q"}, {"o200k_base": 2}, "msg_q"]
    assert stored[1][2].startswith("msg_") and stored[1][2] != "msg_q"  # given when stored
    read = read_row(params[1], "", 2, written_at=5.0, seq=7)
    assert [(e.message["content"], e.item_id, e.created_at) for e in read] == [("q", "msg_q", 5.0), ("a", stored[1][2], 5.0)]


def test_a_turn_longer_than_a_row_holds_is_a_row_a_message_each_with_its_id() -> None:
    entries = [Entry({"role": "user", "content": str(n)}) for n in range(MOST_IN_A_ROW + 1)]
    count, params = message_rows(entries)
    assert count == MOST_IN_A_ROW + 1 and len(params) == 4 * count
    assert all(len(orjson.loads(body)[0]) == 3 for body in params[1::4])
    assert message_rows([]) == (0, [])


def test_rows_older_versions_wrote_get_ids_from_their_numbers() -> None:
    pairs = orjson.dumps([[{"role": "user", "content": "q"}, {}], [{"role": "assistant", "content": "a"}, {}]])
    assert [e.item_id for e in read_row(pairs, "", 2, seq=4)] == ["msg_n4", "msg_n5"]
    one = orjson.dumps({"role": "user", "content": "q"})
    assert [e.item_id for e in read_row(one, "o200k_base", 3, seq=9)] == ["msg_n9"]
    oldest = orjson.dumps({"m": {"role": "user", "content": "q"}, "t": {}})
    assert [e.item_id for e in read_row(oldest, None, None, seq=2)] == ["msg_n2"]


@pytest.mark.parametrize("body", ['[[{"role": "user"}, {}, 5]]', '[[{"role": "user"}]]', '[[{"role": "user"}, {}, "i", 1], 2]'])
def test_a_row_no_version_writes_is_malformed(body: str) -> None:
    with pytest.raises(MalformedRow):
        read_row(body, "", 1)
