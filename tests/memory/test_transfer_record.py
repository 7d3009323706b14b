"""An exported conversation's JSON line: written and read back whole, and a bad line named with what is wrong. Pure."""

from __future__ import annotations

import orjson
import pytest

from gateway.core.memory.about import About
from gateway.core.memory.entries import Entry
from gateway.memory.transfer_record import BadLine, Record, dump_line, load_line

RECORD = Record(
    ("acme", "c-1"),
    [{"role": "system", "content": "be brief"}],
    [
        Entry({"role": "user", "content": "hi"}, {"o200k_base": 3}, 100.5, item_id="msg_a"),
        Entry({"role": "assistant", "content": "hello"}, {}, None, item_id="msg_b"),
    ],
    updated_at=200.25,
    about=About(99.0, {"topic": "x"}),
    summary='{"covers": 1}',
    redo=[[Entry({"role": "user", "content": "undone"}, {}, 150.0, item_id="msg_c")]],
)


def test_a_record_comes_back_from_its_line_with_every_time_id_and_count() -> None:
    line = dump_line(RECORD)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    back = load_line(line, 1)
    assert back == RECORD
    assert [(e.created_at, e.item_id) for e in back.entries] == [(100.5, "msg_a"), (None, "msg_b")]  # not compared by ==
    assert [(e.created_at, e.item_id) for e in back.redo[0]] == [(150.0, "msg_c")]


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda d: d.pop("memoryId"), "missing 'memoryId'"),
        (lambda d: d.update(tenant=""), "'tenant' is not a non-empty string"),
        (lambda d: d["messages"][1].pop("itemId"), "without an 'itemId'"),
        (lambda d: d["messages"][0].update(tokens={"o200k_base": "3"}), "not integers"),
        (lambda d: d.update(metadata={"a": 1}), "'metadata' is not an object of strings"),
        (lambda d: d.update(updatedAt="yesterday"), "'updatedAt' is not a number"),
        (lambda d: d.update(system={}), "'system' is not a list"),
        (lambda d: d.update(redo=[{}]), "'redo' is not a list of turns"),
    ],
)
def test_a_line_that_is_no_record_says_which_line_and_what(change: object, said: str) -> None:
    data = orjson.loads(dump_line(RECORD))
    change(data)  # type: ignore[operator]
    with pytest.raises(BadLine) as refused:
        load_line(orjson.dumps(data), 7)
    assert str(refused.value).startswith("line 7: not an exported conversation") and said in str(refused.value)


def test_a_line_that_is_no_json_is_named() -> None:
    with pytest.raises(BadLine, match=r"^line 3: "):
        load_line(b'{"tenant": ', 3)
    with pytest.raises(BadLine, match="not a JSON object"):
        load_line(b"[1, 2]", 4)
