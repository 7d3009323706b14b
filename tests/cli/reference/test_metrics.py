"""The metrics reference (gateway.cli.reference.metrics): every series a scrape shows, its type, labels and meaning."""

from __future__ import annotations

import re

import pytest

from gateway.cli.reference import metrics as reference
from gateway.cli.reference.markdown import Undescribed
from gateway.cli.reference.metrics import exposed_name, metrics_page
from gateway.config.loader import parse_config
from gateway.observe.metrics import Metrics
from gateway.observe.metrics.series import SERIES, CounterSeries


def test_every_series_a_scrape_shows_is_listed() -> None:
    scrape = Metrics(parse_config("routes:\n  chat: {provider: mock}\n", env={})).exposition().decode()
    scraped = set(re.findall(r"^# HELP (\S+) ", scrape, flags=re.MULTILINE))
    listed = {series.name + ("_total" if isinstance(series, CounterSeries) else "") for series in SERIES}
    assert scraped <= listed
    assert len(scraped) >= 15  # the children made at load: most series show before any traffic


def test_every_series_and_label_is_described() -> None:
    assert [name for name, text in reference.undescribed() if not text] == []


def test_a_label_without_a_meaning_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reference, "SERIES", (CounterSeries("gateway_things", "Things.", ("colour",)),))
    with pytest.raises(Undescribed, match=r"gateway_things\{colour\}"):
        metrics_page()
    monkeypatch.setattr(reference, "SERIES", (CounterSeries("gateway_things", "", ()),))
    with pytest.raises(Undescribed, match="gateway_things"):
        metrics_page()


def test_the_page_shows_each_series_as_scraped() -> None:
    page = metrics_page()
    for series in SERIES:
        assert f"`{exposed_name(series)}`" in page
    assert "| `gateway_requests_total` | counter | `route`, `status_code`, `stream` |" in page
