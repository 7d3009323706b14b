"""Reading x-gateway-config (no event loop): what a client may send, what it is refused, the cache."""

from __future__ import annotations

import json

import orjson
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from gateway.config.loader import parse_config
from gateway.core.errors import InvalidRequestError
from gateway.core.hosts import HostPolicy
from gateway.core.tree import Target
from gateway.server.inline import INLINE_ROUTE, MAX_DEPTH, InlineConfigs, read_tree, route_from_header
from tests.support.fuzzing import FUZZ, json_values, nodes

CONFIG = parse_config(
    """
    requestConfig: {enabled: true, allowedHosts: [api.openai.com]}
    memory: {store: memory, defaults: {maxMessages: 7}}
    routes:
      windowed: {provider: mock, memory: {maxMessages: 3}}
    """
)
POLICY = HostPolicy.parse(["api.openai.com", "127.0.0.1"])


def refusal(text: str, policy: HostPolicy = POLICY) -> str:
    with pytest.raises(InvalidRequestError) as caught:
        read_tree(text, policy)
    assert (caught.value.status, caught.value.param) == (400, "x-gateway-config")
    return caught.value.message


def test_a_tree_without_a_base_url_goes_to_openai_which_must_be_listed() -> None:
    root = read_tree('{"apiKey": "sk-client"}', POLICY)
    assert isinstance(root, Target) and root.base_url == "https://api.openai.com/v1"
    message = refusal('{"apiKey": "sk-client"}', HostPolicy.parse(["127.0.0.1"]))
    assert "baseUrl: host 'api.openai.com' is not in requestConfig.allowedHosts" in message


def test_deep_trees_are_refused_before_they_are_read() -> None:
    levels = 500  # what orjson still reads; the tree reader would recurse through each
    deep = '{"strategy": {"mode": "single"}, "targets": [' * levels + '{"provider": "mock"}' + "]}" * levels
    assert "nests deeper than" in refusal(deep)
    params: object = "x"
    for _ in range(MAX_DEPTH + 1):
        params = {"a": params}
    assert "nests deeper than" in refusal(orjson.dumps({"provider": "mock", "overrideParams": params}).decode())


@pytest.mark.parametrize(
    ("target", "problem"),
    [
        ({"provider": "mock", "name": "a\r\nx-injected: 1"}, "name: must be 1-64 letters"),
        ({"baseUrl": "http://user:pw@127.0.0.1/v1"}, "baseUrl: must not carry credentials"),
        ({"baseUrl": "http://127.0.0.1/v1?x=1"}, "baseUrl: must not carry credentials, a query"),
        ({"baseUrl": "http://127.0.0.1/v1", "headers": {"Transfer-Encoding": "chunked"}}, "headers.Transfer-Encoding"),
        ({"baseUrl": "http://127.0.0.1/v1", "headers": {"x-ok": "é"}}, "headers.x-ok: must be printable ASCII"),
        ({"baseUrl": "http://127.0.0.1/v1", "overrideParams": {"aws_role_name": "admin"}}, "overrideParams.aws_role_name"),
        ({"provider": "bedrock", "providerParams": {"awsRegionName": "eu-west-1"}}, "provider: 'bedrock' is not allowed"),
        ({"provider": "azure", "baseUrl": "https://r.openai.azure.com", "apiKey": "k"}, "provider: 'azure' is not allowed"),
    ],
)
def test_what_a_target_may_not_ask_for(target: dict[str, object], problem: str) -> None:
    assert problem in refusal(orjson.dumps(target).decode())


def test_every_refusal_is_listed_with_its_path() -> None:
    tree = {
        "strategy": {"mode": "fallback"},
        "targets": [
            {"provider": "mock"},
            {"strategy": {"mode": "loadbalance"}, "targets": [{"baseUrl": "http://10.0.0.1/v1"}, {"provider": "anthropic"}]},
        ],
    }
    message = refusal(orjson.dumps(tree).decode(), HostPolicy.parse(["*"]))
    assert "targets[1].targets[0].baseUrl: 10.0.0.1 is a private address" in message
    assert "targets[1].targets[1].provider: 'anthropic' is not allowed" in message


def test_off_or_unwired_the_header_is_refused() -> None:
    for configs in (None, InlineConfigs(parse_config("routes: {m: {provider: mock}}").request_config)):
        with pytest.raises(InvalidRequestError) as caught:
            route_from_header(["windowed"], CONFIG, configs=configs, model="windowed")
        assert caught.value.code == "request_config_disabled"


def test_an_inline_route_has_the_models_memory_or_the_defaults() -> None:
    configs = InlineConfigs(CONFIG.request_config)
    inline = route_from_header(['  {"provider": "mock"} '], CONFIG, configs=configs, model="windowed")
    assert (inline.name, inline.memory.max_messages) == (INLINE_ROUTE, 3)
    assert route_from_header(['{"provider": "mock"}'], CONFIG, configs=configs, model="unknown-model").memory.max_messages == 7
    assert route_from_header(["windowed"], CONFIG, configs=configs, model="unknown-model") is CONFIG.routes["windowed"]
    for values in ([], ["a", "b"], ["   "]):
        with pytest.raises(InvalidRequestError):
            route_from_header(values, CONFIG, configs=configs, model="windowed")


def test_the_cache_reads_a_text_once_and_holds_at_most_its_size() -> None:
    configs = InlineConfigs(CONFIG.request_config, size=2)
    texts = [orjson.dumps({"provider": "mock", "name": f"t{i}"}).decode() for i in range(3)]
    first = configs.tree(texts[0])
    assert configs.tree(texts[0]) is first and configs.parses == 1
    configs.tree(texts[1])
    configs.tree(texts[0])  # used again: now the most recent
    configs.tree(texts[2])  # evicts texts[1], the least recently used
    assert len(configs) == 2 and configs.parses == 3
    assert configs.tree(texts[0]) is first
    configs.tree(texts[1])
    assert configs.parses == 4
    with pytest.raises(InvalidRequestError):
        configs.tree('{"weight": -1}')
    assert len(configs) == 2  # refusals are not kept


@FUZZ
@given(text=st.text(max_size=300) | (nodes | json_values).map(json.dumps))
@example(text='{"baseUrl": "http://h:99999/v1"}')
def test_any_header_text_is_a_tree_or_a_400(text: str) -> None:
    try:
        read_tree(text, HostPolicy.parse(["127.0.0.1", "*"]))
    except InvalidRequestError as exc:
        assert exc.status == 400 and exc.param == "x-gateway-config"
