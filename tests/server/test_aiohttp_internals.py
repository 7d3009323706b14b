"""gateway.server.aiohttp_internals: the version gate, and each fast path against its public fallback.

Both sets of parts are exercised on real requests to a real aiohttp server, whichever one this
process chose: the private parts wherever this aiohttp is a verified release, the public ones always.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from typing import Any, Final

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from gateway.core.aiohttp_releases import SWITCH, internals_for, verified
from gateway.core.internals import Mode
from gateway.server import aiohttp_internals
from gateway.server.aiohttp_internals import PRIVATE_PARTS, PUBLIC_PARTS, Parts

Client = Callable[[web.Application], Awaitable[TestClient[Any, Any]]]
BOTH: Final = [PRIVATE_PARTS, PUBLIC_PARTS] if verified(aiohttp.__version__) else [PUBLIC_PARTS]
needs_private = pytest.mark.skipif(
    not verified(aiohttp.__version__), reason=f"aiohttp {aiohttp.__version__}: the private parts are not verified on it"
)
NUMBER = web.RequestKey("number", int)
NAME = web.AppKey("name", str)


@pytest.mark.parametrize("version", ["3.14.0", "3.14.3", "3.14.5"])
def test_the_verified_releases_take_the_private_parts(version: str) -> None:
    assert verified(version)
    assert internals_for(version, None).mode is Mode.PRIVATE
    assert internals_for(version, "on").mode is Mode.PRIVATE  # only "off" turns them off


@pytest.mark.parametrize("version", ["3.13.9", "3.14.6", "3.15.0", "4.0.0", "3.14.5rc1", "3.14.5.dev0", "3.14", "x"])
def test_any_other_version_takes_the_public_api(version: str) -> None:
    assert not verified(version)
    assert internals_for(version, None).mode is Mode.PUBLIC_UNVERIFIED


@pytest.mark.parametrize("setting", ["off", "OFF", " off\n"])
def test_the_environment_turns_the_fast_paths_off_on_any_version(setting: str) -> None:
    assert internals_for("3.14.5", setting).mode is Mode.PUBLIC_CHOSEN
    assert internals_for("3.15.0", setting).mode is Mode.PUBLIC_CHOSEN


def imported(*, setting: str | None, version: str | None = None) -> dict[str, Any]:
    """What a fresh process finds importing the module: its mode, chosen parts, and the log lines of two announce_mode()."""
    env = {key: value for key, value in os.environ.items() if key != SWITCH}
    if setting is not None:
        env[SWITCH] = setting
    script = f"""
import io, json, logging
import aiohttp
if {version!r} is not None:
    aiohttp.__version__ = {version!r}  # a release the parts were not verified on
log = io.StringIO()
logging.basicConfig(stream=log, level=logging.INFO, format="%(levelname)s %(message)s")
from gateway.server import aiohttp_internals as internals
internals.announce_mode()
internals.announce_mode()
print(json.dumps({{"mode": internals.MODE.name, "fast": internals.FAST, "public": internals.PARTS is internals.PUBLIC_PARTS,
                  "door": internals.can_replace_handler(aiohttp.web.Application()),
                  "guard": internals.can_guard_connections(), "json_errors": internals.can_answer_errors_in_json(),
                  "log": log.getvalue().splitlines()}}))
"""
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60, check=True)
    return dict(json.loads(done.stdout))


@needs_private
def test_a_verified_aiohttp_imports_with_the_private_parts_and_says_nothing() -> None:
    found = imported(setting=None)
    assert found == {
        "mode": "PRIVATE", "fast": True, "public": False, "door": True, "guard": True, "json_errors": True, "log": []
    }  # fmt: skip


def test_off_in_the_environment_imports_with_the_public_parts_only() -> None:
    found = imported(setting="off")
    assert found == {
        "mode": "PUBLIC_CHOSEN", "fast": False, "public": True, "door": False, "guard": False, "json_errors": False, "log": []
    }  # fmt: skip


def test_an_unverified_aiohttp_imports_with_the_public_parts_and_logs_it_once_at_info() -> None:
    found = imported(setting=None, version="3.15.0")
    assert (found["mode"], found["fast"], found["public"], found["door"], found["guard"], found["json_errors"]) == (
        "PUBLIC_UNVERIFIED", False, True, False, False, False
    )  # fmt: skip
    assert found["log"] == [
        "INFO aiohttp 3.15.0: the server's fast paths were verified on 3.14.0 to 3.14.5 only; "
        "serving through aiohttp's public API"
    ]


def test_the_module_picked_its_names_from_its_parts() -> None:
    parts = aiohttp_internals.PARTS
    assert parts is (PRIVATE_PARTS if aiohttp_internals.FAST else PUBLIC_PARTS)
    assert aiohttp_internals.request_state is parts.request_state
    assert aiohttp_internals.app_state is parts.app_state
    assert aiohttp_internals.body_and_limit is parts.body_and_limit
    assert aiohttp_internals.status_and_unsent is parts.status_and_unsent
    assert aiohttp_internals.EventStreamResponse is parts.event_stream_response


async def answered(aiohttp_client: Client, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> bytes:
    """The body `handler` answers a POST with, on a real server (limit of 1234 bytes); asserts a 200."""
    app = web.Application(client_max_size=1234)
    app[NAME] = "gateway"
    app.router.add_post("/", handler)
    client = await aiohttp_client(app)
    response = await client.post("/", data=b'{"hi": 1}')
    body = await response.read()
    assert response.status == 200, body
    return body


@needs_private
async def test_request_and_app_state_are_what_request_and_app_items_are(aiohttp_client: Client) -> None:
    async def handler(request: web.Request) -> web.Response:
        PRIVATE_PARTS.request_state(request)[NUMBER] = 1
        assert request[NUMBER] == 1 and PUBLIC_PARTS.request_state(request)[NUMBER] == 1
        PUBLIC_PARTS.request_state(request)[NUMBER] = 2
        assert PRIVATE_PARTS.request_state(request)[NUMBER] == 2 and request.get(NUMBER) == 2
        app = request.app
        assert PRIVATE_PARTS.app_state(app)[NAME] == PUBLIC_PARTS.app_state(app)[NAME] == app[NAME] == "gateway"
        return web.Response(text="ok")

    assert await answered(aiohttp_client, handler) == b"ok"


@needs_private
async def test_the_body_and_its_limit_are_the_requests_content_and_client_max_size(aiohttp_client: Client) -> None:
    async def handler(request: web.Request) -> web.Response:
        private, public = PRIVATE_PARTS.body_and_limit(request), PUBLIC_PARTS.body_and_limit(request)
        assert private[0] is public[0] is request.content
        assert private[1] == public[1] == request.client_max_size == 1234
        return web.Response(body=await private[0].read())

    assert await answered(aiohttp_client, handler) == b'{"hi": 1}'


@needs_private
async def test_a_responses_status_and_unsent_headers_agree_before_and_after_it_is_prepared(aiohttp_client: Client) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        plain = web.Response(status=201, text="made")
        for parts in (PRIVATE_PARTS, PUBLIC_PARTS):
            status, unsent = parts.status_and_unsent(plain)
            assert status == 201 and unsent is plain.headers
        stream = web.StreamResponse(status=200)
        stream.headers["x-before"] = "1"
        assert PRIVATE_PARTS.status_and_unsent(stream) == PUBLIC_PARTS.status_and_unsent(stream) == (200, stream.headers)
        await stream.prepare(request)
        assert PRIVATE_PARTS.status_and_unsent(stream) == PUBLIC_PARTS.status_and_unsent(stream) == (200, None)
        await stream.write_eof(b"streamed")
        assert PRIVATE_PARTS.status_and_unsent(stream) == PUBLIC_PARTS.status_and_unsent(stream) == (200, None)
        return stream

    assert await answered(aiohttp_client, handler) == b"streamed"


@pytest.mark.parametrize("parts", BOTH, ids=lambda parts: "private" if parts is PRIVATE_PARTS else "public")
async def test_an_event_stream_response_sends_the_same_answer(aiohttp_client: Client, parts: Parts) -> None:
    """Only when its headers go out differs (with the first write, or at prepare): never what the client gets."""

    async def handler(request: web.Request) -> web.StreamResponse:
        response = parts.event_stream_response(status=200, headers={"Content-Type": "text/event-stream", "x-a": "b"})
        await response.prepare(request)
        await response.write(b"data: 1\n\n")
        await response.write(b"data: 2\n\n")
        await response.write_eof(b"data: [DONE]\n\n")
        return response

    app = web.Application()
    app.router.add_get("/", handler)
    client = await aiohttp_client(app)
    response = await client.get("/")
    assert response.status == 200
    assert (response.headers["Content-Type"], response.headers["x-a"]) == ("text/event-stream", "b")
    assert response.headers["Transfer-Encoding"] == "chunked"
    assert await response.read() == b"data: 1\n\ndata: 2\n\ndata: [DONE]\n\n"
