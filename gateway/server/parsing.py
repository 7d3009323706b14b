"""Client request bodies: parsed once, checked enough to answer mistakes with a clear 400."""

from __future__ import annotations

from typing import Any

import orjson

from gateway.errors import InvalidRequestError


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
    return payload


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def check_model(payload: dict[str, Any]) -> str:
    model = payload.get("model")
    if not isinstance(model, str) or not model:
        raise InvalidRequestError(
            f"'model' must be a non-empty string, got {_kind(model)}.", param="model", code="invalid_type"
        )
    return model


def check_stream(payload: dict[str, Any]) -> bool:
    stream = payload.get("stream", False)
    if stream is None:
        return False
    if not isinstance(stream, bool):
        raise InvalidRequestError(f"'stream' must be a boolean, got {_kind(stream)}.", param="stream", code="invalid_type")
    options = payload.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise InvalidRequestError("'stream_options' must be an object.", param="stream_options", code="invalid_type")
    return stream


def check_messages(payload: dict[str, Any]) -> list[dict[str, Any]]:
    messages = payload.get("messages")
    if messages is None:
        raise InvalidRequestError("'messages' is required.", param="messages", code="missing_required_parameter")
    if not isinstance(messages, list) or not messages:
        raise InvalidRequestError(
            f"'messages' must be a non-empty array, got {_kind(messages)}.", param="messages", code="invalid_type"
        )
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise InvalidRequestError(
                f"messages[{index}] must be an object, got {_kind(message)}.",
                param=f"messages[{index}]",
                code="invalid_type",
            )
        role = message.get("role")
        if not isinstance(role, str) or not role:
            raise InvalidRequestError(
                f"messages[{index}].role must be a non-empty string, got {_kind(role)}.",
                param=f"messages[{index}].role",
                code="invalid_type",
            )
        content = message.get("content")
        if content is not None and not isinstance(content, (str, list)):
            raise InvalidRequestError(
                f"messages[{index}].content must be a string, an array of parts or null, got {_kind(content)}.",
                param=f"messages[{index}].content",
                code="invalid_type",
            )
        for key in ("name", "tool_call_id"):
            if message.get(key) is not None and not isinstance(message[key], str):
                raise InvalidRequestError(
                    f"messages[{index}].{key} must be a string, got {_kind(message[key])}.",
                    param=f"messages[{index}].{key}",
                    code="invalid_type",
                )
        calls = message.get("tool_calls")
        if calls is not None and (not isinstance(calls, list) or not all(isinstance(c, dict) for c in calls)):
            raise InvalidRequestError(
                f"messages[{index}].tool_calls must be an array of objects.",
                param=f"messages[{index}].tool_calls",
                code="invalid_type",
            )
    return messages


def check_input(payload: dict[str, Any], key: str, *, required: bool) -> None:
    value = payload.get(key)
    if value is None:
        if required:
            raise InvalidRequestError(f"'{key}' is required.", param=key, code="missing_required_parameter")
        return
    if not isinstance(value, (str, list)):
        raise InvalidRequestError(
            f"'{key}' must be a string or an array, got {_kind(value)}.", param=key, code="invalid_type"
        )
