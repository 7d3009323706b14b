"""gateway.server.stream_reader: how a stream fails, as the relay and every reader of an upstream stream report it."""

from __future__ import annotations

import orjson

from gateway.config.loader import parse_config
from gateway.core.tree import Target
from gateway.server.stream_reader import StreamFailure, error_event, upstream_failure


def test_an_upstream_failure_names_its_target_masks_its_secrets_and_is_a_502() -> None:
    config = parse_config("routes: {r: {name: up, provider: openai, apiKey: sk-upstream-0042}}", env={})
    target = config.routes["r"].root
    assert isinstance(target, Target)
    failure = upstream_failure(target, "the key sk-upstream-0042 was refused")
    assert (failure.message, failure.code, failure.kind, failure.status) == (
        "up: the key *** was refused", "upstream_stream_error", "upstream_error", 502,
    )  # fmt: skip
    assert str(failure) == failure.message


def test_the_in_band_error_event_is_openai_shaped() -> None:
    event = error_event("up: no bytes for 5s", "upstream_timeout")
    assert event.startswith(b"data: ") and event.endswith(b"\n\n")
    assert orjson.loads(event[len(b"data: "):]) == {
        "error": {"message": "up: no bytes for 5s", "type": "upstream_error", "param": None, "code": "upstream_timeout"}
    }
    assert orjson.loads(error_event("short", None, "server_error")[len(b"data: "):])["error"]["type"] == "server_error"


def test_a_failure_of_the_gateways_own_keeps_its_kind_and_status() -> None:
    failure = StreamFailure("the gateway ran short", "gateway_overloaded", kind="server_error", status=503)
    assert (failure.kind, failure.status) == ("server_error", 503)
