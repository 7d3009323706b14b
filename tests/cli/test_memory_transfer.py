"""`gateway memory export / import / migrate` run as users run them, on a real SQLite file and a real redis-server."""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from gateway.core.memory.entries import Entry
from tests.support.memory_transfer import (
    ROOT,
    Held,
    Store,
    fill,
    held,
    max_rss_kib,
    redis_store,
    run_memory,
    sqlite_store,
)
from tests.support.redis_cluster import poll
from tests.support.servers import flush_redis, redis_server

KEYS = [("acme", "c-0"), ("acme", "c-1"), ("acme", "c-2"), ("acme", "meta")]


@pytest.fixture(scope="module")
def redis_base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with redis_server(tmp_path_factory.mktemp("redis-transfer")) as server:
        yield server.url


@pytest.fixture
def redis_url(redis_base: str) -> str:
    asyncio.run(flush_redis(redis_base))
    return redis_base


def filled_sqlite(path: Path, conversations: int = 3) -> Path:
    async def go() -> None:
        store = sqlite_store(path)
        await fill(store, tenant="acme", conversations=conversations)
        await store.close()

    asyncio.run(go())
    return path


def read_all(store: Store, keys: list[tuple[str, str]]) -> list[Held | None]:
    async def go() -> list[Held | None]:
        try:
            return [await held(store, key) for key in keys]
        finally:
            await store.close()

    return asyncio.run(go())


def test_export_then_import_into_redis_keeps_messages_times_ids_metadata_and_summaries(tmp_path: Path, redis_url: str) -> None:
    source = filled_sqlite(tmp_path / "a.db")
    lines = tmp_path / "export.jsonl"
    exported = run_memory("export", "--store", f"sqlite:{source}", "--output", str(lines))
    assert exported.returncode == 0, exported.stderr
    assert len(lines.read_bytes().splitlines()) == 4
    assert b"read 4 conversations (12 messages); written 4" in exported.stderr

    imported = run_memory("import", "--input", str(lines), "--to", redis_url)
    assert imported.returncode == 0, imported.stderr
    assert b"kept (skipped)" in imported.stderr and b"written 4" in imported.stderr

    before = read_all(sqlite_store(source), KEYS)
    after = read_all(redis_store(redis_url), KEYS)
    assert after == before
    assert all(conversation is not None for conversation in after)
    assert after[0] is not None and after[0].summary is not None and after[3] is not None and after[3].metadata["topic"] == "moving"
    assert all(created is not None for _, _, created, _ in after[0].messages)


def test_a_conversation_imported_into_redis_takes_turns_on_from_where_it_was(tmp_path: Path, redis_url: str) -> None:
    source = filled_sqlite(tmp_path / "a.db")
    assert run_memory("migrate", "--from", f"sqlite:{source}", "--to", redis_url).returncode == 0

    async def go() -> list[str | None]:
        store = redis_store(redis_url)
        async with store.lock(("acme", "c-1")):
            await store.append(("acme", "c-1"), [Entry({"role": "user", "content": "third"}, {})], system=None)
        conversation = await store.load(("acme", "c-1"))
        await store.close()
        assert conversation is not None
        return [entry.item_id for entry in conversation.entries]

    ids = asyncio.run(go())
    original = read_all(sqlite_store(source), [("acme", "c-1")])[0]
    assert original is not None
    assert ids[:4] == [item_id for *_, item_id in original.messages] and len(set(ids)) == 5


def test_migrate_sqlite_to_redis_and_back_gives_the_same_conversations(tmp_path: Path, redis_url: str) -> None:
    source = filled_sqlite(tmp_path / "a.db")
    there = run_memory("migrate", "--from", f"sqlite:{source}", "--to", redis_url)
    assert there.returncode == 0, there.stderr
    back = run_memory("migrate", "--from", redis_url, "--to", f"sqlite:{tmp_path / 'b.db'}")
    assert back.returncode == 0, back.stderr
    assert b"read 4 conversations (12 messages); written 4" in back.stderr
    assert read_all(sqlite_store(tmp_path / "b.db"), KEYS) == read_all(sqlite_store(source), KEYS)


def test_import_keeps_conversations_already_there_unless_told_to_replace_them(tmp_path: Path) -> None:
    source = filled_sqlite(tmp_path / "a.db")
    target = f"sqlite:{tmp_path / 'b.db'}"
    lines = run_memory("export", "--store", f"sqlite:{source}").stdout
    assert run_memory("import", "--to", target, stdin=lines).returncode == 0
    changed = lines.replace(b"hello 1", b"bonjour 1")

    again = run_memory("import", "--to", target, stdin=changed)
    assert again.returncode == 0 and b"written 0, replaced 0, skipped 4 already there" in again.stderr
    kept = read_all(sqlite_store(tmp_path / "b.db"), [("acme", "c-1")])[0]
    assert kept is not None and kept.messages[0][0]["content"] == "hello 1"

    replaced = run_memory("import", "--to", target, "--replace", stdin=changed)
    assert replaced.returncode == 0 and b"are replaced" in replaced.stderr and b"replaced 4, skipped 0" in replaced.stderr
    now = read_all(sqlite_store(tmp_path / "b.db"), [("acme", "c-1")])[0]
    assert now is not None and now.messages[0][0]["content"] == "bonjour 1" and len(now.messages) == 4


def test_an_interrupted_migrate_run_again_continues_without_duplicates(tmp_path: Path, redis_url: str) -> None:
    source = filled_sqlite(tmp_path / "a.db", conversations=30)
    progress = tmp_path / "progress"
    first = run_memory("migrate", "--from", f"sqlite:{source}", "--to", redis_url, "--progress", str(progress), "--limit", "10")
    assert first.returncode == 0 and b"read 10 conversations" in first.stderr
    assert progress.read_text() == "acme:c-17\n"  # in key order c-0, c-1, c-10 .. c-17: the 10th is c-17
    # Killed after its last writes but before it kept their progress: the pass starts 3 conversations early.
    progress.write_text("acme:c-14\n")
    second = run_memory("migrate", "--from", f"sqlite:{source}", "--to", redis_url, "--progress", str(progress))
    assert second.returncode == 0, second.stderr
    assert b"read 24 conversations (92 messages); written 21, replaced 0, skipped 3" in second.stderr

    keys = [("acme", f"c-{index}") for index in range(30)] + [("acme", "meta")]
    assert read_all(redis_store(redis_url), keys) == read_all(sqlite_store(source), keys)


def test_a_migrate_killed_midway_and_run_again_writes_each_conversation_once(tmp_path: Path, redis_url: str) -> None:
    subprocess.run(
        [sys.executable, str(ROOT / "bench" / "fill_memory.py"), str(tmp_path / "a.db"), "--conversations", "5000", "--messages", "6"],
        check=True, timeout=600,
    )  # fmt: skip
    progress = tmp_path / "progress"
    command = [sys.executable, "-m", "gateway", "memory", "migrate", "--from", f"sqlite:{tmp_path / 'a.db'}", "--to", redis_url]
    command += ["--progress", str(progress)]
    first = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        poll(lambda: progress.exists() or first.poll() is not None, what="the migrate's first progress")
    finally:
        first.kill()
    assert first.wait(timeout=60) == -signal.SIGKILL, "the migrate ended before it could be killed"
    passed = progress.read_text()

    second = subprocess.run(command, cwd=ROOT, capture_output=True, timeout=600)
    assert second.returncode == 0, second.stderr
    tally = re.search(rb"read (\d+) conversations .*; written (\d+), replaced 0, skipped (\d+)", second.stderr)
    assert tally is not None, second.stderr
    read, written, skipped = map(int, tally.groups())
    assert skipped <= 1 and read == written + skipped and read < 5000  # it went on after `passed`, not from the start
    assert progress.read_text() != passed

    exported = run_memory("export", "--store", redis_url)
    assert b"read 5000 conversations (30000 messages)" in exported.stderr
    assert len(set(exported.stdout.splitlines())) == 5000


def test_a_bad_line_is_named_and_stops_the_import_with_nothing_of_it_written(tmp_path: Path) -> None:
    source = filled_sqlite(tmp_path / "a.db")
    lines = run_memory("export", "--store", f"sqlite:{source}").stdout.splitlines(keepends=True)
    target = tmp_path / "b.db"
    broken = lines[0] + lines[1] + b'{"tenant": "acme", "memoryId": "c-9", "system": [\n' + lines[2]
    result = run_memory("import", "--to", f"sqlite:{target}", stdin=broken)
    assert result.returncode == 2
    assert b"line 3: not an exported conversation" in result.stderr
    after = read_all(sqlite_store(target), KEYS[:3])
    assert [conversation is not None for conversation in after] == [True, True, False]

    record = orjson.loads(lines[2])
    del record["messages"][3]["itemId"]  # its last message: the first three alone would be written by a careless import
    result = run_memory("import", "--to", f"sqlite:{target}", stdin=orjson.dumps(record) + b"\n")
    assert result.returncode == 2 and b"line 1:" in result.stderr and b"itemId" in result.stderr
    assert read_all(sqlite_store(target), [("acme", "c-2")]) == [None]


def test_store_passwords_from_the_environment_never_reach_the_output(tmp_path: Path) -> None:
    config = tmp_path / "gateway.yaml"
    config.write_text("routes:\n  m: {provider: mock}\nmemory:\n  store: redis\n  url: redis://:${TRANSFER_SECRET}@127.0.0.1:1/0\n")
    result = run_memory("export", "--config", str(config), env={"TRANSFER_SECRET": "hunter2-very-secret"})
    assert result.returncode == 1
    assert b"hunter2" not in result.stderr + result.stdout
    assert b"store failed" in result.stderr


def test_an_export_from_redis_refuses_to_start_after_a_key(redis_url: str) -> None:
    refused = run_memory("export", "--store", redis_url, "--after", "acme:c-1")
    assert refused.returncode == 2 and b"cannot start after a key" in refused.stderr


def test_arguments_that_name_no_store_exit_2() -> None:
    assert run_memory("export").returncode == 2
    refused = run_memory("import", "--to", "postgres://somewhere")
    assert refused.returncode == 2 and b"not a store URL" in refused.stderr


def test_a_sqlite_source_that_is_not_there_is_refused_not_made(tmp_path: Path) -> None:
    missing = tmp_path / "typo.db"
    refused = run_memory("migrate", "--from", f"sqlite:{missing}", "--to", f"sqlite:{tmp_path / 'b.db'}")
    assert refused.returncode == 2 and b"typo.db: no such file" in refused.stderr
    assert not missing.exists() and not (tmp_path / "b.db").exists()


def test_a_config_names_the_store_with_its_path_from_the_environment(tmp_path: Path) -> None:
    source = filled_sqlite(tmp_path / "a.db")
    config = tmp_path / "gateway.yaml"
    config.write_text("routes:\n  m: {provider: mock}\nmemory:\n  store: sqlite\n  path: ${TRANSFER_DIR}/a.db\n")
    exported = run_memory("export", "--config", str(config), env={"TRANSFER_DIR": str(source.parent)})
    assert exported.returncode == 0, exported.stderr
    assert len(exported.stdout.splitlines()) == 4


def test_an_export_of_20000_conversations_holds_about_as_much_memory_as_one_of_500(tmp_path: Path) -> None:
    fill_memory = [sys.executable, str(ROOT / "bench" / "fill_memory.py")]
    for name, count in (("small.db", 500), ("large.db", 20_000)):
        subprocess.run([*fill_memory, str(tmp_path / name), "--conversations", str(count), "--messages", "10"], check=True, timeout=600)
    small_status, small = max_rss_kib("export", "--store", f"sqlite:{tmp_path / 'small.db'}", "--output", "/dev/null")
    large_status, large = max_rss_kib("export", "--store", f"sqlite:{tmp_path / 'large.db'}", "--output", "/dev/null")
    assert (small_status, large_status) == (0, 0)
    # 20,000 conversations of 10 messages held at once would take well over 100 MiB of Python objects
    assert large - small < 24 * 1024, f"max RSS {small} KiB for 500 conversations, {large} KiB for 20,000"
