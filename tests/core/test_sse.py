"""The incremental SSE parser: line ends, events split across chunks, linear work, the size cap."""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterable
from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.core.sse import MAX_EVENT_BYTES, Event, EventParser, EventTooLarge

LINE_ENDS = [b"\n", b"\r\n", b"\r"]


def feed_all(chunks: Iterable[bytes], parser: EventParser | None = None) -> list[Event]:
    parser = parser or EventParser()
    return [event for chunk in chunks for event in parser.feed(chunk)]


def split_at(stream: bytes, cuts: Iterable[int]) -> list[bytes]:
    bounds = [0, *sorted(cuts), len(stream)]
    return [stream[a:b] for a, b in pairwise(bounds)]


def test_crlf_split_across_chunks_is_one_line_end() -> None:
    events = feed_all([b"data: a\r", b"\ndata: b\r\n\r\n"])
    assert events == [Event(raw=b"data: a\ndata: b\n\n", data=b"a\nb")]


def test_event_ending_in_cr_is_emitted_without_waiting_for_the_next_chunk() -> None:
    parser = EventParser()
    assert parser.feed(b"data: a\r\r") == [Event(raw=b"data: a\n\n", data=b"a")]
    assert parser.feed(b"\ndata: b\r\r") == [Event(raw=b"data: b\n\n", data=b"b")]
    assert parser.pending == b""


def test_mixed_line_ends() -> None:
    stream = b"data: a\r\ndata: b\rdata: c\n\r\nevent: x\rdata: d\n\r: e\n\n"
    assert feed_all([stream]) == [
        Event(raw=b"data: a\ndata: b\ndata: c\n\n", data=b"a\nb\nc"),
        Event(raw=b"event: x\ndata: d\n\n", data=b"d", name=b"x"),
        Event(raw=b": e\n\n", data=None),
    ]


def test_comments_are_not_data() -> None:
    events = feed_all([b": keep-alive\n\n", b"data: x\n: note\ndata: y\n\n"])
    assert events == [
        Event(raw=b": keep-alive\n\n", data=None),
        Event(raw=b"data: x\n: note\ndata: y\n\n", data=b"x\ny"),
    ]


def test_multi_line_data_joins_with_newline_and_drops_one_leading_space() -> None:
    (event,) = feed_all([b'data: {"a":\ndata:  1}\ndata:\n\n'])
    assert event.data == b'{"a":\n 1}\n'


def test_pending_holds_an_unterminated_event() -> None:
    parser = EventParser()
    assert parser.feed(b"data: a\n\ndata: b\r") == [Event(raw=b"data: a\n\n", data=b"a")]
    assert parser.feed(b"\ndata: c") == []
    assert parser.pending == b"data: b\ndata: c"


def test_4mb_event_in_4kb_chunks_is_one_event_and_linear_work() -> None:
    line = b"data: " + b"x" * 58 + b"\r\n"
    stream = line * (4 * 1024 * 1024 // len(line)) + b"\r\n"
    chunks = [stream[i : i + 4096] for i in range(0, len(stream), 4096)]
    parser = EventParser()
    # Work measured as bytes allocated by the feeds that complete nothing: a parser that rebuilds
    # the pending event on every chunk (the old one) allocates ~1,000 x 2 MB there; a linear one
    # about the 4 MB it was given.
    allocated = 0
    tracemalloc.start()
    try:
        for chunk in chunks[:-1]:
            before = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            assert parser.feed(chunk) == []
            allocated += tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    (event,) = parser.feed(chunks[-1])
    assert event.raw == stream.replace(b"\r\n", b"\n")
    assert event.data == b"\n".join([b"x" * 58] * (len(stream) // len(line)))
    assert allocated < 4 * len(stream)


def test_unterminated_event_past_the_cap_raises() -> None:
    parser = EventParser(max_event_bytes=100)
    parser.feed(b"data: " + b"x" * 60)
    with pytest.raises(EventTooLarge, match="100 bytes"):
        parser.feed(b"x" * 60)


def test_default_cap_is_8_mib() -> None:
    assert MAX_EVENT_BYTES == 8 * 1024 * 1024
    parser = EventParser()
    parser.feed(b"data: " + b"x" * (MAX_EVENT_BYTES - 6))
    with pytest.raises(EventTooLarge, match=f"{MAX_EVENT_BYTES} bytes"):
        parser.feed(b"x")


@given(st.integers(min_value=0, max_value=30), st.data())
def test_cap_counts_the_whole_event_however_it_is_split(size: int, data: st.DataObject) -> None:
    """An event of `limit` bytes (blank line included) passes, one byte more raises, in any chunking."""
    limit = 20
    stream = b"data:" + b"x" * size + b"\n\n"
    cuts = data.draw(st.lists(st.integers(min_value=0, max_value=len(stream))))
    parser = EventParser(max_event_bytes=limit)
    if len(stream) > limit:
        with pytest.raises(EventTooLarge):
            feed_all(split_at(stream, cuts), parser)
    else:
        assert feed_all(split_at(stream, cuts), parser) == [Event(raw=stream, data=b"x" * size)]


text = st.binary(max_size=12).filter(lambda b: b"\r" not in b and b"\n" not in b)
name = st.text(alphabet="abcdefxyz_", min_size=1, max_size=8).map(str.encode)
field = st.one_of(
    text.map(lambda value: (b"data: " + value, value)),
    text.map(lambda comment: (b":" + comment, None)),
    name.map(lambda event_name: (b"event: " + event_name, event_name)),
)


@given(
    events=st.lists(st.lists(field, min_size=1, max_size=4), max_size=5),
    line_end=st.sampled_from(LINE_ENDS),
    data=st.data(),
)
def test_any_split_of_a_stream_gives_the_events_of_the_whole(
    events: list[list[tuple[bytes, bytes | None]]], line_end: bytes, data: st.DataObject
) -> None:
    stream = b"".join(b"".join(line + line_end for line, _ in fields) + line_end for fields in events)
    expected = [expected_event(fields) for fields in events]
    cuts = data.draw(st.lists(st.integers(min_value=0, max_value=len(stream))))
    assert feed_all([stream]) == expected
    assert feed_all(split_at(stream, cuts)) == expected


def expected_event(fields: list[tuple[bytes, bytes | None]]) -> Event:
    values = [value for line, value in fields if line.startswith(b"data: ") and value is not None]
    names = [value for line, value in fields if line.startswith(b"event: ")]
    return Event(
        raw=b"\n".join(line for line, _ in fields) + b"\n\n",
        data=b"\n".join(values) if values else None,
        name=names[-1] if names else None,
    )


@given(
    st.lists(st.sampled_from([b"\r", b"\n", b"\r\n", b"data:", b" ", b"x", b":", b"event: e"])),
    st.data(),
)
def test_any_split_of_any_bytes_parses_like_the_whole(pieces: list[bytes], data: st.DataObject) -> None:
    """Split invariance holds off the happy path too: stray line ends, blank lines, odd fields."""
    stream = b"".join(pieces)
    cuts = data.draw(st.lists(st.integers(min_value=0, max_value=len(stream))))
    whole, split = EventParser(), EventParser()
    assert feed_all(split_at(stream, cuts), split) == feed_all([stream], whole)
    assert split.pending == whole.pending


# The one-line fast path (a read whose events are each one line) against the field parser: lines
# that look almost like `data: ` lines, and multi-line events beside one-line ones, in every
# line-end style and cut at every byte. Each expected event is written out by hand.
NEAR_MISSES: list[tuple[list[bytes], Event]] = [
    ([b"data: {\"a\":1}"], Event(raw=b"data: {\"a\":1}\n\n", data=b"{\"a\":1}")),
    ([b"data:x"], Event(raw=b"data:x\n\n", data=b"x")),  # no space: the value starts right after the colon
    ([b"data:  x"], Event(raw=b"data:  x\n\n", data=b" x")),  # only one space is dropped
    ([b"data: "], Event(raw=b"data: \n\n", data=b"")),
    ([b"data:"], Event(raw=b"data:\n\n", data=b"")),
    ([b": data: x"], Event(raw=b": data: x\n\n", data=None)),  # a comment, however it reads
    ([b"datum: x"], Event(raw=b"datum: x\n\n", data=None)),
    ([b"DATA: x"], Event(raw=b"DATA: x\n\n", data=None)),
    ([b"event: e"], Event(raw=b"event: e\n\n", data=None, name=b"e")),
    ([b"data: [DONE]"], Event(raw=b"data: [DONE]\n\n", data=b"[DONE]")),
    ([b"data: a", b"data: b"], Event(raw=b"data: a\ndata: b\n\n", data=b"a\nb")),  # two lines: joined
    ([b"data: {\"a\":", b"data: 1}"], Event(raw=b"data: {\"a\":\ndata: 1}\n\n", data=b"{\"a\":\n1}")),
    ([b": keep-alive", b"data: x"], Event(raw=b": keep-alive\ndata: x\n\n", data=b"x")),
    ([b"event: e", b"data: x"], Event(raw=b"event: e\ndata: x\n\n", data=b"x", name=b"e")),
    ([b"data: x", b"event: e"], Event(raw=b"data: x\nevent: e\n\n", data=b"x", name=b"e")),
]


@pytest.mark.parametrize("line_end", LINE_ENDS, ids=["lf", "crlf", "cr"])
@pytest.mark.parametrize(
    "cases",
    [NEAR_MISSES, [case for case in NEAR_MISSES if len(case[0]) == 1]],
    ids=["mixed", "one-line-events-only"],
)
def test_one_line_events_parse_as_the_field_parser_would_at_any_cut(
    line_end: bytes, cases: list[tuple[list[bytes], Event]]
) -> None:
    stream = b"".join(line_end.join(lines) + line_end * 2 for lines, _ in cases)
    expected = [event for _, event in cases]
    assert feed_all([stream]) == expected
    assert feed_all([stream[i : i + 1] for i in range(len(stream))]) == expected
    for cut in range(len(stream) + 1):
        assert feed_all([stream[:cut], stream[cut:]]) == expected, cut


def test_a_read_with_a_multi_line_event_after_one_line_events_parses_each_in_full() -> None:
    """One multi-line event anywhere in a read (or in its unfinished tail) must not be read as one line."""
    one = b'data: {"a":1}\n\n'
    parser = EventParser()
    assert parser.feed(one + b"data: x\ndata: y\n\n" + one) == [
        Event(raw=one, data=b'{"a":1}'),
        Event(raw=b"data: x\ndata: y\n\n", data=b"x\ny"),
        Event(raw=one, data=b'{"a":1}'),
    ]
    assert parser.feed(one + b"data: p\ndata: q") == [Event(raw=one, data=b'{"a":1}')]
    assert parser.feed(b"\n\n") == [Event(raw=b"data: p\ndata: q\n\n", data=b"p\nq")]


def test_blank_lines_between_one_line_events_make_no_events() -> None:
    assert feed_all([b"\n\ndata: a\n\n\n\n\n\ndata: b\n\n"]) == [
        Event(raw=b"data: a\n\n", data=b"a"),
        Event(raw=b"data: b\n\n", data=b"b"),
    ]


def test_the_cap_holds_for_one_line_events_in_one_read() -> None:
    parser = EventParser(max_event_bytes=20)
    assert parser.feed(b"data: " + b"x" * 12 + b"\n\n") == [Event(raw=b"data: " + b"x" * 12 + b"\n\n", data=b"x" * 12)]
    with pytest.raises(EventTooLarge):
        EventParser(max_event_bytes=20).feed(b"data: a\n\n" + b"data: " + b"x" * 13 + b"\n\n")
