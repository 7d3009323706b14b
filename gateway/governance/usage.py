"""What GET /v1/gateway/usage shows a key: each of its limits and what is left of it."""

from __future__ import annotations

from typing import Any

from gateway.core.governance import Quota, RateLimits
from gateway.core.periods import Span


def usage_report(
    tenant: str,
    limits: RateLimits,
    *,
    quotas: tuple[Quota | None, Quota | None],
    in_use: int,
    spent_usd: float,
    span: Span | None,
) -> dict[str, Any]:
    """`tenant`'s gateway.usage object: its requests, tokens, concurrency and budget, those it is limited by."""
    shown: dict[str, Any] = {}
    for name, quota in zip(("requests", "tokens"), quotas, strict=True):
        if quota is not None:
            shown[name] = {"limit": quota.limit, "remaining": max(0, quota.remaining),
                           "reset_seconds": round(quota.reset_seconds, 3)}
    if limits.concurrent_requests is not None:
        shown["concurrency"] = {"limit": limits.concurrent_requests, "in_use": in_use}
    budget = limits.budget
    if budget is not None:
        ends = span.ends_at if span is not None else None
        shown["budget"] = {
            "usd": budget.usd,
            "period": budget.period.value,
            "spent_usd": round(spent_usd, 6),
            "remaining_usd": round(max(0.0, budget.usd - spent_usd), 6),
            "resets_at": None if ends is None else int(ends),
        }
    return {"object": "gateway.usage", "key": tenant, "limits": shown}
