"""Images, audio, moderations and rerank: routed by `model` like chat, answered as the upstream answers.

JSON bodies are parsed once to read `model` and pass on as the client's bytes. Audio uploads are
multipart forms: read once, scanned for their text fields, and passed on unchanged (a target's
overrideParams rewrite the form's fields in place). Answers that are not JSON (speech audio, a
transcript as text or srt) are relayed with their content type.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import orjson
from aiohttp import hdrs, web
from aiohttp.multipart import parse_content_disposition
from aiohttp.typedefs import Handler

from gateway.core.errors import InvalidRequestError
from gateway.core.tree import Route, iter_targets
from gateway.observe.trace import Trace
from gateway.server.admissions import admit
from gateway.server.bodies import read_body, read_payload
from gateway.server.handlers import forward
from gateway.server.keys import TRACE
from gateway.server.parsing import check_input, check_model, is_redirect_field
from gateway.server.resolve import route_for
from gateway.upstream.dispatch import Request

SURFACE_PATHS: Final = {
    "/v1/images/generations": "images/generations",
    "/v1/audio/speech": "audio/speech",
    "/v1/audio/transcriptions": "audio/transcriptions",
    "/v1/audio/translations": "audio/translations",
    "/v1/moderations": "moderations",
    "/v1/rerank": "rerank",
}
SUPPORTED_PROVIDERS: Final = frozenset({"openai"})  # the bytes pass through; nothing translates them


def check_providers(route: Route, path: str) -> None:
    """A 400 naming the first of the route's targets that cannot serve `path`, if any."""
    for target in iter_targets(route.root):
        if target.provider not in SUPPORTED_PROVIDERS:
            raise InvalidRequestError(
                f"{path} is not supported by provider {target.provider} "
                f"(route '{route.name}', target '{target.name}'); it needs OpenAI-compatible targets.",
                param="model",
                code="unsupported_endpoint",
            )


def _required_string(payload: dict[str, Any], key: str) -> None:
    value = payload.get(key)
    if not isinstance(value, str) or not value:
        raise InvalidRequestError(f"'{key}' must be a non-empty string.", param=key, code="invalid_type")


def check_image_request(payload: dict[str, Any]) -> None:
    _required_string(payload, "prompt")
    if payload.get("stream"):  # partial images come as SSE, which this relay does not carry
        raise InvalidRequestError(
            "'stream' is not supported on /v1/images/generations by this gateway.", param="stream", code="unsupported_value"
        )


def check_speech_request(payload: dict[str, Any]) -> None:
    _required_string(payload, "input")


def check_moderation_request(payload: dict[str, Any]) -> None:
    check_input(payload, "input", required=True)


def check_rerank_request(payload: dict[str, Any]) -> None:
    _required_string(payload, "query")
    documents = payload.get("documents")
    if not isinstance(documents, list) or not documents:
        raise InvalidRequestError("'documents' must be a non-empty array.", param="documents", code="invalid_type")


def json_handler(path: str, check: Callable[[dict[str, Any]], None]) -> Handler:
    """The handler of a JSON endpoint: `model` read, the body checked by `check`, bytes forwarded."""
    endpoint = SURFACE_PATHS[path]

    async def handle(request: web.Request) -> web.StreamResponse:
        trace: Trace = request[TRACE]
        raw, payload = await read_payload(request)
        model = check_model(payload)
        route = route_for(request, model)
        trace.resolved(route, stream=False, model=model)
        await admit(request, route, payload, raw=raw)
        check_providers(route, path)
        check(payload)
        return await forward(request, route, Request(endpoint, payload, raw, trace=trace))

    return handle


@dataclass(frozen=True, slots=True)
class Part:
    """One part of a multipart form: its field name, and where its value lies in the body."""

    name: str
    start: int
    end: int
    is_file: bool
    head: int  # where the delimiter that opens it starts


@dataclass(frozen=True, slots=True)
class Form:
    """A multipart/form-data body as the client sent it, with its parts located (none copied)."""

    raw: bytes
    boundary: bytes
    parts: tuple[Part, ...]
    closing: int  # where the closing delimiter starts: new fields go in before it

    def text(self, name: str) -> str | None:
        """The first value of the text field `name` (None when absent or not UTF-8)."""
        part = next((p for p in self.parts if p.name == name and not p.is_file), None)
        if part is None:
            return None
        try:
            return self.raw[part.start : part.end].decode()
        except UnicodeDecodeError:
            return None

    def has_file(self, name: str) -> bool:
        return any(p.name == name and p.is_file for p in self.parts)

    def without_redirect_fields(self) -> Form:
        """The form without text fields that would redirect a call or carry credentials (`api_base`, ...)."""
        dropped = [part for part in self.parts if not part.is_file and is_redirect_field(part.name)]
        if not dropped:
            return self
        pieces, at = [], 0
        for part in dropped:  # a part runs from its delimiter to the line break before the next one
            pieces.append(self.raw[at : part.head])
            at = part.end + 2
        pieces.append(self.raw[at:])
        return parse_form(b"".join(pieces), self.boundary)

    def with_fields(self, changes: Mapping[str, Any]) -> bytes:
        """The body with each field in `changes` set: its values replaced, or a new part added."""
        edits: list[tuple[int, int, bytes]] = []
        for name, value in changes.items():
            encoded = _field_value(value)
            spans = [(p.start, p.end, encoded) for p in self.parts if p.name == name and not p.is_file]
            if not spans:
                quoted = name.replace('"', "%22").encode()
                head = b"--" + self.boundary + b'\r\nContent-Disposition: form-data; name="' + quoted + b'"\r\n\r\n'
                spans = [(self.closing, self.closing, head + encoded + b"\r\n")]
            edits += spans
        pieces, at = [], 0
        for start, end, value in sorted(edits, key=lambda edit: edit[0]):
            pieces += [self.raw[at:start], value]
            at = end
        pieces.append(self.raw[at:])
        return b"".join(pieces)


def _field_value(value: Any) -> bytes:
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, bool):
        return b"true" if value else b"false"
    if isinstance(value, (int, float)):
        return str(value).encode()
    return orjson.dumps(value)


def _malformed(detail: str) -> InvalidRequestError:
    return InvalidRequestError(f"The multipart body is malformed: {detail}.", code="invalid_body")


def boundary_of(content_type: str) -> bytes:
    """The boundary of a multipart/form-data Content-Type; a 400 for any other type.

    Read as aiohttp reads a Content-Type, so that the same values pass: split at every ";", the
    type compared in lower case up to a "+suffix", parameter names in lower case, the first
    `boundary` taken with the spaces and double quotes around it stripped.
    """
    media_type, *parameters = content_type.split(";")
    boundary = ""
    for parameter in parameters:
        name, _, value = parameter.partition("=")
        if name.lower().strip() == "boundary":
            boundary = value.strip(' "')
            break
    if media_type.strip().lower().partition("+")[0] != "multipart/form-data" or not _usable_boundary(boundary):
        raise InvalidRequestError(
            "The request body must be multipart/form-data (with a boundary).", param="Content-Type", code="invalid_body"
        )
    return boundary.encode()


def _usable_boundary(boundary: str) -> bool:
    """Whether `boundary` is there and came as UTF-8 (aiohttp hands other bytes over as surrogates, not sent on intact)."""
    try:
        return bool(boundary.encode())
    except UnicodeEncodeError:
        return False


def parse_form(raw: bytes, boundary: bytes) -> Form:
    """Locate every part of a multipart body (RFC 7578); a 400 saying what is wrong otherwise."""
    delimiter = b"--" + boundary
    position = raw.find(delimiter)
    if position < 0:
        raise _malformed("no boundary delimiter")
    parts: list[Part] = []
    while True:
        after = position + len(delimiter)
        if raw.startswith(b"--", after):
            return Form(raw, boundary, tuple(parts), closing=position)
        if not raw.startswith(b"\r\n", after):
            raise _malformed("a delimiter is not followed by a line break")
        headers_end = raw.find(b"\r\n\r\n", after)
        if headers_end < 0:
            raise _malformed("a part's headers do not end")
        following = raw.find(b"\r\n" + delimiter, headers_end + 4)
        if following < 0:
            raise _malformed("a part does not end with the boundary")
        name, is_file = _disposition(raw[after + 2 : headers_end])
        parts.append(Part(name, headers_end + 4, following, is_file=is_file, head=position))
        position = following + 2


def _disposition(headers: bytes) -> tuple[str, bool]:
    """A part's field name and whether it is a file, from its Content-Disposition."""
    for line in headers.decode("utf-8", errors="replace").split("\r\n"):
        key, _, value = line.partition(":")
        if key.strip().lower() == "content-disposition":
            _, params = parse_content_disposition(value.strip())
            if "name" in params:
                return params["name"], "filename" in params
    raise _malformed("a part has no Content-Disposition with a name")


def form_handler(path: str) -> Handler:
    """The handler of an audio upload: `model` read from the form, the form forwarded as it came."""
    endpoint = SURFACE_PATHS[path]

    async def handle(request: web.Request) -> web.StreamResponse:
        trace: Trace = request[TRACE]
        content_type = request.headers.get(hdrs.CONTENT_TYPE, "")
        boundary = boundary_of(content_type)
        form = parse_form(await read_body(request), boundary).without_redirect_fields()
        model = form.text("model")
        if not model:
            raise InvalidRequestError("The form field 'model' is required.", param="model", code="missing_required_parameter")
        route = route_for(request, model)
        trace.resolved(route, stream=False, model=model)
        await admit(request, route, {}, counted=False)  # audio has no text to estimate: its usage, if any, is counted at the end
        check_providers(route, path)
        if not form.has_file("file"):
            raise InvalidRequestError("The form needs a 'file' part (the audio).", param="file", code="missing_required_parameter")
        call = Request(
            endpoint, {"model": model}, form.raw, trace=trace, content_type=content_type, encode=form.with_fields
        )
        return await forward(request, route, call)

    return handle


HANDLERS: Final[Mapping[str, Handler]] = {
    "/v1/images/generations": json_handler("/v1/images/generations", check_image_request),
    "/v1/audio/speech": json_handler("/v1/audio/speech", check_speech_request),
    "/v1/audio/transcriptions": form_handler("/v1/audio/transcriptions"),
    "/v1/audio/translations": form_handler("/v1/audio/translations"),
    "/v1/moderations": json_handler("/v1/moderations", check_moderation_request),
    "/v1/rerank": json_handler("/v1/rerank", check_rerank_request),
}
