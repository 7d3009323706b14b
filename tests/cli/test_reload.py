"""SIGHUP reloads the config file of a running `gateway serve` (gateway.reload), with and without --workers.

The last tests drive a Reloader in this process, on a loopback test server.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import aiohttp
import openai
import orjson
import pytest

from gateway.cli.reload import RESTART_ONLY, keep_restart_only
from gateway.config.loader import parse_config
from gateway.server.keys import CONFIG, UPSTREAMS
from tests.support.fakes import FakeUpstream, Step, stream_of
from tests.support.processes import (
    LogLines,
    free_port,
    running_gateway,
    spawn_gateway,
    stopped_at_exit,
    wait_ready,
)
from tests.support.reloading import reloadable
from tests.support.serve import worker_pids

HI = [{"role": "user", "content": "hi"}]


def mock_routes(*names: str) -> str:
    """A config of mock routes, each answering with its own name."""
    return "routes:\n" + "".join(f"  {name}: {{provider: mock, mock: {{reply: from-{name}}}}}\n" for name in names)


async def answer(client: openai.AsyncOpenAI, model: str) -> str:
    completion = await client.chat.completions.create(model=model, messages=HI)  # type: ignore[arg-type]
    return completion.choices[0].message.content or ""


def client_of(port: int) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0)


def test_settings_only_a_restart_changes_keep_their_values_and_are_named() -> None:
    served = parse_config("server: {port: 8080, maxBodyBytes: 100}\nmemory: {store: memory}\nroutes:\n  a: {provider: mock}\n")
    loaded = parse_config(
        "server: {port: 9090, maxBodyBytes: 100, maxMessages: 7}\nmemory: {store: sqlite, limits: {maxTokens: 1000}}\n"
        "metrics: {enabled: false, path: /m}\nroutes:\n  b: {provider: mock}\n"
    )
    kept, changed = keep_restart_only(served, loaded)
    assert changed == ["server.port", "memory.store", "memory.limits.maxTokens", "metrics.enabled"]
    assert (kept.server.port, kept.memory.store, kept.memory.limits.max_tokens, kept.metrics.enabled) == (8080, "memory", 128000, True)
    # the rest is the new file's
    assert list(kept.routes) == ["b"] and kept.server.max_messages == 7 and kept.metrics.path == "/m"
    assert kept.memory.limits.max_messages == loaded.memory.limits.max_messages
    assert keep_restart_only(served, served) == (served, [])


def test_every_restart_only_setting_names_a_field_of_the_config() -> None:
    config = parse_config(mock_routes("a"))
    for name, attributes in RESTART_ONLY:
        value = config
        for attribute in attributes:
            assert attribute in {f.name for f in dataclasses.fields(value)}, name  # type: ignore[arg-type]
            value = getattr(value, attribute)


async def test_sighup_serves_the_changed_routes_and_keeps_the_process(tmp_path: Path) -> None:
    config = tmp_path / "g.yaml"
    config.write_text(mock_routes("old", "kept"))
    async with running_gateway(config) as gateway:
        process, port, logs = gateway.process, gateway.port, gateway.logs
        async with client_of(port) as client:
            assert await answer(client, "old") == "from-old"
            config.write_text(mock_routes("new", "kept"))
            process.send_signal(signal.SIGHUP)
            await logs.wait_for("reloaded")
            assert await answer(client, "new") == "from-new"
            assert await answer(client, "kept") == "from-kept"
            with pytest.raises(openai.NotFoundError) as caught:
                await answer(client, "old")
            assert caught.value.code == "model_not_found"
            # paths the router serves (a placeholder) take the new config too
            assert (await client.models.retrieve("new")).id == "new"
            assert [m.id for m in (await client.models.list()).data] == ["new", "kept"]
            # a second reload, back: each reload builds on the one served
            config.write_text(mock_routes("old"))
            process.send_signal(signal.SIGHUP)
            await logs.wait_for("reloaded", count=2)
            assert await answer(client, "old") == "from-old"
        assert process.poll() is None


async def test_a_config_that_does_not_load_is_logged_and_the_old_one_served(tmp_path: Path) -> None:
    config = tmp_path / "g.yaml"
    config.write_text(mock_routes("a"))
    async with running_gateway(config) as gateway:
        process, port, logs = gateway.process, gateway.port, gateway.logs
        config.write_text("routes:\n  a: {provider: mock, weight: -1}\n  b: {provider: nope}\n")
        process.send_signal(signal.SIGHUP)
        await logs.wait_for("routes.a.weight: must be >= 0, got -1", level="error")
        await logs.wait_for("routes.b.provider: unknown provider 'nope'", level="error")
        await logs.wait_for("failed with 2 errors; still serving the configuration loaded before", level="error")
        config.write_text("routes: [")  # not even YAML
        process.send_signal(signal.SIGHUP)
        await logs.wait_for("invalid YAML", level="error")
        async with client_of(port) as client:
            assert await answer(client, "a") == "from-a"
        assert not logs.matching("reloaded")
        assert process.poll() is None


async def test_a_stream_under_way_finishes_on_the_old_config_and_sigterm_still_drains(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    release, held = asyncio.Event(), asyncio.Event()
    first, second = stream_of("one ", "two "), stream_of("three ", "four ")
    upstream.then(Step(events=[*first[:2], release, *first[2:]]), Step(events=[*second[:2], held, *second[2:]]))
    config = tmp_path / "g.yaml"
    # A client's own tree: its calls go through the session the configuration alone owns, which a
    # reload closes only once the configuration's last request has ended.
    config.write_text("requestConfig: {enabled: true, allowedHosts: [127.0.0.1]}\n" + mock_routes("live"))
    tree = orjson.dumps({"provider": "openai", "baseUrl": upstream.url, "apiKey": "sk-test", "name": "live"}).decode()
    async with running_gateway(config, "--access-log-flush", "0") as gateway:
        process, port, logs = gateway.process, gateway.port, gateway.logs
        async with client_of(port) as client:
            stream = await client.chat.completions.create(
                model="live", messages=HI, stream=True, extra_headers={"x-gateway-config": tree}  # type: ignore[arg-type]
            )
            parts = [await anext(aiter(stream))]  # the stream is under way: its first chunk came
            config.write_text(f"routes:\n  next: {{provider: openai, baseUrl: '{upstream.url}', apiKey: sk-test}}\n")
            process.send_signal(signal.SIGHUP)
            await logs.wait_for("reloaded")
            with pytest.raises(openai.NotFoundError):  # new requests: the new config
                await answer(client, "live")
            assert not logs.matching("request", path="/v1/chat/completions", status=200)  # still under way
            release.set()
            parts += [part async for part in stream]
            assert "".join(p.choices[0].delta.content or "" for p in parts if p.choices) == "one two "
            [line] = await logs.wait_for("request", path="/v1/chat/completions", status=200)
            assert line["stream"] is True and line["route"] == "other"  # a client's tree counts as 'other'

            # SIGTERM after a reload still drains: a stream of the new config finishes
            stream = await client.chat.completions.create(model="next", messages=HI, stream=True)  # type: ignore[arg-type]
            parts = [await anext(aiter(stream))]
            process.send_signal(signal.SIGTERM)
            await logs.wait_for("stopping: requests under way may take up to")
            process.send_signal(signal.SIGHUP)  # too late: it is stopping
            await logs.wait_for("not done: the gateway is stopping")
            held.set()
            parts += [part async for part in stream]
            assert "".join(p.choices[0].delta.content or "" for p in parts if p.choices) == "three four "
        assert await asyncio.to_thread(process.wait, 30) == 0


async def get_status(session: aiohttp.ClientSession, url: str) -> int:
    async with session.get(url) as response:
        await response.read()
        return response.status


async def models_served_by(port: int) -> tuple[int, list[str]]:
    """GET /v1/models on a new connection: the pid of the worker that answered, and the models."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(b"GET /v1/models HTTP/1.1\r\nHost: gateway\r\n\r\n")
        head = await reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200"), head
        length = int(re.search(rb"Content-Length: (\d+)", head, re.IGNORECASE)[1])  # type: ignore[index]
        body = await reader.readexactly(length)
        client_port = writer.get_extra_info("sockname")[1]
        server_side = (await asyncio.to_thread(
            subprocess.run,
            ["ss", "-tnpH", "state", "established", f"( sport = :{port} and dport = :{client_port} )"],
            capture_output=True, text=True, check=True, timeout=10,
        )).stdout  # fmt: skip
        owner = re.search(r"pid=(\d+)", server_side)
        assert owner, server_side
        return int(owner[1]), re.findall(r'"id":"([^"]+)"', body.decode())
    finally:
        writer.close()


async def test_workers_all_reload_and_no_connection_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "g.yaml"
    config.write_text(mock_routes("old", "kept"))
    async with running_gateway(config, "--workers", "2") as gateway:
        process, port, logs = gateway.process, gateway.port, gateway.logs
        await logs.wait_for("listening on", count=2)
        workers = worker_pids(process.pid)
        assert len(workers) == 2

        statuses: list[int] = []
        failures: list[BaseException] = []
        stop = asyncio.Event()
        enough = asyncio.Event()  # set once `wanted` answers came
        wanted = 20

        async def keep_asking() -> None:
            # a new connection each time, so that both workers keep accepting through the reload
            connector = aiohttp.TCPConnector(force_close=True)
            async with aiohttp.ClientSession(connector=connector) as session:
                while not stop.is_set():
                    try:
                        statuses.append(await get_status(session, f"http://127.0.0.1:{port}/v1/models/kept"))
                    except aiohttp.ClientError as exc:
                        failures.append(exc)
                    if len(statuses) + len(failures) >= wanted:
                        enough.set()

        asking = asyncio.create_task(keep_asking())
        try:
            await enough.wait()  # the loop runs before the reload
            config.write_text(mock_routes("new", "kept"))
            process.send_signal(signal.SIGHUP)
            await logs.wait_for("reloaded", count=2)
            reloaded: set[int] = set()
            deadline = time.monotonic() + 30
            while reloaded != workers and time.monotonic() < deadline:
                pid, models = await models_served_by(port)
                if models == ["new", "kept"]:
                    reloaded.add(pid)
            assert reloaded == workers
            enough.clear()
            wanted = len(statuses) + len(failures) + 20
            await enough.wait()  # and after it
        finally:
            stop.set()
            await asking
        assert failures == []
        assert set(statuses) == {200}
        assert worker_pids(process.pid) == workers  # reloaded in place, none restarted
        async with client_of(port) as client:
            assert await answer(client, "new") == "from-new"

        config.write_text("routes: {a: {provider: nope}}\n")  # errors are logged once, by the parent
        process.send_signal(signal.SIGHUP)
        await logs.wait_for("the workers keep serving the configuration loaded before", level="error")
        process.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(process.wait, 30) == 0


def listening_worker(logs: LogLines, known: set[int]) -> tuple[int, str]:
    """The pid of the worker not in `known` that logged it listens, and that line."""
    for record in logs.matching("listening on"):
        pid = int(re.search(r"gateway (\d+) listening", record["message"])[1])  # type: ignore[index]
        if pid not in known:
            return pid, record["message"]
    raise AssertionError(f"no worker but {known} listens")


async def models_of_worker(port: int, pid: int) -> list[str]:
    """The models worker `pid` serves on `port`, asked on new connections until one lands on it (the kernel spreads them)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        answered, models = await models_served_by(port)
        if answered == pid:
            return models
    raise AssertionError(f"worker {pid} answered no connection on port {port}")


async def test_a_worker_started_after_a_refused_reload_serves_the_last_accepted_config(tmp_path: Path) -> None:
    config = tmp_path / "g.yaml"
    config.write_text(mock_routes("a"))
    async with running_gateway(config, "--workers", "2") as gateway:
        process, port, logs = gateway.process, gateway.port, gateway.logs
        await logs.wait_for("listening on", count=2)
        config.write_text(mock_routes("b"))
        process.send_signal(signal.SIGHUP)
        await logs.wait_for("reloaded", count=2)
        config.write_text("routes: {x: {provider: nope}}\n")  # refused: the workers keep serving b
        process.send_signal(signal.SIGHUP)
        await logs.wait_for("the workers keep serving the configuration loaded before", level="error")
        config.write_bytes(b"routes: {\xff: 1}\n")  # not text at all
        process.send_signal(signal.SIGHUP)
        await logs.wait_for("cannot read (not UTF-8 text)", level="error")
        workers = worker_pids(process.pid)
        os.kill(min(workers), signal.SIGKILL)
        await logs.wait_for("listening on", count=3)  # its replacement starts, on what the parent accepted
        replacement, _ = listening_worker(logs, workers)
        assert await models_of_worker(port, replacement) == ["b"]
        assert await models_of_worker(port, max(workers)) == ["b"]
        assert not logs.matching("giving up") and process.poll() is None
        process.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(process.wait, 30) == 0


async def test_a_worker_started_after_a_reload_keeps_the_settings_only_a_restart_changes(tmp_path: Path) -> None:
    first, second = free_port(), free_port()
    config = tmp_path / "g.yaml"
    config.write_text(f"server: {{host: 127.0.0.1, port: {first}}}\n" + mock_routes("a"))
    with stopped_at_exit() as processes:
        process = spawn_gateway(config, None, "--workers", "2")  # listening where the config says
        processes.append(process)
        logs = LogLines(process)
        await wait_ready(first, process)
        await logs.wait_for("listening on", count=2)
        config.write_text(f"server: {{host: 127.0.0.1, port: {second}}}\n" + mock_routes("b"))
        process.send_signal(signal.SIGHUP)
        await logs.wait_for("server.port changed; it takes effect at the next restart", count=2)
        await logs.wait_for("reloaded", count=2)
        workers = worker_pids(process.pid)
        os.kill(min(workers), signal.SIGKILL)
        await logs.wait_for("listening on", count=3)
        replacement, line = listening_worker(logs, workers)
        assert f"listening on 127.0.0.1:{first} " in line
        assert await models_of_worker(first, replacement) == ["b"]  # the port of the start, the routes of the reload
        with pytest.raises(OSError):  # nobody listens on the port the reload named
            await asyncio.open_connection("127.0.0.1", second)
        process.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(process.wait, 30) == 0


async def test_a_worker_sent_sighup_alone_reloads_only_what_the_parent_accepted(tmp_path: Path) -> None:
    config = tmp_path / "g.yaml"
    config.write_text(mock_routes("a"))
    async with running_gateway(config, "--workers", "2") as gateway:
        process, port, logs = gateway.process, gateway.port, gateway.logs
        await logs.wait_for("listening on", count=2)
        worker = min(worker_pids(process.pid))
        config.write_text(mock_routes("b"))  # a file the parent has not checked
        os.kill(worker, signal.SIGHUP)  # `kill -HUP` of the process group reaches a worker so too
        await logs.wait_for(f"gateway {worker} reloaded")
        assert await models_of_worker(port, worker) == ["a"]
        process.send_signal(signal.SIGHUP)  # once the parent accepted it, every worker serves it
        await logs.wait_for("reloaded", count=3)
        assert await models_of_worker(port, worker) == ["b"]


async def test_a_reload_changes_the_keys_health_metrics_and_cors(tmp_path: Path, aiohttp_server: Any) -> None:
    path = tmp_path / "g.yaml"
    path.write_text("auth: {keys: [{name: a, key: key-one}]}\n" + mock_routes("old"))
    reloader, url = await reloadable(aiohttp_server, path)
    async with openai.AsyncOpenAI(base_url=url + "v1", api_key="key-one", max_retries=0) as one:
        assert await answer(one, "old") == "from-old"
        path.write_text(
            "auth: {keys: [{name: b, key: key-two}]}\ncors: {allowOrigins: ['https://app.example']}\n"
            "metrics: {path: /new-metrics}\n" + mock_routes("new")
        )
        assert await reloader.reload()
        with pytest.raises(openai.AuthenticationError):
            await answer(one, "new")
    async with openai.AsyncOpenAI(base_url=url + "v1", api_key="key-two", max_retries=0) as two:
        assert await answer(two, "new") == "from-new"
    async with aiohttp.ClientSession(headers={"Authorization": "Bearer key-two", "Origin": "https://app.example"}) as session:
        async with session.get(url + "v1/gateway/health") as response:
            assert list((await response.json())["routes"]) == ["new"]
            assert response.headers["Access-Control-Allow-Origin"] == "https://app.example"
        async with session.get(url + "new-metrics") as response:
            assert response.status == 200
            assert 'gateway_requests_total{route="new",status_code="200",stream="false"} 1.0' in await response.text()
        async with session.get(url + "metrics") as response:
            assert response.status == 404


async def test_a_config_file_that_is_gone_changes_nothing(tmp_path: Path, aiohttp_server: Any, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "g.yaml"
    path.write_text(mock_routes("a"))
    reloader, url = await reloadable(aiohttp_server, path)
    served = reloader.serving
    path.unlink()
    assert not await reloader.reload()
    assert reloader.serving is served
    assert "cannot read" in caplog.text
    async with openai.AsyncOpenAI(base_url=url + "v1", api_key="x", max_retries=0) as client:
        assert await answer(client, "a") == "from-a"


def sighup_is_held(pid: int) -> bool:
    """Whether process `pid` blocks or catches SIGHUP now (else SIGHUP would end it)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    masks = dict(line.split(":\t", 1) for line in status.splitlines() if line.startswith(("SigBlk", "SigCgt")))
    return any(int(masks[name], 16) & (1 << (signal.SIGHUP - 1)) for name in ("SigBlk", "SigCgt"))


def held_within(pid: int, seconds: float) -> bool:
    """Whether `pid` holds SIGHUP (`sighup_is_held`) within `seconds`, polled."""
    deadline = time.monotonic() + seconds
    while not sighup_is_held(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.002)
    return True


async def test_a_sighup_while_the_workers_start_reloads_them_once_they_can(tmp_path: Path) -> None:
    config = tmp_path / "g.yaml"
    config.write_text(mock_routes("a"))
    port = free_port()
    with stopped_at_exit() as processes:
        process = spawn_gateway(config, port, "--workers", "2")
        processes.append(process)
        logs = LogLines(process)
        assert await asyncio.to_thread(held_within, process.pid, 30)
        process.send_signal(signal.SIGHUP)  # the workers are not listening yet
        await wait_ready(port, process)
        await logs.wait_for("reloaded", count=2)  # each worker, once it could
        assert process.poll() is None
        assert not logs.matching("died")
        assert len(worker_pids(process.pid)) == 2


async def test_upstreams_that_cannot_be_set_up_change_nothing_and_stay_unnamed(
    tmp_path: Path, aiohttp_server: Any, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "g.yaml"
    path.write_text(mock_routes("a"))
    reloader, url = await reloadable(aiohttp_server, path)
    served = reloader.serving

    async def refused(*args: Any, **kwargs: Any) -> None:
        raise ValueError("cannot reach redis://user:s3cret@store:6379")

    monkeypatch.setattr("gateway.cli.reload.reloaded_app", refused)
    path.write_text(mock_routes("b"))
    assert not await reloader.reload()
    assert reloader.serving is served
    assert "failed setting up its upstreams (ValueError)" in caplog.text and "s3cret" not in caplog.text
    async with openai.AsyncOpenAI(base_url=url + "v1", api_key="x", max_retries=0) as client:
        assert await answer(client, "a") == "from-a"


async def test_a_reload_that_fails_unexpectedly_is_logged_and_the_next_one_works(
    tmp_path: Path, aiohttp_server: Any, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "g.yaml"
    path.write_text(mock_routes("a"))
    reloader, _ = await reloadable(aiohttp_server, path)

    async def broken() -> bool:
        raise RuntimeError("a bug")

    monkeypatch.setattr(reloader, "reload", broken)
    task = reloader.request()
    assert task is not None
    await task  # the error stays inside, logged
    assert "failed (RuntimeError)" in caplog.text
    monkeypatch.undo()
    path.write_text(mock_routes("b"))
    task = reloader.request()
    assert task is not None
    await task
    assert list(reloader.serving[CONFIG].routes) == ["b"]


async def test_a_replaced_configuration_is_closed_once_drained_and_a_failure_to_close_is_logged(
    tmp_path: Path, aiohttp_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "g.yaml"
    path.write_text(mock_routes("a"))
    reloader, _ = await reloadable(aiohttp_server, path)
    closed: list[str] = []

    async def close_first() -> None:
        closed.append("first")
        raise ConnectionError("store gone")

    reloader.serving[UPSTREAMS].push_async_callback(close_first)
    path.write_text(mock_routes("b"))
    assert await reloader.reload()
    await reloader.retired()
    assert closed == ["first"]
    assert "closing the upstreams of the configuration replaced failed (ConnectionError)" in caplog.text


async def test_without_a_front_door_a_reload_is_refused_and_logged(
    tmp_path: Path, aiohttp_server: Any, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("gateway.server.app.open_front_door", lambda app: None)  # an aiohttp the door does not know
    path = tmp_path / "g.yaml"
    path.write_text(mock_routes("a"))
    reloader, url = await reloadable(aiohttp_server, path)
    path.write_text(mock_routes("b"))
    assert not await reloader.reload()
    assert "not possible with this aiohttp version; restart the gateway to apply it" in caplog.text
    async with openai.AsyncOpenAI(base_url=url + "v1", api_key="x", max_retries=0) as client:
        assert await answer(client, "a") == "from-a"


async def test_metrics_series_keep_their_values_across_a_reload(tmp_path: Path, aiohttp_server: Any) -> None:
    path = tmp_path / "g.yaml"
    path.write_text(mock_routes("kept", "gone"))
    reloader, url = await reloadable(aiohttp_server, path)
    async with openai.AsyncOpenAI(base_url=url + "v1", api_key="x", max_retries=0) as client:
        for model in ("kept", "kept", "gone"):
            await answer(client, model)
        path.write_text(mock_routes("kept", "new"))
        assert await reloader.reload()
        for model in ("kept", "new"):
            await answer(client, model)
    async with aiohttp.ClientSession() as session, session.get(url + "metrics") as response:
        text = await response.text()
    for route, count in (("kept", 3), ("gone", 1), ("new", 1)):
        assert f'gateway_requests_total{{route="{route}",status_code="200",stream="false"}} {count}.0' in text, route
    assert "gateway_config_routes 2.0" in text


async def test_an_open_gateway_is_logged_at_start_and_on_a_reload_only_when_it_opens(
    tmp_path: Path, aiohttp_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "g.yaml"
    path.write_text(mock_routes("a"))
    reloader, _ = await reloadable(aiohttp_server, path)

    def warnings() -> int:
        return caplog.text.count("auth.keys is empty: the gateway is open")

    assert warnings() == 1
    path.write_text(mock_routes("b"))
    assert await reloader.reload()
    assert warnings() == 1  # open before, open still: nothing new to say
    path.write_text("auth: {keys: [{name: a, key: key-one}]}\n" + mock_routes("b"))
    assert await reloader.reload()
    assert warnings() == 1
    path.write_text(mock_routes("b"))
    assert await reloader.reload()
    assert warnings() == 2  # the keys are gone: open again


async def test_a_reload_whose_upstreams_fail_adds_no_metric_series(
    tmp_path: Path, aiohttp_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "g.yaml"
    path.write_text(mock_routes("a"))
    reloader, url = await reloadable(aiohttp_server, path)

    def unreachable(*args: Any, **kwargs: Any) -> None:
        raise ConnectionError("the breakers' store is gone")

    monkeypatch.setattr("gateway.server.app.open_breakers", unreachable)
    path.write_text(mock_routes("b", "c"))
    assert not await reloader.reload()
    async with aiohttp.ClientSession() as session, session.get(url + "metrics") as response:
        text = await response.text()
    assert 'route="a"' in text
    assert 'route="b"' not in text and 'route="c"' not in text
    assert "gateway_config_routes 1.0" in text
