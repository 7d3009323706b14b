"""gateway.observe.metrics.shared: workers' plain numbers, published to their directory and merged by any scrape.

Two back-ends in one test process stand for two workers (their pids given); the real processes
of `gateway serve --workers 2` are in test_shared_workers.py.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gateway.config.loader import parse_config
from gateway.observe.metrics import Metrics
from gateway.observe.metrics.families import Count, Family, Level, Observed
from gateway.observe.metrics.published import live_file, publish, read_published
from gateway.observe.metrics.series import CounterSeries, GaugeSeries, HistogramSeries, WorkersView
from gateway.observe.metrics.shared import (
    MULTIPROC_ENV,
    SharedBackend,
    multiprocess_dir,
    worker_exited,
    workers_share_files,
)
from gateway.observe.metrics.snapshot import Snapshot
from tests.support.scrape import Samples, samples, total
from tests.support.waiting import eventually

HOUR = 3600.0  # a period no test waits out: only explicit publishes write


def test_the_directory_is_named_in_the_environment_while_it_lasts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MULTIPROC_ENV, raising=False)
    assert not workers_share_files()
    with multiprocess_dir() as folder:
        assert folder.is_dir() and os.environ[MULTIPROC_ENV] == str(folder)
        assert folder.stat().st_mode & 0o077 == 0  # private: what the workers read there is theirs
        assert workers_share_files()
        (folder / "1.metrics").write_bytes(b"")
    assert not folder.exists()
    assert MULTIPROC_ENV not in os.environ


def test_a_directory_named_before_is_named_again_after(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(MULTIPROC_ENV, str(tmp_path))
    with multiprocess_dir() as folder:
        assert os.environ[MULTIPROC_ENV] == str(folder) != str(tmp_path)
    assert os.environ[MULTIPROC_ENV] == str(tmp_path)


@dataclass
class Worker:
    """One worker's back-end and the families every worker makes alike."""

    backend: SharedBackend
    requests: Family[Count]
    inflight: Family[Level]
    state: Family[Level]
    durations: Family[Observed]

    def scrape(self) -> Samples:
        return samples(self.backend.exposition().decode())


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[list[Worker]]:
    made: list[Worker] = []

    def worker(pid: int, period: float = HOUR) -> Worker:
        ticks = iter(range(pid * 1000, pid * 1000 + 1000))  # a clock of its own: worker 2's changes are later
        backend = SharedBackend(tmp_path, period=period, pid=pid, clock=lambda: float(next(ticks)))
        made.append(
            Worker(
                backend,
                backend.counter(CounterSeries("req", "Requests.", ("route",))),
                backend.gauge(GaugeSeries("inflight", "In flight.", ("route",), WorkersView.LIVE_SUM)),
                backend.gauge(GaugeSeries("state", "Breaker state.", ("target",), WorkersView.LATEST)),
                backend.histogram(HistogramSeries("seconds", "Durations.", ("route",), (0.5, 1.0))),
            )
        )
        return made[-1]

    yield [worker(1), worker(2), worker(3, period=0.01)]
    for each in made:
        each.backend.close()


def test_a_scrape_shows_every_workers_values_as_last_published(workers: list[Worker]) -> None:
    one, two, _ = workers
    one.requests.labels("chat").inc()
    one.durations.labels("chat").observe(0.2)
    two.requests.labels("chat").inc(2)
    two.requests.labels("other").inc()
    two.durations.labels("chat").observe(0.7)
    two.backend.publish()
    two.requests.labels("chat").inc(100)  # not published yet: another worker's scrape does not see it
    found = one.scrape()
    assert total(found, "req_total", route="chat") == 3 and total(found, "req_total", route="other") == 1
    assert total(found, "seconds_bucket", route="chat", le="0.5") == 1
    assert total(found, "seconds_bucket", route="chat", le="1.0") == 2 and total(found, "seconds_sum") == pytest.approx(0.9)
    assert total(two.scrape(), "req_total", route="chat") == 103  # its own scrape published it
    assert total(one.scrape(), "req_total", route="chat") == 103


async def test_a_worker_publishes_what_changed_on_its_own(workers: list[Worker]) -> None:
    """Worker 3 publishes every 10 ms: no scrape of it is needed for the others to see its values."""
    one, _, three = workers
    three.requests.labels("chat").inc(7)
    await eventually(lambda: total(one.scrape(), "req_total", route="chat") == 7, what="worker 3's published count")


def test_unchanged_values_are_not_written_again(workers: list[Worker], tmp_path: Path) -> None:
    one = workers[0]
    one.requests.labels("chat").inc()
    one.backend.publish()
    marker = Snapshot(numbers={"marker": {(): 1.0}})
    publish(tmp_path, 1, marker)  # in place of what worker 1 wrote: a write would replace it
    one.backend.publish()
    one.scrape()
    assert Snapshot.decode(live_file(tmp_path, 1).read_bytes()) == marker
    one.requests.labels("chat").inc()
    one.backend.publish()
    assert Snapshot.decode(live_file(tmp_path, 1).read_bytes()) != marker


def test_a_dead_workers_counts_stay_and_its_live_gauges_leave(
    workers: list[Worker], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    one, two, _ = workers
    one.inflight.labels("chat").inc()
    two.inflight.labels("chat").inc(2)
    two.requests.labels("chat").inc(5)
    two.backend.publish()
    assert total(one.scrape(), "inflight", route="chat") == 3
    monkeypatch.setenv(MULTIPROC_ENV, str(tmp_path))
    worker_exited(2)  # what the parent does when it sees worker 2 die
    found = one.scrape()
    assert total(found, "inflight", route="chat") == 1
    assert total(found, "req_total", route="chat") == 5


def test_a_latest_gauge_shows_the_state_a_live_worker_set_last(
    workers: list[Worker], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    one, two, _ = workers
    one.state.labels("a").set(0)
    two.state.labels("a").set(2)  # later, on worker 2's clock
    two.backend.publish()
    assert total(one.scrape(), "state", target="a") == 2
    monkeypatch.setenv(MULTIPROC_ENV, str(tmp_path))
    worker_exited(2)
    assert total(one.scrape(), "state", target="a") == 0  # the dead worker's state is no longer shown


def test_close_publishes_the_last_values(workers: list[Worker], tmp_path: Path) -> None:
    one = workers[0]
    one.requests.labels("chat").inc(4)
    one.backend.close()
    (published,) = [p for p in read_published(tmp_path) if p.values.numbers.get("req")]
    assert published.values.numbers["req"] == {("chat",): 4}


def test_a_failure_to_publish_is_logged_once_until_publishing_works(
    workers: list[Worker], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    one = workers[0]
    shutil.rmtree(tmp_path)
    for _ in range(3):
        one.requests.labels("chat").inc()
        one.backend.publish()
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1
    with pytest.raises(FileNotFoundError):  # a failed scrape, rather than totals without the other workers
        one.scrape()
    tmp_path.mkdir()
    one.backend.publish()
    assert live_file(tmp_path, 1).exists()


def test_a_worker_that_starts_does_not_hide_another_workers_open_breaker(tmp_path: Path) -> None:
    config = parse_config("routes:\n  chat:\n    provider: mock\n")
    target = config.routes["chat"].first_target
    clocks = {1: iter(range(1000, 2000)), 2: iter(range(5000, 6000))}  # worker 2 starts later
    backends = {pid: SharedBackend(tmp_path, period=HOUR, pid=pid, clock=lambda pid=pid: float(next(clocks[pid]))) for pid in (1, 2)}
    try:
        first = Metrics(config, prices={}, backend=backends[1])
        first.breaker_changed(target, 2)  # open, before the other worker (a replacement) starts
        backends[1].publish()
        Metrics(config, prices={}, backend=backends[2])  # its breakers are closed as far as it knows: nothing changed
        assert total(samples(backends[2].exposition().decode()), "gateway_breaker_state", target=target.name) == 2
    finally:
        for backend in backends.values():
            backend.close()
