"""The SQLite store's worker thread: jobs in order, batched while it is busy, a failing batch survived, a stop final."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from gateway.memory.worker import Worker


class Closed(Exception):
    pass


def test_jobs_queued_while_the_thread_is_busy_are_served_together_in_order() -> None:
    batches: list[list[str]] = []
    busy, go = threading.Event(), threading.Event()

    def serve(jobs: list[str]) -> None:
        if jobs == ["first"]:
            busy.set()
            assert go.wait(10)
        batches.append(list(jobs))

    worker: Worker[str] = Worker(serve, name="test-worker", closed=Closed)
    assert not worker.started  # no thread before the first job
    worker.submit("first")
    assert busy.wait(10)
    for job in ("a", "b", "c"):
        worker.submit(job)
    go.set()
    worker.stop()  # serves what was queued, then ends
    assert batches == [["first"], ["a", "b", "c"]]


def test_a_batch_that_fails_is_logged_and_the_thread_serves_on(caplog: pytest.LogCaptureFixture) -> None:
    served: list[str] = []
    failed = threading.Event()

    def serve(jobs: list[str]) -> None:
        if "boom" in jobs:
            failed.set()
            raise ValueError("a bug in serve")
        served.extend(jobs)

    worker: Worker[str] = Worker(serve, name="test-worker", closed=Closed)
    with caplog.at_level(logging.ERROR, logger="gateway.memory"):
        worker.submit("boom")
        assert failed.wait(10)
        worker.submit("after")
        worker.stop()
    assert served == ["after"]
    assert "test-worker: serving a batch of jobs failed" in caplog.text


def test_a_stopped_worker_refuses_jobs_with_its_owners_error() -> None:
    worker: Worker[str] = Worker(lambda jobs: None, name="test-worker", closed=lambda: Closed("the store is closed"))
    worker.submit("one")
    worker.stop()
    assert worker.stopped
    with pytest.raises(Closed, match="the store is closed"):
        worker.submit("two")


def test_busy_for_counts_while_a_batch_is_served_and_is_zero_between_batches() -> None:
    """Read from another thread, as /readyz reads it from the loop while the store's thread is stalled."""
    busy, go = threading.Event(), threading.Event()

    def serve(jobs: list[str]) -> None:
        busy.set()
        assert go.wait(10)

    worker: Worker[str] = Worker(serve, name="test-worker", closed=Closed)
    assert worker.busy_for() == 0.0  # no thread yet
    worker.submit("stalls")
    assert busy.wait(10)
    deadline = time.monotonic() + 10
    while worker.busy_for() == 0.0:  # the clock may not have moved yet
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert worker.busy_for() > 0.0
    go.set()
    worker.stop()
    assert worker.busy_for() == 0.0
