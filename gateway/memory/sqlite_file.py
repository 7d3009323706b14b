"""The SQLite store's file: its tables, the upgrade of files older gateways made, and transactions.

A conversation's messages are numbered `first_seq`..`last_seq` (contiguous), so a read knows how
many older messages it left unread. Messages below `first_seq` are never read (a store deletes
their rows in bunches).

A message row holds a turn's messages (its shapes: sqlite_rows). Its `seq` is its first message's
number, so a row may hold messages below `first_seq` beside those above it.

Most turns write their message row alone (one statement, no transaction), leaving the
conversation row as it was: the conversation's state is its row brought up to date by its newest
message row (`live_state`). That row's `written_at` is the conversation's last write, its end
(seq and size) the conversation's `last_seq`, and `first_seq` follows from that and the cap the
row was written under (`cap`): the newest `cap` messages. The row itself is written when that
cannot say it: a conversation's first write, a new day (`touched_day`), a new system prompt, an
undo, a restart after expiry; and by the writes the store sends through a transaction anyway (a
turn of a row a message, any turn in shared mode, a conversation its thread does not remember).
A conversation row's `redo` holds the turns undone (see sqlite_conversations); a message row's
`written_at` is when its messages were stored (their `createdAt`).

Files made before these shapes are upgraded when opened: the columns are added (no rewrite of
the rows), the ranges are filled in from the messages, and message rows of the older shapes
(`encoding` NULL, the body `{"m": message, "t": counts}`; `written_at` NULL, written with their
conversation row) are read as they are. A conversation row with `cap` NULL holds its range
exactly.

The store keeps a file's connection open, so it checks that the file is still the one at its path
(`Inode`, `OpenFile`): SQLite goes on writing into a file deleted or replaced under it, and a
new file at the path must not inherit the old one's WAL and shared memory (`leave_file`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import time
from typing import Any, Final, NamedTuple

log = logging.getLogger("gateway.memory")

# `locks` held the leases of the gateways before the lock file (see sqlite_lockfile): unused now,
# and left in the schema (older gateways would make it again).
SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS conversations (
    tenant TEXT NOT NULL,
    memory_id TEXT NOT NULL,
    system TEXT NOT NULL,
    updated_at REAL NOT NULL,
    first_seq INTEGER NOT NULL DEFAULT 1,
    last_seq INTEGER NOT NULL DEFAULT 0,
    touched_day INTEGER NOT NULL DEFAULT 0,
    cap INTEGER,
    redo TEXT,
    created_at REAL,
    metadata TEXT,
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
    written_at REAL,
    PRIMARY KEY (tenant, memory_id, seq)
) WITHOUT ROWID;
"""

# Columns added after a table's first release: files made before then gain them when opened.
ADDED_COLUMNS: Final = {
    "locks": {"pid": "INTEGER", "boot": "TEXT"},
    "messages": {"encoding": "TEXT", "tokens": "INTEGER", "written_at": "REAL"},
    "conversations": {
        "first_seq": "INTEGER NOT NULL DEFAULT 1",
        "last_seq": "INTEGER NOT NULL DEFAULT 0",
        "touched_day": "INTEGER NOT NULL DEFAULT 0",
        "cap": "INTEGER",
        "redo": "TEXT",
        "created_at": "REAL",
        "metadata": "TEXT",
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
    """Open (or create) the store's file in WAL mode, upgraded to this version's tables; closed again if that fails."""
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        db.execute(f"PRAGMA busy_timeout={busy_timeout_ms}")
        use_wal(db, wait=busy_timeout_ms / 1000)
        db.execute("PRAGMA synchronous=NORMAL")
        db.executescript(SCHEMA)
        upgrade(db)
    except BaseException:
        db.close()
        raise
    return db


Inode = tuple[int, int]  # a file as the system knows it, whatever its name: (device, inode number)


def inode(path: str) -> Inode | None:
    """The file at `path` now; None when there is none (or it is out of reach).

    Called after every batch of the store's jobs: a plain tuple, as a NamedTuple's constructor
    (Python code) would cost more than the stat.
    """
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino


class OpenFile(NamedTuple):
    """The files a connection opened: its database, and the WAL and shared memory beside it (None: none seen)."""

    main: Inode
    wal: Inode | None
    shm: Inode | None

    @classmethod
    def at(cls, path: str) -> OpenFile | None:
        """The files at `path` as a connection just opened them; None for a database with no file (":memory:")."""
        main = inode(path)
        return None if main is None else cls(main, inode(path + "-wal"), inode(path + "-shm"))


def leave_file(db: sqlite3.Connection, path: str, opened: OpenFile, *, shown_path: str = "") -> None:
    """Close `db`, whose database is gone from `path`, and remove the WAL and shared memory it leaves there.

    SQLite keeps those when its database was unlinked or replaced (it checkpoints and removes them
    only for a file still at its path), and a new file at the path would take them for its own: the
    old transactions laid over it, or, while other processes still have the old file open, its
    pages read through their shared memory. They are removed only while they are still the ones
    `db` opened (its open handles keep their inode numbers from being reused), and under the old
    file's write lock, so processes leaving one file together never remove the files another one
    made for the new file meanwhile. Failing that, they are left as they are, which is logged.
    """
    try:
        if not db.in_transaction:
            db.execute("BEGIN IMMEDIATE")
        for name, was in ((path + "-wal", opened.wal), (path + "-shm", opened.shm)):
            if was is not None and inode(name) == was:
                os.remove(name)
    except (sqlite3.Error, OSError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else exc  # an OSError's text names the path
        log.warning(
            "sqlite memory store: the old file's WAL and shared memory beside %s were left there (%s)", shown_path or path, reason
        )
    finally:
        with contextlib.suppress(sqlite3.Error):  # on the store's thread, which must go on serving
            db.close()


def use_wal(db: sqlite3.Connection, *, wait: float) -> None:
    """Put the file in WAL mode, retrying for up to `wait` seconds while another connection has it locked.

    The busy timeout does not cover this: when connections open a new file at once (the workers of
    `serve --workers N` on their first memory request), SQLite answers some of them SQLITE_BUSY at
    once rather than wait into a deadlock. A file system without WAL (some network ones) keeps the
    file in its old mode, which is logged: writes then wait for readers, and a COMMIT may be refused.
    """
    deadline = time.monotonic() + wait
    pause = 0.001
    while True:
        try:
            (mode,) = db.execute("PRAGMA journal_mode=WAL").fetchone()
            if str(mode).lower() != "wal":
                log.warning("sqlite memory store: the file stays in journal mode %r, not WAL; writes wait for readers", mode)
            return
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode != sqlite3.SQLITE_BUSY or time.monotonic() >= deadline:
                raise
        time.sleep(pause)  # on the store's thread, never the event loop's
        pause = min(pause * 2, 0.05)


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


# A conversation row beside its newest message row (NULLs when it has none): what `live_state` reads.
STATE: Final = """
SELECT c.system, c.updated_at, c.first_seq, c.last_seq, c.cap, m.seq, m.encoding, m.tokens, m.written_at
FROM conversations AS c LEFT JOIN messages AS m
    ON m.tenant = ?1 AND m.memory_id = ?2 AND m.seq = (SELECT MAX(seq) FROM messages WHERE tenant = ?1 AND memory_id = ?2)
WHERE c.tenant = ?1 AND c.memory_id = ?2
"""
State = tuple[str, float, int, int]  # (system JSON, updated_at, first_seq, last_seq)


def live_state(row: tuple[Any, ...]) -> State:
    """A conversation's state from its STATE row: its conversation row brought up to date by its newest message row."""
    system, updated_at, first, last, cap, seq, encoding, tokens, written_at = row
    if seq is not None:
        end = seq + tokens - 1 if encoding == "" and tokens is not None else seq  # a turn's row, or a message's
        if end > last:  # written after the conversation row: the range moved on, under the row's cap
            last = end
            if cap is not None:
                first = max(first, last - cap + 1)
        if written_at is not None and written_at > updated_at:
            updated_at = written_at
    return system, updated_at, first, last


def settle(db: sqlite3.Connection) -> int:
    """Write every conversation row as its state says; how many rows changed.

    What a gateway older than `written_at` needs before it opens a file this one wrote: it takes a
    conversation's range and last write from its row alone, so a stale row would read as expired
    and its next turn's messages would be numbered over existing ones.
    """
    changed = 0
    with transaction(db):
        for key in db.execute("SELECT tenant, memory_id FROM conversations").fetchall():
            _, updated_at, first, last = live_state(db.execute(STATE, key).fetchone())
            changed += db.execute(
                "UPDATE conversations SET updated_at = ?, first_seq = ?, last_seq = ?"
                " WHERE tenant = ? AND memory_id = ? AND (updated_at, first_seq, last_seq) IS NOT (?, ?, ?)",
                (updated_at, first, last, *key, updated_at, first, last),
            ).rowcount
    return changed


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
        if not self._outer:
            return
        try:
            if kind is None:
                self._run("COMMIT")
        finally:
            # SQLITE_FULL, IOERR and NOMEM may have rolled it back (the error to report is theirs); a COMMIT
            # refused (SQLITE_BUSY, readers of a file not in WAL mode) leaves it open, for later writes to join.
            if self._db.in_transaction:
                self._run("ROLLBACK")
