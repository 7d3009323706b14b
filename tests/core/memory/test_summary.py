"""A summary window's summary as pure functions: its record, its note, what is new to fold in, the prompt."""

from __future__ import annotations

import pytest

from gateway.core.memory.entries import Entry
from gateway.core.memory.summary import (
    NOTE_PREFIX,
    Mark,
    Summary,
    boundary,
    dump_summary,
    fingerprint,
    load_summary,
    mark,
    newly_evicted,
    summary_key,
    summary_prompt,
    summary_text,
    transcript_line,
    with_note,
)


def entry(role: str, text: str, at: float | None) -> Entry:
    return Entry({"role": role, "content": text}, {}, at)


HISTORY = [entry("user", "q1", 1.0), entry("assistant", "r1", 1.0), entry("user", "q2", 2.0), entry("assistant", "r2", 2.0)]


def test_a_summary_is_kept_as_text_and_read_back() -> None:
    summary = Summary(4, "the gist", through=Mark("abc", 2.5))
    assert load_summary(dump_summary(summary)) == summary
    assert load_summary(dump_summary(Summary(1, "x", through=Mark("f", None)))) == Summary(1, "x", through=Mark("f", None))


@pytest.mark.parametrize(
    "raw", [None, "", "not json", "[]", '{"covers": -1, "text": "t", "through": ["f", 1]}',
            '{"covers": 1, "text": 2, "through": ["f", 1]}', '{"covers": 1, "text": "t", "through": ["f"]}',
            '{"covers": 1, "text": "t", "through": ["f", "soon"]}', '{"covers": true, "text": "t", "through": ["f", 1]}'],
)  # fmt: skip
def test_a_value_that_is_no_summary_reads_as_none(raw: str | None) -> None:
    assert load_summary(raw) is None


def test_summary_keys_keep_tenants_and_conversations_apart() -> None:
    assert summary_key("a:b", "c") != summary_key("a", "b:c")
    assert summary_key("team", "conv") == "summary:4:team:conv"


def test_the_note_follows_the_system_messages() -> None:
    system, question = {"role": "system", "content": "be terse"}, {"role": "user", "content": "q"}
    summary = Summary(2, "earlier: q1", through=Mark("f", None))
    note = {"role": "system", "content": NOTE_PREFIX + "earlier: q1"}
    assert with_note([system, question], 1, summary) == [system, note, question]
    assert with_note([question], 0, summary) == [note, question]


def test_the_boundary_is_where_the_kept_window_began() -> None:
    # a turn kept q2 and r2 and stored nothing after them: two messages from the end
    assert boundary(HISTORY, after=2, first={"role": "user", "content": "q2"}) == 2
    assert boundary(HISTORY, after=2, first={"role": "user", "content": "q1"}) is None  # changed since
    assert boundary(HISTORY, after=5, first={"role": "user", "content": "q1"}) is None
    assert boundary(HISTORY, after=0, first={"role": "user", "content": "q1"}) is None


def test_only_the_messages_evicted_since_the_summary_are_new() -> None:
    assert newly_evicted(HISTORY, None) == HISTORY
    through_r1 = Summary(2, "s", through=mark(HISTORY[1]))
    assert newly_evicted(HISTORY, through_r1) == HISTORY[2:]
    assert newly_evicted(HISTORY, Summary(4, "s", through=mark(HISTORY[3]))) == []


def test_the_same_text_stored_at_another_time_is_another_message() -> None:
    history = [entry("user", "ok", 1.0), entry("assistant", "r", 1.0), entry("user", "ok", 2.0)]
    assert newly_evicted(history, Summary(1, "s", through=mark(history[0]))) == history[1:]


def test_when_the_last_covered_message_is_gone_those_stored_after_it_are_new() -> None:
    dropped = Summary(2, "s", through=Mark(fingerprint({"role": "user", "content": "gone"}), 1.5))
    assert newly_evicted(HISTORY, dropped) == HISTORY[2:]
    unknown_time = Summary(2, "s", through=Mark("gone", None))
    assert newly_evicted(HISTORY, unknown_time) == HISTORY


def test_the_prompt_holds_the_previous_summary_and_the_new_lines() -> None:
    prompt = summary_prompt(Summary(2, "S1", through=Mark("f", None)), [HISTORY[2].message, HISTORY[3].message])
    assert prompt[0]["role"] == "system"
    assert prompt[1] == {"role": "user", "content": "Current summary:\nS1\n\nNew lines of conversation:\nuser: q2\nassistant: r2\n\nNew summary:"}
    assert "(none yet)" in summary_prompt(None, [HISTORY[0].message])[1]["content"]


def test_tool_calls_and_content_parts_read_as_transcript_lines() -> None:
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Rome"}'}}]}  # fmt: skip
    assert transcript_line(call) == 'assistant: [calls weather({"city": "Rome"})]'
    parts = {"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {}}]}
    assert transcript_line(parts) == "user: look"
    assert transcript_line({"role": "tool", "tool_call_id": "c1", "content": "sunny"}) == "tool: sunny"


@pytest.mark.parametrize(
    ("answer", "text"),
    [({"choices": [{"message": {"content": " the gist "}}]}, "the gist"), ({"choices": [{"message": {"content": " "}}]}, None),
     ({"choices": []}, None), ({"choices": [{"message": {"content": None}}]}, None), (None, None), ("text", None)],
)  # fmt: skip
def test_the_summary_is_choice_zeros_text(answer: object, text: str | None) -> None:
    assert summary_text(answer) == text
