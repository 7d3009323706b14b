"""The attempt's Result: three variants, each read alike (what one does not hold reads as None)."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from gateway.core.routing import Outcome
from gateway.core.sse import parse_event
from gateway.core.tree import Target
from gateway.upstream.providers.base import ReplayedStream, Reply
from gateway.upstream.results import OK, Failed, Replied, Result, Streamed

TARGET = Target(name="t", provider="mock", base_url="", api_key="", override_params=MappingProxyType({}))


def every_variant() -> list[Result]:
    stream = ReplayedStream([], {"x-ratelimit-remaining-tokens": "5"})
    return [
        Replied(target=TARGET, attempts=[], outcome=Outcome(200), detail=OK, started=1.0,
                reply=Reply(200, b"{}", headers={"retry-after": "1"})),
        Streamed(target=TARGET, attempts=[], outcome=Outcome(200), detail=OK, started=1.0, stream=stream,
                 first_event=parse_event(b"data: {}"), first_chunk={}),
        Failed(target=TARGET, attempts=[], outcome=Outcome(504, transport=True), detail="timed out", kind="timeout",
               started=1.0),
    ]  # fmt: skip


def test_each_variant_holds_its_own_and_reads_the_rest_as_absent() -> None:
    replied, streamed, failed = every_variant()
    assert replied.headers == {"retry-after": "1"} and replied.label == "200"
    assert (replied.stream, replied.first_event, replied.first_chunk, replied.rest, replied.kind) == (None, None, None, (), None)
    assert streamed.headers == {"x-ratelimit-remaining-tokens": "5"} and streamed.label == "200"
    assert (streamed.reply, streamed.retry_after, streamed.kind, streamed.rest) == (None, None, None, ())
    assert failed.headers == {} and failed.label == "timeout"
    assert (failed.reply, failed.stream, failed.first_event, failed.retry_after, failed.rest) == (None, None, None, None, ())


@pytest.mark.parametrize("result", every_variant(), ids=lambda r: type(r).__name__)
def test_a_result_is_built_by_keyword_and_holds_nothing_else(result: Result) -> None:
    with pytest.raises(AttributeError):
        result.note = "x"  # type: ignore[union-attr]  # slotted: a misspelt field cannot be set
    with pytest.raises(TypeError):
        type(result)(TARGET, [], Outcome(200), OK, 1.0)  # type: ignore[misc]
