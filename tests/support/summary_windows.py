"""Summary windows in tests: a config with a main and a summary upstream, turns sized by tokens, the background jobs awaited."""

from __future__ import annotations

from typing import Any

import openai

from gateway.core.memory.summary import NOTE_PREFIX
from gateway.server.keys import MEMORY
from gateway.tokens import count_message, get_encoding
from tests.support.fakes import FakeUpstream, Step, chat_completion
from tests.support.gateway import app_of
from tests.support.memory_turns import SYSTEM

ENCODING = "o200k_base"  # the routes set no model and "chat" is unknown: o200k_base


def padded(text: str) -> str:
    """`text` made long enough (about 40 tokens) that a window of a few turns evicts."""
    return text + " " + " ".join(["memory"] * 40)


def window_of(messages: int) -> int:
    """A maxTokens that keeps `messages` padded history messages beside the system message and a padded question."""
    encoding = get_encoding(ENCODING)
    one = count_message({"role": "user", "content": padded("q1")}, encoding)
    return count_message(SYSTEM, encoding) + one * (messages + 1) + 3 + one // 2


def summary_config(main: FakeUpstream, summarizer: FakeUpstream, *, store: str, window: str = "") -> str:
    """Route `chat` (to `main`) with a summary window of two history messages, summarized by route `cheap` (`summarizer`)."""
    memory_window = window or f"memoryType: summary_window, maxTokens: {window_of(2)}, summaryRoute: cheap, summaryMaxTokens: 100"
    return f"""
memory: {{{store}}}
routes:
  chat:
    provider: openai
    baseUrl: "{main.url}"
    apiKey: k
    memory: {{{memory_window}}}
  cheap:
    provider: openai
    baseUrl: "{summarizer.url}"
    apiKey: k
"""


def summaries_from(summarizer: FakeUpstream, *texts: str) -> None:
    """Script `summarizer` to answer each summary call with the next of `texts`."""
    summarizer.then(*(Step(body=chat_completion(text)) for text in texts))


async def summaries_done(client: openai.AsyncOpenAI) -> None:
    """Return once the gateway behind `client` runs no summary job and has none waiting."""
    await app_of(client)[MEMORY].summaries.idle()


def note(text: str) -> dict[str, Any]:
    """The system note a summary is forwarded as."""
    return {"role": "system", "content": NOTE_PREFIX + text}


def summary_prompt_of(summarizer: FakeUpstream, call: int) -> str:
    """The user message (current summary and new lines) of the summary call number `call` (from 0)."""
    messages = summarizer.requests[call].body["messages"]
    assert [m["role"] for m in messages] == ["system", "user"]
    content: str = messages[1]["content"]
    return content
