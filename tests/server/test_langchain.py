"""LangChain agents over server-side memory: they resend their whole history, re-serialized."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    message_chunk_to_message,
    trim_messages,
)
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from tests.support.fakes import FakeUpstream, Step, chat_completion, stream_of
from tests.support.gateway import GATEWAY_KEY, Gateway
from tests.support.memory_turns import SYSTEM, a, config, received, stored, u
from tests.support.tool_calls import CALL, CALLING, calling_answer, calling_stream

QUESTION = "Weather in Paris?"
ANSWER = "It is sunny in Paris."
RESULT = {"role": "tool", "tool_call_id": "call_1", "content": "sunny in Paris"}
AGAIN = {"role": "assistant", "tool_calls": [{**CALL, "id": "call_2"}]}
RESULT_AGAIN = {**RESULT, "tool_call_id": "call_2"}


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def chat_model(client: Any, memory_id: str) -> ChatOpenAI:
    return ChatOpenAI(
        base_url=str(client.base_url),
        api_key=GATEWAY_KEY,  # type: ignore[arg-type]
        model="chat",
        max_retries=0,
        default_headers={"memoryId": memory_id},
    )


async def reply(model: Any, messages: list[BaseMessage], *, stream: bool) -> BaseMessage:
    if not stream:
        answer: BaseMessage = await model.ainvoke(messages)
        return answer
    whole = None
    async for part in model.astream(messages):
        whole = part if whole is None else whole + part
    return message_chunk_to_message(whole)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_agent_tool_loop_is_not_doubled(gateway: Gateway, upstream: FakeUpstream, tmp_path: Path, stream: bool) -> None:
    client = await gateway(config(upstream, tmp_path))
    if stream:
        upstream.then(Step(events=calling_stream()), Step(events=stream_of(ANSWER)), Step(events=stream_of("Rain.")))
    else:
        upstream.then(Step(body=calling_answer()), Step(body=chat_completion(ANSWER)), Step(body=chat_completion("Rain.")))
    model = chat_model(client, "agent").bind_tools([get_weather])

    # the loop of an agent: the model asks for a tool, the agent runs it and resends everything
    messages: list[BaseMessage] = [SystemMessage(SYSTEM["content"]), HumanMessage(QUESTION)]
    calling = await reply(model, messages, stream=stream)
    assert isinstance(calling, AIMessage) and calling.tool_calls[0]["args"] == {"city": "Paris"}
    messages.append(calling)
    messages.extend([await get_weather.ainvoke(call) for call in calling.tool_calls])
    answer = await reply(model, messages, stream=stream)
    assert answer.content == ANSWER
    messages += [answer, HumanMessage("And tomorrow?")]
    await reply(model, messages, stream=stream)

    assert received(upstream) == [
        [SYSTEM, u(QUESTION)],
        [SYSTEM, u(QUESTION), CALLING, RESULT],  # OpenAI would reject a doubled one with a 400
        [SYSTEM, u(QUESTION), CALLING, RESULT, a(ANSWER), u("And tomorrow?")],
    ]
    status, body = await stored(client, "agent")
    assert status == 200 and body["system"] == [SYSTEM]
    assert body["messages"] == [u(QUESTION), CALLING, RESULT, a(ANSWER), u("And tomorrow?"), a("Rain.")]


async def test_named_create_agent_is_not_doubled(gateway: Gateway, upstream: FakeUpstream, tmp_path: Path) -> None:
    # create_agent(name=...) also puts its name on every reply it resends
    client = await gateway(config(upstream, tmp_path))
    upstream.then(Step(body=calling_answer()), Step(body=chat_completion(ANSWER)),
                  Step(body=calling_answer(AGAIN)), Step(body=chat_completion("Still sunny.")))
    model: BaseChatModel = chat_model(client, "named")
    agent = create_agent(model, [get_weather], system_prompt=SYSTEM["content"], name="weather_agent")

    state = await agent.ainvoke({"messages": [HumanMessage(QUESTION)]})
    assert [m.name for m in state["messages"] if isinstance(m, AIMessage)] == ["weather_agent"] * 2
    state = await agent.ainvoke({"messages": [*state["messages"], HumanMessage("Sure?")]})
    assert state["messages"][-1].content == "Still sunny."

    first_run = [u(QUESTION), CALLING, RESULT, a(ANSWER)]
    assert received(upstream)[1] == [SYSTEM, u(QUESTION), CALLING, RESULT]
    assert received(upstream)[3] == [SYSTEM, *first_run, u("Sure?"), AGAIN, RESULT_AGAIN]
    _, body = await stored(client, "named")
    assert body["messages"] == [*first_run, u("Sure?"), AGAIN, RESULT_AGAIN, a("Still sunny.")]


async def test_trimmed_resend_is_not_doubled(gateway: Gateway, upstream: FakeUpstream, tmp_path: Path) -> None:
    # a client that trims its own copy resends only the newest messages, a tail of the stored history
    client = await gateway(config(upstream, tmp_path))
    upstream.then(*(Step(body=chat_completion(f"r{i}")) for i in (1, 2, 3)))
    model = chat_model(client, "trimmed")
    messages: list[BaseMessage] = [SystemMessage(SYSTEM["content"])]
    for question in ("q1", "q2", "q3"):
        messages.append(HumanMessage(question))
        window = trim_messages(messages, max_tokens=4, token_counter=len, start_on="human", include_system=True)
        messages.append(await model.ainvoke(window))
    assert window == [messages[0], *messages[3:6]]  # the last request resent [system, q2, r2, q3]

    assert received(upstream)[2] == [SYSTEM, u("q1"), a("r1"), u("q2"), a("r2"), u("q3")]
    _, body = await stored(client, "trimmed")
    assert body["messages"] == [u("q1"), a("r1"), u("q2"), a("r2"), u("q3"), a("r3")]
