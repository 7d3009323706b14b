"""Fill a SQLite memory file with stored conversations, for the memory-scale benchmark.

    python bench/fill_memory.py PATH --conversations N --messages M [--tenant bench]

Writes the current schema (`gateway.memory.sqlite_file`) directly, in one transaction: N
conversations `bench-0` .. `bench-{N-1}` of the tenant (bench/send.py's conversations are
`bench-0` .. `bench-{C-1}`), each of M messages alternating user and assistant, with token
counts in o200k_base and written now, so none expires (each conversation row holds its whole
range: `cap` NULL). Rows are written as the gateway writes a turn: a question and its answer in
one row (`sqlite_rows.message_rows`). 100,000 conversations of 10 take ~5 s.
"""

from __future__ import annotations

import argparse
import itertools
import time
from collections.abc import Iterator

from gateway.core.memory.entries import Entry
from gateway.memory import sqlite_file, sqlite_rows
from gateway.memory.sqlite_file import open_file
from gateway.tokens import count_message, get_encoding

MESSAGES = [
    {"role": "user", "content": "Say hello in one short sentence."},
    {"role": "assistant", "content": "Hello! How can I help you today?"},
    {"role": "user", "content": "What is the capital of France, and why is it known for its food?"},
    {"role": "assistant", "content": "Paris. Its bistros, bakeries and markets have set standards cooks follow worldwide."},
]


def message_rows(tenant: str, conversations: int, messages: int) -> Iterator[tuple[object, ...]]:
    """(tenant, memory_id, seq, role, body, encoding, tokens) of every row, seq from 1: a row a turn of two."""
    codec = get_encoding("o200k_base")
    entries = [Entry(m, {"o200k_base": count_message(m, codec)}) for m in MESSAGES]
    turns = itertools.cycle([entries[0:2], entries[2:4]])
    rows = []  # (seq, role, body, encoding, tokens) of one conversation: the same for each
    for seq in range(1, messages + 1, 2):
        turn = next(turns)[: messages - seq + 1]  # an odd count ends with a row of one message
        _, params = sqlite_rows.message_rows(turn)
        rows += [(seq + i, *params[4 * i : 4 * i + 4]) for i in range(len(params) // 4)]
    for index in range(conversations):
        memory_id = f"bench-{index}"
        for row in rows:
            yield (tenant, memory_id, *row)


def fill(path: str, *, conversations: int, messages: int, tenant: str) -> None:
    db = open_file(path, busy_timeout_ms=10_000)
    now = time.time()
    db.execute("BEGIN IMMEDIATE")
    db.execute("DELETE FROM messages WHERE tenant = ?", (tenant,))
    db.execute("DELETE FROM conversations WHERE tenant = ?", (tenant,))
    db.executemany(
        "INSERT INTO conversations (tenant, memory_id, system, updated_at, first_seq, last_seq, touched_day)"
        " VALUES (?, ?, '[]', ?, 1, ?, ?)",
        ((tenant, f"bench-{index}", now, messages, int(now // sqlite_file.DAY)) for index in range(conversations)),
    )
    db.executemany(
        "INSERT INTO messages (tenant, memory_id, seq, role, body, encoding, tokens, written_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        ((*row, now) for row in message_rows(tenant, conversations, messages)),
    )
    db.execute("COMMIT")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the server starts on a file, not a large WAL
    db.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path")
    parser.add_argument("--conversations", type=int, required=True)
    parser.add_argument("--messages", type=int, required=True)
    parser.add_argument("--tenant", default="bench")
    options = parser.parse_args()
    started = time.monotonic()
    fill(options.path, conversations=options.conversations, messages=options.messages, tenant=options.tenant)
    total = options.conversations * options.messages
    print(f"filled {options.path}: {options.conversations:,} conversations, {total:,} messages, {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    main()
