"""An import --replace into the SQLite file of running workers: their copies of the old conversation are read again, never spliced.

The workers are stores sharing one file as `serve --workers N` opens it (tests/support/shared_sqlite);
the import and migrate are the real CLI, run while they hold their copies.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from gateway.memory.sqlite import SQLiteStore
from gateway.memory.store import StoreUnavailable
from gateway.memory.transfer_record import Record
from gateway.memory.transfer_sqlite import SQLiteTransfer
from gateway.memory.transfer_store import Restored
from tests.support.memory_transfer import run_memory, sqlite_store
from tests.support.shared_sqlite import KEY, REACH, said, shared_stores, turn, window

DEADLINE = 30.0  # for what the test waits on: never reached unless the restore is stuck


async def written(path: Path, texts: list[str]) -> list[object]:
    """A conversation of a turn per text under KEY in a file of its own (the version an import brings); its messages."""
    store = sqlite_store(path)
    try:
        for text in texts:
            await turn(store, text)
        conversation = await store.load(KEY)
    finally:
        await store.close()
    assert conversation is not None
    return conversation.messages


def messages_of(texts: list[str]) -> list[object]:
    return [entry.message for text in texts for entry in said(text)]


async def moved_in(source: Path, target: Path, *, how: str) -> None:
    """The conversations of `source` written over `target`'s by the CLI: export then import --replace, or migrate --replace."""
    if how == "import":
        lines = source.with_suffix(".jsonl")
        exported = await asyncio.to_thread(run_memory, "export", "--store", f"sqlite:{source}", "--output", str(lines))
        assert exported.returncode == 0, exported.stderr
        done = await asyncio.to_thread(run_memory, "import", "--input", str(lines), "--to", f"sqlite:{target}", "--replace")
    else:
        done = await asyncio.to_thread(run_memory, "migrate", "--from", f"sqlite:{source}", "--to", f"sqlite:{target}", "--replace")
    assert done.returncode == 0, done.stderr
    assert b"replaced 1" in done.stderr


@pytest.mark.parametrize("imported", [["x1", "x2"], ["x1", "x2", "x3", "x4"]], ids=["as-long", "longer"])
@pytest.mark.parametrize("between", [False, True], ids=["next-turn", "after-another-workers-turn"])
async def test_a_worker_holding_the_old_conversation_plans_on_the_imported_one(
    tmp_path: Path, imported: list[str], between: bool
) -> None:
    """One worker's copy holds a and b; the imported conversation is as long or longer, another worker may take a turn after it.

    Its window is the imported conversation (and the other worker's turn), whole: not its old copy,
    nor its copy with the file's rows after it (x3 and x4 after a and b).
    """
    database = tmp_path / "m.db"
    version = await written(tmp_path / "other.db", imported)
    async with shared_stores(database) as (one, two):
        await turn(one, "a")
        await turn(one, "b")  # one's copy: messages 1 to 4
        await moved_in(tmp_path / "other.db", database, how="import")
        expected = list(imported)
        if between:
            assert await turn(two, "c") == expected
            expected.append("c")
        planned = await window(one)
        assert planned is not None and planned.messages == [*version, *messages_of(expected[len(imported) :])]
        assert await turn(one, "z") == expected
        stored = await two.load(KEY)
        assert stored is not None and stored.messages == [*planned.messages, *messages_of(["z"])]


async def test_a_migrate_replace_into_the_file_alike(tmp_path: Path) -> None:
    database = tmp_path / "m.db"
    version = await written(tmp_path / "other.db", ["x1", "x2", "x3", "x4"])
    async with shared_stores(database) as (one, two):
        await turn(one, "a")
        await turn(one, "b")
        await moved_in(tmp_path / "other.db", database, how="migrate")
        assert await turn(two, "c") == ["x1", "x2", "x3", "x4"]
        planned = await window(one)
        assert planned is not None and planned.messages == [*version, *messages_of(["c"])]


async def exported(path: Path) -> Record:
    """The conversation under KEY in the file `path`, as an export carries it."""
    source = SQLiteTransfer(str(path))
    try:
        record = await source.export(KEY)
    finally:
        await source.close()
    assert record is not None
    return record


async def users_in_file(store: SQLiteStore) -> list[object]:
    conversation = await store.load(KEY)
    assert conversation is not None
    return [m["content"] for m in conversation.messages if m["role"] == "user"]


async def test_a_restore_waits_for_the_turn_under_way_then_the_worker_reads_it_whole(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The conversation is written once the worker's turn let go of it, not under it: that turn's write goes before it."""
    database = tmp_path / "m.db"
    await written(tmp_path / "other.db", ["x1", "x2"])
    record = await exported(tmp_path / "other.db")
    async with shared_stores(database) as (one, _):
        await turn(one, "a")
        target = SQLiteTransfer(str(database))
        try:
            async with one.lock(KEY):
                await one.load_tail(KEY, REACH)  # a turn under way: read, its reply awaited
                restoring = asyncio.create_task(target.restore(record, replace=True))
                deadline = asyncio.get_running_loop().time() + DEADLINE
                with caplog.at_level(logging.WARNING, logger="gateway.memory"):
                    while "held by a running gateway" not in caplog.text:
                        assert asyncio.get_running_loop().time() < deadline and not restoring.done()
                        await asyncio.sleep(0.01)
                await one.append(KEY, said("b"), system=None)
                assert await users_in_file(one) == ["a", "b"]
            assert await restoring == (Restored.REPLACED, 4)
        finally:
            await target.close()
        assert await turn(one, "z") == ["x1", "x2"]


async def test_a_conversation_held_past_the_wait_is_left_as_it_was(tmp_path: Path) -> None:
    database = tmp_path / "m.db"
    await written(tmp_path / "other.db", ["x1"])
    record = await exported(tmp_path / "other.db")
    async with shared_stores(database) as (one, _):
        await turn(one, "a")
        target = SQLiteTransfer(str(database), lock_wait=0.1)  # the test is about this wait running out
        try:
            async with one.lock(KEY):
                with pytest.raises(StoreUnavailable, match=r"team-a:conv-1: .* \(held by a running gateway\)"):
                    await target.restore(record, replace=True)
        finally:
            await target.close()
        assert await turn(one, "b") == ["a"]


async def test_a_conversation_no_turn_holds_is_written_without_a_word_of_waiting(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    await written(tmp_path / "other.db", ["x1"])
    record = await exported(tmp_path / "other.db")
    async with shared_stores(tmp_path / "m.db") as (one, _):
        await turn(one, "a")
        target = SQLiteTransfer(str(tmp_path / "m.db"))
        try:
            with caplog.at_level(logging.WARNING, logger="gateway.memory"):
                assert await target.restore(record, replace=True) == (Restored.REPLACED, 2)
                assert await target.restore(record, replace=False) == (Restored.SKIPPED, 0)
                await asyncio.sleep(0)  # a warning scheduled and not cancelled would run here
        finally:
            await target.close()
        assert "held by a running gateway" not in caplog.text
        assert await turn(one, "b") == ["x1"]


async def test_an_import_into_a_config_s_store_waits_as_long_as_its_lock_timeout(tmp_path: Path) -> None:
    await written(tmp_path / "other.db", ["x1"])
    lines = tmp_path / "other.jsonl"
    exported = await asyncio.to_thread(run_memory, "export", "--store", f"sqlite:{tmp_path / 'other.db'}", "--output", str(lines))
    assert exported.returncode == 0, exported.stderr
    config = tmp_path / "gateway.yaml"
    config.write_text(f"routes:\n  m: {{provider: mock}}\nmemory:\n  store: sqlite\n  path: {tmp_path / 'm.db'}\n"
                      "  lockTimeoutSeconds: 0.2\n")
    async with shared_stores(tmp_path / "m.db") as (one, _):
        await turn(one, "a")
        async with one.lock(KEY):  # held past the config's 0.2 s (the default would wait 120 s)
            done = await asyncio.wait_for(
                asyncio.to_thread(run_memory, "import", "--input", str(lines), "--config", str(config), "--replace"), DEADLINE
            )
        assert done.returncode == 1 and b"held by a running gateway" in done.stderr, done.stderr
        assert await turn(one, "b") == ["a"]
