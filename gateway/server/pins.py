"""Which target produced each Responses API response, so that later requests about it go there.

A response lives at the one upstream that produced it: `previous_response_id` continues it
there, and `GET` / `DELETE /v1/responses/{id}` read or remove it there. Every answered id is
recorded in the memory store for the store's TTL, by id, with the tenant it was answered to and
the names of its route and target; a request about it is then pinned to that target alone, and
only the same tenant's requests may refer to it (all tenants call upstreams with the operator's
keys: one key must never continue or read another's response). The record is bookkeeping: an
answer waits for it a second at most, and a store that failed is skipped a few seconds (`bookkeeping`).
"""

from __future__ import annotations

import dataclasses
import logging

import orjson

from gateway.core.settings import Config
from gateway.core.tree import Route, Target, iter_targets
from gateway.memory.store import MemoryStore, StoreUnavailable
from gateway.server import bookkeeping
from gateway.upstream.dispatch import Result
from gateway.upstream.providers.apis import data_of

log = logging.getLogger("gateway")


def _key(response_id: str) -> str:
    return f"response:{response_id}"


class NotYours(Exception):
    """The response id was answered to another tenant."""


async def record(store: MemoryStore, tenant: str, response_id: object, *, route: Route, target: Target) -> None:
    """Remember that `target` of `route` produced `response_id` (a non-string id is no response's).

    A store that fails, is late or is skipped costs only the pin: the answer itself stands (bookkeeping logs it).
    """
    if not isinstance(response_id, str) or not response_id:
        return
    await bookkeeping.of(store).write(_key(response_id), orjson.dumps([tenant, route.name, target.name]).decode())


async def find(store: MemoryStore, config: Config, *, tenant: str, response_id: str) -> tuple[Route, Target] | None:
    """The route and target that produced `response_id` for `tenant`; None when unknown (or gone from the config).

    Raises NotYours when another tenant's answer carried it, StoreUnavailable when the store cannot say
    (at once while bookkeeping skips it).
    """
    value = await bookkeeping.of(store).read(_key(response_id))
    if value is None:
        return None
    try:
        owner, route_name, target_name = orjson.loads(value)
    except (orjson.JSONDecodeError, TypeError, ValueError):
        return None
    if owner != tenant:
        raise NotYours(response_id)
    route = config.routes.get(route_name)
    if route is None:
        return None
    target = next((target for target in iter_targets(route.root) if target.name == target_name), None)
    return None if target is None else (route, target)


async def forget(store: MemoryStore, response_id: str) -> None:
    """Drop the record of `response_id` (the upstream deleted it); a failing store is logged."""
    try:
        await store.delete_value(_key(response_id))
    except StoreUnavailable as exc:
        log.warning("response %s: its record could not be dropped (%s)", response_id, exc)


def pinned(route: Route, target: Target) -> Route:
    """`route` narrowed to `target` alone: no fallback, no load balancing (its own retries stay)."""
    return dataclasses.replace(route, root=target)


def response_id_of(result: Result) -> object:
    """The id of the Responses answer in `result`: its JSON's, or its stream's `response.created`'s."""
    if result.reply is not None:
        data = result.reply.data
        return data.get("id") if isinstance(data, dict) else None
    assert result.first_event is not None
    response = data_of(result.first_event).get("response")
    return response.get("id") if isinstance(response, dict) else None
