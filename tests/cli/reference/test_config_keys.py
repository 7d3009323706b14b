"""The configuration reference (gateway.cli.reference.config_keys): every section and key from the schema, with type, default, meaning."""

from __future__ import annotations

import copy

import pytest

from gateway.cli.reference.config_keys import CODE_DEFAULTS, config_page, sections, type_of, undescribed
from gateway.cli.reference.markdown import Undescribed
from gateway.config.json_schema import config_json_schema
from gateway.config.schema import ConfigFile, Node, Server
from gateway.core.memory.settings import MemoryConfig


def test_every_section_is_reached_once_as_a_dotted_path() -> None:
    found = {section.path: section for section in sections()}
    assert {"", "server", "memory", "memory.defaults", "auth.keys[]", "routes.<name>", "routes.<name>.retry",
            "routes.<name>.targets[]", "breakers.sentinel"} <= set(found)  # fmt: skip
    assert len({section.definition for section in found.values()}) == len(found)
    assert [key.name for key in found["server"].keys] == [field.alias for field in Server.model_fields.values()]
    assert {key.name for key in found["routes.<name>.targets[]"].keys} == {f.alias for f in Node.model_fields.values()}


def test_every_key_of_the_file_is_listed_without_portkeys_spellings() -> None:
    top = sections()[0]
    assert [key.name for key in top.keys] == [field.alias for field in ConfigFile.model_fields.values()]
    assert all("_" not in key.name for section in sections() for key in section.keys)


def test_a_key_shows_its_type_default_and_meaning() -> None:
    server = next(section for section in sections() if section.path == "server")
    port = next(key for key in server.keys if key.name == "port")
    assert (port.type, port.default, port.description) == (
        "integer, >= 0, <= 65,535; or ${VAR}", "8080", "Port to listen on."
    )
    routes = next(key for key in sections()[0].keys if key.name == "routes")
    assert (routes.default, routes.section) == ("required", "Route")


def test_keys_null_in_the_schema_show_the_default_the_code_holds() -> None:
    found = {section.path: {key.name: key.default for key in section.keys} for section in sections()}
    assert set(CODE_DEFAULTS) <= set(found)
    memory = MemoryConfig()
    assert found["memory.defaults"] == {
        "maxMessages": str(memory.defaults.max_messages), "maxTokens": str(memory.defaults.max_tokens),
        "maxRounds": str(memory.defaults.max_rounds), "maxChars": str(memory.defaults.max_chars),
        "memoryType": '"message_window"', "summaryRoute": "",
        "summaryMaxTokens": str(memory.defaults.summary_max_tokens),
    }  # fmt: skip
    assert found["memory.limits"]["maxTokens"] == str(memory.limits.max_tokens)
    assert (found["routes.<name>.mock"]["latency"], found["routes.<name>.mock"]["chunkDelay"]) == ("0.0", "0.0")
    assert found["routes.<name>.mock"]["reply"] == ""  # none: the mock echoes the prompt


def test_types_in_words() -> None:
    assert type_of({"anyOf": [{"enum": ["a", "b"], "type": "string"}, {"$ref": "#/$defs/EnvReference"}]}) == (
        "one of a, b; or ${VAR}", None
    )
    assert type_of({"type": "array", "items": {"$ref": "#/$defs/Node"}, "minItems": 1}) == (
        "list of sections (at least one)", "Node"
    )
    assert type_of({"type": "object", "additionalProperties": True}) == ("mapping of any by name", None)
    assert type_of({"type": "number", "exclusiveMinimum": 0, "maximum": 1}) == ("number, > 0, <= 1", None)


def test_a_key_without_a_description_is_found() -> None:
    schema = copy.deepcopy(config_json_schema())
    del schema["$defs"]["Retry"]["properties"]["attempts"]["description"]
    schema["$defs"]["Mock"]["description"] = ""
    assert undescribed(sections(schema)) == ["routes.<name>.mock", "routes.<name>.retry.attempts"]
    assert undescribed(sections()) == []


def test_the_page_refuses_a_key_without_a_description(monkeypatch: pytest.MonkeyPatch) -> None:
    schema = copy.deepcopy(config_json_schema())
    del schema["$defs"]["Server"]["properties"]["backlog"]["description"]
    monkeypatch.setattr("gateway.cli.reference.config_keys.config_json_schema", lambda: schema)
    with pytest.raises(Undescribed, match=r"server\.backlog"):
        config_page()


def test_the_page_has_a_table_per_section_linked_from_the_key_that_opens_it() -> None:
    page = config_page()
    assert "## `routes.<name>.retry` { #routes-name-retry }" in page
    assert "| `retry` | [section](#routes-name-retry) |" in page
    assert "| `targets` | list of [sections](#routes-name-targets) (at least one) |" in page
    assert "| `port` | integer, >= 0, <= 65,535; or ${VAR} | `8080` | Port to listen on. |" in page
