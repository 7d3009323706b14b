"""The config file's JSON Schema, which `gateway schema` prints for editors to complete and check `gateway.yaml`.

It is pydantic's schema of gateway.config.schema as the file is written: where a number, a flag
or a choice is expected a `${VAR}` reference may stand (gateway.config.fields says where), and
every key may also be spelled in Portkey's snake_case.
"""

from __future__ import annotations

import re
from typing import Any, Final

from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode, JsonSchemaValue
from pydantic_core import CoreSchema

from gateway.config.fields import ENV_REFERENCE
from gateway.config.schema import ConfigFile

_REFERENCE: Final = "EnvReference"


class _ConfigSchema(GenerateJsonSchema):
    """pydantic's JSON Schema with snake_case spellings of the keys and one definition of a `${VAR}` reference."""

    def generate(self, schema: CoreSchema, mode: JsonSchemaMode = "validation") -> JsonSchemaValue:
        generated = super().generate(schema, mode)
        for definition in (generated, *generated.get("$defs", {}).values()):
            _add_snake_case(definition)
        generated = _referred(generated)
        generated.setdefault("$defs", {})[_REFERENCE] = ENV_REFERENCE
        return {"$schema": self.schema_dialect, **generated}

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False  # the key itself is the title; descriptions say what it is for


def _referred(value: Any) -> Any:
    """`value` with each copy of ENV_REFERENCE replaced by a reference to its one definition."""
    if value == ENV_REFERENCE:
        return {"$ref": f"#/$defs/{_REFERENCE}"}
    if isinstance(value, dict):
        return {key: _referred(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_referred(item) for item in value]
    return value


def _add_snake_case(definition: JsonSchemaValue) -> None:
    """Give each key of a closed mapping its snake_case spelling too (`api_key` beside `apiKey`)."""
    properties = definition.get("properties")
    if properties is None or definition.get("additionalProperties") is not False:
        return
    for key, value in list(properties.items()):
        snake = re.sub(r"[A-Z]", lambda upper: "_" + upper.group().lower(), key)
        if snake != key:
            properties[snake] = {**value, "description": f"Portkey's spelling of {key}."}


def config_json_schema() -> dict[str, Any]:
    """The JSON Schema of the config file."""
    return ConfigFile.model_json_schema(by_alias=True, schema_generator=_ConfigSchema)
