"""Metrics as governance's listener: refusals by key, route and limit, and each budgeted key's spend and what is left.

With workers, the refusals of every worker add up and a key's budget shows what a live worker
set last (the spend is the store's, so the latest reading is the truest one).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.config.loader import parse_config
from gateway.core.governance import LimitKind
from gateway.governance.admission import GovernanceListener
from gateway.observe.metrics import Metrics
from gateway.observe.metrics.shared import MULTIPROC_ENV, SharedBackend, worker_exited
from tests.support.scrape import Samples, samples, total

CONFIG = parse_config("routes:\n  chat: {provider: mock}\n  fast: {provider: mock}\n", env={})
HOUR = 3600.0  # a publishing period no test waits out: only explicit publishes write


def scrape(metrics: Metrics) -> Samples:
    return samples(metrics.exposition().decode())


def test_metrics_has_every_method_governance_calls_with_its_signature() -> None:
    """Met by shape: observe is a layer under governance and does not import its Protocol."""
    for name, wanted in inspect.getmembers(GovernanceListener, inspect.isfunction):
        if name.startswith("_"):
            continue
        found = getattr(Metrics, name, None)
        assert found is not None, f"Metrics has no {name}"
        assert inspect.signature(found) == inspect.signature(wanted), name


def test_refusals_are_counted_by_key_route_and_limit() -> None:
    metrics = Metrics(CONFIG, prices={})
    metrics.rate_limited("team-a", "chat", LimitKind.REQUESTS)
    metrics.rate_limited("team-a", "chat", LimitKind.REQUESTS)
    metrics.rate_limited("team-a", "fast", LimitKind.BUDGET)
    metrics.rate_limited("team-b", "chat", LimitKind.CONCURRENCY)
    found = scrape(metrics)
    assert total(found, "gateway_rate_limited_total", key="team-a", route="chat", limit="requests") == 2
    assert total(found, "gateway_rate_limited_total", key="team-a", route="fast", limit="budget") == 1
    assert total(found, "gateway_rate_limited_total", key="team-b", route="chat", limit="concurrency") == 1
    assert total(found, "gateway_rate_limited_total") == 4


def test_a_member_and_its_word_count_in_the_same_series() -> None:
    metrics = Metrics(CONFIG, prices={})
    metrics.rate_limited("team-a", "chat", LimitKind.TOKENS)
    metrics.rate_limited("team-a", "chat", "tokens")  # type: ignore[arg-type]  # a caller with the plain word
    refusals = [labels for (name, labels) in scrape(metrics) if name == "gateway_rate_limited_total"]
    assert refusals == [frozenset({("key", "team-a"), ("route", "chat"), ("limit", "tokens")})]


def test_a_budget_shows_its_spend_and_what_is_left() -> None:
    metrics = Metrics(CONFIG, prices={})
    metrics.budget_spent("team-a", spent_usd=12.5, budget_usd=100.0)
    metrics.budget_spent("team-b", spent_usd=1.0, budget_usd=5.0)
    metrics.budget_spent("team-a", spent_usd=13.25, budget_usd=100.0)  # a later settlement: the level, not a sum
    found = scrape(metrics)
    assert total(found, "gateway_budget_spent_usd", key="team-a") == 13.25
    assert total(found, "gateway_budget_remaining_usd", key="team-a") == 86.75
    assert total(found, "gateway_budget_spent_usd", key="team-b") == 1.0
    assert total(found, "gateway_budget_remaining_usd", key="team-b") == 4.0


def test_an_overshot_budget_has_nothing_left_not_less_than_nothing() -> None:
    metrics = Metrics(CONFIG, prices={})
    metrics.budget_spent("team-a", spent_usd=5.5, budget_usd=5.0)  # requests in flight went past it
    found = scrape(metrics)
    assert total(found, "gateway_budget_spent_usd", key="team-a") == 5.5
    assert total(found, "gateway_budget_remaining_usd", key="team-a") == 0.0


def test_no_key_shows_before_governance_tells_of_it() -> None:
    """A budget's spend is the store's: a gauge made at start (0) would claim a spend nobody read."""
    names = {name for (name, _) in scrape(Metrics(CONFIG, prices={}))}
    assert not names & {"gateway_rate_limited_total", "gateway_budget_spent_usd", "gateway_budget_remaining_usd"}


@pytest.fixture
def two_workers(tmp_path: Path) -> Iterator[tuple[Metrics, Metrics]]:
    """Two workers' Metrics publishing to one directory; worker 2's clock runs later than worker 1's."""
    clocks = {1: iter(range(1000, 2000)), 2: iter(range(5000, 6000))}
    backends = [
        SharedBackend(tmp_path, period=HOUR, pid=pid, clock=lambda pid=pid: float(next(clocks[pid]))) for pid in (1, 2)
    ]
    try:
        yield Metrics(CONFIG, prices={}, backend=backends[0]), Metrics(CONFIG, prices={}, backend=backends[1])
    finally:
        for backend in backends:
            backend.close()


def test_with_workers_refusals_add_up_and_a_budget_shows_the_latest_spend(
    two_workers: tuple[Metrics, Metrics], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    one, two = two_workers
    one.rate_limited("team-a", "chat", LimitKind.REQUESTS)
    two.rate_limited("team-a", "chat", LimitKind.REQUESTS)
    two.rate_limited("team-a", "chat", LimitKind.REQUESTS)
    one.budget_spent("team-a", spent_usd=3.0, budget_usd=10.0)
    two.budget_spent("team-a", spent_usd=4.0, budget_usd=10.0)  # later: the store's spend after both
    scrape(two)  # publishes worker 2's values
    found = scrape(one)
    assert total(found, "gateway_rate_limited_total", key="team-a", limit="requests") == 3
    assert total(found, "gateway_budget_spent_usd", key="team-a") == 4.0  # not 7: the latest, not a sum
    assert total(found, "gateway_budget_remaining_usd", key="team-a") == 6.0
    monkeypatch.setenv(MULTIPROC_ENV, str(tmp_path))
    worker_exited(2)
    found = scrape(one)
    assert total(found, "gateway_rate_limited_total", key="team-a", limit="requests") == 3  # a dead worker's count stays
    assert total(found, "gateway_budget_spent_usd", key="team-a") == 3.0  # its gauge leaves with it
