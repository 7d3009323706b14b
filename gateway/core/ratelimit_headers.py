"""OpenAI's rate-limit headers for a limited key's answers: x-ratelimit-* on every answer, retry-after on a 429.

The reset times are written as OpenAI writes them (Go durations: "20ms", "1s", "1.5s", "6m0s"),
and retry-after-ms is the header the OpenAI SDK reads before retry-after.
"""

from __future__ import annotations

import math
from typing import Final

from gateway.core.governance import Quota

REQUESTS_HEADERS: Final = ("x-ratelimit-limit-requests", "x-ratelimit-remaining-requests", "x-ratelimit-reset-requests")
TOKENS_HEADERS: Final = ("x-ratelimit-limit-tokens", "x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens")
HALF_A_MILLISECOND: Final = 0.0005  # what rounds to 0ms
# The headers of the quotas written lately. A key far from its limits shows the same quotas
# request after request (the same Quota object: Bucket.quota), whose headers are then neither formatted again nor added
# one by one. Bounded: cleared when full, as it fills fast for a key near its limits.
WRITTEN: dict[tuple[Quota | None, Quota | None], tuple[tuple[str, str], ...]] = {}
MOST_WRITTEN: Final = 1024


def quota_headers(requests: Quota | None, tokens: Quota | None) -> dict[str, str]:
    """The x-ratelimit-{limit,remaining,reset}-{requests,tokens} headers of the quotas given (None: left out)."""
    return dict(quota_pairs(requests, tokens))


def quota_pairs(requests: Quota | None, tokens: Quota | None) -> tuple[tuple[str, str], ...]:
    """quota_headers as (name, value) pairs, kept for the quotas written lately (WRITTEN): one call adds them all."""
    shown = (requests, tokens)
    pairs = WRITTEN.get(shown)
    if pairs is None:
        if len(WRITTEN) >= MOST_WRITTEN:
            WRITTEN.clear()
        pairs = WRITTEN[shown] = written_pairs(requests, tokens)
    return pairs


def written_pairs(requests: Quota | None, tokens: Quota | None) -> tuple[tuple[str, str], ...]:
    """The headers of the quotas given (None: left out), written anew."""
    pairs: list[tuple[str, str]] = []
    for names, quota in ((REQUESTS_HEADERS, requests), (TOKENS_HEADERS, tokens)):
        if quota is not None:
            limit, remaining, reset = names
            pairs.append((limit, str(quota.limit)))
            pairs.append((remaining, str(quota.remaining) if quota.remaining > 0 else "0"))
            pairs.append((reset, duration_text(quota.reset_seconds)))
    return tuple(pairs)


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
