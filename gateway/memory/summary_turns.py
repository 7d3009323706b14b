"""A summary window's turn: a token window's, with the stored summary forwarded and brought up to date after it.

The turn reads the conversation's newest summary that is ready (it never waits for one being
made) and forwards it as a system note after the system messages (core.memory.summary); its
answer says how many messages that summary covers (`x-memory-summary`, 0 without one). Once
the turn is stored, if its window evicted anything, a background job folds the messages evicted
since into the summary (memory.summaries): the turn does not wait for it, and its failure is
never the turn's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gateway.core.memory.entries import Message
from gateway.core.memory.settings import MemorySettings
from gateway.core.memory.summary import Outcome, with_note
from gateway.memory.store import Key
from gateway.memory.summaries import Job, Summarize, read_summary
from gateway.memory.turns import Memory, Turn
from gateway.observe.trace import Trace


class SummaryTurn(Turn):
    """A Turn of a summary window (see the module's docstring); `summarize` calls the summary route."""

    __slots__ = ("_counted", "_first", "_summarize")

    def __init__(
        self,
        memory: Memory,
        key: Key,
        *,
        settings: MemorySettings,
        messages: Sequence[Mapping[str, Any]],
        model: str | None,
        trace: Trace,
        summarize: Summarize,
        counted: Callable[[Outcome], None],
    ) -> None:
        super().__init__(memory, key, settings=settings, messages=messages, model=model, trace=trace)
        self._summarize = summarize
        self._counted = counted
        self._first: Message | None = None  # the first kept history message, None when none is kept

    async def __aenter__(self) -> SummaryTurn:  # type: ignore[override]  # as Turn's: a turn gives itself
        await super().__aenter__()
        try:
            plan = self.plan
            if plan.history_kept:
                self._first = plan.forwarded[len(plan.system)]
            summary = await read_summary(self._memory.store, self._key)
            if summary is not None:
                plan.forwarded = with_note(plan.forwarded, len(plan.system), summary)
            self.headers["x-memory-summary"] = str(summary.covers if summary is not None else 0)
        except BaseException as exc:
            await self.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        return self

    async def _commit(self, reply: Message) -> None:
        await super()._commit(reply)
        plan = self.plan
        if not plan.evicted:
            return
        # The stored turn follows the kept history: the window began at its first message, or the turn's
        first = self._first
        if first is None:
            first = plan.new_turn[0] if plan.new_turn else reply
        job = Job(self._key, plan.history_kept + self._stored, first, summarize=self._summarize, counted=self._counted)
        self._memory.summaries.hand_over(job)
