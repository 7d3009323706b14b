"""The kinds of value in the config's schema (gateway.config.fields): bounds, flags, choices, lists, as messages word them."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import pytest

from gateway.config.fields import (
    LEFT_OUT,
    Chosen,
    Count,
    Flag,
    Fraction,
    HeaderValue,
    Seconds,
    Setting,
    StatusCodes,
    Text,
    Weight,
)
from gateway.config.interpolation import Interpolated
from gateway.config.problems import Problems
from gateway.config.section import Section
from gateway.config.validation import validated
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



class Sample(Section):
    """One key of each kind, for the tests below."""

    text: Text = ""
    setting: Setting = "default"
    header: HeaderValue = ""
    flag: Flag = False
    weight: Weight = 1.0
    fraction: Fraction = 0.5
    seconds: Seconds = 1.0
    count: Count = 1
    api: Annotated[Literal["native", "translate"], Chosen()] = "native"
    codes: StatusCodes = ()


def read(**values: Any) -> tuple[Sample | None, list[str]]:
    problems = Problems()
    return validated(Sample, values, problems), problems.messages


def from_env(text: str) -> Interpolated:
    """`text` as `${VAR}` interpolation makes it."""
    value = Interpolated(text)
    value.refs = {}
    return value


def test_numbers_and_flags_from_the_environment_are_read_as_yaml_reads_them() -> None:
    sample, problems = read(flag=from_env("TRUE"), count=from_env("8181"), seconds=from_env("1.5"))
    assert problems == [] and sample is not None
    assert (sample.flag, sample.count, sample.seconds) == (True, 8181, 1.5)
    assert read(flag="true")[1] == ["flag: must be true or false, got 'true'"]  # written as text in the file


@pytest.mark.parametrize(
    ("values", "problem"),
    [
        ({"weight": -1}, "weight: must be >= 0, got -1"),
        ({"fraction": 2}, "fraction: must be a fraction between 0 and 1, got 2"),
        ({"fraction": 0}, "fraction: must be > 0, got 0"),
        ({"count": 1.5}, "count: must be an integer, got 1.5"),
        ({"count": True}, "count: must be an integer, got a boolean"),
        ({"seconds": "fast"}, "seconds: must be a number, got 'fast'"),
        ({"seconds": 10**400}, "seconds: must be a number within a float's range, got a 401-digit integer"),
        ({"api": "both"}, "api: must be native or translate, got 'both'"),
        ({"codes": 5}, "codes: must be a list of HTTP status codes, got 5"),
        ({"codes": [200, 600]}, "codes[1]: must be a status code between 100 and 599, got 600"),
        ({"header": 5}, "header: must be a string, got 5"),
        ({"text": [1]}, "text: must be a string, got a list"),
    ],
)
def test_each_kind_words_what_it_expected(values: dict[str, Any], problem: str) -> None:
    assert read(**values)[1] == [problem]


def test_text_takes_a_number_as_written_and_a_blank_setting_is_its_default() -> None:
    sample, problems = read(text=5, setting="", codes=[429, 503])
    assert problems == [] and sample is not None
    assert (sample.text, sample.setting, sample.codes) == ("5", "default", (429, 503))


def test_a_list_skips_the_items_left_out_and_tells_the_others_at_their_places_in_the_file() -> None:
    problems = read(codes=[LEFT_OUT, 429, LEFT_OUT, 600])[1]
    assert problems == ["codes[3]: must be a status code between 100 and 599, got 600"]
    sample = read(codes=[LEFT_OUT, 503])[0]
    assert sample is not None and sample.codes == (503,)


@pytest.mark.parametrize(
    ("written", "read"),
    [("1e6", 1_000_000), ("2.5e3", 2_500), ("1E+3", 1_000), (".5e4", 5_000), ("1.0e+6", 1_000_000)],
)
def test_a_number_with_an_exponent_is_read_as_yaml_1_2_reads_it(written: str, read: int) -> None:
    """PyYAML reads 1e6 as text (YAML 1.1 wants 1.0e+6); editors checking the schema read it as a number, as we do."""
    config = loads(f"""
        auth: {{keys: [{{name: t, key: sk-t, limits: {{requestsPerMinute: {written}, budget: {{usd: {written}}}}}}}]}}
        routes: {{m: {{provider: mock}}}}
    """)
    limits = config.api_keys[0].limits
    assert limits is not None and limits.budget is not None
    assert (limits.requests_per_minute, limits.budget.usd) == (read, float(read))
    assert loads('memory: {ttlSeconds: "${TTL}"}\n' + MOCK, env={"TTL": "3e3"}).memory.ttl_seconds == 3000


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("memory: {ttlSeconds: 1e300}\n" + MOCK, "memory.ttlSeconds: must be at most"),
        ("memory: {maxStoredMessages: 1.55e1}\n" + MOCK, "memory.maxStoredMessages: must be an integer, got 15.5"),
        ("memory: {ttlSeconds: 1e999}\n" + MOCK, "memory.ttlSeconds: must be a number, got inf"),
        ("memory: {ttlSeconds: 1e}\n" + MOCK, "memory.ttlSeconds: must be a number, got '1e'"),
    ],
)
def test_a_number_with_an_exponent_is_held_to_its_bounds(text: str, problem: str) -> None:
    assert any(problem in error for error in errors_of(text)), errors_of(text)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("routes: {on: {provider: mock}}", "routes.True: a key written as on, off, yes, no"),
        ("routes: {m: {provider: mock, headers: {yes: x}}}", "routes.m.headers: a key written as on, off, yes, no"),
        ("routes: {m: {provider: mock, overrideParams: {~: 1}}}", "reads as None in YAML"),
    ],
)
def test_a_key_yaml_reads_as_a_boolean_or_null_is_refused_not_renamed(text: str, problem: str) -> None:
    """`routes: {on: ...}` would otherwise name a route 'True', which no client asks for."""
    assert any(problem in error for error in errors_of(text)), errors_of(text)
    assert loads("routes: {'on': {provider: mock}}").routes.keys() == {"on"}
