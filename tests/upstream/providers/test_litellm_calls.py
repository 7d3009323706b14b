"""What a litellm call is given (the client's allowed fields, the target's settings) and which answer headers are relayed."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from gateway.config.loader import parse_config
from gateway.upstream.providers import litellm_internals
from gateway.upstream.providers.base import Call
from gateway.upstream.providers.litellm_calls import litellm_arguments, relayed_headers

MESSAGES = [{"role": "user", "content": "hello"}]


def _call(body: dict[str, Any], config: str, endpoint: str = "chat/completions") -> Call:
    target = parse_config(config).routes["r"].first_target
    return Call(target, endpoint, {**body, **target.override_params})


def test_arguments_take_the_target_settings_and_only_allowed_fields() -> None:
    hostile = {
        "api_base": "http://evil",
        "metadata": {},
        "callbacks": ["langfuse"],
        "success_callback": ["x"],
    }
    hostile |= {
        "aws_region_name": "moon-1",
        "vertex_project": "theirs",
        "litellm_logging_obj": None,
        "client": None,
    }
    call = _call(
        {"model": "r", "messages": MESSAGES, "stream_options": {"include_usage": True}, "seed": 1, **hostile},
        "routes: {r: {provider: bedrock, apiKey: k, baseUrl: 'http://b', headers: {x-h: v}, timeout: 9,"
        " overrideParams: {model: anthropic.claude-v2, guardrailConfig: {id: g}},"
        " providerParams: {awsRegionName: eu-west-1}}}",
    )
    assert litellm_arguments(call, stream=False) == {
        "model": "bedrock/anthropic.claude-v2",
        "messages": MESSAGES,
        "seed": 1,
        "guardrailConfig": {"id": "g"},  # the operator's overrideParams pass as they are
        "api_key": "k",
        "api_base": "http://b",
        "timeout": 9.0,
        "num_retries": 0,
        "max_retries": 0,
        "aws_region_name": "eu-west-1",
        "extra_headers": {"x-h": "v"},
        **({"_skip_mcp_handler": True} if litellm_internals.PRIVATE else {}),  # else mcp tools are dropped
    }
    streamed = litellm_arguments(call, stream=True)
    assert streamed["stream"] is True and streamed["stream_options"] == {"include_usage": True}


def test_a_model_already_named_with_its_provider_is_not_prefixed_again() -> None:
    call = _call(
        {"model": "r", "messages": MESSAGES},
        "routes: {r: {provider: anthropic, overrideParams: {model: anthropic/claude-x}}}",
    )
    arguments = litellm_arguments(call, stream=False)
    assert arguments["model"] == "anthropic/claude-x"
    assert arguments["api_key"] is None and arguments["api_base"] is None  # litellm's own defaults (env keys)


def test_embedding_arguments_drop_chat_fields() -> None:
    call = _call(
        {"model": "r", "input": ["a"], "dimensions": 8, "messages": MESSAGES},
        "routes: {r: {provider: cohere}}",
        "embeddings",
    )
    arguments = litellm_arguments(call, stream=False)
    assert (arguments["input"], arguments["dimensions"], "messages" in arguments) == (["a"], 8, False)


def test_relayed_headers_take_litellm_s_prefixed_provider_headers() -> None:
    headers = {
        "llm_provider-retry-after": "3",
        "x-ratelimit-limit-requests": "50",
        "llm_provider-request-id": "r",
        "server": "s",
    }
    assert relayed_headers(headers) == {"retry-after": "3", "x-ratelimit-limit-requests": "50"}


def test_reading_them_imports_no_litellm() -> None:
    code = "import sys, gateway.upstream.providers.litellm_calls; print('litellm' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"
