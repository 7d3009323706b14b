"""Helpers of the `gateway memory` tests: stores filled through their own API, read back whole, and the CLI run as users run it."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gateway.core.memory.entries import Entry
from gateway.core.memory.summary import summary_key
from gateway.memory.redis import RedisStore
from gateway.memory.sqlite import SQLiteStore

ROOT = Path(__file__).resolve().parent.parent.parent
SUMMARY = '{"covers":2,"text":"they said hello","through":["f00",1.5]}'
Store = SQLiteStore | RedisStore


def sqlite_store(path: Path) -> SQLiteStore:
    return SQLiteStore(str(path), ttl_seconds=3600, max_messages=1000, lock_timeout=5)


def redis_store(url: str) -> RedisStore:
    return RedisStore(url, ttl_seconds=3600, max_messages=1000, lock_timeout=5)


async def fill(store: Store, *, tenant: str, conversations: int) -> None:
    """`conversations` conversations `c-0`.. of `tenant`, of two turns each (the second written later), a
    system prompt, one summary; and one conversation `meta` started empty with metadata."""
    for index in range(conversations):
        key = (tenant, f"c-{index}")
        first = [Entry({"role": "user", "content": f"hello {index}"}, {"o200k_base": 4}), Entry({"role": "assistant", "content": "hi"}, {"o200k_base": 2})]
        await store.append(key, first, system=[{"role": "system", "content": f"be brief {index}"}])
        second = [Entry({"role": "user", "content": "and again?"}, {}), Entry({"role": "assistant", "content": "yes", "extra": [1, 2]}, {})]
        await store.append(key, second, system=None)
    await store.put_value(summary_key(tenant, "c-0"), SUMMARY)
    await store.start((tenant, "meta"), {"topic": "moving", "owner": "ops"})  # type: ignore[union-attr]


@dataclass(frozen=True)
class Held:
    """A conversation as a store gives it back, everything a move must keep."""

    system: list[Any]
    messages: list[tuple[Any, Any, float | None, str | None]]  # (message, counts, createdAt, item id)
    updated_at: float
    created_at: float
    metadata: dict[str, str]
    summary: str | None


async def held(store: Store, key: tuple[str, str]) -> Held | None:
    """What `store` holds of the conversation, read through the store's own API."""
    conversation = await store.load(key)
    about = await store.about(key)
    if conversation is None or about is None:
        return None
    messages = [(e.message, dict(e.tokens), e.created_at, e.item_id) for e in conversation.entries]
    summary = await store.get_value(summary_key(*key))
    return Held(conversation.system, messages, conversation.updated_at, about.created_at, dict(about.metadata), summary)


def run_memory(*args: str, stdin: bytes | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    """`python -m gateway memory ARGS`, as a user runs it; its output kept."""
    return subprocess.run(
        [sys.executable, "-m", "gateway", "memory", *args],
        input=stdin, capture_output=True, cwd=ROOT, timeout=600, env={**os.environ, **(env or {})},
    )  # fmt: skip


def max_rss_kib(*args: str) -> tuple[int, int]:
    """`python -m gateway memory ARGS`'s exit status and the most memory it held (KiB), from the kernel's own account."""
    process = subprocess.Popen(
        [sys.executable, "-m", "gateway", "memory", *args], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait for it again
    return process.returncode, usage.ru_maxrss
