"""A move's counts and its progress: what makes the end's verdict and a resumed pass."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from gateway.core.memory.about import About
from gateway.core.memory.entries import Entry
from gateway.memory.transfer import Counts, Progress, import_lines, migrate, parse_key
from gateway.memory.transfer_record import BadLine, Record, dump_line
from gateway.memory.transfer_sqlite import SQLiteTransfer
from gateway.memory.transfer_store import Restored


def record(memory_id: str, messages: int = 2) -> Record:
    entries = [Entry({"role": "user", "content": str(n)}, {}, 10.0, item_id=f"msg_{memory_id}_{n}") for n in range(messages)]
    return Record(("t", memory_id), [], entries, updated_at=20.0, about=About(5.0))


def test_counts_agree_when_every_conversation_and_message_read_was_written_or_skipped() -> None:
    counts = Counts()
    for memory_id, outcome in (("a", Restored.WRITTEN), ("b", Restored.SKIPPED), ("c", Restored.REPLACED)):
        counts.took(record(memory_id))
        counts.add(record(memory_id), outcome, 2)
    assert counts.verified
    assert counts.summary() == (
        "read 3 conversations (6 messages); written 1, replaced 1, skipped 1 already there (4 messages written, 2 skipped)"
    )


def test_counts_disagree_when_the_target_holds_fewer_messages_than_were_read() -> None:
    counts = Counts()
    counts.took(record("a", 5))
    counts.add(record("a", 5), Restored.WRITTEN, 3)  # a target that trimmed the conversation on the way in
    assert not counts.verified


def test_progress_is_kept_whole_in_its_file_and_read_back_by_the_next_pass(tmp_path: Path) -> None:
    path = tmp_path / "progress"
    Progress(str(path), None).passed(("acme", "c:7"))
    assert path.read_text() == "acme:c:7\n" and not (tmp_path / "progress.partial").exists()
    assert Progress(str(path), None).after == ("acme", "c:7")
    assert Progress(str(path), ("acme", "b")).after == ("acme", "b")  # --after wins over the file
    assert Progress(str(tmp_path / "none"), None).after is None


def test_a_key_is_tenant_colon_memory_id() -> None:
    assert parse_key("acme:c:1") == ("acme", "c:1") and parse_key("") is None
    with pytest.raises(ValueError, match="tenant:memoryId"):
        parse_key("acme")


def test_migrate_with_a_limit_stops_there_and_the_next_pass_takes_the_rest(tmp_path: Path) -> None:
    async def go() -> tuple[Counts, Counts, list[list[tuple[str, str]]]]:
        source, target = SQLiteTransfer(str(tmp_path / "a.db")), SQLiteTransfer(str(tmp_path / "b.db"))
        await import_lines([dump_line(record(f"c{n}")) for n in range(5)], source, replace=False, say=print)
        progress = Progress(None, None)
        first = await migrate(source, target, progress=progress, limit=2, replace=False, say=print)
        rest = await migrate(source, target, progress=progress, limit=None, replace=False, say=print)
        pages = [keys async for keys in target.scan(None, 2)]
        await source.close()
        await target.close()
        return first, rest, pages

    first, rest, pages = asyncio.run(go())
    assert (first.read, first.written, rest.read, rest.written) == (2, 2, 3, 3)
    assert pages == [[("t", "c0"), ("t", "c1")], [("t", "c2"), ("t", "c3")], [("t", "c4")]]


def test_an_import_stops_at_a_bad_line_after_writing_the_lines_before_it(tmp_path: Path) -> None:
    async def go() -> list[list[tuple[str, str]]]:
        target = SQLiteTransfer(str(tmp_path / "b.db"))
        with pytest.raises(BadLine, match=r"^line 2: "):
            await import_lines([dump_line(record("a")), b"{", dump_line(record("c"))], target, replace=False, say=print)
        pages = [keys async for keys in target.scan(None, 10)]
        await target.close()
        return pages

    assert asyncio.run(go()) == [[("t", "a")]]
