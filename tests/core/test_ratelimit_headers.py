"""OpenAI's x-ratelimit-* and retry-after headers, written from quotas and waits."""

from __future__ import annotations

import pytest

from gateway.core import ratelimit_headers
from gateway.core.governance import Quota
from gateway.core.ratelimit_headers import duration_text, quota_headers, quota_pairs, retry_headers


def test_both_trios_from_both_quotas() -> None:
    headers = quota_headers(Quota(limit=600, remaining=599, reset_seconds=0.1), Quota(limit=200000, remaining=150000,
                                                                                  reset_seconds=15.0))
    assert headers == {
        "x-ratelimit-limit-requests": "600",
        "x-ratelimit-remaining-requests": "599",
        "x-ratelimit-reset-requests": "100ms",
        "x-ratelimit-limit-tokens": "200000",
        "x-ratelimit-remaining-tokens": "150000",
        "x-ratelimit-reset-tokens": "15s",
    }


def test_a_quota_not_given_is_left_out() -> None:
    assert quota_headers(None, None) == {}
    assert set(quota_headers(None, Quota(limit=10, remaining=3, reset_seconds=1.0))) == {
        "x-ratelimit-limit-tokens", "x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens"}


def test_remaining_below_zero_reads_zero() -> None:
    # a bucket may go below zero when an answer used more tokens than were reserved
    headers = quota_headers(None, Quota(limit=10, remaining=-5, reset_seconds=2.0))
    assert headers["x-ratelimit-remaining-tokens"] == "0"


@pytest.mark.parametrize(("seconds", "text"), [
    (0.0, "0s"), (-1.0, "0s"), (float("nan"), "0s"), (0.0004, "0s"), (0.02, "20ms"), (0.0206, "21ms"),
    (0.999, "999ms"), (1.0, "1s"), (1.5, "1.5s"), (1.002, "1.002s"), (59.25, "59.25s"), (360.0, "6m0s"),
    (61.5, "1m1.5s"), (3723.0, "1h2m3s"), (3600.0, "1h0m0s"),
])
def test_durations_read_as_openai_writes_them(seconds: float, text: str) -> None:
    assert duration_text(seconds) == text


@pytest.mark.parametrize(("seconds", "after", "after_ms"), [
    (0.0, "1", "1"), (0.2, "1", "200"), (1.0, "1", "1000"), (1.001, "2", "1001"), (59.5, "60", "59500"),
    (-3.0, "1", "1"), (float("inf"), "1", "1"),
])
def test_retry_after_rounds_up_to_whole_seconds_and_milliseconds(seconds: float, after: str, after_ms: str) -> None:
    assert retry_headers(seconds) == {"retry-after": after, "retry-after-ms": after_ms}


@pytest.mark.parametrize(("seconds", "text"), [
    (0.0004999, "0s"), (0.0005, "0s"), (0.0006, "1ms"), (float("inf"), "0s"), (float("-inf"), "0s"),
])
def test_about_no_time_and_never_read_0s(seconds: float, text: str) -> None:
    assert duration_text(seconds) == text


def test_the_pairs_of_quotas_written_lately_are_kept_and_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ratelimit_headers, "WRITTEN", {})
    monkeypatch.setattr(ratelimit_headers, "MOST_WRITTEN", 2)
    first = quota_pairs(Quota(limit=600, remaining=599, reset_seconds=0.1), None)
    assert first == (("x-ratelimit-limit-requests", "600"), ("x-ratelimit-remaining-requests", "599"),
                     ("x-ratelimit-reset-requests", "100ms"))
    assert quota_pairs(Quota(limit=600, remaining=599, reset_seconds=0.1), None) is first  # the same quota: kept
    assert quota_pairs(Quota(limit=600, remaining=598, reset_seconds=0.1), None)[1] == ("x-ratelimit-remaining-requests", "598")
    quota_pairs(None, Quota(limit=10, remaining=3, reset_seconds=1.0))  # a third: the full memo starts again
    assert len(ratelimit_headers.WRITTEN) == 1
