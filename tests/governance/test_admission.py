"""The governor used when nothing is limited: it admits everything and keeps nothing."""

from __future__ import annotations

from gateway.config.loader import parse_config
from gateway.governance.admission import Admission, Unlimited


async def test_unlimited_admits_without_taking_anything() -> None:
    route = parse_config("routes: {chat: {provider: mock}}").routes["chat"]
    governor = Unlimited()
    assert await governor.admit("team-a", route, tokens=10) is None
    assert governor.policy("team-a").routes is None
    governor.settle(Admission(tenant="team-a", route="chat", reserved_tokens=10), tokens=5, cost_usd=0.1)
    assert (await governor.usage("team-a"))["limits"] == {}
    await governor.close()
