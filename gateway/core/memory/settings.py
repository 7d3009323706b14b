"""Memory settings as the operator configures them (per gateway and per route)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from gateway.core.stores import RedisConnection, SentinelSettings


class MemoryType(StrEnum):
    """How a request's window of its conversation is cut: by messages, by tokens or by rounds.

    A summary window is a token window that keeps a summary of what it evicts (see core.memory.summary).
    """

    MESSAGE_WINDOW = "message_window"
    TOKEN_WINDOW = "token_window"
    ROUND_WINDOW = "round_window"
    SUMMARY_WINDOW = "summary_window"


class StoreKind(StrEnum):
    """Where conversations are kept: a SQLite file, this process's memory, or Redis."""

    SQLITE = "sqlite"
    MEMORY = "memory"
    REDIS = "redis"


MEMORY_TYPES: Final = tuple(MemoryType)

# The windows by their names alone, as every memory turn reads them: a module's name is looked
# up in a fraction of the time an Enum class's attribute takes (on 3.11).
TOKEN_WINDOW: Final = MemoryType.TOKEN_WINDOW
ROUND_WINDOW: Final = MemoryType.ROUND_WINDOW
SUMMARY_WINDOW: Final = MemoryType.SUMMARY_WINDOW
TOKEN_WINDOWS: Final = (TOKEN_WINDOW, SUMMARY_WINDOW)  # the windows that keep the newest messages by their tokens


@dataclass(frozen=True, slots=True)
class MemorySettings:
    """Window sizes for one request; also used for the operator's upper limits."""

    memory_type: MemoryType = MemoryType.MESSAGE_WINDOW
    max_messages: int = 20
    max_tokens: int = 4000
    max_rounds: int = 3
    max_chars: int = 10000
    # A summary window's: the route that writes the summary (None: none is made), and its longest answer
    summary_route: str | None = None
    summary_max_tokens: int = 512


@dataclass(frozen=True, slots=True)
class MemoryConfig:
    store: StoreKind = StoreKind.SQLITE
    path: str = "./data/memory.db"
    # The path as logs and errors show it: values from the environment as their ${VAR} ("" : the path itself)
    shown_path: str = ""
    url: str = field(default="redis://127.0.0.1:6379/0", repr=False)  # its password must never reach a log
    cluster: bool = False  # url is any node of a Redis Cluster
    sentinel: SentinelSettings | None = None  # the primary Sentinel names, instead of url
    # Replicas that confirm each appended turn (Redis WAIT) before it is acknowledged, and how long they may take
    wait_replicas: int = 0
    wait_timeout_seconds: float = 1.0
    ttl_seconds: float = 30 * 24 * 3600.0
    max_stored_messages: int = 1000
    lock_timeout_seconds: float = 120.0
    defaults: MemorySettings = MemorySettings()
    limits: MemorySettings = MemorySettings(max_messages=200, max_tokens=128000, max_rounds=50, max_chars=400000)

    @property
    def redis(self) -> RedisConnection:
        """The Redis a redis store connects to."""
        return RedisConnection(url=self.url, cluster=self.cluster, sentinel=self.sentinel)
