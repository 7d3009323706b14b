"""The kinds of value in the config's schema (gateway.config.fields): bounds, flags, choices, lists, as messages word them."""

from __future__ import annotations

import pytest

from tests.support.config_text import MOCK, errors_of, loads


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        # each was a 500 or a crash: SQLite's purge overflowed, the health page's datetime too
        ("memory: {store: sqlite, ttlSeconds: 1.0e+300}\n" + MOCK, "memory.ttlSeconds: must be at most"),
        ("memory: {maxStoredMessages: 1000000000000000000000}\n" + MOCK, "memory.maxStoredMessages: must be at most"),
        ("memory: {defaults: {maxMessages: 10000000000}}\n" + MOCK, "memory.defaults.maxMessages: must be at most"),
        ("routes: {m: {provider: mock, breaker: {cooldownSeconds: 1.0e+300, maxCooldownSeconds: 1.0e+300}}}", "cooldownSeconds: must be at most"),
        ("routes: {m: {provider: mock, retry: {backoffSeconds: 1.0e+300}}}", "routes.m.retry.backoffSeconds: must be at most"),
        ("routes: {m: {provider: mock, timeout: 1.0e+300}}", "routes.m.timeout: must be at most 3.1536e+08 seconds"),
        ("server: {bodyReadTimeoutSeconds: 1.0e+20}\n" + MOCK, "server.bodyReadTimeoutSeconds: must be at most"),
    ],
)
def test_durations_and_counts_past_what_clocks_and_stores_hold(text: str, problem: str) -> None:
    assert any(problem in error for error in errors_of(text)), errors_of(text)


def test_long_durations_and_large_counts_load() -> None:
    loads("memory: {ttlSeconds: 315360000, maxStoredMessages: 1000000000}\nroutes: {m: {provider: mock, timeout: 86400}}")

