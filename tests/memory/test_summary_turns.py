"""A summary window's turn over a real in-process store: the note it forwards, its header, the job it hands over."""

from __future__ import annotations

from typing import Any

from gateway.core.memory.entries import Entry
from gateway.core.memory.settings import MemorySettings, MemoryType
from gateway.core.memory.summary import NOTE_PREFIX, Mark, Outcome, Summary, dump_summary, summary_key
from gateway.memory.store import InProcessStore, Key, StoreUnavailable
from gateway.memory.summary_turns import SummaryTurn
from gateway.memory.turns import Memory
from gateway.observe.trace import Trace

KEY: Key = ("team", "conv")
SYSTEM = {"role": "system", "content": "be brief"}
# A window of a single message of history beside the system message, the question and the priming
WINDOW = MemorySettings(MemoryType.SUMMARY_WINDOW, max_tokens=24, summary_route="cheap")


def u(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def a(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


class Recorder:
    def __init__(self) -> None:
        self.prompts: list[Any] = []
        self.outcomes: list[Outcome] = []

    async def summarize(self, prompt: list[Any]) -> str:
        self.prompts.append(prompt)
        return f"summary {len(self.prompts)}"


async def memory_with(*texts: str, store: InProcessStore | None = None) -> Memory:
    store = store or InProcessStore(ttl_seconds=60, max_messages=100, lock_timeout=5)
    entries = [Entry(u(text) if i % 2 == 0 else a(text)) for i, text in enumerate(texts)]
    await store.append(KEY, entries, system=[SYSTEM])
    return Memory(store)


async def one_turn(memory: Memory, recorder: Recorder, question: str) -> tuple[list[Any], dict[str, str]]:
    turn = SummaryTurn(
        memory, KEY, settings=WINDOW, messages=[u(question)], model=None, trace=Trace(),
        summarize=recorder.summarize, counted=recorder.outcomes.append,
    )  # fmt: skip
    async with turn:
        forwarded, headers = list(turn.plan.forwarded), dict(turn.headers)
        await turn.commit_answer({"choices": [{"message": a(f"re {question}")}]})
    return forwarded, headers


async def test_a_turn_forwards_the_stored_summary_after_the_system_message() -> None:
    memory, recorder = await memory_with("q1", "r1", "q2", "r2"), Recorder()
    await memory.store.put_value(summary_key(*KEY), dump_summary(Summary(2, "q1 was asked", through=Mark("f", None))))
    forwarded, headers = await one_turn(memory, recorder, "q3")
    assert forwarded == [SYSTEM, {"role": "system", "content": NOTE_PREFIX + "q1 was asked"}, a("r2"), u("q3")]
    assert headers["x-memory-summary"] == "2" and headers["x-memory-evicted"] == "3"
    await memory.summaries.idle()
    # the job folds in what the summary does not cover yet: every evicted message whose mark is not found
    assert len(recorder.prompts) == 1 and recorder.outcomes == [Outcome.OK]
    await memory.close()


async def test_a_turn_that_evicts_nothing_hands_no_job_over() -> None:
    memory, recorder = await memory_with("q1"), Recorder()
    forwarded, headers = await one_turn(memory, recorder, "q2")
    assert headers["x-memory-summary"] == "0" and headers["x-memory-evicted"] == "0"
    assert forwarded == [SYSTEM, u("q1"), u("q2")]
    await memory.summaries.idle()
    assert recorder.prompts == []
    await memory.close()


async def test_the_next_turn_gets_the_summary_its_predecessor_left() -> None:
    memory, recorder = await memory_with("q1", "r1"), Recorder()
    await one_turn(memory, recorder, "q2")  # keeps r1: q1 leaves the window
    await memory.summaries.idle()
    assert "New lines of conversation:\nuser: q1\n\n" in recorder.prompts[0][1]["content"]
    forwarded, headers = await one_turn(memory, recorder, "q3")
    assert headers["x-memory-summary"] == "1" and forwarded[1] == {"role": "system", "content": NOTE_PREFIX + "summary 1"}
    await memory.close()


class NoValues(InProcessStore):
    async def get_value(self, key: str) -> str | None:
        raise StoreUnavailable("values unreadable")


async def test_a_summary_the_store_cannot_read_is_a_turn_without_one() -> None:
    store = NoValues(ttl_seconds=60, max_messages=100, lock_timeout=5)
    memory, recorder = await memory_with("q1", "r1", store=store), Recorder()
    forwarded, headers = await one_turn(memory, recorder, "q2")
    assert headers["x-memory-summary"] == "0" and forwarded == [SYSTEM, a("r1"), u("q2")]
    await memory.summaries.idle()
    assert recorder.outcomes == [Outcome.FAILED]
    await memory.close()
