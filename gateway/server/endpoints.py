"""Every HTTP endpoint the gateway serves: what it does and the errors it answers with.

app.config_app adds the routes; this table describes them, and tests/server/test_endpoints.py
checks that each route the application has is here and each entry here is a route. The
endpoint reference (gateway.cli.reference.endpoints) is written from the two together.
Errors are OpenAI-shaped `{"error": {"message", "type", "param", "code"}}` bodies, except under
/v1/messages (count_tokens too), where they take Anthropic's shape; tests/server/test_endpoints_errors.py
asks a gateway for most of them on every endpoint (gateway_overloaded: tests/server/test_connections.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from gateway.core.breaker import SKIPPED
from gateway.core.errors import (
    AuthenticationError,
    MethodNotAllowedError,
    NotFoundError,
    OverloadedError,
    PayloadTooLargeError,
    RequestTimeoutError,
    UnsupportedEncodingError,
)
from gateway.governance.stored_keys import KeyStoreUnavailableError

METRICS_PATH: Final = "/metrics"  # the default of metrics.path, where the reference shows the scrape


@dataclass(frozen=True, slots=True)
class Failure:
    """One error an endpoint answers with: its status, its `code`, and when it comes."""

    status: int | str
    code: str | None
    when: str


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A method and path, what it does, and its errors (besides those every path may answer)."""

    method: str
    path: str
    summary: str
    failures: tuple[Failure, ...] = ()


# What any path may answer.
EVERY_PATH: Final = (
    Failure(400, "invalid_header", "x-request-id is not 1-200 visible ASCII characters"),
    Failure(NotFoundError.status, NotFoundError.code, "no such path"),
    Failure(MethodNotAllowedError.status, MethodNotAllowedError.code, "the path takes another method"),
    Failure(500, "internal_error", "the gateway failed (a bug, logged with the request id)"),
    Failure(OverloadedError.status, OverloadedError.code, "server.maxConnections client connections are open (Retry-After)"),
    Failure(403, "origin_not_allowed", "with cors.enabled: a preflight (OPTIONS) from an origin cors.allowOrigins does not list"),
)
GUARDED: Final = (
    Failure(AuthenticationError.status, AuthenticationError.code, "auth.keys is set and no valid key came"),
    Failure(
        KeyStoreUnavailableError.status, KeyStoreUnavailableError.code,
        "a key neither configured nor known came before the process first read its key store (it started while the store was unreachable)",
    ),
)
_READ: Final = (
    Failure(RequestTimeoutError.status, RequestTimeoutError.code, "the body came slower than server.bodyReadTimeoutSeconds"),
    Failure(PayloadTooLargeError.status, PayloadTooLargeError.code, "the body is over server.maxBodyBytes"),
    Failure(UnsupportedEncodingError.status, UnsupportedEncodingError.code, "a Content-Encoding other than one of gzip, deflate, br, zstd or identity"),
)
_JSON: Final = (
    Failure(400, "invalid_json", "the body is empty, not JSON, or not an object"),
    Failure(400, "invalid_body", "the body could not be read"),
    *_READ,
    Failure(PayloadTooLargeError.status, "request_too_complex", "the body holds too many JSON values to parse at once"),
)
_FORM: Final = (
    Failure(400, "invalid_body", "the body could not be read, is not multipart/form-data with a boundary, or is malformed"),
    *_READ,
    Failure(400, "missing_required_parameter", "the form has no model field or no file part"),
)
_FIELDS: Final = (
    Failure(400, "invalid_type", "a field the gateway reads (model, stream, ...) has the wrong type"),
    Failure(400, "missing_required_parameter", "a required field is missing"),
)
_ROUTED: Final = (
    Failure(400, "invalid_config", "x-gateway-config is not a route name nor a valid strategy tree"),
    Failure(400, "config_not_allowed", "x-gateway-config asks for what requestConfig does not allow"),
    Failure(400, "request_config_disabled", "x-gateway-config is sent and requestConfig.enabled is false"),
    Failure(400, "unknown_route", "x-gateway-config names no route of this gateway"),
    Failure(404, "model_not_found", "no route has the model's name and there is no defaultRoute"),
    Failure(OverloadedError.status, OverloadedError.code, "the gateway ran out of a resource of its own (Retry-After)"),
    Failure("4xx/5xx", None, "every attempt failed: the last attempt's status and error, every attempt listed"),
    Failure(502, "upstream_unavailable", "no usable answer: unreachable, cut off or malformed"),
    Failure(503, SKIPPED, "every target's circuit breaker is open"),
    Failure(504, "upstream_timeout", "the upstream took longer than the target's timeout"),
)
_CHAT: Final = (
    Failure(PayloadTooLargeError.status, "too_many_messages", "more messages (input items) than server.maxMessages"),
    Failure(400, "invalid_header", "a memory header (memoryId, x-memory-*) is malformed or over memory.limits"),
    Failure(409, "memory_busy", "another request holds the conversation past memory.lockTimeoutSeconds"),
    Failure(503, "memory_unavailable", "the memory store failed; nothing was stored"),
    Failure(503, "memory_lock_lost", "the store was unreachable past the conversation's lock lease; nothing was stored"),
    Failure(502, "unstorable_reply", "with memory: the upstream's reply cannot be kept (a stream without its end); nothing stored"),
    Failure(502, "response_too_large", "with memory: a streamed reply grew past server.maxResponseBytes; nothing stored"),
)
_STREAMED: Final = (
    Failure("in the stream", "upstream_stream_error", "a stream under way broke off or the upstream sent an error event: it ends with this error"),
)
# Where a reply is translated (Anthropic's Messages, or Responses, on a chat completions target).
_TRANSLATED: Final = (
    Failure(400, "invalid_value", "a field the translation reads holds a value it does not know (a role, a tool_choice, ...)"),
    Failure(502, "malformed_upstream_response", "the upstream's chat completion cannot be translated back (not the shape chat completions has)"),
)
_SURFACE: Final = (
    Failure(400, "unsupported_endpoint", "a target of the route is not an openai (OpenAI-compatible) one"),
)
_MEMORY: Final = (
    Failure(400, "invalid_header", "the memoryId in the path is not 1-256 of letters, digits and ._:@-"),
    Failure(404, "memory_not_found", "no conversation with this memoryId for this key"),
    Failure(409, "memory_busy", "another request holds the conversation past memory.lockTimeoutSeconds"),
    Failure(503, "memory_unavailable", "the memory store failed"),
)
_CONVERSATION: Final = (
    Failure(400, "invalid_value", "the conversation id in the path is not 1-256 of letters, digits and ._:@-"),
    Failure(404, "conversation_not_found", "no conversation with this id for this key"),
    Failure(503, "memory_unavailable", "the memory store failed"),
)
_HELD: Final = (Failure(409, "memory_busy", "another request holds the conversation past memory.lockTimeoutSeconds"),)
_METADATA: Final = (
    Failure(400, "invalid_type", "metadata is not an object of strings"),
    Failure(400, "invalid_value", "metadata has more than 16 pairs, a key over 64 or a value over 512 characters"),
)
_ITEMS: Final = (
    Failure(400, "invalid_type", "items is not an array, or an item or a field of one has the wrong type"),
    Failure(400, "invalid_value", "an item holds a value the gateway does not know (a type, a role, ...)"),
    Failure(400, "unsupported_value", "an item chat messages cannot hold (a built-in tool call, a file by id)"),
    Failure(400, "array_above_max_length", "more than 20 items"),
)
_ITEM: Final = (Failure(404, "item_not_found", "no item with this id in the conversation"),)
_STORED: Final = (
    Failure(404, "not_found", "no stored response with this id is known for this key"),
    Failure(400, "unsupported_value", "stream=true: a stored response is not streamed"),
    Failure(503, "memory_unavailable", "the memory store (its record of the response, or of which target answered) failed"),
)
_ADMIN: Final = (
    Failure(403, "admin_key_required", "the key is not one of auth.adminKeys"),
    Failure(503, "key_store_unavailable", "the key store (limits.path, or the limits' Redis) failed"),
)
_KEY_FIELDS: Final = (
    Failure(400, "invalid_type", "name is not a string"),
    Failure(400, "invalid_value", "name is not 1-64 of letters, digits and ._@-; routes or limits are what check-config refuses in auth.keys[] (routes not a non-empty list of the gateway's routes, a limit not 1 to a billion, budget.usd not above 0, budget.period not day, week, month or total), said in its words"),
    Failure(400, "unknown_parameter", "a field the body cannot have (a typo in a limit's name)"),
    Failure(400, "missing_required_parameter", "the body has no name (issuing a key), or a budget has no usd"),
)
_NAMED_KEY: Final = (Failure(404, "key_not_found", "no configured or issued key of this name"),)
_CONFIGURED_KEY: Final = (Failure(409, "key_in_config", "the key is in the config (and no issued key has its name): it changes there"),)
_V1: Final = GUARDED
_MODEL_CALL: Final = (*_V1, *_JSON, *_FIELDS, *_ROUTED)
_FORM_CALL: Final = (*_V1, *_FORM, *_ROUTED, *_SURFACE)

ENDPOINTS: Final = (
    Endpoint(
        "POST", "/v1/chat/completions",
        "OpenAI Chat Completions, routed by model; streams with stream: true; memory with a memoryId.",
        failures=(*_MODEL_CALL, *_CHAT, *_STREAMED),
    ),
    Endpoint("POST", "/v1/completions", "OpenAI legacy Completions, routed by model.", failures=(*_MODEL_CALL, *_STREAMED)),
    Endpoint("POST", "/v1/embeddings", "OpenAI Embeddings, routed by model.", failures=_MODEL_CALL),
    Endpoint(
        "POST", "/v1/messages",
        "Anthropic Messages, routed by model: native to anthropic targets, translated for others.",
        failures=(*_MODEL_CALL, *_CHAT, *_STREAMED, *_TRANSLATED),
    ),
    Endpoint(
        "POST", "/v1/messages/count_tokens",
        "Anthropic's token count: asked of an anthropic target, else estimated with tiktoken.",
        failures=_MODEL_CALL,
    ),
    Endpoint(
        "POST", "/v1/responses",
        "OpenAI Responses, routed by model: native to openai targets (responsesApi), translated for others; conversation and previous_response_id from the gateway's memory.",
        failures=(
            *_MODEL_CALL, *_CHAT, *_STREAMED, *_TRANSLATED,
            Failure(400, "unsupported_parameter", "translated: a parameter only the Responses API has (background, prompt, ...)"),
            Failure(400, "unsupported_value", "translated: a value chat completions cannot say (a file by id or URL, a built-in tool)"),
            Failure(404, "not_found", "previous_response_id is unknown, expired, store: false or another key's (no native target); another key's, with several tenants (native)"),
        ),
    ),
    Endpoint(
        "GET", "/v1/responses/{response_id}",
        "A stored response: asked of the target that produced it, or the gateway's record of a translated one as a Response.",
        failures=(*_V1, *_STORED),
    ),
    Endpoint(
        "DELETE", "/v1/responses/{response_id}",
        "Deletes a stored response at the target that produced it, or the gateway's record of a translated one.",
        failures=(*_V1, *_STORED),
    ),
    Endpoint(
        "POST", "/v1/images/generations", "OpenAI image generation, passed through to openai targets.",
        failures=(*_MODEL_CALL, *_SURFACE, Failure(400, "unsupported_value", "stream: true (images are not streamed)")),
    ),
    Endpoint("POST", "/v1/audio/speech", "OpenAI text to speech; the audio relayed as it comes.", failures=(*_MODEL_CALL, *_SURFACE)),
    Endpoint(
        "POST", "/v1/audio/transcriptions",
        "OpenAI transcription: the multipart form passed on, model read from it.",
        failures=_FORM_CALL,
    ),
    Endpoint(
        "POST", "/v1/audio/translations",
        "OpenAI audio translation: the multipart form passed on, model read from it.",
        failures=_FORM_CALL,
    ),
    Endpoint("POST", "/v1/moderations", "OpenAI moderations, passed through to openai targets.", failures=(*_MODEL_CALL, *_SURFACE)),
    Endpoint("POST", "/v1/rerank", "Rerank (query and documents), passed through to openai targets.", failures=(*_MODEL_CALL, *_SURFACE)),
    Endpoint("GET", "/v1/models", "The routes, as OpenAI model cards.", failures=_V1),
    Endpoint(
        "GET", "/v1/models/{model}", "One route as an OpenAI model card (the name may hold slashes).",
        failures=(*_V1, Failure(404, "model_not_found", "no route of that name")),
    ),
    Endpoint(
        "GET", "/v1/memory",
        "This key's conversations by memoryId, as an OpenAI list (id, turns, updatedAt): prefix, after, limit (1-100, default 20).",
        failures=(
            *_V1,
            Failure(400, "invalid_type", "limit is not an integer"),
            Failure(400, "invalid_value", "limit is not 1-100, prefix holds a character no memoryId has, or after is no memoryId"),
            Failure(503, "memory_unavailable", "the memory store failed"),
        ),
    ),
    Endpoint(
        "GET", "/v1/memory/{memory_id}", "A conversation's stored messages (this key's), each with its createdAt.",
        failures=(*_V1, *_MEMORY),
    ),
    Endpoint("DELETE", "/v1/memory/{memory_id}", "Forgets a conversation.", failures=(*_V1, *_MEMORY)),
    Endpoint(
        "POST", "/v1/memory/{memory_id}/undo", "Removes a conversation's last turn (a redo puts it back).", failures=(*_V1, *_MEMORY)
    ),
    Endpoint(
        "POST", "/v1/memory/{memory_id}/redo", "Puts back the turn the last undo removed, unless a turn came since.",
        failures=(*_V1, *_MEMORY, Failure(404, "nothing_to_redo", "no undone turn to put back: none was undone, or a turn came after")),
    ),
    Endpoint(
        "POST", "/v1/conversations",
        "OpenAI Conversations: a new conversation of this key's (items, metadata), a memory conversation whose id is a memoryId.",
        failures=(*_V1, *_JSON, *_METADATA, *_ITEMS, *_HELD, Failure(503, "memory_unavailable", "the memory store failed")),
    ),
    Endpoint("GET", "/v1/conversations/{conversation_id}", "A conversation: its id, created_at and metadata.", failures=(*_V1, *_CONVERSATION)),
    Endpoint(
        "POST", "/v1/conversations/{conversation_id}", "Replaces a conversation's metadata.",
        failures=(
            *_V1, *_JSON, *_CONVERSATION, *_HELD, *_METADATA,
            Failure(400, "missing_required_parameter", "the body has no metadata"),
        ),
    ),
    Endpoint("DELETE", "/v1/conversations/{conversation_id}", "Deletes a conversation (its memory).", failures=(*_V1, *_CONVERSATION, *_HELD)),
    Endpoint(
        "GET", "/v1/conversations/{conversation_id}/items",
        "A conversation's items (its stored messages as Responses items), a page at a time: after, limit (1-100), order, include.",
        failures=(
            *_V1, *_CONVERSATION,
            Failure(400, "invalid_type", "limit is not an integer"),
            Failure(400, "invalid_value", "limit is not 1-100, or order is not asc or desc"),
            Failure(404, "item_not_found", "after names no item of the conversation"),
        ),
    ),
    Endpoint(
        "POST", "/v1/conversations/{conversation_id}/items", "Adds up to 20 items to a conversation, answered as the list of them stored.",
        failures=(*_V1, *_JSON, *_CONVERSATION, *_HELD, *_ITEMS, Failure(400, "missing_required_parameter", "the body has no items")),
    ),
    Endpoint(
        "GET", "/v1/conversations/{conversation_id}/items/{item_id}", "One item of a conversation.",
        failures=(*_V1, *_CONVERSATION, *_ITEM),
    ),
    Endpoint(
        "DELETE", "/v1/conversations/{conversation_id}/items/{item_id}",
        "Deletes an item (the stored message it is of, with any other item of that message), answered with the conversation.",
        failures=(*_V1, *_CONVERSATION, *_HELD, *_ITEM),
    ),
    Endpoint(
        "POST", "/v1/gateway/keys",
        "Issues a key (name, routes, limits); the key (gk-...) is in this answer only, kept as its SHA-256. Admin keys only.",
        failures=(
            *_V1, *_ADMIN, *_JSON, *_KEY_FIELDS,
            Failure(409, "key_exists", "a configured or issued key has this name"),
        ),
    ),
    Endpoint(
        "GET", "/v1/gateway/keys", "Every key, configured (source config) and issued (source api), never the key itself. Admin keys only.",
        failures=(*_V1, *_ADMIN),
    ),
    Endpoint("GET", "/v1/gateway/keys/{name}", "One key, configured or issued. Admin keys only.", failures=(*_V1, *_ADMIN, *_NAMED_KEY)),
    Endpoint(
        "PATCH", "/v1/gateway/keys/{name}",
        "Changes an issued key's routes or limits (left out: kept; null: every route, the default limits). Admin keys only.",
        failures=(*_V1, *_ADMIN, *_JSON, *_KEY_FIELDS, *_NAMED_KEY, *_CONFIGURED_KEY),
    ),
    Endpoint(
        "DELETE", "/v1/gateway/keys/{name}",
        "Revokes an issued key (one whose name the config has since taken too): refused by every process within a second. Admin keys only.",
        failures=(*_V1, *_ADMIN, *_NAMED_KEY, *_CONFIGURED_KEY),
    ),
    Endpoint(
        "GET", "/v1/gateway/usage",
        "The key's limits and what is left of each (requests, tokens, concurrency, budget); an admin key gets every key's.",
        failures=_V1,
    ),
    Endpoint(
        "GET", "/v1/gateway/health",
        "Each target's circuit breaker; status degraded while any is not closed (200 either way).",
        failures=_V1,
    ),
    Endpoint("GET", "/healthz", "Liveness: 200 while the process serves. No key needed."),
    Endpoint(
        "GET", "/readyz",
        "Readiness: 200, or 503 while draining, or while the memory store's writes fail or one has been pending "
        "for over 5 s. No key needed.",
        failures=(Failure(503, None, "draining (after SIGTERM), or the memory store's writes fail or stall: {status, reason}"),),
    ),
    Endpoint(
        "GET", METRICS_PATH,
        "Prometheus metrics (at metrics.path, when metrics.enabled); behind the keys with metrics.requireAuth.",
        failures=GUARDED,
    ),
)
