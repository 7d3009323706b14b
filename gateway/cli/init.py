"""`gateway init`: a commented starter config for one provider and one memory store.

Keys are `${VAR}` references, never values; the file passes `gateway check-config` once the
variables it names are set, and `--provider mock` serves with none and no network.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Final

STARTER_PATH: Final = "gateway.yaml"


class Provider(StrEnum):
    """The upstreams a starter config can be written for."""

    OPENAI = "openai"
    ANTHROPIC = "anthropic"
    GEMINI = "gemini"
    OLLAMA = "ollama"
    VLLM = "vllm"
    MOCK = "mock"


class MemoryChoice(StrEnum):
    """Where a starter config keeps conversation memory."""

    SQLITE = "sqlite"
    REDIS = "redis"


PROVIDERS: Final = tuple(provider.value for provider in Provider)
MEMORIES: Final = tuple(memory.value for memory in MemoryChoice)


@dataclass(frozen=True, slots=True)
class Upstream:
    """A provider as a starter config writes it: the routes, and the variables they read."""

    routes: str
    variables: tuple[str, ...] = ()


def _hosted(provider: str, variable: str, models: tuple[str, str], *, base_url: str = "") -> Upstream:
    """A hosted provider reached with a key: a `chat` route, and a `smart` one that falls back to it.

    `base_url`: a `${VAR:-url}` the targets are reached at (an environment override of the provider's own).
    """
    big, small = models
    at = f'baseUrl: "{base_url}", ' if base_url else ""
    target = f'provider: {provider}, {at}apiKey: "${{{variable}}}"'
    at_line = f'    baseUrl: "{base_url}"  # the SDKs\' variable, for a proxy or a compatible service\n' if base_url else ""
    routes = f"""\
  # Any model name no other route claims comes here (defaultRoute); the upstream gets this model.
  chat:
    provider: {provider}
{at_line}    apiKey: "${{{variable}}}"  # read from the environment when the file loads; never write the key here
    overrideParams: {{model: {small}}}

  # {big} first; when it fails (429, 500, 502-504, a timeout, no connection), {small} answers.
  smart:
    strategy: {{mode: fallback}}
    targets:
      - {{name: {big}, {target}, overrideParams: {{model: {big}}}}}
      - {{name: {small}, {target}, overrideParams: {{model: {small}}}}}
"""
    return Upstream(routes, (variable,))


def _local(name: str, *, variable: str, url: str, model: str) -> str:
    """A local OpenAI-compatible server: one `chat` route to `url`, overridable from the environment."""
    return f"""\
  # Any model name no other route claims comes here (defaultRoute).
  # {name} speaks OpenAI's API, so the gateway passes requests through (provider: openai).
  chat:
    provider: openai
    baseUrl: "${{{variable}:-{url}}}"
    overrideParams: {{model: "{model}"}}
    # /v1/responses requests become chat completions, which every OpenAI-compatible server has.
    responsesApi: translate
"""


# Current models (litellm's price table, none with a deprecation date, checked 2026-11-29).
UPSTREAMS: Final = {
    Provider.OPENAI: _hosted(
        "openai", "OPENAI_API_KEY", ("gpt-5.5", "gpt-5.4-mini"), base_url="${OPENAI_BASE_URL:-https://api.openai.com/v1}"
    ),
    Provider.ANTHROPIC: _hosted("anthropic", "ANTHROPIC_API_KEY", ("claude-sonnet-5-5", "claude-haiku-5-5")),
    Provider.GEMINI: _hosted("gemini", "GEMINI_API_KEY", ("gemini-3.8-flash", "gemini-3.5-flash-lite")),
    Provider.OLLAMA: Upstream(
        _local("Ollama", variable="OLLAMA_BASE_URL", url="http://localhost:11434/v1", model="llama3.2")
        + "    # Ollama takes no key; a server behind one takes apiKey: \"${OLLAMA_API_KEY}\".\n"
    ),
    Provider.VLLM: Upstream(
        _local(
            "vLLM", variable="VLLM_BASE_URL", url="http://localhost:8000/v1", model="${VLLM_MODEL:-Qwen/Qwen2.5-7B-Instruct}"
        )
        + '    # The key vLLM was started with (--api-key); empty: none sent.\n'
        + '    apiKey: "${VLLM_API_KEY:-}"\n'
    ),
    Provider.MOCK: Upstream(
        """\
  # The built-in mock model: it echoes the prompt, offline, with no key.
  chat:
    provider: mock

  # A fallback whose first target fails once (503), then the second answers.
  smart:
    strategy: {mode: fallback}
    targets:
      - {name: flaky, provider: mock, mock: {statuses: [503]}}
      - {name: steady, provider: mock}
"""
    ),
}

MEMORY_BLOCKS: Final = {
    MemoryChoice.SQLITE: """\
# Conversation memory, for requests that carry a memoryId: a SQLite file (relative paths are
# from the directory the gateway starts in), shared by the workers of `serve --workers N`.
memory:
  store: sqlite
  path: ./data/memory.db
""",
    MemoryChoice.REDIS: """\
# Conversation memory, for requests that carry a memoryId: Redis, shared by every replica.
# Circuit-breaker state is kept there too. A password goes in the URL, so the URL is read
# from the environment.
memory:
  store: redis
  url: "${REDIS_URL:-redis://localhost:6379/0}"
""",
}


def starter_config(provider: Provider, memory: MemoryChoice, *, path: str = STARTER_PATH) -> str:
    """The text of a commented starter config for `provider`, with memory kept in `memory`, to be saved at `path`."""
    upstream = UPSTREAMS[provider]
    needs = ", ".join(upstream.variables)
    setting = f"# Set {needs} in the environment first.\n" if needs else ""
    return f"""\
# A starter configuration for the gateway, written by `gateway init --provider {provider} --memory {memory}`.
# Check it: gateway check-config {path}      Run it: gateway serve --config {path}
# A value written ${{VAR}} is read from the environment when the file loads (${{VAR:-x}}: x when unset).
# `gateway schema` prints every key with its type, default and meaning (JSON Schema, for editors).
{setting}
# Where the gateway listens. 127.0.0.1 takes local clients only; 0.0.0.0 takes any (add keys below).
server:
  host: 127.0.0.1
  port: 8080

# Keys clients send as their Bearer token. Without any, anyone who can reach the gateway may call
# it (it logs a warning at start). To require one, uncomment and set GATEWAY_KEY:
# auth:
#   keys:
#     - {{name: my-team, key: "${{GATEWAY_KEY}}"}}

{MEMORY_BLOCKS[memory]}
# Prometheus metrics at /metrics; requireAuth: true puts them behind the gateway keys.
metrics:
  enabled: true
  path: /metrics

# Requests whose model names no route go to this one.
defaultRoute: chat

# Routes by the model name clients ask for. A target's retries, timeouts and circuit breaker
# have defaults (see `gateway check-config`, which prints them).
routes:
{upstream.routes}"""


def write_starter(path: Path, *, provider: Provider, memory: MemoryChoice) -> None:
    """Write the starter config to `path`; FileExistsError when something is there already."""
    with path.open("x", encoding="utf-8") as file:  # "x": an existing file is never replaced
        file.write(starter_config(provider, memory, path=str(path)))


def init(path: str, *, provider: str, memory: str) -> int:
    """`gateway init`: write the starter config, say what to do next; 1 when `path` exists."""
    try:
        write_starter(Path(path), provider=Provider(provider), memory=MemoryChoice(memory))
    except FileExistsError:
        print(f"{path}: already exists; not overwritten (remove it, or give another path)", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"{path}: cannot write the starter config: {exc.strerror}", file=sys.stderr)
        return 1
    needs = UPSTREAMS[Provider(provider)].variables
    print(f"{path}: written for provider {provider}, memory in {memory}")
    if needs:
        print(f"  set {', '.join(needs)} in the environment, then:")
    print(f"  gateway check-config {path}\n  gateway serve --config {path}")
    return 0
