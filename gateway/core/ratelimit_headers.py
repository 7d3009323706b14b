"""OpenAI's rate-limit headers for a limited key's answers: x-ratelimit-* on every answer, retry-after on a 429.

The reset times are written as OpenAI writes them (Go durations: "20ms", "1s", "1.5s", "6m0s"),
and retry-after-ms is the header the OpenAI SDK reads before retry-after.
"""

from __future__ import annotations

import math

from gateway.core.governance import Quota


def quota_headers(requests: Quota | None, tokens: Quota | None) -> dict[str, str]:
    """The x-ratelimit-{limit,remaining,reset}-{requests,tokens} headers of the quotas given (None: left out)."""
    headers: dict[str, str] = {}
    for kind, quota in (("requests", requests), ("tokens", tokens)):
        if quota is not None:
            headers[f"x-ratelimit-limit-{kind}"] = str(quota.limit)
            headers[f"x-ratelimit-remaining-{kind}"] = str(max(0, quota.remaining))
            headers[f"x-ratelimit-reset-{kind}"] = duration_text(quota.reset_seconds)
    return headers


def retry_headers(seconds: float) -> dict[str, str]:
    """retry-after (whole seconds, rounded up, at least 1) and retry-after-ms (rounded up, at least 1)."""
    wait = max(0.0, seconds) if math.isfinite(seconds) else 0.0
    return {
        "retry-after": str(max(1, math.ceil(wait))),
        "retry-after-ms": str(max(1, math.ceil(wait * 1000))),
    }


def duration_text(seconds: float) -> str:
    """`seconds` as a Go duration, to the millisecond: "0s", "20ms", "1s", "1.5s", "6m0s", "1h2m3s"."""
    if not math.isfinite(seconds) or seconds <= 0:
        return "0s"
    millis = round(seconds * 1000)
    if millis == 0:
        return "0s"
    if millis < 1000:
        return f"{millis}ms"
    hours, rest = divmod(millis, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    whole, fraction = divmod(rest, 1000)
    text = f"{whole}.{fraction:03d}".rstrip("0").rstrip(".") + "s"
    if hours:
        return f"{hours}h{minutes}m{text}"
    if minutes:
        return f"{minutes}m{text}"
    return text
