"""Memory settings as the operator configures them (per gateway and per route)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

MEMORY_TYPES: Final = ("message_window", "token_window", "round_window")


@dataclass(frozen=True, slots=True)
class MemorySettings:
    """Window sizes for one request; also used for the operator's upper limits."""

    memory_type: str = "message_window"
    max_messages: int = 20
    max_tokens: int = 4000
    max_rounds: int = 3
    max_chars: int = 10000


@dataclass(frozen=True, slots=True)
class MemoryConfig:
    store: str = "sqlite"
    path: str = "./data/memory.db"
    # The path as logs and errors show it: values from the environment as their ${VAR} ("" : the path itself)
    shown_path: str = ""
    url: str = field(default="redis://127.0.0.1:6379/0", repr=False)  # its password must never reach a log
    ttl_seconds: float = 30 * 24 * 3600.0
    max_stored_messages: int = 1000
    lock_timeout_seconds: float = 120.0
    defaults: MemorySettings = MemorySettings()
    limits: MemorySettings = MemorySettings(max_messages=200, max_tokens=128000, max_rounds=50, max_chars=400000)
