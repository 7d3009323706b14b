"""Which outcomes of each target would move a route on from it: the fallback reasons worth a series."""

from __future__ import annotations

from collections.abc import Iterator

from gateway.core.tree import DEFAULT_TRIGGER_CODES, Fallback, LoadBalance, Node, Target
from gateway.observe.trace import CONNECT_ERROR, INVALID_RESPONSE, STREAM_ERROR, TIMEOUT

# Attempt outcomes that are no HTTP status: each may be retried or move the route on.
TRANSPORT_OUTCOMES = (TIMEOUT, CONNECT_ERROR, STREAM_ERROR, INVALID_RESPONSE)


def leaves_with_triggers(node: Node, triggers: frozenset[str] = frozenset()) -> Iterator[tuple[Target, frozenset[str]]]:
    """Every target with the outcomes that would move the walk on from it (fallback reasons).

    A fallback moves on from every child but its last; a loadbalance with onStatusCodes from
    any of its children (to a sibling).
    """
    if isinstance(node, Target):
        yield node, triggers
        return
    moves_on: frozenset[str] = frozenset()
    if isinstance(node, Fallback) or (isinstance(node, LoadBalance) and node.on_status_codes is not None):
        codes = DEFAULT_TRIGGER_CODES if node.on_status_codes is None else node.on_status_codes
        moves_on = frozenset({str(code) for code in codes} | set(TRANSPORT_OUTCOMES))
    last = len(node.children) - 1
    for index, child in enumerate(node.children):
        has_next = (isinstance(node, LoadBalance) and last > 0) or index < last
        yield from leaves_with_triggers(child, triggers | moves_on if has_next else triggers)
