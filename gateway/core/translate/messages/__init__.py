"""Anthropic's Messages API onto OpenAI Chat Completions and back: requests, answers, streams, errors.

Pure functions and one stream state machine, no I/O. Chat Completions messages are the canonical
form (what memory stores), so `to_chat(body)["messages"]` is a turn's canonical form and
`messages_from_chat` turns stored history back into Anthropic messages.

What an OpenAI-compatible upstream cannot be told, and so is dropped or approximated:
- `thinking` / `redacted_thinking` blocks of earlier assistant turns are dropped (an OpenAI
  upstream can neither read nor verify them), as are the `thinking` option, `output_config.effort`,
  `cache_control`, citations, `service_tier` and any other option not listed in `to_chat`.
- Several `system` text blocks become one system message, joined with newlines; an assistant
  turn's text blocks become one string (Anthropic splits one text into blocks at citations).
  A message of role `system` among the messages (Claude Code sends its environment so) is a
  system message at that place.
- Claude Code's `x-anthropic-billing-header:` system block is left out: it is for Anthropic's
  billing, and it would keep a chat upstream from caching the prompt's prefix across sessions.
- `metadata.user_id` becomes `user` when it fits OpenAI's 64 characters, and is left out when
  longer (Claude Code's is a JSON object of ids, about 150 characters).
- A tool with `defer_loading` is left out until a `tool_reference` block (in a tool_result: a
  tool search's answer, Claude Code's ToolSearch) loads it, as Anthropic keeps it from the model
  till then; the reference becomes the tool's definition as text, `<functions><function>{...}`
  `</function></functions>`, as Anthropic expands it.
- What is left out is told to the log (`dropped.DROPS`), once per field at INFO.
- A `tool_result` becomes a `tool` message with its text joined by newlines and `is_error` as an
  `Error: ` prefix; images and documents in it move to a user message right after the tool
  messages, as a tool message cannot carry them.
- Documents: a base64 PDF becomes a `file` part, plain-text and content sources become text;
  URL and Files API sources are refused, as are `file` image sources.
- Anthropic's server tools that only add to what the model may do (`web_search_*`,
  `web_fetch_*`, `code_execution_*`: Claude Code's WebSearch offers one in a request of its
  own) are left out, and the model answers without them, as the Responses translation does
  with `web_search`; a `tool_choice` that forces one is refused. Other typed tools (Anthropic's
  client tools: bash, text editor, computer, memory) are refused: the model would not know them.
- Answers: reasoning an upstream returns (`reasoning_content`) is not turned into thinking
  blocks (they need Anthropic's signature). Tool-call arguments that are not a JSON object come
  back as `{"_raw": "<the arguments>"}` (a stream passes them on as they are). `stop_sequence`
  is known only from upstreams that name the matched stop (vLLM's `stop_reason`).
"""

from __future__ import annotations

from gateway.core.translate import MalformedAnswer, TranslationError
from gateway.core.translate.messages.answer import StopReason, from_chat, message_id_of, usage_from_chat
from gateway.core.translate.messages.errors import ErrorType, error_body, error_type, status_of
from gateway.core.translate.messages.history import messages_from_chat
from gateway.core.translate.messages.request import to_chat
from gateway.core.translate.messages.stream import StreamTranslator, error_event

__all__ = [
    "ErrorType", "MalformedAnswer", "StopReason", "StreamTranslator", "TranslationError", "error_body",
    "error_event", "error_type", "from_chat", "message_id_of", "messages_from_chat", "status_of", "to_chat",
    "usage_from_chat",
]
