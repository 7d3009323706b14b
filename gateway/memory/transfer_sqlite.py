"""A SQLite memory file as `gateway memory` moves conversations out of and into it: scan, export, restore.

It opens the file itself (the store's tables, upgraded as a store opens them) and reads and
writes on one connection, with no store in between: no cache grows with the conversations
passed, and nothing expires as it is read (an export carries each conversation's last write, and
the target store expires it as it would have). Keys are scanned in (tenant, memoryId) order, a
page at a time from the last key seen, so a scan can resume after any key.

A restore writes the conversation whole in one transaction: its row (its range held exactly:
`cap` NULL) and its messages, grouped in rows by when they were stored, with their item ids.
Its redo stack is written undone at the conversation's last write, so that it holds until a
message is written after it (see sqlite_conversations). Gateways may be running on the file: a
restore holds the conversation as their turns do, and marks it changed (see transfer_sqlite_locks).
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from typing import Any, Final

import orjson

from gateway.core.memory.entries import Entry
from gateway.core.memory.summary import summary_key
from gateway.memory.sqlite_conversations import Conversations
from gateway.memory.sqlite_file import DAY, open_file, transaction
from gateway.memory.sqlite_rows import message_rows
from gateway.memory.sqlite_writes import TurnWriter, insert_rows
from gateway.memory.store import Key, new_item_id
from gateway.memory.transfer_record import Record
from gateway.memory.transfer_sqlite_locks import LOCK_WAIT, ImportLocks
from gateway.memory.transfer_store import Restored

_PAGE: Final = "SELECT tenant, memory_id FROM conversations WHERE (tenant, memory_id) > (?, ?) ORDER BY tenant, memory_id LIMIT ?"
_EXISTS: Final = "SELECT 1 FROM conversations WHERE tenant = ? AND memory_id = ?"
_INSERT: Final = """
INSERT INTO conversations (tenant, memory_id, system, updated_at, first_seq, last_seq, touched_day, created_at, metadata, redo)
VALUES (?, ?, ?, ?, 1, ?, ?, ?, ?, ?)
"""
# The redo stack and the newest message row's write (turns undone before it are cleared), as a redo reads them.
_REDO: Final = """
SELECT c.redo, (SELECT written_at FROM messages m WHERE m.tenant = ?1 AND m.memory_id = ?2 ORDER BY seq DESC LIMIT 1)
FROM conversations c WHERE c.tenant = ?1 AND c.memory_id = ?2
"""
_VALUE: Final = 'SELECT value FROM "values" WHERE key = ?'
_PUT_VALUE: Final = 'INSERT OR REPLACE INTO "values" (key, value, written_at) VALUES (?, ?, ?)'
_NEVER: Final = float("inf")  # the TTL reads here go by: an export reads what is stored, expired or not


class SQLiteTransfer:
    """The conversations of the SQLite file at `path` (made when there is none: an import's target).

    `lock_wait`: how long a restore waits for a conversation a running gateway holds.
    """

    ordered = True

    def __init__(self, path: str, *, lock_wait: float = LOCK_WAIT) -> None:
        self._db = open_file(path, busy_timeout_ms=10_000)
        self._locks = ImportLocks(path, wait=lock_wait)
        self._conversations = Conversations(TurnWriter(cap=2**62), ttl=_NEVER, cap=2**62, plain=False)

    async def scan(self, after: Key | None, page: int) -> AsyncIterator[list[Key]]:
        """The file's conversation keys after `after`, in order, `page` at a time."""
        last = after or ("", "")
        while True:
            keys = [(tenant, memory_id) for tenant, memory_id in self._db.execute(_PAGE, (*last, page))]
            if not keys:
                return
            yield keys
            last = keys[-1]

    async def export(self, key: Key) -> Record | None:
        """The conversation whole, or None when it is gone."""
        with transaction(self._db):  # one snapshot of its row, messages and summary
            conversation = self._conversations.read(self._db, key=key, reach=None)
            about = self._conversations.about(self._db, key=key)
            summary = self._db.execute(_VALUE, (summary_key(*key),)).fetchone()
            redo = self._db.execute(_REDO, key).fetchone()
        if conversation is None or about is None:
            return None
        return Record.of(
            key, conversation, about=about, summary=None if summary is None else str(summary[0]), redo=_redo_turns(*redo)
        )

    async def restore(self, record: Record, *, replace: bool) -> tuple[Restored, int]:
        """Write the conversation whole in one transaction; one already there is kept unless `replace`."""
        key = record.key
        async with self._locks.hold(key):
            with transaction(self._db):
                there = self._db.execute(_EXISTS, key).fetchone() is not None
                if there and not replace:
                    return Restored.SKIPPED, 0
                self._locks.mark_changed(key)
                messages = self._write(record)
        return (Restored.REPLACED if there else Restored.WRITTEN), messages

    def _write(self, record: Record) -> int:
        """Write the conversation in place of any under its key (in the restore's transaction); how many messages it holds."""
        key = record.key
        self._db.execute("DELETE FROM messages WHERE tenant = ? AND memory_id = ?", key)
        self._db.execute("DELETE FROM conversations WHERE tenant = ? AND memory_id = ?", key)
        system = orjson.dumps(record.system).decode()
        metadata = orjson.dumps(record.about.metadata).decode()
        day = int(record.updated_at // DAY)
        count = len(record.entries)
        redo = _redo_column(record)
        self._db.execute(_INSERT, (*key, system, record.updated_at, count, day, record.about.created_at, metadata, redo))
        seq = 1
        for written_at, group in itertools.groupby(record.entries, key=lambda entry: entry.created_at):
            grouped = list(group)
            rows, params = message_rows(grouped)
            self._db.execute(insert_rows(rows), (*key, seq, written_at, *params))
            seq += len(grouped)
        if record.summary is not None:
            self._db.execute(_PUT_VALUE, (summary_key(*key), record.summary, record.updated_at))
        return seq - 1

    async def close(self) -> None:
        self._db.close()
        self._locks.close()


def _redo_turns(text: str | None, newest_write: float | None) -> list[list[Entry]]:
    """The redo stack a conversation row keeps, without the turns a later message cleared (as a redo reads it).

    Rows undone before item ids get new ones, as a redo would give them.
    """
    stack: list[dict[str, Any]] = orjson.loads(text) if text else []
    return [
        [Entry(row[0], row[1], row[2], item_id=row[3] if len(row) > 3 else new_item_id()) for row in turn["rows"]]
        for turn in stack
        if turn["at"] >= (newest_write or 0.0)
    ]


def _redo_column(record: Record) -> str | None:
    """The record's redo stack as a conversation row keeps it, undone at its last write: after its messages were."""
    if not record.redo:
        return None
    at = max([record.updated_at, *(entry.created_at or 0.0 for entry in record.entries)])
    stack = [{"at": at, "rows": [[e.message, e.tokens, e.created_at, e.item_id] for e in turn]} for turn in record.redo]
    return orjson.dumps(stack, default=dict).decode()
