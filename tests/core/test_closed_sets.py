"""The closed sets (gateway.core): each member is the word that metrics, logs, JSON and error codes carry.

A StrEnum member compares, hashes, formats and serializes as its value: a label, a log line or
a body made from a member is byte for byte the one made from the word.
"""

from __future__ import annotations

import json
import logging
from enum import StrEnum

import orjson
import pytest

from gateway.core.breaker import SKIPPED
from gateway.core.failures import Failure
from gateway.core.memory.settings import MEMORY_TYPES, MemoryType, StoreKind
from gateway.core.settings import BreakerStoreKind
from gateway.core.tree import RESPONSES_API_MODES, ResponsesMode

WORDS: list[tuple[type[StrEnum], list[str]]] = [
    (Failure, ["timeout", "connect_error", "stream_error", "invalid_response", "circuit_open"]),
    (MemoryType, ["message_window", "token_window", "round_window", "summary_window"]),
    (StoreKind, ["sqlite", "memory", "redis"]),
    (BreakerStoreKind, ["local", "redis"]),
    (ResponsesMode, ["native", "translate"]),
]


@pytest.mark.parametrize(("kind", "words"), WORDS, ids=lambda value: getattr(value, "__name__", ""))
def test_each_member_reads_as_its_word_wherever_it_is_written(kind: type[StrEnum], words: list[str]) -> None:
    assert [member.value for member in kind] == words
    for member, word in zip(kind, words, strict=True):
        assert member == word and hash(member) == hash(word) and kind(word) is member
        assert str(member) == f"{member}" == format(member, "") == word
        assert json.dumps({"v": member}) == json.dumps({"v": word})
        assert orjson.dumps({"v": member}) == orjson.dumps({"v": word})
        record = logging.LogRecord("gateway", logging.INFO, __file__, 0, "outcome=%s", (member,), None)
        assert record.getMessage() == f"outcome={word}"


def test_the_tuples_of_words_hold_every_member_in_order() -> None:
    assert MEMORY_TYPES == tuple(MemoryType) == ("message_window", "token_window", "round_window", "summary_window")
    assert RESPONSES_API_MODES == ("native", "translate")
    assert ", ".join(MEMORY_TYPES) == "message_window, token_window, round_window, summary_window"  # a 400's message lists them


def test_a_skipped_target_is_a_failure_of_its_own() -> None:
    assert SKIPPED is Failure.CIRCUIT_OPEN
    assert orjson.dumps({"code": SKIPPED}) == b'{"code":"circuit_open"}'
