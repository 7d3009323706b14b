"""gateway.memory.redis_faults: a client's failure is StoreUnavailable without the connection's passwords."""

from __future__ import annotations

import pytest
import redis.exceptions

from gateway.core.stores import RedisConnection, SentinelSettings
from gateway.memory.redis_faults import Unavailable
from gateway.memory.store import LockLost, StoreUnavailable

CONNECTION = RedisConnection(
    url="redis://:url-pw-1@127.0.0.1:1/0",
    sentinel=SentinelSettings(master_name="m", nodes=(("127.0.0.1", 2),), password="primary-pw-2"),
)


@pytest.mark.parametrize(
    "failure",
    [redis.exceptions.ConnectionError("url-pw-1 primary-pw-2 at 127.0.0.1:1"), TypeError("url-pw-1"), OSError("refused")],
)
def test_any_failure_is_the_store_unavailable_without_a_password(failure: Exception) -> None:
    with pytest.raises(StoreUnavailable) as raised, Unavailable(CONNECTION):
        raise failure
    assert "pw" not in str(raised.value) and str(raised.value).startswith("redis store: ")
    assert raised.value.__cause__ is failure  # the store looks at its cause (a LOCKLOST reply)


def test_what_is_already_the_stores_passes_as_it_is() -> None:
    unavailable = StoreUnavailable("redis store: down")
    for passing in (unavailable, LockLost("lost")):
        with pytest.raises(type(passing)) as raised, Unavailable(CONNECTION):
            raise passing
        assert raised.value is passing


def test_one_is_entered_again_and_again() -> None:
    unavailable = Unavailable(CONNECTION)
    for _ in range(2):
        with unavailable:
            pass
        with pytest.raises(StoreUnavailable), unavailable:
            raise OSError("again")
