"""What a restore did: three outcomes, and both transfers are TransferStores."""

from __future__ import annotations

from gateway.memory.transfer_redis import RedisTransfer
from gateway.memory.transfer_sqlite import SQLiteTransfer
from gateway.memory.transfer_store import Restored, TransferStore


def test_a_restore_writes_replaces_or_skips() -> None:
    assert [outcome.value for outcome in Restored] == ["written", "replaced", "skipped"]


def test_both_stores_move_conversations_through_the_same_interface() -> None:
    stores: list[type[TransferStore]] = [SQLiteTransfer, RedisTransfer]  # mypy checks each against the protocol
    for store in stores:
        assert {"scan", "export", "restore", "close"} <= set(vars(store))
