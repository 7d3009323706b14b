"""The SQLite store's file: its tables, the upgrade of files older gateways made, and transactions.

A message row carries its token count (`encoding`, `tokens`) beside its JSON, so a read can size
a token window from the counts as it goes. A conversation row carries the range of its message
numbers (`first_seq`..`last_seq`, contiguous), so a turn's messages are numbered by the one
statement that moves the range on (the store's upsert, or its guarded update), and a read knows
how many older messages it left unread. Message rows
below `first_seq` are never read (a store deletes them in bunches).

Files made before these columns are upgraded when opened: the columns are added (no rewrite of
the rows), the ranges are filled in from the messages, and message rows of the older shape
(`encoding` NULL, the body `{"m": message, "t": counts}`) are read as they are.
"""

from __future__ import annotations

import sqlite3
from typing import Any, Final

import orjson

from gateway.memory.policies import Entry
from gateway.memory.store import load_entry

SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS conversations (
    tenant TEXT NOT NULL,
    memory_id TEXT NOT NULL,
    system TEXT NOT NULL,
    updated_at REAL NOT NULL,
    first_seq INTEGER NOT NULL DEFAULT 1,
    last_seq INTEGER NOT NULL DEFAULT 0,
    touched_day INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, memory_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS locks (
    tenant TEXT NOT NULL,
    memory_id TEXT NOT NULL,
    owner TEXT NOT NULL,
    expires_at REAL NOT NULL,
    pid INTEGER,
    boot TEXT,
    PRIMARY KEY (tenant, memory_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS "values" (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    written_at REAL NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS messages (
    tenant TEXT NOT NULL,
    memory_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    role TEXT NOT NULL,
    body BLOB NOT NULL,
    encoding TEXT,
    tokens INTEGER,
    PRIMARY KEY (tenant, memory_id, seq)
) WITHOUT ROWID;
"""

# Columns added after a table's first release: files made before then gain them when opened.
ADDED_COLUMNS: Final = {
    "locks": {"pid": "INTEGER", "boot": "TEXT"},
    "messages": {"encoding": "TEXT", "tokens": "INTEGER"},
    "conversations": {
        "first_seq": "INTEGER NOT NULL DEFAULT 1",
        "last_seq": "INTEGER NOT NULL DEFAULT 0",
        "touched_day": "INTEGER NOT NULL DEFAULT 0",
    },
}
# The purge finds expired conversations by `touched_day` (at most the day of `updated_at`), which a
# write changes once a day, not by `updated_at`, which every write would move in an index. Files
# made before then lose that index.
_INDEXES: Final = (
    "CREATE INDEX IF NOT EXISTS conversations_touched ON conversations (touched_day)",
    "DROP INDEX IF EXISTS conversations_updated",
)
DAY: Final = 86_400.0  # seconds in the unit of `touched_day`
_FILL_RANGES: Final = """
UPDATE conversations SET
    first_seq = COALESCE((SELECT MIN(seq) FROM messages m
                          WHERE m.tenant = conversations.tenant AND m.memory_id = conversations.memory_id), 1),
    last_seq = COALESCE((SELECT MAX(seq) FROM messages m
                         WHERE m.tenant = conversations.tenant AND m.memory_id = conversations.memory_id), 0)
"""


def open_file(path: str, *, busy_timeout_ms: int) -> sqlite3.Connection:
    """Open (or create) the store's file in WAL mode, upgraded to this version's tables."""
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute(f"PRAGMA busy_timeout={busy_timeout_ms}")
    db.executescript(SCHEMA)
    upgrade(db)
    return db


def upgrade(db: sqlite3.Connection) -> None:
    """Give tables an older gateway made the columns and indexes this one uses; fill in the message ranges."""
    with transaction(db):  # serializes processes opening one old file together: one of them alters it
        for table, columns in ADDED_COLUMNS.items():
            present = {row[1] for row in db.execute(f'PRAGMA table_info("{table}")')}
            missing = {name: kind for name, kind in columns.items() if name not in present}
            for name, kind in missing.items():
                db.execute(f'ALTER TABLE "{table}" ADD COLUMN {name} {kind}')
            if table == "conversations" and missing.keys() & {"first_seq", "last_seq"}:
                db.execute(_FILL_RANGES)
        for statement in _INDEXES:
            db.execute(statement)


def message_row(entry: Entry) -> tuple[str, str, str, int | None]:
    """(role, body, encoding, tokens) of a message row; a message stored uncounted has encoding ''.

    The body is JSON text: the sqlite3 module binds a str directly, bytes only after an adapter lookup.
    """
    message = entry.message
    for encoding, tokens in entry.tokens.items():  # one count is kept: the one its turn was counted in
        return message.get("role") or "", orjson.dumps(message).decode(), encoding, tokens
    return message.get("role") or "", orjson.dumps(message).decode(), "", None


def read_entry(body: bytes | str, encoding: str | None, tokens: int | None) -> Entry:
    """The Entry of a message row, of this version's shape or the older one."""
    if encoding is None:  # written before the token columns
        return load_entry(body)
    message: Any = orjson.loads(body)
    return Entry(message, {encoding: tokens} if encoding and tokens is not None else {})


class transaction:
    """BEGIN IMMEDIATE ... COMMIT (ROLLBACK on error) on an autocommit connection; re-entrant.

    `cursor`: one of `db`'s to run them with (saves making one per statement).
    """

    __slots__ = ("_db", "_outer", "_run")

    def __init__(self, db: sqlite3.Connection, cursor: sqlite3.Cursor | None = None) -> None:
        self._db = db
        self._run = (cursor or db).execute
        self._outer = False

    def __enter__(self) -> None:
        if not self._db.in_transaction:
            self._run("BEGIN IMMEDIATE")
            self._outer = True

    def __exit__(self, kind: object, value: object, traceback: object) -> None:
        if self._outer:
            self._run("COMMIT" if kind is None else "ROLLBACK")
