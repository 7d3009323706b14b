"""Images, audio, moderations and rerank end to end: the openai SDK against loopback upstreams."""

from __future__ import annotations

import asyncio
import io
import wave
from email.message import Message
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any

import aiohttp
import httpx
import openai
import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from hypothesis import given
from hypothesis import strategies as st

from gateway.core.errors import InvalidRequestError
from gateway.server.surface import boundary_of, parse_form
from tests.support.fakes import FakeUpstream, Step, error_body
from tests.support.gateway import Gateway
from tests.support.metrics import scrape, value

AUDIO = b"ID3\x03\x00\x00\x00fake mpeg frames \x00\xff\xfb" * 50
IMAGE = {"created": 1700000000, "data": [{"url": "https://images.example/cat.png"}]}
MODERATION = {
    "id": "modr-1",
    "model": "omni-moderation-latest",
    "results": [{"flagged": False, "categories": {}, "category_scores": {}}],
}
RERANK = {"id": "rr-1", "results": [{"index": 1, "relevance_score": 0.9}, {"index": 0, "relevance_score": 0.1}]}


class RawUpstream(FakeUpstream):
    """A FakeUpstream that takes any body (multipart, JSON) and keeps its bytes and content type."""

    def __init__(self, default: Step | None = None) -> None:
        super().__init__(default or Step(body={"text": "hello from the transcript"}))
        self.bodies: list[tuple[str, str, bytes]] = []  # path, Content-Type, body

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        self.bodies.append((request.path, request.headers.get("Content-Type", ""), raw))
        self.arrived.set()
        step = self.script.popleft() if self.script else self.default
        body = step.body if isinstance(step.body, bytes) else orjson.dumps(step.body)
        return web.Response(status=step.status, body=body, headers=step.headers, content_type=step.content_type)

    def form(self, index: int = -1) -> dict[str, bytes]:
        """The fields of a received multipart body, read by the standard library's MIME parser."""
        _, content_type, raw = self.bodies[index]
        message = BytesParser(policy=HTTP).parsebytes(f"Content-Type: {content_type}\r\n\r\n".encode() + raw)
        fields: dict[str, bytes] = {}
        for part in message.iter_parts():  # type: ignore[attr-defined]
            assert isinstance(part, Message)
            name = part.get_param("name", header="content-disposition")
            fields[str(name)] = part.get_payload(decode=True)  # type: ignore[assignment]
        return fields


async def raw_upstream(aiohttp_server: Any, default: Step | None = None) -> RawUpstream:
    fake = RawUpstream(default)
    server: TestServer = await aiohttp_server(fake.app())
    fake.url = str(server.make_url("/v1"))
    return fake


def wav_bytes() -> bytes:
    """A tenth of a second of 8 kHz mono silence, with a few non-zero samples, as a WAV file."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(8000)
        out.writeframes(bytes(range(256)) * 6 + b"\x00" * 64)
    return buffer.getvalue()


def one_route(upstream: FakeUpstream, *, name: str = "m", extra: str = "") -> str:
    return f'routes: {{{name}: {{name: up, provider: openai, baseUrl: "{upstream.url}", apiKey: sk-up{extra}}}}}'


def two_targets(first: FakeUpstream, second: FakeUpstream, *, extra: str = "") -> str:
    return f"""
    routes:
      m:
        strategy: {{mode: fallback, onStatusCodes: [503]}}
        targets:
          - {{name: first, provider: openai, baseUrl: "{first.url}", apiKey: sk-first}}
          - {{name: second, provider: openai, baseUrl: "{second.url}", apiKey: sk-second{extra}}}
    """


async def post(client: openai.AsyncOpenAI, path: str, body: bytes, content_type: str) -> tuple[int, dict[str, Any]]:
    url = str(client.base_url).rstrip("/") + path
    headers = {"Content-Type": content_type, "Authorization": f"Bearer {client.api_key}"}
    async with aiohttp.ClientSession() as session, session.post(url, data=body, headers=headers) as response:
        return response.status, orjson.loads(await response.read())


def assert_openai_error(status: int, body: dict[str, Any], expected: int) -> dict[str, Any]:
    assert status == expected, body
    error = body["error"]
    assert set(error) >= {"message", "type", "param", "code"}
    return dict(error)


async def test_images_generate_is_routed_and_passed_through(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.default = Step(body=IMAGE)
    client = await gateway(one_route(upstream, name="painter"))
    raw = await client.images.with_raw_response.generate(model="painter", prompt="a cat", size="256x256")
    assert raw.parse().data[0].url == IMAGE["data"][0]["url"]  # type: ignore[index]
    assert (raw.headers["x-gateway-route"], raw.headers["x-gateway-target"]) == ("painter", "up")
    assert upstream.requests[0].path == "/v1/images/generations"
    assert upstream.requests[0].body == {"model": "painter", "prompt": "a cat", "size": "256x256"}


async def test_speech_audio_comes_back_byte_for_byte(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.default = Step(body=AUDIO, content_type="audio/mpeg")
    client = await gateway(one_route(upstream, name="tts", extra=", overrideParams: {voice: nova}"))
    response = await client.audio.speech.create(model="tts", voice="alloy", input="Hello there")
    assert response.content == AUDIO
    assert response.response.headers["content-type"] == "audio/mpeg"
    assert upstream.requests[0].path == "/v1/audio/speech"
    assert upstream.requests[0].body == {"model": "tts", "voice": "nova", "input": "Hello there"}


async def test_transcription_forwards_the_form_unchanged(gateway: Gateway, aiohttp_server: Any) -> None:
    upstream = await raw_upstream(aiohttp_server)
    client = await gateway(one_route(upstream, name="whisper"))
    audio = wav_bytes()
    transcript = await client.audio.transcriptions.create(
        model="whisper", file=("hello.wav", audio, "audio/wav"), language="en"
    )
    assert transcript.text == "hello from the transcript"
    path, content_type, body = upstream.bodies[0]
    assert path == "/v1/audio/transcriptions"
    assert content_type.startswith("multipart/form-data; boundary=")
    assert upstream.form() == {"model": b"whisper", "file": audio, "language": b"en"}
    assert audio in body


async def test_form_fields_that_would_redirect_or_carry_keys_are_dropped(gateway: Gateway, aiohttp_server: Any) -> None:
    upstream = await raw_upstream(aiohttp_server)
    client = await gateway(one_route(upstream, name="whisper"))
    audio = wav_bytes()
    await client.audio.transcriptions.create(
        model="whisper",
        file=("hello.wav", audio, "audio/wav"),
        language="en",
        extra_body={"api_base": "http://169.254.169.254/", "api_key": "sk-smuggled", "aws_role_name": "admin"},
    )
    assert upstream.form() == {"model": b"whisper", "file": audio, "language": b"en"}
    assert b"sk-smuggled" not in upstream.bodies[0][2]


async def test_transcription_as_text_passes_through(gateway: Gateway, aiohttp_server: Any) -> None:
    upstream = await raw_upstream(aiohttp_server, Step(body=b"1\n00:00:00,000 --> 00:00:01,000\nhi\n", content_type="text/plain"))
    client = await gateway(one_route(upstream, name="whisper"))
    text = await client.audio.transcriptions.create(model="whisper", file=("a.wav", wav_bytes()), response_format="srt")
    assert text == "1\n00:00:00,000 --> 00:00:01,000\nhi\n"


async def test_translation_with_override_model_rebuilds_the_form(gateway: Gateway, aiohttp_server: Any) -> None:
    upstream = await raw_upstream(aiohttp_server)
    client = await gateway(one_route(upstream, name="whisper", extra=", overrideParams: {model: whisper-1, temperature: 0.2}"))
    audio = wav_bytes()
    translation = await client.audio.translations.create(model="whisper", file=("a.wav", audio, "audio/wav"))
    assert translation.text == "hello from the transcript"
    assert upstream.bodies[0][0] == "/v1/audio/translations"
    assert upstream.form() == {"model": b"whisper-1", "file": audio, "temperature": b"0.2"}


async def test_transcription_falls_back_on_503(gateway: Gateway, aiohttp_server: Any) -> None:
    first, second = await raw_upstream(aiohttp_server), await raw_upstream(aiohttp_server)
    first.then(Step(status=503, body=error_body(503, "overloaded")))
    client = await gateway(two_targets(first, second, extra=", overrideParams: {model: big-whisper}"))
    audio = wav_bytes()
    raw = await client.audio.transcriptions.with_raw_response.create(model="m", file=("a.wav", audio, "audio/wav"))
    assert raw.parse().text == "hello from the transcript"
    assert (raw.headers["x-gateway-target"], raw.headers["x-gateway-attempts"]) == ("second", "2")
    assert first.form() == {"model": b"m", "file": audio}
    assert second.form() == {"model": b"big-whisper", "file": audio}


async def test_speech_falls_back_on_503(gateway: Gateway, make_upstream: Any) -> None:
    first, second = await make_upstream(), await make_upstream()
    first.then(Step(status=503, body=error_body(503)))
    second.default = Step(body=AUDIO, content_type="audio/wav")
    client = await gateway(two_targets(first, second))
    response = await client.audio.speech.create(model="m", voice="alloy", input="hi", response_format="wav")
    assert response.content == AUDIO
    assert response.response.headers["x-gateway-target"] == "second"


async def test_an_upstream_error_reaches_the_client_openai_shaped(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.then(Step(status=400, body=error_body(400, "voice unknown")))
    client = await gateway(one_route(upstream, name="tts"))
    with pytest.raises(openai.BadRequestError) as caught:
        await client.audio.speech.create(model="tts", voice="alloy", input="hi")
    assert "voice unknown" in caught.value.message


async def test_moderations_create(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.default = Step(body=MODERATION)
    client = await gateway(one_route(upstream, name="mod"))
    moderation = await client.moderations.create(model="mod", input="is this fine?")
    assert moderation.results[0].flagged is False
    assert upstream.requests[0].path == "/v1/moderations"
    assert upstream.requests[0].body == {"model": "mod", "input": "is this fine?"}


async def test_rerank_by_raw_post(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.default = Step(body=RERANK)
    client = await gateway(one_route(upstream, name="ranker"))
    body = orjson.dumps({"model": "ranker", "query": "cats", "documents": ["dogs", "cats"], "top_n": 2})
    status, answer = await post(client, "/rerank", body, "application/json")
    assert (status, answer) == (200, RERANK)
    assert upstream.requests[0].path == "/v1/rerank"
    assert upstream.requests[0].body == orjson.loads(body)


async def test_unknown_model_is_404(gateway: Gateway, upstream: FakeUpstream) -> None:
    client = await gateway(one_route(upstream))
    with pytest.raises(openai.NotFoundError) as caught:
        await client.images.generate(model="nope", prompt="a cat")
    assert caught.value.code == "model_not_found"
    with pytest.raises(openai.NotFoundError):
        await client.audio.transcriptions.create(model="nope", file=("a.wav", wav_bytes()))
    assert upstream.calls == 0


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        ("/images/generations", b"{not json", None),
        ("/images/generations", b'{"model": "m"}', "prompt"),
        ("/images/generations", b'{"model": "m", "prompt": "x", "stream": true}', "stream"),
        ("/audio/speech", b'{"model": "m", "voice": "alloy"}', "input"),
        ("/audio/speech", b'{"voice": "alloy", "input": "x"}', "model"),
        ("/moderations", b'{"model": "m"}', "input"),
        ("/rerank", b'{"model": "m", "query": "q", "documents": "nope"}', "documents"),
        ("/rerank", b"[1, 2]", None),
    ],
)
async def test_malformed_json_bodies_are_400(
    gateway: Gateway, upstream: FakeUpstream, path: str, body: bytes, param: str | None
) -> None:
    client = await gateway(one_route(upstream))
    status, answer = await post(client, path, body, "application/json")
    assert assert_openai_error(status, answer, 400)["param"] == param
    assert upstream.calls == 0


FORM = "multipart/form-data; boundary=XyZ"


@pytest.mark.parametrize(
    ("content_type", "body", "param"),
    [
        ("application/json", b'{"model": "m"}', "Content-Type"),
        (FORM, b"no delimiter at all", None),
        (FORM, b'--XyZ\r\nContent-Disposition: form-data; name="model"\r\n\r\nm', None),  # never closed
        (FORM, b"--XyZ\r\nContent-Type: text/plain\r\n\r\nm\r\n--XyZ--\r\n", None),  # no field name
        (FORM, b'--XyZ\r\nContent-Disposition: form-data; name="language"\r\n\r\nen\r\n--XyZ--\r\n', "model"),
        (FORM, b'--XyZ\r\nContent-Disposition: form-data; name="model"\r\n\r\nm\r\n--XyZ--\r\n', "file"),
    ],
)
async def test_malformed_forms_are_400(
    gateway: Gateway, aiohttp_server: Any, content_type: str, body: bytes, param: str | None
) -> None:
    upstream = await raw_upstream(aiohttp_server)
    client = await gateway(one_route(upstream))
    status, answer = await post(client, "/audio/transcriptions", body, content_type)
    assert assert_openai_error(status, answer, 400)["param"] == param
    assert upstream.bodies == []


async def test_a_form_over_the_body_limit_is_413(gateway: Gateway, aiohttp_server: Any) -> None:
    upstream = await raw_upstream(aiohttp_server)
    client = await gateway(one_route(upstream) + "\nserver: {maxBodyBytes: 1000}")
    with pytest.raises(openai.APIStatusError) as caught:
        await client.audio.transcriptions.create(model="m", file=("a.wav", b"\x00" * 5000))
    assert caught.value.status_code == 413
    assert upstream.bodies == []


async def test_mock_and_litellm_targets_are_refused_clearly(gateway: Gateway) -> None:
    client = await gateway("routes: {fake: {provider: mock}, claude: {provider: anthropic, apiKey: k}}")
    with pytest.raises(openai.BadRequestError) as caught:
        await client.images.generate(model="fake", prompt="a cat")
    assert "not supported by provider mock" in caught.value.message
    with pytest.raises(openai.BadRequestError) as caught:
        await client.audio.transcriptions.create(model="claude", file=("a.wav", wav_bytes()))
    assert "not supported by provider anthropic" in caught.value.message


async def test_metrics_count_each_endpoint(gateway: Gateway, aiohttp_server: Any) -> None:
    upstream = await raw_upstream(aiohttp_server, Step(body=IMAGE))
    client = await gateway(one_route(upstream))
    await client.images.generate(model="m", prompt="a cat")
    upstream.default = Step(body={"text": "hi"})
    await client.audio.transcriptions.create(model="m", file=("a.wav", wav_bytes()))
    with pytest.raises(openai.BadRequestError):
        await client.moderations.create(model="m", input=None)  # type: ignore[arg-type]
    upstream.default = Step(body=AUDIO, content_type="audio/mpeg")
    await client.audio.speech.create(model="m", voice="alloy", input="hi")
    samples = await scrape(client)
    assert value(samples, "gateway_requests_total", route="m", status_code="200", stream="false") == 3
    assert value(samples, "gateway_requests_total", route="m", status_code="400", stream="false") == 1
    upstream_labels = {"route": "m", "target": "up", "provider": "openai"}
    assert value(samples, "gateway_upstream_requests_total", **upstream_labels, outcome="200") == 3


# The form scan alone: pure, no event loop.

FIELD_NAMES = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12)
FIELD_VALUES = st.binary(max_size=200).filter(lambda value: b"--XyZ" not in value)


def build_form(fields: list[tuple[str, bytes, bool]], boundary: str = "XyZ") -> bytes:
    out = [b"preamble\r\n"]
    for name, data, is_file in fields:
        filename = '; filename="f.bin"' if is_file else ""
        out.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"{filename}\r\n\r\n'.encode())
        out.append(data + b"\r\n")
    out.append(f"--{boundary}--\r\n".encode())
    return b"".join(out)


def stdlib_fields(body: bytes) -> list[tuple[str, bytes]]:
    message = BytesParser(policy=HTTP).parsebytes(f"Content-Type: {FORM}\r\n\r\n".encode() + body)
    return [
        (str(part.get_param("name", header="content-disposition")), part.get_payload(decode=True))
        for part in message.iter_parts()  # type: ignore[attr-defined]
    ]


@given(st.lists(st.tuples(FIELD_NAMES, FIELD_VALUES, st.booleans()), max_size=6))
def test_parse_form_finds_every_part(fields: list[tuple[str, bytes, bool]]) -> None:
    form = parse_form(build_form(fields), b"XyZ")
    assert [(p.name, form.raw[p.start : p.end], p.is_file) for p in form.parts] == fields


@given(
    st.lists(st.tuples(FIELD_NAMES, FIELD_VALUES, st.booleans()), max_size=6),
    st.dictionaries(FIELD_NAMES, st.text(max_size=20) | st.integers() | st.booleans(), max_size=3),
)
def test_with_fields_sets_text_fields_and_keeps_the_rest(
    fields: list[tuple[str, bytes, bool]], changes: dict[str, Any]
) -> None:
    body = parse_form(build_form(fields), b"XyZ").with_fields(changes)
    texts = {name for name, _, is_file in fields if not is_file}
    expected = [(n, _encoded(changes[n]) if n in changes and not f else d) for n, d, f in fields]
    expected += [(name, _encoded(value)) for name, value in changes.items() if name not in texts]
    assert stdlib_fields(body) == expected


def _encoded(value: Any) -> bytes:
    if isinstance(value, bool):
        return b"true" if value else b"false"
    return str(value).encode()


def test_boundary_of_refuses_other_types() -> None:
    assert boundary_of('multipart/form-data; boundary="a b"') == b"a b"
    for content_type in ("application/json", "multipart/form-data", "multipart/mixed; boundary=x", ""):
        with pytest.raises(InvalidRequestError):
            boundary_of(content_type)


async def test_speech_is_relayed_as_it_arrives_not_read_first(gateway: Gateway, upstream: FakeUpstream) -> None:
    """The client has the first audio bytes while the upstream still holds the rest back."""
    rest_may_follow = asyncio.Event()
    upstream.default = Step(events=[b"ID3-first-frames", rest_may_follow, b"-the-rest"], events_type="audio/mpeg")
    client = await gateway(one_route(upstream, name="tts"))
    async with client.audio.speech.with_streaming_response.create(model="tts", voice="alloy", input="hi") as response:
        assert response.headers["content-type"] == "audio/mpeg"
        pieces = response.iter_bytes()
        first = await asyncio.wait_for(anext(pieces), timeout=10)  # buffered, this would wait for the gate forever
        rest_may_follow.set()
        received = first + b"".join([piece async for piece in pieces])
    assert received == b"ID3-first-frames-the-rest"


async def test_speech_cut_off_upstream_is_a_cut_off_answer_not_a_short_one(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.default = Step(events=[b"ID3-first-frames", 0.05], events_type="audio/mpeg", reset=True)
    client = await gateway(one_route(upstream, name="tts"))
    with pytest.raises(httpx.HTTPError):
        async with client.audio.speech.with_streaming_response.create(model="tts", voice="alloy", input="hi") as response:
            await response.read()
    samples = await scrape(client)
    assert value(samples, "gateway_requests_total", route="tts", status_code="502", stream="false") == 1


async def test_a_boundary_that_is_not_utf_8_is_a_400(gateway: Gateway, aiohttp_server: Any) -> None:
    """aiohttp hands a header's bytes that are not UTF-8 over as surrogates: such a boundary is refused, not a 500."""
    upstream = await raw_upstream(aiohttp_server)
    client = await gateway(one_route(upstream))
    body = b'--\xffX\r\nContent-Disposition: form-data; name="model"\r\n\r\nm\r\n--\xffX--\r\n'
    url = httpx.URL(str(client.base_url))
    reader, writer = await asyncio.open_connection(url.host, url.port)
    writer.write(
        b"POST /v1/audio/transcriptions HTTP/1.1\r\nHost: gateway\r\nConnection: close\r\n"
        b"Authorization: Bearer " + client.api_key.encode() + b"\r\n"
        b"Content-Type: multipart/form-data; boundary=\xffX\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )
    head, _, answer = (await reader.read()).partition(b"\r\n\r\n")
    writer.close()
    assert head.startswith(b"HTTP/1.1 400 "), head
    error = assert_openai_error(400, orjson.loads(answer), 400)
    assert (error["param"], error["code"]) == ("Content-Type", "invalid_body")
    assert upstream.bodies == []
