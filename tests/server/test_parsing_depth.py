"""Request bodies nested deeper than MAX_JSON_DEPTH: a 400 at the door, before orjson writes any of it.

orjson 3.13.0 corrupts the heap writing some structures nested 211-252 deep (the process dies of
SIGABRT); the gateway writes a body again for memory, overrideParams and translations. The end to
end test runs a real `gateway serve` process, so a crash shows as a dead process, not a dead pytest.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from gateway.core.errors import InvalidRequestError
from gateway.core.nesting import MAX_JSON_DEPTH, nests_deeper
from gateway.server.inline import MAX_DEPTH as INLINE_DEPTH
from gateway.server.parsing import parse_object
from tests.support.processes import running_gateway

LIMIT = MAX_JSON_DEPTH
HELLO = [{"role": "user", "content": "hi"}]


def dumps(value: Any) -> bytes:
    """`value` as JSON, written by the standard library: orjson itself may crash writing it."""
    return json.dumps(value).encode()


def nested(levels: int, kind: str) -> Any:
    """`levels` arrays (kind "a") or objects (kind "o") within one another."""
    value: Any = 0 if kind == "o" else []
    for _ in range(levels - 1 if kind == "a" else levels):
        value = [value] if kind == "a" else {"k": value}
    return value


# Where a client's nesting sits in a chat body, and how many levels that place adds above it.
PLACES: dict[str, tuple[Callable[[Any], dict[str, Any]], int]] = {
    "metadata": (lambda deep: {"model": "m", "messages": HELLO, "x": [deep] * 10}, 2),
    "content": (lambda deep: {"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": "hi", "x": deep}]}]}, 5),
    "tools": (
        lambda deep: {
            "model": "m",
            "messages": HELLO,
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "x": deep}}}],
        },
        5,
    ),
    "response_format": (
        lambda deep: {
            "model": "m",
            "messages": HELLO,
            "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": {"x": deep}}},
        },
        4,
    ),
}


def body_at(place: str, depth: int, kind: str) -> bytes:
    """A chat body whose deepest nesting, counted from the body itself, is `depth` levels."""
    build, above = PLACES[place]
    return dumps(build(nested(depth - above, kind)))


@pytest.mark.parametrize("kind", ["a", "o"])
@pytest.mark.parametrize("levels", [1, 2, LIMIT - 1, LIMIT, LIMIT + 1, LIMIT + 2, 254, 600])
def test_nests_deeper_counts_levels(levels: int, kind: str) -> None:
    value = nested(levels, kind)
    assert nests_deeper(value, LIMIT) is (levels > LIMIT)
    assert nests_deeper(value, levels) is False
    assert nests_deeper(value, levels - 1) is True
    assert nests_deeper("scalar", 0) is False


@pytest.mark.parametrize("kind", ["a", "o"])
@pytest.mark.parametrize("place", list(PLACES))
@pytest.mark.parametrize("depth", [LIMIT - 1, LIMIT, LIMIT + 1, LIMIT + 2, 240, 250, 251, 252, 253, 254, 255, 260])
def test_parse_object_refuses_bodies_past_the_limit(place: str, depth: int, kind: str) -> None:
    raw = body_at(place, depth, kind)
    if depth <= LIMIT:
        assert parse_object(raw) == orjson.loads(raw)
        return
    with pytest.raises(InvalidRequestError) as caught:
        parse_object(raw)
    assert caught.value.code == "invalid_json" and f"deeper than {LIMIT} levels" in str(caught.value)


def test_many_shallow_containers_are_walked_and_pass() -> None:
    """More brackets than the limit (in strings too) is not nesting: the exact walk lets it through."""
    messages = [{"role": "user", "content": "[{" * 100}] * 300
    raw = dumps({"model": "m", "messages": messages, "x": nested(LIMIT - 1, "a")})
    assert parse_object(raw)["messages"] == messages


CONFIG = """
memory: {store: memory}
requestConfig: {enabled: true, allowedHosts: ["127.0.0.1"]}
routes: {m: {provider: mock}}
"""


def cases() -> list[tuple[str, str, bytes, dict[str, str], int]]:
    """(what, path, body, headers, expected status) for every entry point and place."""
    found = []
    for depth in (LIMIT - 1, LIMIT, LIMIT + 1, LIMIT + 2, 240, 249, 250, 251, 252, 253, 254, 255, 260):
        status = 200 if depth <= LIMIT else 400
        for kind in ("a", "o"):
            for place in PLACES:
                body = body_at(place, depth, kind)
                found.append((f"{place} {kind}{depth}", "/v1/chat/completions", body, {"memoryId": "deep"}, status))
            deep = nested(depth - 2, kind)
            messages = dumps({"model": "m", "max_tokens": 10, "messages": HELLO, "x": [deep] * 10})
            found.append((f"messages {kind}{depth}", "/v1/messages", messages, {}, 400 if depth > LIMIT else 0))
            responses = dumps({"model": "m", "input": "hi", "x": [deep] * 10})
            found.append((f"responses {kind}{depth}", "/v1/responses", responses, {}, 400 if depth > LIMIT else 0))
        # Past OFF_LOOP_BYTES: parsed and checked on a body thread.
        padded = dumps({"model": "m", "messages": HELLO, "pad": "p" * 300_000, "x": [nested(depth - 2, "a")] * 10})
        found.append((f"large a{depth}", "/v1/chat/completions", padded, {"memoryId": "big"}, status))
    return found


def inline_header(depth: int) -> str:
    """An x-gateway-config tree whose overrideParams nest `depth` levels in all."""
    return dumps({"provider": "mock", "overrideParams": {"x": nested(depth - 2, "o")}}).decode()


async def test_a_gateway_process_answers_deep_bodies_with_a_400_and_lives(tmp_path: Path) -> None:
    config = tmp_path / "gateway.yaml"
    config.write_text(CONFIG)
    async with running_gateway(config) as gateway, aiohttp.ClientSession() as session:
        root = f"http://127.0.0.1:{gateway.port}"

        async def post(path: str, body: bytes, headers: dict[str, str]) -> tuple[int, Any]:
            async with session.post(
                root + path, data=body, headers={"Content-Type": "application/json", **headers}
            ) as response:
                return response.status, await response.json(content_type=None)

        for what, path, body, headers, expected in cases():
            status, answer = await post(path, body, headers)
            assert gateway.process.poll() is None, f"{what}: the gateway died"
            if expected == 400:
                assert status == 400, (what, answer)
                if path == "/v1/messages":  # Anthropic's error shape
                    assert answer["type"] == "error" and answer["error"]["type"] == "invalid_request_error", answer
                else:
                    assert answer["error"]["code"] == "invalid_json", (what, answer)
                assert f"deeper than {LIMIT} levels" in answer["error"]["message"]
            elif expected:
                assert status == expected, (what, answer)
            else:  # a body within the limit is not refused for its nesting
                assert status != 500 and "deeper than" not in str(answer), (what, answer)
        for depth in (INLINE_DEPTH, INLINE_DEPTH + 1, LIMIT + 1, 250, 251, 252):
            headers = {"x-gateway-config": inline_header(depth)}
            status, answer = await post("/v1/chat/completions", dumps({"model": "m", "messages": HELLO}), headers)
            assert gateway.process.poll() is None, f"inline {depth}: the gateway died"
            if depth <= INLINE_DEPTH:
                assert status == 200, answer
            else:
                assert status == 400 and answer["error"]["code"] == "invalid_config", answer
                assert f"deeper than {INLINE_DEPTH} levels" in answer["error"]["message"]
        status, _ = await post("/v1/chat/completions", dumps({"model": "m", "messages": HELLO}), {"memoryId": "deep"})
        assert status == 200
        assert gateway.process.poll() is None
