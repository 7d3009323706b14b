"""OpenAI's rate-limit headers for a limited key's answers: x-ratelimit-* on every answer, retry-after on a 429.

The reset times are written as OpenAI writes them (Go durations: "20ms", "1s", "1.5s", "6m0s"),
and retry-after-ms is the header the OpenAI SDK reads before retry-after.
"""

from __future__ import annotations

import math
from collections.abc import MutableMapping
from typing import Final

from gateway.core.governance import Quota

REQUESTS_HEADERS: Final = ("x-ratelimit-limit-requests", "x-ratelimit-remaining-requests", "x-ratelimit-reset-requests")
TOKENS_HEADERS: Final = ("x-ratelimit-limit-tokens", "x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens")
HALF_A_MILLISECOND: Final = 0.0005  # what rounds to 0ms


def quota_headers(requests: Quota | None, tokens: Quota | None) -> dict[str, str]:
    """The x-ratelimit-{limit,remaining,reset}-{requests,tokens} headers of the quotas given (None: left out)."""
    headers: dict[str, str] = {}
    put_quotas(headers, requests, tokens)
    return headers


def put_quotas(headers: MutableMapping[str, str], requests: Quota | None, tokens: Quota | None) -> None:
    """Set the x-ratelimit-* headers of the quotas given (None: left out) in `headers`: an answer's, as they are."""
    if requests is not None:
        put_quota(headers, REQUESTS_HEADERS, requests)
    if tokens is not None:
        put_quota(headers, TOKENS_HEADERS, tokens)


def put_quota(headers: MutableMapping[str, str], names: tuple[str, str, str], quota: Quota) -> None:
    """Set the three headers `names` (limit, remaining, reset) of `quota` in `headers`."""
    limit, remaining, reset = names
    headers[limit] = str(quota.limit)
    headers[remaining] = str(quota.remaining) if quota.remaining > 0 else "0"
    headers[reset] = duration_text(quota.reset_seconds)


def retry_headers(seconds: float) -> dict[str, str]:
    """retry-after (whole seconds, rounded up, at least 1) and retry-after-ms (rounded up, at least 1)."""
    wait = max(0.0, seconds) if math.isfinite(seconds) else 0.0
    return {
        "retry-after": str(max(1, math.ceil(wait))),
        "retry-after-ms": str(max(1, math.ceil(wait * 1000))),
    }


def duration_text(seconds: float) -> str:
    """`seconds` as a Go duration, to the millisecond: "0s", "20ms", "1s", "1.5s", "6m0s", "1h2m3s"."""
    if seconds < HALF_A_MILLISECOND:  # nothing to wait, the usual reset of a bucket far from empty
        return "0s"
    if not seconds < math.inf:  # NaN, or never
        return "0s"
    millis = round(seconds * 1000)
    if millis < 1000:
        return f"{millis}ms" if millis else "0s"
    minutes, rest = divmod(millis, 60_000)
    whole, fraction = divmod(rest, 1000)
    text = f"{whole}.{fraction:03d}".rstrip("0") + "s" if fraction else f"{whole}s"
    if not minutes:
        return text
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes}m{text}" if hours else f"{minutes}m{text}"
