"""Summaries made off the turn's path: after a summary window's turn is stored, in the background.

A turn that evicted messages hands a `Job` over once its turn is stored, and goes on. The job
reads the whole conversation, finds the messages evicted since the stored summary, asks the
summary route (through `Job.summarize`, which the server gives) to fold them into it, and
stores the new summary beside the conversation (`put_value`, the store's TTL) unless one that
covers as many messages was stored meanwhile (a slower job of an older turn never overwrites a
newer summary). Nothing is written until a summary is whole: a process that ends mid-summary
loses that summary alone.

One job per conversation runs at a time in a process; of those handed over meanwhile only the
newest waits (it folds in everything the others would have). A job that fails is logged and
counted, never raised: the next turn that evicts tries again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from gateway.core.memory.entries import Message
from gateway.core.memory.summary import (
    Outcome,
    Summary,
    boundary,
    dump_summary,
    load_summary,
    mark,
    newly_evicted,
    summary_key,
    summary_prompt,
)
from gateway.memory.store import Key, MemoryStore, StoreUnavailable
from gateway.tokens import Encoding, count_text

log = logging.getLogger("gateway.memory")

Summarize = Callable[[list[Message]], Awaitable[str]]
# A job (its reads, the summary route's answer, its write) given up after this long: the next one then runs
JOB_SECONDS = 120.0


def _not_counted(outcome: Outcome) -> None:
    """The count of a gateway without metrics."""


@dataclass(slots=True)
class Job:
    """A summary to bring up to date after a turn: the turn's kept window began `after` messages from the end, at `first`."""

    key: Key
    after: int
    first: Message
    summarize: Summarize  # the call to the summary route: its prompt in, the summary out
    counted: Callable[[Outcome], None] = field(default=_not_counted)


async def read_summary(store: MemoryStore, key: Key) -> Summary | None:
    """The conversation's stored summary; None when there is none, or the store cannot say now (logged)."""
    try:
        return load_summary(await store.get_value(summary_key(*key)))
    except StoreUnavailable as exc:
        log.warning("memory: the summary of a conversation could not be read; the turn goes on without it (%s)", exc)
        return None


def cut_to_tokens(text: str, max_tokens: int, encoding: Encoding) -> str:
    """`text`, or its longest prefix (by characters) of at most `max_tokens` tokens when it has more.

    The summary route is asked for `max_tokens` at most, but need not keep to it: what it gives
    is cut here so that the forwarded note never grows past it. The prefixes tried grow from
    `max_tokens` characters by doubling, then are halved down: a text far longer than the cut
    costs no more than the cut does.
    """
    if count_text(encoding, text, max_tokens) <= max_tokens:  # the cap stops a long text's count early
        return text

    def fits(size: int) -> bool:
        return len(encoding.encode(text[:size], disallowed_special=())) <= max_tokens

    good, bad, size = 0, len(text), max_tokens  # text[:good] fits, text[:bad] does not
    while size < bad and fits(size):
        good, size = size, size * 2
    bad = min(bad, size)
    while bad - good > 1:
        middle = (good + bad) // 2
        if fits(middle):
            good = middle
        else:
            bad = middle
    return text[:good]


class Summaries:
    """The background summary jobs of one store: at most one running per conversation, and the newest waiting."""

    def __init__(self, store: MemoryStore, *, timeout: float = JOB_SECONDS) -> None:
        self._store = store
        self._timeout = timeout
        self._running: dict[Key, asyncio.Task[None]] = {}
        self._waiting: dict[Key, Job] = {}
        self._closed = False

    def hand_over(self, job: Job) -> None:
        """Run `job` now, or after the job of its conversation that runs (replacing any waiting one). Never waits."""
        if self._closed:
            return
        if job.key in self._running:
            self._waiting[job.key] = job
            return
        self._start(job)

    def _start(self, job: Job) -> None:
        task = asyncio.get_running_loop().create_task(self._run(job), name="gateway-memory-summary")
        self._running[job.key] = task
        task.add_done_callback(lambda _: self._next(job.key))

    def _next(self, key: Key) -> None:
        del self._running[key]
        waiting = self._waiting.pop(key, None)
        if waiting is not None and not self._closed:
            self._start(waiting)

    async def idle(self) -> None:
        """Return once no job runs or waits (for tests and a graceful stop)."""
        while self._running:
            await asyncio.gather(*self._running.values(), return_exceptions=True)

    async def forget(self, key: Key) -> None:
        """Cancel the conversation's jobs (it is being deleted): none may store a summary after it is gone."""
        self._waiting.pop(key, None)
        task = self._running.get(key)
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def close(self) -> None:
        """Cancel every job: a summary not stored by now is made again by a later turn."""
        self._closed = True
        self._waiting.clear()
        tasks = list(self._running.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _run(self, job: Job) -> None:
        try:
            async with asyncio.timeout(self._timeout):
                await self._update(job)
        except TimeoutError:
            log.warning("memory: a summary took over %gs and was given up; a later turn tries again", self._timeout)
            job.counted(Outcome.FAILED)
        except StoreUnavailable as exc:
            log.warning("memory: a summary could not be made (the store failed: %s); a later turn tries again", exc)
            job.counted(Outcome.FAILED)
        except Exception as exc:  # the summary route's failure (an UpstreamError, a malformed answer, ...)
            log.warning("memory: a summary could not be made (%s); a later turn tries again", exc)
            job.counted(Outcome.FAILED)

    async def _update(self, job: Job) -> None:
        store, key = self._store, job.key
        conversation = await store.load(key)
        if conversation is None:
            return
        entries = conversation.entries
        end = boundary(entries, after=job.after, first=job.first)
        if end is None:  # a later turn changed the window: its own job follows
            return
        previous = load_summary(await store.get_value(summary_key(*key)))
        new = newly_evicted(entries[:end], previous)
        if not new:
            return
        text = await job.summarize(summary_prompt(previous, [entry.message for entry in new]))
        made = Summary((previous.covers if previous is not None else 0) + len(new), text, through=mark(new[-1]))
        # A summary stored meanwhile (another replica's job) that covers as much is newer: keep it
        current = load_summary(await store.get_value(summary_key(*key)))
        if current is not None and current.covers >= made.covers:
            job.counted(Outcome.STALE)
            return
        await store.put_value(summary_key(*key), dump_summary(made))
        job.counted(Outcome.OK)
