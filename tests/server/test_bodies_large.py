"""Work per request is bounded: server.maxMessages, and large bodies parsed, checked and planned off the event loop.

Where work runs is recorded by thread (the loop's thread is the test's), never timed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from gateway.core.translate import messages as anthropic_translation
from gateway.core.translate import responses as responses_translation
from gateway.memory import turns
from gateway.memory.counting import OFF_LOOP_CHARS
from gateway.memory.turns import PLAN_ON_LOOP_MESSAGES
from gateway.server import bodies, handlers
from gateway.server.bodies import OFF_LOOP_BYTES
from gateway.server.parsing import CONTAINER_UNITS, JSON_BUDGET
from tests.support.fakes import FakeUpstream
from tests.support.gateway import GATEWAY_KEY, Gateway

JSON = dict[str, Any]


def config(upstream: FakeUpstream, tmp_path: Path, *, server: str = "{}") -> str:
    """Routes of each kind: `chat` an OpenAI-compatible upstream, `mocked` translated, `claude` an anthropic target."""
    return f"""
server: {server}
memory: {{store: sqlite, path: "{tmp_path / "memory.db"}"}}
routes:
  chat: {{provider: openai, baseUrl: "{upstream.url}", apiKey: k}}
  mocked: {{provider: mock}}
  claude: {{provider: anthropic, baseUrl: "{upstream.url.removesuffix("/v1")}", apiKey: k}}
"""


async def post(client: Any, path: str, body: JSON | bytes, **headers: str) -> tuple[int, JSON]:
    root = str(client.base_url).removesuffix("/").removesuffix("/v1")
    data = body if isinstance(body, bytes) else orjson.dumps(body)
    sent = {"Authorization": f"Bearer {GATEWAY_KEY}", "Content-Type": "application/json", **headers}
    async with (
        aiohttp.ClientSession() as session,
        session.post(root + path, data=data, headers=sent) as response,
    ):
        return response.status, orjson.loads(await response.read())


def message(text: str = "hi", role: str = "user") -> JSON:
    return {"role": role, "content": text}


# Each kind of request that carries a conversation: (path, model, the key of its items, a body of `items`).
KINDS: dict[str, tuple[str, str, str, Callable[[list[Any]], JSON]]] = {
    "chat": ("/v1/chat/completions", "chat", "messages", lambda items: {"model": "chat", "messages": items}),
    "responses": ("/v1/responses", "chat", "input", lambda items: {"model": "chat", "input": items}),
    "responses-translated": (
        "/v1/responses",
        "mocked",
        "input",
        lambda items: {"model": "mocked", "input": items},
    ),
    "messages": (
        "/v1/messages",
        "claude",
        "messages",
        lambda items: {"model": "claude", "max_tokens": 9, "messages": items},
    ),
    "messages-translated": (
        "/v1/messages",
        "mocked",
        "messages",
        lambda items: {"model": "mocked", "max_tokens": 9, "messages": items},
    ),
    "count_tokens": (
        "/v1/messages/count_tokens",
        "claude",
        "messages",
        lambda items: {"model": "claude", "messages": items},
    ),
}


@pytest.mark.parametrize("memory", [False, True], ids=["plain", "memory"])
@pytest.mark.parametrize("kind", list(KINDS))
async def test_more_items_than_max_messages_is_a_413_naming_the_setting_before_any_is_looked_at(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path, kind: str, memory: bool
) -> None:
    client = await gateway(config(upstream, tmp_path, server="{maxMessages: 5}"))
    path, _, key, body = KINDS[kind]
    items: list[Any] = [
        42,
        *[message()] * 5,
    ]  # the first is no message at all: the count alone refuses the request
    headers = {"memoryId": "m"} if memory else {}
    status, answer = await post(client, path, body(items), **headers)
    assert status == 413, answer
    error = answer["error"]
    assert "6 items, more than the 5" in error["message"] and "server.maxMessages" in error["message"]
    if path.startswith("/v1/messages"):  # Anthropic's own error shape there
        assert answer["type"] == "error" and error["type"] == "request_too_large"
    else:
        assert error == {
            "message": error["message"],
            "type": "invalid_request_error",
            "param": key,
            "code": "too_many_messages",
        }
    assert upstream.calls == 0


@pytest.mark.parametrize("memory", [False, True], ids=["plain", "memory"])
async def test_the_default_limit_takes_10000_messages_and_refuses_10001(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path, memory: bool
) -> None:
    client = await gateway(config(upstream, tmp_path))
    headers = {"memoryId": "m"} if memory else {}
    status, answer = await post(
        client, "/v1/chat/completions", {"model": "chat", "messages": [message()] * 10_001}, **headers
    )
    assert status == 413 and "10,001 items, more than the 10,000" in answer["error"]["message"]
    status, answer = await post(
        client, "/v1/chat/completions", {"model": "chat", "messages": [message()] * 10_000}, **headers
    )
    assert status == 200, answer
    assert len(upstream.requests[-1].body["messages"]) == 10_000


class Threads:
    """The threads a function returned on, recorded by a wrapper monkeypatched in its place.

    A call that raised is not recorded: planning tried on the loop gives up (within a budget)
    once it meets too much to count, and plans again on a thread.
    """

    def __init__(self, monkeypatch: pytest.MonkeyPatch, owner: object, name: str) -> None:
        self.seen: list[int] = []
        function = getattr(owner, name)

        def recorded(*args: Any, **kwargs: Any) -> Any:
            result = function(*args, **kwargs)
            self.seen.append(threading.get_ident())
            return result

        monkeypatch.setattr(owner, name, recorded)

    def off_loop(self) -> bool:
        """Whether every call so far (one at least) returned on another thread than the loop's, which runs this test."""
        return bool(self.seen) and threading.get_ident() not in self.seen

    def on_loop(self) -> bool:
        return bool(self.seen) and set(self.seen) == {threading.get_ident()}


LARGE = "x" * (OFF_LOOP_BYTES + 1)


@pytest.mark.parametrize("kind", ["chat", "responses-translated", "messages-translated"])
async def test_a_large_body_is_parsed_and_checked_off_the_loop_and_a_small_one_on_it(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    client = await gateway(config(upstream, tmp_path))
    path, _, _, body = KINDS[kind]
    for size, where in [(LARGE, Threads.off_loop), ("small", Threads.on_loop)]:
        parsed = Threads(monkeypatch, bodies, "parse_object")
        checked = Threads(monkeypatch, handlers, "check_messages")
        translated = [
            Threads(monkeypatch, anthropic_translation, "to_chat"),
            Threads(monkeypatch, responses_translation, "to_chat"),
        ]
        status, answer = await post(client, path, body([message(size)]))
        assert status == 200, answer
        assert where(parsed) and where(checked), (size[:5], parsed.seen, checked.seen)
        if kind != "chat":
            assert any(where(translation) for translation in translated)
        monkeypatch.undo()


@pytest.mark.parametrize(
    ("messages", "where"),
    [
        ([message("q"), message("a", "assistant"), message("q2")], Threads.on_loop),
        # more messages than the loop plans
        (
            [message(f"{i}", "user" if i % 2 else "assistant") for i in range(PLAN_ON_LOOP_MESSAGES + 1)],
            Threads.off_loop,
        ),
        # each message small enough to count on the loop, but not all of them
        (
            [message("w " * (OFF_LOOP_CHARS // 6), "user" if i % 2 else "assistant") for i in range(5)],
            Threads.off_loop,
        ),
    ],
    ids=["few", "many", "long"],
)
async def test_a_memory_turn_over_a_large_request_is_planned_off_the_loop(
    gateway: Gateway,
    upstream: FakeUpstream,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    messages: list[JSON],
    where: Callable[[Threads], bool],
) -> None:
    client = await gateway(
        config(upstream, tmp_path).replace("apiKey: k}", "apiKey: k, memory: {memoryType: token_window}}", 1)
    )
    planned = Threads(monkeypatch, turns, "plan_turn")
    status, answer = await post(
        client, "/v1/chat/completions", {"model": "chat", "messages": messages}, memoryId="m"
    )
    assert status == 200, answer
    assert where(planned), planned.seen
    assert upstream.requests[-1].body["messages"] == messages


def containers(count: int) -> bytes:
    return (
        b'{"model": "chat", "messages": [{"role": "user", "content": "q"}], "x": ['
        + b",".join([b"[]"] * count)
        + b"]}"
    )


async def test_a_body_too_costly_to_parse_is_a_413_and_one_just_within_is_answered(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path
) -> None:
    client = await gateway(config(upstream, tmp_path))
    within = JSON_BUDGET // (CONTAINER_UNITS + 1) - 100  # each `[]` and its comma
    status, answer = await post(client, "/v1/chat/completions", containers(within + 200))
    assert status == 413, answer
    assert (
        answer["error"]["code"] == "request_too_complex"
        and answer["error"]["type"] == "invalid_request_error"
    )
    assert upstream.calls == 0
    status, answer = await post(client, "/v1/chat/completions", containers(within))
    assert status == 200, answer
    assert len(upstream.requests[-1].body["x"]) == within


async def test_a_large_text_full_of_json_punctuation_is_no_costly_body(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path
) -> None:
    """Its bytes' count of `,` `:` `[` `{` is far over the budget; inside a string, they cost nothing."""
    client = await gateway(config(upstream, tmp_path))
    text = '[{"a": 1, "b": [2, 3]}, "\\"quoted\\"", {}],' * 80_000
    status, answer = await post(
        client, "/v1/chat/completions", {"model": "chat", "messages": [message(text)]}
    )
    assert status == 200, answer
    assert upstream.requests[-1].body["messages"][0]["content"] == text
