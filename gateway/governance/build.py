"""The governor a configuration needs: none at all, limits in this process, or limits shared through Redis."""

from __future__ import annotations

from gateway.core.governance import LimitStoreKind
from gateway.core.settings import Config, limit_store, limits_redis
from gateway.governance.admission import GovernanceListener, Governor, Unlimited
from gateway.governance.local import LocalGovernor
from gateway.governance.policies import Policies, limits_anything
from gateway.governance.stored_keys import StoredKeys


def open_governor(
    config: Config,
    *,
    stored: StoredKeys | None = None,
    listener: GovernanceListener | None = None,
    previous: Governor | None = None,
) -> Governor:
    """The governor of `config`; `previous` is the one a reload replaces (a local one's counts carry over).

    Unlimited when nothing in the config limits or restricts a key or a route and no admin key
    can issue keys that would: it makes no store call and keeps nothing.
    """
    if not limits_anything(config) and not config.admin_keys:
        return Unlimited()
    policies = Policies(config, stored=stored)
    if limit_store(config) is LimitStoreKind.LOCAL:
        ledger = previous.ledger if isinstance(previous, LocalGovernor) else None
        return LocalGovernor(policies, listener=listener, ledger=ledger)
    # imported here for start-up cost: redis-py loads only for limits counted in Redis
    from gateway.governance.redis import RedisGovernor

    if not isinstance(previous, RedisGovernor):
        return RedisGovernor(policies, limits_redis(config), listener=listener)
    # the same process: its slots stay alive, under its id, renewed by the successor; whichever of the two closes
    # last (the predecessor once the reload is committed, the successor when the reload failed) gives them back
    governor = RedisGovernor(
        policies, limits_redis(config), listener=listener, process_id=previous.process_id,
        ledger=previous.fallback.ledger, holding=previous.holding,
    )  # fmt: skip
    if previous.holds_slots:
        governor.keep_alive()
    return governor
