"""Memory headers read from aiohttp's request headers by lookup answer as a look at every header does.

aiohttp hands a handler a CIMultiDictProxy: `read_memory_headers` asks it for each spelling (its
lookups ignore case), and reads any other mapping header by header. Every input here is one a
careless lookup would read otherwise: odd case, repeated headers, empty values, non-ASCII.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import pytest
from hypothesis import given
from hypothesis import strategies as st
from multidict import CIMultiDict, CIMultiDictProxy

from gateway.core.errors import InvalidRequestError
from gateway.core.memory.settings import MemorySettings, MemoryType
from gateway.memory.headers import MemoryAsk, asks_for_memory, read_memory_headers

DEFAULTS = MemorySettings()
LIMITS = MemorySettings(max_messages=200, max_tokens=128000, max_rounds=50, max_chars=400000)
Pairs = list[tuple[str, str]]


class Scanned(Mapping[str, str]):
    """Header lines as a mapping that is not aiohttp's: read_memory_headers looks at every line of it."""

    def __init__(self, pairs: Pairs) -> None:
        self.pairs = pairs

    def __getitem__(self, key: str) -> str:
        return next(value for name, value in self.pairs if name == key)

    def __iter__(self) -> Iterator[str]:
        return (name for name, _ in self.pairs)

    def __len__(self) -> int:
        return len(self.pairs)

    def items(self) -> Iterator[tuple[str, str]]:  # type: ignore[override]
        return iter(self.pairs)


def looked_up(pairs: Pairs) -> CIMultiDictProxy[str]:
    return CIMultiDictProxy(CIMultiDict(pairs))


def read(headers: Mapping[str, str], limits: MemorySettings = LIMITS) -> MemoryAsk | InvalidRequestError | None:
    """What read_memory_headers answers, its error as a value."""
    try:
        return read_memory_headers(headers, DEFAULTS, limits)
    except InvalidRequestError as error:
        return error


def both(pairs: Pairs) -> MemoryAsk | InvalidRequestError | None:
    """The answer by lookup, checked to be the answer of the scan."""
    fast, scanned = read(looked_up(pairs)), read(Scanned(pairs))
    if isinstance(fast, InvalidRequestError):
        assert isinstance(scanned, InvalidRequestError) and (fast.param, str(fast)) == (scanned.param, str(scanned))
    else:
        assert fast == scanned
    assert asks_for_memory(looked_up(pairs)) == asks_for_memory(Scanned(pairs)) == (fast is not None)
    return fast


def settings(pairs: Pairs) -> MemorySettings:
    answer = both(pairs)
    assert isinstance(answer, MemoryAsk), answer
    return answer.settings


def param(pairs: Pairs) -> str | None:
    answer = both(pairs)
    assert isinstance(answer, InvalidRequestError), answer
    return answer.param


@pytest.mark.parametrize("name", ["MEMORYID", "memoryid", "MemoryId", "X-MEMORY-ID", "x-Memory-id"])
def test_a_memory_id_in_any_case_is_read(name: str) -> None:
    answer = both([("Host", "h"), (name, "conv")])
    assert isinstance(answer, MemoryAsk) and answer.memory_id == "conv"


@pytest.mark.parametrize(
    ("pairs", "expected"),
    [
        ([("MAXMESSAGES", "7")], 7),
        ([("maxmessages", "7")], 7),
        ([("X-MEMORY-MAX-MESSAGES", "7")], 7),
        ([("maxMessages", "7"), ("maxMessages", "9")], 7),  # sent twice: the first counts
        ([("maxMessages", "7"), ("MAXMESSAGES", "9")], 7),  # twice in two cases: still the first
        ([("x-memory-max-messages", "9"), ("maxMessages", "7")], 7),  # the plain spelling wins, sent second
        ([("maxMessages", "7"), ("x-memory-max-messages", "9")], 7),
        ([("x-memory-max-messages", "7"), ("X-Memory-Max-Messages", "9")], 7),
        ([("maxMessages", " 007 ")], 7),
        ([("maxMessages", "0" * 60 + "7")], 7),  # too long to cache: read each time
        ([], DEFAULTS.max_messages),
    ],
)
def test_which_window_header_counts(pairs: Pairs, expected: int) -> None:
    assert settings([("memoryId", "c"), *pairs]).max_messages == expected


@pytest.mark.parametrize(
    ("pairs", "bad"),
    [
        ([("memoryId", "")], "memoryId"),
        ([("memoryId", "c"), ("memoryId", "")], None),  # the first counts
        ([("memoryId", ""), ("memoryId", "c")], "memoryId"),
        ([("x-memory-id", "")], "x-memory-id"),
        ([("x-memory-id", "ok"), ("MEMORYID", "bad id")], "memoryId"),  # the plain one counts, and is named
        ([("memoryId", "c"), ("maxTokens", "")], "maxTokens"),
        ([("memoryId", "c"), ("maxTokens", "5"), ("maxTokens", "")], None),
        ([("memoryId", "c"), ("maxTokens", ""), ("maxTokens", "5")], "maxTokens"),
        ([("memoryId", "c"), ("x-memory-max-tokens", "²")], "x-memory-max-tokens"),
        ([("memoryId", "c"), ("MAXTOKENS", "5"), ("x-memory-max-tokens", "²")], None),  # never read
        ([("memoryId", "c"), ("memoryType", "tökén_window")], "memoryType"),
        ([("memoryId", "c"), ("memoryType", "TOKEN_WINDOW")], "memoryType"),  # names ignore case, values do not
        ([("memoryId", "c"), ("maxChars", "٣")], "maxChars"),
        ([("memoryId", "c"), ("maxChars", "1" + "0" * 40)], "maxChars"),  # too long to cache, and too big
        ([("memoryId", "cönv")], "memoryId"),
        ([("memoryId", "c"), ("maxRounds", "51"), ("maxMessages", "0")], "maxMessages"),  # the first in _HEADERS' order
    ],
)
def test_a_bad_memory_header_is_named(pairs: Pairs, bad: str | None) -> None:
    """An empty, non-ASCII or out-of-range value is a 400 naming the spelling sent, if it is the one that counts."""
    if bad is None:
        assert isinstance(both(pairs), MemoryAsk)
    else:
        assert param(pairs) == bad


@pytest.mark.parametrize(
    "pairs",
    [[], [("Host", "h")], [("memoryType", "token_window"), ("maxTokens", "5")], [("memoryIds", "c")], [("x-memory-ids", "c")],
     [("memory-id", "c")], [("memory\u0131d", "c")], [("memoryİd", "c")]],
    ids=["none", "other", "window-only", "plural", "kebab-plural", "no-x", "dotless-i", "dotted-capital-i"],
)
def test_without_a_memory_id_there_is_no_memory(pairs: Pairs) -> None:
    """No spelling of memoryId, even one whose upper or lower case is near it: no memory, the window unread."""
    assert both(pairs) is None


def test_a_cached_window_is_read_again_for_other_limits() -> None:
    pairs = [("memoryId", "c"), ("maxTokens", "5000")]
    assert settings(pairs).max_tokens == 5000
    error = read(looked_up(pairs), MemorySettings(max_tokens=4999))
    assert isinstance(error, InvalidRequestError) and error.param == "maxTokens"


def test_a_bad_window_header_is_refused_each_time() -> None:
    """Only what was read is cached: the second ask of a bad header is refused as the first."""
    for _ in range(2):
        assert param([("memoryId", "c"), ("memoryType", "forever")]) == "memoryType"


NAMES = ["memoryId", "MEMORYID", "x-memory-id", "X-Memory-Id", "memoryType", "x-memory-type", "maxMessages",
         "MAXMESSAGES", "x-memory-max-messages", "maxTokens", "x-MEMORY-max-tokens", "maxRounds", "x-memory-max-rounds",
         "maxChars", "MaxChars", "x-memory-max-chars", "Host", "memoryIds", "x-memory-"]
VALUES = st.one_of(
    st.sampled_from(["", " ", "c", "conv-1", "0", "7", " 12 ", "007", "201", "message_window", "token_window",
                     "round_window", "²", "٣", "-1", "1e3", "9" * 30, "0" * 30 + "5"]),
    st.text(max_size=6),
)


@given(st.lists(st.tuples(st.sampled_from(NAMES), VALUES), max_size=8))
def test_lookup_and_scan_agree(pairs: Pairs) -> None:
    both(pairs)


def test_a_cached_window_is_read_again_for_other_defaults() -> None:
    """Another route's defaults under the same window headers: its own settings, not the cached ones."""
    pairs = [("memoryId", "c"), ("maxTokens", "5000")]
    assert settings(pairs).max_chars == DEFAULTS.max_chars
    other = read_memory_headers(looked_up(pairs), MemorySettings(max_chars=7), LIMITS)
    assert other is not None and (other.settings.max_chars, other.settings.max_tokens) == (7, 5000)


@pytest.mark.parametrize("spelling", ["memoryType", "x-memory-type"])
def test_a_memory_type_header_chooses_its_enum_member(spelling: str) -> None:
    asked = both([("memoryId", "c"), (spelling, " round_window ")])
    assert isinstance(asked, MemoryAsk) and asked.settings.memory_type is MemoryType.ROUND_WINDOW
