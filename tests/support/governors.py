"""A governor that records what the server asks of it: the request path's side of governance, tested apart from the limits.

`Recorder` admits every request with fixed quotas (or refuses with the error it is given) and
keeps each admission and settlement; the `recorder` fixture puts one in the gateway apps a test starts
(gateway.server.app builds its governor through `open_governor`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from gateway.core.errors import GatewayError
from gateway.core.governance import KeyPolicy, Quota
from gateway.core.tree import Route
from gateway.governance.admission import Admission, Governor
from gateway.server import app as app_module

REQUESTS = Quota(limit=60, remaining=59, reset_seconds=1.0)
TOKENS = Quota(limit=1000, remaining=900, reset_seconds=6.0)


@dataclass(frozen=True, slots=True)
class Settled:
    """One settlement: the admission and what it was told."""

    admission: Admission
    tokens: int | None
    cost_usd: float


@dataclass
class Recorder:
    """A Governor admitting with `requests`/`tokens` quotas, or raising `refusal`; records every call."""

    requests: Quota | None = REQUESTS
    tokens: Quota | None = TOKENS
    refusal: GatewayError | None = None
    admitted: list[Admission] = field(default_factory=list)
    asked: list[tuple[str, str, int]] = field(default_factory=list)  # (tenant, route, tokens) of every admit
    settled: list[Settled] = field(default_factory=list)
    closed: int = 0

    def policy(self, tenant: str) -> KeyPolicy:
        return KeyPolicy(name=tenant)

    async def admit(self, tenant: str, route: Route, *, tokens: int) -> Admission | None:
        self.asked.append((tenant, route.name, tokens))
        if self.refusal is not None:
            raise self.refusal
        admission = Admission(tenant, route.name, tokens, requests=self.requests, tokens=self.tokens)
        self.admitted.append(admission)
        return admission

    def settle(self, admission: Admission, *, tokens: int | None, cost_usd: float) -> None:
        self.settled.append(Settled(admission, tokens, cost_usd))

    async def usage(self, tenant: str) -> dict[str, Any]:
        return {"object": "gateway.usage", "key": tenant, "limits": {}}

    async def close(self) -> None:
        self.closed += 1


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Iterator[Recorder]:
    """A Recorder that every gateway app the test builds takes as its governor."""
    recorder = Recorder()

    def open_governor(*args: Any, **kwargs: Any) -> Governor:
        return recorder

    monkeypatch.setattr(app_module, "open_governor", open_governor)
    yield recorder
