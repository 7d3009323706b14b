"""The 429s a governor answers with, as OpenAI's: the code and type of each limit, retry-after and x-ratelimit-*.

A budget spent is insufficient_quota (type insufficient_quota), retry-after the time left in its
period (none for a total budget: waiting will not help); a rate limit is rate_limit_exceeded, of
type "requests" (requests per minute, concurrent requests) or "tokens", retry-after when the
bucket would let the request through. Every 429 carries the x-ratelimit-* headers as they
stood (a refused request takes nothing): the key's own quotas when the key refused it; when the
route did, its quota for the limit that refused, and for the other the key's, else the route's
(route_refusal_quotas), as an admitted answer shows them.
"""

from __future__ import annotations

from typing import Final

from gateway.core.errors import RateLimitedError
from gateway.core.governance import Budget, LimitKind, Quota
from gateway.core.periods import Span
from gateway.core.ratelimit_headers import duration_text, quota_headers, retry_headers

CONCURRENCY_RETRY_SECONDS: Final = 1.0  # a slot frees when a request ends: no clock says when


def rate_limited(
    kind: LimitKind, *, subject: str, limit: int, wait_seconds: float, quotas: tuple[Quota | None, Quota | None]
) -> RateLimitedError:
    """The 429 of `kind` (requests, tokens or concurrency) of `subject` ("key 'a'", "route 'r'") at `limit`.

    `quotas`: the key's requests and tokens quotas, for the x-ratelimit-* headers.
    """
    match kind:
        case LimitKind.CONCURRENCY:
            wait_seconds = CONCURRENCY_RETRY_SECONDS
            message = f"Too many concurrent requests on {subject}: limit {limit}. Please try again when one ends."
            error_type = "requests"
        case LimitKind.TOKENS:
            message = (f"Rate limit reached for tokens per minute on {subject}: limit {limit}. "
                       f"Please try again in {duration_text(wait_seconds)}.")
            error_type = "tokens"
        case _:
            message = (f"Rate limit reached for requests per minute on {subject}: limit {limit}. "
                       f"Please try again in {duration_text(wait_seconds)}.")
            error_type = "requests"
    headers = {**retry_headers(wait_seconds), **quota_headers(*quotas)}
    return RateLimitedError(message, code="rate_limit_exceeded", type=error_type, headers=headers)


def route_refusal_quotas(
    kind: LimitKind, *, key: tuple[Quota | None, Quota | None], route: tuple[Quota | None, Quota | None]
) -> tuple[Quota | None, Quota | None]:
    """The quotas of a 429 the route's `kind` limit refused: the route's for `kind`, else the key's (`key`), else the route's.

    A key's own quota would say there is room where the route has none; a key without limits
    of its own would show none at all.
    """
    requests = route[0] if kind is LimitKind.REQUESTS else key[0] or route[0]
    tokens = route[1] if kind is LimitKind.TOKENS else key[1] or route[1]
    return requests, tokens


def budget_spent(
    tenant: str, budget: Budget, *, span: Span, now: float, quotas: tuple[Quota | None, Quota | None]
) -> RateLimitedError:
    """The 429 insufficient_quota of `tenant`'s `budget`, spent for the period `span` (`now`: epoch seconds)."""
    headers = quota_headers(*quotas)
    if span.ends_at is None:
        when = "It does not renew."
    else:
        headers.update(retry_headers(span.ends_at - now))
        when = f"It renews in {duration_text(span.ends_at - now)}."
    message = (f"The key '{tenant}' has spent its budget of ${budget.usd:g} "
               f"for the {budget.period.value if span.ends_at is not None else 'whole time'}. {when}")
    return RateLimitedError(message, code="insufficient_quota", type="insufficient_quota", headers=headers)
