"""A limited key's x-ratelimit-* headers on its answers, the upstream's own then relayed as x-upstream-ratelimit-*.

`add_quota_headers` is called where x-request-id is put on an answer: by the gateway middleware on
an answer its handler returned, and by the relays on a stream they start. The quotas are those of
the request's admission (gateway.server.admissions); a request nothing limits has none.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from multidict import CIMultiDict

from gateway.core.ratelimit_headers import quota_pairs
from gateway.server.aiohttp_internals import Store
from gateway.server.keys import ADMISSION

RATE_LIMIT_PREFIX: Final = "x-ratelimit-"
UPSTREAM_RATE_LIMIT_PREFIX: Final = "x-upstream-ratelimit-"
# Header names seen on answers that are not x-ratelimit-* (Content-Type, x-request-id, ...): an
# answer that has only these (the usual one) is passed over by one C-level set check. Bounded,
# so that names without end cost only the plain loop, never memory.
OTHER_NAMES: set[str] = set()
MOST_OTHER_NAMES: Final = 1024


def add_quota_headers(state: Store, headers: CIMultiDict[str]) -> None:
    """A limited key's x-ratelimit-* on the answer about to be sent with `headers`, the upstream's renamed
    x-upstream-ratelimit-*; nothing when the request whose own dict is `state` was not admitted under a limit.

    Called before an answer's headers go out, as x-request-id is added: not an on_response_prepare
    hook, which aiohttp would await through a signal for every answer.
    """
    admission = state.get(ADMISSION)
    if admission is None or (admission.requests is None and admission.tokens is None):
        return
    for name in rate_limit_names(headers):
        values = headers.getall(name)
        del headers[name]
        for value in values:
            headers.add(UPSTREAM_RATE_LIMIT_PREFIX + name[len(RATE_LIMIT_PREFIX) :], value)
    headers.extend(quota_pairs(admission.requests, admission.tokens))  # none of their names is left: added, not set


def rate_limit_names(names: Iterable[str]) -> list[str]:
    """The x-ratelimit-* names among `names` (any case), each once, in order: the upstream's, relayed.

    Names found not to be such are remembered (OTHER_NAMES, bounded): an answer without any
    (the usual one) is passed over by one set check in C instead of a loop over its headers.
    """
    if OTHER_NAMES.issuperset(names):
        return []
    found: dict[str, None] = {}
    for name in names:
        if name in OTHER_NAMES:
            continue
        if name.lower().startswith(RATE_LIMIT_PREFIX):
            found[name] = None
        elif len(OTHER_NAMES) < MOST_OTHER_NAMES:
            OTHER_NAMES.add(str(name))
    return list(found)
