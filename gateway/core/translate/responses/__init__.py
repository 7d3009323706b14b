"""The OpenAI Responses API served by a chat completions upstream: requests, answers and streams.

Pure translation, no I/O: `to_chat` turns a Responses request into a chat completions payload,
`from_chat` turns the chat answer into a Responses `response` object, and `StreamTranslator`
turns chat chunks into Responses SSE events as they arrive.

What chat completions cannot do is refused with a TranslationError (a 400 naming the dotted
param): OpenAI's built-in tools other than web search, state kept by a Responses upstream
(`previous_response_id`, `conversation`, `prompt`, `background`, `context_management`,
`moderation`), file ids and file URLs, and input items other than messages, function calls and
their outputs. What only tunes OpenAI's own service is dropped: `metadata` (echoed back), `store`
(a translated response is never stored), `include`, `truncation`, `max_tool_calls`,
`top_logprobs`, `stream_options`, `prompt_cache_options`, `client_metadata`, `reasoning.summary`,
`reasoning.context` and `reasoning` input items. An offered web search tool is dropped too (the
model answers without searching; a tool_choice that forces it is refused). What is dropped is
told to the log (`dropped.DROPS`), once per field at INFO. Keys this module does not know pass
through to the chat payload, as the chat endpoint passes a client's extras.

Tools grouped in a `namespace` (Codex sends its agent tools so) become chat functions named
`<namespace>__<name>` (the `functions` namespace is the root one: its tools keep their names);
the calls of the answer carry their namespace and name apart again. Tools an `additional_tools`
input item adds join the request's tools (chat has one list, not one per place in the history).
A custom tool (free-form input, maybe under a grammar) becomes a function of one string
parameter, `input`, described with the grammar; its calls come back as `custom_tool_call` items
whose input is that string (a stream sends it whole, once the call is complete).
"""

from __future__ import annotations

from gateway.core.translate import MalformedAnswer, TranslationError
from gateway.core.translate.responses.answer import from_chat
from gateway.core.translate.responses.names import ToolName, qualified, tool_names
from gateway.core.translate.responses.request import to_chat
from gateway.core.translate.responses.stream import StreamTranslator

__all__ = ["MalformedAnswer", "StreamTranslator", "ToolName", "TranslationError", "from_chat", "qualified", "to_chat",
           "tool_names"]
