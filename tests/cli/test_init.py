"""`gateway init` (gateway.cli.init): a starter config per provider and memory store that checks and serves, never over a file."""

from __future__ import annotations

import contextlib
import itertools
import re
from collections.abc import AsyncIterator
from pathlib import Path

import openai
import pytest
import redis.asyncio as aioredis
import yaml

from gateway.cli.init import PROVIDERS, MemoryChoice, Provider, starter_config
from gateway.cli.main import main
from tests.support.fakes import FakeUpstream, Step, error_body
from tests.support.processes import running_gateway
from tests.support.servers import redis_server

# Placeholder values for every variable a starter config names without a default.
PLACEHOLDERS = {"OPENAI_API_KEY": "sk-placeholder", "ANTHROPIC_API_KEY": "sk-ant-placeholder", "GEMINI_API_KEY": "placeholder"}


@pytest.mark.parametrize(("provider", "memory"), list(itertools.product(Provider, MemoryChoice)))
def test_every_starter_config_passes_check_config(
    provider: Provider, memory: MemoryChoice, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, value in PLACEHOLDERS.items():
        monkeypatch.setenv(name, value)
    path = tmp_path / "gateway.yaml"
    assert main(["init", str(path), "--provider", provider, "--memory", memory]) == 0
    assert main(["check-config", str(path)]) == 0
    assert f"{path}: ok" in capsys.readouterr().out
    document = yaml.safe_load(path.read_text())
    assert document["memory"]["store"] == memory
    assert document["defaultRoute"] in document["routes"]


@pytest.mark.parametrize("provider", [Provider.OPENAI, Provider.ANTHROPIC, Provider.GEMINI])
def test_a_hosted_providers_key_is_a_reference_never_a_value(provider: Provider) -> None:
    text = starter_config(provider, MemoryChoice.SQLITE)
    keys = re.findall(r"apiKey: \"([^\"]*)\"", text)
    assert keys and all(re.fullmatch(r"\$\{[A-Z_]+\}", key) for key in keys), keys


def test_local_servers_are_reached_as_openai_compatible_upstreams_at_their_usual_urls() -> None:
    for provider, url in ((Provider.OLLAMA, "http://localhost:11434/v1"), (Provider.VLLM, "http://localhost:8000/v1")):
        chat = yaml.safe_load(starter_config(provider, MemoryChoice.SQLITE))["routes"]["chat"]
        assert chat["provider"] == "openai"
        assert chat["baseUrl"].endswith(f":-{url}}}"), chat["baseUrl"]


def test_a_redis_store_reads_its_url_from_the_environment() -> None:
    memory = yaml.safe_load(starter_config(Provider.MOCK, MemoryChoice.REDIS))["memory"]
    assert memory == {"store": "redis", "url": "${REDIS_URL:-redis://localhost:6379/0}"}


@pytest.mark.parametrize("provider", list(Provider))
def test_a_comment_says_what_each_block_does(provider: Provider) -> None:
    lines = starter_config(provider, MemoryChoice.SQLITE).splitlines()
    blocks = [index for index, line in enumerate(lines) if re.match(r"[a-zA-Z]+:", line)]
    assert [lines[index].split(":")[0] for index in blocks] == ["server", "memory", "metrics", "defaultRoute", "routes"]
    assert all(lines[index - 1].startswith("#") for index in blocks)


def test_the_header_names_the_variables_to_set() -> None:
    header = starter_config(Provider.ANTHROPIC, MemoryChoice.SQLITE).split("server:")[0]
    assert "Set ANTHROPIC_API_KEY in the environment first." in header


def test_an_existing_file_is_refused_and_left_as_it_was(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "gateway.yaml"
    path.write_text("mine\n")
    assert main(["init", str(path), "--provider", "mock"]) == 1
    assert path.read_text() == "mine\n"
    assert f"{path}: already exists; not overwritten" in capsys.readouterr().err


def test_the_default_path_is_gateway_yaml_in_the_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["init", "--provider", "mock"]) == 0
    assert (tmp_path / "gateway.yaml").read_text() == starter_config(Provider.MOCK, MemoryChoice.SQLITE)


def test_the_provider_must_be_named_and_known(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["init"], ["init", "--provider", "openrouter"]):
        with pytest.raises(SystemExit) as caught:
            main(argv)
        assert caught.value.code == 2
    assert "--provider" in capsys.readouterr().err
    assert set(PROVIDERS) == {"openai", "anthropic", "gemini", "ollama", "vllm", "mock"}


async def test_a_mock_starter_config_serves_offline_to_the_openai_sdk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Served from where the file is, as its header says: its relative memory path lands there.
    monkeypatch.chdir(tmp_path)
    assert main(["init", "--provider", "mock"]) == 0
    async with running_gateway(Path("gateway.yaml")) as gateway:
        base_url = f"http://127.0.0.1:{gateway.port}/v1"
        async with openai.AsyncOpenAI(base_url=base_url, api_key="unused", max_retries=0) as client:
            answer = await client.chat.completions.create(
                model="any-model", messages=[{"role": "user", "content": "hello from init"}]
            )
            fallback = await client.chat.completions.create(model="smart", messages=[{"role": "user", "content": "again"}])
    assert "hello from init" in (answer.choices[0].message.content or "")
    assert fallback.choices[0].message.content


@contextlib.asynccontextmanager
async def serve_starter(
    tmp_path: Path, provider: Provider, *, memory: MemoryChoice = MemoryChoice.SQLITE
) -> AsyncIterator[openai.AsyncOpenAI]:
    """`gateway serve` of the starter config `gateway init` writes, from its folder; an SDK client of it."""
    path = tmp_path / "gateway.yaml"
    assert main(["init", str(path), "--provider", provider, "--memory", memory]) == 0
    async with running_gateway(path) as gateway:
        base_url = f"http://127.0.0.1:{gateway.port}/v1"
        async with openai.AsyncOpenAI(base_url=base_url, api_key="unused", max_retries=0) as client:
            yield client


@pytest.mark.parametrize(
    ("provider", "variable", "model"),
    [(Provider.OLLAMA, "OLLAMA_BASE_URL", "llama3.2"), (Provider.VLLM, "VLLM_BASE_URL", "Qwen/Qwen2.5-7B-Instruct")],
)
async def test_a_local_servers_starter_config_passes_requests_to_it(
    provider: Provider, variable: str, model: str, upstream: FakeUpstream, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(variable, upstream.url)
    monkeypatch.setenv("VLLM_API_KEY", "vllm-key")
    async with serve_starter(tmp_path, provider) as client:
        answer = await client.chat.completions.create(model="any-model", messages=[{"role": "user", "content": "hi"}])
    assert answer.choices[0].message.content == "Hello from upstream"
    [received] = upstream.requests
    assert (received.path, received.body["model"]) == ("/v1/chat/completions", model)
    sent_key = received.headers.get("Authorization")
    assert sent_key == ("Bearer vllm-key" if provider is Provider.VLLM else None)


async def test_the_openai_starter_config_falls_back_from_the_big_model_to_the_small_one(
    upstream: FakeUpstream, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_BASE_URL", upstream.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-starter")
    upstream.then(Step(status=503, body=error_body(503)))
    async with serve_starter(tmp_path, Provider.OPENAI) as client:
        answer = await client.chat.completions.create(model="smart", messages=[{"role": "user", "content": "hi"}])
    assert answer.choices[0].message.content == "Hello from upstream"
    targets = yaml.safe_load(starter_config(Provider.OPENAI, MemoryChoice.SQLITE))["routes"]["smart"]["targets"]
    assert [received.body["model"] for received in upstream.requests] == [t["overrideParams"]["model"] for t in targets]
    assert all(received.headers["Authorization"] == "Bearer sk-starter" for received in upstream.requests)


async def test_the_redis_starter_config_keeps_a_conversation_in_redis(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with redis_server(tmp_path) as redis:
        monkeypatch.setenv("REDIS_URL", redis.url)
        async with serve_starter(tmp_path, Provider.MOCK, memory=MemoryChoice.REDIS) as client:
            for question in ("My name is Ada.", "Who am I?"):
                reply = await client.chat.completions.with_raw_response.create(
                    model="chat", messages=[{"role": "user", "content": question}], extra_headers={"memoryId": "init-demo"}
                )
        store = aioredis.Redis.from_url(redis.url)
        stored = await store.keys("*")
        await store.aclose()
    assert reply.headers["x-memory-history"] == "2"
    assert "received 3 messages" in (reply.parse().choices[0].message.content or "")
    assert stored  # the conversation is in this Redis, not elsewhere
