"""gateway.config.loader builds the closed sets' Enum members from the file's words (the schema keeps its Literals)."""

from __future__ import annotations

from gateway.config.loader import parse_config
from gateway.core.memory.settings import MemorySettings, MemoryType, StoreKind
from gateway.core.settings import BreakerStoreKind
from gateway.core.tree import ResponsesMode, Target

CONFIG = """
memory:
  store: redis
  defaults: {memoryType: round_window}
breakers: {store: local}
routes:
  chat:
    memory: {memoryType: token_window}
    strategy: {mode: fallback}
    responsesApi: translate
    targets:
      - {name: a, provider: openai, apiKey: sk-a}
      - {name: b, provider: openai, apiKey: sk-b, responsesApi: native}
  plain: {provider: mock}
"""


def test_every_closed_setting_is_its_enum_member() -> None:
    config = parse_config(CONFIG)
    assert config.memory.store is StoreKind.REDIS
    assert config.memory.defaults.memory_type is MemoryType.ROUND_WINDOW
    assert config.breakers.store is BreakerStoreKind.LOCAL
    chat, plain = config.routes["chat"], config.routes["plain"]
    assert chat.memory.memory_type is MemoryType.TOKEN_WINDOW and plain.memory.memory_type is MemoryType.ROUND_WINDOW
    first, second = chat.root.children  # type: ignore[union-attr]
    assert isinstance(first, Target) and isinstance(second, Target)
    assert first.responses_api is ResponsesMode.TRANSLATE and second.responses_api is ResponsesMode.NATIVE
    assert plain.root.responses_api is ResponsesMode.NATIVE  # type: ignore[union-attr]


def test_defaults_are_members_too() -> None:
    config = parse_config("routes:\n  plain: {provider: mock}\n")
    assert config.memory.store is StoreKind.SQLITE and config.breakers.store is None
    assert config.memory.defaults.memory_type is MemoryType.MESSAGE_WINDOW
    assert MemorySettings().memory_type is MemoryType.MESSAGE_WINDOW
