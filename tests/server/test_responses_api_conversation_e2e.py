"""`conversation` on POST /v1/responses: a memory conversation of the gateway, on any route.

The client is the official openai SDK; upstreams are scripted chat completions servers and the
built-in mock. A conversation's id is a memoryId: turns through Chat Completions with that
memoryId and through Responses with that conversation are one history, which no upstream sees
the id of.
"""

from __future__ import annotations

from pathlib import Path

import openai
import orjson
import pytest

from tests.support.fakes import FakeUpstream, Step, broken_stream, chat_completion, stream_of
from tests.support.gateway import GATEWAY_KEY, Gateway
from tests.support.memory_turns import a, stored, u
from tests.support.openai_errors import error_object

TWO_KEYS = f"auth: {{keys: [{{name: team-a, key: {GATEWAY_KEY}}}, {{name: team-b, key: other-key}}]}}"


@pytest.fixture(params=["sqlite", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The memory block of a config, on each store that outlives a process."""
    if request.param == "sqlite":
        return f'memory: {{store: sqlite, path: "{tmp_path / "m.db"}"}}'
    return f'memory: {{store: redis, url: "{request.getfixturevalue("redis_url")}"}}'


def config(upstream: FakeUpstream, store: str, *, target: str = "responsesApi: translate", window: str = "") -> str:
    """Route `chat` to `upstream` (`target`: more of its settings), with `window` as the route's memory."""
    route_memory = f", memory: {{{window}}}" if window else ""
    return f'{TWO_KEYS}\n{store}\nroutes: {{chat: {{provider: openai, baseUrl: "{upstream.url}", apiKey: k, {target}{route_memory}}}}}'


def conversation_id(request: pytest.FixtureRequest) -> str:
    """An id no other test (sharing the session's Redis) uses."""
    return f"conv_{abs(hash(request.node.nodeid)):x}"


async def test_turns_of_a_conversation_see_the_ones_before(
    gateway: Gateway, upstream: FakeUpstream, store: str, request: pytest.FixtureRequest
) -> None:
    upstream.then(Step(body=chat_completion("A1")), Step(body=chat_completion("A2")))
    client = await gateway(config(upstream, store))
    conversation = conversation_id(request)
    first = await client.responses.create(model="chat", input="Q1", conversation=conversation)
    raw = await client.responses.with_raw_response.create(model="chat", input="Q2", conversation={"id": conversation})
    second = raw.parse()
    assert (first.output_text, second.output_text) == ("A1", "A2")
    assert upstream.requests[1].body["messages"] == [u("Q1"), a("A1"), u("Q2")]
    assert second.conversation is not None and second.conversation.id == conversation
    assert (raw.headers["x-memory-id"], raw.headers["x-memory-history"]) == (conversation, "2")
    status, kept = await stored(client, conversation)
    assert status == 200 and kept["messages"] == [u("Q1"), a("A1"), u("Q2"), a("A2")]


async def test_a_conversation_on_the_mock(gateway: Gateway, tmp_path: Path) -> None:
    client = await gateway(f'memory: {{store: sqlite, path: "{tmp_path / "m.db"}"}}\nroutes: {{mock-1: {{provider: mock}}}}')
    await client.responses.create(model="mock-1", input="What is the weather in Rome?", conversation="user-42")
    second = await client.responses.create(model="mock-1", input="and in Paris?", conversation="user-42")
    assert "received 3 messages" in second.output_text


async def test_a_memoryid_turn_on_chat_completions_is_in_the_conversation(
    gateway: Gateway, upstream: FakeUpstream, store: str, request: pytest.FixtureRequest
) -> None:
    upstream.then(Step(body=chat_completion("From chat")), Step(body=chat_completion("From responses")))
    client = await gateway(config(upstream, store))
    conversation = conversation_id(request)
    await client.chat.completions.create(model="chat", messages=[u("Q1")], extra_headers={"memoryId": conversation})  # type: ignore[list-item]
    await client.responses.create(model="chat", input="Q2", conversation=conversation)
    assert upstream.requests[1].body["messages"] == [u("Q1"), a("From chat"), u("Q2")]
    _, kept = await stored(client, conversation)
    assert kept["messages"][-1] == a("From responses")


async def test_the_routes_window_trims_the_history(gateway: Gateway, upstream: FakeUpstream, tmp_path: Path) -> None:
    client = await gateway(config(upstream, f'memory: {{store: sqlite, path: "{tmp_path / "m.db"}"}}', window="maxMessages: 3"))
    for number in range(4):
        raw = await client.responses.with_raw_response.create(model="chat", input=f"Q{number}", conversation="c")
    assert upstream.requests[-1].body["messages"] == [u("Q2"), a("Hello from upstream"), u("Q3")]
    assert (raw.headers["x-memory-history"], raw.headers["x-memory-evicted"]) == ("2", "4")


async def test_a_stream_stores_its_turn_once_complete_and_a_cut_off_one_nothing(
    gateway: Gateway, upstream: FakeUpstream, store: str, request: pytest.FixtureRequest
) -> None:
    upstream.then(Step(events=stream_of("Hel", "lo")), broken_stream())
    client = await gateway(config(upstream, store))
    conversation = conversation_id(request)
    async with client.responses.stream(model="chat", input="Q1", conversation=conversation) as events:
        assert (await events.get_final_response()).output_text == "Hello"
    cut = await client.responses.create(model="chat", input="Q2", conversation=conversation, stream=True)
    assert [event.type async for event in cut][-1] == "error"
    _, kept = await stored(client, conversation)
    assert kept["messages"] == [u("Q1"), a("Hello")]


async def test_another_key_has_its_own_conversation_of_that_id(gateway: Gateway, upstream: FakeUpstream, tmp_path: Path) -> None:
    client = await gateway(config(upstream, f'memory: {{store: sqlite, path: "{tmp_path / "m.db"}"}}'))
    await client.responses.create(model="chat", input="secret of team-a", conversation="shared-id")
    other = client.with_options(api_key="other-key")
    await other.responses.create(model="chat", input="Q of team-b", conversation="shared-id")
    assert upstream.requests[-1].body["messages"] == [u("Q of team-b")]
    status, _ = await stored(client, "shared-id", key="other-key")
    assert status == 200
    _, mine = await stored(client, "shared-id")
    assert mine["messages"] == [u("secret of team-a"), a("Hello from upstream")]


@pytest.mark.parametrize(
    ("options", "headers", "param"),
    [
        ({"conversation": "bad id!"}, {}, "conversation"),
        ({"conversation": {"id": 7}}, {}, "conversation.id"),
        ({"conversation": ["c"]}, {}, "conversation"),
        ({"conversation": "c", "previous_response_id": "resp_1"}, {}, "previous_response_id"),
        ({"conversation": "c"}, {"memoryId": "d"}, "conversation"),
        ({"previous_response_id": "resp_1"}, {"memoryId": "d"}, "previous_response_id"),
    ],
    ids=["bad-id", "id-not-a-string", "not-a-string", "with-previous", "other-memoryid", "previous-with-memoryid"],
)
async def test_a_bad_or_doubled_history_is_a_400_naming_the_param(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path, options: dict[str, object], headers: dict[str, str], param: str
) -> None:
    client = await gateway(config(upstream, f'memory: {{store: sqlite, path: "{tmp_path / "m.db"}"}}'))
    with pytest.raises(openai.BadRequestError) as caught:
        await client.responses.create(model="chat", input="Q", extra_headers=headers, extra_body=options)
    error = error_object(caught.value)
    assert (error["type"], error["param"]) == ("invalid_request_error", param)
    assert upstream.calls == 0


async def test_the_same_id_as_memoryid_and_conversation_is_one_history(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path
) -> None:
    client = await gateway(config(upstream, f'memory: {{store: sqlite, path: "{tmp_path / "m.db"}"}}'))
    await client.responses.create(model="chat", input="Q1", conversation="c", extra_headers={"memoryId": "c"})
    _, kept = await stored(client, "c")
    assert orjson.dumps(kept["messages"]) == orjson.dumps([u("Q1"), a("Hello from upstream")])
