"""The snapshot of stored keys a process starts with: none."""

from __future__ import annotations

from gateway.governance.stored_keys import StoredKey, StoredKeys


def test_a_process_starts_knowing_no_stored_key() -> None:
    known = StoredKeys()
    assert not known.by_digest and not known.by_name and known.generation == 0


def test_a_stored_key_never_shows_its_digest() -> None:
    assert "sha256" not in repr(StoredKey(name="team-b", sha256=b"\x01" * 32))
