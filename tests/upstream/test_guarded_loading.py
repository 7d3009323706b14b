"""gateway.upstream.guarded.guarded_providers: a configuration whose providers need litellm is served once it has loaded, off the loop.

At start-up the gateway listens once it has; at a reload the configuration before serves meanwhile.
"""

from __future__ import annotations

import asyncio
import threading

import aiohttp
import pytest

from gateway.config.loader import parse_config
from gateway.upstream import guarded
from gateway.upstream.guarded import ProvidersNotLoaded, guarded_providers
from gateway.upstream.providers import registry
from gateway.upstream.providers.deferred import Load

ROUTES = """
routes:
  fast: {provider: deepseek, baseUrl: "http://127.0.0.1:9/v1", apiKey: k}
"""


class HeldWork:
    """A load's work that ends once `go` is set, failing when told to; `thread` is where it ran."""

    def __init__(self, *, fails: bool = False) -> None:
        self.started = threading.Event()
        self.go = threading.Event()
        self.fails = fails
        self.thread: int | None = None

    def __call__(self) -> str:
        self.thread = threading.get_ident()
        self.started.set()
        assert self.go.wait(60), "the test never let the load end"
        if self.fails:
            raise ImportError("litellm is broken")
        return "loaded"


def litellm_loaded_by(monkeypatch: pytest.MonkeyPatch, work: HeldWork, *, warm_up: HeldWork | None = None) -> None:
    """litellm's import is `work`; each kind's warm-up is `warm_up`, else nothing (warm-ups have a test of their own)."""
    monkeypatch.setattr(registry, "LITELLM", Load(work, name="litellm"))
    monkeypatch.setattr(registry, "_WARM_UPS", {})
    monkeypatch.setattr(registry, "_warm_up", lambda kind: warm_up() if warm_up is not None else None)


async def serve(providers: dict[str, object], served: asyncio.Event, done: asyncio.Event) -> None:
    config = parse_config(ROUTES)
    async with guarded_providers(config, providers, client_timeout=aiohttp.ClientTimeout()):  # type: ignore[arg-type]
        served.set()
        await done.wait()


async def served_once_done(work: HeldWork) -> None:
    """A configuration naming a litellm kind is not served while `work` runs (on a thread of its own), then is."""
    served, done = asyncio.Event(), asyncio.Event()
    serving = asyncio.create_task(serve({"deepseek": object()}, served, done))
    assert await asyncio.to_thread(work.started.wait, 60)  # answered through the loop: it turns while the work runs
    assert work.thread != threading.get_ident()
    assert not served.is_set()
    work.go.set()
    await served.wait()
    done.set()
    await serving


async def test_a_configuration_naming_a_litellm_kind_is_served_once_litellm_has_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    work = HeldWork()
    litellm_loaded_by(monkeypatch, work)
    await served_once_done(work)


async def test_a_configuration_whose_load_fails_is_not_served(monkeypatch: pytest.MonkeyPatch) -> None:
    work = HeldWork(fails=True)
    work.go.set()
    litellm_loaded_by(monkeypatch, work)
    served, done = asyncio.Event(), asyncio.Event()
    with pytest.raises(ProvidersNotLoaded, match=r"litellm could not load \(ImportError: litellm is broken\)"):
        await serve({"deepseek": object()}, served, done)
    assert not served.is_set()


async def test_a_configuration_whose_load_hangs_is_not_served_and_the_next_waits_for_the_same_load(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At start-up the gateway exits saying so; at a reload the configuration before serves on, and the next
    SIGHUP's configuration is served once the same load is done."""
    work = HeldWork()
    litellm_loaded_by(monkeypatch, work)
    monkeypatch.setattr(guarded, "LOAD_WAIT_SECONDS", 0.2)
    served, done = asyncio.Event(), asyncio.Event()
    with pytest.raises(ProvidersNotLoaded, match=r"litellm did not load within 0\.2 s"):
        await serve({"deepseek": object()}, served, done)
    assert not served.is_set() and work.started.is_set()
    work.go.set()
    done.set()
    await serve({"deepseek": object()}, served, done)  # the same load, done: no second import
    assert served.is_set()


def test_only_kinds_served_by_litellm_alone_wait_for_it() -> None:
    """anthropic answers /v1/messages without it: its chat calls wait for it instead (tests/upstream/test_dispatch_loading.py)."""
    assert registry.loads(["openai", "mock", "anthropic"]) == []
    assert registry.loads(["openai", "bedrock"]) == [registry.LITELLM, registry.warm_up_of("bedrock")]


async def test_a_configuration_naming_a_litellm_kind_is_served_once_the_kind_is_warmed_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """What litellm makes at a kind's first call is made first (registry.warm_up_of), on a thread of its own."""
    work, imported = HeldWork(), HeldWork()
    imported.go.set()
    litellm_loaded_by(monkeypatch, imported, warm_up=work)
    await served_once_done(work)
