"""litellm-backed targets (anthropic, gemini, bedrock, ...): the only module that imports litellm.

Importing this module imports litellm (seconds) and sets it up for a gateway: bundled data
instead of fetches at import and first use, no `.env` read into our environment, no callbacks,
its loggers quiet below WARNING and written by our handler, OpenAI parameters a provider lacks
dropped rather than refused, URLs in messages fetched only with its SSRF checks.

A call passes on only an allow-list of the client's OpenAI fields (a body must never choose
`api_base`, keys or callbacks); the target supplies the rest (`litellm_calls`). litellm's
exceptions become the upstream status they stand for (a Reply with an OpenAI-shaped error body
and Retry-After), or a TransportError when no answer came; streams are re-emitted as OpenAI
chunks, and end with `[DONE]` only when the provider said the answer finished. litellm's private
names, and the undocumented attributes of its stream wrappers, are used in `litellm_internals`
only.
"""

from __future__ import annotations

import importlib
import logging
import os
import re
import threading
from collections.abc import Iterator, Mapping
from typing import Any, Final

import aiohttp
import anyio
import httpx
import orjson

from gateway.core.errors import OverloadedError
from gateway.core.kinds import KINDS
from gateway.core.sse import DONE_EVENT, Event, parse_event
from gateway.core.tree import Target
from gateway.observe.trace import INVALID_RESPONSE, STREAM_ERROR
from gateway.upstream.providers import litellm_internals
from gateway.upstream.providers.base import Call, EventStream, Reply, TransportError, shortage
from gateway.upstream.providers.litellm_calls import litellm_arguments, relayed_headers
from gateway.upstream.redaction import redact

# Read by litellm at import and on first use: its bundled cost map and Anthropic beta headers
# instead of GitHub fetches, and no `.env` from the working directory (its "DEV" mode loads one).
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ["LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS"] = "True"
os.environ["LITELLM_MODE"] = "PRODUCTION"

import litellm
from litellm.exceptions import APIConnectionError, MidStreamFallbackError, Timeout

LOGGERS: Final = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy")


def configure_litellm() -> None:
    """Set litellm's globals for a gateway (idempotent)."""
    litellm.suppress_debug_info = True  # no "Provider List: ..." prints
    litellm.turn_off_message_logging = True
    litellm.redact_messages_in_exceptions = True  # prompts stay out of error messages (and our logs)
    litellm.drop_params = True
    litellm.user_url_validation = True  # image URLs in messages are fetched only past its SSRF checks
    litellm_internals.empty_callback_lists(litellm)
    litellm_internals.announce_mode()
    for name in LOGGERS:
        logger = logging.getLogger(name)
        logger.setLevel(logging.WARNING)  # its DEBUG lines carry request bodies and headers
        logger.handlers.clear()  # its own stderr handler; records reach ours through the root


configure_litellm()

WARM_UP_MODEL: Final = "gateway-warm-up"
# What a first call imports past the point where a mock call stops (litellm 1.110.2, measured):
# its tokenizer and service logger are made elsewhere; these, in its provider's own code, and
# (every provider) in the logging that a mock call leaves to litellm's logging thread.
EVERY_FIRST_CALL: Final = ("litellm.proxy.spend_tracking.savings",)
FIRST_CALL_MODULES: Final[Mapping[str, tuple[str, ...]]] = {
    "gemini": ("litellm.llms.vertex_ai.context_caching.vertex_ai_context_caching",),
    "vertex_ai": ("litellm.llms.vertex_ai.context_caching.vertex_ai_context_caching",),
    "vertex_ai_beta": ("litellm.llms.vertex_ai.context_caching.vertex_ai_context_caching",),
    "bedrock": ("litellm.llms.bedrock.chat.invoke_transformations.anthropic_legacy_text_completions_transformation",),
    "azure": ("openai.resources.chat",),  # the OpenAI SDK's resources (~450 modules), on the event loop
}
_STAND_IN: Final = "mistral"  # a kind whose calls take the OpenAI-like path most providers share
_WARMING: Final = threading.Lock()


def warm_up(provider: str) -> None:
    """Make now what litellm makes at its first call to `provider`: raises what making it raised.

    A chat call with litellm's `mock_response` (one answered as JSON, one as a stream) takes the
    call's own path (the provider's name and model resolved, its configuration and parameters
    mapped, the call logged) up to the request, which it never makes: no connection is opened.
    A provider outside `KINDS` (whose lookups may reach its upstream even so: ollama asks its
    server about the model) is not called; a kind of `KINDS` stands in, for what every
    provider's call makes. What a call makes past that point is made here too: the tokenizer,
    the provider's own modules (FIRST_CALL_MODULES) and what litellm keeps in private caches
    (`litellm_internals.make_first_call_state`). Measured on 1.110.2: a first call took 0.25-0.35 s
    (azure 0.58 s) and imported ~70 modules (azure ~500), the next ~10 ms; after a warm-up
    (0.25-0.65 s, on the load's thread) the first takes ~10-20 ms and imports none.
    """
    called = provider if provider in KINDS else _STAND_IN
    target = Target(name=WARM_UP_MODEL, provider=called, base_url="", api_key=WARM_UP_MODEL)
    call = Call(target, "chat/completions", {"model": WARM_UP_MODEL, "messages": [{"role": "user", "content": "."}]})
    with _WARMING:  # one warm-up at a time: litellm makes its tables at first use, unlocked
        litellm.completion(**litellm_arguments(call, stream=False), mock_response=".")
        for _ in litellm.completion(**litellm_arguments(call, stream=True), mock_response="."):
            pass
        anyio.run(anyio.sleep, 0)  # anyio's asyncio backend (~40 ms), imported when a stream is closed
        litellm.main.encoding  # noqa: B018  (loaded at first read: tiktoken's table, ~0.1-0.2 s)
        litellm_internals.make_first_call_state(provider)
        for module in (*EVERY_FIRST_CALL, *FIRST_CALL_MODULES.get(provider, ())):
            importlib.import_module(module)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc` and the exceptions behind it (cause, context, litellm's original_exception)."""
    seen: set[int] = set()
    pending: list[BaseException] = [exc]
    while pending and len(seen) < 32:
        current = pending.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        for inner in (getattr(current, "original_exception", None), current.__cause__, current.__context__):
            if isinstance(inner, BaseException):
                pending.append(inner)


_JSON_OBJECT: Final = re.compile(r"\{.*\}", re.DOTALL)
_LITELLM_PREFIX: Final = re.compile(r"^(?:litellm\.\w+: )+(?:\w+(?:Exception|Error) - )?")
_LITELLM_SUFFIX: Final = re.compile(r"\.? Handle with `litellm\.\w+`\.?\s*$")
_TRACEBACK: Final = "\nTraceback (most recent call last):"  # litellm appends one to some messages
_MAX_MESSAGE: Final = 500


def _upstream_error(text: str) -> tuple[str, str | None, str | None]:
    """(message, type, code) of the provider's error inside litellm's exception text."""
    text = text.split(_TRACEBACK, 1)[0]
    text = _LITELLM_SUFFIX.sub("", _LITELLM_PREFIX.sub("", text.strip()))
    found = _JSON_OBJECT.search(text)
    if found is not None:
        try:
            body = orjson.loads(found.group())
        except orjson.JSONDecodeError:
            body = None
        error = body.get("error", body) if isinstance(body, dict) else None
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            kind, code = error.get("type"), error.get("code")
            return (
                error["message"][:_MAX_MESSAGE],
                kind if isinstance(kind, str) else None,
                str(code) if isinstance(code, str | int) and not isinstance(code, bool) else None,
            )
    return text.split("\n", 1)[0][:_MAX_MESSAGE], None, None


def _status(exc: BaseException) -> int | None:
    """The upstream HTTP status `exc` stands for, or None when it carries none.

    litellm reports some upstream 5xx as its generic 500 (Anthropic's 529 overload among them):
    a more precise 5xx behind it wins.
    """
    status = getattr(exc, "status_code", None)
    if not isinstance(status, int) or not 400 <= status <= 599:
        return None
    if status == 500:
        for inner in _chain(exc):
            code = getattr(inner, "status_code", None)
            if isinstance(code, int) and 500 < code <= 599:
                return code
        if "overloaded_error" in str(exc):
            return 529
    return status


def _error_body(message: str, kind: str | None, code: str | None) -> bytes:
    return orjson.dumps(
        {"error": {"message": message, "type": kind or "upstream_error", "param": None, "code": code}}
    )


def map_failure(exc: Exception, target: Target) -> Reply | TransportError | OverloadedError:
    """What a litellm exception stands for: the upstream's error answer, or a failure to get one.

    The one place litellm's (and its transports') exceptions are mapped. Messages are masked
    with the target's secrets. The gateway's own shortage (out of file descriptors, ...) behind
    it is an OverloadedError: no failure of the upstream's.
    """
    if isinstance(exc, MidStreamFallbackError) and isinstance(exc.original_exception, Exception):
        exc = exc.original_exception
    for inner in _chain(exc):
        if (local := shortage(inner)) is not None:
            return local
    message, kind, code = _upstream_error(redact(str(exc), target))
    for inner in _chain(exc):
        if isinstance(inner, Timeout | httpx.TimeoutException | TimeoutError):
            return TransportError(f"upstream timed out ({message})", status=504)
        if isinstance(inner, aiohttp.ClientConnectorError | httpx.ConnectError | ConnectionError):
            return TransportError(f"cannot connect to upstream ({message})")
        if isinstance(inner, aiohttp.ClientPayloadError | httpx.RemoteProtocolError | httpx.ReadError):
            return TransportError(f"upstream response was cut off ({message})", kind=STREAM_ERROR)
    for inner in _chain(exc):
        # A request httpx could not encode (a header value that is not ASCII) behind litellm's
        # made-up 500 failed on this side: the attempt failed, no upstream answered 500.
        if isinstance(inner, UnicodeEncodeError):
            return TransportError(f"the call to the upstream could not be made ({type(inner).__name__})")
    # litellm's catch-all for an answer it could not make sense of; it carries a made-up 500
    status = None if isinstance(exc, APIConnectionError) else _status(exc)
    if status is None:
        return TransportError(f"upstream answer could not be read ({message})", kind=INVALID_RESPONSE)
    headers = relayed_headers(getattr(exc, "litellm_response_headers", None))
    return Reply(status, _error_body(message, kind, code), headers=headers)


def _mid_stream(failure: Reply | TransportError | OverloadedError) -> TransportError | OverloadedError:
    """A failure after the first event, as the TransportError that ends the stream."""
    if isinstance(failure, OverloadedError):
        return failure
    if isinstance(failure, TransportError):
        if failure.kind == INVALID_RESPONSE:
            failure.kind = STREAM_ERROR
        return failure
    message, _, _ = _upstream_error(failure.body.decode(errors="replace"))
    return TransportError(f"upstream error {failure.status} mid-stream ({message})", kind=STREAM_ERROR)


def _answer_headers(response: Any) -> dict[str, str]:
    """The provider's headers to relay from an answer: litellm keeps them in its hidden params."""
    hidden = getattr(response, "hidden_params", None)
    return relayed_headers(hidden.get("additional_headers") if isinstance(hidden, dict) else None)


class LitellmProvider:
    """Serves every litellm-backed target through `litellm.acompletion` and friends."""

    def __init__(self, *, max_response_bytes: int) -> None:
        self._max_response_bytes = max_response_bytes

    async def complete(self, call: Call) -> Reply:
        arguments = litellm_arguments(call, stream=False)
        try:
            if call.endpoint == "embeddings":
                response = await litellm.aembedding(**arguments)
            elif call.endpoint == "completions":
                response = await litellm.atext_completion(**arguments)
            else:
                response = await litellm.acompletion(**arguments)
        except Exception as exc:
            return _reply_or_raise(map_failure(exc, call.target))
        body = orjson.dumps(response.model_dump(exclude_none=True))
        if len(body) > self._max_response_bytes:
            limit = self._max_response_bytes
            raise TransportError(
                f"upstream response larger than server.maxResponseBytes ({limit} bytes)", kind=STREAM_ERROR
            )
        return Reply(200, body, headers=_answer_headers(response))

    async def stream(self, call: Call) -> Reply | EventStream:
        """Open the stream and read its first chunk: a failure before it is a Reply or TransportError."""
        if call.endpoint == "embeddings":
            return await self.complete(call)
        arguments = litellm_arguments(call, stream=True)
        opened: Any = None
        try:
            if call.endpoint == "completions":
                opened = await litellm.atext_completion(**arguments)
            else:
                opened = await litellm.acompletion(**arguments)
            events = ChunkEvents(opened, call.target, _answer_headers(opened))
            await events.read_first()
        except TransportError:
            await litellm_internals.close_stream(opened)
            raise
        except Exception as exc:
            await litellm_internals.close_stream(opened)
            return _reply_or_raise(map_failure(exc, call.target))
        except BaseException:
            await litellm_internals.close_stream(opened)
            raise
        return events


def _reply_or_raise(failure: Reply | TransportError | OverloadedError) -> Reply:
    if not isinstance(failure, Reply):
        raise failure
    return failure


_DONE: Final = parse_event(DONE_EVENT[:-2])


def _is_blank(choice: Mapping[str, Any]) -> bool:
    """A choice without content or finish reason: what litellm puts beside a usage-only chunk."""
    delta = choice.get("delta")
    return (
        not choice.get("finish_reason") and not choice.get("text") and not (isinstance(delta, dict) and delta)
    )


class ChunkEvents(EventStream):
    """A litellm stream as OpenAI SSE events: `[DONE]` follows only an answer the provider finished."""

    def __init__(self, stream: Any, target: Target, headers: Mapping[str, str]) -> None:
        super().__init__(200, headers)
        self._stream = stream
        self._target = target
        self._finished = False
        self._ended = False

    async def read_first(self) -> None:
        """Read the first event now, to hand out first: litellm's exceptions before it are raised as they are."""
        if (first := await self._next()) is not None:
            self.hold([first])

    async def _read(self) -> list[Event]:
        try:
            event = await self._next()
        except TransportError:
            raise
        except Exception as exc:
            raise _mid_stream(map_failure(exc, self._target)) from None
        return [] if event is None else [event]

    async def _next(self) -> Event | None:
        if self._ended:
            return None
        try:
            chunk = await anext(self._stream)
        except StopAsyncIteration:
            self._ended = True
            return _DONE if self._finished else None
        return self._event(chunk.model_dump(exclude_none=True))

    def _event(self, data: dict[str, Any]) -> Event:
        choices = data.get("choices")
        if isinstance(choices, list):
            if any(isinstance(c, dict) and c.get("finish_reason") for c in choices):
                if not litellm_internals.provider_finished(self._stream):
                    raise TransportError(
                        "upstream stream ended before the answer finished", kind=STREAM_ERROR
                    )
                self._finished = True
            elif data.get("usage") and all(isinstance(c, dict) and _is_blank(c) for c in choices):
                data["choices"] = []  # the usage-only chunk, shaped as OpenAI sends it
        payload = orjson.dumps(data)
        return Event(raw=b"data: " + payload + b"\n\n", data=payload)

    async def close(self) -> None:
        self._ended = True
        self._held.clear()
        await litellm_internals.close_stream(self._stream)
