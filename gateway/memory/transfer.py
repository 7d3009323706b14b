"""Moving conversations: export a store's as JSON lines, import lines into a store, or both at once (migrate).

Everything streams: a page of keys and one conversation at a time, whatever the store's size.
Each pass counts what it read and what it wrote (`Counts`), which must agree at the end. A pass
may stop after `limit` conversations, and a new one start after the last key it passed
(`Progress`): an import keeps a conversation already under its key (unless told to replace it),
so a pass run again over conversations it wrote writes none of them twice.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from typing import Final

from gateway.memory.store import Key
from gateway.memory.transfer_record import Record, dump_line, load_line
from gateway.memory.transfer_store import Restored, TransferStore

PAGE: Final = 500  # keys a scan holds at a time


@dataclass(slots=True)
class Counts:
    """Conversations and messages read, and what became of them."""

    read: int = 0
    messages_read: int = 0
    written: int = 0
    replaced: int = 0
    skipped: int = 0
    messages_written: int = 0
    messages_skipped: int = 0

    def add(self, record: Record, restored: Restored, messages: int) -> None:
        """`record` restored, holding `messages` messages after it (what the target says, not what was sent)."""
        if restored is Restored.SKIPPED:
            self.skipped += 1
            self.messages_skipped += len(record.entries)
            return
        self.messages_written += messages
        if restored is Restored.WRITTEN:
            self.written += 1
        else:
            self.replaced += 1

    def took(self, record: Record) -> None:
        self.read += 1
        self.messages_read += len(record.entries)

    @property
    def verified(self) -> bool:
        """Every conversation and message read was written or (already there) skipped."""
        return (self.read, self.messages_read) == (
            self.written + self.replaced + self.skipped,
            self.messages_written + self.messages_skipped,
        )

    def summary(self) -> str:
        return (
            f"read {self.read} conversations ({self.messages_read} messages); written {self.written}, "
            f"replaced {self.replaced}, skipped {self.skipped} already there ({self.messages_written} messages written, "
            f"{self.messages_skipped} skipped)"
        )


class Progress:
    """Where a pass got to: the last key it passed, kept in a file (when given) so a pass run again starts after it."""

    def __init__(self, path: str | None, after: Key | None) -> None:
        self._path = path
        self.after = after
        if path is not None and after is None and os.path.exists(path):
            with open(path, encoding="utf-8") as kept:
                self.after = parse_key(kept.read().strip())

    def passed(self, key: Key) -> None:
        self.after = key
        if self._path is not None:
            partial = f"{self._path}.partial"
            with open(partial, "w", encoding="utf-8") as kept:
                kept.write(f"{key[0]}:{key[1]}\n")
            os.replace(partial, self._path)  # whole or not at all, if the pass is killed while it writes


def parse_key(text: str) -> Key | None:
    """`tenant:memoryId` as a key (a tenant has no ':'); None for ''."""
    if not text:
        return None
    tenant, colon, memory_id = text.partition(":")
    if not colon or not tenant or not memory_id:
        raise ValueError(f"{text!r} is not tenant:memoryId")
    return tenant, memory_id


async def records(source: TransferStore, *, progress: Progress, limit: int | None) -> AsyncIterator[Record]:
    """Each conversation of `source` after the progress's key, up to `limit`, one at a time."""
    taken = 0
    async for keys in source.scan(progress.after, PAGE):
        for key in keys:
            if limit is not None and taken >= limit:
                return
            record = await source.export(key)
            if record is not None:  # gone since the scan
                taken += 1
                yield record


async def export_lines(
    source: TransferStore, write: Callable[[bytes], object], *, progress: Progress, limit: int | None, say: Callable[[str], None]
) -> Counts:
    """Write each conversation of `source` as a line; the counts say every one read was written."""
    counts = Counts()
    async for record in records(source, progress=progress, limit=limit):
        counts.took(record)
        write(dump_line(record))
        counts.add(record, Restored.WRITTEN, len(record.entries))
        progress.passed(record.key)
        if counts.read % PAGE == 0:
            say(f"exported {counts.read} conversations")
    return counts


async def import_lines(
    lines: Iterable[bytes], target: TransferStore, *, replace: bool, say: Callable[[str], None]
) -> Counts:
    """Restore each line's conversation into `target`; BadLine (nothing written for it) at the first line that is not one."""
    counts = Counts()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        record = load_line(line, number)
        counts.took(record)
        counts.add(record, *await target.restore(record, replace=replace))
        if counts.read % PAGE == 0:
            say(f"imported {counts.read} conversations")
    return counts


async def migrate(
    source: TransferStore, target: TransferStore, *, progress: Progress, limit: int | None, replace: bool, say: Callable[[str], None]
) -> Counts:
    """Export from `source` straight into `target`, no file between."""
    counts = Counts()
    async for record in records(source, progress=progress, limit=limit):
        counts.took(record)
        counts.add(record, *await target.restore(record, replace=replace))
        progress.passed(record.key)
        if counts.read % PAGE == 0:
            say(f"migrated {counts.read} conversations")
    return counts
