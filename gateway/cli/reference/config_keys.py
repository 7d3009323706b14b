"""The configuration reference: every key of the config file, with its type, default and meaning.

Read from the config's JSON Schema (gateway.config.json_schema, what `gateway schema` prints),
which pydantic makes from the schema's models: a section per model, reached from the file's top
as a dotted path (`memory.defaults`), each key a row. Portkey's snake_case spellings are left out.
Where a section's keys are null in the schema (memory's windows, a tree's mock: "not set here"),
the default shown is the one the code's settings object holds.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from gateway.cli.reference.markdown import GENERATED, cell, code, require_descriptions, table
from gateway.config.json_schema import config_json_schema
from gateway.config.section import camel
from gateway.core.memory.settings import MemoryConfig
from gateway.core.tree import MockOptions

ROOT: Final = "ConfigFile"
ENV_REFERENCE: Final = "EnvReference"
_CAMEL_PART = re.compile(r"_([a-z])")
# The objects whose fields are the defaults of a section that the schema leaves null: a route's
# memory falls back to memory.defaults, a tree's keys to the node above, and at the top to these.
_MEMORY: Final = MemoryConfig()
CODE_DEFAULTS: Final[Mapping[str, Mapping[str, object]]] = {
    path: {camel(name): value for name, value in dataclasses.asdict(settings).items()}
    for path, settings in (
        ("memory.defaults", _MEMORY.defaults), ("memory.limits", _MEMORY.limits), ("routes.<name>.mock", MockOptions())
    )
}


@dataclass(frozen=True, slots=True)
class Key:
    """One key of a section: its name, type, default (JSON, or "" when none) and description."""

    name: str
    type: str
    default: str
    description: str
    section: str | None  # the definition of the section it opens, if it is one


@dataclass(frozen=True, slots=True)
class Section:
    """A mapping of keys in the file: where it is first met (a dotted path), what it is, its keys."""

    path: str
    definition: str
    description: str
    keys: tuple[Key, ...]


def _definition(reference: str) -> str:
    return reference.rsplit("/", 1)[-1]


def _number(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


def _bounds(schema: Mapping[str, Any]) -> str:
    """A number's bounds in words: `, >= 1, <= 65,535`."""
    low = (
        f"> {_number(schema['exclusiveMinimum'])}" if "exclusiveMinimum" in schema
        else f">= {_number(schema['minimum'])}" if "minimum" in schema else ""
    )  # fmt: skip
    high = f"<= {_number(schema['maximum'])}" if "maximum" in schema else ""
    return "".join(f", {part}" for part in (low, high) if part)


def type_of(schema: Mapping[str, Any] | bool) -> tuple[str, str | None]:
    """The type of a key's JSON Schema in words, and the section definition it names (if any)."""
    if not isinstance(schema, Mapping):  # `true`: anything goes
        return "any", None
    if "$ref" in schema:
        name = _definition(schema["$ref"])
        return ("${VAR}", None) if name == ENV_REFERENCE else ("section", name)
    if "anyOf" in schema:
        kinds = [type_of(option) for option in schema["anyOf"] if option.get("type") != "null"]
        words = [text for text, _ in kinds if text != "${VAR}"]
        text = " or ".join(words) + ("; or ${VAR}" if len(words) < len(kinds) else "")
        return text, next((section for _, section in kinds if section), None)
    if "enum" in schema:
        return "one of " + ", ".join(map(str, schema["enum"])), None
    kind = schema.get("type")
    if kind == "array":
        items, section = type_of(schema.get("items", {}))
        least = " (at least one)" if schema.get("minItems") else ""
        return f"list of {'sections' if section else items}{least}", section
    if kind == "object":
        values, section = type_of(schema.get("additionalProperties", {}))
        return f"mapping of {'sections' if section else values} by name", section
    if kind in ("integer", "number"):
        return f"{kind}{_bounds(schema)}", None
    if kind == "string" and schema.get("minLength"):
        return "non-empty string", None
    return str(kind or "any"), None


def _default(schema: Mapping[str, Any], name: str, *, code_defaults: Mapping[str, object]) -> str:
    """The key's default as JSON: the schema's, else the one `code_defaults` holds for it ("" when none)."""
    value = schema.get("default")
    if value is None:
        value = code_defaults.get(name)
    if value is None:
        return ""
    return json.dumps(list(value) if isinstance(value, tuple) else value)


def _is_portkey_spelling(name: str, properties: Mapping[str, Any]) -> bool:
    camel = _CAMEL_PART.sub(lambda lower: lower.group(1).upper(), name)
    return camel != name and camel in properties


def _keys(
    definition: Mapping[str, Any], definitions: Mapping[str, Any], *, code_defaults: Mapping[str, object]
) -> Iterator[Key]:
    """The keys of a section; one that opens a section and says nothing itself is described by it."""
    properties: Mapping[str, Any] = definition.get("properties", {})
    required = set(definition.get("required", ()))
    for name, schema in properties.items():
        if _is_portkey_spelling(name, properties):
            continue
        kind, section = type_of(schema)
        default = "required" if name in required else _default(schema, name, code_defaults=code_defaults)
        described = schema.get("description") or (definitions[section].get("description", "") if section else "")
        yield Key(name, kind, default=default, description=described, section=section)


def _opened_at(path: str, key: Key) -> str:
    """The dotted path of the section `key` opens, below `path`: `[]` for a list's items, `.<name>` for a mapping's."""
    below = f"{path}.{key.name}" if path else key.name
    if key.type.startswith("list of"):
        return f"{below}[]"
    if key.type.startswith("mapping of"):
        return f"{below}.<name>"
    return below


def sections(schema: Mapping[str, Any] | None = None) -> list[Section]:
    """Every section of the config file, each once, in the order met walking down from the top."""
    schema = schema or config_json_schema()
    definitions: Mapping[str, Any] = schema.get("$defs", {})
    found: list[Section] = []
    seen = {ROOT}
    waiting: list[tuple[str, str, Mapping[str, Any]]] = [("", ROOT, schema)]
    while waiting:
        path, name, definition = waiting.pop(0)
        keys = tuple(_keys(definition, definitions, code_defaults=CODE_DEFAULTS.get(path, {})))
        found.append(Section(path, name, description=definition.get("description", ""), keys=keys))
        for key in keys:
            if key.section is not None and key.section not in seen:
                seen.add(key.section)
                waiting.append((_opened_at(path, key), key.section, definitions[key.section]))
    return found


def undescribed(found: list[Section]) -> list[str]:
    """The sections and keys without a description, as dotted paths."""
    missing = [section.path or "(the file)" for section in found if not section.description.strip()]
    missing += [f"{section.path}.{key.name}".lstrip(".") for section in found for key in section.keys if not key.description.strip()]
    return missing


def anchor(found: list[Section], definition: str) -> str:
    """The page anchor of the section that `definition` describes."""
    path = next(section.path for section in found if section.definition == definition)
    return re.sub(r"[^a-z0-9]+", "-", (path or "top").lower()).strip("-")


def _type_cell(found: list[Section], key: Key) -> str:
    """The key's type, its section (or a list or mapping of sections) linked to that section's table."""
    if key.section is None:
        return cell(key.type)
    link = f"(#{anchor(found, key.section)})"
    if key.type == "section":
        return f"[section]{link}"
    return cell(key.type).replace("sections", f"[sections]{link}")


def _default_cell(key: Key) -> str:
    return "required" if key.default == "required" else code(key.default) if key.default else ""


def config_page() -> str:
    """The Markdown of reference/config.md; Undescribed when a section or key has no description."""
    found = sections()
    require_descriptions((name, None) for name in undescribed(found))
    parts = [
        GENERATED,
        "# Configuration reference",
        "Every key of the config file, read from its schema (`gateway schema` prints it as JSON Schema, "
        "for editors). Keys are camelCase; Portkey's snake_case spellings (`api_key`) are taken too. "
        "Where a number, a flag or a choice is expected, a `${VAR}` or `${VAR:-default}` reference may "
        "stand, read from the environment when the file loads. A key of a strategy tree inherits the "
        "value of the node above; where no node sets it, it takes the default shown or named in its meaning.",
    ]
    for section in found:
        title = code(section.path) if section.path else "The top level"
        # The anchor set with attr_list: a heading's own slug drops the dots and brackets of a path.
        parts.append(f"## {title} {{ #{anchor(found, section.definition)} }}\n\n{cell(section.description)}")
        rows = ([code(key.name), _type_cell(found, key), _default_cell(key), cell(key.description)] for key in section.keys)
        parts.append(table(("key", "type", "default", "meaning"), rows))
    return "\n\n".join(parts) + "\n"
