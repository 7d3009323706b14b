"""Each process's snapshot of the stored keys, kept within a second of the store: KeyRefresher.

The refresher reads the store's generation every 0.5 s and, when it is not the one the snapshot
was read at, reads every key and replaces the snapshot's maps whole (readers on the loop see the
old maps or the new ones, never a mix). A key revoked anywhere so stops working in every process
within a second. A store that fails is logged once, when it starts failing, and once when it
answers again; meanwhile the snapshot stays as it was and the refresher goes on asking. A record
that cannot be read is skipped (no key of that name works here), logged once each time it is read.
Until the first read ends, the snapshot says it awaits the store (StoredKeys.awaiting_store): a key
it lacks may be valid.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Final

from gateway.governance.key_store import KeyStore
from gateway.governance.stored_keys import KeyStoreUnavailable, StoredKeys, snapshot_of

log = logging.getLogger("gateway.governance")

REFRESH_SECONDS: Final = 0.5
# How long start-up waits for the first read: a store that hangs (an unroutable Redis) must not
# hold up the gateway's start, whose configured keys work without it.
FIRST_READ_SECONDS: Final = 3.0


class KeyRefresher:
    """Keeps `known` (the process's snapshot) as `store` has the keys, from `start` to `close`.

    From now until its first read, `known` awaits the store.
    """

    def __init__(self, store: KeyStore, known: StoredKeys, *, every: float = REFRESH_SECONDS) -> None:
        self._store = store
        self._known = known
        self.every = every  # seconds between two reads of the store's generation
        self._task: asyncio.Task[None] | None = None
        self._failing = False
        known.awaiting_store = True

    async def start(self, *, wait: float = FIRST_READ_SECONDS) -> None:
        """Read the keys once (a failing store is logged, not raised), then go on refreshing in the background.

        Returns once the first read ended, or after `wait` seconds, the read going on meanwhile.
        """
        first = asyncio.ensure_future(self.refresh())
        self._task = asyncio.create_task(self._run(first), name="gateway-key-refresh")
        await asyncio.wait({first}, timeout=wait)
        if not first.done():
            log.warning("stored gateway keys: the store has not answered within %gs; they work once it does", wait)

    async def close(self) -> None:
        """Stop refreshing (the store is its owner's to close)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def refresh(self) -> bool:
        """Bring the snapshot up to the store's generation; False when the store failed (logged once per outage)."""
        try:
            known = self._known
            generation = await self._store.generation()
            if generation != known.generation or known.awaiting_store:
                # Read after the generation: a change made meanwhile moves it again, read at the next turn.
                listing = await self._store.list()
                for name, why in listing.unreadable.items():
                    log.warning("stored gateway keys: the record of %r cannot be read (%s): skipped, it works nowhere", name, why)
                fresh = snapshot_of(listing.keys, generation)
                known.by_digest, known.by_name, known.generation = fresh.by_digest, fresh.by_name, generation
                known.awaiting_store = False
        except Exception as exc:  # the store failed (KeyStoreUnavailable), or a bug: the refresh goes on either way
            if not self._failing:
                log.warning(
                    "stored gateway keys: %s; keeping the keys known, asking again every %gs", exc, self.every,
                    exc_info=not isinstance(exc, KeyStoreUnavailable),
                )  # fmt: skip
            self._failing = True
            return False
        if self._failing:
            log.warning("stored gateway keys: the store answers again")
            self._failing = False
        return True

    async def _run(self, first: asyncio.Future[bool]) -> None:
        await first
        while True:
            await asyncio.sleep(self.every)
            await self.refresh()
