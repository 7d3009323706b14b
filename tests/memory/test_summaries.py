"""Background summary jobs over a real in-process store: what they fold in, what they never overwrite, how they end."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gateway.core.memory.entries import Entry, Message
from gateway.core.memory.summary import Mark, Outcome, Summary, dump_summary, load_summary, mark, summary_key
from gateway.memory.store import InProcessStore, Key, StoreUnavailable
from gateway.memory.summaries import Job, Summaries, cut_to_tokens, read_summary
from gateway.tokens import count_text, get_encoding

KEY: Key = ("team", "conv")


def m(role: str, text: str) -> Message:
    return {"role": role, "content": text}


async def conversation(*texts: str) -> InProcessStore:
    """A store holding one conversation of user and assistant messages, in turn."""
    store = InProcessStore(ttl_seconds=60, max_messages=100, lock_timeout=5)
    entries = [Entry(m("user" if i % 2 == 0 else "assistant", text)) for i, text in enumerate(texts)]
    await store.append(KEY, entries, system=[])
    return store


class Summarizer:
    """A summary route's stand-in: each call records its prompt and answers when let go (at once by default)."""

    def __init__(self, *answers: str, gate: asyncio.Event | None = None) -> None:
        self.answers = list(answers)
        self.prompts: list[list[Message]] = []
        self.gate = gate
        self.called = asyncio.Event()

    async def __call__(self, prompt: list[Message]) -> str:
        self.prompts.append(prompt)
        self.called.set()
        if self.gate is not None:
            await self.gate.wait()
        answer = self.answers.pop(0)
        if answer == "fail":
            raise RuntimeError("the summary route failed")
        return answer


def job(summarize: Any, outcomes: list[Outcome], *, after: int, first: Message) -> Job:
    return Job(KEY, after, first, summarize=summarize, counted=outcomes.append)


async def stored(store: InProcessStore) -> Summary | None:
    return load_summary(await store.get_value(summary_key(*KEY)))


async def test_a_job_folds_the_evicted_messages_into_a_stored_summary() -> None:
    store = await conversation("q1", "r1", "q2", "r2")
    summaries, summarize, outcomes = Summaries(store), Summarizer("S1"), []
    summaries.hand_over(job(summarize, outcomes, after=2, first=m("user", "q2")))
    await summaries.idle()
    assert "user: q1\nassistant: r1\n\n" in summarize.prompts[0][1]["content"]
    summary = await stored(store)
    assert summary is not None and (summary.covers, summary.text) == (2, "S1") and outcomes == [Outcome.OK]
    conversation_ = await store.load(KEY)
    assert conversation_ is not None and summary.through == mark(conversation_.entries[1])


async def test_a_job_whose_window_moved_on_makes_nothing() -> None:
    store = await conversation("q1", "r1", "q2", "r2")
    summaries, summarize = Summaries(store), Summarizer("S1")
    summaries.hand_over(job(summarize, [], after=2, first=m("user", "q1")))  # a later turn changed the window
    await summaries.idle()
    assert summarize.prompts == [] and await stored(store) is None


async def test_a_slow_summary_never_overwrites_a_newer_one() -> None:
    store = await conversation("q1", "r1", "q2", "r2")
    gate = asyncio.Event()
    summaries, summarize, outcomes = Summaries(store), Summarizer("old", gate=gate), []
    summaries.hand_over(job(summarize, outcomes, after=2, first=m("user", "q2")))
    await summarize.called.wait()
    newer = Summary(4, "newer, from another replica", through=Mark("f", None))
    await store.put_value(summary_key(*KEY), dump_summary(newer))
    gate.set()
    await summaries.idle()
    assert await stored(store) == newer and outcomes == [Outcome.STALE]


async def test_one_job_a_conversation_runs_and_only_the_newest_waits() -> None:
    store = await conversation("q1", "r1", "q2", "r2", "q3", "r3")
    gate = asyncio.Event()
    summarize, outcomes = Summarizer("S1", "S2", gate=gate), []
    summaries = Summaries(store)
    summaries.hand_over(job(summarize, outcomes, after=4, first=m("user", "q2")))
    await summarize.called.wait()
    summaries.hand_over(job(summarize, outcomes, after=3, first=m("assistant", "r2")))  # replaced by the next
    summaries.hand_over(job(summarize, outcomes, after=2, first=m("user", "q3")))
    gate.set()
    await summaries.idle()
    assert len(summarize.prompts) == 2
    assert "Current summary:\nS1\n\nNew lines of conversation:\nuser: q2\nassistant: r2\n\n" in summarize.prompts[1][1]["content"]
    summary = await stored(store)
    assert summary is not None and (summary.covers, summary.text) == (4, "S2") and outcomes == [Outcome.OK, Outcome.OK]


async def test_a_failed_summary_is_counted_and_leaves_the_stored_one() -> None:
    store = await conversation("q1", "r1", "q2", "r2")
    kept = Summary(1, "kept", through=Mark("f", None))
    await store.put_value(summary_key(*KEY), dump_summary(kept))
    summaries, outcomes = Summaries(store), []
    summaries.hand_over(job(Summarizer("fail"), outcomes, after=2, first=m("user", "q2")))
    await summaries.idle()
    assert await stored(store) == kept and outcomes == [Outcome.FAILED]


async def test_a_summary_that_takes_too_long_is_given_up() -> None:
    store = await conversation("q1", "r1", "q2", "r2")
    summaries, outcomes = Summaries(store, timeout=0.05), []
    summaries.hand_over(job(Summarizer("late", gate=asyncio.Event()), outcomes, after=2, first=m("user", "q2")))
    await summaries.idle()
    assert await stored(store) is None and outcomes == [Outcome.FAILED]


async def test_closing_mid_summary_loses_that_summary_alone() -> None:
    store = await conversation("q1", "r1", "q2", "r2")
    kept = Summary(1, "kept", through=Mark("f", None))
    await store.put_value(summary_key(*KEY), dump_summary(kept))
    summarize, outcomes = Summarizer("never", gate=asyncio.Event()), []
    summaries = Summaries(store)
    summaries.hand_over(job(summarize, outcomes, after=2, first=m("user", "q2")))
    await summarize.called.wait()
    await summaries.close()
    summaries.hand_over(job(summarize, outcomes, after=2, first=m("user", "q2")))  # after close: not run
    await summaries.idle()
    assert await stored(store) == kept and outcomes == [] and len(summarize.prompts) == 1


class FailingStore(InProcessStore):
    async def get_value(self, key: str) -> str | None:
        raise StoreUnavailable("redis gone")


async def test_a_store_that_fails_is_counted_and_reads_as_no_summary() -> None:
    store = FailingStore(ttl_seconds=60, max_messages=100, lock_timeout=5)
    await store.append(KEY, [Entry(m("user", "q1")), Entry(m("assistant", "r1")), Entry(m("user", "q2"))], system=[])
    assert await read_summary(store, KEY) is None
    summaries, outcomes = Summaries(store), []
    summaries.hand_over(job(Summarizer("S"), outcomes, after=1, first=m("user", "q2")))
    await summaries.idle()
    assert outcomes == [Outcome.FAILED]


@pytest.mark.parametrize("text", ["word " * 5000, "\U0001f600" * 3000, "x" * 200_000, "a-b " * 50_000])
def test_a_summary_over_its_tokens_is_cut_to_its_longest_prefix_that_fits(text: str) -> None:
    encoding = get_encoding("o200k_base")
    cut = cut_to_tokens(text, 100, encoding)
    assert text.startswith(cut) and count_text(encoding, cut) <= 100
    assert count_text(encoding, text[: len(cut) + 1]) > 100  # one character more would not fit


def test_a_summary_within_its_tokens_is_kept_whole() -> None:
    encoding = get_encoding("o200k_base")
    assert cut_to_tokens("The user is Ada; she asked about Paris.", 10, encoding) == "The user is Ada; she asked about Paris."
