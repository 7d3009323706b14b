"""Client request bodies: parsed once, checked enough to answer mistakes with a clear 400."""

from __future__ import annotations

import re
from typing import Any, Final

import orjson

from gateway.core.errors import InvalidRequestError, PayloadTooLargeError
from gateway.core.json_shape import Checker, Kind, Wording
from gateway.core.nesting import MAX_JSON_DEPTH, too_deep


def parse_object(raw: bytes) -> dict[str, Any]:
    """The JSON object in `raw`, or a 400 saying what is wrong with it."""
    if not raw:
        raise InvalidRequestError("The request body is empty; expected a JSON object.", code="invalid_json")
    try:
        payload = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidRequestError(f"The request body is not valid JSON: {exc}", code="invalid_json") from None
    if not isinstance(payload, dict):
        raise InvalidRequestError("The request body must be a JSON object.", code="invalid_json")
    check_depth(raw, payload)
    return payload


def check_depth(raw: bytes, payload: Any) -> None:
    """A 400 when the JSON of `raw` (parsed as `payload`) nests deeper than MAX_JSON_DEPTH."""
    if too_deep(raw, payload):
        raise InvalidRequestError(
            f"The request body nests JSON arrays and objects deeper than {MAX_JSON_DEPTH} levels.",
            code="invalid_json",
        )


# What parsing a body costs, in units: a string, a number, a `,` or `:` before a value or key
# count 1 each (a string value costs 2 with its separator), an object or array (a container) 4.
# orjson holds the GIL for a whole parse, on whichever thread: a body is refused past
# JSON_BUDGET, which parses in ~60 ms at most (500k one-character strings, 250k containers)
# and no real request reaches (10,000 messages with tool calls: ~300k). Containers made also
# start the cyclic GC, whose full collections inside the parse walk every tracked object of
# the process: that figure holds for a process whose start-up objects are frozen (gc.freeze).
JSON_BUDGET: Final = 1_000_000
CONTAINER_UNITS: Final = 4
# A string, skipped whole (no group); an object or array opening (group 1); a `,` or `:` (group 2).
_OUTSIDE_STRINGS: Final = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|([\[{])|([,:])')
_UNITS: Final = (1, CONTAINER_UNITS, 1)  # by the group matched


def json_units(raw: bytes, *, stop: int = JSON_BUDGET) -> int:
    """What parsing `raw` costs, in JSON_BUDGET's units, or a bound of it; exact (or past `stop`) when the bound is over `stop`.

    Counted in C, the bytes' quotes, separators and openings bound the cost from above (those
    inside strings count too); only a body whose bound is over `stop` is read by scanned_units.
    """
    bound = 1 + raw.count(b'"') // 2 + raw.count(b",") + raw.count(b":")
    bound += CONTAINER_UNITS * (raw.count(b"[") + raw.count(b"{"))
    return bound if bound <= stop else scanned_units(raw, stop=stop)


def scanned_units(raw: bytes, *, stop: int) -> int:
    """What parsing `raw` costs, read token by token (strings skipped); the count stops past `stop`.

    A Python loop, slow, but other threads run between its tokens, where a regular expression
    or a parse runs to its end.
    """
    units, weights = 1, _UNITS
    for token in _OUTSIDE_STRINGS.finditer(raw):
        units += weights[token.lastindex or 0]
        if units > stop:
            break
    return units


def check_json_cost(raw: bytes) -> None:
    """A 413 when parsing `raw` would hold the interpreter longer than JSON_BUDGET allows."""
    if json_units(raw) > JSON_BUDGET:
        raise PayloadTooLargeError(
            f"The request body holds too many JSON values to parse at once (more than {JSON_BUDGET:,}, "
            f"an object or array counting as {CONTAINER_UNITS}); send fewer, larger values.",
            code="request_too_complex",
        )


# Body fields that would point an upstream elsewhere or carry credentials: litellm-style
# upstreams (a LiteLLM proxy behind an openai target, say) act on them, with the operator's keys.
REDIRECT_FIELDS: Final = frozenset(
    {"api_base", "base_url", "api_key", "api_version", "azure_ad_token", "vertex_credentials"}
)
REDIRECT_PREFIX: Final = "aws_"  # aws_access_key_id, aws_bedrock_runtime_endpoint, aws_role_name, ...
_PREFIX_AT_LINE_START: Final = "\n" + REDIRECT_PREFIX


def is_redirect_field(key: str) -> bool:
    return key in REDIRECT_FIELDS or key.startswith(REDIRECT_PREFIX)


# Fields of the usual request bodies, none of them a redirect field or `extra_body`: a body of
# only these has nothing to drop, which one subset test in C tells (the usual body has three).
ORDINARY_FIELDS: Final = frozenset(
    {
        # chat completions (and the completions and embeddings endpoints)
        "model", "messages", "stream", "stream_options", "temperature", "top_p", "n", "stop", "max_tokens",
        "max_completion_tokens", "presence_penalty", "frequency_penalty", "logit_bias", "logprobs",
        "top_logprobs", "seed", "user", "metadata", "store", "tools", "tool_choice", "parallel_tool_calls",
        "response_format", "reasoning_effort", "service_tier", "modalities", "audio", "prediction",
        "prompt", "suffix", "echo", "best_of", "input", "encoding_format", "dimensions",
        # responses
        "instructions", "previous_response_id", "max_output_tokens", "reasoning", "text", "include", "truncation",
        # anthropic messages
        "system", "stop_sequences", "top_k", "thinking",
    }
)


def _has_redirect_field(fields: dict[str, Any]) -> bool:
    # On the parsed keys, not the bytes: a key spelled with a JSON escape ("api\u005fbase") would
    # slip past a byte search, and a body has a few keys where its bytes are kilobytes. The prefix
    # is looked for in one joined string, one search in C rather than a startswith per key.
    return not REDIRECT_FIELDS.isdisjoint(fields) or _PREFIX_AT_LINE_START in "\n" + "\n".join(fields)


def drop_redirect_fields(payload: dict[str, Any]) -> dict[str, Any] | None:
    """`payload` without redirecting or credential fields, there and in `extra_body`; None when it has none."""
    if payload.keys() <= ORDINARY_FIELDS:
        return None
    extra = payload.get("extra_body")
    in_extra = isinstance(extra, dict) and _has_redirect_field(extra)
    if not in_extra and not _has_redirect_field(payload):
        return None
    kept = {key: value for key, value in payload.items() if not is_redirect_field(key)}
    if in_extra:
        assert isinstance(extra, dict)
        kept["extra_body"] = {key: value for key, value in extra.items() if not is_redirect_field(key)}
    return kept


def check_count(payload: dict[str, Any], key: str, limit: int) -> None:
    """A 413 when `payload[key]` is an array of more than `limit` items (messages, input items).

    Checked before any work on the items: a request is refused for their number alone.
    """
    items = payload.get(key)
    if type(items) is list and len(items) > limit:
        raise PayloadTooLargeError(
            f"'{key}' holds {len(items):,} items, more than the {limit:,} one request may carry "
            "(server.maxMessages).",
            param=key,
            code="too_many_messages",
        )


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _request_error(message: str, param: str | None, code: str) -> InvalidRequestError:
    return InvalidRequestError(message, param=param, code=code)


CHECK = Checker(Wording(
    sentence="{path} must be {expected}, got {got}.",
    names={Kind.OBJECT: "an object", Kind.ARRAY: "an array", Kind.STRING: "a string",
           Kind.BOOLEAN: "a boolean", Kind.NUMBER: "a number"},
    show=_kind,
    error=_request_error,
    code="invalid_type",
    missing="{path} is required.",  # a top-level name, quoted by quote_names
    missing_code="missing_required_parameter",
    show_choice=_kind,
    choice_code="invalid_value",
    quote_names=True,
))
"""The door's checks: `'model' must be a non-empty string, got int.`, `messages[0].role must be a string, got null.`"""


def check_model(payload: dict[str, Any]) -> str:
    model = payload.get("model")
    if not isinstance(model, str) or not model:
        raise CHECK.fail("model", "a non-empty string", model)
    return model


def check_stream(payload: dict[str, Any]) -> bool:
    stream = payload.get("stream", False)
    if stream is None:
        return False
    if not isinstance(stream, bool):
        raise CHECK.fail("stream", "a boolean", stream)
    options = payload.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise InvalidRequestError("'stream_options' must be an object.", param="stream_options", code="invalid_type")
    return stream


def check_messages(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """The messages, each checked as deep as memory and the token counter look.

    Extra keys pass (clients send provider extras); a value of the wrong type in a key the
    gateway reads is a 400, since a stored one would break every later turn of a conversation.
    """
    messages = payload.get("messages")
    if type(messages) is list and messages and _all_plain(messages):  # the usual conversation
        return messages
    if messages is None:
        raise CHECK.missing("messages")
    if not isinstance(messages, list) or not messages:
        raise CHECK.fail("messages", "a non-empty array", messages)
    for index, message in enumerate(messages):
        _check_message(message, f"messages[{index}]")
    return messages


def _all_plain(messages: list[Any]) -> bool:
    """Whether every message is exactly `{"role": <non-empty string>, "content": <string>}`.

    Most conversations are only such messages. A conversation with any other message, however
    slight the difference, goes to `_check_message`, which also names what is wrong. (A plain
    loop rather than chains of map(): for the few messages of a usual request, the iterators
    and temporary sets those build cost more than the loop they replace.)
    """
    for message in messages:
        if type(message) is not dict or len(message) != 2:
            return False
        role = message.get("role")  # with two keys, both present means exactly these two
        if type(role) is not str or not role or type(message.get("content")) is not str:
            return False
    return True


def _check_message(value: Any, at: str) -> None:
    message = CHECK.object(value, at)
    role = message.get("role")
    if not isinstance(role, str) or not role:
        raise CHECK.fail(f"{at}.role", "a non-empty string", role)
    content = message.get("content")
    if isinstance(content, list):
        for number, part in enumerate(content):
            _check_part(part, f"{at}.content[{number}]")
    elif content is not None and not isinstance(content, str):
        raise CHECK.fail(f"{at}.content", "a string, an array of parts or null", content)
    for key in ("name", "tool_call_id"):
        if message.get(key) is not None:
            CHECK.string(message[key], f"{at}.{key}")
    calls = message.get("tool_calls")
    if calls is not None and (not isinstance(calls, list) or not all(isinstance(c, dict) for c in calls)):
        raise InvalidRequestError(
            f"{at}.tool_calls must be an array of objects.", param=f"{at}.tool_calls", code="invalid_type"
        )
    for number, call in enumerate(calls or ()):
        _check_tool_call(call, f"{at}.tool_calls[{number}]")


def _check_part(value: Any, at: str) -> None:
    part = CHECK.object(value, at)
    if CHECK.string(part.get("type"), f"{at}.type") == "text":
        CHECK.string(part.get("text"), f"{at}.text")


def _check_tool_call(call: dict[str, Any], at: str) -> None:
    CHECK.string(call.get("id"), f"{at}.id")
    if "type" in call:
        CHECK.string(call["type"], f"{at}.type")
    function = CHECK.object(call.get("function"), f"{at}.function")
    CHECK.string(function.get("name"), f"{at}.function.name")
    # OpenAI takes the arguments as JSON text only, never as the object itself.
    CHECK.string(function.get("arguments"), f"{at}.function.arguments")


def check_input(payload: dict[str, Any], key: str, *, required: bool) -> None:
    value = payload.get(key)
    if value is None:
        if required:
            raise CHECK.missing(key)
        return
    if not isinstance(value, (str, list)):
        raise CHECK.fail(key, "a string or an array", value)
