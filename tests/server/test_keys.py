"""gateway.server.keys: what handlers reach through the application; InFlight, the count a reload drains."""

from __future__ import annotations

import asyncio

from gateway.server.keys import InFlight


async def test_inflight_drained_waits_for_the_last_request() -> None:
    inflight = InFlight()
    await inflight.drained()  # none under way: at once
    inflight.count += 2
    drained = asyncio.create_task(inflight.drained())
    inflight.ended()
    await asyncio.sleep(0)  # one turn of the loop: the waiter has run, and waits on
    assert not drained.done()
    inflight.ended()
    await asyncio.wait_for(drained, 10)
