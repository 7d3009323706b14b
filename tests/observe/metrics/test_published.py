"""gateway.observe.metrics.published: the workers' snapshot files, written whole, read all, the dead set aside."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gateway.observe.metrics.merge import Published
from gateway.observe.metrics.published import live_file, mark_dead, publish, read_published
from gateway.observe.metrics.snapshot import Snapshot


def counted(n: float) -> Snapshot:
    return Snapshot(numbers={"c": {(): n}})


def values(found: list[Published]) -> list[tuple[float, bool]]:
    return [(p.values.numbers["c"][()], p.live) for p in found]


def test_a_worker_replaces_its_own_file_whole(tmp_path: Path) -> None:
    publish(tmp_path, 11, counted(1))
    first = live_file(tmp_path, 11).stat().st_ino
    publish(tmp_path, 11, counted(2))
    assert live_file(tmp_path, 11).stat().st_ino != first  # a new file renamed over the old, not rewritten in place
    assert os.listdir(tmp_path) == ["11.metrics"]  # no temporary file left
    assert values(read_published(tmp_path)) == [(2, True)]


def test_every_file_is_read_but_the_one_skipped_and_those_that_are_no_snapshot(tmp_path: Path) -> None:
    publish(tmp_path, 11, counted(1))
    publish(tmp_path, 12, counted(2))
    (tmp_path / "13.metrics").write_bytes(b"garbage")
    (tmp_path / "14.tmp").write_bytes(counted(4).encode())  # a worker's half-written snapshot
    assert values(read_published(tmp_path)) == [(1, True), (2, True)]
    assert values(read_published(tmp_path, skip="12.metrics")) == [(1, True)]


def test_a_dead_workers_file_is_read_as_dead_and_a_pid_that_dies_twice_keeps_both(tmp_path: Path) -> None:
    publish(tmp_path, 11, counted(1))
    (tmp_path / "11.tmp").write_bytes(b"")  # killed while it wrote
    mark_dead(tmp_path, 11)
    publish(tmp_path, 11, counted(5))  # the pid, reused by a later worker
    mark_dead(tmp_path, 11)
    publish(tmp_path, 12, counted(2))
    assert sorted(values(read_published(tmp_path))) == [(1, False), (2, True), (5, False)]
    assert not (tmp_path / "11.tmp").exists()


def test_a_worker_that_died_before_publishing_leaves_nothing(tmp_path: Path) -> None:
    mark_dead(tmp_path, 11)
    assert os.listdir(tmp_path) == []


def test_a_file_renamed_dead_after_the_listing_is_read_under_its_new_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The parent renames a dead worker's file between a scrape's listing and its reading: the next listing finds it."""
    publish(tmp_path, 11, counted(1))
    publish(tmp_path, 12, counted(2))
    listed = os.listdir(tmp_path)
    mark_dead(tmp_path, 11)
    real_listdir, stale = os.listdir, [listed]

    def listdir(folder: Path) -> list[str]:
        return stale.pop() if stale else real_listdir(folder)

    monkeypatch.setattr(os, "listdir", listdir)
    assert sorted(values(read_published(tmp_path))) == [(1, False), (2, True)]
