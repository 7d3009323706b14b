"""What `gateway memory` needs of a store to move conversations: scan its keys, export one whole, restore one whole."""

from __future__ import annotations

from collections.abc import AsyncIterator
from enum import StrEnum
from typing import Protocol

from gateway.memory.store import Key
from gateway.memory.transfer_record import Record


class Restored(StrEnum):
    """What a restore did with a conversation."""

    WRITTEN = "written"  # none was there
    REPLACED = "replaced"  # one was there, and --replace overwrote it
    SKIPPED = "skipped"  # one was there, and was kept


class TransferStore(Protocol):
    """A store's conversations, moved whole (SQLiteTransfer, RedisTransfer).

    `ordered`: its scan goes in key order, so a pass can start after a key.
    """

    ordered: bool

    def scan(self, after: Key | None, page: int) -> AsyncIterator[list[Key]]:
        """Every conversation's key, `page` at a time: in key order after `after` where the store has an order."""
        ...

    async def export(self, key: Key) -> Record | None:
        """The conversation whole (messages, times, ids, metadata, summary), or None when it is gone."""
        ...

    async def restore(self, record: Record, *, replace: bool) -> tuple[Restored, int]:
        """Write the conversation whole, at once; one already under its key is kept unless `replace`.

        With what it did, how many messages the conversation holds after it (0 when skipped).
        """
        ...

    async def close(self) -> None: ...
