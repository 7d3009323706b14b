"""gateway.core.stores: a Redis connection's settings keep their passwords out of reprs and name them for masking."""

from __future__ import annotations

from gateway.core.stores import RedisConnection, SentinelSettings


def test_passwords_stay_out_of_the_repr_and_are_named_for_masking() -> None:
    sentinel = SentinelSettings(master_name="m", nodes=(("s", 1),), password="pw-primary", sentinel_password="pw-watch")
    connection = RedisConnection(url="redis://:pw-url@h:1/0", sentinel=sentinel)
    assert "pw-" not in repr(connection)
    assert connection.secrets == ("pw-primary", "pw-watch")
    assert RedisConnection(url="redis://:pw-url@h:1/0").secrets == ()  # the URL's own is masked from the URL
