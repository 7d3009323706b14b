"""ResponseChain: a chain of recorded responses read newest first, only as far as a window reaches."""

from __future__ import annotations

import pytest

from gateway.core.memory.entries import Entry
from gateway.core.memory.reach import Reach
from gateway.memory.store import InProcessStore
from gateway.server.response_chain import Link, ResponseChain, read_link, stored_response
from tests.support.memory_stores import Clock


class CountedStore(InProcessStore):
    """An in-process store that counts its value reads."""

    reads = 0

    async def get_value(self, key: str) -> str | None:
        self.reads += 1
        return await super().get_value(key)


def turn(number: int) -> list[Entry]:
    return [Entry({"role": "user", "content": f"Q{number}"}, {"o200k_base": 5}),
            Entry({"role": "assistant", "content": f"A{number}"}, {"o200k_base": 5})]  # fmt: skip


async def chain_of(store: InProcessStore, length: int, *, tenant: str = "t") -> Link:
    """Record `length` responses, each continuing the one before; the last one's link."""
    link = None
    for number in range(length):
        await ResponseChain(store, previous=link, keep=True).append((tenant, f"resp_{number}"), turn(number), system=None)
        link = await read_link(store, tenant, f"resp_{number}")
        assert link is not None
    assert link is not None
    return link


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(clock: Clock) -> CountedStore:
    return CountedStore(ttl_seconds=100, max_messages=1000, lock_timeout=5, clock=clock)


async def test_a_long_chain_is_read_only_as_far_as_the_reach(store: CountedStore) -> None:
    last = await chain_of(store, 50)
    assert last.length == 100
    store.reads = 0
    conversation = await ResponseChain(store, previous=last, keep=True).load_tail(("t", "resp_new"), Reach(messages=5))
    assert conversation is not None
    assert [entry.message["content"] for entry in conversation.entries] == ["Q47", "A47", "Q48", "A48", "Q49", "A49"]
    assert conversation.older == 94 and store.reads == 2  # the last link was in hand: two more read


async def test_a_wider_reach_reads_on_from_where_the_first_stopped(store: CountedStore) -> None:
    chain = ResponseChain(store, previous=await chain_of(store, 10), keep=True)
    await chain.load_tail(("t", "r"), Reach(messages=3))
    store.reads = 0
    conversation = await chain.load_tail(("t", "r"), Reach(messages=64))
    assert conversation is not None and len(conversation.entries) == 20 and conversation.older == 0
    assert store.reads == 8  # links 0..7: the two newest were read by the first reach


async def test_an_expired_link_ends_the_chain(store: CountedStore, clock: Clock) -> None:
    first = await chain_of(store, 1)
    clock.now += 60
    second = ResponseChain(store, previous=first, keep=True)
    await second.append(("t", "resp_next"), turn(1), system=None)
    clock.now += 60  # resp_0 expired, resp_next not
    newest = await read_link(store, "t", "resp_next")
    assert newest is not None and await read_link(store, "t", "resp_0") is None
    conversation = await ResponseChain(store, previous=newest, keep=True).load_tail(("t", "r"), Reach(messages=10))
    assert conversation is not None and len(conversation.entries) == 2 and conversation.older == 0


async def test_another_tenants_record_and_a_garbled_one_are_unknown(store: CountedStore) -> None:
    await chain_of(store, 1, tenant="team-a")
    assert await read_link(store, "team-b", "resp_0") is None
    await store.put_value("chain:resp_bad", '{"tenant": "t", "entries": 3}')
    assert await read_link(store, "t", "resp_bad") is None


async def test_store_false_records_nothing(store: CountedStore) -> None:
    await ResponseChain(store, previous=None, keep=False).append(("t", "resp_x"), turn(0), system=None)
    assert await store.get_value("chain:resp_x") is None


async def test_a_record_reads_back_as_a_response_with_its_reply_as_output_items(store: CountedStore) -> None:
    call = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    entries = [Entry({"role": "user", "content": "Q"}),
               Entry({"role": "assistant", "content": [{"type": "text", "text": "Let me look."}], "tool_calls": [call]}),
               Entry({"role": "assistant", "content": None, "refusal": "No."})]  # fmt: skip
    chain = ResponseChain(store, previous=None, keep=True, created_at=1700000000, model="chat")
    await chain.append(("t", "resp_a"), entries, system=None)
    link = await read_link(store, "t", "resp_a")
    assert link is not None
    response = stored_response(link)
    assert {key: response[key] for key in ("id", "object", "created_at", "status", "model", "previous_response_id")} == {
        "id": "resp_a", "object": "response", "created_at": 1700000000, "status": "completed", "model": "chat",
        "previous_response_id": None,
    }
    assert response["output"] == [
        {"id": "msg_a_0", "type": "message", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "Let me look.", "annotations": [], "logprobs": []}]},
        {"id": "fc_a_1", "type": "function_call", "status": "completed", "call_id": "call_1", "name": "f", "arguments": "{}"},
        {"id": "msg_a_2", "type": "message", "role": "assistant", "status": "completed",
         "content": [{"type": "refusal", "refusal": "No."}]},
    ]  # fmt: skip


async def test_a_record_written_before_time_and_model_were_kept_reads_with_zero_and_empty(store: CountedStore) -> None:
    await store.put_value("chain:resp_old", '{"tenant": "t", "previous": null, "length": 0, "entries": []}')
    link = await read_link(store, "t", "resp_old")
    assert link is not None and (link.created_at, link.model) == (0, "")
    assert stored_response(link)["output"] == []
