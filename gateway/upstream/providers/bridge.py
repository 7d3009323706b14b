"""A provider kind's answer to every endpoint: natively where its upstream serves it, else through chat.

Chat completions, embeddings and the rest go to the kind's `chat` provider untouched. The
Responses and Messages APIs (and count_tokens, stored responses) go to the provider that serves
them natively when the call's target does (`registry.serves_natively`: an openai target with
`responsesApi: native`, an anthropic target); for any other target this one call is translated
to chat completions and its answer back. So a route mixing both kinds translates only the
attempts that need it. Streams of either kind commit at their first output (`commit`).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, Final

import orjson

from gateway.core.chunks import MalformedEvent, read_chunk, replay
from gateway.core.errors import GatewayError, NotFoundError
from gateway.core.kinds import serves_natively
from gateway.core.nesting import MAX_JSON_DEPTH, too_deep
from gateway.core.sse import Event, parse_event
from gateway.core.translate import MalformedAnswer
from gateway.core.translate import messages as anthropic_api
from gateway.core.translate import responses as responses_api
from gateway.core.translate.reshape import AnthropicReshape, Reshape, ResponsesReshape, StreamReshape
from gateway.observe.trace import INVALID_RESPONSE, STREAM_ERROR
from gateway.upstream.providers.apis import (
    API_OF,
    COUNT_TOKENS,
    DELETE,
    MESSAGES,
    RESPONSES,
    RETRIEVE,
    STREAMS,
)
from gateway.upstream.providers.base import Call, EventStream, Provider, ReplayedStream, Reply, TransportError
from gateway.upstream.providers.commit import CommitPoint
from gateway.upstream.providers.token_count import estimate

BRIDGED: Final = frozenset(API_OF)
CHAT: Final = "chat/completions"


class Bridge:
    """Serves every endpoint for one provider kind; see the module's docstring.

    `complete` and `stream` hand a chat call's coroutine straight back: the common path costs
    one membership test, not another coroutine frame.
    """

    def __init__(self, chat: Provider, natives: Mapping[str, Provider] | None = None) -> None:
        self._chat = chat
        self._natives = dict(natives or {})

    def complete(self, call: Call) -> Coroutine[Any, Any, Reply]:
        if call.endpoint not in BRIDGED:
            return self._chat.complete(call)
        return self._complete(call)

    def stream(self, call: Call) -> Coroutine[Any, Any, Reply | EventStream]:
        if call.endpoint not in BRIDGED:
            return self._chat.stream(call)
        return self._stream(call)

    def _native(self, call: Call) -> Provider | None:
        native = self._natives.get(call.endpoint)
        return native if native is not None and serves_natively(call.target, API_OF[call.endpoint]) else None

    async def _complete(self, call: Call) -> Reply:
        if (native := self._native(call)) is not None:
            return await native.complete(call)
        try:
            if call.endpoint == COUNT_TOKENS:
                return Reply(200, orjson.dumps(await estimate(call.payload)))
            if call.endpoint in (RETRIEVE, DELETE):
                raise NotFoundError(
                    f"Target '{call.target.name}' answers the Responses API by translation to chat completions, "
                    "which stores no response.",
                    param="response_id",
                )
            reshape, payload = _translated(call)
        except GatewayError as exc:  # the request, as this target would need it, is refused
            return Reply(exc.status, exc.to_json())
        reply = await self._chat.complete(Call(call.target, CHAT, payload))
        if not reply.ok:
            return reply
        try:
            parsed = orjson.loads(reply.body)
        except orjson.JSONDecodeError as exc:
            raise TransportError(f"malformed upstream response ({exc})", kind=INVALID_RESPONSE) from None
        if too_deep(reply.body, parsed):  # the translation is written again by orjson
            raise TransportError(
                f"malformed upstream response (JSON nested deeper than {MAX_JSON_DEPTH} levels)", kind=INVALID_RESPONSE
            )
        try:
            answer = reshape.answer(parsed)
        except MalformedAnswer as exc:
            raise TransportError(f"malformed upstream response ({exc})", kind=INVALID_RESPONSE) from None
        return Reply(reply.status, orjson.dumps(answer), headers=reply.headers)

    async def _stream(self, call: Call) -> Reply | EventStream:
        api = STREAMS.get(call.endpoint)
        if api is None:  # count_tokens and stored responses have no stream
            return await self._complete(call)
        if (native := self._native(call)) is not None:
            opened = await native.stream(call)
            return opened if isinstance(opened, Reply) else CommitPoint(opened, api)
        try:
            reshape, payload = _translated(call)
        except GatewayError as exc:
            return Reply(exc.status, exc.to_json())
        chat = await self._chat.stream(Call(call.target, CHAT, payload))
        if isinstance(chat, Reply):
            if not chat.ok:
                return chat
            chat = _replayed(chat)
        return CommitPoint(TranslatedEvents(chat, reshape.translator()), api)


def responses_reshape(body: Mapping[str, Any]) -> ResponsesReshape:
    """Chat answers reshaped as the Responses answer to `body`, under a new response id, created now."""
    return ResponsesReshape(body, response_id=f"resp_{secrets.token_hex(16)}", created_at=int(time.time()))


def anthropic_reshape(model: str) -> AnthropicReshape:
    """Chat answers reshaped as Anthropic messages named `model`, under a new message id."""
    return AnthropicReshape(model, message_id=f"msg_{secrets.token_hex(12)}")


def _translated(call: Call) -> tuple[Reshape, dict[str, Any]]:
    """How this call's answer is reshaped, and the chat payload it becomes; TranslationError (a 400)."""
    if call.endpoint == RESPONSES:
        return responses_reshape(call.payload), responses_api.to_chat(call.payload)
    assert call.endpoint == MESSAGES
    payload = anthropic_api.to_chat(call.payload)
    return anthropic_reshape(str(payload["model"])), payload


def _replayed(reply: Reply) -> ReplayedStream:
    """A chat answer to a stream request, as the stream it stands for."""
    try:
        answer = orjson.loads(reply.body)
    except orjson.JSONDecodeError:
        answer = None
    # replayed, its events are written again by orjson: too deep, it is no completion
    events = None if too_deep(reply.body, answer) else replay(answer, endpoint=CHAT, include_usage=True)
    if events is None:
        raise TransportError("malformed upstream response (a stream was asked for; the JSON is not a completion)",
                             kind=INVALID_RESPONSE)
    return ReplayedStream(events, reply.headers)


class TranslatedEvents(EventStream):
    """A chat completions stream as another API's events, translated as its chunks arrive.

    The end of a complete answer (`[DONE]`) becomes the API's own closing events; a chat stream
    that stops without it stops here too, so the relay sees a cut-off. An in-band error or a
    chunk that cannot be translated raises TransportError.
    """

    def __init__(self, chat: EventStream, translator: StreamReshape) -> None:
        super().__init__(chat.status, chat.headers)
        self._chat = chat
        self._translator = translator
        self._usage: Any = None
        self._ended = False

    async def _read(self) -> list[Event]:
        while not self._ended:
            out: list[bytes] = []
            batch = await self._chat.next_batch()
            if not batch:
                self._ended = True
            for event in batch:
                if event.data is None:
                    continue
                if event.is_done:
                    out += self._translate(self._translator.finish, self._usage)
                    self._ended = True
                    break
                out += self._translate(self._translator.feed, self._chunk(event))
            if out:
                return [parse_event(raw[:-2]) for raw in out]
        return []

    def _chunk(self, event: Event) -> Any:
        try:
            chunk, error = read_chunk(event)
        except MalformedEvent as exc:
            raise TransportError(str(exc), kind=STREAM_ERROR) from None
        if error is not None:
            status = error.get("status") or error.get("code")
            status = status if isinstance(status, int) and 400 <= status <= 599 else 502
            raise TransportError(f"error event: {error.get('message', '')}"[:300], status=status, kind=STREAM_ERROR)
        if isinstance(chunk, dict) and chunk.get("usage"):
            self._usage = chunk["usage"]
        return chunk

    @staticmethod
    def _translate(step: Callable[[Any], list[bytes]], argument: Any) -> list[bytes]:
        try:
            return step(argument)
        except MalformedAnswer as exc:
            raise TransportError(f"malformed upstream stream ({exc})", kind=STREAM_ERROR) from None

    async def close(self) -> None:
        self._ended = True
        await self._chat.close()

